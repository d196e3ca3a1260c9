"""L-BFGS on the potentials, differentiating the loss through the marginal oracle.

McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy",
ICML 2019, Appendix A.3; optax's ``lbfgs`` with its zoom line search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..graph.oracle_plan import suits_loop_emitters
from .problem import Problem
from .tree_math import all_finite, tree_map, vdot


class LBFGSState(NamedTuple):
    theta0: dict  # starting potentials (may hold -inf: structural zeros stay zeros)
    delta: dict  # what L-BFGS optimises: potentials = theta0 + delta (always finite)
    opt_state: Any
    loss: jax.Array  # loss of the current iterate
    best_theta: dict  # the potentials of the best iterate so far (theta0 + its delta): what the run returns
    best_loss: jax.Array
    iteration: jax.Array
    oracle_calls: jax.Array
    stuck: jax.Array  # consecutive steps that did not lower the best loss (see LBFGS.patience)


#: A restart counts (:meth:`LBFGS.restart`) when it lowers the best loss by more than this, relative to
#: ``max(|loss|, 1)`` (whitened units: 1e-7 of one noise variance is statistically nothing).
STALL_RTOL = 1e-7


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
    * the run returns the best iterate seen, and reports its loss;
    * after :attr:`patience` steps in a row that do not lower the best loss, it is *stalled*: the
      remaining steps of the compiled chunk do nothing (and count no iteration), and the driver calls
      :meth:`restart`, a Frank-Wolfe step in the marginals' space from the best iterate
      (:func:`frank_wolfe_restart`) to start afresh from. Potentials are a poor space near cells of
      (almost) no mass, whose gradient vanishes with the mass, and L-BFGS stalled there above the optimum.
      The run ends once no such step helps (:func:`pgmjax.estimate` then gives the remaining iterations to
      mirror descent).

    Args:
        memory_size: number of curvature pairs kept.
        patience: steps in a row that do not lower the best loss after which the run counts as stalled
            (a failed line search, or a step the float32 loss cannot tell from the last).

    Example:
        >>> from pgmjax.fit.batch_problem import make_problem
        >>> from pgmjax.fit.estimation import run
        >>> problem = make_problem(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), [[10.0, 20, 30], [5, 15, 20]])])
        >>> theta, state, history = run(LBFGS(), problem, problem.plan.zeros(), iters=50)
        >>> bool(history[-1]["loss"] < 1e-3)
        True
    """

    memory_size: int = 20
    patience: int = 10

    @staticmethod
    def params(state: LBFGSState) -> dict:
        return state.best_theta

    @staticmethod
    def best_loss(state: LBFGSState) -> jax.Array:
        """The loss of :meth:`params`' model."""
        return state.best_loss

    def _opt(self):
        import optax  # here, as in _step: optax takes 0.12 s to import and only L-BFGS uses it

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
        zero = jnp.zeros((), jnp.int32)
        return LBFGSState(theta, delta, opt_state, loss, theta, loss, zero, jnp.ones((), jnp.int32), zero)

    def stalled(self, state: LBFGSState) -> bool:
        """Whether the run is stalled (:attr:`patience` steps without progress): the driver then calls
        :meth:`restart`."""
        return bool(state.stuck >= self.patience)

    def restart(self, problem: Problem, state: LBFGSState) -> tuple[LBFGSState, bool]:
        """A fresh start after a stall (:meth:`stalled`): from a Frank-Wolfe step off the best iterate.

        Returns:
            ``(state, moved)``: the fresh state where the step lowered the loss (curvature memory cleared,
            iteration and oracle-call counts kept), else ``state`` itself and False (the run then stops:
            the best iterate is optimal to first order, or no step can resolve a decrease any more).
        """
        new, moved = _restart(self, problem, state)
        return new, bool(moved)

    def step(self, problem: Problem, s: LBFGSState) -> LBFGSState:
        # A stalled run stays put for the rest of its chunk, at no cost (the host restarts it).
        return jax.lax.cond(s.stuck >= self.patience, lambda s: s, lambda s: self._step(problem, s), s)

    def _step(self, problem: Problem, s: LBFGSState) -> LBFGSState:
        import optax

        f = self._objective(problem, s.theta0)
        opt = self._opt()
        value, grad = optax.value_and_grad_from_state(f)(s.delta, state=s.opt_state)
        updates, opt_state = opt.update(grad, s.opt_state, s.delta, value=value, grad=grad, value_fn=f)
        delta = optax.apply_updates(s.delta, updates)
        loss = optax.tree.get(opt_state, "value")
        evals = jnp.asarray(optax.tree.get(opt_state, "num_linesearch_steps"), jnp.int32)
        finite = jnp.isfinite(loss) & all_finite(delta)
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
        progress = loss < s.best_loss
        return LBFGSState(
            s.theta0, delta, opt_state, loss, best, jnp.minimum(loss, s.best_loss), s.iteration + 1,
            s.oracle_calls + 1 + evals, jnp.where(progress, 0, s.stuck + 1),
        )


