"""The matrix mechanism's expected error, evaluated on HDMM's implicit workloads and strategies (NumPy).

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018, the expected total squared error of the matrix mechanism::

    Err(W, A) = (2 / eps^2) * ||A||_1^2 * trace[(A^T A)^+ W^T W]      (Laplace; ||A||_1 the max column L1 norm)
    Err(W, A) = sigma^2 * ||A||_{1->2}^2 * trace[(A^T A)^+ W^T W]    (Gaussian; max column L2 norm)

when ``A`` supports ``W`` (``W A^+ A = W``), infinity otherwise. The paper's decompositions are used: a
Kronecker strategy on a Kronecker workload has the product of the per-attribute errors, a union workload
sums its terms, a union strategy gives the OPT_+ upper bound (each workload term answered from its best
strategy term), and a marginals strategy is evaluated in the marginals algebra. :func:`dense_expected_error`
is the brute-force reference on explicit matrices.

Example:
    >>> W = KronWorkload(("x",), (prefix(8),))
    >>> expected_error(W, KronStrategy(("x",), (identity(8),)), eps=1.0)   # (2/eps^2) n(n+1)/2
    72.0
"""

from __future__ import annotations

import math

import numpy as np

from .factors import check_noise, col_norm, merge_sizes
from .factors import identity, prefix  # noqa: F401  (the docstring examples use them)
from .marginals_gram import MarginalsGram, mult_dims, superset_sum
from .strategies import KronStrategy, MarginalsStrategy, UnionStrategy
from .workloads import KronWorkload, UnionWorkload, as_union

__all__ = ["expected_error", "factor_error", "dense_expected_error"]

# A workload direction outside the strategy's row space, relative to the Gram's trace, beyond which the
# strategy is taken not to support the workload (round-off of an SVD stays far below it).
_SUPPORT_TOL = 1e-8


class FactorInfo:
    """One SVD of a strategy factor ``A = U S V^T``, for ``trace[(A^T A)^+ G]`` and the support test.

    ``trace[(A^T A)^+ G] = sum_k (v_k^T G v_k) / s_k^2`` over the kept singular vectors and the residual
    ``||W (I - A^+ A)||_F^2 = sum_k v_k^T G v_k`` over the null-space ones: sums of non-negative terms (no
    cancellation between huge entries of a pseudo-inverse), with one rank threshold (NumPy's
    ``matrix_rank`` default), so a nearly singular strategy is charged its large ``1 / s^2`` instead of
    being silently truncated.
    """

    __slots__ = ("v", "s", "v_null")

    def __init__(self, A: np.ndarray):
        _, s, vt = np.linalg.svd(A, full_matrices=True)
        r = int(np.sum(s > s.max(initial=0.0) * max(A.shape) * np.finfo(np.float64).eps))
        self.v, self.s, self.v_null = vt[:r].T, s[:r], vt[r:].T

    def trace(self, G: np.ndarray) -> float:
        """``trace[(A^T A)^+ G]``, or ``inf`` when ``A`` does not support a workload with Gram ``G``."""
        tg = float(np.trace(G))
        if tg <= 0:
            return 0.0
        residual = float(np.sum((G @ self.v_null) * self.v_null)) if self.v_null.size else 0.0
        if residual > _SUPPORT_TOL * tg:
            return math.inf
        quad = np.maximum(np.sum((G @ self.v) * self.v, axis=0), 0.0)
        return float(np.sum(quad / self.s**2))


def factor_error(gram, A, noise: str = "laplace") -> float:
    """One-attribute error factor ``||A||^2 * trace[(A^T A)^+ G]`` (``inf`` if ``A`` does not support ``G``).

    Args:
        gram: the workload Gram ``W^T W`` (``n x n``).
        A: the strategy matrix (``m x n``).
        noise: ``"laplace"`` (``||A||_1``) or ``"gaussian"`` (``||A||_{1->2}``).

    Returns:
        The data-independent error factor (multiply by ``2/eps^2`` or ``sigma^2`` for the expected total
        squared error).
    """
    check_noise(noise)
    A = np.asarray(A, dtype=np.float64)
    G = np.asarray(gram, dtype=np.float64)
    if G.shape != (A.shape[1], A.shape[1]):
        raise ValueError(f"factor_error: Gram shape {G.shape} does not match the strategy's {A.shape[1]} columns")
    return col_norm(A, noise) ** 2 * FactorInfo(A).trace(G)


def _scale(noise: str, eps, sigma) -> float:
    if noise == "laplace":
        if sigma is not None:
            raise ValueError("sigma is for noise='gaussian'; give eps for Laplace noise")
        return 1.0 if eps is None else 2.0 / float(eps) ** 2
    if eps is not None:
        raise ValueError("eps is for noise='laplace'; give sigma (noise std per unit L2 sensitivity) for Gaussian noise")
    return 1.0 if sigma is None else float(sigma) ** 2


def _kron_trace(term: KronWorkload, strat: KronStrategy, infos: dict, sizes: dict) -> float:
    """``trace[(A^T A)^+ W^T W]`` of one workload term on one Kronecker strategy (both expanded with Totals)."""
    if term.weight == 0:
        return 0.0
    grams = dict(zip(term.clique, term.grams()))
    factors = dict(zip(strat.clique, strat.factors))
    out = term.weight**2 / strat.weight**2
    for a in dict.fromkeys(term.clique + strat.clique):
        n = sizes[a]
        G = grams[a] if a in grams else np.ones((n, n))
        key = (id(strat), a)
        if key not in infos:
            infos[key] = FactorInfo(factors[a] if a in factors else np.ones((1, n)))
        e = infos[key].trace(G)
        if e == 0.0:
            return 0.0
        out *= e
    return out


