"""``mbi.MarkovRandomField``: a fitted model as the libraries built on ``mbi`` read it, backed by a
:class:`pgmjax.GraphicalModel`."""

from __future__ import annotations

import hashlib

import jax
import numpy as np

from ...model.fit_report import Fit
from .values import CliqueVector, Dataset, Domain, Factor, names_of

__all__ = ["MarkovRandomField"]


class MarkovRandomField:
    """A fitted model (``mbi.MarkovRandomField``): its marginals by :meth:`project`, its records by
    :meth:`synthetic_data`, its potentials as a warm start.

    Args:
        model: the :class:`pgmjax.GraphicalModel`.
        domain: the ``mbi``-style :class:`~pgmjax.compat.mbi.values.Domain` it is over.
        cliques: the measured maximal cliques (:func:`pgmjax.graph.junction.maximal_cliques`: attributes in the domain's order).
        report: the fit's :class:`pgmjax.FitReport` (a warm start from :attr:`potentials` continues from its step size).
    """

    def __init__(self, model, domain: Domain, cliques, report=None):
        self.model, self.domain, self.cliques = model, domain, [tuple(c) for c in cliques]
        self.report = report  # the fit's pgmjax.FitReport: a warm start from these potentials continues its step

    @property
    def total(self) -> float:
        return float(self.model.total)

    @property
    def potentials(self) -> CliqueVector:
        tables = {tuple(c): np.asarray(t) for c, t in self.model.potentials.items()}
        fitted = self.model if self.report is None else Fit(self.model, self.report)
        return CliqueVector(self.domain, list(self.cliques), tables, model=fitted)

    @property
    def marginals(self) -> CliqueVector:
        tables = {c: np.asarray(self.model.marginal(c)) for c in self.cliques}
        return CliqueVector(self.domain, list(self.cliques), tables, model=self.model)

    def project(self, attrs) -> Factor:
        """The model's marginal on ``attrs``, axes in their order (counts summing to the total)."""
        attrs = names_of(attrs)
        return Factor(self.domain.project(attrs), np.asarray(self.model.marginal(attrs), np.float64))

    def supports(self, attrs) -> bool:
        return self.domain.supports(attrs)

    def synthetic_data(self, rows: int | None = None, method: str = "round", key=None) -> Dataset:
        """``rows`` records (default: the total). ``method="round"`` draws them by randomized rounding of the
        model's conditionals (pgmjax's ``"low_variance"``), ``"sample"`` independently (``"exact"``).

        ``key`` (a ``jax.random`` key) fixes the draw. The libraries built on ``mbi`` pass none (``mbi`` draws from
        NumPy's global generator); then the key follows from the model and the request alone (a digest of the
        potentials, ``rows`` and ``method``), so a call's records depend on its arguments only: the same model asked
        the same twice gives the same records.
        """
        if method not in ("round", "sample"):
            raise ValueError(f"synthetic_data: method must be 'round' or 'sample', got {method!r}")
        n = max(1, int(rows or round(self.total)))
        key = _model_key(self.model, n, method) if key is None else key
        records = self.model.synthetic_data(n, key, method="low_variance" if method == "round" else "exact")
        return Dataset(np.asarray(records.records), self.domain)


def _model_key(model, rows: int, method: str):
    """A ``jax.random`` key from a digest of the model's potentials and the request."""
    digest = hashlib.sha256(f"{rows}:{method}".encode())
    for clique in model.cliques:
        digest.update(repr(clique).encode())
        digest.update(np.ascontiguousarray(model.potentials[clique]).tobytes())
    return jax.random.key(int.from_bytes(digest.digest()[:4], "little"))
