"""A/B of what a *first* fit costs: one ``estimate`` plus reading the model's clique marginals, in a fresh
process, where nearly all the time is tracing and XLA compilation (what every round of MWEM or AIM pays for
a new structure).

The packages are importable names of pgmjax copies (a copy of an older commit renamed ``pgmjax_base`` on
PYTHONPATH, and ``pgmjax``). Each measurement is a fresh interpreter; the packages alternate, so drift of a
shared machine hits both alike. Reported per package and d: wall time of the first fit + marginals, number
of XLA compilations and their summed backend-compile seconds (medians over the repeats).

    rm -rf /tmp/pgb && mkdir /tmp/pgb && git archive <commit> pgmjax | tar -x -C /tmp/pgb \
        && mv /tmp/pgb/pgmjax /tmp/pgb/pgmjax_base
    PYTHONPATH=/tmp/pgb python bench/fit_compile.py --packages pgmjax_base pgmjax --d 10 100 \
        --out bench/results/fit_compile_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchutil import cpu_model  # noqa: E402


def child(package: str, d: int, iters: int) -> dict:
    import importlib

    import jax

    from scalability_problem import make_problem

    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, secs, **_: compiles.append(secs) if event == "/jax/core/compile/backend_compile_duration" else None
    )
    pj = importlib.import_module(package)
    problem = make_problem(d)
    domain = pj.Domain(problem["domain"])
    measurements = [pj.Measurement(c, y, stddev=problem["sigma"]) for c, y in zip(problem["cliques"], problem["noisy"])]
    start = time.perf_counter()
    model = pj.estimate(domain, measurements, iters=iters)
    marginals = model.clique_marginals()
    seconds = time.perf_counter() - start
    assert len(marginals) == len(model.cliques)
    return {"package": package, "d": d, "iters": iters, "first_fit_s": seconds, "xla_compiles": len(compiles),
            "xla_compile_s": sum(compiles), "loss": model.loss}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--packages", nargs=2, default=["pgmjax_base", "pgmjax"])
    p.add_argument("--d", type=int, nargs="+", default=[10, 100])
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=None)
    p.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), int(args.child[2]))))
        return

    import jax

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    runs = []
    for d in args.d:
        for _ in range(args.repeats):
            for package in args.packages:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", package, str(d), str(args.iters)],
                    capture_output=True, text=True, check=True, env=dict(os.environ, JAX_PLATFORMS="cpu"),
                )
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(runs[-1], flush=True)
    summary = []
    for d in args.d:
        for package in args.packages:
            mine = [r for r in runs if r["d"] == d and r["package"] == package]
            summary.append({"d": d, "package": package, **{
                k: statistics.median(r[k] for r in mine) for k in ("first_fit_s", "xla_compiles", "xla_compile_s")
            }})
    record = {
        "experiment": "first fit (estimate + clique marginals) in a fresh process",
        "started": started, "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                                        "jax": jax.__version__}, "settings": vars(args), "runs": runs, "summary": summary,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)
        lines = [
            "# First fit in a fresh process: estimate + clique marginals (A/B)", "",
            f"Date: {started}. Machine: {record['machine']['cpu']}, {os.cpu_count()} cores, CPU backend. "
            f"Python {platform.python_version()}, jax {jax.__version__}.", "",
            f"Problem: the scalability problem (bench/scalability_problem.py), default mirror descent, {args.iters} "
            f"iterations, float32. Medians over {args.repeats} fresh processes per cell, packages alternating.", "",
            "| d | package | first fit + marginals (s) | XLA compilations | XLA compile (s) |", "|---|---|---|---|---|",
        ]
        lines += [f"| {s['d']} | {s['package']} | {s['first_fit_s']:.2f} | {s['xla_compiles']:.0f} | "
                  f"{s['xla_compile_s']:.2f} |" for s in summary]
        with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
