"""pgmjax's Synthesizer against dpmm and smartnoise-synth: MST and AIM on the same coded table and budget, time, memory, error.

    python -m bench mechanisms synthesizer_tools [--quick] [--datasets adult,titanic] [--mechanisms mst,aim]
        [--seeds 2 | --seeds adult=1,titanic=2] [--budget-s S] [--timeout 1800] [--dpmm-python PATH]
        [--smartnoise-python PATH] [--data DIR]

(``python -m bench.synthesizer_tools ...`` is the same.) Three tools, each in its own virtual environment (they pin
incompatible numpy versions): ``pj.Synthesizer`` (this project), dpmm's ``MSTPipeline`` / ``AIMPipeline`` and
smartnoise-synth's ``Synthesizer.create("mst" | "aim")``. Every tool gets the same integer-coded table
(``<data>/<name>/<name>.csv``) and its public domain (column -> size), ``epsilon = 1``, ``delta = 1e-9`` (set
explicitly: dpmm's default is 1e-5) and its own defaults otherwise (iterations, model-size cap, rounds), with no
budget spent on preprocessing: pgmjax fits the codes with ``domain=`` (no schema stage), dpmm runs with
``disable_processing=True`` (no binner, the domain given), smartnoise gets a ``TableTransformer`` of
``LabelTransformer(nullable=False)`` fitted on a public frame that lists each column's codes (``preprocessor_eps=0``,
nothing spent, and its domain is the declared one, not the categories seen in the data).

Each (tool, mechanism, dataset, seed) runs in a fresh subprocess of that tool's Python, one after another, so its
times include the imports and any compilation of a first call: ``fit_s`` (fit, including reading the CSV),
``sample_s`` (N synthetic records, N the table's rows), ``wall_s`` (the whole process, measured by this driver),
and ``peak_mib``, the process's peak resident memory (``ru_maxrss`` of ``RUSAGE_SELF``). A run past ``--timeout``
is killed and recorded as a timeout. This driver then scores every synthetic table with the same code: the total
variation distance (``0.5 * L1`` of the normalized counts) between the real and the synthetic marginals, over all
2-way marginals (mean and max) and all 1-way marginals (mean and max). ``--quick``: titanic, one seed. The result
is rewritten after every run; with ``--budget-s``, a dataset's next seed starts only while the time spent plus its
last seed's time stays within it (the page says which seeds ran).

Results: ``bench/results/mechanisms/synthesizer_tools.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench import schema

SUITE, NAME = "mechanisms", "synthesizer_tools"
TOOLS = ("pgmjax", "dpmm", "smartnoise")

# Each worker: argv[1] is a JSON dict (data, domain, mech, eps, delta, seed, out, result). It writes the synthetic
# codes to ``out`` (CSV) and its measurements to ``result`` (JSON), since some tools print to stdout.
_HEAD = """
import json, resource, sys, time
T0 = time.perf_counter()
A = json.loads(sys.argv[1])
"""
_TAIL = """
T3 = time.perf_counter()
syn = syn if isinstance(syn, pd.DataFrame) else pd.DataFrame(list(syn), columns=list(dom))
syn[list(dom)].astype(int).to_csv(A["out"], index=False)
kib = lambda who: resource.getrusage(who).ru_maxrss
json.dump({"import_s": T1 - T0, "fit_s": T2 - T1, "sample_s": T3 - T2, "peak_mib": kib(resource.RUSAGE_SELF) / 1024,
           "children_peak_mib": kib(resource.RUSAGE_CHILDREN) / 1024, **INFO}, open(A["result"], "w"))
"""
WORKERS = {
    "pgmjax": """
import jax, pandas as pd, pgmjax as pj
T1 = time.perf_counter()
dom = json.load(open(A["domain"])); df = pd.read_csv(A["data"])[list(dom)]
rel = pj.Synthesizer(A["mech"], epsilon=A["eps"], delta=A["delta"]).fit(df, key=jax.random.key(A["seed"]), domain=dom)
T2 = time.perf_counter()
syn = rel.sample(len(df), key=jax.random.key(A["seed"] + 1000))
INFO = {"measurements": len(rel.measurements), "rho": float(rel.stages[-1].accountant.budget),
        "stages": [s.name for s in rel.stages], "backend": jax.default_backend()}
""",
    "dpmm": """
