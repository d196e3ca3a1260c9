"""A raw CSV read one way on every engine: the header is the table's width, a faulty record is read as missing.

The raw path (a CSV without ``--domain`` or ``--schema``'s integer coding) must give the same table on pandas,
Polars and Dask, and no single record may stop the read: refusing the table would reveal that one record holds
a faulty line, and an engine that read the faulty line another way (pandas took an extra first-row field as the
index and shifted every column) would change a whole release. The rule, applied by every engine:

* the header (first record) names the columns; its field count is the **width** of every record, the first
  data row included (no index column is ever inferred);
* a **blank line** (no field at all) is skipped, as pandas skips it;
* a **ragged record** (more or fewer fields than the width) is a record whose every field is missing (``""``):
  which field is extra or absent cannot be known;
* a record with a field over Python's ``csv.field_size_limit()`` (131,072 characters by default) is a record
  whose every field is missing: the reader cannot recover its other fields;
* bytes that are not UTF-8 are decoded as U+FFFD, and a **field holding U+FFFD** (an invalid byte, or that
  character itself) is missing;
* quoting is RFC 4180's (Python's ``csv`` module); a UTF-8 byte-order mark before the header is skipped.

Only the header can make the read fail (it is public, the column names): an empty file, a header that is not
UTF-8 text (a file that is not CSV at all) or duplicate column names raise a :class:`SchemaError` with the same
words on every engine; nothing in a message quotes a record, a byte or a position.

One function classifies the records (:func:`records` yields its result): in memory (:func:`read_raw_frame`,
what :func:`pgmjax.read_raw_csv` returns), in each Dask block (:func:`parse_block`), and in the streamed pass
(:func:`record_faults`, constant memory) that lists the rows Polars, which parses the file itself, must skip or
blank; so the three tables are equal.

Example:
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(path, "wb").write(b"a,b\\n1,x,EXTRA\\n\\n2,\\xff\\n3,y\\n")
    >>> read_raw_frame(path).to_dict("list")
    {'a': ['', '2', '3'], 'b': ['', '', 'y']}
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
from collections.abc import Iterable, Iterator
from itertools import islice

import numpy as np

from .schema_columns import SchemaError

__all__ = ["REPLACEMENT", "raw_header", "header_of", "records", "read_raw_frame", "parse_block", "record_faults"]

#: What a byte that is not UTF-8 decodes to (Python's ``errors="replace"``, Polars' ``utf8-lossy``).
REPLACEMENT = "\ufffd"


def _open_text(path: str):
    # newline="": quoted line breaks stay in their field; utf-8-sig: a spreadsheet's byte-order mark is skipped.
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline="")
    return open(path, encoding="utf-8-sig", errors="replace", newline="")


@contextlib.contextmanager
def _reader(path: str | os.PathLike):
    """The file's ``csv.reader`` past its header, and the header checked (:func:`_checked_header`).

    Raises:
        FileNotFoundError: no such file. SchemaError: as :func:`_checked_header`.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file not found: {path}")
    with _open_text(path) as f:
        reader = csv.reader(f)
        yield reader, _checked_header(_first_row(reader), path)


def _checked_header(row: list[str] | None, path: str) -> list[str]:
    """The header row, refused when it cannot name a table's columns (the same words on every engine)."""
    if not row:
        raise SchemaError(f"data file {path} is empty (no header line)")
    if any(REPLACEMENT in n or "\x00" in n for n in row):
        # The header is public, but a file that is not text at all may hold anything: name no byte.
        raise SchemaError(f"data file {path} could not be read as CSV: its header line is not UTF-8 text")
    dup = sorted({n for n in row if row.count(n) > 1})
    if dup:
        raise SchemaError(f"data file {path} has duplicate column names: {dup}")
    return list(row)


def _first_row(reader) -> list[str] | None:
    try:
        return next(reader, None)
    except csv.Error:  # a header field over the field size limit: not a header
        return [REPLACEMENT]


def raw_header(path: str | os.PathLike) -> list[str]:
    """The column names of a raw CSV (its first record).

    Args:
        path: the file (``.gz`` for gzipped).

    Returns:
        The names, in the file's order.

    Raises:
        FileNotFoundError: no such file. SchemaError: empty file, header not UTF-8 text, duplicate names.
    """
    with _reader(path) as (_, names):
        return names


def header_of(data: bytes, path: str | os.PathLike) -> list[str]:
    """The column names from a file's first bytes (a sample holding its first line), as :func:`raw_header`.

    Raises:
        SchemaError: as :func:`raw_header`.
    """
    text = data.decode("utf-8-sig", errors="replace")
    return _checked_header(_first_row(csv.reader(io.StringIO(text, newline=""))), os.fspath(path))


