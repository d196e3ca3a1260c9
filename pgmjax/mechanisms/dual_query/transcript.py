"""A DualQuery transcript and its negative log-likelihood (ICML 2019 DualQuery+PGM).

See :mod:`pgmjax.mechanisms.dual_query`. :class:`TranscriptLoss` is the likelihood as a loss of the
marginals for :func:`pgmjax.estimate`: a pytree whose numbers are leaves, so one program serves every
run of a query structure.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from .queries import QueryBlocks

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

    def __init__(self, queries: QueryBlocks, draws: np.ndarray, records: np.ndarray, eta: float, samples: int, total: float):
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

        ``sum_t [s logsumexp_k z_t(k) - <h_t, z_t>]``, ``z_t = eta ((t - 1) a - C_t)`` (McKenna, Sheldon & Miklau, ICML 2019; the
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
        """The closed-form gradient ``dNLL/da = eta sum_t (t - 1) (s p_t(a) - h_t)`` (McKenna, Sheldon & Miklau, ICML 2019), float64."""
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
    """A DualQuery transcript's negative log-likelihood as a loss of the marginals (McKenna, Sheldon & Miklau, ICML 2019).

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
        >>> from pgmjax.mechanisms.dual_query import simulate
        >>> dom = pj.Domain({"a": 2, "b": 3})
        >>> w = pj.Workload.benchmark(dom, [("a", "b")], numeric=[])
        >>> tr = simulate(w, np.full(6, 1 / 6), key=jax.random.key(0), eta=1.0, samples=5, rounds=3)
        >>> loss = tr.loss()
        >>> mu = {("a", "b"): jnp.full((2, 3), 1 / 6)}
        >>> bool(jnp.isclose(loss(mu), tr.nll(tr.answers(mu))))
        True
    """

    def __init__(self, queries: QueryBlocks, numbers: tuple):
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


def _log_partition_sweep(queries: QueryBlocks, a, records, active, eta, with_grad: bool):
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
def _transcript_log_partition(queries: QueryBlocks, a, records, active, eta):
    """``a -> sum_t logsumexp([z_t, -z_t])``, ``z_t = eta (t a - C_t)`` (``t = 0..T-1``), streamed over rounds.

    A ``lax.scan`` over the (padded) rounds carries ``C_t`` (``R``,) and adds the record ``x_t``'s row
    values (a Kronecker product of per-attribute columns per block) after each round; rounds with
    ``active`` False add nothing. The gradient in ``a``, ``eta sum_t t (softmax_t(rows) -
    softmax_t(negations))`` (McKenna, Sheldon & Miklau, ICML 2019), is accumulated in the same pass (a ``custom_vjp``), reusing the
    forward's exponentials: 2 exponentials per row and round in all, and memory ``O(R)``. The records,
    mask and ``eta`` are not differentiated.
    """
    return _log_partition_sweep(queries, a, records, active, eta, False)[0]


def _log_partition_forward(queries, a, records, active, eta):
    return _log_partition_sweep(queries, a, records, active, eta, True)  # (value, residual = the gradient)


def _log_partition_backward(queries, grad, cotangent):
    return (cotangent * grad, None, None, None)


_transcript_log_partition.defvjp(_log_partition_forward, _log_partition_backward)
