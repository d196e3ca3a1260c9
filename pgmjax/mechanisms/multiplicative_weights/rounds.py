"""MWEM's rounds: select with the exponential mechanism, measure, refit the graphical model.

Hardt, Ligett & McSherry, "A Simple and Practical Algorithm for Differentially Private Data Release",
NeurIPS 2012, Algorithm 1 (steps 1-2: the exponential mechanism picks what the current estimate
answers worst, the Laplace mechanism measures it); the estimate is the +PGM arm's graphical model,
refitted every round with a model-size cap that grows over the rounds (McKenna, Sheldon & Miklau,
"Graphical-model based estimation and inference for differential privacy", ICML 2019, Section 6).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np

from ...data.dataset import Dataset
from ...data.domain import Clique, Domain
from ...estimation.estimate import estimate
from ...privacy import REST, Accountant
from ...programs import MAX_LIVE_PROGRAMS, release_compiled
from ...queries.measurement import Measurement
from ..checkpoint import Keeper, RunState
from ..steps import ROUND_TOL, candidate_marginals, candidate_model_sizes, model_mb, oracle_of
from .query_rows import kron_row


def _estimates(domain: Domain, model, cliques: Sequence[Clique], total_known: float | None, public=None) -> dict:
    """The current estimate of every candidate marginal: the model's; before round 1 the public marginals scaled to
    ``N`` where ``N`` is known and public data is given, else ``N``-uniform (zero if ``N`` is private)."""
    if model is not None:
        return dict(zip(cliques, candidate_marginals(model, cliques)))
    fill = total_known or 0.0
    est = {c: np.full(domain.shape_of(c), fill / domain.size(c)) for c in cliques}
    if public is not None and total_known:
        for c in cliques:
            try:
                est[c] = public.counts(c) * (total_known / public.total)
            except ValueError:  # only some marginals are public and none holds c: uniform, as without them
                pass
    return est


def _select_marginal(acc: Accountant, key, i: int, cliques, truth, est, fits, domain: Domain, em_sens, em_spend):
    """EM over the cliques with quality ``||mu_C(D) - mu_hat_C||_1 - n_C``: ``(clique, None, None, candidates)``."""
    # Candidates excluded by the (data-independent) size cap get -inf: probability zero.
    q = np.array([np.abs(truth[c] - est[c]).sum() - domain.size(c) if fits[c] else -np.inf for c in cliques])
    n_candidates = int(np.isfinite(q).sum())
    pick = acc.exponential(key, q, em_sens, **em_spend, target=f"round {i}: select a marginal")
    return cliques[pick], None, None, n_candidates


def _select_query(acc: Accountant, key, i: int, queries, true_rows, est, fits, domain: Domain, em_sens, em_spend):
    """EM over every row of the workload queries with quality ``|w^T mu_C(D) - w^T mu_hat_C|``: ``(clique, row, query, candidates)``."""
    parts = []
    for qi, wq in enumerate(queries):
        if fits[wq.clique]:
            parts.append(np.abs(true_rows[qi] - wq.apply(est[wq.clique]).reshape(-1)))
        else:
            parts.append(np.full(true_rows[qi].size, -np.inf))
    offsets = np.cumsum([0] + [p.size for p in parts])
    n_candidates = int(sum(p.size for p, wq in zip(parts, queries) if fits[wq.clique]))
    pick = acc.exponential(key, np.concatenate(parts), em_sens, **em_spend, target=f"round {i}: select a query")
    qi = int(np.searchsorted(offsets, pick, side="right") - 1)
    row = int(pick - offsets[qi])
    return queries[qi].clique, row, kron_row(queries[qi], domain, row), n_candidates


def run_rounds(
    data: Dataset,
    acc: Accountant,
    keys,
    cliques: list[Clique],
    queries: list | None,
    *,
    rounds: int,
    max_model_mb: float | None,
    em_sens: float,
    meas_sens: float | None,
    em_spend: Mapping,
    meas_spend: Mapping,
    noise: str,
    total_known: float | None,
    engine_iters: int,
    options: Mapping,
    keeper: Keeper,
    public=None,
) -> tuple:
    """The +PGM arm's ``rounds`` rounds (it drives the selection): ``(fit, measurements, log, engine seconds)``,
    the fit the last round's :class:`~pgmjax.Fit`.

    Round ``i`` uses ``keys[2i - 2]`` for the selection and ``keys[2i - 1]`` for the measurement; the
    last measurement spends what is left of the budget. ``queries`` is None in marginal mode. ``keeper``
    (:mod:`pgmjax.mechanisms.checkpoint`) resumes from a checkpoint's last round and keeps each round done.
    ``public`` (a :class:`~pgmjax.queries.public.PublicData` or None) joins every fit, free; its own cliques count
    towards the size cap from round 1.
    """
    domain = data.domain
    state = keeper.resume(domain, acc)  # the ledger of the rounds it holds restored into acc
    truth = dict(zip(cliques, data.marginals(cliques)))  # EM qualities only (released through the EM)
    if queries is not None:
        true_rows = [q.apply(truth[q.clique]).reshape(-1) for q in queries]
    fitted = None  # the last round's Fit: its model scores the next selection, and the next fit starts from it
    measurements: list[Measurement] = []
    log: list[dict] = []
    if state is not None:
        fitted, measurements, log = state.fitted, state.measurements, state.log
    engine_seconds = 0.0
    for i in range(len(log) + 1, rounds + 1):
        cap = math.inf if max_model_mb is None else max_model_mb * i / rounds
        model = None if fitted is None else fitted.model
        base = list(model.cliques) if model is not None else list(public.cliques or ()) if public is not None else []
        sizes = (np.zeros(len(cliques)) if max_model_mb is None
                 else candidate_model_sizes(domain, base, cliques, oracle_of(options)))
        fits = {c: bool(mb <= cap) for c, mb in zip(cliques, sizes)}
        est = _estimates(domain, model, cliques, total_known, public)
        if queries is None:
            clique, row, query, n_candidates = _select_marginal(acc, keys[2 * i - 2], i, cliques, truth, est, fits, domain, em_sens, em_spend)
        else:
            clique, row, query, n_candidates = _select_query(acc, keys[2 * i - 2], i, queries, true_rows, est, fits, domain, em_sens, em_spend)
        spend = meas_spend if i < rounds else {next(iter(meas_spend)): REST}
        m = acc.measure(
            keys[2 * i - 1], data, clique, query=query, mechanism=noise, sensitivity=meas_sens, **spend,
            target=clique if row is None else (clique, row),
        )
        measurements.append(m)
        t0 = time.perf_counter()
        release_compiled(above=MAX_LIVE_PROGRAMS)  # a long run's dead structures: keep them bounded
        # one of `rounds` structures: program="auto" shares the size-class program's compile among them. A round
        # before the last stops once converged (its model only scores the next selection); the last, the release's
        # model, runs all its iterations (the caller's own tol wins in both); no fit follows it to compile ahead for
        until = {"tol": ROUND_TOL} if i < rounds else {}
        last = {"compile_ahead": False} if i == rounds else {}
        with_public = {"public": public} if public is not None else {}
        fitted = estimate(domain, measurements, iters=engine_iters, total=total_known, warm_start=fitted, report=True,
                          **{"structures": rounds, **until, **options, **with_public, **last})
        engine_seconds += time.perf_counter() - t0
        log.append(
            {
                "round": i,
                "clique": clique,
                "row": row,
                "cap_mb": cap,
                "model_mb": model_mb(fitted.model),
                "candidates": n_candidates,
                "excluded": [c for c in cliques if not fits[c]],
                "noise_std": float(m.row_stddev()[0]),
            }
        )
        keeper.round_done(RunState(i, list(measurements), fitted, acc.records(), list(log)))
    return fitted, measurements, log, engine_seconds
