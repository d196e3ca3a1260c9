"""What one pass over every cell costs on XLA:CPU, by kind of pass: the price of a junction-tree layout with
one kernel for tables of different shapes.

The engine stacks tables of one shape (a clique class) into one dense block, so a message is a reduction
over a block's trailing axes and lands in its parent by a broadcast: dense passes, but a kernel per class,
and a fit's compile time grows with the number of classes. Putting tables of different shapes into one
kernel needs index arrays instead: a gather to land each message in its parent's cells (upward) and a
scatter-add to send each parent's cells back to a child's separator (downward). This times those passes
against the dense ones the engine runs now, over as many cells as a problem's junction tree holds
(generated d=50 by default: 2.3M cells in 40 classes), each the fastest of 20 calls of a program compiled
with the engine's options.

Usage::

    python bench/flat_layout_costs.py --problem gen50 --out bench/results/flat_layout_costs_cpu.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def fastest(f, *args, calls: int = 20) -> float:
    """The fastest of ``calls`` calls of ``f(*args)`` after a first (compiling) one, in milliseconds."""
    import jax

    jax.block_until_ready(f(*args))
    best = float("inf")
    for _ in range(calls):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def measure(cells: int, separators: int, row: int = 64) -> dict:
    """Milliseconds per pass over ``cells`` float32 cells, messages of ``separators`` cells in all."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from pgmjax.compiler import jit

    rng = np.random.default_rng(0)
    x = jax.device_put(rng.random(cells).astype(np.float32))
    msg = jax.device_put(rng.random(separators).astype(np.float32))
    scattered = jax.device_put(rng.integers(0, separators, cells).astype(np.int32))
    grouped = jax.device_put(np.sort(rng.integers(0, separators, cells)).astype(np.int32))
    rows = (cells // row) * row
    per_row = jax.device_put(rng.random(rows // row).astype(np.float32))  # a message entry per row of cells
    passes = {
        "dense: exp of every cell": (jit(lambda a: jnp.exp(a) * 2.0, engine=True), x),
        f"dense: sum of rows of {row}": (jit(lambda a: jnp.sum(a[:rows].reshape(-1, row), axis=1), engine=True), x),
        "dense: broadcast add of a message": (
            jit(lambda a, m: (a[:rows].reshape(-1, row) + m[:, None]).reshape(-1), engine=True), x, per_row),
        "gather: a message into every cell": (jit(lambda m, i: m[i], engine=True), msg, scattered),
        "scatter-add: every cell onto a message": (
            jit(lambda a, i: jax.ops.segment_sum(a, i, separators), engine=True), x, scattered),
        "scatter-add, sorted segments": (
            jit(lambda a, i: jax.ops.segment_sum(a, i, separators, indices_are_sorted=True), engine=True), x, grouped),
    }
    return {name: fastest(f, *args) for name, (f, *args) in passes.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default="gen50", help="an engine benchmark problem (engine_problems.py)")
    ap.add_argument("--out", help="results .json (a .md is written beside it)")
    args = ap.parse_args()
    import benchutil
    import engine_problems as ep

    import pgmjax as pj
    from pgmjax.graph.oracle_plan import make_plan

    problem = ep.make(args.problem)
    domain = pj.Domain(problem["domain"])
    plan = make_plan(domain, problem["cliques"])
    separators = sum(domain.size(s) for s in plan.tree.separators)
    classes = sum(len(r.classes) for r in plan.runs)
    ms = measure(plan.cells, max(separators, 1))
    run = benchutil.run_record("flat_layout_costs.py")
    lines = [
        "# One pass over every cell of a junction tree, by kind of pass (XLA:CPU)",
        "",
        *benchutil.results_header(run),
        "",
        f"Problem: {args.problem} ({plan.cells:,} cells in {len(plan.cliques)} junction-tree cliques, {classes} "
        f"clique classes; separators {separators:,} cells). The fastest of 20 calls, programs compiled with the "
        "engine's options (`pgmjax.compiler.jit(engine=True)`).",
        "",
        "| pass | ms |",
        "|---|---|",
        *(f"| {k} | {v:.2f} |" for k, v in ms.items()),
    ]
    benchutil.publish(lines, args.out, {"run": run, "problem": args.problem, "cells": plan.cells, "classes": classes,
                                        "separator_cells": separators, "ms": ms})


if __name__ == "__main__":
    main()
