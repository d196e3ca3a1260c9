"""Exact max-sum variable elimination over factor tables: ``argmax_x sum_f f(x_Cf)`` with traceback.

A graph algorithm on the data layer's :class:`~pgmjax.data.domain.Domain` alone, so every layer above may use it:
DualQuery's record player best-responds with it (Gaboardi, Arias, Hsu, Roth & Wu, "Dual Query: Practical Private
Query Release for High Dimensional Data", ICML 2014, Section 4, solved exactly here instead of by the authors'
ILP), MLDP's :func:`~pgmjax.mechanisms.query_learning.training_sensitivity` maximises a record's total load with
it, and :func:`pgmjax.bayes.per_record_cost` a record's total privacy cost. Also importable as
``pgmjax.mechanisms.max_sum`` (its former home).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..data.domain import Domain

__all__ = ["max_sum_ve"]


def _expand(scope: tuple[int, ...], table: np.ndarray, union: tuple[int, ...]) -> np.ndarray:
    """``table`` (axes ``scope``) as a broadcastable array over the axes ``union``."""
    order = sorted(range(len(scope)), key=lambda i: union.index(scope[i]))
    t = np.transpose(table, order)
    shape = [t.shape[order.index(scope.index(v))] if v in scope else 1 for v in union]
    return t.reshape(shape)


def max_sum_ve(
    factors: Sequence[tuple[Sequence[str], np.ndarray]],
    domain: Domain,
    *,
    uniforms: np.ndarray | None = None,
    tol: float = 1e-9,
) -> tuple[np.ndarray, float]:
    """Exact ``argmax_x sum_f f(x_Cf)`` by max-sum variable elimination with traceback.

    Eliminates the attributes in a greedy order (each step the one whose combined table is smallest),
    max-marginalising the sum of the factors that mention it, then traces the argmax back in reverse
    order (data player's best response of DualQuery). The cost is exponential only in
    the induced width of the factors' cliques. Ties are broken by ``uniforms`` (post-processing; any
    maximiser is a valid best response): attribute ``i`` takes the ``floor(u_i k)``-th of its ``k``
    tied values (within ``tol`` relative), or the first when ``uniforms`` is None. Attributes in no
    factor are free and chosen the same way.

    Args:
        factors: ``(clique, table)`` pairs, each table with one axis per clique attribute (in order).
        domain: the domain; the record covers all of its attributes.
        uniforms: optional numbers in ``[0, 1)``, one per domain attribute (domain order).
        tol: relative tolerance for ties.

    Returns:
        ``(record, value)``: an int64 array with one value per domain attribute (domain order) and
        the maximum of the sum.

    Example:
        >>> dom = Domain({"a": 2, "b": 3})
        >>> max_sum_ve([(("a",), np.array([0.0, 1.0])), (("a", "b"), np.array([[5.0, 0, 0], [0, 0, 2]]))], dom)
        (array([0, 0]), 5.0)
    """
    d = len(domain)
    if uniforms is not None:
        uniforms = np.asarray(uniforms, np.float64)
        if uniforms.shape != (d,) or np.any(uniforms < 0) or np.any(uniforms >= 1):
            raise ValueError(f"max_sum_ve: uniforms must be {d} numbers in [0, 1), one per attribute")
    pool: list[tuple[tuple[int, ...], np.ndarray]] = []
    scale = 0.0
    for clique, table in factors:
        clique = domain.check_clique(clique, what="max_sum_ve: factor clique")
        t = np.asarray(table, np.float64)
        if t.shape != domain.shape_of(clique):
            raise ValueError(f"max_sum_ve: factor on {clique} has shape {t.shape}, expected {domain.shape_of(clique)}")
        if len(set(clique)) != len(clique):
            raise ValueError(f"max_sum_ve: factor clique {clique} repeats an attribute")
        pool.append((tuple(domain.index(a) for a in clique), t))
        scale += float(np.abs(t).max()) if t.size else 0.0
    sizes = domain.shape
    eps = tol * max(scale, 1.0)

    def pick(i: int, values: np.ndarray) -> int:
        best = values.max()
        ties = np.flatnonzero(values >= best - eps)
        return int(ties[0] if uniforms is None else ties[int(uniforms[i] * ties.size)])

    trace: list[tuple[int, tuple[int, ...], np.ndarray]] = []  # (variable, union scope, combined table)
    constant = 0.0
    remaining = set(v for scope, _ in pool for v in scope)
    while remaining:

        def cost(v):
            union = set().union(*(scope for scope, _ in pool if v in scope))
            return math.prod(sizes[u] for u in union), v

        v = min(remaining, key=cost)
        mine = [f for f in pool if v in f[0]]
        pool = [f for f in pool if v not in f[0]]
        union = tuple(sorted(set().union(*(scope for scope, _ in mine))))
        g = sum(_expand(scope, t, union) for scope, t in mine)
        g = np.broadcast_to(g, tuple(sizes[u] for u in union))
        trace.append((v, union, g))
        msg_scope = tuple(u for u in union if u != v)
        msg = g.max(axis=union.index(v))
        if msg_scope:
            pool.append((msg_scope, msg))
        else:
            constant += float(msg)
        remaining.discard(v)
    constant += sum(float(t) for scope, t in pool if not scope)

    x = np.full(d, -1, np.int64)
    for v, union, g in reversed(trace):
        idx = tuple(slice(None) if u == v else x[u] for u in union)
        x[v] = pick(v, np.asarray(g[idx]))
    for i in range(d):
        if x[i] < 0:  # in no factor: every value ties
            x[i] = pick(i, np.zeros(sizes[i]))
    return x, constant
