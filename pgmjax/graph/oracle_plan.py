"""The marginal oracle's plan: the junction tree's cliques laid out as a few stacked dense blocks.

Built once per structure on the host (:func:`make_plan`, cached by value) and passed to the compiled
passes of :mod:`pgmjax.graph.oracle` as a pytree (routing arrays as leaves, structure as aux data):

* The junction tree is rooted at a centre and processed level by level, deepest first.
* Every non-root clique has a *class*: its table shape, where its separator sits in it, and the shape of
  its parent and where the separator sits there. Cliques of one class do identical work, so each class
  of a level is one stacked, dense array ``(slots, *clique_shape)``.
* Consecutive levels with the same set of classes form a *run*, one ``lax.scan`` in the passes. The
  potentials of a run's class are stored stacked over levels, ``(levels, slots, *clique_shape)``; slots a
  level does not use are padding, held at -inf.
* Routes say which slots of a level send to which slot of the next: slot k to slot k where possible
  (no gather), else a gather of whole blocks along the slot axis.

References: Koller & Friedman (2009), Ch. 10; McKenna, Sheldon & Miklau, "Graphical-model based estimation
and inference for differential privacy", ICML 2019, Section 3.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..checks import check_count
from ..compiler import to_device
from ..data.domain import Clique, Domain
from . import size_limit
from .junction import JunctionTree, junction_tree, levels, maximal_cliques


@dataclass(frozen=True)
class CliqueClass:
    """Cliques that do identical work in a level step."""

    shape: tuple[int, ...]
    sep_axes: tuple[int, ...]  # separator axes in the clique (ascending); () for the root
    parent_shape: tuple[int, ...] | None  # None for the root
    parent_sep_axes: tuple[int, ...]  # where the separator sits in the parent

    @property
    def elim_axes(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.shape)) if i not in self.sep_axes)

    @property
    def layout(self) -> tuple[int, ...]:
        """The axis order its tables are stored and computed in: the separator first, then the eliminated axes.

        Messages are then reductions over the trailing (minor) axes, which XLA:CPU's own emitters (pgmjax
        compiles without the YNNPACK fusions, see :mod:`pgmjax.compiler`) do about twice as fast as
        reductions over strided leading axes; and because the tables are *stored* this way, the compiled
        passes never transpose a table (a transpose of a 10^6-cell table costs about as much as its
        log-sum-exp).
        """
        return self.sep_axes + self.elim_axes

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The table's shape in :attr:`layout` order."""
        return tuple(self.shape[a] for a in self.layout)

    def landing(self, parent: "CliqueClass") -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Where a message of this class lands in its parent's stored layout.

        Returns ``(order, shape)``: the separator axes (the message's own order) permuted into the order they
        have in the parent's layout (landed axis ``j`` is the message's axis ``order[j]``), and the message's
        broadcast shape there.
        """
        pperm = parent.layout
        pos = [pperm.index(a) for a in self.parent_sep_axes]
        order = tuple(int(i) for i in np.argsort(pos))
        shape = tuple(parent.shape[pperm[j]] if j in pos else 1 for j in range(len(pperm)))
        return order, shape


@dataclass(frozen=True)
class Run:
    """Consecutive levels sharing one set of classes."""

    first_level: int
    num_levels: int
    classes: tuple[CliqueClass, ...]
    slots: tuple[int, ...]  # padded number of cliques of each class per level


class _Static(tuple):
    """A tuple with a cached hash: jit hashes static aux data on every call."""

    def __new__(cls, items):
        self = super().__new__(cls, items)
        self._hash = tuple.__hash__(self)
        return self

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        # Rebuilt from its items, so the hash is this process's (see Domain.__reduce__).
        return (_Static, (tuple(self),))

    def __eq__(self, other):
        return self is other or (isinstance(other, tuple) and hash(other) == self._hash and tuple.__eq__(self, other))

    def __ne__(self, other):
        return not self.__eq__(other)


class BlockPlan:
    """What every oracle's plan shares: routing arrays (pytree leaves), static structure (aux data, hashed once),
    and potentials stored as blocks ``{key: (levels, slots, *table)}`` listed by ``units``.

    The exact oracle's :class:`OraclePlan` and the approximate oracle's
    :class:`~pgmjax.graph.approximate_oracle.ApproximatePlan` subclass it (each registered as a pytree); the
    losses, estimators and models read a plan through this layout. Equal structures give equal aux data, so a
    compiled function that takes a plan is reused across calls and models.
    """

    def __init__(self, arrays: dict, static):
        self.arrays = arrays
        self.static = static if isinstance(static, _Static) else _Static(static)

    def tree_flatten(self):
        keys = tuple(sorted(self.arrays))
        return tuple(self.arrays[k] for k in keys), (keys, self.static)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        keys, static = aux
        return cls(dict(zip(keys, leaves)), static)

    @property
    def shards(self) -> int:
        """The devices the plan's blocks are laid out to be split over (1: not split)."""
        return 1

    def zeros(self, dtype=jnp.float32) -> dict:
        """All-zero potentials (the uniform distribution)."""
        # Built on the host and transferred: jnp.zeros would compile a small program per block shape.
        return {k: to_device(np.zeros(s, dtype)) for k, s in self.units}

    def tables(self, blocks: dict) -> dict[Clique, jax.Array]:
        """``{clique: table}`` (axes in the order of each clique) from blocks in the plan's layout."""
        return {c: self.table(blocks, j) for j, c in enumerate(self.cliques)}


