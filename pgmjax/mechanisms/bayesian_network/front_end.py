"""The PrivBayes front-end: PrivBayes and PrivBayes+PGM on the same noisy tables.

Zhang, Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via Bayesian
Networks", ACM TODS 42(4) 2017, Algorithm 1 (the budget split ``beta``, GreedyBayes, noisy tables,
sampling); the +PGM arm fits the same tables with the engine (McKenna, Sheldon & Miklau,
"Graphical-model based estimation and inference for differential privacy", ICML 2019, Section 6).

1. (``bounded=False``, ``degree=None`` and ``d > 1`` only) a Laplace count of the records with
   ``eps0 = count_fraction * epsilon``: the usefulness rule needs ``N``, which is private under
   add/remove neighbours.
2. GreedyBayes (:func:`greedy_bayes`, TODS Algorithm 4) with ``eps1 = beta (epsilon - eps0)``:
   ``d - 1`` exponential-mechanism draws of ``eps1 / (d - 1)`` each. Candidate parent sets:
   ``degree=None``: the maximal sets with ``n_X prod n_Pi <= tau = N eps2 / (2 d theta)``
   (:func:`usefulness_tau`, general domains); ``degree=k``: every ``min(k, |V|)``-subset of the
   placed attributes (fixed-k). Either way no table exceeds ``max_cells``.
3. The ``m`` maximal cliques among ``{X_i} ∪ Pi_i`` are measured with Laplace noise of scale
   ``b = Delta1 m / eps2`` (``Delta1`` = 2 replace-one, 1 add/remove) through
   ``accountant.measure_many(..., epsilon=REST)``: the ledger sums exactly to ``epsilon``.
4. Original arm (TODS Algorithm 1): clip, normalise, conditionals (:func:`noisy_conditionals`),
   ancestral sampling of ``N`` records (:func:`sample_network`; under add/remove, the total
   estimated from the noisy count and tables by inverse-variance weighting, also given to the
   engine).
   +PGM arm: the same tables as measurements (``stddev = sqrt(2) b``) fitted by
   :func:`pgmjax.estimate` (McKenna, Sheldon, Miklau, ICML 2019).

Defaults: ``beta = 0.3`` and ``theta = 4`` are the values the PrivBayes paper recommends from its
experiments (not re-verified against the paper); the authors' C++
hard-codes ``beta = 0.5`` and the ICML 2019 run passed ``theta = 1``. ``score="R"`` is what the
ICML 2019 run used (``func = true``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np

from ...estimation.options import FitOptions
from ...data.dataset import Dataset
from ...data.domain import Clique
from ...estimation.estimate import estimate
from ...estimation.memory import check_capped_fit
from ...graph.junction import maximal_cliques
from ...privacy import REST, Accountant
from ...privacy import check_count
from ...privacy import check_key as _check_key
from ...privacy import check_positive as _positive
from ...programs import MAX_LIVE_PROGRAMS, release_compiled
from ...queries.measurement import Measurement, estimate_total
from ..options import check_epsilon, check_fit_options, check_model_cap, check_pure_delta, refuse_option
from ..result import BudgetStep, MechanismResult, record_plan
from ..own_options import takes_own_options
from ..run_info import reports
from ..steps import oracle_of
from .conditionals import noisy_conditionals, sample_network
from .network_search import check_binary, model_cells, greedy_bayes
from .parent_sets import usefulness_tau
from .privbayes_options import PrivBayesInfo, PrivBayesOptions

# Peak memory of a fit per cell of the model's junction tree, float32 (potentials, marginals, gradients,
# line-search trials, messages, sampling): 89 bytes measured for 8M cells with mirror descent and
# synthetic data on XLA:CPU (171 at 2M cells, where the fixed overheads weigh more): a fit's peak memory is
# about ENGINE_BYTES_PER_CELL / 8 times the model's float64 size that max_model_mb caps.
ENGINE_BYTES_PER_CELL = 100
#: PrivBayes's default model-size cap (MB of a float64 model, 8 bytes per cell): 21M cells, a fit of about 2 GiB.
DEFAULT_MAX_MODEL_MB = 160.0


def _max_model_cells(domain, max_model_mb: float, where: str) -> int:
    """The largest junction tree (cells) a model of ``max_model_mb`` MB (8 bytes per cell) can hold.

    Refuses a cap that cannot hold even the network without edges (one table per attribute).
    """
    max_model_cells = int(max_model_mb * 2**20 / 8)
    if sum(domain.shape) > max_model_cells:  # even the network without edges would not fit
        raise ValueError(
            f"{where}: max_model_mb={max_model_mb:g} allows a model of {max_model_cells} cells (8 bytes per cell), "
            f"fewer than the {sum(domain.shape)} values of the attributes; raise max_model_mb"
        )
    return max_model_cells


def _estimated_total(measurements, noisy_count: float | None, eps_count: float) -> float:
    """The number of records under add/remove (``N`` private): the inverse-variance mix of the noisy tables' sums and the noisy count."""
    total, var = estimate_total(measurements)
    if noisy_count is not None:
        var_count = 2.0 / eps_count**2
        if var_count == 0.0 or var == 0.0:  # a huge epsilon: the variances underflow; take the exact one
            total = noisy_count if var_count <= var else total
        else:
            total = (total / var + noisy_count / var_count) / (1.0 / var + 1.0 / var_count)
    return max(float(total), 1.0)


