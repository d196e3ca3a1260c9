"""Batched estimation problems: B measurement sets of one structure as one :class:`pgmjax.estimation.driver.Problem`.

Every member's measurements are validated against one structure (same cliques, queries and shapes), built
into a problem (:func:`make_problem`) and stacked along a leading batch axis (:func:`stack_problems`,
:func:`make_batch_problem`); :func:`batch_axes` says which leaves carry it (the numbers: answers, stddevs,
totals), so ``jax.vmap`` maps one fit over the members. :class:`BatchedMeasurement` is a measurement whose
answers (and stddevs) have a leading batch axis. The fitting itself is :mod:`pgmjax.estimation.batch`.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import driver, inputs
from ..compiler import to_device
from ..data.domain import CliqueLike, Domain
from ..queries.measurement import Measurement, validate_measurements

#: Methods :func:`estimate_batch` supports.
METHODS = ("mirror_descent", "dual_averaging", "lbfgs")
#: Losses :func:`estimate_batch` supports (a callable loss has no per-member data to map over).
LOSSES = ("l2", "l1")


# --------------------------------------------------------------------------- shared validation
check_dtype = inputs.check_dtype  # (public here since estimate_batch's first release)


def check_fit_options(method, loss, iters, dtype, *, caller: str = "estimate"):
    """:func:`pgmjax.estimation.inputs.check_options`, returning only the dtype (this module's older interface).

    Example:
        >>> check_fit_options("mirror_descent", "l2", 10, None)
        dtype('float32')
    """
    return inputs.check_options(method, loss, iters, dtype, caller=caller)[2]


# --------------------------------------------------------------------------- one member's problem
def make_problem(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    loss="l2",
    total: float | None = None,
    dtype=None,
    cliques: Sequence[CliqueLike] = (),
) -> driver.Problem:
    """Build the :class:`~pgmjax.estimation.driver.Problem` of one fit (validated), as :func:`pgmjax.estimate` does.

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
    if not (callable(loss) or loss in ("l2", "l1")):
        raise ValueError(f"{caller}: loss must be 'l2', 'l1' or a callable, got {loss!r}")
    dtype = check_dtype(dtype, caller=caller)
    measurements, model_cliques = inputs.check_structure(domain, measurements, loss, cliques, caller=caller)
    return inputs.build_problem(domain, measurements, model_cliques, loss, total, dtype, caller=caller)[0]


# --------------------------------------------------------------------------- stacking and axes
def batched_ids(problem: driver.Problem) -> set[int]:
    """ids of the leaves of ``problem`` that differ between members: answers, noise, total, Lipschitz."""
    ids = {id(problem.total), id(problem.lipschitz)}
    for group in problem.meas.arrays:
        ids |= {id(group[k]) for k in ("y", "inv_std")}
    return ids


def batch_axes(problem: driver.Problem) -> driver.Problem:
    """The ``in_axes`` of a problem for ``jax.vmap``: 0 on the per-member leaves, None on the shared ones.

    Per member: the noisy answers ``y``, the inverse noise scales, ``total`` and ``lipschitz``. Shared
    (one copy): the plan's routing arrays, the query matrices, the group indices and ``smoothing``.
    Works on a concrete or a traced problem (inside ``jit``).

    Returns:
        A pytree of the problem's structure holding 0 or None at each leaf.
    """
    leaves, treedef = jax.tree_util.tree_flatten(problem)
    batched = batched_ids(problem)
    return jax.tree_util.tree_unflatten(treedef, [0 if id(a) in batched else None for a in leaves])


def stack_problems(problems: Sequence[driver.Problem]) -> driver.Problem:
    """Stack B problems of one structure into one whose per-member leaves have a leading axis of size B.

    Args:
        problems: problems from :func:`make_problem` with the same cliques, measurement structure,
            query matrices, loss and dtype (the answers, noise scales and totals may differ).

    Returns:
        A :class:`~pgmjax.estimation.driver.Problem`; map over it with ``jax.vmap(..., in_axes=batch_axes(p))``.

    Raises:
        ValueError: when the problems do not share one structure.
    """
    problems = list(problems)
    if not problems:
        raise ValueError("stack_problems: no problems (the batch is empty)")
    for b, p in enumerate(problems):
        if not isinstance(p, driver.Problem):
            raise TypeError(f"stack_problems: problem {b} is a {type(p).__name__}, expected a Problem")
    first_leaves, treedef = jax.tree_util.tree_flatten(problems[0])
    batched = batched_ids(problems[0])
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


def zeros(problem: driver.Problem) -> dict:
    """All-zero potentials (uniform models) for every member of a stacked problem: ``{block: (B, ...)}``."""
    b = int(np.shape(problem.total)[0])
    # Built on the host and transferred: jnp.zeros would compile a small program per block shape.
    return {k: to_device(np.zeros((b, *s), problem.total.dtype)) for k, s in problem.plan.units}


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
                # y[b], not its flat copy: each member's answers are checked against the marginal's shape
                members.append(Measurement(clique, y[b], stddev=per[b], query=query))
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
            if m.linear is not m0.linear:
                q, q0 = jax.tree_util.tree_leaves(m.linear), jax.tree_util.tree_leaves(m0.linear)
                if any(a is not c and (a.shape != c.shape or not np.array_equal(a, c)) for a, c in zip(q, q0)):
                    raise ValueError(
                        f"{where} has other query matrices than measurement {i} of member 0; the members of a "
                        "batch share their queries (only the answers and the noise scales differ)"
                    )


def per_member(value, batch: int, what: str, caller: str) -> list:
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
) -> driver.Problem:
    """Validate a batch of measurement sets and build its stacked :class:`~pgmjax.estimation.driver.Problem`.

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
    totals = per_member(total, len(members), "total", caller)
    for b, t in enumerate(totals):
        if t is not None:
            inputs.check_total(t, f"{caller}: member {b}")
    problems = []
    for b, ms in enumerate(members):
        where = f"{caller}: member {b}"
        ms, model_cliques = inputs.check_structure(domain, ms, loss, cliques, caller=where)
        problems.append(inputs.build_problem(domain, ms, model_cliques, loss, totals[b], dtype, caller=where)[0])
    return stack_problems(problems)


