"""The MWEM front-end: MWEM+PGM's rounds, then the multiplicative-weights arm replaying its measurements.

Hardt, Ligett & McSherry, "A Simple and Practical Algorithm for Differentially Private Data Release",
NeurIPS 2012, Algorithm 1 (``T`` rounds of selection, measurement and multiplicative-weights update);
the +PGM arm and the shared transcript after McKenna, Sheldon & Miklau, "Graphical-model based
estimation and inference for differential privacy", ICML 2019, Section 6.
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import jax

from ...estimation.options import FitOptions
from ...data.dataset import Dataset
from ...data.domain import Clique, Domain
from ...estimation.memory import check_capped_fit
from ...privacy import Accountant
from ...privacy import check_count as _int
from ...privacy import check_key as _check_key
from ...privacy import check_positive as _positive
from ...queries.measurement import estimate_total
from ..options import (check_data, check_domain_size, check_epsilon, check_fit_options, check_model_cap,
                       check_positive_delta, check_pure_delta, check_workload)
from ..result import BudgetStep, MechanismResult, record_plan
from ..checkpoint import Keeper, fingerprint
from ..public_selection import check_public
from ..steps import hypothetical_model_size, oracle_of, public_cliques, synthesize
from ..own_options import takes_own_options
from ..run_info import reports
from .arguments import MWEMInfo, MWEMOptions
from .budget import mwem_budget
from .original_arm import mw_guard, mw_replay
from .query_rows import row_sensitivity
from .rounds import run_rounds


def _check_round_one(domain: Domain, cliques: list[Clique], max_model_mb: float, rounds: int, where: str,
                     base: list[Clique] = ()) -> None:
    """Refuse a size cap no workload clique fits in round 1 beside ``base`` (the public cliques every fit holds): the
    cap only grows, and re-measuring never grows the model."""
    first = {c: hypothetical_model_size(domain, list(base) + [c]) for c in cliques}
    if min(first.values()) > max_model_mb / rounds:
        c = min(first, key=first.get)
        beside = f" beside the public cliques {list(base)}" if base else ""
        raise ValueError(
            f"{where}: no workload clique fits the round-1 model-size cap max_model_mb/rounds = "
            f"{max_model_mb / rounds:.4g} MB{beside} (the smallest, {c}, needs {first[c]:.4g} MB); raise max_model_mb or "
            "lower rounds"
        )


def _selection_sensitivities(acc: Accountant, wl, selection: str, domain: Domain, bounded: bool, where: str):
    """``(queries, EM sensitivity, measurement sensitivity)``: queries and the latter None in marginal mode."""
    if selection == "marginal":
        return None, acc.l1_sensitivity(), None  # of ||mu_C(D) - v||_1; the measurement: one marginal under the convention
    queries = list(wl.queries)
    # The EM scores every row with one sensitivity: the largest row's. The measurement uses the
    # same (a scalar's L1 and L2 sensitivities coincide), so all noise is equal as in the 2019 script.
    em_sens = max(row_sensitivity(q, domain, bounded) for q in queries)
    if em_sens <= 0:
        raise ValueError(f"{where}: every workload query row is constant over the domain (sensitivity 0): nothing to measure")
    return queries, em_sens, em_sens


def _original_arm(domain: Domain, measurements, *, original: bool, max_table_cells: int, bounded: bool, n_records: int, mw_iters: int):
    """The MW arm on the +PGM arm's transcript, if asked for and its tables fit: ``(components, table, error, seconds)``."""
    rounds = len(measurements)
    comps, guard = mw_guard(domain, [m.clique for m in measurements], max_table_cells)
    mw_table, mw_error, mw_seconds = None, None, 0.0
    if not original:
        mw_error = "not run (original=False)"
    elif guard is not None:
        mw_error = guard
    else:
        t0 = time.perf_counter()
        if bounded:
            totals = [float(n_records)] * rounds
        else:  # the same inverse-variance estimate the engine makes from the measurements so far
            totals = [estimate_total(measurements[:t])[0] for t in range(1, rounds + 1)]
        mw_table = mw_replay(domain, measurements, totals, mw_iters)
        mw_seconds = time.perf_counter() - t0
    return comps, mw_table, mw_error, mw_seconds


