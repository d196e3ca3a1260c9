"""Floating-point-safe noise: exact discrete Laplace and Gaussian samplers, lattice releases, exact selection.

Adding continuous noise in floating point leaks (Mironov, "On significance of the least significant bits
for differential privacy", CCS 2012): the set of floats ``x + b * F^-1(u)`` reachable from a count ``x``
differs from the set reachable from ``x + 1``, so an output can rule out a neighbouring input. Every
release here is instead an integer (or a point of a public lattice ``gamma * Z``) plus integer noise drawn
from an exactly specified discrete law; the set of reachable outputs is the same for every input.

* :func:`bernoulli_exp`: ``Bernoulli(exp(-g))`` for any ``g >= 0``, with ``exp(-1)`` factors drawn one at a
  time (Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020,
  Algorithm 1): never a probability rounded to zero, so no output is impossible in one world and possible
  in a neighbouring one.
* :func:`discrete_laplace` (their Algorithm 2) and :func:`discrete_gaussian` (their Algorithm 3).
* :func:`lattice_noise`: a release of real or integer answers: round to the lattice ``gamma * Z``
  (``gamma`` a power of two chosen from public quantities only), add discrete noise, and report the
  sensitivity the rounding adds so the cost is accounted exactly.
* :func:`exponential_choice`: the exponential mechanism by rejection from uniform proposals, accepted with
  :func:`bernoulli_exp`: the exact law ``P(r) ∝ exp(eps q_r / (2 Delta))``, every candidate reachable.

The exact tails of these laws (the thresholds of thresholded noisy counts) are in
:mod:`pgmjax.privacy.discrete_tails`.

Random bits come from a NumPy ``Philox`` generator keyed by 128 bits of ``jax.random.bits(key)``: equal keys
give equal draws whatever ``jax_enable_x64`` is. The only floating-point steps left are the evaluation of
``exp(-f)`` for ``f`` in ``[0, 1)`` and of the exponents themselves; they move probabilities by a relative
1e-15 and never to zero.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "generator",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "discrete_laplace_variance",
    "discrete_gaussian_variance",
    "LatticeRelease",
    "lattice_spacing",
    "lattice_noise",
    "exponential_choice",
    "exponential_choice_rows",
]

_E1 = math.exp(-1.0)
#: Lattice noise scales are kept below 2^46 lattice units: integer noise stays exact in float64.
MAX_UNITS = 2.0**46


def generator(key) -> np.random.Generator:
    """A NumPy generator keyed by 128 bits of ``jax.random.bits(key)`` (reproducible, x64-independent).

    Example:
        >>> int(generator(jax.random.key(0)).integers(10)) == int(generator(jax.random.key(0)).integers(10))
        True
    """
    bits = np.asarray(jax.random.bits(key, (4,), dtype=jnp.uint32)).astype(np.uint64)
    return np.random.Generator(np.random.Philox(key=[int(bits[0] << np.uint64(32) | bits[1]), int(bits[2] << np.uint64(32) | bits[3])]))


def bernoulli_exp(rng: np.random.Generator, gamma) -> np.ndarray:
    """Independent ``Bernoulli(exp(-gamma_i))`` draws, ``gamma_i >= 0`` (Canonne et al. 2020, Algorithm 1).

    ``exp(-gamma) = exp(-1)^floor(gamma) * exp(-frac(gamma))``: each ``exp(-1)`` factor is its own coin, so a
    tiny probability is a product of fair-sized coins, never a float that rounds to zero.

    Args:
        rng: a :func:`generator`.
        gamma: non-negative finite exponents (any shape).

    Returns:
        A boolean array of ``gamma``'s shape.

    Example:
        >>> bernoulli_exp(generator(jax.random.key(0)), np.zeros(3)).tolist()
        [True, True, True]
    """
    g = np.asarray(gamma, dtype=np.float64)
    if not np.all(np.isfinite(g)) or np.any(g < 0):
        raise ValueError("bernoulli_exp: gamma must be finite and non-negative")
    whole = np.floor(g)
    out = rng.random(g.shape) < np.exp(-(g - whole))
    left = whole.copy()
    active = out & (left > 0)
    while active.any():
        idx = np.flatnonzero(active)
        coin = rng.random(idx.size) < _E1
        flat_out = out.reshape(-1)
        flat_left = left.reshape(-1)
        flat_out[idx] = coin
        flat_left[idx] -= 1
        active = out & (left > 0)
    return out


def _geometric_e1(rng: np.random.Generator, n: int) -> np.ndarray:
    """Number of successes of ``Bernoulli(exp(-1))`` coins before the first failure, ``n`` times."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        ok = rng.random(active.size) < _E1
        v[active[ok]] += 1
        active = active[ok]
    return v


