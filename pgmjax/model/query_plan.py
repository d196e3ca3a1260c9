"""How a factored query is answered on a junction tree: which cliques, rooted where, in which contractions (the
plan), and how many cells its run holds at once (counted before it runs).

McKenna, Sheldon & Miklau (ICML 2019, arXiv 1901.09136), Section 3.3 and Algorithm 3: the model factorises as
``p(x) = p(x_top) prod_c p(x_c | x_sep(c))`` over the smallest subtree of the junction tree that covers the queried
attributes, and each clique of that subtree is one contraction, leaves first. The subtree may be rooted at any of
its cliques; the plan roots it where its largest message is smallest. A plan is static and hashed by value
(:mod:`pgmjax.model.inference` runs it, on the host or compiled).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..data.domain import Clique, Domain
from ..graph.junction import JunctionTree


@dataclass(frozen=True)
class Contraction:
    """One clique of the covering subtree: ``out = einsum(factor, messages..., matrices...)``.

    Attributes:
        clique: index of the clique in the junction tree.
        conditional: divide the clique marginal by its separator marginal
            (every clique but the subtree's top).
        children: indices (into the plan's contractions) whose outputs enter here.
        matrices: positions (into the query's attributes) of matrices applied here.
        spec: the einsum over (clique table, child messages, matrices).
        out_vars: the variables of the output, in order.
        separator: the attributes the clique shares with its parent in the plan (empty at the top): the
            conditional's condition.
    """

    clique: int
    conditional: bool
    children: tuple[int, ...]
    matrices: tuple[int, ...]
    spec: str
    out_vars: tuple[str, ...]
    separator: Clique = ()


@dataclass(frozen=True)
class QueryPlan:
    """How to answer one factored query on one junction tree (static, hashable)."""

    tree: JunctionTree
    attrs: Clique
    kept: tuple[bool, ...]  # True: the attribute's own axis (identity); False: a matrix is applied
    contractions: tuple[Contraction, ...]  # leaves first; the last one is the top

    @property
    def cliques(self) -> tuple[int, ...]:
        return tuple(sorted({c.clique for c in self.contractions}))


def plan_query(tree: JunctionTree, attrs: Clique, kept: tuple[bool, ...], rows: tuple[int, ...] | None = None
               ) -> QueryPlan:
    """Build (cached) the plan answering a factored query over ``attrs``.

    Args:
        tree: the model's junction tree.
        attrs: the queried attributes, in output order (distinct).
        kept: per attribute, whether it is kept as-is (identity) rather than
            multiplied by a query matrix.
        rows: per attribute, the rows of its output axis (default: its number of values): which end of the
            query the plan carries through the tree's separators is chosen by them.
    """
    attrs = tuple(attrs)
    rows = tuple(tree.domain[a] for a in attrs) if rows is None else tuple(int(r) for r in rows)
    return _plan_query_cached(tree, attrs, tuple(bool(k) for k in kept), rows)


@functools.lru_cache(maxsize=4096)
def _plan_query_cached(tree: JunctionTree, attrs: Clique, kept: tuple[bool, ...], rows: tuple[int, ...]) -> QueryPlan:
    if len(set(attrs)) != len(attrs):
        raise ValueError(f"query over {attrs}: an attribute appears more than once")
    if not attrs:
        keep, top = {tree.root}, tree.root
    else:
        whole = tree.containing(attrs)
        if whole is not None:
            keep, top = {whole}, whole
        else:
            keep, top = _covering_subtree(tree, attrs)
    # The subtree may be rooted at any of its cliques: every message carries its separator and the queried
    # variables of the side it comes from, so the top decides which attribute crosses the widest separators (a
    # 1,001-value attribute carried through a 600,000-cell separator is a 600-million-cell message; the other
    # end of the pair carried instead is a few million). The tree's own top is kept where its messages are small
    # (:data:`_SMALL_MESSAGE_CELLS`: most queries, and AIM plans thousands per round), or unless another top's
    # largest message is smaller.
    contractions = _contractions(tree, attrs, kept, keep, top)
    sizes = [_cells(tree.domain, rows, c.out_vars) for c in contractions]
    best = ((max(sizes), sum(sizes)), contractions)
    if best[0][0] > _SMALL_MESSAGE_CELLS:
        for candidate in _candidate_tops(tree, attrs, keep, top)[1:]:
            contractions = _contractions(tree, attrs, kept, keep, candidate)
            sizes = [_cells(tree.domain, rows, c.out_vars) for c in contractions]
            if (max(sizes), sum(sizes)) < best[0]:
                best = ((max(sizes), sum(sizes)), contractions)
    return QueryPlan(tree=tree, attrs=attrs, kept=kept, contractions=best[1])


def _candidate_tops(tree: JunctionTree, attrs: Clique, keep: set[int], top: int) -> list[int]:
    """The tops a plan tries: the subtree's own first, then every clique of a small subtree, or of a large one
    the holders of the queried attribute with the most values (carrying the others toward it)."""
    others = sorted(keep - {top})
    if len(others) > _MAX_TOPS:
        largest = max(attrs, key=lambda a: (tree.domain[a], a))
        others = [c for c in others if largest in tree.cliques[c]][:_MAX_TOPS]
    return [top] + others


#: The most tops a plan tries (each costs one pass over the subtree; plans are cached).
_MAX_TOPS = 32

#: A plan whose messages all hold at most this many cells keeps the tree's own top: carrying them costs less
#: than planning the other tops would.
_SMALL_MESSAGE_CELLS = 1 << 16


def _contractions(tree: JunctionTree, attrs: Clique, kept: tuple[bool, ...], keep: set[int], top: int
                  ) -> tuple[Contraction, ...]:
    """The contractions answering the query on the subtree ``keep`` rooted at ``top``, leaves first."""
    cliques = tree.cliques
    parent, separator, depth = _rooted(tree, keep, top)
    # A matrix attribute is applied in one clique of the subtree that holds it (the deepest, so
    # its rows travel the shortest way); kept attributes are output variables wherever they are.
    home = {}
    for i, (a, k) in enumerate(zip(attrs, kept)):
        if not k:
            holders = [c for c in keep if a in cliques[c]]
            home[i] = max(holders, key=lambda c: (depth[c], -c))
    children_of: dict[int, list[int]] = {c: [] for c in keep}
    for c in keep:
        if c != top:
            children_of[parent[c]].append(c)
    order: list[int] = []

    def visit(c):
        for ch in sorted(children_of[c]):
            visit(ch)
        order.append(c)

    visit(top)
    position = {c: i for i, c in enumerate(order)}
    out_vars: dict[int, tuple[str, ...]] = {}
    contractions = []
    kept_vars = {f"x:{a}" for a, k in zip(attrs, kept) if k}
    for c in order:
        operands: list[tuple[str, ...]] = [tuple(f"x:{a}" for a in cliques[c])]
        for ch in sorted(children_of[c]):
            operands.append(out_vars[ch])
        mats = tuple(sorted(i for i, h in home.items() if h == c))
        for i in mats:
            operands.append((f"r:{i}", f"x:{attrs[i]}"))
        present = {v for op in operands for v in op}
        if c == top:
            out = tuple(f"x:{a}" if k else f"r:{i}" for i, (a, k) in enumerate(zip(attrs, kept)))
        else:
            sep = tuple(f"x:{a}" for a in separator[c])
            carried = tuple(
                v for v in sorted(present) if (v in kept_vars or v.startswith("r:")) and v not in sep
            )
            out = sep + carried
        out_vars[c] = out
        contractions.append(
            Contraction(
                clique=c,
                conditional=c != top,
                children=tuple(position[ch] for ch in sorted(children_of[c])),
                matrices=mats,
                spec=_einsum_spec(operands, out),
                out_vars=out,
                separator=separator.get(c, ()),
            )
        )
    return tuple(contractions)


def _rooted(tree: JunctionTree, keep: set[int], top: int) -> tuple[dict[int, int], dict[int, Clique], dict[int, int]]:
    """The subtree ``keep`` of the junction tree rooted at ``top``: each clique's parent, its separator with that
    parent (an edge's separator is the same in either direction) and its depth."""
    neighbours: dict[int, list[int]] = {c: [] for c in keep}
    for c in keep:
        p = tree.parent[c]
        if p in keep:
            neighbours[c].append(p)
            neighbours[p].append(c)
    parent, separator, depth = {top: -1}, {}, {top: 0}
    stack = [top]
    while stack:
        c = stack.pop()
        for n in sorted(neighbours[c]):
            if n not in depth:
                parent[n], depth[n] = c, depth[c] + 1
                separator[n] = tree.separators[n] if tree.parent[n] == c else tree.separators[c]
                stack.append(n)
    return parent, separator, depth


def _shape(domain: Domain, rows: tuple[int, ...], variables: tuple[str, ...]) -> tuple[int, ...]:
    """The shape of an array over a plan's ``variables`` (``x:<attribute>`` its values, ``r:<i>`` query ``i``'s
    rows)."""
    return tuple(domain[v[2:]] if v.startswith("x:") else rows[int(v[2:])] for v in variables)


def _cells(domain: Domain, rows: tuple[int, ...], variables: tuple[str, ...]) -> int:
    return math.prod(_shape(domain, rows, variables))


@functools.lru_cache(maxsize=16384)
def peak_cells(plan: QueryPlan, rows: tuple[int, ...]) -> int:
    """The most cells a plan's run holds at once, counted before it runs (in the order of
    :func:`pgmjax.model.inference.run_plan_on_host`).

    Held throughout: each clique's table and its conditional. At each contraction: the messages not yet read,
    the clique's table scaled (formed on the way to its conditional), the output, and where NumPy contracts in
    steps (BLAS), a contiguous copy of every operand and each intermediate; then the answer and its copy scaled
    to the total. NumPy's iterator buffers (a few thousand numbers per operand) are not counted. The compiled program
    (:func:`pgmjax.model.inference.answer_many`) runs the same contractions and is counted the same way.

    Args:
        plan: a plan from :func:`plan_query`.
        rows: per queried attribute, the rows of its output axis (its values where kept, the matrix's rows).

    Returns:
        A Python int (exact for any domain).

    Example:
        >>> import pgmjax as pj
        >>> from pgmjax.graph.junction import junction_tree
        >>> tree = junction_tree(pj.Domain({"a": 2, "b": 300, "c": 1000}), [("a", "b"), ("b", "c")])
        >>> plan = plan_query(tree, ("a", "c"), (True, True))
        >>> [step.out_vars for step in plan.contractions]  # a (2 values) rides to (b, c): 600 cells, not 300,000
        [('x:b', 'x:a'), ('x:a', 'x:c')]
        >>> peak_cells(plan, (2, 1000))  # 2 x 300,600 held; then copies of the operands, the message, the answer
        904400
    """
    domain = plan.tree.domain
    held = 2 * sum(plan.tree.clique_cells[c] for c in plan.cliques)
    messages = [_cells(domain, rows, step.out_vars) for step in plan.contractions]
    unread, peak = 0, 0  # cells of the messages written and not yet read
    for k, step in enumerate(plan.contractions):
        shapes = _operand_shapes(plan, step, rows)
        path = einsum_path(step.spec, shapes)
        scaled = plan.tree.clique_cells[step.clique] if step.conditional else 0
        steps = 0 if path is False else sum(math.prod(s) for s in shapes) + max(_intermediates(step.spec, shapes, path),
                                                                             default=0)
        peak = max(peak, unread + scaled, unread + steps + messages[k])
        unread += messages[k] - sum(messages[i] for i in step.children)
    return held + max(peak, 2 * messages[-1])  # the answer, scaled to the total: a second copy


def _operand_shapes(plan: QueryPlan, step: Contraction, rows: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The shapes of ``step``'s operands: the clique's table, the children's messages, the matrices."""
    domain = plan.tree.domain
    shapes = [tuple(domain[a] for a in plan.tree.cliques[step.clique])]
    shapes += [_shape(domain, rows, plan.contractions[i].out_vars) for i in step.children]
    shapes += [(rows[i], domain[plan.attrs[i]]) for i in step.matrices]
    return tuple(shapes)


def _intermediates(spec: str, shapes: tuple, path) -> list[int]:
    """Cells of each intermediate a contraction order forms before its last step (none for NumPy's own loop)."""
    if path is False:
        return []
    inputs, out = spec.split("->")
    ops = inputs.split(",")
    size = {v: n for op, shape in zip(ops, shapes) for v, n in zip(op, shape)}
    cells = []
    for pair in path[1:-1]:  # the last step forms the output, counted apart
        taken = [ops[i] for i in pair]
        ops = [op for i, op in enumerate(ops) if i not in pair]
        needed = set("".join(ops)) | set(out)
        formed = "".join(sorted({v for op in taken for v in op} & needed))
        ops.append(formed)
        cells.append(math.prod(size[v] for v in formed))
    return cells


def _covering_subtree(tree: JunctionTree, attrs: Clique) -> tuple[set[int], int]:
    """The cliques on the paths between chosen holders of ``attrs``, and the subtree's top."""
    cliques = tree.cliques
    needed = set()
    for a in attrs:
        holders = [i for i, c in enumerate(cliques) if a in c]
        needed.add(min(holders, key=lambda i: (tree.domain.size(cliques[i]), i)))
    keep: set[int] = set()
    for c in needed:
        while c >= 0 and c not in keep:
            keep.add(c)
            c = tree.parent[c]
    top = tree.root
    while top not in needed:  # drop the root side while it is a chain of unneeded cliques
        kids = [c for c in keep if tree.parent[c] == top]
        if len(kids) != 1:
            break
        keep.discard(top)
        top = kids[0]
    return keep, top


def _einsum_spec(operands, out) -> str:
    names = sorted({v for op in operands for v in op} | set(out))
    if len(names) > 52:
        raise ValueError(f"a contraction of this query spans {len(names)} variables (at most 52)")
    letter = {v: chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26) for i, v in enumerate(names)}
    return ",".join("".join(letter[v] for v in op) for op in operands) + "->" + "".join(letter[v] for v in out)


@functools.lru_cache(maxsize=16384)
def einsum_path(spec: str, shapes: tuple) -> list | bool:
    """NumPy's greedy contraction order (``optimize=True``: BLAS for a table times a matrix) for ``spec`` on
    operands of these shapes, found once: finding it costs more than most of the host's small contractions.
    False (NumPy's own loop, no path) for a contraction of at most two operands over at most
    :data:`_LOOP_EINSUM_CELLS` index values: a path given to ``np.einsum`` is checked again at every call, which
    cost a mechanism's candidate marginals (hundreds of small contractions per round) more than their arithmetic."""
    sizes = {v: n for op, shape in zip(spec.split("->")[0].split(","), shapes) for v, n in zip(op, shape)}
    if len(shapes) <= 2 and math.prod(sizes.values()) <= _LOOP_EINSUM_CELLS:
        return False
    return np.einsum_path(spec, *(np.broadcast_to(np.float64(0), s) for s in shapes), optimize="greedy")[0]


#: The largest index space (the product of every index's size) whose two-operand contraction the host runs by
#: NumPy's own loop rather than a path (BLAS): below it the loop's work is microseconds.
_LOOP_EINSUM_CELLS = 1 << 16
