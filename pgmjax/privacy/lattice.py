"""Planning floating-point-safe releases: the public lattice, and the noise scale that pays for rounding to it.

Mironov ("On significance of the least significant bits for differential privacy", CCS 2012) showed
that textbook floating-point Laplace noise leaks through its low-order bits. A release here is an
integer, or a real answer rounded to a public lattice ``gamma * Z``, plus exact discrete Laplace or
discrete Gaussian noise (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for differential
privacy", NeurIPS; :mod:`pgmjax.privacy.discrete_noise`). Rounding ``size`` answers moves them by at most
``size * gamma`` in L1 (``sqrt(size) * gamma`` in L2), so :func:`lattice_plan` enlarges the sensitivity
by that much and calibrates the noise to the enlarged sensitivity: the privacy cost stays exactly the
budget asked for. :func:`lattice_release` draws the noise.

Example:
    >>> plan = lattice_plan("laplace", 1.0, 3, integer=True, epsilon=0.5)
    >>> plan["scale"], plan["lattice"], plan["sensitivity"]
    (2.0, 1.0, 1.0)
"""

from __future__ import annotations

import math

import numpy as np

from . import discrete_noise as dn

__all__ = ["lattice_plan", "lattice_release"]


def lattice_plan(family: str, sensitivity: float, size: int, integer: bool, *, epsilon=None, rho=None, scale=None) -> dict:
    """Calibrate a lattice release: ``{"scale", "lattice", "sensitivity" (with the rounding's share), ...}``.

    The lattice comes from the sensitivity, the size and the noise scale the budget asks for (all
    public); the scale is then calibrated to the enlarged sensitivity, so the cost is exactly the budget.
    Laplace: ``b = (Delta1 + size gamma) / eps`` (pure DP; Dwork et al. 2006). Gaussian:
    ``sigma = (Delta2 + sqrt(size) gamma) / sqrt(2 rho)`` rounded one ulp up (zCDP; Bun & Steinke 2016,
    Proposition 1.6, for the discrete Gaussian by Canonne, Kamath & Steinke 2020, Theorem 14). The
    caller has checked every argument.

    Args:
        family: ``"laplace"`` or ``"gaussian"``.
        sensitivity: L1 (Laplace) or L2 (Gaussian) sensitivity of the exact answers, ``> 0``.
        size: the number of answers.
        integer: the answers are integers for every dataset (lattice 1, nothing added).
        epsilon: the Laplace budget; or rho: the Gaussian (zCDP) budget; or scale: the noise scale itself.

    Returns:
        ``{"scale": noise scale, "lattice": gamma, "sensitivity": the enlarged sensitivity, "integer": integer}``.

    Example:
        >>> p = lattice_plan("gaussian", 1.0, 4, integer=False, rho=0.5)
        >>> p["sensitivity"] == 1.0 + 2 * p["lattice"], p["scale"] > p["sensitivity"]
        (True, True)
    """
    if family == "laplace":
        base = scale if scale is not None else sensitivity / epsilon
    else:
        base = scale if scale is not None else sensitivity / math.sqrt(2.0 * rho)
    gamma = dn.lattice_spacing(base, sensitivity, size, integer)
    added = 0.0 if integer else (size * gamma if family == "laplace" else math.sqrt(size) * gamma)
    d = sensitivity + added
    if scale is not None:
        s = scale
    elif family == "laplace":  # the sampler rounds b strictly up (discrete_laplace): d / b_real < epsilon
        s = d / epsilon
    else:  # one ulp up: the realised d^2 / (2 sigma^2) never exceeds the rho asked for
        s = math.nextafter(d / math.sqrt(2.0 * rho), math.inf)
    return {"scale": s, "lattice": gamma, "sensitivity": d, "integer": integer}


def lattice_release(key, x: np.ndarray, family: str, plan: dict) -> np.ndarray:
    """Draw a planned lattice release: ``x`` rounded to the plan's lattice plus exact discrete noise.

    Args:
        key: a ``jax.random`` key (the noise is a fixed function of it).
        x: the exact answers, float64, any shape.
        family: ``"laplace"`` or ``"gaussian"``.
        plan: a :func:`lattice_plan` (or a dict with its ``scale``, ``lattice`` and ``integer`` keys).

    Returns:
        The noisy answers, float64, the shape of ``x``, every one on the lattice.

    Example:
        >>> plan = lattice_plan("laplace", 1.0, 2, integer=True, epsilon=1.0)
        >>> y = lattice_release(jax.random.key(0), np.array([3.0, 5.0]), "laplace", plan)
        >>> bool(np.all(y == np.round(y)))
        True
    """
    rel = dn.lattice_noise(

        dn.generator(key), x, family=family, scale=plan["scale"], gamma=plan["lattice"], integer=plan["integer"]
    )
    return rel.values
