"""Sensitivities of marginals and of linear queries on marginals, under either neighbouring convention.

``bounded=False`` (default) is add/remove-one-record neighbours (the record count ``N`` is private);
``bounded=True`` is replace-one (``N`` public). A query on the marginal ``mu_C`` of a clique is given
as None (the marginal itself), a dense ``(rows, cells)`` matrix, or a tuple of per-attribute matrices
whose Kronecker product is the query (:func:`parse_query`). The sensitivity is a column norm of the
query matrix: adding or removing one record moves ``mu_C`` by one unit vector (Dwork, McSherry, Nissim &
Smith 2006, "Calibrating noise to sensitivity in private data analysis", Definition 1; Bun & Steinke
2016, "Concentrated differential privacy: simplifications, extensions, and lower bounds", Proposition 1.6).

Example:
    >>> l1_sensitivity((np.ones((1, 2)), np.eye(3)))     # column norms multiply over Kronecker factors
    1.0
    >>> l1_sensitivity(np.ones((1, 4)), bounded=True)    # one total query, replace-one neighbours
    2.0
"""

from __future__ import annotations

import math

import numpy as np

from ..queries.linear import LinearQuery
from ..checks import check_bool, check_values

__all__ = ["parse_query", "l1_sensitivity", "l2_sensitivity"]


def parse_query(query, where: str):
    """A query on a marginal, validated: ``("identity", None)``, ``("dense", Q)`` or ``("kron", (Q_1, ..., Q_k))``.

    Args:
        query: None (the marginal itself), a dense ``(rows, cells)`` matrix (a 1-D array is one row),
            or a tuple/list of non-empty 2-D per-attribute matrices (their Kronecker product).
        where: the function that received it, for the error message.

    Returns:
        ``(kind, q)``: ``kind`` is ``"identity"``, ``"dense"`` or ``"kron"``; ``q`` is None, a float64
        matrix, or a tuple of float64 matrices.

    Example:
        >>> parse_query(np.array([1, 1, 0]), "f")                 # a 1-D array is one dense row
        ('dense', array([[1., 1., 0.]]))
    """

    if query is None:
        return "identity", None
    if isinstance(query, (tuple, list)):
        if len(query) == 0:
            raise ValueError(f"{where}: a Kronecker query needs at least one factor")
        factors = []
        for i, f in enumerate(query):
            f = check_values(f, where, f"query factor {i}")
            if f.ndim != 2 or f.size == 0:
                raise ValueError(f"{where}: query factor {i} must be a non-empty 2-D matrix, got shape {f.shape}")
            factors.append(f)
        return "kron", tuple(factors)
    q = check_values(query, where, "query")
    if q.ndim == 1:
        q = q[None, :]  # one query row
    if q.ndim != 2 or q.size == 0:
        raise ValueError(f"{where}: a dense query must be a non-empty (rows, cells) matrix, got shape {q.shape}")
    return "dense", q


def _gram_nonnegative(m: np.ndarray) -> bool:
    """Whether every pair of columns has a non-negative inner product (checked cheaply when possible)."""
    if np.all(m >= 0) or np.all(m <= 0):
        return True
    if m.shape[1] <= 2048:
        return bool(np.all(m.T @ m >= 0))
    return False


def l1_sensitivity(query=None, *, bounded: bool = False) -> float:
    """L1 sensitivity of a marginal, or of a linear query on a marginal (Dwork et al. 2006, Definition 1).

    Adding or removing one record changes the marginal ``mu_C`` by one unit vector ``e_j``, so
    ``Q mu_C`` moves by column ``j`` of ``Q``: the sensitivity is the largest column L1 norm
    ``||Q||_1`` (1 for the marginal itself). Replacing one record moves it by ``Q (e_j - e_k)``,
    bounded by ``2 ||Q||_1`` (as in the reference code; the exact value
    ``max_{j != k} ||Q_j - Q_k||_1`` can be smaller, e.g. 1 for a single 0/1 counting query: pass
    your own proven ``sensitivity=`` to the mechanism if you need it). For a Kronecker query the
    columns are Kronecker products of the factors' columns, so ``||Q_1 x ... x Q_k||_1 = prod ||Q_i||_1``.

    Args:
        query: None (the marginal), a dense matrix ``(rows, cells)`` (a 1-D array is one row), or a
            tuple of per-attribute matrices whose Kronecker product is the query.
        bounded: False for add/remove-one neighbours, True for replace-one.

    Returns:
        The L1 sensitivity.

    Example:
        >>> l1_sensitivity(), l1_sensitivity(bounded=True)
        (1.0, 2.0)
        >>> l1_sensitivity(np.tril(np.ones((4, 4))))       # prefix queries: the first column has 4 ones
        4.0
    """
    where = "l1_sensitivity"
    bounded = check_bool(bounded, "bounded", where)
    kind, q = parse_query(query, where)
    base = LinearQuery.of(q).sensitivity(1)  # the largest column L1 norm (a Kronecker query's: the product)
    return 2.0 * base if bounded else base


def l2_sensitivity(query=None, *, bounded: bool = False) -> float:
    """L2 sensitivity of a marginal, or of a linear query on a marginal (Bun & Steinke 2016, Proposition 1.6).

    Add/remove-one: the largest column L2 norm ``||Q||_{1->2}`` (1 for the marginal). Replace-one:
    ``||Q (e_j - e_k)||_2^2 = ||Q_j||^2 + ||Q_k||^2 - 2 <Q_j, Q_k>``, which is at most
    ``2 ||Q||_{1->2}^2`` when no two columns have a negative inner product (every marginal, every
    non-negative query: ``sqrt(2)``) and at most ``(2 ||Q||_{1->2})^2`` otherwise;
    this function returns that bound (``sqrt(2)`` or ``2`` times the column norm). A Kronecker query's
    column norm is the product of its factors', and its Gram matrix is non-negative when every
    factor's is.

    Args:
        query: None, a dense matrix ``(rows, cells)`` (1-D: one row), or a tuple of per-attribute
            matrices (Kronecker product).
        bounded: False for add/remove-one neighbours, True for replace-one.

    Returns:
        The L2 sensitivity.

    Example:
        >>> l2_sensitivity(), round(l2_sensitivity(bounded=True), 6)
        (1.0, 1.414214)
    """
    where = "l2_sensitivity"
    bounded = check_bool(bounded, "bounded", where)
    kind, q = parse_query(query, where)
    base = LinearQuery.of(q).sensitivity(2)  # the largest column L2 norm (a Kronecker query's: the product)
    if kind == "identity":
        nonneg = True
    elif kind == "dense":
        nonneg = _gram_nonnegative(q) if bounded else True
    else:
        nonneg = all(_gram_nonnegative(f) for f in q) if bounded else True
    if not bounded:
        return base
    return (math.sqrt(2.0) if nonneg else 2.0) * base
