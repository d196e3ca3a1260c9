"""How close low-variance synthetic data comes to the model's clique counts (Adult).

Two models fitted to noisy Adult marginals (sigma 10, key 0): a Chow-Liu tree (14 one-way and 13
two-way marginals) and the 15 benchmark 3-way cliques of the ICML 2019 paper. For each, records are
drawn with ``method="low_variance"`` and ``"exact"`` (key 2) and the largest absolute deviation of
any clique count from ``n p(c)`` is reported per junction-tree clique, with the draw's time.

Usage::

    python -m bench mechanisms low_variance [--data DIR] [--out NAME]   # bench/results/mechanisms/low_variance_cpu
"""

from __future__ import annotations

import argparse
import time

from bench import schema


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--out", default="low_variance_cpu", help="result name under bench/results/mechanisms/ (or a path)")
    args = p.parse_args(argv)
    import jax
    import numpy as np

    import pgmjax as pj
    from bench.problems import chow_liu

    data = pj.datasets.load("adult", args.data)
    edges, _ = chow_liu(data)
    models = {
        "chow-liu tree": [(a,) for a in data.domain.attributes] + edges,
        "benchmark 3-way cliques": pj.datasets.benchmark_cliques("adult", data.domain),
    }
    rows, trees = [], {}
    for name, cliques in models.items():
        ms = pj.noisy_marginals(data, cliques, 10.0, jax.random.key(0))
        model = pj.estimate(data.domain, ms, iters=args.iters)
        trees[name] = {"junction_tree_cliques": [list(c) for c in model.cliques],
                       "cells": [int(np.prod(data.domain.shape_of(c))) for c in model.cliques]}
        for n in (int(round(model.total)), 1_000_000):
            for method in ("low_variance", "exact"):
                t = time.perf_counter()
                draw = model.synthetic_data(n, jax.random.key(2), method=method)
                dt = time.perf_counter() - t
                dev = [float(np.abs(draw.marginal(c) - model.marginal(c) * (n / model.total)).max()) for c in model.cliques]
                rows.append({"model": name, "n": n, "method": method, "seconds": dt, "max_dev": max(dev),
                             "per_clique": dev})
                print(name, n, method, f"{dt:.2f}s max {max(dev):.2f}", flush=True)
    meta = schema.run_meta("bench.low_variance", argv)
    lines = ["# Low-variance synthetic data: clique counts vs the model (Adult)", "", *schema.header_lines(meta),
             "Largest |count - n p(c)| over the cells of each junction-tree clique; models fitted with "
             f"{args.iters} mirror-descent iterations to noisy marginals (sigma 10). Times include the "
             "first call's compilation (exact) and the host-side rounding (low_variance).", ""]
    for name in models:
        lines += [f"## {name}", "", "| records | method | time (s) | worst clique | per clique |", "|---|---|---|---|---|"]
        for d in (r for r in rows if r["model"] == name):
            lines.append(f"| {d['n']:,} | {d['method']} | {d['seconds']:.2f} | {d['max_dev']:.2f} | "
                         + ", ".join(f"{v:.1f}" for v in d["per_clique"]) + " |")
        lines.append("")
    schema.write_result("mechanisms", args.out, rows, meta, page=lines, fit_iters=args.iters, models=trees)


if __name__ == "__main__":
    main()
