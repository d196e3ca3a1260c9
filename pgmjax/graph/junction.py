"""Junction trees: triangulation, maximal cliques and a message schedule, built once on the host.

A :class:`JunctionTree` depends only on the structure of a problem (the
domain and the set of cliques), never on numbers, so it is built once in
Python/NumPy, frozen, hashed by value and cached.

Construction (Koller & Friedman, *Probabilistic Graphical Models*, 9.3–10.4):

1. the interaction graph has an edge between every two attributes that share
   a clique; every attribute of the domain is a node, measured or not;
2. greedy elimination orders (min-fill, min-weight and min-fill-weight, each
   eliminating simplicial vertices first, ties broken by the size of the table
   the elimination creates, then by domain order) triangulate it, and the one
   whose tables are smallest in total is kept;
3. the maximal elimination cliques are the junction-tree nodes;
4. a maximum spanning tree on separator size (Kruskal, networkx) joins them;
   disconnected components are joined by empty separators, so there is
   always exactly one tree;
5. the root is a centre of the tree, which minimises the number of levels
   the compiled message-passing schedule runs through.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from ..data.domain import Clique, CliqueLike, Domain


@dataclass(frozen=True)
class JunctionTree:
    """A rooted junction tree over every attribute of a domain.

    Attributes:
        domain: the domain.
        cliques: the maximal cliques, each a tuple of attributes in domain order.
        parent: for each clique the index of its parent, ``-1`` for the root.
        depth: distance of each clique from the root.
        separators: for each clique, the attributes it shares with its parent.
        elimination_order: the attribute elimination order used to triangulate.
    """

    domain: Domain
    cliques: tuple[Clique, ...]
    parent: tuple[int, ...]
    depth: tuple[int, ...]
    separators: tuple[Clique, ...]
    elimination_order: tuple[str, ...]

    @property
    def root(self) -> int:
        return self.parent.index(-1)

    @property
    def num_levels(self) -> int:
        return max(self.depth) + 1

    @property
    def treewidth(self) -> int:
        """Size of the largest clique minus one (of this triangulation)."""
        return max(len(c) for c in self.cliques) - 1

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """``(parent, child)`` pairs."""
        return tuple((p, c) for c, p in enumerate(self.parent) if p >= 0)

    def containing(self, attrs: Iterable[str]) -> int | None:
        """Index of the smallest clique that holds all of ``attrs`` (the first such on ties), or None.

        Looks only at the cliques that hold the given attribute held by the fewest (:attr:`holders`):
        fitting a model of a thousand cliques asks this once per measurement, and a scan of every clique
        each time was most of a warm fit's host work.
        """
        attrs = set(attrs)
        if not attrs:
            candidates = range(len(self.cliques))
        else:
            holders = self.holders
            if not attrs <= holders.keys():
                return None
            candidates = min((holders[a] for a in attrs), key=len)
        best = None
        for i in candidates:
            if attrs.issubset(self.cliques[i]) and (best is None or self.clique_cells[i] < self.clique_cells[best]):
                best = i
        return best

    @property
    def cells(self) -> int:
        """Cells of all the tables of the tree, a Python int (exact for any domain)."""
        return sum(self.clique_cells)

    @functools.cached_property
    def holders(self) -> dict[str, list[int]]:
        """For each attribute, the indices of the cliques that hold it, ascending."""
        return _holders(self.cliques)

    @functools.cached_property
    def neighbours(self) -> tuple[tuple[int, ...], ...]:
        """For each clique, the indices of the cliques it shares a tree edge with (its parent and children)."""
        out: list[list[int]] = [[] for _ in self.cliques]
        for p, c in self.edges:
            out[p].append(c)
            out[c].append(p)
        return tuple(map(tuple, out))

    @functools.cached_property
    def clique_cells(self) -> tuple[int, ...]:
        """Cells of each clique's table (Python ints), in the order of :attr:`cliques`."""
        return tuple(self.domain.size(c) for c in self.cliques)

    def to_networkx(self) -> nx.Graph:
        g = nx.Graph()
        for i, c in enumerate(self.cliques):
            g.add_node(i, clique=c)
        for p, c in self.edges:
            g.add_edge(p, c, separator=self.separators[c])
        return g


