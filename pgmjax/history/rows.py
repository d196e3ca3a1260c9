"""Past queries as blocks of rows on cliques, and inner products between them without the full domain.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 3.2-3.4: every estimator of the history is expressed through the weighted inner
product ``<q, q'>_P = sum_t p0(t) q(t) q'(t)`` (eq. 18) with a product prior ``p0(t) = prod_a p0_a(t_a)``
(eq. 19-20, the sum over each attribute restored; uniform ``p0`` gives the dot product divided by the number of
cells). A row supported on a clique ``C`` needs only ``C``'s cells: the inner product of two rows on ``C1`` and
``C2`` is one weighted contraction over ``C1 ∪ C2`` (Theorem 2, eq. 15), never the product domain.

A :class:`RowBlock` is rows of one kind on one clique: ``identity`` (every cell of the marginal), ``dense``
(a matrix over the clique's cells) or ``kron`` (per-attribute factors). :func:`gram` contracts two blocks with
one ``einsum`` whose operands are the blocks' factors and the prior's per-attribute vectors; identity blocks use
identity factors, so the same code serves all kinds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..data.domain import Clique, Domain
from ..queries import factors as queries_mod
from ..queries.linear import LinearQuery
from ..queries.measurement import Measurement

#: Rows of non-identity measurements on one clique are merged into one dense block when it holds at most
#: this many numbers (fewer, larger contractions); larger Kronecker blocks stay factored.
MERGE_LIMIT = 2**24


@dataclass(frozen=True, eq=False)
class RowBlock:
    """Rows of linear queries supported on one clique.

    Attributes:
        clique: the attributes (in the order of the query's axes).
        kind: ``"identity"``, ``"dense"`` or ``"kron"``.
        query: None (identity), an array ``(rows, *clique_shape)`` (dense) or a tuple of per-attribute
            matrices ``(r_a, n_a)`` (kron; rows are their Kronecker product, first attribute slowest).
        shape: the clique's shape.
    """

    clique: Clique
    kind: str
    query: object
    shape: tuple[int, ...]

    @property
    def linear(self) -> LinearQuery:
        """The rows as a :class:`~pgmjax.queries.linear.LinearQuery` on the clique's table."""
        if self.kind == "identity":
            return LinearQuery.identity(self.shape)
        if self.kind == "dense":
            return LinearQuery.from_matrix(self.query.reshape(self.query.shape[0], -1), sizes=self.shape)
        return LinearQuery.kron(self.query)

    @property
    def rows(self) -> int:
        return self.linear.rows

    def operands(self, attr_letter: Mapping[str, str], row_letters: str):
        """einsum operands ``[(array, subscripts)]`` and the row subscripts of this block.

        ``row_letters`` supplies fresh letters for the row axes (one per attribute for identity/kron).
        """
        if self.kind == "dense":
            r = row_letters[0]
            return [(self.query, r + "".join(attr_letter[a] for a in self.clique))], r
        ops, rows = [], ""
        for i, (a, n) in enumerate(zip(self.clique, self.shape)):
            f = np.eye(n) if self.kind == "identity" else self.query[i]
            ops.append((f, row_letters[i] + attr_letter[a]))
            rows += row_letters[i]
        return ops, rows

    def adjoint(self, v: np.ndarray) -> np.ndarray:
        """``Q^T v``: the function ``sum_r v_r q_r`` on the clique's cells, shape ``self.shape``."""
        return self.linear.transpose(v)

    def apply(self, table: np.ndarray) -> np.ndarray:
        """``Q table`` for a function on the clique's cells (shape ``self.shape``): one value per row."""
        return self.linear.apply(table)

    def dense_rows(self) -> np.ndarray:
        """The rows as an array ``(rows, *shape)`` (materialised; for small blocks and checks)."""
        if self.kind == "dense":
            return self.query
        eye = np.eye(self.rows)
        return np.stack([self.adjoint(e) for e in eye])


def uniform_prior(domain: Domain) -> dict[str, np.ndarray]:
    """The uniform product prior ``{attribute: 1/n_a}``.

    Example:
        >>> uniform_prior(Domain({"a": 2}))["a"]
        array([0.5, 0.5])
    """
    return {a: np.full(n, 1.0 / n) for a, n in domain.items()}


def check_prior(domain: Domain, prior, where: str) -> dict[str, np.ndarray]:
    """A product prior ``{attribute: probabilities}`` completed with uniform factors and checked.

    Raises:
        ValueError: an unknown attribute, a wrong length, a negative or non-finite entry, or a factor that
            does not sum to 1 (to 1e-9).
    """
    out = uniform_prior(domain)
    if prior is None:
        return out
    if not isinstance(prior, Mapping):
        raise TypeError(f"{where}: prior must be a mapping attribute -> probability vector, got {type(prior).__name__}")
    for a, p in prior.items():
        if a not in domain:
            raise ValueError(f"{where}: prior names {a!r}, which is not an attribute of the domain")
        p = np.asarray(p, np.float64)
        if p.shape != (domain[a],):
            raise ValueError(f"{where}: prior of {a!r} must have {domain[a]} entries, got shape {p.shape}")
        if not np.all(np.isfinite(p)) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
            raise ValueError(f"{where}: prior of {a!r} must be non-negative and sum to 1, got {p}")
        out[a] = p
    return out


def block_of_measurement(domain: Domain, m: Measurement) -> RowBlock:
    """The rows of one measurement as a block (validated against ``domain``)."""
    m.validate(domain)
    shape = domain.shape_of(m.clique)
    if m.kind == "dense":
        return RowBlock(m.clique, "dense", m.query.reshape((m.rows, *shape)), shape)
    return RowBlock(m.clique, m.kind, m.query, shape)


def block_of_query(domain: Domain, query, where: str = "query") -> RowBlock:
    """A new query as a block: a :class:`~pgmjax.Measurement` (its rows), a factored dict ``{attr: factor}``
    (as in :meth:`pgmjax.GraphicalModel.answer`; unnamed attributes summed out, i.e. factor 1), or a pair
    ``(clique, array)`` with the array ``(cells,)``, ``(rows, cells)`` or ``(rows, *clique_shape)``."""
    if isinstance(query, Measurement):
        return block_of_measurement(domain, query)
    if isinstance(query, Mapping):
        attrs, mats = queries_mod.resolve(domain, query)
        if not attrs:
            return RowBlock((), "dense", np.ones((1,)), ())
        factors = tuple(np.eye(domain[a]) if q is None else q for a, q in zip(attrs, mats))
        return RowBlock(tuple(attrs), "kron", factors, domain.shape_of(attrs))
    if isinstance(query, tuple) and len(query) == 2:
        clique = domain.check_clique(query[0], what=f"{where}: clique")
        shape = domain.shape_of(clique)
        q = np.asarray(query[1], np.float64)
        if q.size % max(1, math.prod(shape)) or q.ndim == 0:
            raise ValueError(f"{where}: the array of shape {q.shape} does not fit the clique {clique} of shape {shape}")
        q = q.reshape((-1, *shape))
        if not np.all(np.isfinite(q)):
            raise ValueError(f"{where}: the query has non-finite entries")
        return RowBlock(clique, "dense", q, shape)
    raise TypeError(f"{where}: expected a Measurement, a factored dict or a (clique, array) pair, got {type(query).__name__}")


def group_blocks(domain: Domain, measurements: Sequence[Measurement]) -> tuple[tuple[RowBlock, ...], np.ndarray]:
    """Blocks for all rows of ``measurements``, non-identity rows on the same attribute set merged.

    Returns:
        ``(blocks, order)``: the blocks' rows concatenated are the measurements' rows concatenated, permuted
        by ``order`` (``rows_in_blocks = rows[order]``).
    """
    offsets = np.cumsum([0] + [m.rows for m in measurements])
    blocks, orders, merge = [], [], {}
    for i, m in enumerate(measurements):
        b = block_of_measurement(domain, m)
        idx = np.arange(offsets[i], offsets[i + 1])
        if b.kind == "identity" or (b.kind == "kron" and b.rows * math.prod(b.shape) > MERGE_LIMIT):
            blocks.append(b)
            orders.append(idx)
            continue
        canon = domain.canonical(b.clique)
        q = b.dense_rows()
        q = np.transpose(q, (0, *(1 + b.clique.index(a) for a in canon)))
        merge.setdefault(canon, []).append((q, idx))
    for canon, parts in merge.items():
        q = np.concatenate([p for p, _ in parts])
        blocks.append(RowBlock(canon, "dense", q, domain.shape_of(canon)))
        orders.append(np.concatenate([o for _, o in parts]))
    order = np.concatenate(orders) if orders else np.zeros(0, np.int64)
    return tuple(blocks), order


def _letters(domain_attrs: Sequence[str]):
    pool = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    if len(domain_attrs) > len(pool) - 8:
        raise ValueError(f"inner products over {len(domain_attrs)} attributes at once are not supported (at most 44)")
    attr_letter = {a: pool[i] for i, a in enumerate(domain_attrs)}
    return attr_letter, "".join(pool[len(domain_attrs):])


def gram(b1: RowBlock, b2: RowBlock, prior: Mapping[str, np.ndarray], diagonal: bool = False) -> np.ndarray:
    """``<q_i, q'_j>_P`` for the rows of two blocks ([CZB] eq. 15 and 18-20), shape ``(r1, r2)``.

    Args:
        b1, b2: the blocks.
        prior: the product prior (complete, see :func:`check_prior`).
        diagonal: with ``b1 is b2`` allowed: only ``<q_i, q_i>_P``, shape ``(r1,)`` (needs equal blocks).

    Example:
        >>> dom = Domain({"a": 2, "b": 2})
        >>> b = RowBlock(("a",), "dense", np.array([[1.0, 0.0]]), (2,))
        >>> float(gram(b, b, uniform_prior(dom))[0, 0])
        0.5
    """
    union = tuple(dict.fromkeys(b1.clique + b2.clique))
    attr_letter, pool = _letters(union)
    n1 = 1 if b1.kind == "dense" else len(b1.clique)
    ops1, rows1 = b1.operands(attr_letter, pool[:n1])
    if diagonal:
        ops2, rows2 = b2.operands(attr_letter, rows1)
        out = rows1
    else:
        ops2, rows2 = b2.operands(attr_letter, pool[n1:])
        out = rows1 + rows2
    ops = ops1 + ops2 + [(prior[a], attr_letter[a]) for a in union]
    spec = ",".join(s for _, s in ops) + "->" + out
    res = np.einsum(spec, *[o for o, _ in ops], optimize="greedy")
    return res.reshape(b1.rows) if diagonal else res.reshape(b1.rows, b2.rows)


def mean(block: RowBlock, prior: Mapping[str, np.ndarray]) -> np.ndarray:
    """``<q_i, u>_P = E_{p0}[q_i]`` for every row (``u`` the all-ones query), shape ``(rows,)``."""
    return block.apply(prior_table(block.clique, prior))


def prior_table(clique: Clique, prior: Mapping[str, np.ndarray]) -> np.ndarray:
    """The prior's marginal on ``clique`` (outer product of its factors), axes in the clique's order."""
    t = np.ones(())
    for a in clique:
        t = np.multiply.outer(t, prior[a])
    return t


def gram_matrix(blocks: Sequence[RowBlock], prior, others: Sequence[RowBlock] | None = None) -> np.ndarray:
    """The kernel ``K`` between all rows of ``blocks`` (and ``others``; default ``blocks``), blockwise."""
    others = blocks if others is None else others
    same = others is blocks
    r1 = np.cumsum([0] + [b.rows for b in blocks])
    r2 = np.cumsum([0] + [b.rows for b in others])
    k = np.empty((r1[-1], r2[-1]))
    for i, b in enumerate(blocks):
        for j, c in enumerate(others):
            if same and j < i:
                k[r1[i]:r1[i + 1], r2[j]:r2[j + 1]] = k[r1[j]:r1[j + 1], r2[i]:r2[i + 1]].T
                continue
            k[r1[i]:r1[i + 1], r2[j]:r2[j + 1]] = gram(b, c, prior)
    return k
