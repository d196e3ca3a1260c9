"""Batched fits: B measurement sets of one structure fitted by one compiled program (``jax.vmap``).

Many fits often share a structure and differ only in their numbers: repeated noise draws of one
mechanism (confidence intervals, bias studies, hyper-parameter sweeps over the noise scale), or the same
measurements of B datasets. :func:`estimate_batch` fits all B at once: the estimators' pure ``init`` /
``step`` (:mod:`pgmjax.estimation`) are mapped over a leading batch axis of the numbers (noisy answers,
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
fits are mostly compute-bound, the gain is modest: ``bench/results/batch_cpu.md`` measures it.

Two ways to give the B measurement sets:

* a list of B lists of :class:`~pgmjax.Measurement`, one list per member; every member lists the
  same cliques in the same order, with the same kinds of queries, the same query matrices and the
  same numbers of rows (the noisy answers and the noise scales may differ);
* a list of :class:`BatchedMeasurement` (a clique, answers with a leading batch axis of size B, a
  noise scale that is a scalar or one per member, an optional query shared by all members). A plain
  :class:`~pgmjax.Measurement` in such a list is shared by every member.

Example:
    >>> import numpy as np, pgmjax as pj
    >>> from pgmjax.batch import BatchedMeasurement, estimate_batch
    >>> dom = pj.Domain({"a": 2, "b": 3})
    >>> truth = np.array([[10., 20, 30], [5, 5, 30]])
    >>> ys = truth + np.random.default_rng(0).normal(0, 1, size=(8, 2, 3))   # 8 noise draws
    >>> models = estimate_batch(dom, [BatchedMeasurement(("a", "b"), ys, stddev=1.0)], iters=200)
    >>> len(models), models.marginal("a").shape
    (8, (8, 2))
    >>> models.member(3)                                 # an ordinary GraphicalModel  # doctest: +SKIP

The pure pieces, to jit, vmap or differentiate a fit yourself: :func:`make_problem` builds one
member's :class:`~pgmjax.estimation.Problem`, :func:`stack_problems` stacks B of them along a
leading axis, :func:`batch_axes` gives the ``in_axes`` of a stacked problem for ``jax.vmap``, and
:class:`Batched` wraps an estimator into one over a stacked problem::

    import jax, jax.numpy as jnp
    from pgmjax import MirrorDescent
    from pgmjax.batch import batch_axes, make_problem, stack_problems, zeros
    from pgmjax.compiler import jit   # pgmjax's compiler options (an XLA:CPU workaround)

    problem = stack_problems([make_problem(dom, ms) for ms in members])   # members: B lists
    est = MirrorDescent()

    @jit
    def fit(problem, theta):
        def one(p, th):                 # one member: an ordinary, unbatched fit
            s = est.init(p, th, 1.0 / (p.lipschitz * p.total))
            s = jax.lax.fori_loop(0, 100, lambda _, s: est.step(p, s), s)
            return s.theta, s.loss
        return jax.vmap(one, in_axes=(batch_axes(problem), 0))(problem, theta)

    theta, loss = fit(problem, zeros(problem))   # theta: {block: (B, ...)}, loss: (B,)

:class:`Batched` does the mapping for you (its state has a leading batch axis on every leaf), and
differentiates like any JAX code; e.g. the gradient of the members' losses after 20 steps of dual
averaging with respect to every noisy answer (mirror descent's line search is a ``while_loop``: forward
mode only)::

    da = Batched(pj.DualAveraging())

    def final_loss(problem):
        s = da.init(problem, zeros(problem))
        s = jax.lax.fori_loop(0, 20, lambda _, s: da.step(problem, s), s)
        return s.averaged_loss.sum()

    g = jit(jax.grad(final_loss))(problem)   # g.meas.arrays[i]["y"]: (B, ...) like the answers

:func:`run_batch` drives a :class:`Batched` estimator in compiled chunks like
:func:`pgmjax.estimation.run`; :func:`estimate_batch` is validation + :func:`make_batch_problem` +
:func:`run_batch` + a :class:`BatchedModel`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import estimation, inference, oracle
from . import losses as _losses
from . import queries as queries_mod
from .compiler import jit
from .domain import Clique, CliqueLike, Domain
from .measurement import Measurement, estimate_total, validate_measurements
from .model import GraphicalModel, _evidence_query

__all__ = [
    "BatchedMeasurement",
    "BatchedModel",
    "Batched",
    "estimate_batch",
    "make_problem",
    "make_batch_problem",
    "stack_problems",
    "batch_axes",
    "zeros",
    "run_batch",
    "auto_group",
    "check_fit_options",
    "check_dtype",
]

#: Methods :func:`estimate_batch` supports.
METHODS = ("mirror_descent", "dual_averaging", "lbfgs")
#: Losses :func:`estimate_batch` supports (a callable loss has no per-member data to map over).
LOSSES = ("l2", "l1")


# --------------------------------------------------------------------------- shared validation
def check_fit_options(method: str, loss, iters, dtype, *, caller: str = "estimate"):
    """Validate a fit's method, loss, iterations and dtype (before anything is compiled).

    The checks of :func:`pgmjax.estimate` (messages prefixed with ``caller``).

    Args:
        method: a key of :data:`pgmjax.estimation.METHODS`.
        loss: ``"l2"``, ``"l1"`` or a callable.
        iters: a non-negative integer.
        dtype: None (float32), float32 or float64 (float64 needs x64 enabled).
        caller: the function named in the messages.

    Returns:
        The dtype as a ``numpy.dtype``.

    Raises:
        ValueError: naming the bad option.
    """
    if method not in estimation.METHODS:
        raise ValueError(f"{caller}: unknown method {method!r}; expected one of {sorted(estimation.METHODS)}")
    if not (callable(loss) or loss in ("l2", "l1")):
        raise ValueError(f"{caller}: loss must be 'l2', 'l1' or a callable, got {loss!r}")
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise ValueError(f"{caller}: iters must be a non-negative integer, got {iters!r}")
    if method == "dual_averaging" and loss != "l2":
        raise ValueError(f"{caller}: dual_averaging needs the smooth 'l2' loss (its step sizes come from the Lipschitz constant)")
    return check_dtype(dtype, caller=caller)


def check_dtype(dtype, *, caller: str = "estimate"):
    """None (float32), float32 or float64 (which needs x64 enabled) as a ``numpy.dtype``; ValueError otherwise."""
    dtype = jnp.dtype(dtype or jnp.float32)
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError(f'{caller}: float64 needs jax.config.update("jax_enable_x64", True) before any computation')
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"{caller}: dtype must be float32 or float64, got {dtype}")
    return dtype


def _check_total(total, caller: str) -> float:
    total = float(total)
    if not np.isfinite(total) or total <= 0:
        raise ValueError(f"{caller}: total must be positive and finite, got {total}")
    return total


# --------------------------------------------------------------------------- one member's problem
def make_problem(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    loss="l2",
    total: float | None = None,
    dtype=None,
    cliques: Sequence[CliqueLike] = (),
) -> estimation.Problem:
    """Build the :class:`~pgmjax.estimation.Problem` of one fit (validated), as :func:`pgmjax.estimate` does.

    Args:
        domain: the :class:`~pgmjax.Domain`.
        measurements: :class:`~pgmjax.Measurement` objects.
        loss: ``"l2"``, ``"l1"`` or a callable (see :func:`pgmjax.estimate`).
        total: the number of records; None estimates it from the measurements.
        dtype: float32 (default) or float64.
        cliques: extra cliques the model must hold.

    Returns:
        The problem: ``plan`` (structure), ``meas``, ``total`` and ``lipschitz`` (scalars), ``smoothing`` 0.
        Mirror descent's default first step is ``1 / (problem.lipschitz * problem.total)``.

    Example:
        >>> p = make_problem(pj.Domain({"a": 2}), [pj.Measurement("a", [3.0, 5.0])])   # doctest: +SKIP
        >>> float(p.total)                                                              # doctest: +SKIP
        8.0
    """
    caller = "make_problem"
    if not isinstance(domain, Domain):
        raise TypeError(f"{caller}: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    if not (callable(loss) or loss in ("l2", "l1")):
        raise ValueError(f"{caller}: loss must be 'l2', 'l1' or a callable, got {loss!r}")
    dtype = check_dtype(dtype, caller=caller)
    measurements = list(measurements)
    validate_measurements(domain, measurements)
    extra = [domain.check_clique(c, what="clique") for c in cliques]
    return _build_problem(domain, measurements, loss, total, dtype, extra, caller)


def _build_problem(domain, measurements, loss, total, dtype, extra, caller) -> estimation.Problem:
    """The problem of validated measurements (``extra``: checked extra cliques; ``dtype``: checked)."""
    model_cliques = [m.clique for m in measurements] + list(extra)
    if not model_cliques:
        raise ValueError(f"{caller}: no measurements and no cliques: nothing to fit")
    if not measurements and not callable(loss):
        raise ValueError(f"{caller}: no measurements; give measurements or a callable loss")
    if total is None:
        if not measurements:
            raise ValueError(f"{caller}: total is unknown; pass total= when there are no measurements")
        try:
            total, _ = estimate_total(measurements)
        except ValueError as e:
            raise ValueError(f"{caller}: {e}") from e
    total = _check_total(total, caller)
    plan = oracle.make_plan(domain, model_cliques)
    meas = _losses.stack_measurements(plan, measurements, dtype)
    lipschitz = _losses.lipschitz_constant(measurements) if measurements else 1.0
    return estimation.Problem(
        plan, meas, jnp.asarray(total, dtype), jnp.asarray(lipschitz, dtype), jnp.zeros((), dtype), loss
    )


# --------------------------------------------------------------------------- stacking and axes
def _batched_ids(problem: estimation.Problem) -> set[int]:
    """ids of the leaves of ``problem`` that differ between members: answers, noise, total, Lipschitz."""
    ids = {id(problem.total), id(problem.lipschitz)}
    for group in problem.meas.arrays:
        ids |= {id(group[k]) for k in ("y", "inv_std")}
    return ids


def batch_axes(problem: estimation.Problem) -> estimation.Problem:
    """The ``in_axes`` of a problem for ``jax.vmap``: 0 on the per-member leaves, None on the shared ones.

    Per member: the noisy answers ``y``, the inverse noise scales, ``total`` and ``lipschitz``. Shared
    (one copy): the plan's routing arrays, the query matrices, the group indices and ``smoothing``.
    Works on a concrete or a traced problem (inside ``jit``).

    Returns:
        A pytree of the problem's structure holding 0 or None at each leaf.
    """
    leaves, treedef = jax.tree_util.tree_flatten(problem)
    batched = _batched_ids(problem)
    return jax.tree_util.tree_unflatten(treedef, [0 if id(a) in batched else None for a in leaves])


def stack_problems(problems: Sequence[estimation.Problem]) -> estimation.Problem:
    """Stack B problems of one structure into one whose per-member leaves have a leading axis of size B.

    Args:
        problems: problems from :func:`make_problem` with the same cliques, measurement structure,
            query matrices, loss and dtype (the answers, noise scales and totals may differ).

    Returns:
        A :class:`~pgmjax.estimation.Problem`; map over it with ``jax.vmap(..., in_axes=batch_axes(p))``.

    Raises:
        ValueError: when the problems do not share one structure.
    """
    problems = list(problems)
    if not problems:
        raise ValueError("stack_problems: no problems (the batch is empty)")
    for b, p in enumerate(problems):
        if not isinstance(p, estimation.Problem):
            raise TypeError(f"stack_problems: problem {b} is a {type(p).__name__}, expected a Problem")
    first_leaves, treedef = jax.tree_util.tree_flatten(problems[0])
    batched = _batched_ids(problems[0])
    per_member = [first_leaves]
    for b, p in enumerate(problems[1:], 1):
        leaves, td = jax.tree_util.tree_flatten(p)
        if td != treedef or any(np.shape(a) != np.shape(f) or a.dtype != f.dtype for a, f in zip(leaves, first_leaves)):
            raise ValueError(
                f"stack_problems: problem {b} differs from problem 0 in its structure (model cliques, "
                "measurement cliques, kinds or shapes, loss or dtype); a batch shares one structure"
            )
        per_member.append(leaves)
    out = []
    for i, first in enumerate(first_leaves):
        if id(first) in batched:
            out.append(jnp.asarray(np.stack([np.asarray(leaves[i]) for leaves in per_member]), first.dtype))
            continue
        for b, leaves in enumerate(per_member[1:], 1):
            if leaves[i] is not first and not np.array_equal(np.asarray(leaves[i]), np.asarray(first)):
                raise ValueError(
                    f"stack_problems: problem {b} has other query matrices (or smoothing) than problem 0; "
                    "the members of a batch share their queries"
                )
        out.append(first)
    return jax.tree_util.tree_unflatten(treedef, out)


def zeros(problem: estimation.Problem) -> dict:
    """All-zero potentials (uniform models) for every member of a stacked problem: ``{block: (B, ...)}``."""
    b = int(np.shape(problem.total)[0])
    return {k: jnp.zeros((b, *s), problem.total.dtype) for k, s in problem.plan.units}


# --------------------------------------------------------------------------- batched measurements
class BatchedMeasurement:
    """B noisy answer vectors to the same linear queries of one clique: one measurement per batch member.

    Args:
        clique: the measured attributes (as for :class:`~pgmjax.Measurement`).
        y: the answers with a leading batch axis: ``(B, rows)`` or ``(B, *shape)`` (e.g. ``(B, *marginal
            shape)`` for the identity query).
        stddev: noise standard deviation: a scalar (every member), ``(B,)`` (one per member) or
            ``(B, rows)`` (per member and row).
        query: None (identity), a dense matrix or a tuple of Kronecker factors, shared by every member.

    Every member is checked as a :class:`~pgmjax.Measurement` at construction; ``member(i)`` returns it.

    Example:
        >>> m = BatchedMeasurement(("a", "b"), np.zeros((4, 2, 3)), stddev=[1.0, 2.0, 3.0, 4.0])
        >>> len(m), m.member(2).stddev
        (4, array(3.))
    """

    __slots__ = ("clique", "y", "stddev", "query", "_members")

    def __init__(self, clique: CliqueLike, y, stddev=1.0, query=None):
        y = np.asarray(y, dtype=np.float64)
        name = f"BatchedMeasurement on {tuple(clique) if not isinstance(clique, str) else (clique,)}"
        if y.ndim < 2:
            raise ValueError(
                f"{name}: y needs a leading batch axis: shape (B, rows) or (B, *shape), got shape {y.shape}"
            )
        batch = y.shape[0]
        if batch == 0:
            raise ValueError(f"{name}: the batch axis of y is empty")
        flat = y.reshape(batch, -1)
        s = np.asarray(stddev, dtype=np.float64)
        if s.ndim == 0:
            per = [s] * batch
        elif s.shape == (batch,):
            per = list(s)
        elif s.shape == (batch, flat.shape[1]):
            per = list(s)
        else:
            raise ValueError(
                f"{name}: stddev must be a scalar, one per batch member ({batch},) or one per member and row "
                f"({batch}, {flat.shape[1]}); got shape {s.shape}"
            )
        members = []
        for b in range(batch):
            try:
                members.append(Measurement(clique, flat[b], stddev=per[b], query=query))
            except ValueError as e:
                raise ValueError(f"{name}, batch member {b}: {e}") from e
        self._members = tuple(members)
        self.clique = members[0].clique
        self.query = members[0].query
        self.y = flat
        self.stddev = s

    def __len__(self) -> int:
        return len(self._members)

    def member(self, i: int) -> Measurement:
        """The :class:`~pgmjax.Measurement` of batch member ``i``."""
        return self._members[i]

    def __repr__(self) -> str:
        return f"BatchedMeasurement({self.clique}, batch {len(self)}, rows {self.y.shape[1]})"


def _members(measurements, caller: str) -> list[list[Measurement]]:
    """The B measurement lists of a batch given in either form (see the module docstring), checked to
    share one structure; ValueError naming the measurement, member and clique otherwise."""
    if isinstance(measurements, (Measurement, BatchedMeasurement)):
        raise TypeError(f"{caller}: measurements must be a list (of BatchedMeasurement, or of B lists of Measurement)")
    items = list(measurements)
    if not items:
        raise ValueError(f"{caller}: no measurements (give B lists of Measurement, or BatchedMeasurement objects)")
    if all(isinstance(m, (Measurement, BatchedMeasurement)) for m in items):
        sizes = {i: len(m) for i, m in enumerate(items) if isinstance(m, BatchedMeasurement)}
        if not sizes:
            raise ValueError(
                f"{caller}: every measurement is a plain Measurement, so there is no batch axis; give "
                "BatchedMeasurement objects (answers with a leading batch axis) or a list of B measurement lists"
            )
        i0 = min(sizes)
        batch = sizes[i0]
        for i, n in sizes.items():
            if n != batch:
                raise ValueError(
                    f"{caller}: measurement {i} on {items[i].clique} has {n} batch members but measurement "
                    f"{i0} on {items[i0].clique} has {batch}; every BatchedMeasurement needs the same batch size"
                )
        return [[m.member(b) if isinstance(m, BatchedMeasurement) else m for m in items] for b in range(batch)]
    if any(isinstance(m, (Measurement, BatchedMeasurement, str)) or not isinstance(m, Sequence) for m in items):
        raise TypeError(
            f"{caller}: measurements must be a list of BatchedMeasurement (and shared Measurement) objects, or a "
            "list of B lists of Measurement; got a mixture"
        )
    members = [list(ms) for ms in items]
    first = members[0]
    for b, ms in enumerate(members):
        for i, m in enumerate(ms):
            if isinstance(m, BatchedMeasurement):
                raise TypeError(f"{caller}: member {b}, measurement {i} is a BatchedMeasurement inside a member list; "
                                "give plain Measurement objects per member, or a flat list of BatchedMeasurement")
        if len(ms) != len(first):
            raise ValueError(
                f"{caller}: member {b} has {len(ms)} measurements but member 0 has {len(first)}; "
                "every member measures the same cliques in the same order"
            )
    return members


def _check_same_structure(members: list[list[Measurement]], caller: str) -> None:
    first = members[0]
    for b, ms in enumerate(members[1:], 1):
        for i, (m, m0) in enumerate(zip(ms, first)):
            where = f"{caller}: measurement {i} of member {b} (on {m.clique})"
            if m.clique != m0.clique:
                raise ValueError(
                    f"{where} is on another clique than measurement {i} of member 0 (on {m0.clique}); every member "
                    "measures the same cliques in the same order"
                )
            if m.kind != m0.kind or m.rows != m0.rows:
                raise ValueError(
                    f"{where} is a {m.kind} query with {m.rows} rows but measurement {i} of member 0 is a {m0.kind} "
                    f"query with {m0.rows} rows; the members of a batch share their queries"
                )
            if m.query is not m0.query:
                q, q0 = (m.query, m0.query) if m.kind == "kron" else ((m.query,), (m0.query,))
                if any(a is not c and (a.shape != c.shape or not np.array_equal(a, c)) for a, c in zip(q, q0)):
                    raise ValueError(
                        f"{where} has other query matrices than measurement {i} of member 0; the members of a "
                        "batch share their queries (only the answers and the noise scales differ)"
                    )


def _per_member(value, batch: int, what: str, caller: str) -> list:
    """A scalar or one value per member, as a list of ``batch`` values (None stays None)."""
    if value is None:
        return [None] * batch
    a = np.asarray(value, dtype=np.float64)
    if a.ndim == 0:
        return [float(a)] * batch
    if a.shape != (batch,):
        raise ValueError(f"{caller}: {what} must be a scalar or one per batch member ({batch},), got shape {a.shape}")
    return [float(x) for x in a]


def make_batch_problem(
    domain: Domain,
    measurements,
    *,
    loss="l2",
    total=None,
    dtype=None,
    cliques: Sequence[CliqueLike] = (),
    caller: str = "make_batch_problem",
) -> estimation.Problem:
    """Validate a batch of measurement sets and build its stacked :class:`~pgmjax.estimation.Problem`.

    Args:
        domain: the :class:`~pgmjax.Domain`.
        measurements: B lists of :class:`~pgmjax.Measurement`, or a list of :class:`BatchedMeasurement`.
        loss: ``"l2"`` or ``"l1"``.
        total: None (each member's total estimated from its measurements), a scalar, or one per member.
        dtype: float32 (default) or float64.
        cliques: extra cliques the model must hold.

    Returns:
        The stacked problem (see :func:`stack_problems`); ``problem.total.shape == (B,)``.
    """
    if not isinstance(domain, Domain):
        raise TypeError(f"{caller}: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    if callable(loss) or loss not in LOSSES:
        raise ValueError(f"{caller}: loss must be one of {list(LOSSES)} in a batched fit, got {loss!r}")
    members = _members(measurements, caller)
    for b, ms in enumerate(members):
        try:
            validate_measurements(domain, ms)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{caller}: member {b}: {e}") from e
        if not ms:
            raise ValueError(f"{caller}: member {b} has no measurements")
    _check_same_structure(members, caller)
    dtype = check_dtype(dtype, caller=caller)
    extra = [domain.check_clique(c, what="clique") for c in cliques]
    totals = _per_member(total, len(members), "total", caller)
    for b, t in enumerate(totals):
        if t is not None:
            _check_total(t, f"{caller}: member {b}")
    problems = []
    for b, ms in enumerate(members):
        problems.append(_build_problem(domain, ms, loss, totals[b], dtype, extra, f"{caller}: member {b}"))
    return stack_problems(problems)


# --------------------------------------------------------------------------- the batched estimator
@dataclass(frozen=True)
class Batched:
    """An estimator over a stacked problem: ``estimator``'s ``init`` and ``step`` mapped over the batch axis.

    Args:
        estimator: a :class:`~pgmjax.MirrorDescent`, :class:`~pgmjax.DualAveraging` or
            :class:`~pgmjax.LBFGS` (any hashable estimator with pure ``init`` / ``step`` / ``params``).

        group: members per vectorised group in :meth:`advance` (None: all B at once). Groups run one after
            the other inside the compiled program (``lax.map``); the last is padded with copies of the last
            member. On a CPU a group whose working set stays in cache runs faster per member than the whole
            batch (see :func:`estimate_batch`'s ``group``).

    ``init(problem, theta, step_size)`` takes potentials ``{block: (B, ...)}`` and step sizes ``(B,)`` (or a
    scalar); the state is the inner estimator's with a leading batch axis on every leaf.
    """

    estimator: Any
    group: int | None = None

    def params(self, state) -> dict:
        return self.estimator.params(state)

    def init(self, problem: estimation.Problem, theta: dict, step_size=1.0):
        dt = problem.total.dtype
        step = jnp.broadcast_to(jnp.asarray(1.0 if step_size is None else step_size, dt), problem.total.shape)
        return jax.vmap(self.estimator.init, in_axes=(batch_axes(problem), 0, 0))(problem, theta, step)

    def step(self, problem: estimation.Problem, state):
        """One iteration of every member, in lock step (mirror descent: a member's line search waits for
        the slowest member's; see :meth:`advance`)."""
        return jax.vmap(self.estimator.step, in_axes=(batch_axes(problem), 0))(problem, state)

    def advance(self, problem: estimation.Problem, state, num_steps):
        """``num_steps`` iterations of every member: the same states as ``num_steps`` calls of :meth:`step`.

        Mirror descent (exactly :class:`~pgmjax.MirrorDescent`) is advanced one line-search trial at a time
        instead: in a lock-step batch every member pays for the backtracks of whichever member backtracks
        (about two oracle calls per iteration at B = 16 where one member alone averages 1.25), while here a
        member that has accepted its step goes on with its next iteration. Each member still evaluates the
        same trials in the same order as alone; only the members that have finished the chunk idle.
        """
        batch = int(np.shape(problem.total)[0])
        if self.group is None or self.group >= batch:
            return self._advance(problem, state, num_steps)
        g = int(self.group)
        groups = -(-batch // g)
        pad = groups * g - batch

        def split(a):  # (B, ...) -> (groups, g, ...), padded with copies of the last member
            if pad:
                a = jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)])
            return a.reshape(groups, g, *a.shape[1:])

        leaves, treedef = jax.tree_util.tree_flatten(problem)
        ids = _batched_ids(problem)
        flags = [id(a) in ids for a in leaves]
        mapped = [split(a) for a, f in zip(leaves, flags) if f]

        def one(xs):
            it = iter(xs[0])
            sub = jax.tree_util.tree_unflatten(treedef, [next(it) if f else a for a, f in zip(leaves, flags)])
            return self._advance(sub, xs[1], num_steps)

        out = jax.lax.map(one, (mapped, jax.tree_util.tree_map(split, state)))
        return jax.tree_util.tree_map(lambda a: a.reshape(groups * g, *a.shape[2:])[:batch], out)

    def _advance(self, problem, state, num_steps):
        if type(self.estimator) is estimation.MirrorDescent:
            return _advance_mirror_descent(self.estimator, problem, state, num_steps)
        return jax.lax.fori_loop(0, num_steps, lambda _, s: self.step(problem, s), state)


def _advance_mirror_descent(md: estimation.MirrorDescent, problem: estimation.Problem, state, num_steps):
    """Mirror descent's iterations as a loop over line-search trials, each member on its own schedule.

    Per member, try ``k`` of an iteration (``k = 0`` the first, ``k >= 1`` its backtracks) uses the step
    ``MirrorDescent.step`` would: the state's step size at ``k = 0``, then halvings, and 0 at the last
    allowed try; an accepted trial (the Armijo test, or that last zero step) commits the iteration
    exactly as ``MirrorDescent.step`` does (next step size, iteration and oracle-call counts).
    """
    target = state.iteration + num_steps

    def one(p, s, k, prev_eta, target):
        active = s.iteration < target
        last = k >= md.max_backtracks
        eta = jnp.where(k == 0, s.step_size, jnp.where(last, 0.0, prev_eta * 0.5)).astype(s.step_size.dtype)
        theta, mu, loss, pred, pred_grad, ok = md.trial(p, s, eta)
        commit = active & (ok | last)
        next_eta = jnp.where(k == 0, eta * md.growth, jnp.where(eta > 0, eta, s.step_size * 0.5))
        new = estimation.MirrorDescentState(theta, mu, loss, pred, pred_grad, next_eta, s.iteration + 1, s.oracle_calls + 1 + k)
        s = jax.tree_util.tree_map(lambda a, b: jnp.where(commit, a, b), new, s)
        k = jnp.where(commit, 0, jnp.where(active, k + 1, k))
        return s, k, eta

    rounds = jax.vmap(one, in_axes=(batch_axes(problem), 0, 0, 0, 0))

    def body(c):
        return rounds(problem, *c, target)

    k0 = jnp.zeros_like(state.iteration)
    out, _, _ = jax.lax.while_loop(lambda c: jnp.any(c[0].iteration < target), body, (state, k0, state.step_size))
    return jax.vmap(md.tidy)(out)


@jit(static_argnames=("estimator",))
def _advance(estimator: Batched, problem, state, num_steps):
    return estimator.advance(problem, state, num_steps)


@jit(static_argnames=("estimator",))
def _vmapped_start(estimator: Batched, problem, theta, step_size):
    return jax.vmap(estimator.estimator.start, in_axes=(batch_axes(problem), 0, 0))(problem, theta, step_size)


@jit(static_argnames=("estimator",))
def _vmapped_started(estimator: Batched, state, step_size):
    return jax.vmap(estimator.estimator.started)(state, step_size)


def _start(estimator: Batched, problem, theta, step_size):
    """The initial batched state, as :func:`pgmjax.estimation.run` starts: where the estimator has
    ``start``, by one iteration of the compiled chunk program (no init program with an oracle of its own)."""
    if hasattr(estimator.estimator, "start"):
        state = _vmapped_start(estimator, problem, theta, step_size)
        state = _advance(estimator, problem, state, jnp.asarray(1, jnp.int32))
        return _vmapped_started(estimator, state, step_size)
    return estimation._init(estimator, problem, theta, step_size)


def _best_loss(estimator: Batched, state):
    inner = estimator.estimator
    return inner.best_loss(state) if hasattr(inner, "best_loss") else state.loss


#: Cells of potentials per vectorised group that :func:`auto_group` aims at on a CPU.
CPU_GROUP_CELLS = 2**18


def auto_group(problem: estimation.Problem) -> int | None:
    """Members per vectorised group for a stacked problem on the default backend.

    On a CPU the fits are compute-bound, and a group's arrays (a few copies of the potentials per
    member) fall out of cache as the group grows: on a 2-core AMD EPYC, mirror descent per member and
    iteration was fastest with groups of 2 to 8 (Adult MST-style model, 29k cells; the d = 100 chain,
    98k cells) and 10-30% slower with all 64 members at once. So: about ``CPU_GROUP_CELLS / model cells``
    members, evened out so the last group is nearly full. Elsewhere (GPU, TPU) None: all at once.
    """
    batch = int(np.shape(problem.total)[0])
    if jax.default_backend() != "cpu":
        return None
    cells = sum(int(np.prod(shape)) for _, shape in problem.plan.units)
    target = max(1, min(batch, CPU_GROUP_CELLS // max(cells, 1)))
    groups = -(-batch // target)
    return None if groups == 1 else -(-batch // groups)


@jit
def _loss_and_marginals(problem: estimation.Problem, theta: dict):
    """Per member: the exact loss of the potentials' model and its marginals (oracle blocks)."""
    def one(p, th):
        mu = p.marginals(th)
        return p.exact_loss(mu), mu

    return jax.vmap(one, in_axes=(batch_axes(problem), 0))(problem, theta)


def run_batch(
    estimator,
    problem: estimation.Problem,
    theta: dict,
    iters: int,
    *,
    step_size=None,
    chunk: int = 50,
    tol: float | None = None,
    callback: Callable[[dict], Any] | None = None,
    smoothing: tuple[float, float] = (1.0, 1e-6),
    group: int | str | None = "auto",
):
    """Run an estimator on every member of a stacked problem, in compiled chunks (:func:`pgmjax.estimation.run`).

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
        smoothing: the L1 loss's Huber widths, first and last chunk (as in :func:`pgmjax.estimation.run`;
            one schedule for all members).
        group: members per vectorised group (:class:`Batched`): an int, None (all at once) or ``"auto"``
            (:func:`auto_group`).

    Returns:
        ``(params, state, history)``: the potentials ``{block: (B, ...)}``, the final batched state and the
        per-chunk dicts (``loss``: the exact loss of each member's returned potentials, a ``(B,)`` array).
    """
    start = time.perf_counter()
    if group == "auto":
        group = auto_group(problem)
    batched = Batched(estimator, group)
    dt = problem.total.dtype
    if step_size is None:
        step0 = 1.0 / (np.asarray(problem.lipschitz, np.float64) * np.asarray(problem.total, np.float64))
    else:
        step0 = np.broadcast_to(np.asarray(step_size, np.float64), np.shape(problem.total))
    l1 = problem.loss == "l1"
    chunk, chunks, width = estimation.smoothing_schedule(iters, chunk, smoothing, l1)

    def exact(problem, state):
        if l1:
            return np.asarray(_loss_and_marginals(problem, batched.params(state))[0], np.float64)
        return np.asarray(_best_loss(batched, state), np.float64)

    if l1:
        problem = problem.with_smoothing(width(0))
    state = _start(batched, problem, theta, jnp.asarray(step0, dt))
    history = []
    done, k = 0, 0
    prev = exact(problem, state)
    bad = np.flatnonzero(~np.isfinite(prev))
    if bad.size:
        raise FloatingPointError(
            f"the starting model's loss of batch members {bad.tolist()} is not finite: the starting potentials "
            "or the measurements hold values the loss cannot be evaluated at"
        )
    while done < iters:
        n = min(chunk, iters - done)
        state = _advance(batched, problem, state, jnp.asarray(n, jnp.int32))
        done, k = done + n, k + 1
        loss = exact(problem, state)
        info = {
            "iteration": done,
            "loss": loss,
            "oracle_calls": np.asarray(state.oracle_calls),
            "seconds": time.perf_counter() - start,
            "state": state,
        }
        history.append(info)
        if callback is not None and callback(info):
            break
        bad = np.flatnonzero(~np.isfinite(loss))
        if bad.size:
            raise FloatingPointError(
                f"the loss of batch members {bad.tolist()} became {loss[bad[0]]} at iteration {done}; "
                "try float64 or a smaller step size"
            )
        if tol is not None and np.all(np.abs(prev - loss) <= tol * np.maximum(np.abs(loss), 1e-30)) and (not l1 or k >= chunks):
            break
        prev = loss
        if l1 and done < iters:
            problem = problem.with_smoothing(width(k))
            # The smoothed loss's curvature grows as 1 / width: restart the step size at that scale.
            calls = np.asarray(state.oracle_calls)
            state = _start(batched, problem, batched.params(state), jnp.asarray(step0 * width(k) / width(0), dt))
            state = state._replace(oracle_calls=jnp.asarray(np.asarray(state.oracle_calls) + calls))
    return batched.params(state), state, history


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
) -> "BatchedModel":
    """Fit B graphical models of one structure at once (one compiled program, ``jax.vmap`` over the batch).

    Member ``i`` of the result is the model :func:`pgmjax.estimate` fits to member ``i``'s measurements
    with the same options (up to rounding).

    Args:
        domain: the :class:`~pgmjax.Domain`.
        measurements: a list of B lists of :class:`~pgmjax.Measurement` (same cliques, queries and rows in
            every list), or a list of :class:`BatchedMeasurement` (answers with a leading batch axis;
            a plain :class:`~pgmjax.Measurement` among them is shared by every member).
        method: ``"mirror_descent"``, ``"dual_averaging"`` or ``"lbfgs"``.
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

    Returns:
        A :class:`BatchedModel`.

    Raises:
        ValueError / TypeError: before anything is compiled, naming the measurement, member and clique
            that breaks the batch (batch sizes, cliques, queries, stddev shapes) or the bad option.
    """
    caller = "estimate_batch"
    if method not in METHODS:
        raise ValueError(f"{caller}: unknown method {method!r}; supported: {list(METHODS)}")
    if callable(loss) or loss not in LOSSES:
        raise ValueError(f"{caller}: loss must be one of {list(LOSSES)} (a callable loss is not supported in a batch), got {loss!r}")
    dtype = check_fit_options(method, loss, iters, dtype, caller=caller)
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"{caller}: chunk must be a positive integer, got {chunk!r}")
    problem = make_batch_problem(domain, measurements, loss=loss, total=total, dtype=dtype, cliques=cliques, caller=caller)
    batch = int(problem.total.shape[0])
    if step_size is not None:
        steps = _per_member(step_size, batch, "step_size", caller)
        if not all(np.isfinite(s) and s > 0 for s in steps):
            raise ValueError(f"{caller}: step_size must be positive and finite, got {step_size!r}")
        step_size = np.asarray(steps)
    if not (group is None or group == "auto" or (isinstance(group, (int, np.integer)) and not isinstance(group, bool) and group >= 1)):
        raise ValueError(f"{caller}: group must be a positive integer, None or 'auto', got {group!r}")
    params, state, history = run_batch(
        estimation.METHODS[method](), problem, zeros(problem), int(iters), step_size=step_size, chunk=int(chunk),
        tol=tol, callback=callback, group=group,
    )
    for h in history:
        h.pop("state", None)
    if method == "mirror_descent" and loss != "l1":  # the state holds the potentials' marginals and exact loss
        losses, mu, steps = state.loss, state.mu, np.asarray(state.step_size, np.float64)
    else:
        (losses, mu), steps = _loss_and_marginals(problem, params), None
    _check_fitted_members(problem.plan, params, mu, np.asarray(problem.total, np.float64), np.asarray(losses, np.float64))
    return BatchedModel(
        problem.plan, params, np.asarray(problem.total, np.float64), history, marginals=mu,
        losses=np.asarray(losses, np.float64), step_sizes=steps,
    )


def _check_fitted_members(plan, params: dict, mu: dict, totals: np.ndarray, losses: np.ndarray) -> None:
    """:func:`pgmjax.api._check_fitted` (finite potentials, marginals and loss; marginals summing to the
    total) on every member, on host copies of the batched blocks."""
    from .api import _check_fitted

    params = {k: np.asarray(v) for k, v in params.items()}
    mu = {k: np.asarray(v) for k, v in mu.items()}
    for b in range(len(totals)):
        try:
            _check_fitted(plan, {k: v[b] for k, v in params.items()}, {k: v[b] for k, v in mu.items()},
                          float(totals[b]), float(losses[b]))
        except FloatingPointError as e:
            raise FloatingPointError(f"estimate_batch: batch member {b}: {e}") from e


# --------------------------------------------------------------------------- the batched model
@jit
def _marginals_batched(plan: oracle.OraclePlan, theta: dict, total) -> dict:
    return jax.vmap(lambda th, n: oracle.marginals(plan, th, n)[0])(theta, total)


def _answers_batched_impl(plans, used, plan, blocks, matrices, totals):
    def one(b, n):
        return inference._answer_many_impl(plans, {j: plan.table(b, j) for j in used}, matrices, n)

    return jax.vmap(one)(blocks, totals)


_answers_batched = jit(_answers_batched_impl, static_argnums=(0, 1))


class BatchedModel:
    """B fitted graphical models of one structure (one junction tree), potentials stacked on a leading axis.

    Args:
        plan: the shared oracle plan.
        theta: log-potentials ``{block: (B, ...)}`` in the oracle's block layout.
        total: the members' totals, ``(B,)``.
        history: the per-chunk log of the fit (``loss`` and ``oracle_calls`` as ``(B,)`` arrays).
        marginals: optional, the members' clique marginals ``{block: (B, ...)}`` (computed on first use otherwise).
        losses: the members' final losses ``(B,)``.
        step_sizes: mirror descent's last step per member (for warm starts of :meth:`member`), or None.

    Queries answer for every member at once: ``marginal(clique)`` is ``(B, *shape)``; :meth:`member`
    gives member ``i`` as an ordinary :class:`~pgmjax.GraphicalModel`.
    """

    def __init__(self, plan, theta, total, history=None, *, marginals=None, losses=None, step_sizes=None):
        self.plan = plan
        self.theta = theta
        self.total = np.asarray(total, np.float64).reshape(-1)
        self.history = history or []
        self.losses = None if losses is None else np.asarray(losses, np.float64)
        self.step_sizes = None if step_sizes is None else np.asarray(step_sizes, np.float64)
        self._blocks = marginals

    def __len__(self) -> int:
        return self.total.shape[0]

    @property
    def domain(self) -> Domain:
        return self.plan.domain

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return self.plan.cliques

    @property
    def dtype(self):
        return jax.tree_util.tree_leaves(self.theta)[0].dtype

    @property
    def _marginal_blocks(self) -> dict:
        if self._blocks is None:
            self._blocks = _marginals_batched(self.plan, self.theta, jnp.asarray(self.total, self.dtype))
        return self._blocks

    def member(self, i: int) -> GraphicalModel:
        """Member ``i`` (negative counts from the end) as an ordinary :class:`~pgmjax.GraphicalModel`."""
        n = len(self)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not -n <= i < n:
            raise IndexError(f"BatchedModel.member: index {i!r} out of range for a batch of {n}")
        i = int(i) % n
        history = [
            {"iteration": h["iteration"], "loss": float(h["loss"][i]), "oracle_calls": int(h["oracle_calls"][i]),
             "seconds": h["seconds"]}
            for h in self.history
        ]
        blocks = None if self._blocks is None else {k: v[i] for k, v in self._blocks.items()}
        model = GraphicalModel(self.plan, {k: v[i] for k, v in self.theta.items()}, self.total[i], history, marginals=blocks)
        if self.losses is not None:
            model.loss = float(self.losses[i])
        if self.step_sizes is not None:
            model.step_size = float(self.step_sizes[i])
        return model

    def clique_marginals(self) -> dict[Clique, np.ndarray]:
        """``{clique: (B, *shape)}`` float64 marginals of every model clique."""
        blocks = self._marginal_blocks
        out = {}
        for j, c in enumerate(self.cliques):
            key, index = self.plan._index(j)
            out[c] = np.asarray(blocks[key][(slice(None), *index)], np.float64)
        return out

    def marginal(self, attrs: CliqueLike, given: Mapping[str, int | Sequence[int]] | None = None) -> np.ndarray:
        """Every member's marginal over ``attrs``: ``(B, *domain.shape_of(attrs))`` (see
        :meth:`pgmjax.GraphicalModel.marginal`; ``given`` is evidence shared by all members)."""
        return self.marginals([attrs], given=given)[0]

    def marginals(self, cliques: Sequence[CliqueLike], given: Mapping | None = None) -> list[np.ndarray]:
        """Many marginals of every member from one compiled program: a list of ``(B, *shape)`` arrays."""
        evidence = _evidence_query(self.domain, given)
        queries = []
        for attrs in cliques:
            attrs = self.domain.check_clique(attrs, what="marginal of")
            clash = [a for a in attrs if a in evidence]
            if clash:
                raise ValueError(f"marginal of {attrs}: {clash} also appear in `given`; condition on other attributes")
            queries.append(({a: queries_mod.Identity() for a in attrs} | evidence, len(attrs)))
        answers = self.answers([q for q, _ in queries])
        return [a.reshape(a.shape[: k + 1]) for a, (_, k) in zip(answers, queries)]

    def answer(self, query: Mapping[str, object]) -> np.ndarray:
        """Every member's answer to a factored query (see :meth:`pgmjax.GraphicalModel.answer`): ``(B, ...)``."""
        return self.answers([query])[0]

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        """Several factored queries, every member, one compiled program: a list of ``(B, ...)`` arrays."""
        plans, mats = [], []
        for q in queries:
            attrs, matrices = queries_mod.resolve(self.domain, q)
            plans.append(inference.plan_query(self.plan.tree, attrs, tuple(m is None for m in matrices)))
            mats.append(matrices)
        if not plans:
            return []
        used = tuple(sorted({c for p in plans for c in p.cliques}))
        dt = self.dtype
        mats = tuple(tuple(None if q is None else jnp.asarray(q, dt) for q in m) for m in mats)
        out = _answers_batched(tuple(plans), used, self.plan, self._marginal_blocks, mats, jnp.asarray(self.total, dt))
        return [np.asarray(o, np.float64) for o in out]

    def __repr__(self) -> str:
        return (
            f"BatchedModel({len(self)} members, {len(self.domain)} attributes, {len(self.cliques)} cliques, "
            f"treewidth {self.plan.tree.treewidth})"
        )
