"""Companion estimators: unbiased answers to linear and statistical queries from a release, with variances.

Wang, Ying & Zhang, "A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014),
Section IV, eq. 17-20 and Lemma 2 (reconstructed from the surviving text; checked here by exact
enumeration). For a statistical query ``q(D) = sum_i f_i(r_i)`` (counts; ``/ n`` for the paper's
fractions) and the channel ``M`` of the release (:class:`~pgmjax.rr.Channel`), the companion of ``f`` is
``g = M^{-1} f``; ``E[g(r~)] = (M g)(r) = f(r)``, so

    q^(D~) = sum_i g_i(r~_i)        is unbiased.

Over the whole row domain this is [WYZ]'s ``(kappa f(r~) - F) / (e^eps - 1)`` with ``kappa = e^eps + K - 1``
and ``F = sum_r f(r)`` over the *whole* domain. Its variance is ``sum_i [(M g_i^2)(r_i) - f_i(r_i)^2]``,
linear in the true records, so replacing them by the release gives an unbiased variance estimate
``sum_i [g_i^2 - M^{-1} f_i^2](r~_i)``. A linear query on a clique only needs the released clique
marginal; factored (Kronecker) queries never build a dense matrix.

The unbiased answers can be negative or exceed ``n``; ``proper="clip"`` projects onto the interval of
attainable answers (never increases the error) and ``proper="round"`` (counting queries) also rounds to a
whole count, as in [WYZ] eq. 21-22 (Lemma 3: at most 4 times the squared error).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..data.dataset import Dataset
from ..data.domain import Clique, CliqueLike
from ..checks import check_bool as _bool
from ..queries import factors as Q
from .channel import Channel
from .releases import Release

__all__ = ["Answer", "StatisticalQuery", "answer", "debiased_marginal", "exact_variance", "proper_interval"]

_PROPER = (None, "clip", "round")


class Answer(NamedTuple):
    """An estimate and its variance.

    Attributes:
        value: the answer(s) (counts, or fractions with ``normalize=True``).
        variance: an unbiased estimate of the variance of the *unbiased* answer (it can come out
            slightly negative on tiny tables; :attr:`stddev` clips it at 0).
    """

    value: np.ndarray
    variance: np.ndarray

    @property
    def stddev(self) -> np.ndarray:
        """``sqrt(max(variance, 0))``."""
        return np.sqrt(np.maximum(self.variance, 0.0))


@dataclass(frozen=True)
class StatisticalQuery:
    """``q(D) = sum_i f_{a_i}(r_i[C])``: row functions that may differ from record to record ([WYZ] Def. 3).

    Attributes:
        clique: the attributes the row functions read.
        functions: ``(h, *clique shape)`` (or ``(h, cells)``) values of ``h`` row functions.
        assignment: ``(n,)`` integers in ``[0, h)``: the function of each record (by row order, which the
            release keeps); None applies every function to every record (``h`` linear queries).

    Example:
        >>> StatisticalQuery(("a",), [[1.0, 0.0]]).functions.shape
        (1, 2)
    """

    clique: tuple
    functions: np.ndarray
    assignment: np.ndarray | None = None

    def __init__(self, clique: CliqueLike, functions, assignment=None):
        object.__setattr__(self, "clique", tuple(clique) if not isinstance(clique, str) else (clique,))
        f = np.asarray(functions, dtype=np.float64)
        if f.ndim < 1 or f.size == 0 or not np.all(np.isfinite(f)):
            raise ValueError("StatisticalQuery: functions must be a non-empty finite array (h, *clique shape)")
        object.__setattr__(self, "functions", f if f.ndim > 1 else f[None])
        if assignment is not None:
            a = np.asarray(assignment)
            if a.ndim != 1 or a.dtype.kind not in "iu":
                raise ValueError(f"StatisticalQuery: assignment must be a 1-D integer array (one per record), got {a.dtype} {a.shape}")
            if a.size and (a.min() < 0 or a.max() >= self.functions.shape[0]):
                raise ValueError(f"StatisticalQuery: assignment must lie in [0, {self.functions.shape[0]})")
            assignment = a.astype(np.int64)
        object.__setattr__(self, "assignment", assignment)


def as_release(release) -> Release:
    """``release`` itself when it is a :class:`Release`; a TypeError that says how to wrap a released Dataset otherwise."""
    if not isinstance(release, Release):
        raise TypeError(f"expected a pgmjax.rr.Release (the released table and its law), got {type(release).__name__}; "
                        "wrap a released Dataset with pgmjax.rr.Release.of(data, epsilon, per_attribute)")
    return release


def _dense(query: StatisticalQuery, channel: Channel, n: int) -> tuple[Clique, np.ndarray]:
    clique = channel.domain.check_clique(query.clique, what="StatisticalQuery: clique")
    shape = channel.domain.shape_of(clique)
    f = query.functions
    if f.shape[1:] != shape:
        if f.ndim == 2 and f.shape[1] == int(np.prod(shape)):
            f = f.reshape((f.shape[0], *shape))
        else:
            raise ValueError(f"StatisticalQuery on {clique}: functions must have shape (h, {', '.join(map(str, shape))}), got {f.shape}")
    if query.assignment is not None and query.assignment.size != n:
        raise ValueError(f"StatisticalQuery: assignment has {query.assignment.size} entries for {n} records")
    return clique, f


def _cells(data: Dataset, clique: Clique) -> np.ndarray:
    cols = [data.domain.index(a) for a in clique]
    return np.ravel_multi_index(tuple(data.records[:, c] for c in cols), data.domain.shape_of(clique))


def _statistical(channel: Channel, data: Dataset, query: StatisticalQuery, tables: tuple) -> list[np.ndarray]:
    """``sum_i t[a_i, cell(r_i)]`` for each table ``t`` (``h, *shape``); per function when unassigned."""
    clique, f = _dense(query, channel, len(data))
    h = f.shape[0]
    if query.assignment is None:
        hist = data.marginal(clique).reshape(-1)
        return [t.reshape(h, -1) @ hist for t in tables]
    cells = _cells(data, clique)
    return [np.array(t.reshape(h, -1)[query.assignment, cells].sum()) for t in tables]


def _kron_terms(channel: Channel, attrs: Clique, mats: tuple, y: np.ndarray) -> np.ndarray:
    """``<M g_r^2 - f_r^2, y>`` for every row ``r`` of the Kronecker query ``f = kron(mats)``, ``g = M^{-1} f``."""
    full = tuple(np.eye(channel.domain[a]) if m is None else m for a, m in zip(attrs, mats))
    my = channel.forward(y, attrs)  # <M g^2, y> = <g^2, M y> (M symmetric)
    parts = channel.parts(attrs)
    if all(len(p[0]) == 1 for p in parts):  # per attribute: g = kron(Q_a M_a^{-1}) row-wise
        g = [channel.inverse(m, (a,)) for a, m in zip(attrs, full)]
        first = Q.kron_apply(my, [gi**2 for gi in g])
    elif len(parts) == 1:  # one group over the clique: g = (1 + r) f - (r S / cells) 1, S = row sums, r = (1 - lam) / lam
        _, _, r, cells = parts[0]
        b = r * Q.kron_apply(np.ones(channel.domain.shape_of(attrs)), full) / cells
        first = ((1 + r) ** 2 * Q.kron_apply(my, [m**2 for m in full]) - 2 * (1 + r) * b * Q.kron_apply(my, full)
                 + b**2 * my.sum())
    else:  # pragma: no cover - the two channels of pgmjax.rr never mix grouped and single attributes
        raise NotImplementedError("a channel grouping some, not all, attributes of a clique")
    return first - Q.kron_apply(y, [m**2 for m in full])


def _query_form(query, where: str, domain):
    if isinstance(query, StatisticalQuery):
        return "statistical", query
    if isinstance(query, Mapping):
        return "factored", query
    if isinstance(query, tuple) and len(query) == 2:
        clique = domain.check_clique(query[0], what=f"{where}: clique")
        shape = domain.shape_of(clique)
        f = np.asarray(query[1], dtype=np.float64)
        if f.shape == shape or (f.ndim == 1 and f.size == math.prod(shape)):
            f = f.reshape((1, *shape))  # one function
        return "statistical", StatisticalQuery(clique, f)
    raise TypeError(f"{where}: a query is a factored dict {{attribute: factor}}, a (clique, values) pair or a StatisticalQuery; "
                    f"got {type(query).__name__}")


def _bounds(kind: str, channel: Channel, query, n: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Attainable range ``[sum_i min f_i, sum_i max f_i]`` of each answer, and whether it is a counting query."""
    if kind == "factored":
        attrs, mats = Q.resolve(channel.domain, query)
        full = [np.eye(channel.domain[a]) if m is None else m for a, m in zip(attrs, mats)]
        lo, hi = np.ones(()), np.ones(())
        for m in full:
            mn, mx = m.min(axis=1), m.max(axis=1)
            cands = [np.multiply.outer(x, y) for x in (lo, hi) for y in (mn, mx)]
            lo, hi = np.minimum.reduce(cands), np.maximum.reduce(cands)
        counting = all(np.isin(m, (0.0, 1.0)).all() for m in full)
        return n * lo, n * hi, counting
    clique, f = _dense(query, channel, n)
    flat = f.reshape(f.shape[0], -1)
    mn, mx = flat.min(axis=1), flat.max(axis=1)
    counting = bool(np.isin(flat, (0.0, 1.0)).all())
    if query.assignment is None:
        return n * mn, n * mx, counting
    return np.array(mn[query.assignment].sum()), np.array(mx[query.assignment].sum()), counting


