"""``S_Fx``, the L1 sensitivity of a set of training queries (the MLDP paper's Definition 4).

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model
Publishing", IEEE BigData 2017, Definition 4: the largest total change of all training answers when
one record is added or removed, computed exactly (over several cliques by max-sum variable
elimination) and doubled for replace-one neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


from ...data.domain import Clique, Domain
from ...graph.max_sum import max_sum_ve
from ...checks import check_bool as _bool
from ...privacy import l1_sensitivity
from ...queries.linear import LinearQuery
from .query_set import QuerySet, as_queries


def training_sensitivity(queries: QuerySet, *, bounded: bool = False) -> float:
    """``S_Fx``: the L1 sensitivity of a set of linear queries (the paper's Definition 4).

    Adding or removing one record ``x`` changes query ``f`` by ``f``'s entry at ``x``'s cell, so the
    summed change ``sum_f |f(D) - f(D')|`` is the L1 norm of ``x``'s column in the stacked query
    matrix. On one clique that is the max column L1 norm (:func:`pgmjax.privacy.l1_sensitivity`).
    Over several cliques ``x`` hits one cell of each, and the maximum over records of the sum of the
    per-clique column norms is found exactly by max-sum variable elimination
    (:func:`~pgmjax.mechanisms.dual_query.max_sum_ve`); when every clique's column norms are equal
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
    queries = as_queries(queries, "queries", where)
    bounded = _bool(bounded, "bounded", where)
    value, _ = _sensitivity(queries)
    return 2.0 * value if bounded else value


def sensitivity_is_exact(queries: QuerySet) -> bool:
    """Whether :func:`training_sensitivity` is exact for ``queries`` (else it is the per-clique upper bound)."""
    return _sensitivity(as_queries(queries, "queries", "sensitivity_is_exact"))[1]


_VE_LIMIT = 1 << 24


def _sensitivity(queries: QuerySet) -> tuple[float, bool]:
    """``(add/remove-one sensitivity, exact?)``."""
    groups = queries.by_clique()
    if len(groups) == 1:
        ((matrix, _),) = groups.values()
        return l1_sensitivity(matrix), True
    domain = queries.domain
    factors = [(c, LinearQuery.from_matrix(m).column_norms(1).reshape(domain.shape_of(c))) for c, (m, _) in groups.items()]
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
