"""HDMM's strategy optimisers on implicit workloads: OPT_kron, OPT_+, OPT_M and the choice among them.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018:

* OPT_kron (:func:`opt_kron`): one Kronecker strategy; for a single Kronecker workload the error factorises
  and every attribute is fitted on its own by OPT_0, for a union by block-coordinate descent on surrogate
  Grams;
* OPT_+ (:func:`opt_union`): one Kronecker strategy per sub-workload, stacked with the weights
  ``alpha_j ∝ e_j^(1/3)`` that minimise the union's error bound (Gaussian: ``e_j^(1/4)``);
* OPT_M (:func:`opt_marginals`): weights on all ``2^d`` marginals, fitted in the marginals algebra;
* :func:`optimize_strategy`: the lowest-error strategy among the templates.

Example:
    >>> W = KronWorkload(("age",), (prefix(16),))
    >>> S, loss = opt_kron(W, jax.random.key(0))
    >>> loss < expected_error(W, KronStrategy(("age",), (identity(16),)))
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .error import FactorInfo, expected_error
from .factors import check_noise, col_norm
from .factors import allrange, identity, prefix  # noqa: F401  (the docstring examples use them)
from .marginals_gram import MarginalsGram, mult_dims
from .objectives import best_restart, fit_marginals, float_dtype, padded_restarts
from .strategies import KronStrategy, MarginalsStrategy, UnionStrategy
from .templates import default_p, opt0_memo, opt_0, opt_pidentity
from .workloads import KronWorkload, UnionWorkload, as_union
from .workloads import marginals_workload  # noqa: F401  (the docstring examples use it)

__all__ = ["opt_kron", "opt_union", "opt_plus_weights", "opt_marginals", "optimize_strategy"]


def _grams_by_attribute(W: UnionWorkload, attributes) -> list[list[np.ndarray]]:
    """``G[j][i]``: term ``j``'s Gram on attribute ``i`` (``1 1^T`` where the term sums it out)."""
    out = []
    for t in W.terms:
        grams = dict(zip(t.clique, t.grams()))
        out.append([grams[a] if a in grams else np.ones((W.sizes[a], W.sizes[a])) for a in attributes])
    return out


def opt_kron(
    workload,
    key,
    ps: Sequence[int] | Mapping[str, int] | None = None,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    sweeps: int = 10,
    maxiter: int = 250,
    tol: float = 1e-9,
    _memo: dict | None = None,
) -> tuple[KronStrategy, float]:
    """OPT_kron: one Kronecker strategy ``A_1 (x) ... (x) A_d`` over the workload's attributes (VLDB 2018).

    For a single :class:`KronWorkload` the error factorises (``||A||_1 = prod ||A_i||_1``,
    ``trace = prod trace_i``), so each attribute is optimised independently by :func:`opt_0`. For a union,
    block-coordinate descent: ``C_ij = trace(G_i^(j))`` initially; for ``sweeps`` rounds and each
    attribute ``i``, re-optimise ``A_i`` by :func:`opt_0` on the surrogate ``sum_j c_j G_i^(j)`` with
    ``c_j = w_j^2 prod_{i' != i} C_i'j`` (normalised by its mean) and update
    ``C_ij = trace[(A_i^T A_i)^+ G_i^(j)]``. The best strategy seen (by the true union error) is returned.

    Args:
        workload: :class:`KronWorkload` or :class:`UnionWorkload`.
        key: a ``jax.random`` key.
        ps: p-Identity rows per attribute (default ``max(1, n_i // 16)``).
        restarts, noise, maxiter, tol: passed to :func:`opt_0`.
        sweeps: block-coordinate sweeps for a union.

    Returns:
        ``(strategy, loss)`` with ``loss = expected_error(workload, strategy, noise=noise)``.

    Example:
        >>> W = KronWorkload(("a", "b"), (prefix(16), allrange(8)))
        >>> S, loss = opt_kron(W, jax.random.key(0))
    """
    check_noise(noise)
    W = as_union(workload)
    attrs = W.attributes
    if ps is None:
        ps = [default_p(W.sizes[a]) for a in attrs]
    elif isinstance(ps, Mapping):
        ps = [ps.get(a, default_p(W.sizes[a])) for a in attrs]
    ps = list(ps)
    if len(ps) != len(attrs):
        raise ValueError(f"opt_kron: {len(attrs)} attributes but {len(ps)} values of p")
    keys = iter(jax.random.split(key, len(attrs) * (1 + (sweeps if len(W.terms) > 1 else 0))))
    G = _grams_by_attribute(W, attrs)
    w2 = np.array([t.weight**2 for t in W.terms])
    if len(W.terms) == 1:
        opts = dict(restarts=restarts, noise=noise, maxiter=maxiter, tol=tol)
        factors = [opt0_memo(_memo, G[0][i], next(keys), ps[i], opts) for i in range(len(attrs))]
        S = KronStrategy(attrs, factors)
        return S, expected_error(W, S, noise=noise)

    d, k = len(attrs), len(W.terms)
    factors = [np.eye(W.sizes[a]) for a in attrs]
    C = np.array([[np.trace(G[j][i]) for j in range(k)] for i in range(d)])
    best = KronStrategy(attrs, factors)
    best_loss = expected_error(W, best, noise=noise)
    for _ in range(sweeps):
        for i in range(d):
            c = w2 * np.prod(np.delete(C, i, axis=0), axis=0)
            if c.mean() <= 0:
                continue
            c = c / c.mean()
            surrogate = sum(cj * G[j][i] for j, cj in enumerate(c))
            key_i = next(keys)
            A_i = opt_0(surrogate, key_i, ps[i], restarts=restarts, noise=noise, maxiter=maxiter, tol=tol)[0]
            info = FactorInfo(A_i)
            row = [info.trace(G[j][i]) for j in range(k)]
            if not np.all(np.isfinite(row)):  # e.g. Total chosen for a surrogate that ignores some term
                A_i = opt_pidentity(surrogate, key_i, ps[i], restarts=restarts, noise=noise, maxiter=maxiter, tol=tol)[0]
                info = FactorInfo(A_i)
                row = [info.trace(G[j][i]) for j in range(k)]
            factors[i] = A_i
            C[i] = np.array(row) * col_norm(A_i, noise) ** 2
        S = KronStrategy(attrs, list(factors))
        loss = expected_error(W, S, noise=noise)
        if loss < best_loss * (1 - 1e-12):
            best, best_loss = S, loss
        elif loss >= best_loss:
            break  # no more progress
    return best, best_loss