def proper_interval(release: Release, query) -> tuple[np.ndarray, np.ndarray]:
    """The interval ``[sum_i min f_i, sum_i max f_i]`` (counts) that holds every attainable answer ([WYZ] eq. 21).

    Example:
        >>> rel = Release.of(Dataset(np.array([[0], [1], [1]]), {"a": 2}), 1.0)
        >>> [x.tolist() for x in proper_interval(rel, {"a": Q.Value(1)})]
        [[0.0], [3.0]]
    """
    release = as_release(release)
    kind, query = _query_form(query, "proper_interval", release.domain)
    lo, hi, _ = _bounds(kind, release.channel, query, len(release.data))
    return lo, hi


def answer(release: Release, query, *, normalize: bool = False, proper: str | None = None,
           return_variance: bool = False):
    """The companion estimate of a linear or statistical query from a release ([WYZ] eq. 17-22).

    Args:
        release: a :class:`~pgmjax.rr.Release`.
        query: a factored query ``{attribute: factor}`` (:mod:`pgmjax.queries.factors`; may have several rows),
            a pair ``(clique, values)`` with ``values`` of shape ``clique shape`` (one function) or
            ``(rows, *clique shape)``, or a :class:`StatisticalQuery` (row-specific functions).
        normalize: answers as fractions of ``n`` (the paper's scale) instead of counts.
        proper: None (unbiased; may leave the attainable range), ``"clip"`` (project onto
            :func:`proper_interval`: never increases the error) or ``"round"`` (counting queries with 0/1
            functions: clip, then round to a whole count, [WYZ]'s proper estimator).
        return_variance: also return the variance estimate.

    Returns:
        The answer (float64 array, shaped like the query's rows), or an :class:`Answer` with the
        unbiased variance estimate of the unbiased answer when ``return_variance``.

    Example:
        >>> dom = {"b1": 2, "b2": 2}                                # two bits, eps = ln 3 (worked by hand)
        >>> rel = Release.of(Dataset(np.array([[0, 1], [0, 0], [1, 0]]), dom), math.log(3))
        >>> float(answer(rel, {"b1": Q.Value(0)}, normalize=True)[0])
        1.0
    """
    where = "pgmjax.rr.answer"
    release = as_release(release)
    normalize = _bool(normalize, "normalize", where)
    return_variance = _bool(return_variance, "return_variance", where)
    if proper not in _PROPER:
        raise ValueError(f"{where}: proper must be None, 'clip' or 'round', got {proper!r}")
    kind, query = _query_form(query, where, release.domain)
    channel, data, n = release.channel, release.data, len(release.data)
    if proper is not None:
        lo, hi, counting = _bounds(kind, channel, query, n)
        if proper == "round" and not counting:
            raise ValueError(f"{where}: proper='round' is for counting queries (0/1 row functions); use proper='clip'")
    if kind == "factored":
        attrs, mats = Q.resolve(channel.domain, query)
        if not attrs:
            value, var = np.array(float(n)), np.array(0.0)
        else:
            xhat = release.marginal(attrs)
            value = Q.kron_apply(xhat, mats)
            var = _kron_terms(channel, attrs, mats, xhat) if return_variance else None
    else:
        clique, f = _dense(query, channel, n)
        g = channel.inverse(f, clique)
        tables = (g, g**2 - channel.inverse(f**2, clique)) if return_variance else (g,)
        out = _statistical(channel, data, query, tables)
        value, var = out[0], (out[1] if return_variance else None)
    if proper is not None:
        value = np.clip(value, lo, hi)
        if proper == "round":
            value = np.round(value)
    scale = 1.0 / n if normalize else 1.0
    if not return_variance:
        return value * scale
    return Answer(value * scale, var * scale**2)


