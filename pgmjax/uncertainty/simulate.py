"""Coverage by simulation: draw ``R`` noisy measurement sets around known answers, fit each, build the
intervals of every fit (bootstrap and/or linearisation) and count how often they cover the estimand.

All fits are batched: the ``R`` outer fits in one program, then the ``R x B`` bootstrap refits in chunks
of outer draws (each refit warm-started at its own outer fit).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..model.graphical_model import GraphicalModel
from ..queries.measurement import Measurement
from .bootstrap import draw_answers, refit
from .linear import linearize_batch, predict_measurement

__all__ = ["draw_answers", "predictions_batch", "Coverage", "simulate_coverage", "tree_dataset"]


@jit(static_argnums=0)
def _predict_batch(desc, plan, theta, queries, totals):
    from ..graph import oracle

    def one(th, n):
        mu = oracle.marginals(plan, th, n)[0]
        return tuple(predict_measurement(plan, mu, c, q) for (c, _), q in zip(desc, queries))

    return jax.vmap(one)(theta, totals)


def predictions_batch(plan, theta: dict, totals, measurements: Sequence[Measurement]) -> list[np.ndarray]:
    """``Q mu`` of every measurement for a batch of models (potentials ``{block: (R, ...)}``): ``(R, rows)`` each."""
    dt = totals.dtype if hasattr(totals, "dtype") else jnp.float64
    desc = tuple((m.clique, m.kind) for m in measurements)
    queries = tuple(jax.tree_util.tree_map(lambda q: jnp.asarray(q, dt), m.linear) for m in measurements)
    out = _predict_batch(desc, plan, theta, queries, jnp.asarray(totals, dt))
    return [np.asarray(o, np.float64) for o in out]


@dataclass(frozen=True, eq=False)
class Coverage:
    """Result of :func:`simulate_coverage`.

    Attributes:
        estimates: per target ``(R, *shape)`` the outer fits' answers.
        covered: ``{method: {level: per target (R, *shape) booleans}}``.
        se: ``{method: per target (R, *shape)}`` standard errors.
        seconds: ``{"fits": ..., method: ...}`` wall times.
        bias: ``{"bootstrap": per target (R, *shape)}``: each draw's bootstrap bias estimate (mean of the
            refitted answers minus the draw's answer), to compare with the estimator's real bias
            ``mean(estimates) - truth``.
        iterations: ``{"fits": ..., "bootstrap": ...}`` iterations used (after convergence checks), whether
            the checks passed (``"converged"``) and, with ``fit_method="qp"``, the largest constraint residuals.
    """

    estimates: tuple
    covered: dict
    se: dict
    seconds: dict
    iterations: dict
    bias: dict = None

    def rate(self, method: str, level: float | None = None) -> list[np.ndarray]:
        """Per target, the fraction of outer draws whose interval (at ``level``; default the first) covered."""
        by_level = self.covered[method]
        level = next(iter(by_level)) if level is None else float(level)
        return [c.mean(axis=0) for c in by_level[level]]


def simulate_coverage(
    structure: GraphicalModel,
    measurements: Sequence[Measurement],
    means: Sequence[np.ndarray],
    targets: Sequence,
    truths: Sequence[np.ndarray],
    *,
    R: int,
    B: int,
    key,
    level=0.9,
    methods: Sequence[str] = ("bootstrap", "linear"),
    loss: str = "l2",
    total=None,
    fit_iters: int = 1000,
    boot_iters: int = 200,
    draws_per_call: int | None = None,
    dtype=None,
    outer_start="zeros",
    fit_method: str = "mirror_descent",
    max_doublings: int = 3,
    interval="basic",
) -> Coverage:
    """Empirical coverage of :func:`pgmjax.uncertainty.intervals` over ``R`` noise draws.

    Args:
        structure: a model of the fitted structure (e.g. the fit to the noiseless answers).
        measurements: the measurement design (cliques, queries, stddev, noise family; ``y`` unused).
        means: per measurement, the noiseless answers ``Q mu*``.
        targets: the targets; truths: per target, the estimand (the target's shape).
        R: outer noise draws; B: bootstrap replicates per draw.
        key: a ``jax.random`` key.
        level: nominal coverage, or a list of levels (every level read from the same replicates).
        methods: any of ``"bootstrap"`` and ``"linear"`` (linear needs ``loss="l2"`` and float64).
        loss, total: as the fits use them.
        fit_iters: iterations of the outer fits (doubled until doubling moves no answer by 5% of its spread).
        boot_iters: iterations of the warm-started refits (doubled by the convergence check when needed).
        draws_per_call: outer draws whose refits share one batched call (memory: ``draws_per_call * B`` models).
        dtype: fit dtype (default the structure's).
        outer_start: start of the outer fits: ``"zeros"`` (cold) or None (the structure model's potentials:
            faster, and safe only because the doubling check on the values confirms convergence).
        fit_method: estimator of every fit (see :func:`pgmjax.uncertainty.refit`).
        max_doublings: of the convergence checks (see :func:`pgmjax.uncertainty.refit`).
        interval: ``"basic"``, ``"percentile"`` or both (a list): the bootstrap intervals read from the same
            refits; percentile coverage is reported as method ``"bootstrap_percentile"`` (basic: ``"bootstrap"``).

    Returns:
        :class:`Coverage`.
    """
    structure = structure.dense()  # its refits run batched on the dense plan (pgmjax.estimation.batch)
    k_outer, k_boot = jax.random.split(key)
    ys = draw_answers(means, measurements, R, k_outer)
    t0 = time.perf_counter()
    outer = refit(structure, measurements, ys, targets, loss=loss, total=total, iters=fit_iters, start=outer_start,
                  dtype=dtype, check_on="values", check_tol=0.05, fit_method=fit_method,
                  max_doublings=max_doublings)
    seconds = {"fits": time.perf_counter() - t0}
    iterations = {"fits": outer.iterations}
    converged = {"fits": outer.converged}
    if outer.residual is not None:  # fit_method="qp": the largest constraint residual (counts)
        iterations["fits_residual"] = float(np.max(outer.residual))
    covered, ses, biases = {}, {}, {}
    truths = [np.asarray(t, np.float64) for t in truths]
    levels = [float(level)] if np.ndim(level) == 0 else [float(x) for x in level]
    kinds = [interval] if isinstance(interval, str) else list(interval)
    if not kinds or any(k not in ("basic", "percentile") for k in kinds):
        raise ValueError(f"simulate_coverage: interval must be 'basic', 'percentile' or a list of them, got {interval!r}")
    if "bootstrap" in methods:
        t0 = time.perf_counter()
        per = int(draws_per_call or max(1, 4096 // B))
        covs = {k: {lv: [np.zeros(v.shape, bool) for v in outer.values] for lv in levels} for k in kinds}
        se = [np.zeros(v.shape) for v in outer.values]
        boot_bias = [np.zeros(v.shape) for v in outer.values]
        for c, r0 in enumerate(range(0, R, per)):
            rs = np.arange(r0, min(R, r0 + per))
            th = {k: v[rs] for k, v in outer.theta.items()}
            mean = predictions_batch(structure.plan, th, outer.totals[rs], measurements)
            mean = [np.repeat(m, B, axis=0) for m in mean]
            star = draw_answers(mean, measurements, rs.size * B, jax.random.fold_in(k_boot, c))
            start = {k: jnp.repeat(v, B, axis=0) for k, v in th.items()}
            reps = refit(structure, measurements, star, targets, loss=loss, total=total, iters=boot_iters,
                         start=start, dtype=dtype, step_size=np.repeat(outer.step_size[rs], B), fit_method=fit_method,
                         max_doublings=max_doublings)
            iterations["bootstrap"] = max(iterations.get("bootstrap", 0), reps.iterations)
            converged["bootstrap"] = converged.get("bootstrap", True) and reps.converged
            if reps.residual is not None:
                iterations["bootstrap_residual"] = max(iterations.get("bootstrap_residual", 0.0),
                                                       float(np.max(reps.residual)))
            for i, g in enumerate(reps.values):
                g = g.reshape(rs.size, B, *g.shape[1:])
                v = outer.values[i][rs]
                for lv in levels:
                    q_lo, q_hi = np.quantile(g, [(1 - lv) / 2, (1 + lv) / 2], axis=1, method="weibull")
                    for k, (lo, hi) in (("basic", (2 * v - q_hi, 2 * v - q_lo)), ("percentile", (q_lo, q_hi))):
                        if k in covs:
                            covs[k][lv][i][rs] = (lo <= truths[i]) & (truths[i] <= hi)
                se[i][rs] = np.std(g, axis=1, ddof=1)
                boot_bias[i][rs] = np.mean(g, axis=1) - v
        biases["bootstrap"] = boot_bias
        for k, cov in covs.items():
            name = "bootstrap" if k == "basic" else "bootstrap_percentile"
            covered[name], ses[name] = cov, se
        seconds["bootstrap"] = time.perf_counter() - t0
    if "linear" in methods:
        t0 = time.perf_counter()
        cov = {lv: [np.zeros(v.shape, bool) for v in outer.values] for lv in levels}
        se = [np.zeros(v.shape) for v in outer.values]
        per = min(R, 16)  # draws linearised by one vmapped program; the last chunk padded to the same size
        for r0 in range(0, R, per):
            rs = np.arange(r0, min(R, r0 + per))
            pad = np.concatenate([rs, np.full(per - rs.size, rs[-1])])
            th = {k: v[pad] for k, v in outer.theta.items()}
            lins = linearize_batch(structure.plan, th, outer.totals[pad], measurements, targets,
                                   total_free=total is None)
            for j, r in enumerate(rs):
                for i, lin in enumerate(lins[j]):
                    # one law per cell, every level read from it: (cells, levels)
                    half = np.array([np.atleast_1d(lin.law(idx).half_width(np.asarray(levels)))
                                     for idx in np.ndindex(lin.value.shape)])
                    for k, lv in enumerate(levels):
                        cov[lv][i][r] = np.abs(lin.value - truths[i]) <= half[:, k].reshape(lin.value.shape)
                    se[i][r] = lin.sd
        covered["linear"], ses["linear"] = cov, se
        seconds["linear"] = time.perf_counter() - t0
    iterations["converged"] = converged
    return Coverage(outer.values, covered, ses, seconds, iterations, biases)


def tree_dataset(sizes: Sequence[int], edges: Sequence[tuple[int, int]], n: int, *, table_seed: int = 0,
                 record_seed: int = 1):
    """Records drawn from a tree-structured distribution: ``x0`` from a Dirichlet(1) table, every other
    attribute from Dirichlet(1) conditional tables given its parent (the truth of the interval coverage
    benchmark).

    Args:
        sizes: attribute sizes (attributes ``x0, x1, ...``).
        edges: ``(parent, child)`` pairs forming a tree rooted at attribute 0, parents listed first.
        n: number of records.
        table_seed, record_seed: NumPy seeds of the tables and of the records.

    Returns:
        A :class:`~pgmjax.Dataset`.

    Example:
        >>> tree_dataset([2, 3], [(0, 1)], 100).records.shape
        (100, 2)
    """
    from ..data.dataset import Dataset
    from ..data.domain import Domain

    trng, rrng = np.random.default_rng(table_seed), np.random.default_rng(record_seed)
    root = trng.dirichlet(np.ones(sizes[0]))
    tables = {c: trng.dirichlet(np.ones(sizes[c]), size=sizes[p]) for p, c in edges}
    rec = np.zeros((n, len(sizes)), np.int64)
    rec[:, 0] = rrng.choice(sizes[0], size=n, p=root)
    for p, c in edges:
        cum = np.cumsum(tables[c][rec[:, p]], axis=1)
        u = rrng.random(n)[:, None]
        rec[:, c] = np.minimum((u > cum).sum(axis=1), sizes[c] - 1)
    return Dataset(rec, Domain({f"x{i}": s for i, s in enumerate(sizes)}))
