"""Workloads: lists of factored queries on cliques, answered on data or on a model.

A :class:`Workload` is a list of ``(clique, per-attribute query matrices)``;
the query of one entry is the Kronecker product of its matrices applied to the
clique's marginal. The ICML 2019 benchmark workload (McKenna, Sheldon &
Miklau, arXiv 1901.09136, Section 5.1) puts Prefix queries on numeric
attributes and the identity on categorical ones.

Example:
    >>> import pgmjax as pj
    >>> dom = pj.Domain({"age": 5, "sex": 2, "job": 3})
    >>> w = pj.Workload.benchmark(dom, [("age", "sex")], numeric=["age"])
    >>> data = pj.Dataset(np.array([[0, 1, 2], [3, 0, 1], [4, 1, 0]]), dom)
    >>> w.answer(data)[0].tolist()    # on a Dataset or a model: Prefix(age) x sex counts
    [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 2.0]]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from . import factors as Q
from ..data.dataset import Dataset
from ..data.domain import Clique, CliqueLike, Domain


@dataclass(frozen=True, eq=False)
class WorkloadQuery:
    """One workload entry: ``(Q_1 ⊗ ... ⊗ Q_k) mu_clique``; ``None`` is the identity (never built)."""

    clique: Clique
    matrices: tuple[np.ndarray | None, ...]

    def as_query(self) -> dict:
        """The ``{attribute: factor}`` form accepted by ``model.answer``."""
        return {a: (Q.Identity() if m is None else m) for a, m in zip(self.clique, self.matrices)}

    def apply(self, marginal: np.ndarray) -> np.ndarray:
        """Answers from the clique's marginal (axes in the clique's order)."""
        return Q.kron_apply(marginal, self.matrices)


class Workload:
    """A list of factored queries on cliques of one domain.

    Args:
        domain: the domain the queries are on.
        queries: ``(clique, factors)`` pairs; ``factors`` has one entry per
            clique attribute (a :mod:`pgmjax.queries.factors` constructor or a matrix
            ``(rows, size)``), or is None for the plain marginal.

    Example:
        >>> dom = Domain({"age": 5, "sex": 2})
        >>> w = Workload(dom, [(("age", "sex"), [pj.queries.Prefix(), None])])
        >>> len(w), w.queries[0].matrices[0].shape           # Prefix over age's 5 values
        (1, (5, 5))
    """

    def __init__(self, domain: Domain, queries: Iterable[tuple[CliqueLike, Sequence | None]]):
        self.domain = domain
        items = []
        for clique, factors in queries:
            clique = domain.check_clique(clique, what="workload clique")
            if len(set(clique)) != len(clique):
                raise ValueError(f"workload clique {clique}: an attribute appears more than once")
            if factors is None:
                factors = [None] * len(clique)
            factors = list(factors)
            if len(factors) != len(clique):
                raise ValueError(f"workload clique {clique}: {len(factors)} query factors for {len(clique)} attributes")
            mats = tuple(
                None if f is None or isinstance(f, Q.Identity) else Q.factor_matrix(f, domain[a], a)
                for a, f in zip(clique, factors)
            )
            items.append(WorkloadQuery(clique, mats))
        if not items:
            raise ValueError("Workload: no queries given")
        self.queries: tuple[WorkloadQuery, ...] = tuple(items)

    # Builders ------------------------------------------------------------------
    @classmethod
    def marginals(cls, domain: Domain, cliques: Iterable[CliqueLike]) -> "Workload":
        """The plain marginals (identity queries) of ``cliques``."""
        return cls(domain, [(c, None) for c in cliques])

    @classmethod
    def all_kway(cls, domain: Domain, k: int, max_cells: int | None = None) -> "Workload":
        """Every ``k``-way marginal (optionally only those with at most ``max_cells`` cells)."""
        _check_k(domain, k)
        cliques = [c for c in itertools.combinations(domain.attributes, k) if max_cells is None or domain.size(c) <= max_cells]
        return cls.marginals(domain, cliques)

    @classmethod
    def random_kway(cls, domain: Domain, k: int, count: int, seed: int = 0) -> "Workload":
        """``count`` distinct ``k``-way marginals drawn uniformly at random (seeded)."""
        _check_k(domain, k)
        all_cliques = list(itertools.combinations(domain.attributes, k))
        if not 1 <= count <= len(all_cliques):
            raise ValueError(f"random_kway: count must be in [1, {len(all_cliques)}], got {count}")
        pick = np.random.default_rng(seed).choice(len(all_cliques), count, replace=False)
        return cls.marginals(domain, [all_cliques[i] for i in sorted(pick)])

    @classmethod
    def benchmark(cls, domain: Domain, cliques: Iterable[CliqueLike], numeric: Iterable[str]) -> "Workload":
        """The ICML 2019 benchmark workload: Prefix on ``numeric`` attributes, identity on the others."""
        numeric = set(numeric)
        unknown = sorted(numeric - set(domain.attributes))
        if unknown:
            raise ValueError(f"benchmark workload: numeric attributes {unknown} are not in the domain")
        return cls(domain, [(c, [Q.Prefix() if a in numeric else None for a in domain.check_clique(c)]) for c in cliques])

    # Access ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self):
        return iter(self.queries)

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return tuple(q.clique for q in self.queries)

    def __repr__(self) -> str:
        return f"Workload({len(self)} queries on {len(set(self.cliques))} cliques)"

    # Answers -----------------------------------------------------------------------
    def answer(self, source) -> list[np.ndarray]:
        """The workload's answers on a Dataset (true counts) or a model (without its full table).

        Args:
            source: a :class:`~pgmjax.Dataset`, a fitted model (anything with
                ``answers(queries)``, e.g. :class:`~pgmjax.GraphicalModel`), or
                a list of precomputed answers (returned as they are).

        Returns:
            One float64 array per query, shaped by the query's row counts.
        """
        if isinstance(source, (list, tuple)):
            if len(source) != len(self):
                raise ValueError(f"workload of {len(self)} queries given {len(source)} answers")
            return [np.asarray(a, np.float64) for a in source]
        if isinstance(source, Dataset):
            if source.domain != self.domain:
                _check_covers(self, source.domain)
            unique = list(dict.fromkeys(self.cliques))
            margs = dict(zip(unique, source.marginals(unique)))
            return [q.apply(margs[q.clique]) for q in self.queries]
        if hasattr(source, "answers"):
            _check_covers(self, source.domain)
            return source.answers([q.as_query() for q in self.queries])
        raise TypeError(f"cannot answer a workload on {type(source).__name__}; give a Dataset or a model")


def _check_k(domain: Domain, k: int) -> None:
    if not 1 <= k <= len(domain):
        raise ValueError(f"k must be in [1, {len(domain)}] for this domain, got {k}")


def _check_covers(workload: Workload, domain: Domain) -> None:
    for c in set(workload.cliques):
        for a in c:
            if a not in domain or domain[a] != workload.domain[a]:
                raise ValueError(f"workload clique {c}: attribute {a!r} is missing from, or sized differently in, the source's domain")
