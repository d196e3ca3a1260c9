"""Columns of a discretisation schema (:mod:`pgmjax.data.schema`): numbers, dates and categories, to codes and back.

* :class:`NumericColumn`: bins ``[e_i, e_{i+1})`` (the last one closed) of a number or a date
  (``kind="date"``: ISO dates ``YYYY-MM-DD`` counted in days since 1970-01-01). Optional: a last
  code for missing values (``missing=True``: empty field or NaN, decoded as an empty field),
  clipping of out-of-range values into the end bins (``clip=True``, instead of an error), decoding
  to integers (``integer=True``; dates always decode to whole days) or rounded to ``decimals``.
  Decoding is done in float64: the bin midpoint (``decode="midpoint"``: 26.5 for the bin
  ``[26, 27)``, exactly) or a uniform draw within the bin from 53 random bits.
* :class:`CategoricalColumn`: code ``i`` is ``categories[i]`` (compared as text; a NaN read by
  ``pandas.read_csv`` is the empty field ``""``; a float ``3.0`` is the text ``"3"``); with ``other``
  set, every value outside the list gets the last code, decoded as the text ``other``.

Example:
    >>> col = NumericColumn("age", np.array([18.0, 26.0, 27.0, 90.0]), missing=True, clip=True)
    >>> col.encode(np.array([17.0, 26.5, np.nan, 95.0])).tolist()
    [0, 1, 3, 2]
    >>> float(col.midpoints()[1]), col.decode_codes(np.array([3]), jax.random.key(0)).tolist()
    (26.5, [nan])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from .dataset import DataValueError
from .date_forms import DATE_FORMATS, other_date_days, read_kind

__all__ = ["SchemaError", "SchemaValueError", "NumericColumn", "CategoricalColumn", "DECODE_METHODS", "MAX_BINS", "parse_column",
           "uniform64", "to_float", "iso_stamps", "date_days", "days_to_dates",
           "datetime_days", "days_to_datetimes", "ISO_DATE", "ISO_DATETIME"]

DECODE_METHODS = ("uniform", "midpoint")
KINDS = ("number", "date", "datetime")
NUMERIC_KEYS = {"bins", "range", "integer", "decode", "missing", "clip", "type", "decimals", "date_format", "blanks"}
#: The largest number of bins ``"bins": k`` may ask for. A few characters of JSON would otherwise allocate
#: ``8 k`` bytes of edges (a schema read with a saved model is untrusted input); a one-way marginal of a
#: million values is already larger than DP noise lets a table be useful. More bins can be listed as edges.
MAX_BINS = 10**6
CATEGORICAL_KEYS = {"categories", "other"}
_EPOCH = np.datetime64("1970-01-01", "D")
#: Text of an ISO date, and of an ISO datetime (a date alone, or with ``HH:MM[:SS[.f]]`` after a space or ``T``).
ISO_DATE = r"\d{4}-\d{2}-\d{2}"
ISO_DATETIME = r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d*)?)?)?"


class SchemaError(ValueError):
    """A schema is malformed, or a raw value does not fit it (the message names column, row and value)."""


class SchemaValueError(SchemaError, DataValueError):
    """A raw value does not fit its column: ``str(e)`` names row and value, ``e.public`` only the column
    and what was expected (see :class:`pgmjax.data.dataset.DataValueError`)."""


def uniform64(key, shape) -> np.ndarray:
    """Uniform floats in ``[0, 1)`` with 53 random bits each (float64 whatever jax_enable_x64 says).

    Args:
        key: a ``jax.random`` key.
        shape: the output shape.

    Returns:
        A float64 NumPy array; every value is ``k / 2**53`` for an integer ``k``.

    Example:
        >>> u = uniform64(jax.random.key(0), (1000,))
        >>> u.dtype, bool((u >= 0).all() and (u < 1).all())
        (dtype('float64'), True)
    """
    bits = np.asarray(jax.random.bits(key, (2, *tuple(shape)), dtype=jax.numpy.uint32), np.uint64)
    return ((bits[0] >> np.uint64(5)) * np.uint64(2**26) + (bits[1] >> np.uint64(6))).astype(np.float64) / 2.0**53


def iso_stamps(text) -> pd.Series:
    """``pd.to_datetime(text, errors="coerce", format="ISO8601")``, NaT outside pandas' nanosecond range
    (1677-09-21 00:12:43.145224193 to 2262-04-11 23:47:16.854775807) whatever resolution pandas picked for the
    batch: pandas 3 parses ``1500-01-01`` at microsecond resolution unless another field has nanoseconds, and its
    nanosecond values then wrapped around. One rule for every field, whatever the other fields of the batch are.

    Example:
        >>> iso_stamps(pd.Series(["2020-01-01", "1500-01-01", "2262-04-12"])).isna().tolist()
        [False, True, True]
    """
    parsed = pd.to_datetime(pd.Series(text, dtype=object), errors="coerce", format="ISO8601")
    return parsed.where((parsed >= pd.Timestamp.min) & (parsed <= pd.Timestamp.max))


def _parse_iso(text, name: str, offset: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(datetime64[ns] values, missing mask)`` of ISO text; raises naming the first value that does not parse."""
    s = pd.Series(text, dtype=object)
    blank = s.isna() | (s.astype(str).str.strip() == "")
    parsed = iso_stamps(s.where(~blank, None))
    bad = np.flatnonzero(parsed.isna().to_numpy() & ~blank.to_numpy())
    if bad.size:
        r = int(bad[0])
        raise SchemaValueError(
            f"column {name!r} {_row(r, offset)}: value {s.iloc[r]!r} is not a {what} ({bad.size} such value(s))",
            f"column {name!r}: a value is not a {what}",
        )
    return parsed.to_numpy(dtype="datetime64[ns]"), blank.to_numpy() | parsed.isna().to_numpy()


