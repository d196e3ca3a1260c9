"""Marginal measurements as data, for size-class programs: which model cell sums into which measured cell.

:mod:`pgmjax.estimation.losses` groups measurements by the shapes of their tables and writes those shapes into the
program. For a :class:`~pgmjax.graph.routed_plan.RoutedPlan` the measurements are index arrays instead, so the
loss, like the oracle, is one program per size class:

* every measured table's cells lie end to end in one vector (each in its clique's order, the order of its
  answers ``y``);
* pairs ``(cell, pattern)``: model cell ``cell`` (of the smallest model clique holding the measured clique)
  sums into measured cell ``pattern``; a measured table is then a segment sum of the model's marginals;
* ``table``: each measured cell's measurement (for centering), ``y`` and ``inv_std`` (0 on padding).

The patterns (measured marginals), the parameters mirror descent keeps, the loss and its gradient are the
same numbers as :mod:`pgmjax.estimation.losses` gives (McKenna, Sheldon & Miklau, ICML 2019, Appendix C.2); only
marginals (identity queries) are routed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import to_device
from ..graph.routed_plan import RoutedPlan, ravel_projection
from ..graph.routed_steps import multiple_class
from ..queries.measurement import Measurement


class RoutedShape(NamedTuple):
    """The shapes of routed measurements (static): measured cells, (cell, pattern) pairs, measured tables."""

    cells: int
    pairs: int
    tables: int


@jax.tree_util.register_pytree_node_class
class RoutedMeasurements:
    """Marginal measurements as index arrays (leaves) with their :class:`RoutedShape` (static).

    ``arrays`` is a one-group tuple ``({"y": ..., "inv_std": ...},)`` so that
    :func:`pgmjax.estimation.losses.loss_of_predictions` reads it like the dense layout's groups.
    """

    def __init__(self, index: dict, arrays: tuple, shape: RoutedShape):
        self.index, self.arrays, self.shape = index, arrays, shape

    def tree_flatten(self):
        return (self.index, self.arrays), self.shape

    @classmethod
    def tree_unflatten(cls, shape, leaves):
        return cls(*leaves, shape)

    def patterns(self, mu: dict) -> list[jax.Array]:
        """The measured marginals, one vector (``[(1, cells)]``: one group)."""
        a = self.index
        return [jax.ops.segment_sum(mu["cells"][a["cell"]], a["pattern"], self.shape.cells)[None]]

    def predictions_from_patterns(self, pats: list) -> list[jax.Array]:
        return list(pats)  # marginals: the query is the identity

    def center(self, pats: list) -> list[jax.Array]:
        """Each measured table less its largest entry (padding, whose table id is past the end, left as it is)."""
        x = pats[0][0]
        table = self.index["table"]
        top = jax.lax.stop_gradient(jax.ops.segment_max(x, table, self.shape.tables))
        top = jnp.concatenate([jnp.where(jnp.isfinite(top), top, 0.0), jnp.zeros((1,), x.dtype)])
        return [(x - top[table])[None]]


def _padding(shape: RoutedShape) -> dict[str, int]:
    """What the index arrays hold where nothing is measured: padding pairs and cells take ids past the end (dropped by
    the segment reductions), not one spare id whose atomic updates would queue on a GPU."""
    return {"cell": 0, "pattern": shape.cells, "table": shape.tables}


def routable(measurements: Sequence[Measurement]) -> bool:
    """Whether these measurements can be routed: all marginals (identity queries)."""
    return all(m.kind == "identity" for m in measurements)


def stack_routed(plan: RoutedPlan, measurements: Sequence[Measurement], dtype) -> RoutedMeasurements:
    """Routed measurements of ``measurements`` (marginals of cliques of the model of ``plan``).

    Raises:
        ValueError: a measurement that is not a marginal (its query is not the identity).
    """
    bad = [m.clique for m in measurements if m.kind != "identity"]
    if bad:
        raise ValueError(f"size-class programs route marginals only; measurements of {bad[:3]} have other queries")
    domain = plan.domain
    n_cells = sum(domain.size(m.clique) for m in measurements)
    n_pairs = sum(domain.size(plan.cliques[plan.tree.containing(m.clique)]) for m in measurements)
    # Sizes that follow the plan's cell vector (a measured table is at most its host's size), so that the structures
    # of one plan class mostly share a measurement class too. The pairs are summed whole every iteration, so they are
    # padded to a power-of-2 multiple of the cells, and to at least four times the cells (the plan's own routing
    # pairs): a model's one-way marginals, hosted by its larger cliques, take the pairs past the cells in a run's
    # later rounds, and a floor of the cells, then of twice the cells, made those rounds a second program of the
    # class (TreeAIM on NLTCS: the sixth batch's fit, of the same plan class as the four before it).
    cells = multiple_class(n_cells, plan.size.cells)
    shape = RoutedShape(cells, multiple_class(n_pairs, 4 * plan.size.cells), cells)
    fill = _padding(shape)
    cell = np.full(shape.pairs, fill["cell"], np.int32)
    pattern = np.full(shape.pairs, fill["pattern"], np.int32)
    table = np.full(shape.cells, fill["table"], np.int32)
    y = np.zeros(shape.cells, np.float64)
    inv_std = np.zeros(shape.cells, np.float64)
    at = pair_at = 0
    for t, m in enumerate(measurements):
        j = plan.tree.containing(m.clique)
        host = plan.cliques[j]
        _, cells = plan._index(j)
        n, n_host = domain.size(m.clique), domain.size(host)
        cell[pair_at:pair_at + n_host] = np.arange(cells.start, cells.stop)
        pattern[pair_at:pair_at + n_host] = at + ravel_projection(domain, host, m.clique)
        table[at:at + n] = t
        y[at:at + n] = np.asarray(m.y, np.float64).reshape(-1)
        inv_std[at:at + n] = 1.0 / np.broadcast_to(np.asarray(m.row_stddev(), np.float64), (n,))
        at += n
        pair_at += n_host
    index = {k: to_device(v) for k, v in {"cell": cell, "pattern": pattern, "table": table}.items()}
    arrays = ({"y": to_device(y, dtype), "inv_std": to_device(inv_std, dtype)},)
    return RoutedMeasurements(index, arrays, shape)


def padded(meas: RoutedMeasurements, shape: RoutedShape) -> RoutedMeasurements:
    """``meas`` in the larger ``shape``: the same measured tables, padding past them (ids past the end, which the
    segment reductions drop, and zero weights), as :func:`stack_routed` pads.

    Raises:
        ValueError: ``shape`` smaller than ``meas``'s in some dimension.
    """
    old = meas.shape
    if shape == old:
        return meas
    if shape.cells < old.cells or shape.pairs < old.pairs or shape.tables < old.tables:
        raise ValueError(f"padded: routed measurements of shape {old} cannot be padded to {shape}")
    before, fill = _padding(old), _padding(shape)
    index = {}
    for k, v in meas.index.items():  # "nothing" was the old shape's ids past the end: the new shape's
        v = np.asarray(v)
        v = np.where(v == before[k], fill[k], v) if k != "cell" else v
        n = shape.cells if k == "table" else shape.pairs
        index[k] = np.concatenate([v, np.full(n - len(v), fill[k], np.int32)])
    arrays = ({k: to_device(np.concatenate([np.asarray(v), np.zeros(shape.cells - old.cells, v.dtype)]))
               for k, v in meas.arrays[0].items()},)
    return RoutedMeasurements({k: to_device(v) for k, v in index.items()}, arrays, shape)


def shape_in_class(meas: RoutedMeasurements, cells: int, class_cells: int) -> RoutedShape:
    """The shape ``meas`` (routed for a plan of ``cells`` cells) takes, as the same multiples of the cell vector,
    for a plan of ``class_cells``: what a grown model's measurements most likely take (:func:`stack_routed` sizes
    them in multiples of the plan's cells)."""
    measured = meas.shape.cells // cells * class_cells
    return RoutedShape(measured, meas.shape.pairs // cells * class_cells, measured)

