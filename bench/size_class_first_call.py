"""What a new structure of an already compiled size class waits for: in this process, and in a later one.

Structures: random trees of pairs over one generated domain (``bench/size_class.py``'s ``problems``: ``d``
attributes of 2 to ``--max-size`` values, noisy pair marginals), kept where their size-class plan and routed
measurements fall into the first structure's class (so one compiled program serves them all).

* ``in_process``: one process fits the first structure (``estimate(iters)``, compiling the class), then each
  other structure once (its first call) and once more (warm); a first call's wait beyond its iterations is
  ``first - warm``. Compiles are counted (``jax.monitoring``'s backend-compile events).
* ``later_process``: a process with :func:`pgmjax.programs.enable_compilation_cache` on a fresh folder fits the
  first structure; then a fresh process, the cache on the same folder, fits another structure of the class:
  its seconds from the start of the process (imports included) to the end of its first ``estimate(iters)``, and
  the seconds of that call alone.

Run: ``python -m bench engine size_class_first_call --d 20 --iters 100``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

T0 = time.perf_counter()  # this process's start, as near as Python lets it be measured

from bench import schema  # noqa: E402
from bench.benchutil import CompileEvents  # noqa: E402

SUITE = "engine"


def same_class(d: int, max_size: int, want: int, seed: int = 0):
    """The first structure and up to ``want - 1`` others of its size class (plan and measurement shapes)."""
    import jax.numpy as jnp

    from bench.size_class import problems
    from pgmjax.estimation.routed_losses import stack_routed
    from pgmjax.graph.routed_plan import make_routed_plan

    def key(dom, ms):
        plan = make_routed_plan(dom, [m.clique for m in ms])
        return plan.size, stack_routed(plan, ms, jnp.float32).shape

    found = []
    for dom, ms in problems(d, 60, max_size, seed):
        if not found or key(dom, ms) == key(*found[0]):
            found.append((dom, ms))
        if len(found) == want:
            break
    return found


def in_process(d: int, max_size: int, iters: int, structures: int) -> list[dict]:
    import pgmjax as pj

    compiles = CompileEvents(active=True).install().xla
    rows = []
    for k, (dom, ms) in enumerate(same_class(d, max_size, structures)):
        c0, t = len(compiles), time.perf_counter()
        pj.estimate(dom, ms, iters=iters, program="size_class")
        first = time.perf_counter() - t
        c1, t = len(compiles), time.perf_counter()
        pj.estimate(dom, ms, iters=iters, program="size_class")
        warm = time.perf_counter() - t
        rows.append({"structure": k, "first_s": first, "warm_s": warm, "wait_beyond_iterations_ms": 1e3 * (first - warm),
                     "compiles_first": c1 - c0, "compiles_warm": len(compiles) - c1})
        print(rows[-1], flush=True)
    return rows


def child(which: int, d: int, max_size: int, iters: int, cache: str, out: str) -> None:
    import pgmjax as pj

    pj.programs.enable_compilation_cache(cache)
    dom, ms = same_class(d, max_size, which + 1)[which]
    t = time.perf_counter()
    pj.estimate(dom, ms, iters=iters, program="size_class")
    end = time.perf_counter()
    with open(out, "w") as f:
        json.dump({"call_s": end - t, "from_start_s": end - T0}, f)


def later_process(d: int, max_size: int, iters: int) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "xla")
        for which, name in ((0, "filling"), (1, "later")):
            res = os.path.join(tmp, f"{name}.json")
            subprocess.run([sys.executable, "-m", "bench.size_class_first_call", "--child", str(which), str(d),
                            str(max_size), str(iters), cache, res], check=True)
            with open(res) as f:
                out[name] = json.load(f)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--max-size", type=int, default=10)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--structures", type=int, default=6)
    p.add_argument("--out", default="size_class_first_call_cpu")
    p.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        which, d, max_size, iters, cache, out = args.child
        child(int(which), int(d), int(max_size), int(iters), cache, out)
        return
    import jax

    jax.config.update("jax_enable_compilation_cache", False)  # the in-process part measures compiling itself
    rows = in_process(args.d, args.max_size, args.iters, args.structures)
    later = later_process(args.d, args.max_size, args.iters)
    meta = schema.run_meta("bench.size_class_first_call", argv)
    new = rows[1:]
    page = [*schema.header_lines(meta), "",
            f"Trees of pairs over {args.d} attributes of 2 to {args.max_size} values, all of one size class; "
            f"estimate({args.iters}), program='size_class'.", "",
            "In one process: structure 0 compiles the class; each later structure's first call against its warm "
            "repeat (the wait beyond its iterations), and the compiles in each.", "", *schema.table(rows), "",
            f"Later structures: wait beyond the iterations {min(r['wait_beyond_iterations_ms'] for r in new):.0f}-"
            f"{max(r['wait_beyond_iterations_ms'] for r in new):.0f} ms, compiles "
            f"{sorted({r['compiles_first'] for r in new})}." if new else "", "",
            "A later process with JAX's persistent compilation cache on the folder an earlier process filled "
            f"(structure 0 there), fitting structure 1: from the process's start (imports included) "
            f"{later['later']['from_start_s']:.2f} s, the call {later['later']['call_s']:.2f} s (the filling "
            f"process: {later['filling']['from_start_s']:.2f} s and {later['filling']['call_s']:.2f} s)."]
    schema.write_result(SUITE, args.out, rows, meta, page=page, title="A new structure of a compiled size class",
                        later_process=later)


if __name__ == "__main__":
    main()
