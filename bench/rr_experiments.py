"""Randomized-response release with companion estimators: the experiments of Wang, Ying & Zhang in spirit.

"A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014), Section VII, Figs. 2-5
and Table I, on data we have (the Netflix ratings are no longer distributed; the Facebook graph is not in
the shared data): a 5-valued column (Adult's ``race``, 48,842 records, K = 5) for the statistical-query
experiments, a generated graph of the paper's size (4,039 vertices, 88,234 edges) for the cut queries,
and RR+PGM against the raw companion estimators with the per-attribute variant on NLTCS and Adult.

A. heterogeneity (Fig. 2): worst-case absolute error over 20 statistical queries, each made of h row
   functions (values i.i.d. uniform per rating, rescaled to [0, 1]) on a public random split of the
   records into h groups (h = n: a different function for every record). Baseline: a Laplace histogram
   per group (parallel composition; the paper's MWEM per sub-table is replaced by this simpler
   per-sub-table release).
B. query-set size (Fig. 3): worst-case absolute error over m random linear queries, for three table sizes;
   baselines: Laplace on the m answers (eps/m each) and one Laplace histogram.
C. table size (Fig. 4): mean squared error of 100 fixed linear queries against n, with the exact
   variance and the bound ((e^eps + K - 1) / (e^eps - 1))^2 / (4 n).
D. cut queries (Fig. 5, Table I): worst-case relative error over 20 random half cuts on the subgraphs of
   the first 577 j vertices, eps in {0.5, 1, 2}.
E. RR+PGM: per-attribute release; mean total-variation distance over all two-way marginals of the
   released table taken at face value, the raw debiased marginals, the same clipped and renormalised,
   and the model fitted to the debiased marginals.

Every release goes through ``Accountant.randomized_response`` and every Laplace baseline through
``Accountant.laplace``. Run: ``nice python -m bench.rr_experiments [--quick] [--data DIR]``; writes
``bench/results/papers/rr_experiments_cpu.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import jax
import numpy as np

import pgmjax as pj  # noqa: E402
from bench import schema
from bench.rr_report import markdown, plot
from pgmjax import rr  # noqa: E402
from pgmjax.privacy import Accountant  # noqa: E402




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
            err_rr, err_clip, err_lap = [], [], []
            for k1, k2 in zip(keys(1000 * h + int(100 * eps), runs), keys(2000 * h + int(100 * eps), runs)):
                rel = release(k1, column, eps)
                est = np.array([float(rr.answer(rel, rr.StatisticalQuery(("race",), f, groups), normalize=True)) for f in funcs])
                clip = np.array([float(rr.answer(rel, rr.StatisticalQuery(("race",), f, groups), normalize=True, proper="clip"))
                                 for f in funcs])
                acc = Accountant(epsilon=eps, bounded=True)
                noisy = acc.laplace(k2, hist, 2.0, epsilon=eps, target="group histograms")  # one record moves 2 cells
                lap = np.clip(np.einsum("qhv,hv->q", funcs, noisy) / n, 0, 1)
                err_rr.append(np.abs(est - truth).max())
                err_clip.append(np.abs(clip - truth).max())
                err_lap.append(np.abs(lap - truth).max())
            out.append({"epsilon": eps, "h": h, "rr": float(np.mean(err_rr)), "rr_clip": float(np.mean(err_clip)),
                        "laplace_per_group": float(np.mean(err_lap))})
            print(f"A eps={eps} h={h}: rr {out[-1]['rr']:.4f} clip {out[-1]['rr_clip']:.4f} laplace/group {out[-1]['laplace_per_group']:.4f}", flush=True)
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
            e_rr, e_lap, e_hist = [], [], []
            for k1, k2, k3 in zip(keys(10**6 + 7 * n + m, runs), keys(2 * 10**6 + 7 * n + m, runs), keys(3 * 10**6 + 7 * n + m, runs)):
                rel = release(k1, data, eps)
                est = rr.answer(rel, (("race",), F), normalize=True)
                acc = Accountant(epsilon=eps, bounded=True)
                lap = acc.laplace(k2, F @ hist, float(m), epsilon=eps, target="m answers") / n  # eps/m per answer
                acc2 = Accountant(epsilon=eps, bounded=True)
                lh = F @ acc2.laplace(k3, hist, 2.0, epsilon=eps, target="histogram") / n
                e_rr.append(np.abs(est - truth).max())
                e_lap.append(np.abs(np.clip(lap, 0, 1) - truth).max())
                e_hist.append(np.abs(np.clip(lh, 0, 1) - truth).max())
            out.append({"n": n, "m": m, "epsilon": eps, "rr": float(np.mean(e_rr)), "laplace_per_query": float(np.mean(e_lap)),
                        "laplace_histogram": float(np.mean(e_hist))})
            print(f"B n={n} m={m}: rr {out[-1]['rr']:.4f} laplace/query {out[-1]['laplace_per_query']:.4f} histogram {out[-1]['laplace_histogram']:.4f}", flush=True)
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
            worst, t0 = [], time.perf_counter()
            for k in keys(5 * 10**6 + v + int(100 * eps), runs):
                est = rr.cut(rr.release_pairs(k, sub, v, eps), masks, ~masks)
                worst.append(float(np.max(np.abs(est.value - truth) / truth)))
                bound = est.bound
            out.append({"vertices": v, "edges": int(len(sub)), "epsilon": eps, "mean_cut": float(truth.mean()),
                        "worst_relative_error": float(np.mean(worst)), "bound_relative": float(np.mean(bound / truth)),
                        "seconds_per_release": (time.perf_counter() - t0) / runs})
            print(f"D |V|={v} eps={eps}: worst rel err {out[-1]['worst_relative_error']:.4f} (bound/C {out[-1]['bound_relative']:.4f}), "
                  f"{out[-1]['seconds_per_release']:.2f} s/release", flush=True)
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
        row = {"dataset": name, "epsilon": eps, "epsilon_per_attribute": eps / len(data.domain), "cliques": len(res.info["cliques"]),
               "naive": float(np.mean([tvd(naive[p], true[p], n) for p in pairs])),
               "raw": float(np.mean([tvd(raw[p], true[p], n) for p in pairs])),
               "raw_clipped": float(np.mean([tvd(np.maximum(raw[p], 0) * n / max(np.maximum(raw[p], 0).sum(), 1e-9), true[p], n)
                                             for p in pairs])),
               "rr_pgm": float(np.mean([tvd(model[p], true[p], n) for p in pairs])), "seconds": seconds}
        out.append(row)
        print(f"E {name} eps={eps}: naive {row['naive']:.4f} raw {row['raw']:.4f} clipped {row['raw_clipped']:.4f} "
              f"rr+pgm {row['rr_pgm']:.4f} ({seconds:.1f} s)", flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and sizes (a smoke test)")
    parser.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join(schema.ROOT, "..", "shared", "data")))
    parser.add_argument("--out", default="rr_experiments_cpu", help="result name under bench/results/papers/ (or a path)")
    parser.add_argument("--render", action="store_true", help="only re-render the .md and .png from the .json")
    args = parser.parse_args(argv)
    args.out = schema.result_path("papers", args.out)
    if args.render:
        with open(args.out + ".json") as f:
            results = json.load(f)
        plot(results, args.out + ".png")
        schema.write_page(args.out, markdown(results).splitlines())
        return
    quick = args.quick
    adult = pj.datasets.load("adult", args.data)
    nltcs = pj.datasets.load("nltcs", args.data)
    column = adult.project(("race",))
    runs = {"A": 3 if quick else 10, "B": 3 if quick else 10, "C": 5 if quick else 30, "D": 1 if quick else 3}
    seconds, results = {}, {}
    t_all = time.perf_counter()

    t0 = time.perf_counter()
    hs = [1, 10, 100, 1000, 10000, len(column)] if not quick else [1, 100, len(column)]
    results["heterogeneity"] = heterogeneity(column, [0.5, 1.0, 2.0], hs, runs["A"])
    seconds["A"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    results["query_set_size"] = query_set_size(column, 1.0, [1, 10, 100, 1000, 10000], [5000, 20000, len(column)], runs["B"])
    seconds["B"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ns = [1000, 2000, 5000, 10000, 20000, len(column)]
    results["table_size"] = table_size(column, [1.0, 2.0], ns, runs["C"])
    results["table_size_slopes"] = {str(e): loglog_slope(ns, [r["mse"] for r in results["table_size"] if r["epsilon"] == e]) for e in (1.0, 2.0)}
    seconds["C"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    edges = generated_graph()
    sizes = [577 * j for j in range(1, 8)] if not quick else [577, 1731]
    results["cuts"] = cut_experiment(edges, sizes, [0.5, 1.0, 2.0], runs["D"])
    seconds["D"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    nltcs_cliques = [(a,) for a in nltcs.domain.attributes] + list(itertools.combinations(nltcs.domain.attributes, 2))
    results["rr_pgm"] = rr_pgm("nltcs", nltcs, [2.0, 8.0] if quick else [2.0, 4.0, 8.0, 16.0], nltcs_cliques, 200 if quick else 500)
    results["rr_pgm"] += rr_pgm("adult", adult, [8.0] if quick else [4.0, 8.0, 16.0, 32.0], None, 100 if quick else 300)
    seconds["E"] = time.perf_counter() - t0

    results["meta"] = schema.run_meta("bench.rr_experiments", argv, also={
        "quick": quick, "runs": runs, "column_records": len(column), "graph": {"vertices": 4039, "edges": int(len(edges))},
        "seconds": seconds, "seconds_total": time.perf_counter() - t_all,
    })
    rest = {k: v for k, v in results.items() if k != "meta"}  # the experiments A-E are named sections
    schema.write_result("papers", args.out, None, results["meta"], page=markdown(results).splitlines(), **rest)
    plot(results, args.out + ".png")
    print(f"wrote {args.out}.{{json,md,png}} in {results['meta']['seconds_total']:.0f} s")


if __name__ == "__main__":
    main()
