"""A/B timings of oracle variants on the scalability problem, interleaved in one process.

Variants are functions ``(plan, theta, total) -> (mu, log_z)`` named on the command
line (``module:function``); each is timed alone (one oracle call) and inside a
compiled chunk of mirror-descent iterations (``oracle.marginals`` is swapped
while the chunk is traced). Medians and IQR over interleaved repeats.

    python bench/ab_oracle.py --d 1000 --variants pgmjax.graph.oracle:marginals_autodiff pgmjax.graph.oracle:marginals
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
from profile_oracle import setup

from pgmjax.fit import estimation
from pgmjax.graph import oracle


def load(spec):
    mod, fn = spec.split(":")
    return getattr(importlib.import_module(mod), fn)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--variants", nargs="+", required=True)
    a = p.parse_args()
    problem, theta0, step = setup(a.d)
    plan = problem.plan
    md = estimation.MirrorDescent()
    s = estimation._init(md, problem, theta0, jnp.asarray(step, jnp.float32))
    s = estimation._chunk(md, problem, s, jnp.asarray(20, jnp.int32))
    theta = s.theta
    original = oracle.marginals
    calls, chunks, compile_s = {}, {}, {}
    for v in a.variants:
        f = load(v)
        oracle.marginals = f
        try:
            calls[v] = jax.jit(lambda pl, th, f=f: f(pl, th, problem.total))
            t = time.perf_counter()
            ch = jax.jit(lambda pr, st: jax.lax.fori_loop(0, a.iters, lambda _, x: md.step(pr, x), st)).lower(problem, s).compile()
            compile_s[v] = time.perf_counter() - t
            chunks[v] = ch
            jax.block_until_ready(calls[v](plan, theta))
        finally:
            oracle.marginals = original
    ref = calls[a.variants[0]](plan, theta)
    for v in a.variants[1:]:
        out = calls[v](plan, theta)
        err = max(float(jnp.max(jnp.abs(out[0][k] - ref[0][k]))) for k in ref[0])
        print(f"{v}: max |mu - mu_ref| = {err:.3g}, log_z diff {float(out[1] - ref[1]):.3g}")
    res = {v: {"oracle": [], "iter": []} for v in a.variants}
    for rep in range(a.repeats):
        for v in a.variants:
            for _ in range(3):
                t = time.perf_counter(); jax.block_until_ready(calls[v](plan, theta)); res[v]["oracle"].append(time.perf_counter() - t)
            t = time.perf_counter(); out = chunks[v](problem, s); jax.block_until_ready(out.theta)
            res[v]["iter"].append((time.perf_counter() - t) / a.iters)
    for v in a.variants:
        st = chunks[v](problem, s)
        print(f"{v}: compile(chunk) {compile_s[v]:.2f} s, oracle calls/iter {(int(st.oracle_calls) - int(s.oracle_calls)) / a.iters:.2f}, loss {float(st.loss):.6g}")
        for k, xs in res[v].items():
            xs = np.asarray(xs) * 1e3
            print(f"   {k:7s} median {np.median(xs):7.3f} ms  IQR {np.percentile(xs, 25):.3f}-{np.percentile(xs, 75):.3f}  (n={len(xs)})")


if __name__ == "__main__":
    main()
