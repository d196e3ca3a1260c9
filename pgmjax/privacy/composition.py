"""Advanced composition: the epsilon of ``k`` adaptively composed pure-DP mechanisms at a chosen ``delta``.

Dwork, Rothblum & Vadhan 2010 ("Boosting and differential privacy", FOCS, Theorem III.3): ``k``
mechanisms, each ``epsilon0``-DP, compose to ``(eps, delta)``-DP with
``eps = epsilon0 sqrt(2 k ln(1/delta)) + k epsilon0 (e^epsilon0 - 1)`` (:func:`advanced_composition`);
the same Azuma argument with per-step bounds gives the heterogeneous form
``sqrt(2 ln(1/delta) sum_i eps_i^2) + sum_i eps_i (e^eps_i - 1)`` (:func:`advanced_composition_hetero`),
and :func:`advanced_composition_inverse` finds the per-step ``epsilon0`` that a total allows. Plain
summation ``k epsilon0`` (basic composition) also holds and is smaller for few mechanisms; the
:class:`~pgmjax.privacy.Accountant` takes the smaller of the two.

:func:`compose_ledgers` composes whole ledgers (a release's stages, each with its own accountant).

Example:
    >>> e0 = advanced_composition_inverse(1.0, 100, 1e-6)
    >>> advanced_composition(e0, 100, 1e-6) <= 1.0 < 100 * e0
    True
"""

from __future__ import annotations

import math

import numpy as np

from ..checks import check_count, check_delta, check_positive, check_values
from .conversions import bisect_bracket, cdp_eps

__all__ = ["advanced_composition", "advanced_composition_hetero", "advanced_composition_inverse", "compose_ledgers"]


def advanced_composition(epsilon0: float, k: int, delta: float) -> float:
    """Epsilon of ``k`` adaptively composed ``epsilon0``-DP mechanisms, at ``delta`` (advanced composition).

    Dwork, Rothblum, Vadhan, "Boosting and differential privacy", FOCS 2010, Theorem III.3:
    ``eps = epsilon0 sqrt(2 k ln(1/delta)) + k epsilon0 (e^epsilon0 - 1)``. (Plain summation
    ``k epsilon0`` is also valid and smaller for small ``k``.)

    Args:
        epsilon0: epsilon of each mechanism, ``> 0``.
        k: number of mechanisms, ``>= 0``.
        delta: in ``(0, 1)``.

    Returns:
        The composed epsilon (with that delta).

    Example:
        >>> round(advanced_composition(0.1, 10, 1e-5), 6)
        1.622598
    """
    where = "advanced_composition"
    e = check_positive(epsilon0, "epsilon0", where)
    k = check_count(k, "k", where, minimum=0)
    d = check_delta(delta, where)
    if e > 700:  # e^e overflows; the bound is astronomically above the plain sum k e anyway
        return math.inf
    return e * math.sqrt(2 * k * math.log(1 / d)) + k * e * math.expm1(e)


def advanced_composition_hetero(epsilons, delta: float, counts=None) -> float:
    """Advanced composition of mechanisms with different epsilons.

    ``eps = sqrt(2 ln(1/delta) sum_i eps_i^2) + sum_i eps_i (e^eps_i - 1)``: the Azuma argument of
    Dwork-Rothblum-Vadhan with per-step bounds (the heterogeneous form of DualQuery's reference code, ``epsilon_delta_core``
    of the DualQuery authors' code). Equal epsilons reduce to :func:`advanced_composition`.

    Args:
        epsilons: 1-D array of the mechanisms' epsilons (each ``> 0``).
        delta: in ``(0, 1)``.
        counts: optional multiplicities (how many mechanisms have each epsilon).

    Returns:
        The composed epsilon.

    Example:
        >>> advanced_composition_hetero([0.1], 1e-5, counts=[10]) == advanced_composition(0.1, 10, 1e-5)
        True
    """
    where = "advanced_composition_hetero"
    e = check_values(epsilons, where, "epsilons").reshape(-1)
    if e.size == 0:
        raise ValueError(f"{where}: epsilons is empty")
    if np.any(e <= 0):
        raise ValueError(f"{where}: every epsilon must be positive, got {e[e <= 0][0]!r}")
    d = check_delta(delta, where)
    if counts is None:
        c = np.ones_like(e)
    else:
        c = check_values(counts, where, "counts").reshape(-1)
        if c.shape != e.shape or np.any(c < 0) or np.any(c != np.round(c)):
            raise ValueError(f"{where}: counts must be non-negative integers, one per epsilon")
    if e.size and e.max() > 700:  # as in advanced_composition: overflow means the bound is useless, not an error
        return math.inf
    return math.sqrt(2 * math.log(1 / d) * math.fsum(c * e * e)) + math.fsum(c * e * np.expm1(e))


