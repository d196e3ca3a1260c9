"""The size-class plan: a junction tree's routing as data, so one compiled program serves every structure of a size.

The dense plan (:mod:`pgmjax.graph.oracle_plan`) stacks cliques of one shape into blocks and writes their shapes
into the program: every new structure is a new program, and compiling it costs seconds where the arithmetic of a
small model costs milliseconds. Here the structure is index arrays instead:

* every clique table lies end to end in one vector of cells, deepest level first, the root last, each table in
  its clique's own attribute order (row-major);
* every non-root clique's separator table lies in one vector of separator cells, in the same level order;
* ``up[i]``: the separator cell that cell ``i`` sums into (its upward message);
* pairs ``(dst, src)``: parent cell ``dst`` receives child separator cell ``src`` (one per cell and child);
* per step (:func:`~pgmjax.graph.routed_steps.steps`), where its cells, separator cells and pairs start (``lo``, ``so``, ``po``), how many
  windows of pairs it takes (``pc``), and whether it is the first and the last step of its cliques (``first``,
  ``last``).

A step's cells are a window of fixed width read from those vectors at the step's offset, its pairs as many
windows as they fill: the shapes of every array, hence the compiled program, depend only on the
:class:`~pgmjax.graph.routed_steps.SizeClass`, two sizes on coarse grids (:func:`~pgmjax.graph.routed_steps.class_size`, :func:`~pgmjax.graph.routed_steps.width_class`). The number of steps and of
a step's pair windows are numbers, not shapes: the passes loop over them with trip counts read from the plan, so a
clique with many children costs its own pairs, not a wider window for every step. A clique wider than the window
takes steps of its own, one per window of its cells, whose reductions onto its separator are merged as a running
maximum and a rescaled sum (the log-sum-exp of a split sum), so one large clique does not make every step as
wide as itself.

How a plan trades window width for steps is the platform's (:data:`~pgmjax.graph.routed_steps.WINDOW_COSTS`, chosen by
:func:`make_routed_plan`'s ``platform``): on a CPU a step costs little beyond the cells it reads, so windows are
narrow and a step loops over its own windows of pairs; on a GPU each trip of a loop costs tens of microseconds
whatever its width, so windows are wide, steps few, and a step reads its class's number of pair windows without
a loop of its own.

References: Koller & Friedman (2009), Ch. 10 (junction-tree message passing); McKenna, Sheldon & Miklau,
"Graphical-model based estimation and inference for differential privacy", ICML 2019, Section 3.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import to_device
from ..data.domain import Clique, Domain
from . import size_limit
from .junction import JunctionTree, junction_tree, maximal_cliques
from .oracle_plan import in_host_axes, make_plan
from .routed_steps import (PAIRS_PER_CELL, LEVELS_MIN, WINDOW_COSTS, SizeClass, class_size, pair_width, pow2,
                           steps, width_class, window_of_class, window_platform)


@dataclass(frozen=True, eq=False)
class RoutedLayout:
    """Host-side structure of a routed plan: what the host needs to read its tables (never inside a program).

    Attributes:
        domain: the domain.
        tree: the junction tree.
        order: the cliques in storage order (deepest level first, the root last).
        offsets: for each junction-tree clique, where its table starts in the cell vector.
        used: cells the tables take (the rest of the vector is padding).
        platform: the platform whose :data:`~pgmjax.graph.routed_steps.WINDOW_COSTS` shaped the steps (``"cpu"``, ``"gpu"``).
    """

    domain: Domain
    tree: JunctionTree
    order: tuple[int, ...]
    offsets: tuple[int, ...]
    used: int
    platform: str = "cpu"


_HOST_ONLY = (
    "a routed plan's structure (its cliques and their offsets) is read on the host only: inside jit, vmap or grad "
    "a routed plan carries its index arrays and size class, not its junction tree (they would tie the program to "
    "one structure)"
)


@jax.tree_util.register_pytree_node_class
class RoutedPlan:
    """A junction tree's routing arrays (pytree leaves) and size class (static); create with :func:`make_routed_plan`.

    Potentials and marginals are ``{"cells": (size.cells,)}`` (one block, padding at 0 in marginals). On the host
    the plan also reads and writes clique tables (:meth:`tables`, :meth:`table`, :meth:`from_tables`); inside a
    compiled program only its arrays exist, and every program that takes one is shared by all structures of its
    size class.
    """

    def __init__(self, arrays: dict, size: SizeClass, layout: RoutedLayout | None = None, differentiable: bool = False):
        self.arrays = arrays
        self.size = size
        self._layout = layout
        # The passes' loop (pgmjax.graph.routed_oracle): a scan over the class's levels that reverse-mode autodiff
        # goes through, or (the faster forward) a loop whose trip count is the plan's own.
        self.differentiable = differentiable

    def tree_flatten(self):
        keys = tuple(sorted(self.arrays))
        return tuple(self.arrays[k] for k in keys), (keys, self.size, self.differentiable)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        keys, size, differentiable = aux
        return cls(dict(zip(keys, leaves)), size, differentiable=differentiable)

    # ---- host-side structure
    @property
    def host(self) -> RoutedLayout:
        if self._layout is None:
            raise RuntimeError(_HOST_ONLY)
        return self._layout

    @property
    def platform(self) -> str:
        """The platform whose window costs shaped the plan (``"cpu"`` where its host-side structure is not kept)."""
        return self._layout.platform if self._layout is not None else "cpu"

    @property
    def domain(self) -> Domain:
        return self.host.domain

    @property
    def tree(self) -> JunctionTree:
        return self.host.tree

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return self.host.tree.cliques

    @property
    def units(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(key, shape) of every potential block: one vector of cells."""
        return (("cells", (self.size.cells,)),)

    @property
    def cells(self) -> int:
        """Cells of the potential vector, padding included: one model's size."""
        return self.size.cells

    @property
    def largest_block(self) -> int:
        return self.size.cells

    @property
    def shards(self) -> int:
        return 1

    @property
    def slot_padded(self) -> frozenset:
        return frozenset()

    @property
    def padded(self) -> tuple[None, ...]:
        """No clique table is padded (the dense plan pads free singletons'; here every table is its own size)."""
        return (None,) * len(self.cliques)

    def layout(self, j: int) -> Clique:
        """Clique ``j``'s attributes in the order its cells are stored: the clique's own."""
        return self.cliques[j]

    def _index(self, j: int) -> tuple[str, slice]:
        off = self.host.offsets[j]
        return "cells", slice(off, off + self.domain.size(self.cliques[j]))

    def zeros(self, dtype=np.float32) -> dict:
        """All-zero potentials (the uniform distribution)."""
        return {"cells": to_device(np.zeros(self.size.cells, dtype))}

    def table(self, blocks: dict, j: int, batch_dims: int = 0):
        """Junction-tree clique ``j``'s table (axes in the order of ``cliques[j]``) from a cell vector."""
        _, index = self._index(j)
        t = blocks["cells"][(slice(None),) * batch_dims + (index,)]
        return t.reshape(t.shape[:batch_dims] + self.domain.shape_of(self.cliques[j]))

    def tables(self, blocks: dict) -> dict[Clique, object]:
        """``{clique: table}`` from a cell vector."""
        return {c: self.table(blocks, j) for j, c in enumerate(self.cliques)}

    def with_table(self, blocks: dict, j: int, table, add: bool = False) -> dict:
        """``blocks`` with clique ``j``'s table replaced by ``table`` (or, with ``add``, increased by it); size-1 axes
        broadcast."""
        _, index = self._index(j)
        t = jnp.broadcast_to(jnp.asarray(table), self.domain.shape_of(self.cliques[j])).reshape(-1)
        cells = blocks["cells"]
        return {"cells": cells.at[index].add(t) if add else cells.at[index].set(t)}

    def to_dense(self, blocks: dict | None = None, batch_dims: int = 0):
        """The dense plan of the same junction tree (:func:`pgmjax.graph.oracle_plan.make_plan`) and, given a cell
        vector (with ``batch_dims`` leading axes), the same tables in its layout: ``(plan, blocks or None)``."""
        plan = make_plan(self.domain, self.cliques)
        if blocks is None:
            return plan, None
        cells = np.asarray(blocks["cells"])
        lead = cells.shape[:batch_dims]
        members = [plan.from_tables(self.tables({"cells": cells[i]}), cells.dtype) for i in np.ndindex(*lead)]
        out = {k: np.stack([np.asarray(m[k]) for m in members]).reshape(lead + members[0][k].shape) for k in members[0]}
        return plan, {k: to_device(v) for k, v in out.items()}

    def from_tables(self, tables: dict, dtype=np.float32) -> dict:
        """A cell vector from ``{clique: table}``: each table broadcast into the smallest clique holding it, summed."""
        cells = np.zeros(self.size.cells, np.float64)
        for clique, table in tables.items():
            j = self.tree.containing(clique)
            if j is None:
                raise ValueError(f"clique {clique} lies in no clique of this model: {self.cliques}")
            host = self.cliques[j]
            _, index = self._index(j)
            t = in_host_axes(self.domain, clique, table, host)
            cells[index] += np.broadcast_to(t, self.domain.shape_of(host)).reshape(-1)
        return {"cells": to_device(cells, dtype)}


