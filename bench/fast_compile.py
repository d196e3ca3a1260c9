"""What ``pgmjax.fast_compile()`` (XLA:CPU's loop emitters) changes: a first fit's wait, and iteration speed.

For each problem of the engine benchmark (``engine_problems.py``), fresh processes alternate between the
default (XLA's MLIR fusion emitters) and ``PGMJAX_FAST_COMPILE=1``, ``--rounds`` times, so drift of a shared
machine hits both alike. Each child times

* the first ``estimate(50)`` (the whole wait of a new structure: tracing, XLA compile and 50 iterations) and
  the XLA compile seconds inside it;
* per iteration: ``(estimate(50) - estimate(0)) / 50`` (medians of 3) and, for the long run,
  ``(estimate(N) - estimate(0)) / N`` with ``N = --iters``;
* the loss after ``N`` iterations (both modes fit the same noisy measurements).

Usage::

    python bench/fast_compile.py --problems chain10 titanic adult_mst --rounds 2 --iters 500 \
        --out bench/results/fast_compile_cpu.json      # writes the .json and a .md beside it
    python bench/fast_compile.py --render bench/results/fast_compile_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MODES = ("default", "fast_compile")


def child(problem_file: str, result_file: str, iters: int) -> None:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    import engine_problems as ep
    from engine import _CompileEvents

    import pgmjax as pj

    timed = ep.timed_fits(problem_file)
    events = _CompileEvents().install()

    events.active = True
    first, _ = timed(50)
    events.active = False
    short = statistics.median(timed(50)[0] for _ in range(3))
    fixed = statistics.median(timed(0)[0] for _ in range(3))
    long_s, model = timed(iters)
    out = {"fast_compile": pj.programs.fast_compile_enabled(), "first_call_s": first,
           "ms_per_iter": 1e3 * (short - fixed) / 50, "ms_per_iter_long": 1e3 * (long_s - fixed) / iters,
           "iters": iters, "loss": float(model.loss), **events.summary()}
    with open(result_file, "w") as f:
        json.dump(out, f)


def _bold(x: float, other: float) -> str:
    return f"**{x:.2f}**" if x < other else f"{x:.2f}"


def render(out: dict, path: str) -> None:
    run, rows = out["run"], out["rows"]
    med = {}
    for name in dict.fromkeys(r["problem"] for r in rows):
        for mode in MODES:
            rs = [r for r in rows if r["problem"] == name and r["mode"] == mode]
            if rs:
                med[name, mode] = {k: statistics.median(r[k] for r in rs) for k in
                                   ("first_call_s", "xla_compile_s", "ms_per_iter", "ms_per_iter_long", "loss")}
                med[name, mode]["n"] = len(rs)
    lines = [
        "# `pgmjax.fast_compile()`: XLA:CPU's loop emitters against the default fusion emitters",
        "",
        f"Machine: {run['machine'].get('cpu')}, {run['machine'].get('cores')} cores, CPU backend. Date: {run['date']}. "
        f"Versions: {', '.join(f'{k} {v}' for k, v in run['versions'].items())}. pgmjax commit {run.get('commit')}.",
        "",
        f"Fresh process per measurement, the two modes alternating, {out['rounds']} rounds (medians shown). "
        "first fit = the first `estimate(50)` of a new structure in the process (tracing, XLA compile, 50 "
        "iterations); ms/iter = (warm `estimate(50)` - warm `estimate(0)`) / 50; long = the same over "
        f"{out['iters']} iterations; loss after {out['iters']} iterations (float32).",
        "",
        "| problem | first fit default (s) | first fit fast (s) | XLA compile default / fast (s) | ms/iter default / fast | "
        "ms/iter long default / fast | loss default | loss fast (rel. diff) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(r["problem"] for r in rows):
        d, f = med.get((name, "default")), med.get((name, "fast_compile"))
        if not d or not f:
            continue
        rel = abs(f["loss"] - d["loss"]) / abs(d["loss"])
        lines.append(
            f"| {name} | {_bold(d['first_call_s'], f['first_call_s'])} | {_bold(f['first_call_s'], d['first_call_s'])} | "
            f"{d['xla_compile_s']:.2f} / "
            f"{f['xla_compile_s']:.2f} | {d['ms_per_iter']:.3g} / {f['ms_per_iter']:.3g} | {d['ms_per_iter_long']:.3g} / "
            f"{f['ms_per_iter_long']:.3g} | {d['loss']:,.1f} | {f['loss']:,.1f} ({rel:.1e}) |"
        )
    lines += ["", *(f"* {n}" for n in out.get("notes", []))]
    lines += ["", f"Raw rows: `{os.path.basename(path)}.json`. Command: `{run.get('command')}`.", ""]
    with open(path + ".md", "w") as fh:
        fh.write("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", default=["chain10", "titanic", "adult_mst"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--out", default=None)
    ap.add_argument("--render", default=None, help="only write the .md of this JSON")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[2], int(args.child[1]))  # problem, iterations, result
        return
    if args.render:
        with open(args.render) as f:
            render(json.load(f), os.path.splitext(args.render)[0])
        return
    import benchutil
    import engine_problems as ep

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in ep.saved(args.problems, tmp):
            for rnd in range(args.rounds):
                for mode in MODES if rnd % 2 == 0 else MODES[::-1]:
                    env = {**os.environ, "PGMJAX_FAST_COMPILE": "1" if mode == "fast_compile" else "0"}
                    result = ep.child_result(__file__, [path, str(args.iters)], env, f"{name} {mode}")
                    if result is None:
                        continue
                    row = {"problem": name, "mode": mode, "round": rnd, **result}
                    assert row["fast_compile"] == (mode == "fast_compile")
                    rows.append(row)
                    print(f"{name:>10} r{rnd} {mode:<13} first {row['first_call_s']:6.2f} s  xla {row['xla_compile_s']:6.2f} s"
                          f"  {row['ms_per_iter']:8.3f} ms/it  long {row['ms_per_iter_long']:8.3f} ms/it  loss {row['loss']:.7g}",
                          flush=True)
    out = {"run": benchutil.run_record("fast_compile.py"), "rounds": args.rounds, "iters": args.iters, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
        render(out, os.path.splitext(args.out)[0])


if __name__ == "__main__":
    main()
