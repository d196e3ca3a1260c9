"""Losses of clique marginals against measurements, batched by measurement structure.

Measurements that do the same work (same host-clique block, same
projection, same query kind and shapes) are stacked into one group and
evaluated with one vectorised op, so a model with a thousand measured
cliques compiles a handful of ops, not a thousand. The numbers (answers,
stddevs, query matrices) are pytree leaves; new noise or new stddevs on the
same structure reuse the compiled program.

Where more than a few one- and two-way marginals of one junction-tree clique are measured (a loopy
model's large clique: NLTCS's 120 pairs), they are one ``"pairs"`` group whose prediction is a few matrix
products of that clique's table (:mod:`pgmjax.estimation.pair_marginals`) instead of one reduction each.

Losses (McKenna et al., ICML 2019, Appendix C.2; each residual is divided
by its noise standard deviation):

* ``"l2"``: ``1/2 * sum_i ||(Q_i mu_i - y_i) / sigma_i||_2^2`` (Gaussian
  negative log-likelihood up to a constant);
* ``"l1"``: ``sum_i ||(Q_i mu_i - y_i) / sigma_i||_1`` (Laplace negative
  log-likelihood up to a constant and scale).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from pgmjax.kernels import sum_axes

from ..compiler import to_device
from ..graph.oracle import OraclePlan
from ..queries.linear import LinearQuery
from ..queries.measurement import Measurement
from . import pair_marginals
from .pair_marginals import PairLayout
from .routed_losses import RoutedMeasurements


@dataclass(frozen=True)
class _Group:
    key: str  # oracle block holding the host clique
    host_shape: tuple[int, ...]
    sum_axes: tuple[int, ...]  # host axes summed out
    perm: tuple[int, ...]  # remaining axes -> measurement clique order (identity groups: applied to y on the host)
    kind: str
    rows: int
    count: int  # stacked measurements, zero-weight padding included
    dense: bool = False  # measurements laid out like the block (levels * slots), zero weight where unmeasured
    parts: tuple[_Group, ...] = ()  # a merged group: these groups' rows, one flat row (see _merge_marginals)
    pad: int = 0  # a merged group: zero-weight cells after its parts' (see _ALIGN)
    pairs: PairLayout | None = None  # kind "pairs": one table's one- and two-way marginals as products
    stacked: int = 0  # rows of the group's stacked arrays: ``count``, or the block's levels * slots if dense

    @property
    def stacked_rows(self) -> int:
        return self.stacked or self.count


@jax.tree_util.register_pytree_node_class
class MeasurementArrays:
    """Stacked measurement data (leaves) with its grouping (static)."""

    def __init__(self, arrays: tuple, groups: tuple[_Group, ...]):
        self.arrays = arrays  # per group: dict of arrays
        self.groups = groups

    def tree_flatten(self):
        return (self.arrays,), self.groups

    @classmethod
    def tree_unflatten(cls, groups, leaves):
        return cls(leaves[0], groups)


# Padding a group costs (added copies) x (host cells) per loss evaluation; above this many cells, none.
_MAX_PAD_CELLS = 2**20


def _padded_count(count: int, host_cells: int) -> int:
    """``count`` rounded up to a power of two where the padding is cheap, else ``count``.

    An adaptive mechanism (MWEM) adds one measurement per round; padded counts keep the group's shapes,
    hence the compiled program, unchanged until the count crosses a power of two.
    """
    padded = 1 << (count - 1).bit_length()
    return padded if (padded - count) * host_cells <= _MAX_PAD_CELLS else count


def _pad(a: np.ndarray, extra: int) -> np.ndarray:
    return np.concatenate([a, np.repeat(a[:1], extra, axis=0)])


def _signature(plan: OraclePlan, m: Measurement) -> tuple[tuple, int, int]:
    """What a measurement's reduction looks like in the dense program, ``(signature, level, slot)``: measurements of
    one signature (the host's block and shape, the axes summed out, the answer's axis order, the query's form) stack
    into one group, read by one piece of code; level and slot locate its host table in the block."""
    host = plan.tree.containing(m.clique)
    host_clique = plan.layout(host)  # the order the host's table is stored in
    # a measured clique is a model clique, so its host's table is never padded (see oracle.make_plan)
    assert plan.padded[host] is None, (m.clique, host_clique)
    key, level, slot = plan.locations[host]
    kept = [a for a in host_clique if a in m.clique]
    sig = (
        key,
        plan.domain.shape_of(host_clique),
        tuple(i for i, a in enumerate(host_clique) if a not in m.clique),
        tuple(kept.index(a) for a in m.clique),
        m.kind,
        m.rows,
        jax.tree_util.tree_structure(m.linear),
        tuple(np.shape(q) for q in jax.tree_util.tree_leaves(m.linear)),
    )
    return sig, level, slot


def reduction_groups(plan: OraclePlan, measurements: Sequence[Measurement]) -> int:
    """How many groups of measurements the dense program reads, each by its own code (:func:`_stack_on_host`):
    measurements of one signature (:func:`_signature`) stack into one group, and the one- and two-way marginals
    of one table into one ``"pairs"`` group. The dense compile grows with it
    (:data:`pgmjax.estimation.oracles.COMPILE_COSTS`): a chain of a hundred pairs of one shape is a few groups,
    an AIM model's marginals of many shapes about one each.

    Example:
        >>> import numpy as np
        >>> from pgmjax import Domain, Measurement
        >>> from pgmjax.graph.oracle_plan import make_plan
        >>> dom = Domain({f"x{i}": 3 for i in range(10)})
        >>> ms = [Measurement((f"x{i}", f"x{i + 1}"), np.ones((3, 3)), 1.0) for i in range(9)]
        >>> reduction_groups(make_plan(dom, [m.clique for m in ms]), ms) <= 3
        True
    """
    _, groups = _stack_on_host(plan, measurements)
    return sum(len(g.parts) or 1 for g in groups)


def _stack_on_host(plan: OraclePlan, measurements: Sequence[Measurement], sharded: bool = False) -> tuple[list, list]:
    """The measurements grouped and stacked on the host: ``(arrays, groups)``, NumPy arrays per group.

    ``sharded`` (a model whose blocks are split over devices along their slot axis, :mod:`pgmjax.estimation.sharding`):
    every group laid out like its block (dense: the loss reads each device's own slots, no table is gathered),
    a clique measured several times spread over several such groups, no ``"pairs"`` group (it reads one
    table by index) and no merged group (its concatenation would gather every group's cells).
    """
    groups, arrays, measurements = ([], [], list(measurements)) if sharded else _pair_groups(plan, measurements)
    by_sig: dict[tuple, list[tuple[Measurement, int, int]]] = {}
    for m in measurements:
        sig, level, slot = _signature(plan, m)
        by_sig.setdefault(sig, []).append((m, level, slot))
    stacks = []
    for sig in sorted(by_sig, key=repr):
        if not sharded:
            stacks.append((sig, by_sig[sig]))
            continue
        layers: list[list] = []  # the k-th measurement of a clique goes to layer k: each layer measures a slot once
        seen: dict[tuple, int] = {}
        for item in by_sig[sig]:
            k = seen[item[1:]] = seen.get(item[1:], -1) + 1
            if k == len(layers):
                layers.append([])
            layers[k].append(item)
        stacks.extend((sig, layer) for layer in layers)
    for sig, items in stacks:
        key, host_shape, sum_axes, perm, kind, rows = sig[:6]
        group = {
            "level": np.array([lv for _, lv, _ in items], np.int32),
            "slot": np.array([sl for _, _, sl in items], np.int32),
            "y": np.stack([_stored_cells(m, m.y, perm, plan.domain) for m, _, _ in items]),
            "inv_std": np.stack([_stored_cells(m, 1.0 / m.row_stddev(), perm, plan.domain) for m, _, _ in items]),
            # one LinearQuery whose numbers are stacked along a leading axis (static: its form and shapes)
            "query": jax.tree_util.tree_map(lambda *q: np.stack(q), *[m.linear for m, _, _ in items]),
        }
        if kind != "identity":  # the projector onto each query's row space (project_patterns)
            group["projector"] = jax.tree_util.tree_map(
                lambda *q: np.stack(q), *[m.linear.with_sizes(plan.domain.shape_of(m.clique)).row_projector()
                                          for m, _, _ in items])
        if kind == "identity":  # the answers were put in the stored order: no transpose on the device
            perm = tuple(range(len(perm)))
        # When the group measures most cliques of its block, each at most once, lay its numbers
        # out like the block: the loss then reads the whole block (no gather, and no scatter in
        # its gradient); unmeasured slots get weight 0.
        levels_slots = dict(plan.units)[key][:2]
        cells = levels_slots[0] * levels_slots[1]
        flat = group["level"].astype(np.int64) * levels_slots[1] + group["slot"]
        dense = len(set(flat.tolist())) == len(items) and (sharded or 2 * len(items) >= cells)
        count = len(items)
        if not dense:
            count = _padded_count(len(items), int(np.prod(host_shape)))
            if count > len(items):  # zero-weight copies of the first measurement: they add nothing
                extra = count - len(items)
                group = jax.tree_util.tree_map(lambda a: _pad(a, extra), group)
                group["inv_std"][len(items):] = 0.0
        if dense:
            def spread(a, fill=0.0):
                out = np.full((cells, *a.shape[1:]), fill, a.dtype)
                out[flat] = a
                return out

            group = jax.tree_util.tree_map(spread, {k: v for k, v in group.items() if k not in ("level", "slot")})
        arrays.append(group)
        groups.append(_Group(key, host_shape, sum_axes, perm, kind, rows, count, dense, stacked=cells if dense else count))
    return (tuple(arrays), tuple(groups)) if sharded else _merge_marginals(arrays, groups)


def stack_measurements(plan: OraclePlan, measurements: Sequence[Measurement], dtype) -> MeasurementArrays:
    """Group and stack measurements for a model with oracle plan ``plan`` (their answers on the host); for a
    plan laid out to be split over devices (``plan.shards > 1``), as :func:`_stack_on_host` says."""
    arrays, groups = _stack_on_host(plan, measurements, plan.shards > 1)
    arrays = jax.tree_util.tree_map(lambda a: to_device(a) if a.dtype.kind == "i" else to_device(a, dtype), arrays)
    return MeasurementArrays(arrays, groups)


def stack_measurements_traced(plan: OraclePlan, measurements: Sequence[Measurement], dtype) -> MeasurementArrays:
    """:func:`stack_measurements` with the answers placed by JAX ops: for answers that may be abstract (inside
    ``jit``, ``vmap`` or ``grad``), differentiable in them.

    Stacking only places answers (reorders, pads, spreads into blocks), never computes with them: the
    layout is found on the host from each answer's position (1, 2, ... over the stacked answers, 0 for
    padding) and the answers are gathered into it, so the arrays equal :func:`stack_measurements`'.
    """
    index, placeholders = 1, []
    for m in measurements:
        ids = np.arange(index, index + m.rows, dtype=np.float64)  # exact: float64 holds integers to 2^53
        placeholders.append(Measurement(m.clique, ids, stddev=m.stddev, query=m.linear, noise=m.noise))
        index += m.rows
    arrays, groups = _stack_on_host(plan, placeholders, plan.shards > 1)
    answers = jnp.concatenate([jnp.zeros(1, dtype)] + [jnp.asarray(m.y, dtype).reshape(-1) for m in measurements])
    placed = []
    for group in arrays:
        out = jax.tree_util.tree_map(lambda a: to_device(a) if a.dtype.kind == "i" else to_device(a, dtype), group)
        out["y"] = answers[np.rint(group["y"]).astype(np.int64)]
        placed.append(out)
    return MeasurementArrays(tuple(placed) if isinstance(arrays, tuple) else placed, groups)


def _pair_groups(plan: OraclePlan, measurements: Sequence[Measurement]) -> tuple[list, list, list]:
    """One ``"pairs"`` group per junction-tree clique whose table many one- and two-way marginals read
    (:mod:`pgmjax.estimation.pair_marginals`), and the measurements left for the other groups.

    A marginal measured twice (or of the whole table) stays with the other groups: the products give each
    marginal one place.
    """
    by_host: dict = {}
    for i, m in enumerate(measurements):
        if m.kind == "identity" and len(m.clique) <= 2:
            host = plan.tree.containing(m.clique)
            if len(m.clique) < len(plan.tree.cliques[host]):
                by_host.setdefault(host, {}).setdefault(frozenset(m.clique), i)
    groups, arrays, taken = [], [], set()
    for host, firsts in by_host.items():
        host_clique = plan.layout(host)
        shape = plan.domain.shape_of(host_clique)
        axes = {i: tuple(host_clique.index(a) for a in measurements[i].clique) for i in firsts.values()}
        layout = pair_marginals.plan_layout(shape, [tuple(sorted(a)) for a in axes.values()])
        if layout is None:
            continue
        y, inv_std = np.zeros(layout.rows), np.zeros(layout.rows)
        for i, ax in axes.items():
            at = pair_marginals.positions(layout, ax)
            y[at] = measurements[i].y
            inv_std[at] = 1.0 / measurements[i].row_stddev()
            taken.add(i)
        assert plan.padded[host] is None, (host, host_clique)  # a model clique's table (see oracle.make_plan)
        key, level, slot = plan.locations[host]
        left, right = pair_marginals.onehots(layout, np.float64)
        arrays.append({"level": np.array([level], np.int32), "slot": np.array([slot], np.int32), "y": y[None],
                       "inv_std": inv_std[None], "onehot_left": left, "onehot_right": right})
        groups.append(_Group(key, shape, (), (), "pairs", layout.rows, 1, pairs=layout))
    return groups, arrays, [m for i, m in enumerate(measurements) if i not in taken]


def _merge_marginals(arrays: list, groups: list) -> tuple[tuple, tuple]:
    """Every group of marginals (identity queries, of whole tables or of sub-cliques) as one group (host arrays).

    The merged group's prediction is its parts' predictions flattened and concatenated, and ``y`` and
    ``inv_std`` are concatenated likewise, so the loss, its gradient and the line search's inner products
    are one operation each instead of one (a kernel or two in the compiled program) per group.
    """
    merge = [i for i, g in enumerate(groups) if g.kind in ("identity", "pairs")]
    if len(merge) < 2:
        return tuple(arrays), tuple(groups)
    cells = sum(arrays[i]["y"].size for i in merge)
    pad = -cells % _ALIGN
    pad = pad if pad <= _MAX_PAD_FRACTION * cells else 0
    flat = {k: np.concatenate([arrays[i][k].reshape(-1) for i in merge] + [np.zeros(pad, arrays[merge[0]][k].dtype)])[None]
            for k in ("y", "inv_std")}
    flat["parts"] = tuple({k: v for k, v in arrays[i].items() if k not in ("y", "inv_std")} for i in merge)
    rows = cells + pad
    merged = _Group(groups[merge[0]].key, (rows,), (), (0,), "identity", rows, 1, False, tuple(groups[i] for i in merge), pad)
    rest = [i for i in range(len(groups)) if i not in merge]
    return (flat, *(arrays[i] for i in rest)), (merged, *(groups[i] for i in rest))


#: The merged group's length is padded to a multiple of this (zero-weight cells): XLA:CPU's own emitters
#: reduce a vector whose length is a multiple of the vector width about twice as fast as one of odd
#: length.
_ALIGN = 1024

#: A group is padded only where that adds at most this fraction of its cells. A short group's reductions
#: cost little either way, while padding multiplies its work (eight measured cells would become 1,024).
_MAX_PAD_FRACTION = 1 / 32


def _stored_cells(m: Measurement, values: np.ndarray, perm: tuple[int, ...], domain) -> np.ndarray:
    """An identity measurement's per-cell ``values`` in its host table's stored axis order.

    The answers of a marginal are reordered once, on the host, so the fit never transposes the (possibly
    large) table on the device; other queries' rows are not cells and stay as they are (their group
    transposes the usually smaller table it reads, ``perm``: the kept axes to the measurement's order).
    """
    values = np.broadcast_to(values, (m.rows,))
    if m.kind != "identity" or perm == tuple(range(len(perm))):
        return values
    return np.transpose(values.reshape(domain.shape_of(m.clique)), np.argsort(perm)).reshape(-1)


def predictions(mu: dict, meas: MeasurementArrays) -> list[jax.Array]:
    """``Q_i mu_i`` for every group, each ``(count, rows)`` (``(levels * slots, rows)`` for a dense group);
    a marginal's rows are its cells in the host table's stored order (its answers ``y`` were stacked so).

    The composition of :func:`patterns` (the measured cliques' marginals, linear in ``mu``) and
    :func:`predictions_from_patterns` (the queries applied to them)."""
    return predictions_from_patterns(patterns(mu, meas), meas)


def patterns(mu: dict, meas: MeasurementArrays) -> list[jax.Array]:
    """The measured cliques' marginals, per group, as the queries read them: ``(count, *kept axes)`` for a
    group of queries, and the predictions themselves (``(count, rows)``) for marginals (identity queries,
    ``"pairs"`` products and merged groups), whose query is the identity.

    The space the estimators keep their parameters in: the model's potentials are the transpose of this
    map applied to them (:func:`pgmjax.estimation.problem.Problem.expand`), a sum of tables over the measured
    cliques, so the fitted distribution is in the exponential family of the measured cliques by
    construction (McKenna, Sheldon & Miklau, ICML 2019, Section 3: the maximum-entropy distribution
    consistent with the marginals has this form).
    """
    out = []
    for g, arr in zip(meas.groups, meas.arrays):
        if g.parts:
            parts = [_pattern(mu, p, a).reshape(-1) for p, a in zip(g.parts, arr["parts"])]
            pad = [jnp.zeros(g.pad, parts[0].dtype)] if g.pad else []
            out.append(jnp.concatenate(parts + pad)[None])
        else:
            out.append(_pattern(mu, g, arr))
    return out


def predictions_from_patterns(pats: list, meas: MeasurementArrays) -> list[jax.Array]:
    """The groups' predictions ``Q_i mu_i`` from :func:`patterns`' output (linear)."""
    return [p if g.parts or g.kind in ("identity", "pairs") else jax.vmap(LinearQuery.apply)(arr["query"], p)
            for p, g, arr in zip(pats, meas.groups, meas.arrays)]


def project_patterns(pats: list, meas: MeasurementArrays) -> list[jax.Array]:
    """:func:`patterns`-shaped parameters projected onto their queries' row spaces (``Q^+ Q`` per measured
    table; marginals' unchanged): the part of them that moves the loss. See
    :meth:`pgmjax.estimation.problem.Problem.project_rows`."""
    return [p if g.parts or g.kind in ("identity", "pairs")
            else jax.vmap(lambda q, x: q.apply(x).reshape(x.shape))(arr["projector"], p)
            for p, g, arr in zip(pats, meas.groups, meas.arrays)]


def center_patterns(pats: list, meas: MeasurementArrays) -> list[jax.Array]:
    """Parameters in :func:`patterns`' space shifted so each measured table's largest entry is 0.

    Subtracting a constant from every cell of one measured table adds a constant to its host clique's
    potentials: the distribution is unchanged. Mirror descent's parameters drift by such constants (a
    measurement whose answers do not sum to the model's total pulls every cell of its table the same
    way at every step); left to grow, they would cost the potentials their float32 precision. A
    ``"pairs"`` group's entries are shifted together (the transpose of its products maps one constant on
    every entry to a constant on its table); zero-weight padding is left as it is.
    """
    out = []
    for p, g in zip(pats, meas.groups):
        if g.parts:
            flat, pieces, at = p.reshape(-1), [], 0
            for part in g.parts:
                n = part.stacked_rows * part.rows
                pieces.append(_centered_rows(flat[at:at + n].reshape(part.stacked_rows, -1), part).reshape(-1))
                at += n
            if g.pad:
                pieces.append(flat[at:])
            out.append(jnp.concatenate(pieces)[None])
        else:
            out.append(_centered_rows(p, g))
    return out


def _centered_rows(x: jax.Array, g: _Group) -> jax.Array:
    """``x`` (``(count, ...)``, one measured table or one ``"pairs"`` product per row) less each row's max."""
    top = jnp.max(x.reshape(x.shape[0], -1), axis=1).reshape((-1,) + (1,) * (x.ndim - 1))
    return x - jax.lax.stop_gradient(top)


def _pattern(mu: dict, g: _Group, arr: dict) -> jax.Array:
    """One group's :func:`patterns` entry, ``(count, ...)``."""
    if g.pairs is not None:
        return pair_marginals.predict(g.pairs, mu[g.key][arr["level"], arr["slot"]], arr["onehot_left"], arr["onehot_right"])
    if g.dense:
        x = mu[g.key].reshape((-1, *g.host_shape))  # (levels * slots, *host_shape)
    else:
        x = mu[g.key][arr["level"], arr["slot"]]  # (count, *host_shape)
    if g.sum_axes:
        x = sum_axes(x, tuple(1 + a for a in g.sum_axes))  # two stages: float32 sums of many cells
    if g.perm != tuple(range(len(g.perm))):
        x = jnp.transpose(x, (0, *(1 + p for p in g.perm)))
    if g.kind == "identity":  # no vmap to trace: a model with 120 marginals traced it 360 times per fit
        return x.reshape(x.shape[0], -1)
    return x


def residual_loss(mu: dict, meas: MeasurementArrays, kind: str, smoothing=None) -> jax.Array:
    """The L2 or L1 loss of marginals ``mu`` (oracle blocks) against the measurements.

    With ``smoothing = delta > 0`` the L1 loss is replaced by its Huber
    smoothing (``r^2 / (2 delta)`` for ``|r| <= delta``, ``|r| - delta / 2``
    otherwise; within ``delta / 2`` of ``|r|`` per row), which is what the
    estimators minimise for L1 while ``delta`` is driven to 0 (continuation).
    """
    return loss_of_predictions(predictions(mu, meas), meas, kind, smoothing)


def loss_of_predictions(preds, meas: MeasurementArrays, kind: str, smoothing=None) -> jax.Array:
    """:func:`residual_loss` from the groups' predictions ``Q_i mu_i`` (:func:`predictions`).

    The loss reads the marginals only through these (linear) predictions, so an estimator can keep its
    gradient in this, usually much smaller, space and map it back with the transpose of
    :func:`predictions` only where it updates the potentials.
    """
    terms = []
    for pred, arr in zip(preds, meas.arrays):
        r = (pred - arr["y"]) * arr["inv_std"]
        if kind == "l2":
            t = 0.5 * (r * r)
        elif smoothing is None:
            t = jnp.abs(r)
        else:
            a = jnp.abs(r)
            # Width 0 is the L1 loss itself: its quadratic branch then holds only r = 0 (zero-weight cells),
            # where r * r / 0 would be NaN in the value and the gradient.
            width = jnp.where(smoothing > 0, smoothing, 1.0)
            t = jnp.where(a <= smoothing, r * r / (2 * width), a - smoothing / 2)
        terms.append(t)
    return sum_all(terms)


def sum_all(arrays: list) -> jax.Array:
    """The sum of every entry of every array, as one reduction over their concatenation: a sum per array
    would be a kernel or two of its own in the compiled program, and a model has dozens of groups.

    Inside a computation split over several devices (a mesh in context: :func:`jax.set_mesh`, set by
    :mod:`pgmjax.estimation.sharding`), each array is summed where it lies and the sums added: a concatenation would
    gather every array onto each device.

    A long vector is summed in rows of 32 first, then the row sums. XLA:CPU rewrites a sum over more than
    32 entries into a windowed sum of 32 (for its precision) that reads its input from memory, so the
    elementwise work before it (a squared residual, a product) is written out and read back; rows of 32
    are the same tree of sums, taken inside the fused elementwise kernel. On the 4-million-cell Loans
    benchmark this saved two passes over the measured cells per loss evaluation.
    """
    if not arrays:
        return jnp.zeros(())
    if len(arrays) > 1 and jax.sharding.get_abstract_mesh().size > 1:
        return sum(jnp.sum(x) for x in arrays)
    flat = arrays[0].reshape(-1) if len(arrays) == 1 else jnp.concatenate([x.reshape(-1) for x in arrays])
    if flat.size > _ROW * _ROW and flat.size % _ROW == 0:
        return _sum_in_rows(flat)
    return jnp.sum(flat)


#: The row length of :func:`sum_all`'s first stage: XLA:CPU's reduction window (``TreeReductionRewriter``).
_ROW = 32


@jax.custom_jvp
def _sum_in_rows(flat: jax.Array) -> jax.Array:
    # The barrier keeps XLA from merging the two sums back into one (which it would then rewrite).
    return jnp.sum(jax.lax.optimization_barrier(jnp.sum(flat.reshape(-1, _ROW), axis=1)))


@_sum_in_rows.defjvp
def _sum_in_rows_jvp(primals, tangents):
    # A plain sum for derivatives: its transpose (a gradient) is a broadcast that XLA fuses into its
    # consumer; through the barrier it was a vector of ones written out in full.
    return _sum_in_rows(primals[0]), jnp.sum(tangents[0])


def lipschitz_constant(measurements: Sequence[Measurement], plan: OraclePlan | None = None) -> float:
    """Lipschitz constant of the L2 loss gradient (ICML 2019, Algorithm 2).

    The loss reads each measurement from the marginal of the model clique that holds it (its host), so
    every measurement held by one host adds its curvature to that host's (an upper bound of the largest
    eigenvalue of the sum, and of the largest entry of its Hessian, the constant for the l1 norm the
    entropy prox is strongly convex in); the constant is the largest over hosts. A 1-way marginal and a
    2-way marginal of the same pair share a host, as do all 2-way marginals of a loopy model whose
    junction tree is one clique: grouping them by their own cliques instead (as before) made the constant
    up to 120 times too small on NLTCS's 120 pairs, and dual averaging's steps too long to ever improve on
    its starting model (Adult with 1-way marginals and a tree of pairs, float64: loss 1.44e6, the uniform
    model's, after 20,000 iterations; with the hosts' constant 11,890 after 1,000 and 11,478 after 5,000).

    Args:
        measurements: the measurements.
        plan: the model's oracle plan (hosts from its junction tree); None groups by the measured cliques
            themselves (for measurements of a model's own cliques, the same).
    """
    per_host: dict = {}
    for m in measurements:
        key = frozenset(m.clique) if plan is None else plan.tree.containing(m.clique)
        per_host[key] = per_host.get(key, 0.0) + m.lipschitz()
    return max(per_host.values(), default=1.0)


def gathered_cells(meas: MeasurementArrays) -> int:
    """The cells :func:`patterns` gathers at once: a group that is neither dense nor ``"pairs"`` takes its
    ``count`` host tables by index (``mu[key][level, slot]``) before summing them down, so XLA holds ``count``
    copies of the host clique's table (every measurement of the group on a model of one clique gathers the
    whole model). Counted by :mod:`pgmjax.estimation.memory` in a fit's peak.

    Example:
        >>> import pgmjax as pj
        >>> from pgmjax.estimation.batch_problem import make_problem
        >>> problem = make_problem(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), [1.0] * 6)])
        >>> gathered_cells(problem.meas)
        0
    """
    if isinstance(meas, RoutedMeasurements):  # the (cell, pattern) pairs gather one cell each
        return meas.shape.pairs
    total = 0
    for g in meas.groups:
        for part in g.parts or (g,):
            if part.pairs is None and not part.dense:
                total += part.count * math.prod(part.host_shape)
    return total
