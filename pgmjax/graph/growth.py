"""A junction tree grown by one clique: the model a candidate measurement would make, without triangulating it all.

An adaptive mechanism (AIM, MWEM with a model) asks, every round and for each of hundreds of candidate
cliques, how large the model would be if it measured that candidate next. The model's cliques ``H`` are already
chordal (a junction tree's); adding a clique ``c`` makes a graph that only the part of the tree between ``c``'s
attributes needs re-triangulating. :class:`Growth` holds ``H``'s tree and, for a candidate, takes the smallest
subtree whose cliques hold every attribute of ``c`` (its Steiner subtree), triangulates the union ``U`` of
those cliques together with ``c`` (the same greedy elimination as :func:`~pgmjax.graph.junction.junction_tree`,
over ``U`` only), and puts the result in the subtree's place. The other cliques meet ``U`` only in their
separators, which stay complete, so the result is chordal, holds ``H`` and ``c``, and is a function of ``H``
and ``c`` alone (Flores, Gamez & Olesen, "Incremental compilation of Bayesian networks", UAI 2003, Section 3:
only the maximal prime subgraphs a new link touches are re-triangulated).

The grown cliques are chordal, so :func:`~pgmjax.graph.junction.junction_tree` gives them back as they are: a
caller that fits on them (``estimate(..., cliques=grown)``) fits a model of exactly the size it checked.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

from ..data.domain import Clique, CliqueLike, Domain
from .junction import junction_tree, triangulated_cliques


class Growth:
    """The junction tree of a chordal model's cliques, ready to be grown by one candidate clique at a time.

    Args:
        domain: the model's domain.
        cliques: the model's cliques (a fitted model's ``cliques``: chordal, so the tree holds them as they are).

    Example:
        >>> dom = Domain({"a": 2, "b": 3, "c": 4, "d": 5})
        >>> g = Growth(dom, [("a", "b"), ("b", "c"), ("c", "d")])
        >>> g.grown(("a", "d"))  # the path a-b-c-d closed into a cycle: the three cliques re-triangulated
        (('a', 'b', 'c'), ('a', 'c', 'd'))
        >>> g.cells(("a", "d")), g.cells(("b", "c"))  # ("b", "c") is inside a clique: the model unchanged
        (64, 38)
    """

    def __init__(self, domain: Domain, cliques: Sequence[CliqueLike]):
        tree = junction_tree(domain, cliques)
        self.domain = domain
        self.cliques: tuple[Clique, ...] = tree.cliques
        edges = {pair for c in cliques for pair in itertools.combinations(domain.canonical(c), 2)}
        #: whether ``cliques`` are chordal (their tree adds no fill edge): only then is :meth:`grown` the
        #: triangulation of ``cliques`` and the new clique taken whole (otherwise it grows the triangulated model)
        self.chordal = all(pair in edges for c in tree.cliques for pair in itertools.combinations(c, 2))
        self.base_cells = tree.cells
        self._holders = tree.holders
        self._neighbours = tree.neighbours
        self._sets = [frozenset(c) for c in tree.cliques]
        self._parent, self._depth = tree.parent, tree.depth
        self._base: dict = {}  # cells over another domain (:meth:`cells`)

    def _subtree(self, attrs: Clique) -> list[int] | None:
        """The smallest subtree whose cliques hold every attribute of ``attrs`` (clique indices, ascending), or
        None where one clique holds them all (the model does not grow). Found by pruning, from the whole tree,
        leaves that no attribute needs: the cliques holding one attribute form a subtree, so the subtree left
        is the unique smallest one."""
        holders = [self._holders[a] for a in attrs]
        want = frozenset(attrs)
        if any(want <= self._sets[i] for i in min(holders, key=len)):
            return None
        return self._between(*attrs) if len(attrs) == 2 else self._pruned(attrs)

    def _pruned(self, attrs: Clique) -> list[int]:
        """:meth:`_subtree` of attributes no clique holds together, by pruning leaves (any number of them)."""
        holders = [self._holders[a] for a in attrs]
        count = {a: len(h) for a, h in zip(attrs, holders)}  # holders of each attribute still in the subtree
        alive = [True] * len(self.cliques)
        degree = [len(n) for n in self._neighbours]
        leaves = [i for i, d in enumerate(degree) if d <= 1]
        while leaves:
            i = leaves.pop()
            if not alive[i] or any(count[a] == 1 for a in attrs if a in self._sets[i]):
                continue  # the last holder of one of the attributes stays
            alive[i] = False
            for a in attrs:
                if a in self._sets[i]:
                    count[a] -= 1
            for j in self._neighbours[i]:
                if alive[j]:
                    degree[j] -= 1
                    if degree[j] <= 1:
                        leaves.append(j)
        return [i for i, keep in enumerate(alive) if keep]

    def _between(self, a: str, b: str) -> list[int]:
        """The smallest subtree holding ``a`` and ``b`` where no clique holds both: the tree path from a clique
        holding ``a`` to one holding ``b``, cut to its part from the last clique holding ``a`` to the first holding
        ``b`` (each attribute's cliques form a subtree, so the path leaves the one and enters the other once)."""
        x, y = self._holders[a][0], self._holders[b][0]
        up, down = [], []  # x's side of the path upward, y's side upward (reversed later)
        parent, depth = self._parent, self._depth
        while depth[x] > depth[y]:
            up.append(x)
            x = parent[x]
        while depth[y] > depth[x]:
            down.append(y)
            y = parent[y]
        while x != y:
            up.append(x)
            down.append(y)
            x, y = parent[x], parent[y]
        path = up + [x] + down[::-1]
        first = max(k for k, i in enumerate(path) if a in self._sets[i])
        last = min(k for k, i in enumerate(path) if b in self._sets[i])
        return sorted(path[first:last + 1])

    def _part(self, clique: CliqueLike) -> tuple[Clique, tuple[Clique, ...] | None]:
        """``clique`` in domain order and the cliques of its subtree (None where one clique holds it)."""
        attrs = self.domain.canonical(self.domain.check_clique(clique))
        subtree = self._subtree(attrs)
        return attrs, None if subtree is None else tuple(self.cliques[i] for i in subtree)

    def grown(self, clique: CliqueLike) -> tuple[Clique, ...]:
        """The model's cliques with ``clique`` added: the subtree between its attributes re-triangulated.

        Returns:
            The grown model's maximal cliques, each in domain order, sorted: chordal, a superset (as a graph) of
            the model's and ``clique``'s.
        """
        attrs, part = self._part(clique)
        if part is None:
            return tuple(sorted(self.cliques))
        kept = [c for c in self.cliques if c not in part]
        return tuple(sorted(kept + list(_retriangulated(self.domain, part, attrs))))

    def cells(self, clique: CliqueLike, domain: Domain | None = None) -> int:
        """Cells of :meth:`grown`'s tables (a Python int), computed from the re-triangulated part only.

        Args:
            clique: the candidate.
            domain: the sizes to count the tables over (the same attributes; default the growth's own): a
                compressed model's cliques counted over the declared domain it is released on.
        """
        attrs, part = self._part(clique)
        over = self.domain if domain is None else domain
        base = self.base_cells if domain is None else self._base_over(over)
        if part is None:
            return base
        removed = sum(over.size(c) for c in part)
        return base - removed + sum(over.size(c) for c in _retriangulated(self.domain, part, attrs))

    def _base_over(self, domain: Domain) -> int:
        """The model's cells over ``domain`` (kept per domain: one growth is asked about many candidates)."""
        cached = self._base.get(domain)
        if cached is None:
            if set(domain.attributes) != set(self.domain.attributes):
                raise ValueError(f"Growth.cells: domain must have the model's attributes {self.domain.attributes}, "
                                 f"got {domain.attributes}")
            cached = self._base[domain] = sum(domain.size(c) for c in self.cliques)
        return cached


# A round changes the model in one place: most candidates' subtrees, hence their re-triangulations, are the
# previous round's (and a draw refused by a size check is often drawn again at the next pick). Keyed by value (the
# subtree's cliques, the clique, the domain), so it never goes stale.
@functools.lru_cache(maxsize=65536)
def _retriangulated(domain: Domain, cliques: tuple[Clique, ...], attrs: Clique) -> tuple[Clique, ...]:
    """``cliques`` (a subtree's) and ``attrs`` triangulated over the attributes they hold."""
    union = domain.canonical(set(attrs).union(*cliques))
    return tuple(triangulated_cliques(domain.project(union), list(cliques) + [attrs]))
