"""Batched fits: B measurement sets of one structure fitted by one compiled program (``jax.vmap``).

Many fits often share a structure and differ only in their numbers: repeated noise draws of one
mechanism (confidence intervals, bias studies, hyper-parameter sweeps over the noise scale), or the same
measurements of B datasets. :func:`estimate_batch` fits all B at once: the estimators' pure ``init`` /
``step`` (:mod:`pgmjax.estimation.driver`) are mapped over a leading batch axis of the numbers (noisy answers,
noise scales, totals, Lipschitz constants, potentials) while the structure (junction tree, routing
arrays, query matrices) is shared. Each member follows exactly its own sequential trajectory: its own
step sizes and its own line search (mirror descent is advanced one line-search trial at a time, so a
member that accepts its step goes on while another backtracks), so member ``i`` of the result is the
model ``pgmjax.estimate`` fits to member ``i``'s measurements, up to rounding (relative differences
around 1e-13 in float64; float32 trajectories drift apart at the level of the loss's rounding error,
as two sequential float32 fits compiled differently would).

Where it pays: the members' arithmetic is that of B sequential fits, so batching saves per-operation
overhead (dispatch, loop control, small kernels), not arithmetic; sequential fits of one structure
already share their compiled programs. On a GPU a batch fills the device; on a small CPU, where these
fits are mostly compute-bound, the gain is modest (the performance pages have the measurements).

Two ways to give the B measurement sets:

* a list of B lists of :class:`~pgmjax.Measurement`, one list per member; every member lists the
  same cliques in the same order, with the same kinds of queries, the same query matrices and the
  same numbers of rows (the noisy answers and the noise scales may differ);
* a list of :class:`BatchedMeasurement` (a clique, answers with a leading batch axis of size B, a
  noise scale that is a scalar or one per member, an optional query shared by all members). A plain
  :class:`~pgmjax.Measurement` in such a list is shared by every member.

Example:
    >>> import numpy as np, pgmjax as pj
    >>> from pgmjax.estimation.batch import BatchedMeasurement, estimate_batch
    >>> dom = pj.Domain({"a": 2, "b": 3})
    >>> truth = np.array([[10., 20, 30], [5, 5, 30]])
    >>> ys = truth + np.random.default_rng(0).normal(0, 1, size=(8, 2, 3))   # 8 noise draws
    >>> models = estimate_batch(dom, [BatchedMeasurement(("a", "b"), ys, stddev=1.0)], iters=200)
    >>> len(models), models.marginal("a").shape
    (8, (8, 2))
    >>> models.member(3)                                 # an ordinary GraphicalModel  # doctest: +SKIP

The pure pieces, to jit, vmap or differentiate a fit yourself: :func:`make_problem` builds one
member's :class:`~pgmjax.estimation.driver.Problem`, :func:`stack_problems` stacks B of them along a
leading axis, :func:`batch_axes` gives the ``in_axes`` of a stacked problem for ``jax.vmap``, and
:class:`Batched` wraps an estimator into one over a stacked problem::

    import jax, jax.numpy as jnp
    from pgmjax import MirrorDescent
    from pgmjax.estimation.batch import batch_axes, make_problem, stack_problems, zeros
    from pgmjax.compiler import jit   # pgmjax's compiler options (an XLA:CPU workaround)

    problem = stack_problems([make_problem(dom, ms) for ms in members])   # members: B lists
    est = MirrorDescent()

    @jit
    def fit(problem, theta):
        def one(p, th):                 # one member: an ordinary, unbatched fit of 100 iterations
            s, info = est.advance(p, *est.init(p, th, 1.0 / (p.lipschitz * p.total)), 100)
            return s.params, info.loss
        return jax.vmap(one, in_axes=(batch_axes(problem), 0))(problem, theta)

    theta, loss = fit(problem, zeros(problem))   # theta: {block: (B, ...)}, loss: (B,)

:class:`Batched` does the mapping for you (its state has a leading batch axis on every leaf), and
differentiates like any JAX code; e.g. the gradient of the members' losses after 20 steps of dual
averaging with respect to every noisy answer (mirror descent's line search is a ``while_loop``: forward
mode only)::

    da = Batched(pj.DualAveraging())

    def final_loss(problem):
        s, _ = da.init(problem, zeros(problem))
        s, _ = jax.lax.fori_loop(0, 20, lambda _, c: da.step(problem, c[0]), (s, _))
        return s.averaged_loss.sum()

    g = jit(jax.grad(final_loss))(problem)   # g.meas.arrays[i]["y"]: (B, ...) like the answers

:func:`run_batch` drives a :class:`Batched` estimator in compiled chunks like
:func:`pgmjax.estimation.driver.run`; :func:`estimate_batch` is validation + :func:`make_batch_problem` +
:func:`run_batch` + a batch of models (a :class:`~pgmjax.GraphicalModel` with a batch axis).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import continuation, driver, inputs, memory
from .losses import gathered_cells
from ..model.fit_report import Fit, FitReport
from ..model.graphical_model import GraphicalModel
from .contract import Estimator
from .batch_problem import (
    LOSSES,
    METHODS,
    BatchedMeasurement,
    batched_ids,
    per_member,
    batch_axes,
    check_dtype,
    check_fit_options,
    make_batch_problem,
    make_problem,
    stack_problems,
    zeros,
)
from .. import compiler
from ..compiler import jit
from ..graph.program_choice import emitters_for
from ..data.domain import CliqueLike, Domain
from ..queries.constraints import check_constraints

__all__ = [
    "BatchedMeasurement",
    "Batched",
    "estimate_batch",
    "make_problem",
    "make_batch_problem",
    "stack_problems",
    "batch_axes",
    "zeros",
    "run_batch",
    "auto_group",
    "spread",
    "check_fit_options",
    "check_dtype",
]

# --------------------------------------------------------------------------- the batched estimator
@dataclass(frozen=True)
class Batched(Estimator):
    """An estimator over a stacked problem: ``estimator``'s ``init`` and ``step`` mapped over the batch axis.

    Args:
        estimator: a :class:`~pgmjax.MirrorDescent`, :class:`~pgmjax.DualAveraging` or
            :class:`~pgmjax.LBFGS` (any hashable estimator with pure ``init`` / ``step``).

        group: members per vectorised group in :meth:`advance` (None: all B at once). Groups run one after
            the other inside the compiled program (``lax.map``); the last is padded with copies of the last
            member. On a CPU a group whose working set stays in cache runs faster per member than the whole
            batch (see :func:`estimate_batch`'s ``group``).

    ``init(problem, theta, step_size)`` takes potentials ``{block: (B, ...)}`` and step sizes ``(B,)`` (or a
    scalar); the state and the info are the inner estimator's with a leading batch axis on every leaf.
    """

    estimator: Any
    group: int | None = None

    @property
    def differentiable(self) -> bool:
        return self.estimator.differentiable

    def init(self, problem: driver.Problem, theta: dict, step_size=1.0):
        dt = problem.total.dtype
        step = jnp.broadcast_to(jnp.asarray(1.0 if step_size is None else step_size, dt), problem.total.shape)
        return jax.vmap(self.estimator.init, in_axes=(batch_axes(problem), 0, 0))(problem, theta, step)

    def step(self, problem: driver.Problem, state):
        """One step of every member, in lock step (mirror descent: one line-search trial each)."""
        return jax.vmap(self.estimator.step, in_axes=(batch_axes(problem), 0))(problem, state)

    def tidy(self, problem: driver.Problem, state):
        return jax.vmap(self.estimator.tidy, in_axes=(batch_axes(problem), 0))(problem, state)

    def advance(self, problem: driver.Problem, state, info, num_steps):
        """``num_steps`` iterations of every member, each on its own schedule: the inner estimator's
        :meth:`~pgmjax.Estimator.advance` mapped over the members (its ``while_loop`` runs until the slowest
        member is done; a member that has finished, or stalled, idles). An estimator whose steps are
        iterations that never stall (:attr:`~pgmjax.estimation.contract.Traits.lock_step`) steps every member together.

        A member makes the trials and commits it makes alone: in a lock-step loop every member would pay
        for the backtracks of whichever member backtracks (mirror descent: about two oracle calls per
        iteration at B = 16, where one member alone averages 1.25).
        """
        batch = int(np.shape(problem.total)[0])
        if self.group is None or self.group >= batch:
            return self._advance(problem, state, info, num_steps)
        g = int(self.group)
        groups = -(-batch // g)
        pad = groups * g - batch

        def split(a):  # (B, ...) -> (groups, g, ...), padded with copies of the last member
            if pad:
                a = jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)])
            return a.reshape(groups, g, *a.shape[1:])

        leaves, treedef = jax.tree_util.tree_flatten(problem)
        ids = batched_ids(problem)
        flags = [id(a) in ids for a in leaves]
        mapped = [split(a) for a, f in zip(leaves, flags) if f]

        def one(xs):
            it = iter(xs[0])
            sub = jax.tree_util.tree_unflatten(treedef, [next(it) if f else a for a, f in zip(leaves, flags)])
            return self._advance(sub, xs[1], xs[2], num_steps)

        out = jax.lax.map(one, (mapped, jax.tree_util.tree_map(split, state), jax.tree_util.tree_map(split, info)))
        return jax.tree_util.tree_map(lambda a: a.reshape(groups * g, *a.shape[2:])[:batch], out)

    def _advance(self, problem, state, info, num_steps):
        if self.estimator.traits.lock_step:  # every member steps together: no per-member selects
            target = jnp.maximum(state.iteration[0], 0) + num_steps
            state, info = jax.lax.while_loop(lambda c: c[0].iteration[0] < target,
                                             lambda c: self.step(problem, c[0]), (state, info))
            return self.tidy(problem, state), info

        def one(p, s, i):
            return self.estimator.advance(p, s, i, num_steps)

        return jax.vmap(one, in_axes=(batch_axes(problem), 0, 0))(problem, state, info)


def spread(problem: driver.Problem, theta: dict, devices: int | None = None):
    """A stacked problem and its potentials placed over local devices along the batch axis.

    Args:
        problem: a stacked problem (:func:`make_batch_problem`).
        theta: potentials ``{block: (B, ...)}``.
        devices: how many local devices (None: the most of ``jax.local_devices()`` that divide B evenly).

    Returns:
        ``(problem, theta, shards)``: with several devices, the per-member leaves (:func:`batch_axes`) and the
        potentials split along their leading axis (``jax.sharding.NamedSharding`` over a one-axis mesh) and
        the shared leaves replicated; with one, the inputs unchanged. ``shards``: the devices used.
    """
    available = jax.local_devices()
    batch = int(np.shape(problem.total)[0])
    most = len(available) if devices is None else min(devices, len(available))
    shards = max(k for k in range(1, most + 1) if batch % k == 0)
    if shards == 1:
        return problem, theta, 1
    mesh = jax.sharding.Mesh(np.asarray(available[:shards]), ("batch",))
    split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
    whole = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    leaves, treedef = jax.tree_util.tree_flatten(problem)
    per_member = batched_ids(problem)
    placed = [jax.device_put(a, split if id(a) in per_member else whole) for a in leaves]
    return (jax.tree_util.tree_unflatten(treedef, placed), jax.device_put(theta, split), shards)


#: Cells of potentials per vectorised group that :func:`auto_group` aims at on a CPU.
CPU_GROUP_CELLS = 2**20


def auto_group(problem: driver.Problem) -> int | None:
    """Members per vectorised group for a stacked problem on the default backend.

    On a CPU the fits are compute-bound, and a group's arrays (a few copies of the potentials per
    member) fall out of cache as the group grows: the fastest groups held about :data:`CPU_GROUP_CELLS`
    cells (the changelog has the measurements). So: about ``CPU_GROUP_CELLS / model cells`` members, evened
    out so the last group is nearly full. Elsewhere (GPU, TPU) None: all at once.
    """
    batch = int(np.shape(problem.total)[0])
    if jax.default_backend() != "cpu":
        return None
    target = max(1, min(batch, CPU_GROUP_CELLS // max(problem.plan.cells, 1)))
    groups = -(-batch // target)
    return None if groups == 1 else -(-batch // groups)


@jit(engine=True, emitters=emitters_for)
def _loss(problem: driver.Problem, theta: dict):
    """Per member: the exact loss of the potentials' model."""
    def one(p, th):
        return p.exact_loss(p.marginals(th))

    return jax.vmap(one, in_axes=(batch_axes(problem), 0))(problem, theta)


