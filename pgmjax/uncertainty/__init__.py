"""Calibrated intervals for any answer of a fitted graphical model.

* :func:`intervals`: a parametric bootstrap (re-noise, refit all replicates in one batched program, read
  the spread) or a linearisation (implicit differentiation) for marginals, factored queries and ratios;
* :func:`linearize`: the weights ``a = d answer / d y`` and the exact law of ``a^T e``
  (:class:`pgmjax.bayes.LinearNoise`, from :meth:`Linearization.law`);
* :func:`workload_intervals`: intervals for every query of a workload answered by a mechanism's model;
* :func:`choose_fit_method`: the refits' solver by default: the exact QP where it applies (L2 loss, MST's
  design), mirror descent otherwise.

The intervals cover the measurement noise only (see :mod:`pgmjax.uncertainty.intervals`).
"""

from .bootstrap import Replicates, refit, renoise, stacked_problem
from .intervals import Interval, choose_fit_method, intervals, workload_intervals
from .linear import Linearization, linearize, linearize_all, linearize_batch
from .targets import Ratio, conditional, estimable_attrs, resolve_targets

__all__ = [
    "Interval",
    "intervals",
    "workload_intervals",
    "choose_fit_method",
    "linearize",
    "Linearization",
    "linearize_all",
    "linearize_batch",
    "Ratio",
    "conditional",
    "renoise",
    "refit",
    "Replicates",
    "stacked_problem",
    "estimable_attrs",
    "resolve_targets",
]
