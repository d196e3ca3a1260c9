"""The raw path's format choices: each column's kind by a private vote, decimals by a rule, bad fields as missing.

Every choice about a column's *format* that the raw path makes is either declared by the user (public),
decided under differential privacy and charged to the accountant, or fixed by a rule that reads only
released values; none reads the private table outside the budget:

* **Kind** (number, integer, date, datetime, text): declared (``kinds=`` of
  :func:`pgmjax.preprocessing.preprocess.private_schema`, ``--kind`` on the command line), or decided by
  :func:`private_kind`: each field is put in one of the classes of :data:`FIELD_CLASSES` (a whole number; a
  number with a fraction, by the decimals it is written with; a date, ISO or year first; a date written
  with the year last that is only valid day first, only month first, or either way; an ISO datetime; anything
  else; an empty field), the class counts get discrete Laplace (pure accountant) or discrete Gaussian (zCDP
  accountant) noise through the accountant, and :func:`decide_kind` reads the kind off the noisy counts
  alone. One record is in one class, so the histogram has sensitivity 1 under add/remove neighbours and 2
  (L2 ``sqrt 2``) under replace-one (Dwork, McSherry, Nissim & Smith, TCC 2006; the vote is
  post-processing of the histogram, as in Report Noisy Max, Dwork & Roth, "The algorithmic foundations of
  differential privacy", 2014, Section 3.3 and Proposition 2.1). The rule is a plurality: number,
  temporal or text, whichever class group has the largest noisy count (ties in that order); a number is
  an integer when its noisy whole count exceeds its noisy fractional count; a temporal column is a
  datetime when its noisy count of values with a time exceeds that of dates alone.
* **Format**, from the same noisy histogram (post-processing, no further charge): the **decimals** of a
  non-integer number (the plurality of the fractions written with 1..6 decimals; with more, or an
  exponent, the rule below); the **date format** of a date column whose year-last dates pass the noise
  threshold (day first when the noisy count of dates only valid day first, like ``25/12/2020``, is at least
  that of dates only valid month first); the **unreadable share** (the noisy share of non-empty fields
  the kind and format read as missing: warned about above :data:`UNREADABLE_WARN`); and whether the column
  has **blanks** at all (the noisy count of empty and unreadable fields against the threshold of noise
  alone). Declared instead: ``decimals=`` / ``--decimals``, ``date_formats=`` / ``--date-format``.
* **Decimals** of a non-integer number neither declared nor voted: :func:`rule_decimals` of the
  *released* bin edges: enough decimals for 1/100 of the narrowest bin.
* **Unparsable fields** (``n/a`` in a number column, ``2020-02-30`` or ``soon`` in a date column, ``inf``)
  are **missing**, by :func:`pgmjax.data.raw_fields.column_values` and :func:`encode_raw`: never an error, which would reveal
  that one record holds such a value. A date column takes a datetime's day; a datetime column a date's
  midnight.

Example:
    >>> from pgmjax.privacy import Accountant
    >>> acc = Accountant(epsilon=1.0)
    >>> values = ["12", "7", "n/a", "41234.56789"] + [str(i) for i in range(2000)]
    >>> vote = private_kind(acc, jax.random.key(0), values, budget=0.1)
    >>> vote["kind"], vote["integer"]
    ('number', True)
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
from ..data.date_forms import other_date_days, year_last_parts
from ..data.raw_fields import column_values, iso_valid
from ..data.schema_columns import ISO_DATE, NumericColumn, as_text
from .private_bins import noisy_counts

__all__ = ["FIELD_CLASSES", "KINDS", "DECIMALS_TEXT", "UNREADABLE_WARN", "FORMAT_FALSE_PASS", "BLANKS_FALSE_PASS", "field_classes", "class_counts", "private_kind", "private_kind_of_counts", "decide_kind", "rule_decimals", "encode_raw"]

#: The classes of a field in the kind vote, in the order of the noisy histogram: a whole number; a number with a
#: fraction written with 7+ decimals or an exponent; a date (ISO, or year first: :mod:`pgmjax.data.date_forms`); an
#: ISO datetime with a time; anything else; a date written with the year last that is a day only read day first,
#: only month first, either way; an empty field; a number with a fraction written with 1, ..., 6 decimals.
FIELD_CLASSES = ("whole", "fractional", "date", "datetime", "text", "date day first", "date month first",
                 "date either order", "empty", "1 decimal", "2 decimals", "3 decimals", "4 decimals", "5 decimals",
                 "6 decimals")
#: The kinds a column can be declared as.
KINDS = ("number", "integer", "date", "datetime", "text")
#: A number written as plain decimals: its fraction's digits (how the decimals vote reads a field).
DECIMALS_TEXT = r"^[+-]?[0-9]*\.([0-9]+)$"
#: A column whose non-empty fields are more than this share unreadable as its kind (noisy estimate) is warned about.
UNREADABLE_WARN = 0.1
#: The probability that noise alone makes a column's count of year-last dates pass (a date format is chosen).
FORMAT_FALSE_PASS = 0.01
#: The probability that noise alone makes a blank-free column's count of empty and text fields pass (it keeps blanks).
BLANKS_FALSE_PASS = 0.05
_W, _F7, _D, _T, _X, _DM, _MD, _EI, _E = range(9)
_FRACTIONS = [_F7] + list(range(9, 15))


def field_classes(values) -> np.ndarray:
    """The class of every field (an index into :data:`FIELD_CLASSES`).

    Example:
        >>> field_classes(["1", "1.5", "2020-01-02", "2020-01-02 03:04", "2020-02-30", "n/a", ""]).tolist()
        [0, 9, 2, 3, 4, 4, 8]
        >>> field_classes(["13/02/2020", "02/13/2020", "02/03/2020", "2020/2/3", "1.25", "1.1234567", "1e-3"]).tolist()
        [5, 6, 7, 2, 10, 1, 1]
    """
    text = as_text(values).str.strip().reset_index(drop=True)
    out = np.full(len(text), _X, np.int64)
    x = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    finite = np.isfinite(x)
    places = text.str.extract(DECIMALS_TEXT)[0].str.len().to_numpy(np.float64)
    fraction = np.where((places >= 1) & (places <= 6), 8 + np.nan_to_num(places), _F7).astype(np.int64)
    out[finite] = np.where(x[finite] == np.round(x[finite]), _W, fraction[finite])
    iso = iso_valid(text) & ~finite
    date_only = text.str.fullmatch(ISO_DATE).to_numpy(bool)
    out[iso & date_only] = _D
    out[iso & ~date_only] = _T
    rest = ~finite & ~iso
    if rest.any():
        idx = np.flatnonzero(rest)
        sub = text[rest]
        year_first = np.isfinite(other_date_days(sub, None))
        day_first, month_first = (np.isfinite(v) for v in year_last_parts(sub))
        cls = np.select([year_first, day_first & month_first, day_first, month_first], [_D, _EI, _DM, _MD], _X)
        out[idx] = cls
    out[(text == "").to_numpy()] = _E
    return out


def class_counts(values) -> np.ndarray:
    """How many fields fall in each of :data:`FIELD_CLASSES` (int64): all the kind vote reads of a column.

    Example:
        >>> class_counts(["1", "2", "", "x", "2020-01-02"]).tolist()[:9]
        [2, 0, 1, 0, 1, 0, 0, 0, 1]
    """
    return np.bincount(field_classes(values), minlength=len(FIELD_CLASSES)).astype(np.int64)


def decide_kind(noisy, allowed: tuple[str, ...] = ("number", "temporal", "text"), noise: tuple | None = None) -> dict:
    """The kind, and the format choices, read off the noisy class counts (post-processing: no data is read).

    * kind: the plurality of the class groups number, temporal, text (ties in that order); a number is an
      integer when its noisy whole count exceeds its noisy fractional count; a temporal column a datetime when
      its noisy count with a time exceeds that of dates alone;
    * ``decimals`` of a non-integer number: the plurality among the fractions written with 1, ..., 6 decimals and
      with more (or an exponent; then None: the rule of the released edges);
    * ``date_format`` of a date: ``"dd/mm/yyyy"`` when the noisy count of year-last dates only valid day first is
      at least that of those only valid month first, else ``"mm/dd/yyyy"``; None when the year-last dates' noisy
      count does not pass the threshold of noise alone;
    * ``unreadable``: the noisy share of the non-empty fields that the column's kind and format read as missing;
    * ``blanks``: whether the noisy count of empty and text fields (``n/a``) passes the threshold of noise alone
      at :data:`BLANKS_FALSE_PASS` (False: the column holds no blanks, as far as the noise tells; its missing
      code is decoded as a value; at small budgets a column with a few blanks may lose them).

    Args:
        noisy: noisy counts of :data:`FIELD_CLASSES` (shorter: the rest are zero).
        allowed: the class groups to choose among (all three by default).
        noise: ``(family, scale)`` of the counts' noise (``"laplace"`` / ``"gaussian"`` and the ledger's scale):
            thresholds with false-pass probability :data:`FORMAT_FALSE_PASS`; None: a noisy sum above 0 passes.

    Returns:
        ``{"kind", "integer", "decimals", "date_format", "unreadable", "blanks"}``.

    Example:
        >>> out = decide_kind([900, 20, 0, 3, 40])
        >>> out["kind"], out["integer"], round(out["unreadable"], 3), decide_kind([0, 0, 400, 500, 0])["kind"]
        ('number', True, 0.045, 'datetime')
        >>> out = decide_kind([0, 0, 500, 0, 10, 300, 4, 90, 50])
        >>> out["kind"], out["date_format"], round(out["unreadable"], 3), out["blanks"]
        ('date', 'dd/mm/yyyy', 0.015, True)
    """
    c = np.zeros(len(FIELD_CLASSES))
    c[:len(noisy)] = np.asarray(noisy, np.float64)
    fractional = float(c[_FRACTIONS].sum())
    groups = {"number": c[_W] + fractional, "temporal": c[[_D, _T, _DM, _MD, _EI]].sum(), "text": c[_X]}
    best = max(allowed, key=lambda g: (groups[g], -allowed.index(g)))  # ties: the earlier group

    def passes(idx, alpha=FORMAT_FALSE_PASS) -> bool:  # is the noisy sum of these counts clearly above noise alone?
        total = float(c[idx].sum())
        if noise is None:
            return total > 0
        from ..privacy.discrete_tails import sum_threshold

        return total >= sum_threshold(noise[0], noise[1], len(idx), alpha)

    out = {"kind": "text", "integer": False, "decimals": None, "date_format": None}
    numbers, others = [_W] + _FRACTIONS, [_D, _T, _X, _DM, _MD, _EI]
    if best == "number":
        out.update(kind="number", integer=bool(c[_W] > fractional))
        if not out["integer"]:
            top = max(range(9, 15), key=lambda i: (c[i], -i))
            out["decimals"] = top - 8 if c[top] > c[_F7] else None
        bad = others
    elif best == "temporal":
        year_last = c[[_DM, _MD, _EI]]
        if c[_T] > c[[_D, _DM, _MD, _EI]].sum():
            out["kind"], bad = "datetime", numbers + [_X, _DM, _MD, _EI]
        else:
            out["kind"] = "date"
            if passes([_DM, _MD, _EI]):
                out["date_format"] = "dd/mm/yyyy" if year_last[0] >= year_last[1] else "mm/dd/yyyy"
            bad = numbers + [_X] + {None: [_DM, _MD, _EI], "dd/mm/yyyy": [_MD], "mm/dd/yyyy": [_DM]}[out["date_format"]]
    else:
        bad = []
    filled = max(float(np.delete(c, _E).clip(0).sum()), 1.0)
    out["unreadable"] = float(min(max(c[bad].sum(), 0.0) / filled, 1.0)) if bad else 0.0
    # Blanks: the empty fields and the text ones (n/a, unknown), the bulk of what a column reads as missing; two
    # noisy counts, not every unreadable class, so that a few hundred blanks pass at small budgets (the noise of a
    # sum grows with the counts summed).
    out["blanks"] = passes([_E] if out["kind"] == "text" else [_E, _X], BLANKS_FALSE_PASS)
    return out


def private_kind(acc, key, values, *, budget: float, target: str = "kind") -> dict:
    """A column's kind by a private vote: one noisy histogram of :func:`field_classes`, then :func:`decide_kind`.

    Args:
        acc: the accountant (pure or zCDP; its ``bounded`` sets the sensitivity, 1 or 2).
        key: a ``jax.random`` key.
        values: the private column (text or numbers).
        budget: the histogram's cost in the accountant's currency.
        target: ledger label.

    Returns:
        The dict of :func:`decide_kind`.
    """
    return private_kind_of_counts(acc, key, class_counts(values), budget=budget, target=target)


def private_kind_of_counts(acc, key, counts, *, budget: float, target: str = "kind") -> dict:
    """:func:`private_kind` from the column's :func:`class_counts` (as the out-of-core engines compute them).

    Example:
        >>> from pgmjax.privacy import Accountant
        >>> private_kind_of_counts(Accountant(epsilon=1.0), jax.random.key(0), [0, 0, 900, 5, 10] + [0] * 10, budget=0.5)["kind"]
        'date'
    """
    counts = np.asarray(counts, np.float64)
    if counts.shape != (len(FIELD_CLASSES),):  # an engine that counts fewer classes would bias the vote
        raise ValueError(f"private_kind_of_counts: need {len(FIELD_CLASSES)} class counts (FIELD_CLASSES), got {counts.shape}")
    noisy, _ = noisy_counts(acc, key, counts, budget=budget, alpha=0.01, target=target)
    entry = acc.ledger[-1]
    return decide_kind(noisy, noise=(entry.mechanism, float(entry.scale)))


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
