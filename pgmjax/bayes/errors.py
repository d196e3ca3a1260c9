"""The law of a weighted sum of independent Laplace (and Gaussian) errors.

A linear estimate ``theta_hat = A y`` of ``theta = Q x`` from noisy answers ``y = H x + noise`` errs by
``E = sum_k A_k noise_k`` (Xiao & Xiong, "Bayesian Inference under Differential Privacy", Lemma 4.1). With
Laplace rows of scale ``b_k`` the term ``A_k noise_k`` is Laplace of scale ``s_k = |A_k| b_k`` and ``E`` has the
characteristic function (section 4, eq. 21-22)

    phi(t) = prod_k 1 / (1 + s_k^2 t^2) * exp(-g^2 t^2 / 2),     g^2 = sum over Gaussian rows of A_k^2 sigma_k^2.

:class:`LinearNoise` holds that law and evaluates its CDF, quantiles, half-widths of symmetric intervals and
probabilities, by one of five methods (``method=``):

* ``"cf"`` (default): Fourier inversion of ``phi`` on an FFT grid (:mod:`pgmjax.bayes.fourier`), about
  1e-10 in the CDF. When at most three well-separated Laplace terms dominate (terms below ``1e-3 sd``
  join the Gaussian part), ``phi`` decays too slowly for a small grid and the closed form of "exact"
  is used instead.
* ``"exact"``: partial fractions, ``P(E > z) = 1/2 sum_k c_k exp(-z / s_k)`` with
  ``c_k = prod_{j != k} s_k^2 / (s_k^2 - s_j^2)``: the law is the signed mixture ``sum_k c_k Lap(s_k)``,
  convolved in closed form with the Gaussian part (distinct scales, at most 8 Laplace terms, refused
  when the coefficients cancel catastrophically).
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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri

from .fourier import cf_grid, grid_cdf, grid_quantile, log_char_fn

__all__ = ["LinearNoise", "METHODS"]

#: The methods :class:`LinearNoise` can evaluate its law by.
METHODS = ("cf", "exact", "pc", "mc", "gaussian")

_EXACT_MAX_TERMS = 8


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
        bin_width: ``"pc"`` grid width ``h`` (default ``sd / (4 sqrt(m))``,
            :func:`pgmjax.bayes.convolution.default_bin_width`); gamma: ``"pc"`` truncated mass.

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
            from ..checks import check_key

            check_key(self.key, "LinearNoise(method='mc')")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "laplace_scale", np.zeros_like(w) if b is None else b)
        object.__setattr__(self, "gaussian_sd", np.zeros_like(w) if g is None else g)
        if self.method == "exact":
            self._exact_coefficients  # raises now if the law has no usable closed form

    @classmethod
    def from_stddev(cls, weights, stddev, laplace, **options) -> "LinearNoise":
        """The law of ``E = sum_k w_k e_k`` from each row's noise standard deviation and family.

        This is how measurements describe their noise (:class:`~pgmjax.Measurement` has ``stddev`` and
        ``noise``): a Laplace row of standard deviation ``sigma_k`` has scale ``b_k = sigma_k / sqrt 2``
        (Xiao & Xiong, "Bayesian Inference under Differential Privacy", eq. 17: ``Var = 2 b^2``), a Gaussian
        row keeps ``sigma_k``.

        Args:
            weights: ``w``, shape ``(m,)`` (e.g. :attr:`pgmjax.uncertainty.Linearization.weights` of one cell).
            stddev: each row's noise standard deviation, a scalar or ``(m,)``.
            laplace: True for Laplace rows, False for Gaussian rows, a scalar or ``(m,)``.
            **options: ``method``, ``key``, ``samples``, ``bin_width``, ``gamma`` as for the constructor.

        Returns:
            A :class:`LinearNoise`.

        Example:
            >>> E = LinearNoise.from_stddev([0.8, 0.2], math.sqrt(2) * np.array([1.0, 2.0]), True)
            >>> round(E.half_width(0.95), 6), round(E.variance, 6)                  # [XX] two answers
            (2.619124, 1.6)
        """
        w = _vector(weights, "weights", None)
        if w is None or w.ndim != 1 or w.size == 0:
            raise ValueError(f"LinearNoise.from_stddev: weights must be a non-empty 1-D array, got {weights!r}")
        sd = _vector(stddev, "stddev", w.size)
        if np.any(sd < 0):
            raise ValueError(f"LinearNoise.from_stddev: stddev must be non-negative, got {sd}")
        try:
            lap = np.broadcast_to(np.asarray(laplace, dtype=bool), w.shape)
        except ValueError:
            raise ValueError(f"LinearNoise.from_stddev: laplace must be a boolean or {w.size} booleans") from None
        return cls(w, np.where(lap, sd / math.sqrt(2.0), 0.0), np.where(lap, 0.0, sd), **options)

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
        return np.exp(log_char_fn(t, self.terms, self.gaussian_variance))

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
            out = _mixture_cdf(x, *self._exact_coefficients)
        elif self.method == "mc":
            draws = self._sorted_draws
            out = np.searchsorted(draws, x, side="right") / draws.size
        elif self.method == "cf" and self._closed_form is not None:
            out = _mixture_cdf(x, *self._closed_form)
        else:
            out = grid_cdf(self._grid, x)
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
        elif self.method == "gaussian" or (self.terms.size == 0 and self.method in ("cf", "exact")):
            out = self.sd * ndtri(p)  # (without Laplace terms the law is exactly normal)
        elif self.method == "mc":
            out = np.quantile(self._sorted_draws, p)
        elif self.method == "exact" or (self.method == "cf" and self._closed_form is not None):
            out = _bisect_quantile(self.cdf, p, self.sd)
        else:
            out = grid_quantile(self._grid, p)
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
        from ..checks import check_key

        check_key(key, "LinearNoise.sample")
        shape = tuple(int(s) for s in np.atleast_1d(shape)) if shape != () else ()
        return _draw(key, self.terms, self.gaussian_variance, math.prod(shape)).reshape(shape)

    # ---- per-method state, computed once --------------------------------------------------------
    @functools.cached_property
    def _exact_coefficients(self) -> tuple[np.ndarray, np.ndarray, float]:
        s = self.terms
        if s.size > _EXACT_MAX_TERMS:
            raise ValueError(f"LinearNoise(method='exact'): {s.size} Laplace terms, at most {_EXACT_MAX_TERMS}; use 'cf'")
        c = _mixture_coefficients(s)
        if c is None:
            raise ValueError("LinearNoise(method='exact'): repeated (or nearly equal) scales make the partial fractions "
                             "cancel catastrophically; use 'cf'")
        return s, c, self.gaussian_variance

    @functools.cached_property
    def _closed_form(self) -> tuple[np.ndarray, np.ndarray, float] | None:
        """For "cf": the closed form when at most 3 Laplace terms matter (their ``phi`` decays too slowly
        for a small FFT grid) and they are well separated; terms below ``1e-3 sd`` join the Gaussian part."""
        s, sd = self.terms, self.sd
        small = s < 1e-3 * sd
        big = s[~small]
        if big.size > 3:
            return None
        c = _mixture_coefficients(big, limit=1e4)
        if c is None:
            return None
        return big, c, self.gaussian_variance + 2.0 * float(np.sum(s[small] ** 2))

    @functools.cached_property
    def _sorted_draws(self) -> np.ndarray:
        if self.key is None:
            raise ValueError("LinearNoise(method='mc'): pass key= (a jax.random key)")
        return np.sort(_draw(self.key, self.terms, self.gaussian_variance, int(self.samples)))

    @functools.cached_property
    def _grid(self):
        if self.method == "pc":
            from .convolution import binned_law

            return binned_law(self.terms, self.gaussian_variance, self.bin_width, self.gamma)
        return cf_grid(self.terms, self.gaussian_variance)


# ---------------------------------------------------------------------------------------------------
# Method internals
# ---------------------------------------------------------------------------------------------------


def _mixture_coefficients(s: np.ndarray, limit: float = 1e6) -> np.ndarray | None:
    """``c_k = prod_{j != k} s_k^2 / (s_k^2 - s_j^2)``: the law of ``sum_k Lap(s_k)`` is the signed mixture
    ``sum_k c_k Lap(s_k)`` (partial fractions of ``phi``). None when scales (nearly) repeat or
    ``sum |c_k| > limit`` (the cancellation would cost more than ``log10(limit)`` digits)."""
    if s.size and np.any(np.diff(s) <= 1e-6 * s[1:]):
        return None
    s2 = s**2
    diff = s2[:, None] - s2[None, :]
    np.fill_diagonal(diff, 1.0)
    ratio = s2[:, None] / diff
    np.fill_diagonal(ratio, 1.0)
    c = np.prod(ratio, axis=1)
    return None if np.sum(np.abs(c)) > limit else c


def _mixture_cdf(x: np.ndarray, s: np.ndarray, c: np.ndarray, g2: float) -> np.ndarray:
    """CDF of ``sum_k c_k Lap(s_k) + N(0, g2)``; for one term with ``g = sqrt(g2) > 0``
    ``F(x) = Phi(x/g) - 1/2 e^{g^2/(2 s^2)} [e^{-x/s} Phi(x/g - g/s) - e^{x/s} Phi(-x/g - g/s)]``
    (exponents combined in log space, so large ``g / s`` does not overflow)."""
    x = np.asarray(x, dtype=np.float64)[..., None]
    if g2 <= 0:
        tail = np.clip(0.5 * np.sum(c * np.exp(-np.abs(x) / s), axis=-1), 0.0, 0.5)  # P(E > |x|)
        return np.where(x[..., 0] >= 0, 1.0 - tail, tail)
    g = math.sqrt(g2)
    if s.size == 0:
        return ndtr(x[..., 0] / g)
    a = g2 / (2.0 * s**2)
    right = np.exp(a - x / s + log_ndtr(x / g - g / s))
    left = np.exp(a + x / s + log_ndtr(-x / g - g / s))
    out = ndtr(x[..., 0] / g) - 0.5 * np.sum(c * (right - left), axis=-1)
    return np.clip(out, 0.0, 1.0)


def _bisect_quantile(cdf, p: np.ndarray, sd: float) -> np.ndarray:
    """Quantiles by bisection inside the Chebyshev bracket ``|x| <= sd / sqrt(min(p, 1 - p))``."""
    reach = sd / np.sqrt(np.minimum(p, 1.0 - p))
    lo, hi = -reach, reach.copy()
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        below = np.asarray(cdf(mid)) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(hi - lo <= 1e-14 * sd):
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
