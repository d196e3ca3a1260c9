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

Budget ``rho = cdp_rho(epsilon, delta)`` (zCDP), shares of it (:func:`tree_aim_budget`):

1. **One-way marginals** (:data:`ONE_WAY_SHARE` to :data:`ONE_WAY_SHARE_MAX`, more where the values lie in
   many-valued attributes: :func:`one_way_share_for`, public): all ``d``, equal shares (MST's step 1), then MST's domain
   compression (values whose noisy count is below 3 noise stds merged; post-processing).
2. **The tree** (:data:`TREE_SELECT_SHARE` to select, :data:`TREE_SHARE_MIN` to :data:`TREE_SHARE` to measure:
   :func:`tree_share_for`, less where its pairs are measured well with less and the batches would measure more
   than ``d`` marginals well, from the one-way model's released total): MST's ``d - 1`` exponential-mechanism Kruskal steps on the one-way model's pair errors, then the tree's
   pairs, equal shares.
3. **Batches** (the rest): ``batches`` rounds; before each, the model of everything measured so far is fitted
   (warm-started) and every AIM candidate (the downward closure of the workload, default every pair of at most
   10,000 cells) is scored with AIM's quality ``q_r = w_r (||mu_r(D) - mu_hat_r||_1 - sqrt(2/pi) sigma n_r)``
   (sensitivity ``max_r w_r``); ``picks`` marginals are drawn one after another by the exponential mechanism, each
   excluded from the rest of its batch, and measured with noise ``sigma``. Each pick costs the same: a tenth of its
   share selects (:data:`SELECT_SHARE`), the rest measures; the run's last measurement takes exactly what is left.
   How many picks: :func:`default_pick_count` (``d`` to ``4 d`` in all, from released values), in how many batches:
   :func:`default_batches` (2 to 8, at most about ``d / 2`` picks each). A draw is among the
   candidates whose marginal lies inside a clique of the model or keeps the model, with the batch's earlier picks,
   within ``max_model_mb`` over the declared domain (the released model's): the size check asks only about the
   drawn candidate and the draw is repeated if it does not fit (:meth:`pgmjax.privacy.Accountant.exponential`'s
   ``admit``: the exponential mechanism on the admitted set).
4. A final fit of every measurement, warm-started from the last batch's model (pgmjax's accelerated mirror
   descent, at most ``engine_iters`` iterations, stopping once converged: :data:`FINAL_TOL`), synthetic records,
   decompression.

Privacy (sketch): every access to the data is a Gaussian measurement of a sensitivity-1 marginal or an
exponential-mechanism draw on scores of L1 sensitivity ``max w_r`` (add/remove one record), each recorded by one
:class:`~pgmjax.privacy.Accountant`; their zCDP costs add (Bun & Steinke 2016, Lemma 2.3), which is ``rho`` in
total, and ``rho``-zCDP gives ``(epsilon, delta)``-DP (Canonne, Kamath & Steinke 2020). What each step selects from
(and the tree's share) depends only on earlier releases (the compressed domain, the one-way model's total, the tree,
the batches' picks) and public settings, and the size checks on released cliques only, so adaptivity composes.

Anchors (Adult, ``d = 14``, ``eps = 1``, ``delta = 1e-9``, 2 batches of 7, its default; :func:`tree_aim_budget`):
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
from ..privacy import REST, Accountant, cdp_rho
from ..queries.constraints import check_constraints, possible_cells
from ..queries.measurement import pool_repeats
from .adaptive_iterative import HALF_NORMAL_MEAN, ROUND_TOL, aim_candidates, default_aim_workload
from .domain_compression import compress_data, compress_domain
from .options import (DEFAULT_DELTA, check_data, check_epsilon, check_fit_options, check_model_cap,
                      check_zcdp_delta)
from .own_options import takes_own_options
from .progress import Progress
from .public_selection import check_public
from .result import BudgetStep, MechanismResult, record_plan
from .run_info import reports
from .spanning_tree import REFERENCE_MIRROR_DESCENT, SELECT_ITERS, check_tree_sizes, select_tree
from .steps import (Timer, candidate_marginals, l1_errors, model_mb, pgm_native_result, public_cliques,
                    record_public_fit, release_over_original, released_model_size)
from .tree_aim_options import BATCHES, TreeAIMInfo, TreeAIMOptions

__all__ = ["TreeAIMOptions", "default_picks", "tree_aim", "tree_aim_budget"]

#: Least share of ``rho`` for the one-way marginals (MST: a third; AIM: about 6% at ``16 d`` rounds): a table of
#: attributes of few values (:func:`one_way_share_for`).
ONE_WAY_SHARE = 0.2
#: Most share of ``rho`` for the one-way marginals (MST's third): a table whose values lie in many-valued attributes.
ONE_WAY_SHARE_MAX = 1.0 / 3.0
#: An attribute of more values than this is many-valued (:func:`one_way_share_for`): a finely binned number (an age,
#: an amount, a timestamp), whose rare values the domain compression merges unless their counts are measured well.
MANY_VALUES = 50
#: Share of ``rho`` for selecting the tree's ``d - 1`` pairs (MST: a third).
TREE_SELECT_SHARE = 0.1
#: Share of ``rho`` for measuring the tree's pairs (MST: a third) where they are noisy; the batches get the rest.
TREE_SHARE = 0.35
#: The least share of ``rho`` for measuring the tree's pairs (:func:`tree_share_for`).
TREE_SHARE_MIN = 0.15
#: The expected noise, in total variation distance, of a median-sized tree pair measured at :data:`TREE_SHARE`
#: below which the tree's share shrinks (:func:`tree_share_for`): pairs of few cells over many records (NLTCS's binary
#: ones) are measured well with less, and the batches' picks put the rest to better use.
TREE_TVD = 0.02
#: Share of each batch pick's budget that selects it (AIM's 10%).
SELECT_SHARE = 0.1
#: The final fit stops once a compiled chunk (50 iterations) changes its loss by less than this, relatively
#: (``estimate``'s ``tol``). It starts from the last batch's fit, which has converged on all but the last batch's
#: picks, so pgmjax's accelerated mirror descent gets there in hundreds of iterations. MST's final fit (10,000
#: iterations of the reference code's plain mirror descent, from the one-way model) took most of TreeAIM's time on
#: models of many cells and gave the model the same two-way errors to four digits (the changelog has the figures).
FINAL_TOL = 1e-6


#: The noise one batch pick of a median-sized candidate may add, in total variation distance (expected), when
#: :func:`default_picks` sets how many marginals the batches measure.
PICK_TVD = 0.01
#: The most batches :func:`default_batches` sets.
MAX_BATCHES = 8


def _picks(d: int, batches: int) -> int:
    """The fewest picks per batch: about ``d`` extra marginals in all, at least one per batch."""
    return max(1, math.ceil(d / batches))


def default_picks(batch_rho: float, total: float, sizes, attributes: int, batches: int) -> int:
    """Picks per batch where none are given: :func:`default_pick_count`'s marginals over ``batches`` batches.

    Example:
        >>> default_picks(0.0052, 21_574, [4] * 120, 16, 2), default_picks(0.0052, 48_842, [150] * 91, 14, 2)
        (32, 7)
    """
    return max(1, math.ceil(default_pick_count(batch_rho, total, sizes, attributes) / batches))


def default_batches(picks: int, attributes: int) -> int:
    """Batches where none are given: about ``d / 2`` picks per batch at most, between :data:`BATCHES` and
    :data:`MAX_BATCHES`.

    A batch's picks are drawn from one fit: after a few picks the model they will make is not the one scored. Where
    the budget measures many marginals well (NLTCS's binary pairs: ``4 d`` picks), more refits let each batch see
    what the earlier ones fixed, as AIM's rounds do; where it measures ``d`` (Adult's, Titanic's large pairs), two
    batches do as well and fit fewer times.

    Example:
        >>> default_batches(64, 16), default_batches(28, 16), default_batches(14, 14)
        (8, 4, 2)
    """
    return min(MAX_BATCHES, max(BATCHES, math.ceil(picks / math.ceil(attributes / 2))))


def default_pick_count(batch_rho: float, total: float, sizes, attributes: int) -> int:
    """How many marginals the batches measure where no ``picks`` are given: as many as their budget measures with
    at most :data:`PICK_TVD` of expected noise on a median-sized candidate, between ``d`` and ``4 d``.

    A measurement of ``n`` cells with Gaussian noise ``sigma`` adds ``sqrt(2/pi) sigma n`` in expected L1 (AIM's
    penalty), ``sqrt(2/pi) sigma n / (2 N)`` in TVD; ``m`` picks of ``(1 - SELECT_SHARE) batch_rho / m`` each have
    ``sigma = sqrt(m / (2 (1 - SELECT_SHARE) batch_rho))``. Many small marginals (NLTCS's binary pairs) are cheap
    to measure well, so the batches take many (``4 d``); large ones (Adult's, at ``epsilon = 1``) take ``d``. Reads
    released values only: ``total`` is the one-way model's (noisy) record count, ``sizes`` the candidates' cells
    over the compressed domain.

    Example:
        >>> default_pick_count(0.0052, 21_574, [4] * 120, 16), default_pick_count(0.0052, 48_842, [150] * 91, 14)
        (64, 14)
    """
    d = attributes
    n_med = max(float(np.median(sizes)), 1.0)
    wanted = 2.0 * (1.0 - SELECT_SHARE) * batch_rho * (2.0 * max(total, 1.0) * PICK_TVD / (HALF_NORMAL_MEAN * n_med)) ** 2
    return min(max(int(round(wanted)), d), 4 * d)


def one_way_share_for(domain: Domain) -> float:
    """The share of ``rho`` that measures the one-way marginals: from :data:`ONE_WAY_SHARE` to
    :data:`ONE_WAY_SHARE_MAX` in proportion to the one-way cells that lie in many-valued attributes (more than
    :data:`MANY_VALUES`). Public: the declared domain only.

    Their one-way marginals carry most of a release's one-way error, and what the domain compression merges of them
    (values whose noisy counts are below three noise stds) is lost to every later measurement. Measured with a
    fifth of the budget, Titanic's and Adult's (91- and 100-value ages, fares and amounts) gave less accurate
    synthetic data than with a third; tables of few values each (NLTCS's binary columns, the generated ones of 2 to
    40 values) do better with a fifth, the rest going to the pairs (the figures: ``bench/results/mechanisms``).

    Example:
        >>> round(one_way_share_for(Domain({"a": 2, "b": 100, "c": 98})), 3), one_way_share_for(Domain({"a": 2, "b": 40}))
        (0.332, 0.2)
    """
    sizes = np.array([domain.size(a) for a in domain.attributes], np.float64)
    many = float(sizes[sizes > MANY_VALUES].sum() / sizes.sum())
    return ONE_WAY_SHARE + (ONE_WAY_SHARE_MAX - ONE_WAY_SHARE) * many


def tree_share_for(rho: float, attributes: int, total: float, pair_cells: float) -> float:
    """The share of ``rho`` that measures the tree's ``d - 1`` pairs: :data:`TREE_SHARE`, or less (down to
    :data:`TREE_SHARE_MIN`) where a median-sized pair measured at :data:`TREE_SHARE` would carry less than
    :data:`TREE_TVD` of expected noise, so that it carries :data:`TREE_TVD`.

    :func:`tree_aim` asks only where the batches, at :data:`TREE_SHARE`, would measure more than ``d`` marginals
    (:func:`default_pick_count`): there the budget the tree gives up buys more picks (NLTCS's binary pairs). Where
    they measure ``d`` (Adult's and the generated tables' at ``epsilon = 3``), a smaller tree share only made the
    tree noisier and the same picks sharper, and the synthetic data worse (``bench/results/mechanisms``).

    A pair of ``n`` cells with Gaussian noise ``sigma`` adds ``sqrt(2/pi) sigma n / (2 N)`` in expected TVD (AIM's
    penalty over twice the record count), and ``d - 1`` pairs on a share ``s`` of ``rho`` have
    ``sigma = sqrt((d - 1) / (2 s rho))``; the noise scales as ``1 / sqrt(s)``. Reads released values only:
    ``total`` is the one-way model's (noisy) record count, ``pair_cells`` the median pair's cells over the
    compressed domain.

    Example:
        >>> round(tree_share_for(0.0118, 16, 21_574, 4), 3), tree_share_for(0.0118, 9, 1_304, 45)   # NLTCS, Titanic
        (0.15, 0.35)
    """
    d = attributes
    sigma = math.sqrt((d - 1) / (2.0 * TREE_SHARE * rho))
    noise = HALF_NORMAL_MEAN * sigma * pair_cells / (2.0 * max(total, 1.0))
    return min(TREE_SHARE, max(TREE_SHARE_MIN, TREE_SHARE * (noise / TREE_TVD) ** 2))


def tree_aim_budget(epsilon: float, delta: float = DEFAULT_DELTA, *, attributes: int, batches: int = BATCHES,
                    picks: int | None = None, tree_share: float = TREE_SHARE,
                    one_way_share: float = ONE_WAY_SHARE) -> dict:
    """TreeAIM's zCDP budget split and noise scales (module docstring).

    Args:
        epsilon, delta: the ``(epsilon, delta)``-DP target.
        attributes: ``d`` (at least 2).
        batches: the number of batches.
        picks: marginals drawn per batch (default ``ceil(d / batches)``).
        tree_share: the share of ``rho`` that measures the tree (:func:`tree_share_for`; between :data:`TREE_SHARE_MIN` and
            :data:`TREE_SHARE`).
        one_way_share: the share of ``rho`` that measures the one-way marginals (:func:`one_way_share_for`; between
            :data:`ONE_WAY_SHARE` and :data:`ONE_WAY_SHARE_MAX`).

    Returns:
        A dict: ``rho``; ``one_way_rho``, ``tree_select_rho``, ``tree_rho``, ``batch_rho`` (the four shares);
        ``one_way_std``, ``tree_std``, ``pick_std`` (the Gaussian noise stds); ``tree_em_epsilon`` and
        ``pick_em_epsilon`` (per draw); ``one_way_share``, ``tree_share``, ``batches``, ``picks``.

    Example:
        >>> b = tree_aim_budget(1.0, 1e-9, attributes=14)                 # Adult
        >>> round(b["one_way_std"], 2), round(b["tree_std"], 2), round(b["pick_std"], 2), b["picks"]
        (48.35, 35.22, 38.52, 7)
    """
    where = "tree_aim_budget"
    epsilon = _positive(epsilon, "epsilon", where)
    delta = check_zcdp_delta(delta, where)
    d = _count(attributes, "attributes", where, 2)
    batches = _count(batches, "batches", where, 1)
    picks = _picks(d, batches) if picks is None else _count(picks, "picks", where, 1)
    share = float(tree_share)
    if not TREE_SHARE_MIN <= share <= TREE_SHARE:
        raise ValueError(f"{where}: tree_share must be between {TREE_SHARE_MIN} and {TREE_SHARE}, got {tree_share!r}")
    one_way_share = float(one_way_share)
    if not ONE_WAY_SHARE <= one_way_share <= ONE_WAY_SHARE_MAX:
        raise ValueError(f"{where}: one_way_share must be between {ONE_WAY_SHARE} and {ONE_WAY_SHARE_MAX:.4f}, "
                         f"got {one_way_share!r}")
    rho = cdp_rho(epsilon, delta)
    one_way, tree_select, tree = one_way_share * rho, TREE_SELECT_SHARE * rho, share * rho
    batch = rho - one_way - tree_select - tree
    per_pick = batch / (batches * picks)
    return {
        "rho": rho, "one_way_rho": one_way, "tree_select_rho": tree_select, "tree_rho": tree, "batch_rho": batch,
        "one_way_std": math.sqrt(d / (2.0 * one_way)),
        "tree_std": math.sqrt((d - 1) / (2.0 * tree)),
        "pick_std": math.sqrt(1.0 / (2.0 * (1.0 - SELECT_SHARE) * per_pick)),
        "tree_em_epsilon": math.sqrt(8.0 * tree_select / (d - 1)),
        "pick_em_epsilon": math.sqrt(8.0 * SELECT_SHARE * per_pick),
        "one_way_share": one_way_share, "tree_share": share, "batches": batches, "picks": picks,
    }


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
    max_model_mb: float = 80.0,
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
            the released model past it (AIM's 80).
        **own: TreeAIM's own options, by name: the fields of
            :class:`~pgmjax.mechanisms.tree_aim_options.TreeAIMOptions` (``batches``, ``picks``, ``one_way_share``, ``tree_share``, ``round_iters``,
            ``select_iters``, ``compress``, ``synthetic``, ``rows``, ``synthetic_method``, ``progress``,
            ``constraints``, ``public``), checked before anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (over the original domain), ``synthetic``,
        ``measurements`` (over the compressed domain: one-way, tree, batch picks), ``accountant`` / ``ledger``
        (``spent == budget == rho``), ``plan`` and ``info``, a :class:`~pgmjax.mechanisms.tree_aim_options.TreeAIMInfo`:
        ``edges``, ``selected`` (the batch picks, in order), ``log``
        (per batch: candidates, model MB), ``budget`` (:func:`tree_aim_budget`), ``compressed_domain``,
        ``mapping``, ``compressed_model``, ``total``, ``model_mb``, ``seconds``, ``public``.

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
        check_tree_sizes(data.domain, "tree_aim", run.options["method"], run.options.get("dtype"))
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
    budget: dict  # tree_aim_budget's, with picks_given, tree_share_given and batches_given
    own: TreeAIMOptions


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
    if max_model_mb is None:
        raise ValueError(f"{where}: max_model_mb must be a number: the batches' picks are limited by a model-size cap")
    max_model_mb = check_model_cap(max_model_mb, where)
    workload = default_aim_workload(domain) if workload is None else workload
    aim_candidates(workload, domain)  # checked now, over the declared domain (the batches use the compressed one)
    engine_iters = _count(engine_iters, "engine_iters", where, 1)
    if own.select_iters is None:  # MST's, at most the final fit's
        own = dataclasses.replace(own, select_iters=min(SELECT_ITERS, engine_iters))
    one_way_share = one_way_share_for(domain) if own.one_way_share is None else own.one_way_share
    budget = tree_aim_budget(epsilon, delta, attributes=len(domain), batches=own.batches or BATCHES, picks=own.picks,
                             one_way_share=one_way_share,
                             **({} if own.tree_share is None else {"tree_share": own.tree_share}))
    budget["picks_given"], budget["tree_share_given"] = own.picks is not None, own.tree_share is not None
    budget["batches_given"] = own.batches is not None
    options = check_fit_options(fit_options, where)
    round_options = _round_options(options)
    final_options = _final_options(options)
    options.setdefault("method", REFERENCE_MIRROR_DESCENT)
    own = dataclasses.replace(own, constraints=check_constraints(domain, own.constraints, where),
                              public=check_public(own.public, domain, where))
    return _Run(epsilon, delta, workload, engine_iters, max_model_mb, options, round_options, final_options, budget, own)


def _round_options(options: dict) -> dict:
    """The batches' fits' options: the user's, else pgmjax's accelerated mirror descent on the size-class program.

    A batch's fit only scores candidates and warm-starts the next; compiling a new structure's dense program costs
    more than its iterations (seconds per structure on a CPU), where the size-class program compiles once per size
    class. A user's method, program, oracle, loss or devices are kept as given (the size-class program needs pgmjax's
    methods, the exact oracle and one device).
    """
    rounds = dict(options)
    rounds.setdefault("method", "mirror_descent")
    plain = rounds.get("oracle", "exact") == "exact" and not callable(rounds.get("loss")) and rounds.get("devices", 1) == 1
    if plain and rounds["method"] in ("mirror_descent", "dual_averaging", "lbfgs"):
        rounds.setdefault("program", "size_class")
    return rounds


def _final_options(options: dict) -> dict:
    """The final fit's options: the user's, else pgmjax's accelerated mirror descent stopping at :data:`FINAL_TOL`
    (a ``tol`` given in the fit options is kept; a method given there runs as told, with the given ``tol`` only)."""
    final = dict(options)
    if "method" not in final:
        final["method"] = "mirror_descent"
        final.setdefault("tol", FINAL_TOL)
    return final


def _fits_beside(cdom: Domain, domain: Domain, cliques: list, cands: list, max_model_mb: float) -> Callable[[int], bool]:
    """Whether candidate ``j`` may join a model over ``cliques``: it lies inside one of them (free), or the model with
    it, fitted over the compressed ``cdom`` and released over the declared ``domain``, stays within ``max_model_mb``
    (:func:`~pgmjax.mechanisms.steps.released_model_size`). Released cliques only; asked about the drawn candidates
    only (:meth:`pgmjax.privacy.Accountant.exponential`'s ``admit``).

    The size is the released model's: a model that fits over the compressed domain may not once its merged values
    are restored (its junction tree is triangulated for the compressed sizes), and the release would refuse it
    after the whole budget is spent."""
    held = [set(c) for c in cliques]

    def fits(j: int) -> bool:
        c = cands[j]
        return any(set(c) <= h for h in held) or released_model_size(cdom, domain, cliques + [c]) <= max_model_mb

    return fits


def _draw_batch(acc: Accountant, key, cdata: Dataset, domain: Domain, cands: list, q: np.ndarray, sens: float,
                eps_em: float, sigma: float, picks: int, base: list, max_model_mb: float, draws: int, b: int,
                measurements: list) -> list:
    """Batch ``b``'s picks: up to ``picks`` exponential-mechanism draws on the qualities ``q`` (each candidate once),
    among the candidates that fit beside ``base`` and the batch's earlier picks over the declared ``domain`` (the
    cap is on the released model), each measured with ``sigma`` over the compressed data ``cdata`` and
    appended to ``measurements``; the run's last draw (``draws`` counts those left, this batch's included) measures
    with exactly what is left. Returns the cliques picked."""
    batch_keys = jax.random.split(key, picks)
    chosen: list = []
    for p in range(picks):
        k_em, k_meas = jax.random.split(batch_keys[p])
        draws -= 1
        if not np.isfinite(q).any():
            break
        fits = _fits_beside(cdata.domain, domain, base + chosen, cands, max_model_mb)
        try:
            j = acc.exponential(k_em, q, sens, epsilon=eps_em, admit=fits, target=f"batch {b + 1}, pick {p + 1}: select a marginal")
        except ValueError:  # nothing left fits beside the batch's picks (refused before any spending)
            break
        q[j] = -np.inf  # once per batch
        chosen.append(cands[j])
        measurements.append(acc.measure(k_meas, cdata, cands[j], rho=REST) if draws == 0 else
                            acc.measure(k_meas, cdata, cands[j], scale=sigma))
    return chosen


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
    rho = acc.budget
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
    round_kwargs = {"structures": batches + 3, "tol": ROUND_TOL, **run.round_options}
    final_kwargs = {"structures": batches + 3, **run.final_options}
    fit_on = pool_repeats if run.options.get("loss", "l2") == "l2" else list
    try:
        # 1. one-way marginals and the domain compression (MST's steps 1-2)
        one_way = acc.measure_many(k_one, data, [(a,) for a in attrs], rho=budget["one_way_rho"])
        bar.step({"stage": "one-way marginals", "step": 1, "steps": steps})
        held = {a for c in constraints for a in c.attributes}
        cdom, mapping, one_way_c = compress_domain(domain, one_way, keep=held) if own.compress else (domain, {}, list(one_way))
        cdata = compress_data(data, mapping, cdom) if mapping else data
        if public is not None:
            fit_kwargs["public"] = round_kwargs["public"] = final_kwargs["public"] = (
                public.recoded(mapping, cdom) if mapping else public)

        # 2. the tree (MST's steps 3-4)
        with timer("engine"):
            model = estimate(cdom, one_way_c, iters=own.select_iters, **fit_kwargs)
        candidates = aim_candidates(run.workload, cdom)  # the batches' (step 3), over the released compressed domain
        cands = list(candidates)
        sizes = np.array([possible_cells(cdom, c, constraints).sum() if constraints else cdom.size(c) for c in cands],
                         np.float64)
        multi = sizes[[len(c) > 1 for c in cands]]  # the one-way candidates are measured already
        multi = multi if multi.size else sizes
        total = float(model.total)  # released: the one-way model's
        if not budget["tree_share_given"] and default_pick_count(budget["batch_rho"], total, multi, d) > d:
            # the batches measure more marginals well than the tree holds: the tree's share from released values
            pair_cells = float(np.median([cdom.size(c) for c in itertools.combinations(cdom.attributes, 2)]))
            share = tree_share_for(rho, d, total, pair_cells)
            budget = {**tree_aim_budget(epsilon, delta, attributes=d, batches=batches, picks=own.picks, tree_share=share,
                                        one_way_share=budget["one_way_share"]),
                      **{k: budget[k] for k in ("picks_given", "tree_share_given", "batches_given")}}
        with timer("selection"):
            edges = select_tree(acc, k_sel, cdata, model, budget["tree_select_rho"], bar, where,
                                [c.attributes for c in constraints], steps=steps)
        measurements = list(one_way_c) + list(acc.measure_many(k_two, cdata, edges, rho=budget["tree_rho"]))

        # 3. the batches: refit, score every candidate, draw and measure `picks` marginals
        weight = np.array([candidates[c] for c in cands])
        if not budget["picks_given"]:  # how many, in how many batches: from released values (the total, the sizes)
            count = default_pick_count(budget["batch_rho"], total, multi, d)
            batches = batches if budget["batches_given"] else default_batches(count, d)
            picks = max(1, math.ceil(count / batches))
            budget = tree_aim_budget(epsilon, delta, attributes=d, batches=batches, picks=picks,
                                     tree_share=budget["tree_share"], one_way_share=budget["one_way_share"])
            round_kwargs["structures"] = final_kwargs["structures"] = batches + 3
        for given in ("picks_given", "tree_share_given", "batches_given"):
            budget.pop(given, None)
        truth = cdata.marginals(cands)  # read only through the exponential mechanism below
        sens_unit = acc.l1_sensitivity()
        sigma, eps_em = budget["pick_std"], budget["pick_em_epsilon"]
        sens = sens_unit * float(weight.max())
        selected, log = [], []
        draws = batches * picks
        for b in range(batches):
            with timer("engine"):
                model = estimate(cdom, fit_on(measurements), iters=own.round_iters, warm_start=model, **round_kwargs)
            with timer("selection"):
                base = list(model.cliques)
                q = weight * (l1_errors(truth, candidate_marginals(model, cands)) - HALF_NORMAL_MEAN * sigma * sizes)
                chosen = _draw_batch(acc, jax.random.fold_in(k_batch, b), cdata, domain, cands, q, sens, eps_em,
                                     sigma, picks, base, max_model_mb, draws, b, measurements)
                draws -= picks
                selected += chosen
            log.append({"batch": b + 1, "picked": list(chosen), "model_mb": model_mb(model)})
            steps = d + 3 + batches
            bar.step({"stage": "batch", "step": d + 1 + b, "steps": steps, "picked": len(chosen)}, total=steps)
        if acc.remaining > 0:  # the last draw not made (nothing fitted): the rest re-measures the last pick (or tree pair)
            clique = selected[-1] if selected else edges[-1]
            measurements.append(acc.measure(jax.random.fold_in(k_batch, batches), cdata, clique, rho=REST))

        # 4. the final fit, synthetic records, decompression (MST's step 5)
        with timer("engine"):
            model_c = estimate(cdom, fit_on(measurements), iters=run.engine_iters, warm_start=model, **final_kwargs)
        record_public_fit(acc, model_c, cdom, final_kwargs.get("public"), measurements)  # what the fit took, free
        bar.step({"stage": "final fit", "step": steps - 1, "steps": steps})
        model_out, synth = release_over_original(model_c, mapping, domain, k_synth, k_dec, synthetic=own.synthetic,
                                                 rows=own.rows, method=own.synthetic_method, timer=timer)
        bar.step({"stage": "synthetic data", "step": steps, "steps": steps})
    finally:
        bar.close()

    info = TreeAIMInfo(
        epsilon=epsilon, delta=delta, rho=rho, budget=budget, edges=edges, selected=selected, log=log,
        compressed_domain=cdom, mapping=mapping, compressed_model=model_c, total=model_c.total,
        model_mb=model_mb(model_out), engine_iters=run.engine_iters, seconds=timer.done(),
        public=public_cliques(model_c),
    )
    return pgm_native_result("tree_aim", "TreeAIM", model=model_out, synthetic=synth, measurements=measurements,
                             accountant=acc, info=info, plan=plan)
