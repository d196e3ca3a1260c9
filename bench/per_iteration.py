"""Per-iteration time of pgmjax and mbi 2.0 on engine-benchmark problems, robust to a noisy machine.

``engine.py`` reports medians of two warm calls, and on a shared 2-core machine one slow spell moves a
problem's per-iteration ratio by 2x or more (Stroke read 0.56x, 1.36x and 0.76x in three runs of one
evening). Here each engine runs in fresh processes that alternate ``--rounds`` times; each process
compiles, then times ``--calls`` calls of ``estimate(N)`` and of ``estimate(0)`` (the call's fixed cost)
and reports ``(min estimate(N) - min estimate(0)) / N``: the fastest the machine ran it, the least
disturbed sample. Medians are reported beside it. Both engines run mirror descent in float32 on the same
noisy answers (the engine benchmark's problems, ``bench/problems.py``).

Usage::

    python -m bench.per_iteration --problems stroke loans --iters 400 --rounds 3 \
        --out bench/results/engine/per_iteration_cpu.json     # writes the .json and a .md beside it
    python -m bench.per_iteration --render bench/results/engine/per_iteration_cpu.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench import children, schema

ENGINES = ("pgmjax", "mbi")


def _fit_pgmjax(p):
    import jax

    import pgmjax as pj

    domain = pj.Domain(p["domain"])
    meas = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]

    def fit(n):
        t = time.perf_counter()
        model, report = pj.estimate(domain, meas, "mirror_descent", iters=n, chunk=50, report=True)
        jax.block_until_ready(model.theta)
        return time.perf_counter() - t, report.history[-1]["oracle_calls"] if n else 0

    return fit


def _fit_mbi(p):
    import warnings

    import jax
    import jax.numpy as jnp

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="JAX is running in float32")
        import mbi
    from mbi import estimation

    names = list(p["domain"])
    domain = mbi.Domain(names, [p["domain"][a] for a in names])
    meas = [mbi.LinearMeasurement(jnp.asarray(y.ravel(), jnp.float32), tuple(c), stddev=p["sigma"])
            for c, y in zip(p["cliques"], p["noisy"])]
    est = estimation.MirrorDescent()

    def fit(n):
        t = time.perf_counter()
        model = est.estimate(domain, meas, iters=n)
        jax.block_until_ready(model)
        return time.perf_counter() - t, None

    return fit


def child(engine: str, problem_file: str, iters: str, calls: str, result_file: str) -> None:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    from bench import problems as ep

    p = ep.load(problem_file)
    fit = (_fit_pgmjax if engine == "pgmjax" else _fit_mbi)(p)
    n, k = int(iters), int(calls)
    fit(n)  # compile (and warm)
    fit(0)
    full, oracle_calls = zip(*(fit(n) for _ in range(k)))
    fixed = [fit(0)[0] for _ in range(k)]
    out = {"iters": n, "full_s": full, "fixed_s": fixed, "oracle_calls": oracle_calls[0],
           "ms_per_iter_min": 1e3 * (min(full) - min(fixed)) / n,
           "ms_per_iter_median": 1e3 * (statistics.median(full) - statistics.median(fixed)) / n}
    with open(result_file, "w") as f:
        json.dump(out, f)


def render(data: dict) -> list[str]:
    """The result's Markdown page."""
    run, rows = schema.meta_of(data), data["rows"]
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    lines = [
        "# Per iteration, pgmjax and mbi 2.0, fastest of several calls (mirror descent, float32, CPU)",
        "",
        *schema.header_lines(run),
        "Each cell: fresh processes alternating between the engines by round; a process compiles, then times "
        "its calls of `estimate(N)` and of `estimate(0)`; per iteration = (fastest estimate(N) - fastest "
        "estimate(0)) / N, the least disturbed sample. `min` is the fastest over the rounds, `median` the "
        "median over the rounds of each process's median-based figure. Ratio = mbi / pgmjax (above 1: pgmjax "
        "faster). pgmjax's oracle calls per iteration (line-search trials) are given; mbi's are not exposed.",
        "",
        "| problem | N | pgmjax ms/iter min (median) | mbi ms/iter min (median) | ratio of mins | ratio of medians | pgmjax oracle calls / iter | rounds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for prob in problems:
        got = {e: [r for r in rows if r["problem"] == prob and r["engine"] == e] for e in ENGINES}
        if not all(got.values()):
            continue
        mins = {e: min(r["ms_per_iter_min"] for r in got[e]) for e in ENGINES}
        meds = {e: statistics.median(r["ms_per_iter_median"] for r in got[e]) for e in ENGINES}
        n = got["pgmjax"][0]["iters"]
        calls = got["pgmjax"][0]["oracle_calls"] / n
        lines.append(f"| {prob} | {n} | {mins['pgmjax']:.3f} ({meds['pgmjax']:.3f}) | {mins['mbi']:.3f} ({meds['mbi']:.3f}) | "
                     f"{mins['mbi'] / mins['pgmjax']:.2f}x | {meds['mbi'] / meds['pgmjax']:.2f}x | {calls:.2f} | "
                     f"{len(got['pgmjax'])} |")
    if data.get("notes"):
        lines += ["", "Notes. " + data["notes"]]
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", default=["stroke", "loans"])
    ap.add_argument("--iters", type=int, default=400, help="N, iterations per timed call")
    ap.add_argument("--calls", type=int, default=5, help="timed calls of estimate(N) and of estimate(0) per process")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="per_iteration_cpu",
                    help="result name under bench/results/engine/ (or a path); a .json and a .md")
    ap.add_argument("--render", help="only write the .md of this JSON")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    if args.render:
        with open(args.render) as f:
            schema.write_page(args.render, render(json.load(f)))
        return
    rows = []
    for row in children.alternating("bench.per_iteration", args.problems, args.rounds, ENGINES,
                              lambda path, engine, rnd, folder: [engine, path, str(args.iters), str(args.calls)],
                              arm_key="engine"):
        rows.append(row)
        print(f"{row['problem']:>10} r{row['round']} {row['engine']:<6} {row['ms_per_iter_min']:8.3f} ms/iter (min), "
              f"{row['ms_per_iter_median']:8.3f} (median)", flush=True)
    meta = schema.run_meta("bench.per_iteration", argv, extra=("mbi",))
    schema.write_result("engine", args.out, rows, meta, page=render({"meta": meta, "rows": rows}))


if __name__ == "__main__":
    main()
