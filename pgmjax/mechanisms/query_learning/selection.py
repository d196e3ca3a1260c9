"""MLDP's training-set selector: coverage against correlation for a target size ``m``.

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model
Publishing", IEEE BigData 2017, Section III-C (training-set selection: cover every cell, keep the
per-cell load, hence the sensitivity, low). Reads only the public queries: it costs no privacy.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from ...checks import check_count as _int
from ...checks import check_key as _check_key
from .query_set import QuerySet, as_queries


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
    candidates = as_queries(candidates, "candidates", where)
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
    return _greedy_cover(weights, support, order, size)


def _greedy_cover(weights: np.ndarray, support: np.ndarray, order: np.ndarray, size: int) -> np.ndarray:
    """The greedy of :func:`select_training`: ``size`` picks among the rows of ``weights`` (``|q_j|`` per cell),
    each by the six keys there (``order``: each candidate's rank in the seeded random order). Returns the picks."""
    k = weights.shape[0]
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
