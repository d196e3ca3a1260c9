"""Parametric bootstrap of a fitted model: re-noise its answers to the measured queries, refit every
replicate in one batched compiled program, and read the spread of any answer.

Pivot (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, section 13.4, the basic
interval): the law of ``g_hat - g`` under the truth is approximated by the law of ``g* - g_hat`` under the
fitted model, where ``y* = Q mu_hat + e*`` with ``e*`` drawn from the measurements' own noise law and
``g*`` is the answer of the model refitted to ``y*``. Noise is drawn row by row in each measurement's own
row space (the strategy's rows for HDMM-style Kronecker or dense queries), which is the noise law of a
:class:`~pgmjax.Measurement` (independent rows, Gaussian or Laplace): the induced errors on the cells are
correlated exactly as the mechanism's were. Re-noising uses only released values and public noise scales,
so it is post-processing (no privacy cost).

The refits run through :func:`pgmjax.estimation.batch.run_batch` (mirror descent, each replicate on its own
line-search schedule, warm-started at the fitted potentials). Warm starts that stop early stay near the
fit and make the spread too small, so :func:`refit` checks convergence: on 8 replicates, doubling the
iteration count must change the spread of every answer by less than 2%; otherwise every replicate is
run further (doubling) before the answers are read. Answers below 1e-3 of the total (boundary cells, where
mirror descent crawls and neither interval method is reliable) are left out of the check and flagged.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..estimation import batch as batch_mod
from ..estimation import driver
from ..estimation.losses import MeasurementArrays
from ..graph import oracle
from ..model.graphical_model import GraphicalModel
from ..model.fit_report import model_and_report
from ..queries.measurement import Measurement, total_rule
from . import qp
from .targets import evaluate, resolve_targets

__all__ = ["renoise", "draw_answers", "Replicates", "refit"]


def renoise(model: GraphicalModel, measurements: Sequence[Measurement], B: int, key) -> list[np.ndarray]:
    """``B`` replicate answer vectors ``y* = Q mu_hat + e*`` per measurement (post-processing: no budget).

    Args:
        model: the fitted model (``mu_hat``).
        measurements: the measurements (their queries, noise scales and noise families).
        B: number of replicates.
        key: a ``jax.random`` key.

    Returns:
        One ``(B, rows)`` float64 array per measurement.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> ms = [pj.Measurement(("a",), [40.0, 60.0], stddev=2.0, noise="laplace")]
        >>> model = pj.estimate(pj.Domain({"a": 2}), ms, iters=100)
        >>> renoise(model, ms, 5, jax.random.key(0))[0].shape
        (5, 2)
    """
    return draw_answers([m.answer(model.marginal(m.clique)) for m in measurements], measurements, B, key)


def draw_answers(means: Sequence[np.ndarray], measurements: Sequence[Measurement], n: int, key) -> list[np.ndarray]:
    """``n`` noisy answer sets around ``means`` with the measurements' noise laws (rows independent).

    Args:
        means: per measurement, ``(rows,)`` or ``(n, rows)`` noiseless answers.
        measurements: the measurements (stddev and noise family per row).
        n: number of draws.
        key: a ``jax.random`` key.

    Returns:
        Per measurement an ``(n, rows)`` float64 array.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> m = pj.Measurement(("a",), [0.0, 0.0], stddev=1.0)
        >>> draw_answers([np.array([5.0, 7.0])], [m], 3, jax.random.key(0))[0].shape
        (3, 2)
    """
    out = []
    for m, mean, k in zip(measurements, means, jax.random.split(key, len(measurements))):
        if m.noise == "laplace":  # stddev sqrt(2) b
            z = np.asarray(jax.random.laplace(k, (n, m.rows), jnp.float32), np.float64) / np.sqrt(2.0)
        else:
            z = np.asarray(jax.random.normal(k, (n, m.rows), jnp.float32), np.float64)
        out.append(np.asarray(mean, np.float64).reshape(-1 if np.ndim(mean) == 1 else n, m.rows) + z * m.row_stddev())
    return out


def _row_codes(problem_plan, measurements, dtype) -> tuple:
    """Where every measurement row lands in the stacked arrays: the ``y`` leaves of a problem built from
    measurements whose answers are ``row index + 1`` (0 marks padding)."""
    from ..estimation.losses import stack_measurements

    offsets = np.cumsum([0] + [m.rows for m in measurements])
    coded = [Measurement(m.clique, np.arange(o, o + m.rows) + 1.0, m.stddev, m.query, m.noise)
             for m, o in zip(measurements, offsets)]
    stacked = stack_measurements(problem_plan, coded, jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
    return tuple(np.rint(np.asarray(g["y"], np.float64)).astype(np.int64) for g in stacked.arrays)


def stacked_problem(model, measurements, ys: Sequence[np.ndarray], *, loss="l2", total=None, dtype=None):
    """The stacked problem of ``B`` replicate answer sets of ``measurements`` (one host pass, not ``B``).

    Same as :func:`pgmjax.estimation.batch.make_batch_problem` on ``B`` measurement lists that differ only in their
    answers, built from one :func:`pgmjax.estimation.batch.make_problem` and the rows' positions in its arrays.

    Args:
        model: the fitted model (its non-singleton cliques are kept as extra cliques).
        measurements: the measurements.
        ys: per measurement ``(B, rows)`` answers.
        loss: ``"l2"`` or ``"l1"``.
        total: None (each replicate's total estimated from its answers, as the fit did) or a number.
        dtype: the refit's dtype (default the model's).

    Returns:
        A :class:`~pgmjax.estimation.driver.Problem` with a leading batch axis ``B`` on its answers, noise scales,
        totals and Lipschitz constants.
    """
    dtype = jnp.dtype(dtype or model.dtype)
    extra = [c for c in model.cliques if len(c) > 1]
    base = batch_mod.make_problem(model.domain, measurements, loss=loss, total=total or 1.0, dtype=dtype, cliques=extra)
    y = np.concatenate([np.asarray(v, np.float64) for v in ys], axis=1)  # (B, rows)
    b = y.shape[0]
    codes = _row_codes(base.plan, measurements, dtype)
    padded = np.concatenate([np.zeros((b, 1)), y], axis=1)
    arrays = []
    for group, code in zip(base.meas.arrays, codes):
        g = dict(group)
        g["y"] = jnp.asarray(padded[:, code], dtype)
        g["inv_std"] = jnp.asarray(np.broadcast_to(np.asarray(group["inv_std"]), (b, *group["inv_std"].shape)), dtype)
        arrays.append(g)
    meas = MeasurementArrays(tuple(arrays), base.meas.groups)
    if total is None:
        totals = np.maximum(y @ total_rule(measurements)[0], 1.0)
    else:
        totals = np.full(b, float(total))
    lip = jnp.full((b,), float(base.lipschitz), dtype)
    return driver.Problem(base.plan, meas, jnp.asarray(totals, dtype), lip, jnp.zeros((), dtype), loss)


def _take(problem: driver.Problem, idx: np.ndarray) -> driver.Problem:
    leaves, treedef = jax.tree_util.tree_flatten(problem)
    ids = batch_mod.batched_ids(problem)
    return jax.tree_util.tree_unflatten(treedef, [a[idx] if id(a) in ids else a for a in leaves])


@jit(static_argnums=0)
def target_values(tplan, plan, theta, matrices, totals):
    """The targets' values (compiled plan ``tplan``) under each of a batch of potentials ``theta`` (leading axis)
    with their ``totals``: one marginal-oracle pass per member, under ``jax.vmap``."""
    def one(th, n):
        return evaluate(tplan, plan, oracle.marginals(plan, th, n)[0], matrices, n)

    return jax.vmap(one)(theta, totals)


@dataclass(frozen=True, eq=False)
class Replicates:
    """The refitted answers of a bootstrap.

    Attributes:
        values: per target ``(B, *shape)`` float64 answers of the refitted replicates.
        iterations: mirror-descent iterations every replicate ran.
        converged: whether the doubling check passed (spread change under ``check_tol``).
        spread_change: the largest relative change of the spread at the last check.
        seconds: wall time of the refits (checks included).
        theta: the refitted potentials ``{block: (B, ...)}``; totals: ``(B,)``.
        residual: ``fit_method="qp"`` only: per replicate the largest constraint residual (counts).
    """

    values: tuple
    iterations: int
    converged: bool
    spread_change: float
    seconds: float
    theta: dict = None
    totals: np.ndarray = None
    step_size: np.ndarray = None
    residual: np.ndarray = None


def _spread_change(a: tuple, b: tuple, floor: float) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        sx, sy = np.std(x, axis=0, ddof=1), np.std(y, axis=0, ddof=1)
        scale = np.abs(np.mean(y, axis=0)) + 1.0
        # answers that do not move (structural zeros) say nothing; answers near 0 (counts under ``floor``)
        # sit at the boundary, where mirror descent crawls and no interval is reliable (they are reported
        # by the ``boundary`` diagnostic instead)
        ok = (sy > 1e-8 * scale) & (np.abs(np.mean(y, axis=0)) >= floor)
        if ok.any():
            worst = max(worst, float(np.max(np.abs(sy[ok] - sx[ok]) / sy[ok])))
    return worst


def _value_change(a: tuple, b: tuple, floor: float) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        sy = np.std(y, axis=0, ddof=1)
        scale = np.maximum(sy, 1e-8 * (np.abs(np.mean(y, axis=0)) + 1.0))
        ok = np.abs(np.mean(y, axis=0)) >= floor
        if ok.any():
            worst = max(worst, float(np.max((np.abs(y - x) / scale)[:, ok])))
    return worst


def refit(
    model: GraphicalModel,
    measurements: Sequence[Measurement],
    ys: Sequence[np.ndarray],
    targets: Sequence,
    *,
    loss: str = "l2",
    total=None,
    iters: int = 500,
    dtype=None,
    check: int = 8,
    check_tol: float = 0.02,
    max_doublings: int = 3,
    chunk: int = 50,
    start=None,
    step_size=None,
    check_on: str = "spread",
    boundary: float = 1e-3,
    fit_method: str = "mirror_descent",
    qp_tol: float = 1e-4,
) -> Replicates:
    """Refit every replicate (one batched program, warm-started at the model) and evaluate the targets.

    Args:
        model: the fitted model, or its :class:`~pgmjax.Fit` (the refits then start from its report's step size).
        measurements: the measurements it was fitted to.
        ys: replicate answers, per measurement ``(B, rows)`` (e.g. from :func:`renoise`).
        targets: the targets (see :mod:`pgmjax.uncertainty.targets`).
        loss: the fit's loss, ``"l2"`` or ``"l1"``.
        total: None (re-estimated from each replicate, as the default fit does) or the public total.
        iters: mirror-descent iterations per replicate (before any doubling).
        dtype: refit dtype (default the model's).
        check: replicates used by the convergence check (0: no check).
        check_tol: the largest allowed relative change of the spread when the iterations double.
        max_doublings: how often every replicate may be run further before giving up (with a warning).
        chunk: iterations per compiled call.
        start: starting potentials: None (the model's, every replicate), ``"zeros"`` (uniform: a cold fit),
            or ``{block: (B, ...)}`` in the layout of ``model.plan`` (e.g. each replicate its own fit's).
        step_size: mirror descent's first step per replicate ``(B,)`` (default ``1 / (L N)``, or the fit's
            last step, from its report, when warm-started at the model): a warm start with a tiny step spends its first
            iterations growing it back.
        check_on: ``"spread"`` (the bootstrap's criterion: the answers' standard deviation) or ``"values"``
            (every answer moves by less than ``check_tol`` of the answers' spread: for fits whose answers are
            used one by one, e.g. the outer fits of a coverage study).
        boundary: answers whose mean is below ``boundary * total`` (cells at the boundary of the polytope)
            are left out of the check (see the ``boundary`` diagnostic of :func:`intervals`).
        fit_method: the refits' estimator: ``"mirror_descent"``; ``"lbfgs"`` (L2 only; often far fewer
            iterations on small models with low-count cells, where mirror descent crawls); or ``"qp"`` (L2
            only, identity measurements covering every clique of the model, e.g. MST's: the exact fit as a
            quadratic program over consistent marginals, :mod:`pgmjax.uncertainty.qp`; it needs no start
            and no doubling check: ``iters``, ``start``, ``step_size`` and ``check`` are not used, it runs
            until every constraint residual is below ``qp_tol`` times the smallest noise sd).
        qp_tol: ``fit_method="qp"``'s stopping tolerance (see above).

    Returns:
        :class:`Replicates`.
    """
    start0 = time.perf_counter()
    model, report = model_and_report(model)
    model = model.dense()  # the refits run batched on the dense plan (pgmjax.estimation.batch)
    problem = stacked_problem(model, measurements, ys, loss=loss, total=total, dtype=dtype)
    plan = problem.plan
    dt = problem.total.dtype
    b = int(problem.total.shape[0])
    if isinstance(start, dict):
        if plan.cliques != model.plan.cliques:
            raise ValueError("refit: start potentials need the refit's junction tree to be the model's")
        theta = {k: jnp.asarray(v, dt) for k, v in start.items()}
    else:
        theta1 = plan.zeros(dt) if start == "zeros" else plan.from_tables(model.potentials, dt)
        theta = {k: jnp.broadcast_to(v, (b, *v.shape)) for k, v in theta1.items()}
    step = 1.0 / (float(problem.lipschitz[0]) * np.asarray(problem.total, np.float64))
    if step_size is not None:
        step = np.broadcast_to(np.asarray(step_size, np.float64), (b,)).copy()
    elif report is not None and report.step_size is not None and loss != "l1" and start is None:
        step = np.maximum(step, report.step_size)
    tplan, mats = resolve_targets(model.domain, plan.tree, targets)
    jm = tuple(tuple(None if q is None else jnp.asarray(q, dt) for q in ms) for ms in mats)
    if fit_method not in ("mirror_descent", "lbfgs", "qp") or (fit_method != "mirror_descent" and loss != "l2"):
        raise ValueError("refit: fit_method must be 'mirror_descent' or (with the L2 loss) 'lbfgs' or 'qp', "
                         f"got {fit_method!r} with loss {loss!r}")
    if fit_method == "qp":
        return _refit_qp(model, measurements, ys, problem, tplan, jm, qp_tol, start0)
    est = driver.METHODS[fit_method]()

    def run(prob, th, n, st):
        params, _, history = batch_mod.run_batch(est, prob, th, n, step_size=st, chunk=chunk, group="auto")
        step = history[-1]["info"].step_size  # where the estimator has one (mirror descent), the step to go on from
        return params, (np.asarray(step, np.float64) if step is not None else st)  # None: no step (L1's stages)

    def read(prob, th):
        return tuple(np.asarray(v, np.float64) for v in target_values(tplan, plan, th, jm, prob.total))

    theta, step = run(problem, theta, iters, step)
    done, converged, change = iters, check == 0, 0.0
    idx = np.arange(min(check, b))
    for doubling in range(max_doublings + 1):
        if check == 0 or idx.size < 2:
            converged = True
            break
        sub = _take(problem, idx)
        sub_theta = {k: v[idx] for k, v in theta.items()}
        before = read(sub, sub_theta)
        longer, _ = run(sub, sub_theta, done, step[idx])
        floor = boundary * float(np.mean(np.asarray(sub.total)))
        change = (_spread_change if check_on == "spread" else _value_change)(before, read(sub, longer), floor)
        if change < check_tol:
            converged = True
            break
        if doubling == max_doublings:
            break
        theta, step = run(problem, theta, done, step)
        done *= 2
    if not converged:
        warnings.warn(
            f"refits under-converged: after {done} iterations, doubling them still changes "
            f"{'the spread of an answer' if check_on == 'spread' else 'an answer (relative to its spread)'} by "
            f"{change:.1%} (> {check_tol:.0%}); bootstrap intervals may be too narrow. Pass a larger iters.",
            RuntimeWarning,
            stacklevel=3,
        )
    return Replicates(read(problem, theta), done, converged, change, time.perf_counter() - start0, theta,
                      np.asarray(problem.total, np.float64), step)


def _refit_qp(model, measurements, ys, problem, tplan, jm, tol, start0) -> Replicates:
    """:func:`refit` by the exact QP (:mod:`pgmjax.uncertainty.qp`): no start, no doubling check."""
    plan = problem.plan
    lay = qp.layout(plan, measurements)
    theta, its, resid, atol = qp.solve(lay, plan, ys, problem.total, measurements, tol=tol)
    converged = bool(np.all(resid <= atol))
    if not converged:
        warnings.warn(
            f"refits (fit_method='qp') stopped after {int(its.max())} L-BFGS iterations with a constraint residual "
            f"of {float(resid.max()):.3g} (> {atol:.3g}); the fits are not exact. Use float64.",
            RuntimeWarning,
            stacklevel=3,
        )
    values = tuple(np.asarray(v, np.float64) for v in target_values(tplan, plan, theta, jm, problem.total))
    totals = np.asarray(problem.total, np.float64)
    return Replicates(values, int(its.max()), converged, 0.0, time.perf_counter() - start0, theta, totals,
                      np.ones_like(totals), resid)
