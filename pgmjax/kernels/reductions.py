"""Reductions over many axes that XLA:CPU compiles poorly as one reduction: sums (precision) and maxima (speed).

XLA:CPU compiles a sum over axes that are not a table's trailing ones (a marginal of a large clique: the
2-way marginals of NLTCS's 65,536-cell clique sum 16,384 cells each, over 14 scattered axes) as one loop
per output cell that adds its cells one after another. The rounding error of such a sum grows with the
number of cells: on a fitted NLTCS model the float32 2-way marginals fell short of the total by 3e-5 of it,
and the loss, which reads them, was off by 3e-4 relative, enough to steer a float32 fit away from the
float64 one. Summed in two stages (about the square root of the cells in each), the error is that of two
sums of about ``sqrt(n)`` cells (4e-7 of the total there), and the smaller first stage is also faster.

A maximum over several trailing axes (a whole clique table, the root of a junction tree) is rewritten by
XLA:CPU into a windowed reduction over the table's original axes, padded to windows of 32, several times
slower than a maximum over the last axis followed by one over the rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import numpy as np

#: Sums over fewer cells than this are one reduction: their error is already within a few eps.
TWO_STAGE_CELLS = 1024


def sum_axes(x: jax.Array, axes: Sequence[int], keepdims: bool = False) -> jax.Array:
    """``jnp.sum(x, axes)`` with a float32 error of about ``sqrt(n) eps`` instead of ``n eps``.

    The summed axes are split into a trailing group holding at least ``sqrt(n)`` of the ``n`` cells each
    output sums (summed first) and the rest (summed second); an optimisation barrier between the two keeps
    XLA from folding them back into one reduction. Sums of fewer than :data:`TWO_STAGE_CELLS` cells, and
    sums over one axis, are a single reduction. Linear, so it differentiates and transposes like
    ``jnp.sum`` (the barrier is the identity).

    Args:
        x: the array.
        axes: the axes to sum over (any order, negative allowed).
        keepdims: keep the summed axes with size 1.

    Returns:
        The sum, shaped as ``jnp.sum(x, axes, keepdims=keepdims)``.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.ones((2,) * 14, jnp.float32)
        >>> float(sum_axes(x, range(1, 14))[0])
        8192.0
    """
    axes = tuple(sorted(a % x.ndim for a in axes))
    n = math.prod(x.shape[a] for a in axes)
    if len(axes) < 2 or n < TWO_STAGE_CELLS:
        out = _sum(x, axes)
    else:
        first, cells = [], 1
        for a in reversed(axes):  # the innermost summed axes first: the most contiguous reads
            if cells * cells >= n or len(first) == len(axes) - 1:
                break
            first.append(a)
            cells *= x.shape[a]
        first = tuple(sorted(first))
        partial = jax.lax.optimization_barrier(_sum(x, first))
        # ``partial`` keeps the axes not in ``first``, in order: the rest of ``axes`` are renumbered.
        left = [a for a in range(x.ndim) if a not in first]
        out = _sum(partial, tuple(left.index(a) for a in axes if a not in first))
    if keepdims:
        out = out.reshape(tuple(1 if a in axes else d for a, d in enumerate(x.shape)))
    return out


def marginalize(x: jax.Array, attrs: Sequence, keep: Sequence) -> jax.Array:
    """The marginal of table ``x`` (one axis per label in ``attrs``) on the labels ``keep``, axes in
    ``keep``'s order; the other axes summed with :func:`sum_axes`.

    Example:
        >>> import jax.numpy as jnp
        >>> marginalize(jnp.ones((2, 3, 4)), ("a", "b", "c"), ("c", "a")).shape
        (4, 2)
    """
    drop = tuple(i for i, a in enumerate(attrs) if a not in keep)
    y = sum_axes(x, drop) if drop else x
    kept = [a for a in attrs if a in keep]
    order = [kept.index(a) for a in keep]
    return y if order == sorted(order) else y.transpose(order)


def _sum(x: jax.Array, axes: tuple[int, ...]) -> jax.Array:
    """The primitive reduction (``jnp.sum`` wraps each call in a jitted function of its own: a model with
    120 measured marginals traced and transposed 720 of them per fit), over :func:`_collapsed` axes."""
    if not axes:
        return x
    flat, flat_axes, shape = _collapsed(x, axes)
    return jax.lax.reduce(flat, np.zeros((), x.dtype), jax.lax.add, flat_axes).reshape(shape)


def _collapsed(x: jax.Array, axes: tuple[int, ...]) -> tuple[jax.Array, tuple[int, ...], tuple[int, ...]]:
    """``x`` with every run of adjacent axes that are all reduced, or all kept, merged into one axis (a
    free reshape of a row-major array), the reduced axes' new numbers, and the reduction's result shape.

    A 2-way marginal of NLTCS's 16-axis clique is then a reduction of a rank-5 array, not of a rank-16 one:
    XLA:CPU's loop emitters index every axis of their operands, and size-2 axes cost a loop level each."""
    groups: list[list[int]] = []
    for a in range(x.ndim):
        if groups and (groups[-1][-1] in axes) == (a in axes):
            groups[-1].append(a)
        else:
            groups.append([a])
    shape = tuple(d for a, d in enumerate(x.shape) if a not in axes)
    if len(groups) == x.ndim:
        return x, axes, shape
    flat = x.reshape(tuple(math.prod(x.shape[a] for a in g) for g in groups))
    return flat, tuple(i for i, g in enumerate(groups) if g[0] in axes), shape


def max_axes(x: jax.Array, axes: Sequence[int], keepdims: bool = False) -> jax.Array:
    """``jnp.max(x, axes)``, the last axis first when ``axes`` holds it and others.

    A maximum over the last axis reads contiguous rows; the rest is then a reduction over a table
    ``x.shape[-1]`` times smaller. An optimisation barrier keeps XLA from folding the two into one
    reduction. The value is the same as ``jnp.max`` (the maximum is exact in any order).

    Args:
        x: the array.
        axes: the axes to reduce (any order, negative allowed).
        keepdims: keep the reduced axes with size 1.

    Returns:
        The maximum, shaped as ``jnp.max(x, axes, keepdims=keepdims)``.

    Example:
        >>> import jax.numpy as jnp
        >>> float(max_axes(jnp.arange(24.0).reshape(2, 3, 4), (1, 2))[1])
        23.0
    """
    axes = tuple(sorted(a % x.ndim for a in axes))
    last = x.ndim - 1
    if len(axes) < 2 or axes[-1] != last or x.shape[last] < 2:
        out = _max(x, axes)
    else:
        rows = jax.lax.optimization_barrier(_max(x, (last,)))
        out = _max(rows, axes[:-1])
    if keepdims:
        out = out.reshape(tuple(1 if a in axes else d for a, d in enumerate(x.shape)))
    return out


def _max(x: jax.Array, axes: tuple[int, ...]) -> jax.Array:
    if not axes:
        return x
    flat, flat_axes, shape = _collapsed(x, axes)
    return jax.lax.reduce(flat, np.array(-np.inf, x.dtype), jax.lax.max, flat_axes).reshape(shape)