@jax.tree_util.register_pytree_node_class
class OraclePlan(BlockPlan):
    """Routing arrays (pytree leaves) and static structure (aux data) of one junction tree.

    Create with :func:`make_plan`.
    """

    # static = (domain, tree, runs, locations, units, pairs, padded sizes, blocks with padding slots, shards, paths)
    @property
    def domain(self) -> Domain:
        return self.static[0]

    @property
    def tree(self) -> JunctionTree:
        return self.static[1]

    @property
    def runs(self) -> tuple[Run, ...]:
        return self.static[2]

    @property
    def locations(self) -> tuple[tuple[str, int, int], ...]:
        """For each junction-tree clique: (unit key, level within the run, slot)."""
        return self.static[3]

    @property
    def units(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(key, array shape) of every potential block."""
        return self.static[4]

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return self.tree.cliques

    @property
    def cells(self) -> int:
        """Cells in all potential blocks (the junction tree's tables with their padding): one model's size."""
        return sum(int(np.prod(shape)) for _, shape in self.units)

    @property
    def largest_block(self) -> int:
        """Cells in the largest potential block (one clique class's stacked tables, padding included)."""
        return max(int(np.prod(shape)) for _, shape in self.units)

    def clique_class(self, j: int) -> CliqueClass:
        """The class of junction-tree clique ``j``."""
        run, klass = self.locations[j][0][1:].split("x")  # the unit key "r<run>x<class>"
        return self.runs[int(run)].classes[int(klass)]

    def layout(self, j: int) -> Clique:
        """Junction-tree clique ``j``'s attributes in the order its table's axes are stored in the blocks
        (:attr:`CliqueClass.layout`: the upward separator first)."""
        clique = self.cliques[j]
        if self.padded[j] is not None:
            return clique
        return tuple(clique[a] for a in self.clique_class(j).layout)

    @property
    def slot_padded(self) -> frozenset[str]:
        """The blocks with padding slots (a level holds fewer cliques of the class than the block has slots)."""
        return self.static[7]

    @property
    def shards(self) -> int:
        """The devices the plan's blocks are laid out to be split over (1: not split; :func:`make_plan`)."""
        return self.static[8]

    @property
    def paths(self) -> bool:
        """Whether the oracle passes the long runs that are bundles of paths by an associative scan
        (:mod:`pgmjax.graph.path_scan`; :func:`make_plan`'s ``paths``) rather than level by level."""
        return self.static[9]

    @property
    def padded(self) -> tuple[int | None, ...]:
        """For each junction-tree clique, its true size if it is a free singleton (an attribute in no model
        clique, its table padded to a bucket size), else None."""
        return self.static[6]

    def _index(self, j: int) -> tuple[str, tuple]:
        """Block key and index of junction-tree clique ``j``'s table (its true cells only, if padded)."""
        key, l, k = self.locations[j]
        n = self.padded[j]
        return key, ((l, k) if n is None else (l, k, slice(0, n)))

    def table(self, blocks: dict, j: int, batch_dims: int = 0) -> jax.Array:
        """Junction-tree clique ``j``'s table (axes in the order of ``cliques[j]``) from blocks in the oracle layout.

        Args:
            blocks: potentials or marginals in the oracle layout (:meth:`zeros`'s structure), each block with
                ``batch_dims`` leading batch axes (a batch of models' have one).
            j: the junction-tree clique.
            batch_dims: leading axes kept in front of the table's.
        """
        key, index = self._index(j)
        t = blocks[key][(slice(None),) * batch_dims + index]
        stored, clique = self.layout(j), self.cliques[j]
        if stored == clique:
            return t
        return t.transpose([*range(batch_dims), *(batch_dims + stored.index(a) for a in clique)])

    def with_table(self, blocks: dict, j: int, table, add: bool = False) -> dict:
        """``blocks`` (JAX arrays, oracle layout) with clique ``j``'s table replaced by ``table`` (or, with
        ``add``, increased by it). ``table``'s axes follow ``cliques[j]``; size-1 axes broadcast."""
        key, index = self._index(j)
        stored, clique = self.layout(j), self.cliques[j]
        t = jnp.asarray(table)
        if stored != clique:
            t = jnp.transpose(t, [clique.index(a) for a in stored])
        target = blocks[key]
        t = jnp.broadcast_to(t, target[index].shape)
        out = dict(blocks)
        out[key] = target.at[index].add(t) if add else target.at[index].set(t)
        return out

    def from_tables(self, tables: dict, dtype=jnp.float32) -> dict:
        """Blocks in the oracle layout from ``{clique: table}``.

        Every table's clique must lie inside some junction-tree clique; a
        table is broadcast into the smallest such clique and summed there.
        """
        blocks = {k: np.zeros(s, np.float64) for k, s in self.units}
        for clique, table in tables.items():
            j = self.tree.containing(clique)
            if j is None:
                raise ValueError(f"clique {clique} lies in no clique of this model: {self.cliques}")
            key, index = self._index(j)
            blocks[key][index] += in_host_axes(self.domain, clique, table, self.layout(j))
        return {k: to_device(v, dtype) for k, v in blocks.items()}


def in_host_axes(domain: Domain, clique, table, host) -> np.ndarray:
    """``table`` (over ``clique``, axes in its order) as a float64 array in the axis order of ``host`` (a clique
    holding ``clique``), with size-1 axes for the host's other attributes: ready to broadcast into its table.

    Example:
        >>> in_host_axes(Domain({"a": 2, "b": 3, "c": 4}), ("b", "a"), np.ones((3, 2)), ("a", "b", "c")).shape
        (2, 3, 1)
    """
    canon = [a for a in host if a in clique]
    t = np.transpose(np.asarray(table, np.float64), [tuple(clique).index(a) for a in canon])
    return t.reshape([domain[a] if a in clique else 1 for a in host])


def make_plan(domain: Domain, cliques, max_bytes: float | None = None, *, shards: int = 1, paths: bool = False) -> OraclePlan:
    """Build (cached) the oracle plan for a model over ``cliques``, once its size is checked.

    Every fit builds its plan here before it allocates a table, so this is where a model too large for the
    machine is refused (:func:`pgmjax.graph.size_limit.check_tree`: the junction tree's cells, in Python
    integers, against ``max_bytes`` or the limit in force).

    Args:
        domain: the domain (attributes in no clique are modelled as uniform).
        cliques: the cliques the model must hold.
        max_bytes: the size limit in bytes (default :func:`pgmjax.graph.size_limit.max_model_bytes`).
        shards: the devices a model's tables are to be split over along their slot axis (the cliques of a
            block; :mod:`pgmjax.estimation.sharding`). With ``shards > 1`` every level is a run of its own (a block
            then holds one level, so its slot axis is the only axis to split) and each block of more than
            one slot has its slots padded (held at -inf) to a multiple of ``shards``.
        paths: pass the runs that are long bundles of parallel paths by an associative scan
            (:mod:`pgmjax.graph.path_scan`): kernel launches per oracle call logarithmic in the tree's depth, for
            more arithmetic (a GPU's choice for deep trees; the same layout, another compiled program).

    Returns:
        An :class:`OraclePlan`.

    Raises:
        ModelTooLarge: (a ValueError) naming the cells, the bytes and the largest clique of the junction tree.
    """
    model_cliques = maximal_cliques(domain, cliques)
    size_limit.check_tree(junction_tree(domain, model_cliques), None, max_bytes)
    plan = _make_plan_cached(domain, model_cliques, check_count(shards, "shards", "make_plan"))
    if not isinstance(paths, bool):
        raise TypeError(f"make_plan: paths must be a bool, got {paths!r}")
    return OraclePlan(plan.arrays, plan.static[:9] + (True,)) if paths else plan


def sharded_slots(count: int, shards: int) -> int:
    """A block's slots for ``count`` cliques split over ``shards`` devices: ``count`` rounded up to a multiple of
    ``shards``, except a block of one clique (the root's), which is not split.

    Example:
        >>> sharded_slots(5, 4), sharded_slots(1, 4), sharded_slots(8, 4)
        (8, 1, 8)
    """
    return count if count <= 1 or shards <= 1 else -(-count // shards) * shards


@functools.lru_cache(maxsize=64)
def _make_plan_cached(domain: Domain, model_cliques: tuple[Clique, ...], shards: int = 1) -> OraclePlan:
    tree = junction_tree(domain, model_cliques)
    tcl = tree.cliques
    shape = [domain.shape_of(c) for c in tcl]
    sched = [sorted(int(c) for c in lev) for lev in levels(tree)]  # deepest first; root last
    # Attributes in no model clique are leaves of the star with an empty separator and never measured.
    # Each distinct size would be a class of its own (a wide table has dozens: a long program to compile),
    # so their tables are padded to a few sizes (singleton_sizes), the padding cells held at -inf by a mask.
    covered = {a for c in model_cliques for a in c}
    has_child = {p for p in tree.parent if p >= 0}
    free = [
        c for c in range(len(tcl))
        if len(tcl[c]) == 1 and tcl[c][0] not in covered and tree.parent[c] >= 0 and c not in has_child
    ]
    to_size = singleton_sizes([shape[c][0] for c in free])
    padded = {c: to_size[shape[c][0]] for c in free}
    for c, n in padded.items():
        shape[c] = (n,)

    def klass(c: int) -> CliqueClass:
        p = tree.parent[c]
        if p < 0:
            return CliqueClass(shape[c], (), None, ())
        sep = tree.separators[c]
        return CliqueClass(
            shape[c],
            tuple(tcl[c].index(a) for a in sep),
            shape[p],
            tuple(tcl[p].index(a) for a in sep),
        )

    classes = {c: klass(c) for lev in sched for c in lev}
    level_sets = [tuple(sorted(set(classes[c] for c in lev), key=repr)) for lev in sched]

    runs: list[Run] = []
    for l, cls in enumerate(level_sets):
        counts = [sharded_slots(sum(classes[c] == x for c in sched[l]), shards) for x in cls]
        if runs and runs[-1].classes == cls and shards <= 1:
            r = runs[-1]
            runs[-1] = Run(r.first_level, r.num_levels + 1, cls, tuple(max(a, b) for a, b in zip(r.slots, counts)))
        else:
            runs.append(Run(l, 1, cls, tuple(counts)))

    # Where each clique lives: unit key "rRRRxXX", level within the run, slot.
    locations: dict[int, tuple[str, int, int]] = {}
    level_slot: dict[int, dict[int, tuple[int, int]]] = {}  # level -> clique -> (class index, slot)
    units, masks, cells = [], {}, {}
    children: dict[int, list[int]] = {}
    for c, p in enumerate(tree.parent):
        children.setdefault(int(p), []).append(c)
    for r, run in enumerate(runs):
        for x, (cl, n) in enumerate(zip(run.classes, run.slots)):
            key = f"r{r:03d}x{x:02d}"
            units.append((key, (run.num_levels, n, *cl.stored_shape)))
            mask = np.zeros((run.num_levels, n), np.float64)
            for li in range(run.num_levels):
                l = run.first_level + li
                # A clique whose child of its own class sits one level down in this block takes the slot after that
                # child's: a path then keeps its slot up the run (its route is direct, no gather), and a run of
                # paths is what the path scan passes (pgmjax.graph.path_scan).
                below = {c: min(locations[k][2] for k in kids) for c in sched[l]
                         if (kids := [k for k in children.get(c, ()) if locations.get(k, ("", -1))[:2] == (key, li - 1)])}
                members = sorted((c for c in sched[l] if classes[c] == cl),
                                 key=lambda c: (0, below[c], c) if c in below else (1, 0, c))
                mask[li, len(members) :] = -np.inf
                for k, c in enumerate(members):
                    locations[c] = (key, li, k)
                    level_slot.setdefault(l, {})[c] = (x, k)
                    if c in padded:
                        cells.setdefault(key, np.zeros((run.num_levels, n, *cl.stored_shape), np.float64))
                        cells[key][li, k, domain[tcl[c][0]] :] = -np.inf
            masks[key] = mask

    # Routes: for each level and each (sending class, receiving class) pair, the sending
    # slots of the children of every receiving slot (padded with the zero block, index n_x).
    run_of_level = [r for r, run in enumerate(runs) for _ in range(run.num_levels)]

    def routes(l: int):
        """{(x, y): (n_y, children) int array} for messages from level l to level l + 1."""
        send_run, recv_run = runs[run_of_level[l]], runs[run_of_level[l + 1]]
        kids: dict[tuple[int, int], dict[int, list[int]]] = {}
        for c in sched[l]:
            x, k = level_slot[l][c]
            y, kp = level_slot[l + 1][tree.parent[c]]
            kids.setdefault((x, y), {}).setdefault(kp, []).append(k)
        out = {}
        for (x, y), by_parent in kids.items():
            width = max(len(v) for v in by_parent.values())
            arr = np.full((recv_run.slots[y], width), send_run.slots[x], np.int64)
            for kp, ks in by_parent.items():
                arr[kp, : len(ks)] = ks
            out[(x, y)] = arr
        return out

    def is_direct(route: np.ndarray, sender_mask: np.ndarray) -> bool:
        """Slot k's only child is slot k (or a padding slot feeds a padding slot): no gather needed."""
        n_y, width = route.shape
        if width != 1 or sender_mask.shape[0] != n_y:
            return False
        k = np.arange(n_y)
        padded = np.isinf(sender_mask)
        return bool(np.all((route[:, 0] == k) | ((route[:, 0] == sender_mask.shape[0]) & padded)))

    def inverse(route: np.ndarray, n_x: int) -> np.ndarray:
        """For each sending slot, the receiving slot it feeds (n_y, a zero block, if none): the transposed route."""
        n_y = route.shape[0]
        inv = np.full(n_x, n_y, np.int64)
        for p in range(n_y):
            for k in route[p]:
                if k < n_x:
                    inv[k] = p
        return inv

    # Slot masks only where a level leaves slots empty (the oracle needs none elsewhere: OraclePlan.slot_padded).
    arrays: dict[str, np.ndarray] = {f"{k}_mask": v for k, v in masks.items() if np.isinf(v).any()}
    arrays.update({f"{k}_cells": v for k, v in cells.items()})
    pairs_static = []
    for r, run in enumerate(runs):
        last = run.first_level + run.num_levels - 1
        inner = [routes(l) for l in range(run.first_level, last)]
        inner_pairs = tuple(sorted({p for rt in inner for p in rt}))
        direct = set()
        for x, y in inner_pairs:
            width = max(rt[(x, y)].shape[1] for rt in inner if (x, y) in rt)
            stack = np.full((len(inner), run.slots[y], width), run.slots[x], np.int64)
            for i, rt in enumerate(inner):
                if (x, y) in rt:
                    stack[i, :, : rt[(x, y)].shape[1]] = rt[(x, y)]
            mask = masks[f"r{r:03d}x{x:02d}"]
            if all(is_direct(stack[i], mask[i]) for i in range(len(inner))):
                direct.add((x, y))
            else:
                arrays[f"r{r:03d}_inner_{x:02d}_{y:02d}"] = stack
                arrays[f"r{r:03d}_innerinv_{x:02d}_{y:02d}"] = np.stack([inverse(s, run.slots[x]) for s in stack])
        outer_pairs, outer_direct = (), set()
        if r + 1 < len(runs):
            rt = routes(last)
            outer_pairs = tuple(sorted(rt))
            for x, y in outer_pairs:
                if is_direct(rt[(x, y)], masks[f"r{r:03d}x{x:02d}"][-1]):
                    outer_direct.add((x, y))
                else:
                    arrays[f"r{r:03d}_outer_{x:02d}_{y:02d}"] = rt[(x, y)]
                    arrays[f"r{r:03d}_outerinv_{x:02d}_{y:02d}"] = inverse(rt[(x, y)], run.slots[x])
        pairs_static.append((inner_pairs, outer_pairs, frozenset(direct), frozenset(outer_direct)))

    arrays = {k: to_device(v, np.float32 if k.endswith(("_mask", "_cells")) else np.int32) for k, v in arrays.items()}
    static = (
        domain,
        tree,
        tuple(runs),
        tuple(locations[c] for c in range(len(tcl))),
        tuple(units),
        tuple(pairs_static),
        tuple(domain[tcl[c][0]] if c in padded else None for c in range(len(tcl))),
        frozenset(k for k, m in masks.items() if np.isinf(m).any()),
        shards,
        False,
    )
    return OraclePlan(arrays, static)


#: A further class of free singleton tables (:func:`singleton_sizes`) is made only where it saves at least this
#: many padded cells: a class costs compilation once, a padded cell time at every iteration, and on a CPU
#: 2^15 cells over a default fit of 1,000 iterations cost about what a class does (see the changelog).
SINGLETON_CLASS_CELLS = 2**15

#: Most classes of free singleton tables.
_MAX_SINGLETON_CLASSES = 8

#: Padded sizes are multiples of this (a vector of float32 on AVX2).
_SINGLETON_ALIGN = 8


def singleton_sizes(sizes) -> dict[int, int]:
    """The padded size of each free singleton table (an attribute in no model clique) by its true size.

    The tables are sorted by size and cut into at most 8 contiguous groups, each padded to its largest
    size (rounded up to a multiple of 8) and stacked as one clique class. Among the cuts into ``k`` groups
    the one with the fewest padded cells is taken (dynamic programming over the distinct sizes), and ``k``
    grows while one more group saves at least :data:`SINGLETON_CLASS_CELLS` cells. The 110 attributes of the
    Stroke data, all free (4,187 real cells), would take 57,200 cells in one class (and 112,640 padded to a
    power of two), passed over several times per iteration; in two groups they take 13,520.

    Args:
        sizes: the free attributes' domain sizes (repeats allowed).

    Returns:
        ``{size: padded size}`` for every size given.

    Example:
        >>> singleton_sizes([2, 3, 70, 1, 5, 64])  # one class: too few cells to split
        {1: 72, 2: 72, 3: 72, 5: 72, 64: 72, 70: 72}
        >>> singleton_sizes([2] * 100 + [516] * 3)  # 103 x 520 cells in one class; two groups save 51,200
        {2: 8, 516: 520}
    """
    values, counts = np.unique(np.asarray(list(sizes), np.int64), return_counts=True)
    if values.size == 0:
        return {}
    pad = -(-values // _SINGLETON_ALIGN) * _SINGLETON_ALIGN
    before = np.concatenate([[0], np.cumsum(counts)])  # tables among the i smallest distinct sizes
    m = values.size
    # cost[k][j]: fewest padded cells for the j smallest distinct sizes in k groups; cut[k][j]: its last group's start.
    cost = [np.where(np.arange(m + 1) == 0, 0.0, np.inf)]
    cut = [np.zeros(m + 1, np.int64)]
    best_k = 0
    for k in range(1, min(_MAX_SINGLETON_CLASSES, m) + 1):
        row, arg = np.full(m + 1, np.inf), np.zeros(m + 1, np.int64)
        for j in range(1, m + 1):  # the last group holds distinct sizes i..j-1, padded to pad[j-1]
            options = cost[k - 1][:j] + pad[j - 1] * (before[j] - before[:j])
            arg[j] = int(np.argmin(options))
            row[j] = options[arg[j]]
        cost.append(row)
        cut.append(arg)
        if k > 1 and cost[best_k][m] - row[m] < SINGLETON_CLASS_CELLS:
            break
        best_k = k
    out, j = {}, m
    for k in range(best_k, 0, -1):
        i = int(cut[k][j])
        out.update({int(v): int(pad[j - 1]) for v in values[i:j]})
        j = i
    return dict(sorted(out.items()))
