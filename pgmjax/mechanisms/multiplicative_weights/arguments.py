"""MWEM's own options (:class:`MWEMOptions`, checked where made), what its run reports (:class:`MWEMInfo`) and
argument checks; those other front-ends share (an option among choices, a workload on the data's domain) live in
:mod:`pgmjax.mechanisms.options` and are re-exported here.

The workload is what MWEM selects from (Hardt, Ligett & McSherry, "A Simple and Practical Algorithm
for Differentially Private Data Release", NeurIPS 2012, Algorithm 1: the query class ``Q``).
Everything is checked before any private value is read.
"""

from __future__ import annotations

import dataclasses
import os

from ...checks import check_bool, check_count
from ...checks import check_real as _real
from ...queries.public import PublicData
from ..checkpoint import Checkpoint
from ..options import check_choice, check_workload
from ..own_options import OwnOptions
from ..run_info import ResumableRunInfo, published
from .original_arm import DEFAULT_MAX_TABLE_CELLS

__all__ = ["MWEMInfo", "MWEMOptions", "NOISES", "SELECTIONS", "check_alpha", "check_choice", "check_workload"]

#: MWEM's noises: Laplace (pure DP) and Gaussian (zCDP).
NOISES = ("laplace", "gaussian")
#: MWEM's selection modes.
SELECTIONS = ("marginal", "query")


def check_alpha(alpha, where: str) -> float:
    """``alpha`` (the measurement's share of each round) as a float in ``(0, 1)``, else a ValueError naming ``where``.

    Example:
        >>> check_alpha(0.9, "mwem")
        0.9
    """
    a = _real(alpha, "alpha", where)
    if not 0 < a < 1:
        raise ValueError(f"{where}: alpha (the measurement's share of each round) must be in (0, 1), got {alpha!r}")
    return a


@dataclasses.dataclass(frozen=True)
class MWEMOptions(OwnOptions):
    """MWEM's own options (:func:`pgmjax.mechanisms.mwem` takes them by name), checked here: a bad one fails with
    its name before any data is read.

    Attributes:
        rounds: ``T``; None (the default) for the number of attributes.
        noise: ``"laplace"`` (pure DP, the paper's MWEM) or ``"gaussian"`` (zCDP, private-pgm's default).
        bounded: replace-one neighbours (``N`` public; the engine gets ``total = N``) instead of add/remove-one
            (``N`` private, estimated).
        alpha: the share of each round's budget spent on the measurement; None for 0.9 with marginal selection and
            0.5 with query selection (the 2019 script's ``eps/(2T)`` each).
        selection: ``"marginal"`` or ``"query"`` (needs ``bounded=True``: one counting query does not reveal the
            total, and the paper's MWEM takes ``N`` as public).
        mw_iters: multiplicative-weights passes per round (over all measurements so far).
        original: run the original (MW) arm.
        max_table_cells: the MW arm runs only if its factored table has at most this many cells (2^28: 2 GiB).
        synthetic: draw ``round(model.total)`` synthetic records from the +PGM model.
        checkpoint: a folder (or a :class:`~pgmjax.mechanisms.checkpoint.Checkpoint`) keeping the +PGM arm's
            rounds, resumed as AIM's (:func:`pgmjax.mechanisms.aim`). Marginal selection, exact oracle.
        public: a :class:`pgmjax.queries.public.PublicData`: its marginals join every +PGM fit, free
            (:func:`pgmjax.estimate`'s ``public=``; with ``bounded`` round 1 scores against them scaled to ``N``);
            the ledger records each at no cost; the MW arm replays the private measurements only. Not with
            ``checkpoint``.

    Example:
        >>> MWEMOptions(rounds=5, noise="gaussian").rounds
        5
        >>> MWEMOptions(selection="query")
        Traceback (most recent call last):
        ...
        ValueError: mwem: selection='query' measures single counting queries, which do not determine the number of records; it needs the public total of the replace-one convention (bounded=True), as in the paper's MWEM
    """

    mechanism = "mwem"

    rounds: int | None = None
    noise: str = "laplace"
    bounded: bool = False
    alpha: float | None = None
    selection: str = "marginal"
    mw_iters: int = 1000
    original: bool = True
    max_table_cells: int = DEFAULT_MAX_TABLE_CELLS
    synthetic: bool = True
    checkpoint: Checkpoint | str | os.PathLike | None = None
    public: PublicData | None = None

    def __post_init__(self):
        where = self.mechanism
        check_choice(self.noise, "noise", NOISES, where)
        check_choice(self.selection, "selection", SELECTIONS, where)
        self.keep(
            bounded=check_bool(self.bounded, "bounded", where),
            rounds=None if self.rounds is None else check_count(self.rounds, "rounds", where, 1),
            alpha=None if self.alpha is None else check_alpha(self.alpha, where),
            mw_iters=check_count(self.mw_iters, "mw_iters", where, 1),
            original=check_bool(self.original, "original", where),
            max_table_cells=check_count(self.max_table_cells, "max_table_cells", where, 1),
            synthetic=check_bool(self.synthetic, "synthetic", where),
            checkpoint=Checkpoint.of(self.checkpoint, where),
        )
        if self.selection == "query" and not self.bounded:
            raise ValueError(
                f"{where}: selection='query' measures single counting queries, which do not determine the number of "
                "records; it needs the public total of the replace-one convention (bounded=True), as in the paper's MWEM"
            )


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class MWEMInfo(ResumableRunInfo):
    """What an MWEM run reports (``result.info``). The report of ``pgmjax run`` prints the published fields.

    Attributes:
        resumed_from: the checkpoint's round the run resumed after, or None
            (:class:`~pgmjax.mechanisms.run_info.ResumableRunInfo`).
        selection: the selection mode, ``"marginal"`` or ``"query"``.
        noise: the measurements' noise, ``"laplace"`` or ``"gaussian"``.
        bounded: replace-one neighbours (``N`` public).
        rounds: ``T``, the number of rounds.
        alpha: the measurement's share of each round's budget.
        epsilon: the run's epsilon.
        delta: its delta with Gaussian noise; None with Laplace noise (pure DP).
        em_sensitivity: the sensitivity of the exponential mechanism's quality.
        max_model_mb: the final model-size cap in MB (None: no cap).
        log: per round, a dict: ``round``, ``clique``, ``row`` (None in marginal mode), ``cap_mb``, ``model_mb``,
            ``candidates``, ``excluded``, ``noise_std``.
        selected: the selections in round order: a clique, or ``(clique, row)`` in query mode.
        total: the +PGM model's total (its estimate of the number of records, or ``N`` when bounded).
        mw_components: the multiplicative-weights arm's factored table, ``[(component, cells)]`` (private: an
            internal layout).
        mw_table_cells: the cells of that table in all.
        seconds: the seconds each stage took (``pgm``, ``engine``, ``mw``).
        public: the cliques the final fit took from the public data.
    """

    selection: str = published()
    noise: str = published()
    bounded: bool = published()
    rounds: int = published()
    alpha: float = published()
    epsilon: float = published()
    delta: float | None = published()
    em_sensitivity: float = published()
    max_model_mb: float | None = published()
    log: list = published()
    selected: list = published()
    total: float = published()
    mw_components: list
    mw_table_cells: int
    seconds: dict = published()
    public: list = published()
