"""HDMM's own options (:class:`HDMMOptions`), checked where they are made, before any data is read.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018; McKenna, Sheldon, Miklau, ICML 2019, Section 6 (equal weights,
bounded neighbours). The checks that need the data or the workload (a prebuilt strategy on the data's domain and
supporting the workload, OPT_M's attribute limit) stay with :func:`pgmjax.mechanisms.hdmm`.
"""

from __future__ import annotations

import dataclasses

from ...checks import check_bool as _bool
from ...checks import check_count as _int
from ..options import check_choice as _choice
from ..own_options import OwnOptions
from .planning import NOISES, WEIGHTS, check_strategy_kind
from .strategies import KronStrategy, MarginalsStrategy, UnionStrategy

__all__ = ["HDMMOptions", "DEFAULT_MAX_TABLE_CELLS"]

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
