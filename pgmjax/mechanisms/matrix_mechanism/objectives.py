"""HDMM's differentiable strategy objectives and the vectorised L-BFGS restarts that minimise them (JAX).

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018:

* the p-Identity template ``A(Theta) = [I ; Theta] D_Theta`` (OPT_0), whose error
  ``trace[(A^T A)^{-1} W^T W]`` is evaluated in ``O(p n^2)`` through the Woodbury identity
  (:func:`pidentity_error`);
* the weighted-marginals template (OPT_M), whose error is a pointwise sum over the marginals algebra's
  eigenvalues (:func:`marginals_error`).

Both are minimised by optax L-BFGS over ``Theta = phi^2`` (non-negativity through the square), the random
restarts run in one ``vmap``; problem sizes are padded to powers of two so that one compiled program serves
many calls.

Example:
    >>> float(pidentity_error(np.zeros((1, 4)), np.eye(4)))    # Theta = 0 is the identity: trace(G)
    4.0
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ...compiler import jit
from .factors import check_noise
from .marginals_gram import mult_dims, superset_sum

__all__ = ["pidentity_matrix", "pidentity_error", "marginals_error"]


def _column_scale(theta, l1):
    """Column norms of ``[I ; Theta]``: L1 (``Theta >= 0``) when ``l1`` (a bool, possibly traced), else L2."""
    return jnp.where(l1, 1.0 + jnp.sum(theta, axis=0), jnp.sqrt(1.0 + jnp.sum(theta * theta, axis=0)))


def pidentity_matrix(theta, noise: str = "laplace") -> np.ndarray:
    """The p-Identity strategy ``[I ; Theta] D_Theta`` with unit column norms (VLDB 2018, OPT_0 template).

    Args:
        theta: ``(p, n)`` non-negative parameters.
        noise: ``"laplace"`` scales columns to L1 norm 1, ``"gaussian"`` to L2 norm 1.

    Returns:
        The ``(n + p, n)`` strategy matrix (NumPy).
    """
    check_noise(noise)
    theta = np.asarray(theta, dtype=np.float64)
    s = 1.0 + theta.sum(axis=0) if noise == "laplace" else np.sqrt(1.0 + (theta * theta).sum(axis=0))
    return np.vstack([np.eye(theta.shape[1]), theta]) / s[None, :]


def pidentity_error(theta, gram, noise: str = "laplace"):
    """``trace[(A^T A)^{-1} G]`` for the unit-norm p-Identity strategy ``A(Theta)`` (VLDB 2018, Woodbury form).

    With ``s`` the column norms of ``[I ; Theta]`` and ``C = diag(s) G diag(s)``,
    ``(A^T A)^{-1} = diag(s) (I + Theta^T Theta)^{-1} diag(s)`` and by Woodbury
    ``trace = trace(C) - trace[(I_p + Theta Theta^T)^{-1} Theta C Theta^T]``: ``O(p n^2)``, differentiable
    (JAX). The sensitivity is 1, so this is the whole error factor.

    Args:
        theta: ``(p, n)`` parameters, ``>= 0`` for Laplace (signs do not matter for Gaussian).
        gram: ``(n, n)`` workload Gram.
        noise: ``"laplace"`` or ``"gaussian"`` (column normalisation).

    Returns:
        A JAX scalar.
    """
    theta = jnp.asarray(theta)
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        theta = theta.astype(float_dtype())
    return _pidentity_error(theta, gram, check_noise(noise) == "laplace")


def _pidentity_error(theta, gram, l1):
    G = jnp.asarray(gram, dtype=theta.dtype)
    p = theta.shape[0]
    s = _column_scale(theta, l1)
    C = G * s[:, None] * s[None, :]
    L = jnp.linalg.cholesky(jnp.eye(p, dtype=theta.dtype) + theta @ theta.T)
    Y = jax.scipy.linalg.solve_triangular(L, theta, lower=True)
    Z = jax.scipy.linalg.solve_triangular(L, theta @ C, lower=True)
    return jnp.trace(C) - jnp.sum(Y * Z)


def marginals_error(theta, workload_weights, sizes: Sequence[int], noise: str = "laplace"):
    """OPT_M objective ``||A(theta)||^2 * trace[(A^T A)^+ W^T W]`` in the marginals algebra (VLDB 2018).

    ``A^T A = M(theta^2)`` has eigenvalues ``lambda(s) = sum_{a superset of s} theta_a^2 prod_{i not in a} n_i``
    and the trace is ``sum_s dim(s) lambda_w(s) / lambda(s)`` (``lambda_w`` of the projected workload) - equal
    to the closed form ``n * sum(phi)`` with ``X(theta^2) phi = u`` when ``M(theta^2)`` is invertible. ``||A||^2``
    is ``(sum theta)^2`` (Laplace) or ``sum theta^2`` (Gaussian). JAX, differentiable.

    Args:
        theta: ``2^d`` non-negative marginal weights (bit ``i`` = attribute ``i`` kept).
        workload_weights: the projected workload Gram's ``2^d`` weights (:meth:`MarginalsGram.from_workload`).
        sizes: the ``d`` attribute sizes.
        noise: ``"laplace"`` or ``"gaussian"``.

    Returns:
        A JAX scalar.
    """
    theta = jnp.asarray(theta)
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        theta = theta.astype(float_dtype())
    sizes = tuple(int(n) for n in sizes)
    d = len(sizes)
    mult, dims = mult_dims(sizes)
    lam_w = np.asarray(superset_sum(np.asarray(workload_weights, dtype=np.float64) * mult, d, xp=np))
    live = (dims > 0) & (lam_w > 1e-12 * max(lam_w.max(), 1e-300))
    coef = np.where(live, dims * lam_w, 0.0)
    l1 = check_noise(noise) == "laplace"
    return _marginals_objective(theta, jnp.asarray(coef, dtype=theta.dtype), jnp.asarray(live), jnp.asarray(mult, dtype=theta.dtype), d, l1)


def _marginals_objective(theta, coef, live, mult, d, l1):
    lam = superset_sum(theta * theta * mult, d)
    tr = jnp.sum(jnp.where(live, coef / jnp.where(live, lam, 1.0), 0.0))
    sens2 = jnp.where(l1, jnp.sum(theta) ** 2, jnp.sum(theta * theta))
    return sens2 * tr



def _lbfgs(fun, x0, maxiter: int, tol):
    """Minimise ``fun`` from ``x0`` with optax L-BFGS (zoom line search) until the relative decrease of the
    objective falls below ``tol`` or ``maxiter`` iterations. Returns ``(x, f(x), iterations)``."""
    import optax  # here: optax is slow to import and only the L-BFGS fits use it

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(fun)

    def cond(c):
        _, _, k, f_prev, f = c
        moving = jnp.abs(f_prev - f) > tol * jnp.abs(f)
        return (k < maxiter) & ((k == 0) | moving) & jnp.isfinite(f)

    def body(c):
        x, state, k, _, _ = c
        value, grad = value_and_grad(x, state=state)
        updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=fun)
        x = optax.apply_updates(x, updates)
        return x, state, k + 1, value, optax.tree_utils.tree_get(state, "value")

    f0 = fun(x0)
    x, _, k, _, _ = jax.lax.while_loop(cond, body, (x0, opt.init(x0), jnp.asarray(0), f0, f0))
    return x, fun(x), k


@jit(static_argnames=("maxiter",))
def fit_pidentity(gram, phi0, mask, tied, l1, tol, maxiter):
    """Vectorised L-BFGS restarts for the p-Identity template on a padded problem.

    ``gram`` is zero-padded and ``mask`` zeroes the padding rows/columns of ``Theta``, so padded columns keep
    scale 1 and contribute nothing: one compilation serves every ``(p, n)`` of a size bucket. With ``tied``,
    ``Theta = phi[0, 0]^2 * mask`` (the one-parameter IdTotal template). ``tied`` and ``l1`` are traced
    flags, so the templates and both noise kinds share the compiled program.
    """

    def to_theta(phi):
        th = phi * phi  # Theta >= 0 through the square
        return jnp.where(tied, th[0, 0] * mask, th * mask)

    def loss(phi):
        return _pidentity_error(to_theta(phi), gram, l1)

    def one(x0):
        x, f, k = _lbfgs(loss, x0, maxiter, tol)
        return to_theta(x), f, k

    return jax.vmap(one)(phi0)


def bucket(k: int, least: int = 1) -> int:
    """The power of two at or above ``k`` (at least ``least``): padded problem sizes share one compilation."""
    return max(least, 1 << (int(k) - 1).bit_length())


def padded_restarts(restarts: int) -> int:
    """Restarts are rounded up to a power of two (at least 4): extra starts are cheap next to a compilation."""
    if restarts < 1:
        raise ValueError(f"restarts must be >= 1, got {restarts}")
    return bucket(restarts, 4)


@jit(static_argnames=("d", "maxiter"))
def fit_marginals(coef, live, mult, phi0, l1, tol, d, maxiter):
    """Vectorised L-BFGS restarts for the marginals objective over ``theta = phi^2``: ``(thetas, values, iterations)`` per start."""
    def loss(phi):
        return _marginals_objective(phi * phi, coef, live, mult, d, l1)

    def one(x0):
        x, f, k = _lbfgs(loss, x0, maxiter, tol)
        return x * x, f, k

    return jax.vmap(one)(phi0)


def float_dtype():
    """JAX's default float dtype (float64 under ``jax_enable_x64``, else float32)."""
    return jnp.asarray(0.0).dtype


def best_restart(thetas, values):
    """The restart with the smallest finite value: ``(theta as float64, value)``."""
    values = np.where(np.isfinite(values), values, np.inf)
    i = int(np.argmin(values))
    return np.asarray(thetas[i], dtype=np.float64), float(values[i])

