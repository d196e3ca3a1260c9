"""Building blocks of factored (Kronecker) queries: one matrix per attribute.

A factored query over attributes ``a_1 .. a_k`` is ``Q = Q_1 ⊗ ... ⊗ Q_k``;
applied to the full distribution it gives ``sum_x p(x) prod_i Q_i[r_i, x_i]``.
Attributes a query does not name are summed out. These constructors are the
building blocks of Table 2 of McKenna, Sheldon & Miklau, "Graphical-model
based estimation and inference for differential privacy" (ICML 2019,
arXiv 1901.09136). Each one is a small frozen description resolved against an
attribute's size by :func:`factor_matrix`, so a query can be written before the
domain is at hand:

    >>> import pgmjax as pj
    >>> q = {"age": pj.queries.Prefix(), "sex": pj.queries.Value(1)}
    >>> # model.answer(q): how many records are at most each age, among sex == 1

:class:`Identity` ("keep the attribute") is special-cased by the inference
code and never materialised; :class:`Total` is the same as not naming the
attribute. A plain array of shape ``(rows, size)`` is accepted anywhere a
constructor is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..data.domain import Clique, Domain
from .linear import kron_apply  # noqa: F401  (re-exported: ``pgmjax.queries.kron_apply``)


class QueryFactor:
    """A per-attribute query matrix described independently of the attribute's size."""

    def matrix(self, size: int) -> np.ndarray:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError


@dataclass(frozen=True)
class Identity(QueryFactor):
    """Keep the attribute: one output axis per value (``I_n``)."""

    def matrix(self, size: int) -> np.ndarray:
        return np.eye(size)


@dataclass(frozen=True)
class Total(QueryFactor):
    """Sum the attribute out (the row of ones ``1_n^T``)."""

    def matrix(self, size: int) -> np.ndarray:
        return np.ones((1, size))


@dataclass(frozen=True)
class Value(QueryFactor):
    """Indicator of one value (evidence ``x_a = value``): the row ``e_value^T``."""

    value: int

    def matrix(self, size: int) -> np.ndarray:
        _check_values("Value", [self.value], size)
        out = np.zeros((1, size))
        out[0, self.value] = 1.0
        return out


@dataclass(frozen=True)
class ValueSet(QueryFactor):
    """Indicator of a set of values (predicate ``x_a in values``): one row."""

    values: tuple[int, ...]

    def __init__(self, values: Sequence[int]):
        object.__setattr__(self, "values", tuple(int(v) for v in values))

    def matrix(self, size: int) -> np.ndarray:
        _check_values("ValueSet", self.values, size)
        out = np.zeros((1, size))
        out[0, list(self.values)] = 1.0
        return out


@dataclass(frozen=True)
class Prefix(QueryFactor):
    """Prefix sums / empirical CDF: row ``k`` counts the values ``<= k`` (lower-triangular ones)."""

    def matrix(self, size: int) -> np.ndarray:
        return np.tril(np.ones((size, size)))


@dataclass(frozen=True)
class Range(QueryFactor):
    """One range ``lo <= x_a <= hi`` (inclusive): a single row."""

    lo: int
    hi: int

    def matrix(self, size: int) -> np.ndarray:
        if not 0 <= self.lo <= self.hi < size:
            raise ValueError(f"Range({self.lo}, {self.hi}): need 0 <= lo <= hi < {size}")
        out = np.zeros((1, size))
        out[0, self.lo : self.hi + 1] = 1.0
        return out


@dataclass(frozen=True)
class AllRange(QueryFactor):
    """Every range ``[lo, hi]``: ``n (n + 1) / 2`` rows, ordered by ``lo`` then ``hi``."""

    def matrix(self, size: int) -> np.ndarray:
        lo, hi = np.triu_indices(size)
        cols = np.arange(size)
        return ((cols >= lo[:, None]) & (cols <= hi[:, None])).astype(np.float64)


