"""How a release's one budget is shared between private preprocessing and the mechanism.

A raw table's schema (bins, categories, kinds) is derived privately before the mechanism runs
(:mod:`pgmjax.preprocessing.preprocess`), inside the one budget the user gives. :func:`split_budget` gives the
preprocessing a fraction of it: of ``rho = cdp_rho(eps, delta)`` for the zCDP mechanisms (MST, AIM; the mechanism
then gets ``eps' = cdp_eps((1 - f) rho, delta)``, so that the two rhos add up to the budget: Bun & Steinke 2016,
Lemma 2.3), of ``epsilon`` for the others (basic composition, Dwork & Roth 2014, Theorem 3.16). The preprocessing
is charged under the mechanism's neighbouring relation (:func:`neighbouring`), since the two guarantees add only
when both hold for the same neighbours. The command line (``pgmjax run`` on raw data) and
:class:`pgmjax.Synthesizer` share these.
"""

from __future__ import annotations

from typing import NamedTuple

from . import registry

__all__ = ["Split", "FIXED_NEIGHBOURS", "neighbouring", "split_budget"]


class Split(NamedTuple):
    """How a run's budget is shared between the preprocessing and the mechanism.

    Attributes:
        accountant: the preprocessing's :class:`~pgmjax.privacy.Accountant` (its budget is its share).
        epsilon: the mechanism's epsilon.
        delta: the mechanism's delta (None where it takes none).
        text: one line for the summary.
    """

    accountant: object
    epsilon: float
    delta: float | None
    text: str


#: Front-ends whose neighbouring relation is fixed rather than an option: DualQuery's accountant is replace-one.
FIXED_NEIGHBOURS = {"dualquery": True}


def neighbouring(mechanism: str, options: dict | None = None) -> bool:
    """The mechanism's neighbouring relation as the run will use it: True for replace-one (``bounded``).

    A front-end with a ``bounded`` option uses the value given (``options["bounded"]``), else the
    command line's default for it (:attr:`~pgmjax.mechanisms.registry.Mechanism.cli_defaults`), else the
    function's default (True for ``rr_synthetic``, False for the others); one without it uses its fixed
    relation (:data:`FIXED_NEIGHBOURS`; add/remove for the rest).

    Args:
        mechanism: a registry name.
        options: the front-end's keyword arguments (``--option`` values and defaults), as the run passes them.

    Raises:
        ValueError: ``bounded`` is given but is not true or false (before anything is read).

    Example:
        >>> neighbouring("rr_synthetic"), neighbouring("privbayes"), neighbouring("privbayes", {"bounded": True})
        (True, False, True)
        >>> neighbouring("dualquery"), neighbouring("mst")
        (True, False)
    """
    import inspect


    entry = registry.get(mechanism)
    param = inspect.signature(entry.function).parameters.get("bounded")
    if param is None:
        return FIXED_NEIGHBOURS.get(entry.name, False)
    options = dict(options or {})
    value = options.get("bounded", entry.cli_defaults.get("bounded", param.default))
    if not isinstance(value, bool):
        raise ValueError(f"{entry.name}: bounded must be true or false, got {value!r}")
    return value


def split_budget(mechanism: str, epsilon: float, delta: float | None, fraction: float, *, bounded: bool = False) -> Split:
    """Share ``(epsilon, delta)`` between the preprocessing (``fraction``) and the mechanism.

    Args:
        mechanism: a registry name (its ``privacy`` kind decides the currency of the split).
        epsilon, delta: the whole run's budget as given.
        fraction: the preprocessing's share, in (0, 1).
        bounded: the mechanism's neighbouring relation (:func:`neighbouring`): the preprocessing's
            accountant uses the same one, so both guarantees hold for the same neighbours and compose.

    Returns:
        A :class:`Split`.

    Example:
        >>> s = split_budget("privbayes", 1.0, None, 0.25)
        >>> s.accountant.budget, s.epsilon, s.accountant.bounded
        (0.25, 0.75, False)
        >>> split_budget("rr_synthetic", 1.0, None, 0.1, bounded=True).accountant.bounded
        True
    """
    from ..privacy import Accountant, cdp_eps, cdp_rho

    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the preprocessing's fraction of the budget must lie in (0, 1), got {fraction}")
    bounded = bool(bounded)
    neighbours = "replace-one" if bounded else "add/remove"
    if registry.get(mechanism).privacy == "zcdp":
        d = registry.DEFAULT_DELTA if delta is None else delta
        rho = cdp_rho(epsilon, d)
        eps_mech = float(cdp_eps((1 - fraction) * rho, d))
        acc = Accountant(rho=fraction * rho, bounded=bounded)
        text = (f"preprocessing rho={fraction * rho:.4g} ({100 * fraction:g}% of rho={rho:.4g}), "
                f"mechanism eps={eps_mech:.4g} at delta={d:g} (the rest of rho); {neighbours} neighbours")
        return Split(acc, eps_mech, d, text)
    acc = Accountant(epsilon=fraction * epsilon, bounded=bounded)
    text = (f"preprocessing eps={fraction * epsilon:.4g} ({100 * fraction:g}%), mechanism eps={(1 - fraction) * epsilon:.4g}; "
            f"{neighbours} neighbours")
    return Split(acc, (1 - fraction) * epsilon, delta, text)


