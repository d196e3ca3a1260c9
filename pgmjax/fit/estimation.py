"""Estimators: find the potentials whose marginals best explain the measurements.

Each estimator is a small pure ``init`` / ``step`` pair over a NamedTuple
state (optax style), hashed by its hyper-parameters so compiled chunks are
reused. :func:`run` drives one in compiled chunks of iterations: the host
sees the state only between chunks (progress, callback, early stopping).

* :class:`MirrorDescent`: entropic mirror descent over the marginal polytope
  (McKenna, Sheldon & Miklau, ICML 2019, Algorithm 1), with an Armijo line
  search whose accepted trial's marginals become the next iterate's, so an
  accepted step costs one oracle call.
* :class:`DualAveraging`: Nesterov's accelerated dual averaging (ICML 2019,
  Algorithm 2), step sizes from the Lipschitz constant of the loss.
* :class:`LBFGS`: direct optimisation of the potentials through the oracle
  (ICML 2019, Appendix A.3) with optax's L-BFGS and zoom line search.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..compiler import jit, to_device, zeros_like
from .losses import sum_all
from .problem import Problem

tree_map = jax.tree_util.tree_map


def _vdot(a: list, b: list) -> jax.Array:
    """Inner product of two lists of arrays of matching shapes (one measurement group per entry), as one
    reduction (:func:`~pgmjax.fit.losses.sum_all`)."""
    return sum_all([x * y for x, y in zip(a, b)])


def _leaves(tree) -> list:
    return jax.tree_util.tree_leaves(tree)


def _axpy(alpha, x: dict, y: dict) -> dict:
    return {k: alpha * x[k] + y[k] for k in x}


def _centred(theta: dict) -> dict:
    """Each clique's potentials shifted so their largest entry is 0 (the distribution is unchanged).

    In float32 an entry ``t`` of a table carries an absolute error of ``eps |t|``, a relative error of
    ``eps |t|`` in its probability: with small noise scales the gradient steps push all potentials
    far from 0 together, and the likely cells lose the precision the line search needs. Centring
    keeps the likely cells near 0. -inf entries (structural zeros) are left alone.
    """
    out = {}
    for k, t in theta.items():
        top = jnp.max(jnp.where(jnp.isfinite(t), t, -jnp.inf).reshape(_rows(t)), axis=-1)
        top = top.reshape(t.shape[:2] + (1,) * (t.ndim - 2))
        out[k] = t - jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
    return out


def _rows(t: jax.Array) -> tuple[int, ...]:
    """A block ``(levels, slots, *table)`` as ``(levels * slots, cells)``: reductions over one minor axis of
    a 2-D array compile to simpler, faster XLA:CPU kernels than reductions over six trailing axes."""
    return (t.shape[0] * t.shape[1] if t.ndim >= 2 else 1, -1)


def _all_finite(tree) -> jax.Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x.reshape(-1))) for x in jax.tree_util.tree_leaves(tree)]))


# --------------------------------------------------------------------------- mirror descent
class MirrorDescentState(NamedTuple):
    theta: dict
    mu: dict  # the marginals of theta as of the last tidy (refreshed once per compiled chunk, not per step)
    loss: jax.Array
    pred: Any  # what the loss reads of mu (Problem.predict)
    pred_grad: Any  # the loss's gradient with respect to pred; in the marginals' space: Problem.pull_back
    step_size: jax.Array
    iteration: jax.Array
    oracle_calls: jax.Array
    slack: jax.Array  # the Armijo test's rounding allowance (MirrorDescent.slack), refreshed by tidy: once per chunk


@dataclass(frozen=True)
class MirrorDescent:
    """Entropic mirror descent with a backtracking (Armijo) line search.

    ``theta <- theta - eta * grad L(mu)``, ``mu <- M(theta)`` (ICML 2019,
    Algorithm 1). A trial step is accepted when
    ``L(mu') <= L(mu) - armijo * <grad, mu - mu'>``; otherwise ``eta`` is
    halved. After an accepted step ``eta`` grows by ``growth``.

    The loss reads the marginals through linear predictions ``p = Q mu``
    (:meth:`Problem.predict`), so the state keeps ``p`` and ``g = dL/dp``
    instead of full-size gradient tables: ``grad L(mu) = Q^T g`` is formed
    only inside the potentials' update, and ``<grad, mu - mu'> = <g, p - p'>``
    is a sum over the measured cells, not over the junction tree.

    Args:
        armijo: sufficient-decrease fraction.
        growth: step growth after an accepted step.
        max_backtracks: at most this many halvings per iteration.
        rounding: slack of the test for rounding, in units of ``eps * <|g|, |p|>`` (the error the
            marginals' relative precision puts into the loss; equal to ``eps * <|grad L|, mu>`` for
            marginal and counting queries). Without it float32 fits stall short of the
            optimum: the step size collapses once the loss decrease falls below the loss's rounding error.
        carry_marginals: every trial writes its marginals and the state carries the accepted ones, so
            :meth:`tidy` needs no oracle call. The compiled program then holds one copy of the oracle
            instead of two (a quarter less to compile), at the price of one more write of every table
            per trial: :func:`pgmjax.estimate` turns it on for models of at most
            :data:`CARRY_MARGINALS_CELLS` cells, where compilation, not iteration, is what a fit waits for.
    """

    armijo: float = 0.5
    growth: float = 1.25
    max_backtracks: int = 30
    rounding: float = 16.0
    carry_marginals: bool = False

    @staticmethod
    def params(state: MirrorDescentState) -> dict:
        return state.theta

    @staticmethod
    def best_loss(state: MirrorDescentState) -> jax.Array:
        """The loss of :meth:`params`' model (the line search never accepts an increase)."""
        return state.loss

    def init(self, problem: Problem, theta: dict, step_size) -> MirrorDescentState:
        mu = problem.marginals(theta)
        pred = problem.predict(mu)
        loss, pred_grad = jax.value_and_grad(problem.loss_of_predictions)(pred)
        dt = problem.total.dtype
        state = MirrorDescentState(
            theta, mu, loss, pred, pred_grad, jnp.asarray(step_size, dt), jnp.zeros((), jnp.int32),
            jnp.ones((), jnp.int32), jnp.zeros((), dt)
        )
        return state._replace(slack=self.slack(state))

    @staticmethod
    def start(problem: Problem, theta: dict, step_size) -> MirrorDescentState:
        """A state whose next :meth:`step` is :meth:`init`: no oracle call here.

        Its loss is +inf and its gradient 0, so the step's first trial (the potentials themselves) is
        accepted. :func:`run` initialises with one step of its compiled chunk, so a fit compiles no
        separate ``init`` program (the oracle is the bulk of every program). :meth:`started` fixes the
        counters afterwards.
        """
        dt = problem.total.dtype
        zeros = zeros_like(theta)
        # Shapes only (no eager op: a fit compiles no small programs of its own), zeros built on the host.
        pred = tree_map(lambda a: to_device(np.zeros(a.shape, a.dtype)), jax.eval_shape(problem.predict, zeros))
        return MirrorDescentState(
            theta, zeros, to_device(np.inf, dt), pred, pred, to_device(step_size, dt), to_device(-1, np.int32),
            to_device(0, np.int32), to_device(0.0, dt),
        )

    @staticmethod
    def started(state: MirrorDescentState, step_size) -> MirrorDescentState:
        """The state after ``step(start(...))``, as :meth:`init` returns it (iteration 0, the given step)."""
        return state._replace(step_size=to_device(step_size, state.step_size.dtype), iteration=to_device(0, np.int32))

    def slack(self, s: MirrorDescentState) -> jax.Array:
        """The Armijo test's allowance for rounding at state ``s`` (the same for every trial from ``s``).

        Rounding makes the exact test fail at (numerical) convergence; allow that much slack. The loss is
        computed from predictions that carry a relative error of a few eps each, so its own error is about
        eps * <|g|, |p|>, far above eps * |loss| near the optimum of a sharp loss.

        The state carries it (``state.slack``) and :meth:`tidy` refreshes it, so it is computed once per
        compiled chunk, not once per iteration: it is a pass over two arrays the size of the measured cells
        (a tenth of an iteration on the Loans benchmark's four million), and near convergence, the only
        place it decides a test, it changes by little within a chunk.
        """
        eps = jnp.finfo(s.loss.dtype).eps
        return 8 * eps * jnp.abs(s.loss) + self.rounding * eps * _vdot(_leaves(tree_map(jnp.abs, s.pred_grad)),
                                                                       _leaves(tree_map(jnp.abs, s.pred)))

    def trial(self, problem: Problem, s: MirrorDescentState, eta, slack=None):
        """One line-search trial from state ``s`` at step ``eta``, with its Armijo test.

        Args:
            slack: the allowance for rounding (default ``s.slack``, :meth:`slack` as of the last :meth:`tidy`).

        Returns:
            ``(theta, mu, loss, pred, pred_grad, ok)``: the trial's potentials, its marginals (only with
            :attr:`carry_marginals`, else None: a step's state then carries them unchanged and :meth:`tidy`
            refreshes them once per chunk, since writing every table once per trial cost about a fifth of
            a trial on large cliques), loss, predictions and the loss's gradient with respect to them,
            and whether the test accepts it.
        """
        if slack is None:
            slack = s.slack
        # theta has the marginals' shapes: the pull-back needs only those (s.mu is refreshed once per chunk).
        theta = _axpy(-eta, problem.pull_back(s.pred_grad, s.theta), s.theta)
        mu, log_z = problem.marginals_and_log_partition(theta)
        pred = problem.predict(mu)
        loss, pred_grad = jax.value_and_grad(problem.loss_of_predictions)(pred)
        decrease = _vdot(_leaves(s.pred_grad), [a - b for a, b in zip(_leaves(s.pred), _leaves(pred))])
        # A finite log Z certifies the potentials: a NaN or +inf potential, or a clique left with no cell
        # above -inf (a step that overflowed), makes it NaN or +-inf; its marginals are then finite too
        # (products of conditionals in [0, 1] times the total). One scalar instead of two passes over
        # every table per trial.
        ok = jnp.isfinite(loss) & jnp.isfinite(log_z) & (loss <= s.loss - self.armijo * decrease + slack)
        return theta, (mu if self.carry_marginals else None), loss, pred, pred_grad, ok

    def tidy(self, problem: Problem, state: MirrorDescentState) -> MirrorDescentState:
        """``state`` with every clique's potentials shifted so their largest entry is 0 (the model is
        unchanged), its marginals recomputed from them, and the line search's rounding allowance
        (:meth:`slack`) refreshed.

        Keeps the potentials near 0 in float32 (see :func:`_centred`) and makes ``state.mu`` the
        marginals of ``state.theta`` (:meth:`step` leaves them as they were). :func:`run` calls it after
        every compiled chunk: a pass over every table and one oracle call per chunk instead of per
        trial (none with :attr:`carry_marginals`: the state holds them already). Call it between chunks
        when driving :meth:`step` yourself.
        """
        theta = _centred(state.theta)
        slack = self.slack(state)
        if self.carry_marginals:
            return state._replace(theta=theta, slack=slack)
        return state._replace(theta=theta, mu=problem.marginals(theta), slack=slack)

    def step(self, problem: Problem, s: MirrorDescentState) -> MirrorDescentState:
        # One trial site in the program (the oracle is traced once): try 0 uses the current step, each
        # later try halves it, and the last is a zero step (the iterate stays put).
        slack = s.slack

        def cond(c):
            return ~c[6]

        def body(c):
            tries = c[7] + 1
            last = tries >= self.max_backtracks
            eta = jnp.where(tries == 0, s.step_size, jnp.where(last, 0.0, c[5] * 0.5))
            theta, mu, loss, pred, pred_grad, ok = self.trial(problem, s, eta, slack)
            return theta, mu, loss, pred, pred_grad, eta, ok | last, tries

        # The loop runs at least once, so its first values are never read: zeros, not the state's own
        # tables (which the body also reads: XLA would copy every table twice per iteration to carry both).
        zp = jax.tree_util.tree_map(jnp.zeros_like, s.pred)
        zmu = zeros_like(s.theta) if self.carry_marginals else None
        carry = (zeros_like(s.theta), zmu, s.loss, zp, zp, s.step_size, jnp.zeros((), bool), -jnp.ones((), jnp.int32))
        theta, mu, loss, pred, pred_grad, eta, _, backtracks = jax.lax.while_loop(cond, body, carry)
        next_eta = jnp.where(backtracks == 0, eta * self.growth, jnp.where(eta > 0, eta, s.step_size * 0.5))
        # A loss no step can change accepts every step: without a cap the step size overflows to inf.
        next_eta = jnp.minimum(next_eta, jnp.finfo(next_eta.dtype).max * 1e-8)
        return MirrorDescentState(
            theta,
            mu if self.carry_marginals else s.mu,
            loss,
            pred,
            pred_grad,
            next_eta,
            s.iteration + 1,
            s.oracle_calls + 1 + backtracks,
            s.slack,
        )


# --------------------------------------------------------------------------- dual averaging
class DualAveragingState(NamedTuple):
    theta: dict  # potentials of v
    theta0: dict  # centre of the entropy prox-function (the warm start; 0 = uniform)
    w: dict  # averaged marginals (the sequence the convergence rate is about)
    v: dict
    gbar: dict
    best_theta: dict  # potentials of the best v so far: what the run returns
    loss: jax.Array  # loss of best_theta's marginals
    averaged_loss: jax.Array  # loss of w
    iteration: jax.Array
    oracle_calls: jax.Array


@dataclass(frozen=True)
class DualAveraging:
    """Accelerated dual averaging (ICML 2019, Algorithm 2; Xiao 2010; Nesterov 2005).

    With ``c = 2 / (t + 1)``: ``u = (1 - c) w + c v``; ``gbar = (1 - c) gbar +
    c grad L(u)``; ``v = M(-t (t + 1) / (4 L N) * gbar)``; ``w = (1 - c) w + c v``.
    ``L`` is the Lipschitz constant of the loss gradient and ``N`` the total
    (the entropy over counts is ``1/N``-strongly convex). The iterate ``w``
    is a convex combination of marginals with no potentials of its own, so
    the run returns the potentials of the best ``v`` seen (``v = M(theta)``)
    and reports that model's loss; ``averaged_loss`` tracks ``w``, which
    converges faster than ``v``. A warm start moves the
    centre of the entropy term from the uniform model to the warm model:
    ``v = M(theta_0 - t (t + 1) / (4 L N) * gbar)``.
    """

    @staticmethod
    def params(state: DualAveragingState) -> dict:
        return state.best_theta

    @staticmethod
    def best_loss(state: DualAveragingState) -> jax.Array:
        """The loss of :meth:`params`' model."""
        return state.loss

    def init(self, problem: Problem, theta: dict, step_size=None) -> DualAveragingState:
        mu = problem.marginals(theta)
        loss, _ = problem.loss_and_grad(mu)
        zeros = tree_map(jnp.zeros_like, mu)
        return DualAveragingState(
            theta, theta, mu, mu, zeros, theta, loss, loss, jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32)
        )

    def step(self, problem: Problem, s: DualAveragingState) -> DualAveragingState:
        t = (s.iteration + 1).astype(problem.total.dtype)
        c = 2.0 / (t + 1.0)
        u = _axpy(1 - c, s.w, tree_map(lambda v: c * v, s.v))
        _, g = problem.loss_and_grad(u)
        gbar = _axpy(1 - c, s.gbar, tree_map(lambda x: c * x, g))
        scale = t * (t + 1.0) / (4.0 * problem.lipschitz * problem.total)
        theta = tree_map(lambda x, t0: t0 - scale * x, gbar, s.theta0)
        v = problem.marginals(theta)
        loss_v = problem.loss_of(v)
        # A step whose marginals or loss are not finite is skipped (the sequences stay where they were).
        ok = jnp.isfinite(loss_v) & _all_finite(v) & _all_finite(g)
        keep = lambda a, b: jnp.where(ok, a, b)
        theta, v, gbar = tree_map(keep, theta, s.theta), tree_map(keep, v, s.v), tree_map(keep, gbar, s.gbar)
        w = tree_map(keep, _axpy(1 - c, s.w, tree_map(lambda x: c * x, v)), s.w)
        better = ok & (loss_v < s.loss)
        best = tree_map(lambda a, b: jnp.where(better, a, b), theta, s.best_theta)
        return DualAveragingState(
            theta, s.theta0, w, v, gbar, best, jnp.where(better, loss_v, s.loss), problem.loss_of(w),
            s.iteration + 1, s.oracle_calls + 1,
        )


