"""The law of a weighted sum of independent Gaussian and Laplace errors, ``E = sum_i a_i e_i``.

This is the error of any linear estimate ``a^T y`` of noisy measurements (Xiao & Xiong, "Bayesian
Inference under Differential Privacy", 2012, section 4, eq. 19-23): its characteristic function is

    phi(t) = prod_{Laplace i} 1 / (1 + s_i^2 t^2) * exp(-g^2 t^2 / 2),   s_i = |a_i| b_i,  g^2 = sum_{Gaussian i} a_i^2 sigma_i^2,

(Laplace scale ``b_i = sigma_i / sqrt 2``). The distribution function is obtained by Fourier inversion of
``phi`` on a grid (FFT) and a cumulative trapezoid (the 64 largest Laplace terms exact, smaller ones in the
Gaussian part); with only Gaussian terms it is the normal law; with many comparable Laplace terms (standardised
fourth cumulant below 0.2) half-widths use the Cornish-Fisher expansion.
``E`` is symmetric and unimodal, so the narrowest interval of probability ``level`` is symmetric.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

__all__ = ["NoiseLaw"]

_MAX_GRID = 1 << 20
_MAX_TERMS = 64


@dataclass(frozen=True, eq=False)
class NoiseLaw:
    """The law of ``E = sum_i weights_i * e_i``, ``e_i`` independent with standard deviation ``stddev_i``,
    Laplace where ``laplace_i`` else Gaussian.

    Args:
        weights: ``(m,)`` the linear weights ``a`` (e.g. from :func:`pgmjax.uncertainty.linearize`).
        stddev: ``(m,)`` the rows' noise standard deviations (a Laplace row's is ``sqrt(2) b``).
        laplace: ``(m,)`` booleans, True for Laplace rows.

    Example:
        >>> law = NoiseLaw(np.array([0.8, 0.2]), np.sqrt(2) * np.array([1.0, 2.0]), np.array([True, True]))
        >>> round(law.sd ** 2, 6), round(law.half_width(0.95), 6)      # Xiao & Xiong two-answer example
        (1.6, 2.619124)
    """

    weights: np.ndarray
    stddev: np.ndarray
    laplace: np.ndarray

    def __post_init__(self):
        a = np.asarray(self.weights, np.float64).reshape(-1)
        s = np.broadcast_to(np.asarray(self.stddev, np.float64), a.shape).copy()
        lap = np.broadcast_to(np.asarray(self.laplace, bool), a.shape).copy()
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(s)) and np.all(s >= 0)):
            raise ValueError("NoiseLaw: weights and stddev must be finite, stddev non-negative")
        object.__setattr__(self, "weights", a)
        object.__setattr__(self, "stddev", s)
        object.__setattr__(self, "laplace", lap)

    @property
    def sd(self) -> float:
        """Standard deviation of ``E``: ``sqrt(sum_i a_i^2 sigma_i^2)``."""
        return float(np.sqrt(np.sum((self.weights * self.stddev) ** 2)))

    def _parts(self) -> tuple[np.ndarray, float]:
        """Laplace scales ``s_i = |a_i| b_i`` kept as Laplace terms, and the Gaussian variance (tiny Laplace
        terms, below 1e-4 of the sd, are moved into the Gaussian part with their variance)."""
        sd = self.sd
        scale = np.abs(self.weights) * self.stddev / np.sqrt(2.0)
        lap = self.laplace & (scale > 1e-4 * sd)
        gauss_var = float(np.sum(((self.weights * self.stddev) ** 2)[~lap]))
        return scale[lap], gauss_var

    def cdf(self, x) -> np.ndarray:
        """``P(E <= x)`` (vectorised over ``x``)."""
        x = np.asarray(x, np.float64)
        s, g2 = self._parts()
        sd = self.sd
        if sd == 0:
            return (x >= 0).astype(np.float64)
        if s.size == 0:
            return 0.5 * special.erfc(-x / np.sqrt(2 * g2))
        grid, cdf = self._grid(s, g2, sd)
        return np.interp(x, grid, cdf, left=0.0, right=1.0)

    def half_width(self, level: float) -> float:
        """The ``c`` with ``P(|E| <= c) = level``: the symmetric interval ``estimate +- c`` has that coverage."""
        if not 0 < level < 1:
            raise ValueError(f"NoiseLaw.half_width: level must be in (0, 1), got {level!r}")
        s, g2 = self._parts()
        sd = self.sd
        if sd == 0:
            return 0.0
        p = 0.5 * (1 + level)
        z = np.sqrt(2.0) * special.erfinv(2 * p - 1)
        if s.size == 0:
            return float(np.sqrt(g2) * z)
        kurt = 12.0 * np.sum(s**4) / sd**4  # standardised fourth cumulant (Laplace: 12 s^4)
        if s.size > _MAX_TERMS and kurt < 0.2 and 2 * s.max() ** 2 < 0.25 * sd * sd:
            # Many comparable terms: the Cornish-Fisher expansion (its O(kurt^2) error is far below the
            # Monte Carlo error of any use of the interval); the Fourier grid would cost terms x grid points.
            return float(sd * (z + kurt * (z**3 - 3 * z) / 24.0))
        grid, cdf = self._grid(s, g2, sd)
        return float(np.interp(p, cdf, grid))

    def _grid(self, s: np.ndarray, g2: float, sd: float):
        # Grid step and half-span: Xiao & Xiong's law has exponential tails of scale s_max; a Chernoff bound
        # at t = 1 / (2 s_max) puts the mass beyond W under 1e-12.
        if s.size > _MAX_TERMS:  # keep the largest terms exact, the rest (each small) join the Gaussian part
            order = np.sort(s)
            g2 = g2 + 2.0 * float(np.sum(order[:-_MAX_TERMS] ** 2))
            s = order[-_MAX_TERMS:]
        var = sd * sd
        h = min(sd / 1024, s.min() / 128)
        w = max(12 * sd, 2 * s.max() * np.log(1e12) + var / (3 * s.max()))
        n = 1 << int(np.ceil(np.log2(2 * w / h)))
        if n > _MAX_GRID:  # very unequal scales: coarser grid (the error is O(h^2))
            n = _MAX_GRID
            h = 2 * w / n
        j = np.fft.fftfreq(n, d=1.0 / n)  # FFT-ordered integers
        t = 2 * np.pi * j / (n * h)
        log_phi = -np.sum(np.log1p(np.outer(t * t, s * s)), axis=1) - 0.5 * g2 * t * t
        sign = np.where(j.astype(np.int64) % 2 == 0, 1.0, -1.0)
        dens = np.real(np.fft.fft(np.exp(log_phi) * sign)) / (n * h)
        dens = np.maximum(dens, 0.0)
        grid = (np.arange(n) - n // 2) * h
        cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * h)])
        cdf = np.maximum.accumulate(cdf / cdf[-1])
        return grid, cdf
