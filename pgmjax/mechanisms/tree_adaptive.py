"""TreeAIM: MST's spanning tree first, then a few batched AIM rounds on what the tree answers worst (zCDP).

The two mechanisms it joins: McKenna, Miklau & Sheldon, "Winning the NIST contest: a scalable and general approach
to differentially private synthetic data", Journal of Privacy and Confidentiality 11(3), 2021 (Section 4, MST), and
McKenna, Mullins, Sheldon & Miklau, "AIM: an adaptive and iterative mechanism for differentially private synthetic
data", PVLDB 15(11), 2022 (Algorithm 1, Section 4). MST measures every attribute pair of a spanning tree at once,
cheaply; AIM measures marginals one at a time where the current model errs most, at one refit per round. AIM's first
noise scale is set for ``16 d`` rounds, so the penalty it charges a large marginal (the noise it would add,
``sqrt(2/pi) sigma n_r``) hides strongly correlated wide pairs until annealing, when the budget is nearly spent;
MST's tree holds them from the start. TreeAIM starts where MST ends and spends the rest of the budget as AIM does,
in a few batches, so the model is refitted a few times, not hundreds.

Budget ``rho = cdp_rho(epsilon, delta)`` (zCDP), shares of it (:func:`tree_aim_budget`; the rules that set them are
:mod:`pgmjax.mechanisms.tree_aim_shares`'):

1. **One-way marginals** (:data:`ONE_WAY_SHARE` to :data:`ONE_WAY_SHARE_MAX`, more where the values lie in
   many-valued attributes: :func:`one_way_share_for`, public): all ``d``, equal shares (MST's step 1), then MST's domain
   compression (values whose noisy count is below 3 noise stds merged; post-processing), by runs (``merge="runs"``,
   the default: consecutive rare values, in the domain's public order, merged into groups whose noisy count reaches
   3 noise stds, so that a binned number's rare children and rare elderly stay apart;
   :func:`~pgmjax.mechanisms.domain_compression.compress_domain`) or into one value as MST does (``merge="one"``).
2. **The tree** (:data:`TREE_SELECT_SHARE` to select, :data:`TREE_SHARE_MIN` to :data:`TREE_SHARE` to measure:
   :func:`tree_share_for`, less where its pairs are measured well with less and the batches would measure more
   than ``d`` marginals well, from the one-way model's released total): MST's ``d - 1`` exponential-mechanism
   Kruskal steps on the one-way model's pair errors (with ``tree_penalty=True``, less AIM's penalty, the noise
   the pair's measurement will add, ``sqrt(2/pi) sigma_tree n_ab``: public, so the sensitivity is MST's), then the
   tree's pairs, equal shares.
3. **Batches** (the rest): ``batches`` rounds; before each, the model of everything measured so far is fitted
   (warm-started) and every AIM candidate (the downward closure of the workload, default every pair of at most
   10,000 cells) is scored with AIM's quality ``q_r = w_r (||mu_r(D) - mu_hat_r||_1 - sqrt(2/pi) sigma n_r)``
   (sensitivity ``max_r w_r``); ``picks`` marginals are drawn one after another by the exponential mechanism, each
   excluded from the rest of its batch, and measured with noise ``sigma``. Each pick costs the same: a tenth of its
   share selects (:data:`SELECT_SHARE`), the rest measures; the run's last measurement takes exactly what is left.
   How many picks: :func:`default_pick_count` (``d`` to ``4 d`` in all, from released values), in how many batches:
   :func:`default_batches` (2 to 8, at most about ``d / 2`` picks each, at most ``256 / d``). A draw is among the
   candidates whose marginal lies inside a clique of the model or keeps the model, with the batch's earlier picks,
   within ``max_model_mb`` over the declared domain (the released model's; default :func:`default_model_cap`, twice
   the largest model MST may select, public): the size check asks only about the
   drawn candidate and the draw is repeated if it does not fit (:meth:`pgmjax.privacy.Accountant.exponential`'s
   ``admit``: the exponential mechanism on the admitted set). It grows the model's junction tree by the candidate
   (:class:`~pgmjax.graph.growth.Growth`), each pick grows it for the next, and the fits are given the grown
   cliques, so the model fitted is the model checked.
4. A final fit of every measurement, warm-started from the last batch's model (pgmjax's accelerated mirror
   descent, at most ``engine_iters`` iterations, stopping once converged: :data:`FINAL_TOL`; ``program="auto"`` is
   told to expect as many iterations as the last batch's fit took), synthetic records (drawn under the memory limit
   outside the cap: the cap bounds the model), decompression: each merged value spread over its original values as
   their noisy one-way counts say, shrunk towards even by Stein's unbiased risk estimate (``merged_values="measured"``:
   :func:`~pgmjax.mechanisms.domain_compression.measured_spread`; MST's reference code spreads evenly).

Privacy (sketch): every access to the data is a Gaussian measurement of a sensitivity-1 marginal or an
exponential-mechanism draw on scores of L1 sensitivity ``max w_r`` (add/remove one record), each recorded by one
:class:`~pgmjax.privacy.Accountant`; their zCDP costs add (Bun & Steinke 2016, Lemma 2.3), which is ``rho`` in
total, and ``rho``-zCDP gives ``(epsilon, delta)``-DP (Canonne, Kamath & Steinke 2020). What each step selects from
(and the tree's share) depends only on earlier releases (the compressed domain, the one-way model's total, the tree,
the batches' picks) and public settings, and the size checks on released cliques only, so adaptivity composes.

Anchors (:func:`tree_aim_budget` at its default shares, a fifth for the one-way marginals and 35% for the tree, for
``d = 14`` as Adult's, ``eps = 1``, ``delta = 1e-9``, 2 batches of 7):
``rho = 0.0149731``, one-way std 48.35, tree std 35.22, batch pick std 38.52.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from ..checks import check_count as _count
from ..checks import check_key as _check_key
from ..checks import check_positive as _positive
from ..data.dataset import Dataset
from ..data.domain import Domain
from ..estimation.estimate import estimate
from ..estimation.memory import capped_fit_bytes
from ..estimation.options import FitOptions
from ..graph import size_limit
from ..graph.growth import Growth
from ..privacy import REST, Accountant
from ..queries.constraints import check_constraints, possible_cells
from ..queries.measurement import pool_repeats
from .adaptive_iterative import HALF_NORMAL_MEAN, aim_candidates, default_aim_workload
from .domain_compression import compress_data, compress_domain, spread_for
from .options import (DEFAULT_DELTA, check_data, check_epsilon, check_fit_options, check_model_cap,
                      check_zcdp_delta)
from .own_options import takes_own_options
from .progress import Progress
from .public_selection import check_public
from .result import BudgetStep, MechanismResult, record_plan
from .run_info import reports
from .spanning_tree import REFERENCE_MIRROR_DESCENT, SELECT_ITERS, check_tree_sizes, select_tree
from .steps import (Timer, candidate_marginals, grown_released_size, l1_errors, model_mb, pgm_native_result,
                    public_cliques, record_public_fit, release_over_original)
from .tree_aim_options import BATCHES, TreeAIMInfo, TreeAIMOptions
from .tree_aim_shares import (TREE_SHARE, TREE_SHARE_MIN, default_batches, default_model_cap, default_pick_count,
                              one_way_share_for, tree_aim_budget, tree_share_for)

__all__ = ["TreeAIMOptions", "tree_aim", "tree_aim_budget"]

#: The final fit stops once a compiled chunk (50 iterations) changes its loss by less than this, relatively
#: (``estimate``'s ``tol``). It starts from the last batch's fit, which has converged on all but the last batch's
#: picks, so pgmjax's accelerated mirror descent gets there in hundreds of iterations. MST's final fit (10,000
#: iterations of the reference code's plain mirror descent, from the one-way model) took most of TreeAIM's time on
#: models of many cells; a tenth or a hundredth of this tolerance took several times the iterations for the same
#: two- and three-way errors of the model to four digits on every table tried: what they still move lies in cells
#: the measurements hardly tell apart (the changelog has the figures).
FINAL_TOL = 1e-4
#: A batch's fit stops once a compiled chunk changes its loss by less than this, relatively. Tighter than AIM's
#: rounds (:data:`~pgmjax.mechanisms.steps.ROUND_TOL`): TreeAIM runs a few batches, so their fits
#: cost little of its time, and at AIM's tolerance the synthetic data's two-way error rose on NLTCS at epsilon 3
#: (the changelog has the figures).
BATCH_TOL = 1e-4


@reports(TreeAIMInfo)
@takes_own_options(TreeAIMOptions)
def tree_aim(
    data: Dataset,
    epsilon: float,
    delta: float = DEFAULT_DELTA,
    *,
    key,
    workload=None,
    engine_iters: int = 10000,
    fit_options: FitOptions | None = None,
    max_model_mb: float | None = None,
    own: TreeAIMOptions,
) -> MechanismResult:
    """TreeAIM: MST's one-way marginals and spanning tree, then ``batches`` AIM-style batches of marginals, fit, sample.

    ``(epsilon, delta)``-DP through ``rho = cdp_rho(epsilon, delta)``-zCDP, add/remove-one-record neighbours; the
    steps, budget shares and privacy argument are in the module docstring. Every noise addition goes through one
    :class:`~pgmjax.privacy.Accountant` (composition ``"zcdp"``), whose ledger sums exactly to ``rho``.

    Args:
        data: the private :class:`~pgmjax.Dataset` (at least 2 attributes).
        epsilon, delta: the privacy target (``delta`` default 1e-9).
        key: a ``jax.random`` key; the whole run (noise, selections, synthetic records) follows from it.
        workload: what the batches aim at, as in :func:`pgmjax.mechanisms.aim` (default: every pair of at most
            10,000 cells over the declared domain, weight 1).
        engine_iters: the most iterations of the final fit (it stops earlier once converged: :data:`FINAL_TOL`).
        fit_options: a :class:`pgmjax.FitOptions` for every fit (default methods: MST's reference mirror descent for
            the one-way fit the tree is selected on, pgmjax's accelerated mirror descent for the batches' fits and the
            final fit; a ``method`` given here is every fit's, with the ``tol`` given here).
        max_model_mb: the model-size cap in MB (``8 * cells / 2^20``, over the declared domain): no batch pick takes
            the released model past it (default :func:`~pgmjax.mechanisms.tree_aim_shares.default_model_cap`: twice
            the largest model MST may select, 4 to 80 MB).
        **own: TreeAIM's own options, by name: the fields of
            :class:`~pgmjax.mechanisms.tree_aim_options.TreeAIMOptions` (``batches``, ``picks``, ``one_way_share``, ``tree_share``, ``round_iters``,
            ``select_iters``, ``compress``, ``merge``, ``tree_penalty``, ``merged_values``, ``synthetic``, ``rows``, ``synthetic_method``,
            ``progress``, ``constraints``, ``public``), checked before anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (over the original domain), ``synthetic``,
        ``measurements`` (over the compressed domain: one-way, tree, batch picks), ``accountant`` / ``ledger``
        (``spent == budget == rho``), ``plan`` and ``info``, a :class:`~pgmjax.mechanisms.tree_aim_options.TreeAIMInfo`:
        ``edges``, ``selected`` (the batch picks, in order), ``log``
        (per batch: candidates, model MB), ``budget`` (:func:`tree_aim_budget`), ``compressed_domain``,
        ``mapping``, ``spread``, ``compressed_model``, ``total``, ``model_mb``, ``seconds``, ``public``.

    Raises:
        TypeError / ValueError / pgmjax.ModelTooLarge: bad input, or a cap the widest tree breaks, before any spending.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 3})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2, 3], (500, 4)), dom)
        >>> res = tree_aim(data, 1.0, key=jax.random.key(0), select_iters=50, round_iters=50, engine_iters=100)
        >>> res.accountant.spent == res.accountant.budget, len(res.info.edges)
        (True, 3)
    """
    run = _tree_aim_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    with size_limit.limited(capped_fit_bytes(run.max_model_mb, run.options["method"], run.options.get("dtype"))):
        check_tree_sizes(data.domain, "tree_aim", run.options["method"], run.options.get("dtype"), run.max_model_mb)
        if run.own.constraints:
            size_limit.check_cliques(data.domain, [c.attributes for c in run.own.constraints], "tree_aim",
                                     what="the constraints' cliques")
            run.options["constraints"] = run.round_options["constraints"] = run.final_options["constraints"] = (
                run.own.constraints)
        return _tree_aim(data, key, run)


class _Run(NamedTuple):
    """:func:`tree_aim`'s arguments checked against the data: the common ones, the budget, the fits' options and the
    own options (``select_iters``'s default filled in, ``constraints`` and ``public`` checked over the domain)."""

    epsilon: float
    delta: float
    workload: object
    engine_iters: int
    max_model_mb: float
    options: dict  # the one-way fit's keyword arguments (MST's reference mirror descent unless told)
    round_options: dict  # the batches' fits' (:func:`_round_options`)
    final_options: dict  # the final fit's (:func:`_final_options`)
    budget: dict  # tree_aim_budget's at the given values (the rules fill in the others from released ones)
    own: TreeAIMOptions
    records_limit: float  # the memory limit outside the cap, which the synthetic records are drawn under


def _tree_aim_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb,
                        own: TreeAIMOptions) -> _Run:
    """:func:`tree_aim`'s arguments checked against the data (its own options were checked where made), before any
    private computation."""
    where = "tree_aim"
    data = check_data(data, where)
    domain = data.domain
    if len(domain) < 2:
        raise ValueError(f"{where}: TreeAIM needs at least 2 attributes (it starts from a spanning tree of pairs); "
                         f"the domain has {len(domain)}")
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    delta = check_zcdp_delta(delta, where)
    _check_key(key, where)
    max_model_mb = default_model_cap(domain) if max_model_mb is None else check_model_cap(max_model_mb, where)
    workload = default_aim_workload(domain) if workload is None else workload
    aim_candidates(workload, domain)  # checked now, over the declared domain (the batches use the compressed one)
    engine_iters = _count(engine_iters, "engine_iters", where, 1)
    if own.select_iters is None:  # MST's, at most the final fit's
        own = dataclasses.replace(own, select_iters=min(SELECT_ITERS, engine_iters))
    one_way_share = one_way_share_for(domain) if own.one_way_share is None else own.one_way_share
    budget = tree_aim_budget(epsilon, delta, attributes=len(domain), batches=own.batches or BATCHES, picks=own.picks,
                             one_way_share=one_way_share,
                             **({} if own.tree_share is None else {"tree_share": own.tree_share}))
    options = check_fit_options(fit_options, where)
    round_options = _round_options(options)
    final_options = _final_options(options)
    options.setdefault("method", REFERENCE_MIRROR_DESCENT)
    own = dataclasses.replace(own, constraints=check_constraints(domain, own.constraints, where),
                              public=check_public(own.public, domain, where))
    return _Run(epsilon, delta, workload, engine_iters, max_model_mb, options, round_options, final_options, budget, own,
                size_limit.max_model_bytes())


