"""Discretisation schemas: raw tables (numbers, strings) to integer-coded Datasets and back.

pgmjax models integer-coded tables: attribute ``a`` takes the values ``0 .. n_a - 1``. A
:class:`Schema` says how to get there from a raw CSV and how to turn synthetic records back into the
original vocabulary:

* a **numeric** column is cut into bins by its edges ``e_0 < e_1 < ... < e_k``: code ``i`` is the
  bin ``[e_i, e_{i+1})``, the last bin is closed ``[e_{k-1}, e_k]``; values outside ``[e_0, e_k]``
  are rejected (the row and value are named). Decoding draws a value **uniformly within the bin**
  (``decode="uniform"``, the default; seeded by a ``jax.random`` key) or returns the bin
  **midpoint** (``decode="midpoint"``); with ``integer: true`` the value is a uniformly drawn
  integer of the bin (resp. its middle integer), and every bin must contain an integer.
* a **categorical** column lists its categories; code ``i`` is ``categories[i]``. Values are
  compared as text, exactly as they appear in the CSV (``"01"`` is not ``"1"``); an empty field is
  the category ``""`` if it is listed, else an error. Decoding returns the category strings.

The schema file is a JSON object mapping column name to its spec; the column order is the domain
order::

    {
      "age":    {"bins": [17, 25, 35, 45, 55, 65, 91], "integer": true},
      "income": {"bins": 20, "range": [0, 250000], "decode": "midpoint"},
      "sex":    {"categories": ["Female", "Male"]}
    }

``"bins": k`` with ``"range": [lo, hi]`` means ``k`` equal-width bins over ``[lo, hi]``.

Privacy: a schema is public information. :func:`infer_schema` reads the data itself (its minima,
maxima and category lists are *not* differentially private); it gives a starting point to review
and replace with public knowledge (published ranges, code lists) before a private release.

Example:
    >>> schema = Schema.from_dict({"x": {"bins": [0, 1, 2]}, "c": {"categories": ["a", "b"]}})
    >>> data = schema.encode(pd.DataFrame({"x": ["0.5", "2"], "c": ["b", "a"]}))
    >>> data.records.tolist(), schema.domain
    ([[0, 1], [1, 0]], Domain({'x': 2, 'c': 2}))
    >>> schema.decode(data, jax.random.key(0))["c"].tolist()
    ['b', 'a']
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from .dataset import Dataset, DataValueError, unreadable_csv
from .domain import Domain

__all__ = [
    "SchemaError",
    "NumericColumn",
    "CategoricalColumn",
    "Schema",
    "load_schema",
    "read_raw_csv",
    "infer_schema",
    "dumps",
    "DECODE_METHODS",
]

DECODE_METHODS = ("uniform", "midpoint")
_NUMERIC_KEYS = {"bins", "range", "integer", "decode"}
_CATEGORICAL_KEYS = {"categories"}


class SchemaError(ValueError):
    """A schema is malformed, or a raw value does not fit it (the message names column, row and value)."""


class SchemaValueError(SchemaError, DataValueError):
    """A raw value does not fit its column: ``str(e)`` names row and value, ``e.public`` only the column
    and what was expected (see :class:`pgmjax.dataset.DataValueError`)."""


# ---------------------------------------------------------------------------------------------------
# Columns
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NumericColumn:
    """A numeric column cut into bins ``[e_i, e_{i+1})`` (the last one closed).

    Attributes:
        name: the column name.
        edges: strictly increasing finite floats, at least two.
        integer: decode to integers (each bin must contain one).
        decode: ``"uniform"`` (a uniform draw within the bin) or ``"midpoint"``.
    """

    name: str
    edges: np.ndarray
    integer: bool = False
    decode: str = "uniform"

    @property
    def size(self) -> int:
        return len(self.edges) - 1

    def _integer_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """First integer and number of integers of every bin."""
        lo = np.ceil(self.edges[:-1])
        hi = np.ceil(self.edges[1:]) - 1  # last integer < e_{i+1}
        hi[-1] = np.floor(self.edges[-1])  # the last bin is closed
        return lo, hi - lo + 1

    def encode(self, values: np.ndarray, *, offset: int = 0) -> np.ndarray:
        """Bin codes of float values (NaN = missing); raises :class:`SchemaError` naming the first bad row."""
        x = np.asarray(values, np.float64)
        bad = np.flatnonzero(~np.isfinite(x))
        if bad.size:
            r = int(bad[0])
            raise SchemaValueError(
                f"column {self.name!r} {_row(r, offset)}: value is missing or not a number "
                f"({bad.size} such value(s) in this column)",
                f"column {self.name!r}: a value is missing or not a number",
            )
        lo, hi = self.edges[0], self.edges[-1]
        bad = np.flatnonzero((x < lo) | (x > hi))
        if bad.size:
            r = int(bad[0])
            raise SchemaValueError(
                f"column {self.name!r} {_row(r, offset)}: value {x[r]:g} is outside the range of its bins "
                f"[{lo:g}, {hi:g}] ({bad.size} value(s) out of range in this column); widen the bins in the schema",
                f"column {self.name!r}: a value is outside the range of its bins [{lo:g}, {hi:g}]; widen the bins in the schema",
            )
        return np.minimum(np.searchsorted(self.edges, x, side="right") - 1, self.size - 1)

    def decode_codes(self, codes: np.ndarray, key) -> np.ndarray:
        """Values for bin codes: uniform within the bin (seeded by ``key``) or the midpoint."""
        codes = np.asarray(codes, np.int64)
        if self.integer:
            first, count = self._integer_bounds()
            if self.decode == "midpoint":
                return (first + (count - 1) // 2)[codes].astype(np.int64)
            u = np.asarray(jax.random.uniform(key, codes.shape, dtype=jax.numpy.float32), np.float64)
            step = np.minimum(np.floor(u * count[codes]), count[codes] - 1)
            return (first[codes] + step).astype(np.int64)
        lo, hi = self.edges[:-1][codes], self.edges[1:][codes]
        if self.decode == "midpoint":
            return 0.5 * (lo + hi)
        u = np.asarray(jax.random.uniform(key, codes.shape, dtype=jax.numpy.float32), np.float64)
        # Rounding of lo + u (hi - lo) may reach hi, which belongs to the next bin (except for the last bin).
        top = np.where(codes == self.size - 1, hi, np.nextafter(hi, -np.inf))
        return np.minimum(lo + u * (hi - lo), top)

    def to_dict(self) -> dict:
        out: dict = {"bins": [_json_number(e) for e in self.edges]}
        if self.integer:
            out["integer"] = True
        if self.decode != "uniform":
            out["decode"] = self.decode
        return out


@dataclass(frozen=True, eq=False)
class CategoricalColumn:
    """A categorical column: code ``i`` is ``categories[i]`` (compared as text)."""

    name: str
    categories: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.categories)

    def encode(self, values, *, offset: int = 0) -> np.ndarray:
        """Codes of text values; raises :class:`SchemaError` for a value that is not a category."""
        s = pd.Series(values, dtype=object).astype(str)
        codes = pd.Index(self.categories, dtype=object).get_indexer(s.to_numpy(dtype=object)).astype(np.int64)
        bad = np.flatnonzero(codes < 0)
        if bad.size:
            r = int(bad[0])
            unknown = sorted(set(s.iloc[bad]))
            shown = ", ".join(repr(u) for u in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            raise SchemaValueError(
                f"column {self.name!r} {_row(r, offset)}: value {s.iloc[r]!r} is not one of its {self.size} categories "
                f"{_preview(self.categories)} ({bad.size} value(s) outside the categories: {shown}); "
                "add them to the schema's categories",
                f"column {self.name!r}: a value is not one of its {self.size} categories {_preview(self.categories)}; "
                "add it to the schema's categories",
            )
        return codes

    def decode_codes(self, codes: np.ndarray, key=None) -> np.ndarray:
        return np.asarray(self.categories, dtype=object)[np.asarray(codes, np.int64)]

    def to_dict(self) -> dict:
        return {"categories": list(self.categories)}


# ---------------------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------------------


class Schema:
    """How to discretise a raw table into a :class:`~pgmjax.Dataset` and decode synthetic data back.

    Build it with :meth:`from_dict` / :func:`load_schema` (the JSON format of the module docstring)
    or :func:`infer_schema`.

    Args:
        columns: :class:`NumericColumn` / :class:`CategoricalColumn` objects, in domain order.

    Example:
        >>> s = Schema.from_dict({"age": {"bins": 4, "range": [0, 100], "integer": True}})
        >>> s.columns["age"].edges.tolist(), s.domain
        ([0.0, 25.0, 50.0, 75.0, 100.0], Domain({'age': 4}))
    """

    def __init__(self, columns):
        columns = list(columns)
        if not columns:
            raise SchemaError("schema: no columns")
        names = [c.name for c in columns]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SchemaError(f"schema: duplicate column names {dup}")
        self.columns: dict[str, NumericColumn | CategoricalColumn] = {c.name: c for c in columns}
        self.domain = Domain({c.name: c.size for c in columns})

    # Construction ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec: Mapping, *, decode: str | None = None, where: str = "schema") -> "Schema":
        """Parse and validate the JSON form ``{column: {"bins": ...} | {"categories": [...]}}``.

        Args:
            spec: the parsed JSON object.
            decode: default decoding of numeric columns without a ``"decode"`` key
                (``"uniform"`` when None).
            where: prefix of error messages (e.g. the file name).

        Raises:
            SchemaError: naming the column and the problem.
        """
        if not isinstance(spec, Mapping):
            raise SchemaError(f"{where}: must be a JSON object mapping column name -> spec, got {type(spec).__name__}")
        if not spec:
            raise SchemaError(f"{where}: has no columns")
        if decode is not None and decode not in DECODE_METHODS:
            raise SchemaError(f"{where}: decode must be one of {DECODE_METHODS}, got {decode!r}")
        return cls([_parse_column(name, col, decode or "uniform", where) for name, col in spec.items()])

    def to_dict(self) -> dict:
        """The JSON form (round-trips through :meth:`from_dict`)."""
        return {name: col.to_dict() for name, col in self.columns.items()}

    def __repr__(self) -> str:
        kinds = ", ".join(
            f"{n}: {c.size} {'bins' if isinstance(c, NumericColumn) else 'categories'}" for n, c in self.columns.items()
        )
        return f"Schema({kinds})"

    # Encoding / decoding ----------------------------------------------------------------------
    def encode(self, frame: pd.DataFrame, *, line_offset: int = 0) -> Dataset:
        """Discretise a raw DataFrame (columns not in the schema are ignored).

        Args:
            frame: the raw table; numeric columns may hold numbers or numeric text, categorical
                columns anything whose text form is a category.
            line_offset: if non-zero, errors name ``line row + line_offset`` instead of the 0-based
                ``row`` (2 gives the line number in a CSV file with a header).

        Returns:
            A :class:`~pgmjax.Dataset` over :attr:`domain`.

        Raises:
            SchemaError: a schema column is missing from the frame, a value is missing, not a number,
                outside the bins or not a category (column, row and value named).
        """
        missing = [n for n in self.columns if n not in frame.columns]
        if missing:
            raise SchemaError(f"columns {missing} of the schema are missing from the data; the data has {list(frame.columns)}")
        if len(frame) == 0:
            raise SchemaError("the data has no records")
        codes = []
        for name, col in self.columns.items():
            raw = frame[name]
            if isinstance(col, NumericColumn):
                codes.append(col.encode(_to_float(raw, name, line_offset), offset=line_offset))
            else:
                codes.append(col.encode(raw.to_numpy(), offset=line_offset))
        return Dataset._trusted(np.stack(codes, axis=1).astype(np.int64), self.domain)

    def decode(self, data: Dataset | np.ndarray, key) -> pd.DataFrame:
        """Turn integer-coded records back into raw values (post-processing: no privacy cost).

        Numeric columns: a value drawn uniformly within the record's bin (one independent uniform per
        record and column, from ``key``), or the bin midpoint where the column says
        ``decode="midpoint"``; integers for ``integer`` columns. Categorical columns: the category text.

        Args:
            data: a Dataset over :attr:`domain` (e.g. synthetic data), or its records array.
            key: a ``jax.random`` key.

        Returns:
            A DataFrame with the schema's columns, in order.
        """
        if isinstance(data, Dataset):
            if data.domain != self.domain:
                raise SchemaError(f"decode: the data's domain {data.domain} is not the schema's {self.domain}")
            records = data.records
        else:
            records = np.asarray(data)
            if records.ndim != 2 or records.shape[1] != len(self.columns):
                raise SchemaError(f"decode: expected records of shape (n, {len(self.columns)}), got {records.shape}")
        keys = jax.random.split(key, len(self.columns))
        return pd.DataFrame(
            {name: col.decode_codes(records[:, j], keys[j]) for j, (name, col) in enumerate(self.columns.items())}
        )


def load_schema(path: str | os.PathLike, *, decode: str | None = None) -> Schema:
    """Read a schema JSON file (format in the module docstring).

    Raises:
        FileNotFoundError: no such file.
        SchemaError: not valid JSON, duplicate column names, or a bad column spec.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"schema file not found: {path}")
    with open(path) as f:
        try:
            raw = json.load(f, object_pairs_hook=_reject_duplicates)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema file {path} is not valid JSON: {e}") from None
    return Schema.from_dict(raw, decode=decode, where=f"schema file {path}")