@reports(MWEMInfo)
@takes_own_options(MWEMOptions)
def mwem(
    data: Dataset,
    epsilon: float,
    delta: float = 0.0,
    *,
    key,
    workload=None,
    engine_iters: int = 1000,
    fit_options: FitOptions | None = None,
    max_model_mb: float | None = 25.0,
    own: MWEMOptions,
) -> MechanismResult:
    """MWEM and MWEM+PGM on the same measurements (Hardt, Ligett & McSherry 2012; McKenna et al. 2019).

    Round ``i = 1..T``:

    1. candidates: workload cliques ``C`` with ``hypothetical_model_size(model + C) <= max_model_mb * i / T``
       (``selection="marginal"``), or every row of the workload queries on such cliques
       (``selection="query"``);
    2. EM with quality ``||mu_C(D) - mu_hat_C||_1 - n_C`` (sensitivity 1, 2 if bounded), resp.
       ``|w^T mu_C(D) - w^T mu_hat_C|`` (sensitivity of one row), where ``mu_hat`` is the +PGM arm's
       estimate (``N``-uniform before round 1 when ``bounded``, zero otherwise: ``N`` is private);
    3. measure the selected marginal (or row) with Laplace ``b`` / Gaussian ``sigma`` (:func:`mwem_budget`);
    4. refit the +PGM arm, ``pgmjax.estimate(..., iters=engine_iters, warm_start=previous)``; a round before the
       last stops once converged (:data:`~pgmjax.mechanisms.steps.ROUND_TOL`: its model only scores the next
       selection), the last round's fit, the release's model, runs all ``engine_iters``.

    Measured cliques stay candidates and never grow the model. The original arm (multiplicative weights on a
    factored table) replays the transcript if its tables fit (:mod:`pgmjax.mechanisms.multiplicative_weights`).

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: the privacy budget (pure ``epsilon`` with Laplace noise; ``(epsilon, delta)`` via zCDP
            with Gaussian noise).
        delta: 0 (the default) with Laplace noise, which is pure DP (any other value is refused); in
            ``(0, 1)`` with Gaussian noise.
        key: a ``jax.random`` key; the whole run (selections, noise, synthetic data) follows from it.
        workload: a :class:`~pgmjax.Workload` or a list of cliques; default all 2-way marginals. In marginal
            mode only its cliques matter; in query mode its query matrices are the candidates
            (``Workload.marginals``: the 2019 script's cell-level ones, ``Workload.benchmark``: prefix ranges).
        engine_iters: engine iterations per round (at most, before the last round: see step 4).
        fit_options: a :class:`pgmjax.FitOptions` for every fit (``method``, ``loss``, ``dtype``, ``tol`` (then for
            every round, the last included), ``callback``, ``oracle``, ...).
            ``oracle="approximate"`` and ``"auto"`` as in :func:`pgmjax.mechanisms.aim`.
        max_model_mb: the final model-size cap in MB (the cap at round ``i`` is ``i/T`` of it); None for no cap.
        **own: MWEM's own options, by name: the fields of :class:`MWEMOptions` (``rounds``, ``noise``, ``bounded``,
            ``alpha``, ``selection``, ``mw_iters``, ``original``, ``max_table_cells``, ``synthetic``, ``checkpoint``,
            ``public``), checked before anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (+PGM), ``synthetic``, ``measurements``,
        ``accountant`` (EM and measurement alternating, summing exactly to the budget), ``original`` (a
        :class:`~pgmjax.mechanisms.original_estimates.FactoredTable` or None) with ``original_error``, ``plan`` and
        ``info``, an :class:`~pgmjax.mechanisms.multiplicative_weights.MWEMInfo`: ``selection``, ``noise``,
        ``bounded``, ``rounds``, ``alpha``, ``em_sensitivity``, ``log`` (per round: round, clique, row, cap_mb,
        model_mb, candidates, excluded, noise_std), ``selected``, ``total``, ``mw_components``, ``mw_table_cells``,
        ``seconds``, ``resumed_from`` (the checkpoint's round resumed after, or None), ``public`` (the cliques the
        final fit took from the public data).

    Raises:
        ValueError / TypeError: bad input (a budget, noise, selection, alpha or size cap out of range, a checkpoint of
            another run, ...), before anything is computed.
        pgmjax.mechanisms.checkpoint.RunInterrupted: Ctrl-C during the rounds (the rounds done kept, as AIM's).

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 3, "b": 4, "c": 2})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), dom)
        >>> res = mwem(data, 1.0, key=jax.random.key(0), engine_iters=50, mw_iters=20)
        >>> res.accountant.spent == res.accountant.budget, len(res.ledger)
        (True, 6)
        >>> res.model.marginal(("a", "b")).shape, res.original.marginal(("a", "b")).shape
        ((3, 4), (3, 4))
    """
    run = _mwem_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    keeper = _mwem_keeper(data, key, run)
    with keeper.interruptible():  # Ctrl-C: keep the rounds completed, say how to resume
        return _mwem(data, key, keeper, run)


