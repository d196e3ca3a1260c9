"""Tables beyond one machine's memory: a :class:`~pgmjax.Dataset` counted by Polars or Dask.

Every mechanism reads the private table only through its marginals (counts of cliques' cells), its record
count and its domain. :class:`FrameDataset` keeps the records with an out-of-core engine and answers those
questions with the engine's own aggregates:

* ``engine="polars"``: a Polars lazy frame (``scan_parquet`` / ``scan_csv``) collected by the streaming
  engine, so a table larger than memory is read in batches on one machine;
* ``engine="dask"``: a Dask dataframe whose partitions are read by the workers of a ``distributed`` cluster
  (``scheduler="tcp://host:8786"``) or by Dask's local scheduler.

What reaches the driver is small: one row of per-column aggregates when the table is opened (record count,
nulls, unparsable fields, non-finite and fractional values, minimum and maximum of every attribute column),
then, for every clique counted, the non-empty cells' counts (at most the clique's table size). The records
never pass through pandas or NumPy on the driver. Counts are integers, so the tables are exactly those of the
in-memory :class:`~pgmjax.Dataset` of the same file, and so are the releases made from them with the same key.

Bad codes are refused when the table is opened, with the in-memory messages (:class:`DataValueError`'s
``public`` text names only the column and the expected range), computed from the aggregates.

The engines are optional: ``pip install pgmjax[large]`` (polars, dask[dataframe], distributed, pyarrow).

Example:
    >>> import tempfile, os, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(path, "w").write("a,b\\n0,1\\n1,2\\n1,2\\n")
    >>> data = open_dataset(path, {"a": 2, "b": 3}, engine="polars")
    >>> len(data), data.marginal(("b", "a")).tolist()
    (3, [[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

import numpy as np

from .dataset import Dataset, DataValueError, check_field_counts, project_table, read_json_file, unreadable_csv
from .domain import Clique, CliqueLike, Domain

__all__ = ["ENGINES", "FrameDataset", "open_dataset", "check_stats", "need_engine", "dask_client"]

#: The out-of-core engines (``"memory"`` is the in-memory :class:`~pgmjax.Dataset`).
ENGINES = ("polars", "dask")

_MODULES = {"polars": ("polars", "pyarrow"), "dask": ("dask.dataframe", "distributed", "pyarrow")}


def need_engine(engine: str) -> None:
    """Import the engine's packages, or raise an ImportError naming the extra that installs them.

    Example:
        >>> need_engine("spark")
        Traceback (most recent call last):
        ...
        ValueError: engine must be one of ('polars', 'dask'), got 'spark'
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    for name in _MODULES[engine]:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise ImportError(f"the {engine} engine needs the package {name.split('.')[0]!r}, which is not installed: "
                              f"pip install 'pgmjax[large]'") from e


def check_stats(name: str, size: int, s: dict) -> None:
    """Refuse a column from its aggregate, with the in-memory :class:`~pgmjax.Dataset`'s public messages.

    The aggregate ``s`` has ``nulls`` (empty fields), ``unparsable`` (non-empty text that is no number),
    ``nonfinite``, ``fractional`` (finite values with a fractional part), ``min`` and ``max`` (of the finite
    values). A column holding text that is no number is refused as such (pandas reads it as text, and every
    value must then be an integer code); otherwise a missing or non-finite value first, then a fractional one,
    then a value outside ``[0, size)``, as the in-memory checks order them.

    Args:
        name: the column.
        size: the attribute's number of values.
        s: the aggregate.

    Raises:
        DataValueError: ``str(e)`` gives the counts and the extreme values (private: for the data holder);
            ``e.public`` names only the column and what was expected.

    Example:
        >>> stats = {"nulls": 0, "unparsable": 0, "nonfinite": 0, "fractional": 0, "min": 0.0, "max": 7.0}
        >>> try:
        ...     check_stats("b", 3, stats)
        ... except DataValueError as e:
        ...     print(e.public)
        Dataset: column 'b' has a value outside [0, 3)
    """
    if s["unparsable"]:
        raise DataValueError(
            f"Dataset: column {name!r} must hold integer codes; {s['unparsable']} value(s) are not numbers",
            f"Dataset: column {name!r} must hold integer codes in [0, {size}); it has a value that is not a number",
        )
    if s["nulls"] or s["nonfinite"]:
        raise DataValueError(
            f"Dataset: column {name!r} has {s['nulls'] + s['nonfinite']} missing or not finite value(s)",
            f"Dataset: column {name!r} has a missing or not finite value (integer codes expected)",
        )
    if s["fractional"]:
        raise DataValueError(
            f"Dataset: column {name!r} must hold integer codes; {s['fractional']} value(s) have a fractional part",
            f"Dataset: column {name!r} must hold integer codes; it has a value with a fractional part",
        )
    lo, hi = s["min"], s["max"]
    if lo is not None and (lo < 0 or hi >= size):
        raise DataValueError(
            f"Dataset: column {name!r} has values from {lo:g} to {hi:g}, outside [0, {size})",
            f"Dataset: column {name!r} has a value outside [0, {size})",
        )


