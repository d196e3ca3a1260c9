"""PrivBayes's own options (:class:`PrivBayesOptions`), checked where made, and what its run reports
(:class:`PrivBayesInfo`).

A bad option fails with its name before any data is read. The checks that need the data (``score="F"`` on binary
attributes, an attribute larger than ``max_cells``) stay with the front-end (:func:`pgmjax.mechanisms.privbayes`).

Zhang, Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via Bayesian Networks", ACM TODS
42(4) 2017: ``beta`` (Algorithm 1's budget split), ``theta`` (Section 4.4's usefulness), the scores ``I``, ``R``,
``F`` (Section 4).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...checks import check_bool, check_count, check_positive
from ..own_options import OwnOptions
from ..run_info import RunInfo, published
from .scores import MI_UNBOUNDED, SCORES

__all__ = ["PrivBayesInfo", "PrivBayesOptions"]


def _fraction(value, name: str, where: str) -> float:
    """``value`` as a float in ``(0, 1)``, else a TypeError (not a number) or ValueError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: {name} must be a number, got {value!r}")
    x = float(value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{where}: {name} must be in (0, 1), got {value!r}")
    return x


@dataclasses.dataclass(frozen=True)
class PrivBayesOptions(OwnOptions):
    """PrivBayes's own options (:func:`pgmjax.mechanisms.privbayes` takes them by name), checked here: a bad one
    fails with its name before any data is read.

    Attributes:
        beta: share of the budget for the structure, in (0, 1).
        theta: usefulness ``theta > 0`` (ignored when ``degree`` is given).
        score: ``"R"`` (default), ``"I"`` (mutual information; needs ``bounded=True``) or ``"F"``
            (binary attributes only).
        degree: None for the tau rule, or a fixed number ``k >= 0`` of parents.
        bounded: False for add/remove-one neighbours (default), True for replace-one (``N`` public,
            the paper's convention).
        count_fraction: share of the budget for the record count (step 1), in (0, 1).
        max_candidates: the most candidates one structure step may score; beyond it the step's cap
            is halved (data-independent).
        max_cells: the largest table ``n_X prod n_Pi`` any candidate may have.
        keep_scores: put every candidate's exact quality in ``info.steps``. These are NOT
            private: for analysis and tests only, strip them before releasing ``info``.

    Example:
        >>> PrivBayesOptions(beta=0.5, degree=2).beta
        0.5
        >>> PrivBayesOptions(beta=1.0)
        Traceback (most recent call last):
        ...
        ValueError: privbayes: beta must be in (0, 1), got 1.0
    """

    mechanism = "privbayes"

    beta: float = 0.3
    theta: float = 4.0
    score: str = "R"
    degree: int | None = None
    bounded: bool = False
    count_fraction: float = 0.01
    max_candidates: int = 10_000
    max_cells: int = 10**7
    keep_scores: bool = False

    def __post_init__(self):
        where = self.mechanism
        self.keep(
            beta=_fraction(self.beta, "beta", where),
            theta=check_positive(self.theta, "theta", where),
            count_fraction=_fraction(self.count_fraction, "count_fraction", where),
            bounded=check_bool(self.bounded, "bounded", where),
        )
        if self.score not in SCORES:
            raise ValueError(f"{where}: score must be one of {SCORES}, got {self.score!r}")
        if self.score == "I" and not self.bounded:
            raise ValueError(f"{where}: {MI_UNBOUNDED}")
        self.keep(
            degree=None if self.degree is None else check_count(self.degree, "degree", where, 0),
            max_candidates=check_count(self.max_candidates, "max_candidates", where, 1),
            max_cells=check_count(self.max_cells, "max_cells", where, 1),
            keep_scores=check_bool(self.keep_scores, "keep_scores", where),
        )


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class PrivBayesInfo(RunInfo):
    """What a PrivBayes run reports (``result.info``). The report of ``pgmjax run`` prints the published fields.

    Attributes:
        network: the Bayesian network, ``[(child, parents)]`` in placement order.
        order: the attributes in placement order.
        steps: per structure selection, a dict: candidates, cap, sensitivity, epsilon; with ``keep_scores`` every
            candidate's exact quality too (private: those are computed from the data without noise).
        score: the score, ``"R"``, ``"I"`` or ``"F"``.
        quality: the exponential mechanism's quality: the score, or ``"N*score"`` under add/remove.
        bounded: replace-one neighbours (``N`` public).
        beta: the structure's share of the budget.
        theta: the usefulness ``theta``.
        degree: the fixed number of parents, or None for the tau rule.
        epsilon: the run's epsilon.
        epsilon_count: spent on the record count (0 when none was taken).
        epsilon_structure: spent on the network.
        epsilon_step: spent on each structure selection.
        epsilon_tables: spent on the noisy tables.
        tau: the usefulness rule's largest table (None with a fixed degree or a single attribute).
        cap: the largest table GreedyBayes could choose.
        max_model_cells: the largest junction tree ``max_model_mb`` allows, in cells.
        model_cells: the cells of the network's junction tree.
        cliques: the measured cliques (the maximal ones of the network).
        tables: the number of noisy tables measured.
        laplace_scale: the Laplace scale of each noisy table.
        noisy_count: the noisy record count (None when none was taken).
        total: the number of records both arms stand for (``N``, or its estimate under add/remove).
        conditionals: the original arm's noisy conditional tables (arrays, axes ``(*parents, child)``), in
            network order.
        engine_iters: iterations of the engine.
    """

    network: list = published()
    order: list = published()
    steps: list
    score: str = published()
    quality: str
    bounded: bool = published()
    beta: float = published()
    theta: float = published()
    degree: int | None = published()
    epsilon: float = published()
    epsilon_count: float = published()
    epsilon_structure: float = published()
    epsilon_step: float = published()
    epsilon_tables: float = published()
    tau: float | None
    cap: int
    max_model_cells: int
    model_cells: int
    cliques: list = published()
    tables: int
    laplace_scale: float = published()
    noisy_count: float | None = published()
    total: float = published()
    conditionals: list
    engine_iters: int = published()
