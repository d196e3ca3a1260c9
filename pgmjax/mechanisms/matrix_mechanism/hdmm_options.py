"""HDMM's own options (:class:`HDMMOptions`), checked where they are made, before any data is read, and what its run
reports (:class:`HDMMInfo`).

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018; McKenna, Sheldon, Miklau, ICML 2019, Section 6 (equal weights,
bounded neighbours). The checks that need the data or the workload (a prebuilt strategy on the data's domain and
supporting the workload, OPT_M's attribute limit) stay with :func:`pgmjax.mechanisms.hdmm`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...checks import check_bool as _bool
from ...checks import check_count as _int
from ..options import check_choice as _choice
from ..own_options import OwnOptions
from ..run_info import RunInfo, published
from .planning import NOISES, WEIGHTS, check_strategy_kind
from .strategies import KronStrategy, MarginalsStrategy, UnionStrategy

__all__ = ["HDMMInfo", "HDMMOptions", "DEFAULT_MAX_TABLE_CELLS"]

#: Global least squares runs only when the full table over the workload's attributes has at most this many
#: cells (2^24 cells: LSMR keeps about six float64 tables, ~0.8 GiB).
DEFAULT_MAX_TABLE_CELLS = 2**24


@dataclasses.dataclass(frozen=True)
class HDMMOptions(OwnOptions):
    """HDMM's own options (:func:`pgmjax.mechanisms.hdmm` takes them by name), checked here: a bad one fails with
    its name before any data is read.

    Attributes:
        strategy: ``"opt+"`` (default; per-clique OPT_kron in an OPT_+ union), ``"identity"`` (each clique's
            marginal), ``"marginals"`` (OPT_M, at most 16 workload attributes), or a prebuilt
            :mod:`pgmjax.mechanisms.matrix_mechanism` ``KronStrategy`` / ``UnionStrategy`` / ``MarginalsStrategy``
            (used as given, e.g. from :func:`~pgmjax.mechanisms.matrix_mechanism.hdmm_strategy` once for many runs;
            its term weights are the relative row scalings, normalised away by the calibration).
        weights: ``"opt"`` (OPT_+ ``alpha_j ∝ e_j^(1/3)``) or ``"equal"`` (the ICML 2019 script), for the
            union strategies built here.
        bounded: replace-one neighbours (``N`` public; sensitivities doubled, L2 times ``sqrt 2``; the engine
            gets ``total = N``) instead of add/remove-one (``N`` private, estimated from the measurements).
            The ICML 2019 experiments ran bounded.
        noise: ``"laplace"`` (pure DP, the paper's) or ``"gaussian"`` (zCDP; needs ``delta``).
        restarts: L-BFGS restarts of the strategy optimisation.
        original: run the LLS arm.
        max_table_cells: run global least squares only when the full table over the workload's attributes
            has at most this many cells (0: never).
        synthetic: draw ``round(model.total)`` synthetic records from the engine's model.

    Example:
        >>> HDMMOptions(strategy="identity", restarts=2).restarts
        2
        >>> HDMMOptions(weights="uniform")
        Traceback (most recent call last):
        ...
        ValueError: hdmm: unknown weights 'uniform'; expected one of ('opt', 'equal')
    """

    mechanism = "hdmm"

    strategy: str | KronStrategy | UnionStrategy | MarginalsStrategy = "opt+"
    weights: str = "opt"
    bounded: bool = False
    noise: str = "laplace"
    restarts: int = 8
    original: bool = True
    max_table_cells: int = DEFAULT_MAX_TABLE_CELLS
    synthetic: bool = True

    def __post_init__(self):
        where = self.mechanism
        self.keep(noise=_choice(self.noise, "noise", NOISES, where))
        self.keep(bounded=_bool(self.bounded, "bounded", where))
        self.keep(weights=_choice(self.weights, "weights", WEIGHTS, where))
        self.keep(restarts=_int(self.restarts, "restarts", where, 1))
        self.keep(original=_bool(self.original, "original", where))
        self.keep(max_table_cells=_int(self.max_table_cells, "max_table_cells", where, 0))
        self.keep(synthetic=_bool(self.synthetic, "synthetic", where))
        self.keep(strategy=check_strategy_kind(self.strategy, where))


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class HDMMInfo(RunInfo):
    """What an HDMM run reports (``result.info``). The report of ``pgmjax run`` prints the published fields.

    Attributes:
        strategy: the strategy measured, a :mod:`pgmjax.mechanisms.matrix_mechanism` ``KronStrategy`` /
            ``UnionStrategy`` / ``MarginalsStrategy`` (private: an internal object; ``strategy_record`` describes it).
        strategy_info: :func:`~pgmjax.mechanisms.matrix_mechanism.hdmm_strategy`'s dict (``template``, ``weights``,
            ``term_errors``, ``loss``, ``seconds``), or ``{"template": "given"}`` for a prebuilt strategy.
        strategy_record: the strategy's cliques, weights and factor matrices, or OPT_M's theta (private: large
            arrays).
        noise: ``"laplace"`` or ``"gaussian"``.
        bounded: replace-one neighbours (``N`` public) rather than add/remove-one.
        epsilon: the run's epsilon.
        delta: its delta (0 with Laplace noise).
        rho: the zCDP budget (Gaussian noise; None with Laplace noise).
        sensitivity: the whole stack's, under the neighbouring relation (L1 for Laplace, L2 for Gaussian).
        sensitivity_exact: whether ``sensitivity`` is exact (every factor has equal column norms), not an upper bound.
        noise_scale: ``b`` (Laplace) or ``sigma`` (Gaussian) on every row of the stack.
        noise_std: the noise's standard deviation on every row.
        expected_error: the matrix mechanism's expected total squared error over the workload's rows.
        expected_error_per_query: ``expected_error / workload_rows`` (left out of the run report, which prints both).
        workload_rows: the number of the workload's rows.
        terms: the strategy's terms, one measurement (and one ledger entry) each.
        total: ``N`` when bounded, else the estimate from the measurements (None when none determines it).
        engine_iters: iterations of the engine.
        engine_method: the engine's method.
        global_least_squares: HDMM's ``A^+ y`` on the full table over the workload's attributes, a
            :class:`~pgmjax.mechanisms.original_estimates.CliqueTables`, or None when the table has more than
            ``max_table_cells`` cells (private: an internal object).
        global_least_squares_error: why global least squares did not run (None: it ran).
        global_table_cells: the cells of that full table.
        seconds: the seconds each stage took (``strategy``, ``measure``, ``lls``, ``pgm``, ``synthetic``, ``global``,
            ``total``).
    """

    strategy: Any
    strategy_info: dict = published()
    strategy_record: dict
    noise: str = published()
    bounded: bool = published()
    epsilon: float = published()
    delta: float = published()
    rho: float | None = published()
    sensitivity: float = published()
    sensitivity_exact: bool = published()
    noise_scale: float = published()
    noise_std: float = published()
    expected_error: float = published()
    expected_error_per_query: float
    workload_rows: int = published()
    terms: int = published()
    total: float | None = published()
    engine_iters: int = published()
    engine_method: str = published()
    global_least_squares: Any
    global_least_squares_error: str | None
    global_table_cells: int
    seconds: dict = published()