import numpy as np, pandas as pd
from dpmm.pipelines import MSTPipeline, AIMPipeline
T1 = time.perf_counter()
dom = json.load(open(A["domain"])); df = pd.read_csv(A["data"])[list(dom)]
cap = {"max_model_size": 80} if A["mech"] == "aim" else {}  # the pipeline passes None (no cap) unless told
pipe = {"mst": MSTPipeline, "aim": AIMPipeline}[A["mech"]](epsilon=A["eps"], delta=A["delta"], disable_processing=True, **cap)
pipe.fit(df, domain=dom, random_state=A["seed"])
T2 = time.perf_counter()
syn = pipe.generate(n_records=len(df), random_state=A["seed"] + 1000)
g = pipe.gen.generator
INFO = {"measurements": len(g.measures), "rho": float(g.rho), "n_iters": g.n_iters, "n_jobs": g.n_jobs,
        "max_model_size": g.max_model_size, "compress": g.compress, "model_size_mb": g.model_size}
""",
    "smartnoise": """
import numpy as np, pandas as pd
from snsynth import Synthesizer
from snsynth.transform.table import TableTransformer
from snsynth.transform.label import LabelTransformer
T1 = time.perf_counter()
dom = json.load(open(A["domain"])); df = pd.read_csv(A["data"])[list(dom)]
np.random.seed(A["seed"])  # its selections and decompression draw from numpy's global generator
width = max(dom.values())  # a public frame listing each column's codes: the declared domain, nothing spent
tt = TableTransformer([LabelTransformer(nullable=False) for _ in dom])
tt.fit(pd.DataFrame({c: np.arange(width) % k for c, k in dom.items()}))
s = Synthesizer.create(A["mech"], epsilon=A["eps"], delta=A["delta"])
s.fit(df, transformer=tt, preprocessor_eps=0.0)
T2 = time.perf_counter()
syn = s.sample(len(df))
INFO = {"model_cliques": len(s.synthesizer.cliques), "epsilon_left": float(s.epsilon),
        "cardinality": list(map(int, tt.cardinality)), "preprocessor_spent": list(tt.odometer.spent)}
