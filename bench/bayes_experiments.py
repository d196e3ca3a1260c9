"""Xiao & Xiong, "Bayesian Inference under Differential Privacy": the paper's experiments in spirit.

Section 6 of the paper, on a 2-core CPU and on data we have (the net-trace and search-log histograms of
Hay et al. are not in the shared data; two Adult columns with about 100 values stand in for them):

A. BLUE run time (Fig. 5): against the number of history rows m (N = 100 cells) and against N (m = 2N);
   H with integer entries in [-10, 10], budgets alpha ~ U(0, 1], so b_i = max_j |H_ij| / alpha_i.
B. Error-law methods (Fig. 6-8): time and error of the 95% half-width of the BLUE's error for "pc"
   (Algorithm 2, corrected; bin width 1 as in the paper, gamma = 0.01), "mc" (Algorithm 1, 10^5 draws),
   "gaussian", against "cf" (reference), N = 100, max S = 5, m = 200..1000; then "pc" against its bin
   width and "mc" against its sample size (m = 1000).
C. The online system (Fig. 9-10), 1,000 requests from the normalised generator of eq. 37-38 (multinomial
   counts over the cells, n_t ~ U{1..10}), delta = 0.2:
   Fig. 9: unbounded budget, history = a binary hierarchical tree (Hay et al. 2010) released at eps = 0.3,
   2 w ~ U[50, 1000]; Fig. 10: budget 1, empty history, 2 w ~ U[1, 1000]. Systems: the baseline (every
   request answered by a fresh Laplace answer with Theorem 5.3's budget, no inference), the paper's system
   (answers from history; fresh answers alone), the same with fresh answers combined with history by the
   BLUE, and history-aware allocation. Metrics (Definitions 6.1-6.3): answering ratio R_a, reliability R_i
   (coverage of the stated intervals), relative error E = mean |theta_hat - theta| / (2 w), system cost.
   The OLS comparison of Fig. 10 (Li et al. 2010) is not run.
D. Coverage over noise keys: the stated 80% intervals of the Fig. 10 setting (paper allocation, combined
   BLUE), the same 1,000 requests, 16 independent noise keys: one stream's R_i is a poor estimate of the coverage
   because overlapping requests share the history's noise.

Every noise addition goes through ``pgmjax.privacy.Accountant.laplace``. Run:
``nice python -m bench.bayes_experiments [--quick] [--data DIR] [--part coverage]``; writes
``bench/results/papers/bayes_experiments_cpu.{json,md,png}`` (``--part coverage`` reruns only D and merges it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time

# One BLAS thread: on the shared, loaded 2-core machine OpenBLAS's threads made a 240 x 200 SVD take 1-3 s
# instead of 0.02 s single-threaded (measured). Set before NumPy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench import schema
from bench.schema import cpu_model

from pgmjax.bayes import LinearNoise, OnlineQuerySystem, allocate, blue  # noqa: E402
from pgmjax.privacy import Accountant  # noqa: E402

OUT = os.path.join(schema.RESULTS, "papers", "bayes_experiments_cpu")


# ---- A. BLUE run time ------------------------------------------------------------------------------


def random_history(m, N, rng, max_s=10):
    H = rng.integers(-max_s, max_s + 1, size=(m, N)).astype(float)
    H[np.abs(H).max(axis=1) == 0, 0] = 1.0
    alpha = rng.uniform(1e-3, 1.0, m)
    return H, np.abs(H).max(axis=1) / alpha


def blue_timing(rng, ms, Ns):
    rows = []
    for m, N in [(m, 100) for m in ms] + [(2 * N, N) for N in Ns]:
        H, b = random_history(m, N, rng)
        y = H @ rng.integers(0, 100, N) + rng.laplace(size=m) * b  # simulated public noise (no private data)
        q = rng.integers(0, 2, N).astype(float)
        t = time.perf_counter()
        r = blue(H, y, scale=b, query=q)
        rows.append({"m": m, "N": N, "series": "m" if len(rows) < len(ms) else "N", "seconds": time.perf_counter() - t,
                     "estimable": r.estimable})
    return rows


# ---- B. error-law methods --------------------------------------------------------------------------


def law_for(m, N, rng):
    H, b = random_history(m, N, rng, max_s=5)
    q = rng.integers(0, 2, N).astype(float)
    return blue(H, np.zeros(m), scale=b, query=q).error


def timed_half_width(E):
    t = time.perf_counter()
    c = E.half_width(0.95)
    return c, time.perf_counter() - t


def method_comparison(rng, ms, bin_widths, sample_sizes):
    rows = []
    for m in ms:
        E = law_for(m, 100, rng)
        ref, t_cf = timed_half_width(E)
        rows.append({"part": "methods", "m": m, "method": "cf", "seconds": t_cf, "half_width": ref, "rel_error": 0.0})
        for name, opts in (("pc", {"bin_width": 1.0, "gamma": 0.01}), ("mc", {"key": jax.random.key(m), "samples": 100_000}),
                           ("gaussian", {})):
            c, t = timed_half_width(E.with_method(name, **opts))
            rows.append({"part": "methods", "m": m, "method": name, "seconds": t, "half_width": c, "rel_error": abs(c - ref) / ref})
    E = law_for(max(ms), 100, rng)
    ref, _ = timed_half_width(E)
    for h in bin_widths:
        c, t = timed_half_width(E.with_method("pc", bin_width=h, gamma=0.01))
        rows.append({"part": "pc_width", "m": max(ms), "method": "pc", "bin_width": h, "seconds": t, "rel_error": abs(c - ref) / ref})
    for n in sample_sizes:
        c, t = timed_half_width(E.with_method("mc", key=jax.random.key(n), samples=n))
        rows.append({"part": "mc_samples", "m": max(ms), "method": "mc", "samples": n, "seconds": t, "rel_error": abs(c - ref) / ref})
    return rows


# ---- C. the online system --------------------------------------------------------------------------


def load_histogram(data_dir, column):
    path = os.path.join(data_dir, "adult")
    domain = json.load(open(os.path.join(path, "adult-domain.json")))
    df = pd.read_csv(os.path.join(path, "adult.csv"), usecols=[column])
    return np.bincount(df[column].to_numpy(), minlength=domain[column]).astype(float)


def requests(n, N, rng, width):
    """[XX] eq. 37-38, normalised: cell weights 0.9 * 10^-floor((j-1)/10), n_t ~ U{1..10} multinomial trials."""
    j = np.arange(1, N + 1)
    P = 0.9 * 10.0 ** (-np.floor((j - 1) / 10))
    P /= P.sum()
    perm = rng.permutation(N)  # which cells are popular: public, drawn once
    out = []
    for _ in range(n):
        q = np.zeros(N)
        q[perm] = rng.multinomial(rng.integers(1, 11), P)
        out.append((q, float(rng.uniform(*width)) / 2.0))
    return out


def tree_rows(N):
    rows, stack = [], [(0, N)]
    while stack:
        lo, hi = stack.pop()
        r = np.zeros(N)
        r[lo:hi] = 1.0
        rows.append(r)
        if hi - lo > 1:
            mid = (lo + hi) // 2
            stack += [(lo, mid), (mid, hi)]
    return np.array(rows)


def baseline(x, stream, budget, delta, key, tree_eps):
    """No inference: every request bought fresh with Theorem 5.3's budget; refused past the per-cell budget."""
    acc = Accountant(epsilon=budget * x.size)
    B = np.zeros(x.size)
    if tree_eps:
        T = tree_rows(x.size)
        B += np.abs(T).sum(axis=0) * tree_eps / np.abs(T).sum(axis=0).max()
    out = []
    for i, (q, w) in enumerate(stream):
        S = float(np.abs(q).max())
        eps = allocate(w, delta, S).cost
        B_new = B + np.abs(q) * eps / S * (1 + 2.0**-10)  # with the lattice rounding's share at most
        if B_new.max() > budget:
            out.append(None)
            continue
        y = float(acc.laplace(jax.random.fold_in(key, i), np.array([q @ x]), S, epsilon=eps)[0])
        B = B_new
        out.append((y, w))
    return out, float(B.max())


