"""DualQuery's privacy bound and its round solver (Gaboardi, Gallego Arias, Hsu, Roth & Wu 2014).

DualQuery ("Dual query: practical private query release for high dimensional data", ICML 2014) plays
multiplicative weights over the queries against a best-responding data player; round ``t`` samples
``s`` queries from the weights, each an exponential-mechanism draw with ``eps_t = 2 eta (t - 1) / N``
(round 1 reads no data). :func:`dualquery_epsilon` composes those draws (advanced composition,
:mod:`pgmjax.privacy.composition`, in the authors' two forms, or plainly) and :func:`dualquery_rounds`
finds the most rounds a budget allows.

Example:
    >>> T = dualquery_rounds(0.5, eta=1.0, samples=20, records=10_000, delta=1e-6)
    >>> dualquery_epsilon(T, eta=1.0, samples=20, records=10_000, delta=1e-6) <= 0.5
    True
"""

from __future__ import annotations

import numpy as np

from ..checks import check_count, check_delta, check_positive
from .composition import advanced_composition, advanced_composition_hetero

__all__ = ["dualquery_epsilon", "dualquery_rounds"]


_DQ_FORMS = ("b2", "heterogeneous", "pure")


def dualquery_epsilon(rounds: int, *, eta: float, samples: int, records: int, delta: float | None = None, form: str = "b2") -> float:
    """Privacy of DualQuery after ``rounds`` rounds (Gaboardi et al., "Dual query: practical private query release for high dimensional data", ICML 2014).

    A round-``t`` draw is an exponential-mechanism draw with ``eps_t = 2 eta (t - 1) / N`` (round 1
    is free), and each round makes ``s`` draws.

    * ``"b2"`` (default, the authors' ``epsilon_delta_b2``): ``eps0 = 2 eta (T-1) / N`` and
      ``k = s (T-1)`` in :func:`advanced_composition`.
    * ``"heterogeneous"``: :func:`advanced_composition_hetero` of the per-round ``eps_t``
      (``epsilon_delta_core``; tighter).
    * ``"pure"``: ``eta s T (T-1) / N`` (``delta`` unused).

    Args:
        rounds: ``T >= 1``.
        eta: the multiplicative-weights learning rate, ``> 0``.
        samples: ``s``, queries drawn per round.
        records: ``N``, the (public) number of records.
        delta: in ``(0, 1)``, needed unless ``form="pure"``.
        form: ``"b2"``, ``"heterogeneous"`` or ``"pure"``.

    Returns:
        epsilon.

    Example:
        >>> round(dualquery_epsilon(58, eta=2.0, samples=50, records=48842, delta=1e-3), 5)
        0.98854
    """
    where = "dualquery_epsilon"
    T = check_count(rounds, "rounds", where)
    eta = check_positive(eta, "eta", where)
    s = check_count(samples, "samples", where)
    n = check_positive(records, "records", where)
    if form not in _DQ_FORMS:
        raise ValueError(f"{where}: form must be one of {_DQ_FORMS}, got {form!r}")
    if form == "pure":
        return eta * s * T * (T - 1) / n
    if delta is None:
        raise ValueError(f"{where}: form={form!r} needs delta")
    d = check_delta(delta, where)
    if T == 1:
        return 0.0
    if form == "b2":
        return advanced_composition(2 * eta * (T - 1) / n, s * (T - 1), d)
    eps_t = 2 * eta * np.arange(1, T) / n
    return advanced_composition_hetero(eps_t, d, counts=np.full(T - 1, s))


def dualquery_rounds(
    epsilon: float, *, eta: float, samples: int, records: int, delta: float | None = None, form: str = "b2", max_rounds: int = 10**7
) -> int:
    """Largest number of DualQuery rounds ``T`` with :func:`dualquery_epsilon` ``<= epsilon`` (Gaboardi et al. 2014).

    Args:
        epsilon: the target, ``> 0``.
        eta, samples, records, delta, form: as in :func:`dualquery_epsilon`.
        max_rounds: search limit.

    Returns:
        ``T >= 1`` (``1`` when even two rounds cost too much: round 1 reads no data).

    Example:
        >>> dualquery_rounds(1.0, eta=2.0, samples=50, records=48842, delta=1e-3)
        58
    """
    where = "dualquery_rounds"
    target = check_positive(epsilon, "epsilon", where)
    limit = check_count(max_rounds, "max_rounds", where)

    def fits(T):
        return dualquery_epsilon(T, eta=eta, samples=samples, records=records, delta=delta, form=form) <= target

    fits(1)  # validates every argument before the search
    lo, hi = 1, 2
    while hi <= limit and fits(hi):  # eps(T) increases with T: double, then bisect
        lo, hi = hi, 2 * hi
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
