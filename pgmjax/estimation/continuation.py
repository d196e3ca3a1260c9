"""The L1 loss's smoothing with continuation: one wrapper around any estimator.

The L1 loss (Laplace noise's maximum-likelihood loss) is not smooth, so its fits minimise Huber's smoothing of
it instead, ``r^2 / (2 w)`` for ``|r| <= w`` and ``|r| - w / 2`` beyond (Nesterov, "Smooth minimization of
non-smooth functions", Math. Prog. 103, 2005, Section 4), over stages whose width ``w`` shrinks geometrically
from :data:`SMOOTHING`'s first to its last (continuation): line searches and smooth steps then apply, and the
last stage's optimum is within ``w / 2`` per residual of the L1 optimum. :class:`Smoothed` is that schedule as an
:class:`~pgmjax.estimation.contract.Estimator` around another: :func:`pgmjax.estimate`, :func:`pgmjax.estimation`
and :func:`pgmjax.estimate_batch` (each member on its own schedule) all run it through :func:`smoothed`, and the
driver knows nothing of it but its :attr:`~pgmjax.StepInfo.settled` flag.

Example:
    >>> from pgmjax.estimation.batch_problem import make_problem
    >>> problem = make_problem(pj.Domain({"a": 2}), [pj.Measurement(("a",), [30.0, 10.0])], loss="l1")
    >>> est = smoothed(pj.MirrorDescent(), "l1", iters=200)
    >>> est.stage_iters, est.stages
    (10, 20)
    >>> state, info = est.advance(problem, *est.init(problem, problem.plan.zeros(), 1.0 / problem.total), 200)
    >>> int(state.iteration), pj.GraphicalModel(problem.plan, state.params, 40.0).marginal("a").round(2)
    (200, array([30., 10.]))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import to_device
from .contract import Estimator, StepInfo

#: The Huber widths (whitened residuals) of the first and the last smoothing stage.
SMOOTHING = (1.0, 1e-6)
#: A run's stages: its iterations split evenly (and a shorter last stage, where they do not divide).
STAGES = 20


class SmoothedState(NamedTuple):
    params: dict  # the inner estimator's potentials to return, in log-conditional gauge, as of the last tidy
    inner: Any  # the inner estimator's state in the current stage
    stage: jax.Array  # the current stage's index (past the schedule's last: its width again)
    offset: jax.Array  # iterations of the finished stages
    calls: jax.Array  # oracle calls of the finished stages
    base_step: jax.Array  # the first stage's step size; a later stage's is scaled by its width
    inner_stalled: jax.Array  # the inner estimator's last stall: it ends the stage (in the last stage, the run)
    iteration: jax.Array
    oracle_calls: jax.Array


@dataclass(frozen=True)
class Smoothed(Estimator):
    """``estimator`` run on the Huber-smoothed L1 loss over stages of shrinking width (the module docstring).

    A stage ends after :attr:`stage_iters` iterations, or earlier where the inner estimator stalls; the next
    restarts it (its ``init``) from the stage's potentials, put in the junction tree's log-conditional gauge
    (:meth:`~pgmjax.estimation.problem.Problem.log_conditionals`), at the first step size scaled by the width:
    the smoothed loss's curvature grows as ``1 / w``. Stage ``k`` of ``stages`` has width
    ``first * (last / first) ** (k / (stages - 1))``; stages past the last keep its width. A stall in the last
    (or a later) stage ends the run.

    Why the gauge: at a noisy optimum the measured cliques' gradients cancel rather than vanish (two cliques that
    disagree on an attribute push a function of it up in one table and down in the other, which the
    distribution ignores), and each stage's steps along such directions were folded into the potentials: in
    20,000 float32 iterations of mirror descent they reached -1,900 where the same distribution's
    log-conditionals stay within 3, their rounding put the marginals 250 to 1,600 eps off, and the fit stalled
    7e-4 above its optimum (3e-5 with the gauge).

    Args:
        estimator: the inner estimator (any :class:`~pgmjax.Estimator` whose steps accept the smoothed loss).
        stage_iters: iterations per stage.
        stages: the schedule's stages.
        first, last: the first and the last stage's Huber width.
    """

    estimator: Any
    stage_iters: int
    stages: int
    first: float = SMOOTHING[0]
    last: float = SMOOTHING[1]

    def __post_init__(self):
        if self.stage_iters < 1 or self.stages < 1:
            raise ValueError(f"Smoothed: stage_iters and stages must be at least 1, got {self.stage_iters}, {self.stages}")
        if not 0 < self.last <= self.first:
            raise ValueError(f"Smoothed: need 0 < last <= first, got first={self.first}, last={self.last}")

    @property
    def differentiable(self) -> bool:
        return self.estimator.differentiable

    #: ``init`` builds zeros on the host: the first stage starts inside the compiled chunk, as every later one does,
    #: so the inner estimator's ``init`` is compiled once, in the chunk (not also in a program of its own).
    init_on_host = True

    @property
    def traits(self):
        return self.estimator.traits

    def widths(self) -> np.ndarray:
        """Each stage's Huber width (float64, on the host)."""
        k = np.arange(self.stages)
        return np.asarray([self.first * (self.last / self.first) ** (i / max(self.stages - 1, 1)) for i in k])

    def _width(self, stage, dtype):
        return jnp.asarray(self.widths(), dtype)[jnp.clip(stage, 0, self.stages - 1)]

    def _info(self, info: StepInfo, stage) -> StepInfo:
        last = stage >= self.stages - 1
        return StepInfo(info.loss, info.stalled & last, None, last)

    def init(self, problem, theta: dict, step_size):
        """A state before the first stage (``stage`` -1, ``iteration`` -1): zeros of the inner estimator's state,
        built on the host; its first step starts the first stage from ``theta`` (:meth:`_restart`)."""
        dt = problem.total.dtype
        step = jnp.asarray(step_size, dt)
        shapes = jax.eval_shape(self.estimator.init, problem.with_smoothing(self._width(0, dt)), theta, step)
        inner = jax.tree_util.tree_map(lambda a: to_device(np.zeros(a.shape, a.dtype)), shapes[0])
        minus = to_device(-1, np.int32)
        zero = to_device(0, np.int32)
        state = SmoothedState(theta, inner, minus, zero, zero, step, to_device(False, bool), minus, zero)
        loss = to_device(np.full(shapes[1].loss.shape, np.inf, shapes[1].loss.dtype))  # the inner info's type
        return state, StepInfo(loss, to_device(False, bool), None, to_device(self.stages <= 1, bool))

    def _due(self, s: SmoothedState):
        """Whether the next step starts a stage: before the first, or once a stage's iterations are made or the inner
        estimator stalled in a stage before the last."""
        return (s.stage < 0) | (s.inner.iteration >= self.stage_iters) | (s.inner_stalled & (s.stage < self.stages - 1))

    def _restart(self, problem, s: SmoothedState, theta: dict):
        """The next stage's state and info: the inner estimator's ``init`` at potentials ``theta`` (the fit's start
        before the first stage; later, the ended stage's tidied potentials in log-conditional gauge), at the
        stage's width and step size."""
        dt = problem.total.dtype
        first = s.stage < 0
        stage = s.stage + 1
        w = self._width(stage, dt)
        inner, info = self.estimator.init(problem.with_smoothing(w), theta, s.base_step * (w / self._width(0, dt)))
        offset = jnp.where(first, 0, s.offset + s.inner.iteration)
        calls = jnp.where(first, 0, s.calls + s.inner.oracle_calls)
        s = s._replace(inner=inner, stage=stage, offset=offset, calls=calls, inner_stalled=jnp.zeros((), bool),
                       iteration=offset + inner.iteration, oracle_calls=calls + inner.oracle_calls)
        return s, self._info(info, stage)

    def _gauged(self, problem, s: SmoothedState) -> dict:
        """The inner estimator's potentials to return (its ``tidy``), in log-conditional gauge."""
        ended = self.estimator.tidy(problem.with_smoothing(self._width(s.stage, problem.total.dtype)), s.inner)
        return problem.log_conditionals(ended.params)

    def _inner_step(self, problem, s: SmoothedState):
        inner, info = self.estimator.step(problem.with_smoothing(self._width(s.stage, problem.total.dtype)), s.inner)
        s = s._replace(inner=inner, inner_stalled=info.stalled, iteration=s.offset + inner.iteration,
                       oracle_calls=s.calls + inner.oracle_calls)
        return s, self._info(info, s.stage)

    def step(self, problem, s: SmoothedState):
        """The next stage's start where one is due (:meth:`_due`), else one step of the inner estimator."""
        def restart():
            theta = jax.lax.cond(s.stage < 0, lambda: s.params, lambda: self._gauged(problem, s))
            return self._restart(problem, s, theta)

        return jax.lax.cond(self._due(s), restart, lambda: self._inner_step(problem, s))

    def tidy(self, problem, s: SmoothedState) -> SmoothedState:
        """``s`` with ``params`` the inner estimator's tidied potentials in log-conditional gauge; the inner state
        itself is left as it is (a chunk's end is not a stage's)."""
        return s._replace(params=self._gauged(problem, s))

    def advance(self, problem, state, info: StepInfo, num_steps):
        """:meth:`step` looped as :meth:`Estimator.advance` does, a stage at a time: the stage's start where due
        (from ``state.params``), its steps, then its potentials in ``params`` (:meth:`tidy`). Each is one site in
        the program (the oracle traced once), and under ``jax.vmap`` (a batch's members), where a branch runs both
        its sides, the start is paid once per stage, not once per step. ``state`` is one :meth:`init` or
        :meth:`advance` returned (its ``params`` current)."""
        if self.differentiable and isinstance(num_steps, int):
            return super().advance(problem, state, info, num_steps)
        target = jnp.maximum(state.iteration, 0) + num_steps

        def more(c):
            return (c[0].iteration < target) & ~c[1].stalled

        def in_stage(c):
            return more(c) & (c[0].inner.iteration < self.stage_iters) & ~c[0].inner_stalled

        def stage(c):
            s, info = jax.lax.cond(self._due(c[0]), lambda: self._restart(problem, c[0], c[0].params), lambda: c)
            s, info = jax.lax.while_loop(in_stage, lambda c: self._inner_step(problem, c[0]), (s, info))
            return s._replace(params=self._gauged(problem, s)), info

        return jax.lax.while_loop(more, stage, (state, info))


def smoothed(estimator: Estimator, loss, iters: int, smoothing: tuple[float, float] = SMOOTHING) -> Estimator:
    """``estimator`` as a fit of ``iters`` iterations on ``loss`` runs it: wrapped in :class:`Smoothed` for the
    ``"l1"`` loss (:data:`STAGES` stages of ``iters // STAGES`` iterations), else as it is.

    Why the schedule depends on ``iters`` alone, not on how the driver chunks them: with stages of 50 iterations
    (a chunk) a 3,000-iteration L-BFGS fit of a loopy 6-attribute model ran 60 stages, each too short to
    converge, stalled in the last and ended 64% above the L1 optimum; in 20 stages of 150 it reached it to
    3e-7 (float64)."""
    if loss != "l1":
        return estimator
    stage_iters = max(1, int(iters) // STAGES)
    return Smoothed(estimator, stage_iters, max(1, math.ceil(int(iters) / stage_iters)), *smoothing)
