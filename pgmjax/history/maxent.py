"""Maximum entropy with L1 soft constraints and a prior, solved exactly through its dual.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 4: ``min_p KL(p || p0) + sum_i beta_i |pi_i - p[f_i]|`` with ``pi = y / n`` and
``beta_i = alpha n / b_i`` (eq. 25-30, 40-41; ``b_i`` the Laplace scale). Theorem 6 (eq. 36-37): the minimiser
is the Gibbs distribution ``p_w ∝ p0 exp(sum_i w_i f_i)`` where ``w`` maximises the concave
``Q'(w) = w . pi - ln Z_w`` over the box ``|w_i| <= beta_i``; ``dQ'/dw_i = pi_i - p_w[f_i]`` and the Hessian is
``-Cov_{p_w}(f)`` (eq. 39 prints ``+Cov``). The duality gap at a feasible ``w`` is
``sum_i (beta_i |r_i| - w_i r_i)`` with ``r = pi - p_w[f]``.

The features are measurement rows on cliques, so ``p_w`` is a graphical model whose log-potentials are
``sum_j Q_j^T w_j`` (plus ``log p0`` on one-attribute factors): the junction-tree oracle gives ``ln Z_w`` and
the exact gradient, one pass per evaluation. The dual is solved by accelerated projected gradient ascent (FISTA,
Beck & Teboulle 2009) with backtracking on the gradient's local Lipschitz constant and gradient restarts, compiled as one ``lax.while_loop``;
the structure (cliques, query shapes) is static, the numbers are arrays, so a new alpha or new answers on the
same structure reuse the compiled program. The paper's own learner (stochastic gradient with Gibbs sampling,
section 4.2) is approximate; this one is exact wherever the junction tree of the measured cliques fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pgmjax.kernels import sum_axes

from ..compiler import jit
from ..data.domain import Domain
from ..graph import oracle
from ..model.fit_report import Fit, FitReport
from ..model.graphical_model import GraphicalModel
from ..queries.measurement import Measurement
from . import rows as rows_mod
from .pca import check_inputs


@dataclass(frozen=True)
class _BlockLayout:
    """Where a block of rows reads the oracle's marginals (static, hashable)."""

    host: int  # junction-tree clique holding the block's clique
    sum_axes: tuple[int, ...]  # host axes summed out
    perm: tuple[int, ...]  # remaining host axes -> the block's clique order
    kind: str
    rows: int


class DualState(NamedTuple):
    """FISTA state of the dual ascent (all arrays)."""

    w: jax.Array  # current iterate (feasible)
    v: jax.Array  # extrapolated point
    t: jax.Array  # momentum parameter
    lip: jax.Array  # current curvature estimate (step = 1 / lip)
    value: jax.Array  # Q'(w)
    gap: jax.Array  # duality gap at w
    violation: jax.Array  # largest |residual| of rows with beta = inf
    it: jax.Array


def _predict(plan, layout, arrays, mu):
    """``Q mu`` of every row (block order) from oracle-layout marginals ``mu``."""
    out = []
    for lay, q in zip(layout, arrays):
        x = plan.table(mu, lay.host)
        if lay.sum_axes:
            x = sum_axes(x, lay.sum_axes)
        out.append(q.apply(jnp.transpose(x, lay.perm)))
    return jnp.concatenate(out)


def _evaluate(plan, layout, arrays, theta0, log_z0, pi, beta, w):
    """``(Q'(w), gradient r = pi - p_w[f], gap, violation)`` with one oracle pass."""
    mu0 = jax.tree_util.tree_map(jnp.zeros_like, theta0)
    adjoint = jax.linear_transpose(lambda m: _predict(plan, layout, arrays, m), mu0)
    (lift,) = adjoint(w)
    theta = jax.tree_util.tree_map(jnp.add, theta0, lift)
    p, log_z = oracle.marginals(plan, theta, jnp.ones((), w.dtype))
    r = pi - _predict(plan, layout, arrays, p)
    finite = jnp.isfinite(beta)
    gap = jnp.sum(jnp.where(finite, jnp.where(finite, beta, 0.0) * jnp.abs(r), 0.0) - w * r)
    violation = jnp.max(jnp.where(finite, 0.0, jnp.abs(r)), initial=0.0)
    return jnp.dot(w, pi) - (log_z - log_z0), r, gap, violation


