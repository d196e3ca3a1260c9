"""MLDP and MLDP+PGM: publish a model learned from noisy query answers, with and without the engine.

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model
Publishing", IEEE BigData 2017 (arXiv 1710.05095), Algorithm 1; the "+PGM" arm replaces the
regression model by graphical-model estimation (McKenna, Sheldon & Miklau, ICML 2019, arXiv
1901.09136).

MLDP treats queries as training samples. A set of training queries ``F_x`` is answered once with
Laplace noise calibrated to the set's sensitivity ``S_Fx`` (the paper's Definition 4); a prediction
model is fitted to the noisy answers and published; the model answers the published queries and
predicts fresh ones at no further privacy cost (post-processing).

Queries are linear counting queries on a clique's marginal, held by a :class:`QuerySet`: blocks of
rows over the clique's cells (the marginal's cells in row-major order of the clique's axes). 0/1 rows
are counting queries: range queries in 1-D (:meth:`QuerySet.ranges`) and 2-D
(:meth:`QuerySet.rectangles`), subset sums (:meth:`QuerySet.subset_sums`), single cells
(:meth:`QuerySet.cells`); any real row is accepted.

Pieces (each usable on its own):

* :func:`select_training`: the paper's training-set selector (coverage vs correlation, a target
  size ``m``, seeded ties); it reads only the public queries.
* :func:`training_sensitivity`: ``S_Fx`` exactly, the largest total change of all training answers
  when one record is added or removed (the max column L1 norm of the stacked training matrix, over
  records when the queries span several cliques); doubled for replace-one neighbours (Zhu et al., IEEE BigData 2017).
* :func:`fit_regression`: the original arm, a regression model of the paper's Section III-D
  (:class:`RegressionModel`): linear regression on indicator features (least squares, optional
  ridge) or the Gaussian-basis model.
* :func:`fit_pgm`: the +PGM arm, the same noisy answers as linear measurements, one
  :func:`pgmjax.estimate`.
* :func:`mldp`: Algorithm 1 with both arms on the same noise, returning a
  :class:`~pgmjax.mechanisms.result.MechanismResult`.
* :func:`laplace_baseline`: the paper's baseline, every published query answered with Laplace noise
  calibrated to the whole published set's sensitivity.

Example:
    >>> import jax, numpy as np, pgmjax as pj
    >>> dom = pj.Domain({"grade": 4})
    >>> data = pj.Dataset(np.repeat(np.arange(4), [12, 24, 6, 7])[:, None], dom)
    >>> ranges = QuerySet.ranges(dom, "grade")                  # the paper's Table I: 10 range queries
    >>> training_sensitivity(ranges), training_sensitivity(QuerySet.cells(dom, "grade"))
    (6.0, 1.0)
    >>> res = mldp(data, 1.0, key=jax.random.key(0), training=ranges, size=4, pgm_iters=200)
    >>> res.info["sensitivity"], res.accountant.spent == 1.0
    (1.0, True)
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import jax
import numpy as np
import scipy.linalg

from .. import queries as Q
from ..api import estimate
from ..dataset import Dataset
from ..domain import Clique, CliqueLike, Domain
from ..measurement import Measurement, estimate_total
from ..privacy import REST, Accountant, l1_sensitivity, check_bool as _bool, check_nonnegative as _nonnegative, check_positive as _positive
from ..privacy import check_count as _int
from ..privacy import check_key as _check_key
from .dualquery import max_sum_ve
from .estimates import CliqueTables
from .options import check_epsilon, engine_options
from .result import MechanismResult

__all__ = [
    "QuerySet",
    "RegressionModel",
    "mldp",
    "select_training",
    "training_sensitivity",
    "sensitivity_is_exact",
    "fit_regression",
    "fit_pgm",
    "pgm_measurements",
    "laplace_baseline",
]

MODELS = ("linear", "gaussian")
_RESERVED_OPTIONS = ("iters", "total", "warm_start", "measurements", "domain")
_MAX_ROWS = 1 << 22  # refuse to build query sets larger than this (a dense row per query)


# ---------------------------------------------------------------------------------------------------
# Query sets
# ---------------------------------------------------------------------------------------------------


class QuerySet:
    """Linear queries on clique marginals: blocks ``(clique, matrix)`` of rows over the clique's cells.

    Row ``r`` of a block on clique ``C`` answers ``<matrix[r], mu_C.ravel()>``, where ``mu_C`` is the
    marginal with axes in the clique's order (row-major cells, as :meth:`pgmjax.Measurement.answer`).
    The queries of a set are its blocks' rows in order; ``len(qs)`` is their number.

    Args:
        domain: the :class:`~pgmjax.Domain` the queries are on.
        blocks: ``(clique, matrix)`` pairs; ``matrix`` is ``(rows, cells of the clique)`` (a 1-D array
            is one row), finite entries.

    Example:
        >>> dom = Domain({"a": 3, "b": 2})
        >>> qs = QuerySet(dom, [(("a",), [[1, 1, 0], [0, 0, 1]]), (("a", "b"), np.ones(6))])
        >>> len(qs), qs.cliques
        (3, (('a',), ('a', 'b')))
    """

    def __init__(self, domain: Domain, blocks: Sequence[tuple[CliqueLike, object]]):
        if not isinstance(domain, Domain):
            raise TypeError(f"QuerySet: domain must be a pgmjax.Domain, got {type(domain).__name__}")
        self.domain = domain
        out = []
        for i, block in enumerate(blocks):
            try:
                clique, matrix = block
            except (TypeError, ValueError):
                raise TypeError(f"QuerySet: block {i} must be a (clique, matrix) pair, got {type(block).__name__}") from None
            clique = domain.check_clique(clique, what=f"QuerySet block {i}: clique")
            if not clique:
                raise ValueError(f"QuerySet: block {i} has an empty clique")
            try:
                m = np.asarray(matrix, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"QuerySet: block {i} on {clique}: the matrix must be numbers") from None
            if m.ndim == 1:
                m = m[None, :]
            cells = domain.size(clique)
            if m.ndim != 2 or m.shape[1] != cells or m.shape[0] == 0:
                raise ValueError(
                    f"QuerySet: block {i} on {clique}: expected a (rows >= 1, {cells}) matrix (one column per cell), got shape {m.shape}"
                )
            if not np.all(np.isfinite(m)):
                raise ValueError(f"QuerySet: block {i} on {clique}: the matrix has non-finite entries")
            out.append((clique, m))
        if not out:
            raise ValueError("QuerySet: no blocks given")
        self.blocks: tuple[tuple[Clique, np.ndarray], ...] = tuple(out)
        self._offsets = np.cumsum([0] + [m.shape[0] for _, m in out])

    # Builders ------------------------------------------------------------------------------------
    @classmethod
    def cells(cls, domain: Domain, clique: CliqueLike) -> "QuerySet":
        """One query per cell of ``clique`` (the identity: a partition, sensitivity 1).

        Example:
            >>> len(QuerySet.cells(Domain({"a": 3, "b": 2}), ("a", "b")))
            6
        """
        clique = domain.check_clique(clique, what="QuerySet.cells: clique")
        return cls(domain, [(clique, np.eye(domain.size(clique)))])

    @classmethod
    def ranges(cls, domain: Domain, attr: str) -> "QuerySet":
        """Every 1-D range ``lo <= x <= hi`` of one attribute: ``n (n + 1) / 2`` rows ordered by ``lo`` then ``hi``.

        Example:
            >>> QuerySet.ranges(Domain({"a": 3}), "a").blocks[0][1].tolist()
            [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
        """
        (attr,) = domain.check_clique((attr,), what="QuerySet.ranges: attribute")
        return cls(domain, [((attr,), Q.AllRange().matrix(domain[attr]))])

    @classmethod
    def rectangles(cls, domain: Domain, clique: CliqueLike, count: int | None = None, *, key=None) -> "QuerySet":
        """Range queries on several attributes (hyper-rectangles): products of one range per attribute.

        Args:
            domain: the domain.
            clique: the attributes (one range each).
            count: None for every rectangle (rows in the order of ``itertools.product`` over each
                attribute's :meth:`ranges` order), or how many distinct rectangles to draw uniformly
                at random (the drawn order; needs ``key``).
            key: a ``jax.random`` key (with ``count``).

        Returns:
            A QuerySet with one block on ``clique``.

        Example:
            >>> dom = Domain({"a": 3, "b": 4})
            >>> len(QuerySet.rectangles(dom, ("a", "b"))), len(QuerySet.rectangles(dom, ("a", "b"), 5, key=jax.random.key(0)))
            (60, 5)
        """
        where = "QuerySet.rectangles"
        clique = domain.check_clique(clique, what=f"{where}: clique")
        if not clique:
            raise ValueError(f"{where}: the clique is empty")
        per = [Q.AllRange().matrix(domain[a]) for a in clique]
        sizes = [p.shape[0] for p in per]
        total = math.prod(sizes)
        if count is None:
            if key is not None:
                raise ValueError(f"{where}: key= draws a random subset; give count= with it")
            if total * domain.size(clique) > _MAX_ROWS * 64:
                raise ValueError(f"{where}: {total:,} rectangles on {clique} is too many to build densely; draw count= of them")
            index = np.arange(total)
        else:
            count = _int(count, "count", where)
            if count > total:
                raise ValueError(f"{where}: count={count} exceeds the {total:,} distinct rectangles on {clique}")
            if key is None:
                raise ValueError(f"{where}: drawing count= random rectangles needs key= (a jax.random key)")
            _check_key(key, where)
            index = _distinct_draws(key, total, count)
        parts = np.unravel_index(index, sizes)
        rows = np.ones((index.size, 1))
        for p, i in zip(per, parts):
            rows = (rows[:, :, None] * p[i][:, None, :]).reshape(index.size, -1)
        return cls(domain, [(clique, rows)])

    @classmethod
    def subset_sums(cls, domain: Domain, attr: str) -> "QuerySet":
        """Every non-empty subset sum of one attribute's cells: ``2^n - 1`` rows (row ``i`` is the subset whose bit mask is ``i + 1``).

        Each cell lies in ``2^(n-1)`` of them (512 for 10 bins). ``n <= 20``.

        Example:
            >>> QuerySet.subset_sums(Domain({"a": 2}), "a").blocks[0][1].tolist()
            [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
        """
        (attr,) = domain.check_clique((attr,), what="QuerySet.subset_sums: attribute")
        n = domain[attr]
        if n > 20:
            raise ValueError(f"QuerySet.subset_sums: {attr!r} has {n} values; 2^{n} - 1 subsets is too many (at most 20 values)")
        masks = np.arange(1, 2**n)
        return cls(domain, [((attr,), ((masks[:, None] >> np.arange(n)) & 1).astype(np.float64))])

    # Access --------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self._offsets[-1])

    @property
    def integer(self) -> bool:
        """Whether every coefficient is an integer, so the answers are integers for every dataset."""
        return all(np.array_equal(m, np.round(m)) for _, m in self.blocks)

    def __repr__(self) -> str:
        return f"QuerySet({len(self)} queries on {len(self.cliques)} clique(s): {list(self.cliques)})"

    def __add__(self, other: "QuerySet") -> "QuerySet":
        if not isinstance(other, QuerySet):
            return NotImplemented
        if other.domain != self.domain:
            raise ValueError("QuerySet: cannot concatenate query sets on different domains")
        return QuerySet(self.domain, self.blocks + other.blocks)

    @property
    def cliques(self) -> tuple[Clique, ...]:
        """The distinct cliques, in first-seen order."""
        return tuple(dict.fromkeys(c for c, _ in self.blocks))

    def by_clique(self) -> dict[Clique, tuple[np.ndarray, np.ndarray]]:
        """``{clique: (matrix of all its rows, their positions in the set)}``."""
        out: dict[Clique, tuple[list, list]] = {}
        for (c, m), lo in zip(self.blocks, self._offsets[:-1]):
            mats, pos = out.setdefault(c, ([], []))
            mats.append(m)
            pos.append(np.arange(lo, lo + m.shape[0]))
        return {c: (np.concatenate(ms), np.concatenate(ps)) for c, (ms, ps) in out.items()}

    def take(self, index) -> "QuerySet":
        """The queries at positions ``index`` (in that order; consecutive rows of one clique share a block).

        Example:
            >>> QuerySet.ranges(Domain({"a": 3}), "a").take([5, 0]).blocks[0][1].tolist()
            [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
        """
        idx = np.asarray(index)
        if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"QuerySet.take: index must be a non-empty 1-D array of integers, got {index!r}")
        if idx.min() < 0 or idx.max() >= len(self):
            raise ValueError(f"QuerySet.take: index out of range [0, {len(self)})")
        which = np.searchsorted(self._offsets, idx, side="right") - 1
        blocks = []
        start = 0
        for end in list(np.flatnonzero(np.diff(which)) + 1) + [idx.size]:
            b = int(which[start])
            clique, m = self.blocks[b]
            rows = m[idx[start:end] - self._offsets[b]]
            if blocks and blocks[-1][0] == clique:
                blocks[-1] = (clique, np.concatenate([blocks[-1][1], rows]))
            else:
                blocks.append((clique, rows))
            start = end
        return QuerySet(self.domain, blocks)

    def answer(self, source) -> np.ndarray:
        """The answers of every query, flat ``(len(self),)``.

        Args:
            source: a :class:`~pgmjax.Dataset` (true answers), a :class:`RegressionModel` (its
                predictions), or any model with ``marginals(cliques)`` (a
                :class:`~pgmjax.GraphicalModel`, :class:`~pgmjax.mechanisms.estimates.CliqueTables`, ...).

        Returns:
            A float64 array.
        """
        if isinstance(source, RegressionModel):
            return source.predict(self)
        if not hasattr(source, "marginals"):
            raise TypeError(f"QuerySet.answer: cannot answer queries on {type(source).__name__}; give a Dataset or a model")
        _check_domain(self, source.domain, "QuerySet.answer")
        tables = dict(zip(self.cliques, source.marginals(list(self.cliques))))
        return np.concatenate([m @ np.asarray(tables[c], np.float64).reshape(-1) for c, m in self.blocks])

    def dense(self) -> tuple[np.ndarray, list[tuple[Clique, int]]]:
        """All rows side by side over the concatenated cells of the distinct cliques: ``(matrix, [(clique, cells)])``."""
        cells = [(c, self.domain.size(c)) for c in self.cliques]
        start = dict(zip(self.cliques, np.cumsum([0] + [n for _, n in cells])[:-1]))
        out = np.zeros((len(self), sum(n for _, n in cells)))
        for (c, m), lo in zip(self.blocks, self._offsets[:-1]):
            out[lo : lo + m.shape[0], start[c] : start[c] + m.shape[1]] = m
        return out, cells


def _distinct_draws(key, total: int, count: int) -> np.ndarray:
    """``count`` distinct integers in ``[0, total)``, uniformly at random, in draw order."""
    seen: dict[int, None] = {}
    while len(seen) < count:
        key, sub = jax.random.split(key)
        u = np.asarray(jax.random.bits(sub, (2, 2 * count + 16), dtype=np.uint32)).astype(np.uint64)
        draws = ((u[0] << np.uint64(32)) | u[1]) % np.uint64(total)  # bias < total / 2^64: negligible
        for v in draws.tolist():
            seen.setdefault(int(v), None)
            if len(seen) == count:
                break
    return np.fromiter(seen, np.int64, count)


def _check_domain(queries: QuerySet, domain: Domain, where: str) -> None:
    for c in queries.cliques:
        for a in c:
            if a not in domain or domain[a] != queries.domain[a]:
                raise ValueError(f"{where}: query clique {c}: attribute {a!r} is missing from, or sized differently in, the source's domain")


def _as_queries(value, name: str, where: str) -> QuerySet:
    if not isinstance(value, QuerySet):
        raise TypeError(f"{where}: {name} must be a QuerySet (e.g. QuerySet.ranges(domain, attr)), got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------------------------------
# Sensitivity and training-set selection
# ---------------------------------------------------------------------------------------------------


def training_sensitivity(queries: QuerySet, *, bounded: bool = False) -> float:
    """``S_Fx``: the L1 sensitivity of a set of linear queries (the paper's Definition 4).

    Adding or removing one record ``x`` changes query ``f`` by ``f``'s entry at ``x``'s cell, so the
    summed change ``sum_f |f(D) - f(D')|`` is the L1 norm of ``x``'s column in the stacked query
    matrix. On one clique that is the max column L1 norm (:func:`pgmjax.privacy.l1_sensitivity`).
    Over several cliques ``x`` hits one cell of each, and the maximum over records of the sum of the
    per-clique column norms is found exactly by max-sum variable elimination
    (:func:`~pgmjax.mechanisms.dualquery.max_sum_ve`); when every clique's column norms are equal
    (e.g. marginal cells) it is their sum. Only if that elimination would need a table of more than
    ``2^24`` cells is the sum of the per-clique maxima returned instead: an upper bound (so still a
    valid calibration), exact whenever one record reaches every clique's heaviest column
    (:func:`sensitivity_is_exact` says which). Replace-one neighbours double it (Zhu et al., IEEE BigData 2017).

    Args:
        queries: the :class:`QuerySet`.
        bounded: False for add/remove-one neighbours, True for replace-one.

    Returns:
        The sensitivity.

    Example:
        >>> dom = Domain({"a": 10})
        >>> training_sensitivity(QuerySet.subset_sums(dom, "a")), training_sensitivity(QuerySet.cells(dom, "a"), bounded=True)
        (512.0, 2.0)
    """
    where = "training_sensitivity"
    queries = _as_queries(queries, "queries", where)
    bounded = _bool(bounded, "bounded", where)
    value, _ = _sensitivity(queries)
    return 2.0 * value if bounded else value


def sensitivity_is_exact(queries: QuerySet) -> bool:
    """Whether :func:`training_sensitivity` is exact for ``queries`` (else it is the per-clique upper bound)."""
    return _sensitivity(_as_queries(queries, "queries", "sensitivity_is_exact"))[1]


_VE_LIMIT = 1 << 24


def _sensitivity(queries: QuerySet) -> tuple[float, bool]:
    """``(add/remove-one sensitivity, exact?)``."""
    groups = queries.by_clique()
    if len(groups) == 1:
        ((matrix, _),) = groups.values()
        return l1_sensitivity(matrix), True
    domain = queries.domain
    factors = [(c, np.abs(m).sum(axis=0).reshape(domain.shape_of(c))) for c, (m, _) in groups.items()]
    upper = math.fsum(float(t.max()) for _, t in factors)
    if all(t.max() == t.min() for _, t in factors):
        return upper, True
    if _elimination_cells(domain, [c for c, _ in factors]) > _VE_LIMIT:
        return upper, False
    attrs = domain.canonical(a for c, _ in factors for a in c)
    _, value = max_sum_ve(factors, domain.project(attrs))
    return float(value), True


def _elimination_cells(domain: Domain, cliques: Sequence[Clique]) -> int:
    """The largest table :func:`max_sum_ve`'s greedy elimination builds over ``cliques`` (symbolically)."""
    scopes = [frozenset(c) for c in cliques]
    remaining = set().union(*scopes)
    largest = 1
    while remaining:
        def union(v):
            return frozenset().union(*(s for s in scopes if v in s))

        v = min(remaining, key=lambda v: (math.prod(domain[a] for a in union(v)), domain.index(v)))  # max_sum_ve's order
        u = union(v)
        largest = max(largest, math.prod(domain[a] for a in u))
        scopes = [s for s in scopes if v not in s] + [u - {v}]
        remaining.discard(v)
    return largest


def select_training(candidates: QuerySet, size: int, *, key) -> np.ndarray:
    """Choose ``size`` training queries with maximal coverage and minimal correlation (Zhu et al., IEEE BigData 2017).

    The paper's rule (Section III-C): cover every cell (cells no training query touches cannot be
    learned: model error) while keeping the per-cell load low (the number of training queries a
    record affects is the sensitivity: noise error). The greedy below is pgmjax's reading of that rule
    for a target size ``m`` (the paper gives the worked example only). With
    ``load[j]`` the sum of ``|q_j|`` over the chosen queries (cells of all cliques side by side), the
    *open* cells those of the lowest load (the uncovered cells until every cell is covered, then the
    next layer), ``r`` the picks left and ``t = |open| / r`` the share of the open cells each remaining
    pick should take, every step adds the unchosen candidate that, in this order,

    1. covers the most open cells, counted up to ``ceil(t)`` (coverage; no credit for more than its
       share, which would leave later picks nothing to cover without overlap);
    2. raises the maximum load least (correlation: the sensitivity proxy);
    3. puts the least load on cells that are not open (overlap with what is covered);
    4. covers a number of open cells closest to ``t``;
    5. covers the first open cell (in the order of the cells) earliest: a sweep, so that the open
       cells stay in one piece and a partition into ``m`` ranges is found when one exists;
    6. comes first in a random order drawn from ``key`` (seeded ties).

    For the paper's Table I (all 10 ranges of 4 bins, ``m = 4``) this picks the four single bins
    (sensitivity 1, full coverage), and for the 1023 subset sums of 10 bins with ``m = 10`` the ten
    singletons; a partition into near-equal parts when ``m`` is at most the number of cells and the
    candidates allow it. Only the public queries are read: the selection costs no privacy.
    :func:`training_sensitivity` gives the exact ``S_Fx`` of the result.

    Args:
        candidates: the :class:`QuerySet` to choose from (usually the published queries).
        size: ``m``, between 1 and ``len(candidates)`` (all of them: ``arange(len)``).
        key: a ``jax.random`` key for the tie-breaking order.

    Returns:
        The chosen positions in ``candidates`` (int64, in the order chosen); ``candidates.take(...)``
        gives the training set.

    Example:
        >>> dom = Domain({"grade": 4})
        >>> ranges = QuerySet.ranges(dom, "grade")
        >>> picked = select_training(ranges, 4, key=jax.random.key(0))
        >>> sorted(ranges.take(picked).blocks[0][1].sum(axis=1).tolist())    # four single bins
        [1.0, 1.0, 1.0, 1.0]
    """
    where = "select_training"
    candidates = _as_queries(candidates, "candidates", where)
    k = len(candidates)
    size = _int(size, "size", where)
    if size > k:
        raise ValueError(f"{where}: size={size} exceeds the {k} candidate queries")
    _check_key(key, where)
    if size == k:
        return np.arange(k, dtype=np.int64)
    weights = np.abs(candidates.dense()[0])
    support = weights > 0
    if not support.any(axis=1).all():
        bad = int(np.flatnonzero(~support.any(axis=1))[0])
        raise ValueError(f"{where}: candidate {bad} is identically zero (it touches no cell)")
    order = np.empty(k, np.int64)
    order[np.asarray(jax.random.permutation(key, k))] = np.arange(k)  # rank of each candidate in a random order
    cells = weights.shape[1]

    def first_open(rows, open_idx):
        """Index of each row's first open cell (``cells`` when it covers none)."""
        sub = support[np.ix_(rows, open_idx)]
        return np.where(sub.any(axis=1), open_idx[sub.argmax(axis=1)], cells) if open_idx.size else np.full(rows.size, cells)

    # Incremental state (loads only grow): the open cells, each candidate's open count, its load on
    # closed cells, its first open cell and its peak max_{j in support}(load_j + w_j).
    load = np.zeros(cells)
    low = top = 0.0
    open_cells = np.ones(cells, bool)
    n_open = support.sum(axis=1).astype(np.float64)
    overlap = np.zeros(k)
    peak = weights.max(axis=1)
    first = first_open(np.arange(k), np.arange(cells))
    free = np.ones(k, bool)
    picks = []
    for step in range(size):
        t = open_cells.sum() / (size - step)
        cand = np.flatnonzero(free)
        keys = (
            order[cand],
            first[cand],
            np.abs(n_open[cand] - t),
            overlap[cand],
            np.maximum(peak[cand] - top, 0.0),
            -np.minimum(n_open[cand], math.ceil(t)),
        )
        best = int(cand[np.lexsort(keys)[0]])
        picks.append(best)
        free[best] = False
        cols = np.flatnonzero(support[best])
        load[cols] += weights[best, cols]
        top = load.max()
        peak = np.maximum(peak, np.where(support[:, cols], load[cols] + weights[:, cols], -np.inf).max(axis=1))
        if load.min() > low:  # every open cell is covered: the next layer opens
            low = load.min()
            open_cells = load == low
            n_open = support[:, open_cells].sum(axis=1).astype(np.float64)
            overlap = weights[:, ~open_cells].sum(axis=1)
            first = first_open(np.arange(k), np.flatnonzero(open_cells))
        else:
            closed = cols[open_cells[cols]]  # their load rose above the lowest
            open_cells[closed] = False
            n_open -= support[:, closed].sum(axis=1)
            overlap += weights[:, closed].sum(axis=1)
            stale = np.flatnonzero(np.isin(first, closed))
            first[stale] = first_open(stale, np.flatnonzero(open_cells))
    return np.asarray(picks, np.int64)


# ---------------------------------------------------------------------------------------------------
# The original arm: regression models (paper Section III-D)
# ---------------------------------------------------------------------------------------------------


class RegressionModel:
    """MLDP's published model: per clique, a regression from a query's features to its answer.

    The features of a query on clique ``C`` are its row over ``C``'s cells (the 0/1 indicator of a
    counting query). Fitted by :func:`fit_regression` from noisy answers only.

    * ``kind="linear"``: ``y(q) = <w_C, q>``. The weights are an estimate of the histogram of ``C``,
      so the model is also a table: :meth:`marginal`, :meth:`marginals` and factored
      :meth:`answers` (as :class:`~pgmjax.mechanisms.estimates.CliqueTables`) work, and a
      :class:`~pgmjax.Workload` or :mod:`pgmjax.metrics` can evaluate it; a query on a sub-clique of
      a fitted clique is answered from the summed table.
    * ``kind="gaussian"``: ``y(q) = w_0 + sum_j w_j exp(-||q - mu_j||^2 / (2 u^2))`` (see
      :func:`fit_regression`). Non-linear in ``q``: only :meth:`predict`.

    Fresh queries: ``model.predict(query_set)`` (or ``query_set.answer(model)``).

    Attributes:
        kind: ``"linear"`` or ``"gaussian"``.
        domain: the domain.
        params: ``{clique: dict}``: ``{"weights": table}`` (linear) or ``{"intercept", "weights",
            "centers", "width"}`` (gaussian).
        total: the number of records the model stands for (reported; the linear model's total is the
            sum of a clique's weights).
    """

    def __init__(self, kind: str, domain: Domain, params: Mapping[Clique, dict], total: float):
        self.kind = kind
        self.domain = domain
        self.params = dict(params)
        self.total = float(total)
        self._tables = (
            CliqueTables(domain, {c: p["weights"] for c, p in self.params.items()}, total) if kind == "linear" else None
        )

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return tuple(self.params)

    def __repr__(self) -> str:
        return f"RegressionModel({self.kind}, cliques={list(self.params)})"

    def _no_model(self, clique: Clique):
        return ValueError(
            f"the {self.kind} regression model has no training query on {clique} (fitted cliques: {list(self.params)}); "
            "a per-clique regression cannot answer it (the +PGM arm can)"
        )

    def predict(self, queries: QuerySet) -> np.ndarray:
        """Predicted answers of every query in ``queries`` (flat), without any privacy cost."""
        queries = _as_queries(queries, "queries", "RegressionModel.predict")
        _check_domain(queries, self.domain, "RegressionModel.predict")
        out = []
        for clique, m in queries.blocks:
            if self.kind == "linear":
                try:
                    table = self._tables.marginal(clique)
                except ValueError:
                    raise self._no_model(clique) from None
                out.append(m @ table.reshape(-1))
            else:
                if clique not in self.params:
                    raise self._no_model(clique)
                out.append(_gaussian_predict(self.params[clique], m))
        return np.concatenate(out)

    def _linear_only(self, what: str):
        if self.kind != "linear":
            raise TypeError(
                f"RegressionModel.{what}: the Gaussian-basis model is non-linear in the query and has no table; use predict(QuerySet)"
            )

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        """Factored queries (``{attribute: factor}``, as :meth:`pgmjax.GraphicalModel.answers`); linear model only."""
        self._linear_only("answers")
        return self._tables.answers(queries)

    def marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        """The weight tables summed to ``cliques`` (linear model only)."""
        self._linear_only("marginals")
        return self._tables.marginals(cliques)

    def marginal(self, clique: CliqueLike) -> np.ndarray:
        return self.marginals([clique])[0]


def _gaussian_features(x: np.ndarray, centers: np.ndarray, width: float) -> np.ndarray:
    d2 = (x * x).sum(1)[:, None] + (centers * centers).sum(1)[None, :] - 2.0 * x @ centers.T
    return np.exp(-np.maximum(d2, 0.0) / (2.0 * width * width))


def _gaussian_predict(p: dict, x: np.ndarray) -> np.ndarray:
    return p["intercept"] + _gaussian_features(x, p["centers"], p["width"]) @ p["weights"]


def _ridge(design: np.ndarray, y: np.ndarray, ridge: float, free: int = 0) -> np.ndarray:
    """``argmin ||design w - y||^2 + ridge ||w[free:]||^2``; the minimum-norm solution when ``ridge = 0``.

    With ``ridge > 0`` the normal equations are positive definite (the unpenalised columns must be
    independent, as the intercept's column of ones is) and solved by Cholesky; else least squares (SVD).
    """
    if ridge > 0:
        gram = design.T @ design
        gram[np.arange(free, gram.shape[0]), np.arange(free, gram.shape[0])] += ridge
        return scipy.linalg.solve(gram, design.T @ y, assume_a="pos")
    return np.linalg.lstsq(design, y, rcond=None)[0]


def _default_width(x: np.ndarray) -> float:
    """Median distance between distinct rows (a public function of the query features); 1 if none differ."""
    d2 = (x * x).sum(1)[:, None] + (x * x).sum(1)[None, :] - 2.0 * x @ x.T
    d = np.sqrt(np.maximum(d2[np.triu_indices(x.shape[0], 1)], 0.0))
    d = d[d > 1e-12]
    return float(np.median(d)) if d.size else 1.0


def fit_regression(
    queries: QuerySet,
    answers,
    *,
    model: str = "linear",
    ridge: float = 0.0,
    width: float | None = None,
    centers: int | None = None,
    total: float | None = None,
) -> RegressionModel:
    """Fit MLDP's regression model to (noisy) answers of training queries (paper Section III-D).

    Both models are fitted clique by clique and read nothing but the query features and the given
    answers (post-processing of the noisy answers).

    * ``"linear"`` (the paper's best model for range queries; the default): linear regression on the
      queries' indicator features without intercept, ``y(q) = <w, q>``: least squares
      ``argmin_w ||Q_C w - y_C||^2 + ridge ||w||^2`` (the minimum-norm solution when ``ridge = 0``:
      cells no training query touches get weight 0). The weights estimate the clique's histogram;
      with exact answers and training queries of full column rank they are the histogram.
    * ``"gaussian"``: the paper's equations 6-7, a linear combination of fixed Gaussian basis
      functions of the query, ``y(q) = w_0 + sum_j w_j phi_j(q)``,
      ``phi_j(q) = exp(-||q - mu_j||^2 / (2 u^2))``. The paper prints ``mu`` and ``u`` without the
      index ``j`` (the paper's notation is ambiguous here); pgmjax reads it as the standard
      Gaussian-basis model (Bishop, PRML eq. 3.4, whose wording the paper follows): one basis function
      per centre ``mu_j``, the centres being the training queries' feature vectors (the first
      ``centers`` of them, or all), and ``u`` one preset width shared by all (``width``; default
      the median distance between the training queries' features). ``w`` is fitted by least squares
      with the ridge penalty on ``w_1..`` (not on ``w_0``). Centres and width depend only on the
      query features, never on the data.

    Args:
        queries: the training :class:`QuerySet`.
        answers: their (noisy) answers, one per query.
        model: ``"linear"`` or ``"gaussian"``.
        ridge: the ridge penalty ``>= 0``.
        width: the Gaussian basis width ``u > 0`` (gaussian only; default the median distance).
        centers: how many training queries serve as centres (gaussian only; default all).
        total: the number of records the model stands for (reported as ``model.total``); default the
            largest of the linear model's per-clique weight sums, resp. of the answers.

    Returns:
        A :class:`RegressionModel`.

    Example:
        >>> dom = Domain({"a": 4})
        >>> reg = fit_regression(QuerySet.cells(dom, "a"), [12.0, 24.0, 6.0, 7.0])
        >>> reg.predict(QuerySet.ranges(dom, "a"))[[2, 3]].tolist()      # ranges [0, 2] and [0, 3]
        [42.0, 49.0]
    """
    where = "fit_regression"
    queries = _as_queries(queries, "queries", where)
    y = _answers(answers, len(queries), where)
    model = _choice(model, "model", MODELS, where)
    ridge = _nonnegative(ridge, "ridge", where)
    if width is not None:
        width = _positive(width, "width", where)
    if centers is not None:
        centers = _int(centers, "centers", where)
    if model == "linear" and (width is not None or centers is not None):
        raise ValueError(f"{where}: width= and centers= belong to model='gaussian'")
    params: dict[Clique, dict] = {}
    for clique, (matrix, pos) in queries.by_clique().items():
        yc = y[pos]
        if model == "linear":
            w = _ridge(matrix, yc, ridge)
            params[clique] = {"weights": w.reshape(queries.domain.shape_of(clique))}
        else:
            mu = matrix[: (matrix.shape[0] if centers is None else min(centers, matrix.shape[0]))]
            u = _default_width(matrix) if width is None else width
            design = np.hstack([np.ones((matrix.shape[0], 1)), _gaussian_features(matrix, mu, u)])
            w = _ridge(design, yc, ridge, free=1)
            params[clique] = {"intercept": float(w[0]), "weights": w[1:], "centers": mu, "width": u}
    if total is None:
        if model == "linear":
            total = max(float(p["weights"].sum()) for p in params.values())
        else:
            total = float(np.max(y))
        total = max(total, 1.0)
    else:
        total = _positive(total, "total", where)
    return RegressionModel(model, queries.domain, params, total)


def _answers(values, rows: int, where: str) -> np.ndarray:
    try:
        y = np.asarray(values, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: answers must be an array of numbers") from None
    if y.size != rows:
        raise ValueError(f"{where}: {y.size} answers for {rows} queries")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{where}: answers have non-finite entries")
    return y


def _choice(value, name: str, options, where: str) -> str:
    if value not in options:
        raise ValueError(f"{where}: {name} must be one of {options}, got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------------
# The +PGM arm
# ---------------------------------------------------------------------------------------------------


def pgm_measurements(queries: QuerySet, answers, stddev: float) -> list[Measurement]:
    """The training answers as linear measurements, one per clique (Zhu et al., IEEE BigData 2017): ``Measurement(C, y_C, stddev, query=Q_C)``."""
    where = "pgm_measurements"
    queries = _as_queries(queries, "queries", where)
    y = _answers(answers, len(queries), where)
    stddev = _positive(stddev, "stddev", where)
    return [Measurement(c, y[pos], stddev, query=m) for c, (m, pos) in queries.by_clique().items()]


def fit_pgm(
    domain: Domain,
    queries: QuerySet,
    answers,
    stddev: float,
    *,
    total: float | None = None,
    iters: int = 1000,
    **options,
):
    """The +PGM arm: one graphical model fitted to the training answers (Zhu et al., IEEE BigData 2017).

    The answers are grouped by clique into measurements ``(C, y_C, stddev, Q_C)`` and one
    :func:`pgmjax.estimate` fits a model to all of them; it answers any query, on any clique of the
    domain, from ``<q, mu_hat_C>``. The engine adds non-negativity and global consistency to the
    regression's least squares.

    Args:
        domain: the model's domain (must contain the queries' attributes).
        queries: the training :class:`QuerySet`.
        answers: their (noisy) answers.
        stddev: the noise standard deviation of every answer (``sqrt(2) S_Fx / eps`` for Laplace).
        total: the number of records; None estimates it from the measurements
            (:func:`pgmjax.estimate_total`) and, when the training queries do not determine it, takes
            the largest per-clique sum of the least-squares (linear regression) weights.
        iters: engine iterations.
        **options: more keyword arguments for :func:`pgmjax.estimate` (``method``, ``loss``,
            ``dtype``, ...).

    Returns:
        ``(model, measurements, total_source)``: the :class:`~pgmjax.GraphicalModel`, the
        measurements, and how the total was set (``"given"``, ``"estimate_total"`` or
        ``"least_squares"``).
    """
    where = "fit_pgm"
    if not isinstance(domain, Domain):
        raise TypeError(f"{where}: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    queries = _as_queries(queries, "queries", where)
    _check_domain(queries, domain, where)
    iters = _int(iters, "iters", where, 0)
    engine_options(options, _RESERVED_OPTIONS, where, argument="options")
    measurements = pgm_measurements(queries, answers, stddev)
    if total is not None:
        total, source = _positive(total, "total", where), "given"
    else:
        try:
            total, source = estimate_total(measurements)[0], "estimate_total"
        except ValueError:
            total = fit_regression(queries, answers).total
            source = "least_squares"
    model = estimate(domain, measurements, iters=iters, total=total, **options)
    return model, measurements, source


# ---------------------------------------------------------------------------------------------------
# The front-end and the baseline
# ---------------------------------------------------------------------------------------------------


def _coverage(queries: QuerySet) -> float:
    """Share of the queries' cliques' cells touched by at least one query."""
    hit = cells = 0
    for c, (m, _) in queries.by_clique().items():
        hit += int((np.abs(m).sum(axis=0) > 0).sum())
        cells += queries.domain.size(c)
    return hit / cells


def mldp(
    data: Dataset,
    epsilon: float,
    *,
    key,
    training: QuerySet,
    fresh: QuerySet | None = None,
    size: int | None = None,
    bounded: bool = False,
    model: str = "linear",
    ridge: float = 0.0,
    width: float | None = None,
    centers: int | None = None,
    pgm_iters: int = 1000,
    original: bool = True,
    synthetic: bool = False,
    estimate_options: Mapping | None = None,
) -> MechanismResult:
    """MLDP and MLDP+PGM on the same noisy training answers (Zhu et al. 2017, Algorithm 1).

    1. Training set: ``training`` itself, or, with ``size=m``, ``m`` of its queries chosen by
       :func:`select_training` (``training`` is then the published set the training queries are
       drawn from).
    2. ``S_Fx`` = :func:`training_sensitivity` (exact; doubled when ``bounded``).
    3. ``y = F_x(D) + Lap(S_Fx / eps)^m``: one Laplace release through the
       :class:`~pgmjax.privacy.Accountant`, spending exactly ``epsilon`` (the only read of ``data``).
    4. Original arm: :func:`fit_regression` on ``(F_x, y)`` (``model``, ``ridge``, ``width``,
       ``centers``).
    5. +PGM arm: :func:`fit_pgm` on the same ``y`` with ``stddev = sqrt(2) S_Fx / eps``; the total
       is ``N`` when ``bounded`` (public), else estimated from the measurements.
    6. Both arms answer the published queries and ``fresh`` at no further cost.

    Answering later: ``result.original.predict(qs)`` (or ``qs.answer(result.original)``) for the
    regression model; ``qs.answer(result.model)`` for the graphical model, which also answers queries
    on cliques no training query touched.

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: the privacy budget (pure ``epsilon``-DP).
        key: a ``jax.random`` key; the selection, the noise and the synthetic data follow from it.
        training: the training queries, or (with ``size``) the published queries to choose them from.
        fresh: queries to answer besides the published ones (never measured).
        size: ``m``; None measures every query of ``training``.
        bounded: replace-one neighbours (``N`` public, sensitivity doubled) instead of add/remove-one.
        model: the regression model, ``"linear"`` (default) or ``"gaussian"``.
        ridge, width, centers: regression options (see :func:`fit_regression`).
        pgm_iters: engine iterations of the +PGM arm.
        original: run the regression arm.
        synthetic: draw ``round(model.total)`` synthetic records from the +PGM model.
        estimate_options: more keyword arguments for :func:`pgmjax.estimate` (not ``iters``,
            ``total``, ``warm_start``).

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (+PGM), ``original``
        (:class:`RegressionModel`), ``measurements`` (one per clique), ``accountant`` (one Laplace
        entry, ``spent == epsilon``), ``synthetic`` (or None), and ``info``: ``training`` (the
        QuerySet), ``training_index`` (positions in ``training`` when selected, else None),
        ``published`` (the QuerySet answered as published), ``size``, ``sensitivity`` (``S_Fx``),
        ``sensitivity_exact`` (False only for the upper bound of :func:`training_sensitivity`),
        ``scale`` (Laplace ``b``), ``stddev``, ``noisy_answers``, ``coverage`` (share of cells
        touched), ``weights`` (the regression parameters), ``total`` and ``total_source`` (+PGM),
        ``answers`` (``{"published": {"original", "pgm"}, "fresh": {...}}``), ``seconds``.

    Raises:
        ValueError / TypeError: bad input (epsilon <= 0, a non-QuerySet, size out of range, queries on
            attributes the data lacks, an all-zero training set, unknown model, ...), before any noise.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 10, "b": 3})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [10, 3], (1000, 2)), dom)
        >>> res = mldp(data, 1.0, key=jax.random.key(0), training=QuerySet.subset_sums(dom, "a"), size=10, pgm_iters=200)
        >>> res.info["sensitivity"], len(res.info["training"]), res.info["answers"]["published"]["pgm"].shape
        (1.0, 10, (1023,))
    """
    where = "mldp"
    # ---- validation: everything before the private data is read
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    if len(data) == 0:
        raise ValueError(f"{where}: the dataset has no records")
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    _check_key(key, where)
    training = _as_queries(training, "training", where)
    _check_domain(training, data.domain, where)
    if fresh is not None:
        fresh = _as_queries(fresh, "fresh", where)
        _check_domain(fresh, data.domain, where)
    if size is not None:
        size = _int(size, "size", where)
        if size > len(training):
            raise ValueError(f"{where}: size={size} exceeds the {len(training)} queries of training")
    bounded = _bool(bounded, "bounded", where)
    model = _choice(model, "model", MODELS, where)
    ridge = _nonnegative(ridge, "ridge", where)
    if width is not None:
        width = _positive(width, "width", where)
    if centers is not None:
        centers = _int(centers, "centers", where)
    if model == "linear" and (width is not None or centers is not None):
        raise ValueError(f"{where}: width= and centers= belong to model='gaussian'")
    pgm_iters = _int(pgm_iters, "pgm_iters", where)
    original = _bool(original, "original", where)
    synthetic = _bool(synthetic, "synthetic", where)
    options = engine_options(estimate_options, _RESERVED_OPTIONS, where, hint="; use pgm_iters= and bounded= instead")

    start = time.perf_counter()
    k_select, k_noise, k_synth = jax.random.split(key, 3)
    published = training
    index = None
    if size is not None:
        index = select_training(training, size, key=k_select)
        training = training.take(index)
    select_seconds = time.perf_counter() - start
    sens = training_sensitivity(training, bounded=bounded)
    if not sens > 0:
        raise ValueError(f"{where}: every training query is identically zero (sensitivity 0): nothing to learn")

    # ---- the one private release: Laplace on all training answers at once
    acc = Accountant(epsilon=epsilon, bounded=bounded)
    y = acc.laplace(
        k_noise, training.answer(data), sens, epsilon=REST, integer=training.integer,
        target=f"MLDP: {len(training)} training queries on {list(training.cliques)}",
    )
    scale = acc.ledger[-1].scale
    stddev = math.sqrt(2.0) * scale

    # ---- the original arm: the regression model
    t0 = time.perf_counter()
    reg = fit_regression(training, y, model=model, ridge=ridge, width=width, centers=centers) if original else None
    reg_seconds = time.perf_counter() - t0

    # ---- the +PGM arm: the same answers as measurements
    t0 = time.perf_counter()
    pgm, measurements, total_source = fit_pgm(
        data.domain, training, y, stddev, total=float(len(data)) if bounded else None, iters=pgm_iters, **options
    )
    pgm_seconds = time.perf_counter() - t0
    synth = pgm.synthetic_data(max(1, int(round(pgm.total))), k_synth) if synthetic else None

    answers = {}
    for name, qs in (("published", published), ("fresh", fresh)):
        if qs is None:
            continue
        arm = {"pgm": qs.answer(pgm)}
        if reg is not None:
            try:
                arm["original"] = reg.predict(qs)
            except ValueError as err:  # a clique without training queries: the regression cannot answer
                arm["original"] = None
                arm["original_error"] = str(err)
        answers[name] = arm
    info = {
        "training": training,
        "training_index": index,
        "published": published,
        "size": len(training),
        "bounded": bounded,
        "epsilon": epsilon,
        "sensitivity": sens,
        "sensitivity_exact": sensitivity_is_exact(training),
        "scale": scale,
        "stddev": stddev,
        "noisy_answers": y,
        "coverage": _coverage(training),
        "model": model,
        "weights": None if reg is None else reg.params,
        "total": pgm.total,
        "total_source": "bounded: N" if bounded else total_source,
        "answers": answers,
        "seconds": {"select": select_seconds, "regression": reg_seconds, "pgm": pgm_seconds, "all": time.perf_counter() - start},
    }
    return MechanismResult(
        mechanism="mldp",
        model=pgm,
        synthetic=synth,
        measurements=measurements,
        accountant=acc,
        original=reg,
        original_error=None if original else "not run (original=False)",
        info=info,
    )


def laplace_baseline(data: Dataset, epsilon: float, queries: QuerySet, *, key, bounded: bool = False) -> tuple[np.ndarray, Accountant]:
    """The plain Laplace method (the paper's baseline): every published query answered directly.

    ``queries(D) + Lap(S / eps)`` with ``S`` = :func:`training_sensitivity` of the whole published
    set, so the noise grows with the number of overlapping published queries (512 for the 1023 subset
    sums of 10 bins, 6 for the 10 ranges of the paper's Table I).

    Args:
        data: the private dataset.
        epsilon: the budget (spent exactly, one ledger entry).
        queries: the published :class:`QuerySet`.
        key: a ``jax.random`` key.
        bounded: replace-one neighbours (sensitivity doubled).

    Returns:
        ``(noisy answers, accountant)``.

    Example:
        >>> dom = Domain({"grade": 4})
        >>> data = Dataset(np.repeat(np.arange(4), [12, 24, 6, 7])[:, None], dom)
        >>> y, acc = laplace_baseline(data, 1.0, QuerySet.ranges(dom, "grade"), key=jax.random.key(0))
        >>> y.shape, acc.ledger[0].scale, acc.spent
        ((10,), 6.0, 1.0)
    """
    where = "laplace_baseline"
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    _check_key(key, where)
    queries = _as_queries(queries, "queries", where)
    _check_domain(queries, data.domain, where)
    bounded = _bool(bounded, "bounded", where)
    sens = training_sensitivity(queries, bounded=bounded)
    if not sens > 0:
        raise ValueError(f"{where}: every query is identically zero (sensitivity 0)")
    acc = Accountant(epsilon=epsilon, bounded=bounded)
    y = acc.laplace(
        key, queries.answer(data), sens, epsilon=REST, integer=queries.integer, target=f"Laplace baseline: {len(queries)} queries"
    )
    return y, acc