def advanced_composition_inverse(epsilon: float, k: int, delta: float) -> float:
    """Largest per-mechanism ``epsilon0`` such that ``k`` of them compose to at most ``(epsilon, delta)``.

    Inverts :func:`advanced_composition` (increasing in ``epsilon0``) by bisection.

    Args:
        epsilon: the total epsilon, ``> 0``.
        k: number of mechanisms, ``>= 1``.
        delta: in ``(0, 1)``.

    Returns:
        ``epsilon0`` with ``advanced_composition(epsilon0, k, delta) <= epsilon``.

    Example:
        >>> round(advanced_composition_inverse(1.622598, 10, 1e-5), 6)
        0.1
    """
    where = "advanced_composition_inverse"
    total = check_positive(epsilon, "epsilon", where)
    k = check_count(k, "k", where)
    d = check_delta(delta, where)

    def f(e):
        if e > 700:  # e^e overflows: far above any budget
            return math.inf
        return e * math.sqrt(2 * k * math.log(1 / d)) + k * e * math.expm1(e)

    hi = total
    while f(hi) <= total:  # f can be below the identity when 2 k ln(1/delta) < 1
        hi *= 2
    lo, _, _ = bisect_bracket(0.0, hi, lambda e: f(e) <= total)
    return lo


def compose_ledgers(ledgers, delta: float | None = None) -> tuple[float, float]:
    """The ``(epsilon, delta)``-DP guarantee of several accountants' spends on the same data, composed.

    Where every ledger counts zCDP, their rhos add (Bun & Steinke 2016, "Concentrated differential privacy:
    simplifications, extensions, and lower bounds", TCC, Lemma 2.3) and the sum is reported at ``delta``
    (Canonne, Kamath & Steinke 2020, Proposition 12; :func:`pgmjax.privacy.cdp_eps`). Otherwise each ledger's own
    guarantee (:meth:`~pgmjax.privacy.Accountant.epsilon_delta`, a zCDP one at ``delta``) is composed by basic
    composition: the epsilons add and so do the deltas (Dwork & Roth 2014, "The algorithmic foundations of
    differential privacy", Theorem 3.16). The composition is adaptive: a later ledger may depend on what an earlier
    one released.

    Args:
        ledgers: accountants (:class:`~pgmjax.privacy.Accountant`), in any order.
        delta: the delta to report zCDP spends at (default: the first zCDP ledger's own delta).

    Returns:
        ``(epsilon, delta)``.

    Raises:
        ValueError: no ledgers, or zCDP spends with no delta to report them at.

    Example:
        >>> import jax
        >>> from pgmjax.privacy import Accountant, REST, cdp_eps
        >>> a, b = Accountant(rho=0.1), Accountant(epsilon=1.0, delta=1e-6)
        >>> _ = a.gaussian(jax.random.key(0), [0.0], 1.0, rho=REST)
        >>> _ = b.gaussian(jax.random.key(1), [0.0], 1.0, rho=REST)
        >>> eps, d = compose_ledgers([a, b])
        >>> eps == cdp_eps(0.1 + b.budget, 1e-6), d
        (True, 1e-06)
    """
    where = "compose_ledgers"
    ledgers = list(ledgers)
    if not ledgers:
        raise ValueError(f"{where}: no ledgers to compose")
    if delta is None:
        delta = next((g.delta for g in ledgers if g.composition == "zcdp" and g.delta is not None), None)
    if any(g.composition == "zcdp" for g in ledgers) and delta is None:
        raise ValueError(f"{where}: zCDP spends need a delta to be reported at; pass delta=")
    if all(g.composition == "zcdp" for g in ledgers):
        return float(cdp_eps(math.fsum(g.spent for g in ledgers), delta)), float(delta)
    pairs = [g.epsilon_delta(delta) if g.composition == "zcdp" else g.epsilon_delta() for g in ledgers]
    return math.fsum(e for e, _ in pairs), math.fsum(d for _, d in pairs)
