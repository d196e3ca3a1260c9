"""Messages along the junction tree's paths by an associative scan: an oracle call's kernel launches grow with the
logarithm of the tree's depth, not with the depth.

A run of the dense plan (:mod:`pgmjax.graph.oracle_plan`) whose levels hold one class of cliques, each sending to
the clique in the same slot of the next level, is a bundle of parallel paths (a chain is two). Along a path the
upward message is a matrix product in the log semiring: with ``A_l(s, c)`` the log-sum-exp of clique ``l``'s
potentials over its cells whose upward separator is ``s`` and whose child's separator is ``c``, the message is
``m_l = A_l (x) m_{l-1}``, ``(A (x) m)(s) = logsumexp_c A(s, c) + m(c)``. The product is associative, so every
message of a path follows from the first by a parallel prefix scan over the transfer matrices (Blelloch, "Prefix
sums and their applications", 1990; for hidden Markov models, Sarkka & Garcia-Fernandez, "Temporal parallelization
of Bayesian smoothers", IEEE Transactions on Automatic Control 66(1), 2021, Section IV): about ``2 log2(levels)``
batched steps instead of one per level. The downward pass is the same with the conditional tables' ordinary matrix
products (column-stochastic: their products stay in [0, 1], no scaling needed).

The scans give each level what it receives (the upward message, the downward separator marginal); the oracle then
runs its own level step on all levels at once (``jax.vmap``), so the arithmetic per level is the oracle's and the
scan only decides what each level is given. A path that starts inside the run (its deeper levels are padding slots,
whose messages are empty) restarts there: the transfer matrices then carry one more coordinate, held at ``log 1``,
through which a restarting level takes the sum of its own potentials.

The scan multiplies ``separator x separator`` matrices: about ``2 levels |S|^3`` operations per pass against the
level loop's ``levels |C|`` for cliques of ``|C|`` cells. On a GPU, where the level loop waits on a kernel launch per
level, it wins for separators of up to a few hundred cells; on a CPU only where ``|S|^2`` is below ``|C| / |S|``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import kernels
from .oracle_plan import CliqueClass, Run

#: A run is scanned only if it has at least this many levels: shorter runs cost few launches as a loop.
PATH_MIN_LEVELS = 16

#: A run is scanned only if its separator has at most this many cells (the scan's matrices are its square).
PATH_MAX_SEPARATOR = 256

# Full float32 products: GPUs would otherwise use TensorFloat-32 (about three significant digits).
_EXACT = jax.lax.Precision.HIGHEST


def scanned(run: Run, pairs) -> bool:
    """Whether run ``run`` (with its static ``pairs`` = ``(inner, outer, inner_direct, outer_direct)``) is made of
    bundles of parallel paths the scan passes: at least :data:`PATH_MIN_LEVELS` levels, each class sending only to
    itself, each clique to the same slot of the next level (a chain rooted at its centre: two classes, one per
    arm), every separator of 1 to :data:`PATH_MAX_SEPARATOR` cells."""
    inner_pairs, _, inner_direct, _ = pairs
    own = tuple((x, x) for x in range(len(run.classes)))
    if run.num_levels < PATH_MIN_LEVELS or inner_pairs != own or not set(own) <= set(inner_direct):
        return False
    return all(cl.sep_axes and separator_cells(cl) <= PATH_MAX_SEPARATOR for cl in run.classes)


def scanned_runs(plan) -> tuple[int, ...]:
    """The runs of ``plan`` (an :class:`~pgmjax.graph.oracle_plan.OraclePlan`) the scan passes when the plan asks for it.

    Example:
        >>> from pgmjax.data.domain import Domain
        >>> from pgmjax.graph.oracle_plan import make_plan
        >>> dom = Domain({f"a{i}": 2 for i in range(40)})
        >>> scanned_runs(make_plan(dom, [(f"a{i}", f"a{i + 1}") for i in range(39)]))
        (0,)
    """
    return tuple(r for r, run in enumerate(plan.runs) if scanned(run, plan.static[5][r]))


@functools.lru_cache(maxsize=256)
def transfer_index(cl: CliqueClass) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """How a table of class ``cl`` (stored layout, :attr:`CliqueClass.layout`) becomes its transfer matrix.

    Returns:
        ``(free, index, valid)``: the stored axes neither in the upward separator nor in the child's separator
        (summed out first); for each upward-separator cell ``s`` and child-separator cell ``c`` (each flattened in
        its message's own axis order), the flat cell of the table reduced to the remaining axes
        (``(S, C)`` integers), and whether ``s`` and ``c`` agree on the attributes they share (``(S, C)`` bools).

    Example:
        >>> cl = CliqueClass((2, 3, 2), (1, 2), (2, 3, 2), (0, 1))   # a chain of triples: (a, b, c) above (b, c, d)
        >>> free, index, valid = transfer_index(cl)
        >>> free, index.shape, int(valid.sum())
        ((), (6, 6), 12)
    """
    sh = cl.stored_shape
    nsep = len(cl.sep_axes)
    order, _ = cl.landing(cl)
    pperm = cl.layout
    pos = [pperm.index(a) for a in cl.parent_sep_axes]  # child's message axis i lands at stored position pos[i]
    kept = sorted(set(range(nsep)) | set(pos))
    free = tuple(k for k in range(len(sh)) if k not in kept)
    s_vals = np.indices(sh[:nsep]).reshape(nsep, -1)  # (nsep, S)
    c_vals = np.indices([sh[p] for p in pos]).reshape(len(pos), -1)  # (nc, C)
    S, C = s_vals.shape[1], c_vals.shape[1]
    coords = np.zeros((len(kept), S, C), np.int64)
    valid = np.ones((S, C), bool)
    for j, k in enumerate(kept):
        from_s = np.broadcast_to(s_vals[k][:, None], (S, C)) if k < nsep else None
        from_c = np.broadcast_to(c_vals[pos.index(k)][None, :], (S, C)) if k in pos else None
        if from_s is not None and from_c is not None:
            valid &= from_s == from_c
        coords[j] = from_s if from_s is not None else from_c
    index = np.ravel_multi_index(tuple(coords), [sh[k] for k in kept]) if kept else np.zeros((S, C), np.int64)
    del order
    return free, index.astype(np.int32), valid


def _reduced(tables: jax.Array, cl: CliqueClass, reduce) -> jax.Array:
    """``tables`` ``(levels, slots, *stored)`` reduced over the class's free axes and gathered into transfer
    matrices ``(levels, slots, S, C)`` (inconsistent cells left for the caller to fill)."""
    free, index, _ = transfer_index(cl)
    if free:
        tables = reduce(tables, tuple(2 + a for a in free))
    flat = tables.reshape(tables.shape[:2] + (-1,))
    return jnp.take(flat, jnp.asarray(index.reshape(-1)), axis=-1).reshape(tables.shape[:2] + index.shape)


def _finite_shift(x: jax.Array, axes) -> jax.Array:
    top = jnp.max(x, axis=axes, keepdims=True)
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))


def log_matmul(b: jax.Array, a: jax.Array) -> jax.Array:
    """``b (x) a`` in the log semiring, ``out[i, j] = logsumexp_k b[i, k] + a[k, j]`` over the last two axes
    (batched over the leading ones), scaled so its largest entry is 0.

    One matrix product of exponentials shifted by ``b``'s row maxima and ``a``'s column maxima, exact wherever
    a sum of shifted terms stays in the normal range. Where one would not (an entry whose every term is more
    than about 87 nats, in float32, below its row's and column's largest: extreme potentials beside structural
    zeros), the whole product is taken again term by term, each entry shifted by its own largest term
    (``S^3`` exponentials; :func:`jax.lax.cond`, so only when needed). The zero pattern is the exact one either way:
    no structural zero is invented, none lost.

    Example:
        >>> import numpy as np
        >>> with np.errstate(divide="ignore"):  # log 0 = -inf: the zero entries
        ...     b, a = np.log([[1.0, 2.0], [0.0, 1.0]]), np.log([[3.0, 0.0], [1.0, 1.0]])
        >>> out = log_matmul(jnp.asarray(b), jnp.asarray(a))
        >>> np.round(np.exp(out) * 5, 4).tolist()    # [[5, 2], [1, 1]] / 5
        [[5.0, 2.0], [1.0, 1.0]]
    """
    rb = _finite_shift(b, -1)
    ca = _finite_shift(a, -2)
    e = jnp.matmul(jnp.exp(b - rb), jnp.exp(a - ca), precision=_EXACT)
    support = jnp.matmul(jnp.isfinite(b).astype(b.dtype), jnp.isfinite(a).astype(a.dtype), precision=_EXACT) > 0
    tiny = np.finfo(np.dtype(b.dtype)).tiny
    fast = lambda: jnp.where(support, jnp.log(jnp.where(support, e, 1.0)) + rb + ca, -jnp.inf)  # noqa: E731
    out = jax.lax.cond(jnp.any(support & (e < tiny)), lambda: _log_matmul_termwise(b, a), fast)
    return out - _finite_shift(out, (-2, -1))


def _log_matmul_termwise(b: jax.Array, a: jax.Array) -> jax.Array:
    """``logsumexp_k b[..., i, k] + a[..., k, j]``, each entry shifted by its own largest term (exact, ``S^3``)."""
    x = b[..., :, :, None] + a[..., None, :, :]
    top = _finite_shift(x, -2)
    return jnp.squeeze(top, -2) + jnp.log(jnp.sum(jnp.exp(x - top), axis=-2))


def _log_matvec(p: jax.Array, u: jax.Array) -> jax.Array:
    """``logsumexp_t p[..., s, t] + u[..., t]``: exact (shifted per output cell)."""
    x = p + u[..., None, :]
    top = _finite_shift(x, -1)
    return jnp.squeeze(top, -1) + jnp.log(jnp.sum(jnp.exp(x - top), axis=-1))


def _unland(msg: jax.Array, cl: CliqueClass, lead: int) -> jax.Array:
    """A landed message ``(*lead, *landing shape)`` back in its own axis order, flattened: ``(*lead, S)``."""
    order, _ = cl.landing(cl)
    sizes = [cl.shape[cl.sep_axes[i]] for i in order]
    m = msg.reshape(msg.shape[:lead] + tuple(sizes))
    m = jnp.transpose(m, tuple(range(lead)) + tuple(lead + int(i) for i in np.argsort(order)))
    return m.reshape(msg.shape[:lead] + (-1,))


def _land(msg: jax.Array, cl: CliqueClass, lead: int) -> jax.Array:
    """A flat message ``(*lead, S)`` (own axis order) landed in the parent's layout: ``(*lead, *landing shape)``."""
    order, shape = cl.landing(cl)
    m = msg.reshape(msg.shape[:lead] + tuple(cl.shape[a] for a in cl.sep_axes))
    m = jnp.transpose(m, tuple(range(lead)) + tuple(lead + i for i in order))
    return m.reshape(msg.shape[:lead] + shape)


def _by_size(classes) -> list[list[int]]:
    """The run's classes grouped by separator size: each group is scanned as one batch (its slots side by side)."""
    groups: dict[int, list[int]] = {}
    for x, cl in enumerate(classes):
        groups.setdefault(separator_cells(cl), []).append(x)
    return list(groups.values())


def _scan_batched(mats: list, combine, identity, reverse: bool = False) -> list:
    """Inclusive scan over the level axis of matrices ``(levels, slots_x, S, S)`` of several classes (their slots side
    by side): ``out[l] = combine(out[l - 1], mats[l])`` (``reverse``: from the last level down).

    Doubling (Hillis & Steele, "Data parallel algorithms", CACM 29(12), 1986): ``ceil(log2 levels)`` steps, each
    one batched ``combine`` of every level with the level ``2^k`` before it (``identity`` before the first), in a
    loop: one ``combine`` in the program, so the program, its compile and its launches per step are those of one
    product whatever the depth; ``levels log2 levels`` products in all (Blelloch's scan does ``2 levels`` in
    ``2 log2 levels`` steps, but unrolls them: a compile that grows with the depth).
    """
    widths = [m.shape[1] for m in mats]
    x = jnp.concatenate(mats, axis=1) if len(mats) > 1 else mats[0]
    n = x.shape[0]
    if n > 1:
        pad = jnp.broadcast_to(identity(x.shape[-1], x.dtype), (n,) + x.shape[1:])

        def step(k, acc):
            shift = jnp.left_shift(1, k)
            if reverse:  # acc[l] covers l .. l + 2^k - 1; take on l + 2^k ..
                other = jax.lax.dynamic_slice_in_dim(jnp.concatenate([acc, pad]), shift, n)
            else:  # acc[l] covers l - 2^k + 1 .. l; take on .. l - 2^k
                other = jax.lax.dynamic_slice_in_dim(jnp.concatenate([pad, acc]), n - shift, n)
            return combine(other, acc)

        x = jax.lax.fori_loop(0, int(np.ceil(np.log2(n))), step, x)
    return jnp.split(x, np.cumsum(widths)[:-1], axis=1) if len(mats) > 1 else [x]


def _log_identity(size: int, dtype) -> jax.Array:
    return jnp.where(jnp.eye(size, dtype=bool), jnp.zeros((), dtype), -jnp.inf).astype(dtype)


def upward_messages(classes, pots: list, reals: list, firsts: list) -> list:
    """The messages the levels ``1 .. n-2`` of a scanned run receive, per class, landed and stacked:
    ``(n-2, slots, *landing)``.

    Args:
        classes: the run's classes.
        pots: per class, the run's potentials ``(n, slots, *stored)``, padding at -inf.
        reals: per class, which slots hold a clique, ``(n, slots)`` bools, or None where all do.
        firsts: per class, the message level 0 sends (landed, ``(slots, *landing)``), as the oracle's level step
            made it.
    """
    n = pots[0].shape[0]
    if n <= 3:
        return [f[None] for f in firsts]
    out: list = [None] * len(classes)
    for group in _by_size(classes):
        padded = any(reals[x] is not None for x in group)
        mats, vecs = [], []
        for x in group:
            cl, real = classes[x], reals[x]
            a = _reduced(pots[x][1 : n - 2], cl, kernels.logsumexp)
            a = jnp.where(jnp.asarray(transfer_index(cl)[2]), a, -jnp.inf)  # (n-3, slots, S, S)
            u = _unland(firsts[x], cl, 1)  # (slots, S)
            if padded:
                # One more coordinate, log 1: a level whose child slot is padding restarts from its own potentials.
                starts = jnp.zeros(a.shape[:2], bool) if real is None else ~real[: n - 3]  # level l's child: l - 1
                restart = kernels.logsumexp(a, axis=-1)
                a = jnp.where(starts[..., None, None], -jnp.inf, a)
                col = jnp.where(starts[..., None], restart, -jnp.inf)[..., None]
                last = jnp.concatenate([jnp.full(a.shape[:-2] + (1, a.shape[-1]), -jnp.inf, a.dtype),
                                        jnp.zeros(a.shape[:-2] + (1, 1), a.dtype)], axis=-1)
                a = jnp.concatenate([jnp.concatenate([a, col], axis=-1), last], axis=-2)
                u = jnp.concatenate([u, jnp.zeros(u.shape[:-1] + (1,), u.dtype)], axis=-1)
            mats.append(a)
            vecs.append(u)
        prefixes = _scan_batched(mats, lambda x, y: log_matmul(y, x), _log_identity)
        for x, prefix, u in zip(group, prefixes, vecs):
            cl, real = classes[x], reals[x]
            w = _log_matvec(prefix, u[None])[..., : separator_cells(cl)]  # (n-3, slots, S)
            w = w - _finite_shift(w, -1)
            if real is not None:
                w = jnp.where(real[1 : n - 2][..., None], w, 0.0)
            out[x] = jnp.concatenate([firsts[x][None], _land(w, cl, 2)])
    return out


def downward_marginals(classes, conds: list, reals: list, tops: list) -> list:
    """The separator marginals (over the total) the levels ``0 .. n-2`` of a scanned run receive from above, per
    class, stacked: ``(n-1, slots, *message shape)``; entry ``l`` is what level ``l + 1`` hands down (``g_{l+1}``).

    Args:
        classes: the run's classes.
        conds: per class, the run's conditional tables ``P = scaled * recip`` as ``(scaled, recip)``
            (:func:`pgmjax.graph.oracle.marginals`), ``(n, slots, *stored)`` and separator-shaped.
        reals: per class, which slots hold a clique, ``(n, slots)`` bools, or None where all do.
        tops: per class, ``g`` of the run's top level ``n - 1`` (``(slots, *message shape)``).
    """
    n = conds[0][0].shape[0]
    if n <= 2:
        return [t[None] for t in tops]
    out: list = [None] * len(classes)
    for group in _by_size(classes):
        mats = []
        for x in group:
            cl, (scaled, recip) = classes[x], conds[x]
            d = _reduced(scaled[2:] * recip[2:], cl, lambda t, axes: jnp.sum(t, axis=axes))
            # (n-2, slots, S, S): what level l + 1 hands down, from what level l + 2 did
            mats.append(jnp.swapaxes(jnp.where(jnp.asarray(transfer_index(cl)[2]), d, 0.0), -1, -2))
        suffixes = _scan_batched(mats, lambda x, y: jnp.matmul(y, x, precision=_EXACT), lambda k, dt: jnp.eye(k, dtype=dt),
                                 reverse=True)
        for x, suffix in zip(group, suffixes):
            top, real = tops[x], reals[x]
            g = jnp.einsum("lkcs,ks->lkc", suffix, top.reshape(top.shape[0], -1), precision=_EXACT)  # g_1 .. g_{n-2}
            if real is not None:
                g = jnp.where(real[1 : n - 1][..., None], g, 0.0)
            out[x] = jnp.concatenate([g.reshape((n - 2,) + top.shape), top[None]])
    return out


def separator_cells(cl: CliqueClass) -> int:
    """The cells of a class's upward separator (its transfer matrices are this square)."""
    return int(np.prod([cl.shape[a] for a in cl.sep_axes], dtype=np.int64))
