"""Fourier inversion of the characteristic function of a sum of Laplace and Gaussian terms ("cf").

Xiao & Xiong, "Bayesian Inference under Differential Privacy", eq. 20-22: the error of a linear estimate has
the characteristic function ``phi(t) = prod_k 1 / (1 + s_k^2 t^2) * exp(-g^2 t^2 / 2)``. One FFT of ``phi``
on a uniform frequency grid gives the density on a uniform grid of values, and one more gives the CDF
(Gil-Pelaez; the trapezoid rule for its integral is as accurate as for the density, no cumulative sum).
Between grid points the CDF is interpolated by cubic Hermite polynomials (its derivative is the density).
Host NumPy, float64.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["Grid", "cf_grid", "grid_cdf", "grid_quantile", "log_char_fn"]

_TAIL = 1e-12  # tail mass left outside the grid (Chernoff bound)
_MAX_GRID = 2**22


class Grid(NamedTuple):
    """CDF and density of the law on a uniform grid ``x_k = x0 + k h``."""

    x0: float
    h: float
    cdf: np.ndarray
    pdf: np.ndarray


def log_char_fn(t, s: np.ndarray, g2: float) -> np.ndarray:
    """``log phi(t) = -sum_k log(1 + s_k^2 t^2) - g^2 t^2 / 2`` ([XX] eq. 22, with a Gaussian part).

    Args:
        t: frequencies (any shape).
        s: the Laplace scales ``s_k``.
        g2: the variance of the Gaussian part.

    Returns:
        ``log phi(t)``, float64, the shape of ``t``.

    Example:
        >>> float(np.exp(log_char_fn(1.0, np.array([1.0]), 0.0)))
        0.5
    """
    t2 = np.asarray(t, dtype=np.float64) ** 2
    out = -0.5 * g2 * t2
    for chunk in np.array_split(s, max(1, s.size // 64)):
        out = out - np.sum(np.log1p(np.multiply.outer(t2, chunk**2)), axis=-1)
    return out


def _cf_step(s: np.ndarray, g2: float, sd: float) -> tuple[float, float]:
    """Grid step ``h = min(sd/1024, pi/T)`` with the CDF's truncation error at ``T`` below ``1e-12``; and the
    frequency ``t_cut`` beyond which ``phi`` is negligible.

    The FFT grid in ``t`` reaches ``pi / h``; the CDF's truncation error is at most
    ``(1/pi) int_T^inf |phi(t)| / t dt`` and the density's ``(1/pi) int_T^inf |phi(t)| dt``. Sums of many
    terms have a fast-decaying ``phi``: a coarse step and only the frequencies below ``t_cut`` (often a few
    hundred of the grid's) need ``phi``. A single dominant Laplace term (``phi ~ 1/t^2``) needs the
    largest grid; :class:`~pgmjax.bayes.LinearNoise` uses the closed form then.
    """
    t = np.geomspace(0.1 / sd, 1e7 / sd, 400)
    phi = np.exp(log_char_fn(t, s, g2))
    dlog = math.log(t[1] / t[0])
    # tails by left Riemann sums in log t (phi decreases, so they over-estimate)
    tail_cdf = np.cumsum(phi[::-1])[::-1] * dlog / math.pi  # int phi(t)/t dt = int phi d(log t)
    tail_pdf = np.cumsum((phi * t)[::-1])[::-1] * dlog / math.pi
    ok = np.flatnonzero(tail_cdf < 1e-12)
    h = min(sd / 1024.0, math.pi / (t[ok[0]] if ok.size else t[-1]))
    cut = np.flatnonzero((tail_cdf < 1e-15) & (tail_pdf * sd < 1e-15))
    return h, (float(t[cut[0]]) if cut.size else math.inf)


def cf_grid(s: np.ndarray, g2: float) -> Grid:
    """Density and CDF on ``x_k = (k - G/2) h`` by one FFT each ([XX] eq. 20, Gil-Pelaez).

    With ``t_j = 2 pi j / (G h)`` (``j`` FFT-ordered), ``f(x_k) = Re FFT(phi(t_j) (-1)^j)_k / (G h)``, and
    ``F(x_k) - 1/2 - x_k / (G h) = Re FFT(phi(t_j) / (-i t_j) (-1)^j)_k / (G h)`` (``j != 0``): the periodic
    part of the CDF. Terms below ``1e-3 sd`` join the Gaussian part (same variance; CDF error about 1e-7
    at worst); the grid spans the Chernoff bound ``P(E > w) <= exp(-w/(2 s_max) + Var/(6 s_max^2))`` at
    ``1e-12`` and has at most ``2^22`` points.

    Args:
        s: the Laplace scales ``s_k`` (positive, sorted).
        g2: the variance of the Gaussian part.

    Returns:
        :class:`Grid`.

    Example:
        >>> g = cf_grid(np.array([1.0, 2.0]), 0.0)       # P(E > z) = (-exp(-z) / 3 + 4 exp(-z / 2) / 3) / 2
        >>> round(float(grid_cdf(g, np.array(1.0))), 9)
        0.656959467
    """
    var = 2.0 * float(np.sum(s**2)) + g2
    sd = math.sqrt(var)
    small = s < 1e-3 * sd  # such terms are Gaussian to ~1e-7 in the CDF; fold them in (same variance)
    g2 = g2 + 2.0 * float(np.sum(s[small] ** 2))
    s = s[~small]
    h, t_cut = _cf_step(s, g2, sd)
    smax = float(s[-1]) if s.size else 0.0
    half = 12.0 * sd
    if smax > 0:
        half = max(half, 2.0 * smax * math.log(1.0 / _TAIL) + var / (3.0 * smax))
    else:
        half = max(half, sd * math.sqrt(2.0 * math.log(1.0 / _TAIL)) * 1.2)
    G = 1 << max(10, math.ceil(math.log2(2.0 * half / h)))
    if G > _MAX_GRID:
        G = _MAX_GRID  # coarser than asked: still O(h^2)-accurate in the CDF
        h = 2.0 * half / G
    j = np.fft.fftfreq(G, d=1.0 / G)  # 0, 1, ..., G/2-1, -G/2, ..., -1
    t = 2.0 * math.pi * j / (G * h)
    # phi decreases in |t|; beyond t_cut it is negligible and is not evaluated
    near = np.abs(t) <= t_cut
    phi = np.zeros(G)
    phi[near] = np.exp(log_char_fn(t[near], s, g2))
    sign = np.where(j.astype(np.int64) % 2 == 0, 1.0, -1.0)
    pdf = np.fft.fft(phi * sign).real / (G * h)
    with np.errstate(divide="ignore", invalid="ignore"):
        odd = np.where(j == 0, 0.0, phi / (-1j * t))
    x = (np.arange(G) - G // 2) * h
    cdf = 0.5 + x / (G * h) + np.fft.fft(odd * sign).real / (G * h)
    cdf = np.maximum.accumulate(np.clip(cdf, 0.0, 1.0))
    return Grid(float(x[0]), h, cdf, np.maximum(pdf, 0.0))


def grid_cdf(grid: Grid, x: np.ndarray) -> np.ndarray:
    """The CDF at ``x``: cubic Hermite interpolation between grid points (its derivative is the density).

    Example:
        >>> g = cf_grid(np.array([1.0, 2.0]), 0.0)
        >>> float(grid_cdf(g, np.array(0.0)))
        0.5
    """
    n = grid.cdf.size
    u = (x - grid.x0) / grid.h
    k = np.clip(np.floor(u).astype(np.int64), 0, n - 2)
    r = np.clip(u - k, 0.0, 1.0)
    F0, F1 = grid.cdf[k], grid.cdf[k + 1]
    d0, d1 = grid.pdf[k] * grid.h, grid.pdf[k + 1] * grid.h
    h00, h10, h01, h11 = 2 * r**3 - 3 * r**2 + 1, r**3 - 2 * r**2 + r, -2 * r**3 + 3 * r**2, r**3 - r**2
    out = h00 * F0 + h10 * d0 + h01 * F1 + h11 * d1
    out = np.where(u < 0, 0.0, np.where(u > n - 1, 1.0, out))
    return np.clip(out, 0.0, 1.0)


def grid_quantile(grid: Grid, p: np.ndarray) -> np.ndarray:
    """Quantiles: invert the interpolated CDF (bracket on the grid, then Newton steps on the cubic).

    Example:
        >>> g = cf_grid(np.array([1.0, 2.0]), 0.0)
        >>> round(float(grid_cdf(g, grid_quantile(g, np.array(0.95)))), 9)
        0.95
    """
    k = np.clip(np.searchsorted(grid.cdf, p, side="left") - 1, 0, grid.cdf.size - 2)
    F0, F1 = grid.cdf[k], grid.cdf[k + 1]
    lo = grid.x0 + k * grid.h
    r = np.where(F1 > F0, (p - F0) / np.where(F1 > F0, F1 - F0, 1.0), 0.5)
    x = lo + np.clip(r, 0.0, 1.0) * grid.h
    for _ in range(6):
        f = np.interp(x, grid.x0 + np.arange(grid.pdf.size) * grid.h, grid.pdf)
        step = (grid_cdf(grid, x) - p) / np.where(f > 0, f, np.inf)
        x = np.clip(x - step, lo, lo + grid.h)
    return x
