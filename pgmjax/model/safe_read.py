"""Bounded reading of a saved model's files: every size is checked before the bytes it declares are read.

A model folder may come from anyone (a colleague, a download), so :func:`pgmjax.load_model` reads it as
hostile input. Each file declares sizes that, trusted, would let a few bytes claim gigabytes: a deflate
member of ``potentials.npz`` expands a thousandfold, an ``.npy`` header declares any shape, ``model.json``
can nest arrays deeper than the JSON parser recurses. This module checks each declaration against what
the model's own (already validated) domain and cliques imply, and reads no further than that:

* ``model.json`` is at most :data:`MAX_STRUCTURE_BYTES` and nested at most :data:`MAX_JSON_DEPTH` deep
  (counted without recursion, before it is parsed);
* ``potentials.npz`` is at most the bytes its tables can take (:func:`npz_size_cap`);
* each table's member declares exactly its clique's cells times the dtype's bytes plus an ``.npy`` header
  of at most :data:`MAX_NPY_HEADER` bytes, its header the clique's shape and the model's dtype, and is
  read in bounded chunks, never past those bytes (the archive's CRC check then catches a member whose
  stream expands further than it declared).

Every refusal is a ``ValueError`` naming the file, the member or field, what was found and what was expected.
"""

from __future__ import annotations

import io
import json
import re
import zipfile

import numpy as np
from numpy.lib import format as npy_format

#: The largest ``model.json`` read (bytes). A model's structure (domain, cliques, history, an optional schema)
#: takes kilobytes; parsing 16 MiB of JSON builds at most a few hundred MB of Python objects.
MAX_STRUCTURE_BYTES = 16 * 2**20
#: The deepest nesting of arrays and objects in ``model.json``: a saved model nests four deep (the schema's
#: columns); CPython's parser recurses per level and fails with ``RecursionError`` near 1000.
MAX_JSON_DEPTH = 32
#: The largest ``.npy`` header of a table (bytes): NumPy writes 128 for the shapes of a model's cliques.
MAX_NPY_HEADER = 4096
#: Bytes of zip bookkeeping allowed per member (local and central headers, zip64 extras, data descriptor)
#: and once per archive (end records and a comment of at most 64 kB).
ZIP_MEMBER_OVERHEAD = 512
ZIP_ARCHIVE_OVERHEAD = 2**16 + 512
_CHUNK = 2**20