def make_routed_plan(domain: Domain, cliques, max_bytes: float | None = None, *, differentiable: bool = False,
                     platform: str = "cpu") -> RoutedPlan:
    """Build (cached) the size-class plan of a model over ``cliques``, once its size is checked.

    Args:
        domain: the domain (attributes in no clique are modelled as uniform).
        cliques: the cliques the model must hold.
        max_bytes: the size limit in bytes (default :func:`pgmjax.graph.size_limit.max_model_bytes`).
        differentiable: the passes scan over the size class's levels, so that reverse-mode autodiff goes through
            them (L-BFGS differentiates its loss through the oracle), instead of looping over the tree's own levels
            (the faster forward pass, which JAX cannot reverse: its trip count is data). Another compiled program.
        platform: the platform the plan's programs run on (``jax.Device.platform``: ``"cpu"``, ``"gpu"``; others
            are shaped as for a GPU): how its steps trade window width for their count (:data:`~pgmjax.graph.routed_steps.WINDOW_COSTS`).
            A plan shaped for one platform runs on any, with the same answers.

    Returns:
        A :class:`RoutedPlan`.

    Raises:
        ModelTooLarge: (a ValueError) naming the cells, the bytes and the largest clique of the junction tree.

    Example:
        >>> plan = make_routed_plan(Domain({"a": 2, "b": 3, "c": 4}), [("a", "b"), ("b", "c")])
        >>> plan.size  # a small, shallow model: the platform's smallest class and shallow window
        SizeClass(cells=4096, width=1024, pairs=16384, pair_width=1024, levels=32, chunks=0)
    """
    if not isinstance(differentiable, bool):
        raise TypeError(f"make_routed_plan: differentiable must be a bool, got {differentiable!r}")
    if not isinstance(platform, str):
        raise TypeError(f"make_routed_plan: platform must be a platform's name such as 'cpu' or 'gpu', got {platform!r}")
    model_cliques = maximal_cliques(domain, cliques)
    size_limit.check_tree(junction_tree(domain, model_cliques), None, max_bytes)
    platform = window_platform(platform)
    plan = _routed_plan_cached(domain, model_cliques, platform)
    if differentiable:  # its scans' static trip counts (levels, and pair windows per level) are part of its class
        return RoutedPlan(plan.arrays, plan.size, plan._layout, True)
    if not WINDOW_COSTS[platform].pairs_looped:  # each step reads the class's windows of pairs, unrolled
        return plan
    # a loop reads each level's own count of pair windows: the bound is not the program's
    return RoutedPlan(plan.arrays, plan.size._replace(chunks=0), plan._layout)


