"""Many two-way marginals of one table: reductions (one per marginal) against matrix products.

The loss of an L2 fit and its gradient with respect to the table, for every two-way marginal of a table of
``--attrs`` binary attributes (NLTCS's shape at 16: 120 pairs of a 65,536-cell table), computed

* ``reductions``: one two-stage sum per marginal (``pgmjax.kernels.sum_axes``), as the engine did;
* ``products``: ``pgmjax.fit.pair_marginals.predict`` with the layout ``plan_layout`` picks.

Each mode runs in a fresh process (alternating, ``--rounds`` times) and reports tracing + lowering, XLA
compile (the engine's compiler options, XLA's default emitters) and the warm call's time (median of 200).

Usage::

    python bench/pair_marginals.py --attrs 16 --rounds 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time


def child(mode: str, attrs: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from pgmjax import compiler
    from pgmjax.fit import pair_marginals
    from pgmjax.kernels import sum_axes

    pairs = list(itertools.combinations(range(attrs), 2))
    rng = np.random.default_rng(0)
    table = rng.random((2,) * attrs).astype(np.float32)
    table /= table.sum()
    if mode == "reductions":
        y = np.concatenate([table.sum(axis=tuple(a for a in range(attrs) if a not in p)).ravel() for p in pairs])
        y = y + np.float32(1e-3) * rng.standard_normal(y.size).astype(np.float32)

        def loss(t, y):
            pred = jnp.concatenate([sum_axes(t, tuple(a for a in range(attrs) if a not in p)).reshape(-1) for p in pairs])
            return 0.5 * jnp.sum((pred - y) ** 2)

        args = (jnp.asarray(table), jnp.asarray(y))
    else:
        layout = pair_marginals.plan_layout(table.shape, pairs)
        left, right = pair_marginals.onehots(layout, np.float32)
        y, w = np.zeros(layout.rows, np.float32), np.zeros(layout.rows, np.float32)
        for p in pairs:
            at = pair_marginals.positions(layout, p)
            y[at] = table.sum(axis=tuple(a for a in range(attrs) if a not in p)).ravel()
            w[at] = 1
        y = y + np.float32(1e-3) * rng.standard_normal(y.size).astype(np.float32) * w

        def loss(t, y, w, left, right):
            pred = pair_marginals.predict(layout, t[None], left, right)[0]
            return 0.5 * jnp.sum(w * (pred - y) ** 2)

        args = tuple(jnp.asarray(a) for a in (table, y, w, left, right))
    opts = compiler.options_for(compiler.backend(), engine=True)  # XLA:CPU's options only on the CPU
    with jax.default_matmul_precision("highest"):
        f = jax.jit(jax.value_and_grad(loss), compiler_options=opts)
        t0 = time.perf_counter()
        lowered = f.lower(*args)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(200):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t)
    times.sort()
    kernels = sum(1 for line in compiled.as_text().splitlines() if " fusion(" in line or " dot(" in line)
    return {"mode": mode, "trace_lower_s": t1 - t0, "compile_s": t2 - t1, "call_ms": 1e3 * times[len(times) // 2],
            "kernels": kernels}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attrs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.attrs)))
        return
    for r in range(args.rounds):
        for mode in ("reductions", "products") if r % 2 == 0 else ("products", "reductions"):
            out = subprocess.run([sys.executable, __file__, "--attrs", str(args.attrs), "--child", mode],
                                 capture_output=True, text=True, env=os.environ.copy(), check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"round {r} {row['mode']:<10} trace+lower {row['trace_lower_s']:.3f} s  compile {row['compile_s']:.3f} s"
                  f"  call {row['call_ms']:.3f} ms  kernels {row['kernels']}", flush=True)


if __name__ == "__main__":
    main()
