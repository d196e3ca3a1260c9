"""The marginal oracle: log-space sum-product over a junction tree, compiled as a few dense loops.

Layout (built once per structure on the host, see :func:`make_plan`):

* The junction tree is rooted at a centre and processed level by level,
  deepest first (the upward, "collect" pass).
* Every non-root clique has a *class*: its table shape, where its separator
  sits in it, and the shape of its parent and where the separator sits
  there. Cliques of one class do identical work, so each class of a level
  is one stacked, dense array ``(slots, *clique_shape)``.
* Consecutive levels with the same set of classes form a *run*; a run is one
  ``lax.scan`` over its levels. The potentials of a run's class are stored
  stacked over levels, ``(levels, slots, *clique_shape)``; slots a level does
  not use are padding, held at -inf.
* A level step: belief = potentials + received messages; message =
  logsumexp over the non-separator axes; each parent slot of the next level
  takes its children's messages (slot k from slot k, or a gather of whole
  blocks along the slot axis), kept compact and broadcast over the parent's
  axes when added. Only dense ops and block gathers: no
  per-cell gather/scatter, no per-clique op in the program. Program size
  and compile time grow with the number of runs, not with the tree.
* ``log Z`` is the logsumexp of the root's belief; clique marginals are its
  gradient (``mu = N * d log Z / d theta``), so the downward pass is the
  autodiff transpose of the upward one (Shafer-Shenoy style: beliefs are
  never divided, so -inf potentials never produce NaN).

Potentials and marginals are therefore pytrees ``{unit_key: array}`` in this
layout; :meth:`OraclePlan.tables` and :meth:`OraclePlan.from_tables`
convert to and from ``{clique: table}``.

References: Koller & Friedman (2009), Ch. 10; McKenna, Sheldon & Miklau,
"Graphical-model based estimation and inference for differential privacy",
ICML 2019, Section 3 (the marginal oracle M(theta)).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from pgmjax import kernels

from .domain import Clique, Domain
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

    def message_shape(self) -> tuple[int, ...]:
        """The message, reshaped to broadcast against the parent's table."""
        return tuple(n if i in self.parent_sep_axes else 1 for i, n in enumerate(self.parent_shape))


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

    def __eq__(self, other):
        return self is other or (isinstance(other, tuple) and hash(other) == self._hash and tuple.__eq__(self, other))

    def __ne__(self, other):
        return not self.__eq__(other)


