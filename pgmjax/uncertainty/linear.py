"""Linearisation of a fitted model's answers by implicit differentiation: ``g_hat - g ~ a^T e``.

Parameters ``x``: one log-potential table per measured clique, added to the fitted potentials (the
maximum-entropy family of the measured cliques; a model clique that is not measured keeps its fitted
value), plus the log of the total unless the total is public. With ``f(x) = Sigma^{-1/2} Q mu(x)`` and
``J = df/dx`` at the fit, the implicit function theorem on the optimality condition
``J^T (f(x) - Sigma^{-1/2} y) = 0`` with the Gauss-Newton Hessian gives

    a = d g_hat / d y = Sigma^{-1/2} J (J^T J)^+ grad_x g,    Var g_hat ~ sum_i a_i^2 sigma_i^2 = grad_x g^T (J^T J)^+ grad_x g,

the Gauss-Markov weights (for an interior L2 fit and an estimable linear ``g`` they are the BLUE weights
``A`` of Xiao & Xiong, "Bayesian Inference under Differential Privacy", section 3, eq. 16). ``(J^T J)^+
grad g`` is solved matrix-free by conjugate gradients (one forward- and one reverse-mode pass of the
oracle per iteration); the gauge directions of the potentials span the null space of ``J``, and
``grad g`` is orthogonal to them, so CG started at 0 finds the minimum-norm solution.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import jax.scipy.sparse.linalg
import numpy as np

from pgmjax.kernels import marginalize

from ..bayes.errors import LinearNoise
from ..compiler import jit
from ..graph import oracle
from ..graph.marginal_oracle import SIZE_CLASS, oracle_of
from ..model.graphical_model import GraphicalModel
from ..queries.measurement import Measurement, validate_measurements
from .targets import evaluate, resolve_targets

__all__ = ["Linearization", "linearize", "linearize_all", "linearize_batch"]


@dataclass(frozen=True, eq=False)
class Linearization:
    """The first-order law of one target's answers.

    Attributes:
        value: the model's answer, the target's shape.
        weights: ``(*shape, m)``: ``d answer / d y`` over the ``m`` measurement rows (measurements in the
            given order, each flattened as its ``y``).
        stddev: ``(m,)`` the rows' noise standard deviations.
        laplace: ``(m,)`` True for Laplace rows.
        residual: ``(*shape,)`` relative residual ``||J^T J v - grad g|| / ||grad g||`` of the solve; near 0
            when the answer moves only through the measured directions (else it is not determined to first
            order by the measurements).
    """

    value: np.ndarray
    weights: np.ndarray
    stddev: np.ndarray
    laplace: np.ndarray
    residual: np.ndarray

    @property
    def sd(self) -> np.ndarray:
        """First-order standard deviation of each answer, ``sqrt(sum_i a_i^2 sigma_i^2)``."""
        return np.sqrt(np.sum((self.weights * self.stddev) ** 2, axis=-1))

    def law(self, index=(), **options) -> LinearNoise:
        """The law of the first-order error ``a^T e`` of the answer at ``index`` (a cell of the target).

        Xiao & Xiong, "Bayesian Inference under Differential Privacy", section 4, eq. 21-22: a weighted sum
        of the rows' independent Laplace and Gaussian errors.

        Args:
            index: the cell (``()`` for a scalar target).
            **options: how the law is evaluated (``method=``, ...; see :class:`pgmjax.bayes.LinearNoise`).

        Returns:
            A :class:`pgmjax.bayes.LinearNoise`.
        """
        return LinearNoise.from_stddev(self.weights[index], self.stddev, self.laplace, **options)


def _host_layout(plan: oracle.OraclePlan, clique) -> tuple[int, list, list]:
    j = plan.tree.containing(clique)
    host = plan.cliques[j]
    kept = [a for a in host if a in clique]
    return j, host, kept


def _expand(plan, measured, theta_hat, deltas):
    """Potentials ``theta_hat`` plus each measured clique's table broadcast into its host clique."""
    blocks = dict(theta_hat)
    for c, d in zip(measured, deltas):
        j, host, kept = _host_layout(plan, c)
        t = jnp.transpose(d, [c.index(a) for a in kept])
        shape = [plan.domain[a] if a in c else 1 for a in host]
        blocks = plan.with_table(blocks, j, t.reshape(shape), add=True)
    return blocks


def predict_measurement(plan, mu, clique, query):
    """``Q mu_C`` of one measurement (on ``clique``, a :class:`~pgmjax.queries.linear.LinearQuery`) from
    oracle blocks (JAX)."""
    j, host, _ = _host_layout(plan, clique)
    return query.apply(marginalize(plan.table(mu, j), host, clique))


