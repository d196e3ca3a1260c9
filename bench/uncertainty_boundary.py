"""Intervals near the boundary of the marginal polytope: a study on the Adult designs of
bench/uncertainty_coverage.py (MST-style measurements, uncompressed or with MST's domain compression).

The basic bootstrap approximates the law of ``g_hat - g`` by that of ``g* - g_hat`` in a world whose truth
is the fit ``g_hat``. Cells that are 0 in the truth are estimated above 0 (the fit keeps the positive part
of their noise), so the fit is not at the boundary where the truth is, and the bootstrap world
under-states the estimator's bias (Andrews, Econometrica 2000: the bootstrap is inconsistent at the
boundary). The remedy studied here centres the bootstrap world at a *thresholded* fit instead: every
measured cell of the fit below ``k`` noise standard deviations is set to 0 and the result is projected back
onto consistent marginals (the exact L2 fit of those answers), the analogue for the marginal polytope of the
thresholded-estimator bootstrap of Chatterjee & Lahiri ("Bootstrapping Lasso estimators", JASA 2011,
consistent where the plain bootstrap is not because parameters on the boundary are set exactly to it), and of
generalised moment selection (Andrews & Soares, Econometrica 2010: inequalities within ``kappa`` sd of
binding are treated as binding). The interval is ``[g_hat - q_hi(g* - g~), g_hat - q_lo(g* - g~)]``, where
``g~`` is the centre's answer and ``g*`` the refits of ``y* = Q mu~ + e*`` (``k = 0``: the basic interval).

A second remedy, ``--lam``: the m-out-of-n bootstrap (Bickel, Goetze & van Zwet, "Resampling fewer
observations than the original sample", Statistica Sinica 1997), which Andrews (2000) shows to be consistent at
the boundary. In the small-noise asymptotics of these fits the noise scale plays the part of ``n^(-1/2)``, so
resampling ``m < n`` observations becomes re-noising with the noise inflated by ``lam = sqrt(n / m) > 1``:
``y* = Q mu_hat + lam e*``, and the deviations rescaled, ``(g* - g_hat) / lam``. Relative to the inflated noise
the fit is close to the boundary again, so the world reproduces the boundary's bias (for a non-linear answer
it also inflates the second-order bias by ``lam``).

All fits are exact (the QP of :mod:`pgmjax.uncertainty.qp`). Every centre's refits use the same noise
draws. Usage:

    nice python -m bench.uncertainty_boundary [--R 20] [--B 40] [--k 0,1,2,3] [--lam 2,3] [--compress] [--tag TAG]

Writes bench/results/papers/uncertainty_boundary_{uncompressed,compressed}[_TAG].{json,md}.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import pgmjax as pj  # noqa: E402
from pgmjax.uncertainty.bootstrap import draw_answers, refit  # noqa: E402
from pgmjax.uncertainty.simulate import predictions_batch  # noqa: E402

from bench import schema
from bench.uncertainty_coverage import compressed_design, design, junction_tree_product, queries

GROUPS = ("measured pair cell", "unmeasured pair cell", "range query")


def first_col(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v.reshape(v.shape[0], -1)[:, 0]


def thresholded_centre(stub, ms, pred, k, targets):
    """The centre of the bootstrap world: measured cells of the fit below ``k`` sd set to 0, projected back
    onto consistent marginals (exact L2 fit). ``pred``: per measurement ``(R, rows)`` the fit's answers."""
    ys = [np.where(p < k * m.row_stddev(), 0.0, p) for p, m in zip(pred, ms)]
    fit = refit(stub, ms, ys, targets, fit_method="qp")
    return fit


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join(schema.ROOT, "..", "shared", "data")))
    ap.add_argument("--R", type=int, default=20)
    ap.add_argument("--B", type=int, default=40)
    ap.add_argument("--k", default="0,1,2,3", help="thresholds in noise sd (0: the plain basic bootstrap)")
    ap.add_argument("--lam", default="", help="noise inflation factors of the m-out-of-n variant (e.g. 2,3)")
    ap.add_argument("--sigma", type=float, default=20.0)
    ap.add_argument("--compress", action="store_true")
    ap.add_argument("--per", type=int, default=4, help="outer draws per batched refit call")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    name = "uncertainty_boundary_" + ("compressed" if args.compress else "uncompressed") + (f"_{args.tag}" if args.tag else "")
    out_path = schema.result_path("papers", name)
    t_all, c_all = time.perf_counter(), time.process_time()
    data = pj.datasets.load("adult", args.data)
    ms, means, edges = design(data, args.sigma)
    f64 = jnp.float64
    stub = pj.estimate(data.domain, ms, iters=1, dtype=f64)
    closed = junction_tree_product(data, edges, stub.plan, float(data.records.shape[0]))
    targets, kinds = queries(data, closed, edges, np.random.default_rng(0))
    fit_targets = targets
    if args.compress:
        cdata, ms, means, lift, _ = compressed_design(data, ms, edges, args.sigma)
        fit_targets = [lift(q) for q in targets]
        stub = pj.estimate(cdata.domain, ms, iters=1, dtype=f64)
    truth = refit(stub, ms, [np.asarray(m, np.float64)[None] for m in means], fit_targets, fit_method="qp")
    tv = np.array([first_col(v)[0] for v in truth.values])
    key = jax.random.key(0)
    k_outer, k_boot = jax.random.split(key)
    ys = draw_answers(means, ms, args.R, k_outer)
    outer = refit(stub, ms, ys, fit_targets, fit_method="qp")
    est = np.stack([first_col(v) for v in outer.values], 1)  # (R, Q)
    pred = predictions_batch(stub.plan, outer.theta, outer.totals, ms)
    ks = [("k", float(x)) for x in args.k.split(",") if x] + [("lam", float(x)) for x in args.lam.split(",") if x]
    res = {}
    timings = {}
    for kind, k in ks:
        t0, c0 = time.perf_counter(), time.process_time()
        lam = k if kind == "lam" else 1.0
        label = str(k) if kind == "k" else f"lam={k}"
        if k == 0 or kind == "lam":
            centre_theta, centre_tot, gt = outer.theta, outer.totals, est
        else:
            cen = thresholded_centre(stub, ms, pred, k, fit_targets)
            centre_theta, centre_tot = cen.theta, cen.totals
            gt = np.stack([first_col(v) for v in cen.values], 1)
        cpred = predictions_batch(stub.plan, centre_theta, centre_tot, ms)
        gstar = np.zeros((args.R, args.B, len(targets)))
        for c, r0 in enumerate(range(0, args.R, args.per)):
            rs = np.arange(r0, min(args.R, r0 + args.per))
            mean = [np.repeat(p[rs], args.B, axis=0) for p in cpred]
            star = draw_answers(mean, ms, rs.size * args.B, jax.random.fold_in(k_boot, c))  # same draws for every k
            star = [mu + lam * (s_ - mu) for mu, s_ in zip(mean, star)]  # m-out-of-n: noise sd lam sigma
            reps = refit(stub, ms, star, fit_targets, fit_method="qp")
            gstar[rs] = np.stack([first_col(v) for v in reps.values], 1).reshape(rs.size, args.B, -1)
        timings[label] = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}
        res[label] = {"centre": gt, "gstar": gstar, "lam": lam}
        print(f"{label}: {timings[label]}", flush=True)
    sd = est.std(0, ddof=1)
    summary = {}
    for k, r in res.items():
        d = (r["gstar"] - r["centre"][:, None, :]) / r["lam"]  # (R, B, Q): (g* - g~) / lam
        row = {}
        for lv in (0.8, 0.9, 0.95):
            q_lo, q_hi = np.quantile(d, [(1 - lv) / 2, (1 + lv) / 2], axis=1, method="weibull")
            lo, hi = est - q_hi, est - q_lo
            cov = ((lo <= tv) & (tv <= hi)).mean(0)
            row[str(lv)] = {"per_query": cov.tolist(), "mean": float(cov.mean()),
                            **{g: float(cov[[kk == g for kk in kinds]].mean()) for g in GROUPS},
                            "width_over_basic": None}
        w = np.quantile(d, 0.95, axis=1, method="weibull") - np.quantile(d, 0.05, axis=1, method="weibull")
        row["width90"] = w.mean(0).tolist()
        row["bias_over_sd"] = (d.mean(1).mean(0) / sd).tolist()
        row["se_over_sd"] = (d.std(1, ddof=1).mean(0) / sd).tolist()
        summary[k] = row
    w0 = np.array(next(iter(summary.values()))["width90"])
    for k in summary:
        summary[k]["0.9"]["width_over_basic"] = (np.array(summary[k]["width90"]) / w0).tolist()
    out = {
        "meta": schema.run_meta("bench.uncertainty_boundary", argv),
        "R": args.R, "B": args.B, "compress": args.compress, "kinds": kinds, "truth": tv.tolist(),
        "bias_over_sd": ((est.mean(0) - tv) / sd).tolist(), "sd": sd.tolist(),
        "summary": summary, "seconds": timings,
        "total": {"wall": time.perf_counter() - t_all, "cpu": time.process_time() - c_all},
    }
    schema.write_result("papers", out_path, None, out["meta"], page=page(out), quiet=True,
                        **{k: v for k, v in out.items() if k != "meta"})
    print(f"done: {out['total']}", flush=True)