@jax.tree_util.register_pytree_node_class
class OraclePlan:
    """Routing arrays (pytree leaves) and static structure (aux data) of one junction tree.

    Create with :func:`make_plan`. Equal structures give equal aux data, so a
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

    # static = (domain, tree, runs, locations, units)
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

    def zeros(self, dtype=jnp.float32) -> dict:
        """All-zero potentials (the uniform distribution)."""
        return {k: jnp.zeros(s, dtype) for k, s in self.units}

    def tables(self, blocks: dict) -> dict[Clique, jax.Array]:
        """``{clique: table}`` (axes in domain order) from blocks in the oracle layout."""
        return {c: blocks[key][l, k] for c, (key, l, k) in zip(self.cliques, self.locations)}

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
            host = self.cliques[j]
            canon = tuple(a for a in host if a in clique)
            t = np.asarray(table, np.float64)
            t = np.transpose(t, [tuple(clique).index(a) for a in canon])
            shape = [self.domain[a] if a in clique else 1 for a in host]
            key, l, k = self.locations[j]
            blocks[key][l, k] += t.reshape(shape)
        return {k: jnp.asarray(v, dtype) for k, v in blocks.items()}


def make_plan(domain: Domain, cliques) -> OraclePlan:
    """Build (cached) the oracle plan for a model over ``cliques``.

    Args:
        domain: the domain (attributes in no clique are modelled as uniform).
        cliques: the cliques the model must hold.

    Returns:
        An :class:`OraclePlan`.
    """
    return _make_plan_cached(domain, maximal_cliques(domain, cliques))


@functools.lru_cache(maxsize=64)
def _make_plan_cached(domain: Domain, model_cliques: tuple[Clique, ...]) -> OraclePlan:
    tree = junction_tree(domain, model_cliques)
    tcl = tree.cliques
    shape = [domain.shape_of(c) for c in tcl]
    sched = [sorted(int(c) for c in lev) for lev in levels(tree)]  # deepest first; root last

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
        counts = [sum(classes[c] == x for c in sched[l]) for x in cls]
        if runs and runs[-1].classes == cls:
            r = runs[-1]
            runs[-1] = Run(r.first_level, r.num_levels + 1, cls, tuple(max(a, b) for a, b in zip(r.slots, counts)))
        else:
            runs.append(Run(l, 1, cls, tuple(counts)))

    # Where each clique lives: unit key "rRRRxXX", level within the run, slot.
    locations: dict[int, tuple[str, int, int]] = {}
    level_slot: dict[int, dict[int, tuple[int, int]]] = {}  # level -> clique -> (class index, slot)
    units, masks = [], {}
    for r, run in enumerate(runs):
        for x, (cl, n) in enumerate(zip(run.classes, run.slots)):
            key = f"r{r:03d}x{x:02d}"
            units.append((key, (run.num_levels, n, *cl.shape)))
            mask = np.zeros((run.num_levels, n), np.float64)
            for li in range(run.num_levels):
                l = run.first_level + li
                members = [c for c in sched[l] if classes[c] == cl]
                mask[li, len(members) :] = -np.inf
                for k, c in enumerate(members):
                    locations[c] = (key, li, k)
                    level_slot.setdefault(l, {})[c] = (x, k)
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

    arrays: dict[str, np.ndarray] = {f"{k}_mask": v for k, v in masks.items()}
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
        outer_pairs, outer_direct = (), set()
        if r + 1 < len(runs):
            rt = routes(last)
            outer_pairs = tuple(sorted(rt))
            for x, y in outer_pairs:
                if is_direct(rt[(x, y)], masks[f"r{r:03d}x{x:02d}"][-1]):
                    outer_direct.add((x, y))
                else:
                    arrays[f"r{r:03d}_outer_{x:02d}_{y:02d}"] = rt[(x, y)]
        pairs_static.append((inner_pairs, outer_pairs, frozenset(direct), frozenset(outer_direct)))

    arrays = {k: jnp.asarray(v.astype(np.float32 if k.endswith("_mask") else np.int32)) for k, v in arrays.items()}
    static = (
        domain,
        tree,
        tuple(runs),
        tuple(locations[c] for c in range(len(tcl))),
        tuple(units),
        tuple(pairs_static),
    )
    return OraclePlan(arrays, static)


def _send(run: Run, pairs, direct, route, beliefs, real) -> dict:
    """Messages of one level, routed to the next level's slots: ``{(x, y): (n_y, *message shape)}``.

    Messages keep the compact shape (size-1 axes where the parent has no
    separator attribute); the receiver broadcasts them when it adds them to
    its potentials, so no full-size inbox is ever materialised. A ``direct``
    pair routes slot k to slot k and needs no gather (a padding slot's
    message, all -inf, is replaced by 0 so it cannot reach a real parent);
    other pairs gather each parent's children along the slot axis.
    ``real[x]`` marks the slots of class x that hold a clique.
    """
    out, msgs = {}, {}
    for x, y in pairs:
        if x not in msgs:
            cl = run.classes[x]
            m = kernels.logsumexp(beliefs[x], axis=tuple(1 + a for a in cl.elim_axes))
            msgs[x] = m.reshape((m.shape[0], *cl.message_shape()))
        if (x, y) in direct:
            keep = real[x].reshape((-1,) + (1,) * (msgs[x].ndim - 1))
            out[(x, y)] = jnp.where(keep, msgs[x], 0.0)
        else:
            ext = jnp.concatenate([msgs[x], jnp.zeros((1, *msgs[x].shape[1:]), msgs[x].dtype)])  # + a zero block
            out[(x, y)] = jnp.sum(jnp.take(ext, route(x, y), axis=0, mode="clip"), axis=1)  # route: (n_y, children)
    return out


def _beliefs(potentials: list, received: dict) -> list:
    """Potentials plus every message received, per class (messages broadcast over the clique)."""
    out = list(potentials)
    for (_, y), msg in sorted(received.items()):
        out[y] = out[y] + msg
    return out


def log_partition(plan: OraclePlan, theta: dict) -> jax.Array:
    """log Z of the model with log-potentials ``theta`` (blocks in the oracle layout).

    The carry between levels is the set of messages the next level receives
    (compact, one block per class pair), so one scan step and its autodiff
    transpose cost the size of one level.
    """
    static_pairs = plan.static[5]
    received: dict = {}
    for r, run in enumerate(plan.runs):
        pot, real = [], []
        for x in range(len(run.classes)):
            key = f"r{r:03d}x{x:02d}"
            mask = plan.arrays[f"{key}_mask"].astype(theta[key].dtype)
            pot.append(theta[key] + mask.reshape(mask.shape + (1,) * (theta[key].ndim - 2)))
            real.append(mask == 0)
        inner_pairs, outer_pairs, inner_direct, outer_direct = static_pairs[r]
        beliefs = _beliefs([p[0] for p in pot], received)
        if run.num_levels > 1:
            routes = {p: plan.arrays[f"r{r:03d}_inner_{p[0]:02d}_{p[1]:02d}"] for p in inner_pairs if p not in inner_direct}
            received = _send(
                run, inner_pairs, inner_direct, lambda x, y: routes[(x, y)][0], beliefs, [m[0] for m in real]
            )
            if run.num_levels > 2:

                def body(carry, xs, run=run, inner_pairs=inner_pairs, inner_direct=inner_direct):
                    th, rts, re = xs
                    return _send(run, inner_pairs, inner_direct, lambda x, y: rts[(x, y)], _beliefs(th, carry), re), None

                rest = {p: v[1:] for p, v in routes.items()}
                received, _ = jax.lax.scan(body, received, ([p[1:-1] for p in pot], rest, [m[1:-1] for m in real]))
            beliefs = _beliefs([p[-1] for p in pot], received)
        if r + 1 == len(plan.runs):
            (root,) = beliefs
            return kernels.logsumexp(root.reshape(-1), axis=-1)
        outer = {p: plan.arrays[f"r{r:03d}_outer_{p[0]:02d}_{p[1]:02d}"] for p in outer_pairs if p not in outer_direct}
        received = _send(run, outer_pairs, outer_direct, lambda x, y: outer[(x, y)], beliefs, [m[-1] for m in real])
    raise AssertionError("the schedule has no root level")


def marginals(plan: OraclePlan, theta: dict, total) -> tuple[dict, jax.Array]:
    """Clique marginals (counts summing to ``total`` in every clique) and log Z.

    The marginals are ``total * d log Z / d theta`` (one reverse pass), in the
    same block layout as ``theta``; padding slots hold zeros.

    Returns:
        ``(mu, log_z)``.
    """
    log_z, grad = jax.value_and_grad(log_partition, argnums=1)(plan, theta)
    return jax.tree_util.tree_map(lambda g: total * g, grad), log_z