def _record_count(acc: Accountant, key, n: int, eps: float, own: PrivBayesOptions, *, needed: bool):
    """Step 1: ``(eps_count, noisy_count, records)``, the ``N`` the usefulness rule reads.

    Public ``N`` under replace-one (``own.bounded``); under add/remove a Laplace count with
    ``own.count_fraction * eps`` when the rule needs it (``degree`` None and more than one attribute), else
    nothing is spent and ``records`` is None.
    """
    if own.bounded:
        return 0.0, None, float(n)
    if needed:
        eps_count = own.count_fraction * eps
        noisy_count = float(acc.laplace(key, np.array([float(n)]), 1.0, epsilon=eps_count, target="record count")[0])
        return eps_count, noisy_count, max(noisy_count, 1.0)
    return 0.0, None, None


def _table_cap(records, eps_tables: float, d: int, own: PrivBayesOptions, max_model_cells: int):
    """``(tau, cap)``: the largest table GreedyBayes may choose (TODS Section 4.4), ``tau`` None for a fixed degree."""
    if own.degree is None and records is not None:
        tau = usefulness_tau(records, eps_tables, d, own.theta)
        return tau, int(math.floor(min(tau, own.max_cells, max_model_cells)))  # min first: tau may be inf at eps ~ 1e308
    return None, min(own.max_cells, max_model_cells)


