"""XLA:CPU's emitters for the engine's programs: a first fit's wait, and iteration speed.

For each problem of the engine benchmark (``bench/problems.py``), fresh processes alternate between three
modes, ``--rounds`` times, so drift of a shared machine hits all alike:

* ``by_size``, pgmjax's default: the loop emitters where the model's largest potential block has at most
  ``pgmjax.compiler.LOOP_EMITTERS_CELLS`` cells (and its measurements reduce a table into at most 8
  marginals per clique), XLA's MLIR fusion emitters otherwise;
* ``fusion``: the fusion emitters for every program (``XLA_FLAGS=--xla_cpu_use_fusion_emitters=true``, the
  default before the choice by size);
* ``loop``: the loop emitters for every program (``pgmjax.fast_compile()``, ``PGMJAX_FAST_COMPILE=1``).

Each child times

* the first ``estimate(50)`` (the whole wait of a new structure: tracing, XLA compile and 50 iterations) and
  the XLA compile seconds inside it;
* per iteration: ``(estimate(50) - estimate(0)) / 50`` (medians of 3) and, for the long run,
  ``(estimate(N) - estimate(0)) / N`` with ``N = --iters``;
* the loss after ``N`` iterations (both modes fit the same noisy measurements).

Usage::

    python -m bench.fast_compile --problems chain10 titanic adult_mst --rounds 2 --iters 500 \
        --out bench/results/engine/fast_compile_cpu.json      # writes the .json and a .md beside it
    python -m bench.fast_compile --render bench/results/engine/fast_compile_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

from bench import children, schema

MODES = ("by_size", "fusion", "loop")

#: Each mode's environment (on top of the parent's, less any XLA_FLAGS and PGMJAX_FAST_COMPILE).
MODE_ENV = {
    "by_size": {"PGMJAX_FAST_COMPILE": "0"},
    "fusion": {"PGMJAX_FAST_COMPILE": "0", "XLA_FLAGS": "--xla_cpu_use_fusion_emitters=true"},
    "loop": {"PGMJAX_FAST_COMPILE": "1"},
}


def child(problem_file: str, result_file: str, iters: int) -> None:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    from bench import problems as ep
    from bench.engine import CompileEvents

    import pgmjax as pj

    timed = ep.timed_fits(problem_file)
    events = CompileEvents().install()

    events.active = True
    first, _ = timed(50)
    events.active = False
    short = statistics.median(timed(50)[0] for _ in range(3))
    fixed = statistics.median(timed(0)[0] for _ in range(3))
    long_s, model = timed(iters)
    from pgmjax import compiler

    out = {"fast_compile": pj.programs.fast_compile_enabled(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
           "loop_emitters_cells": compiler.LOOP_EMITTERS_CELLS, "model_cells": model.plan.cells,
           "largest_block": model.plan.largest_block, "first_call_s": first,
           "ms_per_iter": 1e3 * (short - fixed) / 50, "ms_per_iter_long": 1e3 * (long_s - fixed) / iters,
           "iters": iters, "loss": float(model.loss), **events.summary()}
    with open(result_file, "w") as f:
        json.dump(out, f)


def render(out: dict, path: str) -> list[str]:
    """The result's Markdown page."""
    run, rows = schema.meta_of(out), out["rows"]
    med = {}
    for name in dict.fromkeys(r["problem"] for r in rows):
        for mode in MODES:
            rs = [r for r in rows if r["problem"] == name and r["mode"] == mode]
            if rs:
                med[name, mode] = {k: statistics.median(r[k] for r in rs) for k in
                                   ("first_call_s", "xla_compile_s", "ms_per_iter", "ms_per_iter_long", "loss")}
                med[name, mode]["n"] = len(rs)
    lines = [
        "# XLA:CPU's emitters for the engine's programs: chosen by model (default), fusion or loop everywhere",
        "",
        f"Machine: {run['machine'].get('cpu')}, {run['machine'].get('cores')} cores, CPU backend. Date: {run['date']}. "
        f"Versions: {', '.join(f'{k} {v}' for k, v in run['versions'].items())}. pgmjax commit {run.get('commit')}.",
        "",
        f"Fresh process per measurement, the modes alternating, {out['rounds']} rounds (medians shown). by size: "
        "pgmjax's default (loop emitters where the model's largest potential block has at most `LOOP_EMITTERS_CELLS` = "
        f"{rows[0].get('loop_emitters_cells', 0):,} cells, fusion emitters for larger blocks and for fits that reduce a "
        "table into more than 8 marginals per clique); fusion: XLA's MLIR fusion "
        "emitters for every program (the default before); loop: `pj.fast_compile()`. first fit = the first "
        "`estimate(50)` of a new structure in the process (tracing, XLA compile, 50 iterations); ms/iter = (warm "
        f"`estimate(50)` - warm `estimate(0)`) / 50; long = the same over {out['iters']} iterations; loss after "
        f"{out['iters']} iterations (float32).",
        "",
        "| problem | model cells (largest block) | first fit by size / fusion / loop (s) | XLA compile by size / fusion / loop (s) | "
        "ms/iter by size / fusion / loop | ms/iter long by size / fusion / loop | loss by size (rel. diff to fusion) |",
        "|---|---|---|---|---|---|---|",
    ]

    def three(m, key, fmt):
        return " / ".join(fmt(m[mode][key]) if mode in m else "-" for mode in MODES)

    for name in dict.fromkeys(r["problem"] for r in rows):
        m = {mode: med[name, mode] for mode in MODES if (name, mode) in med}
        if "by_size" not in m or "fusion" not in m:
            continue
        row = next(r for r in rows if r["problem"] == name)
        cells = f"{row.get('model_cells'):,}" + (f" ({row['largest_block']:,})" if "largest_block" in row else "")
        rel = abs(m["by_size"]["loss"] - m["fusion"]["loss"]) / abs(m["fusion"]["loss"])
        lines.append(
            f"| {name} | {cells} | {three(m, 'first_call_s', '{:.2f}'.format)} | {three(m, 'xla_compile_s', '{:.2f}'.format)} | "
            f"{three(m, 'ms_per_iter', '{:.3g}'.format)} | {three(m, 'ms_per_iter_long', '{:.3g}'.format)} | "
            f"{m['by_size']['loss']:,.1f} ({rel:.1e}) |"
        )
    lines += ["", *(f"* {n}" for n in out.get("notes", []))]
    lines += ["", f"Raw rows: `{os.path.basename(path)}.json`. Command: `{run.get('command')}`.", ""]
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", default=["chain10", "titanic", "adult_mst"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--out", default="fast_compile_cpu",
                    help="result name under bench/results/engine/ (or a path); a .json and a .md")
    ap.add_argument("--render", default=None, help="only write the .md of this JSON")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[2], int(args.child[1]))  # problem, iterations, result
        return
    if args.render:
        with open(args.render) as f:
            schema.write_page(args.render, render(json.load(f), os.path.splitext(args.render)[0]))
        return
    from bench import problems as ep

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in ep.saved(args.problems, tmp):
            for rnd in range(args.rounds):
                for mode in MODES if rnd % 2 == 0 else MODES[::-1]:
                    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PGMJAX_FAST_COMPILE")}
                    env = {**base, **MODE_ENV[mode]}
                    result = children.child_result("bench.fast_compile", [path, str(args.iters)], env, f"{name} {mode}")
                    if result is None:
                        continue
                    row = {"problem": name, "mode": mode, "round": rnd, **result}
                    assert row["fast_compile"] == (mode == "loop")
                    rows.append(row)
                    print(f"{name:>10} r{rnd} {mode:<8} first {row['first_call_s']:6.2f} s  xla {row['xla_compile_s']:6.2f} s"
                          f"  {row['ms_per_iter']:8.3f} ms/it  long {row['ms_per_iter_long']:8.3f} ms/it  loss {row['loss']:.7g}",
                          flush=True)
    out = {"meta": schema.run_meta("bench.fast_compile", argv), "rounds": args.rounds, "iters": args.iters, "rows": rows}
    schema.write_result("engine", args.out, rows, out["meta"], page=render(out, schema.result_path("engine", args.out)),
                        rounds=args.rounds, iters=args.iters)


if __name__ == "__main__":
    main()