# A JSON string literal (escapes included), written as an unrolled loop: matched in linear time.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPEN, _CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in the JSON ``text``, counted without recursion.

    Brackets inside strings do not count. Malformed text gets a number too (the parser then refuses it).

    Args:
        text: the JSON text.

    Returns:
        The depth: 0 for a scalar, 1 for ``[1, 2]``, 2 for ``{"a": [1]}``.

    Example:
        >>> json_depth('{"a": [1, "[[["], "b": {}}')
        2
    """
    stripped = _JSON_STRING.sub('""', text).encode("utf-8", "surrogatepass")
    depth = deepest = 0
    for start in range(0, len(stripped), _CHUNK):  # chunks: the running sums stay small
        b = np.frombuffer(stripped, np.uint8, count=min(_CHUNK, len(stripped) - start), offset=start)
        step = np.isin(b, _OPEN).astype(np.int64) - np.isin(b, _CLOSE)
        if step.any():
            running = depth + np.cumsum(step)
            deepest, depth = max(deepest, int(running.max())), int(running[-1])
    return deepest


def read_structure(path: str, where: str) -> object:
    """The parsed ``model.json`` at ``path``, refusing a file too large or nested too deep before parsing it.

    Args:
        path: the file.
        where: who reads, for messages (``"load_model"``).

    Returns:
        The parsed JSON value (NaN and Infinity allowed, as ``json.load`` allows them).

    Raises:
        ValueError: the file is over :data:`MAX_STRUCTURE_BYTES`, not UTF-8, nested over
            :data:`MAX_JSON_DEPTH` deep, or not valid JSON (the message names the file).
    """
    with open(path, "rb") as f:
        raw = f.read(MAX_STRUCTURE_BYTES + 1)  # never more than the cap, whatever the file's size
    if len(raw) > MAX_STRUCTURE_BYTES:
        raise ValueError(f"{where}: {path} is over {MAX_STRUCTURE_BYTES:,} bytes, the largest model.json read "
                         f"(a saved model's structure takes kilobytes): refused unread")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: {path} is corrupted (not valid JSON: not UTF-8 text: {e})") from e
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{where}: {path} is corrupted: its JSON nests {depth:,} levels deep, at most "
                         f"{MAX_JSON_DEPTH} allowed (a saved model nests 4 deep)")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError; so is an integer over 4300 digits
        raise ValueError(f"{where}: {path} is corrupted (not valid JSON: {type(e).__name__}: {e})") from e


def npz_size_cap(tables: list[tuple[str, tuple[int, ...]]], dtype: np.dtype) -> int:
    """The most bytes an NPZ archive of ``tables`` may take: their data, an ``.npy`` header and zip
    bookkeeping per member, and the archive's end records (compression only makes it smaller).

    Args:
        tables: ``(member name, shape)`` per table.
        dtype: the tables' dtype.

    Returns:
        The cap in bytes (a Python int).
    """
    per_member = MAX_NPY_HEADER + ZIP_MEMBER_OVERHEAD
    return sum(_cells(s) * dtype.itemsize + per_member + 2 * len(name) for name, s in tables) + ZIP_ARCHIVE_OVERHEAD


def read_npz_tables(blob: bytes, arrays_path: str, tables: list[tuple[str, tuple[int, ...]]], dtype: np.dtype,
                    where: str, describe) -> list[np.ndarray]:
    """Read the named tables of an NPZ archive, checking each member's declared sizes before decompressing it.

    Args:
        blob: the archive's bytes (already bounded by :func:`npz_size_cap` and digest-checked).
        arrays_path: the file, for messages.
        tables: ``(key, shape)`` per table, in order; the member is ``key + ".npy"`` (or ``key``).
        dtype: the dtype every table must have.
        where: who reads, for messages.
        describe: ``describe(i)`` names table ``i`` for messages (``"table clique_0 of clique ('a', 'b')"``).

    Returns:
        The tables, in order, each of its shape and ``dtype``.

    Raises:
        ValueError: the archive is unreadable, a table is missing, a member is encrypted or compressed with
            another method than stored or deflate, declares another size, shape or dtype than its clique
            implies, or its bytes do not match what it declares.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(blob))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise ValueError(f"{where}: {arrays_path} is not a readable NPZ archive ({type(e).__name__}: {e})") from e
    out = []
    with archive:
        members = {info.filename: info for info in archive.infolist()}
        for i, (key, shape) in enumerate(tables):
            info = members.get(f"{key}.npy", members.get(key))
            if info is None:
                raise ValueError(f"{where}: {arrays_path} lacks the {describe(i)}")
            what = f"{where}: {describe(i)} ({arrays_path}, member {info.filename})"
            try:
                out.append(_read_member(archive, info, shape, dtype, what))
            except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as e:
                raise ValueError(f"{what} is unreadable ({type(e).__name__}: {e})") from e
    return out


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, shape: tuple[int, ...], dtype: np.dtype,
                 what: str) -> np.ndarray:
    data_bytes = _cells(shape) * dtype.itemsize
    if info.flag_bits & 0x1:
        raise ValueError(f"{what} is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        # numpy writes stored (savez) or deflate (savez_compressed) members; other decompressors are not
        # bounded per read by zipfile.
        raise ValueError(f"{what} is compressed with zip method {info.compress_type}; expected stored or deflate")
    if info.file_size > data_bytes + MAX_NPY_HEADER:
        raise ValueError(f"{what} declares {info.file_size:,} bytes uncompressed; its shape {shape} of {dtype.name} "
                         f"takes {data_bytes:,} bytes plus an .npy header of at most {MAX_NPY_HEADER:,}: refused unread")
    with archive.open(info) as fp:
        found_shape, fortran, found_dtype, header_bytes = _read_npy_header(fp, what)
        if tuple(found_shape) != tuple(shape):
            raise ValueError(f"{what} has shape {tuple(found_shape)}, expected {tuple(shape)}")
        if found_dtype != dtype:
            raise ValueError(f"{what} has dtype {found_dtype}, field 'dtype' says {dtype.name}")
        if info.file_size != header_bytes + data_bytes:
            raise ValueError(f"{what} declares {info.file_size:,} bytes; its {header_bytes}-byte header and "
                             f"{data_bytes:,} bytes of data take {header_bytes + data_bytes:,}")
        flat = np.empty(_cells(shape), dtype)
        view = memoryview(flat).cast("B")
        filled = 0
        while filled < data_bytes:  # bounded reads, never past the declared data
            n = fp.readinto(view[filled:filled + _CHUNK])
            if not n:
                raise ValueError(f"{what} ends after {filled:,} of its {data_bytes:,} bytes of data")
            filled += n
        fp.read(1)  # at the declared end: zipfile checks the member's CRC here
    return flat.reshape(shape, order="F" if fortran else "C")


def _read_npy_header(fp, what: str) -> tuple[tuple, bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, header bytes)`` of the ``.npy`` stream ``fp``.

    NumPy's header readers read the length the header declares (up to 4 GiB in format 2.0) before comparing
    it with their limit: the length is checked here first, and only the bounded header is handed to them.
    """
    magic = fp.read(8)
    if len(magic) < 8 or magic[:6] != npy_format.MAGIC_PREFIX or (magic[6], magic[7]) not in ((1, 0), (2, 0)):
        raise ValueError(f"{what} is not an .npy array of format 1.0 or 2.0 (it starts with {magic[:8]!r})")
    width = 2 if magic[6] == 1 else 4
    length_field = fp.read(width)
    if len(length_field) < width:
        raise ValueError(f"{what} ends inside its .npy header")
    length = int.from_bytes(length_field, "little")
    if length > MAX_NPY_HEADER:
        raise ValueError(f"{what} declares an .npy header of {length:,} bytes, at most {MAX_NPY_HEADER:,} allowed")
    text = fp.read(length)
    if len(text) < length:
        raise ValueError(f"{what} ends inside its .npy header")
    parse = npy_format.read_array_header_1_0 if width == 2 else npy_format.read_array_header_2_0
    try:
        shape, fortran, dtype = parse(io.BytesIO(length_field + text), max_header_size=MAX_NPY_HEADER)
    except (ValueError, SyntaxError, TypeError) as e:
        raise ValueError(f"{what} has no valid .npy header ({e})") from e
    return shape, fortran, dtype, 8 + width + length


def _cells(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n