def frank_wolfe_restart(problem: Problem, theta: dict) -> tuple[dict, jax.Array, jax.Array]:
    """One Frank-Wolfe step in the marginals' space from the model ``theta``, as potentials to restart from.

    L-BFGS moves the potentials, whose gradient at a cell is proportional to the cell's probability: once
    a step has driven a cell that belongs in the optimum towards zero, nothing brings it back and the fit
    stalls above the optimum (in float32 its line search also stops where the loss's decrease falls below
    the loss's rounding). A Frank-Wolfe step does not depend on the cells' masses. Its direction points at
    the records the loss's gradient ``g`` favours most: the marginals ``s`` of the distribution
    ``exp(-sum_c g_c(x_c) / T)`` (the oracle at a low temperature ``T``, which is near the linear
    minimiser over the marginal polytope; Jaggi, "Revisiting Frank-Wolfe", ICML 2013, Algorithm 1). The step
    ``mu + gamma (s - mu)`` with ``gamma`` minimising the loss's quadratic model along it (exact for L2) is
    consistent, and the junction tree turns consistent clique marginals into potentials in closed form:
    each clique's log conditional given its separator (Koller & Friedman, 2009, Section 10.2; cells of
    probability zero get the float type's smallest normal instead, so the restart can revive them; cells
    held at ``-inf`` stay structural zeros).

    Args:
        problem: the estimation problem.
        theta: the potentials to step from (oracle blocks).

    Returns:
        ``(theta_new, gamma, decrease)``: the new potentials, the step length in [0, 1] and the decrease of
        the loss's quadratic model (0 when no step helps: ``theta`` is then optimal to first order).
    """
    mu = problem.marginals(theta)
    loss, g = problem.loss_and_grad(mu)
    keys = sorted(g)
    scale = jnp.max(jnp.stack([jnp.max(jnp.abs(g[k])) for k in keys]))
    log_cells = sum(float(np.log(n)) for n in problem.plan.domain.shape) + 1.0
    temperature = jnp.maximum(scale, jnp.finfo(scale.dtype).tiny) * 1e-2 / log_cells
    tilted = {k: jnp.where(jnp.isneginf(theta[k]), -jnp.inf, -g[k] / temperature) for k in keys}
    s = problem.marginals(tilted)
    d = {k: s[k] - mu[k] for k in keys}
    slope = vdot([g[k] for k in keys], [d[k] for k in keys])  # <= 0: s minimises <g, .> (near enough)
    curvature = problem.loss_of(s) - loss - slope  # the quadratic model's coefficient of gamma^2
    gamma = jnp.where(curvature > 0, -slope / (2 * jnp.where(curvature > 0, curvature, 1.0)), 1.0)
    gamma = jnp.where(slope < 0, jnp.clip(gamma, 0.0, 1.0), 0.0)
    decrease = jnp.where(slope < 0, -(slope * gamma + curvature * gamma * gamma), 0.0)
    tiny = jnp.finfo(scale.dtype).tiny
    new = {}
    for k in keys:
        m = mu[k] + gamma * d[k]
        nelim = len(_block_class(problem.plan, k).elim_axes)
        axes = tuple(range(m.ndim - nelim, m.ndim))
        rows = jnp.sum(m, axis=axes, keepdims=True)
        cond = m / jnp.where(rows > 0, rows, 1.0)
        new[k] = jnp.where(jnp.isneginf(theta[k]), -jnp.inf, jnp.log(jnp.maximum(cond, tiny)))
    return new, gamma, decrease


@jit(static_argnames=("estimator",), engine=True, loop_emitters=suits_loop_emitters)
def _restart(estimator: LBFGS, problem: Problem, state: LBFGSState) -> tuple[LBFGSState, jax.Array]:
    theta, _, decrease = frank_wolfe_restart(problem, state.best_theta)
    fresh = estimator.init(problem, theta)
    gain = STALL_RTOL * jnp.maximum(jnp.abs(state.best_loss), 1.0)
    moved = (decrease > 0) & (fresh.best_loss < state.best_loss - gain) & jnp.isfinite(fresh.best_loss)
    # Three oracle calls: the marginals at the best iterate, at the low temperature, and the fresh start's.
    fresh = fresh._replace(iteration=state.iteration, oracle_calls=state.oracle_calls + 3)
    return jax.tree_util.tree_map(lambda a, b: jnp.where(moved, a, b), fresh, state), moved


def _block_class(plan, key: str):
    """The clique class of oracle block ``key`` (``"rRRRxXX"``)."""
    return plan.runs[int(key[1:4])].classes[int(key[5:7])]
