"""Xiao & Xiong, "Bayesian Inference under Differential Privacy": the paper's Section 6 experiments in spirit.

Section 6 of the paper, on a 2-core CPU and on data we have (the net-trace and search-log histograms of
Hay et al. are not in the shared data; two Adult columns with about 100 values stand in for them):

A. BLUE run time (Fig. 5): against the number of history rows m (N = 100 cells, left) and against N (m = 2N,
   right); H with integer entries in [-10, 10], budgets alpha ~ U(0, 1], so b_i = max_j |H_ij| / alpha_i.
B. Error-law methods (Fig. 6-8): time and signed relative error of the 95% half-width of the BLUE's error
   against "cf" (Fourier inversion, the reference), max S = 5, for "pc" (Algorithm 2, corrected) at the
   paper's unit bin width and gamma = 0.01, at the library's default width from the law's own scale,
   sd / (4 sqrt m) (at gamma = 1e-6 and at the paper's 0.01), and at its former default min(s)/8; "mc"
   (Algorithm 1, 10^5 draws); "gaussian".
   Fig. 6 left: N = 100, m = 200..1000; Fig. 6 right: m = 500, N = 50..400; Fig. 7: "pc" against beta
   (Theorem 4.6: (sum_k |A_k| S_k / alpha_k)^2, here in units of the bin width, swept through the width),
   m = 1000, gamma = 0.01 and 1e-6; Fig. 8: "mc" against its sample size, m = 1000.
C. The online system (Fig. 9-10), 1,000 requests from the normalised generator of eq. 37-38 (multinomial
   counts over the cells, n_t ~ U{1..10}), delta = 0.2:
   Fig. 9: unbounded budget, history = a binary hierarchical tree (Hay et al. 2010) released at eps = 0.3,
   2 w ~ U[50, 1000]; Fig. 10: budget 1, empty history, 2 w ~ U[1, 1000]. Systems: the baseline (every
   request answered by a fresh Laplace answer with Theorem 5.3's budget, no inference), the paper's system
   (answers from history; fresh answers alone), the same with fresh answers combined with history by the
   BLUE, and history-aware allocation; in Fig. 10 also OLS (Li et al. 2010, "Optimizing linear counting
   queries under differential privacy": ordinary least squares over the history, ignoring the rows' noise
   scales) in the paper's system with the same allocation. Metrics (Definitions 6.1-6.3): answering ratio
   R_a, reliability R_i (coverage of the stated intervals), relative error E = mean |theta_hat - theta| / (2 w),
   system cost.
D. Coverage over noise keys: the stated 80% intervals of the Fig. 10 setting (paper allocation, combined
   BLUE), the same 1,000 requests, 16 independent noise keys: one stream's R_i is a poor estimate of the coverage
   because overlapping requests share the history's noise.

Every noise addition goes through ``pgmjax.privacy.Accountant.laplace``. Run:
``nice python -m bench.bayes_experiments [--quick] [--data DIR] [--part timing|online|coverage] [--keys K]``;
writes ``bench/results/papers/bayes_experiments_cpu.{json,md,png}``. ``--part`` runs A-B, C or D alone and
merges it into the existing result (so that each run stays short on a shared machine).
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

from pgmjax.bayes import LinearNoise, OnlineQuerySystem, allocate, bin_counts, blue  # noqa: E402
from pgmjax.bayes.convolution import default_bin_width  # noqa: E402
from pgmjax.privacy import Accountant  # noqa: E402
from pgmjax.privacy.discrete_noise import lattice_spacing  # noqa: E402

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


# The library's own grid refuses past 2^24 bins; past 2^21 one "pc" evaluation takes a minute or more on the shared
# 2-core machine (measured: about 7e6 bins, m = 200, took 155 s), so such runs are recorded with their bin count only.
PC_BIN_CAP = 1 << 21


def scale_width(E, m):
    """The library's default "pc" bin width, from the law's own scale, ``sd / (4 sqrt m)``
    (:func:`pgmjax.bayes.convolution.default_bin_width`): rounding each of the ``m`` terms to the grid adds about
    ``m h^2 / 12 = Var / 192`` to the variance at most, and the total bin count stays near
    ``8 ln(m / gamma) sqrt(m) sum_k s_k / sd`` (tens of thousands here)."""
    assert len(E.terms) == m or E.gaussian_variance > 0, (len(E.terms), m)
    return default_bin_width(E.terms, E.gaussian_variance)


def pc_variants(E, m):
    """The "pc" settings compared: the paper's (unit bins, gamma = 0.01), the library's default (the law's scale,
    gamma = 1e-6; ``None``: nothing passed), the same width at the paper's gamma, and the library's former default
    (``min(s) / 8``, which follows the smallest term)."""
    return (("pc h=1 (paper)", 1.0, 0.01), ("pc h=min(s)/8 (former default)", min(E.terms) / 8.0, LinearNoise.gamma),
            ("pc h=sd/(4 sqrt m), gamma=0.01", scale_width(E, m), 0.01),
            ("pc default h=sd/(4 sqrt m), gamma=1e-6", None, LinearNoise.gamma))


def pc_row(E, ref, h, gamma, cap=PC_BIN_CAP):
    """One "pc" evaluation: its half-width's relative error against "cf", its time and bin count; not run
    (status says why) when the grid would be over ``cap`` bins."""
    width = scale_width(E, len(E.terms)) if h is None else h
    bins = int(bin_counts(E.terms, gamma, width).sum())
    row = {"bin_width": width, "gamma": gamma, "bins": bins, "beta": float((E.terms.sum() / width) ** 2)}
    if bins > cap:
        return {**row, "status": f"not run: {bins:.3g} bins (cap {cap:.3g}; library limit {1 << 24:.3g})",
                "seconds": None, "half_width": None, "rel_error": None}
    c, t = timed_half_width(E.with_method("pc", bin_width=h, gamma=gamma))
    return {**row, "status": "ok", "seconds": t, "half_width": c, "rel_error": (c - ref) / ref}


def compare_methods(E, m, N, part, mc_samples, cap):
    """cf (reference), the "pc" variants, "mc" and "gaussian" on one law: 95% half-width, time, signed
    relative error against cf."""
    ref, t_cf = timed_half_width(E)
    base = {"part": part, "m": m, "N": N}
    rows = [{**base, "method": "cf", "seconds": t_cf, "half_width": ref, "rel_error": 0.0, "status": "ok"}]
    for name, h, gamma in pc_variants(E, m):
        rows.append({**base, "method": name, **pc_row(E, ref, h, gamma, cap)})
    for name, opts in (("mc", {"key": jax.random.key(m + 7 * N), "samples": mc_samples}), ("gaussian", {})):
        c, t = timed_half_width(E.with_method(name, **opts))
        rows.append({**base, "method": name, "seconds": t, "half_width": c, "rel_error": (c - ref) / ref, "status": "ok"})
    for r in rows:
        print({k: r.get(k) for k in ("part", "m", "N", "method", "seconds", "rel_error", "status")}, flush=True)
    return rows


def method_comparison(rng, ms, Ns, m_fixed, widths, sample_sizes, mc_samples, cap=PC_BIN_CAP):
    """Fig. 6 left (methods against m, N = 100), Fig. 6 right (against N, m = ``m_fixed``), Fig. 7 ("pc" against
    beta) and Fig. 8 ("mc" against its sample size), all at max S = 5; "pc" at the paper's gamma = 0.01 and at 1e-6.

    Beta (Theorem 4.6) is ``(sum_k |A_k| S_k / alpha_k)^2 = (sum_k s_k)^2`` in units of the bin width: "pc"
    convolves ``sum_k (2 s_k ln(m / gamma) / h + 1)`` bins, about ``2 ln(m / gamma) sqrt(beta) + m``. The paper
    varies beta through the noise at unit bins; scaling every ``s_k`` by ``c`` at width 1 is the same
    computation as width ``1 / c`` at the original noise (the law is a scale family), so beta is swept here
    through ``h`` on one law (m = max(ms), N = 100)."""
    rows = []
    for m in ms:
        rows += compare_methods(law_for(m, 100, rng), m, 100, "methods_m", mc_samples, cap)
    for N in Ns:
        rows += compare_methods(law_for(m_fixed, N, rng), m_fixed, N, "methods_N", mc_samples, cap)
    m = max(ms)
    E = law_for(m, 100, rng)
    ref, _ = timed_half_width(E)
    for gamma in (0.01, 1e-6):
        for h in widths:
            row = {"part": "pc_beta", "m": m, "N": 100, "method": "pc", **pc_row(E, ref, h, gamma, cap)}
            rows.append(row)
            print({k: row[k] for k in ("part", "bin_width", "gamma", "beta", "bins", "seconds", "rel_error")}, flush=True)
    for n in sample_sizes:
        c, t = timed_half_width(E.with_method("mc", key=jax.random.key(n), samples=n))
        rows.append({"part": "mc_samples", "m": m, "N": 100, "method": "mc", "samples": n, "seconds": t,
                     "half_width": c, "rel_error": (c - ref) / ref, "status": "ok"})
        print(rows[-1], flush=True)
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


class OrdinaryLeastSquares:
    """The OLS estimate of Li et al. 2010 ("Optimizing linear counting queries under differential privacy"):
    ``q (H^T H)^+ H^T y``, ordinary least squares over the history, ignoring the rows' different noise
    scales. Its weights ``A = q (H^T H)^+ H^T`` depend on the rows only, never on the noise, so its error is
    again ``sum_k A_k noise_k``: the same :class:`LinearNoise` law with OLS weights gives its exact interval."""

    def __init__(self, N):
        self.H, self.y, self.b = np.zeros((0, N)), np.zeros(0), np.zeros(0)
        self._svd = None

    def append(self, q, y, b):
        self.H, self.y, self.b = np.vstack([self.H, q]), np.append(self.y, y), np.append(self.b, b)
        self._svd = None

    def estimate(self, q, level):
        """``(value, half-width at level)``, or None when ``q`` is not in the row space of the history."""
        if not self.H.shape[0]:
            return None
        if self._svd is None:  # recomputed only when the history has grown
            U, sv, Vt = np.linalg.svd(self.H, full_matrices=False)
            keep = sv > 1e-10 * sv[0]
            self._svd = U[:, keep], sv[keep], Vt[keep]
        U, sv, Vt = self._svd
        coef = Vt @ q
        if np.linalg.norm(q - coef @ Vt) > 1e-9 * np.linalg.norm(q):
            return None
        A = (coef / sv) @ U.T
        return float(A @ self.y), float(LinearNoise(A, self.b).half_width(level))


def ols_run(x, stream, budget, delta, key):
    """Fig. 10's OLS arm: the paper's system (answer from history when the interval meets the request, else
    one fresh answer with Theorem 5.3's budget, answered alone, refused past the per-cell budget) with the
    BLUE replaced by OLS. The fresh answers are drawn and charged as in ``OnlineQuerySystem``: the
    accountant's lattice-rounded Laplace noise of scale ``b``, the rounding's share counted per cell."""
    acc = Accountant(epsilon=budget * x.size)
    ols = OrdinaryLeastSquares(x.size)
    B = np.zeros(x.size)
    out = []
    for i, (q, w) in enumerate(stream):
        hist = ols.estimate(q, 1.0 - delta)
        if hist is not None and hist[1] <= w:
            out.append((hist[0], hist[1], "history"))
            continue
        S = float(np.abs(q).max())
        b = allocate(w, delta, S).scale
        share = lattice_spacing(b, S, 1, False)  # the rounding's share of the sensitivity (one answer)
        B_new = B + (np.abs(q) + share * (q != 0)) / b
        if B_new.max() > budget * (1 + 1e-9):
            out.append(None)
            continue
        y = float(acc.laplace(jax.random.fold_in(key, i), np.array([q @ x]), S, scale=b, target="query")[0])
        entry = acc.ledger[-1]
        B = B + (np.abs(q) + (entry.sensitivity - S) * (q != 0)) / entry.scale
        ols.append(q, y, entry.scale)
        out.append((y, w, "fresh"))
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


SETTINGS = {
    "fig9": ("fig9 (unbounded, tree eps=0.3)", dict(budget=1e9, tree_eps=0.3, width=(50.0, 1000.0))),
    "fig10": ("fig10 (budget 1, empty)", dict(budget=1.0, tree_eps=0.0, width=(1.0, 1000.0))),
}


def online_experiments(data_dir, n_requests, keys, seed=0, which=tuple(SETTINGS)):
    rows = []
    settings = dict(SETTINGS[w] for w in which)
    systems = {
        "baseline (no inference)": None,
        "paper (history; fresh alone)": dict(allocation="paper", combine=False),
        "paper + BLUE combine": dict(allocation="paper", combine=True),
        "history-aware + combine": dict(allocation="history", combine=True),
        "OLS (Li et al. 2010; history; fresh alone)": "ols",
    }
    runs = [("capital-gain", k) for k in range(keys)] + [("fnlwgt", 0)]  # fnlwgt: the data-independence check
    for column, k in runs:
        x = load_histogram(data_dir, column)
        for setting, cfg in settings.items():
            stream = requests(n_requests, x.size, np.random.default_rng(seed), cfg["width"])
            for name, kw in systems.items():
                if column == "fnlwgt" and name != "paper + BLUE combine":
                    continue
                if kw == "ols" and cfg["tree_eps"]:  # the paper runs OLS in the Fig. 10 setting only
                    continue
                key = jax.random.key(1000 * seed + k)
                t = time.perf_counter()
                if kw is None:
                    res, cost = baseline(x, stream, cfg["budget"], 0.2, key, cfg["tree_eps"])
                    res = [None if r is None else (r[0], r[1], "fresh") for r in res]
                elif kw == "ols":
                    res, cost = ols_run(x, stream, cfg["budget"], 0.2, key)
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
    the coverage of each request averaged over independent noise keys estimates the real coverage. Run for the
    paper's system with the BLUE (fresh answers combined) and for the OLS arm."""
    x = load_histogram(data_dir, "capital-gain")
    stream = requests(n_requests, x.size, np.random.default_rng(seed), (1.0, 1000.0))
    truth = np.array([q @ x for q, _ in stream])
    t = time.perf_counter()

    def summary(run):
        cover, sources = [], None
        for k in range(keys):
            res = run(jax.random.key(100 + k))
            cover.append([np.nan if r is None else float(abs(r[0] - v) <= r[1]) for r, v in zip(res, truth)])
            sources = [None if r is None else r[2] for r in res]  # the same for every key (noise-independent)
        cover = np.array(cover)
        per_key = np.nanmean(cover, axis=1)
        hist = [i for i, src in enumerate(sources) if src == "history"]
        fresh = [i for i, src in enumerate(sources) if src == "fresh"]
        return {"overall": float(np.nanmean(cover)), "se_independent_keys": float(per_key.std(ddof=1) / math.sqrt(keys)),
                "per_key": per_key.tolist(), "history": float(np.nanmean(cover[:, hist])) if hist else float("nan"),
                "fresh": float(np.nanmean(cover[:, fresh])) if fresh else float("nan"),
                "answered_per_key": int(np.sum(~np.isnan(cover[0])))}

    out = {"setting": "fig10 (budget 1, empty)", "system": "paper + BLUE combine", "requests": n_requests, "keys": keys}
    out.update(summary(lambda key: online_run(x, stream, 1.0, 0.2, key, 0.0, allocation="paper", combine=True)[0]))
    out["ols"] = summary(lambda key: ols_run(x, stream, 1.0, 0.2, key)[0])
    out["seconds"] = time.perf_counter() - t
    return out


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


def _num(v, fmt):
    return "-" if v is None else format(v, fmt)


def markdown(res):
    env = res["environment"]
    runs = res.get("runs", {})
    out = ["# Xiao & Xiong, Bayesian inference under DP: the experiments in spirit (CPU)", "",
           f"{env['machine']}, {env['cores']} cores (shared with other jobs), python {env['python']}, jax {env['jax']}, "
           f"numpy {env['numpy']}. Produced by `bench/bayes_experiments.py`"
           + ("; its parts ran as separate commands (each merges its section into this result):" if len(runs) > 1 else "."), ""]
    for part, r in runs.items():
        out.append(f"- {part}: `{r['command']}`, {r['date']}, {r['seconds']:.0f} s (load average {r['load_average']:.1f} at the start)")
    if "blue" in res:
        out += ["", "## A. BLUE run time (Fig. 5)", "",
                "Left: N = 100 cells, m history rows; right: m = 2N. H has integer entries in [-10, 10], alpha ~ U(0, 1].", "",
                "| figure | m | N | seconds |", "|---|---|---|---|"]
        out += [f"| 5 {'left' if r['series'] == 'm' else 'right'} | {r['m']} | {r['N']} | {r['seconds']:.4f} |" for r in res["blue"]]
    if "methods" in res:
        rows = res["methods"]
        out += ["", "## B. Error-law methods (Fig. 6-8): the 95% half-width of the BLUE's error", "",
                "Max S = 5; relative error = (method - cf) / cf, signed (negative: interval too narrow). \"pc\" settings: "
                "the paper's (bin width 1, gamma = 0.01); the library's default, a width from the law's scale, "
                "h = sd / (4 sqrt m), at gamma = 1e-6 and at the paper's 0.01; the library's former default, min(s)/8. \"mc\": "
                f"{next((r['samples'] for r in rows if r['part'] == 'mc_samples'), '')} and more draws in Fig. 8; "
                "in Fig. 6 the sample size is in the JSON. A \"pc\" run over 2^21 bins is not run (minutes each; "
                "the library refuses past 2^24): its bin count is shown.", ""]
        for part, title, key in (("methods_m", "Fig. 6 left: against m (N = 100)", "m"),
                                 ("methods_N", "Fig. 6 right: against N (m fixed)", "N")):
            g = [r for r in rows if r["part"] == part]
            if not g:
                continue
            out += [f"### {title}", "", "| m | N | method | bin width | bins | seconds | relative error |", "|---|---|---|---|---|---|---|"]
            for r in g:
                err = _num(r["rel_error"], "+.2e") if r["status"] == "ok" else r["status"]
                out.append(f"| {r['m']} | {r['N']} | {r['method']} | {_num(r.get('bin_width'), '.3g')} | "
                           f"{r.get('bins', '-')} | {_num(r['seconds'], '.4f')} | {err} |")
            out.append("")
        g = [r for r in rows if r["part"] == "pc_beta"]
        if g:
            out += [f"### Fig. 7: \"pc\" against beta (m = {g[0]['m']}, N = 100)", "",
                    "beta = (sum_k s_k / h)^2 (Theorem 4.6's (sum_k |A_k| S_k / alpha_k)^2 in units of the bin width h); "
                    "swept through h on one law, which is the same computation as scaling the noise at h = 1.", "",
                    "| gamma | bin width h | beta | bins | seconds | relative error |", "|---|---|---|---|---|---|"]
            for r in g:
                err = _num(r["rel_error"], "+.2e") if r["status"] == "ok" else r["status"]
                out.append(f"| {r['gamma']:g} | {r['bin_width']:.3g} | {r['beta']:.3g} | {r['bins']} | {_num(r['seconds'], '.4f')} | {err} |")
            out.append("")
        g = [r for r in rows if r["part"] == "mc_samples"]
        if g:
            out += [f"### Fig. 8: \"mc\" against its sample size (m = {g[0]['m']}, N = 100)", "",
                    "| samples | seconds | relative error |", "|---|---|---|"]
            out += [f"| {r['samples']} | {r['seconds']:.2f} | {r['rel_error']:+.2e} |" for r in g]
    if "online" in res:
        online = [r for r in res["online"] if r["data"] == "adult capital-gain"]
        keys = sorted({r["key"] for r in online})
        out += ["", f"## C. Online system (Fig. 9-10), {res['requests']} requests, delta = 0.2 (stated confidence 0.8)", "",
                f"Adult capital-gain (N = {online[0]['N']} cells); mean over {len(keys)} noise key{'s' * (len(keys) > 1)} (same "
                "request stream), R_i's range over the keys in brackets. OLS (Li et al. 2010): the paper's system with the BLUE replaced by "
                "ordinary least squares (same allocation, fresh answers alone); its intervals are the exact law of the "
                "OLS estimate's error (OLS weights in the same error-law code), so they are as honest as the BLUE's, only wider.", "",
                "| setting | system | R_a | R_i [min, max] | E | system cost | answered from history | seconds per run |",
                "|---|---|---|---|---|---|---|---|"]
        for setting in dict.fromkeys(r["setting"] for r in online):
            for system in dict.fromkeys(r["system"] for r in online):
                g = [r for r in online if r["setting"] == setting and r["system"] == system]
                if not g:
                    continue
                ri = [r["R_i"] for r in g]
                out.append(f"| {setting} | {system} | {np.mean([r['R_a'] for r in g]):.3f} | {np.mean(ri):.3f} "
                           f"[{min(ri):.3f}, {max(ri):.3f}] | {np.mean([r['E'] for r in g]):.4f} | {g[0]['system_cost']:.4g} | "
                           f"{np.mean([r['from_history'] for r in g]):.0f} | {np.mean([r['seconds'] for r in g]):.1f} |")
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
                f"per key from {min(cov['per_key']):.3f} to {max(cov['per_key']):.3f} ({cov['seconds']:.0f} s for both systems)."]
        ols = cov.get("ols")
        if ols:
            out += ["", f"OLS arm, same requests and keys, {ols['answered_per_key']} answered per key: coverage **{ols['overall']:.3f}** "
                    f"(standard error over keys {ols['se_independent_keys']:.3f}); answers from history {ols['history']:.3f}, "
                    f"fresh {ols['fresh']:.3f}; per key from {min(ols['per_key']):.3f} to {max(ols['per_key']):.3f}."]
    return "\n".join(out) + "\n"