def read_raw_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read a raw CSV with every field as text (empty fields stay ``""``), ready for :meth:`Schema.encode`.

    Raises:
        FileNotFoundError / SchemaError: no such file, duplicate column names, unparsable CSV.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file not found: {path}")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise SchemaValueError(f"data file {path} could not be read as CSV: {e}", "data file " + unreadable_csv(path, e)) from None
    names = _header(path)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SchemaError(f"data file {path} has duplicate column names: {dup}")
    return frame


def infer_schema(frame: pd.DataFrame, *, bins: int = 10, max_categories: int = 32) -> tuple[dict, list[str]]:
    """A starter schema from a raw table (NOT private: it reads the data).

    Rule per column: if every value is a number and there are more than ``max_categories`` distinct
    values, ``bins`` equal-width bins over ``[min, max]`` (``integer`` if all values are integers);
    otherwise a categorical column with the distinct values as categories (numbers sorted
    numerically, text alphabetically), which decodes back to exactly those values.

    Args:
        frame: a raw table as read by :func:`read_raw_csv` (text fields).
        bins: bins per numeric column (at least 1).
        max_categories: numeric columns with at most this many distinct values stay categorical
            (at least ``bins``).

    Returns:
        ``(schema dict, warnings)``: the JSON form, and remarks for the user (very large category
        lists, missing values).

    Example:
        >>> spec, notes = infer_schema(pd.DataFrame({"c": ["b", "a", "b"], "x": [str(i) for i in range(40)][:3]}))
        >>> spec["c"]
        {'categories': ['a', 'b']}
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise SchemaError(f"infer_schema: bins must be an integer >= 1, got {bins!r}")
    if isinstance(max_categories, bool) or not isinstance(max_categories, (int, np.integer)) or max_categories < bins:
        raise SchemaError(f"infer_schema: max_categories must be an integer >= bins ({bins}), got {max_categories!r}")
    if len(frame) == 0:
        raise SchemaError("infer_schema: the data has no records")
    spec: dict = {}
    notes: list[str] = []
    for name in frame.columns:
        text = frame[name].astype(str)
        numbers = pd.to_numeric(text.str.strip(), errors="coerce").to_numpy(np.float64)
        distinct = pd.unique(text)
        if np.isfinite(numbers).all() and len(np.unique(numbers)) > max_categories:
            lo, hi = float(numbers.min()), float(numbers.max())
            integer = bool(np.all(numbers == np.round(numbers)))
            col = NumericColumn(str(name), _nice_edges(lo, hi, bins), integer)
            if integer and (col._integer_bounds()[1] < 1).any():
                col = NumericColumn(str(name), col.edges, False)
            spec[str(name)] = col.to_dict()
            continue
        if np.isfinite(numbers).all():
            order = np.argsort([float(v) for v in distinct], kind="stable")
            cats = [str(distinct[i]) for i in order]
        else:
            cats = sorted(str(v) for v in distinct)
            if "" in cats:
                notes.append(f"column {name!r}: has empty fields; they are kept as the category \"\"")
        if len(cats) > max_categories:
            notes.append(
                f"column {name!r}: {len(cats)} distinct values became {len(cats)} categories; large attributes make "
                "marginals large and noisy: consider merging categories"
            )
        spec[str(name)] = {"categories": cats}
    return spec, notes


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------


def _parse_column(name, col, decode: str, where: str):
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{where}: column names must be non-empty strings, got {name!r}")
    at = f"{where}: column {name!r}"
    if not isinstance(col, Mapping):
        raise SchemaError(f'{at}: expected an object like {{"bins": [...]}} or {{"categories": [...]}}, got {col!r}')
    keys = set(col)
    if ("bins" in keys) == ("categories" in keys):
        raise SchemaError(f'{at}: give exactly one of "bins" (numeric) or "categories" (categorical); got keys {sorted(keys)}')
    if "categories" in keys:
        unknown = sorted(keys - _CATEGORICAL_KEYS)
        if unknown:
            raise SchemaError(f"{at}: unknown keys {unknown} for a categorical column (allowed: {sorted(_CATEGORICAL_KEYS)})")
        cats = col["categories"]
        if not isinstance(cats, list) or not cats:
            raise SchemaError(f"{at}: categories must be a non-empty list, got {cats!r}")
        out = []
        for c in cats:
            if isinstance(c, bool) or not isinstance(c, (str, int)):
                raise SchemaError(f"{at}: categories must be strings (or integers), got {c!r}; write numbers as they appear in the CSV, e.g. \"1.5\"")
            out.append(str(c))
        dup = sorted({c for c in out if out.count(c) > 1})
        if dup:
            raise SchemaError(f"{at}: duplicate categories {dup}")
        return CategoricalColumn(name, tuple(out))
    unknown = sorted(keys - _NUMERIC_KEYS)
    if unknown:
        raise SchemaError(f"{at}: unknown keys {unknown} for a numeric column (allowed: {sorted(_NUMERIC_KEYS)})")
    bins = col["bins"]
    if isinstance(bins, list):
        if "range" in col:
            raise SchemaError(f'{at}: "range" goes with a number of bins; with explicit edges leave it out')
        edges = np.array([_finite(e, f"{at}: bin edge") for e in bins], np.float64)
        if len(edges) < 2:
            raise SchemaError(f"{at}: bins needs at least two edges, got {bins!r}")
        if np.any(np.diff(edges) <= 0):
            raise SchemaError(f"{at}: bin edges must be strictly increasing, got {bins!r}")
    elif isinstance(bins, int) and not isinstance(bins, bool):
        if bins < 1:
            raise SchemaError(f"{at}: the number of bins must be at least 1, got {bins}")
        rng = col.get("range")
        if not isinstance(rng, list) or len(rng) != 2:
            raise SchemaError(f'{at}: "bins": {bins} needs "range": [low, high]')
        lo, hi = (_finite(v, f"{at}: range") for v in rng)
        if not lo < hi:
            raise SchemaError(f"{at}: range must have low < high, got {rng!r}")
        edges = np.linspace(lo, hi, bins + 1)
    else:
        raise SchemaError(f"{at}: bins must be a list of edges or a number of bins, got {bins!r}")
    integer = col.get("integer", False)
    if not isinstance(integer, bool):
        raise SchemaError(f"{at}: integer must be true or false, got {integer!r}")
    dec = col.get("decode", decode)
    if dec not in DECODE_METHODS:
        raise SchemaError(f"{at}: decode must be one of {list(DECODE_METHODS)}, got {dec!r}")
    out = NumericColumn(name, edges, integer, dec)
    if integer:
        first, count = out._integer_bounds()
        empty = np.flatnonzero(count < 1)
        if empty.size:
            i = int(empty[0])
            raise SchemaError(f"{at}: integer column, but bin {i} [{edges[i]:g}, {edges[i + 1]:g}) contains no integer")
    return out


def _nice_edges(lo: float, hi: float, bins: int) -> np.ndarray:
    """``bins`` equal-width edges over ``[lo, hi]``, rounded at the bin width's second significant digit (at most to integers)
    (the first edge down, the last up, so the range is still covered); unrounded if rounding would merge edges."""
    edges = np.linspace(lo, hi, bins + 1)
    width = (hi - lo) / bins
    if not width > 0:
        return edges
    decimals = int(max(0, 1 - math.floor(math.log10(width))))
    scale = 10.0**decimals
    nice = np.round(edges, decimals)
    nice[0] = math.floor(lo * scale) / scale
    nice[-1] = math.ceil(hi * scale) / scale
    return nice if np.all(np.diff(nice) > 0) else edges


def dumps(spec: Mapping) -> str:
    """A schema dict as JSON text with one line per column (easy to review and edit)."""
    lines = [f"  {json.dumps(str(k))}: {json.dumps(v)}" for k, v in spec.items()]
    return "{\n" + ",\n".join(lines) + "\n}"


def _finite(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SchemaError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _to_float(raw: pd.Series, name: str, offset: int) -> np.ndarray:
    if raw.dtype.kind in "iufb":
        return raw.to_numpy(np.float64)
    text = raw.astype(str).str.strip()
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


def _row(r: int, offset: int) -> str:
    """``row r`` (0-based data row), or ``line r + offset`` of a CSV file when ``offset`` is given."""
    return f"row {r}" if not offset else f"line {r + offset}"


def _json_number(x: float):
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def _preview(items, k: int = 8) -> str:
    items = list(items)
    return "[" + ", ".join(repr(i) for i in items[:k]) + (", ...]" if len(items) > k else "]")


def _reject_duplicates(pairs):
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise SchemaError(f"duplicate column names in the schema: {dup}")
    return dict(pairs)


def _header(path: str) -> list[str]:
    import csv
    import gzip

    opener = gzip.open(path, "rt") if path.endswith(".gz") else open(path, newline="")
    with opener as f:
        return next(csv.reader(f), [])
