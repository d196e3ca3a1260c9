"""MST: maximum-spanning-tree synthetic data under zCDP (McKenna, Miklau & Sheldon, JPC 2021).

McKenna, Miklau & Sheldon, "Winning the NIST contest: a scalable and general approach to
differentially private synthetic data", Journal of Privacy and Confidentiality 11(3), 2021
(Section 4, "MST"); the winner of the 2018 NIST synthetic-data challenge. Reference code: private-pgm
``mechanisms/mst.py`` @4d2b3c5. MST is built on graphical-model estimation from the start, so it has
a single arm: ``result.model`` is the engine's estimate and ``result.original`` is None.

The budget ``rho = cdp_rho(epsilon, delta)`` (zCDP, Canonne, Kamath & Steinke 2020) is split in
thirds, with the base ``sigma = sqrt(3 / (2 rho))``:

1. **One-way marginals** (``rho/3``): all ``d`` of them, with unit-L2-norm measurement weights
   ``1/sqrt(d)``, i.e. noise std ``sigma sqrt(d)`` each (Gaussian mechanism, sensitivity 1).
2. **Domain compression** (post-processing): for each attribute, the values whose noisy count is
   below ``3 sigma sqrt(d)`` are merged into one extra "other" value. Its noisy count is the sum of
   the merged noisy counts, with noise std ``sqrt(k)`` times the others' (``k`` merged values): the
   reference code's row (count and query coefficient divided by ``sqrt(k)``, the others' std) scaled,
   the same least-squares term, kept as an identity query of O(kept values) (:func:`~pgmjax.mechanisms.domain_compression.compress_domain`).
3. **Selection** (``rho/3``): the engine fits the one-way measurements; every attribute pair gets
   the weight ``w(a, b) = ||mu_ab(D) - mu_hat_ab||_1`` (on the compressed data); Kruskal's algorithm
   picks ``d - 1`` edges, each with the exponential mechanism (sensitivity 1,
   ``eps_EM = sqrt(8 (rho/3) / (d - 1))``) among the pairs that join two components.
4. **Two-way marginals** (``rho/3``, exactly the rest): the ``d - 1`` tree edges, noise std
   ``sigma sqrt(d - 1)`` each.
5. **Fit and sample**: the engine fits all measurements (total estimated), warm-started from the
   one-way model of step 3 (the reference code starts from zero; the optimum is the same),
   ``round(total)`` synthetic records are drawn and decompressed: an "other" value becomes one of
   its merged original values, uniformly at random (:func:`~pgmjax.mechanisms.domain_compression.decompress_data`;
   ``merged_values="measured"``: as their noisy one-way counts say, shrunk towards even, post-processing). ``result.model`` is
   the fitted model re-expressed over the original values (:func:`~pgmjax.mechanisms.domain_compression.decompress_model`).

Anchors (Adult, ``d = 14``, ``eps = 1``, ``delta = 1e-9``; :func:`mst_budget`): ``rho = 0.0149731``,
``sigma = 10.009``, one-way std 37.45, two-way std 36.09, ``eps_EM = 0.05542`` per edge.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from ..estimation.options import FitOptions
from ..data.dataset import Dataset
from ..data.domain import Clique, Domain
from ..estimation.estimate import estimate
from ..estimation.memory import capped_fit_bytes, check_fit
from ..estimation.mirror_descent import MirrorDescent
from ..model.graphical_model import GraphicalModel
from ..privacy import REST, Accountant, cdp_rho
from ..queries.constraints import check_constraints
from ..checks import check_count as _count
from ..checks import check_key as _check_key
from ..checks import check_positive as _positive
from ..graph import size_limit
from .options import (DEFAULT_DELTA, check_data, check_domain_size, check_epsilon, check_fit_options, check_model_cap,
                      check_zcdp_delta, refuse_option)
from .adaptive_iterative import HALF_NORMAL_MEAN
from .domain_compression import compress_data, compress_domain, spread_for
from .own_options import takes_own_options
from .progress import Progress
from .public_selection import check_public
from .result import BudgetStep, MechanismResult, record_plan
from .run_info import reports
from .spanning_tree_options import MSTInfo, MSTOptions
from .steps import Timer, l1_errors, pgm_native_result, public_cliques, record_public_fit, release_over_original

__all__ = [
    "MSTOptions",
    "check_tree_sizes",
    "largest_model",
    "largest_tree",
    "mst",
    "mst_budget",
    "select_tree",
]

#: The reference code's iterations of the one-way fit that MST's selection reads.
SELECT_ITERS = 2500
#: The fits' default method: plain mirror descent as the reference code's engine runs it (no momentum, the
#: step growing by 1.01 per accepted step), not :func:`pgmjax.estimate`'s accelerated default. MST's estimate
#: is that optimiser's 10,000-iteration iterate, started from the one-way model: it reaches the L2 optimum
#: slowly, and the optimum fits the noise in small cells: where the two differ (many small cells), the
#: accelerated fit's 2-way TVD was about 1% worse on every seed measured (the changelog has the figures).
#: ``fit_options=pj.FitOptions(method="mirror_descent")`` restores the accelerated fit.
REFERENCE_MIRROR_DESCENT = MirrorDescent(momentum=0.0, growth=1.01, min_growth=1.01)
#: Opt-in early stop of the final fit (Morozov's discrepancy principle), off by default: with ``DISCREPANCY = tau`` the
#: fit stops once the measurements' standardised residual sum of squares ``sum_i ((Q_i mu - y_i) / sigma_i)^2 =
#: 2 L(mu)`` falls to ``tau`` times the number of measured rows (what the true marginals score in expectation).
#: Only released numbers are read (post-processing). With ``tau = 1`` the model's 2-way TVD was lower on Adult and
#: Titanic but higher on NLTCS and much higher on a generated table with strong dependencies, where the fit must run
#: past the noise level to reach them: not a default (the changelog has the figures). ``None``: no stop,
#: ``engine_iters`` iterations. A user ``callback`` in ``fit_options`` is called either way and may stop the fit.
DISCREPANCY: float | None = None


# ---------------------------------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------------------------------


def mst_budget(epsilon: float, delta: float, attributes: int) -> dict:
    """MST's zCDP budget split (McKenna, Miklau & Sheldon, JPC 2021): thirds of ``rho = cdp_rho(epsilon, delta)``.

    Args:
        epsilon, delta: the ``(epsilon, delta)``-DP target.
        attributes: ``d``, the number of attributes (at least 2).

    Returns:
        A dict: ``rho``, ``sigma`` (``sqrt(3 / (2 rho))``), ``one_way_std`` (``sigma sqrt(d)``),
        ``two_way_std`` (``sigma sqrt(d - 1)``), ``em_epsilon`` (``sqrt(8 (rho/3) / (d - 1))`` per
        edge), ``one_way_rho``, ``select_rho``, ``two_way_rho`` (each ``rho/3``).

    Example:
        >>> b = mst_budget(1.0, 1e-9, 14)                         # Adult
        >>> round(b["sigma"], 3), round(b["one_way_std"], 2), round(b["two_way_std"], 2), round(b["em_epsilon"], 5)
        (10.009, 37.45, 36.09, 0.05542)
    """
    where = "mst_budget"
    epsilon = _positive(epsilon, "epsilon", where)
    delta = check_zcdp_delta(delta, where)
    d = _count(attributes, "attributes", where, 2)
    rho = cdp_rho(epsilon, delta)
    sigma = math.sqrt(3.0 / (2.0 * rho))
    return {
        "rho": rho,
        "sigma": sigma,
        "one_way_std": sigma * math.sqrt(d),
        "two_way_std": sigma * math.sqrt(d - 1),
        "em_epsilon": math.sqrt(8.0 * (rho / 3.0) / (d - 1)),
        "one_way_rho": rho / 3.0,
        "select_rho": rho / 3.0,
        "two_way_rho": rho / 3.0,
    }


def _discrepancy_stop(level: float, user_callback=None) -> Callable[[dict], bool]:
    """A callback for :func:`pgmjax.estimate` that stops the fit once ``2 L(mu) <= level`` (:data:`DISCREPANCY`).

    ``2 L`` is the standardised residual sum of squares of the L2 loss (``0.5 r^2`` per row); the check runs after
    each chunk of iterations. ``user_callback`` (``fit_options.callback``) is called first, and stops the fit too.

    Example:
        >>> stop = _discrepancy_stop(100.0)
        >>> stop({"loss": 60.0}), stop({"loss": 45.0})
        (False, True)
    """

    def stop(info: dict) -> bool:
        user = bool(user_callback(info)) if user_callback is not None else False
        return user or 2.0 * float(info["loss"]) <= level

    return stop


# ---------------------------------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------------------------------


def largest_tree(domain: Domain) -> list[Clique]:
    """The spanning tree of attribute pairs with the most cells over ``domain`` (Kruskal on ``|a| |b|``).

    MST selects its ``d - 1`` pairs privately; whichever it selects, its final model (expressed over the
    original domain) holds no more cells than this tree's tables. Python integers: exact on any domain.

    Example:
        >>> largest_tree(Domain({"a": 10, "b": 2, "c": 3}))
        [('a', 'c'), ('a', 'b')]
    """
    from networkx.utils import UnionFind  # the project's one union-find (networkx is a dependency already)

    components = UnionFind(domain.attributes)
    tree = []
    for a, b in sorted(itertools.combinations(domain.attributes, 2), key=lambda p: -int(domain[p[0]]) * int(domain[p[1]])):
        if components[a] != components[b]:
            components.union(a, b)
            tree.append((a, b))
    return tree


def largest_model(domain: Domain) -> list[Clique]:
    """The cliques of the largest model MST may select over ``domain``: its one-way tables and
    :func:`largest_tree`'s pairs.

    Example:
        >>> largest_model(Domain({"a": 10, "b": 2, "c": 3}))
        [('a',), ('b',), ('c',), ('a', 'c'), ('a', 'b')]
    """
    return [(a,) for a in domain.attributes] + largest_tree(domain)


def check_tree_sizes(domain: Domain, where: str, method="mirror_descent", dtype=None,
                     max_model_mb: float | None = None) -> None:
    """Refuse, before any private computation, a domain MST may not hold (:class:`pgmjax.ModelTooLarge`).

    MST measures every one-way marginal over the original domain, and its final model, expressed over it too
    (:func:`~pgmjax.mechanisms.domain_compression.decompress_model`), holds a table per selected pair: the selection is private, so the check is
    against the largest tree it may select (:func:`largest_tree`) with the one-way tables, under the memory limit
    and, given one, the model-size cap ``max_model_mb`` (``8 * cells / 2^20``). A run that passes
    cannot break the limit later, after part of the budget is spent. (The pairs the selection compares, over
    the compressed domain, are known after the one-way release; they are checked then.)
    """
    check_domain_size(domain, where)
    cliques = largest_model(domain)
    what = ("the largest model MST may select (its one-way tables and the spanning tree of pairs with the most cells, "
            "over the declared domain)")
    size_limit.check_cliques(domain, cliques, where, what=what)
    # Its fit, at its peak (the limit bounds the peak: pgmjax.estimation.memory), measuring every table of that model.
    check_fit(domain, cliques, method, dtype, where, what=" of the largest model MST may select")
    if max_model_mb is not None:  # the cap's own unit (float64 tables), beside the peak's
        size_limit.check_cliques(domain, cliques, where, max_bytes=max_model_mb * 2**20, what=what,
                                 source=f"max_model_mb={max_model_mb:g}", hint="raise max_model_mb or compress the domain")


@reports(MSTInfo)
@takes_own_options(MSTOptions)
def mst(
    data: Dataset,
    epsilon: float,
    delta: float = DEFAULT_DELTA,
    *,
    key,
    workload=None,
    engine_iters: int = 10000,
    fit_options: FitOptions | None = None,
    max_model_mb: float | None = None,
    own: MSTOptions,
) -> MechanismResult:
    """MST (McKenna, Miklau & Sheldon, JPC 2021): one-way marginals, a private maximum spanning tree, fit, sample.

    ``(epsilon, delta)``-DP through ``rho = cdp_rho(epsilon, delta)``-zCDP, add/remove-one-record neighbours (``N``
    private and estimated). Steps (module docstring): one-way marginals with ``rho/3`` (std ``sigma sqrt(d)``),
    domain compression (values below ``3`` noise stds merged), ``d - 1`` exponential-mechanism Kruskal steps with
    ``rho/3`` on ``w(a, b) = ||mu_ab(D) - mu_hat_ab||_1`` of the one-way model, the tree's two-way marginals with the
    rest (std ``sigma sqrt(d - 1)``), a final fit and ``round(total)`` decompressed synthetic records. Every noise
    addition goes through one :class:`~pgmjax.privacy.Accountant` (composition ``"zcdp"``), whose ledger sums
    exactly to ``rho``. ``result.original`` is None (MST is PGM-native).

    Args:
        data: the private :class:`~pgmjax.Dataset` (at least 2 attributes).
        epsilon, delta: the privacy target (``delta`` default 1e-9, as the reference code).
        key: a ``jax.random`` key; the whole run (noise, selections, synthetic records) follows from it.
        workload: must be None: MST selects its pairs by the spanning tree, for no workload.
        engine_iters: engine iterations of the final fit (reference: 10,000; smartnoise uses 5000).
        fit_options: a :class:`pgmjax.FitOptions` for both fits (``method``, ``dtype``, ``tol``, ``callback``, ...);
            the default ``method`` is :data:`REFERENCE_MIRROR_DESCENT` (the reference code's plain mirror descent).
        max_model_mb: the model-size cap in MB (``8 * cells / 2^20``) for this run; the run's size limit is the
            peak of a fit of a model that size (:func:`pgmjax.estimation.memory.capped_fit_bytes`), and every check
            reads it (the up-front check of the largest model MST may select, the selection's pair marginals, the
            fits); None: the limit in force (:func:`pgmjax.set_max_model_bytes`, ``PGMJAX_MAX_MODEL_BYTES``, or a
            share of the machine's memory; :mod:`pgmjax.graph.size_limit`).
        **own: MST's own options, by name: the fields of :class:`MSTOptions` (``select_iters``, ``compress``,
            ``merged_values``, ``synthetic``, ``rows``, ``synthetic_method``, ``progress``, ``constraints``, ``public``), checked before
            anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (the fitted model expressed
        over the original domain, :func:`~pgmjax.mechanisms.domain_compression.decompress_model`), ``synthetic`` (original values),
        ``measurements`` (over the compressed domain: ``d`` one-way, ``d - 1`` two-way),
        ``accountant`` / ``ledger`` (``d`` Gaussian, ``d - 1`` exponential, ``d - 1`` Gaussian entries;
        ``spent == budget == rho``), ``original=None``, ``plan`` (thirds of ``rho``: one-way marginals,
        the tree's selection, two-way marginals; :func:`mst_budget` has the noise scales) and ``info``: ``edges``, ``compressed_domain``, ``mapping``, ``spread`` (None: merged values spread evenly), ``compressed_model``, ``total``, ``fit_iterations`` (the final fit's iterations run), ``residual_rows`` (``(2 L, rows)``: the final fit's standardised residual sum of squares for the L2 loss, and the measured rows; see :data:`DISCREPANCY`), ``seconds``, ``public`` (the cliques the final fit took from the public data, over the compressed domain).
        Everything in it is a differentially private output (the selection weights are not returned).

    Raises:
        TypeError / ValueError: bad input (not a Dataset, fewer than 2 attributes, epsilon <= 0,
            delta outside (0, 1), non-positive iterations, a bad key or progress, a workload), before any
            private computation.
        pgmjax.ModelTooLarge: (a ValueError) the largest model MST may select breaks the size limit, naming
            its largest pair, the cells, the bytes and the limit; before any private computation.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 3, "b": 4, "c": 2})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), dom)
        >>> res = mst(data, 1.0, key=jax.random.key(0), select_iters=50, engine_iters=100)
        >>> res.accountant.spent == res.accountant.budget, len(res.ledger), len(res.info.edges)
        (True, 7, 2)
    """
    run = _mst_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    # The cap stands for the peak of a fit of a model of that size (the limit bounds peaks: pgmjax.estimation.memory).
    with size_limit.limited(None if run.max_model_mb is None else
                            capped_fit_bytes(run.max_model_mb, run.fit.get("method", "mirror_descent"), run.fit.get("dtype"))):
        return _mst(data, key, run)


class _Run(NamedTuple):
    """:func:`mst`'s arguments checked against the data: the common ones and the own options with the data-dependent
    checks and defaults done (``select_iters``, ``constraints``, ``public``)."""

    epsilon: float
    delta: float
    engine_iters: int
    max_model_mb: float | None
    fit: dict  # the keyword arguments of both fits given (FitOptions.given())
    own: MSTOptions
    records_limit: float  # the memory limit outside the cap, which the synthetic records are drawn under


def _mst_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own: MSTOptions) -> _Run:
    """:func:`mst`'s arguments checked against the data (its own options were checked where made), before any
    private computation."""
    where = "mst"
    data = check_data(data, where)
    if len(data.domain) < 2:
        raise ValueError(f"{where}: MST needs at least 2 attributes (it selects a spanning tree of pairs); the domain has {len(data.domain)}")
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    delta = check_zcdp_delta(delta, where)
    _check_key(key, where)
    refuse_option(workload, "workload", where, "it selects a spanning tree of pairs for no workload")
    max_model_mb = check_model_cap(max_model_mb, where)
    options = check_fit_options(fit_options, where)
    engine_iters = _count(engine_iters, "engine_iters", where, 1)
    own = dataclasses.replace(
        own,
        select_iters=min(SELECT_ITERS, engine_iters) if own.select_iters is None else own.select_iters,
        constraints=check_constraints(data.domain, own.constraints, where),
        public=check_public(own.public, data.domain, where),
    )
    return _Run(epsilon, delta, engine_iters, max_model_mb, options, own, size_limit.max_model_bytes())


def _mst(data: Dataset, key, run: _Run) -> MechanismResult:
    """:func:`mst` once its cap is in force, on checked arguments: the paper's five steps (module docstring), every
    private read through one accountant."""
    where, domain, own = "mst", data.domain, run.own
    d, attrs = len(domain), list(domain.attributes)
    epsilon, delta, constraints = run.epsilon, run.delta, own.constraints
    options = dict(run.fit)
    options.setdefault("method", REFERENCE_MIRROR_DESCENT)
    check_tree_sizes(domain, where, options["method"], options.get("dtype"), run.max_model_mb)
    if constraints:  # the constraints' cliques beside the one-way marginals: the smallest model MST fits
        size_limit.check_cliques(domain, [c.attributes for c in constraints], where, what="the constraints' cliques")
        options["constraints"] = constraints
    budget = mst_budget(epsilon, delta, d)
    bar = Progress(own.progress, d + 3, "MST", where)

    timer = Timer()
    acc = Accountant(epsilon=epsilon, delta=delta, composition="zcdp")
    rho = acc.budget
    plan = record_plan(acc, "mst", [
        BudgetStep("one-way marginals", "gaussian", rho / 3.0, d, scale=budget["one_way_std"]),
        BudgetStep("spanning tree: select pairs", "exponential", rho / 3.0, d - 1, epsilon=budget["em_epsilon"]),
        BudgetStep("two-way marginals of the tree", "gaussian", rho / 3.0, d - 1, scale=budget["two_way_std"]),
    ], epsilon=epsilon, delta=delta)
    k_one, k_sel, k_two, k_synth, k_dec = jax.random.split(key, 5)
    try:
        # 1. one-way marginals, rho/3 split equally: std sigma sqrt(d) each
        one_way = acc.measure_many(k_one, data, [(a,) for a in attrs], rho=rho / 3.0)
        bar.step({"stage": "one-way marginals", "step": 1, "steps": d + 3})

        # 2. domain compression (post-processing of the noisy one-way counts)
        held = {a for c in constraints for a in c.attributes}
        cdom, mapping, one_way_c = compress_domain(domain, one_way, keep=held) if own.compress else (domain, {}, list(one_way))
        cdata = compress_data(data, mapping, cdom) if mapping else data
        if own.public is not None:  # public marginals in both fits, over the compressed domain
            options["public"] = own.public.recoded(mapping, cdom) if mapping else own.public

        # 3. selection: the one-way model, then Kruskal with the EM on the pairs' L1 errors (rho/3 over d-1 draws)
        with timer("select_fit"):
            base = estimate(cdom, one_way_c, iters=own.select_iters, report=True, **options)
        edges = select_tree(acc, k_sel, cdata, base.model, rho / 3.0, bar, where, [c.attributes for c in constraints])

        # 4. two-way marginals of the tree: exactly the rest of the budget (rho/3 up to rounding)
        two_way = acc.measure_many(k_two, cdata, edges, rho=REST)

        # 5. final fit (warm-started from the one-way model), synthetic data, decompression
        measurements = list(one_way_c) + list(two_way)
        measured_rows = sum(m.rows for m in measurements)
        with timer("fit"):
            fitted = estimate(cdom, measurements, iters=run.engine_iters, warm_start=base, report=True,
                              **_final_options(options, measured_rows))
            model_c = fitted.model
        record_public_fit(acc, fitted, cdom, options.get("public"), measurements)  # what the fit took, free
        bar.step({"stage": "final fit", "step": d + 2, "steps": d + 3})
        spread = spread_for(own.merged_values, mapping, one_way, model_c)  # post-processing
        model, synth = release_over_original(model_c, mapping, domain, k_synth, k_dec, synthetic=own.synthetic,
                                             rows=own.rows, method=own.synthetic_method, timer=timer, spread=spread,
                                             limit=run.records_limit)
        bar.step({"stage": "synthetic data", "step": d + 3, "steps": d + 3})
    finally:
        bar.close()

    info = MSTInfo(
        epsilon=epsilon,
        delta=delta,
        rho=rho,
        edges=edges,
        compressed_domain=cdom,
        mapping=mapping,
        spread=spread,
        compressed_model=model_c,
        total=model_c.total,
        select_iters=own.select_iters,
        engine_iters=run.engine_iters,
        fit_iterations=fitted.report.iterations,
        residual_rows=(2.0 * float(fitted.report.loss), measured_rows),
        seconds=timer.done(),
        public=public_cliques(fitted),  # over the compressed domain, as the ledger's
    )
    return pgm_native_result("mst", "MST", model=model, synthetic=synth, measurements=measurements, accountant=acc,
                             info=info, plan=plan, report=fitted.report)


def select_tree(acc: Accountant, key, cdata: Dataset, base: GraphicalModel, rho: float, bar: Progress,
                 where: str, held: list = (), steps: int | None = None,
                 noise_std: float | None = None) -> list[Clique]:
    """MST step 3: ``d - 1`` Kruskal steps, each an exponential-mechanism draw (``rho / (d - 1)``) among the
    pairs joining two components, on ``w(a, b) = ||mu_ab(D) - mu_hat_ab||_1`` of the one-way model ``base``.

    ``noise_std`` (TreeAIM's): the Gaussian noise std the tree's pairs will be measured with. Each pair's score is
    then lowered by the noise its measurement would add, ``sqrt(2/pi) noise_std n_ab`` in expected L1 over its
    ``n_ab`` cells (AIM's penalty: McKenna et al., "AIM", PVLDB 15(11), 2022, Section 4.2), so that the tree
    joins two components by the pair whose measurement removes the most error, not the one whose error is
    largest: on a wide pair of many cells, most of ``w`` is sampling variation that its noisy measurement could
    not recover. Public (the compressed domain and the budget), so the scores' sensitivity is unchanged.

    Which pairs are excluded depends only on the edges already released (and ``held``, the constraints' cliques:
    a pair whose junction tree with them and the edges breaks the size limit). Returns the edges in order.
    ``steps``: the progress bar's length (default MST's ``d + 3``); the selection is its steps 2 to ``d + 1``.
    """
    from networkx.utils import UnionFind  # the project's one union-find (networkx is a dependency already)

    domain = cdata.domain
    attrs = list(domain.attributes)
    d = len(attrs)
    pairs = list(itertools.combinations(attrs, 2))
    # the pairs' marginals over the compressed domain, all held at once: checked before they are computed
    size_limit.check_cliques(domain, pairs, where, what="the pair marginals the selection compares")
    weights = l1_errors(cdata.marginals(pairs), base.marginals(pairs))
    if noise_std is not None:
        weights = weights - HALF_NORMAL_MEAN * float(noise_std) * np.array([domain.size(p) for p in pairs], np.float64)
    steps = d + 3 if steps is None else steps
    bar.step({"stage": "one-way fit", "step": 2, "steps": steps})
    components = UnionFind(attrs)
    sens = acc.l1_sensitivity()  # of ||mu_ab(D) - v||_1
    edge_keys = jax.random.split(key, d - 1)
    edges: list[Clique] = []
    for r in range(d - 1):
        q = np.array([w if components[a] != components[b] else -np.inf for (a, b), w in zip(pairs, weights)])
        if held:  # a tree alone always fits (checked up front); with the constraints' cliques it may not
            q = np.array([v if v == -np.inf or _fits(domain, list(held) + edges + [p]) else -np.inf
                          for p, v in zip(pairs, q)])
        i = acc.exponential(edge_keys[r], q, sens, rho=rho / (d - 1), target=f"edge {r + 1}: select a pair")
        components.union(*pairs[i])
        edges.append(pairs[i])
        bar.step({"stage": "selection", "step": 3 + r, "steps": steps, "edge": pairs[i]})
    return edges


def _fits(domain: Domain, cliques: list) -> bool:
    """Whether a fit of the model over ``cliques`` (mirror descent, float32) keeps within the size limit in force."""
    try:
        check_fit(domain, cliques)
    except size_limit.ModelTooLarge:
        return False
    return True


def _final_options(options: dict, measured_rows: int) -> dict:
    """The final fit's :func:`pgmjax.estimate` options: ``options``, with the :data:`DISCREPANCY` stop where it is on."""
    final = dict(options)
    if DISCREPANCY is not None and final.get("loss", "l2") == "l2":
        final["callback"] = _discrepancy_stop(DISCREPANCY * measured_rows, options.get("callback"))
    return final
