"""Two commits of pgmjax on the engine benchmark's problems: first call and warm time per iteration, A/B.

Each arm is a checkout of pgmjax (e.g. ``git worktree add /tmp/base <commit>``); every child process imports
pgmjax from its arm's folder (``PYTHONPATH``) and times ``pj.estimate`` (mirror descent, 50-iteration chunks)
on one problem of ``bench/engine_problems.py``: the first ``estimate(50)`` (compilation included), then the
median of three ``estimate(50)`` and three ``estimate(50 + iters)`` calls; ms per iteration is their
difference over ``iters``. Arms alternate within every round, so a shared machine's drift hits both alike.

    python bench/ab_commits.py OUT.json --arms base=/tmp/base head=. --problems chain100 adult_mst --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import engine_problems as ep  # noqa: E402


def child(problem: str, iters: int, result: str) -> None:
    import pgmjax

    timed = ep.timed_fits(problem)
    first, _ = timed(50)
    short = sorted(timed(50)[0] for _ in range(3))[1]
    long, model = sorted((timed(50 + iters) for _ in range(3)), key=lambda r: r[0])[1]
    with open(result, "w") as f:
        json.dump({"first_call_s": first, "ms_per_iter": 1e3 * (long - short) / iters, "loss": float(model.loss),
                   "pgmjax_file": pgmjax.__file__}, f)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--arms", nargs="+", default=[], metavar="NAME=FOLDER")
    ap.add_argument("--problems", nargs="+", default=["chain100", "adult_mst", "titanic", "nltcs_2way"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--child", nargs=3, metavar=("PROBLEM", "ITERS", "RESULT"))
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    arms = dict(a.split("=", 1) for a in args.arms)
    rows = []
    start = time.perf_counter()

    for name, path in ep.saved(args.problems, _scratch()):
        for rnd in range(args.rounds):
            for arm, folder in arms.items():
                env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PGMJAX_COMPILATION_CACHE")}
                env["PYTHONPATH"] = os.path.abspath(folder)
                r = ep.child_result(__file__, [path, str(args.iters)], env, f"{name} {arm}")
                if r is not None:
                    rows.append({"problem": name, "arm": arm, "round": rnd, **r})
                    print(json.dumps(rows[-1]), flush=True)
    summary = {}
    for name in args.problems:
        for arm in arms:
            got = [r for r in rows if r["problem"] == name and r["arm"] == arm]
            if got:
                summary[f"{name} {arm}"] = {
                    "first_call_s": statistics.median(r["first_call_s"] for r in got),
                    "ms_per_iter": statistics.median(r["ms_per_iter"] for r in got), "runs": len(got)}
    record = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "arms": arms, "iters": args.iters,
              "rounds": args.rounds, "wall_s": time.perf_counter() - start, "rows": rows, "medians": summary}
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    for k, v in summary.items():
        print(f"{k:<28} first {v['first_call_s']:.2f} s   {v['ms_per_iter']:.3f} ms/it   ({v['runs']} runs)")
    return 0


def _scratch() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="pgmjax-ab-")


if __name__ == "__main__":
    sys.exit(main())
