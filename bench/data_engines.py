"""Counting on Polars and Dask: all 2-way marginals and MST end to end on a generated Parquet table, per engine.

    python -m bench data data_engines --rows 1000000 10000000 100000000
    python -m bench data data_engines --smoke          # 200,000 rows, a minute
    python -m bench data data_engines --raw --rows 1000000 --out data_engines_raw   # a raw CSV, private schema

For each table size the script writes a Parquet folder under ``--dir`` (default /tmp, never in the
repository; reused when present), times a bare scan of every column (pyarrow decoding each column of each
row group: the physical limit of reading the file), then for each engine, in a fresh process:

* ``open``: :func:`pgmjax.data.engines.open_dataset` (per-column aggregates: the code checks) or, for
  ``memory``, ``pandas.read_parquet`` + :class:`pgmjax.Dataset`;
* ``count``: every 2-way marginal of the 16 columns (``data.marginals``);
* ``mst``: :func:`pgmjax.mechanisms.mst` at epsilon 1 with ``--synthetic-rows`` synthetic records (the
  synthetic table of a 100-million-row input would itself be 6 GB; the release's size is the user's choice).

With ``--raw`` the table is a raw CSV instead (numbers, decimals, dates, datetimes, categories with rare values,
empty and unreadable fields: :func:`write_raw_table`), and each engine runs the private preprocessing on it
(``open``: :func:`pgmjax.read_raw_csv` or :func:`pgmjax.preprocessing.raw_engines.open_raw`; ``preprocess``:
:func:`pgmjax.preprocessing.preprocess.private_schema` at epsilon 0.1; ``count``: the encoding by the released schema
and every 2-way marginal; ``mst`` at epsilon 0.9).

Each row records wall seconds, the driver's peak resident memory (VmHWM of the process running the
mechanism) and, for Dask, the workers' peak (a ``distributed.LocalCluster`` of ``--workers`` processes),
and rows per second beside the bare scan's. Results: ``bench/results/data/<--out>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time

SIZES = (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 2, 3, 4, 7, 9, 24)  # 16 columns, 2 to 24 values


def domain_sizes(columns: int) -> dict:
    return {f"c{j:02d}": SIZES[j % len(SIZES)] for j in range(columns)}


def write_table(folder: str, rows: int, columns: int, part_rows: int, seed: int = 0) -> None:
    """A Parquet folder of ``rows`` records (files of ``part_rows``): each column copies a function of the
    previous one for about half the records (a chain of dependencies for MST to find), else uniform."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    sizes = list(domain_sizes(columns).values())
    names = list(domain_sizes(columns))
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    for part, start in enumerate(range(0, rows, part_rows)):
        n = min(part_rows, rows - start)
        cols = [rng.integers(0, sizes[0], n, dtype=np.int16)]
        for j in range(1, columns):
            fresh = rng.integers(0, sizes[j], n, dtype=np.int16)
            copy = (cols[-1] * 7 + 3) % sizes[j]
            cols.append(np.where(rng.random(n, dtype=np.float32) < 0.5, copy, fresh).astype(np.int16))
        table = pa.table({k: pa.array(c.astype(np.int8)) for k, c in zip(names, cols)})
        pq.write_table(table, os.path.join(folder, f"part-{part:04d}.parquet"), row_group_size=1_000_000)
    with open(folder + ".done", "w") as f:  # beside the folder: the engines read every file inside it
        f.write(str(rows))


RAW_COLUMNS = ("age", "income", "joined", "seen", "city", "code")


