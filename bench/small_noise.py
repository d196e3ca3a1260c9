"""Very small noise (sigma = 0.01, 400 records, five attributes, a cycle of five pairs): final loss of mirror
descent (default, with momentum), Algorithm 1 (``MirrorDescent(momentum=0, min_growth=1.25)``) and dual
averaging, float64 and float32, after 1,000 and 2,000 iterations. Prints one line per fit.

    python bench/small_noise.py
"""
import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import pgmjax as pj  # noqa: E402
from pgmjax.fit import estimation  # noqa: E402
from pgmjax.fit.mirror_descent import MirrorDescent  # noqa: E402
rng = np.random.default_rng(1)
n = 400
sizes = {"a": 4, "b": 6, "c": 5, "d": 3, "e": 7}
X = np.stack([rng.integers(0, k, n) for k in sizes.values()], 1)
X[:, 1] = np.where(rng.random(n) < 0.7, X[:, 0], X[:, 1]); X[:, 2] = np.where(rng.random(n) < 0.6, X[:, 1] % 5, X[:, 2])
data = pj.Dataset(X, pj.Domain(sizes))
cl = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("a", "e")]
ms = [pj.Measurement(c, data.marginal(c) + rng.normal(0, 0.01, data.marginal(c).shape), stddev=0.01) for c in cl]
orig = estimation.estimator
for name in ["default", "alg1", "da"]:
    for dt in [jnp.float64, jnp.float32]:
        for it in [1000, 2000]:
            if name == "alg1":
                estimation.estimator = lambda m, p: MirrorDescent(momentum=0.0, min_growth=1.25) if m == "mirror_descent" else orig(m, p)
            else:
                estimation.estimator = orig
            method = "dual_averaging" if name == "da" else "mirror_descent"
            m = pj.estimate(data.domain, ms, method, iters=it, dtype=dt)
            print(name, jnp.dtype(dt).name, it, f"{m.loss:.3f}", flush=True)
