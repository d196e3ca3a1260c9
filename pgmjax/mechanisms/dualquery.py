"""DualQuery and DualQuery+PGM (spec ``frontends.md`` section 5).

DualQuery (Gaboardi, Gallego Arias, Hsu, Roth, Wu, "Dual query: practical private query release for
high dimensional data", ICML 2014) plays a zero-sum game between a *query player*, who runs
multiplicative weights over a query class ``Q~`` closed under negation, and a *data player*, who
best-responds with one record per round. Only the query player's sampling reads the data: round ``t``
draws ``s`` queries from ``w_t(j) ∝ exp(eta sum_{tau<t} (a_j - q_j(x_tau)))`` (``a_j = q_j(D) / N``),
an exponential-mechanism draw with ``eps_t = 2 eta (t - 1) / N`` (round 1 is free). The data player
answers with ``x_t = argmax_x sum_{j in S_t} q_j(x)``, solved exactly here by max-sum variable
elimination (:func:`max_sum_ve`) instead of the authors' CPLEX ILP.

Two arms on the same transcript:

* **original**: the ``T`` records ``x_1..x_T`` as a synthetic :class:`~pgmjax.Dataset` (its answers
  are ``(N / T) sum_t q(x_t)``: :mod:`pgmjax.metrics` rescales a synthetic dataset to the true total).
* **+PGM** (McKenna, Sheldon, Miklau, ICML 2019, the DualQuery experiment): the graphical model whose
  marginals minimise the negative log-likelihood of the sampled queries (spec 5.5),
  ``NLL(a) = sum_t [s logsumexp_k z_t(k) - <h_t, z_t>]``, ``z_t = eta ((t - 1) a - C_t)``, with
  ``a_j(mu) = <w_j, mu_Cj> / N`` and ``a_{not j} = 1 - a_j`` (:meth:`DualQueryTranscript.loss`).

The query class is the rows of a :class:`~pgmjax.Workload`'s factored queries (each row a counting
query on its clique, entries in ``[0, 1]``: Prefix, identity, Total, Value, Range, ... qualify) plus
their negations. Convention: the paper's (and the OCaml code's) sign, used alike in the sampler and
the likelihood.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import api
from ..dataset import Dataset
from ..domain import Clique, Domain
from ..programs import MAX_LIVE_PROGRAMS, release_compiled
from ..privacy import (
    Accountant,
    _positive,
    advanced_composition,
    advanced_composition_hetero,
    dualquery_epsilon,
    dualquery_rounds,
)
from ..privacy import check_key as _check_key
from ..workload import Workload
from .options import check_epsilon, engine_options
from .result import MechanismResult

__all__ = ["dualquery", "dualquery_plan", "DualQueryTranscript", "TranscriptLoss", "max_sum_ve", "simulate"]

_BOUNDS = {"b2": "advanced", "heterogeneous": "advanced_heterogeneous"}
_WHERE = "dualquery"
_RESERVED_ESTIMATE_OPTIONS = ("iters", "method", "loss", "total", "cliques", "dtype", "step_size", "measurements", "domain", "warm_start")


# ---------------------------------------------------------------------------------------------------
# The query class: workload rows and their negations
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    clique: Clique
    mats: tuple[np.ndarray | None, ...]  # per attribute, None = identity
    cols: tuple[np.ndarray, ...]  # per attribute, dense (rows_i, size_i) (identity materialised)
    row_shape: tuple[int, ...]
    offset: int
    rows: int


class _Queries:
    """The ``R`` workload rows (indices ``0..R-1``) and their negations (``R..2R-1``)."""

    def __init__(self, workload: Workload, domain: Domain, where: str = _WHERE):
        blocks, offset = [], 0
        for i, q in enumerate(workload.queries):
            lo, hi = 1.0, 1.0  # range of the Kronecker row entries: products of per-factor ranges
            cols = []
            for a, m in zip(q.clique, q.matrices):
                dense = np.eye(domain[a]) if m is None else np.asarray(m, np.float64)
                flo, fhi = float(dense.min()), float(dense.max())
                ends = (lo * flo, lo * fhi, hi * flo, hi * fhi)
                lo, hi = min(ends) + 0.0, max(ends) + 0.0  # + 0.0: no "-0" in messages
                cols.append(dense)
            if lo < 0 or hi > 1:
                raise ValueError(
                    f"{where}: workload query {i} on {q.clique} has entries in [{lo:g}, {hi:g}]; DualQuery needs "
                    "counting queries with entries in [0, 1] (e.g. Prefix, identity, Range, Value), so that "
                    "q(x) and its negation 1 - q(x) are in [0, 1]"
                )
            row_shape = tuple(c.shape[0] for c in cols)
            rows = math.prod(row_shape)
            blocks.append(_Block(q.clique, tuple(q.matrices), tuple(cols), row_shape, offset, rows))
            offset += rows
        self.domain = domain
        self.blocks: tuple[_Block, ...] = tuple(blocks)
        self.rows = offset  # R
        # The structure as a value: the transcript's loss is compiled once per structure (the query
        # matrices are constants of that program), so equal workloads must compare equal.
        self._key = (
            domain,
            tuple(
                (b.clique, b.row_shape, tuple(None if m is None else (m.shape, hashlib.sha1(np.ascontiguousarray(np.asarray(m, np.float64))).hexdigest()) for m in b.mats))
                for b in self.blocks
            ),
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, _Queries) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @property
    def size(self) -> int:
        """``M = 2R``: the rows and their negations."""
        return 2 * self.rows

    def answers(self, data: Dataset) -> np.ndarray:
        """Counts ``W_b mu_b(D)`` of every row (``R``,), float64."""
        margs = dict(zip(self._cliques(), data.marginals(self._cliques())))
        return np.concatenate([_kron_np(margs[b.clique], b.mats).reshape(-1) for b in self.blocks])

    def _cliques(self) -> list[Clique]:
        return list(dict.fromkeys(b.clique for b in self.blocks))

    def satisfied(self, records, xp=np, dtype=np.float64):
        """``q_r(x)`` of every positive row for records ``(n, d)`` (domain order): ``(n, R)``.

        ``xp=jax.numpy`` builds the same rows inside a traced program (records may be traced).
        """
        records = xp.asarray(records)
        n = records.shape[0]
        out = []
        for b in self.blocks:
            val = xp.ones((n, 1), dtype)
            for a, c in zip(b.clique, b.cols):
                col = xp.asarray(c, dtype)[:, records[:, self.domain.index(a)]].T  # (n, rows_a)
                val = (val[:, :, None] * col[:, None, :]).reshape(n, -1)
            out.append(val)
        return xp.concatenate(out, axis=1)

    def row_values(self, rows: np.ndarray, records: np.ndarray) -> np.ndarray:
        """``q_r(x)`` for the given positive rows only (``K``,) and records ``(n, d)``: ``(n, K)``."""
        rows = np.asarray(rows, np.int64)
        x = np.asarray(records)
        out = np.zeros((x.shape[0], rows.size))
        starts = np.array([b.offset for b in self.blocks])
        owner = np.searchsorted(starts, rows, side="right") - 1
        for bi in np.unique(owner):
            b, sel = self.blocks[bi], np.flatnonzero(owner == bi)
            per_attr = np.unravel_index(rows[sel] - b.offset, b.row_shape)
            val = np.ones((x.shape[0], sel.size))
            for a, c, r in zip(b.clique, b.cols, per_attr):
                val *= c[r][:, x[:, self.domain.index(a)]].T
            out[:, sel] = val
        return out

    def answers_jnp(self, marginals, total) -> jax.Array:
        """Normalised answers ``a = W mu / N`` of the positive rows (``R``,) from ``clique -> marginal``."""
        return jnp.concatenate([_kron_jnp(marginals[b.clique], b.mats).reshape(-1) for b in self.blocks]) / total

    def factors(self, weights: np.ndarray) -> list[tuple[Clique, np.ndarray]]:
        """``sum_r weights_r q_r(x)`` as one table per block (``W_b^T weights_b``), skipping zero blocks."""
        out = []
        for b in self.blocks:
            v = weights[b.offset : b.offset + b.rows]
            if np.any(v != 0):
                out.append((b.clique, _kron_np(v.reshape(b.row_shape), [None if m is None else m.T for m in b.mats])))
        return out

    def best_response(self, histogram: np.ndarray, uniforms: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """A record maximising ``sum_j histogram_j q_j(x)`` over the ``2R`` queries, and that maximum.

        ``q_{not r}(x) = 1 - q_r(x)``, so the objective is ``sum(h_neg) + sum_r (h_pos - h_neg)_r q_r(x)``.
        """
        h = np.asarray(histogram, np.float64)
        R = self.rows
        x, value = max_sum_ve(self.factors(h[:R] - h[R:]), self.domain, uniforms=uniforms)
        return x, value + float(h[R:].sum())


def _kron_np(table: np.ndarray, mats) -> np.ndarray:
    out = np.asarray(table, np.float64)
    for axis, q in enumerate(mats):
        if q is not None:
            out = np.moveaxis(np.tensordot(q, out, axes=([1], [axis])), 0, axis)
    return out


def _kron_jnp(table, mats):
    out = table
    for axis, q in enumerate(mats):
        if q is not None:
            out = jnp.moveaxis(jnp.tensordot(jnp.asarray(q, out.dtype), out, axes=([1], [axis])), 0, axis)
    return out


# ---------------------------------------------------------------------------------------------------
# Best response: exact max-sum variable elimination
# ---------------------------------------------------------------------------------------------------


def _expand(scope: tuple[int, ...], table: np.ndarray, union: tuple[int, ...]) -> np.ndarray:
    """``table`` (axes ``scope``) as a broadcastable array over the axes ``union``."""
    order = sorted(range(len(scope)), key=lambda i: union.index(scope[i]))
    t = np.transpose(table, order)
    shape = [t.shape[order.index(scope.index(v))] if v in scope else 1 for v in union]
    return t.reshape(shape)


def max_sum_ve(
    factors: Sequence[tuple[Sequence[str], np.ndarray]],
    domain: Domain,
    *,
    uniforms: np.ndarray | None = None,
    tol: float = 1e-9,
) -> tuple[np.ndarray, float]:
    """Exact ``argmax_x sum_f f(x_Cf)`` by max-sum variable elimination with traceback.

    Eliminates the attributes in a greedy order (each step the one whose combined table is smallest),
    max-marginalising the sum of the factors that mention it, then traces the argmax back in reverse
    order (spec 5.3; the data player's best response of DualQuery). The cost is exponential only in
    the induced width of the factors' cliques. Ties are broken by ``uniforms`` (post-processing; any
    maximiser is a valid best response): attribute ``i`` takes the ``floor(u_i k)``-th of its ``k``
    tied values (within ``tol`` relative), or the first when ``uniforms`` is None. Attributes in no
    factor are free and chosen the same way.

    Args:
        factors: ``(clique, table)`` pairs, each table with one axis per clique attribute (in order).
        domain: the domain; the record covers all of its attributes.
        uniforms: optional numbers in ``[0, 1)``, one per domain attribute (domain order).
        tol: relative tolerance for ties.

    Returns:
        ``(record, value)``: an int64 array with one value per domain attribute (domain order) and
        the maximum of the sum.

    Example:
        >>> dom = Domain({"a": 2, "b": 3})
        >>> max_sum_ve([(("a",), np.array([0.0, 1.0])), (("a", "b"), np.array([[5.0, 0, 0], [0, 0, 2]]))], dom)
        (array([0, 0]), 5.0)
    """
    d = len(domain)
    if uniforms is not None:
        uniforms = np.asarray(uniforms, np.float64)
        if uniforms.shape != (d,) or np.any(uniforms < 0) or np.any(uniforms >= 1):
            raise ValueError(f"max_sum_ve: uniforms must be {d} numbers in [0, 1), one per attribute")
    pool: list[tuple[tuple[int, ...], np.ndarray]] = []
    scale = 0.0
    for clique, table in factors:
        clique = domain.check_clique(clique, what="max_sum_ve: factor clique")
        t = np.asarray(table, np.float64)
        if t.shape != domain.shape_of(clique):
            raise ValueError(f"max_sum_ve: factor on {clique} has shape {t.shape}, expected {domain.shape_of(clique)}")
        if len(set(clique)) != len(clique):
            raise ValueError(f"max_sum_ve: factor clique {clique} repeats an attribute")
        pool.append((tuple(domain.index(a) for a in clique), t))
        scale += float(np.abs(t).max()) if t.size else 0.0
    sizes = domain.shape
    eps = tol * max(scale, 1.0)

    def pick(i: int, values: np.ndarray) -> int:
        best = values.max()
        ties = np.flatnonzero(values >= best - eps)
        return int(ties[0] if uniforms is None else ties[int(uniforms[i] * ties.size)])

    trace: list[tuple[int, tuple[int, ...], np.ndarray]] = []  # (variable, union scope, combined table)
    constant = 0.0
    remaining = set(v for scope, _ in pool for v in scope)
    while remaining:

        def cost(v):
            union = set().union(*(scope for scope, _ in pool if v in scope))
            return math.prod(sizes[u] for u in union), v

        v = min(remaining, key=cost)
        mine = [f for f in pool if v in f[0]]
        pool = [f for f in pool if v not in f[0]]
        union = tuple(sorted(set().union(*(scope for scope, _ in mine))))
        g = sum(_expand(scope, t, union) for scope, t in mine)
        g = np.broadcast_to(g, tuple(sizes[u] for u in union))
        trace.append((v, union, g))
        msg_scope = tuple(u for u in union if u != v)
        msg = g.max(axis=union.index(v))
        if msg_scope:
            pool.append((msg_scope, msg))
        else:
            constant += float(msg)
        remaining.discard(v)
    constant += sum(float(t) for scope, t in pool if not scope)

    x = np.full(d, -1, np.int64)
    for v, union, g in reversed(trace):
        idx = tuple(slice(None) if u == v else x[u] for u in union)
        x[v] = pick(v, np.asarray(g[idx]))
    for i in range(d):
        if x[i] < 0:  # in no factor: every value ties
            x[i] = pick(i, np.zeros(sizes[i]))
    return x, constant


# ---------------------------------------------------------------------------------------------------
# The transcript and its likelihood
# ---------------------------------------------------------------------------------------------------


class DualQueryTranscript:
    """What DualQuery released: the sampled queries of every round and the best responses.

    Everything here is a function of the released samples (the records are deterministic functions of
    them, given the tie-breaking uniforms), so the likelihood below is post-processing.

    Attributes:
        queries: the query class (``R`` workload rows, then their ``R`` negations; ``M = 2R``).
        draws: ``(T, s)`` int64 indices into the ``M`` queries, round by round.
        records: ``(T, d)`` int64 best responses ``x_t`` (domain order).
        eta: the learning rate the sampler used.
        samples: ``s``.
        total: ``N``, the public number of records.
    """

    def __init__(self, queries: _Queries, draws: np.ndarray, records: np.ndarray, eta: float, samples: int, total: float):
        self.queries = queries
        self.draws = np.asarray(draws, np.int64).reshape(-1, samples)
        self.records = np.asarray(records, np.int64).reshape(self.draws.shape[0], len(queries.domain))
        self.eta = float(eta)
        self.samples = int(samples)
        self.total = float(total)

    @property
    def rounds(self) -> int:
        return self.draws.shape[0]

    @property
    def size(self) -> int:
        """``M``, the number of queries (rows and negations)."""
        return self.queries.size

    def histograms(self) -> np.ndarray:
        """``h_t(j)``: how often query ``j`` was drawn in round ``t``, ``(T, M)``."""
        return np.stack([np.bincount(d, minlength=self.size) for d in self.draws]).astype(np.float64)

    def satisfied(self) -> np.ndarray:
        """``c_t(j) = q_j(x_t)``, ``(T, M)`` (negations: ``1 - q``)."""
        c = self.queries.satisfied(self.records)
        return np.concatenate([c, 1.0 - c], axis=1)

    def cumulative(self) -> np.ndarray:
        """``C_t = sum_{tau < t} c_tau``, ``(T, M)`` (zero in round 1)."""
        c = self.satisfied()
        return np.cumsum(c, axis=0) - c

    def answers(self, marginals: Mapping) -> jax.Array:
        """The full answer vector ``a(mu)`` (``M``,): ``<w_j, mu_Cj> / N`` then ``1 - a``.

        Args:
            marginals: ``clique -> marginal`` (counts, axes in the workload clique's order), e.g. a
                dict or the view a callable loss of :func:`pgmjax.estimate` receives.
        """
        a = self.queries.answers_jnp(marginals, self.total)
        return jnp.concatenate([a, 1.0 - a])

    def nll(self, a) -> jax.Array:
        """Negative log-likelihood of the draws as a function of the full answer vector ``a`` (``M``,).

        ``sum_t [s logsumexp_k z_t(k) - <h_t, z_t>]``, ``z_t = eta ((t - 1) a - C_t)`` (spec 5.5; the
        log-probability of the ordered draws, the uniform ``w_1`` cancelling). Convex in ``a``;
        differentiable with JAX.
        """
        a = jnp.asarray(a)
        dt = a.dtype
        tm1 = jnp.arange(self.rounds, dtype=dt)[:, None]
        z = self.eta * (tm1 * a[None, :] - jnp.asarray(self.cumulative(), dt))
        h = jnp.asarray(self.histograms(), dt)
        return jnp.sum(self.samples * jax.nn.logsumexp(z, axis=1) - jnp.sum(h * z, axis=1))

    def probabilities(self, a) -> np.ndarray:
        """``p_t(a) = softmax(z_t)``, ``(T, M)`` (float64)."""
        a = np.asarray(a, np.float64)
        z = self.eta * (np.arange(self.rounds)[:, None] * a[None, :] - self.cumulative())
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def nll_grad(self, a) -> np.ndarray:
        """The closed-form gradient ``dNLL/da = eta sum_t (t - 1) (s p_t(a) - h_t)`` (spec 5.5), float64."""
        tm1 = np.arange(self.rounds, dtype=np.float64)[:, None]
        return self.eta * np.sum(tm1 * (self.samples * self.probabilities(a) - self.histograms()), axis=0)

    def lipschitz(self) -> float:
        """A bound on the curvature of :meth:`loss` in the marginals (L1 -> Linf norms).

        ``mu -> a`` moves each answer by at most ``||d mu||_1 / N`` and the Hessian of ``s lse(z_t)``
        in ``z_t`` maps Linf to Linf with norm at most ``2 s``, so ``L <= 2 s eta^2 sum_t (t-1)^2 / N^2``.
        """
        return 2.0 * self.samples * self.eta**2 * float(np.sum(np.arange(self.rounds, dtype=np.float64) ** 2)) / self.total**2

    def loss(self) -> "TranscriptLoss":
        """The NLL as a loss of the marginals, for ``pgmjax.estimate(..., loss=transcript.loss())``.

        Same value as ``nll(answers(mu))`` but computed on the ``R`` rows only: the negations' logits
        are the rows' logits negated (``C_t(not j) = (t - 1) - C_t(j)``), and the linear term is
        pre-summed over rounds. The log-partition term streams over the rounds
        (:func:`_transcript_log_partition`): ``C_t`` is rebuilt round by round from the ``T`` records and
        the small per-attribute factors, so neither the program nor its gradient holds a ``T x R``
        array (on Loans, ``R`` = 4.0M and ``T`` = 55: 0.9 GB in float32), only a few of size ``R``.

        Returns:
            A :class:`TranscriptLoss`, a callable ``marginals (clique -> table) -> scalar`` whose numbers
            are pytree leaves: the engine compiles it once per query structure and round bucket.
        """
        T, R = self.rounds, self.queries.rows
        # <h_t, z_t> = <h_pos - h_neg, z_pos>: only the drawn rows enter, so the linear term is built
        # from the T x s draws (no T x R array on the host either).
        row = np.where(self.draws < R, self.draws, self.draws - R)  # (T, s)
        sign = np.where(self.draws < R, 1.0, -1.0)
        g_lin = np.zeros(R)
        np.add.at(g_lin, row, np.arange(T, dtype=np.float64)[:, None] * sign)
        drawn, where = np.unique(row, return_inverse=True)
        c = self.queries.row_values(drawn, self.records)  # (T, drawn rows)
        cum = np.cumsum(c, axis=0) - c
        g_const = float(np.sum(sign * np.take_along_axis(cum, where.reshape(row.shape), axis=1)))
        # Rounds padded to a power of two (at least 16): the scan's length is part of the program, the
        # number of rounds (a function of epsilon) is not. Padded rounds are masked out.
        padded = max(16, 1 << max(T - 1, 0).bit_length())
        records = np.zeros((padded, len(self.queries.domain)), np.int32)
        records[:T] = self.records
        active = np.arange(padded) < T
        numbers = (g_lin, np.float64(g_const), records, active, np.float64(self.eta), np.float64(self.samples), np.float64(self.total))
        return TranscriptLoss(self.queries, numbers)


@jax.tree_util.register_pytree_node_class
class TranscriptLoss:
    """A DualQuery transcript's negative log-likelihood as a loss of the marginals (spec 5.5).

    ``loss(mu) = s sum_t logsumexp([z_t, -z_t]) - eta (<g, a(mu)> - g0)``, ``z_t = eta (t a(mu) - C_t)``,
    ``a(mu) = W mu / N`` (ICML 2019, DualQuery+PGM). Structure (the query class) is static and hashed
    by value; the numbers (the linear term ``g``, ``g0``, the padded records, the round mask, ``eta``,
    ``s``, ``N``) are pytree leaves, so :func:`pgmjax.estimate` compiles one program per query
    structure and round bucket, not one per run.

    Attributes:
        queries: the query class (static).
        numbers: ``(g_lin (R,), g_const, records (T_pad, d) int32, active (T_pad,) bool, eta, samples, total)``.

    Example:
        >>> import pgmjax as pj
        >>> dom = pj.Domain({"a": 2, "b": 3})
        >>> w = pj.Workload.benchmark(dom, [("a", "b")], numeric=[])
        >>> tr = simulate(w, np.full(6, 1 / 6), key=jax.random.key(0), eta=1.0, samples=5, rounds=3)
        >>> loss = tr.loss()
        >>> mu = {("a", "b"): jnp.full((2, 3), 1 / 6)}
        >>> bool(jnp.isclose(loss(mu), tr.nll(tr.answers(mu))))
        True
    """

    def __init__(self, queries: _Queries, numbers: tuple):
        self.queries = queries
        self.numbers = tuple(numbers)

    def tree_flatten(self):
        return self.numbers, self.queries

    @classmethod
    def tree_unflatten(cls, queries, numbers):
        return cls(queries, numbers)

    def __call__(self, marginals) -> jax.Array:
        g_lin, g_const, records, active, eta, samples, total = self.numbers
        a = self.queries.answers_jnp(marginals, 1.0)  # / 1.0 is exact: the division below rounds as before
        dt = a.dtype
        a = a / jnp.asarray(total, dt)
        eta = jnp.asarray(eta, dt)
        value = _transcript_log_partition(self.queries, a, jnp.asarray(records), jnp.asarray(active), eta)
        return jnp.asarray(samples, dt) * value - eta * (jnp.dot(jnp.asarray(g_lin, dt), a) - jnp.asarray(g_const, dt))


def _log_partition_sweep(queries: _Queries, a, records, active, eta, with_grad: bool):
    """``sum_t logsumexp([z_t, -z_t])`` over the active rounds and (``with_grad``) its gradient in ``a``."""
    dt = a.dtype

    def body(carry, inputs):
        cum, value, grad = carry
        t, x, on = inputs
        z = eta * (t * a - cum)
        m = jnp.max(jnp.abs(z))
        pos, neg = jnp.exp(z - m), jnp.exp(-z - m)
        norm = jnp.sum(pos) + jnp.sum(neg)
        value = jnp.where(on, value + m + jnp.log(norm), value)
        if with_grad:
            grad = jnp.where(on, grad + (eta * t / norm) * (pos - neg), grad)
        return (cum + queries.satisfied(x[None, :], xp=jnp, dtype=dt)[0], value, grad), None

    init = (jnp.zeros_like(a), jnp.zeros((), dt), jnp.zeros_like(a) if with_grad else jnp.zeros((), dt))
    steps = (jnp.arange(records.shape[0], dtype=dt), records, active)
    (_, value, grad), _ = jax.lax.scan(body, init, steps)
    return value, grad


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _transcript_log_partition(queries: _Queries, a, records, active, eta):
    """``a -> sum_t logsumexp([z_t, -z_t])``, ``z_t = eta (t a - C_t)`` (``t = 0..T-1``), streamed over rounds.

    A ``lax.scan`` over the (padded) rounds carries ``C_t`` (``R``,) and adds the record ``x_t``'s row
    values (a Kronecker product of per-attribute columns per block) after each round; rounds with
    ``active`` False add nothing. The gradient in ``a``, ``eta sum_t t (softmax_t(rows) -
    softmax_t(negations))`` (spec 5.5), is accumulated in the same pass (a ``custom_vjp``), reusing the
    forward's exponentials: 2 exponentials per row and round in all, and memory ``O(R)``. The records,
    mask and ``eta`` are not differentiated.
    """
    return _log_partition_sweep(queries, a, records, active, eta, False)[0]


def _log_partition_forward(queries, a, records, active, eta):
    return _log_partition_sweep(queries, a, records, active, eta, True)  # (value, residual = the gradient)


def _log_partition_backward(queries, grad, cotangent):
    return (cotangent * grad, None, None, None)


_transcript_log_partition.defvjp(_log_partition_forward, _log_partition_backward)


# ---------------------------------------------------------------------------------------------------
# Parameters and privacy
# ---------------------------------------------------------------------------------------------------


def _ledger_total(T: int, eta: float, samples: int, records: float, delta: float, bound: str) -> float:
    """What an advanced-composition Accountant reports after rounds ``2..T`` of ``samples`` draws.

    The same arithmetic as :class:`~pgmjax.privacy.Accountant` (the smaller of basic and advanced
    composition; per-draw ``eps_t = 2 eta (t - 1) / N``), so the calibrated spend is the ledger's.
    """
    eps = [2 * eta * (t - 1) / records for t in range(2, T + 1)]
    basic = math.fsum(samples * e for e in eps)
    try:
        if bound == "b2":
            adv = advanced_composition(max(eps), samples * (T - 1), delta)
        else:
            adv = advanced_composition_hetero(eps, delta, counts=[samples] * (T - 1))
    except OverflowError:  # e^eps_t past the largest double: the advanced bound is infinite, basic applies
        adv = math.inf
    return min(basic, adv)


def dualquery_plan(
    epsilon: float,
    delta: float,
    *,
    records: int,
    eta: float = 2.0,
    samples: int = 50,
    rounds: int | None = None,
    bound: str = "b2",
) -> dict:
    """DualQuery's rounds and learning rate for an ``(epsilon, delta)`` budget (spec 5.4).

    ``rounds=None`` takes the largest ``T`` with ``eps(T) <= epsilon`` at the given ``eta``
    (:func:`~pgmjax.privacy.dualquery_rounds`; Adult ``N = 48842, eta = 2, s = 50, delta = 1e-3,
    epsilon = 1``: ``T = 58`` with ``b2``, ``T = 83`` heterogeneous). Because ``T`` is an integer,
    ``eps(T) < epsilon`` in general; the run then raises the learning rate to ``eta_used >= eta``, the
    largest at which the ``T`` rounds cost ``epsilon`` (to float precision) under the chosen bound, so
    the whole budget is spent, as every pgmjax front-end does.

    Args:
        epsilon, delta: the budget.
        records: ``N`` (public).
        eta: learning rate (the smallest the run may use).
        samples: ``s``, queries drawn per round.
        rounds: ``T``; None solves for it.
        bound: ``"b2"`` (the authors' ``epsilon_delta_b2``; default) or ``"heterogeneous"``.

    Returns:
        ``{"rounds": T, "eta": eta, "eta_used": ..., "epsilon_at_eta": eps(T) at eta, "epsilon": the
        spend at eta_used}``.

    Example:
        >>> p = dualquery_plan(1.0, 1e-3, records=48842)
        >>> p["rounds"], round(p["epsilon_at_eta"], 5), p["eta_used"] > 2.0
        (58, 0.98854, True)
    """
    where = "dualquery_plan"
    if bound not in _BOUNDS:
        raise ValueError(f"{where}: bound must be 'b2' or 'heterogeneous', got {bound!r}")
    # dualquery_epsilon validates epsilon-free arguments (eta, samples, records, delta) with clear errors.
    dualquery_epsilon(1, eta=eta, samples=samples, records=records, delta=delta, form=bound)
    epsilon = _positive(epsilon, "epsilon", where)
    eta, records = float(eta), float(records)
    if rounds is None:
        T = dualquery_rounds(epsilon, eta=eta, samples=samples, records=records, delta=delta, form=bound)
        if T < 2:
            cost2 = dualquery_epsilon(2, eta=eta, samples=samples, records=records, delta=delta, form=bound)
            raise ValueError(
                f"{where}: even 2 rounds cost epsilon {cost2:.4g} > {epsilon:g} at eta={eta:g}, samples={samples}, "
                f"N={records:g} (round 1 reads no data); lower eta or samples"
            )
    else:
        if isinstance(rounds, (bool, np.bool_)) or not isinstance(rounds, (int, np.integer)) or rounds < 2:
            raise ValueError(f"{where}: rounds must be an integer >= 2 (round 1 reads no data), got {rounds!r}")
        T = int(rounds)
    at_eta = _ledger_total(T, eta, samples, records, delta, bound)
    if at_eta > epsilon:
        raise ValueError(
            f"{where}: rounds={T} at eta={eta:g}, samples={samples} cost epsilon {at_eta:.6g} > {epsilon:g} "
            f"({bound} bound, delta={delta:g}, N={records:g}); lower rounds, eta or samples"
        )
    # Largest eta with cost <= epsilon: the cost increases with eta; bisect to adjacent floats.
    lo, hi = eta, 2 * eta
    while _ledger_total(T, hi, samples, records, delta, bound) <= epsilon:
        lo, hi = hi, 2 * hi
    while True:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if _ledger_total(T, mid, samples, records, delta, bound) <= epsilon else (lo, mid)
    return {
        "rounds": T,
        "eta": eta,
        "eta_used": lo,
        "epsilon_at_eta": at_eta,
        "epsilon": _ledger_total(T, lo, samples, records, delta, bound),
    }


# ---------------------------------------------------------------------------------------------------
# The game
# ---------------------------------------------------------------------------------------------------


def _play(queries: _Queries, answers: np.ndarray, *, eta: float, samples: int, rounds: int, key, draw):
    """Run the game for ``rounds`` rounds; ``draw(key, t, qualities)`` returns ``samples`` indices.

    ``qualities`` are the cumulative payoffs ``u_t = (t - 1) a - C_t`` of the rows followed by their
    negations (``-u_t``): the sampler draws from ``softmax(eta * qualities)``.
    """
    R = queries.rows
    C = np.zeros(R)
    draws, records, values = [], [], []
    # split(key, n)[:rounds] == split(key, rounds) (threefry counters): splitting into a power-of-two
    # bucket and indexing on the host compiles one program per bucket, not one per number of rounds.
    bucket = max(16, 1 << max(rounds - 1, 0).bit_length())
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    keys = np.asarray(jax.random.key_data(jax.random.split(key, bucket)) if typed else jax.random.split(key, bucket))
    for t in range(1, rounds + 1):
        k_t = jax.random.wrap_key_data(keys[t - 1], impl=jax.random.key_impl(key)) if typed else jnp.asarray(keys[t - 1])
        k_draw, k_tie = jax.random.split(k_t)
        u = (t - 1) * answers - C
        idx = np.asarray(draw(k_draw, t, np.concatenate([u, -u])), np.int64).reshape(samples)
        hist = np.bincount(idx, minlength=2 * R).astype(np.float64)
        uniforms = np.asarray(jax.random.uniform(k_tie, (len(queries.domain),), dtype=jnp.float32), np.float64)
        x, value = queries.best_response(hist, np.minimum(uniforms, np.nextafter(1.0, 0.0)))
        C += queries.satisfied(x[None, :])[0]
        draws.append(idx)
        records.append(x)
        values.append(value)
    return np.stack(draws), np.stack(records), np.asarray(values)


def simulate(workload: Workload, answers, *, key, eta: float, samples: int, rounds: int) -> DualQueryTranscript:
    """A DualQuery transcript for given normalised answers, sampled without privacy accounting.

    For testing the likelihood (e.g. its minimiser approaches ``answers`` as ``rounds`` and ``samples``
    grow). Draws with ``jax.random.categorical`` on the log-weights ``eta * u_t``.

    Args:
        workload: the query class's rows.
        answers: ``a`` of the positive rows (``R``,), in ``[0, 1]``.
        key, eta, samples, rounds: as in :func:`dualquery`.

    Returns:
        A :class:`DualQueryTranscript` (``total = 1``).
    """
    queries = _Queries(workload, workload.domain, "simulate")
    a = np.asarray(answers, np.float64)
    if a.shape != (queries.rows,):
        raise ValueError(f"simulate: answers must have one entry per workload row ({queries.rows}), got shape {a.shape}")

    def draw(k, t, q):
        return jax.random.categorical(k, jnp.asarray(eta * q), shape=(samples,))

    draws, records, _ = _play(queries, a, eta=eta, samples=samples, rounds=rounds, key=key, draw=draw)
    return DualQueryTranscript(queries, draws, records, eta, samples, 1.0)


# ---------------------------------------------------------------------------------------------------
# The front-end
# ---------------------------------------------------------------------------------------------------


def dualquery(
    data: Dataset,
    epsilon: float,
    delta: float,
    *,
    key,
    workload: Workload,
    eta: float = 2.0,
    samples: int = 50,
    rounds: int | None = None,
    bound: str = "b2",
    pgm_iters: int = 1000,
    pgm_method: str = "mirror_descent",
    pgm_step_size: float | None = None,
    dtype=None,
    estimate_options: Mapping | None = None,
) -> MechanismResult:
    """DualQuery and DualQuery+PGM on the same transcript (spec 5; Gaboardi et al., ICML 2014).

    Query class: the rows of ``workload``'s factored queries (each a counting query with entries in
    ``[0, 1]``) and their negations, ``M = 2R`` queries; ``N = len(data)`` is public (replace-one
    neighbours). Round ``t = 1..T``: draw ``s`` queries from the multiplicative weights
    ``w_t(j) ∝ exp(eta_used u_t(j))``, ``u_t = (t - 1) a - C_t`` (paper Algorithm 1, the exponential
    mechanism with ``eps_t = 2 eta_used (t - 1) / N`` per draw, recorded in the ledger; round 1 is
    uniform and reads no data); best-respond with the record satisfying the most sampled queries
    (exact max-sum variable elimination, :func:`max_sum_ve`); update ``C``. Privacy by advanced
    composition (``bound="b2"``: ``eps0 sqrt(2 k ln(1/delta)) + k eps0 (e^eps0 - 1)``, ``eps0 = 2 eta
    (T - 1) / N``, ``k = s (T - 1)``; ``"heterogeneous"``: per-round ``eps_t``), spent exactly:
    see :func:`dualquery_plan` for ``T`` and ``eta_used``.

    Arms: ``original`` = the ``T`` records as a :class:`~pgmjax.Dataset` (answers scaled to ``N`` by
    :mod:`pgmjax.metrics`); ``model`` = :func:`pgmjax.estimate` with the transcript's negative
    log-likelihood as the loss (:meth:`DualQueryTranscript.loss`, ICML 2019 DualQuery+PGM), the
    workload cliques as model cliques and ``total = N``.

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: privacy budget, ``> 0``.
        delta: in ``(0, 1)``.
        key: a ``jax.random`` key (sampling, tie-breaking, synthetic data).
        workload: a :class:`~pgmjax.Workload` on ``data``'s domain whose rows are counting queries.
        eta: multiplicative-weights learning rate (the run may use a larger ``eta_used``, see above).
        samples: ``s``, queries drawn per round.
        rounds: ``T``; None solves the largest ``T`` with ``eps(T) <= epsilon`` at ``eta``.
        bound: ``"b2"`` (default, as the 2019 experiments) or ``"heterogeneous"`` (tighter).
        pgm_iters: iterations of the engine. The transcript's likelihood is a noisy objective, so more
            is not better past a point: on the Stroke benchmark the workload error is lowest near 500-1000
            iterations and rises by about 10% at 4000 while the likelihood keeps improving
            (``bench/dualquery_convergence.py``); a fixed budget acts as early stopping.
        pgm_method: the engine's method (``"mirror_descent"`` or ``"lbfgs"``).
        pgm_step_size: initial mirror-descent step (default ``1 / (L N)`` with
            :meth:`DualQueryTranscript.lipschitz`; a line search adapts it).
        dtype: the engine's float type (default float32).
        estimate_options: more keyword arguments for :func:`pgmjax.estimate` (``callback``, ``progress``,
            ``tol``, ``chunk``); the loss, total, cliques, iterations, method, step size and dtype are set
            by the arguments above.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (+PGM), ``synthetic`` (``N``
        records from it), ``measurements=[]`` (the engine's input is the transcript,
        ``info["transcript"]``), ``original`` (the ``T`` records), ``accountant`` and ``info``
        (rounds, eta, eta_used, samples, bound, queries ``M``, per-round satisfied counts, seconds).

    Example:
        >>> w = pj.Workload.benchmark(data.domain, pj.datasets.ADULT_CLIQUES, pj.datasets.NUMERIC["adult"])  # doctest: +SKIP
        >>> res = dualquery(data, 1.0, 1e-3, key=jax.random.key(0), workload=w)                            # doctest: +SKIP
        >>> res.info["rounds"], pj.metrics.workload_error(w, data, res.original), pj.metrics.workload_error(w, data, res.model)  # doctest: +SKIP
    """
    where = _WHERE
    start = time.perf_counter()
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    check_epsilon(_positive(epsilon, "epsilon", where), where)
    _check_key(key, where)
    if not isinstance(workload, Workload):
        raise TypeError(f"{where}: workload must be a pgmjax.Workload, got {type(workload).__name__}")
    for c in set(workload.cliques):
        for a in c:
            if a not in data.domain or data.domain[a] != workload.domain[a]:
                raise ValueError(f"{where}: workload clique {c}: attribute {a!r} is missing from, or sized differently in, the data's domain")
    if bound not in _BOUNDS:
        raise ValueError(f"{where}: bound must be 'b2' or 'heterogeneous', got {bound!r}")
    if isinstance(samples, (bool, np.bool_)) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"{where}: samples must be a positive integer, got {samples!r}")
    if isinstance(pgm_iters, (bool, np.bool_)) or not isinstance(pgm_iters, (int, np.integer)) or pgm_iters < 0:
        raise ValueError(f"{where}: pgm_iters must be a non-negative integer, got {pgm_iters!r}")
    if pgm_method not in ("mirror_descent", "lbfgs"):
        raise ValueError(f"{where}: pgm_method must be 'mirror_descent' or 'lbfgs' (dual averaging needs the L2 loss), got {pgm_method!r}")
    if pgm_step_size is not None:
        _positive(pgm_step_size, "pgm_step_size", where)
    options = engine_options(estimate_options, _RESERVED_ESTIMATE_OPTIONS, where,
                             hint="; use pgm_iters=, pgm_method=, pgm_step_size= and dtype= instead")
    fdtype = jnp.dtype(dtype or jnp.float32)
    if fdtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"{where}: dtype must be float32 or float64, got {fdtype}")
    if fdtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError(f'{where}: dtype float64 needs jax.config.update("jax_enable_x64", True) before any computation')
    N = len(data)
    if N == 0:
        raise ValueError(f"{where}: data has no records")
    queries = _Queries(workload, data.domain, where)
    plan = dualquery_plan(epsilon, delta, records=N, eta=eta, samples=samples, rounds=rounds, bound=bound)
    T, eta_used = plan["rounds"], plan["eta_used"]

    acc = Accountant(epsilon=float(epsilon), delta=float(delta), bounded=True, composition=_BOUNDS[bound])
    answers = queries.answers(data) / N  # private; read only through acc.exponential below
    M = queries.size

    def draw(k, t, qualities):
        if t == 1:  # uniform weights: no data read, no cost
            return jax.random.categorical(k, jnp.zeros(M), shape=(samples,))
        # P(j) ∝ exp(eps_t q_j / (2 Delta_t)) = exp(eta_used u_t(j)): the multiplicative weights.
        return acc.exponential(
            k,
            qualities,
            sensitivity=(t - 1) / N,
            epsilon=2 * eta_used * (t - 1) / N,
            num=samples,
            target=f"round {t}: {samples} queries of {M}",
        )

    k_game, k_synth = jax.random.split(key)
    draws, records, values = _play(queries, answers, eta=eta_used, samples=samples, rounds=T, key=k_game, draw=draw)
    t_game = time.perf_counter() - start
    transcript = DualQueryTranscript(queries, draws, records, eta_used, samples, N)
    original = Dataset(records, data.domain)

    if pgm_step_size is None:
        pgm_step_size = 1.0 / (transcript.lipschitz() * N)
    release_compiled(above=MAX_LIVE_PROGRAMS)  # a sweep over many structures: free the dead ones, keep a bounded number
    model = api.estimate(
        data.domain,
        [],
        method=pgm_method,
        iters=int(pgm_iters),
        loss=transcript.loss(),
        total=N,
        cliques=list(dict.fromkeys(workload.cliques)),
        dtype=dtype,
        step_size=pgm_step_size,
        **options,
    )
    t_fit = time.perf_counter() - start - t_game
    synthetic = model.synthetic_data(max(1, int(round(model.total))), k_synth)
    info = {
        "rounds": T,
        "eta": plan["eta"],
        "eta_used": eta_used,
        "samples": samples,
        "bound": bound,
        "delta": float(delta),
        "epsilon_at_eta": plan["epsilon_at_eta"],
        "epsilon_spent": acc.spent,
        "queries": M,
        "satisfied": values,
        "transcript": transcript,
        "pgm_iters": int(pgm_iters),
        "seconds": {"game": t_game, "fit": t_fit, "total": time.perf_counter() - start},
    }
    return MechanismResult(
        mechanism="dualquery",
        model=model,
        synthetic=synthetic,
        measurements=[],
        accountant=acc,
        original=original,
        original_error=None,
        info=info,
    )
