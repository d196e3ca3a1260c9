"""Kernel PCA's shrunk answers at finite alpha by matrix-free conjugate gradients, for very long histories.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 3.4: the shrunk answer ``sum_i y_i c_i z_i`` with ``y_i = alpha^2 lambda_i^2 /
(1 + alpha^2 lambda_i^2)`` equals the ridge (Gaussian-process) form

    value(q) = n nu_q + k_q^T (K + Sigma / alpha^2)^-1 y_tilde

(``K``, ``k_q`` centred by the universal query, ``y_tilde = y - n nu``), because ``W^T diag(y) W = S U
diag(1 / (lambda^2 + alpha^-2)) U^T S``. The system is solved by preconditioned conjugate gradients (Hestenes &
Stiefel 1952) and needs only products ``K v``, which never form ``K``: with ``h_C = Q_C^T v_C`` (a function
on clique ``C``) the rows on clique ``C'`` get ``Q_C' (p0_C' * sum_C E_p0[h_C | t_{C ∩ C'}])``; one product
costs ``O(#cliques^2 * max_C n_C)``, so histories of 10^5 rows (all two-way marginals of a census table) fit in
memory where the dense eigen-decomposition (``O(m^3)``, ``8 m^2`` bytes) does not. Host-side NumPy float64:
each product is a few hundred small contractions of different shapes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..data.domain import Domain
from ..queries.measurement import Measurement
from . import rows as rows_mod
from .pca import AnswerEstimate, check_alpha, check_inputs


class CGResult(NamedTuple):
    """Solution of ``(K + Sigma / alpha^2) X = B`` by preconditioned CG."""

    x: np.ndarray
    iterations: int
    residual: float  # largest relative residual norm over the right-hand sides
    converged: bool


@dataclass(frozen=True, eq=False)
class KernelOperator:
    """Products with the centred kernel ``K_tilde = K - nu nu^T`` of a history's rows, without forming ``K``.

    Attributes:
        blocks: the rows grouped by clique (:func:`pgmjax.history.rows.group_blocks`).
        prior: the complete product prior.
        nu: ``<q_j, u>_P`` of every row.
    """

    blocks: tuple
    prior: dict
    nu: np.ndarray
    offsets: np.ndarray = field(repr=False)

    @classmethod
    def build(cls, blocks, prior) -> "KernelOperator":
        nu = np.concatenate([rows_mod.mean(b, prior) for b in blocks])
        return cls(tuple(blocks), prior, nu, np.cumsum([0] + [b.rows for b in blocks]))

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def diagonal(self) -> np.ndarray:
        """``K_tilde_jj`` (for the Jacobi preconditioner)."""
        return np.concatenate([rows_mod.gram(b, b, self.prior, diagonal=True) for b in self.blocks]) - self.nu**2

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """``K_tilde @ v`` for ``v`` of shape ``(m,)`` or ``(m, k)``.

        Example:
            >>> dom = Domain({"a": 2, "b": 3})
            >>> blocks, _ = rows_mod.group_blocks(dom, [Measurement(("a",), [1.0, 2.0]), Measurement(("b",), [1.0, 2, 3])])
            >>> op = KernelOperator.build(blocks, rows_mod.uniform_prior(dom))
            >>> bool(np.allclose(op.matvec(np.eye(5)), rows_mod.gram_matrix(blocks, op.prior) - np.outer(op.nu, op.nu)))
            True
        """
        v = np.asarray(v, np.float64)
        vec = v.ndim == 1
        V = v[:, None] if vec else v
        k = V.shape[1]
        sources: dict[tuple, np.ndarray] = {}  # canonical clique -> (k, *shape) function sum_r v_r q_r
        for b, lo, hi in zip(self.blocks, self.offsets[:-1], self.offsets[1:]):
            canon = tuple(sorted(b.clique))
            t = _adjoint(b, V[lo:hi])
            t = np.transpose(t, (0, *(1 + b.clique.index(a) for a in canon)))
            sources[canon] = sources[canon] + t if canon in sources else t
        cache: dict[tuple, np.ndarray] = {}
        out = np.empty((self.size, k))
        targets: dict[tuple, np.ndarray] = {}
        for b, lo, hi in zip(self.blocks, self.offsets[:-1], self.offsets[1:]):
            if b.clique not in targets:
                total = np.zeros((k, *b.shape))
                for c, h in sources.items():
                    total = total + self._conditional(c, h, b.clique, cache)
                targets[b.clique] = total * rows_mod.prior_table(b.clique, self.prior)[None]
            out[lo:hi] = _apply(b, targets[b.clique])
        out -= np.outer(self.nu, self.nu @ V)
        return out[:, 0] if vec else out

    def _conditional(self, c: tuple, h: np.ndarray, target: tuple, cache: dict) -> np.ndarray:
        """``E_p0[h | t_S]`` with ``S = c ∩ target``, broadcast to the target's axes, ``(k, *target_shape)``."""
        shared = tuple(a for a in c if a in target)
        key = (c, shared)
        if key not in cache:
            x = h
            for i in range(len(c) - 1, -1, -1):  # contract the attributes outside the target with their prior
                if c[i] not in shared:
                    x = np.tensordot(x, self.prior[c[i]], axes=([1 + i], [0]))
            cache[key] = x  # axes (k, *shared) in c's order
        x = cache[key]
        order = [shared.index(a) for a in target if a in shared]
        x = np.transpose(x, (0, *(1 + i for i in order)))
        shape = (x.shape[0], *(n if a in shared else 1 for a, n in zip(target, self._shape(target))))
        return x.reshape(shape)

    def _shape(self, clique):
        return tuple(self.prior[a].size for a in clique)

    def cross(self, block: rows_mod.RowBlock) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(k_tilde (rows_q, m), nu_q, <q,q>_P)`` of a query block against the history's rows."""
        nu_q = rows_mod.mean(block, self.prior)
        k = np.concatenate([rows_mod.gram(block, b, self.prior) for b in self.blocks], axis=1)
        return k - np.outer(nu_q, self.nu), nu_q, rows_mod.gram(block, block, self.prior, diagonal=True)