def linearize(
    model: GraphicalModel,
    measurements: Sequence[Measurement],
    target,
    *,
    total_free: bool = True,
    tol: float = 1e-10,
    maxiter: int | None = None,
) -> Linearization:
    """The weights ``a = d answer / d y`` of a fitted model's answer, by implicit differentiation.

    Implements the Gauss-Newton implicit-function weights described in the module docstring; for an
    interior L2 fit and an estimable linear target they are the BLUE weights (Xiao & Xiong 2012, section 3,
    eq. 16) and the answer's error is exactly ``a^T e`` (its law: :meth:`Linearization.law`, Xiao & Xiong
    section 4, eq. 21-22). Runs in float64 (needs ``jax_enable_x64``).

    Args:
        model: the fitted :class:`~pgmjax.GraphicalModel` (an L2 fit; with ``loss="l1"`` the fitted answer
            is piecewise in ``y`` and only the bootstrap is meaningful).
        measurements: the measurements it was fitted to (every clique inside a model clique).
        target: one target (an attribute tuple, a factored query mapping or a
            :class:`~pgmjax.uncertainty.Ratio`).
        total_free: differentiate the log-total too (the total estimated from ``y``, as by default in
            :func:`pgmjax.estimate`); False when the total is public and was passed to the fit.
        tol: CG stopping tolerance on the relative residual.
        maxiter: CG iteration cap (default ``max(200, 4 * parameters)``).

    Returns:
        A :class:`Linearization`.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> jax.config.update("jax_enable_x64", True)
        >>> dom = pj.Domain({"a": 2, "b": 2})
        >>> ms = [pj.Measurement(("a", "b"), [[30.0, 20], [10, 40]], stddev=10.0)]
        >>> model = pj.estimate(dom, ms, iters=300, dtype=jax.numpy.float64)
        >>> lin = linearize(model, ms, {"a": pj.queries.Value(0)})
        >>> lin.weights.round(6).tolist(), round(float(lin.sd[0]), 4)
        ([[1.0, 1.0, 0.0, 0.0]], 14.1421)
    """
    return linearize_all(model, measurements, [target], total_free=total_free, tol=tol, maxiter=maxiter)[0]


def _prepare(domain, plan, measurements, targets, total_free, tol, maxiter):
    """The static description and the arrays of a linearisation (shared by the single and batched forms)."""
    tplan, mats = resolve_targets(domain, plan.tree, targets)
    f64 = jnp.float64
    measured = tuple(dict.fromkeys(m.clique for m in measurements))
    desc = tuple((m.clique, m.kind) for m in measurements)
    nparams = sum(domain.size(c) for c in measured) + (1 if total_free else 0)
    static = (tplan, measured, desc, bool(total_free), int(maxiter or max(200, 4 * nparams)), float(tol))
    queries = tuple(jax.tree_util.tree_map(lambda q: jnp.asarray(q, f64), m.linear) for m in measurements)
    inv_std = jnp.asarray(np.concatenate([1.0 / m.row_stddev() for m in measurements]))
    jmats = tuple(tuple(None if q is None else jnp.asarray(q, f64) for q in ms) for ms in mats)
    return static, queries, inv_std, jmats


def _check(model, measurements, caller):
    if not jax.config.jax_enable_x64:
        raise ValueError(f'{caller}: needs float64: jax.config.update("jax_enable_x64", True) first')
    if not isinstance(model, GraphicalModel):
        raise TypeError(f"{caller}: model must be a pgmjax.GraphicalModel, got {type(model).__name__}")
    measurements = list(measurements)
    if not measurements:
        raise ValueError(f"{caller}: no measurements")
    validate_measurements(model.domain, measurements)
    for i, m in enumerate(measurements):
        if model.plan.tree.containing(m.clique) is None:
            raise ValueError(f"{caller}: measurement {i} on {m.clique} lies in no clique of the model {model.cliques}")
    return measurements


def _split(static, value, a, resid, measurements):
    """Per-target :class:`Linearization` from the concatenated cells."""
    stddev = np.concatenate([m.row_stddev() for m in measurements])
    laplace = np.concatenate([np.full(m.rows, m.noise == "laplace") for m in measurements])
    value, a, resid = (np.asarray(x, np.float64) for x in (value, a, resid))
    out, off = [], 0
    for _, _, shape in static[0].items:
        n = int(np.prod(shape))
        out.append(Linearization(value[off: off + n].reshape(shape), a[off: off + n].reshape(*shape, -1),
                                 stddev, laplace, resid[off: off + n].reshape(shape)))
        off += n
    return out


