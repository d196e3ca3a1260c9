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
"""

from __future__ import annotations

import jax.numpy as jnp

from .oracle import block_potentials, keep_real, message_shape, route_messages, upward_pass
from .oracle_plan import OraclePlan


def _split(run, parents, pairs, direct, route, beliefs, real) -> tuple[dict, list]:
    """One level: each class's mean over its eliminated axes, routed to the parents, and what it keeps."""
    raw, kept = {}, []
    for x, (b, cl) in enumerate(zip(beliefs, run.classes)):
        axes = tuple(range(b.ndim - len(cl.elim_axes), b.ndim))
        raw[x] = jnp.mean(b, axis=axes)
        kept.append(keep_real(real[x], b - raw[x].reshape((b.shape[0], *message_shape(cl)))))
    zero = jnp.zeros((), next(iter(raw.values())).dtype) if raw else 0.0
    return route_messages(run, parents, pairs, direct, route, raw, {x: zero for x in raw}, real), kept


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
    keys = [[f"r{r:03d}x{x:02d}" for x in range(len(run.classes))] for r, run in enumerate(plan.runs)]
    pots = [[blocks[k] for k in ks] for ks in keys]
    reals = [[block_potentials(plan, k, blocks[k])[1] for k in ks] for ks in keys]
    outs, root = upward_pass(plan, pots, reals, _split)
    outs[-1].append((False, [root - jnp.mean(root)]))
    out: dict = {}
    for ks, parts in zip(keys, outs):
        for x, k in enumerate(ks):
            tables = [kept[x] if stacked else kept[x][None] for stacked, kept in parts]
            out[k] = jnp.concatenate(tables) if len(tables) > 1 else tables[0]
    return out