# --------------------------------------------------------------------------- L-BFGS
class LBFGSState(NamedTuple):
    theta0: dict  # starting potentials (may hold -inf: structural zeros stay zeros)
    delta: dict  # what L-BFGS optimises: potentials = theta0 + delta (always finite)
    opt_state: Any
    loss: jax.Array  # loss of the current iterate
    best_theta: dict  # the potentials of the best iterate so far (theta0 + its delta): what the run returns
    best_loss: jax.Array
    iteration: jax.Array
    oracle_calls: jax.Array


@dataclass(frozen=True)
class LBFGS:
    """L-BFGS on the potentials: minimise ``L(M(theta))`` by autodiff through the oracle.

    ICML 2019, Appendix A.3 (direct optimisation through the marginal
    oracle); optax's ``lbfgs`` with its zoom line search (Nocedal & Wright,
    *Numerical Optimization*, Algorithms 7.4 and 3.5-3.6), made safe for
    float32 and structural zeros:

    * it optimises an offset ``delta`` from the starting potentials
      (``theta = theta_0 + delta``), so ``-inf`` potentials of a warm start
      stay fixed instead of putting ``-inf - -inf`` into the curvature pairs;
    * a step whose loss is not finite or is above the current loss (the line
      search can accept one when float32 rounding hides the curvature) is
      rejected and the curvature memory is cleared (a restart along the
      steepest descent direction);
    * the run returns the best iterate seen, and reports its loss.

    Args:
        memory_size: number of curvature pairs kept.
    """

    memory_size: int = 20

    @staticmethod
    def params(state: LBFGSState) -> dict:
        return state.best_theta

    @staticmethod
    def best_loss(state: LBFGSState) -> jax.Array:
        """The loss of :meth:`params`' model."""
        return state.best_loss

    def _opt(self):
        return optax.lbfgs(memory_size=self.memory_size)

    @staticmethod
    def _objective(problem: Problem, theta0: dict):
        return lambda delta: problem.loss_of(problem.marginals(tree_map(jnp.add, theta0, delta)))

    def init(self, problem: Problem, theta: dict, step_size=None) -> LBFGSState:
        delta = tree_map(jnp.zeros_like, theta)
        loss = self._objective(problem, theta)(delta)
        # optax's initial line-search info holds weakly typed scalars, its updates strongly typed ones: the
        # state after a chunk would differ in type from the initial one and the chunk compile a second time.
        opt_state = tree_map(lambda x: jnp.asarray(x, x.dtype), self._opt().init(delta))
        return LBFGSState(
            theta, delta, opt_state, loss, theta, loss, jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32)
        )

    def step(self, problem: Problem, s: LBFGSState) -> LBFGSState:
        f = self._objective(problem, s.theta0)
        opt = self._opt()
        value, grad = optax.value_and_grad_from_state(f)(s.delta, state=s.opt_state)
        updates, opt_state = opt.update(grad, s.opt_state, s.delta, value=value, grad=grad, value_fn=f)
        delta = optax.apply_updates(s.delta, updates)
        loss = optax.tree.get(opt_state, "value")
        evals = jnp.asarray(optax.tree.get(opt_state, "num_linesearch_steps"), jnp.int32)
        finite = jnp.isfinite(loss) & _all_finite(delta)
        slack = 8 * jnp.finfo(s.loss.dtype).eps * jnp.abs(s.loss)
        ok = finite & (loss <= s.loss + slack)
        # Rejected: stay put and forget the curvature pairs (the next step is a fresh, scaled gradient step).
        keep = lambda a, b: jnp.where(ok, a, b)
        delta = tree_map(keep, delta, s.delta)
        opt_state = jax.tree_util.tree_map(keep, opt_state, opt.init(s.delta))
        loss = jnp.where(ok, loss, s.loss)
        better = loss < s.best_loss
        # The best potentials themselves, formed in the chunk: the host reads them without an op of its own.
        best = tree_map(lambda t0, a, b: jnp.where(better, t0 + a, b), s.theta0, delta, s.best_theta)
        return LBFGSState(
            s.theta0, delta, opt_state, loss, best, jnp.minimum(loss, s.best_loss), s.iteration + 1,
            s.oracle_calls + 1 + evals,
        )


