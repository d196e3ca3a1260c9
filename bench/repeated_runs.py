"""Repeated runs in one process: memory and compiled programs over thousands of mechanism calls (issue 15).

A benchmark sweep calls a mechanism thousands of times in one process with the same structure
(dataset, workload) and other budgets and keys. Before the fix every ``dualquery()`` call compiled its
likelihood afresh and JAX kept every program: about 3 MB and 48 memory maps more per call, until XLA:CPU
failed inside LLVM ("Cannot allocate memory") after ~1,300 calls. This script runs each mechanism
``--calls`` times on a small generated table (budgets cycling through ``EPSILONS``, a new key per call)
and records, every ``--every`` calls: resident memory (``/proc/self/statm``), the number of memory maps
(lines of ``/proc/self/maps``), the engine's live compiled programs (:func:`pgmjax.programs.compiled_count`),
the XLA compilations so far (JAX's compile events) and the elapsed time.

Usage::

    nice python -m bench.repeated_runs                              # the committed run
    python -m bench.repeated_runs --mechanism dualquery --calls 200 --every 20 --out /tmp/dq.json
    python -m bench.repeated_runs --render                          # md + png from the JSON

Outputs ``bench/results/memory/repeated_runs_cpu.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import numpy as np

from bench import schema
from bench.benchutil import CompileEvents

EPSILONS = (0.5, 1.0, 2.0, 3.0)
# (mechanism, calls) of the committed run: DualQuery, the case, 2,000 times; the others a few hundred.
# MWEM and PrivBayes choose their structure privately, so new keys bring new structures and compilations
# (seconds each on this machine): fewer calls.
PLAN = (("dualquery", 2000), ("mldp", 500), ("hdmm", 300), ("privbayes", 100), ("mwem", 40))


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def _table(n=500, seed=0):
    import pgmjax as pj

    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, n)
    b = (a // 2 + (rng.random(n) < 0.2)) % 3
    c = (a + (rng.random(n) < 0.3)) % 4
    d = (c > 1).astype(int) ^ (rng.random(n) < 0.1)
    return pj.Dataset(np.stack([a, b, c, d], 1), {"a": 6, "b": 3, "c": 4, "d": 2})


def _runner(name: str, data):
    import jax

    import pgmjax as pj
    from pgmjax.mechanisms import QuerySet, dualquery, hdmm, mldp, mwem, privbayes

    dom = data.domain
    w = pj.Workload.benchmark(dom, [("a", "b"), ("a", "c"), ("c", "d")], numeric=["a"])
    training = QuerySet.cells(dom, ("a", "b")) + QuerySet.cells(dom, ("c", "d"))
    runs = {
        "dualquery": lambda eps, k: dualquery(data, eps, 1e-3, key=k, workload=w, samples=20, engine_iters=50),
        "mldp": lambda eps, k: mldp(data, eps, key=k, training=training, engine_iters=50),
        "hdmm": lambda eps, k: hdmm(data, eps, key=k, workload=w, restarts=2, engine_iters=50, synthetic=False),
        "privbayes": lambda eps, k: privbayes(data, eps, key=k, engine_iters=50),
        "mwem": lambda eps, k: mwem(data, eps, key=k, workload=w, rounds=3, engine_iters=50, mw_iters=50),
    }
    fn = runs[name]
    return lambda i: fn(EPSILONS[i % len(EPSILONS)], jax.random.key(i))


def run_one(name: str, calls: int, every: int) -> dict:
    from pgmjax.programs import compiled_count

    compiles = CompileEvents(active=True).install().xla
    data = _table()
    call = _runner(name, data)
    rows = []
    start = time.perf_counter()

    def record(i):
        rows.append({"calls": i, "rss_mb": _rss_mb(), "maps": _maps(), "engine_programs": compiled_count(),
                     "compiles": len(compiles), "seconds": time.perf_counter() - start})
        r = rows[-1]
        print(f"{name} {i:5d} calls: rss {r['rss_mb']:.1f} MB, maps {r['maps']}, engine programs {r['engine_programs']}, "
              f"compiles {r['compiles']}, {r['seconds']:.1f} s", flush=True)

    record(0)
    for i in range(1, calls + 1):
        call(i)
        if i % every == 0 or i == calls:
            record(i)
    return {"mechanism": name, "calls": calls, "every": every, "rows": rows}


def _meta() -> dict:
    import jax

    import pgmjax as pj
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {schema.cpu_model()}",
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "pgmjax": getattr(pj, "__version__", "?"),
        "epsilons": list(EPSILONS),
        "table": "500 records, 4 attributes (6, 3, 4, 2 values); workload: 3 two-way cliques (Prefix on a)",
    }


def render(path_json: str) -> None:
    """Re-render the page and plot beside a result's JSON."""
    with open(path_json) as f:
        doc = json.load(f)
    base = os.path.splitext(path_json)[0]
    schema.write_page(base, page(doc))
    plot(doc, base)


