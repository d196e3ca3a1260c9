"""The common result of every front-end: both arms on the same noise, the ledger and the budget plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..data.dataset import Dataset
from ..model.fit_report import Fit, FitReport
from ..privacy.ledger import BudgetPlan, BudgetStep
from ..queries.measurement import Measurement
from .run_info import RunInfo

__all__ = ["MechanismResult", "BudgetPlan", "BudgetStep", "record_plan"]


def record_plan(accountant, mechanism: str, steps, *, epsilon: float, delta: float, budget: float | None = None) -> BudgetPlan:
    """A front-end's :class:`~pgmjax.privacy.BudgetPlan`, recorded in its accountant before anything is spent.

    Args:
        accountant: the run's :class:`~pgmjax.privacy.Accountant` (its currency and composition are the plan's).
        mechanism: the front-end's name.
        steps: the :class:`~pgmjax.privacy.BudgetStep` entries; the last gets exactly the rest.
        epsilon, delta: the guarantee (``delta = 0`` for pure DP).
        budget: what the plan splits (default the accountant's whole budget).

    Returns:
        The recorded plan (``plan.total == budget``).

    Example:
        >>> from pgmjax.privacy import Accountant
        >>> acc = Accountant(epsilon=1.0)
        >>> plan = record_plan(acc, "demo", [BudgetStep("count", "laplace", 0.25), BudgetStep("tables", "laplace", 0.0, 2)],
        ...                    epsilon=1.0, delta=0.0)
        >>> [s.cost for s in plan.steps], acc.plans == (plan,)
        ([0.25, 0.75], True)
    """
    plan = BudgetPlan.of(mechanism, accountant.currency, accountant.budget if budget is None else budget, steps,
                         composition=accountant.composition, epsilon=epsilon, delta=delta)
    return accountant.record_plan(plan)


@dataclass
class MechanismResult:
    """What a front-end returns.

    Attributes:
        mechanism: the front-end's name.
        model: the +PGM arm, a :class:`~pgmjax.GraphicalModel` fitted to ``measurements``.
        synthetic: synthetic data drawn from ``model`` (``round(model.total)`` records).
        measurements: the engine's input: every noisy measurement taken, and the public marginals the model was
            fitted to, scaled to its total (the ledger's ``"public"`` entries say which).
        ledger: the accountant's entries, one per noise addition or selection.
        accountant: the :class:`~pgmjax.privacy.Accountant` of the run (its budget and spend).
        original: the mechanism's own estimate on the same noise (a Dataset of synthetic
            records, or an object with ``answers``/``marginals`` like the model), or None
            when it could not run (see ``original_error``).
        original_error: why the original arm did not run (e.g. its table would not fit in memory).
        info: what the run reports about itself (selected cliques, network, rounds, timings, ...): a frozen
            :class:`~pgmjax.mechanisms.run_info.RunInfo` of the front-end's own class (``fn.info``, e.g.
            :class:`~pgmjax.mechanisms.MSTInfo`), whose published fields a run report prints.
        plan: the :class:`~pgmjax.privacy.BudgetPlan` the run followed (also in ``accountant.plans``):
            its steps and their costs, summing to the budget.
        report: the final fit's :class:`~pgmjax.FitReport` (its loss, step size and per-chunk log; over the
            compressed domain where the mechanism fitted there), or None where no fit ran.
    """

    mechanism: str
    model: Any
    synthetic: Dataset | None
    measurements: list[Measurement]
    accountant: Any
    original: Any = None
    original_error: str | None = None
    info: RunInfo | None = None
    plan: BudgetPlan | None = None
    report: FitReport | None = None

    @property
    def fitted(self) -> Fit | None:
        """The fit the measurements went into, with its report (None where no fit ran): the model over the
        compressed domain where the mechanism fitted there (``info.compressed_model`` and ``info.mapping``, MST's and
        TreeAIM's), else :attr:`model`. Its report's step size and iterations are where a refit of it starts."""
        if self.report is None:
            return None
        compressed = getattr(self.info, "compressed_model", None)
        model = compressed if compressed is not None and getattr(self.info, "mapping", None) else self.model
        return Fit(model, self.report)

    @property
    def ledger(self) -> list:
        return list(self.accountant.ledger)

    def intervals(self, workload, *, level: float = 0.9, key=None, method: str = "bootstrap", B: int = 200,
                  fit_method: str = "auto") -> list:
        """Intervals for every query of ``workload`` answered by ``model``: see
        :func:`pgmjax.uncertainty.workload_intervals` (they cover the noise, not model mismatch). The refits
        are exact (``fit_method="qp"``) where that applies (L2 loss, MST's design), by mirror descent
        otherwise; pass ``fit_method`` to choose; each interval's ``diagnostics["fit_method"]`` says which ran."""
        # a layer below; imported on use, as ``pgmjax`` loads it lazily (a run that never asks for intervals skips it)
        from ..uncertainty import workload_intervals

        return workload_intervals(self, workload, level=level, key=key, method=method, B=B, fit_method=fit_method)

    def arms(self) -> dict[str, Any]:
        """``{"original": ..., "pgm": ...}`` for the arms that ran (for workload evaluation)."""
        out = {"pgm": self.model}
        if self.original is not None:
            out["original"] = self.original
        return out