def records(reader, width: int) -> Iterator[list[str] | None]:
    """The records of a CSV reader by the rule above, fields as read: ``None`` for a blank line, ``width`` empty
    fields for a record read as missing (ragged, or a field over the size limit), else the record's fields
    (a field holding U+FFFD is blanked by :func:`read_raw_frame` and :func:`parse_block`, column by column).

    Args:
        reader: a ``csv.reader`` past the header.
        width: the header's field count.

    Yields:
        One item per record the reader sees (a blank line included, as ``None``), so that its position is
        the record's row number on an engine that keeps blank lines (Polars).

    Example:
        >>> list(records(csv.reader(io.StringIO("1,2\\n\\n3\\n4,5,6\\n")), 2))
        [['1', '2'], None, ['', ''], ['', '']]
    """
    missing = [""] * width
    for row in _classified(reader, width):
        yield list(missing) if row is _MISSING else row


#: What :func:`_classified` yields for a record read as missing.
_MISSING = object()


def _classified(reader, width: int) -> Iterator:
    """Per record: its fields, ``None`` for a blank line, :data:`_MISSING` for a record read as missing; the one
    place that decides both."""
    while True:
        try:
            for row in reader:
                yield (row if len(row) == width else _MISSING) if row else None
            return
        except csv.Error:  # a field over the size limit: the rest of its line is lost, the record is missing
            yield _MISSING


#: Records per pandas block while a table is built (bounds the Python lists held at once).
_CHUNK = 1 << 16
#: Records transposed at once: their row lists die young, so the garbage collector never scans a million of them
#: (a 65,536-row batch of lists made the read four times slower).
_SMALL = 1024


def _block(columns: list[list[str]]):
    import pandas as pd

    frame = pd.DataFrame({i: pd.array(c, dtype=str) for i, c in enumerate(columns)})
    for i in range(len(columns)):  # a field with a byte that is not UTF-8 (decoded as U+FFFD) is missing
        bad = frame[i].str.contains(REPLACEMENT, regex=False).to_numpy(dtype=bool)
        if bad.any():
            frame.loc[bad, i] = ""
    return frame


def _frame(names: list[str], rows: Iterable):
    """The table of :func:`_classified`'s items (a record read as missing becomes empty fields)."""
    import pandas as pd

    width, it, missing = len(names), iter(rows), [""] * len(names)
    blocks, columns = [], [[] for _ in names]
    while True:
        got = list(islice(it, _SMALL))
        for column, values in zip(columns, zip(*(missing if r is _MISSING else r for r in got if r is not None))):
            column.extend(values)
        if len(columns[0]) >= _CHUNK or not got:
            if columns[0] or not blocks:
                blocks.append(_block(columns))
            columns = [[] for _ in range(width)]
        if not got:
            break
    frame = pd.concat(blocks, ignore_index=True) if len(blocks) > 1 else blocks[0]
    # Columns set by position: a header name equal to another column's number never collides.
    frame.columns = pd.Index(names, dtype=object)
    return frame


def read_raw_frame(path: str | os.PathLike):
    """A raw CSV in memory, every field text (``""`` for an empty or missing field), by the rule above.

    Args:
        path: the file (``.gz`` for gzipped).

    Returns:
        A pandas DataFrame with the header's columns, in order.

    Raises:
        FileNotFoundError: no such file. SchemaError: empty file, header not UTF-8 text, duplicate names.
    """
    with _reader(path) as (reader, names):
        return _frame(names, _classified(reader, len(names)))


def parse_block(data: bytes, names: list[str], first: bool):
    """One block of a raw CSV's bytes (whole lines, as ``dask.bytes.read_bytes`` cuts them) as a frame.

    Args:
        data: the block's bytes.
        names: the header's names.
        first: the block starts the file (holds the header, which is skipped).

    Returns:
        A pandas DataFrame as :func:`read_raw_frame` returns for these records.
    """
    text = data.decode("utf-8-sig" if first else "utf-8", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""))
    if first:
        _first_row(reader)
    return _frame(list(names), _classified(reader, len(names)))


def record_faults(path: str | os.PathLike, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows an engine that parses the file itself (Polars) must skip or blank: streamed, constant memory.

    Rows are numbered from 0 after the header, a blank line counting as a row (Polars reads it as a record of
    empty fields).

    Args:
        path: the file.
        width: the header's field count.

    Returns:
        ``(blank, faulty)``: int64 row numbers of blank lines (to drop) and of records read as missing in every
        field (ragged, or with a field over the size limit). Fields holding U+FFFD are the engine's to blank.
    """
    blank: list[int] = []
    faulty: list[int] = []
    with _open_text(os.fspath(path)) as f:
        reader = csv.reader(f)
        _first_row(reader)
        for i, row in enumerate(_classified(reader, width)):
            if row is None:
                blank.append(i)
            elif row is _MISSING:
                faulty.append(i)
    return np.asarray(blank, np.int64), np.asarray(faulty, np.int64)

