"""Confidence intervals and probabilities of claims from the law of the BLUE's error.

Xiao & Xiong, "Bayesian Inference under Differential Privacy", sections 4-5.2 (eq. 19-23, Algorithm 3):
``theta_hat = theta + E`` with ``E`` the weighted sum of the rows' noise (:class:`LinearNoise`), whose law
does not depend on the data. The paper calls ``f_E(theta_hat - theta)`` the posterior of ``theta`` under a
flat prior and its intervals credible intervals; they are exact frequentist confidence intervals for the
pivot ``theta_hat - theta`` (coverage ``level`` over noise draws, for every ``x``, as long as ``A`` does
not depend on the noise). It is not the Bayesian posterior given all of ``y``: with Laplace noise
``theta_hat`` is not sufficient. ``E`` is symmetric and unimodal, so the narrowest interval is
``theta_hat +- c`` with ``P(|E| <= c) = level``; the continuous version has none of Algorithm 3's half-bin
under-coverage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .blue import BLUEResult, blue
from .errors import LinearNoise

__all__ = ["Interval", "Posterior", "posterior", "confidence_interval", "credible_interval", "claim_probability"]


@dataclass(frozen=True, eq=False)
class Interval:
    """An answer with its interval ``[lo, hi]`` at nominal coverage ``level``: pgmjax's one interval type.

    :mod:`pgmjax.bayes` returns scalar exact intervals ``value +- half_width`` of a BLUE (Xiao & Xiong,
    "Bayesian Inference under Differential Privacy", section 5.2); :mod:`pgmjax.uncertainty` returns one per
    target with array fields of the target's shape (one entry per cell), from the bootstrap or the
    linearisation of a fitted model. Both are this class, so code that reads intervals reads either.

    Attributes:
        value: the answer (a float, or an array of the target's shape).
        lo, hi: the interval's ends (clipped to the feasible range when asked).
        level: nominal coverage, in ``(0, 1)``.
        half_width: ``c`` of a symmetric interval ``value +- c`` before clipping; None when the interval is
            not symmetric (the bootstrap's).
        se: standard error (bayes: ``sqrt(Var E)``; bootstrap: sd of the refitted answers; linear:
            first-order sd); None when not computed.
        bias: bootstrap mean minus the answer (0 for the exact and linear intervals); the basic bootstrap
            interval already corrects for it.
        estimable: True when the estimand is the true answer (always for :mod:`pgmjax.bayes`, whose
            intervals exist only for estimable queries); False: for :mod:`pgmjax.uncertainty`, the estimand
            is the answer of the model fitted to noiseless measurements.
        method: ``"exact"`` (the law of the BLUE's error), ``"bootstrap"`` or ``"linear"``.
        diagnostics: method details (see :func:`pgmjax.uncertainty.intervals`).

    The first five fields also read as the tuple ``(value, lo, hi, level, half_width)`` (unpacking,
    indexing, ``len``, equality): the form :mod:`pgmjax.bayes` returned when its interval was a NamedTuple.

    Example:
        >>> iv = Interval(10.8, 8.18, 13.42, 0.95, 2.62)
        >>> value, lo, hi, level, half_width = iv
        >>> iv[1:3], iv.interval, bool(iv.covers(12.0))
        ((8.18, 13.42), (8.18, 13.42), True)
    """

    value: Any
    lo: Any
    hi: Any
    level: float
    half_width: Any = None
    se: Any = None
    bias: Any = None
    estimable: bool = True
    method: str = "exact"
    diagnostics: dict = field(default_factory=dict)

    def _core(self) -> tuple:
        return (self.value, self.lo, self.hi, self.level, self.half_width)

    def __iter__(self):
        return iter(self._core())

    def __len__(self) -> int:
        return 5

    def __getitem__(self, index):
        return self._core()[index]

    def __eq__(self, other) -> bool:
        # Elementwise on the five core fields (the NamedTuple's equality), with arrays compared as wholes.
        if not isinstance(other, (Interval, tuple)) or len(other) != 5:
            return NotImplemented
        return all(a is b or (a is not None and b is not None and np.array_equal(a, b)) for a, b in zip(self, other))

    def __hash__(self) -> int:
        return hash(self._core())  # TypeError for array fields, as for a tuple holding arrays

    @property
    def interval(self) -> tuple:
        """``(lo, hi)``."""
        return self.lo, self.hi

    def covers(self, truth) -> np.ndarray:
        """Whether ``lo <= truth <= hi`` (cell by cell).

        Args:
            truth: the true answer(s), broadcastable to ``value``.

        Returns:
            A boolean array (0-d for a scalar interval).
        """
        t = np.asarray(truth, np.float64)
        return (self.lo <= t) & (t <= self.hi)


def _level(level, where: str) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating, np.integer)):
        raise TypeError(f"{where}: level must be a number in (0, 1), got {level!r}")
    if not 0 < float(level) < 1:
        raise ValueError(f"{where}: level must be in (0, 1), got {level!r}")
    return float(level)


@dataclass(frozen=True)
class Posterior:
    """The law of ``theta`` given ``theta_hat`` under a flat prior: ``theta = theta_hat - E`` ([XX] eq. 19-20).

    Attributes:
        mean: ``theta_hat``.
        var: ``Var E``.
        error: the law of ``E`` (:class:`LinearNoise`).

    Example:
        >>> p = Posterior(10.8, 1.6, LinearNoise([0.8, 0.2], [1.0, 2.0]))      # [XX] two answers of one cell
        >>> round(p.prob_greater(10.0), 6), [round(v, 4) for v in p.interval(0.95)[1:3]]
        (0.777303, [8.1809, 13.4191])
    """

    mean: float
    var: float
    error: LinearNoise

    def interval(self, level: float = 0.95, feasible: tuple[float, float] | None = None) -> Interval:
        """The narrowest interval of probability ``level``: ``mean +- c``, ``P(|E| <= c) = level`` ([XX] 5.2).

        Args:
            level: the confidence, in ``(0, 1)``.
            feasible: optional ``(lower, upper)`` bounds of the possible answers (e.g. ``(0, inf)`` for a
                count); intersecting with them keeps the coverage.

        Returns:
            :class:`Interval`.
        """
        level = _level(level, "Posterior.interval")
        c = float(self.error.half_width(level))
        lo, hi = self.mean - c, self.mean + c
        if feasible is not None:
            a, b = (float(v) for v in feasible)
            if not a <= b:
                raise ValueError(f"Posterior.interval: feasible must be (lower, upper) with lower <= upper, got {feasible!r}")
            lo, hi = min(max(lo, a), b), max(min(hi, b), a)
        return Interval(self.mean, lo, hi, level, c, se=math.sqrt(self.var), bias=0.0, method="exact")

    def prob(self, lo: float, hi: float) -> float:
        """``P(lo <= theta <= hi) = F_E(mean - lo) - F_E(mean - hi)``: the probability of the claim ([XX] 5.2)."""
        if not lo <= hi:
            raise ValueError(f"Posterior.prob: need lo <= hi, got {lo!r}, {hi!r}")
        upper = 1.0 if lo == -math.inf else float(self.error.cdf(self.mean - lo))
        lower = 0.0 if hi == math.inf else float(self.error.cdf(self.mean - hi))
        return min(max(upper - lower, 0.0), 1.0)

    def prob_greater(self, t: float) -> float:
        """``P(theta > t) = F_E(mean - t)``."""
        return float(self.error.cdf(self.mean - float(t)))

    def pmf(self, edges) -> np.ndarray:
        """Probabilities of ``theta`` in the bins ``[edges[i], edges[i+1]]`` (increasing edges).

        Example:
            >>> Posterior(0.0, 2.0, LinearNoise([1.0], 1.0)).pmf([-np.inf, 0.0, np.inf]).round(6).tolist()
            [0.5, 0.5]
        """
        e = np.asarray(edges, dtype=np.float64)
        if e.ndim != 1 or e.size < 2 or np.any(np.diff(e) < 0):
            raise ValueError("Posterior.pmf: edges must be a 1-D increasing array of at least 2 values")
        finite = np.isfinite(e)
        F = np.where(e > 0, 1.0, 0.0)  # P(theta <= e) = F_E(e - mean) by symmetry; 0 or 1 at -inf, inf
        F[finite] = self.error.cdf(e[finite] - self.mean)
        return np.clip(np.diff(F), 0.0, 1.0)


def _from_blue(r: BLUEResult, where: str) -> Posterior:
    if np.ndim(r.value) != 0:
        raise ValueError(f"{where}: give one query (a 1-D array over the cells)")
    if not r.estimable:
        raise ValueError(
            f"{where}: the query is not estimable from this history (it has a part outside the row space of H); "
            "no unbiased estimate, hence no interval, exists"
        )
    return Posterior(float(r.value), float(r.variance), r.error)


def posterior(H, y=None, query=None, *, scale=None, stddev=None, domain=None, method: str = "cf", **law) -> Posterior:
    """The BLUE of ``query`` and the law of ``theta`` given it ([XX] sections 3-4).

    Args:
        H, y, scale, stddev, domain: the history, as in :func:`~pgmjax.bayes.blue`.
        query: ``(N,)`` one query.
        method, **law: how the error law is evaluated (:class:`LinearNoise`).

    Returns:
        :class:`Posterior`; raises ValueError for a non-estimable query.

    Example:
        >>> p = posterior([[1.0], [1.0]], [10.0, 14.0], [1.0], scale=[1.0, 2.0])
        >>> round(p.mean, 6), round(p.var, 6), round(p.interval(0.95).half_width, 6)
        (10.8, 1.6, 2.619124)
    """
    if query is None:
        raise ValueError("posterior: give query= (one row over the cells)")
    return _from_blue(blue(H, y, scale=scale, stddev=stddev, query=query, domain=domain, method=method, **law), "posterior")


def confidence_interval(H, y=None, query=None, *, level: float = 0.95, scale=None, stddev=None, domain=None,
                        feasible=None, method: str = "cf", **law) -> Interval:
    """Exact confidence interval of ``theta = Q x`` around its BLUE ([XX] section 5.2).

    Args:
        H, y, query, scale, stddev, domain, method: as in :func:`posterior`.
        level: the confidence.
        feasible: optional ``(lower, upper)`` bounds to clip the interval to.

    Returns:
        :class:`Interval`.

    Example:
        >>> iv = confidence_interval([[1.0], [1.0]], [10.0, 14.0], [1.0], level=0.9, scale=[1.0, 2.0])
        >>> round(iv.half_width, 6)
        2.056773
    """
    return posterior(H, y, query, scale=scale, stddev=stddev, domain=domain, method=method, **law).interval(level, feasible)


def credible_interval(*args, **kwargs) -> Interval:
    """Alias of :func:`confidence_interval`, under the paper's name.

    The paper calls these "credible intervals" of a flat-prior posterior; they are the exact confidence
    intervals of the BLUE's pivot, not credible intervals of the posterior given all answers.

    Example:
        >>> round(credible_interval([[1.0]], [3.0], [1.0], scale=1.0, level=0.9).half_width, 6)    # ln 10
        2.302585
    """
    return confidence_interval(*args, **kwargs)


def claim_probability(H, y=None, query=None, lo: float = -math.inf, hi: float = math.inf, *, scale=None, stddev=None,
                      domain=None, method: str = "cf", **law) -> float:
    """``P(lo <= theta <= hi)`` under the flat-prior law of ``theta`` ([XX] section 5.2).

    Example:
        >>> round(claim_probability([[1.0], [1.0]], [10.0, 14.0], [1.0], lo=12.0, scale=[1.0, 2.0]), 6)
        0.140456
    """
    return posterior(H, y, query, scale=scale, stddev=stddev, domain=domain, method=method, **law).prob(lo, hi)
