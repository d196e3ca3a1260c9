"""MLDP vs MLDP+PGM vs the plain Laplace method: mean absolute error against the number of training queries.

Issue 5 (MLDP part), the paper's experiments reproduced in spirit: Zhu, Xiong, Li, Zhou & Yu, "Differentially
Private Query Learning: from Data Publishing to Model Publishing" (IEEE BigData 2017, arXiv 1710.05095).

Experiments (every one: the published queries, ``m`` training queries chosen among them by
:func:`pgmjax.mechanisms.query_learning.select_training`, one Laplace release of the training answers with
scale ``S_Fx / eps``, then three estimators on the same noisy answers):

* (a) the paper's Table I/II example: a 4-bin grade histogram (12, 24, 6, 7), the 10 range queries
  published; ``m = 1..10`` and the paper's choice f7..f10 (the single bins);
* (b) a simulated 10-bin histogram (10,000 records, bin probabilities from a Dirichlet(1) draw with
  seed 2017), the 1023 non-empty subset sums published;
* (c) Adult ``age`` (85 values): 1000 of its 3655 range queries published (drawn with
  ``jax.random.key(1)``), the other 2655 ranges are fresh queries;
* (d) Adult ``age`` x ``education-num`` (85 x 16 cells): 1000 random rectangles published, 1000
  other random rectangles fresh (``jax.random.key(2)``).

Arms: ``linear`` (MLDP's regression on indicator features = least squares, the paper's best model for
range queries), ``pgm`` (MLDP+PGM: the same answers as linear measurements, one ``pgmjax.estimate``,
float64, 1000 mirror-descent iterations), ``gaussian`` (the Gaussian-basis model, every training
query a centre, width = median distance between training queries, ridge 1e-2), and ``laplace``
(every published query answered with noise calibrated to the whole published set; it cannot answer
fresh queries). MAE over the published queries and, where there are fresh ones, over those. Medians
over seeds (the seed drives the selector's ties and the noise).

Usage:
    python -m bench papers mldp                 # eps 1 and 0.1, 5 seeds -> bench/results/papers/mldp_cpu.{json,md,png}
    python -m bench papers mldp --quick         # eps 1, 2 seeds, fewer m (a smoke run)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bench import benchutil, schema

import pgmjax as pj  # noqa: E402
from pgmjax.mechanisms.query_learning import QuerySet, fit_regression, laplace_baseline, mldp, training_sensitivity  # noqa: E402

GAUSSIAN = {"model": "gaussian", "ridge": 1e-2}
ARMS = ("linear", "pgm", "gaussian")


def _mae(a, b) -> float:
    return float(np.mean(np.abs(np.asarray(a) - np.asarray(b))))


def experiments(data_dir: str | None, quick: bool) -> list[dict]:
    out = []
    # (a) Table I/II
    dom = pj.Domain({"grade": 4})
    grades = pj.Dataset(np.repeat(np.arange(4), [12, 24, 6, 7])[:, None], dom)
    spans = sorted(((lo, hi) for lo in range(4) for hi in range(lo, 4)), key=lambda s: (-(s[1] - s[0]), s[0]))
    f = QuerySet(dom, [(("grade",), [[1.0 if lo <= j <= hi else 0.0 for j in range(4)] for lo, hi in spans])])
    out.append(
        dict(
            name="a_table1",
            plot_title="(a) Table I/II, 10 ranges",
            title="(a) Table I/II: 4 grade bins, the 10 ranges",
            data=grades, published=f, fresh=None,
            ms=[1, 2, 4, 6, 8, 10] if quick else list(range(1, 11)),
            fixed={"paper f7..f10": np.arange(6, 10)},
        )
    )
    # (b) simulated 10-bin histogram, all 1023 subset sums
    rng = np.random.default_rng(2017)
    dom = pj.Domain({"bin": 10})
    sim = pj.Dataset(rng.choice(10, 10_000, p=rng.dirichlet(np.ones(10)))[:, None], dom)
    out.append(
        dict(
            name="b_subsets",
            plot_title="(b) 10 bins, 1023 subset sums",
            title="(b) simulated 10 bins, 1023 subset sums",
            data=sim, published=QuerySet.subset_sums(dom, "bin"), fresh=None,
            ms=[5, 10, 20, 100, 1023] if quick else [3, 5, 10, 15, 20, 50, 100, 200, 500, 1023],
            fixed={},
        )
    )
    try:
        adult = pj.datasets.load("adult", data_dir)
    except (FileNotFoundError, OSError, ValueError) as e:
        print(f"Adult data not found ({e}); skipping experiments (c) and (d)", file=sys.stderr)
        return out
    # (c) Adult age, 1-D ranges
    age = adult.project(("age",))
    ranges = QuerySet.ranges(age.domain, "age")
    perm = np.asarray(jax.random.permutation(jax.random.key(1), len(ranges)))
    out.append(
        dict(
            name="c_age",
            plot_title="(c) Adult age ranges",
            title="(c) Adult age: 1000 of 3655 ranges published, 2655 fresh",
            data=age, published=ranges.take(np.sort(perm[:1000])), fresh=ranges.take(np.sort(perm[1000:])),
            ms=[10, 42, 85, 340, 1000] if quick else [10, 20, 42, 85, 170, 340, 1000],
            fixed={},
        )
    )
    # (d) Adult age x education-num, 2-D rectangles
    pair = adult.project(("age", "education-num"))
    rects = QuerySet.rectangles(pair.domain, ("age", "education-num"), 2000, key=jax.random.key(2))
    out.append(
        dict(
            name="d_age_edu",
            plot_title="(d) Adult age x edu-num rectangles",
            title="(d) Adult age x education-num: 1000 rectangles published, 1000 fresh",
            data=pair, published=rects.take(np.arange(1000)), fresh=rects.take(np.arange(1000, 2000)),
            ms=[25, 100, 400, 1000],
            fixed={},
            max_seeds=3,  # each engine fit here spends seconds in estimate_total / lipschitz on the 1360-cell Gram
        )
    )
    return out


def run_one(exp: dict, eps: float, seed: int, *, m: int | None = None, index=None, pgm_iters: int = 1000) -> dict:
    """One MLDP run (both arms and the Gaussian-basis model on the same noisy answers)."""
    data, published, fresh = exp["data"], exp["published"], exp["fresh"]
    key = jax.random.key(seed)
    t0 = time.perf_counter()
    if index is None:
        res = mldp(data, eps, key=key, training=published, size=m, fresh=fresh, engine_iters=pgm_iters,
                   fit_options=pj.FitOptions(dtype=jnp.float64))
        answers = res.info["answers"]
    else:  # a fixed training set: the published queries are answered as fresh ones
        res = mldp(data, eps, key=key, training=published.take(index), fresh=published, engine_iters=pgm_iters,
                   fit_options=pj.FitOptions(dtype=jnp.float64))
        answers = {"published": res.info["answers"]["fresh"]}
    seconds = time.perf_counter() - t0
    gauss = fit_regression(res.info["training"], res.info["noisy_answers"], **GAUSSIAN)
    row = {
        "seed": seed,
        "m": len(res.info["training"]),
        "sensitivity": res.info["sensitivity"],
        "sensitivity_exact": res.info["sensitivity_exact"],
        "laplace_scale": res.info["scale"],
        "coverage": res.info["coverage"],
        "total_source": res.info["total_source"],
        "seconds": seconds,
    }
    for part, qs in (("published", published), ("fresh", fresh)):
        if qs is None:
            continue
        truth = exp["truth"][part]
        row[f"mae_{part}_linear"] = _mae(answers[part]["original"], truth)
        row[f"mae_{part}_pgm"] = _mae(answers[part]["pgm"], truth)
        row[f"mae_{part}_gaussian"] = _mae(gauss.predict(qs), truth)
    return row


def summarise(rows: list[dict]) -> dict:
    out = {k: rows[0][k] for k in ("m",)}
    for k in rows[0]:
        if k.startswith("mae_") or k in ("sensitivity", "coverage", "laplace_scale", "seconds"):
            out[k] = benchutil.median([r[k] for r in rows])
    out["sensitivity_exact"] = all(r["sensitivity_exact"] for r in rows)
    out["sensitivity_range"] = [min(r["sensitivity"] for r in rows), max(r["sensitivity"] for r in rows)]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="eps 1, 2 seeds, fewer m")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per setting (default 5; 2 with --quick)")
    ap.add_argument("--eps", type=float, nargs="+", default=None, help="budgets (default 1 0.1; 1 with --quick)")
    ap.add_argument("--data-dir", default=os.environ.get("PGMJAX_DATA"), help="the shared data folder (default: pgmjax's)")
    ap.add_argument("--out", default="mldp_cpu", help="result name under bench/results/papers/ (or a path)")
    ap.add_argument("--only", nargs="*", default=None, help="experiment names to run (a_table1 b_subsets c_age d_age_edu)")
    args = ap.parse_args(argv)
    seeds = args.seeds or (2 if args.quick else 5)
    eps_list = args.eps or ([1.0] if args.quick else [1.0, 0.1])

    start = time.perf_counter()
    load_start = os.getloadavg()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu": schema.cpu_model(),
        "cores": os.cpu_count(),
        "backend": jax.default_backend(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "pgmjax": pj.__version__,
        "seeds": seeds,
        "epsilons": eps_list,
        "quick": args.quick,
        "pgm": "pgmjax.estimate, mirror descent, 1000 iterations, float64, L2 loss with the Laplace std sqrt(2) S / eps",
        "gaussian": GAUSSIAN | {"width": "median distance between training queries", "centers": "every training query"},
        "load_start": load_start,
    }
    results = []
    for exp in experiments(args.data_dir, args.quick):
        if args.only and exp["name"] not in args.only:
            continue
        t_exp = time.perf_counter()
        n_seeds = min(seeds, exp.get("max_seeds", seeds))
        exp["truth"] = {"published": exp["published"].answer(exp["data"])}
        if exp["fresh"] is not None:
            exp["truth"]["fresh"] = exp["fresh"].answer(exp["data"])
        entry = {
            "name": exp["name"],
            "title": exp["title"],
            "plot_title": exp["plot_title"],
            "records": len(exp["data"]),
            "cells": int(sum(exp["data"].domain.size(c) for c in exp["published"].cliques)),
            "published": len(exp["published"]),
            "fresh": 0 if exp["fresh"] is None else len(exp["fresh"]),
            "published_sensitivity": training_sensitivity(exp["published"]),
            "mean_abs_true_answer": float(np.mean(np.abs(exp["truth"]["published"]))),
            "seeds": n_seeds,
            "by_eps": {},
        }
        for eps in eps_list:
            block = {"laplace": {}, "m": [], "fixed": {}}
            lap = []
            for seed in range(n_seeds):
                y, acc = laplace_baseline(exp["data"], eps, exp["published"], key=jax.random.key(1000 + seed))
                assert acc.spent == eps
                lap.append(_mae(y, exp["truth"]["published"]))
            block["laplace"] = {"scale": entry["published_sensitivity"] / eps, "mae_published": benchutil.median(lap), "runs": lap}
            for m in exp["ms"]:
                rows = [run_one(exp, eps, seed, m=m) for seed in range(n_seeds)]
                s = summarise(rows) | {"runs": rows}
                block["m"].append(s)
                print(
                    f"{exp['name']} eps={eps:g} m={m}: S={s['sensitivity_range']} cov={s['coverage']:.3f} "
                    + " ".join(f"{k[4:]}={v:.4g}" for k, v in s.items() if k.startswith("mae_"))
                    + f" laplace={block['laplace']['mae_published']:.4g} ({s['seconds']:.2f} s/run)",
                    flush=True,
                )
            for label, index in exp["fixed"].items():
                rows = [run_one(exp, eps, seed, index=index) for seed in range(n_seeds)]
                block["fixed"][label] = summarise(rows) | {"runs": rows}
                print(f"{exp['name']} eps={eps:g} {label}: " + " ".join(
                    f"{k[4:]}={v:.4g}" for k, v in block["fixed"][label].items() if k.startswith("mae_")), flush=True)
            entry["by_eps"][str(eps)] = block
        entry["seconds"] = time.perf_counter() - t_exp
        results.append(entry)
    meta["seconds"] = time.perf_counter() - start
    meta["load_end"] = os.getloadavg()
    meta = schema.run_meta("bench.mldp", argv, also=meta)
    out = schema.result_path("papers", args.out)
    results = json.loads(json.dumps(results, default=float))
    schema.write_result("papers", out, results, meta, page=render(meta, results, os.path.basename(out)).splitlines())
    plot(meta, results, out + ".png")
    print(f"wrote {out}.json, .md, .png in {meta['seconds']:.0f} s")


def render(meta: dict, results: list[dict], stem: str) -> str:
    lines = [
        "# MLDP vs MLDP+PGM vs the plain Laplace method (issue 5; Zhu et al., IEEE BigData 2017, experiments in spirit)",
        "",
        f"Machine: {meta['cpu']}, {meta['cores']} cores, backend {meta['backend']}. Date: {meta['date']}.",
        f"Versions: Python {meta['python']}, jax {meta['jax']}, numpy {meta['numpy']}, pgmjax {meta['pgmjax']}.",
        f"Load average (1, 5, 15 min) at start {', '.join(f'{x:.2f}' for x in meta['load_start'])}, at end "
        f"{', '.join(f'{x:.2f}' for x in meta['load_end'])}: the machine is shared, times are indicative. "
        f"Whole run {meta['seconds']:.0f} s.",
        "",
        f"Every cell is the median over {meta['seeds']} seeds (fewer where stated) of the mean absolute error (MAE, in records) of one arm. "
        "The seed drives the selector's tie-breaks and the Laplace noise; all arms of a run share one noisy release "
        "of the m training answers (pure eps-DP, ledger = eps exactly, scale S / eps with S the training set's exact "
        "sensitivity, add/remove-one neighbours).",
        "",
        "* **linear**: MLDP with linear regression on the queries' indicator features (least squares, minimum norm);",
        "* **+PGM**: MLDP+PGM, the same noisy answers as linear measurements for `pgmjax.estimate` "
        "(1000 mirror-descent iterations, float64, total estimated from the measurements);",
        f"* **gauss**: MLDP with the Gaussian-basis model (every training query a centre, width = median distance "
        f"between training queries, ridge {meta['gaussian']['ridge']:g}; the ridge was picked from "
        "{0, 1e-2, 1, 100} on one run of (b): it is the paper's model, not a tuned competitor);",
        "* **Laplace**: every published query answered with Lap(S_pub / eps), S_pub the published set's sensitivity "
        "(it cannot answer fresh queries).",
        "",
        "S = the training set's sensitivity (median; the min-max over seeds when it varies), cov = share of cells "
        "touched by a training query. Published = the queries the curator publishes (training queries are chosen "
        "among them); fresh = queries outside that set, answered by the models at no privacy cost.",
        "",
    ]
    for r in results:
        lines += [f"## {r['title']}", ""]
        lines.append(
            f"{r['records']:,} records, {r['cells']:,} cells, {r['published']:,} published queries "
            f"(sensitivity {r['published_sensitivity']:g}), {r['fresh']:,} fresh; mean |true answer| "
            f"{r['mean_abs_true_answer']:,.1f}. Medians over {r['seeds']} seeds. Time {r['seconds']:.0f} s."
        )
        lines.append("")
        fresh = r["fresh"] > 0
        for eps, block in r["by_eps"].items():
            head = "| m | S | cov | linear | +PGM | gauss |" + (" linear fresh | +PGM fresh | gauss fresh |" if fresh else "") + " Laplace |"
            lines += [f"eps = {eps}:", "", head, "|" + "---|" * (head.count("|") - 1)]
            entries = [(str(s["m"]), s) for s in block["m"]] + [(k, s) for k, s in block["fixed"].items()]
            best_pub = min(min(s[f"mae_published_{a}"] for a in ARMS) for _, s in entries)  # bold: within 0.1% of the best
            for label, s in entries:
                lo, hi = s["sensitivity_range"]
                sens = f"{s['sensitivity']:g}" if lo == hi else f"{s['sensitivity']:g} ({lo:g}-{hi:g})"

                def cell(v, best=None):
                    txt = f"{v:,.3g}" if v < 1000 else f"{v:,.0f}"
                    return f"**{txt}**" if best is not None and v <= best * (1 + 1e-3) else txt

                row = [label, sens, f"{s['coverage']:.3f}"]
                row += [cell(s[f"mae_published_{a}"], best_pub) for a in ARMS]
                if fresh:
                    row += [cell(s[f"mae_fresh_{a}"]) for a in ARMS]
                row.append(cell(block["laplace"]["mae_published"]))
                lines.append("| " + " | ".join(row) + " |")
            lines.append("")
    lines += [f"Raw numbers (every seed): `{stem}.json`; plot: `{stem}.png`.", ""]
    return "\n".join(lines)


def plot(meta: dict, results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps_list = [str(e) for e in meta["epsilons"]]
    fig, axes = plt.subplots(len(eps_list), len(results), figsize=(4.2 * len(results), 3.6 * len(eps_list)), squeeze=False)
    colours = {"linear": "tab:blue", "pgm": "tab:red", "gaussian": "tab:green"}
    names = {"linear": "MLDP linear", "pgm": "MLDP+PGM", "gaussian": "MLDP Gaussian basis"}
    for j, r in enumerate(results):
        for i, eps in enumerate(eps_list):
            ax = axes[i, j]
            block = r["by_eps"][eps]
            ms = [s["m"] for s in block["m"]]
            for a in ARMS:
                ax.plot(ms, [s[f"mae_published_{a}"] for s in block["m"]], "o-", color=colours[a], label=names[a], ms=3)
                if r["fresh"]:
                    ax.plot(ms, [s[f"mae_fresh_{a}"] for s in block["m"]], "x--", color=colours[a], label=names[a] + " (fresh)", ms=4, lw=0.8)
            ax.axhline(block["laplace"]["mae_published"], color="k", ls=":", label="Laplace (published)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{r['plot_title']}, eps = {eps}", fontsize=8)
            ax.set_xlabel("training queries m", fontsize=8)
            ax.set_ylabel("MAE (records)", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, which="both", alpha=0.3)
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle(
        f"MLDP vs MLDP+PGM vs Laplace, median of {meta['seeds']} seeds; {meta['cpu']} ({meta['cores']} cores), "
        f"jax {meta['jax']}, pgmjax {meta['pgmjax']}, {meta['date']}",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
