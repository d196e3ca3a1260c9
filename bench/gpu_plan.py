"""The marginal oracle's loop plan on a GPU: how many levels one loop trip runs, and XLA's command buffers.

On a GPU every trip of the oracle's level loops (``lax.scan`` over a run of levels) is a round of kernel
launches plus a loop-condition check, so a deep junction tree (chain d=1000: about 500 levels up and 500
down per oracle call) is bound by launches, not by memory traffic (``bench/results/gpu/gpu_h200_run2.md``:
12.2 ms per iteration, 1,700x the bandwidth floor). This measures, per problem, each arm in a fresh process,
alternating:

* ``unroll``: ``pgmjax.compiler.SCAN_UNROLL`` for the platform (levels per loop trip);
* ``flags``: extra ``XLA_FLAGS`` (XLA:GPU's command buffers for loops and conditionals: the loop then runs as
  a CUDA graph with device-side control flow instead of a host-checked loop).

Per arm: first call (``estimate(50)``, compilation included), ms per iteration (median of three long calls
less the median of three short ones), and the loss after the long call, which must agree across arms (same
arithmetic, differently scheduled).

    python -m bench gpu gpu_plan OUT_DIR [--problems chain1000 chain100 ...] [--arms base u8 ...] [--budget S]
    python -m bench gpu gpu_plan --smoke OUT_DIR     # the CPU, tiny problems, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from bench import problems as ep
from bench import children, schema

CB = "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
ARMS = {
    "base": (1, ""),
    "u4": (4, ""),
    "u16": (16, ""),
    "cb": (1, CB),
    "cb_u16": (16, CB),
}
ITERS = {"chain1000": 200, "gen50": 200, "adult": 300}


def child(args) -> None:
    import jax

    from pgmjax import compiler

    compiler.SCAN_UNROLL[compiler.backend()] = args.unroll
    timed = ep.timed_fits(args.problem)
    first, _ = timed(50)
    short = sorted(timed(50)[0] for _ in range(3))[1]
    longs = sorted((timed(50 + args.iters) for _ in range(3)), key=lambda r: r[0])
    long, model = longs[1]
    out = {
        "first_call_s": first, "ms_per_iter": 1e3 * (long - short) / args.iters, "iters": args.iters,
        "loss": float(model.loss), "backend": compiler.backend(), "device": str(jax.devices()[0].device_kind),
    }
    with open(args.result, "w") as f:
        json.dump(out, f)


def table(rows: list, skipped: list) -> list[str]:
    """The Markdown table of the rows, each arm's loss relative to the problem's ``base`` arm."""
    lines = ["| problem | arm | unroll | XLA_FLAGS | first call s | ms/it | loss rel. to base |", "|---|---|---|---|---|---|---|"]
    base = {r["problem"]: r["loss"] for r in rows if r["arm"] == "base"}
    for r in rows:
        b = base.get(r["problem"])
        rel = f"{abs(r['loss'] - b) / abs(b):.1e}" if b else "—"
        lines.append(f"| {r['problem']} | {r['arm']} | {r['unroll']} | `{r['xla_flags'] or '-'}` | {r['first_call_s']:.2f} | "
                     f"{r['ms_per_iter']:.3f} | {rel} |")
    return lines + [f"- skipped {s}" for s in skipped]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--problems", nargs="+", default=["chain1000", "chain100", "adult_mst", "adult", "nltcs_2way"])
    ap.add_argument("--arms", nargs="+", default=list(ARMS))
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--child", nargs=4, metavar=("PROBLEM", "UNROLL", "ITERS", "RESULT"))
    args = ap.parse_args(argv)
    if args.child:
        problem, unroll, iters, result = args.child
        child(argparse.Namespace(problem=problem, unroll=int(unroll), iters=int(iters), result=result))
        return 0
    if args.smoke:
        args.problems, args.budget = ["chain10"], 120.0
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    rows, skipped = [], []
    import tempfile

    meta = schema.run_meta("bench.gpu_plan", argv)

    def write() -> None:  # after every child: a lease that ends mid-run keeps what was measured
        schema.write_result("gpu", os.path.join(os.path.abspath(args.out), "gpu_plan"), rows, meta,
                            page=["# The oracle's loop plan", "", *schema.header_lines(meta), *table(rows, skipped)],
                            quiet=True, skipped=skipped, wall_s=time.perf_counter() - t0)

    with tempfile.TemporaryDirectory() as folder:
        for name, path in ep.saved(args.problems, folder):
            for arm in args.arms:
                left = args.budget - (time.perf_counter() - t0)
                if left < 10:
                    skipped.append(f"{name} {arm}: budget spent")
                    continue
                unroll, flags = ARMS[arm]
                env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
                if flags:
                    env["XLA_FLAGS"] = flags
                iters = 20 if args.smoke else ITERS.get(name, 500)
                r = children.child_result("bench.gpu_plan", [path, str(unroll), str(iters)], env, f"{name} {arm}", timeout=left)
                if r is None:
                    skipped.append(f"{name} {arm}: child failed or ran past the budget ({left:.0f} s left)")
                else:
                    rows.append({"problem": name, "arm": arm, "unroll": unroll, "xla_flags": flags, **r})
                    print(json.dumps(rows[-1]), flush=True)
                write()
    write()
    print("\n".join(table(rows, skipped)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
