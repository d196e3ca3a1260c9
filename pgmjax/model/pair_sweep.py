"""Many one- and two-way marginals of a junction-tree model at once: one sweep of the tree per carried attribute.

A pair ``(a, b)`` whose attributes share no clique is answered by elimination along the tree path between them
(Koller & Friedman, *Probabilistic Graphical Models*, 2009, Section 10.3.3, queries outside a clique): with
``S`` the separator a clique ``C`` shares with its neighbour toward ``a``,

    ``p(a, x_C) = p(a, x_S) p(x_C | x_S)``,   ``p(a, x_S) = sum over x_P outside S of p(a, x_P)``.

Starting at a clique that holds ``a`` and carrying ``a`` outward, one sweep yields ``p(a, b)`` for every ``b``
the sweep reaches, so all of ``a``'s pairs share their messages. An AIM round scores every candidate pair of
its new model; asked one query at a time, the same arithmetic spent most of its time planning and dispatching
1,225 small contractions. Each pair is carried by its attribute with fewer values (the smaller extra axis), and
a sweep visits only the cliques on the paths to the attributes it must reach. Pairs inside one clique, and
one-way marginals, are that clique's table summed.

The arithmetic is in float64 on the host, as :func:`pgmjax.model.inference.run_plan_on_host`'s; a conditional
whose separator has probability 0 is 0 there, not NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..data.dataset import project_table
from ..graph.junction import JunctionTree


def pair_marginals(tree: JunctionTree, queries: Sequence[tuple[str, ...]], table: Callable[[int], np.ndarray],
                   max_cells: int) -> list[np.ndarray | None]:
    """Each one- or two-way marginal in ``queries``, from the model's clique tables.

    Args:
        tree: the model's junction tree.
        queries: attribute tuples of one or two distinct attributes (a pair in either order).
        table: clique index -> its marginal counts (axes in the clique's order; called once per clique used).
        max_cells: the most float64 cells the sweeps may hold at once (the tables and conditionals they read,
            their messages and the answers), counted before each allocation; a pair whose sweep would hold more
            is left as ``None``, for the caller to answer otherwise (so is a one-way marginal or a pair inside a
            clique, where the clique's table would).

    Returns:
        Per query, its float64 counts with axes in the query's order, or ``None`` where it was left.

    Example:
        >>> import pgmjax as pj
        >>> from pgmjax.graph.junction import junction_tree
        >>> dom = pj.Domain({"a": 2, "b": 2, "c": 2})
        >>> tree = junction_tree(dom, [("a", "b"), ("b", "c")])
        >>> tabs = [np.array([[3.0, 1.0], [1.0, 3.0]])] * 2  # both cliques' counts (8 records)
        >>> pair_marginals(tree, [("a", "c"), ("b",)], lambda j: tabs[j], 1 << 20)
        [array([[2.5, 1.5],
               [1.5, 2.5]]), array([4., 4.])]
    """
    sweep = _Sweep(tree, table, max_cells)
    out: list[np.ndarray | None] = [None] * len(queries)
    carried: dict[str, dict[str, list[int]]] = {}  # carrier -> other attribute -> the queries asking for the pair
    for i, attrs in enumerate(queries):
        home = tree.containing(attrs)
        if home is not None:
            try:
                sweep.hold(tree.domain.size(attrs))
                out[i] = project_table(sweep.table(home), tree.cliques[home], tuple(attrs))
            except _Full:
                pass
            continue
        carrier, other = sorted(attrs, key=lambda v: (tree.domain[v], tree.domain.attributes.index(v)))
        carried.setdefault(carrier, {}).setdefault(other, []).append(i)
    for carrier, others in carried.items():
        try:
            answers = sweep.carry(carrier, list(others))
        except _Full:
            continue
        for other, joint in answers.items():  # joint: axes (carrier, other)
            for i in others[other]:
                out[i] = joint if queries[i][0] == carrier else joint.T
    return out


class _Full(Exception):
    """An allocation would take the sweeps past their cells."""


class _Sweep:
    """One model's tables, conditionals and tree neighbours, shared by the sweeps of its carried attributes, and
    the cells they hold (:meth:`hold`, before each allocation)."""

    def __init__(self, tree: JunctionTree, table: Callable[[int], np.ndarray], max_cells: int):
        self.tree, self._table = tree, table
        self.held, self.max_cells = 0, max_cells
        self.tables: dict[int, np.ndarray] = {}
        self.kernels: dict[tuple[int, int, tuple[str, ...]], np.ndarray] = {}
        self.neighbours = tree.neighbours

    def hold(self, cells: int) -> None:
        """Count ``cells`` more held, or raise :class:`_Full` (nothing allocated) where that is past the limit."""
        if self.held + cells > self.max_cells:
            raise _Full
        self.held += cells

    def table(self, j: int) -> np.ndarray:
        if j not in self.tables:
            self.hold(self.tree.clique_cells[j])
            self.tables[j] = np.asarray(self._table(j), np.float64)
        return self.tables[j]

    def separator(self, j: int, k: int) -> tuple[str, ...]:
        """The attributes neighbouring cliques ``j`` and ``k`` share, in domain order (the child's separator)."""
        return self.tree.separators[k if self.tree.parent[k] == j else j]

    def kernel(self, j: int, towards: int, new: tuple[str, ...]) -> np.ndarray:
        """``p(x_new | x_S)`` from clique ``j``, ``S`` its separator with neighbour ``towards`` and ``new`` some
        of its other attributes: axes ``(*S, *new)``, 0 where ``p(x_S) = 0``. Cached: every carried attribute
        that passes ``j`` the same way reads it."""
        key = (j, towards, new)
        if key not in self.kernels:
            clique, sep = self.tree.cliques[j], self.separator(j, towards)
            # the sum, laid out in (S, new) order (a matrix product reads it as a matrix) and its conditional; the
            # sum and its copy are freed
            self.hold(3 * self.tree.domain.size((*sep, *new)))
            joint = np.ascontiguousarray(project_table(self.table(j), clique, (*sep, *new)))
            ps = joint.sum(axis=tuple(range(len(sep), len(sep) + len(new))), keepdims=True)
            self.kernels[key] = np.divide(joint, ps, out=np.zeros_like(joint), where=ps > 0)
            self.held -= 2 * joint.size
        return self.kernels[key]

    def carry(self, a: str, others: list[str]) -> dict[str, np.ndarray]:
        """``{b: p(a, b) counts}`` for each of ``others`` (none sharing a clique with ``a``), by one sweep from
        the smallest clique holding ``a``. Raises :class:`_Full` (its messages freed) where it would hold too much."""
        tree = self.tree
        home = tree.containing((a,))
        order, came_from = [home], {home: -1}  # breadth first from home
        for j in order:
            for k in self.neighbours[j]:
                if k not in came_from:
                    came_from[k] = j
                    order.append(k)
        target, wanted = {}, set(others)  # each other attribute's nearest clique
        for j in order:
            for v in wanted.intersection(tree.cliques[j]):
                target[v] = j
            wanted.difference_update(tree.cliques[j])
            if not wanted:
                break
        needed: set[int] = set()
        for j in target.values():
            while j != -1 and j not in needed:
                needed.add(j)
                j = came_from[j]
        reached: dict[int, list[str]] = {}
        for v, j in target.items():
            reached.setdefault(j, []).append(v)
        message: dict[int, tuple[np.ndarray, tuple[str, ...]]] = {}  # clique outside a's subtree -> p(a, x_S)
        answers = {}
        try:
            for j in order:
                if j not in needed:
                    continue
                for k, keep in [(k, self.separator(j, k)) for k in self.neighbours[j]
                                if came_from.get(k) == j and k in needed and a not in tree.cliques[k]] + \
                        [(None, (v,)) for v in reached.get(j, ())]:
                    self.hold(tree.domain.size((a, *keep)))
                    out = self._read(j, came_from[j], message.get(j), a, keep)  # p(a, x_keep)
                    if k is None:
                        answers[keep[0]] = out
                    else:
                        message[k] = (out, keep)
                if j in message:
                    self.held -= message.pop(j)[0].size
        except _Full:
            self.held -= sum(m.size for m, _ in message.values()) + sum(x.size for x in answers.values())
            raise
        return answers

    def _read(self, j: int, p: int, incoming, a: str, keep: tuple[str, ...]) -> np.ndarray:
        """``p(a, x_keep)`` (axes ``(a, *keep)``) at clique ``j``, reached from ``p``: its own table summed where
        it holds ``a``, else the incoming ``p(a, x_S)`` times ``p(x_new | x_S)``, ``S`` summed out."""
        if incoming is None:  # a is in the clique
            return project_table(self.table(j), self.tree.cliques[j], (a, *keep))
        m, sep = incoming
        new = tuple(v for v in keep if v not in sep)
        kern = self.kernel(j, p, new)
        if len(new) == len(keep):  # nothing of S kept: one matrix product over S
            flat = m.reshape(m.shape[0], -1) @ kern.reshape(m[0].size, -1)
            return flat.reshape((m.shape[0], *kern.shape[len(sep):]))
        label = {v: i for i, v in enumerate((a, *sep, *new))}
        return np.einsum(m, [label[v] for v in (a, *sep)], kern, [label[v] for v in (*sep, *new)],
                         [label[a], *(label[v] for v in keep)])


__all__ = ["pair_marginals"]