METHODS = {"mirror_descent": MirrorDescent, "dual_averaging": DualAveraging, "lbfgs": LBFGS}

#: Mirror descent carries its marginals (:attr:`MirrorDescent.carry_marginals`) in models of at most this many
#: cells in their junction-tree tables. Measured on the 2-core CPU (2026-11-24, alternating processes): carrying
#: them cut the first fit's compile by 0.25 s on Titanic (680k cells), 0.8 s on Stroke (456k) and on a generated
#: 15-attribute problem (707k), for iterations within the noise to 10% slower; in models of millions of cells
#: the write of every table in every trial outweighs the second oracle copy's compile.
CARRY_MARGINALS_CELLS = 2**20


def estimator(method: str, problem: Problem):
    """The estimator :func:`pgmjax.estimate` runs for ``method`` on ``problem`` (default settings, with
    :attr:`MirrorDescent.carry_marginals` on for models of at most :data:`CARRY_MARGINALS_CELLS` cells)."""
    if method == "mirror_descent":
        cells = sum(int(np.prod(shape)) for _, shape in problem.plan.units)
        return MirrorDescent(carry_marginals=cells <= CARRY_MARGINALS_CELLS)
    return METHODS[method]()


# --------------------------------------------------------------------------- driver
@jit(static_argnames=("estimator",), engine=True)
def _init(estimator, problem, theta, step_size):
    return estimator.init(problem, theta, step_size)


