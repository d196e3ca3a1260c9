"""Memory of ``pgmjax.estimate`` in a loop over new structures: resident set and memory maps every 100 fits.

Every fit is a new structure (three attributes whose sizes change from fit to fit; measurements on
``(a, b)`` and ``(b, c)``), so every fit compiles new programs. Without a bound the engine's jit caches
keep every one of them (issue 40: about 4.4 MB and 130 memory maps per structure; the kernel's limit on a
process's maps is ``vm.max_map_count``, 65,530 by default). :func:`pgmjax.programs.bound_compiled`, called
before every fit by :func:`pgmjax.graph.oracle_plan.make_plan`, frees them once more than
``MAX_LIVE_PROGRAMS`` are live. ``--no-bound`` sets ``pgmjax.compiler.MAX_LIVE_PROGRAMS = 0`` (the behaviour before).

Usage:
    python -m bench memory memory_loop --structures 2000 --out memory_loop_cpu     # bench/results/memory/
    python -m bench memory memory_loop --structures 400 --no-bound --out memory_loop_unbounded_cpu
"""

from __future__ import annotations

import argparse
import time



def map_count() -> int:
    """Lines of /proc/self/maps: the process's memory mappings (-1 where there is no /proc)."""
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:
        return -1


def structure(i: int):
    """The i-th structure: a domain of three attributes of sizes 2..14, distinct for i < 13^3 = 2197."""
    import pgmjax as pj

    a, b, c = 2 + i % 13, 2 + (i // 13) % 13, 2 + (i // 169) % 13
    return pj.Domain({"a": a, "b": b, "c": c})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--structures", type=int, default=2000)
    parser.add_argument("--every", type=int, default=100, help="record every this many fits")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--no-bound", action="store_true", help="pgmjax.compiler.MAX_LIVE_PROGRAMS = 0: never free programs")
    parser.add_argument("--out", default=None, help="result name under bench/results/memory/ (or a path); without it "
                        "the page is only printed")
    args = parser.parse_args(argv)
    args.argv = argv
    import numpy as np
    from bench.benchutil import proc_status

    import pgmjax as pj

    if args.no_bound:
        pj.compiler.MAX_LIVE_PROGRAMS = 0  # what estimate passes to bound_compiled: never free
    from pgmjax import programs

    rng = np.random.default_rng(0)
    rows = []

    def record(fits: int, seconds: float) -> None:
        st = proc_status("VmRSS", "VmHWM")
        rows.append({"fits": fits, "rss_mib": round(st.get("VmRSS", float("nan")), 1),
                     "peak_rss_mib": round(st.get("VmHWM", float("nan")), 1), "maps": map_count(),
                     "live_programs": programs.compiled_count(), "seconds": round(seconds, 1)})
        print(rows[-1], flush=True)

    start = time.perf_counter()
    record(0, 0.0)
    for i in range(args.structures):
        dom = structure(i)
        ms = [pj.Measurement(c, rng.random(dom.size(c)) * 10 + 1, stddev=1.0) for c in (("a", "b"), ("b", "c"))]
        pj.estimate(dom, ms, iters=args.iters)
        if (i + 1) % args.every == 0 or i + 1 == args.structures:
            record(i + 1, time.perf_counter() - start)
            if i + 1 < args.structures:
                # Written at every record: a run that dies (XLA:CPU out of memory maps, without a Python
                # exception) leaves its rows and says it did not finish.
                write(args, rows, pj, programs, f"incomplete: the process ended after fit {i + 1} and before "
                      f"fit {min(i + 1 + args.every, args.structures)} without finishing", quiet=True)
    write(args, rows, pj, programs, "complete")


def write(args, rows, pj, programs, status: str, quiet: bool = False) -> None:
    """Publish the rows so far (JSON and Markdown) with the run's status."""
    from bench import schema

    first = next((r for r in rows if r["fits"] >= args.every), rows[-1])
    last = rows[-1]
    span = max(last["fits"] - first["fits"], 1)
    per_fit_mb = (last["rss_mib"] - first["rss_mib"]) * 2**20 / 1e6 / span
    per_fit_maps = (last["maps"] - first["maps"]) / span
    run = schema.run_meta("bench.memory_loop", args.argv)
    bound = "none (MAX_LIVE_PROGRAMS = 0)" if args.no_bound else f"MAX_LIVE_PROGRAMS={programs.MAX_LIVE_PROGRAMS}"
    lines = [
        "# pgmjax.estimate in a loop over new structures: memory",
        "",
        *schema.header_lines(run),
        f"{args.structures} structures (three attributes of sizes 2-14, measurements on (a, b) and (b, c), "
        f"{args.iters} iterations each); bound on live compiled programs: {bound}. Run: {status}.",
        f"Growth from fit {first['fits']} to fit {last['fits']}: {per_fit_mb:.3f} MB and {per_fit_maps:.2f} "
        "memory maps per fit.",
        "",
        "| fits | RSS (MiB) | peak RSS (MiB) | memory maps | live programs | seconds |",
        "|---:|---:|---:|---:|---:|---:|",
        *(f"| {r['fits']} | {r['rss_mib']} | {r['peak_rss_mib']} | {r['maps']} | {r['live_programs']} | {r['seconds']} |"
          for r in rows),
    ]
    if args.out:
        schema.write_result("memory", args.out, rows, run, page=lines, quiet=quiet, structures=args.structures,
                            iters=args.iters, bound=bound, status=status, per_fit_mb=per_fit_mb,
                            per_fit_maps=per_fit_maps)
    elif not quiet:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
