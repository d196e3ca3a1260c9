"""Integer-coded tables over a :class:`~pgmjax.Domain`, with fast marginal counting."""

from __future__ import annotations

import csv
import gzip
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .domain import Clique, CliqueLike, Domain

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a table is read or built (0.18 s of a fresh process's import): a process that
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
            csv_path: the table; columns not in the domain are ignored.
            domain_path: a JSON file mapping attribute -> size, or a Domain.
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
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
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
        cliques are projections of those tables when that is cheaper.
        """
        cliques = [self.domain.check_clique(c) for c in cliques]
        order = sorted(range(len(cliques)), key=lambda i: -self.domain.size(cliques[i]))
        done: dict[Clique, np.ndarray] = {}
        out: list[np.ndarray | None] = [None] * len(cliques)
        for i in order:
            c = cliques[i]
            if c in done:
                out[i] = done[c]
                continue
            source = min(
                (s for s in done if set(c) <= set(s) and self.domain.size(s) < len(self)),
                key=self.domain.size,
                default=None,
            )
            if source is None:
                table = self.marginal(c)
            else:
                table = project_table(done[source], source, c)
            done[c] = table
            out[i] = table
        return out  # type: ignore[return-value]


def project_table(table: np.ndarray, clique: Clique, target: Clique) -> np.ndarray:
    """Sum a table over ``clique`` down to ``target`` (a subset), axes in target order."""
    keep = [clique.index(a) for a in target]
    drop = tuple(i for i in range(len(clique)) if i not in keep)
    reduced = table.sum(axis=drop) if drop else table
    remaining = [clique[i] for i in range(len(clique)) if i not in drop]
    return np.transpose(reduced, [remaining.index(a) for a in target])


def _open_text(path):
    return gzip.open(path, "rt") if str(path).endswith(".gz") else open(path, newline="")


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
        columns = []
        for a in attrs:
            columns.append(_integer_column(data[a].to_numpy(), a))
        records = np.stack(columns, axis=1)
    else:
        arr = np.asarray(data)
        if arr.ndim != 2:
            raise ValueError(f"Dataset: an array must be 2-D (records, attributes), got shape {arr.shape}")
        if arr.shape[1] != len(attrs):
            raise ValueError(f"Dataset: the array has {arr.shape[1]} columns but the domain has {len(attrs)} attributes {attrs}")
        if arr.shape[0] == 0:
            raise ValueError("Dataset: the data has no records")
        records = np.stack([_integer_column(arr[:, j], a) for j, a in enumerate(attrs)], axis=1)
    for j, a in enumerate(attrs):
        col = records[:, j]
        bad = np.flatnonzero((col < 0) | (col >= domain[a]))
        if bad.size:
            r = int(bad[0])
            raise DataValueError(
                f"Dataset: column {a!r} row {r} has value {int(col[r])}, outside [0, {domain[a]}) "
                f"({bad.size} bad value(s) in this column)",
                f"Dataset: column {a!r} has a value outside [0, {domain[a]})",
            )
    dtype = np.int32 if max(domain.shape) < 2**31 else np.int64
    return np.ascontiguousarray(records, dtype=dtype)


def _integer_column(col: np.ndarray, name: str) -> np.ndarray:
    if col.dtype.kind in "iu":
        return col.astype(np.int64)
    if col.dtype.kind == "b":
        return col.astype(np.int64)
    if col.dtype.kind == "f":
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
        return col.astype(np.int64)
    # objects / strings: accept only if every entry is an integer.
    import pandas as pd

    try:
        as_int = pd.to_numeric(pd.Series(col), errors="raise")
    except (ValueError, TypeError):
        for r, v in enumerate(col):
            try:
                int(v)
            except (ValueError, TypeError):
                raise DataValueError(
                    f"Dataset: column {name!r} must hold integer codes; row {r} has {v!r}",
                    f"Dataset: column {name!r} must hold integer codes; it has a value that is not a number",
                ) from None
        raise
    return _integer_column(as_int.to_numpy(), name)
