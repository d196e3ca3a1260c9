"""Rank counts: what the private range and quantile code reads of a numeric column, ``#{x < t}`` at public thresholds.

Every data-dependent number that :mod:`pgmjax.preprocessing.private_range` and :mod:`pgmjax.preprocessing.private_bins` compute
from a binned column is a function of the counts ``#{x < t}`` of its (non-missing) values below public
thresholds ``t`` (the range cells, the candidate edges, the clipping windows) and of their number ``n``:

* the range histogram's cell ``[c_i, c_{i+1})`` holds ``#{x < c_{i+1}} - #{x < c_i}`` (values beyond the
  outer cells clipped into the end cells);
* the rank quality of candidate ``c`` for level ``p`` over the values in ``[a, b)`` is
  ``-|(1 - p) (#{x < c} - #{x < a}) - p (#{x < b} - #{x < c})|``.

A :class:`Ranks` answers ``below(thresholds)`` from the sorted values in memory; the out-of-core engines
(:mod:`pgmjax.preprocessing.raw_engines`) answer the same question with one histogram computed by the engine
(:class:`CountedRanks`), so the counts, hence the noisy releases drawn from them with the same key, are equal.

Example:
    >>> r = Ranks.of([3.0, 1.0, np.nan, 2.0])
    >>> r.n, r.below(np.array([0.0, 2.0, 9.0])).tolist()
    (3, [0, 1, 3])
"""

from __future__ import annotations

import numpy as np

__all__ = ["Ranks", "CountedRanks", "as_ranks"]


class Ranks:
    """Rank counts of values held in memory.

    Args:
        sorted_values: the non-missing values, sorted (float64).
    """

    def __init__(self, sorted_values: np.ndarray):
        self.sorted = sorted_values
        self.n = int(len(sorted_values))

    @classmethod
    def of(cls, values) -> "Ranks":
        """The rank counts of float values (NaN ignored)."""
        x = np.asarray(values, np.float64)
        return cls(np.sort(x[~np.isnan(x)]))

    def below(self, thresholds) -> np.ndarray:
        """``#{x < t}`` for every threshold (int64)."""
        return np.searchsorted(self.sorted, np.asarray(thresholds, np.float64), side="left").astype(np.int64)


class CountedRanks:
    """Rank counts computed elsewhere (an engine's histogram over the thresholds), one call per question.

    Args:
        count: ``count(thresholds) -> (#{x < t} for each, n)`` for sorted unique thresholds (``n``: the number of
            non-missing values).
        n: that number, if known (else it comes with the first count).

    Example:
        >>> inner = Ranks.of([1.0, 5.0, 7.0])
        >>> r = CountedRanks(lambda t: (inner.below(t), inner.n))
        >>> r.below(np.array([7.0, 1.0, 7.0])).tolist(), r.n
        ([2, 0, 2], 3)
    """

    def __init__(self, count, n: int | None = None):
        self._count = count
        self._n = None if n is None else int(n)

    @property
    def n(self) -> int:
        if self._n is None:
            self.below(np.zeros(0))
        return self._n

    def below(self, thresholds) -> np.ndarray:
        t = np.asarray(thresholds, np.float64)
        if t.size == 0 and self._n is not None:
            return np.zeros(t.shape, np.int64)
        uniq, inv = np.unique(t, return_inverse=True)
        counts, n = self._count(uniq)
        self._n = int(n)
        return np.asarray(counts, np.int64)[inv].reshape(t.shape)


def as_ranks(values) -> "Ranks | CountedRanks":
    """``values`` if it already answers ``below`` (a :class:`Ranks` or :class:`CountedRanks`), else :meth:`Ranks.of`."""
    if hasattr(values, "below") and hasattr(values, "n"):
        return values
    return Ranks.of(values)
