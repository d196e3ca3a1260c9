"""The size-class marginal oracle: log-space sum-product over a junction tree whose routing is data.

The passes read a :class:`~pgmjax.graph.routed_plan.RoutedPlan`: a level is a window of fixed width at the
level's offset in the cell vector, messages are segment reductions of the window's beliefs onto their separator
cells, and a parent gathers its children's messages through the plan's pairs, window by window. Nothing in the
program depends on the junction tree beyond its :class:`~pgmjax.graph.routed_steps.SizeClass`, and the number of
levels is the loop's trip count, read from the plan (a differentiable plan's passes scan over the class's number
of levels instead).

* Upward (collect): ``belief = theta + sum of the children's messages``; ``message = logsumexp`` of the belief over
  the cells that project on each separator cell, less the sending clique's largest entry (the shifts add up to a
  constant of ``log Z``; they keep float32 beliefs near 0 in deep trees). A clique split over several steps keeps
  each separator cell's running maximum and its sum of exponentials rescaled to it, and sends once its last
  step is in.
* Downward (distribute): each clique's conditional table ``exp(belief - message)`` (the root's ``exp(belief -
  log Z_root)``) times its separator's marginal, which its parent's marginal gives by a segment sum over the
  pairs. Beliefs are never divided, so ``-inf`` potentials give no NaN (Shafer-Shenoy).

References: Koller & Friedman (2009), Ch. 10; McKenna, Sheldon & Miklau, "Graphical-model based estimation
and inference for differential privacy", ICML 2019, Section 3 (the marginal oracle M(theta)).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .routed_plan import RoutedPlan


def _window(vector: jax.Array, start, width: int) -> jax.Array:
    return jax.lax.dynamic_slice_in_dim(vector, start, width)


def _pick(values: jax.Array, index: jax.Array, fill) -> jax.Array:
    """``values[index]`` where ``index < len(values)``, ``fill`` where it points past the end (a window's padding,
    or the root's cells, take index ``len(values)``).

    The same numbers as ``concatenate([values, [fill]])[index]``, but XLA:CPU fuses that concatenation into the
    gather element by element (a branch per read, no vector code): the passes' loops ran about four times slower.
    """
    inside = index < values.shape[0]
    read = values.at[jnp.where(inside, index, 0)].get(mode="promise_in_bounds")
    return jnp.where(inside, read, fill)


def _write(vector: jax.Array, start, values: jax.Array, keep: jax.Array) -> jax.Array:
    """``vector`` with the window at ``start`` set to ``values`` where ``keep`` (the rest of the window unchanged)."""
    old = _window(vector, start, values.shape[0])
    return jax.lax.dynamic_update_slice_in_dim(vector, jnp.where(keep, values, old), start, 0)


def _counted(count, bound: int, differentiable: bool, body, init):
    """``body(k, carry)`` for ``k = 0 .. count - 1`` in order, ``count`` data.

    A loop whose trip count is data (every structure of the class runs the one program), or, where
    ``differentiable``, a scan over ``bound`` (static) whose steps past ``count`` leave the carry as it is
    (:func:`jax.lax.cond`): a static trip count, so reverse-mode autodiff goes through the passes (L-BFGS
    differentiates the loss through the oracle), for slower forward passes (the skipped steps still pass their
    carries)."""
    if not differentiable:
        return jax.lax.fori_loop(0, count, body, init)

    def step(carry, k):
        return jax.lax.cond(k < count, lambda c: body(k, c), lambda c: c, carry), None

    out, _ = jax.lax.scan(step, init, jnp.arange(bound))
    return out


def _over_levels(plan: RoutedPlan, body, init):
    """``body(l, carry)`` for the plan's levels (steps) ``l = 0 .. num_levels - 1`` in order; a
    :attr:`~pgmjax.graph.routed_plan.RoutedPlan.differentiable` plan scans over its size class's ``levels``."""
    return _counted(plan.arrays["num_levels"], plan.size.levels, plan.differentiable, body, init)


def _over_pairs(plan: RoutedPlan, l, body, init):
    """``body(start, carry)`` for each window of level ``l``'s pairs, ``start`` where the window begins in the pair
    vector: as many windows as the level's pairs fill (none for a level of leaves), so a clique with many children
    costs its own pairs only; a differentiable plan scans over its class's ``chunks`` windows.

    A plan shaped for a GPU (``chunks`` set, not differentiable) reads its class's ``chunks`` windows unrolled, in
    the level's own trip (a loop's trip costs a GPU tens of microseconds). Windows past the level's count hold
    later levels' pairs, or (a window clamped to the vector's end) padding: every body masks pairs of other levels.
    """
    start, pw, count = plan.arrays["po"][l], plan.size.pair_width, plan.arrays["pc"][l]
    if plan.size.chunks and not plan.differentiable:
        carry = init
        for k in range(plan.size.chunks):
            carry = body(start + k * pw, carry)
        return carry
    return _counted(count, plan.size.chunks, plan.differentiable, lambda k, c: body(start + k * pw, c), init)


def _finite_or_zero(x: jax.Array) -> jax.Array:
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(x), x, 0.0))