def online_run(x, stream, budget, delta, key, tree_eps, **kw):
    s = OnlineQuerySystem(x, budget, key=key, **kw)
    if tree_eps:
        s.release(tree_rows(x.size), tree_eps)
    out = []
    for q, w in stream:
        r = s.ask(q, w, delta)
        out.append(None if r.source == "refused" else (r.value, r.half_width, r.source))
    return out, s.cost


def metrics(results, stream, x):
    answered = [(r, q, w) for r, (q, w) in zip(results, stream) if r is not None]
    truth = np.array([q @ x for _, q, _ in answered])
    value = np.array([r[0] for r, _, _ in answered])
    half = np.array([r[1] for r, _, _ in answered])
    width = np.array([w for _, _, w in answered])
    hist = sum(len(r) > 2 and r[2] == "history" for r, _, _ in answered)
    return {
        "R_a": len(answered) / len(stream),
        "R_i": float(np.mean(np.abs(value - truth) <= half)) if answered else float("nan"),
        "E": float(np.mean(np.abs(value - truth) / (2 * width))) if answered else float("nan"),
        "answered": len(answered),
        "from_history": int(hist),
    }


def online_experiments(data_dir, n_requests, keys, seed=0):
    rows = []
    settings = {
        "fig9 (unbounded, tree eps=0.3)": dict(budget=1e9, tree_eps=0.3, width=(50.0, 1000.0)),
        "fig10 (budget 1, empty)": dict(budget=1.0, tree_eps=0.0, width=(1.0, 1000.0)),
    }
    systems = {
        "baseline (no inference)": None,
        "paper (history; fresh alone)": dict(allocation="paper", combine=False),
        "paper + BLUE combine": dict(allocation="paper", combine=True),
        "history-aware + combine": dict(allocation="history", combine=True),
    }
    runs = [("capital-gain", k) for k in range(keys)] + [("fnlwgt", 0)]  # fnlwgt: the data-independence check
    for column, k in runs:
        x = load_histogram(data_dir, column)
        for setting, cfg in settings.items():
            stream = requests(n_requests, x.size, np.random.default_rng(seed), cfg["width"])
            for name, kw in systems.items():
                if column == "fnlwgt" and name != "paper + BLUE combine":
                    continue
                key = jax.random.key(1000 * seed + k)
                t = time.perf_counter()
                if kw is None:
                    res, cost = baseline(x, stream, cfg["budget"], 0.2, key, cfg["tree_eps"])
                    res = [None if r is None else (r[0], r[1], "fresh") for r in res]
                else:
                    res, cost = online_run(x, stream, cfg["budget"], 0.2, key, cfg["tree_eps"], **kw)
                row = {"data": f"adult {column}", "N": int(x.size), "key": k, "setting": setting, "system": name,
                       "system_cost": cost, "seconds": time.perf_counter() - t}
                row.update(metrics(res, stream, x))
                rows.append(row)
                print(row, flush=True)
    return rows


