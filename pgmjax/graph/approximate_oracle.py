"""The approximate marginal oracle: convex generalized belief propagation and loopy belief propagation.

Where the measured cliques' junction tree is too large to hold (:mod:`pgmjax.graph.size_limit`), the
estimator's marginal oracle "may be replaced with an approximate marginal inference algorithm, like loopy
belief propagation" (McKenna, Sheldon & Miklau, ICML 2019, Section 5). This module runs message passing on
a :class:`~pgmjax.graph.region_graph.RegionGraph`:

* ``"convex"``: convex generalized belief propagation, all counting numbers 1 (McKenna, Pradhan, Sheldon
  & Miklau, "Relaxed marginal consistency for differentially private query answering", NeurIPS 2021,
  Algorithm 2, after Hazan & Shashua, "Norm-product belief propagation", IEEE Trans. Inf. Theory 56(12),
  2010). Its fixed points maximise ``<theta, mu> + sum_r H(mu_r)`` over the local polytope, a concave
  problem, and the fitted pseudo-marginals are the relaxed problem's (NeurIPS 2021, Problem 2).
* ``"bethe"``: sum-product loopy belief propagation on the factor graph of the cliques (Bethe counting
  numbers); exact where the factor graph is a tree.

With ``S_r = theta_r + sum of the messages into r from its children and its parents``, an iteration sends
along each edge ``p -> r``, all at once (a parallel schedule), in log space and normalised per edge:

* down ``m_{p->r} = logsumexp_{x_p \\ x_r} B_p - n_{r->p}``;
* up ``n_{r->p} = w_r S_r - m_{p->r}``;

where ``B_p = theta_p + (messages from p's children) - (messages p sends up)`` and ``w_r = 1 / (1 + |parents
of r|)`` (convex), or ``B = S`` and ``w = 1`` (Bethe). Each new message is averaged with the old one
(``damping``). At a fixed point every region's belief ``B_r`` is the marginal of its parents' beliefs (the
local polytope's consistency), which the tests check. An iteration is a few segment sums over all regions'
cells stored end to end (one flat vector, the maximal cliques first), so a model of any number of regions
compiles to the same handful of operations; the structure (cell and message maps) is built once in NumPy
and hashed by value, the numbers are arrays, the iterations one ``lax.fori_loop``.

Potentials of ``-inf`` (structural zeros) are taken as :data:`FLOOR`, whose probability ``e^FLOOR`` is 0 in
float32 and float64, so no ``-inf - (-inf)`` makes a NaN; a NaN or ``+inf`` potential makes the returned
``log Z`` non-finite, as the exact oracle's does.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import kernels
from ..compiler import to_device
from ..data.domain import Clique, Domain
from .oracle_plan import BlockPlan, in_host_axes
from .region_graph import RegionGraph, region_graph

#: Potentials below this are treated as this (probability ``exp(FLOOR) == 0`` in float32 and float64).
FLOOR = -1.0e4
#: Default iterations of message passing per oracle call, and the damping of each message.
DEFAULT_ITERS = 100
DEFAULT_DAMPING = 0.5


class _Cover:
    """What the losses read of a model's cliques (``cliques``, ``containing``): the top regions."""

    def __init__(self, graph: RegionGraph):
        self.graph = graph

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return self.graph.top

    def containing(self, attrs) -> int | None:
        return self.graph.containing(attrs)

    def __hash__(self):
        return hash(self.graph)

    def __eq__(self, other):
        return isinstance(other, _Cover) and other.graph == self.graph


