"""Nesterov's accelerated dual averaging over the marginal polytope.

McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy",
ICML 2019, Algorithm 2; Xiao, "Dual averaging methods for regularized stochastic learning and online
optimization", JMLR 2010; Nesterov, "Smooth minimization of non-smooth functions", Math. Prog. 2005.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .contract import Estimator, StepInfo, Traits
from .problem import Problem
from .tree_math import all_finite, axpy, tree_map


class DualAveragingState(NamedTuple):
    theta: dict  # potentials of v
    theta0: dict  # centre of the entropy prox-function (the warm start; 0 = uniform)
    w: dict  # averaged marginals (the sequence the convergence rate is about)
    v: dict
    gbar: dict
    params: dict  # potentials of the best v so far: what the run returns
    loss: jax.Array  # loss of best_theta's marginals
    lowest: jax.Array  # the lowest loss of any v so far (loss is within DualAveraging.tie of it)
    averaged_loss: jax.Array  # loss of w
    origin: jax.Array  # loss of the starting model (theta0): an iterate must beat it to be returned
    iteration: jax.Array
    oracle_calls: jax.Array


@dataclass(frozen=True)
class DualAveraging(Estimator):
    """Accelerated dual averaging (ICML 2019, Algorithm 2; Xiao 2010; Nesterov 2005).

    With ``c = 2 / (t + 1)``: ``u = (1 - c) w + c v``; ``gbar = (1 - c) gbar +
    c grad L(u)``; ``v = M(-t (t + 1) / (4 L N) * gbar)``; ``w = (1 - c) w + c v``.
    ``L`` is the Lipschitz constant of the loss gradient and ``N`` the total
    (the entropy over counts is ``1/N``-strongly convex). The iterate ``w``
    is a convex combination of marginals with no potentials of its own, so
    the run returns the potentials of the best ``v`` seen (``v = M(theta)``)
    and reports that model's loss; ``averaged_loss`` tracks ``w``, which
    converges faster than ``v``. "Best" breaks near-ties toward the later iterate: a ``v`` whose loss is
    within ``tie`` (relative) of the lowest so far replaces the returned one, provided it is below the
    starting model's loss (the start wins unless beaten: a warm start never returns a worse model). Late in a run the ``v`` differ
    mostly along directions the loss barely sees; choosing among them by rounded losses made float32 and
    float64 runs of one path return different iterates (Titanic's benchmark cliques: losses equal to
    1.6e-7, clique marginals 3.2e-3 apart in L1/N; 1.6e-4 with the tie rule). A warm start moves the
    centre of the entropy term from the uniform model to the warm model:
    ``v = M(theta_0 - t (t + 1) / (4 L N) * gbar)``.

    Args:
        tie: relative tolerance of the "best" comparison: the returned model's loss is at most this far
            (relative) above the lowest seen. A constant, not a multiple of the dtype's epsilon, so float32
            and float64 make the same choices; 1e-5 is about 80 float32 epsilons, and 1e-6 still left
            Titanic's two precisions returning different iterates (1.6e-3 L1/N).

    Example:
        >>> from pgmjax.estimation.batch_problem import make_problem
        >>> from pgmjax.estimation.driver import run
        >>> problem = make_problem(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), [[10.0, 20, 30], [5, 15, 20]])])
        >>> theta, state, history = run(DualAveraging(), problem, problem.plan.zeros(), iters=200)
        >>> bool(history[-1]["loss"] < 1e-3)
        True
    """

    tie: float = 1e-5

    traits = Traits(smooth_loss_only=True, size_class=True, lock_step=True)  # (not a field)

    @staticmethod
    def info(state: DualAveragingState) -> StepInfo:
        """The loss of ``params``' model; never stalled; no step size (its steps come from the Lipschitz constant)."""
        return StepInfo(state.loss, jnp.zeros((), bool), None)

    def init(self, problem: Problem, theta: dict, step_size=None) -> tuple[DualAveragingState, StepInfo]:
        mu = problem.marginals(theta)
        loss, _ = problem.loss_and_grad(mu)
        zeros = tree_map(jnp.zeros_like, mu)
        state = DualAveragingState(
            theta, theta, mu, mu, zeros, theta, loss, loss, loss, loss, jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32)
        )
        return state, self.info(state)

    def step(self, problem: Problem, s: DualAveragingState) -> tuple[DualAveragingState, StepInfo]:
        t = (s.iteration + 1).astype(problem.total.dtype)
        c = 2.0 / (t + 1.0)
        u = axpy(1 - c, s.w, tree_map(lambda v: c * v, s.v))
        _, g = problem.loss_and_grad(u)
        # Canonical tables (separator functions moved toward the root): theta = theta0 - scale * gbar
        # grows as t^2 along whatever gbar holds, and at a noisy optimum the gradient holds functions of a
        # separator taken from one clique and given to its neighbour, which the distribution ignores. Left
        # in, |theta| reached 3,042 in 20,000 iterations and float32 rounding (eps |theta| per log-cell)
        # stalled the fit 2.5e-4 above its optimum; canonical tables keep only what the distribution sees.
        gbar = problem.canonical(axpy(1 - c, s.gbar, tree_map(lambda x: c * x, g)))
        scale = t * (t + 1.0) / (4.0 * problem.lipschitz * problem.total)
        theta = tree_map(lambda x, t0: t0 - scale * x, gbar, s.theta0)
        v = problem.marginals(theta)
        loss_v = problem.loss_of(v)
        # A step whose marginals or loss are not finite is skipped (the sequences stay where they were).
        ok = jnp.isfinite(loss_v) & all_finite(v) & all_finite(g)
        keep = lambda a, b: jnp.where(ok, a, b)
        theta, v, gbar = tree_map(keep, theta, s.theta), tree_map(keep, v, s.v), tree_map(keep, gbar, s.gbar)
        w = tree_map(keep, axpy(1 - c, s.w, tree_map(lambda x: c * x, v)), s.w)
        # The tie is against the lowest loss of any iterate, but the starting model is never given up for
        # one that does not beat it: otherwise a warm start from a converged model returned an iterate up
        # to ``tie`` above it (a 4-cycle at its optimum: loss 3.7506112 -> 3.750664, answers moved 3e-4 L1/N).
        better = ok & (loss_v <= s.lowest + self.tie * jnp.abs(s.lowest)) & (loss_v < s.origin)
        best = tree_map(lambda a, b: jnp.where(better, a, b), theta, s.params)
        state = DualAveragingState(
            theta, s.theta0, w, v, gbar, best, jnp.where(better, loss_v, s.loss),
            jnp.where(ok, jnp.minimum(s.lowest, loss_v), s.lowest), problem.loss_of(w), s.origin, s.iteration + 1,
            s.oracle_calls + 1,
        )
        return state, self.info(state)
