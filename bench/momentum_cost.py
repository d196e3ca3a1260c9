"""Steady-state cost of mirror descent's momentum: ms per iteration, oracle calls per iteration and ms per
oracle call of the default ``MirrorDescent`` against Algorithm 1 (``momentum=0, min_growth=1.25``), both
carrying their marginals, on one engine benchmark problem, float32. After 50 warm-up iterations, three
alternating rounds of one 200-iteration compiled chunk each, in one process.

    python bench/momentum_cost.py stroke
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import engine_problems as ep  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import pgmjax as pj  # noqa: E402
from pgmjax.compiler import to_device  # noqa: E402
from pgmjax.fit import estimation  # noqa: E402
from pgmjax.fit.batch_problem import make_problem  # noqa: E402
from pgmjax.fit.mirror_descent import MirrorDescent  # noqa: E402

name = sys.argv[1]
p = ep.make(name)
dom = pj.Domain(p["domain"])
meas = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]
prob = make_problem(dom, meas)
variants = {"default": MirrorDescent(), "alg1": MirrorDescent(momentum=0.0, min_growth=1.25)}
res = {}
for rep in range(3):
    for v, est in variants.items():
        th = prob.plan.zeros()
        st = estimation._start(est, prob, th, to_device(1.0 / float(prob.lipschitz * prob.total), np.float32))
        st = estimation._chunk(est, prob, st, to_device(50, np.int32)); jax.block_until_ready(st.loss)
        c0 = int(st.oracle_calls)
        t = time.perf_counter()
        st = estimation._chunk(est, prob, st, to_device(200, np.int32)); jax.block_until_ready(st.loss)
        dt = (time.perf_counter() - t) / 200
        calls = (int(st.oracle_calls) - c0) / 200
        res.setdefault(v, []).append((dt * 1e3, calls))
for v, r in res.items():
    print(name, v, "ms/it", [f"{a:.3f}" for a, _ in r], "calls/it", [f"{b:.2f}" for _, b in r], "ms/call", f"{min(a/b for a, b in r):.3f}")