def write_raw_table(path: str, rows: int, part_rows: int = 1_000_000, seed: int = 0) -> None:
    """A raw CSV of ``rows`` records (:data:`RAW_COLUMNS`), written in parts: integers, decimals, ISO dates and
    datetimes, a 5-city column with three rare values, a 40-value code; 1% empty and 0.5% unreadable fields."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    odd = np.array(["n/a", "x", "2020-02-30", "1e400", "?"], dtype=object)
    with open(path + ".part", "w") as f:
        for start in range(0, rows, part_rows):
            n = min(part_rows, rows - start)
            age = rng.integers(18, 91, n)
            frame = pd.DataFrame({
                "age": age.astype(str),
                "income": np.round(rng.lognormal(10 + (age - 50) / 100, 1, n), 2).astype(str),
                "joined": (np.datetime64("1990-01-01") + rng.integers(0, 12000, n)).astype(str),
                "seen": (np.datetime64("2019-01-01T00:00:00") + rng.integers(0, 86400 * 700, n)).astype(str),
                "city": rng.choice(np.array(["Paris", "Lyon", "Nice", "Lille", "Brest", "Rare1", "Rare2", "Rare3"]), n,
                                   p=[.4, .3, .1, .1, .1 - 3e-5, 1e-5, 1e-5, 1e-5]),
                "code": np.char.add("k", ((age // 2 + rng.integers(0, 5, n)) % 40).astype(str)),
            }).astype(object)
            for c in frame.columns:
                u = rng.random(n)
                frame.loc[u < 0.01, c] = ""
                bad = (u >= 0.01) & (u < 0.015)
                frame.loc[bad, c] = rng.choice(odd, int(bad.sum()))
            frame.to_csv(f, index=False, header=start == 0)
    os.replace(path + ".part", path)


def raw_child(engine: str, path: str, synthetic_rows: int, workers: int, skip_mst: bool) -> dict:
    """One engine's measurements of the raw path in this (fresh) process."""
    import jax

    from pgmjax.preprocessing.preprocess import private_schema
    from pgmjax.preprocessing.private_format import encode_raw
    from pgmjax.mechanisms import mst
    from pgmjax.privacy import Accountant

    out = {"engine": engine}
    cluster = client = None
    t = time.perf_counter()
    if engine == "memory":
        from pgmjax.data.schema import read_raw_csv

        table = read_raw_csv(path)
    else:
        from pgmjax.preprocessing.raw_engines import open_raw

        if engine == "dask":
            from distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=workers, threads_per_worker=max(1, (os.cpu_count() or 2) // workers),
                                   processes=True, memory_limit="6GiB", dashboard_address=None)
            client = Client(cluster)
        table = open_raw(path, engine=engine, scheduler=client)
    out["open_s"] = time.perf_counter() - t
    t = time.perf_counter()
    acc = Accountant(epsilon=0.1)
    result = private_schema(table, acc, jax.random.key(0), bins=8)
    out["preprocess_s"] = time.perf_counter() - t
    out["schema_sha"] = __import__("hashlib").sha256(json.dumps(result.schema.to_dict()).encode()).hexdigest()[:12]
    t = time.perf_counter()
    data = encode_raw(result.schema, table) if engine == "memory" else table.encode(result.schema)
    tables = data.marginals(list(itertools.combinations(data.domain.attributes, 2)))
    out["count_2way_s"] = time.perf_counter() - t
    out["records"] = len(data)
    out["cells"] = int(sum(x.size for x in tables))
    if not skip_mst:
        t = time.perf_counter()
        released = mst(data, 0.9, key=jax.random.key(0), rows=synthetic_rows)
        out["mst_s"] = time.perf_counter() - t
        out["mst_synthetic_rows"] = len(released.synthetic)
    out["driver_peak_mib"] = _peak_mib()
    if client is not None:
        out["worker_peak_mib"] = max(client.run(_peak_mib).values())
        client.close()
        cluster.close()
    return out


def bare_scan(folder: str) -> float:
    """Seconds to decode every column of every row group (pyarrow, all threads)."""
    import glob

    import pyarrow.parquet as pq

    t = time.perf_counter()
    n = 0
    for path in sorted(glob.glob(os.path.join(folder, "*.parquet"))):
        f = pq.ParquetFile(path)
        for batch in f.iter_batches(batch_size=1_000_000):
            n += batch.num_rows
    return time.perf_counter() - t


