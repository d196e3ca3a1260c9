"""What the private preprocessing reads of a raw table: three small aggregates per column, never the records.

:func:`pgmjax.preprocessing.preprocess.private_schema` reads a raw column only through

* its **class counts** (:func:`pgmjax.preprocessing.private_format.class_counts`): how many fields are whole numbers,
  fractional numbers (by their decimals), dates (by their form), datetimes, other text or empty (the kind vote);
* its **value counts** (:func:`text_counts`): each stripped text and how many records hold it, sorted by the
  text (category discovery; the noise is drawn in that order, so any engine's group-by gives the same release);
* its **rank counts** (:mod:`pgmjax.preprocessing.ranks`): ``#{x < t}`` of the parsed values at public thresholds
  (the private range and quantiles),

and the record count. :class:`RawFrame` computes them from a pandas frame in memory; the out-of-core
engines (:mod:`pgmjax.preprocessing.raw_engines`) compute the same aggregates with Polars or Dask (Dask's workers
call the functions of this module on their partitions), so the schema released from the same key is the same.

Example:
    >>> t = RawFrame(pd.DataFrame({"c": ["b", " a", "b", ""], "x": ["1", "2.5", "n/a", "4"]}))
    >>> len(t), t.names, t.class_counts("x").tolist()
    (4, ['c', 'x'], [2, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0])
    >>> t.value_counts("c")
    (['', 'a', 'b'], [1, 1, 2])
    >>> t.ranks("x", "number").below([2.0, 5.0]).tolist()
    [1, 3]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..data.raw_fields import column_values
from ..data.schema_columns import as_text
from .private_format import class_counts
from .ranks import Ranks

__all__ = ["RawFrame", "text_counts", "merge_text_counts", "threshold_histogram"]


def text_counts(values) -> pd.Series:
    """Count of every stripped text of a column (index: the text; ``""`` for an empty field)."""
    return as_text(values).str.strip().value_counts(sort=False)


def merge_text_counts(parts) -> tuple[list[str], list[int]]:
    """Sum :func:`text_counts` of several parts; ``(texts sorted, counts)`` (the canonical order of the noise)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return [], []
    total = pd.concat(parts).groupby(level=0, sort=False).sum() if len(parts) > 1 else parts[0]
    labels = [str(v) for v in total.index]
    order = sorted(range(len(labels)), key=labels.__getitem__)
    counts = total.to_numpy(np.int64)
    return [labels[i] for i in order], [int(counts[i]) for i in order]


def threshold_histogram(values, kind: str, thresholds) -> np.ndarray:
    """How many parsed values (:func:`pgmjax.data.raw_fields.column_values`) lie in each gap of sorted unique
    ``thresholds``: entry ``r`` counts ``#{x : r thresholds are <= x}`` (length ``len(thresholds) + 1``).
    Its cumulative sums are the rank counts ``#{x < t}``; its total is the number of non-missing values."""
    x = column_values(values, kind)
    x = x[~np.isnan(x)]
    t = np.asarray(thresholds, np.float64)
    return np.bincount(np.searchsorted(t, x, side="right"), minlength=len(t) + 1).astype(np.int64)


class RawFrame:
    """The aggregates of a raw table held in memory as a pandas frame (text as :func:`pgmjax.read_raw_csv` reads it).

    Args:
        frame: the raw table.
    """

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame
        self.names = [str(c) for c in frame.columns]
        self._ranks: dict = {}

    def __len__(self) -> int:
        return len(self.frame)

    def _column(self, name: str):
        return self.frame[self.frame.columns[self.names.index(name)]]

    def class_counts(self, name: str) -> np.ndarray:
        """The column's counts of :data:`~pgmjax.preprocessing.private_format.FIELD_CLASSES`."""
        return class_counts(self._column(name))

    def value_counts(self, name: str) -> tuple[list[str], list[int]]:
        """``(stripped texts sorted, their counts)``."""
        return merge_text_counts([text_counts(self._column(name))])

    def ranks(self, name: str, kind: str) -> Ranks:
        """The rank counts of the column's values parsed as ``kind`` (``"number"``, ``"date"``, ``"datetime"``)."""
        if (name, kind) not in self._ranks:
            self._ranks[name, kind] = Ranks.of(column_values(self._column(name), kind))
        return self._ranks[name, kind]
