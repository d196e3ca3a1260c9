"""The size limit on a GPU: the default comes from the device's memory, and a huge model is refused at once.

Usage: python bench/size_limit_gpu_check.py OUT.json  (prints the same as JSON)
"""
import json, sys, time

import numpy as np

import pgmjax as pj
from pgmjax.graph import size_limit

out = {}
import jax
out["devices"] = [str(d) for d in jax.devices()]
out["backend"] = jax.default_backend()
out["device_bytes_limit"] = size_limit._accelerator_memory()
out["physical_memory"] = size_limit.physical_memory()
out["default_limit"] = size_limit.max_model_bytes()
names = [f"x{i}{j}" for i in range(5) for j in range(5)]
dom = pj.Domain({a: 50 for a in names})
cl = [(f"x{i}{j}", f"x{i+1}{j}") for i in range(4) for j in range(5)] + [(f"x{i}{j}", f"x{i}{j+1}") for i in range(5) for j in range(4)]
t = time.perf_counter()
try:
    pj.estimate(dom, [pj.Measurement(c, np.ones(2500)) for c in cl], iters=5)
    out["grid"] = "no error"
except pj.ModelTooLarge as e:
    out["grid"] = str(e)
out["grid_seconds"] = time.perf_counter() - t
dom = pj.Domain({"a": 2, "b": 3, "c": 100_000, "d": 100_000})
try:
    pj.estimate(dom, [pj.Measurement(("a", "b"), np.ones(6))], iters=5, cliques=[("c", "d")])
    out["extra_clique"] = "no error"
except pj.ModelTooLarge as e:
    out["extra_clique"] = str(e)
m = pj.estimate(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), np.arange(1.0, 7.0))], iters=50)
out["small_fit_total"] = float(m.total)
print(json.dumps(out, indent=1))
if len(sys.argv) > 1:
    json.dump(out, open(sys.argv[1], "w"), indent=1)