class _Run(NamedTuple):
    """:func:`mwem`'s arguments checked against the data: the common ones, the workload's cliques and the own options
    with their data-dependent defaults filled in (``rounds``, ``alpha``)."""

    epsilon: float
    delta: float
    engine_iters: int
    max_model_mb: float | None
    fit: dict  # the keyword arguments of every fit (FitOptions.given())
    wl: object
    cliques: list
    own: MWEMOptions


def _mwem_keeper(data, key, run: _Run) -> Keeper:
    """The run's checkpoint keeper, its folder checked: the run is identified by what the rounds depend on (the MW
    arm and the sampling are post-processing and may change on resume)."""
    where, own = "mwem", run.own
    checkpoint = own.checkpoint
    if checkpoint is not None and own.selection != "marginal":
        raise ValueError(f"{where}: checkpoint= keeps marginal measurements: use selection='marginal' or drop the checkpoint")
    if checkpoint is not None and oracle_of(run.fit) != "exact":
        raise ValueError(f"{where}: checkpoint= keeps exact models only; drop the oracle from fit_options or the checkpoint")
    if checkpoint is not None and own.public is not None:
        raise ValueError(f"{where}: checkpoint= does not keep a run with public data; drop one of them")
    settings = {"epsilon": run.epsilon, "delta": run.delta, "noise": own.noise, "selection": own.selection,
                "bounded": own.bounded, "rounds": own.rounds, "alpha": own.alpha, "max_model_mb": run.max_model_mb,
                "engine_iters": run.engine_iters, "cliques": run.cliques}
    settings["fit_options"] = {k: v for k, v in run.fit.items() if k != "callback"}
    keeper = Keeper(checkpoint, fingerprint(where, data, key, settings) if checkpoint is not None else {}, where)
    keeper.check_folder()
    return keeper


def _mwem_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own: MWEMOptions) -> _Run:
    """:func:`mwem`'s arguments checked against the data (its own options were checked where made), everything
    before any private computation."""
    where = "mwem"
    domain = check_data(data, where).domain
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    _check_key(key, where)
    if own.noise == "gaussian":
        delta = check_positive_delta(delta, where, "; Gaussian noise gives (epsilon, delta)-DP (e.g. delta=1e-9), or use noise='laplace'")
    else:
        delta = check_pure_delta(delta, where, " with Laplace noise; pass noise='gaussian' for (epsilon, delta)-DP through zCDP")
    own = dataclasses.replace(
        own,
        rounds=len(domain) if own.rounds is None else own.rounds,
        alpha=(0.9 if own.selection == "marginal" else 0.5) if own.alpha is None else own.alpha,
        public=check_public(own.public, domain, where),  # marginals come with their cliques; a table answers any
    )
    max_model_mb = check_model_cap(max_model_mb, where)
    engine_iters = _int(engine_iters, "engine_iters", where, 1)
    options = check_fit_options(fit_options, where)
    wl = check_workload(workload, domain, where)
    cliques: list[Clique] = list(dict.fromkeys(wl.cliques))  # distinct, first-seen order
    # The selection scores every workload clique's marginal: a huge domain is refused here (ModelTooLarge).
    check_domain_size(domain, where, cliques, what="the workload's marginals (the selection scores each)")
    if max_model_mb is not None:
        _check_round_one(domain, cliques, max_model_mb, own.rounds, where, list(own.public.cliques or ()) if own.public else [])
        if options.get("oracle", "exact") == "exact":  # the +PGM arm's largest fit at its peak, before any budget
            check_capped_fit(max_model_mb, options.get("method", "mirror_descent"), options.get("dtype"), where)
    return _Run(epsilon, delta, engine_iters, max_model_mb, options, wl, cliques, own)


