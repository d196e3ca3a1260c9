"""A privacy budget and its ledger: composition, costing, the budget check and the reports; no noise.

:class:`BudgetLedger` is the bookkeeping half of :class:`~pgmjax.privacy.Accountant` (which adds the
mechanisms): it holds the run's budget in one currency, prices each request, refuses a request that
would overspend (:class:`PrivacyBudgetExceeded`, before any noise is drawn), records a
:class:`~pgmjax.privacy.ledger.LedgerEntry` per release and reports the spend. The compositions:

* ``"pure"``: costs add in epsilon (basic composition; Dwork, McSherry, Nissim & Smith 2006).
* ``"zcdp"``: costs add in rho (Bun & Steinke 2016, "Concentrated differential privacy", Lemma 1.7);
  an ``(epsilon, delta)`` target becomes ``rho = cdp_rho(epsilon, delta)`` (Canonne, Kamath & Steinke
  2020, Section 2.3; :mod:`pgmjax.privacy.conversions`).
* ``"advanced"`` / ``"advanced_heterogeneous"``: the smaller of the plain sum and advanced composition
  (Dwork, Rothblum & Vadhan 2010, Theorem III.3; :mod:`pgmjax.privacy.composition`).

Each request is calibrated on its lattice (:func:`pgmjax.privacy.lattice.lattice_plan`), so a recorded
cost is the cost of the floating-point-safe release actually drawn.

Example:
    >>> b = BudgetLedger(epsilon=1.0, delta=1e-9)
    >>> b.currency, round(b.budget, 7), b.cost("gaussian", sensitivity=1.0, rho=0.005)
    ('rho', 0.0149731, 0.005)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

from ..checks import check_bool, check_count, check_delta, check_positive, exactly_one
from .composition import advanced_composition, advanced_composition_hetero
from .conversions import cdp_eps, cdp_rho
from .lattice import lattice_plan
from .ledger import BudgetPlan, LedgerEntry, checked_entries, freeze_target
from .sensitivity import l1_sensitivity, l2_sensitivity

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["REST", "PrivacyBudgetExceeded", "BudgetLedger"]


#: Pass as ``epsilon=REST`` or ``rho=REST`` to spend exactly what is left of an accountant's budget.
REST = "rest"

# Relative slack when checking a request against the budget: splitting a budget into k equal float
# parts and spending them all can overshoot the exact budget by a few ulps.
_RTOL = 1e-9

_COMPOSITIONS = ("pure", "zcdp", "advanced", "advanced_heterogeneous")
_MECHANISMS = ("laplace", "gaussian", "exponential", "randomized_response")


class PrivacyBudgetExceeded(ValueError):
    """A mechanism asked for more privacy budget than the accountant has left. Nothing was run."""


class BudgetLedger:
    """The budget of one run and the ledger that spends it (the bookkeeping of an :class:`~pgmjax.privacy.Accountant`).

    Construction, currency, spend, composition, costing, the budget check and the reports; it draws
    no noise. Front-ends use :class:`~pgmjax.privacy.Accountant`, which adds the mechanisms; the
    arguments (``epsilon``, ``delta``, ``rho``, ``bounded``, ``composition``) are the Accountant's, documented there.

    Example:
        >>> b = BudgetLedger(rho=0.5)
        >>> b.summary()["remaining"], b.ledger
        (0.5, ())
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        bounded: bool = False,
        composition: str | None = None,
    ):
        where = "Accountant"
        self._bounded = check_bool(bounded, "bounded", where)
        if composition is not None and composition not in _COMPOSITIONS:
            raise ValueError(f"{where}: composition must be one of {_COMPOSITIONS}, got {composition!r}")
        if epsilon is not None and rho is not None:
            raise ValueError(f"{where}: give a budget as epsilon= (with optional delta=) or as rho=, not both")
        if epsilon is None and rho is None:
            raise ValueError(f"{where}: give a budget: epsilon= (pure DP), epsilon= and delta=, or rho= (zCDP)")
        eps = check_positive(epsilon, "epsilon", where) if epsilon is not None else None
        dlt = check_delta(delta, where) if delta is not None else None
        if composition is None:
            composition = "pure" if (eps is not None and dlt is None) else "zcdp"
        if composition == "pure":
            if eps is None or dlt is not None:
                raise ValueError(f"{where}: composition='pure' takes epsilon= alone (no delta=, no rho=)")
            budget = eps
        elif composition == "zcdp":
            if rho is not None:
                budget = check_positive(rho, "rho", where)
            else:
                if dlt is None:  # unreachable by the default rule; explicit 'zcdp' with epsilon alone
                    raise ValueError(f"{where}: composition='zcdp' needs rho=, or epsilon= and delta=")
                budget = cdp_rho(eps, dlt)
        else:
            if eps is None or dlt is None:
                raise ValueError(f"{where}: composition={composition!r} needs epsilon= and delta=")
            budget = eps
        self._composition = composition
        self._budget = float(budget)
        self._delta = dlt
        self._entries: list[LedgerEntry] = []
        self._plans: list[BudgetPlan] = []

    # Budget ------------------------------------------------------------------------------------
    @property
    def composition(self) -> str:
        """``"pure"``, ``"zcdp"``, ``"advanced"`` or ``"advanced_heterogeneous"``."""
        return self._composition

    @property
    def currency(self) -> str:
        """``"rho"`` under zCDP, else ``"epsilon"``: the unit of :attr:`budget`, :attr:`spent`, costs."""
        return "rho" if self._composition == "zcdp" else "epsilon"

    @property
    def bounded(self) -> bool:
        """True for replace-one neighbours (``N`` public), False for add/remove-one (``N`` private)."""
        return self._bounded

    @property
    def delta(self) -> float | None:
        """The delta given at construction (None for pure DP)."""
        return self._delta

    @property
    def budget(self) -> float:
        """The whole budget, in :attr:`currency`."""
        return self._budget

    @property
    def spent(self) -> float:
        """What the ledger has spent, in :attr:`currency` (composed, under advanced composition)."""
        return self._spent_with()

    @property
    def remaining(self) -> float:
        """``budget - spent``, never negative."""
        return max(self._budget - self.spent, 0.0)

    @property
    def exhausted(self) -> bool:
        """Whether the budget is spent (up to the 1e-9 relative slack)."""
        return self.spent >= self._budget * (1 - _RTOL)

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """Every noise addition so far, in order."""
        return tuple(self._entries)

    @property
    def plans(self) -> tuple[BudgetPlan, ...]:
        """The budget plans recorded by :meth:`record_plan`, in order (one per front-end run on this budget)."""
        return tuple(self._plans)

    def record_plan(self, plan: BudgetPlan) -> BudgetPlan:
        """Record how a front-end will split (part of) this budget, before it spends it.

        Args:
            plan: a :class:`~pgmjax.privacy.ledger.BudgetPlan` in this accountant's currency and composition,
                whose total (its budget) is at most this budget.

        Returns:
            ``plan``.

        Raises:
            TypeError / ValueError: not a plan, another currency or composition, or a plan larger than the budget.

        Example:
            >>> from pgmjax.privacy import Accountant, BudgetPlan, BudgetStep
            >>> acc = Accountant(epsilon=1.0)
            >>> plan = BudgetPlan.of("demo", "epsilon", 1.0, [BudgetStep("all", "laplace", 1.0)], composition="pure",
            ...                      epsilon=1.0, delta=0.0)
            >>> acc.record_plan(plan) is plan, len(acc.plans)
            (True, 1)
        """
        where = "Accountant.record_plan"
        if not isinstance(plan, BudgetPlan):
            raise TypeError(f"{where}: expected a BudgetPlan, got {type(plan).__name__}")
        if plan.currency != self.currency or plan.composition != self._composition:
            raise ValueError(
                f"{where}: the plan counts {plan.currency} under {plan.composition!r}; this accountant counts "
                f"{self.currency} under {self._composition!r}"
            )
        if plan.total > self._budget * (1 + _RTOL):
            raise ValueError(f"{where}: the plan spends {plan.total:.6g} {self.currency}, more than the budget {self._budget:.6g}")
        self._plans.append(plan)
        return plan

    def restore(self, records: Sequence[dict]) -> None:
        """Continue a checkpointed run from its ledger :meth:`records`, each checked (:func:`~pgmjax.privacy.ledger.checked_entries`)."""
        before, self._entries = self._entries, checked_entries(records, self._composition, self._budget, len(self._entries))
        if (spent := self.spent) > self._budget * (1 + _RTOL):  # an advanced composition's spend, checked composed
            self._entries = before
            raise ValueError(f"Accountant.restore: the records spend {spent:.6g}, more than the budget {self._budget:.6g}")

    def _spent_with(self, extras: Sequence[dict] = ()) -> float:
        """Spent, counting also ``extras`` (resolved requests, not recorded)."""
        rows = [(e.cost, e.epsilon, e.count) for e in self._entries if e.mechanism != "public"]  # public: no release
        rows += [(p["cost"], p["epsilon"], p["count"]) for p in extras]
        basic = math.fsum(r[0] for r in rows)
        if self._composition in ("pure", "zcdp") or not rows:
            return basic
        eps, counts = [r[1] for r in rows], [r[2] for r in rows]
        if self._composition == "advanced":
            adv = advanced_composition(max(eps), int(sum(counts)), self._delta)
        else:
            adv = advanced_composition_hetero(eps, self._delta, counts=counts)
        # Both bounds hold; plain summation wins for few draws.
        return min(basic, adv)

    def epsilon_delta(self, delta: float | None = None) -> tuple[float, float]:
        """The ``(epsilon, delta)``-DP guarantee of what has been spent so far.

        Args:
            delta: under zCDP, the delta to report at (default: the one given at construction);
                must be None otherwise.

        Returns:
            ``(epsilon, delta)``: ``(spent, 0)`` for pure DP, ``(cdp_eps(spent, delta), delta)``
            under zCDP, ``(spent, delta)`` under advanced composition.
        """
        where = "Accountant.epsilon_delta"
        if self._composition == "pure":
            if delta is not None:
                raise ValueError(f"{where}: a pure-DP accountant reports (epsilon, 0); do not pass delta")
            return self.spent, 0.0
        if self._composition == "zcdp":
            d = check_delta(delta, where) if delta is not None else self._delta
            if d is None:
                raise ValueError(f"{where}: this accountant was built from rho alone; pass delta=")
            return cdp_eps(self.spent, d), d
        if delta is not None and check_delta(delta, where) != self._delta:
            raise ValueError(f"{where}: advanced composition was set up for delta={self._delta}; got {delta}")
        return self.spent, self._delta

    # Sensitivities -----------------------------------------------------------------------------
    def l1_sensitivity(self, query=None) -> float:
        """:func:`l1_sensitivity` under this accountant's convention (e.g. of an EM quality ``||mu_C(D) - v||_1``)."""
        return l1_sensitivity(query, bounded=self._bounded)

    def l2_sensitivity(self, query=None) -> float:
        """:func:`l2_sensitivity` under this accountant's convention."""
        return l2_sensitivity(query, bounded=self._bounded)

    # Costing -----------------------------------------------------------------------------------
    def _allowed(self, mechanism: str, where: str) -> None:
        if mechanism not in _MECHANISMS:
            raise ValueError(f"{where}: unknown mechanism {mechanism!r}; known: {_MECHANISMS}")
        if mechanism == "gaussian" and self._composition != "zcdp":
            raise ValueError(f"{where}: Gaussian noise is not pure DP; this accountant uses composition={self._composition!r}. "
                             "Build it with rho= or with epsilon= and delta= (zCDP), or use Laplace noise")

    def _resolve(
        self, mechanism: str, where: str, sensitivity, count: int, epsilon=None, rho=None, scale=None, size: int = 1, integer: bool = True
    ) -> dict:
        """Calibrate one request: its noise scale, per-draw epsilon/rho and total cost (no budget check).

        Laplace and Gaussian releases of ``size`` answers are calibrated on their lattice
        (:func:`lattice_plan`): for non-``integer`` answers the sensitivity includes what rounding adds.
        """
        self._allowed(mechanism, where)
        d = check_positive(sensitivity, "sensitivity", where)
        given = {"epsilon": epsilon, "rho": rho}
        if mechanism == "laplace":
            given["scale"] = scale
        elif mechanism == "gaussian":
            if epsilon is not None:
                raise ValueError(f"{where}: calibrate Gaussian noise with rho= or sigma=/scale= (zCDP), not epsilon=")
            given = {"rho": rho, "scale": scale}
        elif scale is not None:
            raise ValueError(f"{where}: the {mechanism} mechanism is calibrated by epsilon= (or rho= under zCDP), not scale=")
        name, value = exactly_one(where, **given)
        zcdp = self._composition == "zcdp"
        if name == "rho" and not zcdp:
            raise ValueError(f"{where}: this accountant counts epsilon (composition={self._composition!r}); give epsilon=")
        rest = isinstance(value, str)
        if rest:
            if value != REST:
                raise ValueError(f"{where}: {name} must be a number or {REST!r}, got {value!r}")
            if name == "scale":
                raise ValueError(f"{where}: {REST!r} is a budget; give it as epsilon= or rho=")
            cost = self._rest_cost(where, mechanism)
            # The rest, per draw, in the accountant's currency; calibrated below like any budget.
            name, v = ("rho" if zcdp else "epsilon"), cost / count
        else:
            cost = None
            v = check_positive(value, name, where)
        lattice = None
        if mechanism == "gaussian":
            plan = lattice_plan("gaussian", d, size, integer, **({"rho": v} if name == "rho" else {"scale": v}))
            s, d, lattice = plan["scale"], plan["sensitivity"], plan["lattice"]
            r = v if name == "rho" else d * d / (2.0 * s * s)
            e = None
        elif mechanism == "laplace":
            e = v if name == "epsilon" else (math.sqrt(2.0 * v) if name == "rho" else None)
            plan = lattice_plan("laplace", d, size, integer, **({"scale": v} if e is None else {"epsilon": e}))
            s, d, lattice = plan["scale"], plan["sensitivity"], plan["lattice"]
            e = d / s if e is None else e
            r = e * e / 2.0  # zCDP of one eps-DP draw
        elif mechanism == "randomized_response":
            e = v if name == "epsilon" else math.sqrt(2.0 * v)  # pure eps-DP: eps^2/2-zCDP
            r = v if name == "rho" else e * e / 2.0
            s = None
        else:
            e = v if name == "epsilon" else math.sqrt(8.0 * v)  # the EM is eps^2/8-zCDP (bounded range)
            r = v if name == "rho" else e * e / 8.0
            s = 2.0 * d / e  # the scale of the qualities' exponent
        if cost is None:
            cost = count * (r if zcdp else e)
        return {
            "sensitivity": d, "scale": s, "epsilon": e, "rho": r, "cost": cost, "count": count, "rest": rest,
            "lattice": lattice, "integer": integer, "size": size,
        }

    def _rest_cost(self, where: str, mechanism: str) -> float:
        if self._composition not in ("pure", "zcdp"):
            raise ValueError(
                f"{where}: spending {REST!r} needs additive accounting (pure or zcdp); "
                f"composition={self._composition!r} does not add costs"
            )
        costs = [e.cost for e in self._entries]
        spent = math.fsum(costs)
        # The correctly rounded budget - sum(costs), or one of its float neighbours: the largest
        # whose ledger total (the exact sum, rounded once) does not exceed the budget. That total is
        # the budget itself except in rare float ties where no cost can reach it (then one ulp below).
        c0 = math.fsum([self._budget, *(-x for x in costs)])
        if not c0 > self._budget * _RTOL:
            raise PrivacyBudgetExceeded(
                f"{where}: {mechanism} asked for the rest of the budget, but nothing is left "
                f"(spent {spent:.6g} of {self._budget:.6g} {self.currency})"
            )
        near = [c0]
        for _ in range(2):
            near = [math.nextafter(near[0], -math.inf), *near, math.nextafter(near[-1], math.inf)]
        return max((c for c in near if math.fsum([*costs, c]) <= self._budget), default=near[0])

    def _check_budget(self, where: str, what: str, requests: Sequence[dict]) -> float:
        """Refuse ``requests`` that would overspend (beyond round-off); return the spend they would bring."""
        after = self._spent_with(requests)
        if after > self._budget * (1 + _RTOL):
            spent = self.spent
            raise PrivacyBudgetExceeded(
                f"{where}: {what} costs {after - spent:.6g} {self.currency} (spent would be {after:.6g}) "
                f"but only {max(self._budget - spent, 0.0):.6g} of the budget {self._budget:.6g} is left "
                f"(spent {spent:.6g}); nothing was run"
            )
        return after

    def cost(self, mechanism: str, *, sensitivity: float, epsilon=None, rho=None, scale=None, count: int = 1) -> float:
        """Cost of a request in :attr:`currency`, without running or recording anything.

        Args:
            mechanism: ``"laplace"``, ``"gaussian"`` or ``"exponential"``.
            sensitivity: its sensitivity.
            epsilon, rho, scale: exactly one calibration, as in the mechanism methods
                (``scale`` is ``b`` for Laplace, ``sigma`` for Gaussian).
            count: number of draws (exponential mechanism).

        Returns:
            The cost (basic composition under advanced composition).

        Example:
            >>> from pgmjax.privacy import Accountant
            >>> Accountant(rho=1.0).cost("gaussian", sensitivity=1.0, scale=10.0)
            0.005
        """
        where = "Accountant.cost"
        if isinstance(epsilon, str) or isinstance(rho, str):
            raise ValueError(f"{where}: the cost of {REST!r} is Accountant.remaining")
        return self._resolve(mechanism, where, sensitivity, check_count(count, "count", where), epsilon, rho, scale)["cost"]

    def _record(self, mechanism, target, query, size, count, p) -> None:
        self._entries.append(
            LedgerEntry(
                index=len(self._entries),
                mechanism=mechanism,
                target=freeze_target(target),
                query=query,
                size=int(size),
                count=int(count),
                sensitivity=p["sensitivity"],
                scale=p["scale"],
                epsilon=p["epsilon"],
                rho=p["rho"],
                cost=p["cost"],
            )
        )

    def _prepare(
        self, where, mechanism, target, sensitivity, count, epsilon=None, rho=None, scale=None, size: int = 1, integer: bool = True
    ) -> dict:
        p = self._resolve(mechanism, where, sensitivity, count, epsilon, rho, scale, size, integer)
        if not p["rest"]:
            after = self._check_budget(where, f"{mechanism} on {target!r}", [p])
            p = self._within_budget(where, mechanism, sensitivity, p, after)
        return p

    def _within_budget(self, where: str, mechanism: str, sensitivity: float, p: dict, after: float | None = None) -> dict:
        """``p``, or, when float round-off of a split budget puts it a hair over, exactly the rest (never above).

        ``after``: the spend with ``p`` included, when the caller has it already.
        """
        if after is None:
            after = self._spent_with([p])
        if self._composition in ("pure", "zcdp") and after > self._budget:
            as_cost = "rho" if self._composition == "zcdp" else "epsilon"
            return self._resolve(mechanism, where, sensitivity, p["count"], size=p["size"], integer=p["integer"], **{as_cost: REST})
        return p

    # Reports -----------------------------------------------------------------------------------
    def records(self) -> list[dict]:
        """The ledger as a list of dicts (one per entry, the :class:`LedgerEntry` fields)."""
        return [asdict(e) for e in self._entries]

    def to_frame(self) -> pd.DataFrame:
        """The ledger as a pandas DataFrame (one row per entry), e.g. for a report."""
        import pandas as pd  # here: only a report needs it

        cols = [f.name for f in LedgerEntry.__dataclass_fields__.values()]
        return pd.DataFrame(self.records(), columns=cols)

    def summary(self) -> dict:
        """Budget, spend and guarantee in one JSON-friendly dict."""
        out = {
            "composition": self._composition,
            "currency": self.currency,
            "bounded": self._bounded,
            "budget": self._budget,
            "spent": self.spent,
            "remaining": self.remaining,
            "entries": len(self._entries),
        }
        if self._composition != "zcdp" or self._delta is not None:
            out["epsilon"], out["delta"] = self.epsilon_delta()
        return out

    def __repr__(self) -> str:
        return (f"Accountant({self._composition}, budget={self._budget:.6g} {self.currency}, spent={self.spent:.6g}, "
                f"bounded={self._bounded}, entries={len(self._entries)})")
