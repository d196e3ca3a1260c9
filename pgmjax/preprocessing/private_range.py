"""The private range of a numeric, date or datetime column, its public fallback, and the warnings drawn from it.

A column without a public range first needs to know roughly where its values lie, so that the private
quantiles (:mod:`pgmjax.preprocessing.private_bins`) get fine candidate edges there. :func:`range_release` releases
one noisy histogram over public coarse cells (``0, ±s 10^k`` for the ten steps ``s`` of :data:`STEPS` in every
decade, for numbers; calendar years
for dates and datetimes; one record changes one count by one, two under replace-one neighbours, so the
whole histogram is one Laplace / Gaussian release: Dwork, McSherry, Nissim & Smith, "Calibrating noise
to sensitivity in private data analysis", TCC 2006, Example 1) and takes the span of the cells whose
noisy count reaches a threshold set so that an empty cell passes with probability at most 1% over all
cells (Korolova et al., "Releasing search queries and clicks privately", WWW 2009, Section 4).

**Small tables.** At small budgets a cell holding a few hundred records does not reach that threshold
(8,000 dates over 35 years, MST at epsilon 1: about 220 records a year against a threshold of about 550,
noise standard deviation 140). The range used to fall back to the cell of largest noisy count, a random
year when the noise dominates (or to one year passing by chance), and every quantile was then drawn
inside that one year: the column collapsed. Now, by post-processing the same histogram (no extra charge):

* **blocks**: besides single cells, runs of 2, 4, 8, ... cells (half-overlapping; :func:`range_blocks`)
  are tested against the threshold of a *sum* of that many noises (:func:`block_threshold`), the
  1% false-pass probability split over all blocks (union bound): 16 years of 220 records pass where
  no single year does, since the signal grows as ``m`` and the noise as ``sqrt(m)``. The range is the
  span of the passing blocks that smaller passing blocks do not explain: a block of 128 years passes
  because of the records in a part of it, which its passing sub-blocks locate better, so it is dropped
  unless the cells outside their hull pass too (a remainder test, at most one a block: the union bound
  counts two tests a block). The first version kept only the minimal passing blocks; a small block
  passing by luck inside the data then cut the range short (a 26-year range for 36 years of data),
  widened by half a block beyond each end block of ``m > 1`` cells (records may lie just outside a
  block that passed; its half-shifted neighbour failed, but only by a noisy margin);
* **fallback**: when nothing passes, the range is the whole public range (1900-2101, or ``±10^12``),
  never a cell chosen by noise;
* the quantiles (:mod:`pgmjax.preprocessing.private_bins`) are then drawn over candidates inside that range by the
  exponential mechanism (Smith, "Privacy-preserving statistical estimation with optimal convergence
  rates", STOC 2011, Section 3); in the fallback the candidates span the whole public range, a
  data-independent grid as in Gillenwater, Joseph & Kulesza, "Differentially private quantiles", ICML
  2021, Section 3, whose rank error grows only with ``ln |C|`` (McSherry & Talwar, FOCS 2007, Theorem 6).
  A wider public grid was tried and dropped: at small budgets its far candidates drew edges away from
  the data (ages below -60).

Nothing is charged beyond the histogram, as before. :func:`range_warnings` reads only released values
(the noisy counts and the released edges: post-processing, Dwork & Roth 2014, Proposition 2.1) and
says in words when a column's released range looks too narrow for the records the histogram shows.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .ranks import as_ranks

__all__ = ["RANGE_FALSE_PASS", "range_cells", "noisy_counts", "RangeRelease", "range_release", "range_blocks",
           "block_threshold", "private_range",
           "range_warnings"]

#: The cells of a number's range histogram: these steps in every decade (a "1-2-5" series, finer).
STEPS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
#: Probability that some empty cell of the range histogram passes its threshold.
RANGE_FALSE_PASS = 0.01
#: A warning is given when the released edges leave out more than this share of the noisy counts...
CLIPPED_WARN = 0.2
#: ... and that count is this many noise standard deviations above zero.
CLIPPED_SIGMAS = 3.0


def range_cells(kind: str) -> np.ndarray:
    """The public cell edges of the range histogram: ``0, ±s 10^k`` (``s`` in :data:`STEPS`, k = -3..11, and
    ``±10^12``) for numbers; the first day of every year 1900..2101 (in days since 1970-01-01) for dates and
    datetimes.

    Ten cells a decade, not one: a range that ends at the next power of ten left most of its candidate edges
    where no value lies (ids of 100000-119999 in the cell 10^5..10^6), and at small budgets the quantile draws
    went there. One record is still in one cell (the same sensitivity); the blocks of cells
    (:func:`range_blocks`) find a range whose single cells hold too few records.

    Example:
        >>> len(range_cells("number")), float(range_cells("date")[70]), range_cells("number")[152:156].tolist()
        (303, 0.0, [0.001, 0.0012, 0.0015, 0.002])
    """
    if kind in ("date", "datetime"):
        years = np.arange("1900", "2102", dtype="datetime64[Y]").astype("datetime64[D]")
        return (years - np.datetime64("1970-01-01", "D")).astype(np.float64)
    mags = np.concatenate([np.array(STEPS) * 10.0**k for k in range(-3, 12)] + [[1e12]])
    return np.concatenate([-mags[::-1], [0.0], mags])


def noisy_counts(acc, key, counts, *, budget: float, alpha: float, target: str) -> tuple[np.ndarray, int]:
    """Counts with discrete Laplace (pure accountant) or discrete Gaussian (zCDP accountant) noise of cost ``budget``,
    recorded, and the noise's exact upper-``alpha`` threshold ``k``: the smallest integer with ``P(noise >= k) <= alpha``.

    One record changes one count by one under add/remove neighbours (sensitivity 1), two counts under
    replace-one (L1 2, L2 sqrt 2): the accountant's ``bounded`` picks the sensitivity, so the ledger charges
    exactly what the noise pays for. ``k`` is computed from the discrete law's tail, the sum of its pmf
    (:func:`pgmjax.privacy.discrete_tails.tail_threshold`), not from the continuous law's quantile, which
    understates the discrete Gaussian's tail several times at small ``sigma``. A count of 0 reaches ``k``
    with probability at most ``alpha``: a threshold for "this cell holds data" (Korolova et al., "Releasing
    search queries and clicks privately", WWW 2009, Section 4).

    Returns:
        ``(noisy counts as float64 integers, k)``.

    Example:
        >>> import jax
        >>> from pgmjax.privacy import Accountant
        >>> acc = Accountant(epsilon=1.0)
        >>> noisy, k = noisy_counts(acc, jax.random.key(0), np.array([0.0, 500.0]), budget=1.0, alpha=0.01,
        ...                         target="cells")
        >>> k, acc.ledger[0].mechanism
        (5, 'laplace')
    """
    from ..privacy.discrete_tails import tail_threshold

    if acc.currency == "rho":
        noisy = acc.gaussian(key, counts, math.sqrt(2.0) if acc.bounded else 1.0, rho=budget, target=target, integer=True)
        family = "gaussian"
    else:
        noisy = acc.laplace(key, counts, 2.0 if acc.bounded else 1.0, epsilon=budget, target=target, integer=True)
        family = "laplace"
    return np.asarray(noisy, np.float64), tail_threshold(family, acc.ledger[-1].scale, alpha)


class RangeRelease(NamedTuple):
    """What :func:`range_release` released and decided (all of it differentially private).

    Attributes:
        lo, hi: the range: the span of the passing cells, or the whole public range when none passes.
        found: whether some cell passed (False: the public fallback).
        cells: the public cell edges.
        noisy: the noisy count of every cell.
        threshold: the passing threshold ``k``.
        std: the standard deviation of one cell's noise.
    """

    lo: float
    hi: float
    found: bool
    cells: np.ndarray
    noisy: np.ndarray
    threshold: int
    std: float


def range_release(acc, key, values, kind: str, *, budget: float, target: str = "range") -> RangeRelease:
    """The noisy range histogram and the range it gives (see the module docstring).

    Args:
        acc: the accountant (pure or zCDP) that records the noisy histogram.
        key: a ``jax.random`` key.
        values: the private values (float64; NaN ignored; values beyond the outer cells count in the end cells), or
            their rank counts (:class:`~pgmjax.preprocessing.ranks.Ranks`: all the histogram reads).
        kind: ``"number"``, ``"date"`` or ``"datetime"`` (see :func:`range_cells`).
        budget: the histogram's cost in the accountant's currency.
        target: ledger label.

    Returns:
        A :class:`RangeRelease`.
    """
    cells = range_cells(kind)
    ranks = as_ranks(values)  # the cell counts from #{x < c} at the inner cell edges (beyond the outer ones: end cells)
    counts = np.diff(np.concatenate([[0], ranks.below(cells[1:-1]), [ranks.n]])).astype(np.float64)
    blocks = range_blocks(len(counts))
    alpha = RANGE_FALSE_PASS / (2 * len(blocks))  # two tests a block at most: its count, its remainder
    noisy, k = noisy_counts(acc, key, counts, budget=budget, alpha=alpha, target=target)
    entry = acc.ledger[-1]
    std = float(entry.scale) * (math.sqrt(2.0) if entry.mechanism == "laplace" else 1.0)
    sums = np.concatenate([[0.0], np.cumsum(noisy)])

    def holds(total: float, m: int) -> bool:  # is a sum of m noisy counts clearly above pure noise?
        return m > 0 and total >= (k if m == 1 else block_threshold(entry.mechanism, entry.scale, m, alpha))

    passing = [(a, b) for a, b in blocks if holds(sums[b] - sums[a], b - a)]
    if not passing:  # the public fallback: never a cell picked by noise
        return RangeRelease(float(cells[0]), float(cells[-1]), False, cells, noisy, int(k), std)
    kept = []
    for a, b in sorted(passing, key=lambda ab: ab[1] - ab[0]):  # smallest first: a block is explained by kept ones
        inside = [(c, d) for c, d in kept if a <= c and d <= b]
        if inside:  # explained by smaller passing blocks, unless the cells outside their hull hold records too
            ha, hb = min(c for c, _ in inside), max(d for _, d in inside)
            if not holds(sums[ha] - sums[a] + sums[b] - sums[hb], (ha - a) + (b - hb)):
                continue
        kept.append((a, b))
    ab = np.array(kept)
    # A block of m > 1 cells says only that records lie somewhere inside it, and its neighbour m / 2 cells out failed
    # by a noisy margin: the range reaches m / 2 cells beyond each end block (single cells: exactly their span).
    half = (ab[:, 1] - ab[:, 0]) // 2
    lo, hi = max(int((ab[:, 0] - half).min()), 0), min(int((ab[:, 1] + half).max()), len(counts))
    return RangeRelease(float(cells[lo]), float(cells[hi]), True, cells, noisy, int(k), std)


def range_blocks(n: int) -> list[tuple[int, int]]:
    """The public blocks of cells tested by :func:`range_release`: every cell, then runs of ``m = 2, 4, 8, ...``
    cells (up to all ``n``) starting every ``m / 2`` cells, the last one ending at cell ``n``.

    Example:
        >>> range_blocks(4)
        [(0, 1), (1, 2), (2, 3), (3, 4), (0, 2), (1, 3), (2, 4), (0, 4)]
    """
    out = [(i, i + 1) for i in range(n)]
    m = 2
    while True:
        m = min(m, n)
        starts = list(range(0, n - m + 1, m // 2))
        if starts[-1] != n - m:
            starts.append(n - m)
        out += [(a, a + m) for a in starts]
        if m == n:
            return out
        m *= 2


def block_threshold(family: str, scale: float, m: int, alpha: float) -> float:
    """The threshold of a block of ``m`` range cells: :func:`pgmjax.privacy.discrete_tails.sum_threshold`.

    Example:
        >>> round(block_threshold("gaussian", 10.0, 4, 1e-4), 1)
        85.8
    """
    from ..privacy.discrete_tails import sum_threshold

    return sum_threshold(family, scale, m, alpha)


def private_range(acc, key, values, kind: str, *, budget: float, target: str = "range") -> tuple[float, float]:
    """A range holding the bulk of the values: the span of the range cells whose noisy count passes a threshold,
    or the whole public range (the outer cell edges) when none passes.

    Args:
        acc, key, values, kind, budget, target: as in :func:`range_release`.

    Returns:
        ``(lo, hi)``, edges of :func:`range_cells`.

    Example:
        >>> import jax
        >>> from pgmjax.privacy import Accountant
        >>> x = np.random.default_rng(0).lognormal(10, 1, 5000)
        >>> private_range(Accountant(epsilon=1.0), jax.random.key(0), x, "number", budget=1.0)
        (1500.0, 400000.0)
        >>> private_range(Accountant(epsilon=1.0), jax.random.key(0), x[:3], "number", budget=1e-3)
        (-1000000000000.0, 1000000000000.0)
    """
    r = range_release(acc, key, values, kind, budget=budget, target=target)
    return r.lo, r.hi


def range_warnings(name: str, kind: str, edges, release: RangeRelease | None, shown) -> list[str]:
    """Warnings, in words, about a column's released range, computed from released values only.

    * ``release.found`` is False: no cell of the range histogram held a clearly non-empty noisy count; the
      edges were placed over the whole public range.
    * The cells wholly outside the released edges hold more than :data:`CLIPPED_WARN` of the histogram's
      noisy total, by more than :data:`CLIPPED_SIGMAS` standard deviations of the noise on those cells: most
      of the column may be clipped into the end bins. A cell that the edges cut is not counted (where its
      records lie inside it is not released), so the share is a lower bound, up to the noise: the tail
      quantiles clip about ``2 * tail`` by design, and that is not warned about.

    Args:
        name: the column.
        kind: ``"number"``, ``"date"`` or ``"datetime"``.
        edges: the released bin edges.
        release: the column's :class:`RangeRelease` (None with a public range: no warning).
        shown: ``shown(value, kind) -> str``, a value as the user writes it.

    Returns:
        Zero, one or two sentences naming the column.
    """
    if release is None:
        return []
    out = []
    lo, hi = float(edges[0]), float(edges[-1])
    advice = (f"give --range {name}=LOW:HIGH (the {'dates' if kind != 'number' else 'values'} you know the column spans) "
              "or more budget (--epsilon, --preprocess-fraction)")
    cells = release.cells
    if not release.found:
        out.append(f"{name}: no {'year' if kind != 'number' else 'cell'} of the private range histogram held "
                   f"a clearly non-empty noisy count at this budget; the bins were placed by private quantiles over the whole "
                   f"public range {shown(cells[0], kind)} to {shown(cells[-1], kind)}; {advice}")
    # Only the cells wholly outside [lo, hi] count as clipped. A cell the edges cut holds its records anywhere inside
    # it (a cell 10^5..10^6 would hold ids 100000-119999 at its lower end): a pro-rata share of its count
    # called nearly all of them clipped where the tail quantiles clip a few percent. Its records are left out of the
    # estimate, which is then a lower bound of the clipped share, up to the noise.
    outside_cell = (cells[1:] <= lo) | (cells[:-1] >= hi)
    total = max(float(release.noisy.sum()), 1.0)
    outside = float(release.noisy[outside_cell].sum())
    noise = release.std * math.sqrt(float(outside_cell.sum()))
    if outside > CLIPPED_WARN * total and outside > CLIPPED_SIGMAS * noise:
        share = min(outside / total, 1.0)
        out.append(f"{name}: the private range {shown(lo, kind)} to {shown(hi, kind)} is narrow; most of the column may be "
                   f"clipped (about {100 * share:.0f}% of the noisy range counts lie in "
                   f"{'years' if kind != 'number' else 'cells'} wholly outside it); {advice}")
    return out