def _round_options(options: dict) -> dict:
    """The batches' fits' options: the user's, else pgmjax's accelerated mirror descent, its program chosen by
    ``estimate``'s ``program="auto"`` per fit.

    A batch's fit only scores candidates and warm-starts the next. While the model is small, compiling a new
    structure's dense program costs more than its iterations, and ``"auto"`` runs the size-class program (one compile
    per size class); once the picks have grown the model to millions of cells, the size-class program's routed
    passes cost several times the dense program's iterations, and ``"auto"`` compiles the dense one (the caller's
    ``structures`` and ``expected_iters`` are what it weighs). A user's method or program is kept as given.
    """
    rounds = dict(options)
    rounds.setdefault("method", "mirror_descent")
    return rounds


def _final_options(options: dict) -> dict:
    """The final fit's options: the user's, else pgmjax's accelerated mirror descent stopping at :data:`FINAL_TOL`
    (a ``tol`` given in the fit options is kept; a method given there runs as told, with the given ``tol`` only)."""
    final = dict(options)
    if "method" not in final:
        final["method"] = "mirror_descent"
        final.setdefault("tol", FINAL_TOL)
    return final


def _final_hint(fitted, round_iters: int) -> dict:
    """What the final fit tells ``estimate``'s ``program="auto"``: the iterations the last batch's fit took where it
    converged before ``round_iters`` (the same tolerance, warm-started, one batch's picks fewer), else nothing (the
    final fit's ``iters`` expected). Without it, a final fit of a small model's new structure compiles the dense
    program for ``engine_iters`` it stops far short of, where the size-class program the batches compiled is faster."""
    done = fitted.report.iterations
    return {"expected_iters": done} if 0 < done < round_iters else {}


