"""Synthetic records that match given marginals, by updating records gradually: samples from an approximate model.

An approximate model (:class:`~pgmjax.model.approximate_model.ApproximateModel`) holds pseudo-marginals: one table
per region, locally consistent but not, in general, the marginals of one distribution, so there is no distribution
to sample from. :func:`update_records` makes records whose marginals match those tables as closely as records can:
the Gradually Update Method of Zhang, Wang, Li, He, Chen & Chen, "PrivSyn: differentially private data synthesis",
USENIX Security 2021, Section 5.2.

1. **Start** from records drawn from a tree: the maximum spanning forest of the attribute pairs the targets hold,
   weighted by their mutual information (Chow & Liu, "Approximating discrete probability distributions with
   dependence trees", IEEE Trans. Inf. Theory 1968), each attribute drawn given its parent in the tree with the
   counts rounded to the records (largest remainders). PrivSyn starts from independent attributes; from the tree
   the strongest dependences hold from the start.
2. **Update**, marginal after marginal, round after round: for the marginal's cells that hold more records than
   the target (``S > T``), an ``alpha`` share of the surplus is moved to the cells that hold too few, in proportion
   to their deficit. A moved record is either **duplicated** from a record of its new cell (its other attributes
   too: the correlations the records already have in that cell are kept), with probability ``replace``, or
   **changed** (only the marginal's attributes set to the new cell; where the new cell holds no record yet, always
   this). ``alpha`` decays by ``decay`` per round.
3. **Keep the best round**: after each round, the records' mean total variation distance to the targets; the
   closest records are returned, and the updates stop after :data:`PATIENCE` rounds without closer ones. Once
   the records are within sampling noise of the targets (a tree start often is, on tables whose dependences a
   tree carries), every further move only churns them: each disturbs every other target the record counts in,
   and with hundreds of targets the churn wins. So the result is never further from the targets than the start.

Each round costs ``O(n)`` per marginal (one sort of the records by cell to draw duplicates), on the host.
:func:`marginal_gaps` reports the total variation distance of the records to each target; measured against the
pseudo-marginals and against exact fits in ``bench/results/approximate/approximate_records.md``.

Example:
    >>> import jax
    >>> from pgmjax.data.domain import Domain
    >>> dom = Domain({"a": 2, "b": 3})
    >>> targets = {("a", "b"): np.array([[10.0, 20.0, 30.0], [25.0, 10.0, 5.0]])}
    >>> records = update_records(dom, targets, 1000, jax.random.key(0))
    >>> round(float(marginal_gaps(dom, records, targets)[("a", "b")]), 2)
    0.0
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..data.domain import Clique, Domain

__all__ = ["update_records", "marginal_gaps"]

#: The defaults: rounds over the marginals, the first round's share of a surplus moved, its decay per round, and
#: the probability a moved record is duplicated from its new cell rather than changed.
ROUNDS = 30
ALPHA = 1.0
DECAY = 0.85
REPLACE = 0.5
#: Rounds without a closer set of records before the updates stop.
PATIENCE = 3


def update_records(domain: Domain, targets: Mapping[Clique, np.ndarray], n: int, key, *, rounds: int = ROUNDS,
                   alpha: float = ALPHA, decay: float = DECAY, replace: float = REPLACE,
                   zeros: Mapping[Clique, np.ndarray] | None = None) -> np.ndarray:
    """``n`` records over ``domain`` whose marginals on ``targets``' cliques match the targets' proportions.

    Args:
        domain: the records' domain.
        targets: clique -> table (non-negative, the clique's shape, any total: only proportions count); an
            attribute in no clique is drawn uniformly.
        n: the number of records (>= 1).
        key: a ``jax.random`` key (the records follow from it).
        rounds: passes over the targets.
        alpha: the share of a cell's surplus moved in the first round, in (0, 1].
        decay: ``alpha``'s factor per round, in (0, 1].
        replace: the probability a moved record is duplicated from its new cell, in [0, 1].
        zeros: clique -> boolean table of structural zeros (cells no record may take, e.g. a constraint's): after
            the start and after every step, each record on one is replaced by a copy of a record on none (the
            tree start and a step that changes some attributes of a record can land it on one).

    Returns:
        An ``(n, len(domain))`` int array, columns in the domain's order.

    Raises:
        ValueError: a clique not of the domain, a table of the wrong shape, negative, non-finite or all zero, or an
            argument out of range.
    """
    where = "update_records"
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{where}: n must be a positive integer, got {n!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 0:
        raise ValueError(f"{where}: rounds must be a non-negative integer, got {rounds!r}")
    for name, value, low_open in (("alpha", alpha, True), ("decay", decay, True), ("replace", replace, False)):
        if not (isinstance(value, (int, float)) and (0 < value <= 1 if low_open else 0 <= value <= 1)):
            raise ValueError(f"{where}: {name} must lie in {'(0, 1]' if low_open else '[0, 1]'}, got {value!r}")
    cliques, probabilities = _checked_targets(domain, targets, where)
    rng = np.random.default_rng(np.asarray(jax.random.bits(key, (4,), jnp.uint32)))
    attrs = list(domain.attributes)
    impossible = [([attrs.index(a) for a in c], np.asarray(z, bool)) for c, z in (zeros or {}).items()]
    records = _without_zeros(_tree_start(domain, cliques, probabilities, n, rng), impossible, rng)
    columns = [[attrs.index(a) for a in c] for c in cliques]
    shapes = [domain.shape_of(c) for c in cliques]
    tables = [p * n for p in probabilities]
    best, best_gap, stale = records.copy(), _mean_gap(records, columns, shapes, tables), 0
    for r in range(int(rounds)):
        share = alpha * decay**r
        for cols, shape, target in zip(columns, shapes, tables):
            _update(records, cols, shape, target, share, replace, rng)
            records = _without_zeros(records, impossible, rng)
        # Keep the round whose records are closest to the targets: once the records are within sampling noise of
        # them (a tree start often is), further moves only churn the records, each disturbing every other target.
        gap = _mean_gap(records, columns, shapes, tables)
        if gap < best_gap:
            best, best_gap, stale = records.copy(), gap, 0
        else:
            stale += 1
            if stale >= PATIENCE:
                break
    return best.astype(np.int32 if max(domain.shape) < 2**31 else np.int64)


def marginal_gaps(domain: Domain, records: np.ndarray, targets: Mapping[Clique, np.ndarray]) -> dict[Clique, float]:
    """The total variation distance between the records' marginal and each target's proportions (0: equal).

    Example:
        >>> dom = Domain({"a": 2})
        >>> marginal_gaps(dom, np.array([[0], [0], [1], [1]]), {("a",): np.array([3.0, 1.0])})
        {('a',): 0.25}
    """
    cliques, probabilities = _checked_targets(domain, targets, "marginal_gaps")
    attrs = list(domain.attributes)
    out = {}
    for c, p in zip(cliques, probabilities):
        idx = np.ravel_multi_index(tuple(records[:, attrs.index(a)] for a in c), domain.shape_of(c))
        counts = np.bincount(idx, minlength=p.size) / len(records)
        out[c] = 0.5 * float(np.abs(counts - p.reshape(-1)).sum())
    return out


def _checked_targets(domain: Domain, targets: Mapping, where: str) -> tuple[list[Clique], list[np.ndarray]]:
    if not isinstance(targets, Mapping):
        raise TypeError(f"{where}: targets must be a mapping clique -> table, got {type(targets).__name__}")
    cliques, probabilities = [], []
    for clique, table in targets.items():
        clique = tuple(clique)
        domain.check_clique(clique, what=f"{where}: target")
        t = np.asarray(table, np.float64)
        if t.shape != domain.shape_of(clique) and t.size != domain.size(clique):
            raise ValueError(f"{where}: the target on {clique} has shape {t.shape}, not {domain.shape_of(clique)}")
        t = t.reshape(domain.shape_of(clique))
        total = float(t.sum()) if np.all(np.isfinite(t)) else math.nan
        if not (total > 0 and math.isfinite(total)) or np.any(t < 0):
            raise ValueError(f"{where}: the target on {clique} must be finite, non-negative and not all zero")
        cliques.append(clique)
        probabilities.append(t / total)
    return cliques, probabilities


def _pair_tables(cliques, probabilities) -> dict[tuple[str, str], np.ndarray]:
    """Every pair of attributes that share a target, with its two-way table (from the first target holding it)."""
    out = {}
    for c, p in zip(cliques, probabilities):
        for i, j in itertools.combinations(range(len(c)), 2):
            if (c[i], c[j]) not in out and (c[j], c[i]) not in out:
                out[(c[i], c[j])] = p.sum(axis=tuple(k for k in range(len(c)) if k not in (i, j)))
    return out


def _mutual_information(table: np.ndarray) -> float:
    p = table / table.sum()
    outer = p.sum(1, keepdims=True) * p.sum(0, keepdims=True)
    held = p > 0
    return float(np.sum(p[held] * np.log(p[held] / outer[held])))


def _tree_start(domain: Domain, cliques, probabilities, n: int, rng: np.random.Generator) -> np.ndarray:
    """Records drawn from the maximum spanning forest of the targets' pairs, weighted by mutual information (Chow &
    Liu 1968), each attribute's counts rounded to the records: the strongest dependences hold from the start."""
    import networkx as nx  # the spanning tree: networkx's, as everywhere in pgmjax

    attrs = list(domain.attributes)
    pairs = _pair_tables(cliques, probabilities)
    graph = nx.Graph()
    graph.add_nodes_from(attrs)
    graph.add_weighted_edges_from((a, b, _mutual_information(t)) for (a, b), t in pairs.items())
    forest = nx.maximum_spanning_tree(graph)
    records = np.empty((n, len(attrs)), np.int64)
    for component in nx.connected_components(forest):
        root = min(component, key=attrs.index)
        one_way = next((p.sum(axis=tuple(i for i, b in enumerate(c) if b != root)) for c, p in zip(cliques, probabilities)
                        if root in c), np.full(domain[root], 1.0 / domain[root]))
        records[:, attrs.index(root)] = rng.permutation(np.repeat(np.arange(domain[root]), _rounded(one_way, n)))
        for parent, child in nx.bfs_edges(forest, root):
            table = pairs[(parent, child)] if (parent, child) in pairs else pairs[(child, parent)].T
            above, below = records[:, attrs.index(parent)], np.empty(n, np.int64)
            for value in range(domain[parent]):
                rows = np.flatnonzero(above == value)
                if rows.size:
                    given = table[value] if table[value].sum() > 0 else np.full(domain[child], 1.0)
                    below[rows] = rng.permutation(np.repeat(np.arange(domain[child]), _rounded(given, rows.size)))
            records[:, attrs.index(child)] = below
    return records


def _rounded(p: np.ndarray, n: int) -> np.ndarray:
    """``n p`` rounded to integers summing to ``n`` (largest remainders)."""
    raw = np.asarray(p, np.float64).reshape(-1) * n / max(float(np.sum(p)), 1e-300)
    counts = np.floor(raw).astype(np.int64)
    short = n - int(counts.sum())
    if short > 0:
        counts[np.argsort(counts - raw, kind="stable")[:short]] += 1
    return counts


def _mean_gap(records, columns, shapes, tables) -> float:
    """The records' mean total variation distance to the targets (counts)."""
    gaps = []
    for cols, shape, target in zip(columns, shapes, tables):
        cell = np.ravel_multi_index(tuple(records[:, j] for j in cols), shape)
        gaps.append(np.abs(np.bincount(cell, minlength=target.size) - target.reshape(-1)).sum())
    return 0.5 * float(np.mean(gaps)) / len(records)


def _without_zeros(records: np.ndarray, impossible: list, rng: np.random.Generator) -> np.ndarray:
    """``records`` with each one on a structural zero (``impossible``: ``(columns, boolean table)`` pairs) replaced by
    a copy of a uniformly drawn record on none; unchanged where none is on one, or where every record is."""
    bad = np.zeros(len(records), bool)
    for cols, table in impossible:
        bad |= table[tuple(records[:, j] for j in cols)]
    if not bad.any() or bad.all():
        return records
    good = np.flatnonzero(~bad)
    records[bad] = records[good[rng.integers(0, good.size, int(bad.sum()))]]
    return records


def _update(records: np.ndarray, cols: list[int], shape: tuple, target: np.ndarray, share: float, replace: float,
            rng: np.random.Generator) -> None:
    """One step of the Gradually Update Method on one marginal, in place (module docstring, step 2)."""
    n = len(records)
    cell = np.ravel_multi_index(tuple(records[:, j] for j in cols), shape)
    counts = np.bincount(cell, minlength=target.size)
    gap = counts - target.reshape(-1)
    surplus = np.where(gap > 0, gap, 0.0)
    if surplus.sum() < 0.5:  # within half a record of the target everywhere
        return
    # Each record of a cell with a surplus moves with probability share * surplus / count: in expectation the
    # share of the surplus, the records chosen uniformly within the cell.
    leave = np.zeros(target.size)
    held = counts > 0
    leave[held] = np.minimum(share * surplus[held] / counts[held], 1.0)
    moved = np.flatnonzero(rng.random(n) < leave[cell])
    if moved.size == 0:
        return
    deficit = np.where(gap < 0, -gap, 0.0)
    if deficit.sum() <= 0:
        return
    destination = rng.permutation(np.repeat(np.arange(target.size), _rounded(deficit, moved.size)))
    # Duplicate a record of the destination cell (a uniform one among those it held before this step) where it
    # holds one and the coin says so; change the marginal's attributes otherwise.
    occupants = counts[destination]
    duplicate = (occupants > 0) & (rng.random(moved.size) < replace)
    if duplicate.any():
        order = np.argsort(cell, kind="stable")  # the records grouped by cell, to draw one of a cell's
        start = np.concatenate([[0], np.cumsum(counts)])
        pick = start[destination[duplicate]] + (rng.random(int(duplicate.sum())) * occupants[duplicate]).astype(np.int64)
        records[moved[duplicate]] = records[order[pick]]
    change = ~duplicate
    values = np.unravel_index(destination[change], shape)
    for j, v in zip(cols, values):
        records[moved[change], j] = v
