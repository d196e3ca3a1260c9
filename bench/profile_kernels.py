"""Per-kernel time of pgmjax's mirror-descent iterations on an engine-benchmark problem, from a JAX profiler trace.

Fits the problem twice (compiling and warming), then traces one ``estimate(iters)`` call and sums the trace's
kernel events (XLA:CPU thunks: fusions, copies, library calls) by name. The profiler adds about a microsecond
per event, and XLA:CPU runs independent kernels on two threads at once, so the totals are not the
iteration's wall time; compare kernels with each other, not with the benchmark.

    python bench/profile_kernels.py --problem stroke --iters 200 --top 25
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import engine_problems  # noqa: E402

#: Trace events that are the host's or the runtime's, not a compiled kernel's.
_NOT_KERNELS = ("$", "ThunkExecutor", "Pjit", "np.asarray", "_value", "__float__", "shard_args", "DevicePut",
                "H2D", "ParseArguments", "Handle inputs", "CommonPjRtClient", "AllocateOutput")


#: Control-flow events (``while.12``, ``cond.3``), whose durations include the kernels they run.
_CONTROL = re.compile(r"^(while|cond|conditional)(\.\d+)?$")


def kernel_times(problem: str, iters: int) -> dict:
    """``{kernel name: (total microseconds, calls)}`` over one traced ``estimate(iters)``."""
    import jax

    import pgmjax as pj

    p = engine_problems.make(problem)
    domain = pj.Domain(p["domain"])
    meas = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]

    def fit():
        jax.block_until_ready(pj.estimate(domain, meas, "mirror_descent", iters=iters, chunk=50).theta)

    fit()
    fit()
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder):
            fit()
        path = sorted(glob.glob(os.path.join(folder, "**", "*.trace.json.gz"), recursive=True))[-1]
        with gzip.open(path) as f:
            events = json.load(f)["traceEvents"]
    total, calls = collections.Counter(), collections.Counter()
    for e in events:
        # A loop's or a branch's own event spans the kernels inside it: counted there, not twice.
        if e.get("ph") == "X" and not e["name"].startswith(_NOT_KERNELS) and not _CONTROL.match(e["name"]):
            total[e["name"]] += e["dur"]
            calls[e["name"]] += 1
    return {k: (total[k], calls[k]) for k in total}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default="stroke", choices=engine_problems.PROBLEMS)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    times = kernel_times(args.problem, args.iters)
    n = args.iters
    small = [(t, c) for t, c in times.values() if t / c < 10]
    big = [(t, c) for t, c in times.values() if t / c >= 10]
    print(f"{args.problem}, {n} iterations traced (loop and branch events, which span their kernels, left out)")
    for name, rows in (("kernels under 10 us a call", small), ("kernels of 10 us a call or more", big)):
        print(f"  {name}: {sum(c for _, c in rows) / n:.0f} calls and {sum(t for t, _ in rows) / n / 1e3:.3f} ms "
              "per iteration")
    print(f"  {'us/call':>8} {'calls/iter':>10}  kernel")
    for k, (t, c) in sorted(times.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"  {t / c:8.1f} {c / n:10.2f}  {k}")


if __name__ == "__main__":
    main()
