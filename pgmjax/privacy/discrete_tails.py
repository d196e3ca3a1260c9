"""Exact tails of the discrete Laplace and Gaussian laws that :mod:`pgmjax.privacy.discrete_noise` draws.

A thresholded noisy histogram (Korolova, Kenthapadi, Mishra & Ntoulas, "Releasing search queries and
clicks privately", WWW 2009, Section 4; Wilson et al., "Differentially private SQL with bounded user
contribution", PoPETs 2020, Section 3.3) releases a value only when its noisy count reaches a threshold
``tau`` chosen so that a value held by one record passes with probability at most ``delta``. The noise
pgmjax adds is *discrete* (Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy",
NeurIPS 2020), so ``tau`` must come from the discrete law's tail, the sum of its pmf: the continuous
law's quantile understates it (about 6x for the discrete Gaussian at ``sigma = 1``, ``delta = 1e-9``).

* :func:`discrete_tail`: ``P[Z >= k]`` of the noise the samplers draw (the discrete Laplace law at its
  realised rational scale; the discrete Gaussian law summed term by term, or bounded above by integral
  comparison beyond ``sigma = 1e5``).
* :func:`tail_threshold`: the smallest integer ``k >= 1`` with ``P[Z >= k] <= alpha``.

Example:
    >>> k = tail_threshold("gaussian", 1.0, 1e-9)
    >>> k, discrete_tail("gaussian", 1.0, k) <= 1e-9
    (7, True)
"""

from __future__ import annotations

import math

import numpy as np

from .discrete_noise import MAX_UNITS, rational_scale

__all__ = ["discrete_tail", "tail_threshold", "sum_threshold"]


#: Discrete Gaussian tails are summed term by term up to this sigma; above it, a rigorous upper bound is used.
_EXACT_SIGMA = 1e5


def _laplace_log_tail(scale: float, k: int) -> float:
    """``log P[Z >= k]`` of the discrete Laplace law the sampler draws at ``scale``, ``k >= 1``: ``p^k / (1 + p)``,
    ``p = exp(-1/b)`` with ``b`` the realised rational scale (:func:`rational_scale`, slightly above ``scale``)."""
    t, s = rational_scale(float(scale))
    return -k * s / t - math.log1p(math.exp(-s / t))


def _gaussian_tails(sigma: float, k_max: int | None = None) -> np.ndarray:
    """``P[Z >= k]`` for ``k = 0, 1, ..., K`` of the discrete Gaussian law (exact sums of its pmf).

    The terms ``exp(-z^2 / (2 sigma^2))`` are summed from the smallest up (no cancellation); terms beyond
    ``K ≈ 37.3 sigma`` are below 1e-300 and contribute nothing representable."""
    last = int(math.ceil(sigma * math.sqrt(2.0 * 700.0))) + 2
    z = np.arange(last + 1, dtype=np.float64)
    w = np.exp(-(z * z) / (2.0 * sigma * sigma))
    from_k = np.cumsum(w[::-1])[::-1]  # sum_{z >= k} w_z, the small terms added first
    total = w[0] + 2.0 * from_k[1]
    return from_k / total


def _gaussian_tail_bound(sigma: float, k: int) -> float:
    """An upper bound on ``P[Z >= k]`` (``k >= 1``) of the discrete Gaussian law, for very large ``sigma``.

    ``w(z) = exp(-z^2 / 2 sigma^2)`` decreases on ``z >= 0``, so ``sum_{z >= k} w <= int_{k-1}^inf w`` and the
    normaliser ``1 + 2 sum_{z >= 1} w >= 1 + 2 int_1^inf w`` (integral comparison)."""
    c = sigma * math.sqrt(math.pi / 2.0)
    upper = c * math.erfc((k - 1) / (sigma * math.sqrt(2.0)))
    lower = 1.0 + 2.0 * c * math.erfc(1.0 / (sigma * math.sqrt(2.0)))
    return upper / lower


def discrete_tail(family: str, scale: float, k: int) -> float:
    """``P[Z >= k]`` for the integer noise ``Z`` the samplers draw: the sum of the pmf over ``z >= k``.

    Discrete Laplace (:func:`discrete_laplace`, at its realised rational scale ``b``): ``p^k / (1 + p)`` for
    ``k >= 1``, ``p = exp(-1/b)``. Discrete Gaussian (:func:`discrete_gaussian`): the pmf summed term by
    term (``sigma <= 1e5``), else a rigorous upper bound by integral comparison. Canonne, Kamath & Steinke
    2020 (Definition 1 and Section 4) define both laws; the tail is *not* the continuous law's: at small
    ``sigma`` the discrete Gaussian's tail is several times heavier at the same point.

    Args:
        family: ``"laplace"`` (``scale`` is ``b``) or ``"gaussian"`` (``scale`` is ``sigma``).
        scale: the scale the release asked for (as recorded in the ledger).
        k: an integer.

    Returns:
        The probability (float; an upper bound for a discrete Gaussian with ``sigma > 1e5``).

    Example:
        >>> round(discrete_tail("laplace", 1.0, 3) / (math.exp(-3) / (1 + math.exp(-1))), 5)
        1.0
        >>> discrete_tail("gaussian", 1.0, 6) > 5 * 0.5 * math.erfc(6.5 / math.sqrt(2))
        True
    """
    if family not in ("laplace", "gaussian"):
        raise ValueError(f"discrete_tail: family must be 'laplace' or 'gaussian', got {family!r}")
    if not (math.isfinite(scale) and 0 < scale <= MAX_UNITS):
        raise ValueError(f"discrete_tail: scale must be in (0, 2^46], got {scale!r}")
    k = int(k)
    if k <= 0:  # symmetric law: P[Z >= k] = 1 - P[Z >= 1 - k]
        return 1.0 - discrete_tail(family, scale, 1 - k)
    if family == "laplace":
        return math.exp(_laplace_log_tail(scale, k))
    if scale > _EXACT_SIGMA:
        return _gaussian_tail_bound(scale, k)
    tails = _gaussian_tails(scale)
    return float(tails[k]) if k < len(tails) else 0.0