def ravel_projection(domain: Domain, clique: Clique, sub: Clique) -> np.ndarray:
    """For every cell of ``clique``'s table (row-major), the row-major index of its projection on ``sub`` (a subset of
    ``clique``, in ``sub``'s order).

    Example:
        >>> ravel_projection(Domain({"a": 2, "b": 3}), ("a", "b"), ("b",)).tolist()
        [0, 1, 2, 0, 1, 2]
    """
    shape = domain.shape_of(clique)
    grids = np.indices(shape, dtype=np.int64).reshape(len(shape), -1) if shape else np.zeros((0, 1), np.int64)
    index = np.zeros(grids.shape[1], np.int64)
    for a in sub:
        index = index * domain[a] + grids[clique.index(a)]
    return index


#: The plan's arrays as long as its cell vector, and as long as its pair vector (:func:`_padding` fills them).
_CELL_ARRAYS = ("level", "up", "sep_first", "sep_last", "sep_slot", "clique")
_PAIR_ARRAYS = ("pair_level", "pair_dst", "pair_src")


def _padding(size: SizeClass) -> dict[str, int]:
    """What each array holds where it is padding: no step (-1), no separator cell or sender (the window's width),
    no clique (the last segment), no pair."""
    return {
        "level": -1,  # each cell's step
        "up": size.width,  # the separator cell within its step's window that a cell sums into (none: the root's)
        "sep_first": size.levels, "sep_last": -1,  # per separator cell, the first and last steps of its clique
        "sep_slot": size.width,  # the sending clique within its step, per separator cell
        "clique": size.cells - 1,  # each cell's clique
        "pair_level": -1, "pair_dst": size.width,  # a pair's step, and its receiving cell within the step's window
        "pair_src": 0,  # the child's separator cell (absolute)
    }


