"""Entropic mirror descent over the marginal polytope with an Armijo line search and restarted momentum.

McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy",
ICML 2019, Algorithm 1, with a heavy-ball term on the potentials (Polyak, "Some methods of speeding up the
convergence of iteration methods", USSR Comput. Math. Math. Phys. 4(5), 1964, eq. 9) that is dropped
whenever it fails the line search (the function-value restart of O'Donoghue & Candes, "Adaptive restart for
accelerated gradient schemes", Found. Comput. Math. 15, 2015, Section 3.2). An accepted trial's marginals
become the next iterate's, so an accepted step costs one oracle call.

The steps move parameters in the space of the measured cliques' tables (:meth:`Problem.patterns`), from
which every trial forms the junction tree's potentials afresh (:meth:`Problem.expand`): the fitted
distribution stays in the exponential family of the measured cliques whatever the rounding, so the
answers to queries nothing measured are the maximum-entropy ones (ICML 2019, Section 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import to_device, zeros_like
from .contract import Estimator, StepInfo, Traits
from .problem import Problem
from .tree_math import tree_map, vdot


class MirrorDescentState(NamedTuple):
    params: dict  # the potentials of the best iterate, as of the last tidy: what the fit returns
    base: dict  # the starting potentials (zeros, or a warm start's), shifted by each clique's top at each tidy
    phi: Any  # the current iterate's parameters, in Problem.patterns' space (the measured cliques' tables)
    best_phi: Any  # the parameters of the iterate with the lowest loss so far
    loss: jax.Array  # the current iterate's loss
    lowest: jax.Array  # the lowest loss so far (best's): no trial may rise more than the slack above it
    pred: Any  # what the loss reads of the current iterate's marginals (Problem.predict)
    pred_grad: Any  # the loss's gradient with respect to pred; in the parameters' space: Problem.pattern_grad
    step_size: jax.Array
    iteration: jax.Array
    oracle_calls: jax.Array
    slack: jax.Array  # the Armijo test's rounding allowance (MirrorDescent.slack), refreshed by tidy: once per chunk
    velocity: Any  # params minus the previous iterate's: the momentum
    growth: jax.Array  # the step size's factor after a step accepted at full size (shrinks at each halving)
    coast: jax.Array  # whether the next iteration's first trial carries momentum (the last was accepted at once)
    best_step: jax.Array  # the step size after the last iteration that lowered the loss (for warm starts)
    stuck: jax.Array  # failed line searches (a zero step accepted) since the lowest loss last fell
    best_pred: Any  # pred at the best iterate: a failed line search goes back there (MirrorDescent.commit)
    best_pred_grad: Any  # pred_grad at the best iterate
    trial: jax.Array  # the index of the iteration's last trial so far (-1: the next step starts an iteration)
    trial_eta: jax.Array  # that trial's step size (a halving halves it)


@dataclass(frozen=True)
class MirrorDescent(Estimator):
    """Entropic mirror descent with a backtracking (Armijo) line search and restarted momentum.

    ``theta <- theta - eta * grad L(mu) + beta * (theta - theta_prev)``, ``mu <- M(theta)`` (ICML 2019,
    Algorithm 1, plus Polyak's heavy-ball term), with the step taken on the measured cliques' tables
    ``phi`` (``theta = theta_0 + P^T phi``, ``grad L(mu) = P^T grad_phi``; :meth:`Problem.expand`) so
    rounding never adds interactions no measurement constrains. A trial is accepted when
    ``L(mu') <= L(mu) - armijo * <grad, mu - mu'>`` and ``L(mu')`` is not above the lowest loss so far
    (each up to the rounding allowance :meth:`slack`). The fit returns the iterate of the lowest loss.
    An iteration first tries the
    step with momentum ``beta = momentum`` (only after an iteration accepted at its first trial); if that
    fails, the plain step at the same ``eta`` (the restart), then halves ``eta``. After a step accepted at
    full size ``eta`` grows by the current growth factor, which starts at ``growth`` and, at each halving,
    moves halfway down to ``min_growth``.

    Why: the entropic step moves a cell's marginal by about ``eta * mu_cell * grad``, so the step size that
    keeps the common cells stable leaves the rare ones converging at a rate proportional to their
    probability (thousands of iterations on Adult's one- and two-way marginals). Momentum carries the
    consistent part of past steps: on Adult with MST-style measurements the default reaches in 1,000
    iterations the loss Algorithm 1 reaches in 20,000 (the changelog has the measurement).
    ``MirrorDescent(momentum=0.0, min_growth=1.25)`` is Algorithm 1 as published.

    The loss reads the marginals through linear predictions ``p = Q mu``
    (:meth:`Problem.predict`), so the state keeps ``p`` and ``g = dL/dp``
    instead of full-size gradient tables: ``grad L(mu) = Q^T g`` is formed
    only inside the potentials' update, and ``<grad, mu - mu'> = <g, p - p'>``
    is a sum over the measured cells, not over the junction tree.

    Args:
        armijo: sufficient-decrease fraction.
        growth: step growth after a step accepted at full size, at the start of a run.
        min_growth: the growth factor's floor; each halving moves it halfway there from its current value.
        momentum: the heavy-ball coefficient ``beta`` (0: no momentum).
        max_backtracks: at most this many halvings per iteration (the last trial is a zero step).
        rounding: slack of the test for rounding, in units of ``eps * <|g|, |p|>`` (the error the
            marginals' relative precision puts into the loss; equal to ``eps * <|grad L|, mu>`` for
            marginal and counting queries). Without it float32 fits stall short of the
            optimum: the step size collapses once the loss decrease falls below the loss's rounding error.
        patience: failed line searches (every halving rejected, the zero step taken) since the lowest loss
            last fell after which the run is *stalled* (:meth:`info`): the compiled chunk stops there and
            :func:`pgmjax.estimation.driver.run` ends the run at the lowest-loss iterate. A failed search sends the iterate back to the
            best one (:meth:`commit`), so the second failure is one from the best iterate itself.

    Example (the pure pieces, driven by hand; :func:`pgmjax.estimate` does this in compiled chunks):
        >>> from pgmjax.estimation.batch_problem import make_problem
        >>> problem = make_problem(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), [[10.0, 20, 30], [5, 15, 20]])])
        >>> md = MirrorDescent()
        >>> state, info = md.init(problem, problem.plan.zeros(), 1.0 / (problem.lipschitz * problem.total))
        >>> step = jax.jit(md.step)
        >>> while int(state.iteration) < 100:   # a step is one line-search trial
        ...     state, info = step(problem, state)
        >>> bool(info.loss < 1e-3)
        True
        >>> theta = md.tidy(problem, state).params  # the best iterate's potentials, formed by tidy
    """

    armijo: float = 0.5
    growth: float = 1.25
    min_growth: float = 1.01
    momentum: float = 0.99
    max_backtracks: int = 30
    rounding: float = 16.0
    patience: int = 2

    init_on_host = True  # (not a field) init builds zeros on the host; the first step evaluates the start
    traits = Traits(approximate_oracle=True, size_class=True)  # (not a field)
    differentiable = False  # (not a field) its Armijo line search decides by comparisons: no derivative through it

    def __post_init__(self):
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"MirrorDescent: momentum must be in [0, 1), got {self.momentum}")
        if self.patience < 1:
            raise ValueError(f"MirrorDescent: patience must be at least 1, got {self.patience}")
        if not 1.0 <= self.min_growth <= self.growth:
            raise ValueError(f"MirrorDescent: need 1 <= min_growth <= growth, got min_growth={self.min_growth}, growth={self.growth}")

    def info(self, s: MirrorDescentState) -> StepInfo:
        """What the driver reads of ``s``: the lowest loss so far (that of ``params`` once :meth:`tidy` has run),
        whether :attr:`patience` line searches have failed since it last fell (the iterate can no longer be
        moved at a loss the rounding can tell apart: the run ends at the lowest-loss iterate), and the step
        size after the last iteration that lowered the loss (a warm start continues from it)."""
        return StepInfo(s.lowest, s.stuck >= self.patience, s.best_step)

    def init(self, problem: Problem, theta: dict, step_size) -> tuple[MirrorDescentState, StepInfo]:
        """A state not evaluated yet (``iteration`` -1) at potentials ``theta``: no oracle call here.

        Its loss is +inf and its gradient 0, so the first step's first trial (the potentials themselves) is
        accepted: that step evaluates the start, and :meth:`commit` leaves it as an evaluated state at
        iteration 0 with step size ``step_size``. Built on the host (:attr:`init_on_host`: no eager op and no
        compiled program of its own; the oracle is the bulk of every program, and a fit's only one is then
        its chunk).
        """
        dt = problem.total.dtype
        # Shapes only (no eager op: a fit compiles no small programs of its own), zeros built on the host.
        shapes = jax.eval_shape(lambda t: (problem.predict(t), problem.patterns(t)), zeros_like(theta))
        pred, phi = tree_map(lambda a: to_device(np.zeros(a.shape, a.dtype)), shapes)
        inf = to_device(np.inf, dt)
        step = to_device(step_size, dt)
        state = MirrorDescentState(
            theta, theta, phi, phi, inf, inf, pred, pred, step, to_device(-1, np.int32),
            to_device(0, np.int32), to_device(0.0, dt), phi, to_device(self.growth, dt), to_device(False, bool),
            step, to_device(0, np.int32), pred, pred, to_device(-1, np.int32), step,
        )
        return state, StepInfo(inf, to_device(False, bool), step)

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
        return 8 * eps * jnp.abs(s.loss) + self.rounding * eps * vdot(tree_map(jnp.abs, s.pred_grad),
                                                                      tree_map(jnp.abs, s.pred))

    def schedule(self, s: MirrorDescentState, k, previous_eta):
        """Step size and momentum of trial ``k`` (0 = the first) of the iteration from ``s``.

        Trial 0 is ``(s.step_size, momentum)`` when ``s.coast``, else ``(s.step_size, 0)``; after a trial
        with momentum comes the plain step at the same size; every later trial halves ``previous_eta`` (the
        step of trial ``k - 1``), and the last allowed one is a zero step (the iterate stays put).

        Returns:
            ``(eta, beta, last)``: the trial's step size and momentum, and whether this is the iteration's
            last allowed trial (accepted whatever its test says).
        """
        dt = s.step_size.dtype
        plain = self._plain_trial(s, k)
        last = k >= self.max_backtracks + plain
        eta = jnp.where(k > plain, jnp.where(last, 0.0, previous_eta * 0.5), s.step_size).astype(dt)
        return eta, jnp.where((k == 0) & s.coast, self.momentum, 0.0).astype(dt), last

    @staticmethod
    def _plain_trial(s: MirrorDescentState, k):
        """The index of the iteration's plain trial at full size: 1 after a trial with momentum, else 0
        (``s.coast`` is only ever set with ``momentum > 0``). Later trials are halvings."""
        return s.coast.astype(k.dtype)

    def trial(self, problem: Problem, s: MirrorDescentState, eta, beta=0.0, slack=None):
        """One line-search trial from state ``s`` at step ``eta`` with momentum ``beta``, with its test.

        Args:
            slack: the allowance for rounding (default ``s.slack``, :meth:`slack` as of the last :meth:`tidy`).

        Returns:
            ``(phi, loss, pred, pred_grad, ok)``: the trial's parameters, loss, predictions and the
            loss's gradient with respect to them, and whether the test accepts it.
        """
        if slack is None:
            slack = s.slack
        # The step moves the parameters (the measured cliques' tables), and the potentials are formed from
        # them afresh: rounding never leaves the exponential family of the measured cliques (Problem.expand).
        phi = tree_map(lambda p, g: p - eta * g, s.phi, problem.pattern_grad(s.pred_grad, s.phi))
        if self.momentum > 0:
            phi = tree_map(lambda p, v: p + beta * v, phi, s.velocity)
        mu, log_z = problem.marginals_and_log_partition(problem.expand(s.base, phi))
        pred = problem.predict(mu)
        loss, pred_grad = jax.value_and_grad(problem.loss_of_predictions)(pred)
        decrease = vdot(s.pred_grad, tree_map(jnp.subtract, s.pred, pred))
        # A finite log Z certifies the potentials: a NaN or +inf potential, or a clique left with no cell
        # above -inf (a step that overflowed), makes it NaN or +-inf; its marginals are then finite too
        # (products of conditionals in [0, 1] times the total). One scalar instead of two passes over
        # every table per trial. A momentum step need not be a descent direction (decrease < 0): the loss
        # must then not rise either. "Rise" is against the lowest loss so far: against the last one, each
        # step could rise by the slack, and long float32 fits crept upward (a loopy 6-attribute model:
        # 10.7012 after 50 iterations, 10.709 after 20,000; optimum 10.7010).
        ok = (jnp.isfinite(loss) & jnp.isfinite(log_z) & (loss <= s.loss - self.armijo * decrease + slack)
              & (loss <= s.lowest + slack))
        return phi, loss, pred, pred_grad, ok

    def commit(self, s: MirrorDescentState, accepted, eta, k) -> MirrorDescentState:
        """The state after the iteration from ``s`` accepted trial ``k`` (``accepted``: :meth:`trial`'s first
        four outputs) at step ``eta``.

        From a state not evaluated yet (``iteration`` -1, :meth:`init`) the accepted trial is the start
        itself: the state it leaves is the start's, at iteration 0 with the step size it was given, no
        momentum, and its rounding allowance (:meth:`slack`) computed.
        """
        phi, loss, pred, pred_grad = accepted
        fresh = s.iteration < 0
        halved = k > self._plain_trial(s, k)
        velocity = s.velocity
        if self.momentum > 0:
            velocity = tree_map(jnp.subtract, phi, s.phi)
        next_eta = jnp.where(~halved, eta * s.growth, jnp.where(eta > 0, eta, s.step_size * 0.5))
        # A loss no step can change accepts every step: without a cap the step size overflows to inf.
        next_eta = jnp.minimum(next_eta, jnp.finfo(next_eta.dtype).max * 1e-8)
        growth = jnp.where(halved, s.growth - (s.growth - self.min_growth) * 0.5, s.growth)
        # Ties keep the earlier iterate: only a strictly lower loss replaces it. From a converged warm start
        # every accepted step is a tie or a rise within the slack; with ties to the later iterate the fit
        # returned wherever that walk ended (a 9-attribute model at its optimum moved 1.5e-4 L1/N in 2,000
        # iterations at an equal loss). A select over the measured cells, not over the junction tree.
        better = loss < s.lowest
        best = tree_map(lambda a, b: jnp.where(better, a, b), phi, s.best_phi)
        # At the optimum no step lowers the loss and the step size halves away: a warm start continues from
        # the step of the last progress instead.
        best_step = jnp.where(fresh, s.step_size, jnp.where(loss < s.lowest, next_eta, s.best_step))
        best_pred, best_pred_grad = (tree_map(lambda a, b: jnp.where(better, a, b), new, old)
                                     for new, old in ((pred, s.best_pred), (pred_grad, s.best_pred_grad)))
        # A zero step is the last trial of a line search that found no step: the iterate goes back to the best
        # one, without momentum, at the step of the last progress. Momentum steps may rise by the rounding
        # allowance, which is larger early in a fit; once tidy has shrunk it, an iterate left that far above
        # the lowest loss failed every later search (float32: a 3-attribute chain stayed 1.6e-3 above its
        # optimum with 31 oracle calls a step, where a step from the best iterate still descends).
        failed = eta == 0
        stuck = jnp.where(better, 0, s.stuck + failed.astype(s.stuck.dtype))
        back = lambda here, there: tree_map(lambda a, b: jnp.where(failed, b, a), here, there)
        # The start keeps the step size it was given (the first trial's, unhalved: no growth).
        step = jnp.where(fresh, s.step_size, jnp.where(failed, best_step, next_eta))
        new = MirrorDescentState(
            s.params, s.base, back(phi, best), best, jnp.where(failed, s.lowest, loss), jnp.minimum(s.lowest, loss),
            back(pred, best_pred), back(pred_grad, best_pred_grad), step, s.iteration + 1, s.oracle_calls + 1 + k,
            s.slack, back(velocity, tree_map(jnp.zeros_like, velocity)), growth,
            (k == 0) & (self.momentum > 0) & ~fresh, best_step, stuck, best_pred, best_pred_grad, s.trial, s.trial_eta,
        )
        # The start's allowance, as tidy would compute it (a branch: later iterations pay nothing for it).
        return new._replace(slack=jax.lax.cond(fresh, lambda: self.slack(new), lambda: s.slack))

    def tidy(self, problem: Problem, state: MirrorDescentState) -> MirrorDescentState:
        """``state`` with its parameters (current and best) shifted so each measured table's largest entry
        is 0 (:meth:`Problem.center`), its base potentials so each clique's is (:meth:`Problem.tops`), the
        best iterate's potentials formed from them (``state.params``: what the fit returns), and the line
        search's rounding allowance (:meth:`slack`) refreshed.

        The shifts are constants per clique: the distributions are unchanged, and the velocity, a
        difference of parameters, needs none. They keep the parameters and potentials near 0 in float32
        (see :func:`pgmjax.graph.marginal_oracle.row_tops`). (With the L1 loss,
        :class:`pgmjax.estimation.continuation.Smoothed` puts the potentials in the junction tree's
        log-conditional gauge at each smoothing stage's end.)

        :func:`run` calls it after every compiled chunk (a pass over every table and no oracle call); call it
        between chunks when driving :meth:`step` yourself.
        """
        base = {k: t - top for (k, t), top in zip(state.base.items(), problem.tops(state.base).values())}
        phi, best = problem.center(state.phi), problem.center(state.best_phi)
        theta = problem.expand(base, best)
        return state._replace(params=theta, base=base, phi=phi, best_phi=best, slack=self.slack(state))

    def step(self, problem: Problem, s: MirrorDescentState) -> tuple[MirrorDescentState, StepInfo]:
        """One line-search trial (:meth:`schedule`, :meth:`trial`); an accepted one commits its iteration
        (:meth:`commit`), a rejected one leaves the state as it was, but for the trial's index and step.

        A step is a trial, not an iteration with a loop of trials inside: the driver's loop over steps is
        then one loop over trials, where a trial that passes commits its iteration inside a ``lax.cond``.
        XLA cannot hand a buffer from an inner loop's carry to the outer loop's, so the nested form wrote
        every table four more times per iteration (zeros into the inner carry, a copy of them in, the
        potentials and marginals copied out), a quarter of a fit's compiled kernels. Under ``jax.vmap``
        each member of a batch goes through its own trials and iterations.

        Every trial reads the rounding allowance ``s.slack`` (:meth:`tidy` refreshes it between chunks). The
        info is stalled once :attr:`patience` line searches have failed (each of them sending the iterate
        back to the best one, with no lower loss between): every later search would try the same halvings
        from the same iterate, 31 oracle calls each.
        """
        k = s.trial + 1
        eta, beta, last = self.schedule(s, k, s.trial_eta)
        phi, loss, pred, pred_grad, ok = self.trial(problem, s, eta, beta)
        accept = ok | last
        # One trial site in the program (the oracle is traced once); the commit is a branch, so a rejected
        # trial computes no velocity. (A select of every table instead of the branch took longer to compile.)
        s = jax.lax.cond(accept, lambda: self.commit(s, (phi, loss, pred, pred_grad), eta, k), lambda: s)
        s = s._replace(trial=jnp.where(accept, -1, k), trial_eta=eta)
        return s, self.info(s)
