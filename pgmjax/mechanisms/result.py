"""The common result of every front-end: both arms on the same noise, and the ledger."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..data.dataset import Dataset
from ..queries.measurement import Measurement


@dataclass
class MechanismResult:
    """What a front-end returns.

    Attributes:
        mechanism: the front-end's name.
        model: the +PGM arm, a :class:`~pgmjax.GraphicalModel` fitted to ``measurements``.
        synthetic: synthetic data drawn from ``model`` (``round(model.total)`` records).
        measurements: every noisy measurement taken (the engine's input).
        ledger: the accountant's entries, one per noise addition or selection.
        accountant: the :class:`~pgmjax.privacy.Accountant` of the run (its budget and spend).
        original: the mechanism's own estimate on the same noise (a Dataset of synthetic
            records, or an object with ``answers``/``marginals`` like the model), or None
            when it could not run (see ``original_error``).
        original_error: why the original arm did not run (e.g. its table would not fit in memory).
        info: mechanism-specific details (selected cliques, network, rounds, timings, ...).
    """

    mechanism: str
    model: Any
    synthetic: Dataset | None
    measurements: list[Measurement]
    accountant: Any
    original: Any = None
    original_error: str | None = None
    info: dict = field(default_factory=dict)

    @property
    def ledger(self) -> list:
        return list(self.accountant.ledger)

    def intervals(self, workload, *, level: float = 0.9, key=None, method: str = "bootstrap", B: int = 200,
                  fit_method: str = "auto") -> list:
        """Intervals for every query of ``workload`` answered by ``model``: see
        :func:`pgmjax.uncertainty.workload_intervals` (they cover the noise, not model mismatch). The refits
        are exact (``fit_method="qp"``) where that applies (L2 loss, MST's design), by mirror descent
        otherwise; pass ``fit_method`` to choose; each interval's ``diagnostics["fit_method"]`` says which ran."""
        from ..uncertainty import (
            workload_intervals,  # the uncertainty package builds on the mechanisms' results
        )

        return workload_intervals(self, workload, level=level, key=key, method=method, B=B, fit_method=fit_method)

    def arms(self) -> dict[str, Any]:
        """``{"original": ..., "pgm": ...}`` for the arms that ran (for workload evaluation)."""
        out = {"pgm": self.model}
        if self.original is not None:
            out["original"] = self.original
        return out
