"""How a junction tree is cut into the size-class passes' steps, and the size classes those steps fill.

The size-class plan (:mod:`pgmjax.graph.routed_plan`) lays every clique table end to end in one vector; its
passes read that vector in windows of fixed width, one window per loop step. Here: which cliques each step reads
(:func:`steps`: each junction-tree level's cliques packed into windows, a clique wider than the window split over
steps of its own), how wide the window is (the platform's trade of width against steps, :data:`WINDOW_COSTS`),
how many windows of routing pairs a step reads (:func:`pair_width`, :func:`pair_windows`), and the coarse grids
the padded sizes fall on (:func:`class_size`, :func:`width_class`), which together make a :class:`SizeClass`: the
only shapes a compiled size-class program depends on.

References: Koller & Friedman (2009), Ch. 10 (junction-tree message passing, the levels of a tree).
"""

from __future__ import annotations

from typing import NamedTuple

from .junction import JunctionTree, junction_tree, levels, maximal_cliques
from ..data.domain import Domain

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
        shallow_width: the narrowest window of a tree of at most :data:`LEVELS_MIN` levels (:func:`steps`): the
            largest power of 4 at most ``step_cells``, so a step reads at most its own cost again, and the small,
            shallow models a mechanism's run grows through share one window instead of four.
        smallest_cells: the shortest cell vector of a size class (:func:`~pgmjax.graph.routed_plan.make_routed_plan`):
            four shallow windows, so models of up to that many cells share one class; the padding costs a few
            elementwise passes over a vector that short, a new class a compile (seconds).
        cells_per_window: a tree of at most :data:`LEVELS_MIN` levels takes the window its cell vector's class sets
            (:func:`window_of_class`: the largest power of 4 at most the class over this, wider only where a
            separator needs it), not the cheapest of each structure: near ties between two widths flipped a growing
            model's window from round to round, each width a program of its own; 0: the cheapest (a GPU's, whose
            loop trips cost far more than its cells: not yet timed there).
    """

    step_cells: int
    pair_window_ratio: int
    pair_window_max: int
    pairs_looped: bool
    shallow_width: int
    smallest_cells: int
    cells_per_window: int = 0


#: Each platform's :class:`WindowCosts`, measured with ``python -m bench.size_class --iteration`` on the engine
#: benchmark's problems (``bench/results/engine/size_class_iteration_*``, ``bench/NOTES.md``): on a CPU a step
#: costs about a thousand cells beyond the cells it reads; on a GPU each trip of a loop costs about thirty thousand
#: cells of window work whatever its width, and a step's own loop over its pair windows as much again. A GPU's
#: window of pairs holds four per window cell (as the pair vector does per cell): a step rarely needs two, and
#: the windows a step reads (a dimension of its class there) seldom differ from model to model.
WINDOW_COSTS = {"cpu": WindowCosts(1024, 1, 4096, True, 1024, 4096, 4),
                "gpu": WindowCosts(32768, 4, 1 << 24, False, 16384, 65536, 0)}

def window_platform(platform: str) -> str:
    """The platform whose :data:`WINDOW_COSTS` shape a plan for ``platform`` (``jax.Device.platform``): itself
    where it has its own, a GPU's for any other accelerator.

    Example:
        >>> window_platform("cpu"), window_platform("tpu")
        ('cpu', 'gpu')
    """
    return platform if platform in WINDOW_COSTS else "gpu"


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
    costs = WINDOW_COSTS[window_platform(platform)]
    return min(width * costs.pair_window_ratio, costs.pair_window_max)


def steps(tree: JunctionTree, platform: str = "cpu") -> tuple[list[tuple[list[int], int, int]], int, list[int]]:
    """The passes' steps: each junction-tree level's cliques packed, whole and in order, into windows of ``width``
    cells, deepest level first, the root's level last; a clique larger than the window takes windows of its own,
    one per ``width`` of its cells (its messages merged across them). Also the windows of routing pairs
    (:func:`pair_width` each) each step fills.

    A step depends only on steps before it (its cliques' children are at deeper levels), so the upward pass runs
    the steps in order and the downward pass in reverse. The width is a power of 4 at least the largest separator,
    the one whose windows read the fewest cells and pairs, each loop trip costing ``platform``'s
    :attr:`WindowCosts.step_cells` (:data:`WINDOW_COSTS`), and the cell vector's class (the tables and one window
    past them, :func:`class_size`) counted once more, as every iteration's elementwise work reads it: on a CPU a
    level of many small cliques takes several narrow steps instead of one window as wide as itself, and one large
    clique does not make every level's window as wide as itself; on a GPU, where a trip costs more than tens of
    thousands of cells, the steps are few. A tree of at most :data:`LEVELS_MIN` levels takes a window of at least
    :attr:`WindowCosts.shallow_width` (its passes cost little at any width, and one width for all of them is one
    program less to compile per width it spared), on a CPU its class's (:func:`window_of_class`).

    Returns:
        ``(steps, width, chunks)``: each step as ``(cliques, part, parts)`` (a whole step ``(cliques, 0, 1)``; part
        ``k`` of a clique split into ``parts`` windows ``([clique], k, parts)``), the window size, and each step's
        windows of pairs.
    """
    domain = tree.domain
    costs = WINDOW_COSTS[window_platform(platform)]
    step_cells = costs.step_cells
    size = [domain.size(c) for c in tree.cliques]
    kids = [0] * len(size)
    for p in tree.parent:
        if p >= 0:
            kids[p] += 1
    seps = [domain.size(s) for c, s in enumerate(tree.separators) if tree.parent[c] >= 0]
    total = sum(size)
    sched = [sorted(int(c) for c in lev) for lev in levels(tree)]  # deepest first; the root's level last

    def vector_class(width):  # the plan's cell vector: the tables and one window past them
        return class_size(max(total + width, costs.smallest_cells))

    def pack(width):
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
        return packed, width, chunks

    width = width_class(max(seps, default=1))
    if len(sched) <= LEVELS_MIN:
        width = max(width, costs.shallow_width)
        if costs.cells_per_window:  # the class's window: see WindowCosts.cells_per_window
            while (wider := max(width, window_of_class(vector_class(width), costs))) > width:
                width = wider
            return pack(width)
    best = None
    while True:
        packed, _, chunks = pack(width)
        trips, cells = pass_work(width, chunks, platform)
        # The vector's class is a compiled program's size, and every iteration's elementwise work reads it whole: a
        # wider window that pushes it into a larger class costs that class's cells.
        cost = trips * step_cells + cells + vector_class(width)
        if best is None or cost < best[0]:
            best = (cost, (packed, width, chunks))
        if width >= max(size) and len(packed) == len(sched):  # one whole step per level: wider saves nothing
            return best[1]
        width *= 4


def window_of_class(cells: int, costs: WindowCosts) -> int:
    """The window of a shallow tree's size class of ``cells`` (:attr:`WindowCosts.cells_per_window`): the largest
    power of 4 at most ``cells / cells_per_window``, at least the platform's ``shallow_width``.

    Example:
        >>> [window_of_class(n, WINDOW_COSTS["cpu"]) for n in (4096, 12288, 16384, 49152, 65536)]
        [1024, 1024, 4096, 4096, 16384]
    """
    w = costs.shallow_width
    while w * 4 * costs.cells_per_window <= cells:
        w *= 4
    return w


def pow2(n: int) -> int:
    """The least power of 2 at least ``n``; 0 for 0 (a count of windows rounded up to a static bound).

    Example:
        >>> [pow2(n) for n in (0, 1, 3, 4, 5)]
        [0, 1, 4, 4, 8]
    """
    return 1 << (n - 1).bit_length() if n else 0


def windows_work(domain: Domain, cliques, platform: str = "cpu") -> int:
    """Cells a size-class oracle pass reads for a model over ``cliques`` on ``platform`` (its steps times the
    window plus its windows of pairs, :func:`steps`): against the model's own cells, what the routing costs per pass.

    Example:
        >>> windows_work(Domain({"a": 2, "b": 3}), [("a", "b")])  # one step of the shallow window, no pairs
        1024
    """
    _, width, chunks = steps(junction_tree(domain, maximal_cliques(domain, cliques)), platform)
    return pass_work(width, chunks, platform)[1]


def pass_work(width: int, chunks: list[int], platform: str = "cpu") -> tuple[int, int]:
    """A pass's loop trips and the window cells it reads, for steps of ``width`` whose windows of pairs are
    ``chunks`` (one count per step, :func:`steps`): a trip per step, and on a platform whose steps loop over
    their pair windows (a CPU) one per pair window too.

    Example:
        >>> pass_work(64, [0, 1, 3]), pass_work(64, [0, 1, 3], "gpu")
        ((7, 448), (3, 3264))
    """
    looped = WINDOW_COSTS[window_platform(platform)].pairs_looped
    trips = len(chunks) + (sum(chunks) if looped else 0)
    return trips, len(chunks) * width + pair_windows(chunks, platform) * pair_width(width, platform)


def pair_windows(chunks: list[int], platform: str = "cpu") -> int:
    """Windows of pairs a pass reads, given each step's (:func:`steps`): on a CPU each step's own, on a GPU
    every step its class's number (:attr:`SizeClass.chunks`, read unrolled).

    Example:
        >>> pair_windows([0, 1, 3]), pair_windows([0, 1, 3], "gpu")
        (4, 12)
    """
    if WINDOW_COSTS[window_platform(platform)].pairs_looped:
        return sum(chunks)
    return len(chunks) * pow2(max(chunks, default=0))


__all__ = ["LEVELS_MIN", "PAIRS_PER_CELL", "PAIR_WINDOW_MAX", "STEP_CELLS", "SizeClass", "WINDOW_COSTS", "WindowCosts",
           "class_size", "multiple_class", "pair_width", "pair_windows", "pass_work", "pow2", "steps", "width_class",
           "window_of_class", "window_platform", "windows_work"]
