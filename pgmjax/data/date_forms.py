"""Dates written other than ISO: year first with ``/``, ``.`` or ``-`` (always read), day first or month first.

A date column reads ISO dates (:data:`pgmjax.data.schema_columns.ISO_DATETIME`, a datetime counting as its
day) and, besides them,

* year first: ``2020/3/7``, ``2020.03.07``, ``2020-3-7`` (one or two digits of month and day): never ambiguous;
* with the year last, ``07/03/2020`` (or ``.`` / ``-``) is the 7th of March read day first (``"dd/mm/yyyy"``)
  and the 3rd of July read month first (``"mm/dd/yyyy"``): which one is the column's **date format**, declared
  (``--date-format``, a schema's ``"date_format"``) or decided by the private kind vote
  (:mod:`pgmjax.preprocessing.private_format`: the noisy counts of fields only valid day first against those
  only valid month first). Without one, such fields are unreadable (missing on the raw path).

A date is a real calendar day (proleptic Gregorian) within pandas' nanosecond range, 1677-09-22 to
2262-04-11, as the ISO reader takes it. The Polars engine (:mod:`pgmjax.preprocessing.polars_fields`) parses
the same forms with the same regular expressions and the same whole-number arithmetic.

Example:
    >>> other_date_days(["2020/3/7", "07/03/2020", "7.3.2020", "13/13/2020", "2020-02-30"], "dd/mm/yyyy").tolist()
    [18328.0, 18328.0, 18328.0, nan, nan]
    >>> other_date_days(["07/03/2020"], "mm/dd/yyyy").tolist(), other_date_days(["07/03/2020"], None).tolist()
    ([18446.0], [nan])
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["DATE_FORMATS", "YEAR_FIRST", "YEAR_LAST", "DAY_RANGE", "civil_days", "year_last_parts", "other_date_days",
           "read_kind", "split_kind"]

#: The date formats a column may declare: ISO only (year-first forms are always read), day first, month first.
DATE_FORMATS = ("yyyy-mm-dd", "dd/mm/yyyy", "mm/dd/yyyy")
#: A date written year first: year, month, day (any of ``/``, ``.``, ``-`` between them).
YEAR_FIRST = r"^([0-9]{4})[/.-]([0-9]{1,2})[/.-]([0-9]{1,2})$"
#: A date written with the year last: two parts (day and month, in the column's order), then the year.
YEAR_LAST = r"^([0-9]{1,2})[/.-]([0-9]{1,2})[/.-]([0-9]{4})$"
#: Days since 1970-01-01 of the first and last whole days in pandas' nanosecond range (1677-09-22, 2262-04-11).
DAY_RANGE = (-106751, 106751)


def civil_days(y, m, d) -> np.ndarray:
    """Days since 1970-01-01 (float64) of a year, month and day (integer arrays), NaN where that is no real calendar
    day within :data:`DAY_RANGE`; the whole-number arithmetic of the Polars engine (proleptic Gregorian).

    Example:
        >>> civil_days(np.array([2020, 2021, 1970]), np.array([2, 2, 1]), np.array([29, 29, 1])).tolist()
        [18321.0, nan, 0.0]
    """
    y, m, d = (np.asarray(v, np.int64) for v in (y, m, d))
    leap = (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    dim = np.where(m == 2, 28 + leap, np.where(np.isin(m, (4, 6, 9, 11)), 30, 31))
    yy = y - (m <= 2)
    era = yy // 400
    yoe = yy - era * 400
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + (153 * ((m + 9) % 12) + 2) // 5 + d - 1 - 719468
    ok = (m >= 1) & (m <= 12) & (d >= 1) & (d <= dim) & (days >= DAY_RANGE[0]) & (days <= DAY_RANGE[1])
    return np.where(ok, days, np.nan).astype(np.float64)


def _parts(text: pd.Series, pattern: str) -> np.ndarray:
    """The three groups of ``pattern`` as an int64 array ``(n, 3)``, -1 where the field does not match."""
    g = text.str.extract(pattern)
    hit = g[0].notna().to_numpy()
    out = np.full((len(text), 3), -1, np.int64)
    if hit.any():
        out[hit] = g[hit].to_numpy(dtype=str).astype(np.int64)
    return out


def year_last_parts(text) -> tuple[np.ndarray, np.ndarray]:
    """``(days read day first, days read month first)`` of fields written with the year last (NaN elsewhere):
    what the kind vote's classes of such a field are read from.

    Example:
        >>> [a.tolist() for a in year_last_parts(["13/02/2020", "02/13/2020", "02/03/2020", "x"])]
        [[18305.0, nan, 18323.0, nan], [nan, 18305.0, 18295.0, nan]]
    """
    p = _parts(pd.Series(text, dtype=object).astype(str).reset_index(drop=True), YEAR_LAST)
    return civil_days(p[:, 2], p[:, 1], p[:, 0]), civil_days(p[:, 2], p[:, 0], p[:, 1])


def other_date_days(text, date_format: str | None) -> np.ndarray:
    """Days since 1970-01-01 of the fields written year first, or year last in ``date_format`` (NaN elsewhere).

    Args:
        text: stripped text fields.
        date_format: ``"dd/mm/yyyy"``, ``"mm/dd/yyyy"``, or None / ``"yyyy-mm-dd"`` (year first only).

    Returns:
        A float64 array.
    """
    s = pd.Series(text, dtype=object).astype(str).reset_index(drop=True)
    p = _parts(s, YEAR_FIRST)
    out = civil_days(p[:, 0], p[:, 1], p[:, 2])
    if date_format in ("dd/mm/yyyy", "mm/dd/yyyy"):
        day_first, month_first = year_last_parts(s)
        last = day_first if date_format == "dd/mm/yyyy" else month_first
        out = np.where(np.isnan(out), last, out)
    return out


def read_kind(kind: str, date_format: str | None) -> str:
    """The kind string the raw readers take (:func:`pgmjax.data.raw_fields.column_values`, the engines' parsers):
    ``"date dd/mm/yyyy"`` for a date column read day first, else ``kind``.

    Example:
        >>> read_kind("date", "dd/mm/yyyy"), read_kind("date", None), read_kind("number", None)
        ('date dd/mm/yyyy', 'date', 'number')
    """
    if kind == "date" and date_format in ("dd/mm/yyyy", "mm/dd/yyyy"):
        return f"date {date_format}"
    return kind


def split_kind(kind: str) -> tuple[str, str | None]:
    """``(kind, date format or None)`` of a :func:`read_kind` string; raises ValueError for an unknown one.

    Example:
        >>> split_kind("date mm/dd/yyyy"), split_kind("number")
        (('date', 'mm/dd/yyyy'), ('number', None))
    """
    base, _, fmt = kind.partition(" ")
    if base not in ("number", "date", "datetime") or (fmt and (base != "date" or fmt not in DATE_FORMATS[1:])):
        raise ValueError(f"column_values: kind must be number, date, datetime or 'date dd/mm/yyyy' / 'date mm/dd/yyyy', "
                         f"got {kind!r}")
    return base, fmt or None
