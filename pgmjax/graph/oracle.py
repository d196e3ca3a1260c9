"""The marginal oracle: log-space sum-product over a junction tree, compiled as a few dense loops.

Layout (built once per structure on the host by :func:`pgmjax.graph.oracle_plan.make_plan`):

* The junction tree is rooted at a centre and processed level by level,
  deepest first (the upward, "collect" pass).
* Every non-root clique has a *class*: its table shape, where its separator
  sits in it, and the shape of its parent and where the separator sits
  there. Cliques of one class do identical work, so each class of a level
  is one stacked, dense array ``(slots, *clique_shape)``.
* Consecutive levels with the same set of classes form a *run*; a run is one
  ``lax.scan`` over its levels. The potentials of a run's class are stored
  stacked over levels, ``(levels, slots, *clique_shape)``; slots a level does
  not use are padding, held at -inf.
* A level step: belief = potentials + received messages; message =
  logsumexp over the non-separator axes; each parent slot of the next level
  takes its children's messages (slot k from slot k, or a gather of whole
  blocks along the slot axis), kept compact and broadcast over the parent's
  axes when added. Only dense ops and block gathers: no
  per-cell gather/scatter, no per-clique op in the program. Program size
  and compile time grow with the number of runs, not with the tree.
* ``log Z`` is the logsumexp of the root's belief; clique marginals are its
  gradient (``mu = N * d log Z / d theta``). :func:`marginals` computes
  them with an explicit downward pass that is the same arithmetic as the
  autodiff transpose of the upward one (:func:`marginals_autodiff`). Every
  table is stored with its upward separator's axes first and its eliminated
  axes last (:attr:`CliqueClass.layout`: messages are reductions over
  contiguous rows, the fast ones on CPU, and no pass transposes a table).
  Each belief is built and exponentiated once, its
  message and its conditional table ``exp(belief - message)`` taken from
  the same exponentials, and ``mu = N * P * g`` is one dense op per run
  (Shafer-Shenoy style: beliefs are never divided, so -inf potentials
  never produce NaN).

Potentials and marginals are therefore pytrees ``{unit_key: array}`` in this
layout; :meth:`OraclePlan.tables` and :meth:`OraclePlan.from_tables`
convert to and from ``{clique: table}`` (:meth:`OraclePlan.layout` gives a
clique's stored axis order).

References: Koller & Friedman (2009), Ch. 10; McKenna, Sheldon & Miklau,
"Graphical-model based estimation and inference for differential privacy",
ICML 2019, Section 3 (the marginal oracle M(theta)).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from pgmjax import compiler, kernels

from . import path_scan
from .oracle_plan import CliqueClass, OraclePlan, Run, make_plan  # noqa: F401  (make_plan: part of the oracle's API)


class _AllSlots:
    """Stands for the slot mask of a block whose slots all hold a clique (most blocks): no mask to add, no
    padding slot to zero. A pytree with no leaves, so it passes through ``lax.scan`` like the masks."""

    def __getitem__(self, index):
        return self


ALL_SLOTS = _AllSlots()
jax.tree_util.register_pytree_node(_AllSlots, lambda a: ((), None), lambda aux, leaves: ALL_SLOTS)


def _mask_or_none(real):
    """A block's slot mask as an array, or None where all its slots hold a clique (:data:`ALL_SLOTS`)."""
    return None if real is ALL_SLOTS else real


def keep_real(real, m: jax.Array) -> jax.Array:
    """``m`` (``(slots, ...)``) with the padding slots' entries set to 0."""
    if real is ALL_SLOTS:
        return m
    return jnp.where(real.reshape((-1,) + (1,) * (m.ndim - 1)), m, 0.0)


def block_potentials(plan: OraclePlan, key: str, theta_block: jax.Array) -> tuple[jax.Array, object]:
    """A block's potentials with its padding held at -inf: unused slots (slot mask) and, for padded
    singleton tables, the cells past each table's size (cell mask); and which slots hold a clique
    (:data:`ALL_SLOTS` where all do: the mask is then known on the host to be all zeros, and neither it
    nor the comparison and selects it would take are in the compiled program)."""
    out, real = theta_block, ALL_SLOTS
    if key in plan.slot_padded:
        mask = plan.arrays[f"{key}_mask"].astype(theta_block.dtype)
        out = out + mask.reshape(mask.shape + (1,) * (theta_block.ndim - 2))
        real = mask == 0
    cells = plan.arrays.get(f"{key}_cells")
    return (out if cells is None else out + cells.astype(out.dtype)), real


