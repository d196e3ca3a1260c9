"""The law of a weighted sum of independent Laplace (and Gaussian) errors.

A linear estimate ``theta_hat = A y`` of ``theta = Q x`` from noisy answers ``y = H x + noise`` errs by
``E = sum_k A_k noise_k`` (Xiao & Xiong, "Bayesian Inference under Differential Privacy", Lemma 4.1). With
Laplace rows of scale ``b_k`` the term ``A_k noise_k`` is Laplace of scale ``s_k = |A_k| b_k`` and ``E`` has the
characteristic function (section 4, eq. 21-22)

    phi(t) = prod_k 1 / (1 + s_k^2 t^2) * exp(-g^2 t^2 / 2),     g^2 = sum over Gaussian rows of A_k^2 sigma_k^2.

:class:`LinearNoise` holds that law and evaluates its CDF, quantiles, half-widths of symmetric intervals and
probabilities, by one of five methods (``method=``):

* ``"cf"`` (default): Fourier inversion of ``phi`` on an FFT grid, accurate to about 1e-9 in the CDF.
* ``"exact"``: partial fractions, ``P(E > z) = 1/2 sum_k c_k exp(-z / s_k)`` with
  ``c_k = prod_{j != k} s_k^2 / (s_k^2 - s_j^2)`` (Laplace terms only, distinct scales, at most
  8 terms, refused when the coefficients cancel catastrophically).
* ``"pc"``: the paper's Algorithm 2 (corrected): each term binned on a grid of width ``h``, truncated so
  that the lost tail mass is ``gamma`` in all (Lemmas 4.2-4.3), and the bins convolved.
* ``"mc"``: the paper's Algorithm 1: ``samples`` draws of ``E`` from an explicit ``jax.random`` key.
* ``"gaussian"``: ``N(0, Var E)``; too narrow when a few Laplace terms dominate.

Everything runs on the host in float64 (NumPy): these are small one-dimensional computations whose
accuracy decides the reported confidence.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr, ndtri

__all__ = ["LinearNoise", "METHODS"]

#: The methods :class:`LinearNoise` can evaluate its law by.
METHODS = ("cf", "exact", "pc", "mc", "gaussian")

_TAIL = 1e-12  # tail mass left outside the "cf" grid (Chernoff bound)
_EXACT_MAX_TERMS = 8
_MAX_GRID = 2**22


class _Grid(NamedTuple):
    """CDF and density of the law on a uniform grid ``x_k = x0 + k h``."""

    x0: float
    h: float
    cdf: np.ndarray
    pdf: np.ndarray


def _vector(value, name: str, n: int | None) -> np.ndarray | None:
    if value is None:
        return None
    try:
        v = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"LinearNoise: {name} must be an array of numbers, got {type(value).__name__}") from None
    if v.ndim > 1:
        raise ValueError(f"LinearNoise: {name} must be a scalar or 1-D (one per row), got shape {v.shape}")
    if n is not None:
        if v.ndim == 1 and v.size != n:
            raise ValueError(f"LinearNoise: {name} has {v.size} entries but weights has {n}")
        v = np.broadcast_to(v, (n,)).copy()
    if not np.all(np.isfinite(v)):
        raise ValueError(f"LinearNoise: {name} has non-finite entries")
    return v


@dataclasses.dataclass(frozen=True, eq=False)
class LinearNoise:
    """Law of ``E = sum_k w_k (L_k + Z_k)``: ``L_k ~ Laplace(b_k)``, ``Z_k ~ N(0, sigma_k^2)``, all independent.

    Xiao & Xiong, "Bayesian Inference under Differential Privacy", section 4 (eq. 19-23): the error of a
    linear estimate ``A y`` is such a sum; its law does not depend on the data, so ``[theta_hat - c,
    theta_hat + c]`` with ``P(|E| <= c) = level`` is an exact confidence interval.

    Args:
        weights: ``w`` (``A`` of the estimate), shape ``(m,)``.
        laplace_scale: Laplace scale ``b_k`` of each row (``0`` for a row without Laplace noise), a scalar
            or ``(m,)``. The paper's rate ``alpha_k / S_k`` is ``1 / b_k``.
        gaussian_sd: Gaussian standard deviation ``sigma_k`` of each row (``0`` for none), scalar or ``(m,)``.
        method: one of :data:`METHODS`.
        key: a ``jax.random`` key, required by ``method="mc"`` (and :meth:`sample` takes its own).
        samples: Monte Carlo sample size for ``"mc"``.
        bin_width: ``"pc"`` grid width ``h`` (default ``min(s) / 8``); gamma: ``"pc"`` truncated mass.

    Example:
        >>> E = LinearNoise(weights=[0.8, 0.2], laplace_scale=[1.0, 2.0])     # [XX] two answers of one cell
        >>> round(E.half_width(0.95), 6), round(E.variance, 6)
        (2.619124, 1.6)
        >>> round(E.with_method("exact").prob_abs_le(2.0), 6) == round(E.prob_abs_le(2.0), 6)
        True
    """

    weights: Any
    laplace_scale: Any = None
    gaussian_sd: Any = None
    method: str = "cf"
    key: Any = None
    samples: int = 1_000_000
    bin_width: float | None = None
    gamma: float = 1e-6

    def __post_init__(self):
        w = _vector(self.weights, "weights", None)
        if w is None or w.ndim != 1 or w.size == 0:
            raise ValueError(f"LinearNoise: weights must be a non-empty 1-D array, got {self.weights!r}")
        b = _vector(self.laplace_scale, "laplace_scale", w.size)
        g = _vector(self.gaussian_sd, "gaussian_sd", w.size)
        if b is None and g is None:
            raise ValueError("LinearNoise: give laplace_scale= (Laplace rows) and/or gaussian_sd= (Gaussian rows)")
        for name, v in (("laplace_scale", b), ("gaussian_sd", g)):
            if v is not None and np.any(v < 0):
                raise ValueError(f"LinearNoise: {name} must be non-negative, got {v}")
        if self.method not in METHODS:
            raise ValueError(f"LinearNoise: method must be one of {METHODS}, got {self.method!r}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, (int, np.integer)) or self.samples < 100:
            raise ValueError(f"LinearNoise: samples must be an integer >= 100, got {self.samples!r}")
        if not (0 < self.gamma < 1):
            raise ValueError(f"LinearNoise: gamma must be in (0, 1), got {self.gamma!r}")
        if self.bin_width is not None and not (self.bin_width > 0 and math.isfinite(self.bin_width)):
            raise ValueError(f"LinearNoise: bin_width must be positive, got {self.bin_width!r}")
        if self.method == "mc":
            from ..privacy import check_key

            check_key(self.key, "LinearNoise(method='mc')")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "laplace_scale", np.zeros_like(w) if b is None else b)
        object.__setattr__(self, "gaussian_sd", np.zeros_like(w) if g is None else g)
        if self.method == "exact":
            self._exact_coefficients  # raises now if the law has no usable closed form

    # ---- the law's parameters -----------------------------------------------------------------
    @functools.cached_property
    def terms(self) -> np.ndarray:
        """The Laplace scales ``s_k = |w_k| b_k`` of the non-zero Laplace terms, sorted."""
        s = np.abs(self.weights) * self.laplace_scale
        return np.sort(s[s > 0])

    @functools.cached_property
    def gaussian_variance(self) -> float:
        """``g^2 = sum_k w_k^2 sigma_k^2``, the variance of the Gaussian part."""
        return float(np.sum((self.weights * self.gaussian_sd) ** 2))

    @property
    def variance(self) -> float:
        """``Var E = sum_k 2 s_k^2 + g^2`` ([XX] eq. 17)."""
        return float(2.0 * np.sum(self.terms**2) + self.gaussian_variance)

    @property
    def sd(self) -> float:
        """Standard deviation of ``E``."""
        return math.sqrt(self.variance)

    def with_method(self, method: str, **options) -> "LinearNoise":
        """The same law evaluated by another method (options: ``key``, ``samples``, ``bin_width``, ``gamma``).

        Example:
            >>> LinearNoise([1.0], 2.0).with_method("gaussian").half_width(0.95) < 6.0
            True
        """
        return dataclasses.replace(self, method=method, **options)

    def char_fn(self, t) -> np.ndarray:
        """``phi(t) = prod_k 1 / (1 + s_k^2 t^2) * exp(-g^2 t^2 / 2)`` ([XX] eq. 22).

        Example:
            >>> float(LinearNoise([1.0], 1.0).char_fn(1.0))
            0.5
        """
        t = np.asarray(t, dtype=np.float64)
        return np.exp(_log_phi(t, self.terms, self.gaussian_variance))

    # ---- CDF, quantiles and probabilities -----------------------------------------------------
    def cdf(self, x) -> np.ndarray | float:
        """``P(E <= x)`` (array in, array out).

        Example:
            >>> round(float(LinearNoise([1.0], 1.0, method="exact").cdf(1.0)), 6)      # 1 - exp(-1) / 2
            0.81606
        """
        x = np.asarray(x, dtype=np.float64)
        if np.any(np.isnan(x)):
            raise ValueError("LinearNoise.cdf: x has nan entries")
        if self.variance == 0.0:
            out = (x >= 0).astype(np.float64)
        elif self.method == "gaussian":
            out = ndtr(x / self.sd)
        elif self.method == "exact":
            out = _exact_cdf(x, *self._exact_coefficients)
        elif self.method == "mc":
            draws = self._sorted_draws
            out = np.searchsorted(draws, x, side="right") / draws.size
        else:
            out = _grid_cdf(self._grid, x)
        return out if out.ndim else float(out)

    def sf(self, x):
        """``P(E > x) = cdf(-x)`` (the law is symmetric)."""
        return self.cdf(-np.asarray(x, dtype=np.float64))

    def quantile(self, p) -> np.ndarray | float:
        """The ``p``-quantile of ``E``, ``p`` in ``(0, 1)``.

        Example:
            >>> round(LinearNoise([1.0], 1.0).quantile(0.975), 6)                        # ln(20)
            2.995732
        """
        p = np.asarray(p, dtype=np.float64)
        if np.any(~((p > 0) & (p < 1))):
            raise ValueError(f"LinearNoise.quantile: p must be in (0, 1), got {p}")
        if self.variance == 0.0:
            out = np.zeros_like(p)
        elif self.method == "gaussian":
            out = self.sd * ndtri(p)
        elif self.method == "mc":
            out = np.quantile(self._sorted_draws, p)
        elif self.method == "exact":
            out = _bisect_quantile(self.cdf, p, self.sd)
        else:
            out = _grid_quantile(self._grid, p)
        return out if np.ndim(out) else float(out)

    def half_width(self, level) -> np.ndarray | float:
        """The ``c`` with ``P(|E| <= c) = level``: the narrowest interval ``[theta_hat - c, theta_hat + c]``
        of that confidence ([XX] section 5.2; ``E`` is symmetric and unimodal).

        Example:
            >>> round(LinearNoise([1.0], 1.0).half_width(0.9), 6)                       # ln(10)
            2.302585
        """
        level = np.asarray(level, dtype=np.float64)
        if np.any(~((level > 0) & (level < 1))):
            raise ValueError(f"LinearNoise.half_width: level must be in (0, 1), got {level}")
        if self.method == "mc":  # quantile of |E|, read directly from the draws
            out = np.quantile(np.abs(self._sorted_draws), level)
            return out if np.ndim(out) else float(out)
        return self.quantile((1.0 + level) / 2.0)

    def prob_abs_le(self, w) -> np.ndarray | float:
        """``P(|E| <= w)``: the confidence of the interval ``theta_hat +- w``.

        Example:
            >>> round(LinearNoise([1.0], 1.0).prob_abs_le(math.log(20)), 6)
            0.95
        """
        w = np.asarray(w, dtype=np.float64)
        if np.any(w < 0) or np.any(np.isnan(w)):
            raise ValueError(f"LinearNoise.prob_abs_le: w must be non-negative, got {w}")
        if self.method == "mc":
            a = np.sort(np.abs(self._sorted_draws))
            out = np.searchsorted(a, w, side="right") / a.size
        else:
            out = np.clip(2.0 * np.asarray(self.cdf(w)) - 1.0, 0.0, 1.0)
        return out if np.ndim(out) else float(out)

    def prob_between(self, lo, hi) -> np.ndarray | float:
        """``P(lo <= E <= hi)``.

        Example:
            >>> round(LinearNoise([1.0], 1.0).prob_between(-1.0, 1.0), 6)                # 1 - exp(-1)
            0.632121
        """
        lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        if np.any(hi < lo):
            raise ValueError("LinearNoise.prob_between: hi must be >= lo")
        out = np.clip(np.asarray(self.cdf(hi)) - np.asarray(self.cdf(lo)), 0.0, 1.0)
        return out if np.ndim(out) else float(out)

    def sample(self, key, shape=()) -> np.ndarray:
        """Draws of ``E`` (a simulation of a public law; no private data is involved).

        Args:
            key: a ``jax.random`` key.
            shape: the sample shape.

        Returns:
            A float64 NumPy array of that shape.

        Example:
            >>> LinearNoise([1.0, -1.0], 1.0).sample(jax.random.key(0), (3,)).shape
            (3,)
        """
        from ..privacy import check_key

        check_key(key, "LinearNoise.sample")
        shape = tuple(int(s) for s in np.atleast_1d(shape)) if shape != () else ()
        return _draw(key, self.terms, self.gaussian_variance, math.prod(shape)).reshape(shape)

    # ---- per-method state, computed once --------------------------------------------------------
    @functools.cached_property
    def _exact_coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        s = self.terms
        if self.gaussian_variance > 0:
            raise ValueError("LinearNoise(method='exact'): the partial-fraction form needs Laplace terms only; use 'cf'")
        if s.size > _EXACT_MAX_TERMS:
            raise ValueError(f"LinearNoise(method='exact'): {s.size} terms, at most {_EXACT_MAX_TERMS}; use 'cf'")
        if s.size and np.any(np.diff(s) <= 1e-6 * s[1:]):
            raise ValueError("LinearNoise(method='exact'): repeated (or nearly equal) scales; use 'cf'")
        s2 = s**2
        diff = s2[:, None] - s2[None, :]
        np.fill_diagonal(diff, 1.0)
        ratio = s2[:, None] / diff
        np.fill_diagonal(ratio, 1.0)
        c = np.prod(ratio, axis=1)
        if np.sum(np.abs(c)) > 1e6:  # cancellation would cost more than 6 of float64's 16 digits
            raise ValueError("LinearNoise(method='exact'): the partial fractions cancel catastrophically; use 'cf'")
        return s, c

    @functools.cached_property
    def _sorted_draws(self) -> np.ndarray:
        if self.key is None:
            raise ValueError("LinearNoise(method='mc'): pass key= (a jax.random key)")
        return np.sort(_draw(self.key, self.terms, self.gaussian_variance, int(self.samples)))

    @functools.cached_property
    def _grid(self) -> _Grid:
        if self.method == "pc":
            from .convolution import binned_law

            return binned_law(self.terms, self.gaussian_variance, self.bin_width, self.gamma)
        return _cf_grid(self.terms, self.gaussian_variance)


# ---------------------------------------------------------------------------------------------------
# Method internals
# ---------------------------------------------------------------------------------------------------


def _log_phi(t: np.ndarray, s: np.ndarray, g2: float) -> np.ndarray:
    t2 = np.asarray(t, dtype=np.float64) ** 2
    out = -0.5 * g2 * t2
    for chunk in np.array_split(s, max(1, s.size // 64)):
        out = out - np.sum(np.log1p(np.multiply.outer(t2, chunk**2)), axis=-1)
    return out


def _cf_step(s: np.ndarray, g2: float, sd: float) -> tuple[float, float]:
    """Grid step ``min(sd/1024, s_min/128)``, relaxed to what the tail of ``phi`` allows; and the ``t``
    beyond which ``phi`` underflows.

    The FFT grid in ``t`` reaches ``pi / h``; the CDF's truncation error is at most
    ``(1/pi) int_T^inf |phi(t)| / t dt``. Sums of many terms have a fast-decaying ``phi``, so a coarser
    step keeps the same accuracy (and the grid small); a single dominant Laplace term does not.
    """
    h = sd / 1024.0 if s.size == 0 else min(sd / 1024.0, s[0] / 128.0)
    t = np.geomspace(0.1 / sd, 1e7 / sd, 400)
    lp = _log_phi(t, s, g2)
    gone = np.flatnonzero(lp < -690.0)
    t_cut = float(t[gone[0]]) if gone.size else math.inf
    # tail integral of phi(t)/t on the log grid: int phi(t) d(log t), by a right Riemann sum (phi decreasing)
    dlog = np.log(t[1] / t[0])
    tail = np.cumsum(np.exp(lp)[::-1])[::-1] * dlog
    ok = np.flatnonzero(tail / math.pi < 1e-11)
    if ok.size:
        h = max(h, min(sd / 1024.0, math.pi / t[ok[0]]))
    return h, t_cut


def _cf_grid(s: np.ndarray, g2: float) -> _Grid:
    """Density and CDF on ``x_k = (k - G/2) h`` by one FFT each ([XX] eq. 20, Gil-Pelaez).

    With ``t_j = 2 pi j / (G h)`` (``j`` FFT-ordered), ``f(x_k) = Re FFT(phi(t_j) (-1)^j)_k / (G h)``, and
    ``F(x_k) - 1/2 - x_k / (G h) = Re FFT(phi(t_j) / (-i t_j) (-1)^j)_k / (G h)`` (``j != 0``): the periodic
    part of the CDF, a trapezoid rule for the Gil-Pelaez integral that is as accurate as the density.
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
    # phi decreases in |t|; beyond t_cut it is below 1e-300 and is not evaluated (sums of many terms:
    # a few hundred of the G frequencies carry the whole law)
    near = np.abs(t) <= t_cut
    phi = np.zeros(G)
    phi[near] = np.exp(_log_phi(t[near], s, g2))
    sign = np.where(j.astype(np.int64) % 2 == 0, 1.0, -1.0)
    pdf = np.fft.fft(phi * sign).real / (G * h)
    with np.errstate(divide="ignore", invalid="ignore"):
        odd = np.where(j == 0, 0.0, phi / (-1j * t))
    x = (np.arange(G) - G // 2) * h
    cdf = 0.5 + x / (G * h) + np.fft.fft(odd * sign).real / (G * h)
    cdf = np.maximum.accumulate(np.clip(cdf, 0.0, 1.0))
    return _Grid(float(x[0]), h, cdf, np.maximum(pdf, 0.0))


def _grid_cdf(grid: _Grid, x: np.ndarray) -> np.ndarray:
    """Cubic Hermite interpolation of the CDF between grid points (its derivative is the density)."""
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


def _grid_quantile(grid: _Grid, p: np.ndarray) -> np.ndarray:
    """Invert the interpolated CDF: bracket on the grid, then Newton steps on the cubic."""
    k = np.clip(np.searchsorted(grid.cdf, p, side="left") - 1, 0, grid.cdf.size - 2)
    F0, F1 = grid.cdf[k], grid.cdf[k + 1]
    lo = grid.x0 + k * grid.h
    r = np.where(F1 > F0, (p - F0) / np.where(F1 > F0, F1 - F0, 1.0), 0.5)
    x = lo + np.clip(r, 0.0, 1.0) * grid.h
    for _ in range(6):
        f = np.interp(x, grid.x0 + np.arange(grid.pdf.size) * grid.h, grid.pdf)
        step = (_grid_cdf(grid, x) - p) / np.where(f > 0, f, np.inf)
        x = np.clip(x - step, lo, lo + grid.h)
    return x


def _exact_cdf(x: np.ndarray, s: np.ndarray, c: np.ndarray) -> np.ndarray:
    z = np.abs(x)[..., None]
    tail = 0.5 * np.sum(c * np.exp(-z / s), axis=-1)  # P(E > |x|)
    tail = np.clip(tail, 0.0, 0.5)
    return np.where(x >= 0, 1.0 - tail, tail)


def _bisect_quantile(cdf, p: np.ndarray, sd: float) -> np.ndarray:
    lo = np.full(p.shape, -sd * 1e3)
    hi = np.full(p.shape, sd * 1e3)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = np.asarray(cdf(mid)) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(hi - lo <= 1e-13 * sd):
            break
    return 0.5 * (lo + hi)


def _draw(key, s: np.ndarray, g2: float, n: int, chunk: int = 1 << 18) -> np.ndarray:
    """``n`` draws of ``sum_k s_k L_k + g Z`` (standard Laplace ``L``, standard normal ``Z``), chunked."""
    dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    sj = jnp.asarray(s, dtype=dtype)
    out = np.empty(n)
    for i, start in enumerate(range(0, n, chunk)):
        size = min(chunk, n - start)
        k1, k2 = jax.random.split(jax.random.fold_in(key, i))
        e = np.zeros(size)
        if s.size:
            e = np.asarray(jax.random.laplace(k1, (size, s.size), dtype=dtype) @ sj, dtype=np.float64)
        if g2 > 0:
            e = e + math.sqrt(g2) * np.asarray(jax.random.normal(k2, (size,), dtype=dtype), dtype=np.float64)
        out[start : start + size] = e
    return out