def _laplace_rational(rng: np.random.Generator, n: int, t: int, s: int) -> np.ndarray:
    """``n`` draws of the discrete Laplace law of scale ``t/s`` (Canonne et al. 2020, Algorithm 2)."""
    out = np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        m = todo.size
        u = rng.integers(0, t, size=m, dtype=np.int64)
        keep = bernoulli_exp(rng, u / t)
        v = _geometric_e1(rng, m)
        y = (u + t * v) // s
        neg = rng.random(m) < 0.5
        keep &= ~(neg & (y == 0))
        out[todo[keep]] = np.where(neg, -y, y)[keep]
        todo = todo[~keep]
    return out


def rational_scale(scale: float) -> tuple[int, int]:
    """``(t, s)`` with ``t / s > scale`` strictly, within a relative ``2^-20``: the realised epsilon
    ``Delta s / t`` is below ``Delta / scale`` even when ``scale`` itself was rounded down."""
    k = max(0, 20 - math.floor(math.log2(scale)))
    s = 1 << k
    return math.floor(scale * s) + 1, s


def discrete_laplace(rng: np.random.Generator, shape, scale: float) -> tuple[np.ndarray, float]:
    """Integer noise with ``P(z) ∝ exp(-|z| / b)``, ``b > scale`` (Canonne et al. 2020, Algorithm 2).

    ``b`` is ``scale`` rounded strictly up to a rational ``t/s`` (relative change below ``2^-20``): adding
    it to an integer query of L1 sensitivity ``Delta`` is ``Delta / b < Delta / scale``-DP.

    Args:
        rng: a :func:`generator`.
        shape: the output shape.
        scale: the scale ``b > 0`` (at most ``2^46``).

    Returns:
        ``(noise, b)``: an int64 array and the realised scale.

    Example:
        >>> z, b = discrete_laplace(generator(jax.random.key(0)), (4,), 2.0)
        >>> z.dtype, 2.0 < b <= 2.0 * (1 + 2**-20)
        (dtype('int64'), True)
    """
    if not (math.isfinite(scale) and 0 < scale <= MAX_UNITS):
        raise ValueError(f"discrete_laplace: scale must be in (0, 2^46], got {scale!r}")
    shape = tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    t, s = rational_scale(float(scale))
    return _laplace_rational(rng, math.prod(shape), t, s).reshape(shape), t / s


def discrete_gaussian(rng: np.random.Generator, shape, sigma: float) -> np.ndarray:
    """Integer noise with ``P(z) ∝ exp(-z^2 / (2 sigma^2))`` (Canonne et al. 2020, Algorithm 3).

    Adding it to an integer vector query of L2 sensitivity ``Delta`` is ``Delta^2 / (2 sigma^2)``-zCDP
    (their Theorem 14).

    Args:
        rng: a :func:`generator`.
        shape: the output shape.
        sigma: the scale ``sigma > 0`` (at most ``2^46``).

    Returns:
        An int64 array.

    Example:
        >>> discrete_gaussian(generator(jax.random.key(0)), (2, 3), 5.0).shape
        (2, 3)
    """
    if not (math.isfinite(sigma) and 0 < sigma <= MAX_UNITS):
        raise ValueError(f"discrete_gaussian: sigma must be in (0, 2^46], got {sigma!r}")
    shape = tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    n = math.prod(shape)
    s2 = float(sigma) ** 2
    t = math.floor(sigma) + 1
    out = np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        y = _laplace_rational(rng, todo.size, t, 1)
        keep = bernoulli_exp(rng, (np.abs(y) - s2 / t) ** 2 / (2.0 * s2))
        out[todo[keep]] = y[keep]
        todo = todo[~keep]
    return out.reshape(shape)


def discrete_laplace_variance(scale: float) -> float:
    """Variance ``2 p / (1 - p)^2``, ``p = exp(-1/scale)``, of the discrete Laplace law.

    Example:
        >>> round(discrete_laplace_variance(10.0), 3)      # about 2 b^2 - 1/6
        199.833
    """
    p = math.exp(-1.0 / scale)
    return 2.0 * p / (-math.expm1(-1.0 / scale)) ** 2