def _shift(m: jax.Array) -> jax.Array:
    """Per-slot normaliser of messages ``(slots, *separator)``: the largest entry (0 where all are -inf).

    Messages are sent minus it, so log-space beliefs stay near 0 however deep the tree: in float32 an
    entry ``t`` carries an absolute error of ``eps |t|``, and unnormalised messages grow by about the
    log of a clique's size per level (a chain of 1,000 triples lost 0.7% of the mass in the downward
    pass). The shifts add up to a constant of log Z (see :func:`_offset`).
    """
    top = jnp.max(m, axis=tuple(range(1, m.ndim)), keepdims=True)
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))


def _offset(tops, real) -> jax.Array:
    """Sum over the real slots of the shifts ``tops[x]`` (:func:`_shift`, ``(..., slots, 1, ...)``, per class)
    taken off the messages: the shift the routing took, not a second maximum (one kernel less per class)."""
    total = 0.0
    for top, re in zip(tops, real):
        total = total + jnp.sum(top if re is ALL_SLOTS else jnp.where(re, top.reshape(re.shape), 0.0))
    return total


def _run_potentials(plan: OraclePlan, r: int, theta: dict) -> tuple[list, list]:
    """Run ``r``'s potentials per class (padding at -inf) and which of its slots hold a clique."""
    pot, real = [], []
    for x in range(len(plan.runs[r].classes)):
        key = f"r{r:03d}x{x:02d}"
        p, re = block_potentials(plan, key, theta[key])
        pot.append(p)
        real.append(re)
    return pot, real


def _beliefs(potentials: list, received: dict) -> list:
    """Potentials plus every message received, per class (messages broadcast over the clique)."""
    out = list(potentials)
    for (_, y), msg in sorted(received.items()):
        out[y] = out[y] + msg
    return out


def upward_pass(plan: OraclePlan, pots: list, reals: list, send) -> tuple[list, jax.Array]:
    """The schedule's upward pass, deepest level first: the loop :func:`log_partition` and
    :func:`pgmjax.graph.gauge.canonical` share.

    Args:
        plan: the oracle plan.
        pots: per run, per class, the tables to pass (``(levels, slots, ...)``).
        reals: per run, per class, which slots hold a clique (:func:`block_potentials`).
        send: ``send(run, parents, pairs, direct, route, beliefs, real) -> (received, out)``: one level's
            messages to its parents and what the caller keeps of the level (``out``, any pytree).

    Returns:
        ``(outs, root)``: per run, the list of ``(stacked, out)`` of its level blocks in order (``stacked``:
        ``out`` has a leading axis over the levels a scan took), and the root's belief.
    """
    static_pairs = plan.static[5]
    received: dict = {}
    outs = []
    for r, run in enumerate(plan.runs):
        pot, real = pots[r], reals[r]
        inner_pairs, outer_pairs, inner_direct, outer_direct = static_pairs[r]
        parts: list = []
        beliefs = _beliefs([p[0] for p in pot], received)
        if run.num_levels > 1:
            routes = {p: plan.arrays[f"r{r:03d}_inner_{p[0]:02d}_{p[1]:02d}"] for p in inner_pairs if p not in inner_direct}
            received, out = send(run, run.classes, inner_pairs, inner_direct, lambda x, y: routes[(x, y)][0], beliefs,
                                 [m[0] for m in real])
            parts.append((False, out))
            if run.num_levels > 2:

                def body(carry, xs, run=run, inner_pairs=inner_pairs, inner_direct=inner_direct):
                    th, rts, re = xs
                    return send(run, run.classes, inner_pairs, inner_direct, lambda x, y: rts[(x, y)], _beliefs(th, carry), re)

                rest = {p: v[1:] for p, v in routes.items()}
                received, out = jax.lax.scan(body, received, ([p[1:-1] for p in pot], rest, [m[1:-1] for m in real]),
                                             unroll=compiler.scan_unroll())
                parts.append((True, out))
            beliefs = _beliefs([p[-1] for p in pot], received)
        outs.append(parts)
        if r + 1 == len(plan.runs):
            (root,) = beliefs
            return outs, root
        outer = {p: plan.arrays[f"r{r:03d}_outer_{p[0]:02d}_{p[1]:02d}"] for p in outer_pairs if p not in outer_direct}
        received, out = send(run, plan.runs[r + 1].classes, outer_pairs, outer_direct, lambda x, y: outer[(x, y)], beliefs,
                             [m[-1] for m in real])
        parts.append((False, out))
    raise AssertionError("the schedule has no root level")


