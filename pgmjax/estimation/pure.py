"""``fit``: the estimate as a pure function of the measurements' answers, for ``jit``, ``vmap`` and ``grad``.

:func:`pgmjax.estimate` drives a fit from the host (compiled chunks, progress, callbacks, early stopping,
the lowest-loss iterate checked and returned). :func:`fit` is the same problem and the same estimator run for
a fixed number of iterations with no host step in between, so it can sit inside a user's own
transformation: ``jax.vmap`` over noise draws gives a batch of models, ``jax.grad`` differentiates an
answer of the fitted model with respect to the measurements (through the iterations), ``jax.jit`` compiles
a whole pipeline. Its structure (the domain, the measured cliques, their queries and noise scales) is
static; the answers ``y`` and ``total`` are the traced numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax

from ..data.domain import Domain
from ..model.fit_report import Fit, FitReport
from ..model.graphical_model import GraphicalModel
from ..queries.constraints import check_constraints
from ..queries.measurement import Measurement
from . import continuation, inputs
from .contract import Estimator


def fit(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    method: str | Estimator = "mirror_descent",
    iters: int = 1000,
    loss: str | Callable = "l2",
    total=None,
    cliques: Sequence = (),
    dtype=None,
    step_size=None,
    constraints: Sequence = (),
    report: bool = False,
) -> GraphicalModel | Fit:
    """Fit the graphical model that best explains the measurements, as a pure function (fixed iterations).

    The problem of :func:`pgmjax.estimate` (McKenna, Sheldon & Miklau, "Graphical-model based estimation and
    inference for differential privacy", ICML 2019, Problem 1), run by the same estimator for exactly
    ``iters`` iterations with no host step: it works under ``jax.jit``, ``jax.vmap`` and ``jax.grad``, where
    the measurements' answers ``y`` (and ``total``) may be abstract. The returned model is a pytree; its
    answers inside a transformation are JAX arrays. Derivatives (``jax.grad``, ``jax.jvp``) go through the
    iterations of an estimator whose steps are smooth in the answers: ``"dual_averaging"`` (fixed step
    sizes); mirror descent's and L-BFGS's line searches are not, and are refused under differentiation. Use :func:`pgmjax.estimate` for a fit a person waits for
    (progress, callbacks, early stopping, the returned model checked for finiteness).

    Args:
        domain: the :class:`~pgmjax.Domain`.
        measurements: :class:`~pgmjax.Measurement` objects; their ``y`` may be traced.
        method: ``"mirror_descent"``, ``"dual_averaging"``, ``"lbfgs"`` or an
            :class:`~pgmjax.estimation.contract.Estimator` instance (e.g. ``pj.MirrorDescent(momentum=0.0)``).
        iters: the number of iterations (static).
        loss: ``"l2"``, ``"l1"`` (smoothed with continuation, as :func:`pgmjax.estimate`:
            :mod:`pgmjax.estimation.continuation`) or a callable of the clique marginals.
        total: the number of records; None takes the inverse-variance estimate from the answers (ICML 2019,
            Appendix E.1), computed inside the program (at least 1).
        cliques: extra cliques the model must hold.
        dtype: ``jnp.float32`` (default) or ``jnp.float64``.
        step_size: mirror descent's initial step (default ``1 / (L N)``).
        constraints: :class:`pgmjax.Constraint` objects: their cliques join the model and their forbidden cells
            start (and stay) at log-potential ``-inf``, as in :func:`pgmjax.estimate` (no dependency is eliminated
            and no forbidden mass reported here: the answers may be abstract).

    Returns:
        A :class:`~pgmjax.GraphicalModel` with the estimator's reported potentials (mirror descent's and
        L-BFGS's lowest-loss iterate) and ``loss`` its loss.

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 3})
        >>> ys = np.stack([np.array([[10.0, 20, 30], [5, 5, 30]]) + k for k in range(4)])
        >>> batch = jax.vmap(lambda y: pj.fit(dom, [pj.Measurement(("a", "b"), y)], iters=200).marginal("a"))(ys)
        >>> batch.shape, np.round(np.asarray(batch[0], np.float64))
        ((4, 2), array([60., 40.]))
    """
    estimator, name, dtype = inputs.check_options(method, loss, iters, dtype, caller="fit")
    constraints = check_constraints(domain, constraints, "fit")
    measurements, model_cliques = inputs.check_structure(domain, measurements, loss,
                                                         list(cliques) + [c.attributes for c in constraints], caller="fit")
    if not estimator.differentiable and _differentiated(([m.y for m in measurements], total, step_size)):
        raise ValueError(
            f"fit: {name} is not differentiable in the answers (its line search accepts or rejects steps by "
            "comparisons, and jax.grad / jax.jvp through it return numbers that are not derivatives): "
            "differentiate a fit with method='dual_averaging' (fixed step sizes)")
    problem, total, lipschitz = inputs.build_problem(domain, measurements, model_cliques, loss, total, dtype,
                                                     caller="fit", traced=True)
    plan = problem.plan
    if step_size is None:
        step_size = 1.0 / (lipschitz * total)
    theta = inputs.starting_potentials(plan, None, constraints, dtype)
    estimator = continuation.smoothed(estimator, loss, iters)  # the L1 loss: its smoothing stages
    state, info = estimator.advance(problem, *estimator.init(problem, theta, step_size), iters)
    model = GraphicalModel(plan, state.params, total)
    if not report:
        return model
    loss = problem.exact_loss(problem.marginals(state.params)) if loss == "l1" else info.loss
    return Fit(model, FitReport(loss, info.step_size))


def _differentiated(tree) -> bool:
    """Whether any leaf is being differentiated (``jax.grad``, ``jax.jvp``, ``jax.jacfwd``...), however nested
    in other transformations. JAX's differentiation tracers are found by their class names (``JVPTracer``,
    ``LinearizeTracer``) along each tracer's wrapped values: a JAX release that renames them fails
    ``tests/estimation/test_pure_fit.py``, which checks ``grad``, ``jacfwd`` and ``vmap`` of ``grad``."""
    for x in jax.tree_util.tree_leaves(tree):
        for _ in range(32):  # nesting depth of transformations
            if not isinstance(x, jax.core.Tracer):
                break
            if type(x).__name__ in ("JVPTracer", "LinearizeTracer"):
                return True
            x = getattr(x, "val", getattr(x, "primal", None))
    return False