def opt_plus_weights(errors, noise: str = "laplace") -> np.ndarray:
    """The OPT_+ stacking weights of a union of unit-sensitivity Kronecker strategies with errors ``e_j``.

    Minimising the union's error bound ``||A||^2 sum_j e_j / alpha_j^2`` gives ``alpha_j ∝ e_j^(1/3)`` with
    ``sum alpha = 1`` (Laplace, L1 sensitivity) or ``alpha_j ∝ e_j^(1/4)`` with ``sum alpha^2 = 1``
    (Gaussian, L2 sensitivity).

    Example:
        >>> opt_plus_weights([1.0, 8.0]).round(4).tolist()
        [0.3333, 0.6667]
    """
    check_noise(noise)
    e = np.asarray(errors, dtype=np.float64)
    if noise == "laplace":
        a = e ** (1.0 / 3.0)
        return a / a.sum()
    a = e**0.25
    return a / np.sqrt((a * a).sum())


def opt_union(
    workload,
    key,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    maxiter: int = 250,
    tol: float = 1e-9,
) -> tuple[UnionStrategy, float]:
    """OPT_+: a union of Kronecker strategies, one per sub-workload (VLDB 2018).

    Workload terms on the same clique (as a set) form one sub-workload; each is optimised by :func:`opt_kron`
    (unit sensitivity, error ``e_j``) and the strategies are stacked with weights ``alpha_j``. Minimising the
    upper bound ``||A||^2 sum_j e_j / alpha_j^2`` gives ``alpha_j ∝ e_j^(1/3)`` normalised to
    ``sum alpha = 1`` (Laplace; bound ``(sum_j e_j^(1/3))^3``) or ``alpha_j ∝ e_j^(1/4)`` with
    ``sum alpha^2 = 1`` (Gaussian; bound ``(sum_j e_j^(1/2))^2``).

    Args:
        workload: :class:`UnionWorkload` (or a single :class:`KronWorkload`).
        key: a ``jax.random`` key; restarts, noise, maxiter, tol: passed on.

    Returns:
        ``(strategy, loss)``, ``loss`` the upper bound (= ``expected_error(workload, strategy)`` when no
        strategy term answers another group's queries better than its own).
    """
    check_noise(noise)
    W = as_union(workload)
    groups = W.by_clique()
    subs, errs = [], []
    memo: dict = {}  # identical factor Grams (e.g. one Prefix attribute in many cliques) are optimised once
    for g, k in zip(groups.values(), jax.random.split(key, len(groups))):
        clique = g[0].clique
        aligned = [t if t.clique == clique else _reorder(t, clique) for t in g]
        S, e = opt_kron(UnionWorkload(aligned), k, restarts=restarts, noise=noise, maxiter=maxiter, tol=tol, _memo=memo)
        if e > 0:
            subs.append(S)
            errs.append(e)
    if not subs:
        raise ValueError("opt_union: the workload has no queries with positive weight")
    alpha = opt_plus_weights(errs, noise)
    strategy = UnionStrategy([KronStrategy(S.clique, S.factors, a) for S, a in zip(subs, alpha)])
    return strategy, expected_error(W, strategy, noise=noise)


def _reorder(t: KronWorkload, clique) -> KronWorkload:
    f = dict(zip(t.clique, t.factors))
    return KronWorkload(clique, [f[a] for a in clique], t.weight)