def _fits_beside(growth: Growth, domain: Domain, cands: list, max_model_mb: float) -> Callable[[int], bool]:
    """Whether candidate ``j`` may join the model ``growth`` holds (chordal cliques over the compressed domain): the
    model grown by it (:meth:`~pgmjax.graph.growth.Growth.grown`: only the part of its junction tree between the
    candidate's attributes is triangulated again), released over the declared ``domain``, stays within
    ``max_model_mb`` (:func:`~pgmjax.mechanisms.steps.grown_released_size`). A candidate inside a clique leaves
    the model as it is. Released cliques only; asked about the drawn candidates only
    (:meth:`pgmjax.privacy.Accountant.exponential`'s ``admit``).

    The size is the released model's: the triangulation is chosen for the compressed sizes, and the release keeps
    its cliques with their merged values restored, which can cost far more than the compressed model (a cycle's
    chord through two compressed wide attributes); the release would refuse it after the whole budget is spent.
    The fits are then given the grown cliques (``estimate``'s ``cliques``), so the model fitted is the one checked."""

    def fits(j: int) -> bool:
        return grown_released_size(growth, domain, cands[j]) <= max_model_mb

    return fits


def _draw_batch(acc: Accountant, key, cdata: Dataset, domain: Domain, cands: list, q: np.ndarray, sens: float,
                eps_em: float, sigma: float, picks: int, structure: tuple, max_model_mb: float, draws: int, b: int,
                measurements: list) -> tuple[list, tuple]:
    """Batch ``b``'s picks: up to ``picks`` exponential-mechanism draws on the qualities ``q`` (each candidate once),
    among the candidates that fit beside the model's ``structure`` (chordal cliques over the compressed domain)
    grown by the batch's earlier picks, the cap on the released model over the declared ``domain``; each measured
    with ``sigma`` over the compressed data ``cdata`` and appended to ``measurements``; the run's last draw
    (``draws`` counts those left, this batch's included) measures with exactly what is left. Returns the cliques
    picked and the structure grown by them (the next fit's cliques)."""
    batch_keys = jax.random.split(key, picks)
    chosen: list = []
    growth = Growth(cdata.domain, structure)
    for p in range(picks):
        k_em, k_meas = jax.random.split(batch_keys[p])
        draws -= 1
        if not np.isfinite(q).any():
            break
        try:
            j = acc.exponential(k_em, q, sens, epsilon=eps_em, admit=_fits_beside(growth, domain, cands, max_model_mb),
                                target=f"batch {b + 1}, pick {p + 1}: select a marginal")
        except ValueError:  # nothing left fits beside the batch's picks (refused before any spending)
            break
        q[j] = -np.inf  # once per batch
        chosen.append(cands[j])
        growth = Growth(cdata.domain, growth.grown(cands[j]))
        measurements.append(acc.measure(k_meas, cdata, cands[j], rho=REST) if draws == 0 else
                            acc.measure(k_meas, cdata, cands[j], scale=sigma))
    return chosen, growth.cliques


