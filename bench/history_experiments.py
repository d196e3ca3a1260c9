"""Integrating historical noisy answers: raw answers vs kernel PCA vs maximum entropy vs pgmjax's L2 estimate.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 5.1 (Experiment 1: Fig. 2a-2d, 3 and 5), reproduced in spirit on the shared NLTCS
and Adult tables (section 5.2, publishing, is ``bench/history_publishing.py``). For every (dataset, epsilon, m):

* a history of ``m`` random 2-D queries (a random attribute pair, a random interval on each attribute: a
  range query; or, in the counting configurations, a random 0/1 table on the pair), each answered once through
  ``pgmjax.Accountant.measure_many`` with Laplace noise, the budget ``epsilon`` split equally (``b = m /
  epsilon``, add/remove neighbours, sensitivity 1 per query), plus all one-way marginals at 0.02 for the prior
  (the ledger holds ``epsilon + 0.02``);
* estimators, all post-processing of the same release, the record count ``n`` public as in the paper:
  ``raw`` (the noisy answers themselves), ``kpca_inf`` (kernel PCA at alpha = inf = generalised least
  squares), ``kpca_cv`` (alpha by 5-fold CV, uniform prior), ``kpca_cv_prior`` (the same with the noisy
  one-way prior), ``maxent_cv`` (exact dual with the noisy prior, alpha by 3-fold CV on a 5-point grid of the
  box ``beta`` in 10^{-0.5, 0, ..., 1.5}), ``pgm_l2`` (``pgmjax.estimate``, L2 loss, 1000 mirror-descent iterations);
* RMSE over the ``m`` past queries and over 200 fresh queries of the same kind answered from the history only.

Adult drops its four 99/100-valued columns (10 attributes, 6.5e9 cells) and its pairs are the chain of consecutive
attributes (9 pairs), so that the maximum-entropy model's junction tree stays small (the exact dual needs it); NLTCS uses all 36 pairs of its first 9
attributes (the paper's 9 attributes and 36 pairs; a junction tree of one 512-cell clique). A scaling part times the dense eigen route
against m, a cross-validation check compares the CV estimate of the RMSE with the true RMSE over alpha (the
paper's Fig. 3), an alpha sweep draws the RMSE against alpha of kernel PCA and max-ent, with and without the
prior, over past queries and fresh queries of the same and of the other kind (the paper's Fig. 2a-2d; m = 400,
epsilon = 1, range and counting histories), and the conjugate-gradient ridge form runs on all 91 two-way marginals
of Adult (148,137 rows).

Usage:
    nice python -m bench.history_experiments            # -> bench/results/papers/history_experiments_cpu.{md,json,png}
    nice python -m bench.history_experiments --quick    # one small configuration (a smoke run)
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import platform
import sys
import time

# The machine is shared: one BLAS thread per process (a multi-threaded eigh under a load of 12 on 2 cores
# ran 10x slower than a single-threaded one).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from bench import history_report, schema

import pgmjax as pj  # noqa: E402
from pgmjax import history  # noqa: E402
from pgmjax.history.cv import make_folds  # noqa: E402,F401  (documented entry point of the CV)

METHODS = ("raw", "kpca_inf", "kpca_cv", "kpca_cv_prior", "maxent_cv", "pgm_l2")
PRIOR_EPS = 0.02
FRESH = 200


def random_queries(rng, domain, pairs, count, kind):
    """``count`` random 2-D queries: (pair, dense row over the pair's cells)."""
    out = []
    for _ in range(count):
        pair = pairs[rng.integers(len(pairs))]
        if kind == "range":
            ind = []
            for a in pair:
                lo, hi = sorted(rng.integers(domain[a], size=2))
                v = np.zeros(domain[a])
                v[lo:hi + 1] = 1.0
                ind.append(v)
            row = np.outer(*ind).ravel()
        else:  # a random 0/1 table, not all zero (a zero query has no sensitivity to calibrate)
            row = np.zeros(domain.size(pair))
            while not row.any():
                row = rng.integers(2, size=domain.size(pair)).astype(float)
        out.append((pair, row))
    return out


def merged(measurements):
    """Single-row measurements on one pair merged into one multi-row measurement (same math, fewer groups)."""
    by = {}
    for m in measurements:
        by.setdefault(m.clique, []).append(m)
    out = []
    for c, ms in by.items():
        out.append(pj.Measurement(c, np.concatenate([m.y for m in ms]), np.concatenate([m.row_stddev() for m in ms]),
                                  np.vstack([m.query for m in ms]), noise="laplace"))
    return out


def model_answers(model, queries):
    margs = dict(zip(sorted({p for p, _ in queries}), model.marginals(sorted({p for p, _ in queries}))))
    return np.array([margs[p].ravel() @ row for p, row in queries])


def kpca_answers(fit, queries, alpha):
    out = np.empty(len(queries))
    by = {}
    for i, (p, row) in enumerate(queries):
        by.setdefault(p, []).append(i)
    for p, idx in by.items():
        out[idx] = fit.answer((p, np.stack([queries[i][1] for i in idx])), alpha).value
    return out


def maxent_cv(domain, ms, total, prior, betas, rng):
    """The box beta by Theorem 4's CV for the maximum-entropy model (3 folds over the rows).

    A held-out row stays in the model with beta = 0 (weight 0: ignored), so every fold and every beta runs
    the same compiled program.
    """
    y = np.concatenate([m.y for m in ms])
    fold = rng.permutation(y.size) % 3
    rows = [(m.clique, r) for m in ms for r in m.query]
    var = np.concatenate([m.row_stddev() for m in ms]) ** 2
    scores = []
    for beta in betas:
        s = []
        for f in range(3):
            model = history.maxent(domain, ms, beta=np.where(fold == f, 0.0, beta), total=total, prior=prior, iters=3000)
            pred = model_answers(model, [r for r, ff in zip(rows, fold) if ff == f])
            s.append(np.mean((y[fold == f] - pred) ** 2) - np.mean(var[fold == f]))
        scores.append(float(np.mean(s)))
    return betas[int(np.argmin(scores))], scores


def run_config(name, data, pairs, m, eps, kind, seed):
    dom, n = data.domain, float(len(data))
    rng = np.random.default_rng(seed)
    past = random_queries(rng, dom, pairs, m, kind)
    fresh = random_queries(rng, dom, pairs, FRESH, kind)
    acc = pj.Accountant(epsilon=eps + PRIOR_EPS)
    k1, k2 = jax.random.split(jax.random.key(seed))
    single = acc.measure_many(k1, data, [p for p, _ in past], queries=[r[None] for _, r in past], epsilon=eps)
    one_way = acc.measure_many(k2, data, [(a,) for a in dom.attributes], epsilon=PRIOR_EPS)
    prior = history.prior_from_marginals(dom, one_way)
    ms = merged(single)
    rows_in_order = [(m.clique, r) for m in ms for r in m.query]
    truth_past = np.array([data.marginal(c).ravel() @ r for c, r in rows_in_order])
    truth_fresh = np.array([data.marginal(c).ravel() @ r for c, r in fresh])
    b = m / eps
    res = {"dataset": name, "m": m, "eps": eps, "kind": kind, "seed": seed, "b": b, "ledger": acc.spent,
           "mean_abs_truth": float(np.mean(np.abs(truth_past))), "rmse_past": {}, "rmse_fresh": {}, "seconds": {}, "alpha": {}}

    def record(method, past_ans, fresh_ans, seconds):
        res["rmse_past"][method] = float(np.sqrt(np.mean((past_ans - truth_past) ** 2)))
        res["rmse_fresh"][method] = None if fresh_ans is None else float(np.sqrt(np.mean((fresh_ans - truth_fresh) ** 2)))
        res["seconds"][method] = seconds

    y = np.concatenate([mm.y for mm in ms])
    record("raw", y, None, 0.0)
    t = time.process_time()
    fit = history.kernel_pca(dom, ms, total=n)
    record("kpca_inf", fit.answer_past(), kpca_answers(fit, fresh, math.inf), time.process_time() - t)
    res["rank"] = fit.rank
    for method, p in (("kpca_cv", None), ("kpca_cv_prior", prior)):
        t = time.process_time()
        alpha, _ = history.select_alpha(dom, ms, folds=5, key=jax.random.key(seed + 1), total=n, prior=p)
        f = history.kernel_pca(dom, ms, total=n, prior=p)
        record(method, f.answer_past(alpha), kpca_answers(f, fresh, alpha), time.process_time() - t)
        res["alpha"][method] = alpha
    t = time.process_time()
    beta, scores = maxent_cv(dom, ms, n, prior, list(np.logspace(-0.5, 1.5, 5)), rng)
    alpha = beta * b / n  # beta = alpha n / b
    model, report = history.maxent(dom, ms, alpha=alpha, total=n, prior=prior, report=True)
    record("maxent_cv", model_answers(model, rows_in_order), model_answers(model, fresh), time.process_time() - t)
    res["alpha"]["maxent_cv"] = alpha
    res["maxent"] = {"beta": float(alpha * n / b), "gap": report.info["gap"], "iterations": report.info["iterations"],
                     "converged": report.info["converged"], "cv_scores": scores}
    t = time.process_time()
    l2 = pj.estimate(dom, ms, total=n, iters=1000)
    record("pgm_l2", model_answers(l2, rows_in_order), model_answers(l2, fresh), time.process_time() - t)
    return res


def cv_check(name, data, pairs, m, eps, seed=0):
    """[CZB] Fig. 3: the 5-fold CV estimate of the RMSE against the true RMSE over alpha (kernel PCA, noisy prior)."""
    start = time.process_time()
    dom, n = data.domain, float(len(data))
    rng = np.random.default_rng(seed)
    past = random_queries(rng, dom, pairs, m, "range")
    fresh = random_queries(rng, dom, pairs, FRESH, "range")
    acc = pj.Accountant(epsilon=eps + PRIOR_EPS)
    k1, k2 = jax.random.split(jax.random.key(seed))
    ms = merged(acc.measure_many(k1, data, [p for p, _ in past], queries=[r[None] for _, r in past], epsilon=eps))
    prior = history.prior_from_marginals(dom, acc.measure_many(k2, data, [(a,) for a in dom.attributes], epsilon=PRIOR_EPS))
    truth_past = np.array([data.marginal(c).ravel() @ r for mm in ms for c, r in [(mm.clique, q) for q in mm.query]])
    truth_fresh = np.array([data.marginal(c).ravel() @ r for c, r in fresh])
    fit = history.kernel_pca(dom, ms, total=n, prior=prior)
    grid = [float(a) for a in np.logspace(math.log10(0.01 / math.sqrt(fit.lam2[0])), math.log10(100 / math.sqrt(fit.lam2[-1])), 15)]
    _, table = history.select_alpha(dom, ms, folds=5, key=jax.random.key(seed + 1), total=n, prior=prior, grid=grid, refine=None)
    rows = []
    for a, cv in zip(table["alpha"], table["cv_mse"]):
        rows.append({"alpha": float(a), "cv_rmse": float(math.sqrt(max(cv, 0.0))), "cv_mse": float(cv),
                     "true_rmse_past": float(np.sqrt(np.mean((fit.answer_past(a) - truth_past) ** 2))),
                     "true_rmse_fresh": float(np.sqrt(np.mean((kpca_answers(fit, fresh, a) - truth_fresh) ** 2)))})
    return {"dataset": name, "m": m, "eps": eps, "rows": rows, "cpu_seconds": time.process_time() - start}


def alpha_sweep(name, data, pairs, m, eps, kind, seed=0, betas=tuple(np.logspace(-1, 2, 7))):
    """[CZB] Fig. 2: RMSE against alpha, kernel PCA and max-ent, each with the uniform and with the noisy prior.

    One history of ``m`` queries of ``kind`` (Fig. 2a: range, Fig. 2b: counting); RMSE over the past queries, over
    200 fresh queries of the same kind (Fig. 2c) and over 200 fresh queries of the other kind (Fig. 2d: fresh
    counting queries from a range history, or the reverse), all answered from the history only. Kernel PCA over
    a log grid of alpha spanning its eigenvalues (one eigen-decomposition per prior); max-ent over its box
    ``beta = alpha n / b`` (one fit per value, at most 3000 iterations, as in the CV).
    """
    start = time.process_time()
    dom, n = data.domain, float(len(data))
    other = "counting" if kind == "range" else "range"
    rng = np.random.default_rng(seed)
    past = random_queries(rng, dom, pairs, m, kind)
    fresh = {"same": random_queries(rng, dom, pairs, FRESH, kind), "other": random_queries(rng, dom, pairs, FRESH, other)}
    acc = pj.Accountant(epsilon=eps + PRIOR_EPS)
    k1, k2 = jax.random.split(jax.random.key(seed))
    ms = merged(acc.measure_many(k1, data, [p for p, _ in past], queries=[r[None] for _, r in past], epsilon=eps))
    prior = history.prior_from_marginals(dom, acc.measure_many(k2, data, [(a,) for a in dom.attributes], epsilon=PRIOR_EPS))
    rows = [(mm.clique, q) for mm in ms for q in mm.query]
    truth = {"past": np.array([data.marginal(c).ravel() @ r for c, r in rows])}
    truth |= {k: np.array([data.marginal(c).ravel() @ r for c, r in qs]) for k, qs in fresh.items()}
    rmse = lambda ans, k: float(np.sqrt(np.mean((ans - truth[k]) ** 2)))  # noqa: E731
    out = {"dataset": name, "m": m, "eps": eps, "kind": kind, "other": other, "b": m / eps, "ledger": acc.spent,
           "raw_rmse": rmse(np.concatenate([mm.y for mm in ms]), "past"), "kpca": {}, "maxent": {}}
    fits = {"uniform": history.kernel_pca(dom, ms, total=n), "prior": history.kernel_pca(dom, ms, total=n, prior=prior)}
    lo = min(0.01 / math.sqrt(f.lam2[0]) for f in fits.values())
    hi = max(100 / math.sqrt(f.lam2[-1]) for f in fits.values())
    grid = [float(a) for a in np.logspace(math.log10(lo), math.log10(hi), 15)] + [math.inf]
    for label, fit in fits.items():
        out["kpca"][label] = [{"alpha": a, "past": rmse(fit.answer_past(a), "past"),
                               **{k: rmse(kpca_answers(fit, qs, a), k) for k, qs in fresh.items()}} for a in grid]
    for label, p in (("uniform", None), ("prior", prior)):
        out["maxent"][label] = []
        for beta in betas:
            model, report = history.maxent(dom, ms, beta=float(beta), total=n, prior=p, iters=3000, report=True)
            out["maxent"][label].append({"beta": float(beta), "alpha": float(beta) * (m / eps) / n,
                                         "past": rmse(model_answers(model, rows), "past"),
                                         **{k: rmse(model_answers(model, qs), k) for k, qs in fresh.items()},
                                         "converged": bool(report.info["converged"])})
    out["cpu_seconds"] = time.process_time() - start
    return out


def scaling(adult, max_m):
    """Dense eigen route vs m (random range queries on Adult's chain) and the CG ridge form on all 2-way marginals."""
    start = time.process_time()
    dom, n = adult.domain, float(len(adult))
    chain = list(zip(dom.attributes[:-1], dom.attributes[1:]))
    out = {"eigen": []}
    for m in [250, 500, 1000, 2000][: 1 + int(math.log2(max_m / 250))]:
        rng = np.random.default_rng(m)
        qs = random_queries(rng, dom, chain, m, "range")
        ms = merged([pj.Measurement(p, [0.0], 1.0, r[None]) for p, r in qs])
        t = time.process_time()
        history.kernel_pca(dom, ms, total=n)
        out["eigen"].append({"m": m, "seconds": time.process_time() - t})
    pairs = list(itertools.combinations(dom.attributes, 2))
    acc = pj.Accountant(epsilon=1.0)
    ms = acc.measure_many(jax.random.key(5), adult, pairs, epsilon=1.0)
    rows = sum(mm.rows for mm in ms)
    truth = np.concatenate([adult.marginal(c).ravel() for c in pairs])
    y = np.concatenate([mm.y for mm in ms])
    sigma = float(ms[0].stddev)
    out["ridge"] = {"rows": rows, "sigma": sigma, "raw_rmse": float(np.sqrt(np.mean((y - truth) ** 2))), "runs": []}
    for scale in (0.3, 3.0):
        alpha = scale * sigma * math.sqrt(np.median([dom.size(c) for c in pairs]))  # about 1/lambda of one cell
        t = time.process_time()
        try:
            fit = history.kernel_ridge(dom, ms, alpha=alpha, total=n, tol=1e-4, maxiter=300)
        except FloatingPointError as err:  # not converged within maxiter: recorded, not hidden
            out["ridge"]["runs"].append({"alpha": alpha, "seconds": time.process_time() - t, "cg_iterations": 300,
                                         "rmse": None, "error": str(err)})
            continue
        ans = fit.answer_past()
        out["ridge"]["runs"].append({"alpha": alpha, "seconds": time.process_time() - t, "cg_iterations": fit.solve.iterations,
                                     "rmse": float(np.sqrt(np.mean((ans - truth) ** 2)))})
    out["ridge"]["dense_kernel_gb"] = 8 * rows**2 / 1e9
    out["cpu_seconds"] = time.process_time() - start
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join(schema.ROOT, "..", "shared", "data")))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="history_experiments_cpu", help="result name under bench/results/papers/ (or a "
                    "path)")
    args = ap.parse_args(argv)
    args.out = schema.result_path("papers", args.out)
    if not os.path.isdir(args.data):
        sys.exit(f"data folder {args.data} is absent (set PGMJAX_DATA)")
    start, load0 = time.time(), os.getloadavg()
    sets = {}
    full_adult = pj.datasets.load("adult", args.data)
    for name in ("nltcs", "adult"):
        data = pj.datasets.load(name, args.data) if name == "nltcs" else full_adult
        dom = data.domain
        if name == "nltcs":  # the paper's shape: all 36 pairs of 9 attributes (their full table: 512 cells)
            pairs = list(itertools.combinations(dom.attributes[:9], 2))
        else:  # the chain of consecutive attributes without the four 99/100-valued columns: a small junction tree
            keep = [a for a in dom.attributes if dom[a] < 99]
            data = pj.Dataset(data.df[keep].to_numpy(), {a: dom[a] for a in keep})
            pairs = list(zip(keep[:-1], keep[1:]))
        sets[name] = (data, pairs)
    configs = [("nltcs", 100, 1.0, "range")] if args.quick else [
        (d, m, e, "range") for d in ("nltcs", "adult") for e in (0.5, 2.0) for m in (100, 400, 1600)
    ] + [(d, 400, 1.0, "counting") for d in ("nltcs", "adult")]
    results = []
    parts_path = args.out + "_parts.json"  # finished configurations, kept across interrupted runs
    parts = json.load(open(parts_path)) if os.path.exists(parts_path) and not args.quick else {}
    for d, m, e, kind in configs:
        tag = f"{d}/{m}/{e}/{kind}"
        if tag in parts:
            results.append(parts[tag])
            continue
        t, w = time.process_time(), time.perf_counter()
        r = run_config(d, *sets[d], m, e, kind, seed=0)
        r["total_seconds"], r["wall_seconds"] = time.process_time() - t, time.perf_counter() - w
        parts[tag] = r
        if not args.quick:
            with open(parts_path, "w") as f:
                json.dump(parts, f)
        print(f"{d} m={m} eps={e} {kind}: " + ", ".join(f"{k} {v:.1f}" for k, v in r["rmse_past"].items()) + f" ({r['total_seconds']:.0f}s)", flush=True)
        results.append(r)
    if "scaling" not in parts:
        parts["scaling"] = scaling(full_adult, 500 if args.quick else 2000)
        parts["cv_check"] = [cv_check(d, *sets[d], 400 if args.quick else 1600, 0.5) for d in ("nltcs", "adult")]
        if not args.quick:
            with open(parts_path, "w") as f:
                json.dump(parts, f)
    if "alpha_sweep" not in parts:
        sweep = [("nltcs", "range")] if args.quick else [(d, k) for d in ("nltcs", "adult") for k in ("range", "counting")]
        parts["alpha_sweep"] = [alpha_sweep(d, *sets[d], 100 if args.quick else 400, 1.0, k,
                                            betas=(0.3, 3.0, 30.0) if args.quick else tuple(np.logspace(-1, 2, 7)))
                                for d, k in sweep]
        if not args.quick:
            with open(parts_path, "w") as f:
                json.dump(parts, f)
    scale, checks, sweeps = parts["scaling"], parts["cv_check"], parts["alpha_sweep"]
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),

        "python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__,
        "load_start": load0, "load_end": os.getloadavg(), "seconds": time.time() - start, "quick": args.quick,
        "cpu_seconds": sum(r["total_seconds"] for r in results) + scale["cpu_seconds"] + sum(c["cpu_seconds"] for c in checks)
        + sum(w["cpu_seconds"] for w in sweeps),
    }
    meta = schema.run_meta("bench.history_experiments", argv, also=meta)
    history_report.write(args.out, meta, results, scale, checks, sweeps)
    print(f"wrote {args.out}.{{json,md,png}} in {meta['seconds']:.0f}s")


if __name__ == "__main__":
    main()