class _Upward(NamedTuple):
    """What the upward pass leaves: every cell's belief; per separator cell the largest belief that projects on it
    (``top``, 0 where none is finite) and the sum of ``exp(belief - top)`` over them (``mass``); the root's
    ``top`` and ``mass``; the shifts taken off the messages (``offset``; ``log Z = log(root_mass) + root_top +
    offset``). A message is ``log(mass) + top``; a conditional table ``exp(belief - top) / mass``, normalised by a
    division as the dense oracle's are: through ``exp(belief - message)`` the rounding of the logarithm scaled
    every table's mass by up to ``eps |message|``, more than a line search's allowance for rounding."""

    beliefs: jax.Array
    top: jax.Array
    mass: jax.Array
    root_top: jax.Array
    root_mass: jax.Array
    offset: jax.Array


def _upward(plan: RoutedPlan, theta: jax.Array, mean: bool = False) -> _Upward:
    """The upward (collect) pass over ``theta`` (a cell vector), deepest level first.

    With ``mean``, messages are means over the cells of each separator cell instead of log-sum-exps, unshifted
    (:func:`canonical`): ``top`` holds the means and ``mass`` ones, the root's likewise."""
    a, size = plan.arrays, plan.size
    w, pw = size.width, size.pair_width
    dtype = theta.dtype

    def body(l, carry):
        beliefs, tops, masses, send, offset, run_top, run_mass = carry
        lo, so = a["lo"][l], a["so"][l]
        first, last = a["first"][l] != 0, a["last"][l] != 0
        valid = _window(a["level"], lo, w) == l

        def receive(po, received):
            p_valid = _window(a["pair_level"], po, pw) == l
            dst = jnp.where(p_valid, _window(a["pair_dst"], po, pw), w)
            return received + jax.ops.segment_sum(jnp.where(p_valid, send[_window(a["pair_src"], po, pw)], 0.0), dst, w)

        received = _over_pairs(plan, l, receive, jnp.zeros((w,), dtype))
        b = jnp.where(valid, _window(theta, lo, w) + received, -jnp.inf)
        # Cells outside the level (and the root's, which send nothing) take segment w, past the end: dropped, not
        # summed into one spare segment, where a GPU's atomic updates of one address would queue (a model of
        # one large clique spent most of its iteration there).
        up = jnp.where(valid, _window(a["up"], lo, w), w)
        # This step's separator cells: those of its cliques (a clique split over several steps has them in each).
        s_step = (_window(a["sep_first"], so, w) <= l) & (_window(a["sep_last"], so, w) >= l)
        s_valid = s_step & last  # the cliques that end here send their messages
        sender = jnp.where(s_valid, _window(a["sep_slot"], so, w), w)
        # A clique split over steps merges each step's reduction into its earlier steps' (``run_top``, ``run_mass``:
        # the same separator window, carried from step to step; a clique's steps are consecutive).
        run_mass = jnp.where(first, 0.0, run_mass)
        if mean:  # running sums and counts
            total = jax.ops.segment_sum(jnp.where(valid, b, 0.0), up, w) + jnp.where(first, 0.0, run_top)
            count = jax.ops.segment_sum(valid.astype(dtype), up, w) + run_mass
            run_top, run_mass = total, count
            top = jnp.where(last, total / jnp.maximum(count, 1.0), total)  # the mean once every cell is in
            mass = jnp.where(last, jnp.ones((w,), dtype), count)
            msg, shift = top, jnp.zeros((w,), dtype)
        else:  # a running maximum and the sum of exponentials rescaled to it
            had = run_mass > 0
            top = _finite_or_zero(jnp.maximum(jnp.where(had, run_top, -jnp.inf), jax.ops.segment_max(b, up, w)))
            # run_top <= top where it had mass; elsewhere the running top is a placeholder, not read
            carried = jnp.where(had, run_mass * jnp.exp(jnp.where(had, run_top - top, 0.0)), 0.0)
            mass = carried + jax.ops.segment_sum(jnp.exp(b - _pick(top, up, 0.0)), up, w)
            run_top, run_mass = top, mass
            msg = jnp.log(mass) + top
            shift = _finite_or_zero(jax.ops.segment_max(jnp.where(s_valid, msg, -jnp.inf), sender, w))
        shifted = msg - _pick(shift, sender, 0.0)
        return (
            _write(beliefs, lo, b, valid),
            _write(tops, so, top, s_step),
            _write(masses, so, mass, s_step),
            _write(send, so, shifted, s_valid),
            offset + jnp.sum(shift),
            run_top,
            run_mass,
        )

    n = size.cells
    init = (jnp.full(n, -jnp.inf, dtype), jnp.zeros(n, dtype), jnp.ones(n, dtype), jnp.zeros(n, dtype),
            jnp.zeros((), dtype), jnp.zeros((w,), dtype), jnp.zeros((w,), dtype))
    beliefs, tops, masses, _, offset, _, _ = _over_levels(plan, body, init)
    root = a["level"] >= a["root_from"]  # the root's cells (its steps are the last)
    if mean:
        root_top, root_mass = jnp.sum(jnp.where(root, beliefs, 0.0)) / jnp.sum(root), jnp.ones((), dtype)
    else:
        root_top = _finite_or_zero(jnp.max(jnp.where(root, beliefs, -jnp.inf)))
        root_mass = jnp.sum(jnp.where(root, jnp.exp(beliefs - root_top), 0.0))
    return _Upward(beliefs, tops, masses, root_top, root_mass, offset)


