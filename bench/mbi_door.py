"""smartnoise-synth and OpenDP on mbi 1.1 and on pgmjax's mbi door (``pgmjax.compat.mbi``), side by side.

    python -m bench mbi_door [--quick] [--seeds 3] [--smartnoise-python PATH] [--opendp-python PATH]

Each library runs its own MST and AIM, unchanged, once on the ``mbi`` it installs (1.1.0: both pin ``mbi<2``)
and once with ``with pgmjax.compat.mbi.installed():`` around it, each run in a fresh process (time includes
imports and compiling). The libraries need their own virtual environments (they pin other numpy, polars and
OpenDP versions than pgmjax's): ``--smartnoise-python`` and ``--opendp-python`` name their interpreters, each with
pgmjax installed (``pip install --no-deps -e .``). Tables: ``generated`` (2,000 records of 4 columns: two pairs
of dependent ones) and the shared Titanic (integer-coded). Budget: epsilon 1, delta 1e-9 for smartnoise; rho 0.5
for OpenDP (its contingency tables take zCDP). Measured: seconds, peak memory (the process's maximum resident
set), and the mean total variation distance of all 2-way marginals between the real table and the synthetic
one of as many records.

Results: ``bench/results/mechanisms/mbi_door.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import tempfile

import numpy as np
import pandas as pd

from bench import schema

SUITE, NAME = "mechanisms", "mbi_door"

WORKER = r"""
import contextlib, json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np, pandas as pd
library, mechanism, door, seed, source, out = sys.argv[1:7]
df = pd.read_csv(source)
start = time.perf_counter()
if door == "pgmjax":
    import pgmjax.compat.mbi as compat
    context = compat.installed()
else:
    context = contextlib.nullcontext()
with context:
    np.random.seed(int(seed))
    if library == "smartnoise":
        from snsynth import Synthesizer
        synth = Synthesizer.create(mechanism, epsilon=1.0, delta=1e-9)
        synth.fit(df, categorical_columns=list(df.columns), preprocessor_eps=0.0)
        fake = pd.DataFrame(synth.sample(len(df)), columns=df.columns)
    else:
        import polars as pl
        import opendp.prelude as dp
        dp.enable_features("contrib")
        ctx = dp.Context.compositor(data=pl.LazyFrame(df), privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(rho=0.5))
        algorithm = dp.mbi.MST() if mechanism == "mst" else dp.mbi.AIM()
        keys = {c: list(range(int(df[c].max()) + 1)) for c in df.columns}
        table = ctx.query(rho=0.5).select(*df.columns).contingency_table(keys=keys, algorithm=algorithm).release()
        fake = table.synthesize(len(df)).to_pandas()[list(df.columns)]
    import mbi
seconds = time.perf_counter() - start
fake.fillna(-1).astype(int).to_csv(out, index=False)  # OpenDP draws a few nulls (its keys' unknown value): kept as -1
print(json.dumps({"seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "mbi": mbi.__name__}))
"""


def tables(data_dir: str) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    n = 2_000
    a = rng.integers(0, 3, n)
    c = rng.integers(0, 4, n)
    out = {"generated": pd.DataFrame({"a": a, "b": np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n)), "c": c,
                                      "d": np.where(rng.random(n) < 0.7, c % 2, rng.integers(0, 2, n))})}
    titanic = os.path.join(data_dir, "titanic", "titanic.csv")
    if os.path.isfile(titanic):
        out["titanic"] = pd.read_csv(titanic)
    return out


def tvd2(real: pd.DataFrame, fake: pd.DataFrame) -> float:
    def one(cols):
        p, q = real.groupby(cols).size() / len(real), fake.groupby(cols).size() / len(fake)
        return 0.5 * p.sub(q, fill_value=0).abs().sum()

    return float(np.mean([one(list(c)) for c in itertools.combinations(real.columns, 2)]))


def run(python: str, library: str, mechanism: str, door: str, seed: int, table: pd.DataFrame, timeout: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        source, out = os.path.join(tmp, "real.csv"), os.path.join(tmp, "fake.csv")
        table.to_csv(source, index=False)
        try:
            done = subprocess.run([python, "-c", WORKER, library, mechanism, door, str(seed), source, out],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout after {timeout} s"}
        if done.returncode != 0:  # the last line that says something (OpenDP's exceptions end with a lone '")')
            said = [line.strip() for line in done.stderr.splitlines() if len(line.strip()) > 3]
            return {"error": (said[-1] if said else f"exit {done.returncode}")[:200]}
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["tvd_2way"] = tvd2(table, pd.read_csv(out))
        return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench mbi_door", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the generated table, MST, one seed")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--smartnoise-python", default="/tmp/v_sn/bin/python")
    ap.add_argument("--opendp-python", default="/tmp/v_odp/bin/python")
    ap.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join("..", "shared", "data")))
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--out", default=NAME)
    args = ap.parse_args(argv)
    data = tables(args.data)
    if args.quick:
        data, mechanisms, seeds = {"generated": data["generated"]}, ["mst"], 1
    else:
        mechanisms, seeds = ["mst", "aim"], args.seeds
    rows = []
    for library, python in (("smartnoise", args.smartnoise_python), ("opendp", args.opendp_python)):
        if not os.path.isfile(python):
            print(f"{library}: {python} not found, skipped", flush=True)
            continue
        for (name, table), mechanism, door in itertools.product(data.items(), mechanisms, ("mbi 1.1.0", "pgmjax")):
            runs = [run(python, library, mechanism, door, seed, table, args.timeout) for seed in range(seeds)]
            done = [r for r in runs if "error" not in r]
            row = {"library": library, "mechanism": mechanism, "table": name, "engine": door, "runs": len(done)}
            if done:
                row |= {k: float(np.mean([r[k] for r in done])) for k in ("seconds", "peak_mib", "tvd_2way")}
                row["tvd_2way_max"] = float(np.max([r["tvd_2way"] for r in done]))
                row["mbi_module"] = done[0]["mbi"]
            if len(done) < len(runs):
                row["error"] = next(r["error"] for r in runs if "error" in r)
            print(row, flush=True)
            rows.append(row)
    meta = schema.run_meta(f"bench.{NAME}", argv)
    columns = ["library", "mechanism", "table", "engine", "runs", "seconds", "peak_mib", "tvd_2way", "tvd_2way_max",
               "mbi_module", "error"]
    page = ["# smartnoise-synth and OpenDP on mbi 1.1.0 and on pgmjax's mbi door", "", *schema.header_lines(meta),
            "Each row: the mean over seeds (NumPy's global seed 0, 1, ...; the libraries draw from it) of fresh "
            "processes. seconds: fit and sample, imports and compiling included; peak_mib: the process's maximum "
            "resident set; tvd_2way: mean total variation distance of all 2-way marginals, real against synthetic "
            "(max: the worst seed); OpenDP's synthetic records hold a few nulls (its keys' unknown value), "
            "counted as a value of their own. mbi_module: the module the library's `import mbi` found. Loaded 2-core machine: "
            "timings are noisy.", "", *schema.table(rows, columns), ""]
    schema.write_result(SUITE, args.out, rows, meta, page=page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
