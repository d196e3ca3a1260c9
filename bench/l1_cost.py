"""What an engine change costs L1 fits: two source trees of pgmjax, side by side, in fresh processes.

The L1 loss is fitted through Huber smoothing stages (``pgmjax.fit.estimation.run``), so a change to what
happens between stages (issue 40: each stage restarts from log-conditional potentials, and L-BFGS's stalled
last stage is finished by mirror descent) shows only in L1 fits. Each process imports pgmjax from its tree
(``--before``, ``--after``; the arms alternate by round so a shared machine's drift hits both), fits the
engine benchmark's problem (``bench/problems.py``, its noisy answers fitted with ``loss="l1"``, float32,
``chunk=50``) and reports:

* the first call: ``estimate(N)`` in a fresh process, compilation included;
* per iteration: (fastest of three ``estimate(2N)`` - fastest of three ``estimate(N)``) / N;
* the exact L1 loss after N and after 2N iterations.

Usage::

    git worktree add --detach /tmp/before <commit>
    python -m bench.l1_cost --before /tmp/before --problems adult_mst nltcs_2way titanic \
        --out bench/results/engine/l1_restart_cost_cpu.json     # writes the .json and a .md beside it
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from bench import children, schema

ARMS = ("before", "after")
METHODS = ("mirror_descent", "lbfgs")


def _import_pgmjax(tree: str):
    """The ``pgmjax`` package of source tree ``tree``, imported under its own name (the child's cwd is this
    repository, whose ``pgmjax`` would otherwise be found first); its submodules come from the same tree."""
    import importlib.util
    import os

    folder = os.path.join(tree, "pgmjax")
    spec = importlib.util.spec_from_file_location("pgmjax", os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules["pgmjax"] = module
    spec.loader.exec_module(module)
    return module


def child(tree: str, method: str, problem_file: str, iters: str, result_file: str) -> None:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    pj = _import_pgmjax(tree)
    from bench import problems as ep

    p = ep.load(problem_file)
    domain = pj.Domain(p["domain"])
    meas = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]
    n = int(iters)

    def fit(k):
        t = time.perf_counter()
        model = pj.estimate(domain, meas, method, iters=k, loss="l1", chunk=50)
        jax.block_until_ready(model.theta)
        return time.perf_counter() - t, model.loss

    first, loss_n = fit(n)
    short = [fit(n)[0] for _ in range(3)]
    long, losses = zip(*(fit(2 * n) for _ in range(3)))
    out = {"pgmjax": pj.__file__, "iters": n, "first_s": first, "loss_n": loss_n, "loss_2n": losses[0],
           "ms_per_iter": 1e3 * (min(long) - min(short)) / n,
           "ms_per_iter_median": 1e3 * (statistics.median(long) - statistics.median(short)) / n}
    with open(result_file, "w") as f:
        json.dump(out, f)


def render(data: dict) -> list[str]:
    """The result's Markdown page."""
    run, rows = schema.meta_of(data), data["rows"]
    lines = [
        "# L1 fits before and after, fresh processes alternating (float32, CPU)",
        "",
        *schema.header_lines(run),
        f"Before: `{data['before']}`; after: `{data['after']}`. Each process: the first `estimate(N, loss=\"l1\")` "
        "(compilation included), then per iteration = (fastest of three `estimate(2N)` - fastest of three "
        "`estimate(N)`) / N, and the exact L1 loss after N and 2N iterations. Figures: the fastest over the "
        "rounds (first call, per iteration); losses from the first round (the fits are deterministic).",
        "",
        "| problem | method | N | first call before / after (s) | ms per iteration before / after | change | "
        "L1 loss at N before / after | at 2N before / after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keys = list(dict.fromkeys((r["problem"], r["method"]) for r in rows))
    for prob, method in keys:
        got = {a: [r for r in rows if r["problem"] == prob and r["method"] == method and r["arm"] == a] for a in ARMS}
        if not all(got.values()):
            continue
        first = {a: min(r["first_s"] for r in got[a]) for a in ARMS}
        per = {a: min(r["ms_per_iter"] for r in got[a]) for a in ARMS}
        ln = {a: got[a][0]["loss_n"] for a in ARMS}
        l2n = {a: got[a][0]["loss_2n"] for a in ARMS}
        lines.append(f"| {prob} | {method} | {got['after'][0]['iters']} | {first['before']:.2f} / {first['after']:.2f} | "
                     f"{per['before']:.3f} / {per['after']:.3f} | {100 * (per['after'] / per['before'] - 1):+.0f}% | "
                     f"{ln['before']:,.2f} / {ln['after']:,.2f} | {l2n['before']:,.2f} / {l2n['after']:,.2f} |")
    if data.get("notes"):
        lines += ["", "Notes. " + data["notes"]]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="the source tree (a worktree of the earlier commit) of the 'before' arm")
    ap.add_argument("--after", default=str(schema.ROOT), help="the 'after' arm's tree (default: this repository)")
    ap.add_argument("--problems", nargs="+", default=["adult_mst", "nltcs_2way", "titanic"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--iters", type=int, default=1000, help="N")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="l1_cost_cpu", help="result name under bench/results/engine/ (or a path)")
    ap.add_argument("--notes", default="")
    ap.add_argument("--render", help="only write the .md of this JSON")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    if args.render:
        with open(args.render) as f:
            schema.write_page(args.render, render(json.load(f)))
        return 0
    if not args.before:
        ap.error("--before is required (a worktree of the commit to compare against)")
    trees = {"before": args.before, "after": args.after}
    arms = [(a, m) for m in args.methods for a in ARMS]
    rows = []
    for row in children.alternating(
            "bench.l1_cost", args.problems, args.rounds, arms,
            lambda path, arm, rnd, folder: [trees[arm[0]], arm[1], path, args.iters]):
        arm, method = row.pop("arm")
        rows.append({**row, "arm": arm, "method": method})
        print(f"{row['problem']} {method} {arm}: first {row['first_s']:.2f} s, {row['ms_per_iter']:.3f} ms/iter, "
              f"loss {row['loss_n']:.2f} -> {row['loss_2n']:.2f}", flush=True)
    meta = schema.run_meta("bench.l1_cost", argv)
    extra = {"before": args.before, "after": args.after, "notes": args.notes}
    schema.write_result("engine", args.out, rows, meta, page=render({"meta": meta, "rows": rows, **extra}), **extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
