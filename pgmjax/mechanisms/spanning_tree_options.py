"""MST's own options (:class:`MSTOptions`), checked where they are made, and what its run reports (:class:`MSTInfo`).

A bad option fails with its name before any data is read. The checks that need the data (the constraints and the
public data against its domain, the default ``select_iters`` from ``engine_iters``) stay with the front-end
(:func:`pgmjax.mechanisms.mst`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..checks import check_bool, check_count
from ..queries.constraints import Constraint, constraint_tuple
from ..queries.public import PublicData
from .domain_compression import MERGED_VALUES
from .options import check_choice, check_synthetic
from .own_options import OwnOptions
from .run_info import CompressedRunInfo, published
from .public_selection import check_public_type
from .progress import check_progress

__all__ = ["MSTInfo", "MSTOptions"]


@dataclasses.dataclass(frozen=True)
class MSTOptions(OwnOptions):
    """MST's own options (:func:`pgmjax.mechanisms.mst` takes them by name), checked here.

    Attributes:
        select_iters: engine iterations of the one-way fit the selection reads (default: the reference code's 2500,
            or ``engine_iters`` when that is smaller).
        compress: apply the domain compression of step 2 (reference: always).
        merged_values: how a merged value is spread back over its original values: ``"uniform"`` (the reference
            code's) or ``"measured"`` (by their noisy one-way counts, shrunk towards even:
            :func:`~pgmjax.mechanisms.domain_compression.measured_spread`). Post-processing either way.
        synthetic: draw synthetic records.
        rows: how many (default ``round(model.total)``).
        synthetic_method: ``"low_variance"`` (systematic sampling: the records' clique counts match the model's
            closely, like the reference code's randomised rounding) or ``"exact"`` (i.i.d.;
            :func:`pgmjax.model.sampling.synthetic_data`).
        progress: True for a tqdm bar over the steps, or a callable receiving a dict per step (``stage``, ``step``,
            ``steps``, and ``edge`` for selection steps).
        constraints: :class:`pgmjax.Constraint` objects (public): both fits hold them, their attributes stay
            uncompressed, and no edge may take the model with their cliques over the size limit
            (:func:`~pgmjax.mechanisms.spanning_tree.select_tree`). One constraint alone is taken as a tuple of one.
        public: a :class:`pgmjax.queries.public.PublicData`: its marginals join both fits at its stated standard
            deviation, free (:func:`pgmjax.estimate`'s ``public=``); the ledger records each at no cost.

    Example:
        >>> MSTOptions(select_iters=50, compress=False).select_iters
        50
        >>> MSTOptions(synthetic_method="fast")
        Traceback (most recent call last):
        ...
        ValueError: mst: synthetic_method must be one of ('exact', 'low_variance'), got 'fast'
    """

    mechanism = "mst"

    select_iters: int | None = None
    compress: bool = True
    merged_values: str = "uniform"
    synthetic: bool = True
    rows: int | None = None
    synthetic_method: str = "low_variance"
    progress: bool | Callable[[dict], object] = False
    constraints: Sequence[Constraint] = ()
    public: PublicData | None = None

    def __post_init__(self):
        where = self.mechanism
        select_iters = None if self.select_iters is None else check_count(self.select_iters, "select_iters", where, 1)
        compress = check_bool(self.compress, "compress", where)
        merged_values = check_choice(self.merged_values, "merged_values", MERGED_VALUES, where)
        synthetic, rows, synthetic_method = check_synthetic(self.synthetic, self.rows, self.synthetic_method, where)
        check_progress(self.progress, where)
        constraints = constraint_tuple(self.constraints, where)  # their domain and the public data's: the front-end's
        check_public_type(self.public, where)
        self.keep(select_iters=select_iters, compress=compress, merged_values=merged_values, synthetic=synthetic, rows=rows,
                  synthetic_method=synthetic_method, constraints=constraints)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class MSTInfo(CompressedRunInfo):
    """What an MST run reports (``result.info``). The report of ``pgmjax run`` prints the published fields.

    Attributes:
        epsilon: the run's epsilon.
        delta: its delta.
        rho: the zCDP budget it spent (:func:`~pgmjax.mechanisms.spanning_tree.mst_budget`).
        edges: the selected pairs, in the order the selection drew them.
        compressed_domain, mapping, compressed_model: step 2's compression of rare values
            (:class:`~pgmjax.mechanisms.run_info.CompressedRunInfo`).
        total: the model's total (its estimate of the number of records).
        select_iters: engine iterations of the one-way fit the selection read.
        engine_iters: engine iterations of the final fit.
        fit_iterations: the iterations the final fit ran (private: its stopping point depends on the data).
        residual_rows: ``(2 * final loss, measured rows)``, the fit's squared residual against its measurements
            (private: computed from the noisy answers and the model; kept for the discrepancy stop's study).
        seconds: the seconds each stage took.
        public: the public marginals the fits took, over the compressed domain.
    """

    epsilon: float = published()
    delta: float = published()
    rho: float = published()
    edges: list = published()
    total: float = published()
    select_iters: int = published()
    engine_iters: int = published()
    fit_iterations: int = 0
    residual_rows: tuple = ()
    seconds: dict = published()
    public: list = published()