def maximal_cliques(domain: Domain, cliques: Iterable[CliqueLike]) -> tuple[Clique, ...]:
    """The distinct cliques not contained in another one, canonicalised to domain order.

    Keeps first-seen order among the survivors, so the result is deterministic.
    """
    canon: list[Clique] = []
    seen = set()
    for c in cliques:
        c = domain.canonical(domain.check_clique(c))
        if c not in seen:
            seen.add(c)
            canon.append(c)
    sets = [frozenset(c) for c in canon]
    # A clique can only lie inside cliques that hold its attributes: look among those that hold its
    # rarest one, not among all (quadratic in the number of cliques).
    holders = _holders(canon)
    keep = []
    for i, s in enumerate(sets):
        candidates = min((holders[a] for a in s), key=len) if s else range(len(sets))
        if not any(s < sets[j] for j in candidates):
            keep.append(canon[i])
    return tuple(keep)


def _holders(cliques: Sequence[Clique]) -> dict[str, list[int]]:
    """For each attribute, the indices of the cliques that hold it, ascending."""
    out: dict[str, list[int]] = {}
    for i, c in enumerate(cliques):
        for a in c:
            out.setdefault(a, []).append(i)
    return out


def junction_tree(domain: Domain, cliques: Sequence[CliqueLike]) -> JunctionTree:
    """Build (or fetch from cache) the junction tree of ``cliques`` over ``domain``.

    Args:
        domain: all attributes (unmeasured ones become singleton cliques).
        cliques: the cliques whose tables the model must hold.

    Returns:
        A :class:`JunctionTree`; equal inputs give the identical object.

    Example:
        >>> dom = Domain({"a": 2, "b": 2, "c": 2})
        >>> junction_tree(dom, [("a", "b"), ("b", "c"), ("a", "c")]).cliques
        (('a', 'b', 'c'),)
    """
    canon = frozenset(domain.canonical(domain.check_clique(c)) for c in cliques)
    return _junction_tree_cached(domain, canon)


def triangulated_cliques(domain: Domain, cliques: Sequence[CliqueLike]) -> tuple[Clique, ...]:
    """The cliques of the junction tree :func:`junction_tree` builds for ``cliques`` (the same triangulation),
    without the tree: what a model's size needs, at a third of the cost (no spanning tree, no schedule), and
    without filling :func:`junction_tree`'s cache (a mechanism sizes hundreds of candidate models a round).

    Example:
        >>> dom = Domain({"a": 2, "b": 2, "c": 2})
        >>> triangulated_cliques(dom, [("a", "b"), ("b", "c"), ("a", "c")])
        (('a', 'b', 'c'),)
    """
    canon = frozenset(domain.canonical(domain.check_clique(c)) for c in cliques)
    attrs = domain.attributes
    return tuple(tuple(attrs[v] for v in sorted(s)) for s in _elimination_cliques(domain, canon)[1])