def _solve_impl(plan, layout, arrays, theta0, pi, beta, lip0, tol, iters):
    lo, hi = -beta, beta
    log_z0 = oracle.log_partition(plan, theta0)  # 0 for a product prior; a clique prior need not be normalised
    ev = lambda w: _evaluate(plan, layout, arrays, theta0, log_z0, pi, beta, w)  # noqa: E731
    w0 = jnp.zeros_like(pi)
    val0, _, gap0, viol0 = ev(w0)
    one = jnp.ones((), pi.dtype)
    init = DualState(w0, w0, one, lip0, val0, gap0, viol0, jnp.zeros((), jnp.int32))

    def done(s):
        return (s.gap <= tol * jnp.maximum(1.0, jnp.abs(s.value))) & (s.violation <= tol)

    def step(s):
        _, g_v, _, _ = ev(s.v)

        def trial(carry):
            lip, _ = carry
            w_new = jnp.clip(s.v + g_v / lip, lo, hi)
            out = ev(w_new)
            return lip, (w_new, out)

        def too_far(carry):
            # Backtrack while the step is longer than the local curvature allows: ||g(w_new) - g(v)|| > lip ||w_new - v||.
            # Gradients, not values: near the optimum, value differences drown in the rounding of ln Z.
            lip, (w_new, (_, g_new, _, _)) = carry
            return jnp.linalg.norm(g_new - g_v) > lip * jnp.linalg.norm(w_new - s.v)

        first = trial((s.lip * 0.8, None))
        lip, (w_new, (val_new, _, gap_new, viol_new)) = jax.lax.while_loop(
            lambda c: too_far(c) & (c[0] < 1e30), lambda c: trial((c[0] * 2.0, None)), first
        )
        t_new = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * s.t * s.t))
        restart = jnp.dot(s.v - w_new, w_new - s.w) > 0  # O'Donoghue & Candes (2015) gradient restart
        v_new = jnp.where(restart, w_new, w_new + ((s.t - 1.0) / t_new) * (w_new - s.w))
        t_new = jnp.where(restart, one, t_new)
        return DualState(w_new, v_new, t_new, lip, val_new, gap_new, viol_new, s.it + 1)

    # Stop at the gap tolerance, the iteration cap, or when rounding stalls the line search.
    state = jax.lax.while_loop(lambda s: (~done(s)) & (s.it < iters) & (s.lip < 1e30), step, init)
    return state, _theta(plan, layout, arrays, theta0, state.w), log_z0


def _theta(plan, layout, arrays, theta0, w):
    """The model's log-potentials ``theta0 + sum_j Q_j^T w_j`` (oracle layout)."""
    mu0 = jax.tree_util.tree_map(jnp.zeros_like, theta0)
    (lift,) = jax.linear_transpose(lambda m: _predict(plan, layout, arrays, m), mu0)(w)
    return jax.tree_util.tree_map(jnp.add, theta0, lift)


_solve = jit(_solve_impl, static_argnums=(1,))
_evaluate_jit = jit(_evaluate, static_argnums=(1,))
_theta_jit = jit(_theta, static_argnums=(1,))
_log_partition_jit = jit(oracle.log_partition)


