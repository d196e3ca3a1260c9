"""The size-class plan: a junction tree's routing as data, so one compiled program serves every structure of a size.

The dense plan (:mod:`pgmjax.graph.oracle_plan`) stacks cliques of one shape into blocks and writes their shapes
into the program: every new structure is a new program, and compiling it costs seconds where the arithmetic of a
small model costs milliseconds. Here the structure is index arrays instead:

* every clique table lies end to end in one vector of cells, deepest level first, the root last, each table in
  its clique's own attribute order (row-major);
* every non-root clique's separator table lies in one vector of separator cells, in the same level order;
* ``up[i]``: the separator cell that cell ``i`` sums into (its upward message);
* pairs ``(dst, src)``: parent cell ``dst`` receives child separator cell ``src`` (one per cell and child);
* per step (:func:`steps`), where its cells, separator cells and pairs start (``lo``, ``so``, ``po``), how many
  windows of pairs it takes (``pc``), and whether it is the first and the last step of its cliques (``first``,
  ``last``).

A step's cells are a window of fixed width read from those vectors at the step's offset, its pairs as many
windows as they fill: the shapes of every array, hence the compiled program, depend only on the
:class:`SizeClass`, two sizes on coarse grids (:func:`class_size`, :func:`width_class`). The number of steps and of
a step's pair windows are numbers, not shapes: the passes loop over them with trip counts read from the plan, so a
clique with many children costs its own pairs, not a wider window for every step. A clique wider than the window
takes steps of its own, one per window of its cells, whose reductions onto its separator are merged as a running
maximum and a rescaled sum (the log-sum-exp of a split sum), so one large clique does not make every step as
wide as itself.

How a plan trades window width for steps is the platform's (:data:`WINDOW_COSTS`, chosen by
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
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import to_device
from ..data.domain import Clique, Domain
from . import size_limit
from .junction import JunctionTree, junction_tree, levels, maximal_cliques
from .oracle_plan import in_host_axes, make_plan

#: The smallest size a class has (cells, pairs or levels).
_MIN_CLASS = 16


def class_size(n: int) -> int:
    """The size class holding ``n``: the least of ``2^k`` and ``3 * 2^(k-1)`` that is at least ``n`` (at least 16).

    Classes grow by a factor of at most 1.5, so padding wastes at most a third of a padded array, and a run
    whose models grow from a thousand cells to a million meets about 18 classes of each kind.

    Example:
        >>> [class_size(n) for n in (1, 17, 25, 33, 1000)]
        [16, 24, 32, 48, 1024]
    """
    n = max(int(n), _MIN_CLASS)
    k = (n - 1).bit_length()  # 2^(k-1) < n <= 2^k
    return 3 << (k - 2) if n <= 3 << (k - 2) else 1 << k


def width_class(n: int) -> int:
    """A level window's size class: the least power of 4 (at least 16) that is at least ``n``.

    Coarser than :func:`class_size`: a window is read once per level, so a wider one costs little, and fewer
    widths mean fewer programs.

    Example:
        >>> [width_class(n) for n in (1, 17, 65, 300)]
        [16, 64, 256, 1024]
    """
    w = _MIN_CLASS
    while w < n:
        w *= 4
    return w


def multiple_class(n: int, base: int) -> int:
    """``base`` times the least power of 2 that makes it at least ``n``: sizes that follow another size class.

    Example:
        >>> multiple_class(100, 48), multiple_class(20, 48)
        (192, 48)
    """
    m = base
    while m < n:
        m *= 2
    return m


class SizeClass(NamedTuple):
    """The shapes a size-class program is compiled for (the plan's only static part).

    Two numbers choose the class, the cell vector and the window; the others follow from them (or are a
    differentiable plan's own).

    Attributes:
        cells: length of the vector of clique cells (and of separator cells).
        width: cells of one step's window (a step's cells and separator cells are at most this; a larger clique is
            split over steps of its own).
        pairs: length of the vector of (parent cell, child separator cell) pairs, :data:`PAIRS_PER_CELL` times
            ``cells``.
        pair_width: pairs of one window of pairs (a level reads as many as its pairs fill), :func:`pair_width`
            of ``width``.
        levels: length of the per-step arrays, a power of 2 at least :data:`LEVELS_MIN` (the trip count is
            data).
        chunks: the most windows of pairs in one step, rounded up to a power of 2: a differentiable plan's scan's
            static trip count, or the windows each step of a plan shaped for a GPU reads unrolled; 0 for a plan
            that loops over each step's own count.
    """

    cells: int
    width: int
    pairs: int
    pair_width: int
    levels: int
    chunks: int = 0


@dataclass(frozen=True, eq=False)
class RoutedLayout:
    """Host-side structure of a routed plan: what the host needs to read its tables (never inside a program).

    Attributes:
        domain: the domain.
        tree: the junction tree.
        order: the cliques in storage order (deepest level first, the root last).
        offsets: for each junction-tree clique, where its table starts in the cell vector.
        used: cells the tables take (the rest of the vector is padding).
        platform: the platform whose :data:`WINDOW_COSTS` shaped the steps (``"cpu"``, ``"gpu"``).
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
            are shaped as for a GPU): how its steps trade window width for their count (:data:`WINDOW_COSTS`).
            A plan shaped for one platform runs on any, with the same answers.

    Returns:
        A :class:`RoutedPlan`.

    Raises:
        ModelTooLarge: (a ValueError) naming the cells, the bytes and the largest clique of the junction tree.

    Example:
        >>> plan = make_routed_plan(Domain({"a": 2, "b": 3, "c": 4}), [("a", "b"), ("b", "c")])
        >>> plan.size
        SizeClass(cells=48, width=16, pairs=192, pair_width=16, levels=32, chunks=0)
    """
    if not isinstance(differentiable, bool):
        raise TypeError(f"make_routed_plan: differentiable must be a bool, got {differentiable!r}")
    if not isinstance(platform, str):
        raise TypeError(f"make_routed_plan: platform must be a platform's name such as 'cpu' or 'gpu', got {platform!r}")
    model_cliques = maximal_cliques(domain, cliques)
    size_limit.check_tree(junction_tree(domain, model_cliques), None, max_bytes)
    platform = platform if platform in WINDOW_COSTS else "gpu"
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


class WindowCosts(NamedTuple):
    """How a platform's passes weigh their loop's steps against the cells their windows read (:func:`steps`).

    Attributes:
        step_cells: a step's own cost (its loop trip and kernels), in cells of window work: :func:`steps` weighs
            a narrower window, hence more steps, against it.
        pair_window_ratio: pairs in a window of pairs per cell of the cell window (:func:`pair_width`).
        pair_window_max: the most routing pairs one window of pairs holds.
        pairs_looped: a step loops over its own count of pair windows, one trip each (none for a step of
            leaves); otherwise every step reads its class's number of windows (:attr:`SizeClass.chunks`),
            unrolled, masked where they hold none of its pairs.
    """

    step_cells: int
    pair_window_ratio: int
    pair_window_max: int
    pairs_looped: bool


#: Each platform's :class:`WindowCosts`, measured with ``python -m bench.size_class --iteration`` on the engine
#: benchmark's problems: on a CPU a step costs about a thousand cells beyond the cells it reads; on an H200 each
#: trip of a loop costs 35 to 50 microseconds whatever its width (``bench/results/engine/size_class_iteration_*``),
#: some thirty thousand cells of window work, and a step's own loop over its pair windows as much again. A GPU's
#: window of pairs holds four per window cell (as the pair vector does per cell): a step rarely needs two, and
#: the windows a step reads (a dimension of its class there) seldom differ from model to model.
WINDOW_COSTS = {"cpu": WindowCosts(1024, 1, 4096, True), "gpu": WindowCosts(32768, 4, 1 << 24, False)}

#: A CPU step's own cost in cells (:data:`WINDOW_COSTS`).
STEP_CELLS = WINDOW_COSTS["cpu"].step_cells

#: The vector of routing pairs is at least this many times the vector of cells (a tree whose cliques have more
#: children takes a longer cell vector): read in windows only, its length costs memory, not time, and following
#: the cells it adds no dimension to a size class.
PAIRS_PER_CELL = 4


#: The per-step arrays hold at least this many steps (their length, a power of 2, is part of a size class; the
#: number of steps is data): few models of a mechanism's run take more.
LEVELS_MIN = 32

#: A window of routing pairs on a CPU holds the cell window's width of pairs, at most this many: a level's pairs
#: fill windows rounded up, so narrower windows waste less where the cells' window is wide (one large clique).
PAIR_WINDOW_MAX = WINDOW_COSTS["cpu"].pair_window_max


def pair_width(width: int, platform: str = "cpu") -> int:
    """The pairs a window of pairs holds, for a cell window of ``width`` on ``platform``: a function of the
    window, no dimension of its own in a size class.

    Example:
        >>> pair_width(1024), pair_width(16384), pair_width(16384, "gpu")
        (1024, 4096, 65536)
    """
    costs = WINDOW_COSTS.get(platform, WINDOW_COSTS["gpu"])
    return min(width * costs.pair_window_ratio, costs.pair_window_max)


def steps(tree: JunctionTree, platform: str = "cpu") -> tuple[list[tuple[list[int], int, int]], int, list[int]]:
    """The passes' steps: each junction-tree level's cliques packed, whole and in order, into windows of ``width``
    cells, deepest level first, the root's level last; a clique larger than the window takes windows of its own,
    one per ``width`` of its cells (its messages merged across them). Also the windows of routing pairs
    (:func:`pair_width` each) each step fills.

    A step depends only on steps before it (its cliques' children are at deeper levels), so the upward pass runs
    the steps in order and the downward pass in reverse. The width is a power of 4 at least the largest separator,
    the one whose windows read the fewest cells and pairs, each loop trip costing ``platform``'s
    :attr:`WindowCosts.step_cells` (:data:`WINDOW_COSTS`): on a CPU a level of many small cliques takes several
    narrow steps instead of one window as wide as itself, and one large clique does not make every level's window
    as wide as itself; on a GPU, where a trip costs more than tens of thousands of cells, the steps are few.

    Returns:
        ``(steps, width, chunks)``: each step as ``(cliques, part, parts)`` (a whole step ``(cliques, 0, 1)``; part
        ``k`` of a clique split into ``parts`` windows ``([clique], k, parts)``), the window size, and each step's
        windows of pairs.
    """
    domain = tree.domain
    costs = WINDOW_COSTS.get(platform, WINDOW_COSTS["gpu"])
    size = [domain.size(c) for c in tree.cliques]
    kids = [0] * len(size)
    for p in tree.parent:
        if p >= 0:
            kids[p] += 1
    seps = [domain.size(s) for c, s in enumerate(tree.separators) if tree.parent[c] >= 0]
    sched = [sorted(int(c) for c in lev) for lev in levels(tree)]  # deepest first; the root's level last
    best = None
    width = width_class(max(seps, default=1))
    while True:
        packed, chunks, pw = [], [], pair_width(width, platform)
        for lev in sched:
            step, cells, pairs = [], 0, 0
            for c in lev:
                if step and (cells + size[c] > width or size[c] > width):
                    packed.append((step, 0, 1))
                    chunks.append(-(-pairs // pw))
                    step, cells, pairs = [], 0, 0
                if size[c] > width:  # windows of its own, each of ``width`` of its cells
                    parts = -(-size[c] // width)
                    for k in range(parts):
                        packed.append(([c], k, parts))
                        chunks.append(-(-min(width, size[c] - k * width) * kids[c] // pw))
                    continue
                step.append(c)
                cells += size[c]
                pairs += size[c] * kids[c]
            if step:
                packed.append((step, 0, 1))
                chunks.append(-(-pairs // pw))
        if costs.pairs_looped:  # a trip per window of pairs
            cost = len(packed) * (width + costs.step_cells) + sum(chunks) * (pw + costs.step_cells)
        else:  # every step reads the most windows any step takes, in the step's own trip
            cost = len(packed) * (width + costs.step_cells) + pair_windows(chunks, platform) * pw
        if best is None or cost < best[0]:
            best = (cost, (packed, width, chunks))
        if width >= max(size) and len(packed) == len(sched):  # one whole step per level: wider saves nothing
            return best[1]
        width *= 4


def _pow2(n: int) -> int:
    """The least power of 2 at least ``n``; 0 for 0."""
    return 1 << (n - 1).bit_length() if n else 0


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
    # Two dimensions, each on a coarse grid, so that many structures share a class: the cell vector on the 1.5 grid,
    # the window on powers of 4; the pairs follow them. A window read at the last step's offset stays inside its
    # vector.
    n_cells = class_size(max(at + width, -(-(pair_total + pw) // PAIRS_PER_CELL)))
    n_pairs = PAIRS_PER_CELL * n_cells
    n_levels = max(LEVELS_MIN, 1 << (len(sched) - 1).bit_length())  # the steps: data, on a coarse grid
    sc = SizeClass(n_cells, width, n_pairs, pw, n_levels, _pow2(max(chunks)))

    level = np.full(n_cells, -1, np.int32)  # each cell's step (-1: padding)
    up = np.full(n_cells, width, np.int32)  # separator cell within its step's window (width: none, the root)
    sep_first = np.full(n_cells, n_levels, np.int32)  # per separator cell, the first and last steps of its clique
    sep_last = np.full(n_cells, -1, np.int32)
    sep_slot = np.full(n_cells, width, np.int32)  # the sending clique within its step, per separator cell
    clique_of = np.full(n_cells, n_cells - 1, np.int32)  # each cell's clique (padding: the last segment)
    pair_level = np.full(n_pairs, -1, np.int32)
    pair_dst = np.full(n_pairs, width, np.int32)  # the receiving cell within its step's window
    pair_src = np.zeros(n_pairs, np.int32)  # the child's separator cell (absolute)
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


def windows_work(domain: Domain, cliques, platform: str = "cpu") -> int:
    """Cells a size-class oracle pass reads for a model over ``cliques`` on ``platform`` (its steps times the
    window plus its windows of pairs, :func:`steps`): against the model's own cells, what the routing costs per pass.

    Example:
        >>> windows_work(Domain({"a": 2, "b": 3}), [("a", "b")])  # one step, no pairs (one clique)
        16
    """
    sched, width, chunks = steps(junction_tree(domain, maximal_cliques(domain, cliques)), platform)
    return len(sched) * width + pair_windows(chunks, platform) * pair_width(width, platform)


def pair_windows(chunks: list[int], platform: str = "cpu") -> int:
    """Windows of pairs a pass reads, given each step's (:func:`steps`): on a CPU each step's own, on a GPU
    every step its class's number (:attr:`SizeClass.chunks`, read unrolled).

    Example:
        >>> pair_windows([0, 1, 3]), pair_windows([0, 1, 3], "gpu")
        (4, 12)
    """
    if WINDOW_COSTS.get(platform, WINDOW_COSTS["gpu"]).pairs_looped:
        return sum(chunks)
    return len(chunks) * _pow2(max(chunks, default=0))


__all__ = ["RoutedPlan", "RoutedLayout", "SizeClass", "WINDOW_COSTS", "WindowCosts", "class_size", "make_routed_plan",
           "pair_width", "pair_windows", "ravel_projection", "steps", "windows_work"]