def log_partition(plan: RoutedPlan, theta: dict) -> jax.Array:
    """log Z of the model with log-potentials ``theta`` (``{"cells": vector}``)."""
    u = _upward(plan, theta["cells"])
    return jnp.log(u.root_mass) + u.root_top + u.offset


def _level(a: dict, w: int, l, u: _Upward):
    """Level ``l``'s window: its cells' beliefs, validity and separator cells (``w`` for the root's), and each
    cell's separator ``top`` and ``mass`` (the root's own for the root's cells)."""
    lo, so = a["lo"][l], a["so"][l]
    valid = _window(a["level"], lo, w) == l
    up = jnp.where(valid, _window(a["up"], lo, w), w)
    top = _pick(_window(u.top, so, w), up, u.root_top)
    mass = _pick(_window(u.mass, so, w), up, u.root_mass)
    return _window(u.beliefs, lo, w), valid, up, top, mass


def marginals(plan: RoutedPlan, theta: dict, total) -> tuple[dict, jax.Array]:
    """Clique marginals (counts summing to ``total`` in every clique; padding 0) and log Z.

    Returns:
        ``({"cells": mu}, log_z)``.
    """
    a, size = plan.arrays, plan.size
    w, pw = size.width, size.pair_width
    u = _upward(plan, theta["cells"])
    dtype = u.beliefs.dtype

    def body(i, carry):
        mu, sep_marginal = carry
        l = a["num_levels"] - 1 - i
        so = a["so"][l]
        b, valid, up, top, mass = _level(a, w, l, u)
        given = _pick(_window(sep_marginal, so, w), up, 1.0)
        # a separator value with no mass gives zeros; a NaN (a NaN potential) stays NaN, for the fit's checks to see
        m = jnp.where(valid & (mass != 0), jnp.exp(b - top) * (given / jnp.where(mass != 0, mass, 1.0)), 0.0)

        def send(po, sep_marginal):
            p_valid = _window(a["pair_level"], po, pw) == l
            src = jnp.where(p_valid, _window(a["pair_src"], po, pw), size.cells)
            sent = jnp.where(p_valid, _pick(m, _window(a["pair_dst"], po, pw), 0.0), 0.0)
            return sep_marginal.at[src].add(sent, mode="drop")

        return _write(mu, a["lo"][l], m, valid), _over_pairs(plan, l, send, sep_marginal)

    init = (jnp.zeros(size.cells, dtype), jnp.zeros(size.cells, dtype))
    mu, _ = _over_levels(plan, body, init)
    return {"cells": total * mu}, jnp.log(u.root_mass) + u.root_top + u.offset


def _kept(plan: RoutedPlan, theta: dict, mean: bool) -> dict:
    """Every clique's belief less its upward message (the root's less its own reduction), padding 0."""
    a, w = plan.arrays, plan.size.width
    u = _upward(plan, theta["cells"], mean)

    def body(l, out):
        b, valid, _, top, mass = _level(a, w, l, u)
        message = jnp.log(mass) + top
        kept = jnp.where(valid & jnp.isfinite(message), b - message, -jnp.inf)
        return _write(out, a["lo"][l], kept, valid)

    return {"cells": _over_levels(plan, body, jnp.zeros_like(theta["cells"]))}


def log_conditionals(plan: RoutedPlan, theta: dict) -> dict:
    """The same distribution as ``theta`` written as log-conditionals along the junction tree: each clique's table
    ``log p(x_clique | x_separator)``, the root's ``log p(x_root)`` (the gauge of
    :func:`pgmjax.graph.gauge.log_conditionals`; ``-inf`` cells stay ``-inf``)."""
    return _kept(plan, theta, mean=False)


def canonical(plan: RoutedPlan, blocks: dict) -> dict:
    """Finite tables with every function of a separator moved toward the root (:func:`pgmjax.graph.gauge.canonical`):
    each non-root table less its mean over the cells of each separator cell, the root's less its mean. The same
    distribution up to a constant; linear and idempotent."""
    return _kept(plan, blocks, mean=True)


def row_tops(plan: RoutedPlan, blocks: dict) -> dict:
    """Each clique's largest finite entry of ``blocks``, per cell (0 where a clique has none; no gradient)."""
    cells = blocks["cells"]
    ids = plan.arrays["clique"]
    top = jax.ops.segment_max(jnp.where(jnp.isfinite(cells), cells, -jnp.inf), ids, plan.size.cells)
    return {"cells": _finite_or_zero(top)[ids]}