def maxent(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    alpha: float | None = None,
    beta=None,
    total: float | None = None,
    prior=None,
    iters: int = 10000,
    tol: float = 1e-9,
    dtype=None,
    solver: str = "dual",
    lr: float = 1e-4,
    chains: int = 1,
    key=None,
    report: bool = False,
) -> GraphicalModel | Fit:
    """The maximum-entropy model with L1 soft constraints and a prior ([CZB] section 4, Theorem 6), exactly.

    Args:
        domain: the :class:`~pgmjax.Domain`.
        measurements: the past answers; row ``i`` is the feature ``f_i`` with answer ``y_i`` and Laplace scale
            ``b_i = stddev_i / sqrt(2)``.
        alpha: the entropy-likelihood trade-off: ``beta_i = alpha n / b_i`` (eq. 30). Small alpha stays near the
            prior; large alpha meets the answers exactly where they are consistent (an inconsistent history
            at huge alpha makes ``w`` diverge: use ``pgmjax.estimate(loss="l1")`` there).
        beta: instead of alpha, the box ``|w_i| <= beta_i`` directly (a scalar or one per row, ``inf`` allowed
            for exact constraints, 0 to ignore a row).
        total: the public record count ``n`` (default: :func:`pgmjax.estimate_total`, with a warning).
        prior: a product prior ``{attribute: probabilities}`` (default uniform; eq. 40-41); entries keyed by a
            clique (tuple) are joint tables on it (any prior that factorises over cliques).
        iters: maximum number of FISTA iterations (each 2+ junction-tree passes).
        tol: stop when the duality gap is at most ``tol * max(1, |Q'(w)|)`` (and rows with infinite beta
            are met to ``tol``).
        dtype: float64 (default when ``jax_enable_x64`` is on) or float32.
        solver: ``"dual"`` (exact, FISTA on the dual with the junction-tree oracle) or ``"sgd_gibbs"`` (the
            paper's stochastic learner, section 4.2: ``iters`` Gibbs sweeps with step ``lr`` over ``chains``
            chains, seeded by ``key``; a product prior only; the gap of its final ``w`` is then reported exactly).
        lr, chains, key: the ``"sgd_gibbs"`` learner's step size, number of chains and ``jax.random`` key.
        report: also return the solver's :class:`~pgmjax.FitReport`, as a :class:`~pgmjax.Fit` ``(model, report)``.

    Returns:
        A :class:`~pgmjax.GraphicalModel` (marginals, ``answer``, ``synthetic_data``); with ``report=True`` a
        :class:`~pgmjax.Fit` whose report's ``loss`` is the primal value and whose ``info`` holds
        ``w`` (dual weights, rows in the measurements' order), ``beta``, ``residual`` (``pi - p_w[f]``),
        ``gap``, ``dual_value``, ``primal_value``, ``violation``, ``active`` (rows whose weight sits on the box),
        ``iterations``, ``converged``.

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 2})
        >>> m = pj.Measurement(("a", "b"), [700.0], stddev=20 * math.sqrt(2), query=np.array([[1.0, 1.0, 0.0, 0.0]]))
        >>> model, report = maxent(dom, [m], alpha=0.01, total=1000, report=True)
        >>> model.marginal(("a", "b")).ravel().round(4)
        array([311.2297, 311.2297, 188.7703, 188.7703])
    """
    where = "maxent"
    measurements, total, notes = check_inputs(domain, measurements, total, where)
    prior, joint = _split_prior(domain, prior, where)
    if (alpha is None) == (beta is None):
        raise ValueError(f"{where}: give exactly one of alpha= (beta_i = alpha n / b_i) or beta=")
    if not isinstance(iters, (int, np.integer)) or iters < 1:
        raise ValueError(f"{where}: iters must be a positive integer, got {iters!r}")
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise ValueError(f"{where}: tol must be positive, got {tol!r}")
    dtype = jnp.dtype(dtype or (jnp.float64 if jax.config.jax_enable_x64 else jnp.float32))
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError(f'{where}: float64 needs jax.config.update("jax_enable_x64", True)')
    if solver not in ("dual", "sgd_gibbs"):
        raise ValueError(f"{where}: solver must be 'dual' or 'sgd_gibbs', got {solver!r}")
    if solver == "sgd_gibbs":
        if key is None:
            raise ValueError(f"{where}: solver='sgd_gibbs' needs key= (a jax.random key)")
        if joint:
            raise ValueError(f"{where}: solver='sgd_gibbs' takes a product prior only (per-attribute factors)")
        if not (isinstance(chains, (int, np.integer)) and chains >= 1) or not (isinstance(lr, (int, float)) and lr > 0):
            raise ValueError(f"{where}: chains must be a positive integer and lr positive, got {chains!r}, {lr!r}")
    y = np.concatenate([m.y for m in measurements])
    scale = np.concatenate([m.row_stddev() for m in measurements]) / math.sqrt(2.0)
    if alpha is not None:
        a = float(alpha)
        if not a > 0:
            raise ValueError(f"{where}: alpha must be positive, got {alpha!r}")
        box = a * total / scale
    else:
        box = np.broadcast_to(np.asarray(beta, np.float64), y.shape).copy() if np.ndim(beta) == 0 or np.size(beta) == y.size else None
        if box is None or np.any(np.isnan(box)) or np.any(box < 0):
            raise ValueError(f"{where}: beta must be a non-negative scalar or one per row ({y.size}), got {beta!r}")
    blocks, order = rows_mod.group_blocks(domain, measurements)
    plan = oracle.make_plan(domain, [b.clique for b in blocks] + list(joint))
    layout, arrays, lip = _layout(plan, blocks, dtype)
    logp = {(a,): _log(p) for a, p in prior.items()} | {c: _log(t) for c, t in joint.items()}
    theta0 = plan.from_tables(logp, dtype)
    pi = jnp.asarray(y[order] / total, dtype)
    beta_b = jnp.asarray(box[order], dtype)
    if solver == "dual":
        state, theta, log_z0 = _solve(plan, layout, arrays, theta0, pi, beta_b, jnp.asarray(lip, dtype),
                                      jnp.asarray(tol, dtype), jnp.asarray(int(iters), jnp.int32))
        w_dev, iterations = state.w, int(state.it)
    else:
        from .gibbs import sgd_gibbs

        attrs = domain.attributes
        w_dev = jnp.asarray(sgd_gibbs([b.dense_rows() for b in blocks], [tuple(attrs.index(a) for a in b.clique) for b in blocks],
                                      domain.shape, [_log(prior[a]) for a in attrs], pi, beta_b, lr=lr, iters=iters,
                                      chains=chains, key=key), dtype)
        theta, log_z0, iterations = _theta_jit(plan, layout, arrays, theta0, w_dev), _log_partition_jit(plan, theta0), int(iters)
    value, r_b, gap, violation = _evaluate_jit(plan, layout, arrays, theta0, log_z0, pi, beta_b, w_dev)
    w_b = np.asarray(w_dev, np.float64)
    w, r = np.empty_like(w_b), np.empty_like(w_b)
    w[order], r[order] = w_b, np.asarray(r_b, np.float64)
    gap, value = float(gap), float(value)
    if not (np.all(np.isfinite(w)) and math.isfinite(gap) and math.isfinite(value)):
        raise FloatingPointError(f"{where}: the dual ascent diverged (non-finite weights or gap); is alpha huge on inconsistent answers?")
    model = GraphicalModel(plan, theta, total)
    if not report:
        return model
    return Fit(model, FitReport(loss=value + gap, info={
        "w": w, "beta": box, "residual": r, "gap": gap, "dual_value": value, "primal_value": value + gap,
        "violation": float(violation), "solver": solver, "active": np.flatnonzero(np.isclose(np.abs(w), box, rtol=1e-9, atol=0) & (box > 0)),
        "iterations": iterations, "warnings": notes,
        "converged": bool(gap <= tol * max(1.0, abs(value)) and float(violation) <= tol),
    }))


