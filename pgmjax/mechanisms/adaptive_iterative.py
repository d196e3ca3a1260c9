"""AIM: adaptive and iterative marginal selection under zCDP (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022).

McKenna, Mullins, Sheldon & Miklau, "AIM: an adaptive and iterative mechanism for differentially
private synthetic data", PVLDB 15(11), 2022 (Algorithm 1 and Section 4). Reference code: private-pgm
``mechanisms/aim.py`` @4d2b3c5. AIM is built on graphical-model estimation from the start, so it has
a single arm: ``result.model`` is the engine's estimate and ``result.original`` is None.

Budget: ``rho = cdp_rho(epsilon, delta)``; with ``T`` nominal rounds (default ``16 d``) the initial
noise is ``sigma = sqrt(T / (2 * 0.9 rho))`` and the selection budget ``eps_EM = sqrt(8 * 0.1 rho / T)``
(90% of a round measures, 10% selects). Candidates: the downward closure of the workload cliques,
each with the weight ``w_r = sum_{(s, c_s) in W} c_s |r ∩ s|`` (:func:`aim_candidates`).

1. Measure every one-way candidate with ``sigma``; fit the engine.
2. Round ``t``: if what is left is below ``2 (1/(2 sigma^2) + eps_EM^2/8)`` this is the last round,
   with ``sigma = sqrt(1 / (2 * 0.9 * remaining))`` and ``eps_EM = sqrt(8 * 0.1 * remaining)``
   (it spends exactly the rest). Size limit ``max_model_mb * used / rho`` (``used`` counts this
   round): the candidates whose addition keeps the model under it, plus every candidate already
   inside a model clique (free). The exponential mechanism picks ``r`` with quality
   ``q_r = w_r (||mu_r(D) - mu_hat_r||_1 - sqrt(2/pi) sigma n_r)`` (sensitivity ``max_r w_r``; the
   ``sqrt(2/pi) sigma n_r`` term is the expected L1 norm of the noise a measurement of ``r`` would
   add, Section 4.2), the marginal is measured with ``sigma`` and the engine refits, warm-started
   from the previous model.
3. Annealing (Section 4.3): if the refit moved ``mu_hat_r`` by at most ``sqrt(2/pi) sigma n_r`` in
   L1, halve ``sigma`` and double ``eps_EM``.
4. A final fit and ``round(total)`` synthetic records.

The fits read a marginal measured more than once as one measurement, its answers averaged by inverse variance
(:func:`~pgmjax.queries.measurement.pool_repeats`; exact for the L2 loss): the release keeps every measurement,
and a round that measures a marginal again refits the previous round's structure with its compiled program.

Anchors (Adult, ``d = 14``, ``eps = 1``, ``delta = 1e-9``; :func:`aim_budget`): ``T = 224``,
``sigma = 91.17``, ``eps_EM = 0.007313``.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import numpy as np

from ..estimation.options import FitOptions
from ..data.dataset import Dataset
from ..data.domain import Clique, Domain
from ..estimation.estimate import estimate
from ..estimation.memory import check_capped_fit
from ..privacy import REST, Accountant, cdp_rho
from ..privacy import check_count as _count
from ..privacy import check_key as _check_key
from ..privacy import check_positive as _positive
from ..programs import MAX_LIVE_PROGRAMS, release_compiled
from ..queries.constraints import check_constraints, possible_cells
from ..queries.measurement import pool_repeats
from ..queries.workload import Workload
from .options import (DEFAULT_DELTA, check_data, check_epsilon, check_fit_options, check_model_cap,
                      check_zcdp_delta)
from .aim_options import AIMInfo, AIMOptions
from .checkpoint import Keeper, RunState, fingerprint
from .public_selection import JointSelection, check_public
from .own_options import takes_own_options
from .progress import Progress
from .result import BudgetStep, MechanismResult, record_plan
from .run_info import reports
from .steps import (ROUND_TOL, Timer, candidate_marginals, candidate_model_sizes, l1_errors, model_mb, oracle_of,
                    pgm_native_result, refit_hints, synthesize)

__all__ = ["AIMOptions", "HALF_NORMAL_MEAN", "aim", "aim_budget", "aim_candidates", "default_aim_workload"]

#: The share of a round's budget spent on the measurement (the rest selects).
MEASURE_SHARE = 0.9
#: ``sqrt(2/pi)``: the expected absolute value of a standard normal.
HALF_NORMAL_MEAN = math.sqrt(2.0 / math.pi)


# ---------------------------------------------------------------------------------------------------
# Budget, workload and candidates
# ---------------------------------------------------------------------------------------------------


def aim_budget(epsilon: float, delta: float = 1e-9, *, attributes: int | None = None, rounds: int | None = None) -> dict:
    """AIM's initial per-round noise and selection budget (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022).

    Args:
        epsilon, delta: the ``(epsilon, delta)``-DP target.
        attributes: ``d``; gives the default ``rounds = 16 d``.
        rounds: ``T`` (overrides ``attributes``).

    Returns:
        A dict: ``rho``, ``rounds`` (``T``), ``sigma`` (``sqrt(T / (2 * 0.9 rho))``), ``em_epsilon``
        (``sqrt(8 * 0.1 rho / T)``), ``round_rho`` (``rho / T``: ``1/(2 sigma^2) + eps_EM^2/8``).

    Example:
        >>> b = aim_budget(1.0, 1e-9, attributes=14)               # Adult
        >>> b["rounds"], round(b["sigma"], 2), round(b["em_epsilon"], 6)
        (224, 91.17, 0.007313)
    """
    where = "aim_budget"
    epsilon = _positive(epsilon, "epsilon", where)
    delta = check_zcdp_delta(delta, where)
    if rounds is None:
        if attributes is None:
            raise ValueError(f"{where}: give rounds= (T) or attributes= (d, for the default T = 16 d)")
        rounds = 16 * _count(attributes, "attributes", where, 1)
    rounds = _count(rounds, "rounds", where, 1)
    rho = cdp_rho(epsilon, delta)
    return {
        "rho": rho,
        "rounds": rounds,
        "sigma": math.sqrt(rounds / (2.0 * MEASURE_SHARE * rho)),
        "em_epsilon": math.sqrt(8.0 * (1.0 - MEASURE_SHARE) * rho / rounds),
        "round_rho": rho / rounds,
    }


def default_aim_workload(domain: Domain, max_cells: int = 10_000) -> list[tuple[Clique, float]]:
    """The reference CLI's workload: every 2-way clique with at most ``max_cells`` cells, weight 1.

    Example:
        >>> default_aim_workload(Domain({"a": 2, "b": 3, "c": 10_000}))
        [(('a', 'b'), 1.0)]
    """
    if len(domain) < 2:
        raise ValueError("default_aim_workload: the default workload (2-way marginals) needs at least 2 attributes")
    return [(c, 1.0) for c in itertools.combinations(domain.attributes, 2) if domain.size(c) <= max_cells]


def _as_weighted(workload, domain: Domain, where: str) -> list[tuple[Clique, float]]:
    """``[(clique, weight)]`` from None, a Workload, ``{clique: weight}``, cliques or (clique, weight) pairs.

    Cliques are put in domain order; repeated cliques add their weights.
    """
    if workload is None:
        if len(domain) < 2:
            raise ValueError(f"{where}: the default workload (2-way marginals) needs at least 2 attributes; pass workload=")
        items = default_aim_workload(domain)
    elif isinstance(workload, Workload):
        items = [(c, 1.0) for c in dict.fromkeys(workload.cliques)]
    elif isinstance(workload, Mapping):
        items = list(workload.items())
    elif isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence):
        raise TypeError(f"{where}: workload must be a pgmjax.Workload, a list of cliques or of (clique, weight) pairs, got {type(workload).__name__}")
    else:
        items = []
        for item in workload:
            pair = (
                isinstance(item, (tuple, list))
                and len(item) == 2
                and not isinstance(item[0], str)
                and isinstance(item[1], numbers.Real)
                and not isinstance(item[1], bool)
            )
            items.append(tuple(item) if pair else (item, 1.0))
    if not items:
        raise ValueError(f"{where}: the workload is empty" + (" (every 2-way clique has more than 10,000 cells); pass workload=" if workload is None else ""))
    out: dict[Clique, float] = {}
    for clique, weight in items:
        if isinstance(clique, str):
            clique = (clique,)
        c = domain.check_clique(clique, what=f"{where}: workload clique")
        if len(set(c)) != len(c) or not c:
            raise ValueError(f"{where}: workload clique {clique!r} must name distinct attributes")
        w = float(weight)
        if not (math.isfinite(w) and w > 0):
            raise ValueError(f"{where}: workload weights must be positive and finite; {c} has {weight!r}")
        c = domain.canonical(c)
        out[c] = out.get(c, 0.0) + w
    return list(out.items())


def aim_candidates(workload, domain: Domain) -> dict[Clique, float]:
    """The downward closure of the workload cliques with AIM's weights (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022).

    ``w_r = sum_{(s, c_s) in W} c_s |r ∩ s|`` for every non-empty subset ``r`` of a workload clique.

    Args:
        workload: None (every 2-way clique with at most 10,000 cells), a :class:`~pgmjax.Workload`
            (its distinct cliques, weight 1), a list of cliques (weight 1), a list of
            ``(clique, weight)`` pairs, or a ``{clique: weight}`` mapping; weights positive.
        domain: the domain.

    Returns:
        ``{clique: weight}``, cliques in domain order, sorted by size then domain order.

    Example:
        >>> dom = Domain({"a": 2, "b": 2, "c": 2})
        >>> aim_candidates([("a", "b"), ("b", "c")], dom)
        {('a',): 1.0, ('b',): 2.0, ('c',): 1.0, ('a', 'b'): 3.0, ('b', 'c'): 3.0}
    """
    return _candidates(workload, domain, "aim_candidates")


def _candidates(workload, domain: Domain, where: str) -> dict[Clique, float]:
    items = _as_weighted(workload, domain, where)
    closure = set()
    for c, _ in items:
        for k in range(1, len(c) + 1):
            closure.update(itertools.combinations(c, k))  # c is in domain order, so are its subsets
    order = sorted(closure, key=lambda c: (len(c), [domain.index(a) for a in c]))
    holding: dict[str, list[int]] = {}  # attribute -> the workload entries whose clique holds it
    for k, (s, _) in enumerate(items):
        for a in set(s):
            holding.setdefault(a, []).append(k)

    def weight(r: Clique) -> float:  # |r ∩ s| counted from r's attributes: the entries r meets, not every entry
        meets = collections.Counter(k for a in r for k in holding.get(a, ()))
        return math.fsum(items[k][1] * n for k, n in meets.items())

    return {r: weight(r) for r in order}


def _closure(cliques: Sequence[Clique]) -> set[Clique]:
    out = set()
    for c in cliques:
        for k in range(1, len(c) + 1):
            out.update(itertools.combinations(c, k))
    return out


# ---------------------------------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------------------------------


@reports(AIMInfo)
@takes_own_options(AIMOptions)
def aim(
    data: Dataset,
    epsilon: float,
    delta: float = DEFAULT_DELTA,
    *,
    key,
    workload=None,
    engine_iters: int = 1000,
    fit_options: FitOptions | None = None,
    max_model_mb: float = 80.0,
    own: AIMOptions,
) -> MechanismResult:
    """AIM (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022): workload-aware adaptive measurements.

    ``(epsilon, delta)``-DP through ``rho = cdp_rho(epsilon, delta)``-zCDP, add/remove-one-record neighbours
    (``N`` private and estimated by the engine); the rounds are in the module docstring. Every noise addition goes
    through one :class:`~pgmjax.privacy.Accountant` (composition ``"zcdp"``): ``len(one-way)`` Gaussian entries,
    then an exponential and a Gaussian entry per round; the last round spends exactly the rest (ledger sum ``rho``).

    Selection sees the true marginals only through the exponential mechanism; candidates excluded by the size
    limit (which depends only on released cliques and the budget spent) get quality ``-inf``. The model size is
    that of the junction tree :func:`pgmjax.estimate` builds for the current model's cliques plus the candidate
    (:func:`~pgmjax.mechanisms.steps.hypothetical_model_size`): the fitted model never exceeds the limit except
    through free candidates, which do not grow it. ``result.original`` is None (AIM is PGM-native).

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon, delta: the privacy target (``delta`` default 1e-9).
        key: a ``jax.random`` key; the whole run follows from it.
        workload: see :func:`aim_candidates` (default: every 2-way clique with at most 10,000 cells, weight 1).
        engine_iters: the most engine iterations per round's fit (warm-started); a round's fit stops sooner once it
            has converged (:data:`~pgmjax.mechanisms.steps.ROUND_TOL`; ``fit_options=pj.FitOptions(tol=0)``: once
            its loss stops changing).
        fit_options: a :class:`pgmjax.FitOptions` for every fit (``method``, ``dtype``, ``tol``, ``oracle``, ...). With
            ``oracle="approximate"`` (:mod:`pgmjax.estimation.oracles`) the size limit counts the region graph's cells,
            candidates are scored on pseudo-marginals and ``synthetic=False`` is required; ``oracle="auto"``
            fits exactly while the junction tree's fit fits the process's size limit.
        max_model_mb: the model-size limit in MB (``8 * cells / 2^20``) once the whole budget is spent (reference:
            80; about 1 for quick runs); a number (AIM needs a cap).
        **own: AIM's own options, by name: the fields of :class:`~pgmjax.mechanisms.aim_options.AIMOptions`
            (``rounds``, ``final_iters``, ``synthetic``, ``rows``, ``synthetic_method``, ``progress``, ``checkpoint``,
            ``constraints``, ``public``), checked before anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model``, ``synthetic``, ``measurements`` (one-way,
        then one per round), ``accountant`` / ``ledger`` (``spent == budget == rho``), ``original=None``, ``plan``
        (the one-way measurements at the initial noise, then the rounds, adaptive: :func:`aim_budget` has the
        initial noise) and ``info``, an :class:`~pgmjax.mechanisms.aim_options.AIMInfo`: ``candidates``
        (``{clique: weight}``), ``rounds`` (the nominal ``T``),
        ``rounds_run``, ``log`` (per round: round, clique, sigma, em_epsilon, limit_mb, model_mb, candidates,
        annealed, last, spent), ``selected``, ``annealed`` (how many times), ``total``, ``resumed_from`` (the
        checkpoint's round the run resumed after, or None), ``seconds`` (this process's; ``engine``: the fits;
        ``marginals``: the model's answers on every candidate after each fit; ``selection``: sizes, qualities, the
        exponential mechanism and the measurement; ``synthetic``; ``total``).

    Raises:
        TypeError / ValueError: bad input (not a Dataset, epsilon <= 0, delta outside (0, 1), a bad
            workload or weight, rounds too small, non-positive sizes or iterations, a bad key or
            progress, a checkpoint of another run or a folder not the user's), before any private computation.
        pgmjax.mechanisms.checkpoint.RunInterrupted: (a ``KeyboardInterrupt``) Ctrl-C during the rounds; with
            a checkpoint, it holds the rounds completed and the message says how to resume.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 3, "b": 4, "c": 2})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), dom)
        >>> res = aim(data, 1.0, key=jax.random.key(0), rounds=3, max_model_mb=1.0, engine_iters=50)
        >>> res.accountant.spent == res.accountant.budget, res.original is None
        (True, True)
    """
    run = _aim_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    keeper = _aim_keeper(data, key, run)
    bar = Progress(run.own.progress, run.budget["rounds"], "AIM", "aim", unit="round")
    try:
        with keeper.interruptible():  # Ctrl-C: keep the rounds completed, say how to resume
            return _aim(data, key, bar, keeper, run)
    finally:
        bar.close()


class _Run(NamedTuple):
    """:func:`aim`'s arguments checked against the data: the common ones, the candidates, the budget and the own
    options (``final_iters``'s default filled in, ``constraints`` and ``public`` checked over the domain)."""

    epsilon: float
    delta: float
    candidates: dict
    max_model_mb: float
    engine_iters: int
    options: dict  # the keyword arguments of every fit (FitOptions.given())
    budget: dict  # aim_budget's
    own: AIMOptions


def _aim_keeper(data, key, run: _Run) -> Keeper:
    """The run's checkpoint keeper (:mod:`pgmjax.mechanisms.checkpoint`), its folder checked: what identifies the
    run is everything the rounds depend on (the final fit's and the sampling's settings may change on resume)."""
    checkpoint = run.own.checkpoint
    if checkpoint is not None and oracle_of(run.options) != "exact":
        raise ValueError("aim: checkpoint= keeps exact models only; drop the oracle from fit_options or the checkpoint")
    settings = {"epsilon": run.epsilon, "delta": run.delta, "candidates": run.candidates,
                "max_model_mb": run.max_model_mb, "engine_iters": run.engine_iters}
    settings["constraints"] = [(c.attributes, c.kind, c.cells.tolist()) for c in run.own.constraints]
    settings["rounds"] = run.budget["rounds"]
    settings["fit_options"] = {k: v for k, v in run.options.items() if k != "callback"}
    keeper = Keeper(checkpoint, fingerprint("aim", data, key, settings) if checkpoint is not None else {}, "aim")
    keeper.check_folder()
    return keeper


def _aim_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own: AIMOptions) -> _Run:
    """:func:`aim`'s arguments checked against the data (its own options were checked where made), before any
    private computation."""
    where = "aim"
    domain = check_data(data, where).domain
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    delta = check_zcdp_delta(delta, where)
    _check_key(key, where)
    candidates = _candidates(workload, domain, where)
    own = dataclasses.replace(own, constraints=check_constraints(domain, own.constraints, where),
                              public=check_public(own.public, domain, where))
    if max_model_mb is None:
        raise ValueError(f"{where}: max_model_mb must be a number: AIM's candidates are limited by a model-size cap that grows with the budget spent")
    max_model_mb = check_model_cap(max_model_mb, where)
    engine_iters = _count(engine_iters, "engine_iters", where, 1)
    if own.final_iters is None:  # the reference code's
        own = dataclasses.replace(own, final_iters=engine_iters)
    options = check_fit_options(fit_options, where)
    if options.get("oracle", "exact") == "exact":  # the largest fit the cap allows, at its peak, before any budget
        check_capped_fit(max_model_mb, options.get("method", "mirror_descent"), options.get("dtype"), where)
    budget = aim_budget(epsilon, delta, attributes=len(domain), rounds=own.rounds)
    T, k = budget["rounds"], sum(len(c) == 1 for c in candidates)
    if MEASURE_SHARE * k >= T:
        raise ValueError(
            f"{where}: rounds={T} is too small: the {k} initial one-way measurements would cost "
            f"{MEASURE_SHARE * k / T:.3g} of the budget; rounds must exceed {MEASURE_SHARE * k:g}"
        )
    return _Run(epsilon, delta, candidates, max_model_mb, engine_iters, options, budget, own)


