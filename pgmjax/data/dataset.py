"""Integer-coded tables over a :class:`~pgmjax.Domain`, with fast marginal counting."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .domain import Clique, CliqueLike, Domain

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a table is read or built (a large share of a fresh process's import): a process that
# fits models from arrays never loads it.


class DataValueError(ValueError):
    """A value of the (private) data does not fit its column.

    ``str(error)`` names the row and the value, for the data holder debugging their own table;
    ``error.public`` names only the column and what was expected, and is what a tool that prints or
    logs errors (the ``pgmjax`` command line) shows: a record's value or position is private.

    Args:
        detail: the full message (row and value).
        public: the message without any private value, row, line or count.

    Example:
        >>> try:
        ...     Dataset(np.array([[0, 1], [1, 5]]), Domain({"a": 2, "b": 3}))
        ... except DataValueError as e:
        ...     print(e.public)
        Dataset: column 'b' has a value outside [0, 3)
    """

    def __init__(self, detail: str, public: str):
        super().__init__(detail)
        self.public = public


def unreadable_csv(path, error: Exception) -> str:
    """The public message for a CSV file that could not be parsed: the kind of fault, never its line or bytes.

    Args:
        path: the file.
        error: what the CSV reader raised (its text may quote a line number or bytes of the file).

    Returns:
        A message naming the file and the kind of fault.

    Example:
        >>> unreadable_csv("t.csv", UnicodeDecodeError("utf-8", b"\\xff", 0, 1, "invalid start byte"))
        't.csv could not be read as CSV (UnicodeDecodeError: it is not UTF-8 text)'
    """
    why = {
        "ParserError": "a line does not have the header's number of fields, or its quoting is broken",
        "EmptyDataError": "it is empty",
        "UnicodeDecodeError": "it is not UTF-8 text",
    }.get(type(error).__name__, "it is malformed")
    return f"{path} could not be read as CSV ({type(error).__name__}: {why})"


class Dataset:
    """A table of records whose columns are the attributes of a domain.

    Every value of attribute ``a`` must be an integer in ``[0, domain[a])``;
    bad input is rejected at construction with the column (and row) at fault.

    Args:
        data: a pandas DataFrame with (at least) one column per domain
            attribute, or an integer array of shape ``(records, len(domain))``
            whose columns follow the domain order.
        domain: the :class:`Domain` (or a mapping name -> size).

    Example:
        >>> dom = Domain({"a": 2, "b": 3})
        >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 2]]), dom)
        >>> data.marginal(("b", "a")).tolist()
        [[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]]
    """

    def __init__(self, data, domain: Domain | dict):
        if not isinstance(domain, Domain):
            domain = Domain(domain)
        if len(domain) == 0:
            raise ValueError("Dataset: the domain has no attributes")
        self.domain = domain
        self._records = _validated_records(data, domain)
        self._records.setflags(write=False)

    # Construction ----------------------------------------------------------
    @classmethod
    def _trusted(cls, records: np.ndarray, domain: Domain) -> "Dataset":
        """Wrap records produced inside pgmjax (already in range, domain order) without re-validating."""
        self = cls.__new__(cls)
        self.domain = domain
        self._records = np.ascontiguousarray(records)
        self._records.setflags(write=False)
        return self

    @classmethod
    def from_csv(cls, csv_path: str | os.PathLike, domain_path: str | os.PathLike | Domain | dict) -> "Dataset":
        """Read an integer-coded CSV (optionally gzipped) and its domain JSON.

        Args:
            csv_path: the table; columns not in the domain are ignored. A UTF-8 byte-order mark is
                skipped; every line must have the header's number of fields (:func:`check_field_counts`).
            domain_path: a JSON file mapping attribute -> size, or a Domain.

        Returns:
            The Dataset.

        Raises:
            DataValueError: a line with another number of fields than the header, or a value that is
                not an integer code in ``[0, size)`` (the column and the range named).
        """
        if isinstance(domain_path, (Domain, dict)):
            domain = domain_path if isinstance(domain_path, Domain) else Domain(domain_path)
        else:
            raw = read_json_file(domain_path, "domain file", "attribute names")
            if not isinstance(raw, dict):
                raise ValueError(f"domain file {domain_path} must hold a JSON object attribute -> size")
            domain = Domain(raw)
        if not os.path.exists(csv_path):
            raise FileNotFoundError(f"data file not found: {csv_path}")
        with _open_text(csv_path) as f:
            names = next(csv.reader(f), [])
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"data file {csv_path} has duplicate column names: {dup}")
        import pandas as pd

        try:
            df = pd.read_csv(csv_path)
            check_field_counts(csv_path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, csv.Error) as e:
            raise DataValueError(f"data file {csv_path} could not be read as CSV: {e}", "data file " + unreadable_csv(csv_path, e)) from e
        return cls(df, domain)

    # Accessors ---------------------------------------------------------------
    @property
    def records(self) -> np.ndarray:
        """Read-only int array ``(records, attributes)`` in domain order."""
        return self._records

    def __len__(self) -> int:
        return self._records.shape[0]

    @property
    def df(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._records, columns=list(self.domain.attributes))

    def project(self, clique: CliqueLike) -> "Dataset":
        clique = self.domain.check_clique(clique)
        cols = [self.domain.index(a) for a in clique]
        return Dataset(self._records[:, cols], self.domain.project(clique))

    def recode(self, mapping, domain: Domain) -> "Dataset":
        """The table with each attribute ``a`` in ``mapping`` mapped through ``mapping[a]`` (an array: old
        code -> new code), over ``domain`` (the new sizes; codes are trusted to fit it).

        Example:
            >>> Dataset(np.array([[0], [1], [3]]), {"a": 4}).recode({"a": np.array([0, 2, 1, 2])}, Domain({"a": 3})).records[:, 0].tolist()
            [0, 2, 2]
        """
        records = np.array(self._records)
        for a, cmap in mapping.items():
            j = self.domain.index(a)
            records[:, j] = np.asarray(cmap)[records[:, j]]
        return Dataset._trusted(records, domain)

    def cell_counts(self, clique: CliqueLike) -> tuple[np.ndarray, np.ndarray]:
        """``(flat cell indices, counts)`` of the clique's non-empty cells, sorted by cell: its marginal
        without the empty cells (for tables with more cells than records).

        Example:
            >>> Dataset(np.array([[0, 1], [1, 2], [1, 2]]), {"a": 2, "b": 3}).cell_counts(("a", "b"))
            (array([1, 5]), array([1, 2]))
        """
        clique = self.domain.check_clique(clique)
        cols = [self.domain.index(a) for a in clique]
        flat = np.ravel_multi_index(tuple(self._records[:, c] for c in cols), self.domain.shape_of(clique))
        cells, counts = np.unique(flat, return_counts=True)
        return cells.astype(np.int64), counts.astype(np.int64)

    def __repr__(self) -> str:
        return f"Dataset({len(self)} records, {self.domain})"

    # Counting ------------------------------------------------------------------
    def marginal(self, clique: CliqueLike) -> np.ndarray:
        """Counts of every cell of ``clique``'s table, axes in the clique's order (float64)."""
        clique = self.domain.check_clique(clique)
        cols = [self.domain.index(a) for a in clique]
        shape = self.domain.shape_of(clique)
        if not clique:
            return np.array(float(len(self)))
        flat = np.ravel_multi_index(tuple(self._records[:, c] for c in cols), shape) if len(cols) > 1 else self._records[:, cols[0]]
        return np.bincount(flat, minlength=int(np.prod(shape))).astype(np.float64).reshape(shape)

    def marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        """Marginals of many cliques; a clique inside an already counted one is summed from it.

        Counting is one pass over the records per *maximal* clique; smaller
        cliques are projections of those tables when that is cheaper. The
        counted cliques share one pass over the records, in blocks of rows
        whose columns are copied contiguous first: a column of a row-major
        table is a strided read, the most of a count's time on a wide table.

        Example:
            >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 2]]), {"a": 2, "b": 3})
            >>> [t.tolist() for t in data.marginals([("b",), ("a", "b")])]
            [[0.0, 1.0, 2.0], [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]]
        """
        cliques = [self.domain.check_clique(c) for c in cliques]
        order = sorted(range(len(cliques)), key=lambda i: -self.domain.size(cliques[i]))
        source: dict[Clique, Clique | None] = {}  # each distinct clique: the table it is summed from, or None: counted
        holders: dict[str, list[Clique]] = {}  # attribute -> the planned cliques that hold it, largest first
        for i in order:
            c = cliques[i]
            if c in source:
                continue
            held = holders.get(c[0], []) if c else list(source)
            source[c] = min((s for s in held if set(c) <= set(s) and self.domain.size(s) < len(self)),
                            key=self.domain.size, default=None)
            for a in c:
                holders.setdefault(a, []).append(c)
        tables = self._count([c for c, s in source.items() if s is None])
        for c, s in source.items():  # in planning order: a source is planned, hence made, before what it sums to
            if s is not None:
                tables[c] = project_table(tables[s], s, c)
        return [tables[c] for c in cliques]

    def _count(self, cliques: list[Clique]) -> dict[Clique, np.ndarray]:
        """The counts of ``cliques`` (float64 tables), in one pass over blocks of rows (:data:`COUNT_BLOCK` cells
        of the columns they read, copied contiguous)."""
        cols = sorted({self.domain.index(a) for c in cliques for a in c})
        where = {j: k for k, j in enumerate(cols)}
        rows = max(1, COUNT_BLOCK // max(len(cols), 1))
        # a table with more cells than a block has rows would be added up once per block: counted alone, at once
        alone = {c: self.marginal(c) for c in cliques if self.domain.size(c) > rows}
        out = {c: np.zeros(self.domain.shape_of(c)) for c in cliques if c not in alone}
        for lo in range(0, len(self) if out else 0, rows):
            block = np.asfortranarray(self._records[lo:lo + rows, cols], dtype=np.intp)  # columns contiguous
            for c, table in out.items():
                if not c:
                    table += block.shape[0]
                    continue
                flat = block[:, where[self.domain.index(c[0])]]
                for a in c[1:]:
                    flat = flat * self.domain[a] + block[:, where[self.domain.index(a)]]
                table.reshape(-1)[:] += np.bincount(flat, minlength=table.size)
        return out | alone


#: Cells of the records' columns :meth:`Dataset.marginals` copies at once (a block of rows, its columns contiguous).
COUNT_BLOCK = 1 << 23


def project_table(table: np.ndarray, clique: Clique, target: Clique) -> np.ndarray:
    """Sum a table over ``clique`` down to ``target`` (a subset), axes in target order."""
    keep = [clique.index(a) for a in target]
    drop = tuple(i for i in range(len(clique)) if i not in keep)
    reduced = table.sum(axis=drop) if drop else table
    remaining = [clique[i] for i in range(len(clique)) if i not in drop]
    return np.transpose(reduced, [remaining.index(a) for a in target])


def _open_text(path):
    # utf-8-sig: a byte-order mark (spreadsheet exports write one) is not part of the first column's name.
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, newline="", encoding="utf-8-sig")


def check_field_counts(path, *, blank_lines: bool = True) -> int:
    """Refuse a CSV file whose lines do not all have the header's number of fields.

    ``pandas.read_csv`` with ``usecols`` drops the fields of a longer line and fills a shorter one with
    missing values: a shifted or truncated line would be read as other records. The file is streamed
    once (constant memory); blank lines are skipped, as pandas skips them.

    Args:
        path: the CSV file (``.gz`` for gzipped), UTF-8 with or without a byte-order mark.
        blank_lines: False refuses a blank line too (Polars reads it as a record of empty fields, pandas skips it).

    Returns:
        The number of fields of the header.

    Raises:
        DataValueError: naming the first ragged line's number and field count (``str(e)``); its public
            message names neither (a line of the private table). Also for a file that is not CSV text (a byte
            that is not UTF-8, a field over ``csv.field_size_limit()``): the reader's text, which quotes a byte
            and its position, only in ``str(e)``.

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(path, "w").write("a,b\\n0,1\\n1,0,1\\n")
        >>> check_field_counts(path)
        Traceback (most recent call last):
        ...
        pgmjax.data.dataset.DataValueError: data file ...t.csv: line 3 has 3 fields, the header has 2
    """
    try:
        return _field_counts(path, blank_lines)
    except (UnicodeDecodeError, csv.Error) as e:
        raise DataValueError(f"data file {path} could not be read as CSV: {e}", "data file " + unreadable_csv(path, e)) from None


def _field_counts(path, blank_lines: bool) -> int:
    with _open_text(path) as f:
        reader = csv.reader(f)
        width = len(next(reader, []))
        for row in reader:
            if not row and not blank_lines:
                raise DataValueError(f"data file {path}: line {reader.line_num} is blank",
                                     f"data file {path}: a line is blank (pandas skips it, Polars reads a record of "
                                     "empty fields): remove the blank lines")
            if row and len(row) != width:
                raise DataValueError(
                    f"data file {path}: line {reader.line_num} has {len(row)} field{'s' if len(row) != 1 else ''}, "
                    f"the header has {width}",
                    f"data file {path}: a line has {'more' if len(row) > width else 'fewer'} fields than the "
                    f"header's {width}",
                )
    return width


def read_json_file(path, what: str, keys: str, error: type[Exception] = ValueError):
    """The JSON in ``path``, refusing what a plain ``json.load`` would let through silently.

    Args:
        path: the file.
        what: what the file is, for messages (``"domain file"``).
        keys: what its object keys name, for the duplicate-key message (``"attribute names"``).
        error: the exception raised for invalid JSON or a key given twice (``json.load`` keeps the last).

    Raises:
        FileNotFoundError: no such file.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")

    def unique(pairs):
        names = [k for k, _ in pairs]
        dups = sorted({k for k in names if names.count(k) > 1})
        if dups:
            raise error(f"duplicate {keys} in {what} {path}: {dups}")
        return dict(pairs)

    with open(path) as f:
        try:
            return json.load(f, object_pairs_hook=unique)
        except json.JSONDecodeError as e:
            raise error(f"{what} {path} is not valid JSON: {e}") from None


