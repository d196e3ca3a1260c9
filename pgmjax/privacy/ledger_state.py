"""An accountant's budget and ledger as a JSON-friendly dict, and back: what a saved release keeps of each stage.

:func:`ledger_state` writes the composition, the budget, the delta, the neighbouring relation and every ledger
record; :func:`from_ledger_state` rebuilds the accountant and restores the records through
:meth:`~pgmjax.privacy.Accountant.restore`, which checks each one (its cost is its noise's, the records fit the
budget), so a file that under-counts is refused, not trusted. Budget plans are not kept.

Example:
    >>> from pgmjax.privacy import Accountant
    >>> acc = Accountant(epsilon=1.0, delta=1e-9, bounded=True)
    >>> again = from_ledger_state(Accountant, ledger_state(acc))
    >>> (again.composition, again.budget, again.delta, again.bounded) == (acc.composition, acc.budget, acc.delta, True)
    True
"""

from __future__ import annotations

__all__ = ["ledger_state", "from_ledger_state"]


def ledger_state(accountant) -> dict:
    """The budget and its ledger: ``composition``, ``budget``, ``delta``, ``bounded``, ``records`` (targets' tuples
    as lists, as JSON holds them)."""
    return {"composition": accountant.composition, "budget": accountant.budget, "delta": accountant.delta,
            "bounded": accountant.bounded, "records": [{**r, "target": _thaw(r["target"])} for r in accountant.records()]}


def from_ledger_state(cls, state: dict):
    """The accountant of class ``cls`` (:class:`~pgmjax.privacy.Accountant`) that :func:`ledger_state` described.

    Raises:
        ValueError: a missing field, or a ledger that does not check (named by its record).
    """
    where = "from_ledger_state"
    try:
        composition, budget, delta = state["composition"], state["budget"], state["delta"]
        bounded, records = state["bounded"], state["records"]
    except (KeyError, TypeError):
        raise ValueError(f"{where}: expected a dict with composition, budget, delta, bounded and records") from None
    if composition == "zcdp":
        out = cls(rho=budget, delta=delta, bounded=bounded)
    elif composition == "pure":
        out = cls(epsilon=budget, bounded=bounded)
    else:
        out = cls(epsilon=budget, delta=delta, bounded=bounded, composition=composition)
    out.restore(records)
    return out


def _thaw(value):
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value
