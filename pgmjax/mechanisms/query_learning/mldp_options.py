"""MLDP's own options (:class:`MLDPOptions`), checked where they are made, before any data is read, and what its run
reports (:class:`MLDPInfo`).

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model Publishing",
IEEE BigData 2017, Algorithm 1 (the training queries, their number ``m``, the regression model). The checks that
need the data (the queries' attributes against the data's domain, the training queries built from the workload)
stay with :func:`pgmjax.mechanisms.mldp`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...checks import check_bool as _bool
from ...checks import check_count as _int
from ..own_options import OwnOptions
from ..run_info import RunInfo, published
from .query_set import QuerySet, as_queries
from .regression import regression_options

__all__ = ["MLDPInfo", "MLDPOptions"]


@dataclasses.dataclass(frozen=True)
class MLDPOptions(OwnOptions):
    """MLDP's own options (:func:`pgmjax.mechanisms.mldp` takes them by name), checked here: a bad one fails with
    its name before any data is read.

    Attributes:
        training: the training queries (a :class:`QuerySet`), or (with ``size``) the published queries to choose
            them from; None for every cell of the workload's marginals (:func:`workload_training`).
        fresh: queries to answer besides the published ones (never measured).
        size: ``m``; None measures every query of ``training``.
        bounded: replace-one neighbours (``N`` public, sensitivity doubled) instead of add/remove-one.
        model: the regression model, ``"linear"`` (default) or ``"gaussian"``.
        ridge: the regression's ridge penalty (see :func:`fit_regression`).
        width: the Gaussian basis' width (``model="gaussian"`` only; see :func:`fit_regression`).
        centers: the Gaussian basis' number of centers (``model="gaussian"`` only; see :func:`fit_regression`).
        original: run the regression arm.
        synthetic: draw ``round(model.total)`` synthetic records from the +PGM model.

    Example:
        >>> MLDPOptions(model="gaussian", width=2.0).width
        2.0
        >>> MLDPOptions(width=2.0)
        Traceback (most recent call last):
        ...
        ValueError: mldp: width= and centers= belong to model='gaussian'
    """

    mechanism = "mldp"

    training: QuerySet | None = None
    fresh: QuerySet | None = None
    size: int | None = None
    bounded: bool = False
    model: str = "linear"
    ridge: float = 0.0
    width: float | None = None
    centers: int | None = None
    original: bool = True
    synthetic: bool = False

    def __post_init__(self):
        where = self.mechanism
        if self.training is not None:
            as_queries(self.training, "training", where)
        if self.fresh is not None:
            as_queries(self.fresh, "fresh", where)
        if self.size is not None:
            self.keep(size=_int(self.size, "size", where))
            if self.training is not None and self.size > len(self.training):
                raise ValueError(f"{where}: size={self.size} exceeds the {len(self.training)} queries of training")
        self.keep(bounded=_bool(self.bounded, "bounded", where))
        model, ridge, width, centers = regression_options(self.model, self.ridge, self.width, self.centers, where)
        self.keep(model=model, ridge=ridge, width=width, centers=centers)
        self.keep(original=_bool(self.original, "original", where), synthetic=_bool(self.synthetic, "synthetic", where))


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class MLDPInfo(RunInfo):
    """What an MLDP run reports (``result.info``). The report of ``pgmjax run`` prints the published fields (the
    settings, the noise and the totals); the queries, the answers and the regression's parameters stay out of it.

    Attributes:
        training: the training queries measured (a :class:`QuerySet`; with ``size``, a selection from
            ``published``).
        training_index: their positions in ``published`` when ``size`` selected them, else None.
        published: the queries answered as published (``training`` before any selection).
        size: ``m``, the number of training queries measured.
        bounded: replace-one neighbours (the total public) instead of add/remove-one.
        epsilon: the run's epsilon, all of it on the one Laplace release.
        sensitivity: ``S_Fx``, the training set's sensitivity (doubled when ``bounded``).
        sensitivity_exact: False only when ``sensitivity`` is :func:`training_sensitivity`'s upper bound.
        scale: the Laplace scale ``b = S_Fx / epsilon``.
        stddev: the noise's standard deviation, ``sqrt(2) b``.
        noisy_answers: the noisy training answers, the one release.
        coverage: the share of the training queries' cliques' cells that some training query touches.
        model: the regression model, ``"linear"`` or ``"gaussian"``.
        weights: the regression's parameters per clique (None when ``original=False``).
        total: the +PGM model's total (its estimate of the number of records).
        total_source: how that total was found (``"bounded: N"`` when public).
        answers: both arms' answers, ``{"published": {"pgm", "original"}, "fresh": {...}}`` (``"original"`` None and
            ``"original_error"`` set where the regression cannot answer).
        seconds: the seconds each stage took (``"all"``: the whole run).
    """

    training: QuerySet
    training_index: np.ndarray | None
    published: QuerySet
    size: int = published()
    bounded: bool = published()
    epsilon: float = published()
    sensitivity: float = published()
    sensitivity_exact: bool = published()
    scale: float = published()
    stddev: float = published()
    noisy_answers: np.ndarray
    coverage: float = published()
    model: str
    weights: dict | None
    total: float = published()
    total_source: str = published()
    answers: dict
    seconds: dict = published()
