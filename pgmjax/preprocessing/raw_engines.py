"""Raw tables on the out-of-core engines: private preprocessing and encoding computed by Polars or Dask.

:func:`open_raw` opens a raw CSV (text categories, numbers, dates, empty fields) with Polars or Dask and
returns a table that answers the three aggregates :func:`pgmjax.preprocessing.preprocess.private_schema` reads
(:mod:`pgmjax.preprocessing.raw_aggregates`: class counts, value counts, rank counts) and :meth:`~PolarsRaw.encode`,
which applies a schema lazily and returns a :class:`~pgmjax.data.engines.FrameDataset` counted as before.

What reaches the driver: the record count; per column, the class counts of the kind vote
(:data:`~pgmjax.preprocessing.private_format.FIELD_CLASSES`); for a text column, its distinct stripped values with
their counts (category discovery, as in memory: every distinct value gets noise); for a binned column, histograms
over public thresholds (range cells, candidate edges, clipping windows: a few thousand counts each); for a declared
schema, per column the number of values that do not fit it. The records never pass through pandas or NumPy on the
driver. Polars parses the fields with its own expressions (:mod:`pgmjax.preprocessing.polars_fields`), written to
match :func:`pgmjax.data.raw_fields.column_values` and :func:`pgmjax.preprocessing.private_format.field_classes`
exactly; Dask's workers call those very functions on their partitions. Counts are integers, so the schema, the
ledger and every release made from the same key equal the in-memory ones. The CSV itself is read by the rule of
:mod:`pgmjax.data.raw_csv` on both engines (a faulty record is missing, never a refusal): Dask parses each block
of whole lines with its reader, Polars parses natively and blanks what one streamed pass lists.

Example:
    >>> import tempfile, os
    >>> from pgmjax.privacy import Accountant
    >>> from pgmjax.preprocessing.preprocess import private_schema
    >>> path = os.path.join(tempfile.mkdtemp(), "raw.csv")
    >>> rows = [f"{'ab'[i % 2]},{i % 50}" for i in range(400)]
    >>> _ = open(path, "w").write("c,x\\n" + "\\n".join(rows) + "\\n")
    >>> table = open_raw(path, engine="polars")
    >>> out = private_schema(table, Accountant(epsilon=4.0), jax.random.key(0), bins=4)
    >>> data = table.encode(out.schema)
    >>> out.schema.columns["c"].categories, len(data), float(data.marginal(("c",)).sum())
    (('', 'a', 'b'), 400, 400.0)
"""

from __future__ import annotations

import os

import numpy as np

from ..data.engines import FrameDataset, dask_client, need_engine
from ..data.raw_csv import REPLACEMENT, header_of, parse_block, raw_header, record_faults
from ..data.raw_fields import column_values
from ..data.schema_columns import NumericColumn, SchemaError, SchemaValueError, as_text
from .polars_fields import parse
from .private_format import FIELD_CLASSES, class_counts
from .ranks import CountedRanks
from .raw_aggregates import merge_text_counts, text_counts, threshold_histogram

__all__ = ["open_raw", "PolarsRaw", "DaskRaw"]



def open_raw(path: str | os.PathLike, *, engine: str = "polars", scheduler=None) -> "PolarsRaw | DaskRaw":
    """Open a raw CSV (every field text, empty fields ``""``, as :func:`pgmjax.read_raw_csv` reads it) with an engine.

    Args:
        path: the CSV file (``.csv``, ``.csv.gz``); with Dask on a cluster, a path every worker can read.
        engine: ``"polars"`` or ``"dask"``.
        scheduler: Dask only: a scheduler address, a ``distributed.Client``, or None.

    Returns:
        A :class:`PolarsRaw` or :class:`DaskRaw`.

    Raises:
        ImportError: the engine's packages are missing.
        SchemaError: an empty file, a header that is not UTF-8 text, duplicate column names (the words of
            :func:`pgmjax.read_raw_csv`). No record can make the read fail (:mod:`pgmjax.data.raw_csv`).
        FileNotFoundError: no such file.
    """
    need_engine(engine)
    if scheduler is not None and engine != "dask":
        raise ValueError("open_raw: scheduler applies to engine='dask'")
    path = os.fspath(path)
    if scheduler is None and not os.path.exists(path):
        raise FileNotFoundError(f"data file not found: {path}")
    names = raw_header(path) if os.path.exists(path) else None  # else: a path only the cluster's workers read
    if engine == "polars":
        return PolarsRaw(path, names)
    return DaskRaw(path, dask_client(scheduler), names)


