"""MLDP+PGM's arm: the noisy training answers as linear measurements, one graphical model fitted to them.

The MLDP release (Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data
Publishing to Model Publishing", IEEE BigData 2017, Algorithm 1) with the regression replaced by
graphical-model estimation (McKenna, Sheldon & Miklau, "Graphical-model based estimation and
inference for differential privacy", ICML 2019, Section 4).
"""

from __future__ import annotations

from ...data.domain import Domain
from ...estimation.estimate import estimate
from ...checks import check_count as _int
from ...checks import check_positive as _positive
from ...queries.measurement import Measurement, estimate_total
from ..options import check_estimate_kwargs
from .query_set import QuerySet, as_queries, check_domain
from .regression import check_answers, fit_regression

#: The :func:`pgmjax.estimate` arguments the +PGM arm sets itself (refused in its ``options``).
RESERVED_OPTIONS = ("iters", "total", "warm_start", "measurements", "domain", "report")


def pgm_measurements(queries: QuerySet, answers, stddev: float) -> list[Measurement]:
    """The training answers as linear measurements, one per clique (Zhu et al., IEEE BigData 2017): ``Measurement(C, y_C, stddev, query=Q_C)``."""
    where = "pgm_measurements"
    queries = as_queries(queries, "queries", where)
    y = check_answers(answers, len(queries), where)
    stddev = _positive(stddev, "stddev", where)
    return [Measurement(c, y[pos], stddev, query=m) for c, (m, pos) in queries.by_clique().items()]


def fit_pgm(
    domain: Domain,
    queries: QuerySet,
    answers,
    stddev: float,
    *,
    total: float | None = None,
    iters: int = 1000,
    report: bool = False,
    **options,
):
    """The +PGM arm: one graphical model fitted to the training answers (Zhu et al., IEEE BigData 2017).

    The answers are grouped by clique into measurements ``(C, y_C, stddev, Q_C)`` and one
    :func:`pgmjax.estimate` fits a model to all of them; it answers any query, on any clique of the
    domain, from ``<q, mu_hat_C>``. The engine adds non-negativity and global consistency to the
    regression's least squares.

    Args:
        domain: the model's domain (must contain the queries' attributes).
        queries: the training :class:`QuerySet`.
        answers: their (noisy) answers.
        stddev: the noise standard deviation of every answer (``sqrt(2) S_Fx / eps`` for Laplace).
        total: the number of records; None estimates it from the measurements
            (:func:`pgmjax.estimate_total`) and, when the training queries do not determine it, takes
            the largest per-clique sum of the least-squares (linear regression) weights.
        iters: engine iterations.
        report: return the fit as a :class:`~pgmjax.Fit` (the model and its report) instead of the model.
        **options: more keyword arguments for :func:`pgmjax.estimate` (``method``, ``loss``,
            ``dtype``, ...).

    Returns:
        ``(model, measurements, total_source)``: the :class:`~pgmjax.GraphicalModel` (a :class:`~pgmjax.Fit`
        with ``report=True``), the
        measurements, and how the total was set (``"given"``, ``"estimate_total"`` or
        ``"least_squares"``).
    """
    where = "fit_pgm"
    if not isinstance(domain, Domain):
        raise TypeError(f"{where}: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    queries = as_queries(queries, "queries", where)
    check_domain(queries, domain, where)
    iters = _int(iters, "iters", where, 0)
    check_estimate_kwargs(options, RESERVED_OPTIONS, where, argument="options")
    measurements = pgm_measurements(queries, answers, stddev)
    if total is not None:
        total, source = _positive(total, "total", where), "given"
    else:
        try:
            total, source = estimate_total(measurements)[0], "estimate_total"
        except ValueError:
            total = fit_regression(queries, answers).total
            source = "least_squares"
    model = estimate(domain, measurements, iters=iters, total=total, report=report, **options)
    return model, measurements, source