@dataclass(frozen=True)
class Compress(QueryFactor):
    """Domain compression by a mapping ``f``: row ``j`` counts the values ``v`` with ``f(v) == j``.

    Args:
        mapping: ``mapping[v]`` is the new code of value ``v`` (one entry per value).
    """

    mapping: tuple[int, ...]

    def __init__(self, mapping: Sequence[int]):
        object.__setattr__(self, "mapping", tuple(int(v) for v in mapping))

    def matrix(self, size: int) -> np.ndarray:
        if len(self.mapping) != size:
            raise ValueError(f"Compress: the mapping has {len(self.mapping)} entries but the attribute has {size} values")
        if min(self.mapping) < 0:
            raise ValueError("Compress: mapped codes must be non-negative")
        out = np.zeros((max(self.mapping) + 1, size))
        out[list(self.mapping), np.arange(size)] = 1.0
        return out


@dataclass(frozen=True)
class Mean(QueryFactor):
    """The sum of a numeric value over records: the row ``a^T`` (``values[v]`` is value ``v``'s number).

    Divide by the count (the same query with :class:`Total`) for the mean.
    Defaults to the codes ``0 .. n-1``.
    """

    values: tuple[float, ...] | None = None

    def __init__(self, values: Sequence[float] | None = None):
        object.__setattr__(self, "values", None if values is None else tuple(float(v) for v in values))

    def matrix(self, size: int) -> np.ndarray:
        return _numeric_values("Mean", self.values, size)[None, :]


@dataclass(frozen=True)
class Moments(QueryFactor):
    """The first ``k`` raw moments (as sums): rows ``a^1 .. a^k`` (the values raised to powers 1..k)."""

    k: int
    values: tuple[float, ...] | None = None

    def __init__(self, k: int, values: Sequence[float] | None = None):
        if int(k) < 1:
            raise ValueError(f"Moments: k must be at least 1, got {k}")
        object.__setattr__(self, "k", int(k))
        object.__setattr__(self, "values", None if values is None else tuple(float(v) for v in values))

    def matrix(self, size: int) -> np.ndarray:
        a = _numeric_values("Moments", self.values, size)
        return a[None, :] ** np.arange(1, self.k + 1)[:, None]


def _check_values(name: str, values, size: int) -> None:
    for v in values:
        if not 0 <= int(v) < size:
            raise ValueError(f"{name}: value {v} is out of range for an attribute with {size} values")


def _numeric_values(name: str, values, size: int) -> np.ndarray:
    if values is None:
        return np.arange(size, dtype=np.float64)
    if len(values) != size:
        raise ValueError(f"{name}: {len(values)} numeric values given for an attribute with {size} values")
    return np.asarray(values, dtype=np.float64)


def factor_matrix(factor, size: int, attr: str = "?") -> np.ndarray:
    """The dense ``(rows, size)`` matrix of a query factor for an attribute with ``size`` values.

    Args:
        factor: a :class:`QueryFactor`, an array of shape ``(rows, size)`` (or a
            1-D array of ``size`` entries for a single row), or a callable
            ``size -> matrix``.
        size: the attribute's number of values.
        attr: the attribute's name, for error messages.

    Returns:
        A float64 array of shape ``(rows, size)`` with finite entries.
    """
    if isinstance(factor, QueryFactor):
        m = factor.matrix(size)
    elif callable(factor):
        m = np.asarray(factor(size), dtype=np.float64)
    else:
        m = np.asarray(factor, dtype=np.float64)
        if m.ndim == 1:
            m = m[None, :]
    if m.ndim != 2 or m.shape[1] != size:
        raise ValueError(f"query on {attr!r}: expected a matrix with {size} columns (one per value), got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"query on {attr!r}: the matrix has non-finite entries")
    return m


def resolve(domain: Domain, query: Mapping[str, object]) -> tuple[Clique, tuple[np.ndarray | None, ...]]:
    """Check a factored query against a domain.

    Returns:
        ``(attrs, matrices)``: the named attributes in the query's order and one
        matrix per attribute, ``None`` where the factor is :class:`Identity`
        (kept, never materialised). :class:`Total` factors are dropped.
    """
    if not isinstance(query, Mapping):
        raise TypeError(f"a factored query is a mapping attribute -> query factor, got {type(query).__name__}")
    attrs, mats = [], []
    for attr, factor in query.items():
        domain.check_clique((attr,), what="query on")
        if isinstance(factor, Total):
            continue
        attrs.append(attr)
        mats.append(None if isinstance(factor, Identity) else factor_matrix(factor, domain[attr], attr))
    return tuple(attrs), tuple(mats)