def _check_fit(schema, bad: dict) -> None:
    """Raise for the first column with values that do not fit a declared schema (counts from the engine)."""
    for name, (missing, outside, unknown) in bad.items():
        col = schema.columns[name]
        if missing:
            raise SchemaValueError(
                f"column {name!r}: {missing} value(s) missing or not a number; add \"missing\": true to the column",
                f"column {name!r}: a value is missing or not a number; add \"missing\": true to the column")
        if outside:
            lo, hi = col.edges[0], col.edges[-1]
            raise SchemaValueError(
                f"column {name!r}: {outside} value(s) outside the range of its bins [{lo:g}, {hi:g}]; widen the bins or "
                "add \"clip\": true",
                f"column {name!r}: a value is outside the range of its bins [{lo:g}, {hi:g}]; widen the bins or add "
                "\"clip\": true")
        if unknown:
            raise SchemaValueError(
                f"column {name!r}: {unknown} value(s) are not one of its {len(col.categories)} categories; add them to "
                "the schema's categories (or an \"other\" category)",
                f"column {name!r}: a value is not one of its {len(col.categories)} categories; add it to the schema's "
                "categories (or an \"other\" category)")


def _strict(schema) -> list[str]:
    """The columns where a value can fail to fit (no missing code, no clipping, or no other code)."""
    return [n for n, c in schema.columns.items()
            if (c.other is None if not isinstance(c, NumericColumn) else not (c.missing and c.clip))]


def _check_columns(names: list[str], schema) -> None:
    missing = [n for n in schema.columns if n not in names]
    if missing:
        raise SchemaError(f"columns {missing} of the schema are missing from the data; the data has {names}")


# Polars ---------------------------------------------------------------------------------------------------------