#: The smallest class a plan is widened to for answering (:func:`widened`): a model's answers run a few times per
#: model, so a short vector's padding costs little, while each class is a program to compile; a mechanism's small
#: models (NLTCS's first batches, of 4,096 cells) answer in the class of the larger ones that follow them.
ANSWER_MIN_CELLS = 16384


def widened(plan: RoutedPlan) -> RoutedPlan:
    """``plan`` with its cell and pair vectors padded to the next power of 4 (:func:`~pgmjax.graph.routed_steps.width_class`
    of its cells), at least :data:`ANSWER_MIN_CELLS`, and a shallow tree's window to that class's own
    (:func:`_in_class`): the same steps and answers, in a class that plans of up to four times fewer cells share,
    whatever window their own class gave them. A growing model's answers (:mod:`pgmjax.model`: marginals, log Z) run
    in it, so a run whose models grow through ten cell classes compiles its answering program for three or four of
    them.

    Example:
        >>> plan = make_routed_plan(Domain({"a": 40, "b": 50, "c": 60}), [("a", "b"), ("b", "c")])
        >>> widened(plan).size.cells, plan.size.cells
        (16384, 6144)
    """
    return padded(plan, _in_class(plan, max(width_class(plan.size.cells), ANSWER_MIN_CELLS)))


def _in_class(plan: RoutedPlan, cells: int) -> SizeClass:
    """``plan``'s class grown to ``cells`` cells: its pairs in proportion and, for a shallow tree on a CPU, the window
    that class of cells sets (:func:`~pgmjax.graph.routed_steps.window_of_class`), so that the plans padded to it
    share one program whatever window their own class gave them; otherwise ``plan``'s own window."""
    platform = plan.platform
    costs = WINDOW_COSTS[platform]
    size = plan.size._replace(cells=cells, pairs=PAIRS_PER_CELL * cells)
    if plan.differentiable or not costs.pairs_looped or not costs.cells_per_window or size.levels != LEVELS_MIN:
        return size
    width = max(size.width, window_of_class(cells, costs))
    return size._replace(width=width, pair_width=pair_width(width, platform))