def _validated_records(data, domain: Domain) -> np.ndarray:
    attrs = list(domain.attributes)
    pd = sys.modules.get("pandas")  # a DataFrame exists only once pandas is imported
    if pd is not None and isinstance(data, pd.DataFrame):
        if data.columns.duplicated().any():
            dup = sorted(set(data.columns[data.columns.duplicated()].tolist()))
            raise ValueError(f"Dataset: duplicate column names {dup}")
        missing = [a for a in attrs if a not in data.columns]
        if missing:
            raise ValueError(f"Dataset: columns {missing} of the domain are missing from the data; data has {list(data.columns)}")
        if len(data) == 0:
            raise ValueError("Dataset: the data has no records")
        records = np.stack([_integer_column(data[a].to_numpy(), a, domain[a]) for a in attrs], axis=1)
    else:
        arr = np.asarray(data)
        if arr.ndim != 2:
            raise ValueError(f"Dataset: an array must be 2-D (records, attributes), got shape {arr.shape}")
        if arr.shape[1] != len(attrs):
            raise ValueError(f"Dataset: the array has {arr.shape[1]} columns but the domain has {len(attrs)} attributes {attrs}")
        if arr.shape[0] == 0:
            raise ValueError("Dataset: the data has no records")
        records = np.stack([_integer_column(arr[:, j], a, domain[a]) for j, a in enumerate(attrs)], axis=1)
    dtype = np.int32 if max(domain.shape) < 2**31 else np.int64
    return np.ascontiguousarray(records, dtype=dtype)


