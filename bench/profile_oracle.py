"""Per-component timings of one mirror-descent iteration on the scalability problem (pgmjax only).

    python bench/profile_oracle.py --d 1000 --repeats 30
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import jax.numpy as jnp
import numpy as np
from scalability_problem import make_problem

import pgmjax as pj
from pgmjax.fit import estimation, losses
from pgmjax.graph import oracle


def setup(d, dtype=jnp.float32):
    prob = make_problem(d)
    domain = pj.Domain(prob["domain"])
    ms = [pj.Measurement(c, y, stddev=prob["sigma"]) for c, y in zip(prob["cliques"], prob["noisy"])]
    plan = oracle.make_plan(domain, [m.clique for m in ms])
    meas = losses.stack_measurements(plan, ms, dtype)
    L = losses.lipschitz_constant(ms, plan)
    total = 10000.0
    problem = estimation.Problem(plan, meas, jnp.asarray(total, dtype), jnp.asarray(L, dtype), jnp.zeros((), dtype), "l2")
    theta = plan.zeros(dtype)
    return problem, theta, 1.0 / (L * total)


def med(f, args, repeats):
    out = f(*args)
    jax.block_until_ready(out)
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append(time.perf_counter() - t)
    return np.median(ts), np.percentile(ts, 25), np.percentile(ts, 75)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--iters", type=int, default=50)
    a = p.parse_args()
    problem, theta, step = setup(a.d)
    plan = problem.plan
    print("runs:", [(r.num_levels, r.slots, [c.shape for c in r.classes]) for r in plan.runs])
    print("units:", plan.units)
    # a non-trivial theta: after some MD iterations
    md = estimation.MirrorDescent()
    s = estimation._init(md, problem, theta, jnp.asarray(step, jnp.float32))
    s = estimation._chunk(md, problem, s, jnp.asarray(20, jnp.int32))
    theta = s.theta

    fwd = jax.jit(oracle.log_partition)
    marg = jax.jit(lambda pl, th: oracle.marginals(pl, th, problem.total))
    lossg = jax.jit(lambda pr, mu: pr.loss_and_grad(mu))
    mu = marg(plan, theta)[0]
    t = {}
    for _ in range(2):
        t["fwd"] = med(fwd, (plan, theta), a.repeats)
        t["fwd+bwd"] = med(marg, (plan, theta), a.repeats)
        t["loss+grad"] = med(lossg, (problem, mu), a.repeats)
        n = jnp.asarray(a.iters, jnp.int32)
        z = jnp.asarray(0, jnp.int32)
        t50 = med(estimation._chunk, (md, problem, s, n), max(3, a.repeats // 5))
        t0 = med(estimation._chunk, (md, problem, s, z), max(3, a.repeats // 5))
        t["iter"] = tuple((x - y) / a.iters for x, y in zip(t50, t0))
    s2 = estimation._chunk(md, problem, s, n)
    print("oracle calls/iter:", (int(s2.oracle_calls) - int(s.oracle_calls)) / a.iters)
    for k, v in t.items():
        print(f"{k:10s} median {v[0]*1e3:8.3f} ms  (IQR {v[1]*1e3:.3f}-{v[2]*1e3:.3f})")


if __name__ == "__main__":
    main()
