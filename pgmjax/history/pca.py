"""Kernel PCA of a query history: eigen-queries, least-squares answers and shrinkage.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 3: past answers ``y = Q x + e`` with ``Cov(e) = Sigma`` are whitened and the
kernel ``K_ij = <q_i, q_j>_P`` of the past queries is eigen-decomposed (Prop. 1-3, eq. 4-8): the eigen-queries
``v_i`` are orthonormal, span the row space of ``Q``, and have uncorrelated least-squares answers ``z_i`` with
variance ``1/lambda_i^2``. A new query ``q = sum_i c_i v_i + q_bias`` gets ``sum_i y_i c_i z_i`` with the shrink
weights ``y_i = alpha^2 lambda_i^2 / (1 + alpha^2 lambda_i^2)`` (section 3.4, eq. 16-17; alpha = inf gives
generalised least squares). The record count ``n`` is an exact constraint, imposed by deflating the universal
query (``K - nu nu^T``, ``y - n nu``, the limit of the paper's section 3.1 and footnote 5).

Everything uses only inner products between queries (:mod:`pgmjax.history.rows`): the cost depends on the
number of past rows ``m`` (an ``m x m`` eigenproblem), never on the domain size. For ``m`` beyond a few
thousand rows, :mod:`pgmjax.history.ridge` answers the same estimator at finite alpha by conjugate gradients.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..data.domain import Domain
from ..queries.measurement import Measurement, estimate_total, validate_measurements
from . import rows as rows_mod


class AnswerEstimate(NamedTuple):
    """Answers to the rows of a query from the history.

    Attributes:
        value: the answers (one per row).
        variance: sampling variance of ``value`` (not its MSE: the biases below are unknown in sign and size).
        residual_norm2: ``||q - proj(q)||_P^2``, the part of each row outside the span of the past queries
            (0 for an estimable row; the value then answers the projection, not ``q``). None where unknown
            (conjugate-gradient form).
        shrink_bias_norm2: ``sum_i (1 - y_i)^2 c_i^2``, the part shrunk away at finite alpha. None where unknown.
        posterior_var: the Gaussian-process posterior variance ``alpha^2 (<q,q> - nu_q^2 - k^T (K + Sigma /
            alpha^2)^-1 k)``, which also covers directions the history never measured; None at alpha = inf.
        bias_norm2: ``||q - q'||_P^2`` for the query ``q'`` actually answered (residual plus shrinkage part).
    """

    value: np.ndarray
    variance: np.ndarray
    residual_norm2: np.ndarray | None
    shrink_bias_norm2: np.ndarray | None
    posterior_var: np.ndarray | None
    bias_norm2: np.ndarray


def shrink_weights(lam2: np.ndarray, alpha: float) -> np.ndarray:
    """The shrink weights ``y_i = alpha^2 lambda_i^2 / (1 + alpha^2 lambda_i^2)`` ([CZB] section 3.4, minimiser of
    eq. 17 with the alpha^2 on its first term restored); all ones at ``alpha = inf``.

    Example:
        >>> shrink_weights(np.array([0.125, 0.0277777778]), 10.0).round(6)
        array([0.925926, 0.735294])
    """
    lam2 = np.asarray(lam2, np.float64)
    if alpha == math.inf:
        return np.ones_like(lam2)
    a2 = float(alpha) ** 2
    return a2 * lam2 / (1.0 + a2 * lam2)


@dataclass(frozen=True, eq=False)
class EigenQueryFit:
    """The eigen-queries of a history (see :func:`kernel_pca`).

    Attributes:
        domain, prior (complete product prior), total (n, exact).
        blocks: the past rows grouped by clique; ``order`` maps block rows to the measurements' rows.
        W: ``(r, m)`` whitened eigen-projection (rows of ``W Q`` are the eigen-queries), in block row order.
        z: ``(r,)`` least-squares answers of the eigen-queries (deflated by the total).
        lam2: ``(r,)`` eigenvalues ``lambda_i^2`` (descending); ``1/lam2`` are the eigen-answers' variances.
        nu: ``(m,)`` ``<q_j, u>_P``, block row order.
        sigma: ``(m,)`` noise standard deviations, block row order.
        y: ``(m,)`` answers, block row order.
        warnings: notes recorded while fitting (e.g. an estimated total).
    """

    domain: Domain
    prior: dict
    total: float
    blocks: tuple
    order: np.ndarray
    W: np.ndarray
    z: np.ndarray
    lam2: np.ndarray
    nu: np.ndarray
    sigma: np.ndarray
    y: np.ndarray
    warnings: tuple = field(default=())

    @property
    def rank(self) -> int:
        return int(self.lam2.size)

    def cross(self, block: rows_mod.RowBlock) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(k_tilde, nu_q, <q,q>_P)`` of a query block against the past rows (centred inner products)."""
        nu_q = rows_mod.mean(block, self.prior)
        k = np.concatenate([rows_mod.gram(block, b, self.prior) for b in self.blocks], axis=1) if self.blocks else np.zeros((block.rows, 0))
        qq = rows_mod.gram(block, block, self.prior, diagonal=True)
        return k - np.outer(nu_q, self.nu), nu_q, qq

    def answer(self, query, alpha: float = math.inf) -> AnswerEstimate:
        """Answer a query from the history alone ([CZB] section 3.3-3.4; no privacy cost).

        Args:
            query: a :class:`~pgmjax.Measurement` (its rows), a factored dict ``{attr: factor}`` or a pair
                ``(clique, array)`` (see :func:`pgmjax.history.rows.block_of_query`).
            alpha: the bias-variance knob; ``math.inf`` (default) gives the generalised least-squares answer
                (the BLUE for estimable rows), ``alpha -> 0`` the prior's answer ``n E_{p0}[q]``.

        Returns:
            An :class:`AnswerEstimate` (arrays with one entry per row of the query).

        Example:
            >>> dom = pj.Domain({"a": 2, "b": 2})
            >>> fit = kernel_pca(dom, [pj.Measurement(("a",), [52.0, 47.0], stddev=2.0)], total=100)
            >>> fit.answer({"a": np.array([1.0, 0.0])}).value.round(3)
            array([52.5])
        """
        alpha = check_alpha(alpha, "EigenQueryFit.answer")
        block = rows_mod.block_of_query(self.domain, query, "EigenQueryFit.answer")
        k, nu_q, qq = self.cross(block)
        c = k @ self.W.T  # (rows, r): coordinates of q on the eigen-queries
        y = shrink_weights(self.lam2, alpha)
        value = self.total * nu_q + c @ (y * self.z)
        variance = (c * c) @ (y * y / self.lam2)
        centred = qq - nu_q * nu_q
        residual = np.maximum(centred - np.sum(c * c, axis=1), 0.0)
        shrink_bias = (c * c) @ ((1.0 - y) ** 2)
        posterior = None if alpha == math.inf else alpha**2 * np.maximum(centred - (c * c) @ y, 0.0)
        return AnswerEstimate(value, variance, residual, shrink_bias, posterior, residual + shrink_bias)

    def answer_past(self, alpha: float = math.inf) -> np.ndarray:
        """Answers to the past rows themselves (in the measurements' row order), at ``alpha``."""
        alpha = check_alpha(alpha, "EigenQueryFit.answer_past")
        kt = self._kernel_rows()
        value = self.total * self.nu + kt @ (shrink_weights(self.lam2, alpha) * self.z)
        out = np.empty_like(value)
        out[self.order] = value
        return out

    def _kernel_rows(self) -> np.ndarray:
        """``K_tilde W^T`` (m x r): the eigen-coordinates ``c`` of every past row, without ``K``."""
        # W^T = S U / lam  and  G U = U lam^2 with G = S K_tilde S  =>  K_tilde W^T = S^-2 W^T lam^2.
        return (self.sigma[:, None] * (self.W.T * self.lam2[None, :]) * self.sigma[:, None])