def _sizes_of(workload: UnionWorkload, strategy) -> dict:
    sizes = dict(workload.sizes)
    if isinstance(strategy, KronStrategy):
        merge_sizes(sizes, strategy.clique, strategy.sizes, "workload and strategy")
    elif isinstance(strategy, UnionStrategy):
        for t in strategy.terms:
            merge_sizes(sizes, t.clique, t.sizes, "workload and strategy")
    return sizes


def expected_error(
    workload,
    strategy,
    *,
    noise: str = "laplace",
    eps: float | None = None,
    sigma: float | None = None,
    per_query: bool = False,
) -> float:
    """Expected total squared error of the matrix mechanism (VLDB 2018).

    ``||A||^2 * trace[(A^T A)^+ W^T W]``, times ``2/eps^2`` (Laplace, when ``eps`` is given) or ``sigma^2``
    (Gaussian, ``sigma`` the noise standard deviation per unit of L2 sensitivity). Kronecker structure is
    exploited: a Kronecker strategy on a Kronecker workload has error ``prod_i`` of the factor errors, a union
    workload sums its terms (weighted by ``w_j^2``), and a marginals strategy is evaluated inside the
    marginals algebra. ``inf`` when the strategy does not support the workload.

    Args:
        workload: :class:`KronWorkload` or :class:`UnionWorkload`.
        strategy: :class:`KronStrategy`, :class:`UnionStrategy` or :class:`MarginalsStrategy`. For a
            :class:`UnionStrategy` the value is the OPT_+ **upper bound**: every workload term answered from
            its best single strategy term (the joint least squares can only do better);
            :func:`dense_expected_error` gives the exact value on small domains.
        noise: ``"laplace"`` (L1 sensitivity) or ``"gaussian"`` (L2).
        eps, sigma: optional noise calibration (see above); without them, the data-independent factor.
        per_query: divide by the number of workload queries.

    Returns:
        The expected (total or per-query) squared error.

    Example:
        >>> W = KronWorkload(("x",), (prefix(8),))
        >>> expected_error(W, KronStrategy(("x",), (identity(8),)), eps=1.0)   # (2/eps^2) n(n+1)/2
        72.0
    """
    check_noise(noise)
    W = as_union(workload)
    if isinstance(strategy, MarginalsStrategy):
        gw = MarginalsGram.from_workload(W, strategy.attributes, dict(zip(strategy.attributes, strategy.sizes)))
        if gw.sizes != strategy.sizes:
            raise ValueError(f"workload sizes {gw.sizes} differ from the strategy's {strategy.sizes}")
        tr = _marginals_trace_np(strategy.theta**2, gw)
        err = strategy.sensitivity(noise) ** 2 * tr
    elif isinstance(strategy, KronStrategy):
        sizes = _sizes_of(W, strategy)
        infos: dict = {}
        err = strategy.sensitivity(noise) ** 2 * sum(_kron_trace(t, strategy, infos, sizes) for t in W.terms)
    elif isinstance(strategy, UnionStrategy):
        sizes = _sizes_of(W, strategy)
        infos = {}
        tr = sum(min(_kron_trace(t, s, infos, sizes) for s in strategy.terms) for t in W.terms)
        err = strategy.sensitivity(noise) ** 2 * tr
    else:
        raise TypeError(f"expected a KronStrategy, UnionStrategy or MarginalsStrategy, got {type(strategy).__name__}")
    err *= _scale(noise, eps, sigma)
    return err / W.rows if per_query else err


def _marginals_trace_np(u: np.ndarray, gw: MarginalsGram) -> float:
    """``trace[M(u)^+ G_w]`` in the algebra, ``inf`` if ``M(u)`` does not support ``G_w``."""
    mult, dims = mult_dims(gw.sizes)
    lam_u = superset_sum(u * mult, len(gw.sizes), xp=np)
    lam_w = gw.eigenvalues()
    live = (dims > 0) & (lam_w > 1e-12 * max(lam_w.max(), 1e-300))
    dead = lam_u <= 1e-12 * max(lam_u.max(), 1e-300)
    if np.any(live & dead):
        return math.inf
    return float(np.sum(np.where(live, dims * lam_w / np.where(live, lam_u, 1.0), 0.0)))


def dense_expected_error(W, A, *, noise: str = "laplace", eps: float | None = None, sigma: float | None = None) -> float:
    """Brute-force ``||A||^2 * trace[(A^T A)^+ W^T W]`` from explicit matrices (the reference for small sizes).

    Args:
        W: workload matrix ``(r, N)``; A: strategy matrix ``(m, N)``.

    Returns:
        The expected total squared error (``inf`` when ``W A^+ A != W``).
    """
    check_noise(noise)
    W = np.asarray(W, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    Ap = np.linalg.pinv(A)
    if np.linalg.norm(W @ Ap @ A - W) > 1e-6 * max(np.linalg.norm(W), 1e-300):
        return math.inf
    tr = float(np.sum((W @ Ap) ** 2))  # trace[W (A^T A)^+ W^T] = ||W A^+||_F^2
    return col_norm(A, noise) ** 2 * tr * _scale(noise, eps, sigma)