def padded(plan: RoutedPlan, size: SizeClass) -> RoutedPlan:
    """``plan`` in the larger class ``size``: its vectors padded, its window widened (a step reads more cells, all
    of them padding or another step's, which the passes leave alone); the same steps and answers.

    What a plan holds where nothing is (:func:`_padding`) follows the class, so entries that meant "none" in
    ``plan``'s class mean it in ``size`` too.

    Raises:
        ValueError: ``size`` smaller than ``plan``'s class in some dimension, or of another number of steps or
            pair windows.

    Example:
        >>> plan = make_routed_plan(Domain({"a": 2, "b": 3}), [("a", "b")])
        >>> padded(plan, next_class(plan)).size.cells
        6144
    """
    old = plan.size
    if size == old:
        return plan
    if (size.cells < old.cells or size.width < old.width or size.pairs < old.pairs or size.pair_width < old.pair_width
            or size.levels != old.levels or size.chunks != old.chunks):
        raise ValueError(f"padded: a plan of class {old} cannot be padded to {size}: the class must be at least as "
                         "large in cells, window, pairs and pair window, with the same steps and pair windows")
    before, fill = _padding(old), _padding(size)
    arrays = {k: np.asarray(v) for k, v in plan.arrays.items()}
    for k in ("up", "sep_slot", "pair_dst", "sep_first"):  # "none" was the old window (or step count): the new one's
        arrays[k] = np.where(arrays[k] == before[k], fill[k], arrays[k])
    arrays["clique"] = np.where(arrays["level"] < 0, fill["clique"], arrays["clique"])
    for keys, n in ((_CELL_ARRAYS, size.cells), (_PAIR_ARRAYS, size.pairs)):
        for k in keys:
            arrays[k] = np.concatenate([arrays[k], np.full(n - len(arrays[k]), fill[k], arrays[k].dtype)])
    return RoutedPlan({k: to_device(v) for k, v in arrays.items()}, size, plan._layout, plan.differentiable)


def next_class(plan: RoutedPlan) -> SizeClass | None:
    """The size class a model growing out of ``plan``'s class most likely meets next: the next cell class
    (:func:`~pgmjax.graph.routed_steps.class_size`), with the window that class sets on a CPU for a shallow tree
    (:func:`~pgmjax.graph.routed_steps.window_of_class`) and otherwise ``plan``'s own. None for a differentiable
    plan (its scans' trip counts are its own) and for a plan shaped for a GPU (its windows follow each tree).

    Example:
        >>> next_class(make_routed_plan(Domain({"a": 2, "b": 3}), [("a", "b")]))
        SizeClass(cells=6144, width=1024, pairs=24576, pair_width=1024, levels=32, chunks=0)
    """
    if plan.differentiable or not WINDOW_COSTS[plan.platform].pairs_looped:
        return None
    return _in_class(plan, class_size(plan.size.cells + 1))


