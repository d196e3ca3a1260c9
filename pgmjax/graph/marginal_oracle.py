"""The marginal oracles as values: what a fit and a model call on their plan, chosen once with the plan.

A :class:`MarginalOracle` bundles the functions an estimator needs of a model's plan: its marginals and
``log Z`` (the marginal oracle ``M(theta)`` of McKenna, Sheldon & Miklau, "Graphical-model based estimation and
inference for differential privacy", ICML 2019, Section 3), ``log Z`` alone, the same distribution as
log-conditionals, a gradient's canonical gauge and each clique's largest entry. There are three:

* :data:`EXACT`: junction-tree message passing on the dense, per-structure plan (:mod:`pgmjax.graph.oracle`);
* :data:`SIZE_CLASS`: the same passes with the routing as data, one program per size class
  (:mod:`pgmjax.graph.routed_oracle`);
* :data:`APPROXIMATE`: convex generalized belief propagation on a region graph (pseudo-marginals,
  :mod:`pgmjax.graph.approximate_oracle`), which has no junction tree, hence no gauge of its own.

:func:`oracle_of` names a plan's oracle; the problem and the model hold that value and call it, instead of each
asking what kind of plan they have.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import approximate_oracle, gauge, oracle, routed_oracle
from .approximate_oracle import ApproximatePlan
from .oracle_plan import OraclePlan
from .routed_plan import RoutedPlan


def row_tops(plan, blocks: dict) -> dict:
    """Each junction-tree clique's largest finite entry in ``blocks`` (0 where it has none), broadcastable
    against its block ``(levels, slots, *table)``; no gradient flows through it (the dense layout's tops).

    In float32 an entry ``t`` of a table carries an absolute error of ``eps |t|``, a relative error of
    ``eps |t|`` in its probability: potentials pushed far from 0 together cost the likely cells the
    precision a line search needs. Subtracting these tops keeps the likely cells near 0 and leaves the
    distribution as it is; ``-inf`` entries (structural zeros) stay ``-inf``.

    Example:
        >>> import numpy as np
        >>> row_tops(None, {"x": np.array([[[0.0, 2.0], [-np.inf, -1.0]]])})["x"].ravel().tolist()
        [2.0, -1.0]
    """
    out = {}
    for k, t in blocks.items():
        rows = (t.shape[0] * t.shape[1] if t.ndim >= 2 else 1, -1)
        # a 2-D row maximum: XLA:CPU compiles it to a simpler, faster kernel than one over six trailing axes
        top = jnp.max(jnp.where(jnp.isfinite(t), t, -jnp.inf).reshape(rows), axis=-1)
        top = top.reshape(t.shape[:2] + (1,) * (t.ndim - 2))
        out[k] = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
    return out


def _unchanged(plan, theta: dict) -> dict:
    return theta


def _no_gauge(plan, blocks: dict) -> dict:
    raise ValueError("the approximate oracle's region graph has no junction tree, hence no canonical gauge")


class MarginalOracle(NamedTuple):
    """One marginal oracle's functions, each taking the plan first.

    Attributes:
        name: ``"exact"``, ``"size_class"`` or ``"approximate"``.
        marginals: ``(plan, theta, total) -> (marginals, log Z)``.
        log_partition: ``(plan, theta) -> log Z`` (None where the oracle has none of its own).
        log_conditionals: ``(plan, theta) -> theta'``, the same distribution as log-conditionals along the
            junction tree (the approximate oracle: ``theta`` unchanged).
        canonical: ``(plan, blocks) -> blocks'``, finite tables in the junction tree's canonical gauge.
        tops: ``(plan, blocks) -> tops``, each clique's largest finite entry, broadcastable against its block.
    """

    name: str
    marginals: Callable
    log_partition: Callable | None
    log_conditionals: Callable
    canonical: Callable
    tops: Callable


EXACT = MarginalOracle("exact", oracle.marginals, oracle.log_partition, gauge.log_conditionals, gauge.canonical,
                       row_tops)
SIZE_CLASS = MarginalOracle("size_class", routed_oracle.marginals, routed_oracle.log_partition,
                            routed_oracle.log_conditionals, routed_oracle.canonical, routed_oracle.row_tops)
APPROXIMATE = MarginalOracle("approximate", approximate_oracle.marginals, None, _unchanged, _no_gauge, row_tops)


def oracle_of(plan) -> MarginalOracle:
    """The marginal oracle that runs ``plan`` (the one place that asks a plan's kind).

    Example:
        >>> from pgmjax.data.domain import Domain
        >>> oracle_of(oracle.make_plan(Domain({"a": 2}), [("a",)])).name
        'exact'
    """
    if isinstance(plan, RoutedPlan):
        return SIZE_CLASS
    if isinstance(plan, ApproximatePlan):
        return APPROXIMATE
    if isinstance(plan, OraclePlan):
        return EXACT
    raise TypeError(f"no marginal oracle runs a {type(plan).__name__}; expected an OraclePlan, RoutedPlan or "
                    "ApproximatePlan")


__all__ = ["APPROXIMATE", "EXACT", "SIZE_CLASS", "MarginalOracle", "oracle_of", "row_tops"]