def date_days(text, name: str = "date", offset: int = 0) -> np.ndarray:
    """Days since 1970-01-01 (float64; NaN for an empty field) of ISO dates ``YYYY-MM-DD``."""
    stamps, missing = _parse_iso(text, name, offset, "date YYYY-MM-DD")
    # Floor division of the nanoseconds: NumPy's ns -> D cast overflows within a day of the earliest stamp (1677-09-22).
    out = np.floor_divide(stamps.view(np.int64), 86400 * 10**9).astype(np.float64)
    out[missing] = np.nan
    return out


def datetime_days(text, name: str = "datetime", offset: int = 0) -> np.ndarray:
    """Days since 1970-01-01 00:00:00 with their fraction (float64, whole seconds; NaN for an empty field) of
    ISO datetimes ``YYYY-MM-DD HH:MM[:SS]`` (or with ``T``; a date alone is its midnight)."""
    stamps, missing = _parse_iso(text, name, offset, "datetime YYYY-MM-DD HH:MM:SS")
    seconds = np.floor_divide(stamps.view(np.int64), 10**9).astype(np.float64)  # as date_days: no cast near 1677
    out = seconds / 86400.0
    out[missing] = np.nan
    return out


def days_to_datetimes(days, sep: str = " ") -> np.ndarray:
    """ISO datetime strings ``YYYY-MM-DD HH:MM:SS`` of day numbers, floored to the second (``""`` for NaN)."""
    days = np.asarray(days, np.float64)
    out = np.full(days.shape, "", dtype=object)
    ok = np.isfinite(days)
    if not ok.any():  # every value missing (np.char.replace fails on an empty array)
        return out
    secs = np.floor(np.round(days[ok] * 86400.0, 6)).astype(np.int64)  # round first: 0.5 day is exactly 43200 s
    text = np.datetime_as_string(_EPOCH.astype("datetime64[s]") + secs, unit="s")
    out[ok] = np.char.replace(text.astype(str), "T", sep) if sep != "T" else text
    return out


def days_to_dates(days) -> np.ndarray:
    """ISO date strings of whole day numbers (``""`` for NaN)."""
    days = np.asarray(days, np.float64)
    out = np.full(days.shape, "", dtype=object)
    ok = np.isfinite(days)
    out[ok] = np.datetime_as_string(_EPOCH + days[ok].astype(np.int64), unit="D")
    return out