def page(doc: dict) -> list[str]:
    """The result's Markdown page."""
    meta, runs = doc["meta"], schema.rows_of(doc, "runs")
    machine = meta["machine"]
    if isinstance(machine, dict):  # bench.schema's record
        machine = f"{machine['cpu']}, {machine['cores']} cores, commit {meta['commit']}"
    lines = [
        "# Repeated runs in one process (`bench.repeated_runs`)",
        "",
        f"{meta['date']}; {machine}; Python {meta['python']}, jax {meta['jax']}, numpy {meta['numpy']}. "
        f"Table: {meta['table']}; budgets cycle through {meta['epsilons']}, a new key per call. "
        "The machine is shared with other work: times are indicative.",
        "",
        "RSS and memory maps at the first record, at the middle of the run and at its end (maps: also the largest "
        "seen); XLA compilations so far at the same points. Mechanisms that choose their structure privately (PrivBayes, "
        "MWEM) compile for new structures and free the engine's programs above 32 live ones: their maps rise and fall.",
        "",
        "| mechanism | calls | RSS MB: first / half / end | maps: first / half / end (max) | XLA compiles: first / half / end | engine programs (max) | s / call (second half) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        rows = r["rows"]
        first = rows[1] if len(rows) > 1 else rows[0]
        half = rows[len(rows) // 2]
        end = rows[-1]
        secs = (end["seconds"] - half["seconds"]) / max(end["calls"] - half["calls"], 1)
        lines.append(
            f"| {r['mechanism']} | {r['calls']} | {first['rss_mb']:.0f} / {half['rss_mb']:.0f} / {end['rss_mb']:.0f} | "
            f"{first['maps']} / {half['maps']} / {end['maps']} ({max(x['maps'] for x in rows)}) | "
            f"{first['compiles']} / {half['compiles']} / {end['compiles']} | {max(x['engine_programs'] for x in rows)} | {secs:.3f} |"
        )
    lines += ["", "Rows every `every` calls are in the JSON (calls, rss_mb, maps, engine_programs, compiles, seconds)."]
    if doc.get("notes"):
        lines += ["", *doc["notes"]]
    return lines


def plot(doc: dict, base: str) -> None:
    """``<base>.png``: memory, maps and compilations against calls."""
    meta, runs = doc["meta"], schema.rows_of(doc, "runs")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    for r in runs:
        x = [row["calls"] for row in r["rows"]]
        axes[0].plot(x, [row["rss_mb"] for row in r["rows"]], marker=".", label=r["mechanism"])
        axes[1].plot(x, [row["maps"] for row in r["rows"]], marker=".", label=r["mechanism"])
        axes[2].plot(x, [row["compiles"] for row in r["rows"]], marker=".", label=r["mechanism"])
    for ax, title in zip(axes, ("resident memory (MB)", "memory maps (/proc/self/maps lines)", "XLA compilations (cumulative)")):
        ax.set_xlabel("calls in the process")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle(f"Repeated mechanism calls in one process ({meta['date']}, jax {meta['jax']}, CPU)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(base + ".png", dpi=110)


def _add_log(path_json: str, log: str, label: str) -> None:
    """Append the rows printed by a run (``NAME CALLS calls: rss X MB, maps M, engine programs P, compiles C, S s``)."""
    import re

    pat = re.compile(r"^\S+\s+(\d+) calls: rss ([\d.]+) MB, maps (\d+), engine programs (\d+), compiles (\d+), ([\d.]+) s")
    rows = []
    with open(log) as f:
        for line in f:
            m = pat.match(line)
            if m:
                c, rss, maps, progs, comp, secs = m.groups()
                rows.append({"calls": int(c), "rss_mb": float(rss), "maps": int(maps), "engine_programs": int(progs),
                             "compiles": int(comp), "seconds": float(secs)})
    with open(path_json) as f:
        doc = json.load(f)
    key = "rows" if "rows" in doc else "runs"
    doc[key] = [r for r in doc[key] if r["mechanism"] != label] + [
        {"mechanism": label, "calls": rows[-1]["calls"], "every": rows[1]["calls"] - rows[0]["calls"], "rows": rows}]
    with open(path_json, "w") as f:
        json.dump(doc, f, indent=1)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mechanism", help="run only this mechanism (default: the committed plan, each in a fresh process)")
    ap.add_argument("--calls", type=int, default=None)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--out", default="repeated_runs_cpu", help="result name under bench/results/memory/ (or a path)")
    ap.add_argument("--render", action="store_true", help="only write the md and png from the JSON")
    ap.add_argument("--add-log", nargs=2, metavar=("LOG", "LABEL"),
                    help="add a run from this script's printed log (e.g. the code before the fix, stopped early) under LABEL, then render")
    args = ap.parse_args(argv)
    path = schema.result_path("memory", args.out) + ".json"
    if args.add_log:
        _add_log(path, *args.add_log)
        render(path)
        return
    if args.render:
        render(path)
        return
    if args.mechanism:  # one mechanism in this process
        calls = args.calls or dict(PLAN)[args.mechanism]
        doc = {"meta": _meta(), "runs": [run_one(args.mechanism, calls, args.every)]}
        with open(path, "w") as f:  # one part of the plan, for the parent (not a result)
            json.dump(doc, f, indent=1)
        return
    # The plan: each mechanism in a fresh process (so one's programs do not count against another's).
    import subprocess
    import tempfile

    runs = []
    for name, calls in PLAN:
        every = 100 if calls >= 1000 else max(5, calls // 20)
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
            part = tmp.name
        subprocess.run([sys.executable, "-m", "bench.repeated_runs", "--mechanism", name,
                        "--calls", str(calls if args.calls is None else args.calls), "--every", str(every), "--out", part],
                       check=True, cwd=schema.ROOT)
        with open(part) as f:
            part_doc = json.load(f)
        os.unlink(part)
        runs += part_doc["runs"]
    meta = schema.run_meta("bench.repeated_runs", argv, also=_meta())
    doc = {"meta": meta, "rows": runs}
    schema.write_result("memory", path, runs, meta, page=page(doc))
    plot(doc, os.path.splitext(path)[0])


if __name__ == "__main__":
    main()
