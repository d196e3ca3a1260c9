"""RR+PGM: debiased marginals of a release as engine measurements, and one consistent model from them.

Wang, Ying & Zhang (arXiv 2014) answer every query from the release separately; their answers are
unbiased but mutually inconsistent (negative counts, marginals that disagree). Feeding the debiased
marginals ([WYZ] Section IV, :func:`pgmjax.rr.debiased_marginal`) to :func:`pgmjax.estimate` as
:class:`~pgmjax.Measurement` objects, with their standard deviations, gives one non-negative, consistent
graphical model (McKenna, Sheldon & Miklau, ICML 2019, Problem 1) -- post-processing, no privacy cost.

Caveats: every measurement comes from the same released records, so their errors are correlated (the
fit is consistent, not efficient); the errors are sums of independent per-record terms, close to
Gaussian for large ``n`` (the measurements are labelled ``noise="gaussian"``); the standard deviations
plug the clipped debiased counts in for the unknown true ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.domain import CliqueLike
from ..estimation.estimate import estimate
from ..model.graphical_model import GraphicalModel
from ..queries.measurement import Measurement
from .estimators import as_release, debiased_marginal
from .releases import Release

__all__ = ["measurements", "fit"]

#: A measurement's standard deviation is at least this (an almost noiseless release, epsilon -> inf).
MIN_STDDEV = 1e-6


def measurements(release: Release, cliques: Sequence[CliqueLike]) -> list[Measurement]:
    """One identity measurement per clique: the debiased marginal, with one standard deviation per cell.

    Args:
        release: a :class:`~pgmjax.rr.Release`.
        cliques: the marginals to debias (any; each costs one pass over the released records).

    Returns:
        A list of :class:`~pgmjax.Measurement` (``y = x^_C``, ``stddev = sqrt(var_C)`` per cell, at least
        :data:`MIN_STDDEV`), ready for :func:`pgmjax.estimate` with ``total=release.total``.

    Example:
        >>> rel = Release.of(pj.Dataset(np.array([[0, 1], [0, 0], [1, 0]]), {"b1": 2, "b2": 2}), np.log(3))
        >>> m, = measurements(rel, [("b1", "b2")])
        >>> m.y.round(6).tolist()
        [1.5, 1.5, 1.5, -1.5]
    """
    release = as_release(release)
    cliques = [release.domain.check_clique(c, what="measurements: clique") for c in cliques]
    if not cliques:
        raise ValueError("measurements: no cliques given")
    out = []
    for c in dict.fromkeys(cliques):
        xhat, var = debiased_marginal(release, c)
        out.append(Measurement(c, xhat.reshape(-1), np.maximum(np.sqrt(var.reshape(-1)), MIN_STDDEV), noise="gaussian"))
    return out


def fit(release: Release, cliques: Sequence[CliqueLike], **estimate_options) -> GraphicalModel:
    """RR+PGM: :func:`pgmjax.estimate` on :func:`measurements`, with the public total ``n``.

    Args:
        release: a :class:`~pgmjax.rr.Release`.
        cliques: the marginals to debias and fit.
        **estimate_options: passed to :func:`pgmjax.estimate` (``iters``, ``method``, ``dtype``, ...; not
            ``total``, which is the release's record count).

    Returns:
        A :class:`~pgmjax.GraphicalModel`.

    Example:
        >>> rel = Release.of(pj.Dataset(np.array([[0, 1], [0, 0], [1, 0]]), {"b1": 2, "b2": 2}), np.log(3))
        >>> model = fit(rel, [("b1",), ("b2",)], iters=50)
        >>> model.total, model.marginal("b1").round(2).tolist()   # debiased b1 marginal: [3, 0]
        (3.0, [3.0, 0.0])
    """
    if "total" in estimate_options:
        raise ValueError("fit: total is the release's number of records (public); do not pass it")
    release = as_release(release)
    return estimate(release.domain, measurements(release, cliques), total=release.total, **estimate_options)
