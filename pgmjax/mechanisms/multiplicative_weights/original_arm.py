"""MWEM's own estimator: multiplicative weights on a factored full table, replayed over the measurements.

Hardt, Ligett & McSherry, "A Simple and Practical Algorithm for Differentially Private Data Release",
NeurIPS 2012, Algorithm 1, step 3 (the multiplicative-weights update), batched over the measurements
and held as one table per connected component of the measured cliques (as private-pgm's factored
baseline), with a guard that refuses tables over a cell limit before allocating them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...data.domain import Clique, Domain
from ...queries.measurement import Measurement
from ..original_estimates import FactoredTable

#: The original arm's memory guard: 2^28 float64 cells = 2 GiB of tables.
DEFAULT_MAX_TABLE_CELLS = 2**28


def _project(table: np.ndarray, attrs: Clique, clique: Clique) -> np.ndarray:
    """Sum a table over ``attrs`` down to ``clique`` (axes in the clique's order)."""
    summed = table.sum(axis=tuple(i for i, a in enumerate(attrs) if a not in clique))
    kept = [a for a in attrs if a in clique]
    return np.transpose(summed, [kept.index(a) for a in clique])


def _broadcast(table: np.ndarray, clique: Clique, attrs: Clique) -> np.ndarray:
    """A table over ``clique`` laid out to broadcast against a table over ``attrs`` (a superset)."""
    kept = [a for a in attrs if a in clique]
    t = np.transpose(table, [clique.index(a) for a in kept])
    return t.reshape([t.shape[kept.index(a)] if a in clique else 1 for a in attrs])


def _adjoint(m: Measurement, r: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``Q^T r`` as a table over the measurement's clique."""
    return m.linear.transpose(r).reshape(shape)


def mw_update(table: np.ndarray, attrs: Sequence[str], measurements: Sequence[Measurement], total: float) -> np.ndarray:
    """One multiplicative-weights pass over measurements (Hardt, Ligett & McSherry 2012, Algorithm 1, step 3).

    With ``A = total * p``: ``p'(x) ∝ p(x) exp( sum_i (Q_i^T (y_i - Q_i A_{C_i}))(x_{C_i}) / (2 total) )``.
    For one counting query ``q`` this is the paper's ``A_t(x) ∝ A_{t-1}(x) exp(q(x)(m - q(A_{t-1}))/(2N))``;
    several measurements are batched into one update, as in private-pgm's factored baseline
    (``examples/mwem.py``). ``q(A')`` moves toward ``m`` and never past it (the step on a 0/1 query is
    at most ``(m - q(A))/8``).

    Args:
        table: a probability table over ``attrs`` (non-negative, sums to one).
        attrs: the table's attributes (axes in this order).
        measurements: measurements whose cliques lie inside ``attrs``.
        total: the number of records ``N`` the table stands for.

    Returns:
        The updated probability table (same shape, sums to one).

    Example:
        >>> m = Measurement(("a",), [30.0, 10.0], stddev=1.0)
        >>> p = mw_update(np.full((2, 2), 0.25), ("a", "b"), [m], 40.0)
        >>> bool(p[0].sum() > 0.5)                       # moved toward 30 / 40
        True
    """
    attrs = tuple(attrs)
    p = np.asarray(table, np.float64)
    big_a = total * p
    update = np.zeros_like(p)
    for m in measurements:
        marg = _project(big_a, attrs, m.clique)
        r = m.y - m.answer(marg)
        update += _broadcast(_adjoint(m, r, marg.shape), m.clique, attrs)
    update /= 2.0 * total
    # Shifting the exponent by its maximum cancels in the normalisation and keeps exp() finite.
    p = p * np.exp(update - update.max())
    return p / p.sum()


def _components(domain: Domain, cliques: Sequence[Clique]) -> list[Clique]:
    """Connected components of the attribute co-occurrence graph of ``cliques`` (private-pgm ``_cluster``).

    Args:
        domain: the domain (orders each component's attributes).
        cliques: the measured cliques.

    Returns:
        The components as canonical cliques, ordered by their first attribute's position in ``domain``.
    """
    from networkx.utils import UnionFind  # the project's one union-find (networkx is a dependency already)

    sets = UnionFind(a for c in cliques for a in c)
    for c in cliques:
        sets.union(*c)
    comps = [domain.canonical(g) for g in sets.to_sets()]
    return sorted(comps, key=lambda c: domain.index(c[0]))


def _mib(cells: int) -> str:
    b = 8 * cells
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b} B"


def mw_guard(domain: Domain, cliques: Sequence[Clique], max_table_cells: int) -> tuple[list, str | None]:
    """The factored table's components and cells; an error message if it exceeds the cap (nothing allocated)."""
    comps = [(c, domain.size(c)) for c in _components(domain, cliques)]
    total_cells = sum(n for _, n in comps)
    if total_cells <= max_table_cells:
        return comps, None
    big, cells = max(comps, key=lambda x: x[1])
    return comps, (
        f"MWEM infeasible without the engine: the multiplicative-weights arm needs a full table over the "
        f"component {big} of the measured cliques' co-occurrence graph: {cells:,} cells, {_mib(cells)} of float64"
        + (f" ({total_cells:,} cells, {_mib(total_cells)}, in all {len(comps)} components)" if len(comps) > 1 else "")
        + f"; the limit is max_table_cells={max_table_cells:,} ({_mib(max_table_cells)}). The table was not allocated."
    )


def mw_replay(domain: Domain, measurements: Sequence[Measurement], totals: Sequence[float], iters: int) -> FactoredTable:
    """MW over the transcript: after measurement ``t``, ``iters`` passes over measurements ``1..t``."""
    tables: dict[Clique, np.ndarray] = {}
    for t in range(1, len(measurements) + 1):
        so_far = measurements[:t]
        new: dict[Clique, np.ndarray] = {}
        for comp in _components(domain, [m.clique for m in so_far]):
            # Warm start: components only merge, and the factored table is a product, so the
            # previous tables inside this component multiply into its starting table exactly.
            p = np.ones(domain.shape_of(comp))
            for old, tab in tables.items():
                if set(old) <= set(comp):
                    p = p * _broadcast(tab, old, comp)
            p /= p.sum()
            group = [m for m in so_far if set(m.clique) <= set(comp)]
            for _ in range(iters):
                p = mw_update(p, comp, group, totals[t - 1])
            new[comp] = p
        tables = new
    return FactoredTable(domain, tables, totals[-1])
