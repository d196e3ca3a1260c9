"""XLA:CPU compiler flags against a first fit's wait: compile seconds, CPU seconds, and warm iteration time.

Each (problem, flags) pair runs in a fresh process with ``XLA_FLAGS`` set, alternating the settings round
by round so machine drift hits them alike. The child times the first ``estimate(50)`` (the whole wait of a
new structure), JAX's backend-compile events inside it, the process's CPU time over that call (user +
system, all threads: above the wall time when XLA compiles on both cores), and the warm per-iteration time
(``(estimate(50) - estimate(0)) / 50``, medians of 3).

Usage::

    python bench/compile_options.py --problems adult_mst titanic --rounds 2 \
        --flags default xla_cpu_parallel_codegen_split_count=1 --out /tmp/flags.json

Each ``--flags`` value is one setting: ``default`` (no flags) or flags without their leading dashes, several
joined by ``+``. A flag written ``opt:name=value`` is not put in ``XLA_FLAGS`` but added to the engine's
per-program compiler options (``pgmjax.compiler.ENGINE_OPTIONS``; some debug options are only reachable so).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(problem_file: str, result_file: str) -> None:
    import jax

    import pgmjax.compiler

    for item in filter(None, os.environ.get("ENGINE_EXTRA_OPTIONS", "").split("+")):
        name, value = item.split("=", 1)
        pgmjax.compiler.ENGINE_OPTIONS[name] = json.loads(value)

    jax.config.update("jax_enable_compilation_cache", False)
    import engine_problems as ep
    from engine import _CompileEvents

    timed = ep.timed_fits(problem_file)
    events = _CompileEvents().install()

    events.active = True
    c0 = _cpu_s()
    first, model = timed(50)
    cpu = _cpu_s() - c0
    events.active = False
    warm = statistics.median(timed(50)[0] for _ in range(3))
    fixed = statistics.median(timed(0)[0] for _ in range(3))
    out = {"first_call_s": first, "first_call_cpu_s": cpu, "ms_per_iter": 1e3 * (warm - fixed) / 50,
           "loss50": float(model.loss), **events.summary()}
    with open(result_file, "w") as f:
        json.dump(out, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", default=["adult_mst"])
    ap.add_argument("--flags", nargs="+", default=["default"], help="settings to compare (see above)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=False)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    import engine_problems as ep

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in ep.saved(args.problems, tmp):
            for rnd in range(args.rounds):
                for flags in args.flags:
                    parts = [] if flags == "default" else flags.split("+")
                    xla = " ".join("--" + f for f in parts if not f.startswith("opt:"))
                    extra = "+".join(f[4:] for f in parts if f.startswith("opt:"))
                    env = {**os.environ, "XLA_FLAGS": xla, "ENGINE_EXTRA_OPTIONS": extra}
                    result = ep.child_result(__file__, [path], env, f"{name} {flags!r}")
                    if result is None:
                        continue
                    row = {"problem": name, "flags": flags, "round": rnd, **result}
                    rows.append(row)
                    print(f"{name:>10} r{rnd} {flags:<50} first {row['first_call_s']:6.2f} s  "
                          f"xla {row['xla_compile_s']:6.2f} s  cpu {row['first_call_cpu_s']:6.2f} s  "
                          f"{row['ms_per_iter']:8.3f} ms/it  loss50 {row['loss50']:.6g}", flush=True)
    if args.out:
        import benchutil

        with open(args.out, "w") as f:
            json.dump({"run": benchutil.run_record("compile_options.py"), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