@reports(PrivBayesInfo)
@takes_own_options(PrivBayesOptions)
def privbayes(
    data: Dataset,
    epsilon: float,
    delta: float = 0.0,
    *,
    key,
    workload=None,
    engine_iters: int = 1000,
    fit_options: FitOptions | None = None,
    max_model_mb: float = DEFAULT_MAX_MODEL_MB,
    own: PrivBayesOptions,
) -> MechanismResult:
    """PrivBayes and PrivBayes+PGM on the same noisy tables (pure ``epsilon``-DP; Zhang et al., ACM TODS 2017).

    The steps (module docstring): the record count, GreedyBayes, the noisy tables, both arms.

    Args:
        data: the private :class:`~pgmjax.Dataset` (at least 2 records).
        epsilon: the total budget (pure DP).
        delta: 0 (the default): PrivBayes is pure epsilon-DP, any other value is refused.
        key: a ``jax.random`` key; the run is a function of it.
        workload: must be None: the network is chosen by its score, for no workload.
        engine_iters: iterations of the engine.
        fit_options: a :class:`pgmjax.FitOptions` for the fit (``method``, ``loss``, ``dtype``, ``tol``,
            ``callback``, ``oracle``, ...). With
            ``oracle="approximate"`` the +PGM arm is fitted with convex generalized belief propagation on the
            network's tables (:mod:`pgmjax.estimation.oracles`), so the network is no longer kept to a junction tree of
            ``max_model_mb`` (each table stays under the usefulness cap and ``max_cells``); its synthetic records
            are drawn in network order from the conditionals of the fitted pseudo-marginals (a Bayesian network
            that matches them table by table, not the maximum-entropy model).
        max_model_mb: the model-size cap in MB of a float64 model (8 bytes per cell of its junction
            tree; default 160, 21M cells). The network is kept to a junction tree of at most
            ``max_model_mb * 2**20 / 8`` cells (:func:`greedy_bayes` ``max_model_cells``), and no table
            exceeds that either. At a large ``epsilon`` the usefulness rule allows tables of ``max_cells``
            whose network can triangulate into cliques of billions of cells; this is the bound that stops
            it. A fit's peak memory is about :data:`ENGINE_BYTES_PER_CELL` bytes per cell in float32
            (about 2 GiB at the default; twice that in float64): raise it on a machine with more memory.
        **own: PrivBayes's own options, by name: the fields of :class:`PrivBayesOptions` (``beta``, ``theta``,
            ``score``, ``degree``, ``bounded``, ``count_fraction``, ``max_candidates``, ``max_cells``,
            ``keep_scores``), checked before anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` the +PGM arm, ``synthetic``
        drawn from it, ``original`` the original arm's synthetic :class:`~pgmjax.Dataset`,
        ``measurements`` the noisy tables, ``accountant`` the ledger, ``plan`` (record count, structure,
        tables) and ``info``, a :class:`~pgmjax.mechanisms.bayesian_network.PrivBayesInfo`, with ``network``
        (``[(child, parents)]`` in placement order), ``steps`` (per selection: candidates, cap,
        sensitivity, epsilon), ``epsilon_count``, ``epsilon_structure``, ``epsilon_step``,
        ``epsilon_tables``, ``tau``, ``cap``, ``cliques`` (measured), ``laplace_scale``,
        ``noisy_count``, ``total``, ``conditionals`` (the original arm's noisy CPTs, axes
        ``(*parents, child)``), ``quality`` (the EM's quality: the score, or ``N*score`` under
        add/remove).

    Example:
        >>> data = Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), {"a": 3, "b": 4, "c": 2})
        >>> res = privbayes(data, 1.0, key=jax.random.key(0), engine_iters=200)
        >>> res.info.network, res.accountant.spent
        ([('b', ()), ('a', ('b',)), ('c', ('b',))], 1.0)
    """
    run = _privbayes_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    return _privbayes(data, key, run)


class _Run(NamedTuple):
    """:func:`privbayes`'s arguments checked against the data: the common ones and the own options."""

    eps: float
    engine_iters: int
    options: dict  # the keyword arguments of the fit (FitOptions.given())
    max_model_cells: int
    own: PrivBayesOptions


def _privbayes_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb,
                         own: PrivBayesOptions) -> _Run:
    """:func:`privbayes`'s arguments checked against the data (its own options were checked where made), before any
    private computation."""
    where = "privbayes"
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    eps = check_epsilon(_positive(epsilon, "epsilon", where), where)
    check_pure_delta(delta, where)
    _check_key(key, where)
    refuse_option(workload, "workload", where, "its network is chosen by its score, for no workload")
    check_binary(data.domain, own.score, where)
    if max_model_mb is None:
        raise ValueError(f"{where}: max_model_mb must be a number: it bounds the network's model (default {DEFAULT_MAX_MODEL_MB:g})")
    max_model_mb = check_model_cap(max_model_mb, where)
    engine_iters = check_count(engine_iters, "engine_iters", where, 0)
    options = check_fit_options(fit_options, where)
    if len(data) < 2:
        raise ValueError(f"{where}: needs at least 2 records, got {len(data)}")
    domain = data.domain
    too_big = [a for a in domain.attributes if domain[a] > own.max_cells]
    if too_big:
        raise ValueError(f"{where}: attributes {too_big} have more than max_cells={own.max_cells} values")
    max_model_cells = _max_model_cells(domain, max_model_mb, where)
    if oracle_of(options) == "exact":  # the largest network's fit the cap allows, at its peak, before any budget
        check_capped_fit(max_model_mb, options.get("method", "mirror_descent"), options.get("dtype"), where)
    return _Run(eps, engine_iters, options, max_model_cells, own)


