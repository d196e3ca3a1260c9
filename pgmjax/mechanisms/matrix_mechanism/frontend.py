"""The HDMM front-end: strategy, measurement through the accountant, and HDMM+LLS / HDMM+PGM / global least squares.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018 (the strategy, its measurement and its expected error);
McKenna, Sheldon, Miklau, "Graphical-model based estimation and inference for differential privacy",
ICML 2019 (arXiv 1901.09136), Section 6 (HDMM+PGM, and HDMM+LLS as the baseline where HDMM's global least
squares cannot run).

The matrix mechanism measures a *strategy* ``A`` instead of the workload ``W``: ``y = A x + noise`` with the
noise calibrated to the sensitivity of ``A``, then answers ``W`` from an estimate of ``x``. :func:`hdmm` runs

* the **strategy** (data-independent, :func:`.hdmm_strategy`): per workload clique an OPT_kron strategy
  stacked with the OPT_+ weights, or equal weights (``weights="equal"``, the ICML 2019 script), the
  identity per clique, OPT_M, or a prebuilt strategy (optimised once and reused across runs);
* the **measurement** (:func:`.measure_strategy`): every block of ``A`` released by
  :meth:`~pgmjax.privacy.Accountant.measure` on one common noise scale, Laplace ``b = ||A||_1 / eps`` or
  Gaussian ``sigma = ||A||_{1->2} / sqrt(2 rho)`` with ``rho = cdp_rho(eps, delta)`` (sensitivities of the
  neighbouring relation: replace-one doubles L1); the ledger, one entry per block, sums to the budget;
* three **arms on the same noisy** ``y``: ``result.original``, HDMM+LLS (each workload clique solved by
  least squares from its own measurements, :func:`.least_squares_marginal`); ``result.model``, HDMM+PGM (all
  measurements in one :func:`pgmjax.estimate`); ``result.info.global_least_squares``, HDMM's ``A^+ y`` on
  the full table over the workload's attributes when it has at most ``max_table_cells`` cells (decided from
  the sizes before anything is allocated: Adult's table has ~6.4e17 cells).

Example:
    >>> import jax, numpy as np, pgmjax as pj
    >>> dom = pj.Domain({"age": 16, "sex": 2, "job": 3})
    >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [16, 2, 3], (1000, 3)), dom)
    >>> w = pj.Workload.benchmark(dom, [("age", "sex"), ("sex", "job")], numeric=["age"])
    >>> res = hdmm(data, 1.0, key=jax.random.key(0), workload=w, engine_iters=100)
    >>> res.accountant.spent, len(res.ledger)
    (1.0, 2)
    >>> errors = pj.metrics.workload_error(w, data, res.original), pj.metrics.workload_error(w, data, res.model)
    >>> [round(e, 3) for e in errors]
    [0.006, 0.006]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np

from ...estimation.options import FitOptions
from ...data.dataset import Dataset
from ...data.domain import Clique, Domain
from ...estimation.estimate import estimate
from ...estimation.driver import METHODS
from ...estimation import memory as fit_memory
from ...privacy import Accountant
from ...checks import check_count as _int
from ...checks import check_key as _check_key
from ...checks import check_positive as _positive
from ...queries.measurement import Measurement, estimate_total
from ..original_estimates import CliqueTables
from ...graph import size_limit
from ...graph.junction import junction_tree, maximal_cliques
from ..options import (check_attribute_matrices, check_data, check_domain_size, check_epsilon, check_fit_options,
                       check_cliques_within_cap, check_model_cap, check_positive_delta, check_pure_delta)
from ..options import check_choice as _choice
from ..options import check_workload as _as_workload
from ..result import BudgetStep, MechanismResult, record_plan
from ..steps import Timer, synthesize
from ..own_options import takes_own_options
from ..run_info import reports
from .error import expected_error
from .hdmm_options import DEFAULT_MAX_TABLE_CELLS, HDMMInfo, HDMMOptions
from .least_squares import global_least_squares, least_squares_marginal
from .measure import equal_column_norms, measure_strategy
from .planning import MAX_MARGINAL_ATTRIBUTES, check_strategy, hdmm_strategy, strategy_record, union_workload

__all__ = ["hdmm", "HDMMOptions", "DEFAULT_MAX_TABLE_CELLS"]


def _local_tables(domain: Domain, measurements: list[Measurement], cliques: list[Clique]) -> dict[Clique, np.ndarray]:
    """HDMM+LLS: one least-squares table per workload clique, each from local measurements only.

    A clique with a measurement on itself or on a measured superset: :func:`.least_squares_marginal`
    (its own measurements, else the smallest measured superset's, summed down; ``(x)_i A_i^+ y`` for one
    Kronecker measurement). A clique that only subsets cover (possible with OPT_M): joint least squares over
    its table from the measurements inside it (:func:`.global_least_squares` restricted to it).
    """
    out = {}
    for c in sorted(cliques, key=len):  # a smaller clique's own table answers its queries (CliqueTables)
        if any(set(c) <= set(m.clique) for m in measurements):
            out[c] = least_squares_marginal(domain, measurements, c)
            continue
        inside = [m for m in measurements if set(m.clique) <= set(c)]
        if not inside:
            raise ValueError(f"hdmm: no measurement informs the workload clique {c}")
        out[c] = global_least_squares(domain, inside, attributes=c, max_bytes=2**62)
    return out




def _check_sizes(domain: Domain, cliques: list[Clique], where: str, method: str = "mirror_descent", dtype=None) -> None:
    """Refuse, before the strategy is optimised, what HDMM cannot hold (:class:`pgmjax.ModelTooLarge`).

    Per workload attribute of ``n`` values it builds ``n x n`` matrices (the identity query, OPT_kron's
    strategy factor); per workload clique the data vector and its noisy answers; and the HDMM+PGM fit of
    the model over the workload's cliques, counted at its peak (:func:`pgmjax.estimation.memory.check_fit`: the
    method's copies in its dtype, and the host tables its strategy measurements' queries gather, one per
    workload clique at most).
    """
    check_domain_size(domain, where, cliques, what="the workload cliques' data vectors")
    check_attribute_matrices(domain, (a for c in cliques for a in c), where, "query and strategy matrices")
    size_limit.check_tree(junction_tree(domain, maximal_cliques(domain, cliques)), where)
    fit_memory.check_fit(domain, cliques, method, dtype, where, gathered=fit_memory.host_cells(domain, cliques, cliques),
                         what=" of HDMM+PGM")

@reports(HDMMInfo)
@takes_own_options(HDMMOptions)
def hdmm(
    data: Dataset,
    epsilon: float,
    delta: float = 0.0,
    *,
    key,
    workload=None,
    engine_iters: int = 1000,
    fit_options: FitOptions | None = None,
    max_model_mb: float | None = None,
    own: HDMMOptions,
) -> MechanismResult:
    """HDMM with its local least squares (HDMM+LLS), the engine (HDMM+PGM) and, when it fits, global least squares.

    The steps (module docstring): the strategy (:func:`hdmm_strategy`, or the one given), its measurement
    (:func:`.measure_strategy`, every row on one noise scale), the arms on the same noise: HDMM+LLS (``original``),
    HDMM+PGM (``model``), global least squares (``info.global_least_squares``, up to ``max_table_cells``).

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: the budget: pure ``epsilon``-DP with Laplace noise, ``(epsilon, delta)``-DP through zCDP with
            Gaussian noise.
        delta: 0 (the default) with Laplace noise, which is pure DP (any other value is refused); in
            ``(0, 1)`` with Gaussian noise.
        key: a ``jax.random`` key; the strategy's restarts, the noise and the synthetic data follow from it.
        workload: a :class:`~pgmjax.Workload` (e.g. ``Workload.benchmark``: Prefix on numeric attributes,
            the ICML 2019 benchmark) or a list of cliques (their marginals); default every 2-way marginal.
        engine_iters: iterations of the engine (the ICML 2019 run used 10,000).
        fit_options: a :class:`pgmjax.FitOptions` for the fits (``method``: ``"mirror_descent"`` (default),
            ``"dual_averaging"`` or ``"lbfgs"``; ``loss``, ``dtype``, ``tol``, ``callback``, ...).
        max_model_mb: None (default), or a cap in MB on the model over the workload's cliques, checked
            before anything is computed.
        **own: HDMM's own options, by name: the fields of :class:`HDMMOptions` (``strategy``, ``weights``,
            ``bounded``, ``noise``, ``restarts``, ``original``, ``max_table_cells``, ``synthetic``), checked before
            anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (HDMM+PGM), ``synthetic``,
        ``measurements`` (one per strategy term, carrying the Kronecker factors and the true noise std),
        ``accountant`` (one ledger entry per term, summing exactly to the budget), ``original`` (HDMM+LLS, a
        :class:`~pgmjax.mechanisms.original_estimates.CliqueTables` whose ``answers`` / ``marginals`` serve
        :meth:`Workload.answer` and :mod:`pgmjax.model.metrics`; None when ``original=False``, see
        ``original_error``), ``plan`` (one step: every strategy term on one noise scale) and ``info``, an
        :class:`HDMMInfo`:

        * ``strategy`` (the :mod:`pgmjax.mechanisms.matrix_mechanism` object), ``strategy_info`` (:func:`hdmm_strategy`'s dict, or
          ``{"template": "given"}``), ``strategy_record`` (cliques, weights, factor matrices / theta);
        * ``sensitivity`` (of the whole stack under the convention: L1 for Laplace, L2 for Gaussian),
          ``sensitivity_exact`` (every factor has equal column norms, so the sum over terms is exact; an
          upper bound otherwise), ``noise_scale`` (``b`` or ``sigma`` on every row of the stack),
          ``noise_std``, ``rho`` (Gaussian);
        * ``expected_error``: the matrix mechanism's expected total squared error over the workload's rows,
          ``(2/eps^2) ||A||_1^2 trace[(A^T A)^+ W^T W]`` (times 4 when bounded; Gaussian:
          ``sigma^2 trace[...]``; for a union strategy the OPT_+ bound, which is the LLS arm's expected error
          when each clique's own term answers it best), ``expected_error_per_query``, ``workload_rows``;
        * ``total`` (``N`` when bounded, else the estimate from the measurements),
          ``global_least_squares`` (a CliqueTables over the workload's attributes, or None),
          ``global_least_squares_error`` (why not), ``global_table_cells``;
        * ``seconds``: ``strategy``, ``measure``, ``lls``, ``pgm``, ``global``, ``synthetic``, ``total``.

    Raises:
        ValueError / TypeError: bad input (named), before any private computation and before the strategy is
            optimised.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"age": 16, "sex": 2, "job": 3})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [16, 2, 3], (1000, 3)), dom)
        >>> w = pj.Workload.benchmark(dom, [("age", "sex"), ("sex", "job")], numeric=["age"])
        >>> res = hdmm(data, 1.0, key=jax.random.key(0), workload=w, engine_iters=100)
        >>> res.accountant.spent == 1.0, len(res.ledger)          # the 2 workload terms: 2 measurements
        (True, 2)
        >>> res.original.marginal(("age", "sex")).shape, res.model.marginal(("age", "sex")).shape
        ((16, 2), (16, 2))
    """
    run = _hdmm_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    return _hdmm(data, key, run)


class _Run(NamedTuple):
    """:func:`hdmm`'s arguments checked against the data: the common ones, the fit's method and options, the
    workload (as given and as a union of Kronecker products) and the own options (``strategy`` checked against
    the workload)."""

    epsilon: float
    delta: float
    engine_iters: int
    options: dict  # the keyword arguments of the fit (FitOptions.given()), less the method
    method: str
    wl: object
    W: object
    own: HDMMOptions


def _hdmm_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own: HDMMOptions) -> _Run:
    """:func:`hdmm`'s arguments checked against the data (its own options were checked where made), before any
    private computation and before the strategy is optimised."""
    where = "hdmm"
    domain = check_data(data, where).domain
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    _check_key(key, where)
    if own.noise == "gaussian":
        delta = check_positive_delta(delta, where, "; Gaussian noise gives (epsilon, delta)-DP (e.g. delta=1e-9), or use noise='laplace'")
    else:
        delta = check_pure_delta(delta, where, " with Laplace noise; pass noise='gaussian' for (epsilon, delta)-DP through zCDP")
    engine_iters = _int(engine_iters, "engine_iters", where, 0)
    options = check_fit_options(fit_options, where)
    method = _choice(options.pop("method", "mirror_descent"), "fit_options method", tuple(METHODS), where)
    max_model_mb = check_model_cap(max_model_mb, where)
    wl = _as_workload(workload, domain, where)
    _check_sizes(domain, list(dict.fromkeys(wl.cliques)), where, method, options.get("dtype"))
    check_cliques_within_cap(domain, wl.cliques, max_model_mb, where, "the model over the workload's cliques")
    W = union_workload(wl)
    if isinstance(own.strategy, str):
        if own.strategy == "marginals" and len(W.attributes) > MAX_MARGINAL_ATTRIBUTES:
            raise ValueError(
                f"{where}: strategy='marginals' (OPT_M) weighs all 2^d marginals of the workload's "
                f"{len(W.attributes)} attributes; at most {MAX_MARGINAL_ATTRIBUTES} are supported"
            )
    else:
        check_strategy(own.strategy, domain, W, own.noise, where)
    return _Run(epsilon, delta, engine_iters, options, method, wl, W, own)


def _hdmm(data: Dataset, key, run: _Run) -> MechanismResult:
    """HDMM on checked arguments (module docstring): the strategy, its measurement, the arms on the same noise."""
    domain, timer, own = data.domain, Timer(), run.own
    epsilon, delta, noise, bounded, wl, W = run.epsilon, run.delta, own.noise, own.bounded, run.wl, run.W
    k_strategy, k_measure, k_synth = jax.random.split(key, 3)

    # ---- 1. the strategy (data-independent)
    with timer("strategy"):
        if isinstance(own.strategy, str):
            S, s_info = hdmm_strategy(wl, k_strategy, strategy=own.strategy, weights=own.weights, noise=noise,
                                      restarts=own.restarts)
        else:
            S, s_info = own.strategy, {"template": "given"}

    # ---- 2. the measurements: one accountant entry per block, every row on the same noise scale
    with timer("measure"):
        acc = Accountant(epsilon=epsilon, bounded=bounded) if noise == "laplace" else Accountant(epsilon=epsilon, delta=delta, bounded=bounded)
        terms = len(getattr(S, "terms", (S,)))
        plan = record_plan(acc, "hdmm", [BudgetStep("strategy terms, every row on one noise scale", noise, acc.budget, terms)],
                           epsilon=epsilon, delta=delta)
        release = measure_strategy(acc, k_measure, data, S)
    measurements, scale = release.measurements, release.scale
    # Err = per-row noise variance * trace[(A^T A)^+ W^T W]; the core's factor is ||A||^2 * trace (unbounded norm)
    variance = 2.0 * scale * scale if noise == "laplace" else scale * scale
    expected = variance / S.sensitivity(noise) ** 2 * expected_error(W, S, noise=noise)
    total = _total(measurements, len(data) if bounded else None)

    # ---- 3a. HDMM+LLS
    lls, lls_error = None, None
    with timer("lls"):
        if own.original:
            cliques = list(dict.fromkeys(wl.cliques))
            lls = CliqueTables(domain, _local_tables(domain, measurements, cliques), total if total is not None else float("nan"))
        else:
            lls_error = "not run (original=False)"

    # ---- 3b. HDMM+PGM
    with timer("pgm"):
        model, report = estimate(domain, measurements, method=run.method, iters=run.engine_iters,
                                 total=float(len(data)) if bounded else None, report=True, **run.options)
    with timer("synthetic"):
        synth = synthesize(model, k_synth) if own.synthetic else None

    # ---- 3c. global least squares, decided from the sizes before anything is allocated
    with timer("global"):
        global_ls, global_error, cells = _global_arm(domain, W, measurements, own.max_table_cells)

    info = HDMMInfo(
        strategy=S,
        strategy_info=s_info,
        strategy_record=strategy_record(S),
        noise=noise,
        bounded=bounded,
        epsilon=epsilon,
        delta=delta,
        rho=None if noise == "laplace" else acc.budget,
        sensitivity=release.sensitivity,
        sensitivity_exact=equal_column_norms(S, noise),
        noise_scale=scale,
        noise_std=release.noise_std,
        expected_error=expected,
        expected_error_per_query=expected / W.rows,
        workload_rows=W.rows,
        terms=len(measurements),
        total=total,
        engine_iters=run.engine_iters,
        engine_method=run.method,
        global_least_squares=global_ls,
        global_least_squares_error=global_error,
        global_table_cells=cells,
        seconds=timer.done(),
    )
    return MechanismResult(mechanism="hdmm", model=model, synthetic=synth, measurements=measurements, accountant=acc,
                           original=lls, original_error=lls_error, info=info, plan=plan, report=report)


def _total(measurements: list[Measurement], public: int | None) -> float | None:
    """The number of records: ``public`` (replace-one), else the measurements' estimate (None when none determines it)."""
    if public is not None:
        return float(public)
    try:
        return float(estimate_total(measurements)[0])
    except ValueError:
        return None  # no measurement determines N; the engine will say so


def _global_arm(domain: Domain, W, measurements: list[Measurement], max_table_cells: int):
    """HDMM's own ``A^+ y`` on the full table over the workload's (and the measurements') attributes, when it has
    at most ``max_table_cells`` cells: ``(CliqueTables or None, why not or None, cells)``."""
    attrs = tuple(a for a in domain.attributes if a in set(W.attributes) | {a for m in measurements for a in m.clique})
    cells = math.prod(domain[a] for a in attrs)
    if cells > max_table_cells:
        return None, (
            f"HDMM's global least squares needs the full table over the workload's {len(attrs)} attributes: "
            f"{cells:.4g} cells ({8 * cells / 2**30:.4g} GiB per float64 copy, about six copies in LSMR), above "
            f"max_table_cells={max_table_cells:,}. Not allocated; HDMM+LLS is the stand-in (ICML 2019)."
        ), cells
    rows = sum(m.rows for m in measurements)
    table = global_least_squares(domain, measurements, attributes=attrs, max_bytes=8 * (6 * cells + 3 * rows) + 1)
    return CliqueTables(domain, {attrs: table}, float(table.sum())), None, cells