def to_float(raw, name: str, offset: int = 0) -> np.ndarray:
    """Float64 values of a column of numbers or numeric text (NaN for an empty field or "nan")."""
    raw = pd.Series(raw)
    if raw.dtype.kind in "iufb":
        return raw.to_numpy(np.float64)
    text = raw.astype(object).where(raw.notna(), "").astype(str).str.strip()
    x = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    bad = np.flatnonzero(np.isnan(x) & (text.to_numpy() != "") & (text.str.lower().to_numpy() != "nan"))
    if bad.size:
        r = int(bad[0])
        raise SchemaValueError(
            f"column {name!r} {_row(r, offset)}: value {text.iloc[r]!r} is not a number, but the schema bins this column "
            f"({bad.size} non-numeric value(s)); make it categorical in the schema or fix the data",
            f"column {name!r}: a value is not a number, but the schema bins this column; make it categorical "
            "in the schema or fix the data",
        )
    return x


def as_text(values) -> pd.Series:
    """Text form of raw values: NaN/None -> ``""``; integral floats without ``.0`` (``pandas.read_csv`` reads "3" as 3.0)."""
    s = pd.Series(values)
    if s.dtype.kind == "f":
        x = s.to_numpy(np.float64)
        whole = np.isfinite(x) & (x == np.round(x)) & (np.abs(x) < 2**53)
        text = np.where(whole, pd.Series(np.where(whole, x, 0).astype(np.int64)).astype(str), s.astype(str))
        return pd.Series(np.where(np.isnan(x), "", text), dtype=object)
    s = s.astype(object)
    return s.where(s.notna(), "").astype(str)


