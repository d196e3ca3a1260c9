"""Calibrated intervals for any answer of a fitted model: :func:`intervals` and :func:`workload_intervals`.

What the intervals cover: the noise of the measurements, nothing else. For an *estimable* target (a
function of the measured marginals, e.g. a cell of a measured clique) the estimand is the true answer;
for any other target the model answers by maximum-entropy completion and the estimand is the answer of
the model fitted to noiseless measurements: the gap between that and the truth (model mismatch) is not
covered. Cliques chosen adaptively from noisy data (MST, AIM, MWEM) are taken as given: selection
uncertainty is not included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..bayes.intervals import Interval  # the one interval type (the lower layer: uncertainty imports bayes)
from ..model.graphical_model import GraphicalModel
from ..model.fit_report import Fit, model_and_report
from ..queries.measurement import Measurement, validate_measurements
from . import qp as qp_mod
from .bootstrap import refit, renoise, target_values
from .linear import linearize_all
from .targets import estimable_attrs, resolve_targets

__all__ = ["Interval", "intervals", "workload_intervals", "choose_fit_method"]

FIT_METHODS = ("auto", "qp", "mirror_descent", "lbfgs")


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0 < level < 1:
        raise ValueError(f"intervals: level must be a number in (0, 1), got {level!r}")
    return float(level)


def _clip(lo, hi, bounds):
    if bounds is None:
        return lo, hi
    return np.clip(lo, bounds[0], bounds[1]), np.clip(hi, bounds[0], bounds[1])


def intervals(
    model: GraphicalModel,
    measurements: Sequence[Measurement],
    targets: Sequence,
    *,
    level: float = 0.9,
    method: str = "bootstrap",
    B: int = 200,
    key=None,
    iters: int | None = None,
    loss: str = "l2",
    total: float | None = None,
    interval: str = "basic",
    clip: bool = True,
    check: int = 8,
    fit_method: str = "auto",
) -> list[Interval]:
    """Intervals for answers of a fitted model, one :class:`Interval` per target.

    ``method="bootstrap"`` (parametric bootstrap; Efron & Tibshirani 1993, section 13.4): ``B`` re-noised
    answer sets ``y* = Q mu_hat + e*`` are refitted in one batched program (warm-started, with the
    doubling convergence check of :func:`pgmjax.uncertainty.refit`); the basic interval is
    ``[2 g_hat - q(1 - d/2), 2 g_hat - q(d/2)]`` with ``q`` the quantiles of the refitted answers,
    ``d = 1 - level``, read at order-statistic positions ``p (B + 1)`` (where ``E F(X_(k)) = k / (B + 1)``
    equals ``p``: NumPy's default interpolation would lose about ``2 / B`` of coverage, 0.02 at ``B = 100``). Works for any loss, noise family and non-linear target.
    ``method="linear"``: ``g_hat +- c`` with ``c`` the half-width of the law of ``a^T e`` (``a`` from
    :func:`pgmjax.uncertainty.linearize`; Xiao & Xiong, "Bayesian Inference under Differential Privacy",
    2012, section 4, eq. 21-22, exact Laplace-sum law); exact for an interior L2 fit and an estimable linear
    target (the fit is then the BLUE), first order otherwise. Needs float64 (``jax_enable_x64``).

    Args:
        model: the fitted :class:`~pgmjax.GraphicalModel`, or its :class:`~pgmjax.Fit` (``pj.estimate(...,
            report=True)``): the report's iterations are the refits' default, its step size their first, and a
            fit without a functional dependency's target (its ``info["eliminated"]``) is refitted with the
            target's measurements in place.
        measurements: the measurements it was fitted to (with their noise family, ``Measurement.noise``).
        targets: a list of targets: attribute tuples (a marginal), factored query mappings
            (``model.answer``) or :class:`~pgmjax.uncertainty.Ratio` (e.g. :func:`conditional`).
        level: nominal coverage in (0, 1).
        method: ``"bootstrap"`` or ``"linear"``.
        B: bootstrap replicates (200 for 90% intervals, about 1000 for 99%).
        key: a ``jax.random`` key (bootstrap).
        iters: mirror-descent iterations per refit (default: the fit's own, from its report, at least 100; 1,000
            without a report).
        loss: the loss the model was fitted with (``"l2"`` or ``"l1"``).
        total: None if the fit estimated the total from the measurements; the public total otherwise.
        interval: ``"basic"`` or ``"percentile"`` (bootstrap).
        clip: clip intervals to the feasible range (counts >= 0, probabilities in [0, 1]).
        check: replicates of the convergence check (0 disables it; not recommended).
        fit_method: the refits' solver (:func:`pgmjax.uncertainty.refit`): ``"auto"`` (default:
            :func:`choose_fit_method`, ``"qp"`` wherever it applies, else ``"mirror_descent"``),
            ``"mirror_descent"`` (any loss and model), ``"lbfgs"``, or ``"qp"``: the exact L2 fit as a
            quadratic program when identity (or diagonal) measurements cover every clique of the model
            (MST's design); exact also for cells at zero, where warm-started mirror descent needs tens of
            thousands of iterations and under-converged refits give wrong intervals. The QP refits run in
            float64 (locally enabled when ``jax_enable_x64`` is off: float32 cannot meet its tolerance).
            The solver used is in ``diagnostics["fit_method"]``. A model with structural zeros (fitted with
            :class:`pgmjax.Constraint`) takes the bootstrap with mirror-descent refits, which keep its zero cells at
            zero: its forbidden cells' intervals are ``[0, 0]``.

    Returns:
        A list of :class:`Interval`, in the order of ``targets``.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 2, "b": 2})
        >>> ms = [pj.Measurement(("a", "b"), [[300.0, 200], [100, 400]], stddev=10.0)]
        >>> model = pj.estimate(dom, ms, iters=300)
        >>> (iv,) = intervals(model, ms, [("a",)], B=100, key=jax.random.key(0), iters=100)
        >>> bool(np.all(iv.lo < iv.value)) and bool(np.all(iv.value < iv.hi)), iv.estimable
        (True, True)
    """
    model, report = model_and_report(model)
    if not isinstance(model, GraphicalModel):
        raise TypeError(f"intervals: model must be a pgmjax.GraphicalModel or a pgmjax.Fit, got {type(model).__name__}")
    model = model.dense()  # its refits and linearisations run batched and differentiated: the dense plan's
    level = _check_level(level)
    if method not in ("bootstrap", "linear"):
        raise ValueError(f"intervals: method must be 'bootstrap' or 'linear', got {method!r}")
    if interval not in ("basic", "percentile"):
        raise ValueError(f"intervals: interval must be 'basic' or 'percentile', got {interval!r}")
    if loss not in ("l2", "l1"):
        raise ValueError(f"intervals: loss must be 'l2' or 'l1', got {loss!r}")
    if fit_method not in FIT_METHODS:
        raise ValueError(f"intervals: fit_method must be one of {', '.join(map(repr, FIT_METHODS))}, got {fit_method!r}")
    measurements = list(measurements)
    if not measurements:
        raise ValueError("intervals: no measurements: nothing to re-noise or linearise")
    validate_measurements(model.domain, measurements)
    model = _holding_measured_cliques(model, measurements, report)
    if _structural_zeros(model) and (method == "linear" or fit_method in ("lbfgs", "qp")):
        what = "method='linear'" if method == "linear" else f"fit_method={fit_method!r}"
        raise ValueError(f"intervals: {what} does not hold a constrained model's structural zeros (its -inf "
                         "potentials); use method='bootstrap' with fit_method='auto' or 'mirror_descent'")
    for i, m in enumerate(measurements):
        if model.plan.tree.containing(m.clique) is None:
            raise ValueError(f"intervals: measurement {i} on {m.clique} lies in no clique of the model (a fit that left "
                             "a functional dependency's target out needs its report: pass the pgmjax.Fit of "
                             "estimate(..., report=True))")
    tplan, _ = resolve_targets(model.domain, model.plan.tree, targets)  # checks every target first
    if total is not None and not (np.isfinite(total) and total > 0):
        raise ValueError(f"intervals: total must be positive and finite, got {total!r}")
    determined = estimable_attrs(model.domain, measurements)
    estimable = [any(a <= s for s in determined) for a in tplan.attrs]
    if method == "linear":
        if loss == "l1":
            raise ValueError("intervals: method='linear' needs an L2 fit (an L1 fit is piecewise in y); use the bootstrap")
        lins = linearize_all(model, measurements, targets, total_free=total is None)
        return [_linear(lin, level, clip, bnd, est) for lin, bnd, est in zip(lins, tplan.bounds, estimable)]
    if key is None:
        raise ValueError("intervals: the bootstrap needs key= (a jax.random key)")
    if isinstance(B, bool) or not isinstance(B, (int, np.integer)) or B < 2:
        raise ValueError(f"intervals: B must be an integer >= 2, got {B!r}")
    if iters is None:
        iters = max(100, report.iterations) if report is not None and report.history else 1000
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 1:
        raise ValueError(f"intervals: iters must be a positive integer, got {iters!r}")
    reason = None
    if fit_method == "auto":
        fit_method, reason = choose_fit_method(model, measurements, loss)
    values = _point_values(model, targets)
    ys = renoise(model, measurements, int(B), key)
    gap = None
    if fit_method == "qp":  # one more member: the exact fit of the released answers (how far the model is from it)
        ys = [np.concatenate([np.asarray(m.y, np.float64)[None], y]) for m, y in zip(measurements, ys)]
        with jax.enable_x64(True):  # float32 cannot reach the QP's tolerance (1e-4 of the smallest noise sd)
            reps = refit(_fit_of(model, report), measurements, ys, targets, loss=loss, total=total, iters=int(iters), check=check,
                         fit_method=fit_method, dtype=jnp.float64)
    else:
        reps = refit(_fit_of(model, report), measurements, ys, targets, loss=loss, total=total, iters=int(iters), check=check,
                     fit_method=fit_method)
    reps_values = reps.values
    if fit_method == "qp":
        gap = [g[0] - v for g, v in zip(reps_values, values)]
        reps_values = tuple(g[1:] for g in reps_values)
    out = []
    d = 1.0 - level
    for i, (v, g, bnd, est) in enumerate(zip(values, reps_values, tplan.bounds, estimable)):
        q_lo, q_hi = np.quantile(g, [d / 2, 1 - d / 2], axis=0, method="weibull")
        lo, hi = (2 * v - q_hi, 2 * v - q_lo) if interval == "basic" else (q_lo, q_hi)
        if clip:
            lo, hi = _clip(lo, hi, bnd)
        diag = {
            "replicates": int(B), "iterations": reps.iterations, "converged": reps.converged,
            "spread_change": reps.spread_change, "seconds": reps.seconds, "interval": interval,
            "fit_method": fit_method,
        }
        if reason is not None:
            diag["fit_method_reason"] = reason
        if reps.residual is not None:
            diag["residual"] = float(np.max(reps.residual))
        if gap is not None:
            diag["fit_gap"] = gap[i]
        if bnd is not None and np.isinf(bnd[1]):  # a count: how often the refits sit at the boundary
            diag["boundary"] = np.mean(g < 1e-6 * model.total, axis=0)
            diag["near_boundary"] = np.abs(v) < 1e-3 * model.total  # not covered by the convergence check
        out.append(Interval(v, lo, hi, level, se=np.std(g, axis=0, ddof=1), bias=np.mean(g, axis=0) - v, estimable=est,
                            method="bootstrap", diagnostics=diag))
    return out


def _fit_of(model: GraphicalModel, report):
    """The model with its report where there is one (the refits start from its step size)."""
    return model if report is None else Fit(model, report)


def _holding_measured_cliques(model: GraphicalModel, measurements, report) -> GraphicalModel:
    """The same distribution on a plan that holds every measured clique, where :func:`pgmjax.estimate` fitted
    without a functional dependency's target (the report's ``info["eliminated"]``: a measurement on the target was fitted
    through its source, and the target came back as a leaf clique): the refits need each measurement inside a clique.
    The added cliques' potentials are zero, so the model's answers are unchanged; its ``-inf`` cells stay. Any other
    model is returned as it is."""
    missing = [m.clique for m in measurements if model.plan.tree.containing(m.clique) is None]
    if not missing or report is None or not report.info.get("eliminated"):
        return model
    from ..graph.oracle import make_plan

    plan = make_plan(model.domain, list(model.cliques) + list(dict.fromkeys(missing)))
    theta = plan.from_tables(model.potentials, model.dtype)
    return model.replace(plan=plan, theta=theta)


def choose_fit_method(model: GraphicalModel, measurements: Sequence[Measurement], loss: str = "l2") -> tuple[str, str]:
    """The refits' solver that ``fit_method="auto"`` uses, and why: ``(fit_method, reason)``.

    ``"qp"`` (the exact fit, :mod:`pgmjax.uncertainty.qp`) when the loss is L2 and every measurement is an
    identity (or diagonal) marginal query with every clique of the model's junction tree measured as a
    whole (MST's design, compressed or not); ``"mirror_descent"`` otherwise (an L1 fit, a workload-strategy
    measurement, an unmeasured clique), with the convergence check of :func:`pgmjax.uncertainty.refit`.

    Example:
        >>> import pgmjax as pj
        >>> dom = pj.Domain({"a": 2, "b": 2})
        >>> ms = [pj.Measurement(("a", "b"), [[300.0, 200], [100, 400]], stddev=10.0)]
        >>> model = pj.estimate(dom, ms, iters=10)
        >>> choose_fit_method(model, ms)[0], choose_fit_method(model, ms, "l1")[0]
        ('qp', 'mirror_descent')
    """
    if loss != "l2":
        return "mirror_descent", f"the {loss.upper()} loss (the exact QP fits the L2 loss only)"
    if _structural_zeros(model):
        return "mirror_descent", "structural zeros (constraints): mirror descent's refits keep them, the QP's would not"
    try:
        qp_mod.layout(model.dense().plan, list(measurements))
    except ValueError as e:
        return "mirror_descent", str(e).replace("fit_method='qp': ", "no exact QP: ")
    return "qp", "L2 loss, identity measurements covering every clique of the model: exact QP refits"


def _structural_zeros(model: GraphicalModel) -> bool:
    """Whether the model has cells held at zero by ``-inf`` potentials (:class:`pgmjax.Constraint`)."""
    return any(np.isneginf(np.asarray(t)).any() for t in model.potentials.values())


def _point_values(model: GraphicalModel, targets) -> list[np.ndarray]:
    """The model's own answers to the targets (float64, the targets' shapes)."""
    tplan, mats = resolve_targets(model.domain, model.plan.tree, targets)
    dt = model.dtype
    jm = tuple(tuple(None if q is None else jax.numpy.asarray(q, dt) for q in ms) for ms in mats)
    theta = {k: v[None] for k, v in model.theta.items()}
    out = target_values(tplan, model.plan, theta, jm, jax.numpy.asarray([model.total], dt))
    return [np.asarray(v[0], np.float64) for v in out]


def _identity():
    from ..queries.factors import Identity

    return Identity()


def _shares(cmap: np.ndarray, spread, attribute: str, size: int) -> np.ndarray:
    """Each original value's share of its compressed value: the mechanism's ``spread`` where it reports one, else
    even (``1 / k`` for ``k`` values merged)."""
    if spread is not None and attribute in spread:
        return np.asarray(spread[attribute], np.float64)
    return 1.0 / np.bincount(cmap, minlength=size)[cmap].astype(np.float64)


def _linear(lin, level, clip, bounds, estimable) -> Interval:
    value = lin.value
    half = np.zeros(value.shape)
    for idx in np.ndindex(value.shape):
        half[idx] = lin.law(idx).half_width(level)
    lo, hi = value - half, value + half
    if clip:
        lo, hi = _clip(lo, hi, bounds)
    diag = {"residual": lin.residual, "weights": lin.weights}
    return Interval(value, lo, hi, level, half, se=lin.sd, bias=np.zeros(value.shape), estimable=estimable, method="linear",
                    diagnostics=diag)


def workload_intervals(result, workload, *, level: float = 0.9, key=None, method: str = "bootstrap", B: int = 200,
                       loss: str | None = None, total: float | None = None, iters: int | None = None,
                       fit_method: str = "auto") -> list[Interval]:
    """Intervals for every query of a workload, answered by a mechanism's fitted model.

    Uses the model the measurements were fitted on; when the mechanism compressed the domain (MST: its
    ``info`` holds ``compressed_model`` and ``mapping``) each query factor ``Q_a`` on an original attribute
    becomes ``Q_a M_a`` on the compressed one (``M_a[x, v]`` the share of ``v`` that original value ``x`` takes:
    ``info.spread``, or ``1 / k_v`` for ``k_v`` values merged evenly), which answers exactly as the decompressed
    model does.

    Args:
        result: a :class:`~pgmjax.mechanisms.result.MechanismResult` (``model``, ``measurements``, ``info``).
        workload: a :class:`~pgmjax.Workload` on the result's domain.
        level, key, method, B, iters, fit_method: as for :func:`intervals` (the default ``fit_method="auto"``
            refits MST's design, compressed or not, exactly by the QP, anything else by mirror descent; the
            solver used is in each interval's ``diagnostics["fit_method"]``).
        loss: the fit's loss (default ``"l2"``).
        total: the public total if the fit used one.

    Returns:
        One :class:`Interval` per workload query (the shape of ``model.answer`` of that query).

    Example:
        >>> res = pj.mechanisms.mst(data, epsilon=1.0, key=jax.random.key(0))           # doctest: +SKIP
        >>> ivs = workload_intervals(res, workload, level=0.9, key=jax.random.key(1))   # doctest: +SKIP
    """
    info = getattr(result, "info", None)
    model = result.model
    mapping: Mapping = {}
    # a mechanism that fitted over a compressed domain says so in its info (pgmjax.mechanisms.run_info's
    # CompressedRunInfo, a layer above: read by name)
    spread = None
    if getattr(info, "mapping", None) and getattr(info, "compressed_model", None) is not None:
        model, mapping, spread = info.compressed_model, info.mapping, getattr(info, "spread", None)
    fitted = getattr(result, "fitted", None)  # the model with its fit's report: the refits start where it ended
    if fitted is not None and fitted.model is model:
        model = fitted
    domain = model_and_report(model)[0].domain
    targets = []
    for wq in workload.queries:
        q = {}
        for a, m in zip(wq.clique, wq.matrices):
            if a in mapping:
                cmap = np.asarray(mapping[a])
                merge = np.zeros((cmap.size, domain[a]))
                merge[np.arange(cmap.size), cmap] = _shares(cmap, spread, a, domain[a])
                q[a] = merge if m is None else np.asarray(m) @ merge
            else:
                q[a] = _identity() if m is None else m
        targets.append(q)
    loss = loss or "l2"
    return intervals(model, result.measurements, targets, level=level, method=method, B=B, key=key,
                     iters=iters, loss=loss, total=total, fit_method=fit_method)
