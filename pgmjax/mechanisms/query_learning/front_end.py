"""The MLDP front-end (both arms on one noisy release) and the paper's Laplace baseline.

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model
Publishing", IEEE BigData 2017, Algorithm 1 (select the training queries, one Laplace release of
their answers, publish a model) and Section IV (the baseline: every published query answered with
Laplace noise); the +PGM arm after McKenna, Sheldon & Miklau, ICML 2019.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from typing import NamedTuple

import jax
import numpy as np

from ...estimation.options import FitOptions
from ...data.dataset import Dataset
from ...estimation.memory import check_fit
from ...privacy import REST, Accountant
from ...checks import check_bool as _bool
from ...checks import check_count as _int
from ...checks import check_key as _check_key
from ...checks import check_positive as _positive
from ..options import (check_cliques_within_cap, check_data, check_epsilon, check_fit_options, check_model_cap,
                       check_pure_delta, check_workload)
from ..result import BudgetStep, MechanismResult, record_plan
from ..steps import Timer, oracle_of, synthesize
from ..own_options import takes_own_options
from ..run_info import reports
from .mldp_options import MLDPInfo, MLDPOptions
from .pgm_arm import fit_pgm
from .query_set import QuerySet, as_queries, check_domain
from .regression import fit_regression
from .selection import select_training
from .sensitivity import sensitivity_is_exact, training_sensitivity


def _coverage(queries: QuerySet) -> float:
    """Share of the queries' cliques' cells touched by at least one query."""
    hit = cells = 0
    for c, (m, _) in queries.by_clique().items():
        hit += int((np.abs(m).sum(axis=0) > 0).sum())
        cells += queries.domain.size(c)
    return hit / cells


#: Training queries built from a workload (every cell of every workload marginal, as dense identity
#: blocks) must fit in this many matrix entries.
MAX_TRAINING_ENTRIES = 2**24


def workload_training(workload, domain, where: str = "mldp") -> QuerySet:
    """MLDP's training queries for a marginal workload: every cell of every workload clique (identity blocks).

    Args:
        workload: a :class:`~pgmjax.Workload` or a list of cliques; None for every 2-way marginal.
        domain: the data's domain.
        where: the caller's name, for the messages.

    Returns:
        A :class:`QuerySet` (ValueError when it would exceed :data:`MAX_TRAINING_ENTRIES` matrix entries).

    Example:
        >>> import pgmjax as pj
        >>> len(workload_training([("a", "b")], pj.Domain({"a": 2, "b": 3, "c": 2})))
        6
    """
    wl = check_workload(workload, domain, where)
    cliques = list(dict.fromkeys(wl.cliques))
    entries = sum(domain.size(c) ** 2 for c in cliques)
    if entries > MAX_TRAINING_ENTRIES:
        big = max(cliques, key=domain.size)
        raise ValueError(
            f"{where}: the training queries (every cell of every workload marginal, as dense identity blocks) would hold "
            f"{entries:,} matrix entries (largest clique {big}: {domain.size(big):,} cells); the limit is "
            f"{MAX_TRAINING_ENTRIES:,}: use a workload of smaller marginals, or pass training= a QuerySet"
        )
    return QuerySet(domain, [(c, np.eye(domain.size(c))) for c in cliques])


def _answer_arms(query_sets: Mapping[str, QuerySet | None], pgm, reg) -> dict:
    """Both arms' answers to each named query set (None: skipped), at no privacy cost (post-processing).

    ``{name: {"pgm": ..., "original": ...}}``; the regression cannot answer a query on a clique without
    training queries: then ``"original"`` is None and ``"original_error"`` says why.
    """
    answers = {}
    for name, qs in query_sets.items():
        if qs is None:
            continue
        arm = {"pgm": qs.answer(pgm)}
        if reg is not None:
            try:
                arm["original"] = reg.predict(qs)
            except ValueError as err:  # a clique without training queries: the regression cannot answer
                arm["original"] = None
                arm["original_error"] = str(err)
        answers[name] = arm
    return answers


@reports(MLDPInfo)
@takes_own_options(MLDPOptions)
def mldp(
    data: Dataset,
    epsilon: float,
    delta: float = 0.0,
    *,
    key,
    workload=None,
    engine_iters: int = 1000,
    fit_options: FitOptions | None = None,
    max_model_mb: float | None = None,
    own: MLDPOptions,
) -> MechanismResult:
    """MLDP and MLDP+PGM on the same noisy training answers (Zhu et al. 2017, Algorithm 1).

    1. Training set: ``training`` itself, or, with ``size=m``, ``m`` of its queries chosen by
       :func:`select_training` (``training`` is then the published set the training queries are
       drawn from).
    2. ``S_Fx`` = :func:`training_sensitivity` (exact; doubled when ``bounded``).
    3. ``y = F_x(D) + Lap(S_Fx / eps)^m``: one Laplace release through the
       :class:`~pgmjax.privacy.Accountant`, spending exactly ``epsilon`` (the only read of ``data``).
    4. Original arm: :func:`fit_regression` on ``(F_x, y)`` (``model``, ``ridge``, ``width``,
       ``centers``).
    5. +PGM arm: :func:`fit_pgm` on the same ``y`` with ``stddev = sqrt(2) S_Fx / eps``; the total
       is ``N`` when ``bounded`` (public), else estimated from the measurements.
    6. Both arms answer the published queries and ``fresh`` at no further cost.

    Answering later: ``result.original.predict(qs)`` (or ``qs.answer(result.original)``) for the
    regression model; ``qs.answer(result.model)`` for the graphical model, which also answers queries
    on cliques no training query touched.

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: the privacy budget (pure ``epsilon``-DP).
        delta: 0 (the default): MLDP is pure epsilon-DP, any other value is refused.
        key: a ``jax.random`` key; the selection, the noise and the synthetic data follow from it.
        workload: a marginal workload whose every cell becomes a training query
            (:func:`workload_training`); used when ``training`` is None (then None means every 2-way
            marginal). Give one of ``workload`` and ``training``.
        engine_iters: engine iterations of the +PGM arm.
        fit_options: a :class:`pgmjax.FitOptions` for the fit.
        max_model_mb: None (default), or a cap in MB on the model over the training queries'
            cliques, checked before anything is computed.
        **own: MLDP's own options, by name: the fields of :class:`MLDPOptions` (``training``, ``fresh``, ``size``,
            ``bounded``, ``model``, ``ridge``, ``width``, ``centers``, ``original``, ``synthetic``), checked before
            anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (+PGM), ``original``
        (:class:`RegressionModel`), ``measurements`` (one per clique), ``accountant`` (one Laplace
        entry, ``spent == epsilon``), ``synthetic`` (or None), ``plan`` (one step) and ``info``, an
        :class:`MLDPInfo`: ``training`` (the QuerySet), ``training_index`` (positions in ``training`` when
        selected, else None), ``published`` (the QuerySet answered as published), ``size``, ``sensitivity`` (``S_Fx``),
        ``sensitivity_exact`` (False only for the upper bound of :func:`training_sensitivity`),
        ``scale`` (Laplace ``b``), ``stddev``, ``noisy_answers``, ``coverage`` (share of cells
        touched), ``weights`` (the regression parameters), ``total`` and ``total_source`` (+PGM),
        ``answers`` (``{"published": {"original", "pgm"}, "fresh": {...}}``), ``seconds``.

    Raises:
        ValueError / TypeError: bad input (epsilon <= 0, a non-QuerySet, size out of range, queries on
            attributes the data lacks, an all-zero training set, unknown model, ...), before any noise.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 10, "b": 3})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [10, 3], (1000, 2)), dom)
        >>> res = mldp(data, 1.0, key=jax.random.key(0), training=QuerySet.subset_sums(dom, "a"), size=10, engine_iters=200)
        >>> res.info.sensitivity, len(res.info.training), res.info.answers["published"]["pgm"].shape
        (1.0, 10, (1023,))
    """
    run = _mldp_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    return _mldp(data, key, run)


class _Run(NamedTuple):
    """:func:`mldp`'s arguments checked against the data: the common ones and the own options with the training
    queries filled in (from the workload when none were given)."""

    epsilon: float
    engine_iters: int
    options: dict  # the keyword arguments of the fit (FitOptions.given())
    own: MLDPOptions


def _mldp_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own: MLDPOptions) -> _Run:
    """:func:`mldp`'s arguments checked against the data (its own options were checked where made), everything
    before the private data is read."""
    where = "mldp"
    domain = check_data(data, where).domain
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    check_pure_delta(delta, where)
    _check_key(key, where)
    if own.training is None:  # the size is checked against it where the options are made again
        own = dataclasses.replace(own, training=workload_training(workload, domain, where))
    elif workload is not None:
        raise ValueError(f"{where}: give the training queries as workload= (every cell of its marginals) or as training=, not both")
    check_domain(own.training, domain, where)
    if own.fresh is not None:
        check_domain(own.fresh, domain, where)
    engine_iters = _int(engine_iters, "engine_iters", where)
    options = check_fit_options(fit_options, where)
    max_model_mb = check_model_cap(max_model_mb, where)
    training = own.training
    check_cliques_within_cap(domain, training.cliques, max_model_mb, where, "the model over the training queries' cliques")
    if oracle_of(options) == "exact":  # the model is the training queries' cliques': its fit at its peak, before any budget
        check_fit(domain, list(training.cliques), options.get("method", "mirror_descent"), options.get("dtype"), where,
                  what=" of the training queries' model")
    return _Run(epsilon, engine_iters, options, own)


def _mldp(data: Dataset, key, run: _Run) -> MechanismResult:
    """MLDP's Algorithm 1 on checked arguments: select the training set, one Laplace release, both arms, answers."""
    own, epsilon, bounded, training, size = run.own, run.epsilon, run.own.bounded, run.own.training, run.own.size
    where = "mldp"
    timer = Timer()
    k_select, k_noise, k_synth = jax.random.split(key, 3)
    # ---- 1. the training set (public queries only: no privacy cost)
    published, index = training, None
    with timer("select"):
        if size is not None:
            index = select_training(training, size, key=k_select)
            training = training.take(index)
    sens = training_sensitivity(training, bounded=bounded)
    if not sens > 0:
        raise ValueError(f"{where}: every training query is identically zero (sensitivity 0): nothing to learn")

    # ---- 2. the one private release: Laplace on all training answers at once
    acc = Accountant(epsilon=epsilon, bounded=bounded)
    plan = record_plan(acc, "mldp", [BudgetStep("training answers", "laplace", epsilon, 1, epsilon=epsilon)], epsilon=epsilon, delta=0.0)
    y = acc.laplace(
        k_noise, training.answer(data), sens, epsilon=REST, integer=training.integer,
        target=f"MLDP: {len(training)} training queries on {list(training.cliques)}",
    )
    scale = acc.ledger[-1].scale
    stddev = math.sqrt(2.0) * scale

    # ---- 3. the original arm: the regression model
    with timer("regression"):
        regression = dict(model=own.model, ridge=own.ridge, width=own.width, centers=own.centers)
        reg = fit_regression(training, y, **regression) if own.original else None

    # ---- 4. the +PGM arm: the same answers as measurements
    with timer("pgm"):
        (pgm, report), measurements, total_source = fit_pgm(
            data.domain, training, y, stddev, total=float(len(data)) if bounded else None, iters=run.engine_iters,
            report=True, **run.options
        )
    synth = synthesize(pgm, k_synth) if own.synthetic else None

    # ---- 5. both arms answer the published and the fresh queries (post-processing)
    answers = _answer_arms({"published": published, "fresh": own.fresh}, pgm, reg)
    info = MLDPInfo(
        training=training,
        training_index=index,
        published=published,
        size=len(training),
        bounded=bounded,
        epsilon=epsilon,
        sensitivity=sens,
        sensitivity_exact=sensitivity_is_exact(training),
        scale=scale,
        stddev=stddev,
        noisy_answers=y,
        coverage=_coverage(training),
        model=own.model,
        weights=None if reg is None else reg.params,
        total=pgm.total,
        total_source="bounded: N" if bounded else total_source,
        answers=answers,
        seconds={**timer.seconds, "all": time.perf_counter() - timer.start},
    )
    return MechanismResult(mechanism="mldp", model=pgm, synthetic=synth, measurements=measurements, accountant=acc,
                           original=reg, original_error=None if own.original else "not run (original=False)", info=info,
                           plan=plan, report=report)