def log_partition(plan: OraclePlan, theta: dict) -> jax.Array:
    """log Z of the model with log-potentials ``theta`` (blocks in the oracle layout).

    The carry between levels is the set of messages the next level receives
    (compact, one block per class pair), so one scan step and its autodiff
    transpose cost the size of one level.
    """

    def send(run, parents, pairs, direct, route, beliefs, real):
        raw = {x: kernels.logsumexp(b, axis=tuple(range(b.ndim - len(cl.elim_axes), b.ndim)))
               for x, (b, cl) in enumerate(zip(beliefs, run.classes))}
        tops = {x: _shift(m) for x, m in raw.items()}
        out = route_messages(run, parents, pairs, direct, route, raw, tops, real)
        return out, _offset([tops[x] for x in sorted(raw)], [real[x] for x in sorted(raw)])

    runs = [_run_potentials(plan, r, theta) for r in range(len(plan.runs))]
    outs, root = upward_pass(plan, [p for p, _ in runs], [re for _, re in runs], send)
    offset = 0.0  # the shifts taken off the messages (see _shift)
    for parts in outs:
        for stacked, off in parts:
            offset = offset + (jnp.sum(off) if stacked else off)
    return kernels.logsumexp(root.reshape(-1), axis=-1) + offset


def message_shape(cl: CliqueClass) -> tuple[int, ...]:
    """A message (separator table) reshaped to broadcast against its sender's compute-layout table."""
    return tuple(cl.shape[a] for a in cl.sep_axes) + (1,) * len(cl.elim_axes)


# Full float32 products in the oracle's matrix products: GPUs would otherwise use TensorFloat-32 (about three
# significant digits) for float32 matrix products by default.
_EXACT = jax.lax.Precision.HIGHEST


def _lse_and_conditional(belief: jax.Array, nelim: int, top=None) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """``(message, (scaled, recip))``: the log-sum-exp of ``belief`` ``(slots, *sep, *elim)`` over its
    eliminated axes and the conditional table ``P = exp(belief - message) = scaled * recip`` as its two
    factors, ``scaled = exp(belief - max)`` and ``recip = 1 / sum(scaled)`` (separator-shaped, kept dims).
    Each belief is exponentiated once per oracle call, and ``P`` itself is never written: the downward pass
    folds ``recip`` into its separator-sized vectors (one table pass and one kernel less per class). A
    slice with no finite cell gives ``-inf`` and ``scaled = 0``. ``top``: the maximum over the eliminated
    axes where the caller has it (the root's, taken over its own axes: see :func:`marginals`)."""
    axes = tuple(range(belief.ndim - nelim, belief.ndim))
    if top is None:
        top = kernels.max_axes(belief, axes, keepdims=True)  # the last axis first: XLA's whole-table max is slow
    shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
    scaled = jnp.exp(belief - shift)
    rows = int(np.prod(belief.shape[: belief.ndim - nelim]))
    # A matrix-vector product with ones: a library call on XLA:CPU, where a sum is a fused reduction
    # that XLA also splits in two (for its precision) and compiles as two more kernels. A table summed
    # whole (an empty separator, one slot) is split at its first eliminated axis and its row sums added,
    # several times faster than one reduction over the whole table.
    split = rows == 1 and nelim > 1
    if rows > 1 or split:
        flat = scaled.reshape(belief.shape[belief.ndim - nelim] if split else rows, -1)
        total = jax.lax.dot_general(flat, jnp.ones(flat.shape[1:], flat.dtype), (((1,), (0,)), ((), ())),
                                    precision=_EXACT)
        total = (jnp.sum(total) if split else total).reshape(top.shape)
    else:
        total = jnp.sum(scaled, axis=axes, keepdims=True)
    recip = 1.0 / jnp.where(total > 0, total, 1.0)
    return jnp.squeeze(jnp.log(total) + shift, axes), (scaled, recip)


def _send_c(run: Run, parents, pairs, direct, route, beliefs, real, tops, conds) -> dict:
    """:func:`_send` in the compute layout; ``tops[x]`` gets the shifts taken off the messages (:func:`_shift`)
    and ``conds[x]`` the conditional tables ``exp(belief - message)`` as ``(scaled, recip)``."""
    raw = {}
    for x in range(len(run.classes)):
        raw[x], conds[x] = _lse_and_conditional(beliefs[x], len(run.classes[x].elim_axes))
        tops[x] = _shift(raw[x])
    return route_messages(run, parents, pairs, direct, route, raw, tops, real)


