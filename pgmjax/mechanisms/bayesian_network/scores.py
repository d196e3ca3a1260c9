"""PrivBayes' scores of a candidate ``(X, Pi)``: mutual information, ``R`` and ``F``, and the exponential mechanism's quality.

Zhang, Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via Bayesian
Networks", ACM TODS 42(4) 2017 (SIGMOD 2014), Section 4: ``I`` (4.1), ``F`` (4.2) and ``R`` (4.3);
under add/remove neighbours the quality is ``N R`` or ``N F`` (see :mod:`.sensitivity`).
"""

from __future__ import annotations

import numpy as np

from ...data.dataset import Dataset

SCORES = ("R", "I", "F")


def _as_joint(joint) -> np.ndarray:
    """Counts as a 2-D ``(child values, parent configurations)`` array."""
    c = np.asarray(joint, np.float64)
    if c.ndim == 0:
        raise ValueError("a score needs a table whose first axis is the child")
    return c.reshape(c.shape[0], -1)


def mutual_information(joint) -> float:
    """Mutual information ``I(X; Pi)`` in bits of the distribution given by counts ``joint``.

    Args:
        joint: counts (or probabilities), first axis the child ``X``, the other axes the parents.

    Returns:
        ``sum p(x, pi) log2(p(x, pi) / (p(x) p(pi)))`` (0 for an empty table).

    Example:
        >>> mutual_information([[5, 0], [0, 5]])
        1.0
    """
    c = _as_joint(joint)
    n = c.sum()
    if n <= 0:
        return 0.0
    cx = c.sum(axis=1, keepdims=True)
    cp = c.sum(axis=0, keepdims=True)
    nz = c > 0
    ratio = (c * n)[nz] / (cx * cp)[nz]
    return float(np.sum(c[nz] / n * np.log2(ratio)))


def r_score(joint) -> float:
    """The ``R`` score ``1/2 ||Pr[X, Pi] - Pr[X] Pr[Pi]||_1`` (TODS paper, Section 4.3).

    Args:
        joint: counts, first axis the child ``X``, the other axes the parents.

    Returns:
        The score in ``[0, 1)`` (0 for an empty table). The authors' C++ omits the 1/2 and doubles
        the sensitivity: the same mechanism.

    Example:
        >>> r_score([[5, 0], [0, 5]])
        0.5
    """
    c = _as_joint(joint)
    n = c.sum()
    if n <= 0:
        return 0.0
    p = c / n
    return float(0.5 * np.abs(p - p.sum(axis=1, keepdims=True) * p.sum(axis=0, keepdims=True)).sum())


def f_score(joint) -> float:
    """The ``F`` score of a binary child (TODS paper, Section 4.2; the authors' C++ ``getF``).

    ``F(X, Pi) = -1/2 min ||Pr[X, Pi] - Pr°||_1`` over the joints ``Pr°`` in which ``X`` is a function
    of ``Pi`` and uniform (the joints of maximal ``I(X; Pi)``). Mapping each parent configuration
    ``pi`` to one value of ``X`` keeps ``c(f(pi), pi)`` in place; at most half the mass may end on each
    value, so ``F = (max_f [min(A_f, C) + min(B_f, C)] - N) / N`` with ``A_f = sum_{f(pi)=0} c(0, pi)``,
    ``B_f = sum_{f(pi)=1} c(1, pi)`` and ``C = floor((N + 1) / 2)``: a knapsack solved by dynamic
    programming over the configurations, keeping for every capped ``A`` the largest capped ``B``.

    Args:
        joint: integer counts, first axis the binary child, the other axes the parents.

    Returns:
        ``F`` in ``[-1/2, 0]`` (0 when ``X`` is a balanced function of ``Pi``).

    Example:
        >>> f_score([[5, 0], [0, 5]]), f_score([[3, 2], [2, 3]])
        (0.0, -0.4)
    """
    c = _as_joint(joint)
    if c.shape[0] != 2:
        raise ValueError(f"f_score: the child must be binary, got {c.shape[0]} values")
    if np.any(c != np.round(c)) or np.any(c < 0):
        raise ValueError("f_score: needs non-negative integer counts")
    c = c.astype(np.int64)
    n = int(c.sum())
    if n == 0:
        return 0.0
    cap = (n + 1) // 2
    best_b = np.full(cap + 1, -1, np.int64)  # best_b[a]: the largest capped B reachable with capped A = a
    best_b[0] = 0
    for c0, c1 in c.T:
        to_one = np.where(best_b >= 0, np.minimum(best_b + c1, cap), -1)
        to_zero = np.full_like(best_b, -1)
        if c0 <= cap:
            to_zero[c0:] = best_b[: cap + 1 - c0]
        to_zero[cap] = best_b[max(cap - c0, 0) :].max()  # every A reaching the cap lands on it
        best_b = np.maximum(to_one, to_zero)
    a = np.arange(cap + 1)
    return float((a + best_b)[best_b >= 0].max() - n) / n