def _backend(engine: str):
    from . import frame_backends

    return frame_backends.PolarsBackend if engine == "polars" else frame_backends.DaskBackend


def dask_client(scheduler):
    """A ``distributed.Client`` for an address, the client given, or None (Dask's default scheduler)."""
    if scheduler is None or not isinstance(scheduler, str):
        return scheduler
    from distributed import Client

    return Client(scheduler)


def is_csv(path: str) -> bool:
    """Whether ``path`` names CSV text (``.csv``, ``.csv.gz``, ``.txt``); anything else is read as Parquet."""
    p = str(path).lower()
    return p.endswith((".csv", ".csv.gz", ".txt", ".tsv"))


def open_dataset(path: str | os.PathLike, domain: Domain | dict | str | os.PathLike, *, engine: str = "polars",
                 scheduler=None) -> "FrameDataset":
    """Open an integer-coded CSV or Parquet table with an out-of-core engine; checked, not loaded.

    Args:
        path: a CSV file (``.csv``, ``.csv.gz``) or a Parquet file, folder or glob (``data/*.parquet``); with
            Dask on a cluster, a path that every worker can read (a shared file system or object store).
        domain: the :class:`~pgmjax.Domain`, a mapping name -> size, or a domain JSON file; columns not in it
            are not read.
        engine: ``"polars"`` or ``"dask"``.
        scheduler: Dask only: a scheduler address (``"tcp://10.0.0.1:8786"``), a ``distributed.Client``,
            or None for Dask's default (the current client, else local threads).

    Returns:
        A :class:`FrameDataset`.

    Raises:
        ImportError: the engine's packages are missing (``pip install 'pgmjax[large]'``).
        DataValueError: a ragged CSV line, or a column that is not integer codes in ``[0, size)``
            (the in-memory messages).
        ValueError: missing columns, an empty table.
    """
    need_engine(engine)
    if scheduler is not None and engine != "dask":
        raise ValueError("open_dataset: scheduler applies to engine='dask'")
    if isinstance(domain, (str, os.PathLike)):
        raw = read_json_file(domain, "domain file", "attribute names")
        if not isinstance(raw, dict):
            raise ValueError(f"domain file {domain} must hold a JSON object attribute -> size")
        domain = raw
    if not isinstance(domain, Domain):
        domain = Domain(domain)
    if len(domain) == 0:
        raise ValueError("Dataset: the domain has no attributes")
    path = os.fspath(path)
    csv = is_csv(path)
    if csv and os.path.exists(path):
        check_field_counts(path)  # streamed once: a ragged line would be read as other records
    backend = _backend(engine)
    try:
        have = _header(path, engine, csv)
        missing = [a for a in domain.attributes if a not in have]
        if missing:
            raise ValueError(f"Dataset: columns {missing} of the domain are missing from the data; data has {have}")
        if engine == "dask":
            raw = backend.read(path, list(domain.attributes), csv, dask_client(scheduler))
        else:
            raw = backend.read(path, list(domain.attributes), csv)
    except ValueError as e:
        if str(e).startswith("Dataset: columns"):
            raise
        raise _unreadable(path, csv, e) from None
    except (FileNotFoundError, OSError):
        raise FileNotFoundError(f"data file not found or unreadable: {path}") from None
    except Exception as e:  # noqa: BLE001 (the engines' own errors may quote a line or bytes of the private file)
        raise _unreadable(path, csv, e) from None
    return FrameDataset(raw, domain, engine, source=path)


def _unreadable(path: str, csv: bool, e: Exception) -> DataValueError:
    return DataValueError(f"data file {path} could not be read: {type(e).__name__}: {e}",
                          f"data file {unreadable_csv(path, e) if csv else path + ' could not be read as Parquet'}")


def _header(path: str, engine: str, csv: bool) -> list[str]:
    """The table's column names (a CSV header line, or the Parquet schema), read by the engine."""
    if engine == "polars":
        import polars as pl

        lf = pl.scan_csv(path) if csv else pl.scan_parquet(path)
        return list(lf.collect_schema().names())
    import dask.dataframe as dd

    return [str(c) for c in (dd.read_csv(path, dtype=str) if csv else dd.read_parquet(path)).columns]


