"""Private bin edges of a numeric, date or datetime column: a private range, then private quantiles inside it.

Without a public range, :func:`private_edges` runs two steps, each through the accountant:

1. **Range** (:func:`~pgmjax.preprocessing.private_range.range_release`, in :mod:`pgmjax.preprocessing.private_range`): one
   noisy histogram over public coarse cells (``±s 10^k`` for the steps ``s`` of :data:`~pgmjax.preprocessing.private_range.STEPS` for numbers, calendar years for
   dates and datetimes); the range is the span of the cells whose noisy count passes a threshold (an empty
   cell passes with probability at most 1% over all cells), or the whole public range when none passes
   (small tables at small budgets: never a cell picked by noise); runs of 2, 4, 8, ... cells are tested
   too, against the threshold of a sum of noises, so a small table's range is found where no single cell
   passes. The whole histogram costs one Laplace / Gaussian release (Dwork, McSherry, Nissim & Smith, TCC
   2006, Example 1; parallel cells); the blocks are post-processing. Values outside the range are clipped.
2. **Quantiles** (:func:`recursive_quantiles`): the exponential mechanism over public candidate
   edges (McSherry & Talwar, "Mechanism design via differential privacy", FOCS
   2007, Theorem 6; Smith, "Privacy-preserving statistical estimation with optimal convergence
   rates", STOC 2011, Section 3), the levels placed by recursive splitting so that ``m`` levels cost
   ``ceil(log2(m + 1))`` draws (Kaplan, Schnapp & Stemmer, ICML 2022). With the range found first,
   the candidates are a few thousand plausible values instead of every number from -1e12 to 1e12,
   whose sheer count would otherwise swamp the good candidates at small budgets (only the public
   fallback, when no range is found, uses the whole public grid).

Example:
    >>> from pgmjax.privacy import Accountant
    >>> acc = Accountant(epsilon=1.0)
    >>> x = np.random.default_rng(0).integers(18, 91, 3000).astype(float)
    >>> edges = private_edges(acc, jax.random.key(0), x, bins=4, tail=0.02, budget=1.0, kind="number", whole=True)
    >>> bool(15 <= edges[0] <= 25 and 85 <= edges[-1] <= 95), acc.spent
    (True, 1.0)
"""

from __future__ import annotations

import math

import jax
import numpy as np

from ..data.schema_columns import SchemaError
from .private_range import (  # noqa: F401  (re-exported: the range step lives in private_range)
    RANGE_FALSE_PASS,
    RangeRelease,
    noisy_counts,
    private_range,
    range_cells,
    range_release,
)
from .ranks import as_ranks

__all__ = ["DATE_RANGE", "HOURS_PER_DAY", "END_WINDOW", "candidate_edges", "range_cells", "noisy_counts", "private_range", "rank_quality", "quality_from_counts", "private_quantiles",
           "recursive_quantiles", "quantile_rounds", "tail_edges_parts", "private_edges", "rank_error"]

#: Public range of candidate dates: 1900-01-01 .. 2100-12-31 (days since 1970-01-01).
DATE_RANGE = (-25567.0, 47846.0)
#: Candidate edges of datetime columns are whole hours.
HOURS_PER_DAY = 24
#: The clipping bounds' windows reach this many widths of the inner bin next to them beyond the inner edges.
END_WINDOW = 1.5


def candidate_edges(lo: float | None = None, hi: float | None = None, *, whole: bool = False, digits: int = 3) -> np.ndarray:
    """Public candidate bin edges: "nice" numbers with ``digits`` significant digits, both signs, from 1e-3 to
    1e12 and 0 (sorted); restricted to ``[lo, hi]`` with 1001 equally spaced points added when a range is given;
    integers only when ``whole``.

    Args:
        lo, hi: an optional public range (both or neither).
        whole: integer-valued column (integers and dates): integer candidates.
        digits: significant digits of the nice numbers.

    Returns:
        A sorted float64 array without duplicates. It depends on no data.

    Example:
        >>> c = candidate_edges(0, 100)
        >>> float(c[0]), float(c[-1]), bool(26.5 in c), len(candidate_edges(0, 10, whole=True))
        (0.0, 100.0, True, 11)
    """
    if (lo is None) != (hi is None):
        raise SchemaError("candidate_edges: give both lo and hi, or neither")
    mant = np.arange(10 ** (digits - 1), 10**digits) / 10 ** (digits - 1)
    mags = np.concatenate([mant * 10.0**k for k in range(-3, 12)])
    grid = np.concatenate([-mags, [0.0], mags])
    if lo is not None:
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise SchemaError(f"candidate_edges: need finite lo < hi, got [{lo}, {hi}]")
        grid = np.concatenate([grid[(grid >= lo) & (grid <= hi)], np.linspace(lo, hi, 1001)])
    if whole:
        grid = np.round(grid)
    return np.unique(grid)