def _log(p: np.ndarray) -> np.ndarray:
    """``log p`` with ``-inf`` (a structural zero) where ``p = 0``, without a warning."""
    return np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), -np.inf)


def _split_prior(domain: Domain, prior, where: str):
    """Per-attribute factors (completed with uniform ones) and joint tables ``{clique: probabilities}``."""
    if prior is None:
        return rows_mod.check_prior(domain, None, where), {}
    if not hasattr(prior, "items"):
        raise TypeError(f"{where}: prior must be a mapping, got {type(prior).__name__}")
    single = {a: p for a, p in prior.items() if isinstance(a, str)}
    joint = {}
    for c, t in prior.items():
        if isinstance(c, str):
            continue
        c = domain.check_clique(c, what=f"{where}: prior clique")
        t = np.asarray(t, np.float64)
        if t.shape != domain.shape_of(c) or not np.all(np.isfinite(t)) or np.any(t < 0) or abs(t.sum() - 1) > 1e-9:
            raise ValueError(f"{where}: the prior table on {c} must be non-negative, of shape {domain.shape_of(c)}, summing to 1")
        if set(c) & set(single):
            raise ValueError(f"{where}: attributes {sorted(set(c) & set(single))} have both a factor and a joint prior table")
        joint[c] = t
    product = rows_mod.check_prior(domain, single, where)
    for c in joint:  # the joint table replaces the uniform factors of its attributes
        for a in c:
            product[a] = np.ones(domain[a])
    return product, joint


def _layout(plan, blocks, dtype):
    """Static layout, query arrays and the curvature bound ``sum_blocks max_t sum_r Q[r, t]^2``."""
    layout, arrays, lip = [], [], 0.0
    for b in blocks:
        host = plan.tree.containing(b.clique)
        hc = plan.cliques[host]
        kept = [a for a in hc if a in b.clique]
        lay = _BlockLayout(host, tuple(i for i, a in enumerate(hc) if a not in b.clique),
                           tuple(kept.index(a) for a in b.clique), b.kind, b.rows)
        layout.append(lay)
        arrays.append(jax.tree_util.tree_map(lambda f: jnp.asarray(f, dtype), b.linear))
        if b.kind == "identity":
            lip += 1.0
        elif b.kind == "dense":
            lip += float((b.query.reshape(b.rows, -1) ** 2).sum(axis=0).max())
        else:
            lip += float(np.prod([(f**2).sum(axis=0).max() for f in b.query]))
    return tuple(layout), tuple(arrays), max(lip, 1e-12)