def discrete_gaussian_variance(sigma: float) -> float:
    """Variance of the discrete Gaussian law (at most ``sigma^2``; exact sum for ``sigma < 40``).

    Example:
        >>> round(discrete_gaussian_variance(0.5), 4)
        0.215
    """
    if sigma >= 40.0:
        return float(sigma) ** 2  # the relative difference is below exp(-2 pi^2 sigma^2)
    z = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41, dtype=np.float64)
    w = np.exp(-(z**2) / (2.0 * sigma**2))
    return float((w * z**2).sum() / w.sum())


class LatticeRelease(NamedTuple):
    """A noisy release on a lattice: ``values`` (float64), its ``lattice`` spacing ``gamma``, the noise
    ``stddev`` per entry, and ``added_sensitivity``: what rounding to the lattice adds to the sensitivity
    (zero for integer answers).

    ``stddev`` is that of the continuous law with the same parameters (``sqrt(2) b``, ``sigma``): an upper
    bound on the discrete law's (:func:`discrete_laplace_variance`, :func:`discrete_gaussian_variance`),
    equal to it within ``1 / (12 b^2)`` (Laplace) or ``exp(-2 pi^2 sigma^2)`` (Gaussian) relative, and
    never zero, so a tiny noise never gives an estimator an infinite weight."""

    values: np.ndarray
    lattice: float
    stddev: float
    added_sensitivity: float


def lattice_spacing(scale: float, sensitivity: float, size: int, integer: bool) -> float:
    """The public lattice spacing: 1 for integer answers, else a power of two with ``size * gamma`` at most
    ``2^-10`` of the sensitivity and ``gamma`` at most ``2^-10`` of the noise scale (at least ``2^-40`` of it).

    Example:
        >>> lattice_spacing(1.0, 1.0, 4, integer=False)
        0.000244140625
    """
    if integer:
        return 1.0
    target = max(min(scale, sensitivity / max(size, 1)) * 2.0**-10, scale * 2.0**-40)
    return 2.0 ** math.floor(math.log2(target))


def lattice_noise(rng: np.random.Generator, values, *, family: str, scale: float, gamma: float, integer: bool) -> LatticeRelease:
    """Release ``values`` with exact discrete noise on a public lattice.

    Real answers are rounded to ``gamma * Z`` (``gamma`` a power of two, so ``values / gamma`` is exact)
    and integer noise of scale ``scale / gamma`` is added in lattice units; the float result
    ``gamma * fl(k + z)`` is a function of the integer ``k + z`` alone (post-processing). Rounding can
    move each of the ``size`` entries by half a lattice step, so the sensitivity grows by at most
    ``size * gamma`` (L1, Laplace) or ``sqrt(size) * gamma`` (L2, Gaussian): ``added_sensitivity``, which
    the caller must account. Integer answers (counts, integer-coefficient queries) use ``gamma = 1`` and
    add nothing.

    Args:
        rng: a :func:`generator`.
        values: the exact answers (float64, any shape); integers when ``integer`` is True.
        family: ``"laplace"`` (``scale`` is ``b``) or ``"gaussian"`` (``scale`` is ``sigma``).
        scale: the noise scale in answer units.
        gamma: the lattice spacing, from :func:`lattice_spacing` (public quantities only); 1 for integers.
        integer: whether the answers are integers for every dataset (decided by the query, never by the data).

    Returns:
        A :class:`LatticeRelease`.

    Example:
        >>> r = lattice_noise(generator(jax.random.key(0)), np.array([3.0, 5.0]), family="laplace", scale=2.0,
        ...                   gamma=1.0, integer=True)
        >>> bool(np.all(r.values == np.round(r.values))), r.added_sensitivity
        (True, 0.0)
    """
    x = np.asarray(values, dtype=np.float64)
    if integer and not np.all(x == np.round(x)):
        raise ValueError("lattice_noise: integer=True but some answers are not integers (the query has non-integer coefficients?)")
    if integer and gamma != 1.0:
        raise ValueError("lattice_noise: integer answers use the lattice Z (gamma = 1)")
    units = scale / gamma
    if units > MAX_UNITS:
        raise ValueError(
            f"the noise scale {scale:.6g} is beyond what the sampler represents exactly ({MAX_UNITS:.3g} lattice units): "
            "the budget is too small to release anything useful"
        )
    k = np.rint(x / gamma)
    if family == "laplace":
        z, b = discrete_laplace(rng, x.shape, units)
        std = math.sqrt(2.0) * b * gamma
        added = 0.0 if integer else x.size * gamma
    elif family == "gaussian":
        z = discrete_gaussian(rng, x.shape, units)
        std = units * gamma
        added = 0.0 if integer else math.sqrt(x.size) * gamma
    else:
        raise ValueError(f"lattice_noise: family must be 'laplace' or 'gaussian', got {family!r}")
    return LatticeRelease(gamma * (k + z.astype(np.float64)), gamma, std, added)


