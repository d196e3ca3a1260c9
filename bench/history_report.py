"""Tables and plot of ``bench/history_experiments.py`` (kept apart so the runner stays one idea)."""

from __future__ import annotations

import math

import numpy as np

NAMES = {
    "raw": "raw", "kpca_inf": "kPCA α=∞", "kpca_cv": "kPCA CV", "kpca_cv_prior": "kPCA CV+prior",
    "maxent_cv": "maxent CV+prior", "pgm_l2": "pgmjax L2",
}


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.4g}" if abs(v) < 1e4 else f"{v:.3g}"


def _table(results, key, methods) -> list[str]:
    lines = ["| dataset | kind | ε | m | b | " + " | ".join(NAMES[m] for m in methods) + " |",
             "|---|---|---|---|---|" + "---|" * len(methods)]
    for r in results:
        vals = [r[key][m] for m in methods]
        finite = [v for v in vals if v is not None]
        best = min(finite) if finite else None
        cells = [("**" + _fmt(v) + "**") if v is not None and v == best else _fmt(v) for v in vals]
        lines.append(f"| {r['dataset']} | {r['kind']} | {r['eps']:g} | {r['m']} | {r['b']:g} | " + " | ".join(cells) + " |")
    return lines


def write(out: str, meta: dict, results: list, scale: dict) -> None:
    methods = list(NAMES)
    lines = [
        "# Integrating historical noisy answers (Chen, Zhou & Bhowmick, EDBT 2012, section 5.1), in spirit",
        "",
        f"Machine: {meta['machine']}. Date: {meta['date']}. Python {meta['python']}, jax {meta['jax']}, numpy {meta['numpy']}.",
        f"Load average at start {', '.join(f'{x:.2f}' for x in meta['load_start'])}, at end "
        f"{', '.join(f'{x:.2f}' for x in meta['load_end'])} (the machine is shared: times are CPU seconds of this "
        f"process, wall times are longer). Whole run {meta['seconds']:.0f} s wall, {meta['cpu_seconds']:.0f} s CPU.",
        "",
        "Setup (`bench/history_experiments.py`): a history of m random 2-D queries, each answered once with Laplace "
        "noise through `pgmjax.Accountant.measure_many` (ε split equally over the m queries, sensitivity 1 each under "
        "add/remove: b = m/ε), plus all one-way marginals at ε = 0.02 for the prior (ledger ε + 0.02). n public. "
        "NLTCS: all 36 pairs of its first 9 attributes (the paper's 9 attributes and 36 pairs). Adult: the 10 "
        "attributes with fewer than 100 values (6.5e9 cells) and the 9 pairs of consecutive attributes, so that the "
        "exact max-ent dual has a small junction tree. Range queries: a random pair and a random interval on each of its attributes; "
        "counting queries: a random 0/1 table on the pair. One seed per configuration (seed 0).",
        "",
        "Methods, all post-processing of the same release: **raw** (the noisy answers; cannot answer fresh queries), "
        "**kPCA α=∞** (kernel PCA = generalised least squares with the exact total), **kPCA CV** (α by 5-fold "
        "cross-validation, uniform prior), **kPCA CV+prior** (the same with the noisy one-way prior in the inner "
        "product), **maxent CV+prior** (exact dual through the junction tree, the noisy prior, box β = αn/b by 3-fold "
        "CV over β ∈ {10^-0.5, 1, 10^0.5, 10, 10^1.5}, CV fits capped at 3000 iterations, the final fit at 10000), **pgmjax L2** (`pgmjax.estimate`, L2 loss, 1000 mirror-descent "
        "iterations, float32).",
        "",
        "## RMSE over the m past queries (records; best in bold)",
        "",
        *_table(results, "rmse_past", methods),
        "",
        "## RMSE over 200 fresh queries of the same kind, answered from the history only",
        "",
        *_table(results, "rmse_fresh", methods[1:]),
        "",
        "## CPU seconds per method (kPCA CV includes the cross-validation; maxent includes its 15 CV fits)",
        "",
        *_table([{**r, "seconds": r["seconds"]} for r in results], "seconds", methods[1:]),
        "",
        "## Chosen parameters and max-ent convergence",
        "",
        "| dataset | kind | ε | m | rank | α kPCA CV | α kPCA CV+prior | β maxent | maxent gap | iterations | converged |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        me = r["maxent"]
        lines.append(
            f"| {r['dataset']} | {r['kind']} | {r['eps']:g} | {r['m']} | {r['rank']} | {_alpha(r['alpha']['kpca_cv'])} | "
            f"{_alpha(r['alpha']['kpca_cv_prior'])} | {me['beta']:.3g} | {me['gap']:.2e} | {me['iterations']} | {me['converged']} |"
        )
    lines += ["", "## Scaling", "", "Dense eigen route (`kernel_pca`: Gram matrix + `eigh`, one BLAS thread), random "
              "range queries on the chain of all 14 Adult attributes:", "", "| m | CPU s |", "|---|---|"]
    lines += [f"| {e['m']} | {e['seconds']:.2f} |" for e in scale["eigen"]]
    rd = scale["ridge"]
    lines += ["", f"Conjugate-gradient ridge form (`kernel_ridge`) on all 91 two-way marginals of Adult: {rd['rows']:,} past "
              f"rows (a dense kernel would take {rd['dense_kernel_gb']:.0f} GB), Laplace noise at ε = 1 (σ = {rd['sigma']:.0f} "
              f"per cell), raw RMSE {rd['raw_rmse']:.1f}:", "", "| α | CG iterations | CPU s | RMSE of the past cells |", "|---|---|---|---|"]
    lines += [f"| {x['alpha']:.4g} | {x['cg_iterations']} | {x['seconds']:.1f} | {_fmt(x['rmse'])} |" for x in rd["runs"]]
    lines += ["", "## Reading", "", *READING]
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    _plot(out + ".png", results, scale)


def _alpha(a) -> str:
    return "∞" if a == math.inf else f"{a:.3g}"


READING = [
    "See notes at the end of the run (written by hand after looking at the numbers).",
]


def _plot(path: str, results: list, scale: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranged = [r for r in results if r["kind"] == "range"]
    datasets = sorted({r["dataset"] for r in ranged})
    epss = sorted({r["eps"] for r in ranged})
    fig, axes = plt.subplots(len(datasets), 3, figsize=(15, 4.2 * len(datasets)), squeeze=False)
    styles = dict(zip(NAMES, ["k:", "C0--", "C0-", "C1-", "C2-", "C3-"]))
    for i, d in enumerate(datasets):
        for j, key in enumerate(("rmse_past", "rmse_fresh")):
            ax = axes[i, j]
            for e, marker in zip(epss, "os^"):
                rs = sorted((r for r in ranged if r["dataset"] == d and r["eps"] == e), key=lambda r: r["m"])
                for mth in NAMES:
                    ys = [r[key][mth] for r in rs]
                    if any(v is None for v in ys):
                        continue
                    ax.plot([r["m"] for r in rs], ys, styles[mth], marker=marker, label=f"{NAMES[mth]} ε={e:g}")
            ax.set(xscale="log", yscale="log", xlabel="m (past queries)", ylabel="RMSE (records)",
                   title=f"{d}: {'past' if j == 0 else 'fresh'} range queries")
            if i == 0 and j == 0:
                ax.legend(fontsize=6, ncol=2)
        ax = axes[i, 2]
        rs = [r for r in ranged if r["dataset"] == d]
        for mth in list(NAMES)[1:]:
            ms = sorted({r["m"] for r in rs})
            ax.plot(ms, [np.mean([r["seconds"][mth] for r in rs if r["m"] == m]) for m in ms], styles[mth], marker="o", label=NAMES[mth])
        if i == 0:
            ax.plot([e["m"] for e in scale["eigen"]], [e["seconds"] for e in scale["eigen"]], "k-", marker="x", label="kPCA fit alone (Adult chain)")
        ax.set(xscale="log", yscale="log", xlabel="m", ylabel="CPU s", title=f"{d}: run time (mean over ε)")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
