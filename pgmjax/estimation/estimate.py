"""``estimate``: measurements in, a fitted graphical model out."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from . import continuation, dependencies, driver, inputs, memory, oracles, sharding
from .. import compiler
from ..checks import check_count
from ..data.domain import Domain
from ..queries.constraints import Constraint, check_constraints
from ..queries.measurement import Measurement
from ..queries.public import PublicData
from ..model.fit_report import Fit
from ..model.graphical_model import GraphicalModel
from .compile_ahead import start as compile_next_class, wait as wait_for_compile


def estimate(
    domain: Domain,
    measurements: Sequence[Measurement],
    method: str = "mirror_descent",
    iters: int = 1000,
    *,
    loss: str | Callable = "l2",
    total: float | None = None,
    tol: float | None = None,
    callback: Callable[[dict], Any] | None = None,
    warm_start: GraphicalModel | Fit | None = None,
    cliques: Sequence = (),
    dtype=None,
    step_size: float | None = None,
    chunk: int = 50,
    progress: bool = False,
    oracle="exact",
    devices: int = 1,
    program: str = "auto",
    structures: int = 1,
    repeats: int = 1,
    expected_iters: int | None = None,
    compile_ahead: bool = False,
    constraints: Sequence[Constraint] = (),
    public: PublicData | None = None,
    report: bool = False,
) -> GraphicalModel | Fit:
    """Fit the graphical model (maximum-entropy distribution) that best explains noisy measurements.

    Solves ``min_{mu in marginal polytope} L(mu)`` (McKenna, Sheldon &
    Miklau, ICML 2019, Problem 1) and returns the model whose clique
    marginals attain it.

    Args:
        domain: the :class:`Domain`.
        measurements: :class:`Measurement` objects (may be empty if ``loss``
            is a callable and ``cliques`` names the model's cliques).
        method: ``"mirror_descent"`` (Algorithm 1), ``"dual_averaging"``
            (Algorithm 2) or ``"lbfgs"`` (Appendix A.3; once it stalls, the iterations left go to
            mirror descent: see :class:`pgmjax.estimation.lbfgs.LBFGS`); or a configured
            :class:`pgmjax.estimation.driver.MirrorDescent` (e.g. ``MirrorDescent(momentum=0.0, growth=1.01,
            min_growth=1.01)``, the reference code's plain mirror descent, which MST's fits use).
        iters: maximum number of iterations.
        loss: ``"l2"`` (Gaussian noise), ``"l1"`` (Laplace noise; its
            maximum-likelihood loss) or a callable taking a ``clique ->
            marginal`` mapping and returning a scalar (differentiated with
            autodiff).
        total: the number of records; None estimates it from the
            measurements by inverse-variance weighting (Appendix E.1).
        tol: early stopping on the relative loss change over a chunk.
        callback: called after each chunk with a dict (iteration, loss,
            oracle_calls, seconds, state); return True to stop.
        warm_start: a previous model, or a previous :class:`~pgmjax.Fit`: its cliques are added to the model and
            its potentials are the starting point (and, a Fit's, for mirror descent on a smooth loss, the step
            size its report says its line search ended at).
        cliques: extra cliques the model must hold.
        dtype: ``jnp.float32`` (default) or ``jnp.float64`` (needs
            ``jax.config.update("jax_enable_x64", True)``).
        step_size: initial step size of mirror descent (default ``1 / (L N)``,
            or the warm start's last step if larger).
        chunk: iterations per compiled call.
        progress: show a tqdm progress bar.
        devices: how many local devices the model's tables are split over (default 1): each block of cliques
            along its cliques, so a model too large for one device's memory fits on several
            (:mod:`pgmjax.estimation.sharding`; exact oracle only).
        oracle: the marginal oracle (:mod:`pgmjax.estimation.oracles`): ``"exact"`` (the junction tree; default),
            ``"approximate"`` (convex generalized belief propagation on the measured cliques' region graph, the
            relaxed problem of McKenna, Pradhan, Sheldon & Miklau, NeurIPS 2021; or a
            :class:`pgmjax.estimation.oracles.ApproximateOracle` for other settings) or ``"auto"`` (exact where the
            junction tree fits the size limit, else approximate, said in the report's ``info`` and a warning). The
            approximate oracle needs mirror descent and the ``"l2"``/``"l1"`` loss.
        program: which compiled program runs the fit (:mod:`pgmjax.estimation.oracles`): ``"size_class"`` (the junction
            tree's routing as data, one program shared by every model of a size class: a new structure compiles
            nothing once its class has run), ``"dense"`` (tables stacked by shape, one program per structure:
            the fastest iterations, a compile per new structure) or ``"auto"`` (default: ``"size_class"`` where
            the fit's work is small enough that compiling would dominate, the measurements are all marginals,
            the loss is ``"l2"``/``"l1"`` and the oracle exact on one device; on a GPU, ``"paths"`` where the
            junction tree has long paths) or ``"paths"`` (the dense program with the tree's long paths passed by an
            associative scan, :mod:`pgmjax.graph.path_scan`: kernel launches per iteration logarithmic in the
            tree's depth instead of one per level, for more arithmetic; a GPU's program for deep trees).
            ``"auto"`` weighs the two programs' compiles (:func:`pgmjax.estimation.oracles.uses_size_class`).
        structures: how many different structures of about this size the caller means to fit in this process,
            this one included (a mechanism's rounds, a sweep over cliques): the size-class program's compile is
            shared by them, so ``program="auto"`` counts a ``1/structures`` share of it against this fit. The
            default, 1, makes no such promise; the choice never depends on what earlier calls compiled.
        repeats: how many times the caller means to fit this same structure (the same cliques measured), this one
            included (a mechanism's rounds that measure a clique again): the dense program's compile is shared by
            them, so ``program="auto"`` counts a ``1/repeats`` share of it against this fit.
        expected_iters: how many iterations the caller expects the fit to run before ``tol`` stops it (a
            mechanism's last fit of about this structure), at most ``iters`` (default ``iters``):
            ``program="auto"`` weighs the size-class program's passes over this many.
        constraints: :class:`pgmjax.Constraint` objects, combinations of values no record holds
            (:mod:`pgmjax.queries.constraints`): each constraint's attributes become a clique of the model and its
            forbidden cells log-potentials of ``-inf``, held there by every method, so the model is the
            maximum-entropy distribution on the allowed cells that best explains the measurements. With the
            exact oracle a functional dependency's target leaves the fit (:mod:`pgmjax.estimation.dependencies`):
            its messages cost what the source's tables cost, not the product. The noisy
            mass the measurements put on forbidden cells is in the report's ``info["forbidden_mass"]``, with a
            warning where it is beyond the noise (:func:`pgmjax.queries.constraints.forbidden_mass`).
        public: a :class:`pgmjax.queries.public.PublicData`: its marginals on its cliques (default: the measured
            ones) join the loss as measurements scaled to the total (estimated from the private measurements
            alone, where not given) with its stated standard deviation, at no privacy cost; their cliques are in
            the report's ``info["public"]``.
        report: also return what the fit learned about itself: a :class:`~pgmjax.Fit` ``(model, report)``, the
            :class:`~pgmjax.FitReport` holding the per-chunk log, the loss, the last step size and ``info``.

    Returns:
        A :class:`GraphicalModel` (with ``report=True``, a :class:`~pgmjax.Fit`). With the approximate oracle, a
        :class:`pgmjax.model.approximate_model.ApproximateModel` (answers from its regions' pseudo-marginals).

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 3})
        >>> m = pj.Measurement(("a", "b"), np.array([[10., 20, 30], [5, 5, 30]]), stddev=1.0)
        >>> model = pj.estimate(dom, [m], iters=200)
        >>> model.marginal("a").round()
        array([60., 40.])
    """
    caller = "estimate"
    # ---- check: every option and input, before anything is compiled or allocated
    estimator, method, dtype = inputs.check_options(method, loss, iters, dtype, caller=caller)
    warm_start, warm_step = inputs.check_warm_start(warm_start, domain, caller)
    oracle = oracles.check_oracle(oracle, estimator, loss, caller=caller)
    devices = sharding.check_devices(devices, caller, oracle=oracle)
    measurements, model_cliques = inputs.check_structure(domain, measurements, loss, cliques, warm_start, caller=caller)
    constraints = check_constraints(domain, constraints, caller)
    if not isinstance(compile_ahead, bool):
        raise TypeError(f"{caller}: compile_ahead must be True or False, got {compile_ahead!r}")
    # public marginals: measurements at the private total's scale, free
    measurements, total, public_cliques = inputs.with_public(domain, measurements, public, total, warm_start, caller)
    dependency = dependencies.can_eliminate(constraints, oracle, loss, devices, program)
    if dependency is not None:  # the determined attribute leaves the fit: this function again, without it
        again = functools.partial(
            estimate, method=estimator, iters=iters, loss=loss, total=total, tol=tol, callback=callback, dtype=dtype,
            step_size=step_size, chunk=chunk, progress=progress, oracle=oracle, devices=devices, program=program,
            structures=structures, repeats=repeats, expected_iters=expected_iters, compile_ahead=compile_ahead,
            report=True)
        fit = dependencies.estimate_without_target(dependency, domain, measurements, constraints, list(cliques),
                                                   (warm_start, warm_step), public_cliques, again, caller)
        return fit if report else fit.model
    model_cliques += public_cliques + [c.attributes for c in constraints]
    total = inputs.warm_total(total, measurements, warm_start)
    # ---- build: the compiled program's plan, the problem (structure static, numbers arrays), the start
    compiler.bound_compiled(compiler.MAX_LIVE_PROGRAMS)  # a loop over new structures holds a bounded number
    plan, oracle_info = oracles.choose_plan(
        domain, model_cliques, measurements, loss, estimator, oracle, dtype, program=program, devices=devices,
        structures=check_count(structures, "structures", caller), repeats=check_count(repeats, "repeats", caller),
        expected_iters=iters if expected_iters is None else min(check_count(expected_iters, "expected_iters", caller), iters),
        caller=caller)
    problem, total, lipschitz = inputs.build_problem(domain, measurements, model_cliques, loss, total, dtype,
                                                     caller=caller, plan=plan)
    # the fit's peak (every copy its method makes, in its dtype) against the limit, before the potentials exist
    memory.check_problem(problem, domain, model_cliques, measurements, method, dtype, caller)
    theta = inputs.starting_potentials(problem.plan, warm_start, constraints, dtype)
    step_size = inputs.first_step(step_size, lipschitz, total, loss, warm_step)
    # ---- run: compiled chunks, on the devices the model is split over; a compile of them in flight joined first
    if compiler.ahead.in_flight():
        wait_for_compile(estimator, problem, int(iters))
    problem, theta, on_devices = sharding.split(problem, theta, devices)
    with on_devices:  # a split model's programs are traced under its mesh (pgmjax.estimation.sharding)
        params, history = _run(estimator, method, problem, theta, int(iters), step_size, chunk, tol, callback, progress)
        reported_loss, step = driver.reported(history)
        reported_loss = float(driver.model_loss(problem, params) if reported_loss is None else reported_loss)
    if compile_ahead:  # the next class's programs while the caller works on (its model grows)
        compile_next_class(estimator, problem, int(iters), step_size)
    # ---- the model: its answers are a function of its potentials and total alone (pgmjax.model.graphical_model)
    forbidden = inputs.report_forbidden_mass(domain, measurements, constraints, caller) if constraints else None
    info = inputs.fit_info(oracle_info, public_cliques, forbidden)
    fit = inputs.fitted_model(problem.plan, params, total, history, reported_loss, step, info)
    return fit if report else fit.model


def _run(estimator, method: str, problem, theta, iters: int, step_size, chunk, tol, callback, progress):
    """The driver's run (:func:`pgmjax.estimation.driver.run`) with the L1 loss's smoothing stages
    (:mod:`pgmjax.estimation.continuation`), a progress bar, and the iterations a stalled run leaves handed to
    the estimator's :attr:`~pgmjax.estimation.contract.Traits.finish_with`. Returns ``(params, history)``."""
    callback, close = driver.progress_bar(callback, iters, f"pgmjax {method}") if progress else (callback, None)
    try:
        params, _, history = driver.run(continuation.smoothed(estimator, problem.loss, iters), problem, theta, iters,
                                        step_size=step_size, chunk=chunk, tol=tol, callback=callback)
        finisher = estimator.traits.finish_with
        if finisher is not None and history and history[-1].get("stalled") and history[-1]["iteration"] < iters:
            params, history = _finish_with(finisher, method, problem, params, history, iters, step_size, chunk,
                                           tol, callback)
    finally:
        if close is not None:
            close()
    return params, history


def _finish_with(finisher, method: str, problem, params, history, iters, step_size, chunk, tol, callback):
    """The remaining iterations of a run that stalled (``method``, L-BFGS), run by ``finisher`` (its
    :attr:`~pgmjax.estimation.contract.Traits.finish_with`: mirror descent) from its best iterate.

    L-BFGS stops early when it stalls (:class:`pgmjax.estimation.lbfgs.LBFGS`): in float64 it is then optimal to
    first order, and mirror descent's line search accepts no step that raises the loss, so this costs
    little; in float32 its line search stops where the loss's decrease falls below the loss's rounding,
    while mirror descent's multiplicative steps, with their rounding allowance, keep going.

    With the L1 loss a stall ends L-BFGS's smoothing stage early, and the run once the last stage stalls.
    In float32 that happens within a few hundred iterations, each stage's line search stopped by the
    smoothed loss's rounding (2.8e-4 above the optimum on a 6-attribute model where mirror descent
    reaches 1.5e-5): mirror descent then runs its own smoothing stages on the remaining iterations from
    L-BFGS's iterate, and the fit keeps whichever of the two has the lower L1 loss (in float64 L-BFGS's,
    already optimal: a restarted continuation first moves away from it).
    """
    done, calls = history[-1]["iteration"], history[-1]["oracle_calls"]

    def shifted(info):
        info["iteration"] += done
        info["oracle_calls"] += calls
        info["method"] = name
        return callback(info) if callback is not None else None

    name = inputs.resolve_method(finisher)[1]
    finished, _, more = driver.run(continuation.smoothed(finisher, problem.loss, iters - done), problem, params,
                                   iters - done, step_size=step_size, chunk=chunk, tol=tol,
                                   callback=shifted)
    if problem.loss == "l1" and more and not more[-1]["loss"] < history[-1]["loss"]:
        # the L1 loss of both is exact (driver.run's history): L-BFGS's iterate stays the model
        kept = {k: v for k, v in history[-1].items() if k not in ("state", "stalled")}
        kept.update(iteration=more[-1]["iteration"], oracle_calls=more[-1]["oracle_calls"], seconds=more[-1]["seconds"],
                    method=method, kept=True)
        return params, history + more + [kept]
    return finished, history + more