def coverage_over_keys(data_dir, n_requests, keys, seed=0):
    """D. R_i of one stream varies a lot from key to key (overlapping requests share the history's noise);
    the coverage of each request averaged over independent noise keys estimates the real coverage."""
    x = load_histogram(data_dir, "capital-gain")
    stream = requests(n_requests, x.size, np.random.default_rng(seed), (1.0, 1000.0))
    truth = np.array([q @ x for q, _ in stream])
    cover, sources = [], None
    t = time.perf_counter()
    for k in range(keys):
        res, _ = online_run(x, stream, 1.0, 0.2, jax.random.key(100 + k), 0.0, allocation="paper", combine=True)
        cover.append([np.nan if r is None else float(abs(r[0] - v) <= r[1]) for r, v in zip(res, truth)])
        sources = [None if r is None else r[2] for r in res]
    cover = np.array(cover)
    per_key = np.nanmean(cover, axis=1)
    hist = [i for i, src in enumerate(sources) if src == "history"]
    fresh = [i for i, src in enumerate(sources) if src == "fresh"]
    return {"setting": "fig10 (budget 1, empty)", "system": "paper + BLUE combine", "requests": n_requests, "keys": keys,
            "overall": float(np.nanmean(cover)), "se_independent_keys": float(per_key.std(ddof=1) / math.sqrt(keys)),
            "per_key": per_key.tolist(), "history": float(np.nanmean(cover[:, hist])), "fresh": float(np.nanmean(cover[:, fresh])),
            "answered_per_key": int(np.sum(~np.isnan(cover[0]))), "seconds": time.perf_counter() - t}


# ---- report ----------------------------------------------------------------------------------------


