"""One model's tables split over several devices along their clique blocks.

A model too large for one device's memory is fitted on several: each block of the oracle's potentials
(the stacked tables of one class of cliques, ``(levels, slots, *table)``) is split along its slot axis, so
each device holds whole tables of its own cliques, and the measurements laid out like the blocks are split
the same way. Only what a junction tree passes between cliques crosses devices: messages (separator-sized)
and scalars (the loss, the line search's inner products); no table is gathered onto one device.

The layout (:func:`pgmjax.graph.oracle.make_plan` with ``shards``): every level of the tree is a block of its
own and each block's slots are padded to a multiple of the devices (padding cliques held at -inf); a block
of one clique (the root's) is not split, every device holding it. The programs are traced under the mesh
(:func:`jax.set_mesh`), which tells :func:`pgmjax.estimation.losses.sum_all` to sum each array where it lies; XLA's
SPMD partitioner splits the rest from the arrays' placements.

This is model parallelism for one fit; :func:`pgmjax.estimate_batch` spreads a batch of fits instead
(:func:`pgmjax.estimation.batch.spread`). Reference: Xu et al., "GSPMD: general and scalable parallelization for ML
computation graphs" (2021), for the partitioning.

Example:
    >>> import pgmjax as pj, numpy as np
    >>> dom = pj.Domain({"a": 2, "b": 3})
    >>> m = pj.Measurement(("a", "b"), np.array([[10.0, 20, 30], [5, 5, 30]]), stddev=1.0)
    >>> pj.estimate(dom, [m], iters=100, devices=1).marginal("a").round()
    array([60., 40.])
"""

from __future__ import annotations

import contextlib

import jax
import numpy as np

from ..checks import check_count

#: The mesh axis a model's blocks are split along.
AXIS = "cliques"


def check_devices(devices, caller: str, oracle="exact") -> int:
    """``devices`` as an int: a positive integer no larger than the local device count, and 1 unless the
    oracle is the exact one (only its tables are split).

    Args:
        devices: how many local devices to split the model over.
        caller: the function named in messages.
        oracle: the fit's checked oracle choice (:func:`pgmjax.estimation.oracles.check_oracle`).

    Returns:
        ``int(devices)``.
    """
    n = check_count(devices, "devices", caller)
    available = jax.local_device_count()
    if n > available:
        raise ValueError(f"{caller}: devices={n}, but this process has {available} local device"
                         f"{'s' if available != 1 else ''} ({jax.default_backend()})")
    if n > 1 and oracle != "exact":
        raise ValueError(f"{caller}: devices={n} splits the exact oracle's tables; oracle={oracle!r} runs on one device")
    return n


def make_mesh(devices: int) -> jax.sharding.Mesh:
    """A one-axis mesh (:data:`AXIS`) over the first ``devices`` local devices."""
    return jax.sharding.Mesh(np.asarray(jax.local_devices()[:devices]), (AXIS,),
                             axis_types=(jax.sharding.AxisType.Auto,))


def _placement(mesh: jax.sharding.Mesh, ndim: int, axis: int | None) -> jax.sharding.NamedSharding:
    spec = [None] * ndim
    if axis is not None:
        spec[axis] = AXIS
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))


def _split_axis(shape: tuple, axis: int, shards: int) -> int | None:
    """``axis`` where it exists, holds more than one slot and divides evenly over ``shards``; else None."""
    return axis if len(shape) > axis and shape[axis] > 1 and shape[axis] % shards == 0 else None


def place(problem, theta: dict, mesh: jax.sharding.Mesh):
    """A problem (its plan laid out with ``shards`` = the mesh's size) and potentials placed on the mesh.

    Potentials and the plan's per-slot arrays (slot masks, padding cells) are split along the slot axis
    (axis 1: ``(levels, slots, ...)``); each dense measurement group's arrays along their first axis (the
    block's slots); everything else (routes, scalars, a block of one clique) is held whole on every device.

    Args:
        problem: a :class:`~pgmjax.estimation.problem.Problem` whose plan has ``shards == mesh.size``.
        theta: potentials, ``{block: (levels, slots, ...)}``.
        mesh: :func:`make_mesh`'s mesh.

    Returns:
        ``(problem, theta)`` placed.
    """
    n = mesh.size
    plan = problem.plan
    if plan.shards != n:
        raise ValueError(f"place: the plan is laid out for {plan.shards} devices, the mesh has {n}")

    def put(a, axis):
        return jax.device_put(a, _placement(mesh, np.ndim(a), axis if axis is None else _split_axis(np.shape(a), axis, n)))

    per_slot = tuple(f"{k}_{suffix}" for k, _ in plan.units for suffix in ("mask", "cells"))
    plan_arrays = {k: put(v, 1 if k in per_slot else None) for k, v in plan.arrays.items()}
    meas = problem.meas
    arrays = tuple(jax.tree_util.tree_map(lambda a, g=g: put(a, 0 if g.dense else None), group)
                   for group, g in zip(meas.arrays, meas.groups))
    placed = type(problem)(type(plan)(plan_arrays, plan.static), type(meas)(arrays, meas.groups),
                           *(put(x, None) for x in (problem.total, problem.lipschitz, problem.smoothing)),
                           problem.loss)
    return placed, {k: put(v, 1) for k, v in theta.items()}


def split(problem, theta: dict, devices: int):
    """``(problem, theta, context)``: with ``devices > 1``, the problem (its plan laid out for that many shards)
    and potentials placed over a mesh of ``devices`` local devices (:func:`place`), and the mesh's context
    (:func:`jax.set_mesh`) to run its programs under; with one device, the inputs and a context that does nothing.
    """
    if devices <= 1:
        return problem, theta, contextlib.nullcontext()
    mesh = make_mesh(devices)
    problem, theta = place(problem, theta, mesh)
    return problem, theta, jax.set_mesh(mesh)
