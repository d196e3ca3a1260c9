"""zCDP <-> approximate DP: ``rho``-zCDP implies ``(eps, delta)``-DP, and the best ``rho`` for a target.

Bun & Steinke 2016 ("Concentrated differential privacy: simplifications, extensions, and lower
bounds", TCC, Proposition 1.3) give ``eps = rho + 2 sqrt(rho log(1/delta))``; the bound used here is
the tighter one of Canonne, Kamath & Steinke 2020 ("The discrete Gaussian for differential privacy",
NeurIPS, Section 2.3): for every ``alpha > 1``,
``delta <= exp((alpha - 1)(alpha rho - eps)) / (alpha - 1) * (1 - 1/alpha)^alpha``
(:func:`cdp_delta`), inverted by bisection for ``eps`` (:func:`cdp_eps`) and for ``rho``
(:func:`cdp_rho`, the budget of MST and AIM). The bisections follow private-pgm's
``mechanisms/cdp2adp.py`` step for step (:func:`bisect_bracket`), so the numbers are the reference ones.

Example:
    >>> rho = cdp_rho(1.0, 1e-9)
    >>> cdp_delta(rho, 1.0) <= 1e-9 < cdp_delta(rho * 1.001, 1.0)
    True
"""

from __future__ import annotations

import math

from ..checks import check_delta, check_nonnegative, check_positive

__all__ = ["bisect_bracket", "cdp_delta", "cdp_eps", "cdp_rho"]


def bisect_bracket(lo: float, hi: float, go_right, steps: int = 1000) -> tuple[float, float, float]:
    """Bisection as in the reference code (``steps`` halvings), stopping once the bracket stops
    changing: from then on every further step is identical, so the result is bit-for-bit the same.

    Args:
        lo, hi: the initial bracket.
        go_right: a predicate of the midpoint; True moves ``lo`` up to it, False moves ``hi`` down.
        steps: the most halvings (1000 in the reference code).

    Returns:
        ``(lo, hi, mid)``: the final bracket and the last midpoint evaluated.

    Example:
        >>> lo, hi, _ = bisect_bracket(0.0, 2.0, lambda x: x * x <= 2.0)
        >>> round(lo, 12), lo * lo <= 2.0 < hi * hi
        (1.414213562373, True)
    """
    mid = (lo + hi) / 2
    for _ in range(steps):
        mid = (lo + hi) / 2
        new = (mid, hi) if go_right(mid) else (lo, mid)
        if new == (lo, hi):
            break
        lo, hi = new
    return lo, hi, mid


def cdp_delta(rho: float, eps: float) -> float:
    """Smallest ``delta`` such that ``rho``-zCDP implies ``(eps, delta)``-DP, by the CKS bound.

    Canonne, Kamath, Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
    (arXiv 2004.00010, Section 2.3): for every ``alpha > 1``,

    ``delta <= exp((alpha - 1)(alpha rho - eps)) / (alpha - 1) * (1 - 1/alpha)^alpha``. The best
    ``alpha`` is found by bisection on the derivative of the log, with ``alpha >= 1.01`` (as in
    the procedure of private-pgm ``mechanisms/cdp2adp.py``); any ``alpha`` gives a valid bound.

    Args:
        rho: zCDP parameter, ``>= 0``.
        eps: target epsilon, ``>= 0``.

    Returns:
        delta in ``[0, 1]``.

    Example:
        >>> round(cdp_delta(0.0149731, 1.0) / 1e-9, 2)
        1.0
    """
    where = "cdp_delta"
    rho = check_nonnegative(rho, "rho", where)
    eps = check_nonnegative(eps, "eps", where)
    if rho == 0:
        return 0.0
    _, _, alpha = bisect_bracket(
        1.01, (eps + 1) / (2 * rho) + 2, lambda a: (2 * a - 1) * rho - eps + math.log1p(-1.0 / a) < 0
    )
    log_num = (alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1 / alpha)
    if log_num > 700:  # the bound is vacuous long before exp() overflows
        return 1.0
    return min(math.exp(log_num) / (alpha - 1.0), 1.0)


def cdp_eps(rho: float, delta: float) -> float:
    """Smallest ``eps`` such that ``rho``-zCDP implies ``(eps, delta)``-DP (1000-step bisection on :func:`cdp_delta`).

    The bracket's upper end is the standard bound ``rho + 2 sqrt(rho log(1/delta))`` (Bun & Steinke
    2016, Prop. 1.3).

    Args:
        rho: zCDP parameter, ``>= 0``.
        delta: in ``(0, 1)``.

    Returns:
        epsilon (the upper end of the final bracket, so ``cdp_delta(rho, eps) <= delta``).

    Example:
        >>> round(cdp_eps(cdp_rho(1.0, 1e-9), 1e-9), 6)
        1.0
    """
    where = "cdp_eps"
    rho = check_nonnegative(rho, "rho", where)
    delta = check_delta(delta, where)
    if rho == 0:
        return 0.0
    _, hi, _ = bisect_bracket(0.0, rho + 2 * math.sqrt(rho * math.log(1 / delta)), lambda e: cdp_delta(rho, e) > delta)
    return hi


def cdp_rho(eps: float, delta: float) -> float:
    """Largest ``rho`` such that ``rho``-zCDP implies ``(eps, delta)``-DP (1000-step bisection on ``[0, eps + 1]``).

    Reference values: ``cdp_rho(1, 1e-9) = 1.49731e-2``, ``cdp_rho(1, 1e-5) = 3.05566e-2``.

    Args:
        eps: target epsilon, ``> 0``.
        delta: target delta, in ``(0, 1)``.

    Returns:
        rho (the lower end of the final bracket, so ``cdp_delta(rho, eps) <= delta``).

    Example:
        >>> round(cdp_rho(1.0, 1e-9), 7)
        0.0149731
    """
    where = "cdp_rho"
    eps = check_positive(eps, "eps", where)
    delta = check_delta(delta, where)
    lo, _, _ = bisect_bracket(0.0, eps + 1.0, lambda r: cdp_delta(r, eps) <= delta)
    return lo