def page(out) -> list[str]:
    """The result's Markdown page."""
    kinds = out["kinds"]
    lines = [f"# Bootstrap centred at a thresholded fit: Adult, MST-style, {'compressed' if out['compress'] else 'uncompressed'} domain", "",
             *schema.header_lines(schema.meta_of(out)),
             f"R = {out['R']} noise draws, B = {out['B']} exact refits per draw and centre (same noise draws for every centre). "
             "k: threshold in noise sd (cells of the fit's measured tables below k sd set to 0, projected back onto "
             "consistent marginals); k = 0 is the plain basic bootstrap.", "",
             "| k | nominal | mean | measured pairs | unmeasured pairs | ranges | min | 90% width / basic (mean) |", "|---|---|---|---|---|---|---|---|"]
    for k, row in out["summary"].items():
        for lv in ("0.8", "0.9", "0.95"):
            r = row[lv]
            wr = np.mean(row["0.9"]["width_over_basic"]) if lv == "0.9" else float("nan")
            lines.append(f"| {k} | {lv} | {r['mean']:.3f} | {r[GROUPS[0]]:.3f} | {r[GROUPS[1]]:.3f} | {r[GROUPS[2]]:.3f} | "
                         f"{min(r['per_query']):.2f} | {'' if lv != '0.9' else f'{wr:.2f}'} |")
    lines += ["", "## Per query (90%)", "", "| # | kind | bias/sd | " + " | ".join(f"k={k} boot bias/sd | k={k} cov" for k in out["summary"]) + " |",
              "|---|---|---|" + "---|---|" * len(out["summary"])]
    for i, kind in enumerate(kinds):
        lines.append(f"| {i} | {kind} | {out['bias_over_sd'][i]:.2f} | " + " | ".join(
            f"{row['bias_over_sd'][i]:.2f} | {row['0.9']['per_query'][i]:.2f}" for row in out["summary"].values()) + " |")
    lines += ["", "Run time (s, wall / CPU): " + "; ".join(f"k={k}: {t['wall']:.0f} / {t['cpu']:.0f}" for k, t in out["seconds"].items())
              + f"; total {out['total']['wall']:.0f} / {out['total']['cpu']:.0f}.", ""]
    return lines


if __name__ == "__main__":
    main()
