"""Per-attribute factor matrices of HDMM's workloads and strategies, and the Kronecker helpers that combine them.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018: a workload or strategy on a multi-dimensional table is a
Kronecker product ``A_1 (x) ... (x) A_d`` of small per-attribute matrices (the paper's implicit
representation), so the product is never formed.
This module holds the standard per-attribute building blocks (Identity, Total, Prefix, AllRange, ...), their
closed-form Grams, and the argument checks and Kronecker helpers shared by the rest of the sub-package.
Tables are C-ordered with the clique's first attribute slowest.

Example:
    >>> prefix(3)
    array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 1., 1.]])
    >>> bool(np.allclose(prefix_gram(5), prefix(5).T @ prefix(5)))
    True
"""

from __future__ import annotations

import functools

import numpy as np

from ...queries.linear import LinearQuery

__all__ = [
    "identity",
    "total",
    "prefix",
    "suffix",
    "allrange",
    "identity_total",
    "width_k_range",
    "prefix_gram",
    "allrange_gram",
]

NOISES = ("laplace", "gaussian")


def check_noise(noise: str) -> str:
    """``noise`` if it is one of :data:`NOISES` (``"laplace"``, ``"gaussian"``), else ValueError."""
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    return noise


def check_n(n) -> int:
    """A domain size as an ``int``; ValueError unless it is a positive integer (bools rejected)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"a domain size must be a positive integer, got {n!r}")
    return int(n)


def identity(n: int) -> np.ndarray:
    """``Identity(n)``: every cell on its own, shape ``(n, n)``."""
    return np.eye(check_n(n))


def total(n: int) -> np.ndarray:
    """``Total(n)``: the sum of all cells, shape ``(1, n)`` (an attribute summed out)."""
    return np.ones((1, check_n(n)))


def prefix(n: int) -> np.ndarray:
    """``Prefix(n)``: the ``n`` prefix sums (CDF), lower-triangular ones of shape ``(n, n)``."""
    return np.tril(np.ones((check_n(n), n)))


def suffix(n: int) -> np.ndarray:
    """``Suffix(n)``: the ``n`` suffix sums, upper-triangular ones of shape ``(n, n)``."""
    return np.triu(np.ones((check_n(n), n)))


def allrange(n: int) -> np.ndarray:
    """``AllRange(n)``: all ``n(n+1)/2`` intervals ``[i, j]``, shape ``(n(n+1)/2, n)``.

    Dense; for large ``n`` give the Gram :func:`allrange_gram` to :func:`opt_0` instead.
    """
    n = check_n(n)
    i, j = np.triu_indices(n)
    cols = np.arange(n)
    return ((cols[None, :] >= i[:, None]) & (cols[None, :] <= j[:, None])).astype(np.float64)


def identity_total(n: int) -> np.ndarray:
    """``IdentityTotal(n)``: the identity and the total, shape ``(n + 1, n)``."""
    return np.vstack([identity(n), total(n)])


def width_k_range(n: int, k: int) -> np.ndarray:
    """All ``n - k + 1`` ranges of width ``k``, shape ``(n - k + 1, n)``."""
    n = check_n(n)
    if not 1 <= k <= n:
        raise ValueError(f"width_k_range: need 1 <= k <= n, got k={k}, n={n}")
    rows = np.arange(n - k + 1)
    cols = np.arange(n)
    return ((cols[None, :] >= rows[:, None]) & (cols[None, :] < rows[:, None] + k)).astype(np.float64)


def prefix_gram(n: int) -> np.ndarray:
    """``Prefix(n)^T Prefix(n)`` in closed form: entry ``(i, j) = n - max(i, j)``."""
    idx = np.arange(check_n(n))
    return (n - np.maximum(idx[:, None], idx[None, :])).astype(np.float64)


def allrange_gram(n: int) -> np.ndarray:
    """``AllRange(n)^T AllRange(n)`` in closed form: entry ``(i, j) = (min(i, j) + 1) * (n - max(i, j))``."""
    idx = np.arange(check_n(n))
    return ((np.minimum(idx[:, None], idx[None, :]) + 1) * (n - np.maximum(idx[:, None], idx[None, :]))).astype(np.float64)


def as_clique(clique) -> tuple[str, ...]:
    """Attribute names as a tuple (a single string is one attribute); each a string, none repeated."""
    if isinstance(clique, str):
        return (clique,)
    clique = tuple(clique)
    for a in clique:
        if not isinstance(a, str):
            raise TypeError(f"attribute names must be strings, got {a!r} in {clique}")
    if len(set(clique)) != len(clique):
        raise ValueError(f"clique {clique}: an attribute appears more than once")
    return clique


def _check_factors(clique, factors, what) -> tuple[np.ndarray, ...]:
    if isinstance(factors, np.ndarray):
        factors = (factors,)
    factors = tuple(np.asarray(f, dtype=np.float64) for f in factors)
    if len(factors) != len(clique):
        raise ValueError(f"{what} on {clique}: needs one matrix per attribute ({len(clique)}), got {len(factors)}")
    for a, f in zip(clique, factors):
        if f.ndim != 2 or f.shape[0] < 1 or f.shape[1] < 1:
            raise ValueError(f"{what} on {clique}: the factor of {a!r} must be a non-empty 2-D matrix, got shape {f.shape}")
        if not np.all(np.isfinite(f)):
            raise ValueError(f"{what} on {clique}: the factor of {a!r} has non-finite entries")
    return factors


def merge_sizes(target: dict, clique, sizes, what):
    """Add ``clique``'s attribute sizes to ``target``; ValueError where an attribute's size disagrees (``what`` names the caller)."""
    for a, n in zip(clique, sizes):
        if a in target and target[a] != n:
            raise ValueError(f"{what}: attribute {a!r} has {target[a]} values in one place and {n} in another")
        target[a] = n


def union_terms(terms, kind: type, owner: str) -> tuple[tuple, dict[str, int]]:
    """``terms`` as a non-empty tuple of ``kind`` objects, with the attribute sizes they agree on."""
    terms = tuple(terms)
    if not terms:
        raise ValueError(f"{owner}: needs at least one {kind.__name__}")
    sizes: dict[str, int] = {}
    for t in terms:
        if not isinstance(t, kind):
            raise TypeError(f"{owner}: terms must be {kind.__name__}, got {type(t).__name__}")
        merge_sizes(sizes, t.clique, t.sizes, owner)
    return terms, sizes


def col_norm(A: np.ndarray, noise: str) -> float:
    """``||A||_1`` (largest column L1 norm, Laplace) or ``||A||_{1->2}`` (largest column L2 norm, Gaussian)."""
    return LinearQuery.from_matrix(A).sensitivity(1 if noise == "laplace" else 2)


class KronTerm:
    """``weight * (F_1 (x) ... (x) F_k)`` on the marginal of ``clique``: what HDMM's Kronecker workloads and
    strategies share (checks, shapes, answers through :class:`pgmjax.queries.linear.LinearQuery`)."""

    __slots__ = ("clique", "factors", "weight")

    def __init__(self, clique, factors, weight: float, what: str, positive: bool):
        self.clique = as_clique(clique)
        if not self.clique:
            raise ValueError(f"{what}: the clique must have at least one attribute")
        self.factors = _check_factors(self.clique, factors, what)
        weight = float(weight)
        if not np.isfinite(weight) or weight < 0 or (positive and weight == 0):
            raise ValueError(f"{what} on {self.clique}: weight must be finite and {'>' if positive else '>='} 0, got {weight}")
        self.weight = weight

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(f.shape[1] for f in self.factors)

    @property
    def rows(self) -> int:
        """Number of queries, ``prod r_i``."""
        return int(np.prod([f.shape[0] for f in self.factors]))

    @property
    def query(self) -> LinearQuery:
        """The Kronecker product of the factors (the weight not included) as a :class:`LinearQuery`."""
        return LinearQuery.kron(self.factors)

    def apply(self, marginal) -> np.ndarray:
        """The (weighted) answers on a table over ``clique`` (axes in clique order), flat ``(rows,)``."""
        return self.weight * self.query.apply(np.asarray(marginal, dtype=np.float64).reshape(self.sizes))


def expand_dense(clique, factors, attributes, sizes) -> np.ndarray:
    """The dense Kronecker matrix of ``factors`` on ``clique`` over all of ``attributes`` (a row of ones for each other attribute)."""
    missing = [a for a in clique if a not in attributes]
    if missing:
        raise ValueError(f"attributes {missing} of {clique} are not among {tuple(attributes)}")
    per = {a: f for a, f in zip(clique, factors)}
    mats = [per[a] if a in per else np.ones((1, sizes[a])) for a in attributes]
    return functools.reduce(np.kron, mats, np.ones((1, 1)))