def _elimination_cliques(domain: Domain, cliques: frozenset) -> tuple[list[int], list[frozenset]]:
    """The elimination order and the maximal elimination cliques (attribute indices) of ``cliques``' graph, in
    a canonical order (by their attributes' positions)."""
    attrs = domain.attributes
    index = {a: i for i, a in enumerate(attrs)}
    adjacency: list[set[int]] = [set() for _ in attrs]
    for c in sorted(cliques):
        ids = [index[a] for a in c]
        for i in ids:
            adjacency[i].update(ids)
    for i, nbrs in enumerate(adjacency):
        nbrs.discard(i)
    sizes = [int(n) for n in domain.shape]
    # Table sizes in Python integers: exact, and no overflow where a clique has more than 1e308 cells (a
    # huge domain is refused by the size check, pgmjax.graph.size_limit, not by a math range error here).
    cells_of = lambda c: math.prod(sizes[v] for v in c)  # noqa: E731
    # Greedy heuristics each win on some graphs: keep the order whose tables are smallest in total. On a chordal
    # graph (a fitted model's cliques, grown or not) every criterion eliminates simplicial vertices only: none adds
    # fill, each finds the graph's maximal cliques, which are all that is kept of it but its order, so once min-fill
    # adds none the others are not run (a third of the cost of every junction tree of a fitted model).
    first = _greedy_elimination(adjacency, sizes, "fill")
    if _adds_no_fill(adjacency, first[1]):
        order, elim_cliques = first
    else:
        candidates = [first] + [_greedy_elimination(adjacency, sizes, criterion) for criterion in ("weight", "fill_weight")]
        order, elim_cliques = min(candidates, key=lambda oc: sum(cells_of(c) for c in oc[1]))

    # Maximal elimination cliques, in elimination order.
    elim_sets = [frozenset(c) for c in elim_cliques]
    by_attr: dict[int, list[int]] = {}
    for k, s in enumerate(elim_sets):
        for v in s:
            by_attr.setdefault(v, []).append(k)
    maximal = []
    for k, s in enumerate(elim_sets):
        first = min(s)
        if not any(j != k and s < elim_sets[j] for j in by_attr[first]):
            maximal.append(k)
    # Equal sets can appear twice: keep the first.
    uniq, seen = [], set()
    for k in maximal:
        if elim_sets[k] not in seen:
            seen.add(elim_sets[k])
            uniq.append(k)
    # In a canonical order (by their attributes' positions), not the elimination order: the tree is then a
    # function of the set of cliques alone, so the junction tree's own cliques (a saved model's) give back
    # the very tree, hence the same program and the same answers bit for bit, as the measured cliques did.
    return order, sorted((elim_sets[k] for k in uniq), key=sorted)


@functools.lru_cache(maxsize=128)
def _junction_tree_cached(domain: Domain, cliques: frozenset) -> JunctionTree:
    attrs = domain.attributes
    sizes = [int(n) for n in domain.shape]
    cells_of = lambda c: math.prod(sizes[v] for v in c)  # noqa: E731
    order, node_sets = _elimination_cliques(domain, cliques)
    tree_cliques = tuple(tuple(attrs[v] for v in sorted(s)) for s in node_sets)

    # Maximum spanning tree on separator size over cliques that share an attribute.
    g = nx.Graph()
    g.add_nodes_from(range(len(node_sets)))
    members: dict[int, list[int]] = {}
    for k, s in enumerate(node_sets):
        for v in s:
            members.setdefault(v, []).append(k)
    for v in sorted(members):
        ks = members[v]
        for a in range(len(ks)):
            for b in range(a + 1, len(ks)):
                i, j = ks[a], ks[b]
                if not g.has_edge(i, j):
                    g.add_edge(i, j, weight=len(node_sets[i] & node_sets[j]))
    tree = nx.maximum_spanning_tree(g, algorithm="kruskal")
    # Separate components hang by empty separators off one clique of the one with the most cliques, each by
    # its own centre. A star keeps the schedule shallow (unmeasured attributes all sit one level below the
    # hub, where equal shapes stack into one class); a chain of components would add a level per component.
    components = sorted(sorted(c) for c in nx.connected_components(tree))
    if len(components) > 1:
        cells = [cells_of(s) for s in node_sets]
        # The deepest part, and of those the one with the fewest cells. The others hang off its smallest clique
        # (its centre on ties): a parent takes a routing pair per cell and child (pgmjax.graph.routed_plan), so a
        # dozen components hung off a large table made the size-class program's vectors several times the model.
        hub = max(components, key=lambda c: (len(c), -sum(cells[k] for k in c), -c[0]))
        centre = lambda c: _tree_centre(tree.subgraph(c)) if len(c) > 2 else c[0]  # noqa: E731
        hub_centre = centre(hub)
        attach = min(hub, key=lambda k: (cells[k], k != hub_centre, k))
        for comp in components:
            if comp is not hub:
                tree.add_edge(attach, centre(comp), weight=0)

    root = _tree_centre(tree)
    parent = [-1] * len(node_sets)
    depth = [0] * len(node_sets)
    for p, c in nx.bfs_edges(tree, root, sort_neighbors=sorted):
        parent[c] = p
        depth[c] = depth[p] + 1
    separators = tuple(
        () if parent[k] < 0 else tuple(attrs[v] for v in sorted(node_sets[k] & node_sets[parent[k]]))
        for k in range(len(node_sets))
    )
    return JunctionTree(
        domain=domain,
        cliques=tree_cliques,
        parent=tuple(parent),
        depth=tuple(depth),
        separators=separators,
        elimination_order=tuple(attrs[v] for v in order),
    )


