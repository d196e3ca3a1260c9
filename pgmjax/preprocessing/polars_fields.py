"""Raw fields parsed by Polars exactly as the in-memory raw path parses them (:mod:`pgmjax.data.raw_fields`).

:func:`parse` adds to a lazy frame of text columns, per wanted column, one of

* ``"text"``: the field stripped of Python's whitespace (:data:`PY_WHITESPACE`, what pandas' ``.str.strip()``
  removes), as categorical columns compare it;
* ``"number"``, ``"date"``, ``"date dd/mm/yyyy"``, ``"date mm/dd/yyyy"``, ``"datetime"``:
  :func:`pgmjax.data.raw_fields.column_values` (null where the in-memory value is NaN): finite numbers as
  pandas' ``to_numeric`` reads them; days since 1970-01-01 of ISO dates and datetimes of a real calendar
  day and time within pandas' nanosecond range (:func:`pgmjax.data.schema_columns.iso_stamps`), a
  datetime's seconds floored; for dates also the other forms of :mod:`pgmjax.data.date_forms` (year first,
  and year last in the column's date format), by the same regular expressions and arithmetic;
* ``"class"``: :func:`pgmjax.preprocessing.private_format.field_classes` (the kind vote's classes).

The regular expression is applied once per column and the parts computed in stages (``with_columns``), so a
streaming query evaluates each once. ``tests/preprocessing/test_engines_raw.py`` compares every output with the in-memory
functions on fields chosen to split parsers (calendar and range limits, fractions of a second, signs of zero,
Unicode whitespace and digits).

Example:
    >>> import polars as pl
    >>> lf = pl.LazyFrame({"v": [" 12 ", "2020-02-29", "2020-02-30", "n/a", ""]})
    >>> out = parse(lf, {"x": ("v", "number"), "d": ("v", "date"), "k": ("v", "class")}).collect()
    >>> out["x"].to_list(), out["d"].to_list(), out["k"].to_list()
    ([12.0, None, None, None, None], [None, 18321.0, None, None, None], [0, 2, 4, 4, 8])
    >>> lf = pl.LazyFrame({"v": ["2020/2/29", "29.02.2020", "02/29/2020", "1.25"]})
    >>> out = parse(lf, {"d": ("v", "date dd/mm/yyyy"), "k": ("v", "class")}).collect()
    >>> out["d"].to_list(), out["k"].to_list()
    ([18321.0, 18321.0, None, None], [2, 5, 6, 10])
"""

from __future__ import annotations

import sys

from ..data.date_forms import DAY_RANGE, YEAR_FIRST, YEAR_LAST, split_kind
from .private_format import DECIMALS_TEXT

__all__ = ["PY_WHITESPACE", "ISO_PARTS", "parse"]

#: The characters Python's ``str.strip()`` removes (as pandas' ``.str.strip()`` does); Polars strips exactly these.
PY_WHITESPACE = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())
#: An ISO date or datetime (:data:`pgmjax.data.schema_columns.ISO_DATETIME`) with its seven parts as groups.
ISO_PARTS = r"^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]*))?)?)?$"
_NEEDS_ISO = ("date", "datetime", "class")


def parse(frame, wants: dict):
    """``frame`` (a ``LazyFrame`` of text columns) with one column per entry of ``wants``, ``out: (column, what)``
    (``what``: ``"text"``, ``"number"``, ``"date"``, ``"datetime"`` or ``"class"``); only those columns."""
    import polars as pl

    names = sorted({c for c, _ in wants.values()})
    tag = {c: f"__{i}" for i, c in enumerate(names)}
    iso = sorted({c for c, what in wants.values() if what.partition(" ")[0] in _NEEDS_ISO})
    lf = frame.select([pl.col(c).str.strip_chars(PY_WHITESPACE).alias(tag[c] + "t") for c in names])
    if iso:
        lf = lf.with_columns([pl.col(tag[c] + "t").str.extract_groups(ISO_PARTS).alias(tag[c] + "g") for c in iso])
        lf = lf.with_columns([pl.col(tag[c] + "g").struct.field(str(i)).alias(f"{tag[c]}p{i}")
                              for c in iso for i in range(1, 8)])
        lf = lf.with_columns([e for c in iso for e in _iso(tag[c])])
        lf = lf.with_columns([e for c in iso for e in _other_dates(tag[c])])
    return lf.select([_output(tag[c], what).alias(out) for out, (c, what) in wants.items()])