class PolarsRaw:
    """A raw CSV as a Polars lazy frame of text columns, read by the streaming engine.

    Args:
        path: the CSV file.
    """

    engine = "polars"

    def __init__(self, path: str, names: list[str] | None = None):
        import polars as pl

        self.path = path
        self.names = raw_header(path) if names is None else list(names)
        # Polars parses; the rule of pgmjax.data.raw_csv is applied to what it reads: bytes that are not UTF-8
        # become U+FFFD (utf8-lossy) and their field missing; blank lines and the records the csv module reads
        # as missing (ragged: truncate_ragged_lines keeps them as one row each) come from one streamed pass.
        frame = pl.scan_csv(path, infer_schema=False, empty_string_is_null=False, encoding="utf8-lossy",
                            truncate_ragged_lines=True, new_columns=self.names)
        blank, faulty = record_faults(path, len(self.names))
        row = "_row"
        while row in self.names:
            row += "_"
        if len(blank) or len(faulty):
            frame = frame.with_row_index(row)
        if len(blank):
            frame = frame.filter(~pl.col(row).is_in(blank.tolist()))
        exprs = []
        for n in self.names:
            unreadable = pl.col(n).str.contains(REPLACEMENT, literal=True)
            if len(faulty):
                unreadable = unreadable | pl.col(row).is_in(faulty.tolist())
            exprs.append(pl.when(unreadable).then(pl.lit("")).otherwise(pl.col(n)).alias(n))
        self.frame = frame.select(exprs)
        self._n = None
        self._classes = None

    def _collect(self, frames):
        import polars as pl

        return pl.collect_all(frames, engine="streaming", optimizations=pl.QueryOptFlags(comm_subplan_elim=False))

    def __len__(self) -> int:
        import polars as pl

        if self._n is None:
            self._n = int(self._collect([self.frame.select(pl.len())])[0].item())
        return self._n

    def parsed(self, wants: dict):
        """The lazy frame of :func:`pgmjax.preprocessing.polars_fields.parse` (``out: (column, what)``); nothing is read
        until the engine collects an aggregate of it."""
        return parse(self.frame, wants)

    # The aggregates -------------------------------------------------------------------------------------------------
    def class_counts(self, name: str) -> np.ndarray:
        """The column's class counts; the first call counts every column in one pass (the kind vote asks for all)."""
        import polars as pl

        if self._classes is None:
            wants = {str(i): (n, "class") for i, n in enumerate(self.names)}
            m = len(FIELD_CLASSES)
            row = self._collect([self.parsed(wants).select(
                [(pl.col(str(i)) == k).sum().alias(f"{i}:{k}") for i in range(len(self.names)) for k in range(m)])])[0].row(0)
            self._classes = {n: np.asarray(row[m * i:m * i + m], np.int64) for i, n in enumerate(self.names)}
        return self._classes[name]

    def value_counts(self, name: str) -> tuple[list[str], list[int]]:
        import polars as pl

        t = self._collect([self.parsed({"v": (name, "text")}).group_by("v").agg(pl.len().alias("n"))])[0]
        return merge_text_counts([_series(t["v"].to_list(), t["n"].to_list())])

    def ranks(self, name: str, kind: str) -> CountedRanks:
        return CountedRanks(lambda t: self._below(name, kind, t), None)

    def _below(self, name: str, kind: str, thresholds: np.ndarray) -> tuple[np.ndarray, int]:
        import polars as pl

        t = pl.Series(np.asarray(thresholds, np.float64) + 0.0)
        q = (self.parsed({"v": (name, kind)}).drop_nulls()
             .select(pl.lit(t).search_sorted(pl.col("v"), side="right").alias("r")).group_by("r").agg(pl.len().alias("n")))
        out = self._collect([q])[0]
        hist = np.zeros(len(t) + 1, np.int64)
        hist[out["r"].to_numpy().astype(np.int64)] = out["n"].to_numpy()
        return np.cumsum(hist)[:-1], int(hist.sum())

    # Encoding ---------------------------------------------------------------------------------------------------------
    @staticmethod
    def _code(col, v):
        """The code of column ``col`` from its parsed value ``v`` (stripped text or number), and its misfit counts."""
        import polars as pl

        if not isinstance(col, NumericColumn):
            other = len(col.categories) if col.other is not None else -1
            # An Enum cast (unknown text: null) streams; replace_strict made Polars hold the column in memory.
            code = (v.cast(pl.Enum(list(col.categories)), strict=False).to_physical().cast(pl.Int64).fill_null(other)
                    if col.categories else pl.lit(other, pl.Int64) + v.str.len_bytes().cast(pl.Int64) * 0)
            return code, [pl.lit(0), pl.lit(0), (code < 0).sum()]
        lo, hi = float(col.edges[0]), float(col.edges[-1])
        idx = pl.lit(pl.Series(col.edges + 0.0)).search_sorted(v.clip(lo, hi) if col.clip else v, side="right")
        code = pl.when(v.is_null()).then(col.bins).otherwise(pl.min_horizontal(idx.cast(pl.Int64) - 1, pl.lit(col.bins - 1)))
        return code, [v.is_null().sum() if not col.missing else pl.lit(0),
                      ((v < lo) | (v > hi)).sum() if not col.clip else pl.lit(0), pl.lit(0)]

    def encode(self, schema) -> FrameDataset:
        """The table discretised by ``schema`` (:meth:`pgmjax.Schema.encode` with ``unreadable="missing"``), lazily;
        values that do not fit a declared schema are refused first (their counts computed by the engine).

        Raises:
            SchemaError: a schema column is missing; SchemaValueError: a value does not fit (the column named).
        """
        import polars as pl

        from ..data.frame_backends import PolarsBackend

        _check_columns(self.names, schema)
        wants = {n: (n, col.read_as if isinstance(col, NumericColumn) else "text") for n, col in schema.columns.items()}
        frame = self.parsed(wants)
        codes = {n: self._code(c, pl.col(n)) for n, c in schema.columns.items()}
        strict = _strict(schema)
        if strict:
            exprs = [e.alias(f"{i}:{j}") for i, n in enumerate(strict) for j, e in enumerate(codes[n][1])]
            row = self._collect([frame.select(exprs)])[0].row(0)
            _check_fit(schema, {n: tuple(int(v) for v in row[3 * i:3 * i + 3]) for i, n in enumerate(strict)})
        dtype = pl.Int64 if max(schema.domain.shape) >= 2**31 else pl.Int32
        frame = frame.select([codes[n][0].cast(dtype).alias(n) for n in schema.columns])
        return FrameDataset(PolarsBackend(frame, True), schema.domain, "polars", source=self.path, records=len(self))


def _series(labels, counts):
    import pandas as pd

    return pd.Series(np.asarray(counts, np.int64), index=pd.Index(labels, dtype=object))


# Dask --------------------------------------------------------------------------------------------------------------

def _partition_below(part, name, kind, thresholds):
    return threshold_histogram(part[name], kind, thresholds)


def _partition_fit(part, schema, names):
    out = []
    for n in names:
        col = schema.columns[n]
        if isinstance(col, NumericColumn):
            x = column_values(part[n], col.read_as)
            lo, hi = col.edges[0], col.edges[-1]
            out.append([0 if col.missing else int(np.isnan(x).sum()), 0 if col.clip else int(((x < lo) | (x > hi)).sum()), 0])
        else:
            text = as_text(part[n]).str.strip().to_numpy(dtype=object)
            out.append([0, 0, int((~np.isin(text, np.asarray(col.categories, dtype=object))).sum())])
    return np.asarray(out, np.int64).reshape(len(names), 3)