def route_messages(run: Run, parents, pairs, direct, route, raw, tops, real) -> dict:
    """Messages ``raw[x]`` less their shifts ``tops[x]``, landed in the parents' compute layout and routed to
    their slots."""
    out, msgs = {}, {}
    for x, y in pairs:
        order, shape = run.classes[x].landing(parents[y])
        # Parents of different classes can take one class's message in different places: the landing
        # (order and shape) is part of the key.
        if (x, order, shape) not in msgs:
            m = raw[x] - tops[x]
            if order != tuple(range(len(order))):
                m = jnp.transpose(m, (0, *(1 + i for i in order)))
            msgs[(x, order, shape)] = m.reshape((m.shape[0], *shape))
        m = msgs[(x, order, shape)]
        if (x, y) in direct:
            out[(x, y)] = keep_real(real[x], m)
        else:
            ext = jnp.concatenate([m, jnp.zeros((1, *m.shape[1:]), m.dtype)])  # + a zero block
            out[(x, y)] = jnp.sum(jnp.take(ext, route(x, y), axis=0, mode="clip"), axis=1)  # route: (n_y, children)
    return out


def _cotangent(P: tuple, g: jax.Array, cl: CliqueClass, parent: CliqueClass) -> jax.Array:
    """Transpose of landing: the parent's ``P * g`` summed onto ``cl``'s separator, ``(n_y, *separator)``.

    ``P = (scaled, recip)`` (see :func:`_lse_and_conditional`), ``scaled`` ``(n_y, *sep_p, *elim_p)``, holds
    the parent's conditional tables given its own separator and ``g`` ``(n_y, *sep_p, 1, ...)`` its separator
    marginals; ``P * g = scaled * (recip * g)``. Two common cases never form ``P * g``:

    * ``cl``'s separator lies in the parent's separator: every row of ``P`` sums to one (or is all zero,
      where ``g`` is zero too), so the sum is ``g``'s own sum over the other separator axes;
    * it lies in the parent's eliminated axes: ``sum_s g[s] P[s, e]`` is a vector-matrix product (a
      library matrix product on XLA:CPU, several times faster than its fused multiply-and-reduce over the
      table's leading axes), then summed over the other eliminated axes (a separator-sized table).
    """
    order, _ = cl.landing(parent)
    P, h = P[0], g * P[1]
    nsep = len(parent.sep_axes)
    kept = sorted(parent.layout.index(a) for a in cl.parent_sep_axes)
    ndim = P.ndim - 1
    if all(j < nsep for j in kept):
        s = jnp.sum(g, axis=tuple(1 + j for j in range(ndim) if j not in kept))
    elif all(j >= nsep for j in kept):
        n, sep_shape, elim_shape = P.shape[0], P.shape[1 : 1 + nsep], P.shape[1 + nsep :]
        cells = int(np.prod(sep_shape))
        v = jax.lax.dot_general(
            jnp.broadcast_to(h, (n, *sep_shape, *(1,) * len(elim_shape))).reshape(n, 1, cells),
            P.reshape(n, cells, -1),
            (((2,), (1,)), ((0,), (0,))),
            precision=_EXACT,
        ).reshape(n, *elim_shape)
        s = jnp.sum(v, axis=tuple(1 + j - nsep for j in range(nsep, ndim) if j not in kept))
    else:
        s = jnp.sum(P * h, axis=tuple(1 + j for j in range(ndim) if j not in kept))
    s = s.reshape((s.shape[0], *(cl.shape[cl.sep_axes[i]] for i in order)))
    if order != tuple(range(len(order))):
        s = jnp.transpose(s, (0, *(1 + int(i) for i in np.argsort(order))))
    return s


def _unroute(direct: bool, inv, cot: jax.Array, real, sender: CliqueClass) -> jax.Array:
    """Transpose of routing one pair's messages: receiving-slot cotangents back to the sending slots."""
    if direct:
        g = keep_real(real, cot)
    else:
        ext = jnp.concatenate([cot, jnp.zeros((1, *cot.shape[1:]), cot.dtype)])
        g = jnp.take(ext, inv, axis=0, mode="clip")
    return g.reshape((g.shape[0], *message_shape(sender)))


