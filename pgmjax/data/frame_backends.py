"""The two out-of-core engines behind :class:`pgmjax.data.engines.FrameDataset`: Polars and Dask.

Each backend holds the table as its engine's own lazy object (a Polars ``LazyFrame`` read by the streaming
engine, or a Dask dataframe whose partitions live on the workers) and answers four questions, each one
aggregate computed by the engine:

* :meth:`stats`: per attribute column, the record count, nulls, unparsable texts, non-finite values, values with
  a fractional part, the minimum and the maximum (what :func:`pgmjax.data.engines.check_stats` needs to refuse
  bad codes with the in-memory :class:`~pgmjax.Dataset`'s messages);
* :meth:`counts`: for each clique, the group-by count of its flat cell index (the only tables that come back);
* :meth:`recode` / :meth:`select`: a new lazy table (columns mapped through small lookup arrays, or a subset).

Neither backend turns records into a pandas frame or a NumPy array on the driver; Dask's workers hold pandas
partitions, which is the engine's own representation.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PolarsBackend", "DaskBackend", "STAT_FIELDS"]

#: The per-column aggregate computed by :meth:`PolarsBackend.stats` / :meth:`DaskBackend.stats`.
STAT_FIELDS = ("records", "nulls", "unparsable", "nonfinite", "fractional", "min", "max")


def _flat_strides(shape) -> list[int]:
    strides, step = [], 1
    for n in reversed(list(shape)):
        strides.append(step)
        step *= int(n)
    return strides[::-1]


class PolarsBackend:
    """A Polars ``LazyFrame`` of raw columns (``codes=False``) or of validated int64 codes (``codes=True``).

    Args:
        frame: the lazy frame.
        codes: whether every column already holds checked integer codes.
    """

    def __init__(self, frame, codes: bool = False):
        self.frame = frame
        self.codes = codes

    @classmethod
    def read(cls, path: str, columns: list[str], csv: bool) -> "PolarsBackend":
        import polars as pl

        # CSV fields read as text and parsed by the checks (as Dask does): a type inferred from the first lines
        # would make a later word or decimal a parse error quoting the private value.
        lf = pl.scan_csv(path, infer_schema=False) if csv else pl.scan_parquet(path)
        return cls(lf.select(columns))

    def columns(self) -> list[str]:
        return list(self.frame.collect_schema().names())

    def _collect(self, frames):
        import polars as pl

        # No common-subplan elimination: with it Polars materialises the scan the queries share (the whole table
        # in memory: 6.4 GB for 100 million rows of 16 int32 codes); without it each query streams the columns
        # it reads (Parquet is columnar: a pair's marginal reads two).
        return pl.collect_all(frames, engine="streaming", optimizations=pl.QueryOptFlags(comm_subplan_elim=False))

    def _numeric(self, name: str):
        """``(expression of the column's values, kind)``: ``"int"`` (integers or booleans, as they are), ``"float"``
        or ``"text"`` (both as float64; text that is no number is null)."""
        import polars as pl

        dtype = self.frame.collect_schema()[name]
        col = pl.col(name)
        if dtype == pl.String:
            return col.str.strip_chars().cast(pl.Float64, strict=False), "text"
        if dtype == pl.Boolean or dtype.is_integer():
            return col, "int"
        if not dtype.is_numeric():
            raise TypeError(f"column {name!r} has type {dtype}, not numbers or text")
        return col.cast(pl.Float64), "float"

    def stats(self, names: list[str]) -> dict[str, dict]:
        import polars as pl

        exprs = [pl.len().alias("__records")]
        for i, name in enumerate(names):
            x, kind = self._numeric(name)
            raw = pl.col(name)
            if kind == "int":  # no parsing, nothing non-finite or fractional: nulls and the range
                exprs += [raw.null_count().alias(f"{i}:nulls"), *(pl.lit(0).alias(f"{i}:{f}") for f in STAT_FIELDS[2:5]),
                          raw.min().cast(pl.Float64).alias(f"{i}:min"), raw.max().cast(pl.Float64).alias(f"{i}:max")]
                continue
            finite = x.is_finite().fill_null(False)
            exprs += [
                raw.null_count().alias(f"{i}:nulls"),
                ((raw.is_not_null() & x.is_null()).sum() if kind == "text" else pl.lit(0)).alias(f"{i}:unparsable"),
                (x.is_not_null() & ~finite).sum().alias(f"{i}:nonfinite"),
                (finite & (x != x.round(0))).sum().alias(f"{i}:fractional"),
                x.filter(finite).min().alias(f"{i}:min"),
                x.filter(finite).max().alias(f"{i}:max"),
            ]
        row = self._collect([self.frame.select(exprs)])[0].row(0, named=True)
        out = {}
        for i, name in enumerate(names):
            s = {f: row[f"{i}:{f}"] for f in STAT_FIELDS[1:]}
            s["records"] = int(row["__records"])
            out[name] = s
        return out

    def as_codes(self, names: list[str], wide: bool = False) -> "PolarsBackend":
        """Checked columns as integer codes (Int32, or Int64 where ``wide``: an attribute of 2**31 values or more)."""
        import polars as pl

        dtype = pl.Int64 if wide else pl.Int32
        return PolarsBackend(self.frame.select([self._numeric(n)[0].cast(dtype).alias(n) for n in names]), True)

    def counts(self, cliques: list[tuple], shapes: list[tuple]) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each clique, ``(flat cell indices, counts)`` of its non-empty cells (one streaming query each,
        collected together; each reads only its clique's columns)."""
        import polars as pl

        queries = []
        for clique, shape in zip(cliques, shapes):
            key = sum((pl.col(a).cast(pl.Int64) * s for a, s in zip(clique, _flat_strides(shape))), pl.lit(0, pl.Int64))
            queries.append(self.frame.select(key.alias("cell")).group_by("cell").agg(pl.len().alias("n")))
        return [(t["cell"].to_numpy(), t["n"].to_numpy()) for t in self._collect(queries)]

    def recode(self, mapping: dict[str, np.ndarray]) -> "PolarsBackend":
        import polars as pl

        schema = self.frame.collect_schema()
        exprs = [pl.col(a).replace_strict(np.arange(len(m)).tolist(), np.asarray(m, np.int64).tolist(),
                                          return_dtype=schema[a]).alias(a) for a, m in mapping.items()]
        return PolarsBackend(self.frame.with_columns(exprs), self.codes)

    def select(self, names: list[str]) -> "PolarsBackend":
        return PolarsBackend(self.frame.select(names), self.codes)


def _column_stats(part, names):
    """One partition's per-column aggregate (runs on a Dask worker)."""
    import pandas as pd

    row = {"__records": len(part)}
    for i, name in enumerate(names):
        raw = part[name]
        text = raw.dtype == object or isinstance(raw.dtype, pd.StringDtype) or raw.dtype.kind in "OSU"
        if text:
            x = pd.to_numeric(raw.astype("string").str.strip(), errors="coerce").astype("float64").to_numpy()
        else:
            x = raw.to_numpy(dtype="float64", na_value=np.nan)
        nulls = int(raw.isna().sum())
        missing = np.isnan(x)
        finite = np.isfinite(x)
        row[f"{i}:nulls"] = nulls
        row[f"{i}:unparsable"] = int(missing.sum()) - nulls if text else 0
        row[f"{i}:nonfinite"] = int((~finite & ~missing).sum())
        row[f"{i}:fractional"] = int((finite & (x != np.round(x))).sum())
        row[f"{i}:min"] = float(x[finite].min()) if finite.any() else np.nan
        row[f"{i}:max"] = float(x[finite].max()) if finite.any() else np.nan
    return pd.DataFrame([row])


def _as_codes(part, names, dtype):
    import pandas as pd

    out = {}
    for name in names:
        raw = part[name]
        if raw.dtype == object or isinstance(raw.dtype, pd.StringDtype) or raw.dtype.kind in "OSU":
            raw = pd.to_numeric(raw.astype("string").str.strip(), errors="coerce")
        if raw.dtype.kind in "iu":
            out[name] = raw.to_numpy().astype(dtype)
        else:
            out[name] = np.asarray(raw, dtype=np.float64).astype(dtype)
    return pd.DataFrame(out, index=part.index)


def _cells(part, clique, strides):
    import pandas as pd

    key = np.zeros(len(part), np.int64)
    for a, s in zip(clique, strides):
        key += part[a].to_numpy(np.int64) * s
    return pd.Series(key, index=part.index, name="cell")


def _recode(part, mapping):
    part = part.copy()
    for a, m in mapping.items():
        part[a] = np.asarray(m, part[a].dtype)[part[a].to_numpy()]
    return part


class DaskBackend:
    """A Dask dataframe of raw columns or of validated int64 codes, computed by ``client`` (a
    ``distributed.Client``) or Dask's default scheduler (``client=None``).

    Args:
        frame: the Dask dataframe.
        client: the ``distributed.Client``, or None.
        codes: whether every column already holds checked integer codes.
    """

    def __init__(self, frame, client=None, codes: bool = False):
        self.frame = frame
        self.client = client
        self.codes = codes

    @classmethod
    def read(cls, path: str, columns: list[str], csv: bool, client=None) -> "DaskBackend":
        import dask.dataframe as dd

        if csv:
            # Every field read as text and converted on the workers: pandas' per-block type inference would
            # otherwise refuse a column whose later blocks differ (a word, an empty field) with a dtype error.
            frame = dd.read_csv(path, usecols=columns, dtype=str, keep_default_na=False, na_values=[""],
                                blocksize="64MB")
        else:
            frame = dd.read_parquet(path, columns=columns)
        return cls(frame[columns], client)

    def columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    def _compute(self, *things):
        import dask

        if self.client is not None:
            return tuple(self.client.gather(self.client.compute(list(things))))
        return dask.compute(*things)

    def stats(self, names: list[str]) -> dict[str, dict]:
        import pandas as pd

        meta = {"__records": "int64"}
        for i in range(len(names)):
            meta.update({f"{i}:{f}": "int64" for f in STAT_FIELDS[1:5]})
            meta.update({f"{i}:min": "float64", f"{i}:max": "float64"})
        parts = self.frame.map_partitions(_column_stats, names, meta=pd.DataFrame({k: pd.Series(dtype=v) for k, v in meta.items()}))
        (table,) = self._compute(parts)
        out = {}
        for i, name in enumerate(names):
            s = {f: int(table[f"{i}:{f}"].sum()) for f in STAT_FIELDS[1:5]}
            lo, hi = table[f"{i}:min"].dropna(), table[f"{i}:max"].dropna()
            s["min"] = float(lo.min()) if len(lo) else None
            s["max"] = float(hi.max()) if len(hi) else None
            s["records"] = int(table["__records"].sum())
            out[name] = s
        return out

    def as_codes(self, names: list[str], wide: bool = False) -> "DaskBackend":
        """Checked columns as integer codes (int32, or int64 where ``wide``: an attribute of 2**31 values or more)."""
        import pandas as pd

        dtype = "int64" if wide else "int32"
        meta = pd.DataFrame({n: pd.Series(dtype=dtype) for n in names})
        return DaskBackend(self.frame.map_partitions(_as_codes, names, dtype, meta=meta), self.client, True)

    def counts(self, cliques: list[tuple], shapes: list[tuple]) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each clique, ``(flat cell indices, counts)`` of its non-empty cells, all computed in one graph
        (the partitions are read once); only the count series reach the driver."""
        import pandas as pd

        series = []
        for clique, shape in zip(cliques, shapes):
            cells = self.frame.map_partitions(_cells, tuple(clique), _flat_strides(shape),
                                              meta=pd.Series(dtype="int64", name="cell"))
            series.append(cells.value_counts(split_every=8))
        return [(s.index.to_numpy(np.int64), s.to_numpy(np.int64)) for s in self._compute(*series)]

    def recode(self, mapping: dict[str, np.ndarray]) -> "DaskBackend":
        import pandas as pd

        mapping = {a: np.asarray(m, np.int64) for a, m in mapping.items()}
        meta = pd.DataFrame({c: pd.Series(dtype=t) for c, t in self.frame.dtypes.items()})
        return DaskBackend(self.frame.map_partitions(_recode, mapping, meta=meta), self.client, self.codes)

    def select(self, names: list[str]) -> "DaskBackend":
        return DaskBackend(self.frame[names], self.client, self.codes)
