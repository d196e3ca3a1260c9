"""Estimators by name, and the driver that runs one in compiled chunks.

Each estimator is a small pure ``init`` / ``step`` pair over a NamedTuple
state (optax style), hashed by its hyper-parameters so compiled chunks are
reused. :func:`run` drives one in compiled chunks of iterations: the host
sees the state only between chunks (progress, callback, early stopping).

* :class:`MirrorDescent` (:mod:`pgmjax.estimation.mirror_descent`): entropic mirror descent over the marginal
  polytope (McKenna, Sheldon & Miklau, ICML 2019, Algorithm 1), with an Armijo line search whose accepted
  trial's marginals become the next iterate's, so an accepted step costs one oracle call.
* :class:`DualAveraging` (:mod:`pgmjax.estimation.dual_averaging`): Nesterov's accelerated dual averaging
  (ICML 2019, Algorithm 2), step sizes from the Lipschitz constant of the loss.
* :class:`LBFGS` (:mod:`pgmjax.estimation.lbfgs`): direct optimisation of the potentials through the oracle
  (ICML 2019, Appendix A.3) with optax's L-BFGS and zoom line search.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ..compiler import jit, to_device
from ..graph.program_choice import emitters_for
from .dual_averaging import DualAveraging, DualAveragingState
from .contract import Estimator, StepInfo
from .inputs import METHODS
from .lbfgs import LBFGS, LBFGSState
from .mirror_descent import MirrorDescent, MirrorDescentState
from .problem import Problem

__all__ = [
    "LBFGS",
    "METHODS",
    "DualAveraging",
    "DualAveragingState",
    "Estimator",
    "LBFGSState",
    "MirrorDescent",
    "MirrorDescentState",
    "Problem",
    "StepInfo",
    "progress_bar",
    "run",
]



# --------------------------------------------------------------------------- driver
@jit(static_argnames=("estimator",), engine=True, emitters=emitters_for)
def _init(estimator, problem, theta, step_size):
    return estimator.init(problem, theta, step_size)


@jit(static_argnames=("estimator",), engine=True, emitters=emitters_for)
def _chunk(estimator, problem, state, info, num_steps):
    return estimator.advance(problem, state, info, num_steps)


def _start(estimator, problem, theta, step_size):
    """The initial state and its info, evaluated: an ``init`` that runs on the host (no program of its own)
    leaves a state at iteration -1, which the compiled chunk evaluates with zero iterations."""
    if estimator.init_on_host:
        state, info = estimator.init(problem, theta, step_size)
        # Python scalars (StepInfo's default ``settled``) as device arrays, as the chunk returns them: the chunk's
        # later calls then match its first in jit's dispatch cache
        info = jax.tree_util.tree_map(lambda x: to_device(x) if isinstance(x, (bool, int, float)) else x, info)
    else:
        state, info = _init(estimator, problem, theta, step_size)
    if np.any(np.asarray(state.iteration) < 0):
        state, info = _chunk(estimator, problem, state, info, to_device(0, np.int32))
    return state, info


def run(
    estimator,
    problem: Problem,
    theta: dict,
    iters: int,
    *,
    step_size=1.0,
    chunk: int = 50,
    tol: float | None = None,
    callback: Callable[[dict], Any] | None = None,
    exact_loss=None,
):
    """Run an estimator for ``iters`` steps in compiled chunks.

    A step whose info is ``stalled`` (:class:`MirrorDescent`, :class:`LBFGS`) ends its chunk, and the run after
    it; a chunk it ended early counts only the iterations it made. ``tol`` ends the run only where the last
    step's info is ``settled`` (the L1 loss's smoothing stages, :mod:`pgmjax.estimation.continuation`, settle in
    the last stage).

    Args:
        estimator: an :class:`~pgmjax.estimation.contract.Estimator` (MirrorDescent, DualAveraging, LBFGS or one's own).
        problem: the :class:`Problem`.
        theta: initial potentials (oracle blocks).
        iters: maximum number of iterations.
        step_size: initial step size (mirror descent).
        chunk: iterations per compiled call; the host sees the state between chunks.
        tol: stop when the loss changes by less than ``tol`` (relative) over a chunk.
        callback: called after each chunk with a dict (iteration, loss,
            oracle_calls, seconds, state, info: the last step's :class:`~pgmjax.StepInfo`); returning True
            stops the run.
        exact_loss: ``exact_loss(problem, params)``, the exact loss of the potentials' model (default: one
            model's; :func:`pgmjax.estimation.batch.run_batch` passes its members').

    A batch (:class:`pgmjax.estimation.batch.Batched` on a stacked problem) runs through the same loop: its losses
    and oracle calls are then ``(B,)`` arrays, it stops early when every member has stalled, and a non-finite
    loss names the members.

    Returns:
        ``(params, state, history)``: the potentials to report, the final
        state and the list of per-chunk dicts (``loss`` is the exact loss of
        the returned potentials' model; the last has ``stalled=True`` when the
        run ended early because the estimator stalled).
    """
    start = time.perf_counter()
    exact_loss = model_loss if exact_loss is None else exact_loss
    dt = problem.total.dtype

    def loss_of(state, info):  # on the host: a float for one model, (B,) for a batch
        # the L1 loss is minimised smoothed (pgmjax.estimation.continuation): the model reports the loss itself
        return _host(exact_loss(problem, state.params) if problem.loss == "l1" else info.loss, np.float64)

    state, info = _start(estimator, problem, theta, to_device(step_size, dt))
    history = []
    done = 0
    prev = loss_of(state, info)
    _check_finite(prev, None)
    made = np.asarray(state.iteration)  # iterations made so far (a batch's: per member)
    while done < iters:
        n = min(chunk, iters - done)
        state, info = _chunk(estimator, problem, state, info, to_device(n, np.int32))
        # a chunk a stall ended early (mirror descent's failed line searches, L-BFGS's steps without progress)
        # counts the iterations made (a batch's: its furthest member's)
        started, made = made, np.asarray(state.iteration)
        done += int(np.max(made - started))
        loss = loss_of(state, info)
        entry = {
            "iteration": done,
            "loss": loss,
            "oracle_calls": _host(state.oracle_calls, np.int64),
            "seconds": time.perf_counter() - start,
            "state": state,
            "info": info,
        }
        history.append(entry)
        if callback is not None and callback(entry):
            break
        _check_finite(loss, done)  # unreachable by design (non-finite steps are rejected in the loop)
        if np.all(np.asarray(info.stalled)):
            entry["stalled"] = True  # read by pgmjax.estimate (L-BFGS hands its remaining iterations on)
            break
        if (tol is not None and np.all(np.asarray(info.settled))
                and np.all(np.abs(prev - loss) <= tol * np.maximum(np.abs(loss), 1e-30))):
            break
        prev = loss
    return state.params, state, history


def progress_bar(callback, iters: int, desc: str):
    """A tqdm progress bar over a run of ``iters`` iterations, advanced by the run's callback.

    Returns:
        ``(callback, close)``: the callback to pass to :func:`run` (it moves the bar, then calls ``callback``)
        and the function that closes the bar.
    """
    from tqdm.auto import tqdm

    bar = tqdm(total=iters, desc=desc, unit="it")

    def advanced(info):
        bar.n = info["iteration"]
        bar.set_postfix(loss=f"{info['loss']:.4g}")
        bar.refresh()
        return callback(info) if callback else None

    return advanced, bar.close


def reported(history: list) -> tuple:
    """What a fitted model reports of its run, from :func:`run`'s history (whose entries lose their device
    ``state`` and ``info`` here): the exact loss of the returned potentials (a float, or ``(B,)`` for a batch)
    and the step size a warm start continues from (None where the estimator has none, and with the L1 loss,
    whose steps are per smoothing stage: :class:`pgmjax.estimation.continuation.Smoothed`). A run of no
    iterations: ``(None, None)``."""
    if not history:
        return None, None
    info = history[-1]["info"]
    for h in history:
        h.pop("state", None)
        h.pop("info", None)
    step = None if info.step_size is None else _host(info.step_size, np.float64)
    return history[-1]["loss"], step


def _host(x, dtype):
    """A device scalar as a Python number, a device vector (a batch's) as a NumPy array."""
    a = np.asarray(x, dtype)
    return a.item() if a.ndim == 0 else a


def _check_finite(loss, iteration) -> None:
    """Raise where a loss (one model's, or a batch's ``(B,)``) is not finite, naming the batch members."""
    bad = np.flatnonzero(~np.isfinite(np.atleast_1d(loss)))
    if not bad.size:
        return
    if np.ndim(loss) == 0:
        if iteration is None:
            raise FloatingPointError(
                f"the starting model's loss is {loss}: the starting potentials (warm start) or the measurements "
                "hold values the loss cannot be evaluated at")
        raise FloatingPointError(f"the loss became {loss} at iteration {iteration}")
    if iteration is None:
        raise FloatingPointError(
            f"the starting model's loss of batch members {bad.tolist()} is not finite: the starting potentials "
            "or the measurements hold values the loss cannot be evaluated at")
    raise FloatingPointError(f"the loss of batch members {bad.tolist()} became {loss[bad[0]]} at iteration {iteration}; "
                             "try float64 or a smaller step size")


@jit(engine=True, emitters=emitters_for)
def model_loss(problem: Problem, theta: dict) -> jax.Array:
    """The exact loss of the model with potentials ``theta`` (with the L1 loss, not its smoothing)."""
    return problem.exact_loss(problem.marginals(theta))