def _partition_codes(part, schema, dtype):
    import pandas as pd

    if len(part) == 0:
        return pd.DataFrame({n: pd.Series(dtype=dtype) for n in schema.columns}, index=part.index)
    records = schema.encode(part, unreadable="missing").records.astype(dtype)
    return pd.DataFrame(records, columns=list(schema.columns), index=part.index)


class DaskRaw:
    """A raw CSV as a Dask dataframe of text columns; the workers compute the in-memory aggregates of their
    partitions (:mod:`pgmjax.preprocessing.raw_aggregates`) and only the sums come back.

    Args:
        path: the CSV file (a path every worker can read).
        client: a ``distributed.Client``, or None for Dask's default scheduler.
        names: the header's names (None: read from the file's first bytes).
        blocksize: bytes per block (each a partition, parsed on a worker); a gzipped file is one block.
    """

    engine = "dask"

    def __init__(self, path: str, client=None, names: list[str] | None = None, *, blocksize: int | str = "64MB"):
        import dask
        import dask.dataframe as dd
        import pandas as pd
        from dask.bytes import read_bytes

        self.path = path
        self.client = client
        gz = path.endswith(".gz")
        # Whole lines per block, each parsed on its worker by the in-memory reader (pgmjax.data.raw_csv), so that
        # Dask reads every record as pandas does; a gzipped file is one block (it cannot be split).
        sample, blocks = read_bytes(path, delimiter=b"\n", blocksize=None if gz else blocksize,
                                    sample="1MiB" if names is None else False, compression="gzip" if gz else None)
        self.names = header_of(sample, path) if names is None else list(names)
        parts = [dask.delayed(parse_block)(b, self.names, i == 0) for i, b in enumerate(blocks[0])]
        meta = pd.DataFrame({i: pd.Series(dtype=str) for i in range(len(self.names))})
        meta.columns = pd.Index(self.names, dtype=object)
        self.frame = dd.from_delayed(parts, meta=meta, verify_meta=False)
        self._n = None
        self._classes = None

    def _sum(self, fn, *args):
        """``fn(partition, *args)`` on every partition (an int or an array), summed."""
        import dask

        parts = [dask.delayed(fn)(p, *args) for p in self.frame.to_delayed()]
        done = self.client.gather(self.client.compute(parts)) if self.client is not None else dask.compute(*parts)
        return sum(done[1:], done[0])

    def __len__(self) -> int:
        if self._n is None:
            self._n = int(self._sum(len))
        return self._n

    def class_counts(self, name: str) -> np.ndarray:
        """As :meth:`PolarsRaw.class_counts` (every column in one pass over the partitions)."""
        if self._classes is None:
            names = list(self.names)
            table = self._sum(lambda p: np.stack([class_counts(p[n]) for n in names]))
            self._classes = {n: np.asarray(table[i], np.int64) for i, n in enumerate(names)}
        return self._classes[name]

    def value_counts(self, name: str) -> tuple[list[str], list[int]]:
        import dask

        parts = [dask.delayed(lambda p: text_counts(p[name]))(p) for p in self.frame.to_delayed()]
        done = self.client.gather(self.client.compute(parts)) if self.client is not None else dask.compute(*parts)
        return merge_text_counts(list(done))

    def ranks(self, name: str, kind: str) -> CountedRanks:
        def count(t):
            hist = self._sum(_partition_below, name, kind, np.asarray(t, np.float64))
            return np.cumsum(hist)[:-1], int(hist.sum())

        return CountedRanks(count, None)

    def encode(self, schema) -> FrameDataset:
        """As :meth:`PolarsRaw.encode`: each partition encoded by :meth:`pgmjax.Schema.encode` on its worker."""
        import pandas as pd

        from ..data.frame_backends import DaskBackend

        _check_columns(self.names, schema)
        strict = _strict(schema)
        if strict:
            bad = self._sum(_partition_fit, schema, strict)
            _check_fit(schema, {n: tuple(int(v) for v in bad[i]) for i, n in enumerate(strict)})
        dtype = "int64" if max(schema.domain.shape) >= 2**31 else "int32"
        meta = pd.DataFrame({n: pd.Series(dtype=dtype) for n in schema.columns})
        frame = self.frame.map_partitions(_partition_codes, schema, dtype, meta=meta)
        return FrameDataset(DaskBackend(frame, self.client, True), schema.domain, "dask", source=self.path,
                            records=len(self))