@dataclass(frozen=True, eq=False)
class NumericColumn:
    """A numeric (or date) column cut into bins ``[e_i, e_{i+1})`` (the last one closed).

    Attributes:
        name: the column name.
        edges: strictly increasing finite float64 edges, at least two (days since 1970-01-01 for dates).
        integer: decode to integers (each bin must contain one); dates are always whole days.
        decode: ``"uniform"`` (a uniform draw within the bin) or ``"midpoint"``.
        missing: one more code, the last, for missing values (decoded as NaN, or ``""`` for dates).
        clip: values outside ``[e_0, e_k]`` go to the end bins instead of raising.
        kind: ``"number"``, ``"date"`` or ``"datetime"``.
        decimals: decoded floats lie on the grid of this many decimals (None: no rounding): a bin's value is drawn
            among the multiples of ``10^-decimals`` inside it (a bin holding none: a draw rounded where it stays).
        date_format: of a date column, how a date written with the year last reads: ``"dd/mm/yyyy"`` or
            ``"mm/dd/yyyy"`` (None or ``"yyyy-mm-dd"``: ISO and year-first dates only; :mod:`pgmjax.data.date_forms`).
        blanks: False when the column holds no blanks as far as a noisy count tells (a private schema's rule):
            its missing code, which a model may still draw, decodes as one of the column's other decoded values.
    """

    name: str
    edges: np.ndarray
    integer: bool = False
    decode: str = "uniform"
    missing: bool = False
    clip: bool = False
    kind: str = "number"
    decimals: int | None = None
    date_format: str | None = None
    blanks: bool = True

    @property
    def bins(self) -> int:
        return len(self.edges) - 1

    @property
    def read_as(self) -> str:
        """The kind string of the raw readers (:func:`pgmjax.data.date_forms.read_kind`): ``"date dd/mm/yyyy"``..."""
        return read_kind(self.kind, self.date_format)

    @property
    def size(self) -> int:
        return self.bins + int(self.missing)

    @property
    def whole(self) -> bool:
        """Whether values are whole numbers (integers or dates; datetimes are not)."""
        return self.integer or self.kind == "date"

    def _integer_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """First integer and number of integers of every bin."""
        lo = np.ceil(self.edges[:-1])
        hi = np.ceil(self.edges[1:]) - 1  # last integer < e_{i+1}
        hi[-1] = np.floor(self.edges[-1])  # the last bin is closed
        return lo, hi - lo + 1

    def _grid_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """First multiple of ``10^-decimals`` (in those units) and their number in every bin, as :meth:`_integer_bounds`."""
        scaled = np.round(self.edges * 10.0**self.decimals, 6)  # 0.2 * 10 is 2.0000000000000004: an edge on the grid
        lo = np.ceil(scaled[:-1])
        hi = np.ceil(scaled[1:]) - 1
        hi[-1] = np.floor(scaled[-1])
        return lo, hi - lo + 1

    def midpoints(self) -> np.ndarray:
        """Float64 midpoints of the bins (``0.5 * (e_i + e_{i+1})``: exact for decimal edges like 26 and 27)."""
        return 0.5 * (self.edges[:-1] + self.edges[1:])

    def values(self, raw, offset: int = 0) -> np.ndarray:
        """Float64 values of raw entries (numbers, numeric text, or ISO dates / datetimes in days)."""
        if self.kind == "date" and self.date_format in DATE_FORMATS[1:]:
            return _date_days_in(raw, self.name, offset, self.date_format)
        if self.kind == "date":
            return date_days(raw, self.name, offset)
        if self.kind == "datetime":
            return datetime_days(raw, self.name, offset)
        return to_float(raw, self.name, offset)

    def encode(self, values: np.ndarray, *, offset: int = 0) -> np.ndarray:
        """Bin codes of float values (NaN = missing); raises :class:`SchemaError` naming the first bad row."""
        x = np.asarray(values, np.float64)
        nan = np.isnan(x)
        bad = np.flatnonzero(np.isinf(x) | (nan & (not self.missing)))
        if bad.size:
            r = int(bad[0])
            raise SchemaValueError(
                f"column {self.name!r} {_row(r, offset)}: value is missing or not a number "
                f"({bad.size} such value(s) in this column); add \"missing\": true to the column",
                f"column {self.name!r}: a value is missing or not a number; add \"missing\": true to the column",
            )
        lo, hi = self.edges[0], self.edges[-1]
        if self.clip:
            x = np.clip(x, lo, hi)
        else:
            bad = np.flatnonzero((x < lo) | (x > hi))
            if bad.size:
                r = int(bad[0])
                raise SchemaValueError(
                    f"column {self.name!r} {_row(r, offset)}: value {x[r]:g} is outside the range of its bins "
                    f"[{lo:g}, {hi:g}] ({bad.size} value(s) out of range in this column); widen the bins or add \"clip\": true",
                    f"column {self.name!r}: a value is outside the range of its bins [{lo:g}, {hi:g}]; widen the bins "
                    "or add \"clip\": true",
                )
        codes = np.minimum(np.searchsorted(self.edges, np.where(nan, lo, x), side="right") - 1, self.bins - 1)
        return np.where(nan, self.bins, codes).astype(np.int64)

    def decode_codes(self, codes: np.ndarray, key) -> np.ndarray:
        """Values for codes: uniform within the bin (seeded by ``key``) or the midpoint; NaN / ``""`` for missing."""
        codes = np.asarray(codes, np.int64)
        miss = codes >= self.bins
        if not self.blanks and miss.any():  # no blanks by the private count: a missing code is another record's value
            codes = _fill_missing(codes, miss, self.bins, jax.random.fold_in(key, 1))
            miss = np.zeros(codes.shape, bool)
        c = np.where(miss, 0, codes)
        u = uniform64(key, c.shape)
        grid = self._grid_bounds() if self.decimals is not None and not self.whole else None
        if self.whole or (grid is not None and (grid[1] >= 1).all()):
            first, count = self._integer_bounds() if self.whole else grid
            step = (count[c] - 1) // 2 if self.decode == "midpoint" else np.minimum(np.floor(u * count[c]), count[c] - 1)
            out = (first[c] + step).astype(np.float64)
            if not self.whole:  # k / 10^d: the double nearest the decimal, which prints as the decimal
                out = out / 10.0**self.decimals
        else:
            lo, hi = self.edges[:-1][c], self.edges[1:][c]
            if self.decode == "midpoint":
                out = self.midpoints()[c]
            else:
                # Rounding of lo + u (hi - lo) may reach hi, which belongs to the next bin (except for the last bin).
                top = np.where(c == self.bins - 1, hi, np.nextafter(hi, -np.inf))
                out = np.minimum(lo + u * (hi - lo), top)
            if self.decimals is not None:
                rounded = np.round(out, self.decimals)
                # keep the rounded value only where it stays in its bin (a re-encoding gives the same code)
                same = np.minimum(np.searchsorted(self.edges, rounded, side="right") - 1, self.bins - 1) == c
                out = np.where(same & (rounded >= self.edges[0]) & (rounded <= self.edges[-1]), rounded, out)
        if self.kind == "date":
            return days_to_dates(np.where(miss, np.nan, out))
        if self.kind == "datetime":
            # Floored to the second: stays in [lo, hi) when the edges are whole seconds (they are, read from ISO text).
            return days_to_datetimes(np.where(miss, np.nan, out))
        if self.integer:
            if not miss.any():
                return out.astype(np.int64)
            ints = pd.array(np.where(miss, 0, out).astype(np.int64), dtype="Int64")
            ints[miss] = pd.NA  # an empty field in the CSV
            return ints
        return np.where(miss, np.nan, out)

    def to_dict(self) -> dict:
        if self.kind == "date":
            edges = [str(d) for d in days_to_dates(self.edges)]
        elif self.kind == "datetime":
            edges = [str(d) for d in days_to_datetimes(self.edges, sep="T")]
        else:
            edges = [json_number(e) for e in self.edges]
        out: dict = {"bins": edges}
        if self.kind != "number":
            out["type"] = self.kind
        for k, default in (("integer", False), ("decode", "uniform"), ("missing", False), ("clip", False), ("decimals", None),
                           ("date_format", None), ("blanks", True)):
            if getattr(self, k) != default:
                out[k] = getattr(self, k)
        return out


