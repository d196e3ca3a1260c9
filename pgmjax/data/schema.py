"""Discretisation schemas: raw tables (numbers, strings) to integer-coded Datasets and back.

pgmjax models integer-coded tables: attribute ``a`` takes the values ``0 .. n_a - 1``. A
:class:`Schema` says how to get there from a raw CSV and how to turn synthetic records back into the
original vocabulary:

* a **numeric** column is cut into bins by its edges ``e_0 < e_1 < ... < e_k``: code ``i`` is the
  bin ``[e_i, e_{i+1})``, the last bin is closed ``[e_{k-1}, e_k]``; values outside ``[e_0, e_k]``
  are rejected (the row and value are named), or clipped into the end bins with ``"clip": true``;
  ``"missing": true`` adds a last code for empty fields. Decoding (float64) draws a value
  **uniformly within the bin** (``decode="uniform"``, the default; seeded by a ``jax.random`` key)
  or returns the bin **midpoint** (``decode="midpoint"``); with ``integer: true`` the value is a
  uniformly drawn integer of the bin (resp. its middle integer), and every bin must contain an
  integer; ``"decimals": d`` rounds decoded floats. ``"type": "date"`` bins ISO dates
  (``YYYY-MM-DD``; edges written as dates) and decodes to dates; ``"type": "datetime"`` bins ISO
  datetimes (``YYYY-MM-DD HH:MM:SS``, or with ``T``; edges written as ``YYYY-MM-DDTHH:MM:SS``) and
  decodes to datetimes (whole seconds).
* a **categorical** column lists its categories; code ``i`` is ``categories[i]``. Values are
  compared as text, exactly as they appear in the CSV (``"01"`` is not ``"1"``); an empty field (or a
  NaN of ``pandas.read_csv``) is the category ``""`` if it is listed; ``"other": "text"`` adds a last
  code for every value outside the list, else such a value is an error.

The schema file is a JSON object mapping column name to its spec; the column order is the domain
order::

    {
      "age":    {"bins": [17, 25, 35, 45, 55, 65, 91], "integer": true},
      "income": {"bins": 20, "range": [0, 250000], "decode": "midpoint", "clip": true, "missing": true},
      "joined": {"bins": ["2000-01-01", "2010-01-01", "2024-12-31"], "type": "date"},
      "sex":    {"categories": ["Female", "Male"], "other": "other"}
    }

``"bins": k`` with ``"range": [lo, hi]`` means ``k`` equal-width bins over ``[lo, hi]``. An optional
entry ``"_pgmjax": {"private": true|false, ...}`` records where the schema came from (see
:attr:`Schema.provenance`); ``pgmjax run`` flags a schema marked ``"private": false``.

Privacy: a schema is public information. :func:`infer_schema` reads the data itself (its minima,
maxima and category lists are *not* differentially private); it gives a starting point to review
and replace with public knowledge (published ranges, code lists) before a private release.
:func:`pgmjax.preprocessing.preprocess.private_schema` derives one with differential privacy instead.

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

import jax
import numpy as np
import pandas as pd

from .dataset import Dataset, read_json_file
from .domain import Domain
from .raw_csv import read_raw_frame
from .raw_fields import column_values
from .schema_columns import (
    DECODE_METHODS,
    ISO_DATE,
    ISO_DATETIME,
    CategoricalColumn,
    NumericColumn,
    SchemaError,
    SchemaValueError,
    as_text,
    date_days,
    datetime_days,
    parse_column,
)

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
    "PROVENANCE_KEY",
    "CONSTRAINTS_KEY",
]

#: The reserved top-level key of the JSON form that records where a schema came from.
PROVENANCE_KEY = "_pgmjax"
#: The schema entry listing the constraints on the columns' values (:mod:`pgmjax.queries.schema_constraints`).
CONSTRAINTS_KEY = "_constraints"

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

    def __init__(self, columns, provenance: Mapping | None = None, constraints=()):
        columns = list(columns)
        if not columns:
            raise SchemaError("schema: no columns")
        names = [c.name for c in columns]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SchemaError(f"schema: duplicate column names {dup}")
        self.columns: dict[str, NumericColumn | CategoricalColumn] = {c.name: c for c in columns}
        self.domain = Domain({c.name: c.size for c in columns})
        #: where the schema came from: ``{"private": bool, ...}`` (empty when unknown, e.g. written by hand).
        self.provenance: dict = dict(provenance or {})
        #: the ``"_constraints"`` entry as written: combinations of values no record holds, in raw values
        #: (read by :func:`pgmjax.queries.schema_constraints.schema_constraints`).
        self.constraint_specs: list = list(constraints)

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
        provenance = spec.get(PROVENANCE_KEY)
        if provenance is not None and not isinstance(provenance, Mapping):
            raise SchemaError(f"{where}: {PROVENANCE_KEY} must be an object like {{\"private\": false}}, got {provenance!r}")
        constraints = spec.get(CONSTRAINTS_KEY, [])
        if not isinstance(constraints, list) or not all(isinstance(c, Mapping) for c in constraints):
            raise SchemaError(f"{where}: {CONSTRAINTS_KEY} must be a list of objects like "
                              f'{{"forbid": {{"age": [5], "marital": ["Married"]}}}}, got {constraints!r}')
        columns = {k: v for k, v in spec.items() if k not in (PROVENANCE_KEY, CONSTRAINTS_KEY)}
        if not columns:
            raise SchemaError(f"{where}: has no columns")
        return cls([parse_column(name, col, decode or "uniform", where) for name, col in columns.items()], provenance,
                   constraints)

    def to_dict(self) -> dict:
        """The JSON form (round-trips through :meth:`from_dict`), with the provenance entry if any."""
        out = {name: col.to_dict() for name, col in self.columns.items()}
        if self.provenance:
            out[PROVENANCE_KEY] = dict(self.provenance)
        if self.constraint_specs:
            out[CONSTRAINTS_KEY] = list(self.constraint_specs)
        return out

    @property
    def private(self) -> bool | None:
        """True for a schema derived with differential privacy, False for one read from the data without it,
        None when unknown (e.g. written by hand from public knowledge)."""
        p = self.provenance.get("private")
        return None if p is None else bool(p)

    def __repr__(self) -> str:
        kinds = ", ".join(
            f"{n}: {c.size} {'bins' if isinstance(c, NumericColumn) else 'categories'}" for n, c in self.columns.items()
        )
        return f"Schema({kinds})"

    # Encoding / decoding ----------------------------------------------------------------------
    def encode(self, frame: pd.DataFrame, *, line_offset: int = 0, unreadable: str = "error") -> Dataset:
        """Discretise a raw DataFrame (columns not in the schema are ignored).

        Args:
            frame: the raw table; numeric columns may hold numbers or numeric text, categorical
                columns anything whose text form is a category.
            line_offset: if non-zero, errors name ``line row + line_offset`` instead of the 0-based
                ``row`` (2 gives the line number in a CSV file with a header).
            unreadable: ``"error"`` (a field a numeric column cannot parse raises), or ``"missing"``: in a
                numeric column with a missing code every empty or unparsable field is missing
                (:func:`pgmjax.data.raw_fields.column_values`), and categorical fields are compared as
                stripped text; the command line's raw path uses it, because an error on one field of a
                private table would depend on one record.

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
        if unreadable not in ("error", "missing"):
            raise ValueError(f"Schema.encode: unreadable must be 'error' or 'missing', got {unreadable!r}")
        lenient = unreadable == "missing"
        codes = []
        for name, col in self.columns.items():
            raw = frame[name]
            if isinstance(col, NumericColumn):
                values = column_values(raw, col.read_as) if lenient and col.missing else col.values(raw, line_offset)
                codes.append(col.encode(values, offset=line_offset))
            else:
                codes.append(col.encode(as_text(raw).str.strip().to_numpy(dtype=object) if lenient else raw.to_numpy(),
                                        offset=line_offset))
        return Dataset._trusted(np.stack(codes, axis=1).astype(np.int64), self.domain)

    def decode(self, data: Dataset | np.ndarray, key, *, columns=None) -> pd.DataFrame:
        """Turn integer-coded records back into raw values (post-processing: no privacy cost).

        Numeric columns: a value drawn uniformly within the record's bin (one independent uniform per
        record and column, from ``key``), or the bin midpoint where the column says
        ``decode="midpoint"``; integers for ``integer`` columns. Categorical columns: the category text.

        Args:
            data: a Dataset over :attr:`domain` (e.g. synthetic data), or its records array.
            key: a ``jax.random`` key.
            columns: the output column order (e.g. the input file's header; names not in the schema
                are skipped); None for the schema's order.

        Returns:
            A DataFrame with the schema's columns.
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
        out = pd.DataFrame(
            {name: col.decode_codes(records[:, j], keys[j]) for j, (name, col) in enumerate(self.columns.items())}
        )
        if columns is None:
            return out
        order = [c for c in columns if c in self.columns]
        return out[order + [c for c in self.columns if c not in order]]


def load_schema(path: str | os.PathLike, *, decode: str | None = None) -> Schema:
    """Read a schema JSON file (format in the module docstring).

    Raises:
        FileNotFoundError: no such file.
        SchemaError: not valid JSON, duplicate column names, or a bad column spec.
    """
    path = os.fspath(path)
    raw = read_json_file(path, "schema file", "column names", SchemaError)
    return Schema.from_dict(raw, decode=decode, where=f"schema file {path}")


def read_raw_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read a raw CSV with every field as text (empty fields stay ``""``), ready for :meth:`Schema.encode`.

    The file is read by the rule every engine applies (:mod:`pgmjax.data.raw_csv`): the header's field count is
    every record's width (never an index column); blank lines are skipped; a ragged record, or one with a field
    over ``csv.field_size_limit()``, is missing in every field; a field with bytes that are not UTF-8 is missing.
    No record can make the read fail.

    Raises:
        FileNotFoundError: no such file. SchemaError: an empty file, a header that is not UTF-8 text, duplicate
            column names (the same words on every engine).
    """
    return read_raw_frame(path)


