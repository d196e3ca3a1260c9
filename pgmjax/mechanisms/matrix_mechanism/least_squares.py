"""HDMM's reconstruction: least squares from noisy strategy answers, per clique (HDMM+LLS) or on the full table.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018, the reconstruction step ``x_hat = A^+ y``: for one Kronecker
measurement ``A^+ = (x)_i A_i^+`` (never the full pseudo-inverse), otherwise LSMR with Kronecker matvecs.
:func:`local_least_squares` solves each clique's table from the measurements on it alone (HDMM+LLS, the
baseline of McKenna, Sheldon, Miklau, "Graphical-model based estimation and inference for differential
privacy", ICML 2019, Section 6); :func:`global_least_squares` solves the full table and refuses
(:class:`TableTooLargeError`) before allocating when it would not fit. The inputs are already-noisy
``pgmjax.Measurement`` objects: nothing here reads private data or adds noise.

Example:
    >>> domain = {"a": 2, "b": 3}
    >>> m = Measurement(("a", "b"), [10.0, 20, 30, 40, 50, 60])
    >>> least_squares_marginal(domain, [m], ("b",)).tolist()
    [50.0, 70.0, 90.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ...queries.measurement import Measurement
from ...queries.linear import kron_apply
from .factors import as_clique
from .workloads import (
    KronWorkload,
    UnionWorkload,
    as_union,
    marginals_workload,  # noqa: F401  (the docstring examples use it)
)

__all__ = ["least_squares_marginal", "local_least_squares", "global_least_squares", "TableTooLargeError"]


class TableTooLargeError(ValueError):
    """Raised before allocating when a least-squares table would not fit the memory allowance."""


def _sizes_lookup(domain) -> Callable[[str], int]:
    def size(a):
        try:
            return int(domain[a])
        except KeyError:
            raise ValueError(f"attribute {a!r} is not in the domain") from None

    return size


def _lsmr(matvec, rmatvec, rows, cells, rhs, atol, btol, maxiter):
    from scipy.sparse.linalg import LinearOperator, lsmr

    op = LinearOperator((rows, cells), matvec=matvec, rmatvec=rmatvec, dtype=np.float64)
    return lsmr(op, rhs, atol=atol, btol=btol, maxiter=maxiter)[0]


def _solve_group(group: list[Measurement], clique, shape, atol, btol, maxiter) -> np.ndarray:
    """Least squares (rows weighted by 1/stddev) for measurements on one clique; a table over ``clique``."""
    if len(group) == 1 and group[0].stddev.ndim == 0 and tuple(group[0].clique) == tuple(clique):
        m = group[0]
        if m.kind == "identity":
            return m.y.reshape(shape)
        if m.kind == "kron":  # x_hat = (x)_i Q_i^+ y
            return kron_apply(m.y.reshape(m.linear.row_shape), [np.linalg.pinv(q) for q in m.query])
        return np.linalg.lstsq(m.query, m.y, rcond=None)[0].reshape(shape)
    perms = [[clique.index(a) for a in m.clique] for m in group]
    inv = [list(np.argsort(p)) for p in perms]
    rows = [m.rows for m in group]
    offsets = np.cumsum([0] + rows)
    w = [1.0 / m.row_stddev() for m in group]
    cells = int(np.prod(shape))

    def matvec(v):
        x = v.reshape(shape)
        return np.concatenate([wi * m.linear.apply(np.transpose(x, p)) for m, p, wi in zip(group, perms, w)])

    def rmatvec(r):
        out = np.zeros(shape)
        for m, p, ip, wi, lo, hi in zip(group, perms, inv, w, offsets[:-1], offsets[1:]):
            out += np.transpose(m.linear.transpose(wi * r[lo:hi]).reshape(tuple(shape[i] for i in p)), ip)
        return out.reshape(-1)

    rhs = np.concatenate([wi * m.y for m, wi in zip(group, w)])
    return _lsmr(matvec, rmatvec, int(offsets[-1]), cells, rhs, atol, btol, maxiter).reshape(shape)


def _sum_to(table: np.ndarray, clique, target) -> np.ndarray:
    keep = [clique.index(a) for a in target]
    drop = tuple(i for i in range(len(clique)) if i not in keep)
    reduced = table.sum(axis=drop) if drop else table
    remaining = [a for i, a in enumerate(clique) if i not in drop]
    return np.transpose(reduced, [remaining.index(a) for a in target])


def least_squares_marginal(domain, measurements: Sequence[Measurement], clique, *, atol=1e-12, btol=1e-12, maxiter=None) -> np.ndarray:
    """Local least squares (HDMM+LLS, the ICML 2019 baseline) for one clique's marginal.

    Uses the measurements on ``clique`` itself (as a set) or, when there are none, those on the smallest
    measured superset clique (the first such in measurement order). One Kronecker measurement with a scalar
    standard deviation is solved in closed form ``x_hat = (x)_i Q_i^+ y`` (the ICML setting); several are
    solved jointly (rows weighted by ``1/stddev``) by LSMR with Kronecker matvecs on the clique's table.
    A superset's estimate is summed down to ``clique``. Unconstrained (no non-negativity), minimum-norm where
    the measurements leave directions free.

    Args:
        domain: ``pgmjax.Domain`` or a mapping ``attribute -> size``.
        measurements: ``pgmjax.Measurement`` objects.
        clique: the target attributes.
        atol, btol, maxiter: LSMR settings for the iterative case.

    Returns:
        The estimated table over ``clique`` (axes in clique order).

    Raises:
        ValueError: when no measurement's clique contains ``clique``.
    """
    clique = as_clique(clique)
    size = _sizes_lookup(domain)
    target = frozenset(clique)
    groups: dict[frozenset, list[Measurement]] = {}
    for m in measurements:
        if not isinstance(m, Measurement):
            raise TypeError(f"expected pgmjax.Measurement, got {type(m).__name__}")
        if target <= frozenset(m.clique):
            groups.setdefault(frozenset(m.clique), []).append(m)
    if not groups:
        raise ValueError(f"least_squares_marginal: no measurement covers the clique {clique}")
    if target in groups:
        chosen = groups[target]
    else:
        chosen = min(groups.values(), key=lambda g: int(np.prod([size(a) for a in g[0].clique])))
    base = tuple(chosen[0].clique)
    shape = tuple(size(a) for a in base)
    for m in chosen:
        m.validate(_DomainView(size), None)
    table = _solve_group(chosen, base, shape, atol, btol, maxiter)
    return _sum_to(table, base, clique)


class _DomainView:
    """The bits of ``pgmjax.Domain`` that ``Measurement.validate`` uses, over a size lookup."""

    def __init__(self, size):
        self._size = size

    def check_clique(self, clique, what="clique"):
        for a in clique:
            self._size(a)
        return tuple(clique)

    def size(self, clique):
        return int(np.prod([self._size(a) for a in clique])) if clique else 1

    def shape_of(self, clique):
        return tuple(self._size(a) for a in clique)

    def __getitem__(self, a):
        return self._size(a)


def local_least_squares(domain, measurements: Sequence[Measurement], cliques, **kw) -> dict[tuple[str, ...], np.ndarray]:
    """HDMM+LLS for many cliques: ``{clique: least_squares_marginal(domain, measurements, clique)}``.

    Args:
        domain: ``pgmjax.Domain`` or mapping ``attribute -> size``.
        measurements: ``pgmjax.Measurement`` objects.
        cliques: target cliques, or a :class:`KronWorkload` / :class:`UnionWorkload` (its terms' cliques).

    Returns:
        A dict ``clique -> estimated table``; answer a workload with ``workload.answer(result)``.

    Example:
        >>> domain = {"a": 2, "b": 3}
        >>> W = marginals_workload(domain, [("a", "b")])
        >>> est = local_least_squares(domain, [Measurement(("a", "b"), [10.0, 20, 30, 40, 50, 60])], W)
        >>> W.answer(est).tolist()
        [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    """
    if isinstance(cliques, (KronWorkload, UnionWorkload)):
        cliques = as_union(cliques).cliques
    out = {}
    for c in cliques:
        c = as_clique(c)
        if c not in out:
            out[c] = least_squares_marginal(domain, measurements, c, **kw)
    return out


def global_least_squares(
    domain,
    measurements: Sequence[Measurement],
    *,
    attributes: Sequence[str] | None = None,
    max_bytes: int = 2**30,
    atol: float = 1e-12,
    btol: float = 1e-12,
    maxiter: int | None = None,
) -> np.ndarray:
    """HDMM's global least squares ``x_hat = argmin_x ||D^{-1}(A x - y)||_2`` over the full table (minimum norm).

    Solved by LSMR with matvecs that sum the table down to each measurement's clique and apply its query
    (adjoint: broadcast back). The memory need (about six float64 tables plus the answers) is checked against
    ``max_bytes`` **before** anything is allocated; at Adult's size (~6.4e17 cells) this raises, which is why
    the ICML paper uses HDMM+LLS or PGM instead.

    Args:
        domain: ``pgmjax.Domain`` (or mapping ``attribute -> size``).
        measurements: ``pgmjax.Measurement`` objects over attributes of the table.
        attributes: the table's attributes (default: all of ``domain``, in its order).
        max_bytes: the memory allowance.
        atol, btol, maxiter: LSMR settings.

    Returns:
        The estimated table, shape ``(n_a for a in attributes)``.

    Raises:
        TableTooLargeError: when the table would not fit in ``max_bytes``.
    """
    size = _sizes_lookup(domain)
    attrs = tuple(attributes) if attributes is not None else tuple(domain)
    shape = tuple(size(a) for a in attrs)
    cells = math.prod(shape)
    rows = sum(int(m.rows) for m in measurements)
    need = 8 * (6 * cells + 3 * rows)
    if need > max_bytes:
        raise TableTooLargeError(
            f"global least squares needs the full table over {len(attrs)} attributes: {cells:.3g} cells, about "
            f"{need / 2**30:.3g} GiB with the solver's work vectors, above max_bytes={max_bytes} ({max_bytes / 2**30:.3g} GiB); "
            "use local_least_squares (HDMM+LLS) or pgmjax.estimate instead, or raise max_bytes"
        )
    view = _DomainView(size)
    for i, m in enumerate(measurements):
        if not isinstance(m, Measurement):
            raise TypeError(f"measurement {i} is a {type(m).__name__}, expected pgmjax.Measurement")
        missing = [a for a in m.clique if a not in attrs]
        if missing:
            raise ValueError(f"measurement {i} on {m.clique}: attributes {missing} are not in the table {attrs}")
        m.validate(view, i)
    plans = []
    for m in measurements:
        axes = [attrs.index(a) for a in m.clique]
        drop = tuple(i for i in range(len(attrs)) if i not in axes)
        kept = sorted(axes)  # remaining axes after the sum, in table order
        perm = [kept.index(ax) for ax in axes]  # to clique order
        inv = list(np.argsort(perm))
        expand = tuple(i for i in range(len(attrs)) if i not in axes)
        plans.append((m, drop, perm, inv, expand, 1.0 / m.row_stddev()))
    offsets = np.cumsum([0] + [m.rows for m in measurements])

    def matvec(v):
        x = v.reshape(shape)
        outs = []
        for m, drop, perm, _, _, w in plans:
            t = x.sum(axis=drop) if drop else x
            outs.append(w * m.linear.apply(np.transpose(t, perm)))
        return np.concatenate(outs) if outs else np.zeros(0)

    def rmatvec(r):
        out = np.zeros(shape)
        for (m, _, perm, inv, expand, w), lo, hi in zip(plans, offsets[:-1], offsets[1:]):
            t = m.linear.transpose(w * r[lo:hi]).reshape(tuple(size(a) for a in m.clique))
            t = np.transpose(t, inv)
            out += np.expand_dims(t, expand) if expand else t
        return out.reshape(-1)

    rhs = np.concatenate([w * m.y for m, *_, w in plans]) if plans else np.zeros(0)
    return _lsmr(matvec, rmatvec, int(offsets[-1]), cells, rhs, atol, btol, maxiter).reshape(shape)
