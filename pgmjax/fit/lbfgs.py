"""L-BFGS on the potentials, differentiating the loss through the marginal oracle.

McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy",
ICML 2019, Appendix A.3; optax's ``lbfgs`` with its zoom line search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from .problem import Problem
from .tree_math import all_finite, tree_map


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

    Example:
        >>> from pgmjax.fit.batch_problem import make_problem
        >>> from pgmjax.fit.estimation import run
        >>> problem = make_problem(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), [[10.0, 20, 30], [5, 15, 20]])])
        >>> theta, state, history = run(LBFGS(), problem, problem.plan.zeros(), iters=50)
        >>> bool(history[-1]["loss"] < 1e-3)
        True
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
        return LBFGSState(
            s.theta0, delta, opt_state, loss, best, jnp.minimum(loss, s.best_loss), s.iteration + 1,
            s.oracle_calls + 1 + evals,
        )