def _privbayes(data: Dataset, key, run: _Run) -> MechanismResult:
    """PrivBayes's Algorithm 1 on checked arguments (module docstring): count, network, noisy tables, both arms."""
    eps, options, max_model_cells, own = run.eps, run.options, run.max_model_cells, run.own
    beta, bounded, score, degree = own.beta, own.bounded, own.score, own.degree
    n, domain = len(data), data.domain
    d = len(domain)
    acc = Accountant(epsilon=eps, bounded=bounded)
    counted = not bounded and degree is None and d > 1  # step 1 runs (see _record_count)
    plan_count = own.count_fraction * eps if counted else 0.0
    plan = record_plan(acc, "privbayes", [
        BudgetStep("record count", "laplace", plan_count, int(counted), epsilon=plan_count if counted else None),
        BudgetStep("network: select parents", "exponential", beta * (eps - plan_count) if d > 1 else 0.0, max(d - 1, 0),
                   epsilon=beta * (eps - plan_count) / (d - 1) if d > 1 else None),
        BudgetStep("noisy tables (one per maximal clique, at most d)", "laplace", 0.0, d),
    ], epsilon=eps, delta=0.0)
    k_count, k_struct, k_tables, k_orig, k_pgm = jax.random.split(key, 5)

    # 1. The record count, when the usefulness rule needs it and N is private.
    eps_count, noisy_count, records = _record_count(acc, k_count, n, eps, own, needed=degree is None and d > 1)
    eps_struct = beta * (eps - eps_count) if d > 1 else 0.0
    eps_tables = eps - eps_count - eps_struct  # what the tables will get (spent as REST)

    # 2. The network.
    tau, cap = _table_cap(records, eps_tables, d, own, max_model_cells)
    network, steps = greedy_bayes(
        data, acc, k_struct, eps_struct, score=score, cap=cap, degree=degree, max_candidates=own.max_candidates,
        keep_scores=own.keep_scores, max_model_cells=None if oracle_of(options) == "approximate" else max_model_cells,
    )

    # 3. The noisy tables: only the maximal cliques, each with eps2 / m.
    cliques: list[Clique] = list(maximal_cliques(domain, [(x, *p) for x, p in network]))
    measurements = acc.measure_many(k_tables, data, cliques, mechanism="laplace", epsilon=REST)
    m = len(cliques)
    scale = acc.ledger[-1].scale

    # Records of both arms: public N, or the inverse-variance mix of the noisy count and table sums.
    total = float(n) if bounded else _estimated_total(measurements, noisy_count, eps_count)
    size = max(1, int(round(total)))

    # 4a. Original arm.
    conditionals = noisy_conditionals(domain, network, measurements)
    original = sample_network(domain, network, conditionals, size, k_orig)

    # 4b. +PGM arm on the same measurements.
    release_compiled(above=MAX_LIVE_PROGRAMS)  # a sweep over many structures: free the dead ones, keep a bounded number
    model, report = estimate(domain, measurements, iters=run.engine_iters, total=total, report=True, **options)
    if getattr(model, "approximate", False):
        # An approximate model's pseudo-marginals are locally consistent: each network table's conditional read
        # from them defines a Bayesian network, sampled in network order like the original arm.
        fitted = [Measurement(c, model.marginal(c)) for c in model.cliques]
        synthetic = sample_network(domain, network, noisy_conditionals(domain, network, fitted), size, k_pgm)
    else:
        synthetic = model.synthetic_data(size, k_pgm)

    info = PrivBayesInfo(
        network=network,
        order=[x for x, _ in network],
        steps=steps,
        score=score,
        quality=(score if bounded else f"N*{score}"),
        bounded=bounded,
        beta=beta,
        theta=own.theta,
        degree=degree,
        epsilon=eps,
        epsilon_count=eps_count,
        epsilon_structure=eps_struct,
        epsilon_step=eps_struct / (d - 1) if d > 1 else 0.0,
        epsilon_tables=eps_tables,
        tau=tau,
        cap=cap,
        max_model_cells=max_model_cells,
        model_cells=model_cells(domain, network),
        cliques=cliques,
        tables=m,
        laplace_scale=scale,
        noisy_count=noisy_count,
        total=total,
        conditionals=conditionals,
        engine_iters=run.engine_iters,
    )
    return MechanismResult(mechanism="privbayes", model=model, synthetic=synthetic, measurements=measurements, accountant=acc,
                           original=original, info=info, plan=plan, report=report)
