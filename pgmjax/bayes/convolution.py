"""The paper's probability-computation method ("pc"): binned laws of the terms, convolved.

Xiao & Xiong, "Bayesian Inference under Differential Privacy", section 4.3, Algorithm 2 and Lemmas 4.2-4.3,
with the corrections the paper needs: every one of the ``m`` terms is used (the printed loop skips the
last), the length carries the factor 2 of Lemma 4.3 and is made odd so the bins are centred on 0, and
the bin width is a parameter ``h`` instead of 1. Convolving binned laws is not the binned law of the
sum: besides the truncated mass ``gamma`` (all the paper's Theorem 4.5 bounds), the result carries a
discretisation error of order ``h`` per convolution. Prefer ``method="cf"``; this method is here to
reproduce the paper and to compare.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from .fourier import Grid

__all__ = ["bin_counts", "binned_law", "default_bin_width"]


def bin_counts(scales, gamma: float, bin_width: float = 1.0) -> np.ndarray:
    """Bins per term: ``ceil(2 s_k ln(m / gamma) / h) + 1``, made odd ([XX] Lemma 4.3, Algorithm 2).

    Args:
        scales: the Laplace scales ``s_k = |A_k| S_k / alpha_k`` of the ``m`` terms.
        gamma: the total tail mass the truncation may lose.
        bin_width: the bin width ``h`` (the paper's is 1).

    Returns:
        int64 array of the number of bins of each term (odd, so that a bin is centred on 0).

    Example:
        >>> bin_counts([9.538462, 0.654206], 0.01 * 2 / 8).tolist()      # m = 2 here
        [129, 11]
    """
    s = np.asarray(scales, dtype=np.float64).reshape(-1)
    if s.size == 0 or np.any(~(s > 0)) or not np.all(np.isfinite(s)):
        raise ValueError(f"bin_counts: scales must be positive and finite, got {scales!r}")
    if not 0 < gamma < 1:
        raise ValueError(f"bin_counts: gamma must be in (0, 1), got {gamma!r}")
    if not bin_width > 0:
        raise ValueError(f"bin_counts: bin_width must be positive, got {bin_width!r}")
    n = np.ceil(2.0 * s * math.log(s.size / gamma) / bin_width).astype(np.int64) + 1
    return n + (n % 2 == 0)


def default_bin_width(scales, gaussian_variance: float = 0.0) -> float:
    """The "pc" grid's default bin width, from the law's own scale: ``h = sd / (4 sqrt(m))``.

    Rounding each of the ``m`` terms to a grid of width ``h`` adds at most about ``h^2 / 12`` of variance per term,
    ``m h^2 / 12 = Var / 192`` in all: the 95% half-width moves by a fraction of a percent whatever ``m`` and the
    scales. A width set by the smallest term (``min(s) / 8``, this module's former default) grows the grid with
    the ratio of the largest scale to the smallest (``10^7`` to ``10^10`` bins on the Fig. 6 laws of Xiao & Xiong,
    "Bayesian Inference under Differential Privacy", section 6), and the paper's unit width leaves the intervals
    up to 74% too narrow where the terms' scales are small.

    Args:
        scales: the Laplace scales ``s_k`` of the terms.
        gaussian_variance: the variance of a Gaussian part (counted as one more term).

    Returns:
        The width ``h``.

    Example:
        >>> round(default_bin_width([1.0, 1.0]), 6)                      # sd = 2, m = 2
        0.353553
    """
    s = np.asarray(scales, dtype=np.float64).reshape(-1)
    parts = s.size + (gaussian_variance > 0)
    if parts == 0:
        raise ValueError("default_bin_width: the law has no terms")
    return math.sqrt(2.0 * float(np.sum(s * s)) + gaussian_variance) / (4.0 * math.sqrt(parts))


def _laplace_cdf(x: np.ndarray, s: float) -> np.ndarray:
    return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / s), 1.0 - 0.5 * np.exp(-np.maximum(x, 0) / s))


def _term_pmf(cdf, n: int, h: float) -> np.ndarray:
    centres = (np.arange(n) - n // 2) * h
    return cdf(centres + h / 2) - cdf(centres - h / 2)


def binned_law(scales, gaussian_variance: float, bin_width: float | None, gamma: float):
    """The "pc" law on a grid: the convolution of every term's truncated, binned law.

    Args:
        scales: Laplace scales of the terms.
        gaussian_variance: variance of a Gaussian part (binned like a term, truncated at the same mass).
        bin_width: ``h``; default :func:`default_bin_width` (the law's scale; the paper's 1 crushes terms of scale
            below 1).
        gamma: total truncated mass.

    Returns:
        The grid (``x0``, ``h``, CDF at the bin edges, density at the edges) that ``LinearNoise``
        interpolates; within a bin the mass is spread uniformly.

    Example:
        >>> g = binned_law(np.array([1.0]), 0.0, 0.01, 1e-6)
        >>> round(float(g.cdf[-1] - g.cdf[0]), 5)                 # the kept mass
        1.0
    """
    s = np.asarray(scales, dtype=np.float64).reshape(-1)
    parts = s.size + (gaussian_variance > 0)
    if parts == 0:
        raise ValueError("binned_law: the law has no terms")
    h = float(bin_width) if bin_width is not None else default_bin_width(s, gaussian_variance)
    pmfs = []
    if s.size:
        counts = bin_counts(s, gamma * s.size / parts, h)
        if int(counts.sum()) > 1 << 24:
            raise ValueError(f"binned_law: {int(counts.sum())} bins in all; use a larger bin_width or method='cf'")
        pmfs += [_term_pmf(lambda x, sk=sk: _laplace_cdf(x, sk), int(n), h) for sk, n in zip(s, counts)]
    if gaussian_variance > 0:
        g = math.sqrt(gaussian_variance)
        reach = g * math.sqrt(2.0 * math.log(2.0 * parts / gamma))  # P(|Z| > reach) < gamma / parts
        n = 2 * math.ceil(reach / h) + 1
        pmfs.append(_term_pmf(lambda x: ndtr(x / g), n, h))
    size = sum(p.size for p in pmfs) - len(pmfs) + 1
    nfft = 1 << math.ceil(math.log2(size))
    spectrum = np.ones(nfft // 2 + 1, dtype=np.complex128)
    for p in pmfs:
        spectrum *= np.fft.rfft(p, nfft)
    pmf = np.maximum(np.fft.irfft(spectrum, nfft)[:size], 0.0)
    lost = max(1.0 - float(pmf.sum()), 0.0)
    edges_cdf = lost / 2.0 + np.concatenate([[0.0], np.cumsum(pmf)])
    dens = pmf / h
    pdf = np.concatenate([[dens[0] / 2], (dens[:-1] + dens[1:]) / 2, [dens[-1] / 2]])
    return Grid(float(-(size // 2) * h - h / 2), h, np.minimum(edges_cdf, 1.0), pdf)
