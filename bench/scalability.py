"""Figure 2b of McKenna et al. (ICML 2019): scalability of estimation in the number of attributes.

d attributes of 10 values, 10,000 records, identity marginals on every
triple (i, i+1, i+2) with Gaussian noise (sigma 10); see
``bench.problems.markov_chain_problem``. For each d, pgmjax and (optionally) mbi 2.0
run in fresh processes, one after the other, on the same machine, with the
same methodology:

* ``jt_build_s``: junction tree (pgmjax: ``junction_tree`` + the oracle
  plan, caches cleared; mbi: ``make_junction_tree``);
* ``compile_s``: first ``estimate(iters)`` call minus the median of warm
  identical calls (everything only a first call pays: tracing, lowering,
  XLA compilation);
* ``sec_per_iter``: ``(warm estimate(iters) - warm estimate(0)) / iters``,
  default mirror descent, float32.

Usage::

    python -m bench scalability --d 10 100 1000 --mbi-python .venv/bin/python   # results/scalability/scalability_cpu
    python -m bench scalability --render bench/results/scalability/scalability_cpu.json  # its page again
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time

from bench import schema
from bench.children import child_command, json_line
from bench.schema import ROOT
from bench.schema import cpu_model


def run_pgmjax(d: int, iters: int = 50, repeats: int = 3, seed: int = 0) -> dict:
    import jax
    import numpy as np

    jax.config.update("jax_enable_compilation_cache", False)
    from bench.problems import markov_chain_problem

    import pgmjax as pj
    from pgmjax.graph import junction as jt_mod
    from pgmjax.graph import oracle, oracle_plan

    problem = markov_chain_problem(d, seed=seed)
    domain = pj.Domain(problem["domain"])
    measurements = [
        pj.Measurement(c, y, stddev=problem["sigma"]) for c, y in zip(problem["cliques"], problem["noisy"])
    ]
    jt_mod._junction_tree_cached.cache_clear()
    oracle_plan._make_plan_cached.cache_clear()
    t0 = time.perf_counter()
    tree = pj.junction_tree(domain, problem["cliques"])
    t1 = time.perf_counter()
    oracle.make_plan(domain, problem["cliques"])  # built only to be timed (plan_build_s)
    t2 = time.perf_counter()

    def timed(n):  # (seconds, pj.Fit): the model and its report
        t = time.perf_counter()
        fit = pj.estimate(domain, measurements, "mirror_descent", iters=n, chunk=iters, report=True)
        jax.block_until_ready(fit.model.theta)
        return time.perf_counter() - t, fit

    first, _ = timed(iters)
    warm = [timed(iters)[0] for _ in range(repeats)]
    fixed = [timed(0)[0] for _ in range(repeats)]
    _, (model, report) = timed(iters)
    warm_s, fixed_s = float(np.median(warm)), float(np.median(fixed))
    calls = report.history[-1]["oracle_calls"] if report.history else 0
    est = model.clique_marginals()
    err = np.mean(
        [np.abs(est[c] - t).sum() / problem["records"] for c, t in zip(problem["cliques"], problem["true"])]
    )
    noisy_err = np.mean(
        [np.abs(y - t).sum() / problem["records"] for y, t in zip(problem["noisy"], problem["true"])]
    )
    return {
        "engine": "pgmjax",
        "d": d,
        "iters": iters,
        "jt_build_s": t1 - t0,
        "plan_build_s": t2 - t1,
        "tree_cliques": len(tree.cliques),
        "tree_levels": tree.num_levels,
        "first_call_s": first,
        "warm_call_s": warm_s,
        "compile_s": first - warm_s,
        "sec_per_iter": (warm_s - fixed_s) / iters,
        "oracle_calls_per_iter": (calls - 1) / iters,
        "final_loss": report.loss,
        "mean_l1_error_per_record": float(err),
        "noisy_l1_error_per_record": float(noisy_err),
    }


def environment() -> dict:
    import platform

    import jax
    import jaxlib
    import numpy
    import optax

    cpu = cpu_model()
    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "optax": optax.__version__,
        "numpy": numpy.__version__,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "backend": jax.default_backend(),
        "devices": [str(x) for x in jax.devices()],
    }


def render(res: dict) -> str:
    """The page of a result (a dict, as written)."""
    meta = res["meta"]
    mbi = meta.get("mbi", {})
    n = meta.get("iters", 50)  # results written before the count was recorded ran 50
    lines = [
        "# Scalability (ICML 2019 Figure 2b): pgmjax vs mbi 2.0",
        "",
        f"Machine: {meta['cpu']}, {meta['cores']} cores, backend {meta['backend']}. Date: {meta['date']}."
        + (f" Commit: {meta['commit']}. Command: `{meta['command']}`." if meta.get("commit") else ""),
        f"Versions: Python {meta['python']}, jax {meta['jax']}, jaxlib {meta['jaxlib']}, optax {meta['optax']}, "
        f"numpy {meta['numpy']}" + (f"; mbi {mbi.get('mbi', mbi.get('versions', {}).get('mbi', '2.0.0'))}" if mbi else "") + ".",
        "",
        "Problem: d attributes of 10 values, 10,000 records, identity marginals on every triple (i, i+1, i+2),",
        "Gaussian noise sigma 10, float32, default mirror descent (Armijo line search) in both; "
        f"{n}-iteration blocks.",
        f"compile = first call minus warm call; per iteration = (warm {n}-iteration call - warm 0-iteration call) "
        f"/ {n}.",
        "",
        f"| d | engine | tree build (s) | compile (s) | per iteration (ms) | loss after {n} it. "
        f"| L1 error / N after {n} it. (noisy answers) |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = {}
    for r in schema.rows_of(res):
        rows.setdefault(r["d"], {})[r["engine"]] = r
    for d in sorted(rows):
        for eng in ("pgmjax", "mbi"):
            r = rows[d].get(eng)
            if r is None:
                continue
            build = r["jt_build_s"] + r.get("plan_build_s", 0.0)
            err = r.get("mean_l1_error_per_record", r.get("mean_l1_error_estimate"))
            noisy = r.get("noisy_l1_error_per_record", r.get("mean_l1_error_noisy"))
            lines.append(
                f"| {d} | {eng} | {build:.3f} | {r['compile_s']:.2f} | {r['sec_per_iter'] * 1e3:.2f} | "
                f"{r['final_loss']:.4g} | {err:.3f} ({noisy:.3f}) |"
            )
        if "pgmjax" in rows[d] and "mbi" in rows[d]:
            a, b = rows[d]["pgmjax"], rows[d]["mbi"]
            lines.append(
                f"| {d} | **mbi / pgmjax** | {(b['jt_build_s']) / (a['jt_build_s'] + a.get('plan_build_s', 0)):.1f}x | "
                f"{b['compile_s'] / a['compile_s']:.1f}x | {b['sec_per_iter'] / a['sec_per_iter']:.1f}x | | |"
            )
    lines += [
        "",
        "pgmjax tree build = junction tree + oracle plan (level schedule, routing arrays); mbi = make_junction_tree.",
        "pgmjax mirror descent makes ~1.2-1.4 oracle calls per iteration (line search with step growth); mbi's",
        "makes two (it recomputes the accepted point's marginals).",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--mbi-python", default=None, help="interpreter with mbi==2.0.0 installed (omit to skip mbi)")
    p.add_argument("--out", default="scalability_cpu", help="result name under bench/results/scalability/ (or a path)")
    p.add_argument("--render", default=None, metavar="JSON", help="only write the page beside a result's JSON again")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        print(json.dumps(run_pgmjax(args.child, args.iters, args.repeats)))
        return
    if args.render:
        with open(args.render) as f:
            text = render(json.load(f))
        schema.write_page(args.render, text.splitlines())
        print(text)
        return
    results = []
    meta = schema.run_meta("bench.scalability", argv, extra=("optax", "mbi"),
                           also={**environment(), "iters": args.iters})
    # The mbi child's JSON goes to a private folder, not a fixed name in /tmp.
    with tempfile.TemporaryDirectory() as scratch:
        for d in args.d:
            row = json_line(child_command("bench.scalability", "--child", d, "--iters", args.iters,
                                          "--repeats", args.repeats), f"pgmjax d={d}")
            print(json.dumps(row), flush=True)
            results.append(row)
            if args.mbi_python:
                tmp = os.path.join(scratch, f"mbi_scal_{d}.json")
                subprocess.run(
                    child_command("bench.mbi_scalability", "--d", d, "--iters", args.iters, "--repeats", args.repeats,
                                  "--out", tmp, python=args.mbi_python),
                    check=True, capture_output=True, text=True, cwd=ROOT,
                )
                with open(tmp) as f:
                    mbi = json.load(f)
                row = dict(mbi["results"][0], engine="mbi")
                meta["mbi"] = mbi["meta"]
                print(json.dumps(row), flush=True)
                results.append(row)
            schema.write_result("scalability", args.out, results, meta, quiet=d != args.d[-1],
                                page=render({"meta": meta, "rows": results}).splitlines())


if __name__ == "__main__":
    main()
