"""The compiled programs a model's answers come from: its marginal blocks with ``log Z``, and ``log Z`` alone.

Each marginal oracle has its own pair (:mod:`pgmjax.graph.marginal_oracle`): the dense junction tree's, compiled per
structure and run once per model (its answers are cached), and the size-class plan's, shared by every structure of
its class (:mod:`pgmjax.graph.routed_oracle`), run on the plan widened to the next power of 4 of cells.
"""

from __future__ import annotations

import jax
import numpy as np

from ..compiler import jit, to_device
from ..compiler.options import ONCE_PER_MODEL_LEVEL
from ..graph import marginal_oracle, oracle, routed_oracle, routed_plan
from ..graph.program_choice import emitters_for


# Run once per model (its answers are cached), compiled at every new structure: level 0 (compiler.options.ONCE_PER_MODEL_LEVEL).
_dense_marginals_jit = jit(oracle.marginals, engine=True, emitters=emitters_for, level=ONCE_PER_MODEL_LEVEL)
_dense_log_partition_jit = jit(oracle.log_partition, engine=True, emitters=emitters_for, level=ONCE_PER_MODEL_LEVEL)
# A size-class plan's programs are shared by every structure of its class (pgmjax.graph.routed_oracle).
_routed_marginals_jit = jit(routed_oracle.marginals, engine=True, emitters=emitters_for)
_routed_log_partition_jit = jit(routed_oracle.log_partition, engine=True, emitters=emitters_for)


#: Each oracle's compiled programs (marginals with log Z, log Z alone), picked by the plan's oracle value.
PROGRAMS = {marginal_oracle.EXACT: (_dense_marginals_jit, _dense_log_partition_jit),
             marginal_oracle.SIZE_CLASS: (_routed_marginals_jit, _routed_log_partition_jit)}


def marginals_and_log_partition(plan, theta: dict, total):
    """The model's marginal blocks and log Z from its oracle's compiled program (a size-class model's in its plan
    widened to the next power of 4: :func:`_answering`)."""
    wide, theta = _answering(plan, theta)
    blocks, log_z = PROGRAMS[marginal_oracle.oracle_of(plan)][0](wide, theta, total)
    if wide is not plan:
        blocks = {"cells": to_device(np.asarray(blocks["cells"])[: plan.size.cells])}
    return blocks, log_z


def log_partition(plan, theta: dict):
    """The model's ``log Z`` from its oracle's compiled program (on the plan :func:`_answering` gives)."""
    wide, theta = _answering(plan, theta)
    return PROGRAMS[marginal_oracle.oracle_of(plan)][1](wide, theta)


def _answering(plan, theta: dict):
    """The plan and potentials a model's answers are computed with: a size-class model's on its plan widened to
    the next power of 4 of cells (:func:`pgmjax.graph.routed_plan.widened`; its potentials padded with zeros), so
    that a run's growing models share an answering program per power of 4 rather than one per cell class; a
    traced or batched model's (inside a transformation, or several at once) as they are."""
    if marginal_oracle.oracle_of(plan) is not marginal_oracle.SIZE_CLASS:
        return plan, theta
    cells = theta["cells"]
    if isinstance(cells, jax.core.Tracer) or np.ndim(cells) != 1:
        return plan, theta
    wide = routed_plan.widened(plan)
    if wide is plan:
        return plan, theta
    cells = np.asarray(cells)
    return wide, {"cells": to_device(np.pad(cells, (0, wide.size.cells - cells.size)))}