def _iso(pre: str) -> list:
    """Columns ``{pre}days``, ``{pre}secs`` (of the day), ``{pre}valid``, ``{pre}timed`` from the parts ``{pre}p1..7``."""
    import polars as pl

    y, m, d = (pl.col(f"{pre}p{i}").cast(pl.Int64, strict=False) for i in (1, 2, 3))
    hh, mm, ss = (pl.col(f"{pre}p{i}").cast(pl.Int64, strict=False).fill_null(0) for i in (4, 5, 6))
    frac = pl.col(f"{pre}p7").fill_null("").str.slice(0, 9).str.pad_end(9, "0").cast(pl.Int64, strict=False).fill_null(0)
    leap = ((y % 4) == 0) & (((y % 100) != 0) | ((y % 400) == 0))
    dim = pl.when(m == 2).then(28 + leap.cast(pl.Int64)).when(m.is_in([4, 6, 9, 11])).then(30).otherwise(31)
    yy = y - (m <= 2).cast(pl.Int64)  # days from the civil date (proleptic Gregorian), whole-number arithmetic
    era = yy // 400
    yoe = yy - era * 400
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + (153 * ((m + 9) % 12) + 2) // 5 + d - 1 - 719468
    secs = hh * 3600 + mm * 60 + ss
    total = days * 86400 + secs
    # pandas' nanosecond stamps are int64 nanoseconds around 1970-01-01: from -(2^63) to 2^63 - 1 ns.
    in_range = (((total > -9223372037) | ((total == -9223372037) & (frac >= 145224193)))
                & ((total < 9223372036) | ((total == 9223372036) & (frac <= 854775807))))
    valid = (y.is_not_null() & m.is_between(1, 12) & (d >= 1) & (d <= dim) & (hh < 24) & (mm < 60) & (ss < 60)
             & in_range).fill_null(False)
    return [days.alias(f"{pre}days"), secs.alias(f"{pre}secs"), valid.alias(f"{pre}valid"),
            pl.col(f"{pre}p4").is_not_null().alias(f"{pre}timed")]


def _civil(y, m, d):
    """Days since 1970-01-01 of integer expressions, null where no real day in :data:`DAY_RANGE`
    (:func:`pgmjax.data.date_forms.civil_days`, the same arithmetic)."""
    import polars as pl

    leap = ((y % 4) == 0) & (((y % 100) != 0) | ((y % 400) == 0))
    dim = pl.when(m == 2).then(28 + leap.cast(pl.Int64)).when(m.is_in([4, 6, 9, 11])).then(30).otherwise(31)
    yy = y - (m <= 2).cast(pl.Int64)
    era = yy // 400
    yoe = yy - era * 400
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + (153 * ((m + 9) % 12) + 2) // 5 + d - 1 - 719468
    ok = (m.is_between(1, 12) & (d >= 1) & (d <= dim) & days.is_between(*DAY_RANGE)).fill_null(False)
    return pl.when(ok).then(days.cast(pl.Float64))


def _other_dates(pre: str) -> list:
    """Columns ``{pre}yf`` (a date written year first), ``{pre}dm`` and ``{pre}md`` (year last, read day first,
    month first): days, or null (:func:`pgmjax.data.date_forms.other_date_days`)."""
    import polars as pl

    t = pl.col(pre + "t")
    yf, yl = t.str.extract_groups(YEAR_FIRST), t.str.extract_groups(YEAR_LAST)
    a, b, c = (yf.struct.field(str(i)).cast(pl.Int64, strict=False) for i in (1, 2, 3))
    p, q, y = (yl.struct.field(str(i)).cast(pl.Int64, strict=False) for i in (1, 2, 3))
    return [_civil(a, b, c).alias(pre + "yf"), _civil(y, q, p).alias(pre + "dm"), _civil(y, p, q).alias(pre + "md")]


def _output(pre: str, what: str):
    import polars as pl

    t = pl.col(pre + "t")
    if what == "text":
        return t
    x = t.cast(pl.Float64, strict=False)
    if what == "number":
        return pl.when(x.is_finite()).then(x + 0.0)  # + 0.0: -0.0 is zero, as NumPy compares it
    days, secs, valid = pl.col(pre + "days"), pl.col(pre + "secs"), pl.col(pre + "valid")
    yf, dm, md = pl.col(pre + "yf"), pl.col(pre + "dm"), pl.col(pre + "md")
    if what.startswith("date "):
        last = {"dd/mm/yyyy": dm, "mm/dd/yyyy": md}[split_kind(what)[1]]
        return pl.when(valid).then(days.cast(pl.Float64)).otherwise(yf.fill_null(last))
    if what == "date":
        return pl.when(valid).then(days.cast(pl.Float64)).otherwise(yf)
    if what == "datetime":
        # Polars turns a division by a literal into a product with its reciprocal (an ulp off NumPy's seconds /
        # 86400): the divisor is a per-row value, so that it divides as the in-memory path does.
        per_day = (secs * 0 + 86400).cast(pl.Float64)
        return pl.when(valid).then((days * 86400 + secs).cast(pl.Float64) / per_day).otherwise(yf)
    if what != "class":
        raise ValueError(f"polars_fields.parse: unknown output {what!r}")
    finite = x.is_finite().fill_null(False)
    timed = pl.col(pre + "timed")
    places = t.str.extract(DECIMALS_TEXT, 1).str.len_chars().cast(pl.Int64)
    fraction = pl.when(places.is_between(1, 6)).then(8 + places).otherwise(1)
    dm_ok, md_ok = dm.is_not_null(), md.is_not_null()
    return (pl.when(t == "").then(8).when(finite & (x == x.round(0))).then(0).when(finite).then(fraction)
            .when(valid & ~timed).then(2).when(valid).then(3).when(yf.is_not_null()).then(2)
            .when(dm_ok & md_ok).then(7).when(dm_ok).then(5).when(md_ok).then(6).otherwise(4).cast(pl.Int64))
