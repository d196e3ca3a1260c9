"""Canonical potentials: every function of a separator moved from the child clique toward the root.

Log-potentials on a junction tree represent their distribution many ways: adding a function ``h`` of a
separator to one side's table and taking it from the other's (``theta_c + h(x_s)``, ``theta_p - h(x_s)``)
leaves ``sum_c theta_c(x_c)``, hence the distribution, unchanged (Koller & Friedman, *Probabilistic
Graphical Models*, 2009, Section 10.3: reparameterization). An optimiser whose iterate is a running sum of
gradients (dual averaging) can drift along these directions without bound, because the loss cannot see
them; in float32 the growing tables then lose the distribution's detail to rounding (``eps |theta|`` per
log-cell).

:func:`canonical` removes that freedom with one upward pass of the oracle's own schedule (levels deepest
first, the same runs, routes and landings as :func:`pgmjax.graph.oracle.log_partition`, through
:func:`pgmjax.graph.oracle.upward_pass`): each clique's
table plus what it received is split into its mean over its eliminated axes (a function of its upward
separator, sent to the parent) and the rest (kept), and the root keeps its table less its mean. The map
is linear, represents the same distribution up to a constant (every message taken from a child is added
to its parent), and is idempotent; two tables that differ by separator transfers and a constant map to
the same canonical tables (each non-root table then has zero mean over its eliminated axes for every
separator value, a unique decomposition: the analysis-of-variance decomposition along the tree).

:func:`log_conditionals` is the same pass with log-sum-exps in place of the means: each non-root table
becomes its clique's log-conditional given its upward separator and the root its log-marginal (the
upward pass of clique-tree calibration, Koller & Friedman, Section 10.2). It is the gauge for potentials
rather than gradients: a mean mixes a nearly impossible cell (``-1e4``) into every likely cell of its
slice, a log-sum-exp does not, and ``-inf`` cells (structural zeros) stay ``-inf``.
:func:`log_conditional_tables` is the same on the host, in float64, for tables keyed by a junction tree's
cliques: what a warm start's potentials become before they reach the device.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from pgmjax import kernels

from .junction import JunctionTree
from .oracle import block_potentials, keep_real, message_shape, route_messages, upward_pass
from .oracle_plan import OraclePlan, in_host_axes


def _mean(b, axes):
    m = jnp.mean(b, axis=axes)
    return m, m


def _log_sum_exp(b, axes):
    m = kernels.logsumexp(b, axis=axes)
    # An all -inf slice (a separator value the distribution excludes) sends -inf and keeps its -inf cells.
    return m, jnp.where(jnp.isfinite(m), m, 0.0)


def _split(reduce, run, parents, pairs, direct, route, beliefs, real) -> tuple[dict, list]:
    """One level: each class's reduction over its eliminated axes (``reduce(table, axes) -> (message,
    subtracted)``: what goes to the parent and what the class takes off its table), routed to the parents,
    and what it keeps."""
    raw, kept = {}, []
    for x, (b, cl) in enumerate(zip(beliefs, run.classes)):
        axes = tuple(range(b.ndim - len(cl.elim_axes), b.ndim))
        raw[x], sub = reduce(b, axes)
        kept.append(keep_real(real[x], b - sub.reshape((b.shape[0], *message_shape(cl)))))
    zero = jnp.zeros((), next(iter(raw.values())).dtype) if raw else 0.0
    return route_messages(run, parents, pairs, direct, route, raw, {x: zero for x in raw}, real), kept


def _keys(plan: OraclePlan) -> list:
    """The blocks' keys, per run, per class (the oracle layout's order)."""
    return [[f"r{r:03d}x{x:02d}" for x in range(len(run.classes))] for r, run in enumerate(plan.runs)]


def _pass(plan: OraclePlan, pots: list, reals: list, reduce, root_reduce) -> dict:
    """The upward pass of :func:`canonical` or :func:`log_conditionals`, tables back in the oracle layout."""
    keys = _keys(plan)
    outs, root = upward_pass(plan, pots, reals, functools.partial(_split, reduce))
    outs[-1].append((False, [root - root_reduce(root)]))
    out: dict = {}
    for ks, parts in zip(keys, outs):
        for x, k in enumerate(ks):
            tables = [kept[x] if stacked else kept[x][None] for stacked, kept in parts]
            out[k] = jnp.concatenate(tables) if len(tables) > 1 else tables[0]
    return out


def canonical(plan: OraclePlan, blocks: dict) -> dict:
    """The canonical representative of ``blocks``' distribution (see the module's docstring).

    Args:
        plan: the oracle plan of the junction tree.
        blocks: finite tables in the oracle layout (a gradient or a sum of gradients; ``-inf`` potentials
            would give NaN).

    Returns:
        Tables in the same layout, with the same distribution (``sum_c theta_c`` differs by a constant),
        zero on padding slots.

    Example:
        >>> plan = pj.graph.oracle.make_plan(pj.Domain({"a": 2, "b": 2, "c": 2}), [("a", "b"), ("b", "c")])
        >>> out = canonical(plan, plan.zeros())
        >>> all(bool((v == 0).all()) for v in out.values())
        True
    """
    keys = _keys(plan)
    pots = [[blocks[k] for k in ks] for ks in keys]
    reals = [[block_potentials(plan, k, blocks[k])[1] for k in ks] for ks in keys]
    return _pass(plan, pots, reals, _mean, jnp.mean)


def log_conditionals(plan: OraclePlan, theta: dict) -> dict:
    """The potentials ``theta``'s distribution as log-conditionals along the junction tree (see the module's
    docstring): every non-root clique's table is ``log p(x_C | x_S)`` of its upward separator ``S``, the
    root's ``log p(x_root)``.

    Like :func:`canonical` it removes every separator transfer and constant (two potentials of one
    distribution map to the same tables), and its tables are log-probabilities: at most 0, the likely
    cells near 0 whatever ``theta`` drifted to. Cells past a padded table's size keep their input value;
    padding slots are 0.

    Args:
        plan: the oracle plan of the junction tree.
        theta: log-potentials in the oracle layout (``-inf`` entries are structural zeros).

    Returns:
        Tables in the same layout with the same distribution (``sum_c`` of them is ``log p``).

    Example:
        >>> plan = pj.graph.oracle.make_plan(pj.Domain({"a": 2, "b": 3}), [("a", "b")])
        >>> out = log_conditionals(plan, {k: v + 7.0 for k, v in plan.zeros().items()})
        >>> [round(float(jnp.exp(v).sum()), 6) for v in out.values()]
        [1.0]
    """
    keys = _keys(plan)
    masked = [[block_potentials(plan, k, theta[k]) for k in ks] for ks in keys]
    out = _pass(plan, [[p for p, _ in m] for m in masked], [[re for _, re in m] for m in masked], _log_sum_exp,
                lambda root: kernels.logsumexp(root.reshape(-1), axis=-1))
    # the cells a padded table does not have go back to their input (the oracle masks them at -inf itself)
    return {k: v if (cells := plan.arrays.get(f"{k}_cells")) is None else jnp.where(cells == 0, v, theta[k])
            for k, v in out.items()}


def log_conditional_tables(tree: JunctionTree, tables: dict) -> dict:
    """:func:`log_conditionals` on the host, in float64: tables keyed by ``tree``'s cliques, as log-conditionals.

    Each non-root clique's table becomes ``log p(x_C | x_S)`` of its separator ``S`` with its parent (what it
    takes off is added to its parent's table, deepest cliques first), the root's ``log p(x_root)``: the same
    distribution, every likely cell near 0. A chain of warm starts (a mechanism's rounds, each fit starting
    from the last model) can pile up potentials whose tables' tops conflict, so that ``log Z`` is far from 0
    and float32 rounds every likely cell's potential to ``eps |log Z|``; from these it cannot.

    Args:
        tree: the junction tree.
        tables: ``{clique: table}`` for some of ``tree.cliques`` (axes in the clique's order; a missing clique's
            table is 0); ``-inf`` entries are structural zeros and stay ``-inf``.

    Returns:
        ``{clique: table}`` for every clique of ``tree``, float64.

    Example:
        >>> from pgmjax.data.domain import Domain
        >>> from pgmjax.graph.junction import junction_tree
        >>> tree = junction_tree(Domain({"a": 2, "b": 3}), [("a", "b")])
        >>> out = log_conditional_tables(tree, {("a", "b"): np.full((2, 3), 7.0)})
        >>> round(float(np.exp(out[("a", "b")]).sum()), 12)
        1.0
    """
    out = {c: np.zeros(tree.domain.shape_of(c)) for c in tree.cliques}
    for c, t in tables.items():
        out[c] = out[c] + np.asarray(t, np.float64)
    for j in sorted(range(len(tree.cliques)), key=lambda j: -tree.depth[j]):
        clique, table = tree.cliques[j], out[tree.cliques[j]]
        p = tree.parent[j]
        axes = tuple(i for i, a in enumerate(clique) if p < 0 or a not in tree.separators[j])
        top = np.max(table, axis=axes, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore"):  # a slice of -inf cells (a separator value excluded) sends -inf
            sent = np.log(np.sum(np.exp(table - top), axis=axes, keepdims=True)) + top
        out[clique] = table - np.where(np.isfinite(sent), sent, 0.0)
        if p >= 0:
            parent = tree.cliques[p]
            kept = tuple(a for i, a in enumerate(clique) if i not in axes)
            out[parent] = out[parent] + in_host_axes(tree.domain, kept, np.squeeze(sent, axis=axes), parent)
    return out