#: The longest text read as an integer code: 20 characters hold every int64 (a code is below the domain size).
MAX_CODE_CHARS = 20
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _integer_column(col: np.ndarray, name: str, size: int) -> np.ndarray:
    """The column as int64 codes, each checked to be an integer in ``[0, size)`` in the column's own type
    (before a cast could wrap a huge value into the range)."""
    kind = col.dtype.kind
    if kind in "iub":
        _check_range(col, name, size)
        return col.astype(np.int64)
    if kind == "f":
        nan = np.flatnonzero(~np.isfinite(col))
        if nan.size:
            raise DataValueError(
                f"Dataset: column {name!r} row {int(nan[0])} is missing or not finite ({col[nan[0]]})",
                f"Dataset: column {name!r} has a missing or not finite value (integer codes expected)",
            )
        frac = np.flatnonzero(col != np.round(col))
        if frac.size:
            raise DataValueError(
                f"Dataset: column {name!r} must hold integer codes; row {int(frac[0])} has {col[frac[0]]}",
                f"Dataset: column {name!r} must hold integer codes; it has a value with a fractional part",
            )
        _check_range(col, name, size)
        return col.astype(np.int64)
    # Objects or text (pandas reads a column holding a word, or an integer too long for 64 bits, as Python
    # objects): each value converted on its own, its text bounded, no recursion.
    out = np.empty(len(col), np.int64)
    for r, v in enumerate(col):
        if isinstance(v, str) and len(v.strip()) > MAX_CODE_CHARS and _INTEGER_TEXT.fullmatch(v.strip()):
            _range_error(name, r, f"an integer of {len(v.strip().lstrip('+-'))} digits", size, None)
        code = _code_of(v)
        if code is None:
            raise DataValueError(
                f"Dataset: column {name!r} must hold integer codes; row {r} has {_shown(v)}",
                f"Dataset: column {name!r} must hold integer codes in [0, {size}); it has a value that is not a number",
            )
        if not 0 <= code < size:
            _range_error(name, r, _shown(code), size, None)
        out[r] = code
    return out


