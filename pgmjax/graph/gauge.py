"""Canonical potentials: every function of a separator moved from the child clique toward the root.

Log-potentials on a junction tree represent their distribution many ways: adding a function ``h`` of a
separator to one side's table and taking it from the other's (``theta_c + h(x_s)``, ``theta_p - h(x_s)``)
leaves ``sum_c theta_c(x_c)``, hence the distribution, unchanged (Koller & Friedman, *Probabilistic
Graphical Models*, 2009, Section 10.3: reparameterization). An optimiser whose iterate is a running sum of
gradients (dual averaging) can drift along these directions without bound, because the loss cannot see
them; in float32 the growing tables then lose the distribution's detail to rounding (``eps |theta|`` per
log-cell).

:func:`canonical` removes that freedom with one upward pass of the oracle's own schedule (levels deepest
first, the same runs, routes and landings as :func:`pgmjax.graph.oracle.log_partition`): each clique's
table plus what it received is split into its mean over its eliminated axes (a function of its upward
separator, sent to the parent) and the rest (kept), and the root keeps its table less its mean. The map
is linear, represents the same distribution up to a constant (every message taken from a child is added
to its parent), and is idempotent; two tables that differ by separator transfers and a constant map to
the same canonical tables (each non-root table then has zero mean over its eliminated axes for every
separator value, a unique decomposition: the analysis-of-variance decomposition along the tree).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .oracle import _beliefs, _keep_real, _potentials, _route_c, _self_shape
from .oracle_plan import OraclePlan


def _split(run, parents, pairs, direct, route, beliefs, real) -> tuple[dict, list]:
    """One level: each class's mean over its eliminated axes, routed to the parents, and what it keeps."""
    raw, kept = {}, []
    for x, (b, cl) in enumerate(zip(beliefs, run.classes)):
        axes = tuple(range(b.ndim - len(cl.elim_axes), b.ndim))
        raw[x] = jnp.mean(b, axis=axes)
        kept.append(_keep_real(real[x], b - raw[x].reshape((b.shape[0], *_self_shape(cl)))))
    zero = jnp.zeros((), next(iter(raw.values())).dtype) if raw else 0.0
    return _route_c(run, parents, pairs, direct, route, raw, {x: zero for x in raw}, real), kept


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
    static_pairs = plan.static[5]
    received: dict = {}
    out: dict = {}
    for r, run in enumerate(plan.runs):
        keys = [f"r{r:03d}x{x:02d}" for x in range(len(run.classes))]
        pot = [blocks[k] for k in keys]
        real = [_potentials(plan, k, blocks[k])[1] for k in keys]
        inner_pairs, outer_pairs, inner_direct, outer_direct = static_pairs[r]
        parts: list[list] = []  # per level block, per class: the kept tables, (levels, slots, ...)
        beliefs = _beliefs([p[0] for p in pot], received)
        if run.num_levels > 1:
            routes = {p: plan.arrays[f"r{r:03d}_inner_{p[0]:02d}_{p[1]:02d}"] for p in inner_pairs if p not in inner_direct}
            received, kept = _split(run, run.classes, inner_pairs, inner_direct, lambda x, y: routes[(x, y)][0], beliefs,
                                    [m[0] for m in real])
            parts.append([k[None] for k in kept])
            if run.num_levels > 2:

                def body(carry, xs, run=run, inner_pairs=inner_pairs, inner_direct=inner_direct):
                    th, rts, re = xs
                    return _split(run, run.classes, inner_pairs, inner_direct, lambda x, y: rts[(x, y)], _beliefs(th, carry), re)

                rest = {p: v[1:] for p, v in routes.items()}
                received, kept = jax.lax.scan(body, received, ([p[1:-1] for p in pot], rest, [m[1:-1] for m in real]))
                parts.append(kept)
            beliefs = _beliefs([p[-1] for p in pot], received)
        if r + 1 == len(plan.runs):
            (root,) = beliefs
            parts.append([(root - jnp.mean(root))[None]])
        else:
            outer = {p: plan.arrays[f"r{r:03d}_outer_{p[0]:02d}_{p[1]:02d}"] for p in outer_pairs if p not in outer_direct}
            received, kept = _split(run, plan.runs[r + 1].classes, outer_pairs, outer_direct, lambda x, y: outer[(x, y)],
                                    beliefs, [m[-1] for m in real])
            parts.append([k[None] for k in kept])
        for x, k in enumerate(keys):
            out[k] = jnp.concatenate([part[x] for part in parts]) if len(parts) > 1 else parts[0][x]
    return out
