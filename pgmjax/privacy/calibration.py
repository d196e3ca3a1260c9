"""Costs of the primitive mechanisms: noise scale from a budget, and budget from a noise scale.

The textbook calibrations, for answers whose sensitivity is already known (the floating-point-safe
releases add the lattice's share first: :func:`pgmjax.privacy.lattice.lattice_plan`):

* Laplace, ``eps``-DP: ``b = Delta1 / eps`` (Dwork, McSherry, Nissim & Smith 2006, "Calibrating noise
  to sensitivity in private data analysis", TCC, Proposition 1).
* Gaussian, ``rho``-zCDP: ``sigma = Delta2 / sqrt(2 rho)`` (Bun & Steinke 2016, "Concentrated
  differential privacy: simplifications, extensions, and lower bounds", TCC, Proposition 1.6).
* Any ``eps``-DP mechanism is ``eps^2 / 2``-zCDP (Bun & Steinke 2016, Proposition 1.4); the
  exponential mechanism is ``eps^2 / 8``-zCDP (Cesar & Rogers 2021, "Bounding, concentrating, and
  truncating: unifying privacy loss composition for data analytics", ALT).

Example:
    >>> gaussian_rho(1.0, gaussian_sigma(1.0, 0.5))
    0.5
"""

from __future__ import annotations

import math

from ..checks import check_positive

__all__ = ["laplace_scale", "laplace_epsilon", "gaussian_sigma", "gaussian_rho", "exponential_rho", "pure_dp_rho"]


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Laplace scale ``b = Delta1 / eps`` for an ``eps``-DP release (Dwork, McSherry, Nissim, Smith 2006).

    Args:
        sensitivity: L1 sensitivity ``Delta1 > 0``.
        epsilon: the privacy parameter, ``> 0``.

    Returns:
        The Laplace scale ``b``.

    Example:
        >>> laplace_scale(2.0, 0.5)
        4.0
    """
    where = "laplace_scale"
    return check_positive(sensitivity, "sensitivity", where) / check_positive(epsilon, "epsilon", where)


def laplace_epsilon(sensitivity: float, scale: float) -> float:
    """The ``eps = Delta1 / b`` of Laplace noise of scale ``b`` on an L1-sensitivity-``Delta1`` query.

    Args:
        sensitivity: L1 sensitivity ``Delta1 > 0``.
        scale: the Laplace scale ``b > 0``.

    Returns:
        epsilon.

    Example:
        >>> laplace_epsilon(1.0, 4.0)
        0.25
    """
    where = "laplace_epsilon"
    return check_positive(sensitivity, "sensitivity", where) / check_positive(scale, "scale", where)


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """Noise std ``sigma = Delta2 / sqrt(2 rho)`` for a ``rho``-zCDP Gaussian release (Bun & Steinke 2016, Prop. 1.6).

    Args:
        sensitivity: L2 sensitivity ``Delta2 > 0``.
        rho: the zCDP budget, ``> 0``.

    Returns:
        The noise standard deviation ``sigma``.

    Example:
        >>> gaussian_sigma(1.0, 0.5)
        1.0
    """
    where = "gaussian_sigma"
    return check_positive(sensitivity, "sensitivity", where) / math.sqrt(2.0 * check_positive(rho, "rho", where))


def gaussian_rho(sensitivity: float, sigma: float) -> float:
    """The ``rho = Delta2^2 / (2 sigma^2)`` (zCDP) of Gaussian noise ``N(0, sigma^2)`` (Bun & Steinke 2016, Prop. 1.6).

    Args:
        sensitivity: L2 sensitivity ``Delta2 > 0``.
        sigma: the noise standard deviation, ``> 0``.

    Returns:
        rho.

    Example:
        >>> gaussian_rho(1.0, 10.0)
        0.005
    """
    where = "gaussian_rho"
    d = check_positive(sensitivity, "sensitivity", where)
    s = check_positive(sigma, "sigma", where)
    return d * d / (2.0 * s * s)


def exponential_rho(epsilon: float) -> float:
    """zCDP cost ``eps^2 / 8`` of one ``eps``-DP exponential-mechanism draw.

    The exponential mechanism is ``eps``-bounded-range, which implies ``eps^2/8``-zCDP (Cesar &
    Rogers, "Bounding, concentrating, and truncating", ALT 2021).

    Args:
        epsilon: the draw's epsilon, ``> 0``.

    Returns:
        rho.

    Example:
        >>> exponential_rho(2.0)
        0.5
    """
    e = check_positive(epsilon, "epsilon", "exponential_rho")
    return e * e / 8.0


def pure_dp_rho(epsilon: float) -> float:
    """zCDP cost ``eps^2 / 2`` of any ``eps``-DP mechanism, e.g. Laplace (Bun & Steinke 2016, Prop. 1.4).

    Args:
        epsilon: the mechanism's epsilon, ``> 0``.

    Returns:
        rho.

    Example:
        >>> pure_dp_rho(1.0)
        0.5
    """
    e = check_positive(epsilon, "epsilon", "pure_dp_rho")
    return e * e / 2.0