def kernel_pca(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    total: float | None = None,
    prior=None,
    rank_tol: float = 1e-10,
) -> EigenQueryFit:
    """Eigen-queries of a history of noisy linear answers ([CZB] section 3, eq. 4-8, with exact deflation).

    Args:
        domain: the :class:`~pgmjax.Domain`.
        measurements: the past answers: every row of every :class:`~pgmjax.Measurement` is one past query
            with independent noise of the measurement's ``stddev``.
        total: the public record count ``n`` (an exact constraint). None plugs in
            :func:`pgmjax.estimate_total`, treated as exact (recorded in ``fit.warnings``: that estimate reuses
            the same noise; release one noisy count and pass it as a measurement to avoid it).
        prior: a product prior ``{attribute: probabilities}`` defining the inner product ``<.,.>_P`` (eq. 18);
            default uniform. Attributes not named are uniform.
        rank_tol: eigenvalues below ``rank_tol * largest`` are dropped (non-estimable directions).

    Returns:
        An :class:`EigenQueryFit`; ``fit.answer(query, alpha)`` answers any linear query.

    Raises:
        ValueError: no measurements, an invalid total, prior or rank_tol.

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 2})
        >>> ms = [pj.Measurement(("a",), [52.0, 47.0], stddev=2.0), pj.Measurement(("b",), [57.0, 45.0], stddev=3.0)]
        >>> fit = kernel_pca(dom, ms, total=100)
        >>> fit.rank, fit.answer({"b": np.array([1.0, 0.0])}).value.round(2)
        (2, array([56.]))
    """
    where = "kernel_pca"
    measurements, total, notes = check_inputs(domain, measurements, total, where)
    if not (isinstance(rank_tol, (int, float)) and 0 < rank_tol < 1):
        raise ValueError(f"{where}: rank_tol must be in (0, 1), got {rank_tol!r}")
    prior = rows_mod.check_prior(domain, prior, where)
    blocks, order = rows_mod.group_blocks(domain, measurements)
    y = np.concatenate([m.y for m in measurements])[order]
    sigma = np.concatenate([m.row_stddev() for m in measurements])[order]
    nu = np.concatenate([rows_mod.mean(b, prior) for b in blocks])
    kt = rows_mod.gram_matrix(blocks, prior) - np.outer(nu, nu)
    W, z, lam2 = eigen_fit(kt, y - total * nu, sigma, rank_tol)
    return EigenQueryFit(domain, prior, total, blocks, order, W, z, lam2, nu, sigma, y, notes)


