"""What the front-ends' *original* estimators produce, behind the model's query interface.

Each class answers ``marginals(cliques)`` and factored ``answers(queries)`` and
has ``domain`` and ``total``, like :class:`~pgmjax.GraphicalModel`, so
:class:`~pgmjax.Workload` and :mod:`pgmjax.model.metrics` evaluate both arms of a
front-end the same way.

* :class:`FactoredTable`: a product of independent full tables over disjoint
  attribute groups (MWEM's multiplicative weights on a factored table).
* :class:`CliqueTables`: separate estimates of some cliques' marginals, not
  necessarily consistent with each other (HDMM + local least squares); a query
  is answered from the first table whose clique covers it.

A synthetic dataset (PrivBayes, DualQuery) needs no wrapper: a
:class:`~pgmjax.Dataset` is answered directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..data.domain import Clique, CliqueLike, Domain
from ..queries import factors as Q


class FactoredTable:
    """``p(x) = prod_g p_g(x_g)`` over disjoint attribute groups, scaled to ``total``.

    Args:
        domain: the full domain.
        tables: ``{group: table}``, each table a non-negative array over the
            group's attributes (axes in the group's order); the groups
            partition the domain. Each is normalised to a distribution.
        total: the number of records.
    """

    def __init__(self, domain: Domain, tables: Mapping[CliqueLike, np.ndarray], total: float):
        self.domain = domain
        self.total = float(total)
        self.tables: dict[Clique, np.ndarray] = {}
        seen: set[str] = set()
        for group, table in tables.items():
            group = domain.check_clique(group, what="table group")
            if seen & set(group):
                raise ValueError(f"FactoredTable: groups overlap on {sorted(seen & set(group))}")
            seen |= set(group)
            t = np.asarray(table, np.float64)
            if t.shape != domain.shape_of(group):
                raise ValueError(f"FactoredTable: table of {group} has shape {t.shape}, expected {domain.shape_of(group)}")
            s = t.sum()
            self.tables[group] = t / s if s > 0 else np.full(t.shape, 1.0 / t.size)
        missing = [a for a in domain.attributes if a not in seen]
        for a in missing:  # attributes never measured stay uniform
            self.tables[(a,)] = np.full(domain[a], 1.0 / domain[a])

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        out = []
        for query in queries:
            attrs, mats = Q.resolve(self.domain, query)
            result, axes = np.array(self.total), []
            for group, table in self.tables.items():
                inside = [i for i, a in enumerate(attrs) if a in group]
                if not inside:
                    continue
                part = table.sum(axis=tuple(j for j, a in enumerate(group) if a not in attrs))
                kept = [a for a in group if a in attrs]
                part = Q.kron_apply(part, [mats[attrs.index(a)] for a in kept])
                result = np.multiply.outer(result, part)
                axes.extend(attrs.index(a) for a in kept)
            out.append(np.transpose(result, np.argsort(axes)) if axes else result)
        return out

    def marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        return self.answers([{a: Q.Identity() for a in self.domain.check_clique(c)} for c in cliques])

    def marginal(self, clique: CliqueLike) -> np.ndarray:
        return self.marginals([clique])[0]


class CliqueTables:
    """Independent estimates of some cliques' marginals (counts), answered clique by clique.

    Args:
        domain: the domain.
        tables: ``{clique: estimated marginal counts}`` (axes in the clique's order).
        total: the number of records (reported; answers come from the tables).
    """

    def __init__(self, domain: Domain, tables: Mapping[CliqueLike, np.ndarray], total: float):
        self.domain = domain
        self.total = float(total)
        self.tables = {}
        for clique, table in tables.items():
            clique = domain.check_clique(clique, what="estimated clique")
            t = np.asarray(table, np.float64)
            if t.shape != domain.shape_of(clique):
                raise ValueError(f"CliqueTables: table of {clique} has shape {t.shape}, expected {domain.shape_of(clique)}")
            self.tables[clique] = t

    def _host(self, attrs: Clique) -> Clique:
        for clique in self.tables:
            if set(attrs) <= set(clique):
                return clique
        raise ValueError(f"no estimated clique covers {attrs}; estimated: {list(self.tables)}")

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        out = []
        for query in queries:
            attrs, mats = Q.resolve(self.domain, query)
            host = self._host(attrs)
            table = self.tables[host].sum(axis=tuple(j for j, a in enumerate(host) if a not in attrs))
            kept = [a for a in host if a in attrs]
            table = np.transpose(table, [kept.index(a) for a in attrs]) if attrs else table
            out.append(Q.kron_apply(table, mats))
        return out

    def marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        return self.answers([{a: Q.Identity() for a in self.domain.check_clique(c)} for c in cliques])

    def marginal(self, clique: CliqueLike) -> np.ndarray:
        return self.marginals([clique])[0]
