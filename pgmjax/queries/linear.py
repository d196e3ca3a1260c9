"""Linear queries on one clique's marginal: the one representation every part of pgmjax applies.

A :class:`LinearQuery` is a matrix ``Q`` with one column per cell of a clique's marginal table ``mu_C``
(C-ordered, the clique's first attribute slowest), in one of four forms:

* ``"identity"``: the marginal itself (``Q = I``);
* ``"dense"``: an explicit ``(rows, cells)`` matrix;
* ``"kron"``: a Kronecker product ``Q_1 (x) ... (x) Q_k`` of per-attribute ``(r_i, n_i)`` matrices, never
  formed (a ``None`` factor keeps its attribute's axis, ``I_{n_i}``);
* ``"stack"``: the rows of several of those on the same table, one after the other.

It has one :meth:`~LinearQuery.apply` (``Q mu``), one :meth:`~LinearQuery.transpose` (``Q^T y``), one
curvature bound (:meth:`~LinearQuery.lipschitz`, the largest eigenvalue of ``Q^T diag(w) Q``), one
sensitivity (:meth:`~LinearQuery.sensitivity`, the largest column norm) and one total rule
(:meth:`~LinearQuery.total_weights`). Kronecker queries are applied mode by mode (McKenna, Miklau, Hay &
Machanavajjhala, "Optimizing error of high-dimensional statistical queries under differential privacy",
PVLDB 2018, Section 4; McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for
differential privacy", ICML 2019, Table 2). The same code runs on NumPy arrays (float64) and on JAX arrays
(traced under ``jit``, no host round trip); a query is a pytree whose numbers are leaves and whose form and
shapes are static, so ``jit`` and ``vmap`` see new numbers without compiling again.

Example:
    >>> q = LinearQuery.kron((np.tril(np.ones((3, 3))), None), sizes=(3, 2))
    >>> q.shape, q.apply(np.arange(6.0)).tolist()
    ((6, 6), [0.0, 1.0, 2.0, 4.0, 6.0, 9.0])
    >>> bool(np.allclose(q.transpose(np.ones(6)).reshape(-1), q.matrix().T @ np.ones(6)))
    True
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["LinearQuery", "kron_apply", "top_eigenvalue", "total_weights"]

KINDS = ("identity", "dense", "kron", "stack")


def _module(*arrays):
    """``jax.numpy`` when any array is a JAX array (or a tracer), else NumPy."""
    return jnp if any(isinstance(a, jax.Array) for a in arrays) else np


def kron_apply(table, matrices: Sequence) -> np.ndarray | jax.Array:
    """Apply per-axis matrices to a table: ``(Q_1 (x) ... (x) Q_k) table``, mode by mode.

    Args:
        table: an array with one axis per matrix (axis ``i`` of size ``Q_i.shape[1]``).
        matrices: one ``(r_i, n_i)`` matrix per axis; ``None`` keeps the axis as it is.

    Returns:
        The table of answers, axis ``i`` of size ``r_i``: a float64 NumPy array, or a JAX array (in the
        table's dtype) when the table or a matrix is one.

    Example:
        >>> kron_apply(np.ones((2, 3)), [None, np.ones((1, 3))]).tolist()
        [[3.0], [3.0]]
    """
    xp = _module(table, *matrices)
    out = jnp.asarray(table) if xp is jnp else np.asarray(table, dtype=np.float64)
    for axis, q in enumerate(matrices):
        if q is not None:
            q = jnp.asarray(q, out.dtype) if xp is jnp else q
            out = xp.moveaxis(xp.tensordot(q, out, axes=([1], [axis])), 0, axis)
    return out


def top_eigenvalue(sym: np.ndarray, iters: int = 200) -> float:
    """The largest eigenvalue of a symmetric positive semi-definite matrix (power iteration above 2048 rows)."""
    n = sym.shape[0]
    if n <= 2048:
        return float(np.linalg.eigvalsh(sym)[-1])
    v = np.random.default_rng(0).normal(size=n)
    lam = 0.0
    for _ in range(iters):
        v = sym @ v
        lam = float(np.linalg.norm(v))
        v /= lam
    return lam


def total_weights(matrix, row_var) -> np.ndarray | None:
    """The minimum-variance ``a`` with ``Q^T a = 1`` (weighted least squares), or None if none exists.

    ``a^T y`` is then an unbiased estimate of the table's total from answers ``y`` with variances ``row_var``
    (McKenna, Sheldon & Miklau, ICML 2019, Appendix E.1). The cost is O(the query's entries), never a
    ``cells x cells`` system: a diagonal query (MST's compressed one-way measurements) in closed form
    (``a = 1 / diag(Q)``), any other by LSQR (Paige & Saunders, ACM TOMS 1982) on ``A^T b = 1`` with
    ``A = diag(row_var)^{-1/2} Q``, which from ``b = 0`` converges to the minimum-norm ``b``, i.e. the
    minimum-variance ``a = diag(row_var)^{-1/2} b``. LSQR is a Python loop of products with ``Q`` and
    ``Q^T``: Ctrl-C interrupts it between iterations.

    Args:
        matrix: the ``(rows, cells)`` query, a NumPy matrix or a :class:`LinearQuery` (applied, never formed).
        row_var: the answers' variances, shape ``(rows,)``.

    Returns:
        ``a``, shape ``(rows,)``, or None when the all-ones vector is not in the query's row space.

    Example:
        >>> total_weights(np.diag([1.0, 0.5]), np.ones(2)).tolist()
        [1.0, 2.0]
        >>> a = total_weights(np.tril(np.ones((3, 3))), np.ones(3))   # prefix sums: the last row is the total
        >>> bool(np.allclose(a, [0, 0, 1]))
        True
    """
    q = matrix if isinstance(matrix, LinearQuery) else LinearQuery.from_matrix(np.asarray(matrix, np.float64))
    row_var = np.asarray(row_var, dtype=np.float64)
    if q.kind == "dense":
        m = np.asarray(q.matrices[0], dtype=np.float64)
        if m.shape[0] == m.shape[1] and np.count_nonzero(m) == np.count_nonzero(np.diagonal(m)):
            diag = np.diagonal(m)  # a diagonal query: each row answers one cell, a = 1 / Q_ii (unique)
            return None if np.any(diag == 0) else 1.0 / diag
    from scipy.sparse.linalg import LinearOperator, lsqr

    rows, cells = q.shape
    root = np.sqrt(row_var)
    op = LinearOperator(
        (cells, rows), dtype=np.float64,
        matvec=lambda b: np.asarray(q.transpose(np.ravel(b) / root), np.float64).reshape(-1),
        rmatvec=lambda x: np.asarray(q.apply(np.ravel(x)), np.float64).reshape(-1) / root,
    )
    ones = np.ones(cells)
    b = lsqr(op, ones, atol=1e-15, btol=1e-15, iter_lim=20 * (rows + cells) + 100)[0]
    a = b / root
    big = np.abs(q.matrices[0]).max() if q.kind == "dense" else q.column_norms(1).max()  # the old dense check's scale
    scale = max(1.0, float(big)) if rows * cells else 1.0
    if not np.allclose(np.asarray(q.transpose(a), np.float64).reshape(-1), ones, atol=1e-6 * scale):
        return None
    return a


def _projector(q) -> np.ndarray:
    """``pinv(q) @ q``, the identity matrix exactly where ``q`` has full column rank."""
    q = np.asarray(q, dtype=np.float64)
    if np.linalg.matrix_rank(q) == q.shape[1]:
        return np.eye(q.shape[1])
    return np.linalg.pinv(q) @ q


@jax.tree_util.register_pytree_node_class
class LinearQuery:
    """Linear queries ``Q`` on one clique's marginal table (see the module docstring for the forms).

    Build one with :meth:`identity`, :meth:`from_matrix`, :meth:`kron`, :meth:`stack` or :meth:`of`.

    Attributes:
        kind: ``"identity"``, ``"dense"``, ``"kron"`` or ``"stack"``.
        matrices: the numbers: ``()`` (identity, stack), ``(Q,)`` (dense) or one matrix or ``None`` per
            attribute (kron).
        terms: the stacked queries (stack), else ``()``.
        sizes: the table's shape, or None where unknown (an identity or dense query built without it).
        row_shape: the answers' shape (kron: ``(r_1, ..., r_k)``), or None where unknown.
    """

    __slots__ = ("kind", "matrices", "terms", "sizes", "row_shape")

    def __init__(self, kind: str, matrices=(), terms=(), sizes=None, row_shape=None):
        if kind not in KINDS:
            raise ValueError(f"LinearQuery: kind must be one of {KINDS}, got {kind!r}")
        self.kind, self.matrices, self.terms = kind, tuple(matrices), tuple(terms)
        self.sizes = None if sizes is None else tuple(int(n) for n in sizes)
        self.row_shape = None if row_shape is None else tuple(int(r) for r in row_shape)

    # Construction ------------------------------------------------------------------------------------
    @classmethod
    def identity(cls, sizes: Sequence[int] | None = None) -> "LinearQuery":
        """The marginal itself, ``Q = I`` (``sizes``: the table's shape, if known)."""
        return cls("identity", sizes=sizes, row_shape=None if sizes is None else (math.prod(sizes),))

    @classmethod
    def from_matrix(cls, matrix, sizes: Sequence[int] | None = None) -> "LinearQuery":
        """An explicit ``(rows, cells)`` matrix (``sizes``: the table's shape, default ``(cells,)``)."""
        return cls("dense", (matrix,), sizes=(matrix.shape[1],) if sizes is None else sizes, row_shape=(matrix.shape[0],))

    @classmethod
    def kron(cls, factors: Sequence, sizes: Sequence[int] | None = None) -> "LinearQuery":
        """``Q_1 (x) ... (x) Q_k`` from one ``(r_i, n_i)`` matrix per attribute (``None``: keep the attribute,
        its size then read from ``sizes``)."""
        factors = tuple(factors)
        if sizes is None:
            if any(f is None for f in factors):
                raise ValueError("LinearQuery.kron: a None (identity) factor needs the attribute sizes")
            sizes = tuple(f.shape[1] for f in factors)
        row_shape = tuple(n if f is None else f.shape[0] for f, n in zip(factors, sizes))
        return cls("kron", factors, sizes=sizes, row_shape=row_shape)

    @classmethod
    def stack(cls, terms: Sequence["LinearQuery"]) -> "LinearQuery":
        """The rows of ``terms`` (queries on the same table) one after the other."""
        terms = tuple(terms)
        sizes = next((t.sizes for t in terms if t.sizes is not None), None)
        rows = None if any(t.rows is None for t in terms) else sum(t.rows for t in terms)
        return cls("stack", terms=terms, sizes=sizes, row_shape=None if rows is None else (rows,))

    @classmethod
    def of(cls, query, sizes: Sequence[int] | None = None) -> "LinearQuery":
        """A query from its usual spellings: None (identity), a dense matrix, a tuple or list of per-attribute
        factors (kron), or a :class:`LinearQuery` (returned as it is)."""
        if isinstance(query, LinearQuery):
            return query
        if query is None:
            return cls.identity(sizes)
        if isinstance(query, (tuple, list)):
            return cls.kron(tuple(None if q is None else np.asarray(q, dtype=np.float64) for q in query), sizes)
        return cls.from_matrix(np.asarray(query, dtype=np.float64), sizes)

    # Pytree: numbers are leaves, the form and the shapes are static ----------------------------------------
    def tree_flatten(self):
        return (self.matrices, self.terms), (self.kind, self.sizes, self.row_shape)

    @classmethod
    def tree_unflatten(cls, aux, children):
        out = object.__new__(cls)
        out.kind, out.sizes, out.row_shape = aux
        out.matrices, out.terms = children
        return out

    # Shapes ------------------------------------------------------------------------------------------------
    @property
    def rows(self) -> int | None:
        """The number of queries (answers), or None where unknown."""
        return None if self.row_shape is None else math.prod(self.row_shape)

    @property
    def cells(self) -> int | None:
        """The number of cells of the table, or None where unknown."""
        return None if self.sizes is None else math.prod(self.sizes)

    @property
    def shape(self) -> tuple:
        """``(rows, cells)``, the shape of the matrix ``Q``."""
        return (self.rows, self.cells)

    def with_sizes(self, sizes: Sequence[int]) -> "LinearQuery":
        """The same query on a table of shape ``sizes`` (fills in an identity's or a dense query's shape)."""
        if self.kind == "identity":
            return LinearQuery.identity(sizes)
        if self.kind == "dense":
            return LinearQuery.from_matrix(self.matrices[0], sizes)
        return self

    # The algebra -------------------------------------------------------------------------------------------
    def apply(self, table):
        """``Q mu``: the answers, flat ``(rows,)``, from the table (its shape or flat).

        NumPy in, float64 NumPy out; a JAX array in (traced or not), a JAX array out.
        """
        xp = _module(table, *jax.tree_util.tree_leaves(self))
        table = table if xp is jnp else np.asarray(table, dtype=np.float64)
        if self.kind == "identity":
            return xp.reshape(table, -1)
        if self.kind == "dense":
            q = self.matrices[0]
            return (jnp.asarray(q, table.dtype) if xp is jnp else q) @ xp.reshape(table, -1)
        if self.kind == "kron":
            return xp.reshape(kron_apply(xp.reshape(table, self.sizes), self.matrices), -1)
        return xp.concatenate([t.apply(table) for t in self.terms])

    def transpose(self, y):
        """``Q^T y``: a table of the query's ``sizes`` (flat where unknown) from answers ``y`` (flat or shaped)."""
        xp = _module(y, *jax.tree_util.tree_leaves(self))
        y = y if xp is jnp else np.asarray(y, dtype=np.float64)
        shape = -1 if self.sizes is None else self.sizes
        if self.kind == "identity":
            return xp.reshape(y, shape)
        if self.kind == "dense":
            q = self.matrices[0]
            return xp.reshape((jnp.asarray(q, y.dtype) if xp is jnp else q).T @ xp.reshape(y, -1), shape)
        if self.kind == "kron":
            return kron_apply(xp.reshape(y, self.row_shape), [None if q is None else q.T for q in self.matrices])
        y = xp.reshape(y, -1)
        bounds = np.cumsum([0] + [t.rows for t in self.terms])
        return sum(t.transpose(y[lo:hi]) for t, lo, hi in zip(self.terms, bounds[:-1], bounds[1:]))

    def row_projector(self) -> "LinearQuery":
        """The orthogonal projector ``Q^+ Q`` onto the row space of ``Q``, as a query on the same table.

        What a fit's parameters on the measured table may move along without leaving the exponential family of
        the queries (:meth:`pgmjax.estimation.problem.Problem.project_rows`). Kronecker: the factors' projectors
        (a projector of a Kronecker product is the product of the factors'); a factor of full column rank gives
        the identity matrix exactly, so a full-rank query's projection changes no number.

        Example:
            >>> merge = np.array([[1.0, 0, 0], [0, 1, 1]])   # values 1 and 2 merged
            >>> LinearQuery.kron([merge]).row_projector().matrix().round(2).tolist()
            [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.5, 0.5]]
        """
        if self.kind == "identity":
            return self
        if self.kind == "kron":
            return LinearQuery.kron([None if q is None else _projector(q) for q in self.matrices], self.sizes)
        return LinearQuery.from_matrix(_projector(self.matrix()), self.sizes)

    def matrix(self) -> np.ndarray:
        """The explicit ``(rows, cells)`` matrix (float64); for small queries only (tests, brute force)."""
        if self.kind == "identity":
            return np.eye(self.cells)
        if self.kind == "dense":
            return np.asarray(self.matrices[0], dtype=np.float64)
        if self.kind == "kron":
            out = np.ones((1, 1))
            for q, n in zip(self.matrices, self.sizes):
                out = np.kron(out, np.eye(n) if q is None else np.asarray(q, dtype=np.float64))
            return out
        return np.vstack([t.matrix() for t in self.terms])

    def lipschitz(self, weights=1.0) -> float:
        """The largest eigenvalue of ``Q^T diag(w) Q`` (``w``: a scalar or one weight per row).

        The curvature of the loss ``1/2 sum_r w_r (Q mu - y)_r^2`` (ICML 2019, Algorithm 2). Exact for the
        identity, for dense queries and for Kronecker queries with one weight (the product of the factors'
        largest eigenvalues); with per-row weights a Kronecker query gives the bound with ``max w``, a
        stack the sum of its terms' values.
        """
        w = np.asarray(weights, dtype=np.float64)
        if self.kind == "identity":
            return float(w.max())
        if self.kind == "kron":
            return float(w.max() * np.prod([1.0 if q is None else top_eigenvalue(q.T @ q) for q in self.matrices]))
        if self.kind == "dense":
            q = np.asarray(self.matrices[0], dtype=np.float64)
            return top_eigenvalue((q * np.broadcast_to(w, (q.shape[0],))[:, None]).T @ q)
        parts = np.split(np.broadcast_to(w, (self.rows,)), np.cumsum([t.rows for t in self.terms])[:-1])
        return float(sum(t.lipschitz(p) for t, p in zip(self.terms, parts)))

    def sensitivity(self, p: int = 1) -> float:
        """The largest column ``p``-norm of ``Q`` (``p`` = 1 or 2): how far one record moves the answers.

        For a Kronecker query the product of the factors' values (a Kronecker column is a product of factor
        columns); for a stack the largest column norm of the stacked matrix.
        """
        if p not in (1, 2):
            raise ValueError(f"LinearQuery.sensitivity: p must be 1 or 2, got {p!r}")
        if self.kind == "identity":
            return 1.0
        if self.kind == "kron":
            return float(np.prod([1.0 if q is None else _root(_column_powers(q, p).max(), p) for q in self.matrices]))
        return float(_root(self._column_powers(p).max(), p))

    def column_norms(self, p: int = 1) -> np.ndarray:
        """The ``p``-norm (``p`` = 1 or 2) of every column of ``Q``: one value per cell, flat ``(cells,)``."""
        return _root(self._column_powers(p), p)

    def _column_powers(self, p: int) -> np.ndarray:
        """``sum_r |Q[r, c]|^p`` for every cell ``c``."""
        if self.kind == "identity":
            return np.ones(self.cells)
        if self.kind == "dense":
            return _column_powers(self.matrices[0], p)
        if self.kind == "kron":
            out = np.ones(1)
            for q, n in zip(self.matrices, self.sizes):
                out = np.kron(out, np.ones(n) if q is None else _column_powers(q, p))
            return out
        return sum(t._column_powers(p) for t in self.terms)

    def total_weights(self, row_var) -> np.ndarray | None:
        """Weights ``a`` with ``Q^T a = 1`` (``a^T y`` estimates the table's total), or None if none exist.

        Minimum variance for the answers' variances ``row_var`` (identity, dense); for a Kronecker query the
        product of the factors' unweighted solutions (ICML 2019, Appendix E.1).
        """
        row_var = np.broadcast_to(np.asarray(row_var, dtype=np.float64), (self.rows,))
        if self.kind == "identity":
            return np.ones(self.rows)
        if self.kind == "kron":
            a = np.ones(1)
            for q, n in zip(self.matrices, self.sizes):
                f = np.ones(n) if q is None else total_weights(np.asarray(q, np.float64), np.ones(q.shape[0]))
                if f is None:
                    return None
                a = np.kron(a, f)
            return a
        return total_weights(self, row_var)  # dense or stack: never a cells x cells system

    # Identity by value ---------------------------------------------------------------------------------------
    def fingerprint(self) -> tuple:
        """A hashable value: the form, the shapes and a digest of the numbers (equal queries, equal values)."""
        digest = tuple(
            None if q is None else (np.shape(q), hashlib.sha1(np.ascontiguousarray(np.asarray(q, np.float64))).hexdigest())
            for q in self.matrices
        )
        return (self.kind, self.sizes, self.row_shape, digest, tuple(t.fingerprint() for t in self.terms))

    def __eq__(self, other) -> bool:
        return isinstance(other, LinearQuery) and self.fingerprint() == other.fingerprint()

    def __hash__(self) -> int:
        return hash((self.kind, self.sizes, self.row_shape))

    def __repr__(self) -> str:
        return f"LinearQuery({self.kind}, rows={self.rows}, sizes={self.sizes})"


def _root(value, p: int):
    return np.sqrt(value) if p == 2 else value


def _column_powers(q, p: int) -> np.ndarray:
    q = np.abs(np.asarray(q, dtype=np.float64))
    return (q if p == 1 else q * q).sum(axis=0)