def conjugate_gradients(op: KernelOperator, shift: np.ndarray, b: np.ndarray, tol: float = 1e-8, maxiter: int = 1000) -> CGResult:
    """Solve ``(K_tilde + diag(shift)) X = B`` by Jacobi-preconditioned CG (SciPy's), all columns in one solve.

    The operator is only ever applied (``op.matvec``), never formed: SciPy's
    :func:`scipy.sparse.linalg.cg` runs on a :class:`scipy.sparse.linalg.LinearOperator` around it, with
    the diagonal of ``K_tilde + diag(shift)`` as the Jacobi preconditioner.

    Args:
        op: the history's kernel operator.
        shift: the diagonal added to ``K_tilde`` (``sigma^2 / alpha^2`` per row), shape ``(m,)``.
        b: right-hand side(s), ``(m,)`` or ``(m, k)``.
        tol: relative residual norm at which a column stops.
        maxiter: the most CG iterations per column.

    Returns:
        A :class:`CGResult`: the solution (shaped like ``b``), the iterations, the largest relative residual
        norm over the columns (recomputed from the solution), and whether the solve met its tolerance (every
        column's relative residual at most ``tol``) within ``maxiter``.

    Example:
        >>> dom = Domain({"a": 3})
        >>> blocks, _ = rows_mod.group_blocks(dom, [Measurement(("a",), [1.0, 2.0, 3.0])])
        >>> op = KernelOperator.build(blocks, rows_mod.uniform_prior(dom))
        >>> r = conjugate_gradients(op, np.full(3, 0.1), np.array([1.0, 0.0, -1.0]))
        >>> bool(np.allclose((op.matvec(r.x) + 0.1 * r.x), [1.0, 0.0, -1.0]))
        True
    """
    from scipy.sparse.linalg import LinearOperator, cg

    B = b[:, None] if b.ndim == 1 else b
    m, k = B.shape
    # All columns in one solve (one blocked product per iteration, not one per column): CG on the block-diagonal
    # system diag(A, ..., A) with every column scaled to unit norm, stopped at a Frobenius residual of
    # tol / sqrt(k), which bounds each column's relative residual by tol.
    norms = np.linalg.norm(B, axis=0)
    scale = np.where(norms > 0, norms, 1.0)
    inverse_diagonal = (1.0 / (np.maximum(op.diagonal(), 0.0) + shift))[:, None]

    def system(v):
        V = v.reshape(m, k)
        return (op.matvec(V) + shift[:, None] * V).reshape(-1)

    steps = [0]
    solution, info = cg(
        LinearOperator((m * k, m * k), matvec=system, dtype=np.float64), (B / scale).reshape(-1),
        rtol=tol / math.sqrt(k), atol=0.0, maxiter=maxiter,
        M=LinearOperator((m * k, m * k), matvec=lambda v: (inverse_diagonal * v.reshape(m, k)).reshape(-1), dtype=np.float64),
        callback=lambda _x: steps.__setitem__(0, steps[0] + 1))
    X = solution.reshape(m, k) * scale
    residual = B - (op.matvec(X) + shift[:, None] * X)
    worst = float(np.max(np.linalg.norm(residual, axis=0) / np.maximum(norms, 1e-300)))
    iterations, converged = steps[0], info == 0
    x = X[:, 0] if b.ndim == 1 else X
    return CGResult(x, iterations, worst, bool(converged))