def run_batch(
    estimator,
    problem: driver.Problem,
    theta: dict,
    iters: int,
    *,
    step_size=None,
    chunk: int = 50,
    tol: float | None = None,
    callback: Callable[[dict], Any] | None = None,
    group: int | str | None = "auto",
):
    """Run an estimator on every member of a stacked problem, in compiled chunks (:func:`pgmjax.estimation.driver.run`).

    Args:
        estimator: an (unbatched) estimator, e.g. ``MirrorDescent()``; it is wrapped in :class:`Batched`.
        problem: a stacked problem (:func:`stack_problems` or :func:`make_batch_problem`).
        theta: initial potentials ``{block: (B, ...)}`` (:func:`zeros`).
        iters: iterations (the same for every member).
        step_size: mirror descent's first step: None (``1 / (L_b N_b)`` per member), a scalar or ``(B,)``.
        chunk: iterations per compiled call; the host sees the state between chunks.
        tol: stop when every member's loss changes by less than ``tol`` (relative) over a chunk.
        callback: called after each chunk with a dict (iteration, loss ``(B,)``, oracle_calls ``(B,)``,
            seconds, state); returning True stops the run.
        group: members per vectorised group (:class:`Batched`): an int, None (all at once) or ``"auto"``
            (:func:`auto_group`).

    Returns:
        ``(params, state, history)``: the potentials ``{block: (B, ...)}``, the final batched state and the
        per-chunk dicts (``loss``: the exact loss of each member's returned potentials, a ``(B,)`` array).
    """
    if group == "auto":
        group = auto_group(problem)
    if step_size is None:
        step_size = 1.0 / (np.asarray(problem.lipschitz, np.float64) * np.asarray(problem.total, np.float64))
    else:
        step_size = np.broadcast_to(np.asarray(step_size, np.float64), np.shape(problem.total))
    # with the L1 loss each member runs its own smoothing stages (pgmjax.estimation.continuation), as its fit alone
    member = continuation.smoothed(estimator, problem.loss, iters)
    return driver.run(Batched(member, group), problem, theta, iters, step_size=step_size, chunk=chunk, tol=tol,
                      callback=callback, exact_loss=_loss)