def linearize_all(model, measurements, targets, *, total_free=True, tol=1e-10, maxiter=None) -> list[Linearization]:
    """:func:`linearize` for several targets in one compiled program; a list of :class:`Linearization`."""
    measurements = _check(model, measurements, "linearize")
    model = model.dense()  # the linearisation differentiates through the oracle: the dense plan's
    static, queries, inv_std, jmats = _prepare(model.domain, model.plan, measurements, targets, total_free, tol, maxiter)
    theta_hat = {k: jnp.asarray(v, jnp.float64) for k, v in model.theta.items()}
    value, a, resid = _weights(static, model.plan, theta_hat, queries, inv_std, jmats, jnp.asarray(model.total, jnp.float64))
    return _split(static, value, a, resid, measurements)


def linearize_batch(plan, thetas: dict, totals, measurements, targets, *, total_free=True, tol=1e-10, maxiter=None):
    """Linearisations of ``R`` models of one structure (one vmapped program), e.g. fits of ``R`` noise draws.

    Args:
        plan: the models' oracle plan (a size-class plan's potentials are laid out densely first).
        thetas: potentials ``{block: (R, ...)}``; totals: ``(R,)``.
        measurements, targets, total_free, tol, maxiter: as for :func:`linearize`.

    Returns:
        ``R`` lists of :class:`Linearization` (one per target).
    """
    if not jax.config.jax_enable_x64:
        raise ValueError('linearize_batch: needs float64: jax.config.update("jax_enable_x64", True) first')
    measurements = list(measurements)
    if oracle_of(plan) is SIZE_CLASS:  # models fitted with the size-class program: the same tables, densely laid out
        plan, thetas = plan.to_dense(thetas, batch_dims=1)
    static, queries, inv_std, jmats = _prepare(plan.domain, plan, measurements, targets, total_free, tol, maxiter)
    th = {k: jnp.asarray(v, jnp.float64) for k, v in thetas.items()}
    value, a, resid = _weights_batched(static, plan, th, queries, inv_std, jmats, jnp.asarray(totals, jnp.float64))
    return [_split(static, value[r], a[r], resid[r], measurements) for r in range(value.shape[0])]

def _weights_impl(static, plan, theta_hat, queries, inv_std, jmats, total0):
    """``(value, a, residual)`` of every cell of the targets, flattened and concatenated (see :func:`linearize`)."""
    tplan, measured, desc, total_free, maxiter, tol = static
    shapes = [plan.domain.shape_of(c) for c in measured]
    sizes = [int(np.prod(s)) for s in shapes]
    nparams = sum(sizes) + (1 if total_free else 0)
    f64 = jnp.float64

    def model_at(x):
        deltas, off = [], 0
        for s, n in zip(shapes, sizes):
            deltas.append(x[off: off + n].reshape(s))
            off += n
        total = total0 * jnp.exp(x[off]) if total_free else total0
        theta = _expand(plan, measured, theta_hat, deltas)
        return oracle.marginals(plan, theta, total)[0], total

    def f(x):
        mu, _ = model_at(x)
        return jnp.concatenate([predict_measurement(plan, mu, c, q) for (c, _), q in zip(desc, queries)]) * inv_std

    def g(x):
        mu, total = model_at(x)
        return jnp.concatenate([v.reshape(-1) for v in evaluate(tplan, plan, mu, jmats, total)])

    x0 = jnp.zeros(nparams, f64)
    # Reverse mode only (the oracle's log-sum-exp kernel defines a custom VJP): J v is the transpose of
    # the (linear) VJP.
    f0, vjp_fn = jax.vjp(f, x0)
    transpose = jax.linear_transpose(lambda u: vjp_fn(u)[0], f0)

    def jvp(v):
        return transpose(v)[0]

    def hess(v):
        return vjp_fn(jvp(v))[0]

    grads = jax.jacrev(g)(x0)  # (cells, parameters)
    # Tikhonov shift for the singular (gauge) directions, 1e-10 of the curvature scale.
    probe = grads[0] / jnp.maximum(jnp.linalg.norm(grads[0]), 1e-300)
    lam = 1e-10 * jnp.maximum(jnp.linalg.norm(hess(probe)), 1e-300)

    def solve(b):
        # jax's CG stops at ||r|| <= tol ||b|| and runs in a while_loop, so it vmaps over the cells.
        v, _ = jax.scipy.sparse.linalg.cg(lambda u: hess(u) + lam * u, b, tol=tol, maxiter=maxiter)
        resid = jnp.linalg.norm(hess(v) - b) / jnp.maximum(jnp.linalg.norm(b), 1e-300)
        return jvp(v) * inv_std, resid

    a, resid = jax.vmap(solve)(grads)
    return g(x0), a, resid


_weights = jit(_weights_impl, static_argnums=0)


@functools.partial(jit, static_argnums=0)
def _weights_batched(static, plan, theta_hat, queries, inv_std, jmats, total0):
    """:func:`_weights_impl` for a batch of models (potentials ``(R, ...)``, totals ``(R,)``) of one structure."""
    return jax.vmap(lambda th, n: _weights_impl(static, plan, th, queries, inv_std, jmats, n))(theta_hat, total0)