def _calendar_candidates(kind: str, lo: float, hi: float) -> np.ndarray:
    """Every day (dates) or hour (datetimes) of ``[lo, hi]`` (days since 1970-01-01)."""
    per_day = 1 if kind == "date" else HOURS_PER_DAY
    return np.arange(math.floor(lo * per_day), math.ceil(hi * per_day) + 1) / per_day


def _budget_kwarg(acc, amount: float) -> dict:
    return {"rho": amount} if acc.currency == "rho" else {"epsilon": amount}


def _round_kwarg(acc, budget: float, parts: int) -> dict:
    """The per-draw budget of a parallel round that must cost ``budget`` in all: under replace-one neighbours
    (``acc.bounded``) a record may leave one part and join another, so a round of several parts counts two
    draws (:meth:`~pgmjax.privacy.Accountant.exponential_parallel`) and each draw gets half."""
    return _budget_kwarg(acc, budget / (2.0 if acc.bounded and parts > 1 else 1.0))


def rank_quality(sorted_values: np.ndarray, candidates: np.ndarray, level: float) -> np.ndarray:
    """The exponential mechanism's quality of each candidate edge for a quantile level:
    ``-|(1 - p) #{x < c} - p #{x >= c}|`` (0 where a fraction ``p`` lies below ``c``; sensitivity 1 under
    add/remove and replace-one; Smith 2011, Section 3).

    Example:
        >>> rank_quality(np.arange(10.0), np.array([0.0, 4.0, 10.0]), 0.5).tolist()
        [-5.0, -1.0, -5.0]
    """
    below = np.searchsorted(sorted_values, candidates, side="left")  # #{x < c}
    return quality_from_counts(below, len(sorted_values), level)


def quality_from_counts(below, n: int, level: float) -> np.ndarray:
    """:func:`rank_quality` from the counts ``below = #{x < c}`` of each candidate and the number ``n`` of values
    (what the engines compute: :mod:`pgmjax.preprocessing.ranks`).

    Example:
        >>> quality_from_counts(np.array([0, 4, 10]), 10, 0.5).tolist()
        [-5.0, -1.0, -5.0]
    """
    below = np.asarray(below, np.float64)
    return -np.abs((1 - level) * below - level * (n - below))


def private_quantiles(acc, key, values, levels, candidates, *, budget: float, target: str = "quantile") -> np.ndarray:
    """Private quantiles: one exponential-mechanism draw per level over public candidates (cost ``budget`` each).

    The quality of candidate ``c`` for level ``p`` is ``-|(1 - p) #{x < c} - p #{x >= c}|``: 0 where a
    fraction ``p`` of the values lies below ``c``; adding, removing or replacing one value moves it by at
    most 1 (McSherry & Talwar 2007, Theorem 6; Smith 2011, Section 3). With probability ``1 - beta`` a
    draw's quality is within ``(2 / eps) (ln |C| + ln(1/beta))`` of the best candidate's.

    Args:
        acc: the accountant that records the draws (pure or zCDP).
        key: a ``jax.random`` key.
        values: the private values (float64; NaN are ignored), or their rank counts (:mod:`pgmjax.preprocessing.ranks`).
        levels: quantile levels in (0, 1).
        candidates: public candidate edges (e.g. :func:`candidate_edges`).
        budget: the cost of one draw in the accountant's currency (epsilon, or rho under zCDP).
        target: ledger label.

    Returns:
        One candidate per level (float64, in the order of ``levels``; not necessarily sorted).

    Example:
        >>> from pgmjax.privacy import Accountant
        >>> acc = Accountant(epsilon=1.0)
        >>> x = np.arange(1000.0)
        >>> q = private_quantiles(acc, jax.random.key(0), x, [0.5], candidate_edges(0, 1000), budget=1.0)
        >>> bool(abs(q[0] - 500) < 60), acc.spent
        (True, 1.0)
    """
    for p in levels:
        if not 0.0 < p < 1.0:
            raise SchemaError(f"private_quantiles: levels must lie in (0, 1), got {p}")
    ranks = as_ranks(values)
    cand = np.asarray(candidates, np.float64)
    below = ranks.below(cand) if len(levels) else None
    keys = jax.random.split(key, max(len(levels), 1))
    out = []
    for k, p in zip(keys, levels):
        i = acc.exponential(k, quality_from_counts(below, ranks.n, p), 1.0, target=f"{target} {p:.4g}", **_budget_kwarg(acc, budget))
        out.append(cand[int(i)])
    return np.asarray(out, np.float64)