# --------------------------------------------------------------------------- the public call
def estimate_batch(
    domain: Domain,
    measurements,
    method: str = "mirror_descent",
    iters: int = 1000,
    *,
    loss: str = "l2",
    total=None,
    dtype=None,
    chunk: int = 50,
    tol: float | None = None,
    callback: Callable[[dict], Any] | None = None,
    cliques: Sequence[CliqueLike] = (),
    step_size=None,
    group: int | str | None = "auto",
    devices: int | None = None,
    constraints: Sequence = (),
    report: bool = False,
) -> GraphicalModel | Fit:
    """Fit B graphical models of one structure at once (one compiled program, ``jax.vmap`` over the batch).

    Member ``i`` of the result is the model :func:`pgmjax.estimate` fits to member ``i``'s measurements
    with the same options (up to rounding).

    Args:
        domain: the :class:`~pgmjax.Domain`.
        measurements: a list of B lists of :class:`~pgmjax.Measurement` (same cliques, queries and rows in
            every list), or a list of :class:`BatchedMeasurement` (answers with a leading batch axis;
            a plain :class:`~pgmjax.Measurement` among them is shared by every member).
        method: ``"mirror_descent"``, ``"dual_averaging"``, ``"lbfgs"`` or an estimator instance (in a batch, L-BFGS has no
            mirror-descent finish: a stalled member stays at its best iterate, so its model can be further
            from the optimum than :func:`pgmjax.estimate`'s).
        iters: iterations (every member runs the same number).
        loss: ``"l2"`` or ``"l1"`` (``"l1"`` not with dual averaging).
        total: None (each member's total estimated from its measurements), a scalar, or one per member ``(B,)``.
        dtype: ``jnp.float32`` (default) or ``jnp.float64``.
        chunk: iterations per compiled call.
        tol: stop when every member's loss changes by less than ``tol`` (relative) over a chunk.
        callback: called after each chunk with a dict (iteration, loss ``(B,)``, oracle_calls ``(B,)``,
            seconds, state); return True to stop.
        cliques: extra cliques every model must hold.
        step_size: mirror descent's first step: None (``1 / (L N)`` per member), a scalar or ``(B,)``.
        group: members vectorised together; groups run one after the other inside the one compiled
            program. ``"auto"`` (:func:`auto_group`): on a CPU, groups of about ``2**18 / model cells``
            members (their working set stays in cache), elsewhere all B at once; None: all at once; or an int.
            The results do not depend on it.
        devices: local devices the batch is spread over (its members split along the batch axis, each
            device fitting its share; the compiled program is partitioned by XLA, nothing gathered onto one
            device): None, as many of ``jax.local_devices()`` as divide B evenly; 1, one device. With
            several devices the members are not grouped (``group`` is ignored).
        constraints: :class:`pgmjax.Constraint` objects every member holds, as :func:`pgmjax.estimate` does (their
            cliques join the model, their forbidden cells stay at log-potential ``-inf``); no dependency is
            eliminated and no forbidden mass reported in a batch.
        report: also return the batch's :class:`~pgmjax.FitReport` (losses and steps ``(B,)``, the per-chunk log;
            ``report.member(i)`` is member ``i``'s), as a :class:`~pgmjax.Fit` ``(models, report)``.

    Returns:
        A batch of models: one :class:`~pgmjax.GraphicalModel` whose numbers have a leading axis of size B
        (``len(model)``, ``model.member(i)``; queries answer ``(B, ...)``); with ``report=True`` a
        :class:`~pgmjax.Fit`.

    Raises:
        ValueError / TypeError: before anything is compiled, naming the measurement, member and clique
            that breaks the batch (batch sizes, cliques, queries, stddev shapes) or the bad option.
    """
    caller = "estimate_batch"
    if isinstance(method, str) and method not in METHODS:
        raise ValueError(f"{caller}: unknown method {method!r}; supported: {list(METHODS)} or a pgmjax.Estimator instance")
    if callable(loss) or loss not in LOSSES:
        raise ValueError(f"{caller}: loss must be one of {list(LOSSES)} (a callable loss is not supported in a batch), got {loss!r}")
    estimator, method, dtype = inputs.check_options(method, loss, iters, dtype, caller=caller)
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"{caller}: chunk must be a positive integer, got {chunk!r}")
    compiler.bound_compiled(compiler.MAX_LIVE_PROGRAMS)  # a loop over new structures holds a bounded number
    constraints = check_constraints(domain, constraints, caller)
    cliques = list(cliques) + [c.attributes for c in constraints]
    problem = make_batch_problem(domain, measurements, loss=loss, total=total, dtype=dtype, cliques=cliques, caller=caller)
    batch = int(problem.total.shape[0])
    # Every member's tables are held at once (a batch axis on each): the fit's peak, counted before theta exists.
    memory.check_fit(domain, problem.plan.cliques, method, dtype, caller, batch=batch,
                     param_cells=sum(domain.size(c) for c in _measured_cliques(measurements)),
                     gathered=gathered_cells(problem.meas))
    if step_size is not None:
        steps = per_member(step_size, batch, "step_size", caller)
        if not all(np.isfinite(s) and s > 0 for s in steps):
            raise ValueError(f"{caller}: step_size must be positive and finite, got {step_size!r}")
        step_size = np.asarray(steps)
    if not (group is None or group == "auto" or (isinstance(group, (int, np.integer)) and not isinstance(group, bool) and group >= 1)):
        raise ValueError(f"{caller}: group must be a positive integer, None or 'auto', got {group!r}")
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 1):
        raise ValueError(f"{caller}: devices must be a positive integer or None, got {devices!r}")
    theta = zeros(problem)
    if constraints:  # every member starts from the constraints' log-masks (a leading axis of one broadcasts)
        masks = inputs.starting_potentials(problem.plan, None, constraints, theta[next(iter(theta))].dtype)
        theta = {k: theta[k] + masks[k][None] for k in theta}
    problem, theta, shards = spread(problem, theta, devices)
    params, state, history = run_batch(
        estimator, problem, theta, int(iters), step_size=step_size, chunk=int(chunk),
        tol=tol, callback=callback, group=None if shards > 1 else group,
    )
    losses, steps = driver.reported(history)
    if losses is None:
        losses = _loss(problem, params)
    model = GraphicalModel(problem.plan, params, np.asarray(problem.total, np.float64))
    fitted = FitReport(np.asarray(losses, np.float64), steps, history)
    _check_fitted_members(model, fitted)
    return Fit(model, fitted) if report else model


def _measured_cliques(measurements) -> list:
    """The measured cliques of one member (every member has the same): a BatchedMeasurement's, or the first
    member's list's."""
    items = list(measurements)
    if items and isinstance(items[0], (list, tuple)):
        items = list(items[0])
    return [tuple(m.clique) for m in items if hasattr(m, "clique")]


def _check_fitted_members(model: GraphicalModel, report: FitReport) -> None:
    """:func:`pgmjax.estimation.inputs.check_fitted` (finite potentials, marginals and loss; marginals summing to the
    total) on every member, with the marginals each member answers from."""
    for b in range(len(model)):
        m = model.member(b)
        try:
            inputs.check_fitted(model.plan, m.theta, m.marginal_blocks, m.total, float(report.loss[b]))
        except FloatingPointError as e:
            raise FloatingPointError(f"estimate_batch: batch member {b}: {e}") from e