@functools.lru_cache(maxsize=64)
def _routed_plan_cached(domain: Domain, model_cliques: tuple[Clique, ...], platform: str) -> RoutedPlan:
    tree = junction_tree(domain, model_cliques)
    sched, width, chunks = steps(tree, platform)  # "levels" below are these steps
    pw = pair_width(width, platform)
    size = [domain.size(c) for c in tree.cliques]
    sep_size = [domain.size(s) if tree.parent[c] >= 0 else 0 for c, s in enumerate(tree.separators)]
    n_cliques = len(size)
    offsets, sep_offsets = [0] * n_cliques, [0] * n_cliques
    first_step, last_step = [0] * n_cliques, [0] * n_cliques
    lo, so, po, first, last = [], [], [], [], []
    at = sep_at = 0
    children: dict[int, list[int]] = {}
    for c, p in enumerate(tree.parent):
        if p >= 0:
            children.setdefault(p, []).append(c)
    order = []
    for li, (cliques, part, parts) in enumerate(sched):
        if part == 0:  # a whole step's cliques, or the first window of a split clique, take their place
            lo.append(at)
            so.append(sep_at)
            for c in cliques:
                order.append(c)
                offsets[c], sep_offsets[c], first_step[c] = at, sep_at, li
                at += size[c]
                sep_at += sep_size[c]
        else:  # the next window of a split clique, at its next ``width`` cells; its separator's window the same
            c = cliques[0]
            lo.append(offsets[c] + part * width)
            so.append(sep_offsets[c])
        for c in cliques:
            last_step[c] = li
        first.append(part == 0)
        last.append(part == parts - 1)
    pair_total = sum(size[c] * len(kids) for c, kids in children.items())  # one pair per parent cell and child
    # Two dimensions, each on a coarse grid, so that many structures share a class: the cell vector on the 1.5 grid
    # (at least the platform's smallest class), the window on powers of 4; the pairs follow them. A window read at
    # the last step's offset stays inside its vector.
    n_cells = class_size(max(at + width, -(-(pair_total + pw) // PAIRS_PER_CELL),
                             WINDOW_COSTS[window_platform(platform)].smallest_cells))
    n_pairs = PAIRS_PER_CELL * n_cells
    n_levels = max(LEVELS_MIN, 1 << (len(sched) - 1).bit_length())  # the steps: data, on a coarse grid
    sc = SizeClass(n_cells, width, n_pairs, pw, n_levels, pow2(max(chunks)))

    fill = _padding(sc)
    level, up, sep_first, sep_last, sep_slot, clique_of = (np.full(n_cells, fill[k], np.int32) for k in _CELL_ARRAYS)
    pair_level, pair_dst, pair_src = (np.full(n_pairs, fill[k], np.int32) for k in _PAIR_ARRAYS)
    pair_at = 0
    for li, (cliques, part, parts) in enumerate(sched):
        po.append(pair_at)  # the step's pairs: each of its cells' pairs per child, cell by cell
        for k, c in enumerate(cliques):
            a, b = (0, size[c]) if parts == 1 else (part * width, min(size[c], (part + 1) * width))
            cells = slice(offsets[c] + a, offsets[c] + b)
            level[cells] = li
            clique_of[cells] = c
            if tree.parent[c] >= 0:
                up[cells] = sep_offsets[c] - so[li] + ravel_projection(domain, tree.cliques[c], tree.separators[c])[a:b]
                seps = slice(sep_offsets[c], sep_offsets[c] + sep_size[c])
                sep_first[seps], sep_last[seps], sep_slot[seps] = first_step[c], last_step[c], k
            for child in children.get(c, ()):
                rows = slice(pair_at, pair_at + b - a)
                pair_level[rows] = li
                pair_dst[rows] = np.arange(a, b) + offsets[c] - lo[li]
                projection = ravel_projection(domain, tree.cliques[c], tree.separators[child])
                pair_src[rows] = sep_offsets[child] + projection[a:b]
                pair_at += b - a

    def per_level(values):
        out = np.zeros(n_levels, np.int32)
        out[: len(values)] = values
        return out

    arrays = {
        "level": level, "up": up, "sep_first": sep_first, "sep_last": sep_last, "sep_slot": sep_slot,
        "clique": clique_of, "pair_level": pair_level, "pair_dst": pair_dst, "pair_src": pair_src,
        "lo": per_level(lo), "so": per_level(so), "po": per_level(po), "pc": per_level(chunks),
        "first": per_level(first), "last": per_level(last),
        "num_levels": np.asarray(len(sched), np.int32), "root_from": np.asarray(first_step[order[-1]], np.int32),
    }
    layout = RoutedLayout(domain, tree, tuple(order), tuple(offsets), at, platform)
    return RoutedPlan({k: to_device(v) for k, v in arrays.items()}, sc, layout)


__all__ = ["RoutedPlan", "RoutedLayout", "make_routed_plan", "next_class", "padded", "ravel_projection", "widened"]