def _peak_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(engine: str, folder: str, columns: int, synthetic_rows: int, workers: int, skip_mst: bool) -> dict:
    """One engine's measurements in this (fresh) process."""
    import jax

    import pgmjax as pj
    from pgmjax.mechanisms import mst

    dom = pj.Domain(domain_sizes(columns))
    pairs = list(itertools.combinations(dom.attributes, 2))
    out = {"engine": engine}
    cluster = client = None
    t = time.perf_counter()
    if engine == "memory":
        import pandas as pd

        data = pj.Dataset(pd.read_parquet(folder), dom)
    else:
        from pgmjax.data.engines import open_dataset

        scheduler = None
        if engine == "dask":
            from distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=workers, threads_per_worker=max(1, (os.cpu_count() or 2) // workers),
                                   processes=True, memory_limit="6GiB", dashboard_address=None)
            client = scheduler = Client(cluster)
        data = open_dataset(folder, dom, engine=engine, scheduler=scheduler)
    out["records"] = len(data)
    out["open_s"] = time.perf_counter() - t
    t = time.perf_counter()
    tables = data.marginals(pairs)
    out["count_2way_s"] = time.perf_counter() - t
    out["cells"] = int(sum(x.size for x in tables))
    del tables
    if not skip_mst:
        t = time.perf_counter()
        result = mst(data, 1.0, key=jax.random.key(0), rows=synthetic_rows)
        out["mst_s"] = time.perf_counter() - t
        out["mst_synthetic_rows"] = len(result.synthetic)
    out["driver_peak_mib"] = _peak_mib()
    if client is not None:
        peaks = client.run(_peak_mib)
        out["worker_peak_mib"] = max(peaks.values())
        client.close()
        cluster.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench data data_engines", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, nargs="+", default=[1e6, 1e7, 1e8])
    ap.add_argument("--engines", nargs="+", default=["memory", "polars", "dask"])
    ap.add_argument("--memory-max-rows", type=float, default=2e7, help="largest table the in-memory path is run on")
    ap.add_argument("--columns", type=int, default=16)
    ap.add_argument("--part-rows", type=int, default=2_000_000)
    ap.add_argument("--synthetic-rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2, help="Dask LocalCluster worker processes")
    ap.add_argument("--dir", default="/tmp/pgmjax_data_engines")
    ap.add_argument("--out", default="data_engines")
    ap.add_argument("--skip-mst", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="200,000 rows, no result file")
    ap.add_argument("--raw", action="store_true", help="a raw CSV with the private preprocessing (see above)")
    ap.add_argument("--child", nargs=2, metavar=("ENGINE", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child and args.raw:
        print("RESULT " + json.dumps(raw_child(args.child[0], args.child[1], args.synthetic_rows, args.workers,
                                               args.skip_mst)), flush=True)
        return 0
    if args.child:
        print("RESULT " + json.dumps(child(args.child[0], args.child[1], args.columns, args.synthetic_rows,
                                           args.workers, args.skip_mst)), flush=True)
        return 0
    sizes = [200_000] if args.smoke else [int(r) for r in args.rows]
    rows_out = []
    from bench.schema import run_meta

    meta = run_meta("bench.data_engines", argv, extra=("polars", "dask", "distributed", "pyarrow", "pandas"),
                    also={"load_at_start": [round(x, 2) for x in os.getloadavg()]})
    for n in sizes:
        if args.raw:
            folder = os.path.join(args.dir, f"raw_rows_{n}.csv")
            if not os.path.exists(folder):
                os.makedirs(args.dir, exist_ok=True)
                t = time.perf_counter()
                write_raw_table(folder, n)
                print(f"wrote {n:,} raw rows to {folder} in {time.perf_counter() - t:.1f} s", flush=True)
        folder = folder if args.raw else os.path.join(args.dir, f"rows_{n}_cols_{args.columns}")
        if not args.raw and not os.path.exists(folder + ".done"):
            t = time.perf_counter()
            write_table(folder, n, args.columns, args.part_rows)
            print(f"wrote {n:,} rows to {folder} in {time.perf_counter() - t:.1f} s", flush=True)
        if args.raw:
            size_mib = os.path.getsize(folder) / 2**20
            t = time.perf_counter()
            with open(folder, "rb") as f:  # the physical limit: reading the file's bytes
                while f.read(1 << 24):
                    pass
            scan = time.perf_counter() - t
        else:
            size_mib = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)) / 2**20
            scan = bare_scan(folder)
        for engine in args.engines:
            if engine == "memory" and n > args.memory_max_rows:
                rows_out.append({"rows": n, "engine": "memory", "note": f"not run above {args.memory_max_rows:,.0f} rows "
                                 "(the in-memory path holds 16 int64 columns while building the table: "
                                 f"{n * args.columns * 8 / 2**30:.0f} GiB)"})
                continue
            cmd = [sys.executable, "-m", "bench.data_engines", "--child", engine, folder, "--columns", str(args.columns),
                   "--synthetic-rows", str(args.synthetic_rows), "--workers", str(args.workers)]
            if args.skip_mst:
                cmd.append("--skip-mst")
            if args.raw:
                cmd.append("--raw")
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
            wall = time.perf_counter() - t
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if proc.returncode or not line:
                row = {"rows": n, "engine": engine, "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
            else:
                row = {"rows": n, **json.loads(line[0][7:]), "process_s": wall}
                row["count_rows_per_s"] = n / row["count_2way_s"]
            row.update({"parquet_mib": size_mib, "bare_scan_s": scan, "scan_rows_per_s": n / scan,
                        "load_average": [round(x, 2) for x in os.getloadavg()]})
            print(json.dumps(row), flush=True)
            rows_out.append(row)
            if not args.smoke:  # written after every row: a long run that is stopped keeps what it measured
                _write(args, meta, rows_out)
    return 0


def _write(args, meta, rows_out) -> None:
    from bench.schema import header_lines, table, write_result

    if args.raw:
        cols = ["rows", "engine", "open_s", "preprocess_s", "count_2way_s", "mst_s", "driver_peak_mib",
                "worker_peak_mib", "parquet_mib", "schema_sha", "note", "error"]
        page = ["# Raw tables on Polars and Dask: private preprocessing (issue 48)", "", *header_lines(meta),
                "Loaded 2-core machine: other agents ran tests and benchmarks at the same time (load averages per row "
                "in the JSON); times are wall seconds of one run each.", "",
                "Table: a raw CSV written by the benchmark in /tmp (`parquet_mib`: its size in MiB): an integer, a "
                "decimal, a date, a datetime, 5 cities with 3 rare values, a 40-value code; 1% empty and 0.5% "
                "unreadable fields. `open_s`: reading it (memory) or opening it (engines); `preprocess_s`: the "
                "private schema at epsilon 0.1 (kind vote, categories, private range and quantiles, 8 bins); "
                "`count_2way_s`: the encoding by the released schema and all 15 pairwise marginals; `mst_s`: MST at "
                f"epsilon 0.9 with {args.synthetic_rows:,} synthetic records; `schema_sha`: a hash of the released "
                "schema (equal on every engine: the same release).", "", *table(rows_out, cols)]
        write_result("data", args.out, rows_out, meta, page=page, quiet=True)
        return
    cols = ["rows", "engine", "open_s", "count_2way_s", "count_rows_per_s", "scan_rows_per_s", "mst_s",
            "driver_peak_mib", "worker_peak_mib", "parquet_mib", "note", "error"]
    page = ["# Counting on Polars and Dask (issue 48)", "", *header_lines(meta),
            "Loaded 2-core machine: other agents ran tests and benchmarks at the same time (load averages per row in "
            "the JSON); times are wall seconds of one run each.", "",
            f"Table: {args.columns} integer columns (2 to 24 values), a Parquet folder of {args.part_rows:,}-row files "
            "written by the benchmark in /tmp. `count_2way_s`: all "
            f"{args.columns * (args.columns - 1) // 2} pairwise marginals; `scan_rows_per_s`: a bare pyarrow decode "
            "of every column (the physical limit of reading the file); `mst_s`: MST at epsilon 1 end to end (with "
            f"{args.synthetic_rows:,} synthetic records); `driver_peak_mib`: the peak resident memory of the "
            "process running the mechanism; `worker_peak_mib`: the Dask workers' (LocalCluster of "
            f"{args.workers} processes).", "", *table(rows_out, cols)]
    write_result("data", args.out, rows_out, meta, page=page, quiet=True)


if __name__ == "__main__":
    sys.exit(main())