def _aim(data: Dataset, key, bar: Progress, keeper: Keeper, run: _Run) -> MechanismResult:
    """AIM's Algorithm 1 on checked arguments (module docstring): measure the one-way marginals and fit, then
    rounds of select (exponential mechanism), measure, refit and anneal until the budget is spent; fit, sample."""
    domain, own, options, budget = data.domain, run.own, run.options, run.budget
    epsilon, delta, candidates, constraints = run.epsilon, run.delta, run.candidates, own.constraints
    max_model_mb, engine_iters, public = run.max_model_mb, run.engine_iters, own.public
    timer = Timer("engine", "marginals", "selection")
    acc = Accountant(epsilon=epsilon, delta=delta, composition="zcdp")
    rho = acc.budget
    one_way = [c for c in candidates if len(c) == 1]
    plan = record_plan(acc, "aim", [
        BudgetStep("one-way marginals", "gaussian", acc.cost("gaussian", sensitivity=1.0, scale=budget["sigma"]) * len(one_way),
                   len(one_way), scale=budget["sigma"]),
        BudgetStep("rounds: select a marginal, measure it (adaptive; the last spends the rest)", "adaptive", 0.0),
    ], epsilon=epsilon, delta=delta)
    k_init, k_loop, k_synth = jax.random.split(key, 3)
    cands = list(candidates)
    weight = np.array([candidates[c] for c in cands])
    # a measurement's expected error: its noise on the cells the constraints leave possible (the model holds the rest at 0)
    sizes = np.array([possible_cells(domain, c, constraints).sum() if constraints else domain.size(c) for c in cands],
                     np.float64)
    sens_unit = acc.l1_sensitivity()  # of ||mu_r(D) - v||_1
    # one of about budget["rounds"] structures: program="auto" shares the size-class compile among them (the caller's
    # options win); the final fit runs all its iterations (unless told a tol), and no fit follows it to compile for
    fit_kwargs = {"structures": max(1, int(budget["rounds"])), **options, "constraints": constraints, "compile_ahead": False}
    rounds_options = {"tol": ROUND_TOL, **fit_kwargs, "compile_ahead": options.get("compile_ahead", False)}
    # a marginal measured again pools with its earlier measurements (exact for the L2 loss): the fit's structure,
    # hence its compiled program, stays the previous round's
    fit_on = pool_repeats if options.get("loss", "l2") == "l2" else list
    state = keeper.resume(domain, acc)
    if state is None:
        # 1. the one-way marginals with the initial sigma, and a first fit
        sigma, eps_em = budget["sigma"], budget["em_epsilon"]
        measurements = list(acc.measure_many(k_init, data, one_way, scale=sigma))
        with timer("engine"):
            fitted = estimate(domain, fit_on(measurements), iters=engine_iters, report=True, **rounds_options)
        t, last, log = 0, False, []
        keeper.round_done(RunState(0, list(measurements), fitted, acc.records(), [], {"sigma": sigma, "em_epsilon": eps_em}))
    else:  # the rounds the checkpoint holds: their measurements, fit, ledger (restored) and noise
        measurements, fitted, log, t = state.measurements, state.fitted, state.log, state.round
        sigma, eps_em = state.extra["sigma"], state.extra["em_epsilon"]
        last = bool(log and log[-1]["last"])
        bar.resume(t)
    model = fitted.model
    truth = data.marginals(cands)  # read only through the exponential mechanism below
    joint = None if public is None else JointSelection(public, cands, "aim")  # public options beside the private
    with timer("marginals"):
        est = candidate_marginals(model, cands)  # the model's answers; refreshed after every refit
    size_cache: dict[tuple, float] = {}
    while not last:
        # 2. a round: its budget (the last spends the rest), candidates under the size limit, select, measure
        t += 1
        with timer("selection"):
            last, sigma, eps_em, cost = _round_budget(acc, sigma, eps_em)
            limit = max_model_mb if last else max_model_mb * min(1.0, (acc.spent + cost) / rho)
            allowed = _allowed(domain, cands, tuple(model.cliques), limit, size_cache, oracle_of(options))
            errors = l1_errors(truth, est)
            q = np.where(allowed, weight * (errors - HALF_NORMAL_MEAN * sigma * sizes), -np.inf)
            q_public = None if joint is None or last else joint.qualities(truth, errors, model.total, weight, allowed)
            j, measured, source = _select_and_measure(acc, jax.random.fold_in(k_loop, t), data, cands, q,
                                                      sens_unit * float(weight[allowed].max()), last, sigma, eps_em, t,
                                                      joint, q_public, model.total)
            measurements.append(measured)

        with timer("engine"):
            release_compiled(above=MAX_LIVE_PROGRAMS)  # a long run's dead structures: keep them bounded
            # what estimate's program="auto" weighs: how often this structure was fitted, how long the last fit ran
            fitted = estimate(domain, fit_on(measurements), iters=engine_iters, warm_start=fitted,
                              **refit_hints(fitted, measurements), report=True, **rounds_options)
            model = fitted.model
        # 3. annealing: the refit barely moved the selected marginal; one compiled program answers the test
        # and the next selection
        annealed = False
        if not last:
            with timer("marginals"):
                old, est = est[j], candidate_marginals(model, cands)
            annealed = float(np.abs(est[j] - old).sum()) <= HALF_NORMAL_MEAN * sigma * sizes[j]
        log.append({"round": t, "clique": cands[j], "sigma": sigma, "em_epsilon": eps_em, "limit_mb": limit,
                    "model_mb": model_mb(model), "candidates": int(allowed.sum()), "annealed": bool(annealed),
                    "last": last, "spent": acc.spent, "source": source})
        if annealed:
            sigma /= 2.0
            eps_em *= 2.0
        left = 0 if last else max(1, int(acc.remaining // _round_cost(acc, sigma, eps_em)))
        keeper.round_done(RunState(t, list(measurements), fitted, acc.records(), list(log),
                                   {"sigma": sigma, "em_epsilon": eps_em}))
        bar.step(log[-1], total=t + left)

    # 4. the final fit and synthetic records
    with timer("engine"):
        fitted = estimate(domain, fit_on(measurements), iters=own.final_iters, warm_start=fitted,
                          repeats=refit_hints(fitted, measurements)["repeats"] + 1, report=True, **fit_kwargs)
        model = fitted.model
    synth = None
    if own.synthetic:
        with timer("synthetic"):
            synth = synthesize(model, k_synth, own.rows, own.synthetic_method)
    info = _aim_info(run, acc, fitted, log, t, timer.done(), keeper, joint)
    return pgm_native_result("aim", "AIM", model=model, synthetic=synth, measurements=measurements, accountant=acc,
                             info=info, plan=plan, report=fitted.report)


def _aim_info(run: _Run, acc: Accountant, fitted, log: list, rounds_run: int, seconds: dict, keeper: Keeper,
              joint) -> AIMInfo:
    """The run's :class:`AIMInfo`."""
    return AIMInfo(
        epsilon=run.epsilon, delta=run.delta, rho=acc.budget, candidates=run.candidates, rounds=run.budget["rounds"],
        rounds_run=rounds_run, max_model_mb=run.max_model_mb, engine_iters=run.engine_iters,
        final_iters=run.own.final_iters, log=log, selected=[e["clique"] for e in log],
        annealed=sum(e["annealed"] for e in log), total=fitted.model.total, model_mb=model_mb(fitted.model),
        seconds=seconds, resumed_from=keeper.resumed_from, public=[] if joint is None else list(joint.taken),
        oracle=fitted.report.info if oracle_of(run.options) != "exact" else None)  # which oracle, and why


def _select_and_measure(acc: Accountant, key, data: Dataset, cands: list[Clique], q: np.ndarray, sens: float,
                        last: bool, sigma: float, eps_em: float, t: int, joint=None, q_public=None, total=None):
    """Round ``t``'s exponential-mechanism draw among the candidates (qualities ``q``, sensitivity ``sens``) and
    the measurement of the one drawn: ``(index, measurement, "private")``. The last round's draw spends a tenth of
    what is left and its measurement the rest (step 2). With public options (``q_public``, :mod:`public_selection`)
    the draw is among both at twice the sensitivity, and a public choice is ``(index, its measurement, "public")``."""
    k_em, k_meas = jax.random.split(key)
    label = f"round {t}: select a marginal"
    if last:
        j = acc.exponential(k_em, q, sens, rho=(1.0 - MEASURE_SHARE) * acc.remaining, target=label)
        return j, acc.measure(k_meas, data, cands[j], rho=REST), "private"
    if q_public is not None:
        j = acc.exponential(k_em, np.concatenate([q, q_public]), 2.0 * sens, epsilon=eps_em,
                            target=f"{label}, private or public")
        if j >= len(cands):
            return j - len(cands), joint.take(acc, j - len(cands), total, sigma), "public"
        return j, acc.measure(k_meas, data, cands[j], scale=sigma), "private"
    j = acc.exponential(k_em, q, sens, epsilon=eps_em, target=label)
    return j, acc.measure(k_meas, data, cands[j], scale=sigma), "private"


def _round_budget(acc: Accountant, sigma: float, eps_em: float) -> tuple[bool, float, float, float]:
    """``(last, sigma, eps_em, cost)`` of the next round: the last when what is left is below two rounds at the
    current noise, and then with ``sigma`` and ``eps_em`` that spend exactly the rest (step 2)."""
    remaining = acc.remaining
    cost = _round_cost(acc, sigma, eps_em)
    if remaining < 2.0 * cost:
        return True, math.sqrt(1.0 / (2.0 * MEASURE_SHARE * remaining)), math.sqrt(8.0 * (1.0 - MEASURE_SHARE) * remaining), remaining
    return False, sigma, eps_em, cost


def _round_cost(acc: Accountant, sigma: float, eps_em: float) -> float:
    """The zCDP cost of a round: a Gaussian measurement with ``sigma`` and a selection with ``eps_em``."""
    return acc.cost("gaussian", sensitivity=1.0, scale=sigma) + acc.cost("exponential", sensitivity=1.0, epsilon=eps_em)


def _allowed(domain: Domain, cands: list[Clique], base: tuple, limit: float, size_cache: dict,
             oracle: str = "exact") -> np.ndarray:
    """Which candidates the round may select: those whose addition keeps the model over ``base`` (its cliques)
    within ``limit`` MB, and every candidate already inside a model clique (free: it does not grow the model).
    Depends only on released cliques and the budget spent. ``size_cache`` keeps the sizes across rounds; ``oracle``
    says which model's size (:func:`~pgmjax.mechanisms.steps.hypothetical_model_size`)."""
    free = _closure(base)
    sized = [c for c in cands if c not in free and (base, c) not in size_cache]
    size_cache.update(zip(((base, c) for c in sized), candidate_model_sizes(domain, base, sized, oracle)))
    return np.array([c in free or size_cache[(base, c)] <= limit for c in cands], bool)
