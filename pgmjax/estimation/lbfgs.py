"""L-BFGS on the measured cliques' tables, differentiating the loss through the marginal oracle.

McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy",
ICML 2019, Appendix A.3; optax's ``lbfgs`` with its zoom line search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .contract import Estimator, StepInfo, Traits
from .mirror_descent import MirrorDescent
from .problem import Problem
from .tree_math import all_finite, tree_map


#: An L-BFGS iteration's cost in mirror-descent iterations of the size-class program, for ``program="auto"``
#: (:attr:`pgmjax.estimation.contract.Traits.oracle_calls`): the loss and its gradient through the oracle (a forward and a reverse pass over the
#: levels) at each of its line search's evaluations. Measured: ``bench/results/engine/size_class_lbfgs_cpu.md``
#: against ``size_class_mirror_descent_beside_lbfgs_cpu.md`` and ``size_class_iteration_fusion_*``.
ORACLE_CALLS = 7.0


class LBFGSState(NamedTuple):
    theta0: dict  # starting potentials (may hold -inf: structural zeros stay zeros)
    delta: Any  # what L-BFGS optimises: potentials = Problem.expand(theta0, Problem.project_rows(delta)) (finite)
    opt_state: Any
    loss: jax.Array  # loss of the current iterate
    best_delta: Any  # the parameters of the best iterate so far
    params: dict  # the best iterate's potentials as of the last tidy: what the run returns
    best_loss: jax.Array
    iteration: jax.Array
    oracle_calls: jax.Array
    stuck: jax.Array  # consecutive steps that did not lower the best loss (see LBFGS.patience)


@dataclass(frozen=True)
class LBFGS(Estimator):
    """L-BFGS on the measured cliques' tables: minimise ``L(M(theta_0 + P^T delta))`` by autodiff through
    the oracle.

    ICML 2019, Appendix A.3 (direct optimisation through the marginal oracle); optax's ``lbfgs`` with its
    zoom line search (Nocedal & Wright, *Numerical Optimization*, Algorithms 7.4 and 3.5-3.6), made safe
    for float32 and structural zeros:

    * it optimises tables ``delta`` over the measured cliques (:meth:`Problem.patterns`' space), from whose
      projection onto the queries' row spaces the potentials are formed (:meth:`Problem.project_rows`,
      :meth:`Problem.expand`): the distribution stays in the exponential family of the measured queries, so
      unmeasured answers are the maximum-entropy ones. Optimising the junction tree's tables directly does
      not keep that: their gradient is weighted by each cell's probability, so the optimum it reaches depends
      on the path (and float32 rounding adds to the drift); nor do the measured tables unprojected where a
      query is rank-deficient (a merging Kronecker factor: the covariance-weighted gradient moves along the
      query's null space);
    * ``-inf`` potentials of a warm start stay fixed in ``theta_0`` instead of putting ``-inf - -inf``
      into the curvature pairs;
    * a step whose loss is not finite or is above the current loss (the line search can accept one when
      float32 rounding hides the curvature) is rejected and the curvature memory is cleared (a restart
      along the steepest descent direction);
    * the run returns the best iterate seen, and reports its loss; it never returns a model worse than
      its start;
    * after :attr:`patience` steps in a row that do not lower the best loss, it is *stalled*: the
      compiled chunk stops there (the rest of its iterations are not run), the run ends, and
      :func:`pgmjax.estimate` gives the remaining iterations to mirror descent from the best iterate. In
      float32 the line search stops where the loss's decrease falls below the loss's rounding, while
      mirror descent's multiplicative steps, with their rounding allowance, keep going. With the L1 loss a
      stall ends the smoothing stage instead, and the run once the last stage stalls (mirror descent then
      runs its own stages, and :func:`pgmjax.estimate` keeps the lower of the two fits).

    When to use it: it earns its keep on smooth, well-conditioned fits (moderate noise, few empty cells),
    where it needs fewer iterations than mirror descent. Where cells of the optimum are (near) empty
    (tiny noise scales, large epsilon, structural zeros) its steps in the tables drive those cells to zero,
    their gradient vanishes with their mass, and it stalls above the optimum; mirror descent then finishes
    from a worse point than its own start (a 3-attribute table with noise 0.01: 4.92 against mirror
    descent's 3.68 after 1,000 iterations). Mirror descent is the default everywhere (every front-end and
    the command line); choose L-BFGS only where it measures better.

    Args:
        memory_size: number of curvature pairs kept.
        patience: steps in a row that do not lower the best loss after which the run counts as stalled
            (a failed line search, or a step the float32 loss cannot tell from the last).

    Example:
        >>> from pgmjax.estimation.batch_problem import make_problem
        >>> from pgmjax.estimation.driver import run
        >>> problem = make_problem(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), [[10.0, 20, 30], [5, 15, 20]])])
        >>> theta, state, history = run(LBFGS(), problem, problem.plan.zeros(), iters=50)
        >>> bool(history[-1]["loss"] < 1e-3)
        True
    """

    memory_size: int = 20
    patience: int = 10

    differentiable = False  # (not a field) its zoom line search decides by comparisons: no derivative through it
    # (not a field) mirror descent finishes a run it stalls in (the class docstring)
    traits = Traits(size_class=True, gradient_through_oracle=True, oracle_calls=ORACLE_CALLS, finish_with=MirrorDescent())

    def info(self, state: LBFGSState) -> StepInfo:
        """The best iterate's loss; stalled after :attr:`patience` steps without progress; no step size."""
        return StepInfo(state.best_loss, state.stuck >= self.patience, None)

    def _opt(self):
        import optax  # here, as in _step: optax is slow to import and only L-BFGS uses it

        return optax.lbfgs(memory_size=self.memory_size)

    @staticmethod
    def _objective(problem: Problem, theta0: dict):
        dt = problem.total.dtype

        def f(delta):
            # optax's line search forms its trials with weakly typed scalars that x64 mode makes float64
            delta = tree_map(lambda d: d.astype(dt), delta)
            return problem.loss_of(problem.marginals(problem.expand(theta0, problem.project_rows(delta))))

        return f

    def init(self, problem: Problem, theta: dict, step_size=None) -> LBFGSState:
        delta = tree_map(jnp.zeros_like, problem.patterns(theta))
        loss = self._objective(problem, theta)(delta)
        # optax's initial line-search info holds weakly typed scalars, its updates strongly typed ones: the
        # state after a chunk would differ in type from the initial one and the chunk compile a second time.
        opt_state = tree_map(lambda x: jnp.asarray(x, x.dtype), self._opt().init(delta))
        zero = jnp.zeros((), jnp.int32)
        state = LBFGSState(theta, delta, opt_state, loss, delta, theta, loss, zero, jnp.ones((), jnp.int32), zero)
        return state, self.info(state)

    def tidy(self, problem: Problem, s: LBFGSState) -> LBFGSState:
        """``s`` with the best iterate's potentials formed (``params``); the driver calls it after every
        compiled chunk (one pass over every table per chunk instead of a select per step)."""
        return s._replace(params=problem.expand(s.theta0, problem.project_rows(s.best_delta)))

    def step(self, problem: Problem, s: LBFGSState) -> tuple[LBFGSState, StepInfo]:
        """One L-BFGS step; the driver's loop stops at a stalled one (the rest of the chunk is not run)."""
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
        best = tree_map(lambda a, b: jnp.where(better, a, b), delta, s.best_delta)
        state = LBFGSState(
            s.theta0, delta, opt_state, loss, best, s.params, jnp.minimum(loss, s.best_loss), s.iteration + 1,
            s.oracle_calls + 1 + evals, jnp.where(better, 0, s.stuck + 1),
        )
        return state, self.info(state)