def _code_of(v) -> int | None:
    """An integer code (any size: compared as a Python int), or None for anything else."""
    if isinstance(v, (bool, np.bool_, int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return int(v) if np.isfinite(v) and v == np.round(v) else None
    if isinstance(v, str):
        text = v.strip()
        if len(text) > MAX_CODE_CHARS:  # refused unconverted: no code needs more digits
            return None
        if _INTEGER_TEXT.fullmatch(text):
            return int(text)
        if _NUMBER_TEXT.fullmatch(text):  # "3.0", "1e2": whole numbers written as decimals, as pandas reads them
            x = float(text)
            return int(x) if np.isfinite(x) and x == np.round(x) else None
        return None
    return None


def _shown(v) -> str:
    """A value for a message, cut short (an integer of thousands of digits has no useful text)."""
    if isinstance(v, int) and not -10**18 < v < 10**18:
        return f"an integer of {len(str(abs(v))) if v.bit_length() < 14000 else 'thousands of'} digits"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_range(col: np.ndarray, name: str, size: int) -> None:
    bad = np.flatnonzero((col < 0) | (col >= size))
    if bad.size:
        r = int(bad[0])
        _range_error(name, r, str(int(col[r])), size, bad.size)


def _range_error(name: str, r: int, value: str, size: int, count: int | None) -> None:
    many = f" ({count} bad value(s) in this column)" if count is not None else ""
    raise DataValueError(
        f"Dataset: column {name!r} row {r} has value {value}, outside [0, {size}){many}",
        f"Dataset: column {name!r} has a value outside [0, {size})",
    )