def tail_threshold(family: str, scale: float, alpha: float) -> int:
    """The smallest integer ``k >= 1`` with ``P[Z >= k] <= alpha`` for the noise of :func:`discrete_tail`.

    A count ``c`` plus such noise reaches ``c + k`` with probability at most ``alpha``: the threshold of
    a thresholded noisy histogram (Korolova et al., "Releasing search queries and clicks privately", WWW
    2009, Section 4) computed from the discrete law's exact tail, not the continuous approximation.

    Args:
        family: ``"laplace"`` or ``"gaussian"``.
        scale: the noise scale (as recorded in the ledger).
        alpha: the tail probability, in (0, 1/2).

    Returns:
        ``k`` (an int).

    Example:
        >>> k = tail_threshold("gaussian", 1.0, 1e-9)
        >>> discrete_tail("gaussian", 1.0, k) <= 1e-9 < discrete_tail("gaussian", 1.0, k - 1), k
        (True, 7)
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"tail_threshold: alpha must lie in (0, 1/2), got {alpha!r}")
    if family == "laplace":
        t, s = rational_scale(float(scale))
        k = max(1, math.ceil(-(math.log(alpha) + math.log1p(math.exp(-s / t))) * t / s))
        while k > 1 and _laplace_log_tail(scale, k - 1) <= math.log(alpha):  # float round-off of the closed form
            k -= 1
        while _laplace_log_tail(scale, k) > math.log(alpha):
            k += 1
        return k
    if family != "gaussian":
        raise ValueError(f"tail_threshold: family must be 'laplace' or 'gaussian', got {family!r}")
    if not (math.isfinite(scale) and 0 < scale <= MAX_UNITS):
        raise ValueError(f"tail_threshold: scale must be in (0, 2^46], got {scale!r}")
    if scale > _EXACT_SIGMA:
        k = max(1, math.ceil(scale * math.sqrt(2.0 * math.log(1.0 / alpha))))  # sub-Gaussian start, then adjust
        while k > 1 and _gaussian_tail_bound(scale, k - 1) <= alpha:
            k -= 1
        while _gaussian_tail_bound(scale, k) > alpha:
            k += 1
        return k
    tails = _gaussian_tails(scale)
    return max(1, int(np.argmax(tails <= alpha)))


def sum_threshold(family: str, scale: float, m: int, alpha: float) -> float:
    """A threshold ``t`` with ``P[Z_1 + ... + Z_m >= t] <= alpha`` for ``m`` independent draws of the noise of
    :func:`discrete_tail` (the sum of the noisy counts of ``m`` empty cells of a histogram).

    Discrete Gaussian: it is ``sigma^2``-sub-Gaussian (Canonne, Kamath & Steinke, "The discrete Gaussian for
    differential privacy", NeurIPS 2020, Section 2), so ``t = sigma sqrt(2 m ln(1/alpha))``. Discrete Laplace
    (``P[z] ∝ p^|z|``, ``p = exp(-1/b)``, ``b`` the sampler's realised scale): the Chernoff bound
    ``inf_l exp(-l t) M(l)^m`` with its exact moment generating function
    ``M(l) = (1 - p)^2 / ((1 - p e^l)(1 - p e^-l))``, minimised over a grid of ``l`` in ``(0, 1/b)``.

    Args:
        family: ``"laplace"`` or ``"gaussian"``.
        scale: the noise scale (as recorded in the ledger).
        m: how many noises are summed.
        alpha: the tail probability, in (0, 1/2).

    Returns:
        ``t`` (a float).

    Example:
        >>> round(sum_threshold("gaussian", 10.0, 4, 1e-4), 1)
        85.8
    """
    if family != "laplace":
        return float(scale) * math.sqrt(2.0 * m * math.log(1.0 / alpha))
    t, s = rational_scale(float(scale))
    b = t / s
    p = math.exp(-1.0 / b)
    lam = np.linspace(1e-3, 0.999, 999) / b
    # p e^l as exp(l - 1/b): at a tiny scale p underflows to 0 while e^l overflows, and 0 * inf is NaN.
    log_mgf = 2.0 * math.log1p(-p) - np.log1p(-np.exp(lam - 1.0 / b)) - np.log1p(-np.exp(-lam - 1.0 / b))
    return float(np.min((m * log_mgf - math.log(alpha)) / lam))
