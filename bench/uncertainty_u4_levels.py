"""Coverage against the nominal level on generated data: U4's design (bench/uncertainty_u4.py) at several
levels, both methods, the two L2 configurations (exact QP fits), at the CPU size R = B = 100.

Every level is read from the same refits (bootstrap) and the same linearisations. Usage:

    nice python -m bench.uncertainty_u4_levels [--R 100] [--B 100]

Writes bench/results/papers/uncertainty_u4_levels_cpu.{json,md,png}.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from bench import schema
from bench.uncertainty_u4 import u4_design

from pgmjax.uncertainty.simulate import simulate_coverage  # noqa: E402

LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99)
CONFIGS = ("gauss-l2", "laplace-l2")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--R", type=int, default=100)
    ap.add_argument("--B", type=int, default=100)
    ap.add_argument("--out", default="uncertainty_u4_levels_cpu", help="result name under bench/results/papers/ (or a path)")
    args = ap.parse_args(argv)
    t_all, c_all = time.perf_counter(), time.process_time()
    res = {}
    for i, config in enumerate(CONFIGS):
        _, ms, means, base, targets, kinds, truths, loss = u4_design(config)
        t0, c0 = time.perf_counter(), time.process_time()
        cov = simulate_coverage(base, ms, means, targets, truths, R=args.R, B=args.B, key=jax.random.key(i),
                                level=LEVELS, methods=("bootstrap", "linear"), loss=loss, fit_method="qp",
                                draws_per_call=max(1, 4000 // args.B))
        gated = np.array([k != "low count" for k in kinds])
        res[config] = {
            m: {str(lv): [float(np.ravel(r)[0]) for r in cov.rate(m, lv)] for lv in LEVELS} for m in cov.covered}
        res[config]["se_over_sd"] = {m: [float(np.mean(s) / np.std(e, ddof=1)) for s, e in zip(cov.se[m], cov.estimates)]
                                     for m in cov.se}
        res[config]["gated"] = gated.tolist()
        res[config]["converged"] = cov.iterations["converged"]
        res[config]["seconds"] = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, **cov.seconds}
        print(config, {m: {lv: np.mean(np.array(v)[gated]) for lv, v in by.items()} for m, by in res[config].items()
                       if m in cov.covered}, flush=True)
    out = {
        "meta": schema.run_meta("bench.uncertainty_u4_levels", argv),
        "R": args.R, "B": args.B, "kinds": kinds, "results": res,
        "seconds": {"wall": time.perf_counter() - t_all, "cpu": time.process_time() - c_all},
    }
    path = schema.write_result("papers", args.out, None, out["meta"], page=page(out),
                               **{k: v for k, v in out.items() if k != "meta"})
    plot(out, path + ".png")


def page(out) -> list[str]:
    """The result's Markdown page."""
    lines = ["# Coverage against the nominal level on generated data (U4's design, L2 configurations)", "",
             *schema.header_lines(schema.meta_of(out)),
             f"R = {out['R']} noise draws, B = {out['B']} exact (QP) refits per draw; every level read from the same refits "
             "and linearisations. Mean, min and max over the 25 gated queries (the low-count cell left out; one query's "
             f"rate at 90% has a standard error of {np.sqrt(0.09 / out['R']):.3f}).", "",
             "| config | method | " + " | ".join(f"{lv} mean (min-max)" for lv in LEVELS) + " | se/sd (mean) | seconds (wall / CPU) |",
             "|---|---|" + "---|" * (len(LEVELS) + 2)]
    for config, r in out["results"].items():
        g = np.array(r["gated"])
        for m in ("bootstrap", "linear"):
            cells = []
            for lv in LEVELS:
                v = np.array(r[m][str(lv)])[g]
                cells.append(f"{v.mean():.3f} ({v.min():.2f}-{v.max():.2f})")
            lines.append(f"| {config} | {m} | " + " | ".join(cells) + f" | {np.mean(np.array(r['se_over_sd'][m])[g]):.2f} | "
                         f"{r['seconds']['wall']:.0f} / {r['seconds']['cpu']:.0f} |")
    lines += ["", f"Total: {out['seconds']['wall']:.0f} s wall, {out['seconds']['cpu']:.0f} s CPU.", ""]
    return lines


def plot(out, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for config, r in out["results"].items():
        g = np.array(r["gated"])
        for m, marker in (("bootstrap", "o"), ("linear", "s")):
            mean = [np.array(r[m][str(lv)])[g].mean() for lv in LEVELS]
            lo = [np.array(r[m][str(lv)])[g].min() for lv in LEVELS]
            hi = [np.array(r[m][str(lv)])[g].max() for lv in LEVELS]
            ax.errorbar(LEVELS, mean, yerr=[np.subtract(mean, lo), np.subtract(hi, mean)], marker=marker, capsize=3,
                        label=f"{config} {m}", alpha=0.8)
    ax.plot([0.45, 1.0], [0.45, 1.0], "k--", lw=0.8)
    ax.set_xlabel("nominal level")
    ax.set_ylabel("empirical coverage (mean, min-max over 25 queries)")
    ax.set_title(f"U4 tree, R = {out['R']}, B = {out['B']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
