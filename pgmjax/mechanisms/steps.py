"""The steps the front-ends are made of: what MST, AIM, MWEM, ... share besides their argument checks.

A front-end reads as its paper's algorithm: check the arguments (:mod:`~pgmjax.mechanisms.options`), open
the :class:`~pgmjax.privacy.Accountant` and record the plan (:func:`~pgmjax.mechanisms.result.record_plan`),
then repeat the steps below, every private read going through the accountant:

* measure marginals: ``Accountant.measure_many`` / ``Accountant.measure`` (the noise, the ledger);
* select by the exponential mechanism: ``Accountant.exponential`` on qualities built from
  :func:`l1_errors` (how badly the current estimate answers each candidate);
* keep the model under a size cap: :func:`hypothetical_model_size` before a fit (:func:`candidate_model_sizes`
  for a round's candidates), :func:`model_mb` after;
* fit: :func:`pgmjax.estimate` (warm-started), timed by a :class:`Timer`;
* synthesize: :func:`synthesize` (sampled from an exact model, made to match an approximate one's pseudo-marginals);
* the engine's oracle (``fit_options.oracle``, :mod:`pgmjax.estimation.oracles`): :func:`oracle_of` reads it,
  :func:`candidate_marginals` scores candidates on an exact or an approximate model;
* return a :class:`~pgmjax.mechanisms.result.MechanismResult` (:func:`pgm_native_result` for the
  mechanisms built on the engine from the start, which have no separate original arm).

The progress reporter is :class:`pgmjax.mechanisms.progress.Progress`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

from ..data.domain import CliqueLike, Domain
from ..estimation import memory
from ..graph import size_limit
from ..graph.growth import Growth
from ..graph.junction import triangulated_cliques
from ..graph.region_graph import region_graph
from .domain_compression import decompress_data, decompress_model
from .result import MechanismResult

#: A round's fit in an adaptive mechanism (AIM's and MWEM's rounds) stops once a compiled chunk (50 iterations)
#: changes its loss by less than this, relatively (``estimate``'s ``tol``): warm-started from the last round's
#: model it has usually converged long before ``engine_iters``. Mirror descent never accepts a step that raises
#: the loss, so the fit ends no worse than it started. A round's model only scores the next round's candidates
#: (and AIM's annealing test); the release is the last fit's, which runs all its iterations. The changelog
#: compares this with 1e-4 for AIM and with fits of ``engine_iters`` for MWEM (iterations, time and workload
#: error over seeds).
ROUND_TOL = 1e-3

__all__ = ["ROUND_TOL", "Timer",
           "candidate_marginals", "candidate_model_sizes", "hypothetical_model_size", "l1_errors", "model_mb", "oracle_of",
           "record_public_fit", "release_over_original",
           "pgm_native_result", "synthesize"]


class Timer:
    """Seconds per named step, added up over repeated steps; ``seconds["total"]`` since it started.

    Args:
        *names: steps that start at 0.0 (reported even when they never run), in this order.

    Example:
        >>> timer = Timer("engine")
        >>> with timer("engine"):
        ...     pass
        >>> sorted(timer.done())
        ['engine', 'total']
    """

    def __init__(self, *names: str):
        self.start = time.perf_counter()
        self.seconds: dict[str, float] = dict.fromkeys(names, 0.0)

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def done(self) -> dict[str, float]:
        """The seconds, with ``total`` (since the timer started) added."""
        self.seconds["total"] = time.perf_counter() - self.start
        return self.seconds


def l1_errors(truth: Sequence[np.ndarray], estimate: Sequence[np.ndarray]) -> np.ndarray:
    """``||truth_i - estimate_i||_1`` for each pair of tables: the selections' score of how badly each is answered.

    Example:
        >>> l1_errors([np.array([3.0, 1.0])], [np.array([2.0, 2.0])]).tolist()
        [2.0]
    """
    return np.array([np.abs(t - e).sum() for t, e in zip(truth, estimate)])


def oracle_of(options) -> str:
    """The engine's oracle named by a front-end's ``fit_options``: ``"exact"`` (default), ``"approximate"``
    (the name or a :class:`pgmjax.estimation.oracles.ApproximateOracle`) or ``"auto"``.

    Example:
        >>> oracle_of({}), oracle_of({"oracle": "approximate"})
        ('exact', 'approximate')
    """
    value = (options or {}).get("oracle", "exact")
    return value if value in ("exact", "auto") else "approximate"


def candidate_marginals(model, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
    """The model's estimate of each candidate's marginal: exact, or for an approximate model its
    pseudo-marginals, candidates across regions added to the region graph with zero potentials
    (:meth:`pgmjax.model.approximate_model.ApproximateModel.infer_marginals`)."""
    if getattr(model, "approximate", False):
        return model.infer_marginals(cliques)
    return model.marginals(cliques)


def hypothetical_model_size(domain: Domain, cliques: Sequence[CliqueLike], oracle: str = "exact") -> float:
    """Size in MB (``8 * cells / 2^20``) of the graphical model over ``cliques``, before building it.

    The junction tree is the one :func:`pgmjax.estimate` builds for these cliques (the same
    triangulation), so the number is the fitted model's size exactly. Adding a clique can enlarge
    the model super-additively through fill-in. With ``oracle="approximate"`` the model is the region
    graph of the cliques (:func:`pgmjax.graph.region_graph.region_graph`: the cliques and their
    intersections), no triangulation; with ``"auto"``, the junction tree's where its fit fits the size limit
    at its peak (:func:`pgmjax.estimation.memory.fit_peak_bytes` of mirror descent in float32, as
    :func:`pgmjax.estimation.oracles.make_oracle_plan` decides), else the region graph's.

    Example:
        >>> dom = Domain({"a": 10, "b": 10, "c": 10})
        >>> round(hypothetical_model_size(dom, [("a", "b"), ("b", "c")]) * 2**20 / 8)
        200
    """
    if oracle == "approximate":
        return 8.0 * region_graph(domain, cliques).cells / 2**20
    tree_cliques = triangulated_cliques(domain, cliques)  # the junction tree's cliques, not the tree
    exact = 8.0 * sum(domain.size(c) for c in tree_cliques) / 2**20
    if oracle == "auto" and memory.fit_peak_bytes(domain, tree_cliques, "mirror_descent") > size_limit.max_model_bytes():
        return 8.0 * region_graph(domain, cliques).cells / 2**20
    return exact


def candidate_model_sizes(domain: Domain, base: Sequence[CliqueLike], candidates: Sequence[CliqueLike],
                          oracle: str = "exact") -> np.ndarray:
    """For each candidate ``c``, ``hypothetical_model_size(domain, [*base, c], oracle)``: a round's size check.

    Where ``base`` is a fitted model's cliques (chordal) and the oracle exact, the model is grown around each
    candidate (:class:`pgmjax.graph.growth.Growth`) rather than triangulated whole: the same numbers (the
    triangulation eliminates simplicial vertices first, so it is the same whole or in part), at a small part
    of the cost, and a round that changed the model in one place re-triangulates only the candidates whose
    part it changed.

    Args:
        domain: the domain.
        base: the cliques every candidate model holds (the current model's).
        candidates: the candidate cliques.
        oracle: as for :func:`hypothetical_model_size`.

    Returns:
        Sizes in MB, one per candidate.

    Example:
        >>> dom = Domain({"a": 10, "b": 10, "c": 10})
        >>> candidate_model_sizes(dom, [("a", "b"), ("c",)], [("a",), ("b", "c")]) * 2**20 / 8
        array([110., 200.])
    """
    growth = Growth(domain, base) if oracle == "exact" else None
    if growth is None or not growth.chordal:
        return np.array([hypothetical_model_size(domain, [*base, c], oracle) for c in candidates], np.float64)
    return np.array([8.0 * growth.cells(c) / 2**20 for c in candidates], np.float64)


def released_model_size(fit_domain: Domain, domain: Domain, cliques: Sequence[CliqueLike]) -> float:
    """Size in MB over ``domain`` of the model fitted over ``fit_domain`` (a compression of ``domain``) on
    ``cliques`` and released over ``domain`` (:func:`~pgmjax.mechanisms.domain_compression.decompress_model`).

    The fit triangulates over the compressed sizes, the release keeps that junction tree's cliques: the same
    cliques can cost far more than :func:`hypothetical_model_size` over ``domain`` says, where the triangulation
    would be chosen for the original sizes (a cycle's chord through two compressed wide attributes).

    Example:
        >>> dom, cdom = Domain({"a": 200, "b": 10, "c": 200, "d": 10}), Domain({"a": 2, "b": 10, "c": 2, "d": 10})
        >>> cycle = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
        >>> round(hypothetical_model_size(dom, cycle) * 2**20 / 8), round(released_model_size(cdom, dom, cycle) * 2**20 / 8)
        (40000, 800000)
    """
    fitted = triangulated_cliques(fit_domain, cliques)
    return 8.0 * sum(domain.size(c) for c in triangulated_cliques(domain, fitted)) / 2**20


def grown_released_size(growth: Growth, domain: Domain, clique: CliqueLike) -> float:
    """:func:`released_model_size` of ``growth``'s model with ``clique`` added, by growing its junction tree
    (:meth:`pgmjax.graph.growth.Growth.cells`: only the part between the clique's attributes is triangulated again,
    over the compressed sizes ``growth.domain``), the grown cliques counted over the declared ``domain``. Where
    ``growth`` holds a fitted model's (chordal) cliques, the same number as the whole triangulation, at a small part
    of its cost.

    Example:
        >>> dom, cdom = Domain({"a": 200, "b": 10, "c": 200, "d": 10}), Domain({"a": 2, "b": 10, "c": 2, "d": 10})
        >>> path = [("a", "b"), ("b", "c"), ("c", "d")]
        >>> grown_released_size(Growth(cdom, path), dom, ("a", "d")) == released_model_size(cdom, dom, path + [("a", "d")])
        True
    """
    return 8.0 * growth.cells(clique, domain) / 2**20


def refit_hints(fitted, measurements: Sequence) -> dict:
    """What a round's refit tells :func:`pgmjax.estimate`'s ``program="auto"`` (``repeats``, ``expected_iters``),
    derived from the run's measurements and its previous fit, so that a run and its resumed rerun choose alike.

    A measurement on a clique measured before pools with the earlier ones: the fit's structure is the previous
    fit's, fitted once more. ``repeats`` counts the fits of the refit's structure: 1, plus one for each measurement,
    from the last back, that measured again a clique measured before it (the dense program's compile is shared by
    them); a new clique starts a new structure. The fit is expected to run as many iterations as the previous one.

    Args:
        fitted: the previous fit (a :class:`~pgmjax.Fit`: its report's iterations).
        measurements: the measurements of the refit, in the order taken, the new one last.

    Returns:
        ``{"repeats": ..., "expected_iters": ...}`` (``expected_iters`` None where the report has no history).

    Example:
        >>> import numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 2, "b": 3})
        >>> ms = [pj.Measurement(("a", "b"), np.ones((2, 3)), 1.0)]
        >>> fitted = pj.estimate(dom, ms, iters=100, report=True)
        >>> refit_hints(fitted, ms + ms[:1]), refit_hints(fitted, ms + ms[:1] + ms[:1])["repeats"]
        ({'repeats': 2, 'expected_iters': 100}, 3)
    """
    repeats = 1
    for k in range(len(measurements) - 1, 0, -1):
        if not any(m.clique == measurements[k].clique for m in measurements[:k]):
            break
        repeats += 1
    report = fitted.report
    return {"repeats": repeats, "expected_iters": report.iterations if report.history else None}


def model_mb(model) -> float:
    """Size in MB (``8 * cells / 2^20``) of a fitted model's cliques: :func:`hypothetical_model_size` after the fit."""
    return 8.0 * sum(model.domain.size(c) for c in model.cliques) / 2**20


def synthesize(model, key, rows: int | None = None, method: str = "exact"):
    """``rows`` synthetic records drawn from ``model`` (default ``round(model.total)``, at least 1).

    Args:
        model: a fitted :class:`~pgmjax.GraphicalModel`, or an approximate model (its records are updated to match
            its pseudo-marginals: :meth:`pgmjax.model.approximate_model.ApproximateModel.synthetic_data`; ``method``
            applies to exact models only).
        key: a ``jax.random`` key.
        rows: how many records (None: ``max(1, round(model.total))``).
        method: the sampling method (:func:`pgmjax.model.sampling.synthetic_data`).

    Returns:
        A :class:`~pgmjax.Dataset` over the model's domain.
    """
    n = rows if rows is not None else max(1, int(round(model.total)))
    if getattr(model, "approximate", False):  # records made to match its pseudo-marginals (no distribution to sample)
        return model.synthetic_data(n, key)
    return model.synthetic_data(n, key, method=method)


def public_cliques(fitted) -> list:
    """The public marginals a fit took (:func:`pgmjax.estimate`'s ``public=``; its report's ``info["public"]``), in
    order; empty where it took none."""
    return list(fitted.report.info.get("public", []))


def record_public_fit(acc, fitted, domain: Domain, public, measurements: list) -> None:
    """Record in ``acc`` (free) each public marginal the fit took (its report's ``info["public"]``), and append its
    measurement, scaled to the model's total, to ``measurements`` (``public``: the fit's
    :class:`~pgmjax.queries.public.PublicData`)."""
    for clique in public_cliques(fitted):
        acc.record_public(clique, domain.size(clique))
        measurements.append(public.measurement(clique, float(fitted.model.total)))


def release_over_original(model_c, mapping, domain: Domain, k_synth, k_dec, *, synthetic: bool, rows, method: str,
                          timer: Timer, spread=None, limit: float | None = None):
    """A model fitted over a compressed domain, and its synthetic records, expressed over the original ``domain``
    (:func:`~pgmjax.mechanisms.domain_compression.decompress_model` / ``decompress_data``, merged values spread by
    ``spread``, even where None; ``mapping`` empty: as they are). Returns ``(model, synthetic or None)``; the
    sampling is timed as ``"synthetic"``.

    ``limit`` is the memory limit the records are drawn under (bytes; None: the one in force). A mechanism whose
    model-size cap is in force (:func:`pgmjax.graph.size_limit.limited`) passes the limit outside it: the cap bounds
    the model's fits, not the records, and a cap of a few MB would refuse a large table's records after the whole
    budget is spent."""
    model = decompress_model(model_c, mapping, domain, spread) if mapping else model_c
    if not synthetic:
        return model, None
    with timer("synthetic"), size_limit.limited(limit):
        draw = synthesize(model_c, k_synth, rows, method)
        return model, decompress_data(draw, mapping, domain, k_dec, spread) if mapping else draw


def pgm_native_result(mechanism: str, name: str, *, model, synthetic, measurements, accountant, info: dict,
                      plan, report=None) -> MechanismResult:
    """The result of a mechanism built on graphical-model estimation from the start (MST, AIM): one arm,
    ``original=None`` and an ``original_error`` saying why.

    Args:
        mechanism: the front-end's name (``"mst"``).
        name: the mechanism's name in the message (``"MST"``).
        model, synthetic, measurements, accountant, info, plan, report: as in
            :class:`~pgmjax.mechanisms.result.MechanismResult`.
    """
    return MechanismResult(
        mechanism=mechanism,
        model=model,
        synthetic=synthetic,
        measurements=measurements,
        accountant=accountant,
        original=None,
        original_error=f"{name} is PGM-native: it has no separate original estimator",
        info=info,
        plan=plan,
        report=report,
    )