def _mwem(data: Dataset, key, keeper: Keeper, run: _Run) -> MechanismResult:
    """MWEM's Algorithm 1 on checked arguments: ``T`` rounds of select (EM), measure, refit driven by the +PGM
    arm, then the MW arm replaying the transcript (:mod:`pgmjax.mechanisms.multiplicative_weights`)."""
    where, domain, own = "mwem", data.domain, run.own
    epsilon, delta, noise, rounds, bounded = run.epsilon, run.delta, own.noise, own.rounds, own.bounded
    acc = Accountant(epsilon=epsilon, bounded=bounded) if noise == "laplace" else Accountant(epsilon=epsilon, delta=delta, bounded=bounded)
    queries, em_sens, meas_sens = _selection_sensitivities(acc, run.wl, own.selection, domain, bounded, where)
    budget = mwem_budget(epsilon, rounds, delta=delta if noise == "gaussian" else None, noise=noise, bounded=bounded,
                         alpha=own.alpha, sensitivity=meas_sens)
    plan = record_plan(acc, "mwem", [
        BudgetStep("rounds: select (exponential mechanism)", "exponential",
                   rounds * budget["em_epsilon" if noise == "laplace" else "em_rho"], rounds, epsilon=budget["em_epsilon"]),
        BudgetStep("rounds: measure the selection", noise, 0.0, rounds, scale=budget["scale"]),
    ], epsilon=epsilon, delta=delta)
    unit = "epsilon" if noise == "laplace" else "rho"
    em_spend = {unit: budget[f"em_{unit}"]}
    meas_spend = {unit: budget[f"measure_{unit}"]}
    n_records = len(data)
    total_known = float(n_records) if bounded else None

    # ---- the +PGM arm drives the selection
    start = time.perf_counter()
    keys = jax.random.split(key, 2 * rounds + 1)
    fitted, measurements, log, engine_seconds = run_rounds(
        data, acc, keys, run.cliques, queries, rounds=rounds, max_model_mb=run.max_model_mb, em_sens=em_sens, meas_sens=meas_sens,
        em_spend=em_spend, meas_spend=meas_spend, noise=noise, total_known=total_known, engine_iters=run.engine_iters,
        options=run.fit, keeper=keeper, public=own.public,
    )
    model = fitted.model
    taken = public_cliques(fitted) if own.public is not None else []
    for clique in taken:  # what the fits took from the public data, free
        acc.record_public(clique, domain.size(clique))
    pgm_seconds = time.perf_counter() - start
    synth = synthesize(model, keys[-1]) if own.synthetic else None

    # ---- the original arm: MW on the same transcript, if its tables fit
    comps, mw_table, mw_error, mw_seconds = _original_arm(
        domain, measurements, original=own.original, max_table_cells=own.max_table_cells, bounded=bounded,
        n_records=n_records, mw_iters=own.mw_iters,
    )

    info = MWEMInfo(
        selection=own.selection,
        noise=noise,
        bounded=bounded,
        rounds=rounds,
        alpha=own.alpha,
        epsilon=epsilon,
        delta=delta if noise == "gaussian" else None,
        em_sensitivity=em_sens,
        max_model_mb=run.max_model_mb,
        log=log,
        selected=[e["clique"] if e["row"] is None else (e["clique"], e["row"]) for e in log],
        total=model.total,
        mw_components=comps,
        mw_table_cells=sum(n for _, n in comps),
        seconds={"pgm": pgm_seconds, "engine": engine_seconds, "mw": mw_seconds},
        resumed_from=keeper.resumed_from,
        public=taken,
    )
    # the engine's input, as the result states it: the private transcript and the public marginals it was fitted to
    measurements = list(measurements) + [own.public.measurement(c, float(model.total)) for c in taken]
    return MechanismResult(mechanism="mwem", model=model, synthetic=synth, measurements=measurements, accountant=acc,
                           original=mw_table, original_error=mw_error, info=info, plan=plan, report=fitted.report)
