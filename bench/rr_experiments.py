"""Randomized-response release with companion estimators: the experiments of Wang, Ying & Zhang in spirit.

"A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014), Section VII, Figs. 2-5
and Table I, on data we have (the Netflix ratings are no longer distributed; the Facebook graph is not in
the shared data): a 5-valued column (Adult's ``race``, 48,842 records, K = 5) for the statistical-query
experiments, a generated graph of the paper's size (4,039 vertices, 88,234 edges) for the cut queries,
and RR+PGM against the raw companion estimators with the per-attribute variant on NLTCS and Adult.

A. heterogeneity (Fig. 2): worst-case absolute error over 20 statistical queries, each made of h row
   functions (values i.i.d. uniform per rating, rescaled to [0, 1]) on a public random split of the
   records into h groups (h = n: a different function for every record). Baselines, each on the h
   sub-tables (the records sharing a row function) with the whole epsilon per sub-table (parallel
   composition: a replace-one neighbour changes one record inside its sub-table):
   - MWEM per sub-table, the paper's baseline (Hardt, Ligett & McSherry, NeurIPS 2012, Algorithm 1):
     on each sub-table's 5-value histogram, with that sub-table's rows of the 20 queries as its query set,
     T = 5 rounds (``MWEM_ROUNDS``), each spending eps / T: the exponential mechanism picks the worst-answered
     query (quality |q.(x - A)|, sensitivity 1) with (1 - alpha) eps / T, alpha = 0.5 (pgmjax's MWEM default
     for query selection), the Laplace mechanism measures it with the rest (sensitivity 1), then 100
     multiplicative-weights passes over the measurements so far (``MWEM_PASSES``; pgmjax's ``mw_update``,
     batched over the sub-tables); the answer is the final table's (as pgmjax's MWEM arm), the sub-table
     sizes are public (the paper's MWEM takes N as public), the estimate starts uniform.
   - a Laplace histogram per sub-table (sensitivity 2), then the queries on it.
B. query-set size (Fig. 3): worst-case absolute error over m random linear queries, for three table sizes;
   baselines: MWEM on the whole table with the m queries as its query set (settings of A), Laplace on the
   m answers (eps/m each) and one Laplace histogram.
C. table size (Fig. 4): mean squared error of 100 fixed linear queries against n, with the exact
   variance and the bound ((e^eps + K - 1) / (e^eps - 1))^2 / (4 n).
D. cut queries (Fig. 5, Table I): relative error of 20 random half cuts on the subgraphs of the first
   577 j vertices, eps in {0.5, 1, 2}: the worst of the 20 (the paper's measure) and their mean, beside
   the bound sqrt(|S||T|) e^(eps/2) / (e^eps - 1) on the *expected* absolute error of one cut (a maximum
   over 20 cuts is expected to exceed it).
E. RR+PGM (not in the paper): per-attribute release; mean total-variation distance over all two-way
   marginals of the released table taken at face value, the raw debiased marginals, the same clipped and
   renormalised, and the model fitted to the debiased marginals.

Every release goes through ``Accountant.randomized_response``, every Laplace baseline through
``Accountant.laplace``, MWEM's selections through ``Accountant.exponential_parallel`` (one draw per
sub-table in one vectorised pass, the sub-tables fixed by row position); each experiment records the epsilon its arms spent. Run:
``nice python -m bench.rr_experiments [--quick] [--parts ABCDE] [--data DIR] [--out NAME]``; writes
``bench/results/papers/rr_experiments_cpu.{json,md,png}``. ``--parts`` runs some experiments and keeps the
others from the existing result (each part records the commit and date it ran at); ``--quick`` is a smoke
test of a few seconds per part.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import jax
import numpy as np

import pgmjax as pj
from bench import schema
from bench.rr_report import markdown, plot
from pgmjax import rr
from pgmjax.mechanisms.multiplicative_weights import mwem_budget
from pgmjax.privacy import REST, Accountant

#: MWEM's settings (Hardt, Ligett & McSherry 2012, Algorithm 1) for the baselines of A and B: rounds T,
#: the share alpha of each round's eps / T spent on the measurement (pgmjax's MWEM default for one-query
#: selection), and the multiplicative-weights passes over the measurements after each round.
MWEM_ROUNDS, MWEM_ALPHA, MWEM_PASSES = 5, 0.5, 100


def keys(seed: int, k: int):
    return list(jax.random.split(jax.random.key(seed), k))


def rescaled(rng, shape):
    """Row functions with i.i.d. uniform values, each rescaled to the range [0, 1] (width w = 1)."""
    f = rng.uniform(size=shape)
    lo, hi = f.min(axis=-1, keepdims=True), f.max(axis=-1, keepdims=True)
    return (f - lo) / (hi - lo)


def release(key, data, eps, per_attribute=False):
    return rr.release(key, data, eps, per_attribute=per_attribute)


# ---------------------------------------------------------------------------------------------------
# MWEM on many sub-tables at once (the paper's baseline for A and B)
# ---------------------------------------------------------------------------------------------------


def mw_pass(A, sizes, R, Y):
    """One multiplicative-weights pass in every sub-table: ``pgmjax.mechanisms.multiplicative_weights.mw_update``
    (Hardt, Ligett & McSherry 2012, Algorithm 1, step 3, batched over the measurements) on ``h`` tables at once
    (the same formula; one array operation instead of ``h`` calls).

    ``A``: (h, K) estimated histograms summing to ``sizes`` (h,); ``R``: (t, h, K) measured query rows; ``Y``: (t, h)
    their noisy answers. An empty sub-table stays empty."""
    safe = np.maximum(sizes, 1.0)[:, None]
    residual = Y - (R * A).sum(axis=2)  # (t, h)
    update = (residual[:, :, None] * R).sum(axis=0) / (2.0 * safe)
    p = (A / safe) * np.exp(update - update.max(axis=1, keepdims=True))
    return sizes[:, None] * p / np.maximum(p.sum(axis=1, keepdims=True), 1e-300)


def mwem_subtables(acc: Accountant, key, hist, Q, eps, rounds=MWEM_ROUNDS, alpha=MWEM_ALPHA, passes=MWEM_PASSES):
    """MWEM (Hardt, Ligett & McSherry 2012, Algorithm 1) run independently on ``h`` sub-tables, all spending ``eps``.

    ``hist``: (h, K) the sub-tables' histograms (private; their sizes public); ``Q``: (h, m, K) each sub-table's
    query set, values in [0, 1] (so a replace-one neighbour moves an answer by at most 1: the sensitivity of the
    quality and of the measurement). Round ``t``: select in every sub-table (exponential mechanism, ``(1 - alpha)
    eps / T``), measure the selected answers (one Laplace vector, ``alpha eps / T``; the last round spends exactly
    what is left), then ``passes`` multiplicative-weights passes over all measurements so far. Returns the final
    (h, K) estimates."""
    h, m, K = Q.shape
    sizes = hist.sum(axis=1)
    budget = mwem_budget(eps, rounds, noise="laplace", bounded=True, alpha=alpha, sensitivity=1.0)
    A = np.repeat(sizes[:, None] / K, K, axis=1)  # uniform start
    truth = np.einsum("hmk,hk->hm", Q, hist)
    rows, answers, idx = [], [], np.arange(h)
    for t, (k_sel, k_meas) in enumerate(zip(*[iter(jax.random.split(key, 2 * rounds))] * 2)):
        quality = np.abs(truth - np.einsum("hmk,hk->hm", Q, A))
        # Sub-tables are fixed by row position (public), so a replaced record stays in its sub-table: the
        # draws cost one draw's budget (parallel composition, McSherry, SIGMOD 2009, Theorem 4).
        pick = acc.exponential_parallel(k_sel, np.asarray(quality, dtype=np.float64), 1.0, epsilon=budget["em_epsilon"],
                                        target=f"MWEM round {t + 1}: select", fixed_parts=True)
        rows.append(Q[idx, pick])
        answers.append(acc.laplace(k_meas, truth[idx, pick], 1.0, epsilon=budget["measure_epsilon"] if t < rounds - 1 else REST,
                                   target=f"MWEM round {t + 1}: measure"))
        R, Y = np.stack(rows), np.stack(answers)
        for _ in range(passes):
            A = mw_pass(A, sizes, R, Y)
    return A


def ledger_rows(acc: Accountant) -> list[dict]:
    return [{"mechanism": e.mechanism, "target": str(e.target), "sensitivity": e.sensitivity, "epsilon": e.epsilon, "count": e.count,
             "cost": e.cost} for e in acc.ledger]


# ---------------------------------------------------------------------------------------------------
# A. heterogeneity
# ---------------------------------------------------------------------------------------------------


def heterogeneity(column, epsilons, hs, runs, queries=20, seed=0):
    n = len(column)
    x = column.records[:, 0]
    rng = np.random.default_rng(seed)
    out = []
    for eps in epsilons:
        for h in hs:
            groups = rng.integers(0, h, n)
            funcs = rescaled(rng, (queries, h, 5))
            truth = np.array([f[groups, x].sum() / n for f in funcs])
            hist = np.zeros((h, 5))
            np.add.at(hist, (groups, x), 1.0)
            err_rr, err_clip, err_lap, err_mwem, spent = [], [], [], [], {}
            seed_key = int(100 * eps)
            for k1, k2, k3 in zip(keys(1000 * h + seed_key, runs), keys(2000 * h + seed_key, runs), keys(3000 * h + seed_key, runs)):
                acc_rr = Accountant(epsilon=eps, bounded=True)
                rel = rr.release(k1, column, eps, accountant=acc_rr)
                est = np.array([float(rr.answer(rel, rr.StatisticalQuery(("race",), f, groups), normalize=True)) for f in funcs])
                clip = np.array([float(rr.answer(rel, rr.StatisticalQuery(("race",), f, groups), normalize=True, proper="clip"))
                                 for f in funcs])
                acc = Accountant(epsilon=eps, bounded=True)
                noisy = acc.laplace(k2, hist, 2.0, epsilon=eps, target="group histograms")  # one record moves 2 cells
                lap = np.clip(np.einsum("qhv,hv->q", funcs, noisy) / n, 0, 1)
                acc_mw = Accountant(epsilon=eps, bounded=True)
                A = mwem_subtables(acc_mw, k3, hist, funcs.transpose(1, 0, 2), eps)
                mw = np.einsum("qhv,hv->q", funcs, A) / n
                err_rr.append(np.abs(est - truth).max())
                err_clip.append(np.abs(clip - truth).max())
                err_lap.append(np.abs(lap - truth).max())
                err_mwem.append(np.abs(mw - truth).max())
                spent = {"rr": acc_rr.spent, "laplace_per_group": acc.spent, "mwem": acc_mw.spent}
            out.append({"epsilon": eps, "h": h, "queries": queries, "rr": float(np.mean(err_rr)), "rr_clip": float(np.mean(err_clip)),
                        "laplace_per_group": float(np.mean(err_lap)), "mwem": float(np.mean(err_mwem)),
                        "empty_subtables": int((hist.sum(axis=1) == 0).sum()), "epsilon_spent": spent,
                        "mwem_ledger": ledger_rows(acc_mw) if h == hs[-1] else None})
            r = out[-1]
            print(f"A eps={eps} h={h}: rr {r['rr']:.4f} clip {r['rr_clip']:.4f} laplace/group {r['laplace_per_group']:.4f} "
                  f"mwem {r['mwem']:.4f}", flush=True)
    return out


# ---------------------------------------------------------------------------------------------------
# B. query-set size, C. table size
# ---------------------------------------------------------------------------------------------------


def subsample(column, n, seed=0):
    order = np.random.default_rng(seed).permutation(len(column))[:n]
    return pj.Dataset(column.records[order], column.domain)


def query_set_size(column, eps, sizes, ns, runs, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for n in ns:
        data = subsample(column, n)
        hist = data.marginal(("race",))
        for m in sizes:
            F = rescaled(rng, (m, 5))
            truth = F @ hist / n
            e_rr, e_lap, e_hist, e_mwem, spent = [], [], [], [], {}
            for k1, k2, k3, k4 in zip(keys(10**6 + 7 * n + m, runs), keys(2 * 10**6 + 7 * n + m, runs), keys(3 * 10**6 + 7 * n + m, runs),
                                      keys(6 * 10**6 + 7 * n + m, runs)):
                acc_rr = Accountant(epsilon=eps, bounded=True)
                est = rr.answer(rr.release(k1, data, eps, accountant=acc_rr), (("race",), F), normalize=True)
                acc = Accountant(epsilon=eps, bounded=True)
                lap = acc.laplace(k2, F @ hist, float(m), epsilon=eps, target="m answers") / n  # eps/m per answer
                acc2 = Accountant(epsilon=eps, bounded=True)
                lh = F @ acc2.laplace(k3, hist, 2.0, epsilon=eps, target="histogram") / n
                acc_mw = Accountant(epsilon=eps, bounded=True)
                mw = F @ mwem_subtables(acc_mw, k4, np.asarray(hist, np.float64)[None], F[None], eps)[0] / n  # one table
                e_rr.append(np.abs(est - truth).max())
                e_lap.append(np.abs(np.clip(lap, 0, 1) - truth).max())
                e_hist.append(np.abs(np.clip(lh, 0, 1) - truth).max())
                e_mwem.append(np.abs(mw - truth).max())
                spent = {"rr": acc_rr.spent, "laplace_per_query": acc.spent, "laplace_histogram": acc2.spent, "mwem": acc_mw.spent}
            out.append({"n": n, "m": m, "epsilon": eps, "rr": float(np.mean(e_rr)), "laplace_per_query": float(np.mean(e_lap)),
                        "laplace_histogram": float(np.mean(e_hist)), "mwem": float(np.mean(e_mwem)), "epsilon_spent": spent})
            r = out[-1]
            print(f"B n={n} m={m}: rr {r['rr']:.4f} laplace/query {r['laplace_per_query']:.4f} histogram {r['laplace_histogram']:.4f} "
                  f"mwem {r['mwem']:.4f}", flush=True)
    return out


def table_size(column, epsilons, ns, runs, queries=100, seed=2):
    F = rescaled(np.random.default_rng(seed), (queries, 5))
    out = []
    for eps in epsilons:
        for n in ns:
            data = subsample(column, n)
            truth = F @ data.marginal(("race",)) / n
            rel0 = rr.Release.of(data, eps)
            exact = float(np.mean(rr.exact_variance(data, rel0, (("race",), F), normalize=True)))
            sq = []
            for k in keys(4 * 10**6 + n + int(100 * eps), runs):
                est = rr.answer(release(k, data, eps), (("race",), F), normalize=True)
                sq.append(np.mean((est - truth) ** 2))
            out.append({"epsilon": eps, "n": n, "mse": float(np.mean(sq)), "exact_variance": exact,
                        "bound": rr.mse_bound(5, eps, n)})
            print(f"C eps={eps} n={n}: mse {out[-1]['mse']:.3g} exact {exact:.3g} bound {out[-1]['bound']:.3g}", flush=True)
    return out


def loglog_slope(ns, ys):
    return float(np.polyfit(np.log(ns), np.log(ys), 1)[0])


# ---------------------------------------------------------------------------------------------------
# D. cut queries
# ---------------------------------------------------------------------------------------------------


def generated_graph(vertices=4039, edges=88234, communities=10, inside=0.9, seed=3):
    """A graph of the ego-Facebook sizes (4,039 vertices, 88,234 edges) shaped like it: ``communities``
    groups of consecutive vertex ids (the SNAP file lists its 10 ego networks one after the other), a
    fraction ``inside`` of the edges within a group (in proportion to its size), the rest uniform; distinct
    undirected edges, no loops. The first ``k`` ids then hold whole dense groups, as the paper's subgraphs do."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(50, vertices - 50), communities - 1, replace=False))
    bounds = np.concatenate([[0], cuts, [vertices]])
    sizes = np.diff(bounds)
    seen: set = set()
    target_inside = int(inside * edges)
    while len(seen) < edges:
        k = 2 * (edges - len(seen))
        if len(seen) < target_inside:
            c = rng.choice(communities, k, p=sizes / sizes.sum())
            u = bounds[c] + (rng.random(k) * sizes[c]).astype(np.int64)
            w = bounds[c] + (rng.random(k) * sizes[c]).astype(np.int64)
            limit = target_inside
        else:
            u, w = rng.integers(0, vertices, k), rng.integers(0, vertices, k)
            limit = edges
        for a, b in zip(u.tolist(), w.tolist()):
            if a != b and len(seen) < limit:
                seen.add((min(a, b), max(a, b)))
    return np.array(sorted(seen), dtype=np.int64)