@jax.tree_util.register_pytree_node_class
class ApproximatePlan(BlockPlan):
    """The routing arrays (pytree leaves) and static structure of one region graph's message passing.

    It has the layout interface of :class:`~pgmjax.graph.oracle_plan.OraclePlan` that the losses and the
    estimators read (``domain``, ``tree.containing``, ``cliques``, ``layout``, ``locations``, ``units``,
    ``padded``, ``zeros``, ``table``, ``tables``, ``from_tables``): potentials and marginals are blocks
    ``(1, slots, *shape)``, one per shape of maximal clique, each clique's axes in domain order. Create with
    :func:`make_approximate_plan`.
    """

    # static = (graph, units, locations, iters, damping, sizes)
    @property
    def graph(self) -> RegionGraph:
        return self.static[0]

    @property
    def units(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return self.static[1]

    @property
    def locations(self) -> tuple[tuple[str, int, int], ...]:
        return self.static[2]

    @property
    def iters(self) -> int:
        return self.static[3]

    @property
    def damping(self) -> float:
        return self.static[4]

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """``(cells of all regions, cells of the top regions, message cells, edge-cell pairs)``."""
        return self.static[5]

    @property
    def domain(self) -> Domain:
        return self.graph.domain

    @property
    def tree(self) -> _Cover:
        return _Cover(self.graph)

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return self.graph.top

    @property
    def padded(self) -> tuple[None, ...]:
        return (None,) * len(self.cliques)

    @property
    def cells(self) -> int:
        """Cells of the potentials' blocks (the maximal cliques' tables)."""
        return self.sizes[1]

    @property
    def largest_block(self) -> int:
        """Cells of the largest array a pass works on: the edge-cell pairs (for the compiler's choice of emitters)."""
        return max(self.sizes[0], self.sizes[3])

    def layout(self, j: int) -> Clique:
        return self.cliques[j]

    def table(self, blocks: dict, j: int, batch_dims: int = 0) -> jax.Array:
        key, level, slot = self.locations[j]
        return blocks[key][(slice(None),) * batch_dims + (level, slot)]

    def from_tables(self, tables: dict, dtype=jnp.float32) -> dict:
        """Blocks from ``{clique: table}``, each table broadcast into the smallest maximal clique holding it."""
        blocks = {k: np.zeros(s, np.float64) for k, s in self.units}
        for clique, table in tables.items():
            j = self.graph.containing(clique)
            if j is None:
                raise ValueError(f"clique {clique} lies in no region of this model: {self.cliques}")
            key, level, slot = self.locations[j]
            blocks[key][level, slot] += in_host_axes(self.domain, clique, table, self.cliques[j])
        return {k: to_device(v, dtype) for k, v in blocks.items()}


def make_approximate_plan(domain: Domain, cliques, kind: str = "convex", iters: int = DEFAULT_ITERS,
                          damping: float = DEFAULT_DAMPING) -> ApproximatePlan:
    """The plan of the approximate oracle over the maximal cliques among ``cliques`` (cached by value).

    Args:
        domain: the domain.
        cliques: the model's cliques.
        kind: ``"convex"`` (convex generalized BP) or ``"bethe"`` (loopy BP); see the module docstring.
        iters: message-passing iterations per oracle call (a positive int; static).
        damping: each message's weight on its old value, in ``[0, 1)``.

    Returns:
        An :class:`ApproximatePlan`.

    Example:
        >>> plan = make_approximate_plan(pj.Domain({"a": 2, "b": 3, "c": 2}), [("a", "b"), ("b", "c"), ("a", "c")])
        >>> plan.cliques, plan.units   # one block per shape: (1, cliques of that shape, *shape)
        ((('a', 'b'), ('b', 'c'), ('a', 'c')), (('g0', (1, 1, 2, 3)), ('g1', (1, 1, 3, 2)), ('g2', (1, 1, 2, 2))))
    """
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 1:
        raise ValueError(f"approximate oracle: iters must be a positive integer, got {iters!r}")
    if not 0.0 <= float(damping) < 1.0:
        raise ValueError(f"approximate oracle: damping must be in [0, 1), got {damping!r}")
    graph = region_graph(domain, cliques, kind)
    # The maximal cliques grouped by shape (one block per shape), in first-seen order of shapes.
    shapes: dict[tuple, list[Clique]] = {}
    for c in graph.top:
        shapes.setdefault(domain.shape_of(c), []).append(c)
    ordered = tuple(c for group in shapes.values() for c in group)
    return _make_plan_cached(region_graph(domain, ordered, kind), int(iters), float(damping))


@functools.lru_cache(maxsize=32)
def _make_plan_cached(graph: RegionGraph, iters: int, damping: float) -> ApproximatePlan:
    domain = graph.domain
    regions = graph.regions
    sizes = [domain.size(r) for r in regions]
    offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cells = int(offset[-1])
    units, locations, by_shape = [], [], {}
    for c in graph.top:
        shape = domain.shape_of(c)
        if shape not in by_shape:
            by_shape[shape] = [f"g{len(by_shape)}", 0]
        key, slot = by_shape[shape]
        locations.append((key, 0, slot))
        by_shape[shape][1] += 1
    units = tuple((key, (1, count, *shape)) for shape, (key, count) in by_shape.items())
    top_cells = int(offset[graph.num_top])
    parents = [0] * len(regions)
    for _, c in graph.edges:
        parents[c] += 1
    msg_child, msg_edge, weight, ec_parent, ec_msg = [], [], [], [], []
    m0 = 0
    for e, (p, c) in enumerate(graph.edges):
        pr, cr = regions[p], regions[c]
        pshape, cshape = domain.shape_of(pr), domain.shape_of(cr)
        index = np.indices(pshape).reshape(len(pr), -1)
        child = np.ravel_multi_index(tuple(index[pr.index(a)] for a in cr), cshape)
        n = int(np.prod(cshape))
        msg_child.append(offset[c] + np.arange(n))
        msg_edge.append(np.full(n, e))
        weight.append(np.full(n, 1 + parents[c] if graph.kind == "convex" else 1))  # w = 1 / this, in the fit's dtype
        ec_parent.append(offset[p] + np.arange(index.shape[1]))
        ec_msg.append(m0 + child)
        m0 += n
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa: E731
    region_of_cell = np.repeat(np.arange(len(regions)), sizes)
    arrays = {
        "msg_child": to_device(cat(msg_child, np.int32)),
        "msg_edge": to_device(cat(msg_edge, np.int32)),
        "weight": to_device(cat(weight, np.int32)),
        "ec_parent": to_device(cat(ec_parent, np.int32)),
        "ec_msg": to_device(cat(ec_msg, np.int32)),
        "region": to_device(region_of_cell.astype(np.int32)),
        "counting": to_device(np.repeat(np.asarray(graph.counting, np.float32), sizes)),
    }
    static = (graph, units, tuple(locations), iters, damping, (cells, top_cells, m0, int(sum(len(x) for x in ec_msg))))
    return ApproximatePlan(arrays, static)


def _flat_potentials(plan: ApproximatePlan, theta: dict) -> jax.Array:
    """The maximal cliques' potentials end to end (floored at :data:`FLOOR`), zeros on the other regions."""
    cells, top_cells = plan.sizes[:2]
    parts = [theta[k].reshape(-1) for k, _ in plan.units]
    dt = parts[0].dtype
    flat = jnp.concatenate(parts + [jnp.zeros(cells - top_cells, dt)])
    return jnp.maximum(flat, FLOOR)  # NaN stays NaN, +inf stays +inf


def _messages(plan: ApproximatePlan, theta_flat: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(down, up)`` after :attr:`ApproximatePlan.iters` iterations from zero messages."""
    a = plan.arrays
    cells, _, nmsg, _ = plan.sizes
    convex = plan.graph.kind == "convex"
    dt = theta_flat.dtype
    weight = 1 / a["weight"].astype(dt)
    rho = jnp.asarray(plan.damping, dt)

    def normalise(m):
        return m - kernels.segment_logsumexp(m, a["msg_edge"], len(plan.graph.edges), True)[a["msg_edge"]]

    def body(_, carry):
        down, up = carry
        in_down = jax.ops.segment_sum(down, a["msg_child"], cells)
        in_up = jax.ops.segment_sum(up[a["ec_msg"]], a["ec_parent"], cells)
        s = theta_flat + in_up + in_down
        b = theta_flat + in_up - jax.ops.segment_sum(up, a["msg_child"], cells) if convex else s
        new_down = normalise(kernels.segment_logsumexp(b[a["ec_parent"]], a["ec_msg"], nmsg, False) - up)
        new_up = normalise(weight * s[a["msg_child"]] - down)
        return rho * down + (1 - rho) * new_down, rho * up + (1 - rho) * new_up

    zero = jnp.zeros(nmsg, dt)
    if nmsg == 0:
        return zero, zero
    return jax.lax.fori_loop(0, plan.iters, body, (zero, zero))


def _log_beliefs(plan: ApproximatePlan, theta_flat: jax.Array, down: jax.Array, up: jax.Array) -> jax.Array:
    """Every region's normalised log belief, end to end."""
    a = plan.arrays
    cells = plan.sizes[0]
    in_up = jax.ops.segment_sum(up[a["ec_msg"]], a["ec_parent"], cells)
    if plan.graph.kind == "convex":
        b = theta_flat + in_up - jax.ops.segment_sum(up, a["msg_child"], cells)
    else:
        b = theta_flat + in_up + jax.ops.segment_sum(down, a["msg_child"], cells)
    n = len(plan.graph.regions)
    return b - kernels.segment_logsumexp(b, a["region"], n, True)[a["region"]]


def region_beliefs(plan: ApproximatePlan, theta: dict, total) -> tuple[jax.Array, jax.Array]:
    """Every region's pseudo-marginal (scaled to ``total``), end to end in region order, and the free
    energy's estimate of ``log Z``: ``sum_r <b_r, theta_r> + sum_r c_r H(b_r)`` at the beliefs (the convex
    upper bound's value for ``"convex"``, the Bethe approximation for ``"bethe"``).

    Args:
        plan: from :func:`make_approximate_plan`.
        theta: potentials (blocks of ``plan.zeros()``'s structure).
        total: the number of records.
    """
    theta_flat = _flat_potentials(plan, theta)
    down, up = _messages(plan, theta_flat)
    logb = _log_beliefs(plan, theta_flat, down, up)
    p = jnp.exp(logb)
    plogp = jnp.where(p > 0, p * logb, 0.0)
    log_z = jnp.sum(p * theta_flat) - jnp.sum(plan.arrays["counting"].astype(p.dtype) * plogp)
    return p * jnp.asarray(total, p.dtype), log_z


def marginals(plan: ApproximatePlan, theta: dict, total) -> tuple[dict, jax.Array]:
    """The maximal cliques' pseudo-marginals (blocks, like ``theta``) and the estimate of ``log Z``
    (:func:`region_beliefs`): the approximate counterpart of :func:`pgmjax.graph.oracle.marginals`.

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 2, "c": 2})
        >>> plan = make_approximate_plan(dom, [("a", "b"), ("b", "c")], "bethe")
        >>> theta = plan.from_tables({("a", "b"): np.log([[1.0, 2.0], [3.0, 4.0]])})
        >>> mu, log_z = marginals(plan, theta, 10.0)
        >>> np.round(np.asarray(plan.table(mu, 1)), 3).tolist()   # (b, c): b ~ (4, 6), c uniform
        [[2.0, 2.0], [3.0, 3.0]]
    """
    flat, log_z = region_beliefs(plan, theta, total)
    out, start = {}, 0
    for key, shape in plan.units:
        n = int(np.prod(shape))
        out[key] = flat[start:start + n].reshape(shape)
        start += n
    return out, log_z


def region_tables(plan: ApproximatePlan, flat: jax.Array) -> dict[Clique, np.ndarray]:
    """``{region: table}`` (NumPy, axes in each region's order) from :func:`region_beliefs`' first output."""
    flat = np.asarray(flat)
    out, start = {}, 0
    for r in plan.graph.regions:
        n = plan.domain.size(r)
        out[r] = flat[start:start + n].reshape(plan.domain.shape_of(r))
        start += n
    return out