def eigen_fit(kt: np.ndarray, yt: np.ndarray, sigma: np.ndarray, rank_tol: float = 1e-10):
    """KERNEL_PCA_FIT on a deflated kernel: ``(W, z, lam2)`` ([CZB] eq. 5-8).

    Args:
        kt: the deflated kernel ``K - nu nu^T`` (m x m).
        yt: the deflated answers ``y - n nu``.
        sigma: noise standard deviations.
        rank_tol: relative eigenvalue cut.

    Returns:
        ``W`` (r x m), ``z = W yt`` (r,), ``lam2`` (r,), descending.

    Example:
        >>> W, z, lam2 = eigen_fit(np.array([[0.25]]), np.array([2.0]), np.array([2.0]))
        >>> lam2, z
        (array([0.0625]), array([4.]))
    """
    s = 1.0 / sigma
    g = s[:, None] * kt * s[None, :]
    g = 0.5 * (g + g.T)
    if g.size == 0:
        return np.zeros((0, 0)), np.zeros(0), np.zeros(0)
    lam2, u = np.linalg.eigh(g)
    lam2, u = lam2[::-1], u[:, ::-1]
    top = lam2[0] if lam2.size else 0.0
    keep = lam2 > rank_tol * top if top > 0 else np.zeros(lam2.shape, bool)
    W = (u[:, keep] / np.sqrt(lam2[keep])).T * s[None, :]
    return W, W @ yt, lam2[keep]


def check_alpha(alpha, where: str) -> float:
    """``alpha`` as a positive float (``math.inf`` allowed: least squares); TypeError or ValueError naming ``where``."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: alpha must be a number (math.inf allowed), got {alpha!r}") from None
    if math.isnan(a) or a <= 0:
        raise ValueError(f"{where}: alpha must be positive (math.inf for least squares), got {alpha!r}")
    return a


def check_inputs(domain: Domain, measurements, total, where: str):
    """Validate domain, measurements and total; return ``(measurements, total, notes)``."""
    if not isinstance(domain, Domain):
        raise TypeError(f"{where}: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    measurements = list(measurements)
    if not measurements:
        raise ValueError(f"{where}: no measurements: the history is empty")
    validate_measurements(domain, measurements, where)
    notes = ()
    if total is None:
        total, var = estimate_total(measurements)
        msg = (
            f"{where}: total not given; using the inverse-variance estimate {total:.6g} (std {math.sqrt(var):.3g}) as "
            "if exact. It reuses the same noise: pass total= (public n) or release one noisy count instead."
        )
        warnings.warn(msg, stacklevel=3)
        notes = (msg,)
    try:
        total = float(total)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: total must be a number, got {total!r}") from None
    if not math.isfinite(total) or total <= 0:
        raise ValueError(f"{where}: total must be positive and finite, got {total}")
    return measurements, total, notes