def plot(res, path):
    """The paper's figures, same axes: Fig. 5 (BLUE time against m and N), Fig. 6 (method time against m and
    N), Fig. 7 ("pc" time and error against beta), Fig. 8 ("mc" time and error against the sample size),
    Fig. 9-10 (R_a, R_i, E and system cost by system)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(3, 3, figsize=(16, 13))
    ax = ax.ravel()
    for i, (series, x, title) in enumerate((("m", "m", "Fig. 5 left: BLUE time, N = 100"),
                                            ("N", "N", "Fig. 5 right: BLUE time, m = 2N"))):
        b = [r for r in res.get("blue", []) if r["series"] == series]
        ax[i].plot([r[x] for r in b], [r["seconds"] for r in b], "o-")
        ax[i].set(xlabel=f"{x} ({'history rows' if x == 'm' else 'cells'})", ylabel="seconds", title=title)
    methods = res.get("methods", [])
    names = list(dict.fromkeys(r["method"] for r in methods if r["part"] == "methods_m"))
    for i, (part, x, title) in enumerate((("methods_m", "m", "Fig. 6 left: time per 95% half-width, N = 100"),
                                          ("methods_N", "N", "Fig. 6 right: time per 95% half-width, m fixed")), start=2):
        for name in names:
            rs = [r for r in methods if r["part"] == part and r["method"] == name and r["seconds"] is not None]
            if rs:
                ax[i].plot([r[x] for r in rs], [r["seconds"] for r in rs], "o-", label=name)
        skipped = [r for r in methods if r["part"] == part and r["seconds"] is None]
        for name in dict.fromkeys(r["method"] for r in skipped):  # runs over the bin cap: named in the legend
            bins = min(r["bins"] for r in skipped if r["method"] == name)
            ax[i].plot([], [], " ", label=f"{name}: not run ({bins:.2g} bins and more)")
        ax[i].set(xlabel=x, ylabel="seconds", title=title, yscale="log")
        ax[i].legend(fontsize=7)
    beta = [r for r in methods if r["part"] == "pc_beta" and r["seconds"] is not None]
    for gamma in dict.fromkeys(r["gamma"] for r in beta):
        g = [r for r in beta if r["gamma"] == gamma]
        ax[4].plot([r["beta"] for r in g], [r["seconds"] for r in g], "o-", label=f"gamma = {gamma:g}")
        ax[5].plot([r["beta"] for r in g], [abs(r["rel_error"]) for r in g], "o-", label=f"gamma = {gamma:g}")
    ax[4].set(xlabel="beta = (sum s_k / h)^2", ylabel="seconds", title="Fig. 7: pc time against beta", xscale="log", yscale="log")
    ax[5].set(xlabel="beta = (sum s_k / h)^2", ylabel="|relative error| of the 95% half-width",
              title="Fig. 7: pc error against beta (vs cf)", xscale="log", yscale="log")
    for a in ax[4:6]:
        a.legend(fontsize=7)
    mc = [r for r in methods if r["part"] == "mc_samples"]
    ax[6].plot([r["samples"] for r in mc], [r["seconds"] for r in mc], "o-", color="C0")
    ax[6].set(xlabel="MC sample size", ylabel="seconds", title="Fig. 8: mc time and error against sample size", xscale="log")
    twin = ax[6].twinx()
    twin.plot([r["samples"] for r in mc], [abs(r["rel_error"]) for r in mc], "s--", color="C3")
    twin.set_ylabel("|relative error| (dashed)", color="C3")
    online = [r for r in res.get("online", []) if r["data"] == "adult capital-gain"]
    for i, setting in enumerate(dict.fromkeys(r["setting"] for r in online), start=7):
        labels = list(dict.fromkeys(r["system"] for r in online if r["setting"] == setting))
        metrics_ = ("R_a", "R_i", "E", "system_cost")
        width = 0.8 / len(labels)
        for j, lab in enumerate(labels):
            g = [r for r in online if r["system"] == lab and r["setting"] == setting]
            ax[i].bar(np.arange(len(metrics_)) + j * width, [np.mean([r[k] for r in g]) for k in metrics_], width, label=lab)
        ax[i].set_xticks(np.arange(len(metrics_)) + 0.4 - width / 2, ["R_a", "R_i", "E", "system cost"])
        ax[i].axhline(0.8, color="k", lw=0.8, ls="--")
        ax[i].set(title=f"Fig. {9 if 'fig9' in setting else 10}: {setting}", ylabel="value (log; dashed: stated 0.8)",
                  yscale="log")
        ax[i].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


PARTS = {"timing": ("blue", "methods"), "online": ("requests", "keys", "online"), "coverage": ("coverage",)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join(schema.ROOT, "..", "shared", "data")))
    ap.add_argument("--quick", action="store_true", help="small sizes, 25 requests (a smoke test of every part)")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--keys", type=int, default=None, help="noise keys of part D (default 16, quick 2)")
    ap.add_argument("--online-keys", type=int, default=1, help="noise keys of part C (each runs every system)")
    ap.add_argument("--setting", nargs="+", choices=tuple(SETTINGS), default=tuple(SETTINGS),
                    help="part C's settings to run (with --part online, the other's rows are kept)")
    ap.add_argument("--part", choices=("all", *PARTS, "report"), default="all",
                    help="run one part (timing: A-B, online: C, coverage: D) and merge it into the existing result; "
                    "'report': rewrite the page and figure from the existing result, running nothing")
    ap.add_argument("--out", default=None, help="result name under bench/results/papers/ (or a path; default "
                    "bayes_experiments_cpu, with --quick bayes_experiments_cpu-quick)")
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(args.data, "adult")):
        sys.exit(f"bayes_experiments: the shared data folder {args.data} has no adult/ (pass --data or set PGMJAX_DATA)")
    jax.config.update("jax_enable_x64", True)
    quick = args.quick
    base = schema.result_path("papers", args.out) if args.out else OUT + ("-quick" if quick else "")
    res = {}
    if args.part == "report":
        with open(base + ".json") as f:
            res = json.load(f)
        schema.write_page(base, markdown(res).splitlines())
        plot(res, base + ".png")
        return
    if args.part != "all" and os.path.exists(base + ".json"):
        with open(base + ".json") as f:
            res = json.load(f)
        res.pop("seconds", None)
    env = environment()
    res["meta"] = schema.run_meta("bench.bayes_experiments", argv, also=env)
    res["environment"] = env
    runs = res.setdefault("runs", {})
    for part in (PARTS if args.part == "all" else (args.part,)):
        t0 = time.perf_counter()
        load = os.getloadavg()[0]
        if part == "timing":
            rng = np.random.default_rng(2012)
            res["blue"] = blue_timing(rng, [100, 200] if quick else [100, 500, 1000, 1500, 2000],
                                      [50, 100] if quick else [100, 250, 500, 1000])
            res["methods"] = method_comparison(
                rng, [100, 200] if quick else [200, 400, 600, 800, 1000], [25, 50] if quick else [50, 100, 200, 300, 400],
                100 if quick else 500, [1.0, 0.2, 0.04] if quick else [2.0, 1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01, 0.005],
                [2_000, 4_000] if quick else [100_000, 200_000, 500_000], 2_000 if quick else 100_000,
                cap=1 << 17 if quick else PC_BIN_CAP)
        elif part == "online":
            res["requests"] = args.requests or (25 if quick else 1000)
            res["keys"] = args.online_keys
            res["online"] = online_experiments(args.data, res["requests"], res["keys"], which=args.setting)
        else:
            res["coverage"] = coverage_over_keys(args.data, res.get("requests") or args.requests or (25 if quick else 1000),
                                                 args.keys or (2 if quick else 16))
        name = part if part != "online" or set(args.setting) == set(SETTINGS) else f"online {' '.join(args.setting)}"
        runs[name] = {"command": res["meta"]["command"], "date": res["meta"]["date"], "load_average": load,
                      "seconds": time.perf_counter() - t0}
        print(f"{name} done in {runs[name]['seconds']:.0f} s", flush=True)
    if args.part != "all" and os.path.exists(base + ".json"):
        # Re-read what is there now and replace only this part's sections: parts run side by side (as separate
        # commands, to keep each under the time a run may take) then all land in the one result.
        with open(base + ".json") as f:
            now = json.load(f)
        now.pop("seconds", None)
        kept = [r for r in now.get("online", []) if r["setting"] not in {SETTINGS[w][0] for w in args.setting}]
        now.update({k: res[k] for k in ("meta", "environment", *PARTS[args.part]) if k in res})
        if args.part == "online":  # the other setting's rows stay
            order = [label for label, _ in SETTINGS.values()]
            now["online"] = sorted(kept + res["online"], key=lambda r: order.index(r["setting"]))
        now.setdefault("runs", {})[name] = runs[name]
        res = now
    write(res, base)


def write(res, base):
    """The result through ``bench.schema``: its parts (blue, methods, online, coverage) are named sections."""
    res = json.loads(json.dumps(res, default=float))
    rest = {k: v for k, v in res.items() if k not in ("meta", "rows")}
    schema.write_result("papers", base, None, res["meta"], page=markdown(res).splitlines(), **rest)
    plot(res, base + ".png")


if __name__ == "__main__":
    main()
