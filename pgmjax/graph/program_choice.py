"""Which compiled program an engine call runs: the model's size read from the call's arguments.

:class:`pgmjax.compiler.BySize` asks these predicates on the host, before tracing, which of its CPU programs a
call runs: XLA:CPU's loop emitters for models with small blocks (:func:`suits_loop_emitters`), its fusion
emitters for the size-class programs (:func:`emitters_for`). The answer is a function of the arguments' static
structure alone.
"""

from __future__ import annotations

import numpy as np

from .. import compiler
from .oracle_plan import BlockPlan, OraclePlan, make_plan  # noqa: F401  (make_plan: the examples)
from .routed_plan import RoutedPlan


def _the_model(args, kwargs):
    """The model an engine program's call works on: ``(plan, blocks, members)`` for the first argument that is an
    :class:`OraclePlan` (with the dict of potentials that follows it, if any; one member) or that holds a
    :class:`BlockPlan` as ``plan`` (a fitting problem: no blocks, one member per entry of its ``total``); None
    where no argument is either."""
    values = [*args, *kwargs.values()]
    for i, a in enumerate(values):
        if isinstance(a, (OraclePlan, RoutedPlan)):
            after = values[i + 1] if i + 1 < len(values) else None
            return a, after if isinstance(after, dict) else None, 1
        plan = getattr(a, "plan", None)
        if isinstance(plan, (BlockPlan, RoutedPlan)):
            return plan, None, int(np.size(a.total))
    return None


def _size_class(args, kwargs) -> bool:
    """Whether the call's model is a size-class plan (:class:`~pgmjax.graph.routed_plan.RoutedPlan`)."""
    found = _the_model(args, kwargs)
    return found is not None and isinstance(found[0], RoutedPlan)


def block_cells(*args, **kwargs) -> int:
    """The cells of the largest potential block an engine program's call works on, every member of a batch
    counted: the size of its largest single pass (a block stacks the tables of one clique class).

    The first argument that is an :class:`OraclePlan` or holds one as ``plan`` (a fitting problem) gives
    the model; a problem's ``total`` (one per member) gives the members, and after a bare plan the
    potentials that follow it (a dict of blocks, with any batch axes) are measured instead.

    Example:
        >>> from pgmjax.data.domain import Domain
        >>> plan = make_plan(Domain({"a": 2, "b": 3, "c": 4}), [("a", "b"), ("b", "c")])
        >>> plan.cells, block_cells(plan), block_cells(plan, {"x": np.zeros((4, 6)), "y": np.zeros((4, 12))})
        (18, 12, 48)
    """
    found = _the_model(args, kwargs)
    if found is None:
        raise TypeError("block_cells: no OraclePlan, and no argument with one as `plan`, among the arguments")
    plan, blocks, members = found
    if blocks is not None:
        return max((int(np.size(t)) for t in blocks.values()), default=0)
    return plan.largest_block * members


def emitters_for(*args, **kwargs) -> compiler.Emitters:
    """The XLA:CPU emitters an engine program's call is compiled with (:class:`pgmjax.compiler.BySize`).

    The fusion emitters for a size-class plan (:class:`~pgmjax.graph.routed_plan.RoutedPlan`), whatever
    ``XLA_FLAGS`` name: its passes read through gathers, which the loop emitters write element by element,
    without vector code, so its iterations took about twice as long for a compile that the loop emitters
    shorten little (its kernels are few). Otherwise the loop emitters where :func:`suits_loop_emitters`, XLA's
    defaults elsewhere.

    Example:
        >>> from pgmjax.data.domain import Domain
        >>> from pgmjax.graph.routed_plan import make_routed_plan
        >>> dom = Domain({"a": 2, "b": 3})
        >>> emitters_for(make_plan(dom, [("a", "b")])).name, emitters_for(make_routed_plan(dom, [("a", "b")])).name
        ('LOOP', 'FUSION')
    """
    if _size_class(args, kwargs):
        return compiler.Emitters.FUSION
    return compiler.Emitters.LOOP if suits_loop_emitters(*args, **kwargs) else compiler.Emitters.DEFAULT


def suits_loop_emitters(*args, **kwargs) -> bool:
    """Whether an engine program's call is compiled with XLA:CPU's loop emitters (:class:`pgmjax.compiler.BySize`).

    Yes where its largest potential block has at most :data:`pgmjax.compiler.LOOP_EMITTERS_CELLS` cells
    (:func:`block_cells`, every member of a batch counted) and, for a fitting problem, its measurements
    reduce the junction tree's tables into at most :data:`pgmjax.compiler.LOOP_EMITTERS_MAX_REDUCTIONS`
    marginals per clique. Never for a size-class plan (:func:`emitters_for`).

    Example:
        >>> from pgmjax.data.domain import Domain
        >>> suits_loop_emitters(make_plan(Domain({"a": 2, "b": 3}), [("a", "b")]))
        True
    """
    if _size_class(args, kwargs):  # the fusion emitters (emitters_for)
        return False
    if block_cells(*args, **kwargs) > compiler.LOOP_EMITTERS_CELLS:
        return False
    for a in (*args, *kwargs.values()):
        groups = getattr(getattr(a, "meas", None), "groups", None)
        if isinstance(getattr(a, "plan", None), OraclePlan) and groups is not None:
            parts = [p for g in groups for p in (g.parts or (g,))]
            # a "pairs" group reads its table's marginals through matrix products, one per marginal it holds
            reductions = sum(p.pairs.marginals if p.pairs is not None else p.count for p in parts if p.sum_axes or p.pairs)
            return reductions <= compiler.LOOP_EMITTERS_MAX_REDUCTIONS * len(a.plan.cliques)
    return True
