"""The estimator contract: what :func:`pgmjax.estimate`, :func:`pgmjax.estimation` and :func:`pgmjax.estimate_batch` call.

An estimator is two pure functions over a NamedTuple state, in the form of blackjax's ``init`` / ``step``
(and optax's ``GradientTransformation``): ``init(problem, theta, step_size) -> (state, info)`` and
``step(problem, state) -> (state, info)``. ``info`` is a :class:`StepInfo`, what the driver reads between
steps; the state keeps the potentials to return in its field ``params``. An estimator is a frozen dataclass
(its fields are its settings: hashed, so a configured estimator is a static argument of the compiled
programs). The driver runs ``step`` in a ``lax.while_loop`` until ``state.iteration`` has advanced by the
chunk's count or ``info.stalled``; it switches on nothing else.

Example:
    A plain gradient step on the potentials (``eta`` fixed), run by the front door like the built-in ones:

    >>> from dataclasses import dataclass
    >>> import jax.numpy as jnp
    >>> from typing import NamedTuple
    >>> class GDState(NamedTuple):
    ...     params: dict
    ...     iteration: jax.Array
    ...     oracle_calls: jax.Array
    >>> def loss(problem, theta):
    ...     return problem.loss_of(problem.marginals(theta))
    >>> def info(loss):
    ...     return pj.StepInfo(loss, jnp.zeros((), bool), None)
    >>> @dataclass(frozen=True)
    ... class GradientDescent(pj.Estimator):
    ...     eta: float = 1e-3
    ...     def init(self, problem, theta, step_size=None):
    ...         return GDState(theta, jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32)), info(loss(problem, theta))
    ...     def step(self, problem, s):
    ...         value, grad = jax.value_and_grad(loss, 1)(problem, s.params)
    ...         theta = jax.tree_util.tree_map(lambda t, d: t - self.eta * d, s.params, grad)
    ...         return GDState(theta, s.iteration + 1, s.oracle_calls + 2), info(loss(problem, theta))
    >>> dom = pj.Domain({"a": 2})
    >>> model = pj.estimate(dom, [pj.Measurement(("a",), np.array([30.0, 10.0]))], method=GradientDescent(), iters=300)
    >>> model.marginal("a").round()
    array([30., 10.])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax


class StepInfo(NamedTuple):
    """What a step (or ``init``) tells the driver.

    Attributes:
        loss: the loss of the potentials the state returns (``state.params``) once the chunk's :meth:`Estimator.tidy`
            has run: the run's progress, its stopping test (``tol``) and the model's reported loss.
        stalled: a bool scalar: no further step can lower the loss (the run may end here; the driver's loop
            stops at once, and :func:`pgmjax.estimate` ends the run after the chunk).
        step_size: the step size a warm start from ``state.params`` continues with (mirror descent's step at
            its best iterate), or None for an estimator without one (the same in ``init``'s info and
            ``step``'s: it is part of the loop's carry).
        settled: whether the driver's test on the loss's change over a chunk (``tol``) may end the run here
            (default True): False while the estimator still changes the loss it minimises
            (:class:`pgmjax.estimation.continuation.Smoothed`'s stages before the last).
    """

    loss: jax.Array
    stalled: jax.Array
    step_size: jax.Array | None
    settled: Any = True


@dataclass(frozen=True)
class Traits:
    """What :func:`pgmjax.estimate` needs to know of an estimator besides its two functions, in one place (an
    estimator's class attribute ``traits``; an estimator of one's own has the defaults).

    Attributes:
        smooth_loss_only: its steps need the smooth ``"l2"`` loss (dual averaging: its step sizes come from the
            loss's Lipschitz constant).
        approximate_oracle: it runs on the approximate oracle's pseudo-marginals (it never differentiates the oracle).
        size_class: it runs on the size-class program (:mod:`pgmjax.graph.routed_oracle`), whose compile costs
            ``program="auto"`` knows from measurements (pgmjax's own estimators).
        gradient_through_oracle: it differentiates its loss through the oracle in reverse mode (L-BFGS): the
            size-class plan then scans over its levels.
        oracle_calls: an iteration's cost in mirror-descent iterations of the size-class program, for
            ``program="auto"``.
        finish_with: the estimator :func:`pgmjax.estimate` hands the iterations left to when a run stalls with
            iterations to go (L-BFGS: mirror descent), or None.
        lock_step: each step makes one iteration and none stalls (dual averaging): a batch runs its members'
            steps together, where it otherwise maps each member's own loop (whose ``vmap`` selects every member's
            state at every step).
    """

    smooth_loss_only: bool = False
    approximate_oracle: bool = False
    size_class: bool = False
    gradient_through_oracle: bool = False
    oracle_calls: float = 1.0
    finish_with: Any = None
    lock_step: bool = False


class Estimator:
    """Base class of the estimators (see the module docstring).

    Required:

    * ``init(problem, theta, step_size) -> (state, info)``: the state at potentials ``theta`` (oracle
      blocks) and its :class:`StepInfo`;
    * ``step(problem, state) -> (state, info)``: one step.

    ``state`` is a NamedTuple with at least ``params`` (the potentials to return: the best iterate, where
    the estimator keeps one), ``iteration`` and ``oracle_calls`` (int32 scalars). A step need not complete an
    iteration: mirror descent's step is one line-search trial, and only an accepted one advances
    ``iteration``. A state whose ``iteration`` is -1 is not evaluated yet: its first step evaluates it and
    leaves ``iteration`` at 0 (mirror descent's ``init`` makes no oracle call).

    Optional, with these defaults:

    * :meth:`tidy`: the state after a compiled chunk, before the host reads it (unchanged);
    * :meth:`advance`: a chunk of iterations (the ``while_loop`` of :meth:`step`; a batch maps it over its members);
    * :attr:`differentiable`: whether :func:`pgmjax.estimation` may be differentiated through it (True);
    * :attr:`init_on_host`: whether ``init`` runs on the host, outside any compiled program (False: the
      driver compiles it);
    * :attr:`traits`: what :func:`pgmjax.estimate` needs to know of it (:class:`Traits`).
    """

    traits: ClassVar[Traits] = Traits()

    #: Whether derivatives through its iterations (``jax.grad`` or ``jax.jvp`` of :func:`pgmjax.estimation`) are
    #: derivatives of its iterate. A line search's accept/reject decisions and its step growth are not smooth
    #: in the answers: :func:`pgmjax.estimation` refuses to differentiate through an estimator that declares False.
    differentiable: ClassVar[bool] = True
    #: Whether the driver calls ``init`` as it is, on the host, instead of compiling it: for an ``init`` that
    #: computes nothing (mirror descent's state of zeros, whose first step evaluates the start), so that a fit
    #: compiles no program besides its chunk.
    init_on_host: ClassVar[bool] = False

    def init(self, problem, theta: dict, step_size):
        raise NotImplementedError(f"{type(self).__name__}.init")

    def step(self, problem, state):
        raise NotImplementedError(f"{type(self).__name__}.step")

    def tidy(self, problem, state):
        """The state as the host reads it after a chunk of iterations (by default, unchanged)."""
        return state

    def advance(self, problem, state, info: StepInfo, num_steps):
        """``num_steps`` iterations from ``state``, or fewer where a step reports ``stalled``, then :meth:`tidy`.
        A state not evaluated yet (``iteration`` -1) is evaluated first. Returns ``(state, info)``.

        A traced count runs a ``lax.while_loop`` (one compiled loop for any count). A Python int on a
        :attr:`differentiable` estimator runs ``num_steps + 1`` steps of a ``lax.fori_loop`` instead, each
        one past the count (or after a stall) leaving the carry as it is: reverse-mode autodiff goes
        through a loop of static length only (such an estimator makes one iteration per step).
        """
        target = jax.numpy.maximum(state.iteration, 0) + num_steps

        def more(carry):
            return (carry[0].iteration < target) & ~carry[1].stalled

        def step(carry):
            return self.step(problem, carry[0])

        if isinstance(num_steps, int) and self.differentiable:
            carry = jax.lax.fori_loop(0, num_steps + 1, lambda _, c: jax.lax.cond(more(c), step, lambda c: c, c),
                                      (state, info))
        else:
            carry = jax.lax.while_loop(more, step, (state, info))
        return self.tidy(problem, carry[0]), carry[1]