@dataclass(frozen=True, eq=False)
class CategoricalColumn:
    """A categorical column: code ``i`` is ``categories[i]`` (compared as text); ``other``: the text of one
    more code, the last, taken by every value outside the list (None: such a value is an error)."""

    name: str
    categories: tuple[str, ...]
    other: str | None = None

    @property
    def size(self) -> int:
        return len(self.categories) + int(self.other is not None)

    def encode(self, values, *, offset: int = 0) -> np.ndarray:
        """Codes of text values; raises :class:`SchemaError` for a value that is not a category (without ``other``)."""
        s = as_text(values)
        codes = pd.Index(self.categories, dtype=object).get_indexer(s.to_numpy(dtype=object)).astype(np.int64)
        if self.other is not None:
            return np.where(codes < 0, len(self.categories), codes)
        bad = np.flatnonzero(codes < 0)
        if bad.size:
            r = int(bad[0])
            unknown = sorted(set(s.iloc[bad]))
            shown = ", ".join(repr(u) for u in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            raise SchemaValueError(
                f"column {self.name!r} {_row(r, offset)}: value {s.iloc[r]!r} is not one of its {len(self.categories)} categories "
                f"{_preview(self.categories)} ({bad.size} value(s) outside the categories: {shown}); "
                "add them to the schema's categories (or an \"other\" category)",
                f"column {self.name!r}: a value is not one of its {len(self.categories)} categories {_preview(self.categories)}; "
                "add it to the schema's categories (or an \"other\" category)",
            )
        return codes

    def decode_codes(self, codes: np.ndarray, key=None) -> np.ndarray:
        labels = list(self.categories) + ([self.other] if self.other is not None else [])
        return np.asarray(labels, dtype=object)[np.asarray(codes, np.int64)]

    def to_dict(self) -> dict:
        out: dict = {"categories": list(self.categories)}
        if self.other is not None:
            out["other"] = self.other
        return out


def parse_column(name, col, decode: str, where: str):
    """One column of the JSON form (see :mod:`pgmjax.data.schema`), validated; raises :class:`SchemaError`."""
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{where}: column names must be non-empty strings, got {name!r}")
    at = f"{where}: column {name!r}"
    if not isinstance(col, Mapping):
        raise SchemaError(f'{at}: expected an object like {{"bins": [...]}} or {{"categories": [...]}}, got {col!r}')
    keys = set(col)
    if ("bins" in keys) == ("categories" in keys):
        raise SchemaError(f'{at}: give exactly one of "bins" (numeric) or "categories" (categorical); got keys {sorted(keys)}')
    if "categories" in keys:
        return _parse_categorical(name, col, at)
    unknown = sorted(keys - NUMERIC_KEYS)
    if unknown:
        raise SchemaError(f"{at}: unknown keys {unknown} for a numeric column (allowed: {sorted(NUMERIC_KEYS)})")
    kind = col.get("type", "number")
    if kind not in KINDS:
        raise SchemaError(f"{at}: type must be one of {list(KINDS)}, got {kind!r}")
    as_number = {"date": _date_number, "datetime": _datetime_number}.get(kind, _finite)
    bins = col["bins"]
    if isinstance(bins, list):
        if "range" in col:
            raise SchemaError(f'{at}: "range" goes with a number of bins; with explicit edges leave it out')
        edges = np.array([as_number(e, f"{at}: bin edge") for e in bins], np.float64)
        if len(edges) < 2:
            raise SchemaError(f"{at}: bins needs at least two edges, got {bins!r}")
        if np.any(np.diff(edges) <= 0):
            raise SchemaError(f"{at}: bin edges must be strictly increasing, got {bins!r}")
    elif isinstance(bins, int) and not isinstance(bins, bool):
        if bins < 1:
            raise SchemaError(f"{at}: the number of bins must be at least 1, got {_short(bins) if bins > -10**18 else 'a negative number'}")
        if bins > MAX_BINS:  # before the edges are allocated
            shown = f"{bins:,}" if bins < 10**18 else f"about 10^{int(bins.bit_length() * 0.30103)}"
            raise SchemaError(f'{at}: field "bins" asks for {shown} bins, at most {MAX_BINS:,} allowed '
                              f"(list the edges to give more)")
        rng = col.get("range")
        if not isinstance(rng, list) or len(rng) != 2:
            raise SchemaError(f'{at}: "bins": {bins} needs "range": [low, high]')
        lo, hi = (as_number(v, f"{at}: range") for v in rng)
        if not lo < hi:
            raise SchemaError(f"{at}: range must have low < high, got {rng!r}")
        edges = np.linspace(lo, hi, bins + 1)
        if kind == "datetime":  # whole seconds, so that a decoded (floored) datetime stays in its bin
            edges = np.unique(np.round(edges * 86400.0) / 86400.0)
    else:
        raise SchemaError(f"{at}: bins must be a list of edges or an integer number of bins, got {_short(bins)}")
    flags = {}
    for k in ("integer", "missing", "clip"):
        flags[k] = col.get(k, False)
        if not isinstance(flags[k], bool):
            raise SchemaError(f"{at}: {k} must be true or false, got {flags[k]!r}")
    dec = col.get("decode", decode)
    if dec not in DECODE_METHODS:
        raise SchemaError(f"{at}: decode must be one of {list(DECODE_METHODS)}, got {dec!r}")
    decimals = col.get("decimals")
    if decimals is not None and (isinstance(decimals, bool) or not isinstance(decimals, int) or not 0 <= decimals <= 15):
        raise SchemaError(f"{at}: decimals must be an integer in [0, 15], got {decimals!r}")
    date_format = col.get("date_format")
    if date_format is not None and (kind != "date" or date_format not in DATE_FORMATS):
        raise SchemaError(f"{at}: date_format goes with \"type\": \"date\" and must be one of {list(DATE_FORMATS)}, "
                          f"got {_short(date_format)}")
    blanks = col.get("blanks", True)
    if not isinstance(blanks, bool):
        raise SchemaError(f"{at}: blanks must be true or false, got {_short(blanks)}")
    out = NumericColumn(name, edges, flags["integer"], dec, flags["missing"], flags["clip"], kind, decimals,
                        date_format, blanks)
    if out.whole:
        first, count = out._integer_bounds()
        empty = np.flatnonzero(count < 1)
        if empty.size:
            i = int(empty[0])
            raise SchemaError(f"{at}: {'integer' if kind == 'number' else 'date'} column, but bin {i} "
                              f"[{edges[i]:g}, {edges[i + 1]:g}) contains no {'integer' if kind == 'number' else 'whole day'}")
    return out


def _fill_missing(codes: np.ndarray, miss: np.ndarray, bins: int, key) -> np.ndarray:
    """``codes`` with each missing code replaced by a code drawn from the column's other codes (any bin if none)."""
    kept = codes[~miss]
    u = uniform64(key, (int(miss.sum()),))
    out = codes.copy()
    out[miss] = kept[np.floor(u * len(kept)).astype(np.int64)] if len(kept) else np.floor(u * bins).astype(np.int64)
    return out


def _date_days_in(raw, name: str, offset: int, date_format: str) -> np.ndarray:
    """Days of a date column read in ``date_format`` (ISO and year-first dates too); raises naming the first field
    that is no such date (an empty field is NaN)."""
    s = pd.Series(raw, dtype=object)
    text = s.where(s.notna(), "").astype(str).str.strip().reset_index(drop=True)
    iso = text.str.fullmatch(ISO_DATETIME).to_numpy(bool)
    stamps = iso_stamps(text.where(iso, None))  # NaT where not ISO or no real day and time
    ok = stamps.notna().to_numpy()
    out = np.full(len(text), np.nan)
    out[ok] = np.floor_divide(stamps[ok].to_numpy(dtype="datetime64[ns]").view(np.int64), 86400 * 10**9)
    rest = np.isnan(out)
    out[rest] = other_date_days(text[rest], date_format)
    bad = np.flatnonzero(np.isnan(out) & (text != "").to_numpy())
    if bad.size:
        r = int(bad[0])
        raise SchemaValueError(
            f"column {name!r} {_row(r, offset)}: value {text.iloc[r]!r} is not a date {date_format} or YYYY-MM-DD "
            f"({bad.size} such value(s))",
            f"column {name!r}: a value is not a date {date_format} or YYYY-MM-DD",
        )
    return out


def _parse_categorical(name, col, at):
    unknown = sorted(set(col) - CATEGORICAL_KEYS)
    if unknown:
        raise SchemaError(f"{at}: unknown keys {unknown} for a categorical column (allowed: {sorted(CATEGORICAL_KEYS)})")
    cats = col["categories"]
    if not isinstance(cats, list) or (not cats and col.get("other") is None):
        raise SchemaError(f"{at}: categories must be a non-empty list, got {cats!r}")
    out = []
    for c in cats:
        if isinstance(c, bool) or not isinstance(c, (str, int)):
            raise SchemaError(f"{at}: categories must be strings (or integers), got {c!r}; write numbers as they appear in the CSV, e.g. \"1.5\"")
        out.append(str(c))
    dup = sorted({c for c in out if out.count(c) > 1})
    if dup:
        raise SchemaError(f"{at}: duplicate categories {dup}")
    other = col.get("other")
    if other is not None and (not isinstance(other, str) or other in out):
        raise SchemaError(f"{at}: other must be a text that is not one of the categories, got {other!r}")
    return CategoricalColumn(name, tuple(out), other)


def _date_number(value, what: str) -> float:
    if isinstance(value, str):
        days = date_days([value], what)
        if np.isfinite(days[0]):
            return float(days[0])
    raise SchemaError(f"{what} must be a date YYYY-MM-DD, got {value!r}")


def _datetime_number(value, what: str) -> float:
    if isinstance(value, str):
        try:
            days = datetime_days([value], what)
        except SchemaError:
            days = [np.nan]
        if np.isfinite(days[0]):
            return float(days[0])
    raise SchemaError(f"{what} must be a datetime YYYY-MM-DDTHH:MM:SS, got {value!r}")


def _finite(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SchemaError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def json_number(x: float):
    """An int for whole floats (``26.0`` -> ``26``), else the float."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def _short(value) -> str:
    """``repr(value)``, cut to 60 characters (a hostile file's value may be long)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _row(r: int, offset: int) -> str:
    """``row r`` (0-based data row), or ``line r + offset`` of a CSV file when ``offset`` is given."""
    return f"row {r}" if not offset else f"line {r + offset}"


def _preview(items, k: int = 8) -> str:
    items = list(items)
    return "[" + ", ".join(repr(i) for i in items[:k]) + (", ...]" if len(items) > k else "]")