def _adds_no_fill(adjacency: list[set[int]], elim_cliques) -> bool:
    """Whether every elimination clique is complete in the graph already: the elimination added no fill edge (the
    graph is chordal and the order a perfect elimination order)."""
    return all(b in adjacency[a] for c in elim_cliques for a, b in itertools.combinations(c, 2))


def _greedy_elimination(adjacency: list[set[int]], sizes: list[int], criterion: str = "fill"):
    """Greedy elimination with a lazily updated heap: min-fill (fewest fill edges), min-weight (smallest created
    table) or min-fill-weight (smallest sum over the fill edges of the product of their ends' sizes; Kjaerulff,
    "Triangulation of graphs: algorithms giving small total state space", Aalborg University report R 90-09, 1990).

    Under every criterion a simplicial vertex (no fill) goes first: eliminating one first is safe (the simplicial rule of
    Bodlaender, Koster & van den Eijkhof, "Pre-processing rules for triangulation of probabilistic networks",
    Computational Intelligence 21(3), 2005), and it makes the order local. Every
    simplicial vertex goes before any other, and the vertices left once none is (the graph's core) are the same
    whichever went first, so the choices made on the core are those of any graph with that core: a chordal
    model grown by one clique is triangulated alike whole or only around the new clique
    (:mod:`pgmjax.graph.growth`). Ties break on the table's size in exact integers, then on the vertex.

    Only the neighbours of an eliminated vertex and *their* neighbours can
    change fill score, so each step rescores that neighbourhood instead of
    every vertex (linear time on sparse, chain-like graphs).
    """
    adj = [set(s) for s in adjacency]
    alive = [True] * len(adj)

    def score(v: int):
        nbrs = list(adj[v])
        fill = fill_weight = 0
        for i in range(len(nbrs)):
            ni = adj[nbrs[i]]
            for j in range(i + 1, len(nbrs)):
                if nbrs[j] not in ni:
                    fill += 1
                    fill_weight += sizes[nbrs[i]] * sizes[nbrs[j]]
        weight = math.prod(sizes[u] for u in nbrs) * sizes[v]
        if criterion == "fill":
            return (fill, weight, v)
        if criterion == "weight":
            return (fill > 0, weight, fill, v)
        return (fill_weight, weight, v)

    heap = [score(v) for v in range(len(adj))]
    current = list(heap)
    heapq.heapify(heap)
    order, cliques = [], []
    while heap:
        item = heapq.heappop(heap)
        v = item[-1]
        if not alive[v] or item != current[v]:
            continue
        nbrs = adj[v]
        order.append(v)
        cliques.append((v, *sorted(nbrs)))
        alive[v] = False
        for u in nbrs:
            adj[u].discard(v)
            adj[u].update(w for w in nbrs if w != u)
        touched = set(nbrs)
        for u in nbrs:
            touched.update(adj[u])
        for u in touched:
            if alive[u]:
                current[u] = score(u)
                heapq.heappush(heap, current[u])
        adj[v] = set()
    return order, cliques


def _tree_centre(tree: nx.Graph) -> int:
    """A centre of a tree, found by stripping leaves layer by layer (smallest index on ties)."""
    n = tree.number_of_nodes()
    if n <= 2:
        return 0
    degree = {v: d for v, d in tree.degree()}
    layer = sorted(v for v, d in degree.items() if d <= 1)
    remaining = n
    while remaining > 2:
        remaining -= len(layer)
        nxt = []
        for v in layer:
            for u in tree.neighbors(v):
                degree[u] -= 1
                if degree[u] == 1:
                    nxt.append(u)
        layer = sorted(nxt)
    return min(layer)


def levels(tree: JunctionTree) -> list[np.ndarray]:
    """Clique indices grouped by depth, deepest first (the upward schedule)."""
    depth = np.asarray(tree.depth)
    return [np.flatnonzero(depth == d) for d in range(depth.max(), -1, -1)]