@jit(static_argnames=("estimator",), engine=True)
def _chunk(estimator, problem, state, num_steps):
    state = jax.lax.fori_loop(0, num_steps, lambda _, st: estimator.step(problem, st), state)
    return estimator.tidy(problem, state) if hasattr(estimator, "tidy") else state


def _start(estimator, problem, theta, step_size):
    """The initial state: by one step of the compiled chunk where the estimator allows (no program of its own)."""
    if hasattr(estimator, "start"):
        state = _chunk(estimator, problem, estimator.start(problem, theta, step_size), to_device(1, np.int32))
        return estimator.started(state, step_size)
    return _init(estimator, problem, theta, step_size)


def smoothing_schedule(iters: int, chunk: int, smoothing: tuple[float, float], l1: bool):
    """Chunking and Huber widths of a run: ``(chunk, chunks, width)``, ``width(k)`` the width of chunk ``k``.

    With the L1 loss there are at least 20 smoothing stages however the iterations are chunked, the width
    geometric from ``smoothing[0]`` at the first chunk to ``smoothing[1]`` at the last.
    """
    if l1:
        chunk = min(chunk, max(1, iters // 20))
    chunks = max(1, math.ceil(iters / chunk))
    first, last = smoothing

    def width(k):
        return first * (last / first) ** (k / max(chunks - 1, 1))

    return chunk, chunks, width


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
    smoothing: tuple[float, float] = (1.0, 1e-6),
):
    """Run an estimator for ``iters`` steps in compiled chunks.

    Args:
        estimator: a MirrorDescent, DualAveraging or LBFGS instance.
        problem: the :class:`Problem`.
        theta: initial potentials (oracle blocks).
        iters: maximum number of iterations.
        step_size: initial step size (mirror descent).
        chunk: iterations per compiled call; the host sees the state between chunks.
        tol: stop when the loss changes by less than ``tol`` (relative) over a chunk.
        callback: called after each chunk with a dict (iteration, loss,
            oracle_calls, seconds, state); returning True stops the run.
        smoothing: for the L1 loss, the Huber width at the first and the
            last chunk (geometric in between, over at least 20 chunks; Nesterov-style smoothing with
            continuation, so smooth methods and line searches apply). The
            estimator restarts from its current potentials when it changes.

    Returns:
        ``(params, state, history)``: the potentials to report, the final
        state and the list of per-chunk dicts (``loss`` is the exact loss of
        the returned potentials' model).
    """
    start = time.perf_counter()
    l1 = problem.loss == "l1"
    chunk, chunks, width = smoothing_schedule(iters, chunk, smoothing, l1)
    if l1:
        problem = problem.with_smoothing(width(0))
    dt = problem.total.dtype
    state = _start(estimator, problem, theta, to_device(step_size, dt))
    history = []
    done, k = 0, 0
    prev = float(_model_loss_and_marginals(problem, estimator.params(state))[0]) if l1 else float(estimator.best_loss(state))
    if not math.isfinite(prev):
        raise FloatingPointError(
            f"the starting model's loss is {prev}: the starting potentials (warm start) or the measurements "
            "hold values the loss cannot be evaluated at"
        )
    while done < iters:
        n = min(chunk, iters - done)
        state = _chunk(estimator, problem, state, to_device(n, np.int32))
        done, k = done + n, k + 1
        loss = float(_model_loss_and_marginals(problem, estimator.params(state))[0]) if l1 else float(estimator.best_loss(state))
        info = {
            "iteration": done,
            "loss": loss,
            "oracle_calls": int(state.oracle_calls),
            "seconds": time.perf_counter() - start,
            "state": state,
        }
        history.append(info)
        if callback is not None and callback(info):
            break
        if not math.isfinite(loss):  # unreachable by design (non-finite steps are rejected in the loop)
            raise FloatingPointError(f"the loss became {loss} at iteration {done}")
        if tol is not None and abs(prev - loss) <= tol * max(abs(loss), 1e-30) and (not l1 or k >= chunks):
            break
        prev = loss
        if l1 and done < iters:
            problem = problem.with_smoothing(width(k))
            # The smoothed loss's curvature grows as 1 / width: restart the step size at that scale.
            step = step_size * width(k) / width(0)
            calls = state.oracle_calls
            state = _start(estimator, problem, estimator.params(state), to_device(step, dt))
            state = state._replace(oracle_calls=state.oracle_calls + calls)
    return estimator.params(state), state, history


@jit(engine=True)
def _model_loss_and_marginals(problem: Problem, theta: dict) -> tuple[jax.Array, dict]:
    """Exact loss of the model with potentials ``theta``, and its marginals (oracle blocks).

    One program for both: the fitted model keeps the marginals, so a fit does not compile a second one.
    """
    mu = problem.marginals(theta)
    return problem.exact_loss(mu), mu
