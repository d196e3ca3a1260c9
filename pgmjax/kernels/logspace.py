"""Pure-JAX implementations of the log-space primitives (see the package docstring)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def _lse_parts(x: jax.Array, axes: tuple[int, ...]):
    top = jnp.max(x, axis=axes, keepdims=True)
    # A slice that is all -inf has max -inf; shifting by it would give NaN.
    shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
    scaled = jnp.exp(x - shift)
    total = jnp.sum(scaled, axis=axes, keepdims=True)
    return jnp.squeeze(jnp.log(total) + shift, axes), scaled, total


# A custom VJP: the backward pass reuses the forward's exponentials (no second
# exp pass) and defines the derivative on an all -inf slice as 0, not NaN.
# Reverse-over-reverse (gradients of marginals) still works. The axes are
# reduced where they are (no transpose): XLA:CPU reduces over major axes
# several times faster than over the minor one.
@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _logsumexp_axes(x: jax.Array, axes: tuple[int, ...]) -> jax.Array:
    return _lse_parts(x, axes)[0]


def _logsumexp_axes_fwd(x, axes):
    out, scaled, total = _lse_parts(x, axes)
    return out, (scaled, total)


def _logsumexp_axes_bwd(axes, res, g):
    scaled, total = res
    return (scaled * (jnp.expand_dims(g, axes) / jnp.where(total > 0, total, 1.0)),)


_logsumexp_axes.defvjp(_logsumexp_axes_fwd, _logsumexp_axes_bwd)


def logsumexp(x: jax.Array, axis: int | tuple[int, ...] | None = -1) -> jax.Array:
    """Numerically safe ``log(sum(exp(x), axis))``.

    Exact with -inf entries (structural zeros), returns -inf for an all -inf
    slice, and its derivative (the softmax) is 0 rather than NaN there.

    Args:
        x: array of log-values.
        axis: axis or axes to reduce (None: all).

    Returns:
        ``x`` reduced over ``axis``.

    Example:
        >>> float(logsumexp(jnp.log(jnp.array([1.0, 3.0]))))  # log 4
        1.3862943...
    """
    x = jnp.asarray(x)
    if axis is None:
        axis = tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % x.ndim for a in axes)
    if not axes:
        return x
    return _logsumexp_axes(x, tuple(sorted(set(axes))))


def log_einsum(subscripts: str, *log_factors: jax.Array, method: str = "stable") -> jax.Array:
    """Log of ``einsum(subscripts, *exp(log_factors))``.

    Args:
        subscripts: explicit einsum subscripts with ``->``.
        log_factors: arrays of log-values (may hold -inf).
        method: ``"stable"`` broadcasts the sum of the factors over all
            indices, then takes a safe logsumexp over the summed ones (exact,
            materialises the joint index space); ``"scaled"`` shifts each
            factor by its maximum, contracts with a real einsum and takes the
            log (fast, but can underflow when values span more than the
            float range).

    Returns:
        The contracted log-table.
    """
    inputs, output = subscripts.replace(" ", "").split("->")
    terms = inputs.split(",")
    if len(terms) != len(log_factors):
        raise ValueError(f"log_einsum: {len(terms)} terms in {subscripts!r} but {len(log_factors)} factors")
    if method == "scaled":
        shifts = [jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0)) for m in (jnp.max(f) for f in log_factors)]
        scaled = [jnp.exp(f - s) for f, s in zip(log_factors, shifts)]
        return jnp.log(jnp.einsum(subscripts, *scaled)) + sum(shifts)
    if method != "stable":
        raise ValueError(f"log_einsum: unknown method {method!r}; expected 'stable' or 'scaled'")
    letters = []
    for t in terms:
        for ch in t:
            if ch not in letters:
                letters.append(ch)
    summed = [ch for ch in letters if ch not in output]
    full = output + "".join(summed)
    sizes = {}
    for t, f in zip(terms, log_factors):
        for ch, n in zip(t, f.shape):
            sizes[ch] = n
    total = jnp.zeros(tuple(sizes[ch] for ch in full), dtype=jnp.result_type(*log_factors))
    for t, f in zip(terms, log_factors):
        # Reorder the factor's axes to follow `full`, then broadcast.
        order = sorted(range(len(t)), key=lambda i: full.index(t[i]))
        ft = jnp.transpose(f, order)
        present = sorted(full.index(ch) for ch in t)
        shape = [1] * len(full)
        for pos, n in zip(present, ft.shape):
            shape[pos] = n
        total = total + ft.reshape(shape)
    if not summed:
        return total
    return logsumexp(total, axis=tuple(range(len(output), len(full))))


def segment_logsumexp(values: jax.Array, ids: jax.Array, num_segments: int, indices_are_sorted: bool = False) -> jax.Array:
    """``log sum exp`` of ``values`` per segment ``ids`` (``jax.ops.segment_sum``'s convention): ``-inf`` for a
    segment with no entry or only ``-inf`` entries, never NaN.

    Each segment is shifted by its own maximum before the exponentials (no gradient flows through the shift).

    Args:
        values: ``(n,)`` log-space values.
        ids: ``(n,)`` segment of each value, in ``[0, num_segments)``.
        num_segments: the number of segments (static).
        indices_are_sorted: whether ``ids`` is non-decreasing (a faster reduction where true).

    Returns:
        ``(num_segments,)``.

    Example:
        >>> out = segment_logsumexp(jnp.log(jnp.array([1.0, 3.0, 2.0])), jnp.array([0, 0, 2]), 3)
        >>> [round(float(v), 4) for v in out]  # log 4, an empty segment, log 2
        [1.3863, -inf, 0.6931]
    """
    top = jax.ops.segment_max(values, ids, num_segments, indices_are_sorted=indices_are_sorted)
    top = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
    total = jax.ops.segment_sum(jnp.exp(values - top[ids]), ids, num_segments, indices_are_sorted=indices_are_sorted)
    return jnp.log(total) + top