def opt_marginals(
    workload,
    key,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    maxiter: int = 1000,
    tol: float = 1e-10,
    max_attributes: int = 20,
) -> tuple[MarginalsStrategy, float]:
    """OPT_M: weights on all ``2^d`` marginals of the workload's attributes (VLDB 2018).

    The workload Gram is projected into the marginals algebra (:meth:`MarginalsGram.from_workload`) and
    :func:`marginals_error` is minimised over ``theta = phi^2`` by optax L-BFGS from ``restarts`` ``U(0, 1)``
    starts. The result is scaled to unit sensitivity; weights below ``1e-3`` / ``1e-6`` / ``1e-9`` of the
    largest are dropped when that costs less than ``1e-4`` of relative error (fewer marginals to measure).

    Args:
        workload: :class:`KronWorkload` or :class:`UnionWorkload`.
        key: a ``jax.random`` key; restarts, noise, maxiter, tol: as in :func:`opt_pidentity`.
        max_attributes: refuse more attributes than this (memory and time grow as ``d 2^d``).

    Returns:
        ``(strategy, loss)`` with ``loss = expected_error(workload, strategy, noise=noise)``.

    Example:
        >>> W = marginals_workload({"a": 2, "b": 3, "c": 4}, [("a", "b"), ("b", "c")])
        >>> S, loss = opt_marginals(W, jax.random.key(0))
    """
    check_noise(noise)
    W = as_union(workload)
    d = len(W.attributes)
    if d > max_attributes:
        raise ValueError(f"opt_marginals: {d} attributes means 2^{d} marginal weights; max_attributes={max_attributes}")
    gw = MarginalsGram.from_workload(W)
    sizes = gw.sizes
    mult, dims = mult_dims(sizes)
    lam_w = gw.eigenvalues()
    top = float(lam_w.max())
    if top <= 0:
        raise ValueError("opt_marginals: the workload has no queries with positive weight")
    live = (dims > 0) & (lam_w > 1e-12 * top)
    coef = np.where(live, dims * lam_w / top, 0.0)
    dtype = float_dtype()
    phi0 = jnp.sqrt(jax.random.uniform(key, (padded_restarts(restarts), 2**d), dtype=dtype))
    thetas, values, _ = fit_marginals(
        jnp.asarray(coef, dtype=dtype),
        jnp.asarray(live),
        jnp.asarray(mult, dtype=dtype),
        phi0,
        jnp.asarray(noise == "laplace"),
        tol,
        d=d,
        maxiter=maxiter,
    )
    theta, _ = best_restart(np.asarray(thetas), np.asarray(values))
    theta = theta / (theta.sum() if noise == "laplace" else np.sqrt((theta**2).sum()))
    best = MarginalsStrategy(W.attributes, sizes, theta)
    best_loss = expected_error(W, best, noise=noise)
    for cut in (1e-3, 1e-6, 1e-9):
        pruned = np.where(theta >= cut * theta.max(), theta, 0.0)
        pruned = pruned / (pruned.sum() if noise == "laplace" else np.sqrt((pruned**2).sum()))
        S = MarginalsStrategy(W.attributes, sizes, pruned)
        loss = expected_error(W, S, noise=noise)
        if loss <= best_loss * (1 + 1e-4):
            return S, loss
    return best, best_loss


def optimize_strategy(
    workload,
    key,
    *,
    templates: Sequence[str] = ("kron", "union", "marginals"),
    restarts: int = 8,
    noise: str = "laplace",
    max_marginal_attributes: int = 16,
) -> tuple[KronStrategy | UnionStrategy | MarginalsStrategy, float]:
    """HDMM's top-level choice (the reference's ``BestHD``): the lowest-loss strategy among the templates.

    Args:
        workload: :class:`KronWorkload` or :class:`UnionWorkload`.
        key: a ``jax.random`` key.
        templates: any of ``"kron"`` (:func:`opt_kron`), ``"union"`` (:func:`opt_union`) and ``"marginals"``
            (:func:`opt_marginals`, skipped above ``max_marginal_attributes`` attributes).
        restarts, noise: passed on.

    Returns:
        ``(strategy, loss)``. A union strategy's loss is its OPT_+ upper bound.
    """
    W = as_union(workload)
    unknown = set(templates) - {"kron", "union", "marginals"}
    if unknown or not templates:
        raise ValueError(f"optimize_strategy: templates must be among 'kron', 'union', 'marginals', got {list(templates)}")
    k1, k2, k3 = jax.random.split(key, 3)
    results = []
    if "kron" in templates:
        results.append(opt_kron(W, k1, restarts=restarts, noise=noise))
    if "union" in templates:
        results.append(opt_union(W, k2, restarts=restarts, noise=noise))
    if "marginals" in templates and len(W.attributes) <= max_marginal_attributes:
        results.append(opt_marginals(W, k3, restarts=restarts, noise=noise))
    if not results:
        raise ValueError("optimize_strategy: no template applies (too many attributes for 'marginals' alone)")
    return min(results, key=lambda r: r[1])

