"""Answering marginal and factored queries on a calibrated junction tree (compiled).

McKenna, Sheldon & Miklau (ICML 2019, arXiv 1901.09136), Section 3.3 and
Algorithm 3: a factored query ``Q = Q_1 ⊗ ... ⊗ Q_k`` is answered on the
model ``p`` without the full table by variable elimination in which each
queried attribute's variable ``x_a`` meets its matrix ``Q_a(r_a, x_a)`` once.
Here the elimination follows the junction tree: the model factorises as
``p(x) = p(x_top) prod_c p(x_c | x_sep(c))`` over the smallest subtree that
covers the queried attributes (everything outside it sums to one and drops
out), so each clique of that subtree is one contraction, leaves first. The
factors are conditional probabilities, bounded by one, so the contraction
runs in linear space and query matrices may have negative entries.

Structure (which cliques, which einsum) is a :class:`QueryPlan` built once on
the host and hashed by value; the numbers (clique marginals, query matrices)
are arrays, so a second query of the same structure never recompiles, and
many queries are answered by one compiled program (:func:`answer_many`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from pgmjax.kernels import sum_axes

from ..data.domain import Clique, Domain
from ..graph.junction import JunctionTree
from ..compiler import jit


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
    """

    clique: int
    conditional: bool
    children: tuple[int, ...]
    matrices: tuple[int, ...]
    spec: str
    out_vars: tuple[str, ...]


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


def plan_query(tree: JunctionTree, attrs: Clique, kept: tuple[bool, ...]) -> QueryPlan:
    """Build (cached) the plan answering a factored query over ``attrs``.

    Args:
        tree: the model's junction tree.
        attrs: the queried attributes, in output order (distinct).
        kept: per attribute, whether it is kept as-is (identity) rather than
            multiplied by a query matrix.
    """
    return _plan_query_cached(tree, tuple(attrs), tuple(bool(k) for k in kept))


@functools.lru_cache(maxsize=4096)
def _plan_query_cached(tree: JunctionTree, attrs: Clique, kept: tuple[bool, ...]) -> QueryPlan:
    if len(set(attrs)) != len(attrs):
        raise ValueError(f"query over {attrs}: an attribute appears more than once")
    cliques = tree.cliques
    if not attrs:
        keep = {tree.root}
        top = tree.root
    else:
        whole = tree.containing(attrs)
        if whole is not None:
            keep, top = {whole}, whole
        else:
            keep, top = _covering_subtree(tree, attrs)
    # A matrix attribute is applied in one clique of the subtree that holds it (the deepest, so
    # its rows travel the shortest way); kept attributes are output variables wherever they are.
    home = {}
    for i, (a, k) in enumerate(zip(attrs, kept)):
        if not k:
            holders = [c for c in keep if a in cliques[c]]
            home[i] = max(holders, key=lambda c: (tree.depth[c], -c))
    children_of: dict[int, list[int]] = {c: [] for c in keep}
    for c in keep:
        if c != top:
            children_of[tree.parent[c]].append(c)
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
            sep = tuple(f"x:{a}" for a in tree.separators[c])
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
            )
        )
    return QueryPlan(tree=tree, attrs=attrs, kept=kept, contractions=tuple(contractions))


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


def _run_plan(plan: QueryPlan, tables: dict[int, jax.Array], matrices, total) -> jax.Array:
    tree = plan.tree
    outputs = []
    for step in plan.contractions:
        table = tables[step.clique] / total
        if step.conditional:
            clique = tree.cliques[step.clique]
            sep_axes = tuple(i for i, a in enumerate(clique) if a not in tree.separators[step.clique])
            sep = sum_axes(table, sep_axes, keepdims=True)
            # p(sep) = 0 only where the clique's cells are 0: the conditional is 0 there, not NaN.
            table = jnp.where(sep > 0, table / jnp.where(sep > 0, sep, 1), 0)
        spec, table = _sum_private_axes(step.spec, table)
        args = [table] + [outputs[i] for i in step.children] + [matrices[i] for i in step.matrices]
        outputs.append(jnp.einsum(spec, *args, optimize="optimal" if len(args) <= 6 else "greedy"))
    return outputs[-1] * total


