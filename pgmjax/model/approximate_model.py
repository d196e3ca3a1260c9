"""A model fitted with the approximate marginal oracle: answers from its regions' pseudo-marginals.

:func:`pgmjax.estimate` with ``oracle="approximate"`` (or ``"auto"`` past the size limit) fits potentials on
the measured cliques against the pseudo-marginals of convex generalized belief propagation (or loopy belief
propagation) instead of exact marginals (McKenna, Pradhan, Sheldon & Miklau, "Relaxed marginal consistency
for differentially private query answering", NeurIPS 2021, Section 3). The result is an
:class:`ApproximateModel`: pseudo-marginals of the region graph's regions, locally consistent (each region's
table is the marginal of the tables that contain it) but not, in general, the marginals of one
distribution. So:

* a query whose attributes lie inside one region is answered from that region's table (:meth:`answers`,
  :meth:`marginals`);
* a query across regions is refused ("not available from an approximate model: query across regions"),
  naming the query and the regions; :meth:`infer_marginals` estimates such marginals by adding their cliques
  to the region graph with zero potentials and running the oracle again (the relaxed problem's answer to
  unmeasured queries, NeurIPS 2021, Section 3.3; approximate);
* synthetic records (:meth:`synthetic_data`) are made, not sampled: pseudo-marginals need not be any
  distribution's marginals, so there is no distribution to sample from; records are updated gradually until their
  marginals on the measured cliques match the pseudo-marginals (:mod:`pgmjax.model.record_updating`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import jax
import numpy as np

from ..compiler import to_device
from ..data.dataset import Dataset
from ..data.domain import Clique, CliqueLike
from ..graph import approximate_oracle
from ..queries import factors as Q
from . import record_updating


_beliefs_jit = jax.jit(approximate_oracle.region_beliefs)


class ApproximateModel:
    """Potentials on the measured cliques and their pseudo-marginals (see the module docstring).

    Args:
        plan: the :class:`~pgmjax.graph.approximate_oracle.ApproximatePlan`.
        theta: potentials in the plan's blocks.
        total: the number of records.
        info: the oracle it answers with, ``{"oracle": "approximate", "kind": ..., "iters": ..., "damping": ...,
            "reason": ...}`` (also in the fit's :class:`~pgmjax.model.fit_report.FitReport`, with its loss and log).

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 2, "c": 2})
        >>> ms = [pj.Measurement(c, np.full((2, 2), 25.0)) for c in [("a", "b"), ("b", "c"), ("a", "c")]]
        >>> model = pj.estimate(dom, ms, iters=50, oracle="approximate")
        >>> model.info["oracle"], model.marginal("a").round().tolist()
        ('approximate', [50.0, 50.0])
    """

    approximate = True

    def __init__(self, plan, theta: dict, total, *, info=None):
        self.plan, self.theta, self.total = plan, theta, float(total)
        self.info = dict(info or {})

    @property
    def domain(self):
        return self.plan.domain

    @property
    def cliques(self) -> tuple[Clique, ...]:
        """The maximal measured cliques (the regions that carry potentials)."""
        return self.plan.cliques

    @property
    def regions(self) -> tuple[Clique, ...]:
        """Every region of the region graph: the cliques and their intersections (Bethe: the attributes)."""
        return self.plan.graph.regions

    @property
    def dtype(self):
        return next(iter(self.theta.values())).dtype

    @functools.cached_property
    def potentials(self) -> dict[Clique, np.ndarray]:
        """Each clique's log-potential table (axes in the clique's order), NumPy."""
        return self.plan.tables({k: np.asarray(v) for k, v in self.theta.items()})

    @functools.cached_property
    def _tables(self) -> dict[Clique, np.ndarray]:
        flat, _ = _beliefs_jit(self.plan, self.theta, to_device(self.total, self.dtype))
        return {r: np.asarray(t, np.float64) for r, t in approximate_oracle.region_tables(self.plan, flat).items()}

    def clique_marginals(self) -> dict[Clique, np.ndarray]:
        """Every region's pseudo-marginal (counts, axes in the region's order)."""
        return dict(self._tables)

    def _host(self, attrs: Clique, query) -> Clique:
        holders = [r for r in self.regions if set(attrs) <= set(r)]
        if not holders:
            raise ValueError(
                f"not available from an approximate model: query across regions: {query} reads {attrs}, which lie "
                f"in no one region; regions: {list(self.cliques)}. Use model.infer_marginals() for an approximate "
                "estimate, or fit with oracle='exact'"
            )
        return min(holders, key=self.domain.size)

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        """Answer factored queries (see :meth:`pgmjax.GraphicalModel.answer`) from the smallest region holding
        each query's attributes; ValueError for a query across regions."""
        out = []
        for query in queries:
            attrs, mats = Q.resolve(self.domain, query)
            host = self._host(attrs, query)
            table = self._tables[host].sum(axis=tuple(j for j, a in enumerate(host) if a not in attrs))
            kept = [a for a in host if a in attrs]
            table = np.transpose(table, [kept.index(a) for a in attrs]) if attrs else table
            out.append(Q.kron_apply(table, mats))
        return out

    def answer(self, query: Mapping[str, object]) -> np.ndarray:
        return self.answers([query])[0]

    def marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        """Pseudo-marginal counts of ``cliques``, each inside one region (axes in the given order)."""
        out = []
        for c in cliques:
            c = self.domain.check_clique(c, what="marginal of")
            out.append(self.answers([{a: Q.Identity() for a in c}])[0])
        return out

    def marginal(self, clique: CliqueLike) -> np.ndarray:
        return self.marginals([clique])[0]

    def infer_marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        """Pseudo-marginals of any cliques: those across regions are added to the region graph with zero
        potentials and the oracle is run again at the fitted potentials (approximate; one program per new
        structure; the added regions change the free energy, so the others' tables in that run differ a little
        from the fit's). Cliques inside a region are read from the fit, as :meth:`marginals` reads them."""
        cliques = [self.domain.check_clique(c, what="marginal of") for c in cliques]
        outside = [c for c in cliques if not any(set(c) <= set(r) for r in self.regions)]
        if not outside:
            return self.marginals(cliques)
        plan = approximate_oracle.make_approximate_plan(self.domain, list(self.cliques) + outside, self.plan.graph.kind,
                                                        self.plan.iters, self.plan.damping)
        theta = plan.from_tables(self.potentials, self.dtype)
        flat, _ = _beliefs_jit(plan, theta, to_device(self.total, self.dtype))
        wider = ApproximateModel(plan, theta, self.total, info=self.info)
        wider.__dict__["_tables"] = {r: np.asarray(t, np.float64)
                                     for r, t in approximate_oracle.region_tables(plan, flat).items()}
        return [wider.marginal(c) if c in outside else self.marginal(c) for c in cliques]

    def synthetic_data(self, n: int | None = None, key: jax.Array | None = None, *, rounds: int = record_updating.ROUNDS):
        """Synthetic records whose marginals on the measured cliques match the pseudo-marginals: records updated
        gradually (:func:`pgmjax.model.record_updating.update_records`; Zhang et al., "PrivSyn: differentially
        private data synthesis", USENIX Security 2021, Section 5.2). The pseudo-marginals need not be any
        distribution's marginals, so the records are not a sample of one: they keep each measured clique's table
        as closely as records can, and its higher-order structure only as far as those tables carry it.

        Args:
            n: number of records; default ``round(total)``.
            key: a ``jax.random`` key (required: runs are reproducible from it).
            rounds: passes of the update over the cliques.

        Returns:
            A :class:`~pgmjax.Dataset` over the model's domain.
        """
        if key is None:
            raise ValueError("synthetic_data: pass a jax.random key, e.g. jax.random.key(0)")
        n = max(1, int(round(float(self.total)))) if n is None else n
        tables = self.clique_marginals()
        targets = {c: np.clip(np.asarray(tables[c], np.float64), 0.0, None) for c in self.cliques}
        # structural zeros (a constraint's cells, -inf potentials): no record may land on one
        zeros = {c: ~np.isfinite(t) & (t < 0) for c, t in self.potentials.items()}
        records = record_updating.update_records(self.domain, targets, n, key, rounds=rounds,
                                                 zeros={c: z for c, z in zeros.items() if z.any()})
        return Dataset._trusted(records, self.domain)

    def save(self, path, report=None) -> str:
        """Refused: the model files hold a junction tree's potentials; an approximate model is not saved (refit it
        from the measurements, or fit with ``oracle="exact"`` to save the model)."""
        raise ValueError(f"saving an approximate model is not supported (to {path}): its model files would need the "
                         "region graph; fit with oracle='exact' to save the model")

    def __repr__(self) -> str:
        return (f"ApproximateModel({self.info.get('kind', self.plan.graph.kind)}, {len(self.cliques)} cliques, "
                f"{len(self.regions)} regions, total={self.total:g})")