def recursive_quantiles(acc, key, values, levels, candidates, *, budget: float, target: str = "quantile") -> np.ndarray:
    """Private quantiles at many levels for the price of ``ceil(log2(m + 1))`` draws, not ``m``.

    The middle level is drawn first over all the values; the released edge splits the values in two
    and each half draws the middle level of its side, within the edges released so far, and so on.
    The draws of one round read disjoint subsets of the records (split at public, already released
    edges), so one round costs one draw's budget under add/remove neighbours and two under replace-one
    (a replaced record may leave one part and join another; each draw then gets half of ``budget``):
    parallel composition, recorded by :meth:`pgmjax.privacy.Accountant.exponential_parallel` (Kaplan,
    Schnapp & Stemmer, "Differentially private approximate quantiles", ICML 2022, Algorithm 1 and Theorem
    3.3). Each draw is the
    exponential mechanism of :func:`private_quantiles` with the level rescaled to its subset.

    Args:
        acc: the accountant (pure or zCDP).
        key: a ``jax.random`` key.
        values: the private values (float64; NaN ignored), or their rank counts (:mod:`pgmjax.preprocessing.ranks`).
        levels: strictly increasing levels in (0, 1).
        candidates: sorted public candidate edges.
        budget: the cost of one round (epsilon, or rho under zCDP), whatever the neighbouring relation.
        target: ledger label.

    Returns:
        One candidate per level, non-decreasing.

    Example:
        >>> from pgmjax.privacy import Accountant
        >>> acc = Accountant(epsilon=1.0)
        >>> q = recursive_quantiles(acc, jax.random.key(0), np.arange(1000.0), [0.25, 0.5, 0.75],
        ...                         candidate_edges(0, 1000), budget=0.5)
        >>> [int(abs(v - t) < 60) for v, t in zip(q, (250, 500, 750))], acc.spent, len(acc.ledger)
        ([1, 1, 1], 1.0, 2)
    """
    levels = np.asarray(levels, np.float64)
    if levels.ndim != 1 or not len(levels) or np.any(np.diff(levels) <= 0) or levels[0] <= 0 or levels[-1] >= 1:
        raise SchemaError(f"recursive_quantiles: levels must be strictly increasing in (0, 1), got {levels.tolist()}")
    ranks = as_ranks(values)
    cand = np.asarray(candidates, np.float64)
    # Every count a draw reads: #{x < c} at every candidate (the released edges a, b are candidates too).
    below = ranks.below(cand)

    def count_below(edge: float) -> int:  # #{x < edge} for a released edge (a candidate) or an infinite bound
        if edge == -np.inf:
            return 0
        if edge == np.inf:
            return ranks.n
        return int(below[np.searchsorted(cand, edge)])

    out = np.empty(len(levels))
    # A task: levels idx to place between released edges (a, b), which hold the level interval (pl, ph).
    tasks = [(np.arange(len(levels)), 0.0, 1.0, -np.inf, np.inf)]
    round_ = 0
    while tasks:
        qualities, cands, rel = [], [], []
        for idx, pl, ph, a, b in tasks:
            mid = idx[len(idx) // 2]
            p = (levels[mid] - pl) / (ph - pl)
            inside = (cand >= a) & (cand <= b)
            c = cand[inside]
            base = count_below(a)  # the values a <= x < b: #{a <= x < c} = #{x < c} - #{x < a}
            qualities.append(quality_from_counts(below[inside] - base, count_below(b) - base, p))
            cands.append(c)
            rel.append(p)
        key, k = jax.random.split(key)
        picks = acc.exponential_parallel(k, qualities, 1.0, target=f"{target} round {round_ + 1} ({len(tasks)} parts)",
                                         **_round_kwarg(acc, budget, len(tasks)))
        nxt = []
        for (idx, pl, ph, a, b), c, i in zip(tasks, cands, picks):
            j = len(idx) // 2
            edge = float(c[int(i)])
            out[idx[j]] = edge
            if j > 0:
                nxt.append((idx[:j], pl, levels[idx[j]], a, edge))
            if j + 1 < len(idx):
                nxt.append((idx[j + 1:], levels[idx[j]], ph, edge, b))
        tasks = nxt
        round_ += 1
    return out


def quantile_rounds(m: int) -> int:
    """Rounds :func:`recursive_quantiles` takes for ``m`` levels: ``ceil(log2(m + 1))``."""
    return max(1, math.ceil(math.log2(m + 1)))


def private_edges(acc, key, values, *, bins: int, tail: float, budget: float, kind: str, whole: bool,
                  public_range: tuple[float, float] | None = None, target: str = "edges",
                  info: dict | None = None) -> np.ndarray:
    """Bin edges of one column at private quantiles, spending ``budget`` of ``acc``.

    With a public range ``(lo, hi)`` the outer edges are the range and the ``bins - 1`` inner edges are
    private quantiles over candidates inside it. Without one, a private range (:func:`private_range`)
    comes first, then ``bins + 1`` quantiles at levels ``tail, 1/bins, ..., (bins-1)/bins, 1 - tail``
    over candidates inside that range; the outer two are the clipping bounds. The inner quantiles are
    drawn by :func:`recursive_quantiles`, the clipping bounds last in one parallel round (windows next
    to the first and last inner edges); the budget is split equally over the histogram and the rounds.

    Args:
        acc: the accountant (pure or zCDP).
        key: a ``jax.random`` key.
        values: the private values (float64, days since 1970-01-01 for dates and datetimes; NaN ignored), or their
            rank counts (:mod:`pgmjax.preprocessing.ranks`: the range histogram and every quantile draw read only those).
        bins: number of bins (>= 2); duplicate edges are merged.
        tail: level of the clipping bounds.
        budget: what the column spends, in the accountant's currency.
        kind: ``"number"``, ``"date"`` or ``"datetime"``.
        whole: integer-valued column: integer candidates.
        public_range: optional public ``(lo, hi)``.
        target: ledger label prefix.
        info: an optional dict; without a public range its ``"range"`` is set to the
            :class:`~pgmjax.preprocessing.private_range.RangeRelease` (for :func:`~pgmjax.preprocessing.private_range.range_warnings`).

    Returns:
        Sorted float64 edges, at least two.
    """
    inner = [j / bins for j in range(1, bins)]
    calendar = kind in ("date", "datetime")
    if public_range is not None:
        values = as_ranks(values)
        lo, hi = public_range
        cand = _calendar_candidates(kind, lo, hi) if calendar else candidate_edges(lo, hi, whole=whole)
        q = recursive_quantiles(acc, key, values, inner, cand[(cand > lo) & (cand < hi)],
                                budget=budget / quantile_rounds(len(inner)), target=f"{target}: quantiles")
        return np.unique(np.concatenate([q, [lo, hi]]))
    values = as_ranks(values)  # sorted once in memory; an engine's counts are computed per step
    k_range, k_q, k_tail = jax.random.split(key, 3)
    per_part = budget / (tail_edges_parts(bins))
    release = range_release(acc, k_range, values, kind, budget=per_part, target=f"{target}: range")
    if info is not None:
        info["range"] = release
    lo, hi = release.lo, release.hi
    cand = _calendar_candidates(kind, lo, hi) if calendar else candidate_edges(lo, hi, whole=whole)
    q = recursive_quantiles(acc, k_q, values, inner, cand, budget=per_part, target=f"{target}: quantiles")
    bounds = _clipping_bounds(acc, k_tail, values, q, lo, hi, bins, tail, whole, per_part, target)
    edges = np.unique(np.concatenate([[bounds[0]], q, [bounds[1]]]))
    if len(edges) < 2:
        edges = np.array([edges[0], edges[0] + 1.0])
    return edges


def tail_edges_parts(bins: int) -> int:
    """Budget parts of a column without a public range: the range, the inner rounds, the clipping bounds."""
    return 1 + quantile_rounds(bins - 1) + 1


def _clipping_bounds(acc, key, values, q, lo, hi, bins, tail, whole, budget, target) -> tuple[float, float]:
    """The clipping bounds: levels ``tail`` and ``1 - tail``, drawn last, in one parallel round.

    The lower bound reads only the values below the first inner edge, the upper one only those at or
    above the last (disjoint parts, split at released edges). Each is drawn over 256 equally spaced
    candidates in a window next to its edge, inside the private range, :data:`END_WINDOW` times the width
    of the inner bin next to it (at most the inner edges' span): the end part holds as many records as
    that bin (``1 / bins``), and its ``tail`` quantile lies within about one such width of the edge for a
    column that does not thin out sharply. Where the released bins widen towards the end (a long tail), the
    window widens by the ratio of the last two inner widths (1 to 3; post-processing of released edges). At
    small budgets a tail level's rank quality separates candidates weakly (``tail * n`` records) and a draw
    is close to uniform over its window. A window as wide as the whole inner span let a poor draw put the
    bound far past anything the table holds (a 0-5 score's upper edge near 7); this one lets it pass the
    last inner edge by at most 1.5 (times the ratio) bin widths. The inner edges never depend on it.
    """
    first, last = float(q[0]), float(q[-1])
    width = last - first
    if not width > 0:
        width = max(abs(first) * 0.5, 1.0)
    # The inner bins next to each end (a single inner edge: the inner span's fallback width).
    below_w = float(q[1] - q[0]) if len(q) > 1 and q[1] > q[0] else width
    above_w = float(q[-1] - q[-2]) if len(q) > 1 and q[-1] > q[-2] else width
    if len(q) > 2 and q[2] > q[1] and q[-2] > q[-3]:  # bins widening towards the end: a long tail
        below_w *= min(max(below_w / float(q[2] - q[1]), 1.0), 3.0)
        above_w *= min(max(above_w / float(q[-2] - q[-3]), 1.0), 3.0)
    lo_cand = np.linspace(max(lo, first - min(width, END_WINDOW * below_w)), first, 256)
    hi_cand = np.linspace(last, min(hi, last + min(width, END_WINDOW * above_w)), 256)
    if whole:
        lo_cand, hi_cand = np.unique(np.floor(lo_cand)), np.unique(np.ceil(hi_cand))
    ranks = as_ranks(values)
    # One count: #{x < t} at both windows and at the two edges. The lower part is x < first (every lo_cand <= first),
    # the upper one x >= last (every hi_cand >= last).
    counts = ranks.below(np.concatenate([lo_cand, hi_cand, [first, last]]))
    c_lo, c_hi, n_first, n_last = counts[:len(lo_cand)], counts[len(lo_cand):-2], int(counts[-2]), int(counts[-1])
    share = 1.0 / bins  # the level mass of each end part
    p_lo, p_hi = tail / share, 1.0 - tail / share
    qualities = [quality_from_counts(c_lo, n_first, p_lo), quality_from_counts(c_hi - n_last, ranks.n - n_last, p_hi)]
    picks = acc.exponential_parallel(key, qualities, 1.0, target=f"{target}: clipping bounds",
                                     **_round_kwarg(acc, budget, len(qualities)))
    return float(lo_cand[picks[0]]), float(hi_cand[picks[1]])


def rank_error(acc, per_draw: float, candidates: int) -> float:
    """The exponential mechanism's rank-error scale ``(2 / eps) (ln |C| + 1)`` for one draw of cost ``per_draw``
    (``eps = sqrt(8 rho)`` under zCDP; McSherry & Talwar 2007, Theorem 6 at beta = 1/e); data-independent.

    Example:
        >>> from pgmjax.privacy import Accountant
        >>> round(rank_error(Accountant(epsilon=1.0), 0.1, 1000), 1)
        158.2
    """
    eps = math.sqrt(8.0 * per_draw) if acc.currency == "rho" else per_draw
    return 2.0 / eps * (math.log(candidates) + 1.0)