def run_plan_on_host(plan: QueryPlan, tables: dict[int, np.ndarray], matrices: tuple, total: float,
                     conditionals: dict | None = None) -> np.ndarray:
    """A query's plan run in NumPy, float64: the arithmetic of the compiled program without compiling one (a
    model answers a new structure's queries at once).

    Args:
        plan: a plan from :func:`plan_query`.
        tables: ``{clique index: marginal counts}`` for every clique of the plan (axes in the clique's order).
        matrices: one per queried attribute, ``None`` where it is kept (as for :func:`answer_many`).
        total: the number of records of the model.
        conditionals: where given, a dict that keeps each clique's conditional table (given its separator)
            for the next query on the same tables (many queries of one model pass through the same cliques).

    Returns:
        The answer, float64, shaped as :func:`answer_many`'s.
    """
    matrices = tuple(None if m is None else np.asarray(m, np.float64) for m in matrices)
    tree, outputs = plan.tree, []
    conditionals = {} if conditionals is None else conditionals
    for step in plan.contractions:
        if step.conditional and step.clique in conditionals:
            table = conditionals[step.clique]
        else:
            table = np.asarray(tables[step.clique], np.float64) / total
            if step.conditional:
                clique = tree.cliques[step.clique]
                sep = table.sum(axis=tuple(i for i, a in enumerate(clique) if a not in tree.separators[step.clique]),
                                keepdims=True)
                # p(sep) = 0 only where the clique's cells are 0: the conditional is 0 there, not NaN.
                table = conditionals[step.clique] = np.divide(table, sep, out=np.zeros_like(table), where=sep > 0)
        args = [table] + [outputs[i] for i in step.children] + [matrices[i] for i in step.matrices]
        outputs.append(np.einsum(step.spec, *args, optimize=_einsum_path(step.spec, tuple(a.shape for a in args))))
    return outputs[-1] * total


@functools.lru_cache(maxsize=16384)
def _einsum_path(spec: str, shapes: tuple) -> list | bool:
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


def _sum_private_axes(spec: str, table: jax.Array) -> tuple[str, jax.Array]:
    """``(spec, table)`` with the table's axes that no other operand and not the output name summed out
    first, in two stages (:func:`pgmjax.kernels.sum_axes`): a marginal of a large clique sums many cells per
    output, and as one reduction its float32 error grows with their number."""
    inputs, out = spec.split("->")
    ops = inputs.split(",")
    others = set("".join(ops[1:])) | set(out)
    private = tuple(i for i, v in enumerate(ops[0]) if v not in others)
    if not private:
        return spec, table
    ops[0] = "".join(v for v in ops[0] if v in others)
    return ",".join(ops) + "->" + out, sum_axes(table, private)


def answer_many_traced(plans: tuple[QueryPlan, ...], tables: dict, matrices: tuple, total) -> tuple:
    """:func:`answer_many`'s arithmetic on device tables, uncompiled: for a caller that traces it inside its own
    program (the plans static, the rest arrays)."""
    return tuple(_run_plan(p, tables, m, total) for p, m in zip(plans, matrices))


_answer_many_jit = jit(answer_many_traced, static_argnums=0)


def answer_many(plans: tuple[QueryPlan, ...], clique_marginals: dict[int, jax.Array], matrices: tuple, total) -> tuple:
    """Answer several planned queries in one compiled program.

    Args:
        plans: query plans on the same junction tree.
        clique_marginals: ``{clique index: marginal counts}`` covering every
            clique the plans touch (axes in the clique's order).
        matrices: per plan, a tuple with one matrix per attribute (``None``
            where the attribute is kept).
        total: the number of records of the model.

    Returns:
        One array per plan, axes in the plan's attribute order (a kept
        attribute contributes its values, a matrix its rows), scaled to
        ``total``.
    """
    used = sorted({c for p in plans for c in p.cliques})
    tables = {c: clique_marginals[c] for c in used}
    dtype = next(iter(tables.values())).dtype
    mats = tuple(tuple(None if q is None else jnp.asarray(q, dtype) for q in m) for m in matrices)
    return _answer_many_jit(tuple(plans), tables, mats, jnp.asarray(total, dtype))


def domain_sizes(domain: Domain, attrs: Clique) -> tuple[int, ...]:
    return tuple(domain[a] for a in attrs)
