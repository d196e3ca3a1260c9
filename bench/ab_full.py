"""A/B per-iteration time of default mirror descent on the scalability problem, two packages in one process.

The packages are importable names of pgmjax copies (e.g. a copy of an older
commit renamed ``pgmjax_base`` on PYTHONPATH, and ``pgmjax``). Runs alternate
between the packages; per iteration = (50-iteration chunk - 0-iteration
chunk) / 50, medians and IQR over the repeats. Compile = first chunk call
(tracing + XLA compile), measured once per package.

    PYTHONPATH=/tmp/pgb python bench/ab_full.py --d 1000 --packages pgmjax_base pgmjax
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import jax.numpy as jnp
import numpy as np

from scalability_problem import make_problem


def prepare(pkg_name, d, iters):
    pj = importlib.import_module(pkg_name)
    est = importlib.import_module(pkg_name + ".estimation")
    losses = importlib.import_module(pkg_name + ".losses")
    oracle = importlib.import_module(pkg_name + ".oracle")
    prob = make_problem(d)
    domain = pj.Domain(prob["domain"])
    ms = [pj.Measurement(c, y, stddev=prob["sigma"]) for c, y in zip(prob["cliques"], prob["noisy"])]
    plan = oracle.make_plan(domain, [m.clique for m in ms])
    dt = jnp.float32
    meas = losses.stack_measurements(plan, ms, dt)
    L = losses.lipschitz_constant(ms)
    problem = est.Problem(plan, meas, jnp.asarray(10000.0, dt), jnp.asarray(L, dt), jnp.zeros((), dt), "l2")
    md = est.MirrorDescent()
    t = time.perf_counter()
    s = est._init(md, problem, plan.zeros(dt), jnp.asarray(1.0 / (L * 10000.0), dt))
    out = est._chunk(md, problem, s, jnp.asarray(iters, jnp.int32))
    jax.block_until_ready(out)
    first = time.perf_counter() - t
    s = out  # time from a warmed-up state

    def run(n):
        t = time.perf_counter()
        o = est._chunk(md, problem, s, jnp.asarray(n, jnp.int32))
        jax.block_until_ready(o)
        return time.perf_counter() - t, o

    run(iters), run(0)
    return run, first


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--packages", nargs="+", required=True)
    a = p.parse_args()
    jax.config.update("jax_enable_compilation_cache", False)
    runs = {}
    for pkg in a.packages:
        runs[pkg] = prepare(pkg, a.d, a.iters)
        print(f"{pkg}: first chunk call (compile + {a.iters} it.) {runs[pkg][1]:.2f} s", flush=True)
    per = {pkg: [] for pkg in a.packages}
    calls = {}
    for _ in range(a.repeats):
        for pkg in a.packages:
            full, o = runs[pkg][0](a.iters)
            zero, o0 = runs[pkg][0](0)
            per[pkg].append((full - zero) / a.iters)
            calls[pkg] = (int(o.oracle_calls) - int(o0.oracle_calls)) / a.iters, float(o.loss)
    for pkg in a.packages:
        x = np.asarray(per[pkg]) * 1e3
        print(f"d={a.d} {pkg}: per iteration median {np.median(x):.3f} ms, IQR {np.percentile(x, 25):.3f}-{np.percentile(x, 75):.3f}, "
              f"min {x.min():.3f} (n={len(x)}); oracle calls/it {calls[pkg][0]:.2f}, loss {calls[pkg][1]:.6g}")


if __name__ == "__main__":
    main()