def exact_variance(data: Dataset, release: Release, query, *, normalize: bool = False) -> np.ndarray:
    """The exact variance of :func:`answer`'s unbiased estimate, given the *private* table (not private).

    ``sum_i [(M g_i^2)(r_i) - f_i(r_i)^2]`` with ``g_i = M^{-1} f_i`` ([WYZ] Lemma 2, reconstructed); for
    analysis and tests only: it reads ``data`` without noise.

    Args:
        data: the private table the release was drawn from (same domain, same number and order of records).
        release: the release (only its law and size are used), or a :class:`Release` of ``data`` itself.
        query: as in :func:`answer`.
        normalize: variance of the fraction (divided by ``n^2``).

    Returns:
        Float64 array shaped like the answer.

    Example:
        >>> dom = {"b1": 2, "b2": 2}                                # two bits, eps = ln 3: 2/3 on the fraction scale
        >>> data = Dataset(np.array([[0, 0], [0, 1], [1, 1]]), dom)
        >>> round(float(exact_variance(data, Release.of(data, math.log(3)), {"b1": Q.Value(0)}, normalize=True)[0]), 12)
        0.666666666667
    """
    where = "pgmjax.rr.exact_variance"
    release = as_release(release)
    if not isinstance(data, Dataset) or data.domain != release.domain or len(data) != len(release.data):
        raise ValueError(f"{where}: data must be the private Dataset of the release (same domain and number of records)")
    kind, query = _query_form(query, where, release.domain)
    channel, n = release.channel, len(data)
    if kind == "factored":
        attrs, mats = Q.resolve(channel.domain, query)
        var = np.array(0.0) if not attrs else _kron_terms(channel, attrs, mats, data.marginal(attrs))
    else:
        clique, f = _dense(query, channel, n)
        g = channel.inverse(f, clique)
        var = _statistical(channel, data, query, (channel.forward(g**2, clique) - f**2,))[0]
    return var / n**2 if _bool(normalize, "normalize", where) else var


