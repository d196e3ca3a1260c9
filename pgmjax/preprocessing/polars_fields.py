"""Raw fields parsed by Polars exactly as the in-memory raw path parses them (:mod:`pgmjax.data.raw_fields`).

:func:`parse` adds to a lazy frame of text columns, per wanted column, one of

* ``"text"``: the field stripped of Python's whitespace (:data:`PY_WHITESPACE`, what pandas' ``.str.strip()``
  removes), as categorical columns compare it;
* ``"number"``, ``"date"``, ``"datetime"``: :func:`pgmjax.data.raw_fields.column_values` (null where the
  in-memory value is NaN): finite numbers as pandas' ``to_numeric`` reads them; days since 1970-01-01 of ISO
  dates and datetimes of a real calendar day and time within pandas' nanosecond range
  (:func:`pgmjax.data.schema_columns.iso_stamps`), a datetime's seconds floored;
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
    ([12.0, None, None, None, None], [None, 18321.0, None, None, None], [0, 2, 4, 4, -1])
"""

from __future__ import annotations

import sys

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
    iso = sorted({c for c, what in wants.values() if what in _NEEDS_ISO})
    lf = frame.select([pl.col(c).str.strip_chars(PY_WHITESPACE).alias(tag[c] + "t") for c in names])
    if iso:
        lf = lf.with_columns([pl.col(tag[c] + "t").str.extract_groups(ISO_PARTS).alias(tag[c] + "g") for c in iso])
        lf = lf.with_columns([pl.col(tag[c] + "g").struct.field(str(i)).alias(f"{tag[c]}p{i}")
                              for c in iso for i in range(1, 8)])
        lf = lf.with_columns([e for c in iso for e in _iso(tag[c])])
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
    # pandas' nanosecond stamps: -9223372036.854775807 s to 9223372036.854775807 s around 1970-01-01.
    in_range = (((total > -9223372037) | ((total == -9223372037) & (frac >= 145224193)))
                & ((total < 9223372036) | ((total == 9223372036) & (frac <= 854775807))))
    valid = (y.is_not_null() & m.is_between(1, 12) & (d >= 1) & (d <= dim) & (hh < 24) & (mm < 60) & (ss < 60)
             & in_range).fill_null(False)
    return [days.alias(f"{pre}days"), secs.alias(f"{pre}secs"), valid.alias(f"{pre}valid"),
            pl.col(f"{pre}p4").is_not_null().alias(f"{pre}timed")]


def _output(pre: str, what: str):
    import polars as pl

    t = pl.col(pre + "t")
    if what == "text":
        return t
    x = t.cast(pl.Float64, strict=False)
    if what == "number":
        return pl.when(x.is_finite()).then(x + 0.0)  # + 0.0: -0.0 is zero, as NumPy compares it
    days, secs, valid = pl.col(pre + "days"), pl.col(pre + "secs"), pl.col(pre + "valid")
    if what == "date":
        return pl.when(valid).then(days.cast(pl.Float64))
    if what == "datetime":
        # Polars turns a division by a literal into a product with its reciprocal (an ulp off NumPy's seconds /
        # 86400): the divisor is a per-row value, so that it divides as the in-memory path does.
        per_day = (secs * 0 + 86400).cast(pl.Float64)
        return pl.when(valid).then((days * 86400 + secs).cast(pl.Float64) / per_day)
    if what != "class":
        raise ValueError(f"polars_fields.parse: unknown output {what!r}")
    finite = x.is_finite().fill_null(False)
    timed = pl.col(pre + "timed")
    return (pl.when(t == "").then(-1).when(finite & (x == x.round(0))).then(0).when(finite).then(1)
            .when(valid & ~timed).then(2).when(valid).then(3).otherwise(4))