def marginals(plan: OraclePlan, theta: dict, total) -> tuple[dict, jax.Array]:
    """Clique marginals (counts summing to ``total`` in every clique) and log Z.

    The marginals are ``total * d log Z / d theta``, computed with an
    explicit downward pass instead of autodiff, in the blocks' own layout
    (every clique's eliminated axes last, so messages reduce contiguous
    rows, the fast reductions on CPU, and no table is transposed). The
    upward pass keeps every clique's conditional table given its upward
    separator, ``P = exp(belief - message)``, from the same exponentials as
    its message (each belief is built and exponentiated once per call), as
    the exponentials and the reciprocals of their row sums (``P`` itself is
    never written); the downward pass
    carries only separator marginals (``g``: one multiply-and-reduce per
    level), and ``mu = total * P * g`` is again one dense op per run. Same
    arithmetic as the autodiff transpose of :func:`log_partition` (no belief
    division, so -inf potentials give no NaN). Padding slots hold zeros.
    Differentiable (reverse over reverse works).

    Returns:
        ``(mu, log_z)``.
    """
    static_pairs = plan.static[5]
    runs = plan.runs
    received: dict = {}
    ups = []  # per run: (pot, real, conditional tables per class)
    log_z = None
    offset = 0.0  # the shifts taken off the messages (see _shift): log Z = logsumexp(root) + offset
    for r, run in enumerate(runs):
        n = run.num_levels
        pot, real = _run_potentials(plan, r, theta)
        inner_pairs, outer_pairs, inner_direct, outer_direct = static_pairs[r]
        beliefs = _beliefs([p[0] for p in pot], received)
        parts: list[dict] = []  # the messages' shifts, per level block
        cparts: list[dict] = []  # conditional tables, per level block
        if n > 1:
            routes = {p: plan.arrays[f"r{r:03d}_inner_{p[0]:02d}_{p[1]:02d}"] for p in inner_pairs if p not in inner_direct}
            tops0: dict = {}
            cond0: dict = {}
            received = _send_c(
                run, run.classes, inner_pairs, inner_direct, lambda x, y: routes[(x, y)][0], beliefs,
                [m[0] for m in real], tops0, cond0,
            )
            parts.append({x: m[None] for x, m in tops0.items()})
            cparts.append({x: (m[0][None], m[1][None]) for x, m in cond0.items()})
            if n > 2:

                def body(carry, xs, run=run, inner_pairs=inner_pairs, inner_direct=inner_direct):
                    th, rts, re = xs
                    tops, cond = {}, {}
                    out = _send_c(run, run.classes, inner_pairs, inner_direct, lambda x, y: rts[(x, y)], _beliefs(th, carry),
                                  re, tops, cond)
                    return out, (tops, cond)

                xs = ([p[1:-1] for p in pot], {p: v[1:] for p, v in routes.items()}, [m[1:-1] for m in real])
                if plan.paths and path_scan.scanned(run, static_pairs[r]):
                    # every level's incoming message from the path scan, then the level steps all at once
                    msgs = path_scan.upward_messages(run.classes, pot, [_mask_or_none(m) for m in real],
                                                     [received[(x, x)] for x in range(len(run.classes))])
                    carries = {(x, x): m for x, m in enumerate(msgs)}
                    outs, (ys_tops, ys_cond) = jax.vmap(body)(carries, xs)
                    received = {k: v[-1] for k, v in outs.items()}
                else:
                    received, (ys_tops, ys_cond) = jax.lax.scan(body, received, xs, unroll=compiler.scan_unroll())
                parts.append(ys_tops)
                cparts.append(ys_cond)
            beliefs = _beliefs([p[-1] for p in pot], received)
        if r + 1 == len(runs):
            if n != 1 or len(run.classes) != 1:
                raise AssertionError("the root level must be a run of its own")
            root = beliefs[0]
            # Its maximum over the table's own axes (XLA:CPU turns one over the flat table back into a
            # padded windowed reduction over them, several times slower: pgmjax.kernels.reductions);
            # its sum over the flat table (a tree of partial sums: log Z within 2e-6 on Adult's root, where
            # row sums were off by 1e-5).
            top = kernels.max_axes(root, tuple(range(1, root.ndim)), keepdims=True).reshape((1, 1))
            root_lse, root_cond = _lse_and_conditional(root.reshape((1, -1)), 1, top)
            log_z = root_lse[0] + offset
            cparts.append({0: (root_cond[0].reshape(root.shape)[None], root_cond[1].reshape((1,) * (root.ndim + 1)))})
        else:
            outer = {p: plan.arrays[f"r{r:03d}_outer_{p[0]:02d}_{p[1]:02d}"] for p in outer_pairs if p not in outer_direct}
            last_tops: dict = {}
            last_cond: dict = {}
            received = _send_c(
                run, runs[r + 1].classes, outer_pairs, outer_direct, lambda x, y: outer[(x, y)], beliefs,
                [m[-1] for m in real], last_tops, last_cond,
            )
            parts.append({x: m[None] for x, m in last_tops.items()})
            cparts.append({x: (m[0][None], m[1][None]) for x, m in last_cond.items()})
            tops = [jnp.concatenate([part[x] for part in parts]) if len(parts) > 1 else parts[0][x] for x in range(len(run.classes))]
            offset = offset + _offset(tops, real)
        # Conditional tables P = exp(belief - message), taken from the upward pass's exponentials.
        conds_r = [jax.tree_util.tree_map(lambda *ps: jnp.concatenate(ps), *(part[x] for part in cparts)) if len(cparts) > 1
                   else cparts[0][x] for x in range(len(run.classes))]
        ups.append((pot, real, conds_r))
    conds = [u[2] for u in ups]

    # Downward pass: g (separator marginals / total, compact) level by level; mu = total * P * g.
    mu = {}
    g_last = [jnp.ones((1,) * (1 + len(runs[-1].classes[0].shape)), conds[-1][0][0].dtype)]
    for r in range(len(runs) - 1, -1, -1):
        run = runs[r]
        n = run.num_levels
        pot, real, _ = ups[r]
        P = conds[r]
        inner_pairs, _, inner_direct, _ = static_pairs[r]
        if n > 1:
            invs = {
                p: plan.arrays[f"r{r:03d}_innerinv_{p[0]:02d}_{p[1]:02d}"] for p in inner_pairs if p not in inner_direct
            }

            def down(g, xs, run=run, inner_pairs=inner_pairs, inner_direct=inner_direct):
                p_l, inv, re = xs
                new = [None] * len(run.classes)
                for x, y in inner_pairs:
                    cot = _cotangent(p_l[y], g[y], run.classes[x], run.classes[y])
                    contrib = _unroute((x, y) in inner_direct, inv.get((x, y)), cot, re[x], run.classes[x])
                    new[x] = contrib if new[x] is None else new[x] + contrib
                return new, g

            xs = ([(p[0][1:], p[1][1:]) for p in P], invs, [m[:-1] for m in real])
            if plan.paths and path_scan.scanned(run, static_pairs[r]):
                # what every level is handed down, from the path scan, then the level steps all at once
                ys = path_scan.downward_marginals(run.classes, P, [_mask_or_none(m) for m in real], g_last)
                new, _ = jax.vmap(down)(ys, xs)
                g0 = [v[0] for v in new]
            else:
                g0, ys = jax.lax.scan(down, g_last, xs, reverse=True, unroll=compiler.scan_unroll())
            g_all = [jnp.concatenate([a[None], b]) for a, b in zip(g0, ys)]
        else:
            g_all = [g[None] for g in g_last]
        for x in range(len(run.classes)):
            mu[f"r{r:03d}x{x:02d}"] = total * (P[x][0] * (g_all[x] * P[x][1]))
        if r > 0:
            prev = runs[r - 1]
            _, outer_pairs, _, outer_direct = static_pairs[r - 1]
            prev_real = ups[r - 1][1]
            new = [None] * len(prev.classes)
            for x, y in outer_pairs:
                cot = _cotangent((P[y][0][0], P[y][1][0]), g_all[y][0], prev.classes[x], run.classes[y])
                inv = None
                if (x, y) not in outer_direct:
                    inv = plan.arrays[f"r{r - 1:03d}_outerinv_{x:02d}_{y:02d}"]
                contrib = _unroute((x, y) in outer_direct, inv, cot, prev_real[x][-1], prev.classes[x])
                new[x] = contrib if new[x] is None else new[x] + contrib
            g_last = new
    return mu, log_z


def marginals_autodiff(plan: OraclePlan, theta: dict, total) -> tuple[dict, jax.Array]:
    """:func:`marginals` by reverse-mode autodiff of :func:`log_partition` (the reference)."""
    log_z, grad = jax.value_and_grad(log_partition, argnums=1)(plan, theta)
    return jax.tree_util.tree_map(lambda g: total * g, grad), log_z