def infer_schema(frame: pd.DataFrame, *, bins: int = 10, max_categories: int = 32) -> tuple[dict, list[str]]:
    """A starter schema from a raw table (NOT private: it reads the data; the result is marked so).

    Rule per column, ignoring empty fields: if every value is a number and there are more than
    ``max_categories`` distinct values, ``bins`` equal-width bins over ``[min, max]`` (``integer`` if
    all values are integers); if every value is an ISO date ``YYYY-MM-DD`` and there are more than
    ``max_categories`` distinct ones, ``bins`` bins of dates; a binned column with empty fields gets a
    ``missing`` code. Otherwise a categorical column with the distinct values as categories (numbers
    sorted numerically, text alphabetically; an empty field is the category ``""``), which decodes
    back to exactly those values. For a private schema use :func:`pgmjax.preprocessing.preprocess.private_schema`.

    Args:
        frame: a raw table as read by :func:`read_raw_csv` (text fields).
        bins: bins per numeric column (at least 1).
        max_categories: numeric columns with at most this many distinct values stay categorical
            (at least ``bins``).

    Returns:
        ``(schema dict, warnings)``: the JSON form (with ``"_pgmjax": {"private": false, ...}``), and
        remarks for the user (very large category lists, missing values).

    Example:
        >>> spec, notes = infer_schema(pd.DataFrame({"c": ["b", "a", "b"], "x": [str(i) for i in range(40)][:3]}))
        >>> spec["c"], spec["_pgmjax"]["private"]
        ({'categories': ['a', 'b']}, False)
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
        text = frame[name].astype(object).where(frame[name].notna(), "").astype(str).str.strip()
        blank = (text == "").to_numpy()
        filled = text[~blank]
        numbers = pd.to_numeric(filled, errors="coerce").to_numpy(np.float64)
        is_date = len(filled) > 0 and bool(filled.str.fullmatch(ISO_DATE).all())
        is_datetime = not is_date and len(filled) > 0 and bool(filled.str.fullmatch(ISO_DATETIME).all())
        values = date_days(filled, str(name)) if is_date else datetime_days(filled, str(name)) if is_datetime else numbers
        binned = len(filled) > 0 and np.isfinite(values).all() and len(np.unique(values)) > max_categories
        if binned:
            lo, hi = float(values.min()), float(values.max())
            integer = bool(np.all(values == np.round(values)))
            if is_date or is_datetime:  # whole days, or whole seconds
                unit = 1.0 if is_date else 86400.0
                edges = np.unique(np.round(np.linspace(lo, hi, bins + 1) * unit) / unit)
            else:
                edges = _nice_edges(lo, hi, bins)
            col = NumericColumn(str(name), edges, integer and not (is_date or is_datetime), missing=bool(blank.any()),
                                kind="date" if is_date else "datetime" if is_datetime else "number")
            if col.integer and (col._integer_bounds()[1] < 1).any():
                col = NumericColumn(str(name), col.edges, False, missing=col.missing)
            spec[str(name)] = col.to_dict()
            if blank.any():
                notes.append(f"column {name!r}: has empty fields; they get their own code (\"missing\": true)")
            continue
        distinct = pd.unique(text)
        if len(filled) and np.isfinite(numbers).all():
            key = [float(v) if v != "" else -np.inf for v in distinct]
            cats = [str(distinct[i]) for i in np.argsort(key, kind="stable")]
        else:
            cats = sorted(str(v) for v in distinct)
        if blank.any():
            notes.append(f"column {name!r}: has empty fields; they are kept as the category \"\"")
        if len(cats) > max_categories:
            notes.append(
                f"column {name!r}: {len(cats)} distinct values became {len(cats)} categories; large attributes make "
                "marginals large and noisy: consider merging categories"
            )
        spec[str(name)] = {"categories": cats}
    spec[PROVENANCE_KEY] = {"private": False, "source": "infer_schema: ranges and categories read from the data without noise"}
    return spec, notes




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

