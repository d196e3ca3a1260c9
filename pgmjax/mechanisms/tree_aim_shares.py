"""TreeAIM's budget: how it splits ``rho`` (one-way marginals, the tree, the batches), how many marginals the
batches measure and in how many batches (:func:`pgmjax.mechanisms.tree_aim`'s module docstring has the mechanism).

Every rule here reads public settings or values an earlier step released (the declared and the compressed domain,
the one-way model's noisy total), so choosing a share costs no budget.
"""

from __future__ import annotations

import math

import numpy as np

from ..checks import check_count as _count
from ..checks import check_positive as _positive
from ..data.domain import Domain
from ..privacy import cdp_rho
from .adaptive_iterative import HALF_NORMAL_MEAN
from .options import DEFAULT_DELTA, check_zcdp_delta
from .spanning_tree import largest_model
from .tree_aim_options import BATCHES

__all__ = ["default_batches", "default_model_cap", "default_pick_count", "default_picks", "one_way_share_for",
           "tree_aim_budget", "tree_share_for"]

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
#: The noise one batch pick of a median-sized candidate may add, in total variation distance (expected), when
#: :func:`default_picks` sets how many marginals the batches measure.
PICK_TVD = 0.01
#: The most batches :func:`default_batches` sets.
MAX_BATCHES = 8
#: :func:`default_batches` sets at most this many attributes' worth of refits, ``d`` times the batches (8 batches up
#: to 32 attributes, 2 from 86): each batch's fit compiles a program that grows with the model's cliques, about ``d``
#: of them, while MST fits twice.
REFIT_ATTRIBUTES = 256
#: The model-size cap where none is given (:func:`default_model_cap`), in MB: this many times the largest model
#: MST may select,
MODEL_CAP_TREES = 2.0
#: at least this,
MODEL_CAP_MIN = 4.0
#: and at most AIM's published cap.
MODEL_CAP_MAX = 80.0


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
    :data:`MAX_BATCHES`, and at most :data:`REFIT_ATTRIBUTES` ``/ d`` (at least :data:`BATCHES`).

    A batch's picks are drawn from one fit: after a few picks the model they will make is not the one scored. Where
    the budget measures many marginals well (NLTCS's binary pairs: ``4 d`` picks), more refits let each batch see
    what the earlier ones fixed, as AIM's rounds do; where it measures ``d`` (Adult's, Titanic's large pairs), two
    batches do as well and fit fewer times. On a wide table each refit compiles a program of a hundred-odd cliques,
    and its picks spread over many attributes: Stroke's 110 at epsilon 3 (``2 d`` picks) did as well in two batches as
    in five, in half the time.

    Example:
        >>> default_batches(64, 16), default_batches(28, 16), default_batches(14, 14), default_batches(225, 110)
        (8, 4, 2, 2)
    """
    wanted = min(math.ceil(picks / math.ceil(attributes / 2)), REFIT_ATTRIBUTES // attributes)
    return min(MAX_BATCHES, max(BATCHES, wanted))


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


def default_model_cap(domain: Domain) -> float:
    """TreeAIM's ``max_model_mb`` where none is given: :data:`MODEL_CAP_TREES` times the largest model MST may select
    over the declared ``domain`` (its one-way tables and the spanning tree of pairs with the most cells,
    :func:`~pgmjax.mechanisms.spanning_tree.largest_model`; ``8 * cells / 2^20``), between :data:`MODEL_CAP_MIN` and
    AIM's :data:`MODEL_CAP_MAX`. Public: the declared domain only.

    A fit's time grows with its model's cells, MST's with its tree's: a cap in proportion to the tree keeps TreeAIM's
    fits in proportion to MST's. Under AIM's 80 MB, the batches' picks grew the generated 30- and 50-attribute
    tables' models at epsilon 3 to 13 to 19 MB through the triangulation's fill-in, and their fits took twice as long
    as under 4 MB, for the same two-way error (the figures: ``bench/results/mechanisms``).

    Example:
        >>> default_model_cap(Domain({"a": 2, "b": 3, "c": 4}))
        4.0
        >>> round(default_model_cap(Domain({"a": 1000, "b": 1000})), 2)
        15.29
    """
    cells = sum(domain.size(c) for c in largest_model(domain))
    return min(MODEL_CAP_MAX, max(MODEL_CAP_MIN, MODEL_CAP_TREES * 8.0 * cells / 2**20))


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
