"""Linear counting queries on clique marginals, the objects MLDP learns from (:class:`QuerySet`).

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model
Publishing", IEEE BigData 2017, Section III-A: a query is a training sample, its features the
cells it counts. Here a query is a row over one clique's cells (row-major order of the clique's
axes): 1-D ranges (the paper's Table I), hyper-rectangles, subset sums, single cells, or any real row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import numpy as np

from ...data.domain import Clique, CliqueLike, Domain
from ...checks import check_count as _int
from ...checks import check_key as _check_key
from ...queries import factors as Q
from ...queries.linear import LinearQuery

_MAX_ROWS = 1 << 22  # refuse to build query sets larger than this (a dense row per query)


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
    def cells(cls, domain: Domain, clique: CliqueLike) -> QuerySet:
        """One query per cell of ``clique`` (the identity: a partition, sensitivity 1).

        Example:
            >>> len(QuerySet.cells(Domain({"a": 3, "b": 2}), ("a", "b")))
            6
        """
        clique = domain.check_clique(clique, what="QuerySet.cells: clique")
        return cls(domain, [(clique, np.eye(domain.size(clique)))])

    @classmethod
    def ranges(cls, domain: Domain, attr: str) -> QuerySet:
        """Every 1-D range ``lo <= x <= hi`` of one attribute: ``n (n + 1) / 2`` rows ordered by ``lo`` then ``hi``.

        Example:
            >>> QuerySet.ranges(Domain({"a": 3}), "a").blocks[0][1].tolist()
            [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
        """
        (attr,) = domain.check_clique((attr,), what="QuerySet.ranges: attribute")
        return cls(domain, [((attr,), Q.AllRange().matrix(domain[attr]))])

    @classmethod
    def rectangles(cls, domain: Domain, clique: CliqueLike, count: int | None = None, *, key=None) -> QuerySet:
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
    def subset_sums(cls, domain: Domain, attr: str) -> QuerySet:
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

    def __add__(self, other: QuerySet) -> QuerySet:
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

    def take(self, index) -> QuerySet:
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
                :class:`~pgmjax.GraphicalModel`, :class:`~pgmjax.mechanisms.original_estimates.CliqueTables`, ...).

        Returns:
            A float64 array.
        """
        if callable(getattr(source, "predict", None)):  # a RegressionModel: its own predictions
            return source.predict(self)
        if not hasattr(source, "marginals"):
            raise TypeError(f"QuerySet.answer: cannot answer queries on {type(source).__name__}; give a Dataset or a model")
        check_domain(self, source.domain, "QuerySet.answer")
        tables = dict(zip(self.cliques, source.marginals(list(self.cliques))))
        return np.concatenate([LinearQuery.from_matrix(m).apply(tables[c]) for c, m in self.blocks])

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


def check_domain(queries: QuerySet, domain: Domain, where: str) -> None:
    """Refuse queries on an attribute ``domain`` lacks or sizes differently (a ValueError naming ``where``)."""
    for c in queries.cliques:
        for a in c:
            if a not in domain or domain[a] != queries.domain[a]:
                raise ValueError(f"{where}: query clique {c}: attribute {a!r} is missing from, or sized differently in, the source's domain")


def as_queries(value, name: str, where: str) -> QuerySet:
    """``value`` if it is a :class:`QuerySet`, else a TypeError naming ``where`` and the argument ``name``."""
    if not isinstance(value, QuerySet):
        raise TypeError(f"{where}: {name} must be a QuerySet (e.g. QuerySet.ranges(domain, attr)), got {type(value).__name__}")
    return value