def _pair_sizes(sizes: np.ndarray, cands: list) -> np.ndarray:
    """The candidates' sizes but the one-way ones' (measured already), or all where there are only those."""
    multi = sizes[[len(c) > 1 for c in cands]]
    return multi if multi.size else sizes


def _tree_budget(run: _Run, budget: dict, cdom: Domain, total: float, sizes: np.ndarray, cands: list) -> dict:
    """The budget with the tree's share set from released values (:func:`tree_share_for`: the one-way model's
    ``total``, the compressed domain) where none was given and the batches would measure more than ``d`` marginals
    well at :data:`TREE_SHARE` (:func:`default_pick_count`); otherwise ``budget``."""
    d = len(cdom)
    if run.own.tree_share is not None or default_pick_count(budget["batch_rho"], total, _pair_sizes(sizes, cands), d) <= d:
        return budget
    pair_cells = float(np.median([cdom.size(c) for c in itertools.combinations(cdom.attributes, 2)]))
    share = tree_share_for(budget["rho"], d, total, pair_cells)
    return tree_aim_budget(run.epsilon, run.delta, attributes=d, batches=budget["batches"], picks=run.own.picks,
                           tree_share=share, one_way_share=budget["one_way_share"])


def _batch_budget(run: _Run, budget: dict, d: int, total: float, sizes: np.ndarray, cands: list) -> dict:
    """The budget with the picks and the batches set from released values (:func:`default_pick_count`,
    :func:`default_batches`) where not given."""
    if run.own.picks is None:
        count = default_pick_count(budget["batch_rho"], total, _pair_sizes(sizes, cands), d)
        batches = default_batches(count, d) if run.own.batches is None else budget["batches"]
        budget = tree_aim_budget(run.epsilon, run.delta, attributes=d, batches=batches,
                                 picks=max(1, math.ceil(count / batches)), tree_share=budget["tree_share"],
                                 one_way_share=budget["one_way_share"])
    return budget