def laplace_baseline(data: Dataset, epsilon: float, queries: QuerySet, *, key, bounded: bool = False) -> tuple[np.ndarray, Accountant]:
    """The plain Laplace method (the paper's baseline): every published query answered directly.

    ``queries(D) + Lap(S / eps)`` with ``S`` = :func:`training_sensitivity` of the whole published
    set, so the noise grows with the number of overlapping published queries (512 for the 1023 subset
    sums of 10 bins, 6 for the 10 ranges of the paper's Table I).

    Args:
        data: the private dataset.
        epsilon: the budget (spent exactly, one ledger entry).
        queries: the published :class:`QuerySet`.
        key: a ``jax.random`` key.
        bounded: replace-one neighbours (sensitivity doubled).

    Returns:
        ``(noisy answers, accountant)``.

    Example:
        >>> dom = Domain({"grade": 4})
        >>> data = Dataset(np.repeat(np.arange(4), [12, 24, 6, 7])[:, None], dom)
        >>> y, acc = laplace_baseline(data, 1.0, QuerySet.ranges(dom, "grade"), key=jax.random.key(0))
        >>> y.shape, acc.ledger[0].scale, acc.spent
        ((10,), 6.0, 1.0)
    """
    where = "laplace_baseline"
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    _check_key(key, where)
    queries = as_queries(queries, "queries", where)
    check_domain(queries, data.domain, where)
    bounded = _bool(bounded, "bounded", where)
    sens = training_sensitivity(queries, bounded=bounded)
    if not sens > 0:
        raise ValueError(f"{where}: every query is identically zero (sensitivity 0)")
    acc = Accountant(epsilon=epsilon, bounded=bounded)
    y = acc.laplace(
        key, queries.answer(data), sens, epsilon=REST, integer=queries.integer, target=f"Laplace baseline: {len(queries)} queries"
    )
    return y, acc
