"""DualQuery's query class and its data player (Gaboardi et al., ICML 2014; see :mod:`pgmjax.mechanisms.dual_query`).

The rows of a workload's factored queries and their negations (:class:`QueryBlocks`, hashed by value: the
transcript's likelihood is compiled once per query structure), and the data player's best response,
solved exactly by max-sum variable elimination (:func:`max_sum_ve`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ...data.dataset import Dataset
from ...data.domain import Clique, Domain
from ...graph.max_sum import max_sum_ve  # the record player's best response (a shared piece: MLDP uses it too)
from ...queries.linear import LinearQuery, kron_apply
from ...queries.workload import Workload

_WHERE = "dualquery"

# ---------------------------------------------------------------------------------------------------
# The query class: workload rows and their negations
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    clique: Clique
    query: LinearQuery  # the workload entry's Kronecker query (a None factor keeps its attribute)
    cols: tuple[np.ndarray, ...]  # per attribute, dense (rows_i, size_i) (identity materialised)
    row_shape: tuple[int, ...]
    offset: int
    rows: int

    @property
    def mats(self) -> tuple[np.ndarray | None, ...]:
        """The per-attribute matrices, None for the identity."""
        return self.query.matrices


class QueryBlocks:
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
            query = LinearQuery.kron(tuple(q.matrices), sizes=domain.shape_of(q.clique))
            blocks.append(_Block(q.clique, query, tuple(cols), row_shape, offset, rows))
            offset += rows
        self.domain = domain
        self.blocks: tuple[_Block, ...] = tuple(blocks)
        self.rows = offset  # R
        # The structure as a value: the transcript's loss is compiled once per structure (the query
        # matrices are constants of that program), so equal workloads must compare equal.
        self._key = (domain, tuple((b.clique, b.query.fingerprint()) for b in self.blocks))

    def __eq__(self, other) -> bool:
        return isinstance(other, QueryBlocks) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @property
    def size(self) -> int:
        """``M = 2R``: the rows and their negations."""
        return 2 * self.rows

    def answers(self, data: Dataset) -> np.ndarray:
        """Counts ``W_b mu_b(D)`` of every row (``R``,), float64."""
        margs = dict(zip(self._cliques(), data.marginals(self._cliques())))
        return np.concatenate([b.query.apply(margs[b.clique]) for b in self.blocks])

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
        return jnp.concatenate([b.query.apply(marginals[b.clique]) for b in self.blocks]) / total

    def factors(self, weights: np.ndarray) -> list[tuple[Clique, np.ndarray]]:
        """``sum_r weights_r q_r(x)`` as one table per block (``W_b^T weights_b``), skipping zero blocks."""
        out = []
        for b in self.blocks:
            v = weights[b.offset : b.offset + b.rows]
            if np.any(v != 0):
                out.append((b.clique, b.query.transpose(v)))
        return out

    def best_response(self, histogram: np.ndarray, uniforms: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """A record maximising ``sum_j histogram_j q_j(x)`` over the ``2R`` queries, and that maximum.

        ``q_{not r}(x) = 1 - q_r(x)``, so the objective is ``sum(h_neg) + sum_r (h_pos - h_neg)_r q_r(x)``.
        """
        h = np.asarray(histogram, np.float64)
        R = self.rows
        x, value = max_sum_ve(self.factors(h[:R] - h[R:]), self.domain, uniforms=uniforms)
        return x, value + float(h[R:].sum())


kron_np = kron_apply  # the name the tests know it by
