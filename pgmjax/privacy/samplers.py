"""Continuous noise from ``jax.random`` keys, for simulations: standard normal, Laplace and Gumbel draws.

The uniforms are built on the host in float64 from 52 random bits drawn with ``jax.random.bits``, so
equal keys give equal draws whatever the ``jax_enable_x64`` setting, and the tails reach about 8.2
sigma (normal) and 36 b (Laplace); the draws are then inverse CDFs. No release uses these samplers:
floating-point noise leaks through its low-order bits (Mironov 2012, "On significance of the least
significant bits for differential privacy", CCS), so every private release draws exact discrete noise
instead (:mod:`pgmjax.privacy.lattice`, :mod:`pgmjax.privacy.discrete_noise`).

Example:
    >>> a = standard_normal(jax.random.key(3), 4)
    >>> bool(np.array_equal(a, standard_normal(jax.random.key(3), 4)))
    True
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtri

from ..checks import check_count, check_key

__all__ = ["standard_normal", "standard_laplace", "standard_gumbel"]


def _shape(shape) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    for s in shape:
        check_count(s, "shape entry", "noise", minimum=0)
    return tuple(int(s) for s in shape)


def _uniform(key, n: int) -> np.ndarray:
    """``n`` uniforms in the open interval (0, 1), float64, from 52 random bits each."""
    if n == 0:
        return np.empty(0)
    # Draw in power-of-two buckets: jax.random compiles once per shape, and front-ends measure
    # marginals of many different sizes; the result is still a fixed function of (key, n).
    m = max(16, 1 << (n - 1).bit_length())
    bits = np.asarray(jax.random.bits(key, (2, m), dtype=jnp.uint32))[:, :n].astype(np.uint64)
    k = (bits[0] << np.uint64(20)) | (bits[1] >> np.uint64(12))
    # (k + 1/2) / 2^52 with k < 2^52 is exact and stays in [2^-53, 1 - 2^-53]: no log(0) below.
    return (k.astype(np.float64) + 0.5) * 2.0**-52


def standard_normal(key, shape) -> np.ndarray:
    """Standard normal draws (float64, inverse CDF of 52-bit uniforms from ``jax.random.bits``).

    Args:
        key: a ``jax.random`` key; equal keys give equal draws.
        shape: the output shape.

    Returns:
        A float64 NumPy array of the given shape.

    Example:
        >>> standard_normal(jax.random.key(0), (3,)).shape
        (3,)
    """
    check_key(key, "standard_normal")
    shape = _shape(shape)
    return ndtri(_uniform(key, math.prod(shape))).reshape(shape)


def standard_laplace(key, shape) -> np.ndarray:
    """Laplace draws of scale 1 (std ``sqrt(2)``), float64, by the inverse CDF.

    Args:
        key: a ``jax.random`` key; equal keys give equal draws.
        shape: the output shape (an int for a 1-D array).

    Returns:
        A float64 NumPy array of the given shape.

    Example:
        >>> standard_laplace(jax.random.key(0), 2).shape
        (2,)
    """
    check_key(key, "standard_laplace")
    shape = _shape(shape)
    u = _uniform(key, math.prod(shape))
    # Each branch keeps full relative precision near its tail (2u and 1 - u are exact).
    lo = u < 0.5
    z = np.empty_like(u)
    z[lo] = np.log(2.0 * u[lo])
    z[~lo] = -np.log(2.0 * (1.0 - u[~lo]))
    return z.reshape(shape)


def standard_gumbel(key, shape) -> np.ndarray:
    """Standard Gumbel draws ``-log(-log U)``, float64.

    Args:
        key: a ``jax.random`` key; equal keys give equal draws.
        shape: the output shape (an int for a 1-D array).

    Returns:
        A float64 NumPy array of the given shape.

    Example:

        >>> standard_gumbel(jax.random.key(0), (2, 2)).shape
        (2, 2)
    """
    check_key(key, "standard_gumbel")
    shape = _shape(shape)
    return (-np.log(-np.log(_uniform(key, math.prod(shape))))).reshape(shape)