def environment():
    return {
        "machine": cpu_model() or platform.processor(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average": os.getloadavg()[0],
    }


def markdown(res):
    env = res["environment"]
    out = ["# Xiao & Xiong, Bayesian inference under DP: the experiments in spirit (CPU)", "",
           f"{env['machine']}, {env['cores']} cores (shared; load average {env['load_average']:.1f} at the start), "
           f"python {env['python']}, jax {env['jax']}, numpy {env['numpy']}, {env['date']}. "
           f"Sections A-C ran in {res['seconds']:.0f} s. Produced by `bench/bayes_experiments.py`.", "",
           "## A. BLUE run time (Fig. 5)", "", "| m | N | seconds |", "|---|---|---|"]
    out += [f"| {r['m']} | {r['N']} | {r['seconds']:.4f} |" for r in res["blue"]]
    out += ["", "## B. Error-law methods: 95% half-width, time and relative error against cf (Fig. 6-8)", "",
            "| part | m | method | setting | seconds | relative error |", "|---|---|---|---|---|---|"]
    for r in res["methods"]:
        setting = r.get("bin_width", r.get("samples", ""))
        out.append(f"| {r['part']} | {r['m']} | {r['method']} | {setting} | {r['seconds']:.4f} | {r['rel_error']:.2e} |")
    online = [r for r in res["online"] if r["data"] == "adult capital-gain"]
    keys = sorted({r["key"] for r in online})
    out += ["", f"## C. Online system (Fig. 9-10), {res['requests']} requests, delta = 0.2 (stated confidence 0.8)", "",
            f"Adult capital-gain (N = {online[0]['N']} cells); mean over {len(keys)} noise keys (same request stream), "
            "R_i's range over the keys in brackets.", "",
            "| setting | system | R_a | R_i [min, max] | E | system cost | answered from history | seconds per run |",
            "|---|---|---|---|---|---|---|---|"]
    for setting in dict.fromkeys(r["setting"] for r in online):
        for system in dict.fromkeys(r["system"] for r in online):
            g = [r for r in online if r["setting"] == setting and r["system"] == system]
            ri = [r["R_i"] for r in g]
            out.append(f"| {setting} | {system} | {np.mean([r['R_a'] for r in g]):.3f} | {np.mean(ri):.3f} "
                       f"[{min(ri):.3f}, {max(ri):.3f}] | {np.mean([r['E'] for r in g]):.4f} | {g[0]['system_cost']:.4g} | "
                       f"{g[0]['from_history']} | {np.mean([r['seconds'] for r in g]):.1f} |")
    other = [r for r in res["online"] if r["data"] != "adult capital-gain"]
    same = bool(other) and all(
        abs(o["R_i"] - r["R_i"]) <= 1e-9 and abs(o["E"] - r["E"]) <= 1e-9 and o["system_cost"] == r["system_cost"]
        for o in other for r in online if (r["key"], r["setting"], r["system"]) == (o["key"], o["setting"], o["system"]))
    se = math.sqrt(0.8 * 0.2 / res["requests"])
    out += ["", f"One stream's binomial standard error of R_i would be about {se:.3f}; the requests overlap (the popular "
            "cells are in most of them) and share the history's noise, so coverage events are correlated and R_i "
            "varies more from key to key; its mean over keys estimates the coverage. The baseline's intervals are "
            "exact Laplace intervals of fresh answers.", "",
            "Data independence: every decision of the system depends on the queries and noise scales only, and the "
            "error of each answer is a fixed linear function of the noise, so R_a, R_i, E and the cost do not depend "
            "on the histogram at all. Rerun on Adult fnlwgt with key 0 (paper + BLUE combine): "
            + ("identical R_i, E (to 1e-9) and system cost." if same else "metrics differ (see the JSON).")]
    cov = res.get("coverage")
    if cov:
        out += ["", f"## D. Coverage over noise keys ({cov['setting']}, {cov['system']})", "",
                f"{cov['requests']} requests, {cov['keys']} independent noise keys, {cov['answered_per_key']} answered per key: "
                f"coverage of the stated 80% intervals **{cov['overall']:.3f}** (standard error over keys "
                f"{cov['se_independent_keys']:.3f}); answers from history {cov['history']:.3f}, fresh {cov['fresh']:.3f}; "
                f"per key from {min(cov['per_key']):.3f} to {max(cov['per_key']):.3f} ({cov['seconds']:.0f} s)."]
    return "\n".join(out) + "\n"


def plot(res, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    b = [r for r in res["blue"] if r["series"] == "m"]
    ax[0].plot([r["m"] for r in b], [r["seconds"] for r in b], "o-", label="N = 100, vs m")
    b2 = [r for r in res["blue"] if r["series"] == "N"]
    ax[0].plot([r["N"] for r in b2], [r["seconds"] for r in b2], "s-", label="m = 2N, vs N")
    ax[0].set(xlabel="m or N", ylabel="seconds", title="A. BLUE run time", yscale="log")
    ax[0].legend()
    for method in ("cf", "pc", "mc", "gaussian"):
        rs = [r for r in res["methods"] if r["part"] == "methods" and r["method"] == method]
        ax[1].plot([r["m"] for r in rs], [r["seconds"] for r in rs], "o-", label=method)
    ax[1].set(xlabel="history rows m (N = 100)", ylabel="seconds per half-width", title="B. error-law methods", yscale="log")
    ax[1].legend()
    online = [r for r in res["online"] if r["data"] == "adult capital-gain"]
    labels = list(dict.fromkeys(r["system"] for r in online))
    groups = list(dict.fromkeys(r["setting"] for r in online))
    width = 0.8 / len(labels)
    for i, lab in enumerate(labels):
        vals = [[r["R_i"] for r in online if r["system"] == lab and r["setting"] == g] for g in groups]
        ax[2].bar(np.arange(len(groups)) + i * width, [np.mean(v) for v in vals], width, label=lab,
                  yerr=[[np.mean(v) - min(v) for v in vals], [max(v) - np.mean(v) for v in vals]], capsize=3)
    cov = res.get("coverage")
    if cov:
        g = groups.index(cov["setting"])
        ax[2].errorbar([g + 0.4 - width / 2], [cov["overall"]], yerr=[2 * cov["se_independent_keys"]], fmt="kD", capsize=4,
                       label=f"{cov['system']}, mean of {cov['keys']} keys (+-2 SE)")
    ax[2].axhline(0.8, color="k", lw=1, ls="--")
    ax[2].set_xticks(np.arange(len(groups)) + 0.4 - width / 2, [g.split(" (")[0] for g in groups], fontsize=8)
    ax[2].set(ylabel="R_i (coverage of 80% intervals)", title="C. online system reliability", ylim=(0.5, 1.0))
    ax[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join(schema.ROOT, "..", "shared", "data")))
    ap.add_argument("--quick", action="store_true", help="smaller sizes and 100 requests (a smoke test)")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--part", choices=("all", "coverage"), default="all",
                    help="'coverage': run only D and merge it into the existing results")
    ap.add_argument("--out", default=None, help="result name under bench/results/papers/ (or a path; default "
                    "bayes_experiments_cpu, with --quick bayes_experiments_cpu-quick)")
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(args.data, "adult")):
        sys.exit(f"bayes_experiments: the shared data folder {args.data} has no adult/ (pass --data or set PGMJAX_DATA)")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(2012)
    t0 = time.perf_counter()
    quick = args.quick
    base = schema.result_path("papers", args.out) if args.out else OUT + ("-quick" if quick else "")
    if args.part == "coverage":
        with open(base + ".json") as f:
            res = json.load(f)
        res["coverage"] = coverage_over_keys(args.data, res["requests"], 4 if quick else 16)
        res["meta"] = schema.run_meta("bench.bayes_experiments", argv, also=res.get("meta") or res["environment"])
        return write(res, base)
    res = {"meta": schema.run_meta("bench.bayes_experiments", argv, also=environment()), "environment": environment()}
    res["blue"] = blue_timing(rng, [100, 200] if quick else [100, 500, 1000, 1500, 2000], [100] if quick else [100, 250, 500, 1000])
    print("A done", flush=True)
    res["methods"] = method_comparison(rng, [200, 400] if quick else [200, 400, 600, 800, 1000],
                                       [1.0, 0.5] if quick else [2.0, 1.0, 0.5, 0.25, 0.1],
                                       [10_000] if quick else [100_000, 300_000])
    print("B done", flush=True)
    res["requests"] = args.requests or (100 if quick else 1000)
    res["keys"] = 2
    res["online"] = online_experiments(args.data, res["requests"], res["keys"])
    res["coverage"] = coverage_over_keys(args.data, res["requests"], 4 if quick else 16)
    res["seconds"] = time.perf_counter() - t0
    write(res, base)


def write(res, base):
    """The result through ``bench.schema``: its parts (blue, methods, online, coverage) are named sections."""
    res = json.loads(json.dumps(res, default=float))
    rest = {k: v for k, v in res.items() if k not in ("meta", "rows")}
    schema.write_result("papers", base, None, res["meta"], page=markdown(res).splitlines(), **rest)
    plot(res, base + ".png")


if __name__ == "__main__":
    main()