def debiased_marginal(release: Release, clique: CliqueLike) -> tuple[np.ndarray, np.ndarray]:
    """The unbiased marginal ``x^_C = M_C^{-1} h~_C`` and a variance per cell ([WYZ] section IV, reconstructed).

    Whole row domain: ``x^_C = (h~_C - (1 - lam) n / n_C) / lam`` with variance
    ``[x_c pi1 (1 - pi1) + (n - x_c) pi0 (1 - pi0)] / lam^2``, ``pi1 = lam + pi0``, ``pi0 = (1 - lam) / n_C``;
    per attribute the same by Kronecker products. The variance plugs in ``max(x^, 0)``, rescaled to sum to
    ``n``, for the unknown counts (so it is positive, as a measurement's noise needs).

    Args:
        release: a :class:`~pgmjax.rr.Release`.
        clique: the marginal's attributes.

    Returns:
        ``(x_hat, variance)``, both shaped like the marginal.

    Example:
        >>> rel = Release.of(Dataset(np.array([[0, 1], [0, 0], [1, 0]]), {"b1": 2, "b2": 2}), math.log(3))
        >>> x, v = debiased_marginal(rel, ("b1", "b2"))
        >>> x.round(6).tolist(), v.round(6).tolist()
        ([[1.5, 1.5], [1.5, -1.5]], [[4.75, 4.75], [4.75, 3.75]])
    """
    release = as_release(release)
    clique = release.domain.check_clique(clique, what="debiased_marginal: clique")
    xhat = release.marginal(clique)
    plug = np.maximum(xhat, 0.0)
    plug *= release.total / plug.sum()  # sum(x^) = n, so some entry is positive
    var = _kron_terms(release.channel, clique, (None,) * len(clique), plug)
    return xhat, np.maximum(var, 0.0)