def sparse_quality(data: Dataset, child: str, parents: tuple[str, ...], score: str, bounded: bool) -> float:
    """:func:`score_quality` of ``(child, parents)`` from the joint's non-empty cells (``data.cell_counts``),
    in ``O(N log N)`` whatever the table size.

    Only the non-zero cells of the joint enter: for ``R``, the zero cells contribute
    ``sum_zero p(x) p(pi) = 1 - sum_nonzero p(x) p(pi)`` (the product distribution sums to 1), so
    ``R = 1/2 (sum_nz |p(x, pi) - p(x) p(pi)| + 1 - sum_nz p(x) p(pi))``; the mutual information is a sum
    over non-zero cells already. Used for tables with more cells than ``4 N`` (at a large budget the
    candidate tables reach ``max_cells``: dense scoring then costs ``O(cells)`` time and memory each).
    """
    dom = data.domain
    # The joint's non-empty cells (a group-by of the engine for a Polars or Dask table), ordered by (child, parents).
    cells, c = data.cell_counts((child, *parents))
    n = len(data)
    xs, pc = np.divmod(cells, dom.size(parents) if parents else 1)
    _, ps = np.unique(pc, return_inverse=True)
    ps = ps.reshape(-1)
    p_counts = np.bincount(ps, weights=c).astype(np.int64)
    cx = np.bincount(xs, weights=c, minlength=dom[child]).astype(np.float64)
    c = c.astype(np.float64)
    if score == "R":
        prod = cx[xs] / n * (p_counts[ps] / n)
        r = 0.5 * (np.abs(c / n - prod).sum() + max(1.0 - prod.sum(), 0.0))
        return float(r if bounded else r * n)
    # "I" (bounded only; checked by the caller)
    return float(np.sum(c / n * np.log2(c * n / (cx[xs] * p_counts[ps]))))


def score_quality(joint, score: str, bounded: bool) -> float:
    """The exponential mechanism's quality of one candidate ``(X, Pi)`` from its exact counts.

    * ``bounded=True``: the paper's score on normalised distributions (:func:`r_score`,
      :func:`mutual_information` or :func:`f_score`).
    * ``bounded=False``: ``N * r_score`` or ``N * f_score`` (``N`` = the table's total), whose
      add/remove sensitivities are constants (:func:`score_sensitivity`).

    Example:
        >>> score_quality([[5, 0], [0, 5]], "R", bounded=False)
        5.0
    """
    if score == "R":
        r = r_score(joint)
        return r if bounded else r * float(np.sum(joint))
    if score == "I":
        if not bounded:
            raise ValueError(MI_UNBOUNDED)
        return mutual_information(joint)
    if score == "F":
        f = f_score(joint)
        return f if bounded else f * float(np.sum(joint))
    raise ValueError(f"unknown score {score!r}; expected one of {SCORES}")


MI_UNBOUNDED = (
    "score='I' needs bounded=True: the mutual-information sensitivity (TODS Lemma 4.1) assumes "
    "replace-one neighbours with N public; under add/remove one record can change N*I by about "
    "log2(N), which has no data-independent bound. Use score='R' or bounded=True."
)
