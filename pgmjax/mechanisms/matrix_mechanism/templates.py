"""HDMM's OPT_0: the best single-attribute strategy among Identity, Total, p-Identity and IdTotal.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018, the optimisation of an explicit (one-attribute) workload: the
p-Identity template ``[I ; Theta] D_Theta`` with ``p`` extra rows (default ``n // 16``, as the authors'
reference implementation) is fitted from random restarts (:func:`opt_pidentity`); OPT_0 keeps the best of
it, the identity, the total and the one-parameter IdTotal (:func:`opt_0`). These per-attribute fits are the
building blocks of the Kronecker and union optimisers (:mod:`.optimize`).

Example:
    >>> A, loss, _ = opt_pidentity(prefix_gram(32), jax.random.key(0))
    >>> bool(loss < np.trace(prefix_gram(32)))   # beats the identity strategy
    True
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .error import factor_error
from .factors import check_noise
from .factors import prefix_gram  # noqa: F401  (the docstring examples use it)
from .objectives import bucket, fit_pidentity, float_dtype, padded_restarts, pidentity_matrix

__all__ = ["default_p", "opt_pidentity", "opt_0"]


def _run_pidentity(G: np.ndarray, p: int, phi0: np.ndarray, tied: bool, noise: str, maxiter: int, tol: float, pad_p: int | None = None):
    """Pad to power-of-two sizes, run :func:`fit_pidentity`, return the best ``(p, n)`` Theta."""
    n = G.shape[0]
    nb, pb = bucket(n, 32), bucket(max(p, pad_p or 1), 2)
    dtype = float_dtype()
    Gp = np.zeros((nb, nb))
    Gp[:n, :n] = G
    mask = np.zeros((pb, nb))
    mask[:p, :n] = 1.0
    phi = np.full((phi0.shape[0], pb, nb), 0.5)
    phi[:, :p, :n] = phi0
    thetas, values, _ = fit_pidentity(
        jnp.asarray(Gp, dtype=dtype),
        jnp.asarray(phi, dtype=dtype),
        jnp.asarray(mask, dtype=dtype),
        jnp.asarray(tied),
        jnp.asarray(noise == "laplace"),
        tol,
        maxiter=maxiter,
    )
    # every restart's strategy is scored by the NumPy error (consistent with factor_error: a run that drifted
    # to a numerically singular but equal-valued point loses here)
    thetas = np.asarray(thetas, dtype=np.float64)[:, :p, :n]
    scores = [factor_error(G, pidentity_matrix(t, noise), noise) if np.isfinite(v) else math.inf for t, v in zip(thetas, np.asarray(values))]
    return thetas[int(np.argmin(scores))]


def default_p(n: int) -> int:
    """The reference's default number of p-Identity rows, ``max(1, n // 16)``."""
    return max(1, int(n) // 16)


def opt_pidentity(
    gram,
    key,
    p: int | None = None,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    init=None,
    maxiter: int = 250,
    tol: float = 1e-9,
) -> tuple[np.ndarray, float, np.ndarray]:
    """Optimise the p-Identity template for one attribute (OPT_0's main template, VLDB 2018).

    Minimises :func:`pidentity_error` over ``Theta = phi^2 >= 0`` with optax L-BFGS from ``restarts``
    ``U(0, 1)`` starting points (drawn from ``key``; vectorised with ``vmap``), keeping the best.

    Args:
        gram: workload Gram ``(n, n)``.
        key: a ``jax.random`` key.
        p: extra rows (default ``max(1, n // 16)``).
        restarts: number of random starting points (rounded up to a power of two, at least 4, so that one
            compiled program serves many calls).
        noise: ``"laplace"`` (unit L1 columns) or ``"gaussian"`` (unit L2 columns).
        init: optional ``(p, n)`` starting ``Theta`` used in place of the first random start (warm start).
        maxiter, tol: L-BFGS iteration cap and relative-decrease stopping tolerance.

    Returns:
        ``(A, loss, theta)``: the strategy matrix ``(n + p, n)``, its error factor
        ``||A||^2 trace[(A^T A)^{-1} G]`` (:func:`factor_error`) and the parameters.

    Example:
        >>> A, loss, _ = opt_pidentity(prefix_gram(32), jax.random.key(0))
        >>> bool(loss < np.trace(prefix_gram(32)))   # beats the identity strategy
        True
    """
    check_noise(noise)
    G = np.asarray(gram, dtype=np.float64)
    n = G.shape[0]
    if G.shape != (n, n):
        raise ValueError(f"opt_pidentity: gram must be square, got shape {G.shape}")
    p = default_p(n) if p is None else int(p)
    if p < 1 or restarts < 1:
        raise ValueError(f"opt_pidentity: p and restarts must be >= 1, got p={p}, restarts={restarts}")
    scale = float(np.trace(G))
    if scale <= 0:
        theta = np.zeros((p, n))
        return pidentity_matrix(theta, noise), 0.0, theta
    phi0 = np.sqrt(np.asarray(jax.random.uniform(key, (padded_restarts(restarts), p, n)), dtype=np.float64))
    if init is not None:
        init = np.asarray(init, dtype=np.float64)
        if init.shape != (p, n) or np.any(init < 0):
            raise ValueError(f"opt_pidentity: init must be a non-negative ({p}, {n}) array, got shape {init.shape}")
        phi0[0] = np.sqrt(init)
    theta = _run_pidentity(G / scale, p, phi0, False, noise, maxiter, tol)
    A = pidentity_matrix(theta, noise)
    return A, factor_error(G, A, noise), theta


def opt_0(
    gram,
    key,
    p: int | None = None,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    maxiter: int = 250,
    tol: float = 1e-9,
) -> tuple[np.ndarray, float]:
    """OPT_0 for one attribute: the best of Identity, Total, p-Identity and IdTotal (identity plus one weighted
    all-ones row, a one-parameter p-Identity) - VLDB 2018 and the reference ``OPT0``.

    Args:
        gram: workload Gram ``(n, n)``; key: a ``jax.random`` key; p, restarts, noise, maxiter, tol: as in
            :func:`opt_pidentity`.

    Returns:
        ``(A, loss)``: the unit-sensitivity strategy matrix and its error factor.

    Example:
        >>> A, loss = opt_0(np.ones((5, 5)), jax.random.key(0))   # a Total workload: Total is optimal
        >>> A.shape, round(loss, 6)
        ((1, 5), 1.0)
    """
    check_noise(noise)
    G = np.asarray(gram, dtype=np.float64)
    n = G.shape[0]
    cands = [np.eye(n)]
    scale = float(np.trace(G))
    if n > 1 and scale > 0 and np.allclose(G, G[0, 0] * np.eye(n), rtol=1e-12, atol=1e-12 * scale):
        return cands[0], factor_error(G, cands[0], noise)  # G ∝ I: Identity is optimal (AM-HM bound)
    if n > 1 and scale > 0 and np.allclose(G, G[0, 0] * np.ones((n, n)), rtol=1e-12, atol=1e-12 * scale):
        A = np.ones((1, n))  # G ∝ 1 1^T: Total is optimal
        return A, factor_error(G, A, noise)
    if n > 1:
        cands.append(np.ones((1, n)))
        k1, k2 = jax.random.split(key)
        p = default_p(n) if p is None else int(p)
        cands.append(opt_pidentity(G, k1, p, restarts=restarts, noise=noise, maxiter=maxiter, tol=tol)[0])
        if scale > 0:  # IdTotal: same compiled program as p-Identity (tied parameters, padded to p rows)
            phi0 = np.sqrt(np.asarray(jax.random.uniform(k2, (padded_restarts(restarts), 1, n)), dtype=np.float64))
            theta = _run_pidentity(G / scale, 1, phi0, True, noise, maxiter, tol, pad_p=p)
            cands.append(pidentity_matrix(theta, noise))
    losses = np.array([factor_error(G, A, noise) for A in cands])
    # the simplest candidate (Identity, Total, p-Identity, IdTotal order) among those within rounding of the best
    i = int(np.flatnonzero(losses <= losses.min() * (1 + 1e-9))[0])
    return cands[i], float(losses[i])


def opt0_memo(memo: dict | None, G: np.ndarray, key, p: int, opts: dict) -> np.ndarray:
    """:func:`opt_0`'s strategy, reused for an identical Gram when ``memo`` is a dict."""
    if memo is None:
        return opt_0(G, key, p, **opts)[0]
    k = (G.shape, G.tobytes(), p, tuple(sorted(opts.items())))
    if k not in memo:
        memo[k] = opt_0(G, key, p, **opts)[0]
    return memo[k]

