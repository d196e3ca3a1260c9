"""A size-class fit's programs for the next class, compiled while the caller works on (``compile_ahead=True``).

A mechanism whose rounds grow their model (AIM, MWEM) meets a new size class every few rounds
(:mod:`pgmjax.graph.routed_plan`), and its first fit there waits for XLA. After a fit in one class,
:func:`start` pads the fit's problem into the class a growing model most likely meets next
(:func:`pgmjax.graph.routed_plan.next_class`, the measurements in the same multiples of the cell vector:
:func:`pgmjax.estimation.routed_losses.shape_in_class`) and, on a background thread
(:func:`pgmjax.compiler.ahead.ahead`), runs one iteration of the same estimator on it and the model's answering
program: the programs a fit in that class runs, in JAX's caches when the model gets there. :func:`wait` joins such
a compile where the fit about to run needs it. A guess that misses costs a compile on the other core and
nothing else: the fit compiles its own class as it would have.
"""

from __future__ import annotations

import jax
import numpy as np

from . import continuation, driver
from .problem import Problem
from ..compiler import ahead
from ..graph import routed_plan
from ..graph.marginal_oracle import SIZE_CLASS, oracle_of
from ..model import answer_programs
from .routed_losses import RoutedMeasurements, padded, shape_in_class


def key(runner, problem: Problem) -> tuple:
    """What a fit's compiled programs depend on: its estimator (static) and its problem's structure, shapes and
    dtypes (a size-class problem's are its class's)."""
    leaves, treedef = jax.tree_util.tree_flatten(problem)
    return runner, treedef, tuple((np.shape(x), str(getattr(x, "dtype", type(x).__name__)),
                                   bool(getattr(x, "weak_type", False))) for x in leaves)


def wait(estimator, problem: Problem, iters: int) -> float:
    """Join a compile of this fit's programs if one is in flight; seconds waited."""
    if oracle_of(problem.plan) is not SIZE_CLASS:
        return 0.0
    return ahead.wait(key(continuation.smoothed(estimator, problem.loss, iters), problem))


def start(estimator, problem: Problem, iters: int, step_size: float) -> bool:
    """Compile, on a background thread, the programs of this fit (``estimator`` on ``problem`` for ``iters``
    iterations) padded into the next size class. Returns whether a compile was started (not for a dense or
    differentiable plan, a class compiled ahead already, or while another compile is in flight)."""
    if oracle_of(problem.plan) is not SIZE_CLASS or not isinstance(problem.meas, RoutedMeasurements):
        return False
    size = routed_plan.next_class(problem.plan)
    if size is None:
        return False
    plan = routed_plan.padded(problem.plan, size)
    meas = padded(problem.meas, shape_in_class(problem.meas, problem.plan.size.cells, size.cells))
    grown = Problem(plan, meas, problem.total, problem.lipschitz, problem.smoothing, problem.loss)
    runner = continuation.smoothed(estimator, problem.loss, iters)
    dtype = problem.total.dtype

    def compile_fn():
        params, _, _ = driver.run(runner, grown, plan.zeros(dtype), 1, step_size=step_size)
        answer_programs.marginals_and_log_partition(plan, params, grown.total)

    return ahead.ahead(key(runner, grown), compile_fn)


__all__ = ["key", "start", "wait"]
