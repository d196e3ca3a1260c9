"""TreeAIM's own options (:class:`TreeAIMOptions`), checked where made, and what its run reports
(:class:`TreeAIMInfo`).

A bad option fails with its name before any data is read. The checks that need the data (the constraints and the
public data against the domain) and the default that needs a common argument (``select_iters``) stay with
:func:`pgmjax.mechanisms.tree_aim`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..checks import check_bool, check_count, check_positive
from ..queries.constraints import Constraint
from ..queries.public import PublicData
from .domain_compression import MERGED_VALUES, MERGES
from .options import check_choice, check_synthetic
from .own_options import OwnOptions
from .progress import check_progress
from .run_info import CompressedRunInfo, published

__all__ = ["BATCHES", "TreeAIMInfo", "TreeAIMOptions"]

#: The fewest batches (refits before a selection) where none are given
#: (:func:`~pgmjax.mechanisms.tree_aim_shares.default_batches`), and the number where only ``picks`` are given.
BATCHES = 2


@dataclasses.dataclass(frozen=True)
class TreeAIMOptions(OwnOptions):
    """TreeAIM's own options (:func:`pgmjax.mechanisms.tree_aim` takes them by name), checked here: a bad one fails
    with its name before any data is read.

    Attributes:
        batches: how many batches (refits before a selection); default
            :func:`~pgmjax.mechanisms.tree_aim_shares.default_batches` (2 to 8, from how many marginals the batches
            measure and the attributes), or 2 where ``picks`` are given.
        picks: marginals drawn per batch (default: :func:`~pgmjax.mechanisms.tree_aim_shares.default_picks`, from the
            released record count and the candidates' sizes: ``d`` to ``4 d`` in all).
        one_way_share: the share of the budget that measures the one-way marginals, from 0.2 to 1/3 (default:
            :func:`~pgmjax.mechanisms.tree_aim_shares.one_way_share_for`, from the declared domain).
        tree_share: the share of the budget that measures the tree's pairs, from 0.15 to 0.35 (default:
            :func:`~pgmjax.mechanisms.tree_aim_shares.tree_share_for`, from the released record count and the pairs'
            sizes).
        round_iters: the most iterations of each batch's fit (warm-started; it stops once converged:
            ``BATCH_TOL`` of :mod:`pgmjax.mechanisms.tree_adaptive`).
        select_iters: iterations of the one-way fit the tree's selection reads (MST's 2500; at most
            ``engine_iters`` by default).
        compress: MST's domain compression.
        merge: how the compression merges an attribute's rare values: ``"runs"`` (consecutive rare values into groups
            whose noisy count reaches three noise stds, in the domain's order; the rest into one value) or ``"one"``
            (all into one value, MST's): :func:`~pgmjax.mechanisms.domain_compression.compress_domain`.
        tree_penalty: lower each pair's score in the tree's selection by the noise its measurement will add (AIM's
            penalty, ``sqrt(2/pi) sigma n``): the tree then joins components by pairs it can measure well. It helps
            tables of many weakly tied wide columns (Adult's) and hurts tables whose strongest ties lie in wide
            pairs (the measurements: ``bench/results/mechanisms``); off by default.
        merged_values: how a merged value is spread back over its original values: ``"measured"`` (by their noisy
            one-way counts, shrunk towards even: :func:`~pgmjax.mechanisms.domain_compression.measured_spread`) or
            ``"uniform"`` (MST's reference code). Post-processing either way.
        synthetic: draw synthetic records, as in :func:`pgmjax.mechanisms.mst`.
        rows: how many (default ``round(model.total)``).
        synthetic_method: ``"low_variance"`` or ``"exact"``, as in :func:`pgmjax.mechanisms.mst`.
        progress: True for a tqdm bar over the steps, or a callable receiving each step's dict, as in
            :func:`pgmjax.mechanisms.mst`.
        constraints: :class:`pgmjax.Constraint` objects (public), held by every fit; their attributes stay uncompressed.
        public: a :class:`pgmjax.queries.public.PublicData`: its marginals join every fit, free.

    Example:
        >>> TreeAIMOptions(batches=3, picks=4).picks
        4
        >>> TreeAIMOptions(compress=1)
        Traceback (most recent call last):
        ...
        TypeError: tree_aim: compress must be True or False, got 1
    """

    mechanism = "tree_aim"

    batches: int | None = None
    picks: int | None = None
    one_way_share: float | None = None
    tree_share: float | None = None
    round_iters: int = 1000
    select_iters: int | None = None
    compress: bool = True
    merge: str = "runs"
    tree_penalty: bool = False
    merged_values: str = "measured"
    synthetic: bool = True
    rows: int | None = None
    synthetic_method: str = "low_variance"
    progress: bool | Callable[[dict], object] = False
    constraints: Sequence[Constraint] = ()
    public: PublicData | None = None

    def __post_init__(self):
        where = self.mechanism
        round_iters = check_count(self.round_iters, "round_iters", where, 1)
        select_iters = None if self.select_iters is None else check_count(self.select_iters, "select_iters", where, 1)
        # named as tree_aim_budget names them (it takes batches= and picks= too), as before
        batches = None if self.batches is None else check_count(self.batches, "batches", "tree_aim_budget", 1)
        picks = None if self.picks is None else check_count(self.picks, "picks", "tree_aim_budget", 1)
        share = None if self.tree_share is None else check_positive(self.tree_share, "tree_share", where)
        one_way = None if self.one_way_share is None else check_positive(self.one_way_share, "one_way_share", where)
        compress = check_bool(self.compress, "compress", where)
        merge = check_choice(self.merge, "merge", MERGES, where)
        tree_penalty = check_bool(self.tree_penalty, "tree_penalty", where)
        merged_values = check_choice(self.merged_values, "merged_values", MERGED_VALUES, where)
        synthetic, rows, synthetic_method = check_synthetic(self.synthetic, self.rows, self.synthetic_method, where)
        self.keep(batches=batches, picks=picks, one_way_share=one_way, tree_share=share, round_iters=round_iters, select_iters=select_iters, compress=compress,
                  merge=merge, tree_penalty=tree_penalty, merged_values=merged_values, synthetic=synthetic, rows=rows, synthetic_method=synthetic_method,
                  progress=check_progress(self.progress, where))


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class TreeAIMInfo(CompressedRunInfo):
    """What a TreeAIM run reports (``result.info``). The report of ``pgmjax run`` prints the published fields.

    Attributes:
        epsilon: the run's epsilon.
        delta: its delta.
        rho: the zCDP budget it spent.
        budget: the budget split and noise scales (:func:`~pgmjax.mechanisms.tree_adaptive.tree_aim_budget`'s dict,
            with the picks the batches drew).
        edges: the tree's pairs, in the order the selection drew them (over the compressed domain).
        selected: the batches' picks, in order.
        log: per batch, a dict: ``batch`` (from 1), ``picked`` (its cliques), ``model_mb`` (the size of the model
            its selection read).
        compressed_domain, mapping, compressed_model: MST's compression of rare values
            (:class:`~pgmjax.mechanisms.run_info.CompressedRunInfo`).
        total: the model's total (its estimate of the number of records).
        model_mb: the released model's size in MB (over the original domain).
        engine_iters: iterations of the final fit.
        seconds: the seconds each stage took.
        public: the public marginals the final fit took, over the compressed domain.
    """

    epsilon: float = published()
    delta: float = published()
    rho: float = published()
    budget: dict = published()
    edges: list = published()
    selected: list = published()
    log: list = published()
    total: float = published()
    model_mb: float = published()
    engine_iters: int = published()
    seconds: dict = published()
    public: list = published()
