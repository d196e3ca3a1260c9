"""MLDP's own options (:class:`MLDPOptions`), checked where they are made, before any data is read.

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model Publishing",
IEEE BigData 2017, Algorithm 1 (the training queries, their number ``m``, the regression model). The checks that
need the data (the queries' attributes against the data's domain, the training queries built from the workload)
stay with :func:`pgmjax.mechanisms.mldp`.
"""

from __future__ import annotations

import dataclasses

from ...checks import check_bool as _bool
from ...checks import check_count as _int
from ..own_options import OwnOptions
from .query_set import QuerySet, as_queries
from .regression import regression_options

__all__ = ["MLDPOptions"]


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
