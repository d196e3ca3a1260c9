"""The estimator contract: what :func:`pgmjax.estimate`, :func:`pgmjax.estimation` and :func:`pgmjax.estimate_batch` call.

An estimator is a frozen dataclass (its fields are its settings: hashed, so a configured estimator is a
static argument of the compiled programs) with a pure ``init`` / ``step`` pair over a NamedTuple state, in
the style of optax's ``GradientTransformation``. :class:`Estimator` is the base class: a subclass writes
the four required methods, and may replace the defaults of the others where it has a faster or more exact
way (mirror descent runs its line-search trials in one loop; L-BFGS forms its best iterate once per chunk).

Example:
    A plain gradient step on the potentials (``eta`` fixed), run by the front door like the built-in ones:

    >>> from dataclasses import dataclass
    >>> import jax.numpy as jnp
    >>> from typing import NamedTuple
    >>> class GDState(NamedTuple):
    ...     theta: dict
    ...     loss: jax.Array
    ...     iteration: jax.Array
    ...     oracle_calls: jax.Array
    >>> def loss(problem, theta):
    ...     return problem.loss_of(problem.marginals(theta))
    >>> @dataclass(frozen=True)
    ... class GradientDescent(pj.Estimator):
    ...     eta: float = 1e-3
    ...     def init(self, problem, theta, step_size=None):
    ...         return GDState(theta, loss(problem, theta), jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32))
    ...     def step(self, problem, s):
    ...         theta = jax.tree_util.tree_map(lambda t, d: t - self.eta * d, s.theta, jax.grad(loss, 1)(problem, s.theta))
    ...         return GDState(theta, loss(problem, theta), s.iteration + 1, s.oracle_calls + 2)
    ...     @staticmethod
    ...     def params(s):
    ...         return s.theta
    ...     @staticmethod
    ...     def best_loss(s):
    ...         return s.loss
    >>> dom = pj.Domain({"a": 2})
    >>> model = pj.estimate(dom, [pj.Measurement(("a",), np.array([30.0, 10.0]))], method=GradientDescent(), iters=300)
    >>> model.marginal("a").round()
    array([30., 10.])
"""

from __future__ import annotations

from typing import ClassVar

import jax


class Estimator:
    """Base class of the estimators (see the module docstring).

    Required (``state`` is a NamedTuple with at least ``iteration`` and ``oracle_calls``, int32 scalars):

    * ``init(problem, theta, step_size) -> state``: the state at potentials ``theta`` (oracle blocks);
    * ``step(problem, state) -> state``: one iteration;
    * ``params(state) -> theta``: the potentials to report (the best iterate so far, where the estimator keeps it);
    * ``best_loss(state) -> scalar``: the loss of ``params(state)``.

    Optional, with these defaults:

    * :meth:`steps`: ``num_steps`` iterations (a ``fori_loop`` of :meth:`step`);
    * :meth:`tidy`: the state after a compiled chunk, before the host reads it (unchanged);
    * :meth:`stalled`: whether the run may end early (never);
    * :attr:`differentiable`: whether :func:`pgmjax.estimation` may be differentiated through it (True);
    * :attr:`starts_by_a_step`: where True, the driver starts a run with ``start(...)`` followed by one
      iteration of its compiled chunk and ``started(state, step_size)`` instead of a compiled ``init`` (mirror
      descent: a fit then compiles no separate program holding the oracle).
    """

    starts_by_a_step: ClassVar[bool] = False
    #: Whether derivatives through its iterations (``jax.grad`` or ``jax.jvp`` of :func:`pgmjax.estimation`) are
    #: derivatives of its iterate. A line search's accept/reject decisions and its step growth are not smooth
    #: in the answers: :func:`pgmjax.estimation` refuses to differentiate through an estimator that declares False.
    differentiable: ClassVar[bool] = True

    def init(self, problem, theta: dict, step_size):
        raise NotImplementedError(f"{type(self).__name__}.init")

    def step(self, problem, state):
        raise NotImplementedError(f"{type(self).__name__}.step")

    @staticmethod
    def params(state) -> dict:
        raise NotImplementedError("Estimator.params")

    @staticmethod
    def best_loss(state) -> jax.Array:
        raise NotImplementedError("Estimator.best_loss")

    def steps(self, problem, state, num_steps):
        """``num_steps`` iterations of :meth:`step` (traced ``num_steps``: one compiled loop for any count)."""
        return jax.lax.fori_loop(0, num_steps, lambda _, s: self.step(problem, s), state)

    def tidy(self, problem, state):
        """The state as the host reads it after a chunk of iterations (by default, unchanged)."""
        return state

    def stalled(self, state) -> bool:
        """Whether the run should end now, before its iterations are spent (by default, never)."""
        return False