""",
}
VERSIONS = ("import importlib.metadata as m, json, platform; v = {'python': platform.python_version()}\n"
            "for p in %r:\n    try: v[p] = m.version(p)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(v))")
PACKAGES = {"pgmjax": ("pgmjax", "jax", "jaxlib", "numpy"), "dpmm": ("dpmm", "numpy", "scipy", "opendp", "pandas"),
            "smartnoise": ("smartnoise-synth", "mbi", "jax", "numpy", "opendp", "pandas")}
SETTINGS = {  # what each tool runs with by default (read from their sources; the JSON records the measured ones too)
    "pgmjax": {"mst": "final fit 10,000 iterations (reference mirror descent), selection fit 2,500; N estimated; "
                      "domain compression; records by systematic sampling",
               "aim": "rounds 16d, <= 1,000 iterations per round (warm start, tol 1e-4), final fit 1,000; "
                      "max_model_mb 80 (junction-tree size); N estimated"},
    "dpmm": {"mst": "final fit 5,000 iterations (MSTGM default), selection fit 2,500; domain compression; the tree's "
                    "2-way marginals measured at sigma*sqrt(d), not sqrt(d-1); records by randomized rounding",
             "aim": "rounds 16d, 1,000 iterations per round (warm start), final fit 1,000 from scratch; "
                    "max_model_size 80 (junction-tree size) passed explicitly: AIMPipeline passes None, no cap, unless told (AIMGM's "
                    "own default is 80); compress=True"},
    "smartnoise": {"mst": "final fit 5,000 iterations (mbi 1.1 mirror descent), selection fit 1,000; known_total = "
                          "the true N (not private); domain compression; records by randomized rounding",
                   "aim": "rounds 16d, 1,000 iterations per round from scratch (no warm start), final fit 1,000; "
                          "max_model_size 80 counted as the sum of clique sizes, not the junction tree's"},
}


def python_of(args, tool: str) -> str:
    return {"pgmjax": args.pgmjax_python, "dpmm": args.dpmm_python, "smartnoise": args.smartnoise_python}[tool]


def load(data_dir: str, name: str):
    import pandas as pd

    domain = json.load(open(os.path.join(data_dir, name, f"{name}-domain.json")))
    return pd.read_csv(os.path.join(data_dir, name, f"{name}.csv"))[list(domain)].to_numpy(), domain


def tvd(real, syn, cols, shape) -> float:
    """0.5 * L1 between the normalized counts of ``real`` and ``syn`` on the columns ``cols``."""
    def p(x):
        flat = np.ravel_multi_index(tuple(x[:, c] for c in cols), shape)
        return np.bincount(flat, minlength=int(np.prod(shape))) / len(x)
    return 0.5 * float(np.abs(p(real) - p(syn)).sum())


def errors(real, syn, domain) -> dict:
    sizes = list(domain.values())
    one = [tvd(real, syn, (i,), (sizes[i],)) for i in range(len(sizes))]
    two = [tvd(real, syn, (i, j), (sizes[i], sizes[j])) for i, j in itertools.combinations(range(len(sizes)), 2)]
    return {"tvd2_mean": float(np.mean(two)), "tvd2_max": float(np.max(two)), "tvd1_mean": float(np.mean(one)),
            "tvd1_max": float(np.max(one))}


def run_one(args, tool, mech, name, seed, tmp) -> dict:
    row = {"tool": tool, "mechanism": mech, "dataset": name, "seed": seed}
    py = python_of(args, tool)
    if not os.path.exists(py):
        return row | {"status": f"no interpreter {py}"}
    out, result = os.path.join(tmp, f"{tool}-{mech}-{name}-{seed}.csv"), os.path.join(tmp, f"{tool}-{mech}-{name}-{seed}.json")
    job = {"data": os.path.join(args.data, name, f"{name}.csv"), "domain": os.path.join(args.data, name, f"{name}-domain.json"),
           "mech": mech, "eps": args.epsilon, "delta": args.delta, "seed": seed, "out": out, "result": result}
    env = {**os.environ, "PYTHONPATH": schema.ROOT if tool == "pgmjax" else ""}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([py, "-c", _HEAD + WORKERS[tool] + _TAIL, json.dumps(job)], capture_output=True, text=True,
                              timeout=args.timeout, env=env, cwd=tmp)
    except subprocess.TimeoutExpired:
        return row | {"status": f"timeout (> {args.timeout:g} s)", "wall_s": time.perf_counter() - t0}
    row["wall_s"] = time.perf_counter() - t0
    if proc.returncode != 0 or not os.path.exists(result):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return row | {"status": f"failed (exit {proc.returncode}): {' / '.join(tail)[-300:]}"}
    info = json.load(open(result))
    row |= {"status": "ok", **{k: info.pop(k) for k in ("import_s", "fit_s", "sample_s", "peak_mib", "children_peak_mib")}}
    real, domain = load(args.data, name)
    syn = np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    bad = int(((syn < 0) | (syn >= np.array(list(domain.values())))).any(axis=1).sum())
    row |= {"rows": len(syn), "out_of_domain": bad, **errors(real, np.clip(syn, 0, np.array(list(domain.values())) - 1), domain),
            "info": info}
    return row


def summary(rows) -> list[dict]:
    out = []
    for key, group in itertools.groupby(rows, key=lambda r: (r["dataset"], r["mechanism"], r["tool"])):
        group = list(group)
        ok = [r for r in group if r["status"] == "ok"]
        s = {"dataset": key[0], "mechanism": key[1], "tool": key[2], "runs": f"{len(ok)}/{len(group)} ok"}
        for k in ("fit_s", "sample_s", "wall_s", "peak_mib", "tvd2_mean", "tvd2_max", "tvd1_mean"):
            s[k] = float(np.mean([r[k] for r in ok])) if ok else None
        if len(ok) < len(group):
            s["runs"] += "; " + "; ".join(sorted({r["status"] for r in group if r["status"] != "ok"}))
        out.append(s)
    return out


def write(args, argv, rows, envs, load0, notes, quiet) -> None:
    """The result so far (written after every run, so a killed run leaves what it measured)."""
    order = {k: i for i, k in enumerate(TOOLS)}
    rows = sorted(rows, key=lambda r: (r["dataset"] != "adult", r["dataset"], r["mechanism"] != "mst", order[r["tool"]], r["seed"]))
    summ = summary(rows)
    seeds = {n: sorted({r["seed"] for r in rows if r["dataset"] == n}) for n in dict.fromkeys(r["dataset"] for r in rows)}
    given = {f"{t}:{p}": v for t, e in envs.items() if t != "pgmjax" for p, v in e.items() if p in ("dpmm", "smartnoise-synth", "mbi")}
    meta = schema.run_meta(f"bench.{NAME}", argv, also={"load_average_at_start": load0}, **given)
    settings = {"epsilon": args.epsilon, "delta": args.delta, "seeds": seeds, "timeout_s": args.timeout,
                "preprocessing_budget": 0.0, "defaults": SETTINGS, "environments": envs, "notes": notes}
    page = ["# Synthesizers compared: pgmjax, dpmm, smartnoise-synth (MST and AIM)", "", *schema.header_lines(meta),
            f"Every tool: the same integer-coded table and declared domain, epsilon = {args.epsilon:g}, delta = "
            f"{args.delta:g}, no budget on preprocessing, its default settings otherwise; N synthetic records (N = the "
            "table's rows). Each run is a fresh process (imports and compilation included); the tools alternate "
            "run by run. fit_s includes reading the CSV; peak_mib is the process's peak RSS. TVD: total variation "
            "distance between real and synthetic marginals (0: equal, 1: disjoint), over all 2-way (mean, max) "
            "and 1-way (mean) marginals. Each row: the mean over the seeds run (" +
            "; ".join(f"{n}: {len(v)}" for n, v in seeds.items()) + f"). The machine has {os.cpu_count()} cores and "
            f"other jobs ran beside this one (load average at start {load0}), so times are indicative.",
            "", *([f"* {n}" for n in notes] + [""] if notes else []), "## Summary", "",
            *schema.table(summ, ["dataset", "mechanism", "tool", "runs", "fit_s", "sample_s", "wall_s", "peak_mib",
                                 "tvd2_mean", "tvd2_max", "tvd1_mean"]), "", "## Settings each tool ran with", ""]
    for tool in envs:
        page += [f"* {tool} ({', '.join(f'{k} {v}' for k, v in envs[tool].items())}): " +
                 "; ".join(f"{m.upper()}: {SETTINGS[tool][m]}" for m in ("mst", "aim"))]
    page += ["", "Seeding: pgmjax follows its `jax.random.key(seed)` entirely; dpmm and smartnoise draw their Gaussian "
             "noise from OpenDP's own generator (one call per cell), which no seed fixes, so their runs are not "
             "reproducible and seeds only fix their selection and sampling draws.", "", "## Runs", "",
             *schema.table(rows, ["dataset", "mechanism", "tool", "seed", "status", "import_s", "fit_s", "sample_s",
                                  "wall_s", "peak_mib", "tvd2_mean", "tvd2_max", "tvd1_mean", "tvd1_max",
                                  "out_of_domain"]), ""]
    schema.write_result(SUITE, args.out, rows, meta, page=page, quiet=quiet, summary=summ, settings=settings)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench mechanisms synthesizer_tools", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="titanic only, one seed")
    ap.add_argument("--datasets", default="adult,titanic")
    ap.add_argument("--mechanisms", default="mst,aim")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--seeds", default="2", help="seeds 0..S-1 per dataset: S, or per dataset (adult=1,titanic=2)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start a dataset's next seed only while the time so far plus its last seed's stays below this")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run before it is killed")
    ap.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join(schema.ROOT, "..", "shared", "data")))
    ap.add_argument("--pgmjax-python", default=sys.executable)
    ap.add_argument("--dpmm-python", default="/tmp/v_dpmm/bin/python")
    ap.add_argument("--smartnoise-python", default="/tmp/v_sn/bin/python")
    ap.add_argument("--out", default=NAME)
    args = ap.parse_args(argv)
    names = ["titanic"] if args.quick else [n for n in args.datasets.split(",") if n]
    per = dict(kv.split("=") for kv in args.seeds.split(",")) if "=" in args.seeds else {n: args.seeds for n in names}
    seeds = {n: 1 if args.quick else int(per.get(n, 1)) for n in names}
    missing = [n for n in names if not os.path.exists(os.path.join(args.data, n, f"{n}-domain.json"))]
    if missing:
        print(f"synthesizer_tools: no {missing} under {args.data} (pass --data or set PGMJAX_DATA); skipped")
        return 0
    tools, mechs = args.tools.split(","), args.mechanisms.split(",")
    envs = {}
    for tool in tools:
        py = python_of(args, tool)
        try:
            envs[tool] = json.loads(subprocess.run([py, "-c", VERSIONS % (PACKAGES[tool],)], capture_output=True,
                                                   text=True, timeout=120).stdout)
        except (OSError, ValueError, subprocess.SubprocessError):
            envs[tool] = {"missing": py}
    load0, start, rows, notes = [round(x, 2) for x in os.getloadavg()], time.perf_counter(), [], []
    with tempfile.TemporaryDirectory(prefix="synth_tools_") as tmp:
        for name in names:
            last = 0.0
            for seed in range(seeds[name]):
                spent = time.perf_counter() - start
                if seed and args.budget_s and spent + last > args.budget_s:
                    notes.append(f"{name}: {seed} of {seeds[name]} seeds run: the next would have passed --budget-s "
                                 f"{args.budget_s:g} ({spent:.0f} s spent, the last seed took {last:.0f} s)")
                    break
                t0 = time.perf_counter()
                for mech, tool in itertools.product(mechs, tools):  # the tools alternate: each sees the same load
                    rows.append(run_one(args, tool, mech, name, seed, tmp))
                    print(json.dumps(rows[-1], default=str), flush=True)
                    write(args, argv, rows, envs, load0, notes, quiet=True)
                last = time.perf_counter() - t0
    write(args, argv, rows, envs, load0, notes, quiet=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
