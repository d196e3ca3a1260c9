"""``mbi.MarkovRandomField``: a fitted model as the libraries built on ``mbi`` read it, backed by a
:class:`pgmjax.GraphicalModel`."""

from __future__ import annotations

import jax
import numpy as np

from .values import CliqueVector, Dataset, Domain, Factor, names_of

__all__ = ["MarkovRandomField"]


class MarkovRandomField:
    """A fitted model (``mbi.MarkovRandomField``): its marginals by :meth:`project`, its records by
    :meth:`synthetic_data`, its potentials as a warm start.

    Args:
        model: the :class:`pgmjax.GraphicalModel`.
        domain: the ``mbi``-style :class:`~pgmjax.compat.mbi.values.Domain` it is over.
        cliques: the measured (maximal) cliques, as ``mbi`` reports them.
    """

    def __init__(self, model, domain: Domain, cliques):
        self.model, self.domain, self.cliques = model, domain, [tuple(c) for c in cliques]

    @property
    def total(self) -> float:
        return float(self.model.total)

    @property
    def potentials(self) -> CliqueVector:
        tables = {tuple(c): np.asarray(t) for c, t in self.model.potentials.items()}
        return CliqueVector(self.domain, list(self.cliques), tables, model=self.model)

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

    def synthetic_data(self, rows: int | None = None, method: str = "round") -> Dataset:
        """``rows`` records (default: the total). ``method="round"`` draws them by randomized rounding of the
        model's conditionals (pgmjax's ``"low_variance"``), ``"sample"`` independently (``"exact"``). As ``mbi``
        draws from NumPy's global generator, so does this door: the key comes from ``np.random``."""
        if method not in ("round", "sample"):
            raise ValueError(f"synthetic_data: method must be 'round' or 'sample', got {method!r}")
        n = max(1, int(rows or round(self.total)))
        key = jax.random.key(int(np.random.randint(0, 2**31 - 1)))
        records = self.model.synthetic_data(n, key, method="low_variance" if method == "round" else "exact")
        return Dataset(np.asarray(records.records), self.domain)