def _tree_aim(data, key, run: _Run) -> MechanismResult:
    """:func:`tree_aim` on checked arguments, its cap in force: the four steps of the module docstring."""
    where, domain, own, budget = "tree_aim", data.domain, run.own, run.budget
    epsilon, delta, max_model_mb, constraints, public = run.epsilon, run.delta, run.max_model_mb, own.constraints, own.public
    d, attrs = len(domain), list(domain.attributes)
    batches, picks = budget["batches"], budget["picks"]
    steps = d + 3 + batches
    bar = Progress(own.progress, steps, "TreeAIM", where)
    timer = Timer("engine", "selection")
    acc = Accountant(epsilon=epsilon, delta=delta, composition="zcdp")
    plan = record_plan(acc, "tree_aim", [
        BudgetStep("one-way marginals", "gaussian", budget["one_way_rho"], d, scale=budget["one_way_std"]),
        BudgetStep("spanning tree: select pairs", "exponential", budget["tree_select_rho"], d - 1,
                   epsilon=budget["tree_em_epsilon"]),
        BudgetStep(f"two-way marginals of the tree ({TREE_SHARE_MIN:g} to {TREE_SHARE:g} of the budget, set from the "
                   "one-way model's total), then the batches: select marginals, measure them (the last measurement "
                   "spends the rest)", "adaptive", 0.0),
    ], epsilon=epsilon, delta=delta)
    k_one, k_sel, k_two, k_batch, k_synth, k_dec = jax.random.split(key, 6)
    fit_kwargs = {"structures": batches + 3, **run.options}
    round_kwargs = {"structures": batches + 3, "tol": BATCH_TOL, **run.round_options}
    final_kwargs = {"structures": batches + 3, **run.final_options}
    fit_on = pool_repeats if run.options.get("loss", "l2") == "l2" else list
    try:
        # 1. one-way marginals and the domain compression (MST's steps 1-2)
        one_way = acc.measure_many(k_one, data, [(a,) for a in attrs], rho=budget["one_way_rho"])
        bar.step({"stage": "one-way marginals", "step": 1, "steps": steps})
        held = {a for c in constraints for a in c.attributes}
        cdom, mapping, one_way_c = compress_domain(domain, one_way, keep=held, merge=own.merge) if own.compress else (domain, {}, list(one_way))
        cdata = compress_data(data, mapping, cdom) if mapping else data
        if public is not None:
            fit_kwargs["public"] = round_kwargs["public"] = final_kwargs["public"] = (
                public.recoded(mapping, cdom) if mapping else public)

        # 2. the tree (MST's steps 3-4)
        with timer("engine"):
            fitted = estimate(cdom, one_way_c, iters=own.select_iters, report=True, **fit_kwargs)
            model = fitted.model
        candidates = aim_candidates(run.workload, cdom)  # the batches' (step 3), over the released compressed domain
        cands = list(candidates)
        sizes = np.array([possible_cells(cdom, c, constraints).sum() if constraints else cdom.size(c) for c in cands],
                         np.float64)
        total = float(model.total)  # released: the one-way model's
        budget = _tree_budget(run, budget, cdom, total, sizes, cands)
        with timer("selection"):
            edges = select_tree(acc, k_sel, cdata, model, budget["tree_select_rho"], bar, where,
                                [c.attributes for c in constraints], steps=steps,
                                noise_std=budget["tree_std"] if own.tree_penalty else None)
        measurements = list(one_way_c) + list(acc.measure_many(k_two, cdata, edges, rho=budget["tree_rho"]))

        # 3. the batches: refit, score every candidate, draw and measure `picks` marginals
        weight = np.array([candidates[c] for c in cands])
        budget = _batch_budget(run, budget, d, total, sizes, cands)
        batches, picks, steps = budget["batches"], budget["picks"], d + 3 + budget["batches"]
        round_kwargs["structures"] = final_kwargs["structures"] = batches + 3
        truth = cdata.marginals(cands)  # read only through the exponential mechanism below
        sens_unit = acc.l1_sensitivity()
        sigma, eps_em = budget["pick_std"], budget["pick_em_epsilon"]
        sens = sens_unit * float(weight.max())
        selected, log, structure = [], [], ()  # structure: the model's cliques as the size checks grew them
        draws = batches * picks
        for b in range(batches):
            hint = {"expected_iters": min(fitted.report.iterations, own.round_iters)} if b else {}  # for "auto"
            with timer("engine"):
                fitted = estimate(cdom, fit_on(measurements), iters=own.round_iters, warm_start=fitted, report=True,
                                  cliques=structure, **hint, **round_kwargs)
                model = fitted.model
            with timer("selection"):
                q = weight * (l1_errors(truth, candidate_marginals(model, cands)) - HALF_NORMAL_MEAN * sigma * sizes)
                chosen, structure = _draw_batch(acc, jax.random.fold_in(k_batch, b), cdata, domain, cands, q, sens, eps_em,
                                                sigma, picks, model.cliques, max_model_mb, draws, b, measurements)
                draws -= picks
                selected += chosen
            log.append({"batch": b + 1, "picked": list(chosen), "model_mb": model_mb(model)})
            bar.step({"stage": "batch", "step": d + 1 + b, "steps": steps, "picked": len(chosen)}, total=steps)
        if acc.remaining > 0:  # the last draw not made (nothing fitted): the rest re-measures the last pick (or tree pair)
            clique = selected[-1] if selected else edges[-1]
            measurements.append(acc.measure(jax.random.fold_in(k_batch, batches), cdata, clique, rho=REST))

        # 4. the final fit, synthetic records, decompression (MST's step 5)
        with timer("engine"):
            fitted = estimate(cdom, fit_on(measurements), iters=run.engine_iters, warm_start=fitted, report=True,
                              cliques=structure, **_final_hint(fitted, own.round_iters), **final_kwargs)
        record_public_fit(acc, fitted, cdom, final_kwargs.get("public"), measurements)  # what the fit took, free
        bar.step({"stage": "final fit", "step": steps - 1, "steps": steps})
        spread = spread_for(own.merged_values, mapping, one_way, fitted.model)  # post-processing
        model_out, synth = release_over_original(fitted.model, mapping, domain, k_synth, k_dec, synthetic=own.synthetic,
                                                 rows=own.rows, method=own.synthetic_method, timer=timer, spread=spread,
                                                 limit=run.records_limit)
        bar.step({"stage": "synthetic data", "step": steps, "steps": steps})
    finally:
        bar.close()

    info = TreeAIMInfo(
        epsilon=epsilon, delta=delta, rho=acc.budget, budget=budget, edges=edges, selected=selected, log=log,
        compressed_domain=cdom, mapping=mapping, spread=spread, compressed_model=fitted.model, total=fitted.model.total,
        model_mb=model_mb(model_out), engine_iters=run.engine_iters, seconds=timer.done(),
        public=public_cliques(fitted))
    return pgm_native_result("tree_aim", "TreeAIM", model=model_out, synthetic=synth, measurements=measurements,
                             accountant=acc, info=info, plan=plan, report=fitted.report)
