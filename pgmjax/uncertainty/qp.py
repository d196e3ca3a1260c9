"""The L2 fit of a decomposable model as a quadratic program over consistent marginals, solved in the dual.

When every clique of the model's junction tree is measured by an identity marginal (MST's one-way and
tree measurements are the typical case) the L2 fit of McKenna, Sheldon & Miklau (ICML 2019, Problem 1),
``min_{mu in the marginal polytope, total N} 1/2 sum_i ((mu_{C_i} - y_i) / sigma_i)^2``, is a quadratic
program over nonnegative clique tables that agree on every separator and sum to ``N``: on a junction
tree every such family of marginals is realised by the junction-tree product formula (Wainwright &
Jordan, "Graphical Models, Exponential Families, and Variational Inference", 2008, section 2.5, the
junction-tree theorem, and section 4.1: on a junction tree the locally consistent marginals are exactly the
marginal polytope), and that model is the maximum-entropy one. Mirror descent on the potentials
approaches cells at zero only sublinearly (a potential has to go to ``-inf``), which on sparse tables
(Adult with MST-style measurements: 20,596 of 29,606 measured cells are 0) takes tens of thousands of
iterations; the QP has zero cells as ordinary active constraints.

One variable table ``mu_v >= 0`` per measurement (weights ``w = 1 / sigma^2`` per cell; a diagonal query
``c * mu``, as MST's compressed one-way marginals, is the identity measurement ``y / c`` with standard
deviation ``sigma / |c|``), linear constraints ``A mu = b``: a measurement inside a larger clique equals
that clique's marginal, cliques joined in the junction tree agree on their separator, and every clique
sums to ``N``. With multipliers
``lambda`` the Lagrangian's minimiser is explicit (Boyd & Vandenberghe, "Convex Optimization", 2004,
section 5.2 and 5.5.3, the dual of a separable QP with bounds),

    mu_v(lambda) = max(0, y_v - (A^T lambda)_v / w_v),

and the dual ``g(lambda) = L(mu(lambda), lambda)`` is concave with gradient ``A mu(lambda) - b`` (the
constraint residuals): optax's L-BFGS (Nocedal & Wright, "Numerical Optimization", 2006, Algorithms 7.4-7.5
with the zoom line search of Algorithms 3.5-3.6) maximises it until the largest residual is below ``tol``
times the smallest noise standard deviation. The fitted model is the junction-tree product of the tables (each clique's
table divided by its separator marginal), in the layout of the model's oracle plan.

Example:
    >>> import jax, jax.numpy as jnp, numpy as np, pgmjax as pj
    >>> jax.config.update("jax_enable_x64", True)
    >>> dom = pj.Domain({"a": 2, "b": 2, "c": 2})
    >>> ms = [pj.Measurement(("a", "b"), [[30.0, -2], [10, 40]], stddev=1.0),
    ...       pj.Measurement(("b", "c"), [[35.0, 8], [20, 20]], stddev=1.0),
    ...       pj.Measurement(("b",), [41.0, 38], stddev=2.0)]
    >>> plan = pj.graph.oracle.make_plan(dom, [("a", "b"), ("b", "c")])
    >>> ys = [np.asarray(m.y, np.float64).reshape(1, -1) for m in ms]       # one answer set
    >>> fit = solve(layout(plan, ms), plan, ys, jnp.asarray([80.2]), ms)
    >>> bool(fit.residual[0] <= fit.atol)
    True
    >>> model = pj.GraphicalModel(plan, {k: v[0] for k, v in fit.theta.items()}, 80.2)
    >>> model.marginal(("a", "b")).round(3).tolist()          # the (0, 1) cell sits at the boundary
    [[30.433, 0.0], [10.433, 39.333]]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from pgmjax.kernels import marginalize

from ..compiler import jit
from ..graph import oracle
from ..queries.measurement import Measurement

__all__ = ["QPLayout", "QPFit", "layout", "solve", "junction_tree_model"]


@dataclass(frozen=True)
class QPLayout:
    """The static description of the QP of one model structure and measurement design (hashable).

    Attributes:
        attrs: per variable (one per measurement, in order) its attributes (the measurement's order).
        shapes: per variable its table shape.
        constraints: per constraint block ``(keep, terms, total)``: ``keep`` the attributes of the block
            (in the order of its multiplier table), ``terms`` ``((variable, sign), ...)`` whose marginals on
            ``keep`` are summed, ``total`` True for a block ``sum(mu_v) = N``.
        cliques: per junction-tree clique ``(j, variable or -1 if unmeasured, separator)``.
    """

    attrs: tuple
    shapes: tuple
    constraints: tuple
    cliques: tuple


class QPFit(NamedTuple):
    """Result of :func:`solve`: potentials ``{block: (R, ...)}`` in the plan's layout, ``(R,)`` L-BFGS
    iterations, ``(R,)`` largest constraint residual (counts), and the residual bound ``atol`` it aimed at."""

    theta: dict
    iterations: np.ndarray
    residual: np.ndarray
    atol: float


def layout(plan: oracle.OraclePlan, measurements: Sequence[Measurement]) -> QPLayout:
    """The QP of an L2 fit of ``measurements`` on the model structure ``plan``.

    Args:
        plan: the model's oracle plan (its junction tree).
        measurements: identity measurements; every junction-tree clique that holds a measured attribute
            must itself be measured (the same attribute set).

    Returns:
        A :class:`QPLayout`.

    Raises:
        ValueError: a measurement is not an identity marginal, or a junction-tree clique is not measured
            (its cells would have no term in the loss: the fit is then not this QP).
    """
    if not isinstance(plan, oracle.OraclePlan):
        raise TypeError(f"layout: plan must be a dense pgmjax OraclePlan (a model's model.dense().plan), got {type(plan).__name__}")
    measurements = list(measurements)
    for i, m in enumerate(measurements):
        if _diagonal(m) is None:
            raise ValueError(f"fit_method='qp': measurement {i} on {m.clique} is a {m.kind!r} query that is not "
                             "diagonal; the QP needs identity (or diagonal) marginal queries (use mirror descent)")
    tree = plan.tree
    domain = plan.domain
    primary = {}
    for j, c in enumerate(tree.cliques):
        for i, m in enumerate(measurements):
            if set(m.clique) == set(c):
                primary[j] = i
                break
    measured = {a for m in measurements for a in m.clique}
    for j, c in enumerate(tree.cliques):
        if j not in primary and measured & set(c):
            raise ValueError(f"fit_method='qp': the model clique {c} is not measured as a whole (measured cliques: "
                             f"{sorted({m.clique for m in measurements})}); the QP needs every clique of the "
                             "junction tree measured (use mirror descent)")
    cons = []
    for i, m in enumerate(measurements):
        j = tree.containing(m.clique)
        if primary.get(j) != i:  # a measurement inside a clique (or a repeat): it equals the clique's marginal
            cons.append((m.clique, ((primary[j], 1.0), (i, -1.0)), False))
    for p, c in tree.edges:
        sep = tree.separators[c]
        if sep and c in primary:
            cons.append((tuple(sep), ((primary[p], 1.0), (primary[c], -1.0)), False))
    for j in sorted(primary):
        cons.append(((), ((primary[j], 1.0),), True))
    cliques = tuple((j, primary.get(j, -1), tuple(tree.separators[j]) if tree.parent[j] >= 0 else ())
                    for j in range(len(tree.cliques)))
    return QPLayout(tuple(m.clique for m in measurements), tuple(domain.shape_of(m.clique) for m in measurements),
                    tuple(cons), cliques)


# Cells at zero get the potential log(_FLOOR * total): their mass is 1e-30 of the total (nothing any answer
# can show), and potentials stay far from exp's overflow in the oracle and its derivatives (linearisation).
_FLOOR = 1e-30


def _diagonal(m: Measurement) -> np.ndarray | None:
    """Per-cell coefficients ``c`` when the query is ``diag(c)`` with every ``c != 0`` (identity: ones; MST's
    compressed one-way marginals scale their merged value), else None."""
    if m.kind == "identity":
        return np.ones(m.rows)
    factors = [m.query] if m.kind == "dense" else list(m.query)
    diag = np.ones(1)
    for q in factors:
        q = np.asarray(q, np.float64)
        if q.ndim != 2 or q.shape[0] != q.shape[1] or np.any(q - np.diag(np.diagonal(q))) or np.any(np.diagonal(q) == 0):
            return None
        diag = np.kron(diag, np.diagonal(q))
    return diag if diag.size == m.rows else None


def _bcast(lam, keep: tuple, attrs: tuple, shape: tuple):
    """The transpose of :func:`pgmjax.kernels.marginalize`: ``lam`` (axes ``keep``) broadcast over a table of
    axes ``attrs``."""
    if not keep:
        return jnp.broadcast_to(lam, shape)
    kept = [a for a in attrs if a in keep]
    t = jnp.transpose(lam, [keep.index(a) for a in kept])
    return jnp.broadcast_to(t.reshape([shape[i] if a in keep else 1 for i, a in enumerate(attrs)]), shape)


def _primal(lay: QPLayout, lam, ys, ws):
    at = [jnp.zeros(s, ys[0].dtype) for s in lay.shapes]
    for (keep, terms, _), l in zip(lay.constraints, lam):
        for v, sign in terms:
            at[v] = at[v] + sign * _bcast(l, keep, lay.attrs[v], lay.shapes[v])
    return [jnp.maximum(0.0, y - a / w) for y, a, w in zip(ys, at, ws)]


def _residuals(lay: QPLayout, mu, total):
    out = []
    for keep, terms, is_total in lay.constraints:
        r = sum(sign * marginalize(mu[v], lay.attrs[v], keep) for v, sign in terms)
        out.append(r - total if is_total else r)
    return out


def _neg_dual(lay: QPLayout, lam, ys, ws, total):
    """``-g(lambda)``, its gradient ``-(A mu - b)`` and the largest residual."""
    mu = _primal(lay, lam, ys, ws)
    res = _residuals(lay, mu, total)
    val = sum(0.5 * jnp.sum(w * (m - y) ** 2) for m, y, w in zip(mu, ys, ws))
    val = val + sum(jnp.sum(l * r) for l, r in zip(lam, res))
    worst = jnp.max(jnp.stack([jnp.max(jnp.abs(r)) for r in res]))
    return -val, [-r for r in res], worst


def _lbfgs(lay, ys, ws, total, atol, maxiter: int, memory: int):
    """Maximise the dual of one member by optax's L-BFGS (zoom line search, Nocedal & Wright 2006,
    Algorithms 7.4 and 3.5-3.6) until the largest constraint residual is at most ``atol``.

    Args:
        lay: the :class:`QPLayout`.
        ys, ws: per measurement the answers and the weights ``1 / sigma^2`` (the layout's shapes).
        total: the number of records.
        atol: the residual bound (counts).
        maxiter: iteration cap.
        memory: curvature pairs.

    Returns:
        ``(mu, iterations, largest residual)``: the primal tables at the multipliers of least residual.
    """
    import optax  # here: optax is slow to import and only the QP refits use it

    lam0 = [jnp.zeros(_shape(lay, keep), ys[0].dtype) for keep, _, _ in lay.constraints]
    flat0, unravel = jax.flatten_util.ravel_pytree(lam0)

    def fun(x):
        return _neg_dual(lay, unravel(x), ys, ws, total)[0]

    # The gradient of -g is minus the constraint residuals, so the largest residual is max |grad|.
    opt = optax.lbfgs(memory_size=memory)
    value_and_grad = optax.value_and_grad_from_state(fun)

    def cond(c):
        _, _, _, worst, it = c
        return (worst > atol) & (it < maxiter)

    def body(c):
        x, state, best, worst, it = c
        f, g = value_and_grad(x, state=state)
        updates, state = opt.update(g, state, x, value=f, grad=g, value_fn=fun)
        x = optax.apply_updates(x, updates)
        gn = jnp.max(jnp.abs(optax.tree_utils.tree_get(state, "grad")))
        # Keep the iterate with the smallest residual, not the last: in float32 the dual's value is known only
        # to its rounding, so near the optimum a line search may accept a step that does not improve it.
        better = gn < worst
        return x, state, jnp.where(better, x, best), jnp.where(better, gn, worst), it + 1

    init = (flat0, opt.init(flat0), flat0, _neg_dual(lay, lam0, ys, ws, total)[2], jnp.asarray(0))
    _, _, x, worst, it = jax.lax.while_loop(cond, body, init)
    return _primal(lay, unravel(x), ys, ws), it, worst


def _shape(lay: QPLayout, keep: tuple) -> tuple:
    for attrs, shape in zip(lay.attrs, lay.shapes):
        if set(keep) <= set(attrs):
            return tuple(shape[attrs.index(a)] for a in keep)
    raise AssertionError(keep)


def junction_tree_model(plan: oracle.OraclePlan, marginals: dict, total: float, dtype=jnp.float64):
    """The maximum-entropy model of consistent, nonnegative marginals of the junction tree's cliques, in
    closed form: ``p = prod_C mu_C / prod_(C, parent) mu_sep`` (Wainwright & Jordan 2008, section 2.5, the
    junction-tree factorisation), each clique's table divided by its separator marginal.

    This is the L2 (and L1) fit of noiseless measurements of those marginals, with zero cells exactly 0
    (a fit by mirror descent only approaches them).

    Args:
        plan: the model's oracle plan; every clique of its junction tree that is not a free attribute needs
            its marginal.
        marginals: ``{clique: table}`` (axes in the key's attribute order).
        total: the number of records.
        dtype: the potentials' dtype.

    Returns:
        A :class:`~pgmjax.GraphicalModel`.

    Example:
        >>> import numpy as np, pgmjax as pj
        >>> from pgmjax.graph.oracle import make_plan
        >>> dom = pj.Domain({"a": 2, "b": 2, "c": 2})
        >>> plan = make_plan(dom, [("a", "b"), ("b", "c")])
        >>> m = junction_tree_model(plan, {("a", "b"): np.array([[3.0, 1], [0, 4]]),
        ...                               ("b", "c"): np.array([[2.0, 1], [5, 0]])}, 8.0)
        >>> m.marginal(("a", "c")).round(6).tolist()         # sum_b mu_ab mu_bc / mu_b
        [[3.0, 1.0], [4.0, 0.0]]
    """
    from ..model.graphical_model import GraphicalModel

    tree = plan.tree
    tables = {}
    given = {frozenset(k): (tuple(k), np.asarray(v, np.float64)) for k, v in marginals.items()}
    for j, clique in enumerate(tree.cliques):
        if frozenset(clique) not in given:
            if plan.padded[j] is not None:
                continue  # a free attribute: uniform
            raise ValueError(f"junction_tree_model: no marginal for the junction-tree clique {clique}")
        attrs, table = given[frozenset(clique)]
        table = np.transpose(table, [attrs.index(a) for a in clique])
        floor = _FLOOR * float(total)
        logt = np.log(np.maximum(table, floor))
        sep = tuple(tree.separators[j]) if tree.parent[j] >= 0 else ()
        if sep:
            s = np.asarray(marginalize(table, clique, sep))
            logt = logt - np.asarray(_bcast(np.log(np.maximum(s, floor)), sep, clique, table.shape))
        tables[clique] = logt
    return GraphicalModel(plan, plan.from_tables(tables, dtype), float(total))


def _potentials(lay: QPLayout, plan, mu, total):
    """Junction-tree product of the tables: each clique's log table minus its separator's log marginal."""
    floor = _FLOOR * total
    blocks = dict(plan.zeros(total.dtype))
    for j, v, sep in lay.cliques:
        if v < 0:
            continue  # an attribute in no measurement: uniform
        clique = plan.cliques[j]
        attrs = lay.attrs[v]
        table = jnp.transpose(mu[v], [attrs.index(a) for a in clique])
        logt = jnp.log(jnp.maximum(table, floor))
        if sep:
            s = marginalize(table, clique, tuple(sep))
            logt = logt - _bcast(jnp.log(jnp.maximum(s, floor)), tuple(sep), clique, table.shape)
        blocks = plan.with_table(blocks, j, logt)
    return blocks


@functools.partial(jit, static_argnums=(0, 6, 7))
def _solve(lay, plan, ys, ws, totals, atol, maxiter, memory):
    def one(y, n):
        mu, it, worst = _lbfgs(lay, y, ws, n, atol, maxiter, memory)
        return _potentials(lay, plan, mu, n), it, worst

    return jax.vmap(one)(ys, totals)


def solve(lay: QPLayout, plan, ys: Sequence[np.ndarray], totals, measurements: Sequence[Measurement], *,
          tol: float = 1e-4, maxiter: int = 5000, memory: int = 20):
    """Exact L2 fits of ``R`` answer sets (one batched program): potentials, iterations and residuals.

    Args:
        lay: from :func:`layout`.
        plan: the model's oracle plan.
        ys: per measurement ``(R, rows)`` answers.
        totals: ``(R,)`` the number of records of each fit (the dtype of the fit).
        measurements: the measurements (their ``row_stddev()`` weight the loss; a diagonal query
            ``c * mu`` is the identity measurement ``y / c`` of standard deviation ``sigma / |c|``).
        tol: stop when every constraint residual is below ``tol`` times the smallest standard deviation.
        maxiter: L-BFGS iteration cap per fit.
        memory: L-BFGS curvature pairs.

    Returns:
        A :class:`QPFit`; a fit is converged when its residual is at most ``atol``.
    """
    totals = jnp.asarray(totals)
    dt = totals.dtype
    coef = [_diagonal(m) for m in measurements]
    stddev = [m.row_stddev() / np.abs(c) for m, c in zip(measurements, coef)]
    ws = tuple(jnp.asarray(1.0 / s**2, dt).reshape(shape) for s, shape in zip(stddev, lay.shapes))
    r = int(totals.shape[0])
    yt = tuple(jnp.asarray((np.asarray(y, np.float64) / c).reshape(r, *shape), dt)
               for y, c, shape in zip(ys, coef, lay.shapes))
    atol = float(tol) * float(np.min([np.min(s) for s in stddev]))
    theta, it, worst = _solve(lay, plan, yt, ws, totals, jnp.asarray(atol, dt), int(maxiter), int(memory))
    return QPFit(theta, np.asarray(it), np.asarray(worst, np.float64), atol)
