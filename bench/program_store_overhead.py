"""What calling through the program store costs per call, against the ordinary jitted call.

A stored program (:mod:`pgmjax.program_store`) is called through JAX's ahead-of-time interface after pgmjax
builds the call's signature (argument structure and shapes) to find it. This times a small model's
marginals (three attributes, two cliques: the program itself takes microseconds, so the call's overhead is
what shows) both ways: loops of 2,000 calls, the two ways alternating five times, the fastest loop of each.

Usage::

    python bench/program_store_overhead.py --out bench/results/program_store_overhead_cpu.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def per_call_us(f, args, calls: int) -> float:
    import jax

    jax.block_until_ready(f(*args))
    t = time.perf_counter()
    for _ in range(calls):
        out = f(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", help="results .json (a .md is written beside it)")
    args = ap.parse_args()
    import benchutil

    import pgmjax as pj
    from pgmjax import program_store
    from pgmjax.graph.oracle_plan import make_plan
    from pgmjax.model import graphical_model

    plan = make_plan(pj.Domain({"a": 2, "b": 3, "c": 4}), [("a", "b"), ("b", "c")])
    call_args = (plan, plan.zeros(), 24.0)
    f = graphical_model._marginals_jit
    samples = {"jit": [], "store": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            program_store.disable()
            f.clear_cache()
            samples["jit"].append(per_call_us(f, call_args, args.calls))
            program_store.enable(folder)
            samples["store"].append(per_call_us(f, call_args, args.calls))
            f.clear_cache()
        program_store.disable()
    best = {k: min(v) for k, v in samples.items()}
    run = benchutil.run_record("program_store_overhead.py")
    lines = [
        "# Calling a stored program against the ordinary jitted call",
        "",
        *benchutil.results_header(run),
        "",
        f"A small model's marginals (`graphical_model._marginals_jit`, 3 attributes, 2 cliques), loops of "
        f"{args.calls:,} calls, the two ways alternating {args.rounds} times; microseconds per call.",
        "",
        "| call | fastest loop (µs) | every loop (µs) |",
        "|---|---|---|",
        *(f"| {k} | {best[k]:.1f} | {', '.join(f'{x:.1f}' for x in v)} |" for k, v in samples.items()),
        "",
        f"Overhead of the store: {best['store'] - best['jit']:.1f} µs per call.",
    ]
    benchutil.publish(lines, args.out, {"run": run, "samples_us": samples, "fastest_us": best})


if __name__ == "__main__":
    main()