class FrameDataset(Dataset):
    """A :class:`~pgmjax.Dataset` whose records stay with Polars or Dask; only count tables come back.

    Built by :func:`open_dataset`. It is a ``Dataset`` for every mechanism: ``domain``, ``len()``,
    :meth:`marginal`, :meth:`marginals`, :meth:`cell_counts`, :meth:`recode` and :meth:`project` behave as
    the in-memory ones and give equal tables. ``records`` and ``df`` (the whole table on the driver) are
    refused: a mechanism that releases records one by one (randomized response) needs the in-memory table.

    Args:
        backend: a :class:`~pgmjax.data.frame_backends.PolarsBackend` or
            :class:`~pgmjax.data.frame_backends.DaskBackend` over the domain's columns.
        domain: the domain.
        engine: ``"polars"`` or ``"dask"``.
        source: the file it was read from (for messages).
    """

    def __init__(self, backend, domain: Domain, engine: str, *, source: str | None = None, records: int | None = None):
        self.domain = domain
        self.engine = engine
        self.source = source
        if not backend.codes:
            try:
                stats = backend.stats(list(domain.attributes))
            except Exception as e:  # noqa: BLE001 (an engine's read error may quote a line or bytes of the file)
                raise _unreadable(str(source), is_csv(str(source)), e) from None
            records = stats[domain.attributes[0]]["records"] if stats else 0
            if records == 0:
                raise ValueError("Dataset: the data has no records")
            for a in domain.attributes:
                check_stats(a, domain[a], stats[a])
            backend = backend.as_codes(list(domain.attributes), wide=max(domain.shape) >= 2**31)
        self._backend = backend
        self._n = int(records)

    # Refused: the records stay with the engine --------------------------------------------------------
    @property
    def records(self) -> np.ndarray:
        raise TypeError(f"the records of a {self.engine} table stay with the engine (only counts reach the driver): "
                        "this use needs the in-memory table (pgmjax.Dataset; the command line's --engine memory)")

    @property
    def df(self):
        return self.records

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"FrameDataset({self.engine}, {self._n} records, {self.domain})"

    # Lazy tables ---------------------------------------------------------------------------------------
    def project(self, clique: CliqueLike) -> "FrameDataset":
        clique = self.domain.check_clique(clique)
        return FrameDataset(self._backend.select(list(clique)), self.domain.project(clique), self.engine,
                            source=self.source, records=self._n)

    def recode(self, mapping, domain: Domain) -> "FrameDataset":
        """Each attribute ``a`` in ``mapping`` mapped through ``mapping[a]`` (a code -> new code array), over
        ``domain`` (lazy: computed by the engine with the next count). See :meth:`pgmjax.Dataset.recode`."""
        return FrameDataset(self._backend.recode(dict(mapping)), domain, self.engine, source=self.source,
                            records=self._n)

    # Counting ------------------------------------------------------------------------------------------
    def cell_counts(self, clique: CliqueLike) -> tuple[np.ndarray, np.ndarray]:
        """``(flat cell indices, counts)`` of the clique's non-empty cells, sorted by cell (the engine's group-by)."""
        clique = self.domain.check_clique(clique)
        return self._count([clique])[0]

    def _count(self, cliques: list[Clique]) -> list[tuple[np.ndarray, np.ndarray]]:
        out = self._backend.counts([tuple(c) for c in cliques], [self.domain.shape_of(c) for c in cliques])
        result = []
        for cells, n in out:
            order = np.argsort(cells, kind="stable")
            result.append((cells[order].astype(np.int64), n[order].astype(np.int64)))
        return result

    def _table(self, clique: Clique, cells: np.ndarray, n: np.ndarray) -> np.ndarray:
        shape = self.domain.shape_of(clique)
        table = np.zeros(int(np.prod(shape)), np.float64)
        table[cells] = n
        return table.reshape(shape)

    def marginal(self, clique: CliqueLike) -> np.ndarray:
        """Counts of every cell of ``clique``'s table, axes in the clique's order (float64)."""
        clique = self.domain.check_clique(clique)
        if not clique:
            return np.array(float(self._n))
        return self._table(clique, *self._count([clique])[0])

    def marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        """Marginals of many cliques: the maximal ones counted by the engine in one batch of group-bys,
        the others summed from them (exact: the counts are integers)."""
        cliques = [self.domain.check_clique(c) for c in cliques]
        distinct = list(dict.fromkeys(c for c in cliques if c))
        counted = [c for c in distinct if not any(set(c) < set(o) and self.domain.size(o) < self._n for o in distinct)]
        tables = {c: self._table(c, *t) for c, t in zip(counted, self._count(counted) if counted else [])}
        out = []
        for c in cliques:
            if not c:
                out.append(np.array(float(self._n)))
            elif c in tables:
                out.append(tables[c])
            else:
                source = min((s for s in counted if set(c) < set(s)), key=self.domain.size)
                tables[c] = project_table(tables[source], source, c)
                out.append(tables[c])
        return out
