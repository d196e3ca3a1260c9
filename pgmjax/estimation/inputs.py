"""A fit's inputs checked and its problem built, once for every front door.

:func:`pgmjax.estimate`, :func:`pgmjax.estimation`, :func:`pgmjax.estimate_batch` and
:func:`pgmjax.estimation.batch_problem.make_problem` check their options here (the same messages, prefixed with the
caller's name, before anything is compiled) and build their :class:`~pgmjax.estimation.problem.Problem` with
:func:`build_problem`: the model's junction tree and layout from the measured cliques (static, hashed by
value) and the numbers as arrays (answers, noise scales, total, the loss's Lipschitz constant).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import to_device
from ..data.domain import Domain
from ..graph import oracle
from ..graph.gauge import log_conditional_tables
from ..graph.junction import JunctionTree
from ..graph.oracle_plan import in_host_axes
from ..graph.marginal_oracle import SIZE_CLASS, oracle_of
from ..model.approximate_model import ApproximateModel
from ..model.fit_report import Fit, FitReport, model_and_report
from ..model.consistency import check_consistent
from ..model.graphical_model import GraphicalModel
from ..queries.constraints import constraint_masks, forbidden_mass
from ..queries.measurement import Measurement, estimate_total, total_rule, validate_measurements
from . import losses, routed_losses
from .dual_averaging import DualAveraging
from .contract import Estimator
from .lbfgs import LBFGS
from .mirror_descent import MirrorDescent
from .problem import Problem
from .warm_structure import marginal_tables, warm_cliques

#: The estimators by name (default settings).
METHODS = {"mirror_descent": MirrorDescent, "dual_averaging": DualAveraging, "lbfgs": LBFGS}


def resolve_method(method, caller: str = "estimate") -> tuple[Estimator, str]:
    """``(estimator, name)`` for ``method``: a name in :data:`METHODS` (default settings) or an
    :class:`~pgmjax.estimation.contract.Estimator` instance (named as the built-in one of its class, else by its class).

    Example:
        >>> resolve_method("lbfgs")[1], resolve_method(MirrorDescent(momentum=0.0))[1]
        ('lbfgs', 'mirror_descent')
    """
    if isinstance(method, Estimator):
        names = {cls: name for name, cls in METHODS.items()}
        return method, names.get(type(method), type(method).__name__)
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"{caller}: unknown method {method!r}; expected one of {sorted(METHODS)} "
                         "or a pgmjax.Estimator instance")
    return METHODS[method](), method


def check_options(method, loss, iters, dtype, *, caller: str = "estimate") -> tuple[Estimator, str, np.dtype]:
    """A fit's method, loss, iteration count and dtype, checked.

    Returns:
        ``(estimator, method name, dtype)``.

    Raises:
        ValueError: naming the bad option.
    """
    estimator, name = resolve_method(method, caller)
    if not (callable(loss) or loss in ("l2", "l1")):
        raise ValueError(f"{caller}: loss must be 'l2', 'l1' or a callable, got {loss!r}")
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise ValueError(f"{caller}: iters must be a non-negative integer, got {iters!r}")
    if estimator.traits.smooth_loss_only and loss != "l2":
        raise ValueError(f"{caller}: {name} needs the smooth 'l2' loss (its step sizes come from the Lipschitz constant)")
    return estimator, name, check_dtype(dtype, caller=caller)


def check_dtype(dtype, *, caller: str = "estimate") -> np.dtype:
    """None (float32), float32 or float64 (which needs x64 enabled) as a ``numpy.dtype``; ValueError otherwise."""
    dtype = jnp.dtype(dtype or jnp.float32)
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError(f'{caller}: float64 needs jax.config.update("jax_enable_x64", True) before any computation')
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"{caller}: dtype must be float32 or float64, got {dtype}")
    return dtype


def check_total(total, caller: str) -> float:
    """A positive finite total as a float; ValueError naming the caller otherwise."""
    total = float(total)
    if not np.isfinite(total) or total <= 0:
        raise ValueError(f"{caller}: total must be positive and finite, got {total}")
    return total


def check_warm_start(warm_start, domain, caller: str) -> tuple:
    """A warm start checked and taken apart: a model, or a :class:`~pgmjax.model.fit_report.Fit` whose report's step
    size the next fit continues from (:func:`first_step`).

    Returns:
        ``(model, step size)``: None for either where there is none.

    Raises:
        TypeError / ValueError: not a model or a Fit, or a model over another domain.
    """
    if warm_start is None:
        return None, None
    model, report = model_and_report(warm_start)
    step = None if report is None else report.step_size
    if not isinstance(model, (GraphicalModel, ApproximateModel)):
        raise TypeError(f"{caller}: warm_start must be a GraphicalModel or a pgmjax.Fit, got {type(warm_start).__name__}")
    if model.domain != domain:
        raise ValueError(f"{caller}: warm_start has domain {model.domain}, expected {domain}")
    return model, step


def check_structure(domain, measurements, loss, cliques, warm_start=None, *, caller: str) -> tuple[list, list]:
    """The domain, measurements and extra cliques checked (a warm start's model already checked:
    :func:`check_warm_start`).

    Returns:
        ``(measurements, model cliques)``: the measurements as a list, and the cliques the model must hold
        (the measured ones, ``cliques``, and the warm start's cliques of two or more attributes unless a fresh
        triangulation is much smaller: :func:`pgmjax.estimation.warm_structure.warm_cliques`).
    """
    if not isinstance(domain, Domain):
        raise TypeError(f"{caller}: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    measurements = list(measurements)
    validate_measurements(domain, measurements)
    extra = [domain.check_clique(c, what="clique") for c in cliques]
    model_cliques = [m.clique for m in measurements] + extra
    # Its one-attribute cliques are never imposed (an attribute the new fit does not measure stays a free singleton,
    # a padded table, see oracle.make_plan), its others unless a fresh tree is much smaller (warm_structure).
    model_cliques += warm_cliques(domain, model_cliques, warm_start)
    if not model_cliques:
        raise ValueError(f"{caller}: no measurements and no cliques: nothing to fit")
    if not measurements and not callable(loss):
        raise ValueError(f"{caller}: no measurements; give measurements or a callable loss")
    return measurements, model_cliques


def build_problem(domain: Domain, measurements: Sequence[Measurement], model_cliques, loss, total, dtype, *,
                  caller: str, traced: bool = False, plan=None) -> tuple[Problem, object, float]:
    """The problem of checked inputs (:func:`check_structure`, :func:`check_options`).

    Args:
        domain, measurements, model_cliques, loss, dtype: checked.
        total: the number of records, or None: the inverse-variance estimate from the answers (ICML 2019,
            Appendix E.1; :func:`pgmjax.estimate_total`).
        caller: the function named in messages.
        traced: the answers (and ``total``) may be abstract (:func:`pgmjax.estimation`): they are placed and the total
            estimated by JAX ops, inside the caller's program; otherwise on the host.
        plan: the oracle's plan over ``model_cliques`` (default: the exact one, :func:`pgmjax.graph.oracle.make_plan`;
            :func:`pgmjax.estimation.oracles.make_oracle_plan` gives the approximate one).

    Returns:
        ``(problem, total, lipschitz)``: the :class:`~pgmjax.estimation.problem.Problem` (smoothing 0), and its total
        and Lipschitz constant on the host (the total traced where ``traced``), for the first step size
        ``1 / (L N)``.
    """
    if total is None and not measurements:
        raise ValueError(f"{caller}: total is unknown; pass total= when there are no measurements")
    if plan is None:
        plan = oracle.make_plan(domain, model_cliques)
    lipschitz = losses.lipschitz_constant(measurements, plan) if measurements else 1.0
    if traced:
        meas = losses.stack_measurements_traced(plan, measurements, dtype)
        if total is None:
            weights, _ = total_rule(measurements)  # raises, naming the cause, where no measurement fixes the total
            answers = jnp.concatenate([jnp.asarray(m.y, dtype).reshape(-1) for m in measurements])
            total = jnp.maximum(jnp.dot(jnp.asarray(weights, dtype), answers), 1.0)
        total = jnp.asarray(total, dtype)
        return Problem(plan, meas, total, jnp.asarray(lipschitz, dtype), jnp.zeros((), dtype), loss), total, lipschitz
    if total is None:
        try:
            total, _ = estimate_total(measurements)
        except ValueError as e:
            raise ValueError(f"{caller}: {e}") from e
    total = check_total(total, caller)
    if oracle_of(plan) is SIZE_CLASS:  # one program per size class: the measurements are routed as data too
        meas = routed_losses.stack_routed(plan, measurements, dtype)
    else:
        meas = losses.stack_measurements(plan, measurements, dtype)
    problem = Problem(plan, meas, to_device(total, dtype), to_device(lipschitz, dtype), to_device(0.0, dtype), loss)
    return problem, total, lipschitz


def warm_total(total, measurements, warm_start):
    """The fit's total: the one given, else (with a warm start) the measurements' estimate, or the warm start's
    where the measurements cannot say; None leaves it to :func:`build_problem`."""
    if total is not None or warm_start is None:
        return total
    try:
        return estimate_total(measurements)[0] if measurements else warm_start.total
    except ValueError:
        return warm_start.total


def first_step(step_size, lipschitz: float, total: float, loss, warm_step):
    """Mirror descent's first step size: the one given, else ``1 / (L N)`` (McKenna, Sheldon & Miklau, ICML 2019,
    Algorithm 1), or the step a warm start's line search ended at where that is larger (on a smooth loss; the
    L1 loss's steps are per smoothing stage). Estimators without a step size ignore it.

    Why the warm start's: from ``1 / (L N)`` it takes the line search ~50 iterations of growth to get back there
    (an MWEM round's whole budget of 100, and a refit that never catches up with the new measurement). Too large
    a step only costs halvings."""
    if step_size is not None:
        return step_size
    step_size = 1.0 / (lipschitz * total)
    if loss != "l1" and warm_step is not None:
        step_size = max(step_size, warm_step)
    return step_size


def fitted_model(plan, params: dict, total: float, history: list, loss: float, step_size, info) -> Fit:
    """The fitted model, checked (:func:`check_fitted`), and its report: a :class:`GraphicalModel`, or an
    :class:`ApproximateModel` where ``info`` says the approximate oracle was taken (its answers from its regions'
    pseudo-marginals, which must be finite)."""
    report = FitReport(loss, step_size, history, info)
    if info is not None and info.get("oracle") == "approximate":
        model = ApproximateModel(plan, params, total, info=info)
        if not np.isfinite(loss) or not all(np.isfinite(t).all() for t in model.clique_marginals().values()):
            raise FloatingPointError(f"estimate: the approximately fitted model's loss is {loss} or its "
                                     "pseudo-marginals are not finite")
        return Fit(model, report)
    model = GraphicalModel(plan, params, total)
    check_fitted(plan, params, model.marginal_blocks, total, loss)
    return Fit(model, report)


def fit_info(oracle_info, public_cliques, forbidden) -> dict | None:
    """The report's ``info``: the oracle's choice (:func:`pgmjax.estimation.oracles.choose_plan`), with the public
    marginals' cliques (``"public"``) and the forbidden mass the measurements hold
    (``"forbidden_mass"``, :func:`report_forbidden_mass`; None: no constraints) where there are any."""
    if public_cliques:
        oracle_info = dict(oracle_info or {}, public=public_cliques)
    if forbidden is not None:
        oracle_info = dict(oracle_info or {}, forbidden_mass=forbidden)
    return oracle_info


def check_fitted(plan: oracle.OraclePlan, params: dict, mu, total: float, loss: float) -> None:
    """Refuse to return a fitted model that is not one (:func:`pgmjax.estimate`, each member of
    :func:`pgmjax.estimate_batch`): a non-finite loss, or what
    :func:`pgmjax.model.consistency.check_consistent` refuses (NaN or +inf potentials, non-finite marginals, a clique
    whose marginal does not sum to the total; ``-inf`` potentials are structural zeros, allowed). ``mu``: the
    marginals (oracle blocks), or a function returning them."""
    if not np.isfinite(loss):
        raise FloatingPointError(f"estimate: the fitted model's loss is {loss}")
    check_consistent(plan, params, mu, total, what="estimate: the fitted model")


def with_public(domain, measurements, public, total, warm_start, caller: str) -> tuple[list, float, list]:
    """The measurements with the public marginals added (:meth:`pgmjax.queries.public.PublicData.measurement`).

    Returns:
        ``(measurements, total, public cliques)``: the total is the one given, else the private measurements'
        estimate (:func:`pgmjax.estimate_total`; the public table's own count says nothing of the private one),
        else the warm start's. Without public data (``public=None``), the inputs unchanged and no cliques.

    Raises:
        TypeError / ValueError: not a PublicData, another domain, or no total to scale the public marginals to.
    """
    if public is None:
        return measurements, total, []
    from ..queries.public import PublicData

    if not isinstance(public, PublicData):
        raise TypeError(f"{caller}: public must be a pgmjax.queries.public.PublicData, got {type(public).__name__}")
    if public.domain != domain:
        raise ValueError(f"{caller}: the public data's domain {public.domain} is not the model's {domain}")
    if total is None:
        try:
            total = estimate_total(measurements)[0]
        except ValueError:
            if warm_start is None:
                raise ValueError(f"{caller}: the public marginals are scaled to the private total, which no private "
                                 "measurement fixes here; pass total=") from None
            total = warm_start.total
    cliques = list(dict.fromkeys(public.cliques if public.cliques is not None else [m.clique for m in measurements]))
    if not cliques:
        raise ValueError(f"{caller}: the public data names no cliques and there are no measured ones to take from it")
    return list(measurements) + [public.measurement(c, total) for c in cliques], check_total(total, caller), cliques


def starting_potentials(plan, warm_start, constraints, dtype) -> dict:
    """The fit's starting potentials in ``plan``'s layout: the warm start's (or zeros), plus each constraint's
    log-mask (``-inf`` on its forbidden cells, :mod:`pgmjax.queries.constraints`). The estimators move the
    potentials only by finite steps from these (:meth:`pgmjax.estimation.problem.Problem.expand`), so a ``-inf``
    cell, a structural zero, stays one.

    A warm start's tables are first put, on the host in float64, into log-conditionals along ``plan``'s junction
    tree (:func:`warm_tables`)."""
    theta = plan.zeros(dtype) if warm_start is None else plan.from_tables(warm_tables(plan, _warm_potentials(plan, warm_start)),
                                                                          dtype)
    if constraints:
        masks = plan.from_tables(constraint_masks(plan.domain, constraints), dtype)
        theta = {k: theta[k] + masks[k] for k in theta}
    return theta


def _warm_potentials(plan, warm_start) -> dict:
    """The warm model's tables for ``plan``: its potentials where ``plan``'s tree holds its cliques, else its
    marginals on the tree (:func:`pgmjax.estimation.warm_structure.marginal_tables`)."""
    tree = getattr(plan, "tree", None)
    if isinstance(tree, JunctionTree) and any(tree.containing(c) is None for c in warm_start.cliques):
        return marginal_tables(tree, warm_start)
    return warm_start.potentials


def warm_tables(plan, tables: dict) -> dict:
    """A warm start's ``{clique: table}`` as log-conditionals along ``plan``'s junction tree
    (:func:`pgmjax.graph.gauge.log_conditional_tables`, host, float64): the same distribution, keyed by the tree's
    cliques.

    Why: each fit of a mechanism's rounds starts from the last model, and the potentials it hands on were
    never renormalised as a whole: on an AIM run on Loans the 44-clique model of the last rounds had
    ``log Z = -5,338``, so float32 rounded every likely cell's potential to ``eps * 5,338``. Its marginals were
    up to 7e-4 off, its loss 0.08 off, more than the line search's rounding allowance, and the final fit
    stopped descending at 3,522 where float64 went on to 3,434. From the same tables as log-conditionals the
    marginals were 1.6e-6 off and the float32 fit reached 3,427. The approximate oracle's region graph has no
    junction tree: its tables pass unchanged, as does a table no clique of the tree holds (``from_tables``
    names it).

    Example:
        >>> plan = oracle.make_plan(Domain({"a": 2, "b": 3}), [("a", "b")])
        >>> t = warm_tables(plan, {("a",): np.array([5000.0, 5000.0])})[("a", "b")]
        >>> np.round(np.exp(t), 4).tolist()
        [[0.1667, 0.1667, 0.1667], [0.1667, 0.1667, 0.1667]]
    """
    tree = plan.tree
    if not isinstance(tree, JunctionTree):
        return tables
    hosted: dict = {}
    for clique, table in tables.items():
        j = tree.containing(clique)
        if j is None:
            return tables
        host = tree.cliques[j]
        hosted[host] = hosted.get(host, 0.0) + in_host_axes(plan.domain, clique, table, host)
    return log_conditional_tables(tree, hosted)


def report_forbidden_mass(domain, measurements, constraints, caller: str, stacklevel: int = 3) -> list:
    """:func:`pgmjax.queries.constraints.forbidden_mass` of the measurements, with a warning naming each constraint
    the measurements contradict (mass beyond four standard deviations of their noise), at the frame
    ``stacklevel`` up (default: the caller of the function that calls this one)."""
    found = forbidden_mass(domain, measurements, constraints)
    for f in found:
        if f.contradicts:
            warnings.warn(f"{caller}: the measurement on {f.clique} puts {f.mass:.4g} records on cells that "
                          f"{f.constraint!r} forbids (noise alone: standard deviation {f.stddev:.3g}); the model "
                          "holds them at zero, so its other cells absorb them", stacklevel=stacklevel)
    return found
