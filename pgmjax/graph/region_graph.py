"""Region graphs of measured cliques, built once on the host, for the approximate marginal oracle.

When the measured cliques triangulate into a junction tree too large to hold, the exact marginal oracle
is out of reach and "may be replaced with an approximate marginal inference algorithm, like loopy belief
propagation" (McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential
privacy", ICML 2019, Section 5). Approximate oracles work on a *region graph*: regions (sets of attributes)
joined by edges from a region to the regions inside it, each region ``r`` with a counting number ``c_r``
(Yedidia, Freeman & Weiss, "Constructing free-energy approximations and generalized belief propagation
algorithms", IEEE Trans. Inf. Theory 51(7), 2005, Section V). Two are built here:

* ``"convex"``: the regions are the maximal measured cliques and their intersections, closed under
  intersection (the Kikuchi cluster-variation construction, ibid., Section VI), every edge from a region to
  the largest regions strictly inside it, and every counting number 1, which makes the free energy convex
  over the local polytope (McKenna, Pradhan, Sheldon & Miklau, "Relaxed marginal consistency for
  differentially private query answering", NeurIPS 2021, Section 3; Hazan & Shashua, "Norm-product belief
  propagation", IEEE Trans. Inf. Theory 56(12), 2010).
* ``"bethe"``: the factor graph of the maximal cliques: one region per clique, one per attribute in it,
  an edge from a clique to each of its attributes, counting numbers 1 on cliques and ``1 - degree`` on
  attributes (loopy belief propagation; exact where the factor graph is a tree).

:class:`RegionGraph` is frozen and hashed by value; :attr:`RegionGraph.kikuchi` gives the counting numbers
of the cluster-variation method (``c_r = 1 - sum of c over the regions containing r``), which satisfy the
sum rule (every attribute's regions' counting numbers sum to 1) that the tests check.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import networkx as nx

from ..data.domain import Clique, CliqueLike, Domain
from .junction import maximal_cliques

#: The region-graph kinds :func:`region_graph` builds.
KINDS = ("convex", "bethe")


@dataclass(frozen=True)
class RegionGraph:
    """A region graph: regions (top regions first), edges parent -> child, counting numbers.

    Attributes:
        domain: the domain.
        regions: the regions, each a clique in domain order; the first :attr:`num_top` are the maximal
            measured cliques (the regions that carry potentials), in the order given.
        edges: ``(parent, child)`` index pairs, the child a strict subset of the parent.
        counting: the counting number of each region (what the oracle's free energy weights its entropy by).
        kind: ``"convex"`` or ``"bethe"``.
        num_top: how many regions are maximal cliques.
    """

    domain: Domain
    regions: tuple[Clique, ...]
    edges: tuple[tuple[int, int], ...]
    counting: tuple[float, ...]
    kind: str
    num_top: int

    def __hash__(self):  # jit hashes a plan's static data on every call: hash the tuples once
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.domain, self.regions, self.edges, self.counting, self.kind, self.num_top))
            object.__setattr__(self, "_hash", h)
        return h

    @property
    def top(self) -> tuple[Clique, ...]:
        """The maximal measured cliques (the regions with potentials)."""
        return self.regions[: self.num_top]

    def parents(self, r: int) -> tuple[int, ...]:
        return tuple(p for p, c in self.edges if c == r)

    def children(self, r: int) -> tuple[int, ...]:
        return tuple(c for p, c in self.edges if p == r)

    @functools.cached_property
    def kikuchi(self) -> tuple[float, ...]:
        """Counting numbers of the cluster-variation method: ``1`` on top regions, ``1 - sum of c_a`` over
        the regions ``a`` strictly containing ``r`` below (Yedidia, Freeman & Weiss 2005, eq. 33)."""
        sets = [frozenset(r) for r in self.regions]
        c: list[float | None] = [None] * len(sets)
        for i in sorted(range(len(sets)), key=lambda i: -len(sets[i])):
            c[i] = 1.0 - sum(c[a] for a in range(len(sets)) if sets[i] < sets[a])
        return tuple(c)

    def containing(self, attrs) -> int | None:
        """The smallest top region holding every attribute of ``attrs`` (the first on ties), or None."""
        attrs = set(attrs)
        best = None
        for j, r in enumerate(self.top):
            if attrs.issubset(r) and (best is None or self.domain.size(r) < self.domain.size(self.top[best])):
                best = j
        return best

    @functools.cached_property
    def cells(self) -> int:
        """Cells of all regions' tables (a Python int)."""
        return sum(self.domain.size(r) for r in self.regions)


def region_graph(domain: Domain, cliques, kind: str = "convex") -> RegionGraph:
    """The region graph of ``kind`` over the maximal cliques among ``cliques`` (cached by value).

    Args:
        domain: the domain.
        cliques: the measured cliques (any order; sub-cliques of others are absorbed into them).
        kind: ``"convex"`` (intersection-closed regions, counting numbers 1) or ``"bethe"`` (factor graph).

    Returns:
        A :class:`RegionGraph`.

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 2, "c": 2})
        >>> g = region_graph(dom, [("a", "b"), ("b", "c"), ("a", "c")])
        >>> g.regions, g.counting
        ((('a', 'b'), ('b', 'c'), ('a', 'c'), ('a',), ('b',), ('c',)), (1.0, 1.0, 1.0, 1.0, 1.0, 1.0))
        >>> g = region_graph(dom, [("a", "b"), ("b", "c")], "bethe")
        >>> g.regions, g.counting   # attribute b is in two cliques: 1 - 2
        ((('a', 'b'), ('b', 'c'), ('a',), ('b',), ('c',)), (1.0, 1.0, 0.0, -1.0, 0.0))
    """
    if kind not in KINDS:
        raise ValueError(f"region_graph: kind must be one of {KINDS}, got {kind!r}")
    top = maximal_cliques(domain, cliques)
    if not top:
        raise ValueError("region_graph: no cliques")
    return _region_graph(domain, top, kind)


@functools.lru_cache(maxsize=64)
def _region_graph(domain: Domain, top: tuple[Clique, ...], kind: str) -> RegionGraph:
    if kind == "bethe":
        attrs = [a for a in domain.attributes if any(a in c for c in top)]
        singles = [(a,) for a in attrs if (a,) not in top]
        regions = tuple(top) + tuple(singles)
        index = {r: i for i, r in enumerate(regions)}
        edges = tuple((j, index[(a,)]) for j, c in enumerate(top) if len(c) > 1 for a in c)
        degree = {a: sum(a in c for c in top) for a in attrs}
        counting = tuple(1.0 if i < len(top) else 1.0 - degree[r[0]] for i, r in enumerate(regions))
        return RegionGraph(domain, regions, edges, counting, kind, len(top))
    sets = {frozenset(c) for c in top}
    frontier = set(sets)
    while frontier:  # close under intersection: only new regions can make new intersections
        new = set()
        for a in frontier:
            for b in sets:
                s = a & b
                if s and s not in sets and s not in new:
                    new.add(s)
        sets |= new
        frontier = new
    rest = sorted((s for s in sets if s not in {frozenset(c) for c in top}), key=lambda s: (-len(s), domain.canonical(tuple(s))))
    regions = tuple(top) + tuple(domain.canonical(tuple(s)) for s in rest)
    # Edges: the Hasse diagram of strict inclusion (a region to the largest regions strictly inside it).
    inclusion = nx.DiGraph()
    inclusion.add_nodes_from(range(len(regions)))
    fs = [frozenset(r) for r in regions]
    inclusion.add_edges_from((p, c) for p in range(len(fs)) for c in range(len(fs)) if fs[c] < fs[p])
    hasse = nx.transitive_reduction(inclusion)
    edges = tuple(sorted(hasse.edges()))
    return RegionGraph(domain, regions, edges, (1.0,) * len(regions), kind, len(top))


def regions_of(graph: RegionGraph, clique: CliqueLike) -> tuple[Clique, ...]:
    """The top regions holding every attribute of ``clique`` (for messages naming where a query could be read)."""
    attrs = set(clique)
    return tuple(r for r in graph.top if attrs.issubset(r))
