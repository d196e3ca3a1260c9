"""The raw path's format choices: each column's kind by a private vote, decimals by a rule, bad fields as missing.

Every choice about a column's *format* that the raw path makes is either declared by the user (public),
decided under differential privacy and charged to the accountant, or fixed by a rule that reads only
released values; none reads the private table outside the budget:

* **Kind** (number, integer, date, datetime, text): declared (``kinds=`` of
  :func:`pgmjax.preprocessing.preprocess.private_schema`, ``--kind`` on the command line), or decided by
  :func:`private_kind`: each non-empty field is put in one of five classes (:data:`FIELD_CLASSES`:
  a whole number, a number with a fraction, an ISO date, an ISO datetime with a time, anything else),
  the class counts get discrete Laplace (pure accountant) or discrete Gaussian (zCDP accountant) noise
  through the accountant, and :func:`decide_kind` reads the kind off the noisy counts alone. One record is
  in one class, so the histogram has sensitivity 1 under add/remove neighbours and 2 (L2 ``sqrt 2``) under
  replace-one (Dwork, McSherry, Nissim & Smith, TCC 2006; the vote is post-processing of the histogram,
  as in Report Noisy Max, Dwork & Roth, "The algorithmic foundations of differential privacy", 2014,
  Section 3.3 and Proposition 2.1). The rule is a plurality: number, temporal or text, whichever class
  group has the largest noisy count (ties in that order); a number is an integer when its noisy whole
  count exceeds its noisy fractional count; a temporal column is a datetime when its noisy count of
  values with a time exceeds that of dates alone. One record moves two noisy counts by one: the kind
  changes only where the table itself is split almost evenly, and then with a probability the budget bounds.
* **Decimals** of a non-integer number: declared (``decimals=``, ``--decimals``), or
  :func:`rule_decimals` of the *released* bin edges: enough decimals for 1/100 of the narrowest bin.
* **Unparsable fields** (``n/a`` in a number column, ``2020-02-30`` or ``soon`` in a date column, ``inf``)
  are **missing**, by :func:`pgmjax.data.raw_fields.column_values` and :func:`encode_raw`: never an error, which would reveal
  that one record holds such a value. A date column takes a datetime's day; a datetime column a date's
  midnight.

Example:
    >>> from pgmjax.privacy import Accountant
    >>> acc = Accountant(epsilon=1.0)
    >>> values = ["12", "7", "n/a", "41234.56789"] + [str(i) for i in range(2000)]
    >>> private_kind(acc, jax.random.key(0), values, budget=0.1)
    {'kind': 'number', 'integer': True}
    >>> column_values(["3", "n/a", "inf", ""], "number").tolist()
    [3.0, nan, nan, nan]
    >>> rule_decimals(np.array([0.0, 12.5, 30.0]))
    1
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..data.dataset import Dataset
from ..data.raw_fields import column_values, iso_valid
from ..data.schema_columns import ISO_DATE, NumericColumn, as_text
from .private_bins import noisy_counts

__all__ = ["FIELD_CLASSES", "KINDS", "field_classes", "class_counts", "private_kind", "private_kind_of_counts", "decide_kind", "rule_decimals", "encode_raw"]

#: The classes of a non-empty field in the kind vote, in the order of the noisy histogram.
FIELD_CLASSES = ("whole", "fractional", "date", "datetime", "text")
#: The kinds a column can be declared as.
KINDS = ("number", "integer", "date", "datetime", "text")


def field_classes(values) -> np.ndarray:
    """The class of every field (an index into :data:`FIELD_CLASSES`; -1 for an empty field).

    Example:
        >>> field_classes(["1", "1.5", "2020-01-02", "2020-01-02 03:04", "2020-02-30", "n/a", ""]).tolist()
        [0, 1, 2, 3, 4, 4, -1]
    """
    text = as_text(values).str.strip().reset_index(drop=True)
    out = np.full(len(text), 4, np.int64)
    x = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    finite = np.isfinite(x)
    out[finite] = np.where(x[finite] == np.round(x[finite]), 0, 1)
    iso = iso_valid(text) & ~finite
    date_only = text.str.fullmatch(ISO_DATE).to_numpy(bool)
    out[iso & date_only] = 2
    out[iso & ~date_only] = 3
    out[(text == "").to_numpy()] = -1
    return out


def class_counts(values) -> np.ndarray:
    """How many non-empty fields fall in each of :data:`FIELD_CLASSES` (int64): all the kind vote reads of a column.

    Example:
        >>> class_counts(["1", "2", "", "x", "2020-01-02"]).tolist()
        [2, 0, 1, 0, 1]
    """
    cls = field_classes(values)
    return np.bincount(cls[cls >= 0], minlength=len(FIELD_CLASSES)).astype(np.int64)


def decide_kind(noisy, allowed: tuple[str, ...] = ("number", "temporal", "text")) -> dict:
    """The kind read off the noisy class counts (post-processing: no data is read).

    Args:
        noisy: noisy counts of :data:`FIELD_CLASSES` (five numbers).
        allowed: the class groups to choose among (all three by default).

    Returns:
        ``{"kind": "number"|"date"|"datetime"|"text", "integer": bool}``.

    Example:
        >>> decide_kind([900, 20, 0, 3, 40]), decide_kind([0, 0, 400, 500, 0])
        ({'kind': 'number', 'integer': True}, {'kind': 'datetime', 'integer': False})
    """
    w, f, d, t, x = (float(v) for v in noisy)
    groups = {"number": w + f, "temporal": d + t, "text": x}
    best = max(allowed, key=lambda g: (groups[g], -allowed.index(g)))  # ties: the earlier group
    if best == "number":
        return {"kind": "number", "integer": w > f}
    if best == "temporal":
        return {"kind": "datetime" if t > d else "date", "integer": False}
    return {"kind": "text", "integer": False}


def private_kind(acc, key, values, *, budget: float, target: str = "kind") -> dict:
    """A column's kind by a private vote: one noisy histogram of :func:`field_classes`, then :func:`decide_kind`.

    Args:
        acc: the accountant (pure or zCDP; its ``bounded`` sets the sensitivity, 1 or 2).
        key: a ``jax.random`` key.
        values: the private column (text or numbers).
        budget: the histogram's cost in the accountant's currency.
        target: ledger label.

    Returns:
        ``{"kind": ..., "integer": bool}`` as :func:`decide_kind`.
    """
    return private_kind_of_counts(acc, key, class_counts(values), budget=budget, target=target)


def private_kind_of_counts(acc, key, counts, *, budget: float, target: str = "kind") -> dict:
    """:func:`private_kind` from the column's :func:`class_counts` (as the out-of-core engines compute them).

    Example:
        >>> from pgmjax.privacy import Accountant
        >>> private_kind_of_counts(Accountant(epsilon=1.0), jax.random.key(0), [0, 0, 900, 5, 10], budget=0.5)
        {'kind': 'date', 'integer': False}
    """
    noisy, _ = noisy_counts(acc, key, np.asarray(counts, np.float64), budget=budget, alpha=0.01, target=target)
    return decide_kind(noisy)


def rule_decimals(edges: np.ndarray) -> int:
    """Decimals of a non-integer number column from its released edges: 1/100 of the narrowest bin (0 to 12).

    A function of the released edges only (post-processing), never of the raw values' own decimals.

    Example:
        >>> rule_decimals(np.array([10000.0, 25000.0, 90000.0])), rule_decimals(np.array([0.0, 0.05, 1.0]))
        (0, 4)
    """
    width = float(np.min(np.diff(np.asarray(edges, np.float64))))
    if not width > 0 or not math.isfinite(width):
        return 12
    return int(min(max(2 - math.floor(math.log10(width)), 0), 12))


def encode_raw(schema, frame: pd.DataFrame) -> Dataset:
    """Encode a raw table with a private schema: unparsable fields of binned columns are missing, never an error.

    The private schema's binned columns have a missing code and clip, its categorical columns an ``other``
    code, so no field of the private table can stop the run (an error would depend on one record).

    Args:
        schema: a :class:`~pgmjax.Schema` from :func:`pgmjax.preprocessing.preprocess.private_schema`.
        frame: the raw table.

    Returns:
        A :class:`~pgmjax.Dataset` over ``schema.domain`` (:meth:`pgmjax.Schema.encode` with
        ``unreadable="missing"``).
    """
    for name, col in schema.columns.items():
        if isinstance(col, NumericColumn) and not (col.missing and col.clip):
            raise ValueError(f"encode_raw: column {name!r} needs a missing code and clipping (a private schema's columns have both)")
        if not isinstance(col, NumericColumn) and col.other is None:
            raise ValueError(f"encode_raw: column {name!r} needs an other code (a private schema's columns have one)")
    return schema.encode(frame, unreadable="missing")
