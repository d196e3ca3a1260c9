"""The opt-in persistent compilation cache against a first fit's wait, on the engine benchmark's problems.

For each problem (``engine_problems.py``), fresh processes time a first ``estimate(50)`` (mirror descent,
float32) in three modes, alternating round by round so drift of a shared machine hits all alike:

* ``none``: no cache (pgmjax's default);
* ``cold``: :func:`pgmjax.programs.enable_compilation_cache` on a new, empty folder (the process that fills it:
  what the cache costs a first run);
* ``warm``: the same call on the folder ``cold`` filled (a later process fitting the same structure, e.g. the
  next run of a script, a notebook's restarted kernel, a test session): JAX's persistent cache, the program
  traced and lowered to find its key, then loaded instead of compiled.

Each child reports the first call's wall time, the seconds JAX spent in XLA's backend compile (on a cache hit:
loading the program) and in lowering to MLIR, and a warm ``estimate(50)`` (median of 3) for reference; the
difference first - warm is what the structure's first call costs above a compiled one (tracing, lowering,
compiling or loading).

Each child also counts JAX's cache hits (``/jax/compilation_cache/cache_hits``): a warm child that loaded
nothing would not be measuring the cache.

Usage (the quick form, a few minutes on 2 cores; the default problems take about twice as long)::

    python -m bench.compilation_cache --problems chain10 titanic adult_mst nltcs_2way stroke gen15 gen50 \
        --rounds 2 --out bench/results/engine/compilation_cache_cpu.json     # writes the .json and a .md beside it
    python -m bench.compilation_cache --render bench/results/engine/compilation_cache_cpu.json
"""

from __future__ import annotations

import argparse
import json
import statistics

from bench import children, schema

MODES = ("none", "cold", "warm")

#: The engine benchmark's problems of at most 50 cliques (the first-fit target's scope).
DEFAULT_PROBLEMS = ("chain10", "chain100", "titanic", "adult", "loans", "stroke", "adult_mst", "nltcs_2way",
                    "gen15", "gen50")


def child(problem_file: str, mode: str, cache: str, result_file: str) -> None:
    import jax
    import jax.monitoring

    import pgmjax.programs

    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **_: hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None)
    if mode == "none":
        jax.config.update("jax_enable_compilation_cache", False)
    else:
        pgmjax.programs.enable_compilation_cache(cache)
    from bench import problems as ep
    from bench.benchutil import CompileEvents

    timed = ep.timed_fits(problem_file)
    events = CompileEvents().install()
    events.active = True
    first, fit = timed(50)
    events.active = False
    first_hits = len(hits)
    warm = statistics.median(timed(50)[0] for _ in range(3))
    with open(result_file, "w") as f:
        json.dump({"first_call_s": first, "warm_call_s": warm, "loss50": float(fit.report.loss),
                   "cache_hits": first_hits, **events.summary()}, f)


def render(data: dict) -> list[str]:
    """The result's Markdown page."""
    run, rows = schema.meta_of(data), data["rows"]
    by = {}
    for r in rows:
        by.setdefault((r["problem"], r["mode"]), []).append(r)
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    lines = [
        "# First fit with and without the persistent compilation cache",
        "",
        *schema.header_lines(run),
        "A first `estimate(50)` (mirror descent, float32, 50-iteration chunk) in a fresh process per cell, modes "
        "alternating by round. none: no cache (the default); cold: `pgmjax.programs.enable_compilation_cache` on an "
        "empty folder (the run that fills it); warm: the same folder, filled by the cold run of that round (JAX's "
        "persistent cache: the program traced and lowered to find its key, then loaded). Hits: JAX's cache hits "
        "during the first call. "
        "XLA: JAX's backend-compile seconds (on a cache hit, loading the program); lowering: JAX's lowering to MLIR. "
        "Warm call: a later `estimate(50)` in the same process (median of 3), for reference. Medians over the "
        "rounds; every sample is in the JSON.",
        "",
        "| problem | mode | first call (s) | XLA (s) | lowering (s) | warm call (s) | first - warm (s) | hits | rounds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in problems:
        for mode in MODES:
            rs = by.get((p, mode), [])
            if not rs:
                continue

            def med(key):
                return statistics.median(r[key] for r in rs)

            lines.append(
                f"| {p} | {mode} | {med('first_call_s'):.2f} | {med('xla_compile_s'):.2f} | {med('mlir_lowering_s'):.2f} | "
                f"{med('warm_call_s'):.3f} | {med('first_call_s') - med('warm_call_s'):.2f} | "
                f"{', '.join(str(r.get('cache_hits', '-')) for r in rs)} | "
                f"{', '.join(format(r['first_call_s'], '.2f') for r in rs)} |")
    if data.get("notes"):
        lines += ["", "Notes. " + data["notes"]]
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", default=list(DEFAULT_PROBLEMS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="compilation_cache_cpu",
                    help="result name under bench/results/engine/ (or a path); a .json and a .md")
    ap.add_argument("--render", help="only write the .md of this JSON")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    if args.render:
        with open(args.render) as f:
            schema.write_page(args.render, render(json.load(f)))
        return
    rows = []
    # each round's cache folder is new: "cold" fills it, "warm" reads it
    for row in children.alternating("bench.compilation_cache", args.problems, args.rounds, MODES,
                              lambda path, mode, rnd, folder: [path, mode, f"{path}.cache{rnd}"], arm_key="mode",
                              drop_env=("XLA_FLAGS", "PGMJAX_COMPILATION_CACHE")):
        rows.append(row)
        print(f"{row['problem']:>10} r{row['round']} {row['mode']:<5} first {row['first_call_s']:6.2f} s  "
              f"xla {row['xla_compile_s']:5.2f} s  lowering {row['mlir_lowering_s']:4.2f} s  "
              f"warm {row['warm_call_s']:6.3f} s  hits {row['cache_hits']}", flush=True)
    meta = schema.run_meta("bench.compilation_cache", argv)
    schema.write_result("engine", args.out, rows, meta, page=render({"meta": meta, "rows": rows}))


if __name__ == "__main__":
    main()