def cut_experiment(edges, sizes, epsilons, runs, cuts=20, seed=4):
    """Per configuration: the worst relative error over the ``cuts`` half cuts (the paper's Table I measure) and
    the mean over them, each averaged over the runs, beside the bound on the expected absolute error of one cut
    (relative to that cut, averaged over the cuts). The bound is Jensen's on the exact standard deviation, so the
    mean absolute error is about sqrt(2/pi) = 0.8 of it and the worst of 20 roughly twice it."""
    rng = np.random.default_rng(seed)
    out = []
    for v in sizes:
        sub = edges[(edges[:, 0] < v) & (edges[:, 1] < v)]
        adj_true = rr.adjacency(rr.pair_table(sub, v).records[:, 0], v)
        masks = np.zeros((cuts, v), dtype=bool)
        for i in range(cuts):
            masks[i, rng.permutation(v)[: v // 2]] = True
        truth = rr.cut_count(adj_true, masks, ~masks)
        for eps in epsilons:
            worst, mean, t0 = [], [], time.perf_counter()
            for k in keys(5 * 10**6 + v + int(100 * eps), runs):
                acc = Accountant(epsilon=eps, bounded=True)
                est = rr.cut(rr.release_pairs(k, sub, v, eps, accountant=acc), masks, ~masks)
                rel_err = np.abs(est.value - truth) / truth
                worst.append(float(rel_err.max()))
                mean.append(float(rel_err.mean()))
                bound = est.bound
            out.append({"vertices": v, "edges": int(len(sub)), "epsilon": eps, "cuts": cuts, "mean_cut": float(truth.mean()),
                        "worst_relative_error": float(np.mean(worst)), "mean_relative_error": float(np.mean(mean)),
                        "expected_error_bound_relative": float(np.mean(bound / truth)), "epsilon_spent": acc.spent,
                        "seconds_per_release": (time.perf_counter() - t0) / runs})
            r = out[-1]
            print(f"D |V|={v} eps={eps}: relative error worst of {cuts} {r['worst_relative_error']:.4f}, mean {r['mean_relative_error']:.4f} "
                  f"(bound on the expected error {r['expected_error_bound_relative']:.4f}), {r['seconds_per_release']:.2f} s/release", flush=True)
    return out


# ---------------------------------------------------------------------------------------------------
# E. RR+PGM vs the raw companion estimators (per-attribute release)
# ---------------------------------------------------------------------------------------------------


def tvd(est, true, n):
    return 0.5 * float(np.abs(est / n - true / n).sum())


def rr_pgm(name, data, epsilons, cliques, iters, seed=5):
    n = len(data)
    pairs = list(itertools.combinations(data.domain.attributes, 2))
    true = dict(zip(pairs, data.marginals(pairs)))
    out = []
    for eps, k in zip(epsilons, keys(seed, len(epsilons))):
        t0 = time.perf_counter()
        res = pj.mechanisms.rr_synthetic(data, eps, key=k, per_attribute=True, cliques=cliques, engine_iters=iters, synthetic=False)
        seconds = time.perf_counter() - t0
        rel = res.original
        naive = dict(zip(pairs, rel.data.marginals(pairs)))
        raw = dict(zip(pairs, rel.marginals(pairs)))
        model = dict(zip(pairs, res.model.marginals(pairs)))
        row = {"dataset": name, "epsilon": eps, "epsilon_per_attribute": eps / len(data.domain), "cliques": len(res.info.cliques),
               "naive": float(np.mean([tvd(naive[p], true[p], n) for p in pairs])),
               "raw": float(np.mean([tvd(raw[p], true[p], n) for p in pairs])),
               "raw_clipped": float(np.mean([tvd(np.maximum(raw[p], 0) * n / max(np.maximum(raw[p], 0).sum(), 1e-9), true[p], n)
                                             for p in pairs])),
               "rr_pgm": float(np.mean([tvd(model[p], true[p], n) for p in pairs])), "epsilon_spent": res.accountant.spent,
               "seconds": seconds}
        out.append(row)
        print(f"E {name} eps={eps}: naive {row['naive']:.4f} raw {row['raw']:.4f} clipped {row['raw_clipped']:.4f} "
              f"rr+pgm {row['rr_pgm']:.4f} ({seconds:.1f} s)", flush=True)
    return out


#: The result's sections written by each experiment.
SECTIONS = {"A": ("heterogeneity",), "B": ("query_set_size",), "C": ("table_size", "table_size_slopes"), "D": ("cuts",),
            "E": ("rr_pgm",)}


def run_parts(parts, quick, data_dir):
    """Run the experiments named in ``parts`` (letters A-E): ``(sections, runs, seconds, facts)``.

    Quick mode (a smoke test, a few seconds per part) keeps every arm but one epsilon and few sizes and runs."""
    adult = pj.datasets.load("adult", data_dir)
    column = adult.project(("race",))
    runs = {"A": 2 if quick else 5, "B": 2 if quick else 10, "C": 3 if quick else 30, "D": 1 if quick else 3}
    results, seconds, facts = {}, {}, {"column_records": len(column)}
    if "A" in parts:
        t0 = time.perf_counter()
        hs = [1, 10, 100, 1000, 10000, len(column)] if not quick else [1, 100, 2000]
        results["heterogeneity"] = heterogeneity(column, [2.0] if quick else [0.5, 1.0, 2.0], hs, runs["A"], queries=10 if quick else 20)
        seconds["A"] = time.perf_counter() - t0
    if "B" in parts:
        t0 = time.perf_counter()
        ms = [1, 10, 100, 1000, 10000] if not quick else [1, 100, 1000]
        results["query_set_size"] = query_set_size(column, 1.0, ms, [5000, 20000, len(column)] if not quick else [5000, len(column)], runs["B"])
        seconds["B"] = time.perf_counter() - t0
    if "C" in parts:
        t0 = time.perf_counter()
        ns, epsilons = ([1000, 2000, 5000, 10000, 20000, len(column)], (1.0, 2.0)) if not quick else ([1000, 5000, len(column)], (1.0,))
        results["table_size"] = table_size(column, list(epsilons), ns, runs["C"])
        results["table_size_slopes"] = {str(e): loglog_slope(ns, [r["mse"] for r in results["table_size"] if r["epsilon"] == e])
                                        for e in epsilons}
        seconds["C"] = time.perf_counter() - t0
    if "D" in parts:
        t0 = time.perf_counter()
        edges = generated_graph()
        facts["graph"] = {"vertices": 4039, "edges": int(len(edges))}
        sizes = [577 * j for j in range(1, 8)] if not quick else [577]
        results["cuts"] = cut_experiment(edges, sizes, [0.5, 1.0, 2.0] if not quick else [1.0], runs["D"])
        seconds["D"] = time.perf_counter() - t0
    if "E" in parts:
        t0 = time.perf_counter()
        nltcs = pj.datasets.load("nltcs", data_dir)
        if quick:  # the smoke test: NLTCS's first 6 attributes (the fit's compilation dominates otherwise)
            nltcs = nltcs.project(nltcs.domain.attributes[:6])
        nltcs_cliques = [(a,) for a in nltcs.domain.attributes] + list(itertools.combinations(nltcs.domain.attributes, 2))
        name = "nltcs" if not quick else "nltcs (6 attributes)"
        results["rr_pgm"] = rr_pgm(name, nltcs, [8.0] if quick else [2.0, 4.0, 8.0, 16.0], nltcs_cliques, 50 if quick else 500)
        if not quick:  # Adult's fit is the slow one; the smoke test keeps NLTCS only
            results["rr_pgm"] += rr_pgm("adult", adult, [4.0, 8.0, 16.0, 32.0], None, 300)
        seconds["E"] = time.perf_counter() - t0
    return results, {k: v for k, v in runs.items() if k in parts}, seconds, facts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one epsilon, few sizes and runs (a smoke test)")
    parser.add_argument("--parts", default="ABCDE", help="the experiments to run (letters A-E); the others are kept from the "
                        "existing result at --out, when there is one")
    parser.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join(schema.ROOT, "..", "shared", "data")))
    parser.add_argument("--out", default=None, help="result name under bench/results/papers/ (or a path); default "
                        "rr_experiments_cpu, or rr_experiments_cpu-quick with --quick (a smoke run never replaces the full result)")
    parser.add_argument("--render", action="store_true", help="only re-render the .md and .png from the .json")
    args = parser.parse_args(argv)
    args.out = schema.result_path("papers", args.out or ("rr_experiments_cpu-quick" if args.quick else "rr_experiments_cpu"))
    image = os.path.basename(args.out) + ".png"  # the page sits beside its plot
    if args.render:
        with open(args.out + ".json") as f:
            results = json.load(f)
        plot(results, args.out + ".png")
        schema.write_page(args.out, markdown(results, image).splitlines())
        return
    parts = "".join(sorted(set(args.parts.upper())))
    if not parts or set(parts) - set(SECTIONS):
        parser.error(f"--parts takes letters among A-E, got {args.parts!r}")
    def existing() -> dict:
        """The result at --out, whose other experiments this run keeps (read again at the end: a run of other parts
        may have finished meanwhile)."""
        if parts == "ABCDE" or not os.path.exists(args.out + ".json"):
            return {}
        with open(args.out + ".json") as f:
            kept = json.load(f)
        if bool(kept["meta"].get("quick")) != args.quick:
            parser.error(f"{args.out}.json was written {'with' if kept['meta'].get('quick') else 'without'} --quick; run the same mode")
        return kept

    existing()
    t_all = time.perf_counter()
    results, runs, seconds, facts = run_parts(parts, args.quick, args.data)
    meta = schema.run_meta("bench.rr_experiments", argv, also={"quick": args.quick, "parts_run": parts})
    here = {"commit": meta["commit"], "date": meta["date"], "command": meta["command"]}
    kept = existing()
    old_meta = kept.get("meta", {})
    part_meta = {p: here for p in parts}
    for p in sorted(set(SECTIONS) - set(parts)):
        if not all(s in kept for s in SECTIONS[p]):
            continue  # not run yet: the page and the plot leave it out
        part_meta[p] = old_meta.get("parts", {}).get(p, {"commit": old_meta.get("commit"), "date": old_meta.get("date")})
        results.update({s: kept[s] for s in SECTIONS[p]})
        runs.update({p: old_meta["runs"][p]} if p in old_meta.get("runs", {}) else {})
        seconds[p] = old_meta.get("seconds", {}).get(p)
        if p == "D":
            facts["graph"] = old_meta.get("graph")
        facts.setdefault("column_records", old_meta.get("column_records"))
    meta.update({"parts": dict(sorted(part_meta.items())), "runs": dict(sorted(runs.items())), "seconds": dict(sorted(seconds.items())),
                 "seconds_this_run": time.perf_counter() - t_all,
                 "mwem": {"rounds": MWEM_ROUNDS, "alpha": MWEM_ALPHA, "mw_passes_per_round": MWEM_PASSES, "noise": "laplace"}, **facts})
    results["meta"] = meta
    rest = {k: v for k, v in results.items() if k != "meta"}  # the experiments A-E are named sections
    schema.write_result("papers", args.out, None, meta, page=markdown(results, image).splitlines(), quiet=True,
                        **{s: rest[s] for p in sorted(SECTIONS) for s in SECTIONS[p] if s in rest})
    plot(results, args.out + ".png")
    print(f"wrote {args.out}.{{json,md,png}} (parts {parts}) in {meta['seconds_this_run']:.0f} s")


if __name__ == "__main__":
    main()