@dataclass(frozen=True, eq=False)
class RidgeFit:
    """Kernel PCA at one finite alpha in ridge form (see :func:`kernel_ridge`)."""

    domain: Domain
    op: KernelOperator
    total: float
    alpha: float
    sigma: np.ndarray  # block row order
    order: np.ndarray
    coef: np.ndarray  # (K_tilde + Sigma / alpha^2)^-1 y_tilde, block row order
    solve: CGResult
    tol: float
    maxiter: int

    def answer(self, query, variance: bool = True) -> AnswerEstimate:
        """Answer a query at this fit's alpha (value; with ``variance``, one CG solve per row for the
        variance, the posterior variance and the bias norm). ``residual_norm2`` and ``shrink_bias_norm2``
        need the eigen-decomposition: None here; their sum is ``bias_norm2``.

        Example:
            >>> dom = pj.Domain({"a": 2, "b": 2})
            >>> fit = kernel_ridge(dom, [pj.Measurement(("a",), [52.0, 47.0], stddev=2.0)], alpha=1e6, total=100)
            >>> fit.answer({"a": np.array([1.0, 0.0])}).value.round(3)
            array([52.5])
        """
        block = rows_mod.block_of_query(self.domain, query, "RidgeFit.answer")
        k, nu_q, qq = self.op.cross(block)
        value = self.total * nu_q + k @ self.coef
        if not variance:
            return AnswerEstimate(value, None, None, None, None, None)
        a = conjugate_gradients(self.op, self.sigma**2 / self.alpha**2, k.T, self.tol, self.maxiter).x  # (m, rows)
        a = a.reshape(self.op.size, -1)
        var = np.sum(a * a * (self.sigma**2)[:, None], axis=0)
        centred = qq - nu_q**2
        ka = np.sum(k.T * a, axis=0)
        post = self.alpha**2 * np.maximum(centred - ka, 0.0)
        bias = np.maximum(centred - 2 * ka + np.sum(a * self.op.matvec(a), axis=0), 0.0)
        return AnswerEstimate(value, var, None, None, post, bias)

    def answer_past(self) -> np.ndarray:
        """Answers to the past rows (measurements' row order): ``n nu + K_tilde coef``, one product."""
        v = self.total * self.op.nu + self.op.matvec(self.coef)
        out = np.empty_like(v)
        out[self.order] = v
        return out


def kernel_ridge(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    alpha: float,
    total: float | None = None,
    prior=None,
    tol: float = 1e-8,
    maxiter: int = 1000,
) -> RidgeFit:
    """Kernel PCA's answers at a finite alpha without the eigen-decomposition ([CZB] section 3.4, ridge form).

    Args:
        domain, measurements, total, prior: as in :func:`pgmjax.history.kernel_pca`.
        alpha: the shrinkage (finite and positive; alpha = inf needs the pseudo-inverse: use ``kernel_pca``).
        tol: relative residual of the CG solves.
        maxiter: CG iteration cap.

    Returns:
        A :class:`RidgeFit`; ``fit.answer(query)`` equals ``kernel_pca(...).answer(query, alpha)``.

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 2})
        >>> ms = [pj.Measurement(("a",), [52.0, 47.0], stddev=2.0), pj.Measurement(("b",), [57.0, 45.0], stddev=3.0)]
        >>> fit = kernel_ridge(dom, ms, alpha=10.0, total=100)
        >>> fit.solve.converged
        True
    """
    where = "kernel_ridge"
    measurements, total, _ = check_inputs(domain, measurements, total, where)
    alpha = check_alpha(alpha, where)
    if alpha == math.inf:
        raise ValueError(f"{where}: alpha must be finite (alpha = inf is least squares: use kernel_pca)")
    prior = rows_mod.check_prior(domain, prior, where)
    blocks, order = rows_mod.group_blocks(domain, measurements)
    op = KernelOperator.build(blocks, prior)
    y = np.concatenate([m.y for m in measurements])[order]
    sigma = np.concatenate([m.row_stddev() for m in measurements])[order]
    sol = conjugate_gradients(op, sigma**2 / alpha**2, y - total * op.nu, tol, maxiter)
    if not sol.converged:
        raise FloatingPointError(
            f"{where}: conjugate gradients reached {maxiter} iterations at relative residual {sol.residual:.2e} "
            f"(tol {tol}); raise maxiter or use a smaller alpha (better conditioned)"
        )
    return RidgeFit(domain, op, total, alpha, sigma, order, sol.x, sol, tol, maxiter)


def _adjoint(b: rows_mod.RowBlock, V: np.ndarray) -> np.ndarray:
    """``Q^T V`` for a block of rows, batched over V's columns: ``(k, *shape)``."""
    if b.kind == "identity":
        return V.T.reshape((V.shape[1], *b.shape))
    if b.kind == "dense":
        return np.tensordot(V, b.query, axes=(0, 0))
    return np.stack([b.adjoint(V[:, j]) for j in range(V.shape[1])])


def _apply(b: rows_mod.RowBlock, T: np.ndarray) -> np.ndarray:
    """``Q T`` for functions ``T`` of shape ``(k, *shape)`` on the block's clique: ``(rows, k)``."""
    if b.kind == "identity":
        return T.reshape(T.shape[0], -1).T
    if b.kind == "dense":
        nd = len(b.shape)
        return np.tensordot(b.query, T, axes=(tuple(range(1, nd + 1)), tuple(range(1, nd + 1))))
    return np.stack([b.apply(T[j]) for j in range(T.shape[0])], axis=1)
