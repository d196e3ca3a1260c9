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

Structure (which cliques, which einsum) is a
:class:`~pgmjax.model.query_plan.QueryPlan` built once on the host and
hashed by value; the numbers (clique marginals, query matrices) are arrays,
so a second query of the same structure never recompiles, and many queries
are answered by one compiled program (:func:`answer_many`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from pgmjax.kernels import sum_axes

from ..compiler import jit
from ..data.domain import Clique, Domain
from .query_plan import QueryPlan, einsum_path


def _run_plan(plan: QueryPlan, tables: dict[int, jax.Array], matrices, total) -> jax.Array:
    tree = plan.tree
    outputs = []
    for step in plan.contractions:
        table = tables[step.clique] / total
        if step.conditional:
            clique = tree.cliques[step.clique]
            sep_axes = tuple(i for i, a in enumerate(clique) if a not in step.separator)
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
        plan: a plan from :func:`~pgmjax.model.query_plan.plan_query`.
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
        cached = (step.clique, step.separator)  # a clique's conditional given the separator toward the plan's top
        if step.conditional and cached in conditionals:
            table = conditionals[cached]
        else:
            table = np.asarray(tables[step.clique], np.float64) / total
            if step.conditional:
                clique = tree.cliques[step.clique]
                sep = table.sum(axis=tuple(i for i, a in enumerate(clique) if a not in step.separator), keepdims=True)
                # p(sep) = 0 only where the clique's cells are 0: the conditional is 0 there, not NaN.
                table = conditionals[cached] = np.divide(table, sep, out=np.zeros_like(table), where=sep > 0)
        args = [table] + [outputs[i] for i in step.children] + [matrices[i] for i in step.matrices]
        for i in step.children:  # a message is read once: free it (a plan's messages can be large)
            outputs[i] = None
        outputs.append(np.einsum(step.spec, *args, optimize=einsum_path(step.spec, tuple(a.shape for a in args))))
        del args
    return outputs[-1] * total


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
    return _answer_many_jit(*_arguments(plans, clique_marginals, matrices, total))


def answer_many_bytes(plans: tuple[QueryPlan, ...], clique_marginals: dict[int, jax.Array], matrices: tuple,
                      total) -> int | None:
    """The memory :func:`answer_many`'s program for these arguments allocates when it runs (its temporaries and
    its answers; the tables it reads exist already), as XLA's compiler counts it, before anything is allocated.

    The program is compiled here (and kept: the call that follows compiles nothing). None where the backend does
    not report it.
    """
    stats = _answer_many_jit.lower(*_arguments(plans, clique_marginals, matrices, total)).compile().memory_analysis()
    if stats is None:
        return None
    return int(stats.temp_size_in_bytes) + int(stats.output_size_in_bytes)


def _arguments(plans, clique_marginals, matrices, total) -> tuple:
    used = sorted({c for p in plans for c in p.cliques})
    tables = {c: clique_marginals[c] for c in used}
    dtype = next(iter(tables.values())).dtype
    mats = tuple(tuple(None if q is None else jnp.asarray(q, dtype) for q in m) for m in matrices)
    return tuple(plans), tables, mats, jnp.asarray(total, dtype)


def domain_sizes(domain: Domain, attrs: Clique) -> tuple[int, ...]:
    return tuple(domain[a] for a in attrs)