def exponential_choice(rng: np.random.Generator, logits_gap, num: int) -> np.ndarray:
    """``num`` independent exact exponential-mechanism draws, ``P(r) ∝ exp(-g_r)``, ``g_r >= 0``.

    Rejection from uniform proposals over the candidates with finite ``g``, each accepted with
    :func:`bernoulli_exp` (McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007, with
    the exact Bernoulli of Canonne et al. 2020): every candidate keeps a non-zero probability, unlike a
    Gumbel-max on 52-bit uniforms whose tails stop at a finite value. ``g_r = eps (q_max - q_r) / (2 Delta)``.

    Args:
        rng: a :func:`generator`.
        logits_gap: ``g`` (1-D, ``+inf`` excludes a candidate; at least one finite).
        num: number of draws.

    Returns:
        An int64 array of ``num`` indices.

    Example:
        >>> exponential_choice(generator(jax.random.key(0)), np.array([0.0, np.inf]), 3).tolist()
        [0, 0, 0]
    """
    g = np.asarray(logits_gap, dtype=np.float64)
    finite = np.isfinite(g)
    if finite.all():  # the common case: no index map over millions of candidates
        allowed, gaps = None, g
    else:
        allowed = np.flatnonzero(finite)
        if allowed.size == 0:
            raise ValueError("exponential_choice: every candidate is excluded")
        gaps = g[allowed]
    # Proposals per pending draw per round: about twice the expected number needed (1 / acceptance
    # rate), capped; the law of the result does not depend on it (the first accepted proposal wins).
    rate = float(np.exp(-gaps).mean())
    per = int(min(max(2.0 / max(rate, 1e-300), 1.0), max(1, (1 << 22) // max(num, 1)), 1 << 16))
    out = np.empty(num, dtype=np.int64)
    pending = np.arange(num)
    while pending.size:
        prop = rng.integers(0, gaps.size, size=(pending.size, per))
        ok = bernoulli_exp(rng, gaps[prop])
        hit = ok.any(axis=1)
        first = ok.argmax(axis=1)
        chosen = prop[hit, first[hit]]
        out[pending[hit]] = chosen if allowed is None else allowed[chosen]
        pending = pending[~hit]
    return out



def exponential_choice_rows(rng: np.random.Generator, logits_gap) -> np.ndarray:
    """One exact exponential-mechanism draw per row of a gap matrix, ``P(row i picks r) ∝ exp(-g_ir)``.

    The draws of :func:`exponential_choice`, for many score vectors of one length at once (the parts of a
    parallel selection): every pending row proposes candidates uniformly and keeps its first proposal accepted by
    :func:`bernoulli_exp`; an excluded candidate (``g = +inf``) is never accepted.

    Args:
        rng: a :func:`generator`.
        logits_gap: ``g``, shape ``(rows, candidates)``, each row ``>= 0`` with at least one finite entry.

    Returns:
        An int64 array of one index per row.

    Example:
        >>> exponential_choice_rows(generator(jax.random.key(0)), np.array([[0.0, np.inf], [np.inf, 0.0]])).tolist()
        [0, 1]
    """
    g = np.asarray(logits_gap, dtype=np.float64)
    rate = np.exp(-g).mean(axis=1).min()  # the slowest row's acceptance rate: proposals per round (not the law)
    per = int(min(max(2.0 / max(rate, 1e-300), 1.0), max(1, (1 << 22) // max(g.shape[0], 1)), 1 << 16))
    out = np.empty(g.shape[0], dtype=np.int64)
    pending = np.arange(g.shape[0])
    while pending.size:
        prop = rng.integers(0, g.shape[1], size=(pending.size, per))
        gaps = g[pending[:, None], prop]
        ok = np.isfinite(gaps)
        ok[ok] = bernoulli_exp(rng, gaps[ok])
        hit = ok.any(axis=1)
        first = ok.argmax(axis=1)
        out[pending[hit]] = prop[hit, first[hit]]
        pending = pending[~hit]
    return out
