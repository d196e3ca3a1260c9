"""U4 coverage simulation: a 6-attribute tree-structured truth, all one-way and the five edge marginals
measured, three noise/loss configurations, bootstrap and linearised 90% intervals of fixed queries (10 edge
cells, 10 non-edge cells, 5 ranges, and up to 5 cells with a true count below 20: this truth has one).

Full variant: R = 400 outer draws, B = 200 refits (GPU-sized; about 22 minutes on a shared 2-core CPU). The CPU variant in the test suite
(``tests/uncertainty/test_uncertainty_coverage.py``, marked slow) runs the Gaussian/L2 configuration with R = B = 40 and
binomial gates. The estimand is exact: the L2 fit of the noiseless measurements as a quadratic program
(``fit_method="qp"``; they are consistent, so it is also their L1 fit), and the L2 configurations refit
exactly by the same QP. Usage:

    nice python -m bench.uncertainty_u4 [--R 400] [--B 200] [--configs gauss-l2,laplace-l2,laplace-l1] [--note TEXT]
    python -m bench.uncertainty_u4 --render [--note TEXT]      # the .md again from the .json

Writes bench/results/papers/uncertainty_u4_cpu.{json,md} (after every configuration).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import pgmjax as pj  # noqa: E402
from pgmjax.graph.oracle import make_plan  # noqa: E402
from pgmjax.queries.factors import Range, Value  # noqa: E402
from pgmjax.uncertainty.qp import junction_tree_model  # noqa: E402
from pgmjax.uncertainty.simulate import simulate_coverage, tree_dataset  # noqa: E402

from bench import schema

SIZES = (2, 3, 4, 5, 3, 2)
EDGES = ((0, 1), (1, 2), (1, 3), (3, 4), (4, 5))
CONFIGS = {  # noise family, stddev, loss
    "gauss-l2": ("gaussian", 25.0, "l2"),
    "laplace-l2": ("laplace", 20.0 * np.sqrt(2), "l2"),
    "laplace-l1": ("laplace", 20.0 * np.sqrt(2), "l1"),
}


def u4_design(config: str):
    """``(data, measurements, means, base, targets, kinds, truths)`` of U4 for one configuration."""
    noise, sd, loss = CONFIGS[config]
    data = tree_dataset(SIZES, EDGES, 20_000, table_seed=0, record_seed=1)
    names = list(data.domain)
    cliques = [(a,) for a in names] + [(names[p], names[c]) for p, c in EDGES]
    means = [data.marginal(c).ravel() for c in cliques]
    ms = [pj.Measurement(c, m, stddev=sd, noise=noise) for c, m in zip(cliques, means)]
    # the estimand: the fit of the noiseless (consistent) measurements, the junction-tree product of the true
    # marginals, in closed form
    edge_cliques = [(names[p], names[c]) for p, c in EDGES]
    base = junction_tree_model(make_plan(data.domain, edge_cliques), {c: data.marginal(c) for c in edge_cliques},
                               float(data.records.shape[0]))
    rng = np.random.default_rng(2)
    targets, kinds = [], []
    edge_pairs = [(names[p], names[c]) for p, c in EDGES]
    other = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if (a, b) not in edge_pairs]

    def cells(pairs, table_of, keep, count, kind):
        cand = [(p, tuple(ix)) for p in pairs for ix in np.argwhere(keep(table_of(p)))]
        for k in rng.choice(len(cand), size=min(count, len(cand)), replace=False):
            (a, b), (i, j) = cand[k]
            targets.append({a: Value(int(i)), b: Value(int(j))})
            kinds.append(kind)

    pair_marginals = dict(zip(other, base.marginals(other)))  # one compiled program
    cells(edge_pairs, data.marginal, lambda t: t >= 200, 10, "edge cell")
    cells(other, pair_marginals.get, lambda t: t >= 200, 10, "non-edge cell")
    ranges = [{"x3": Range(0, 2)}, {"x2": Range(1, 3), "x1": Value(2)}, {"x3": Range(0, 2), "x4": Range(1, 2)},
              {"x0": Value(1), "x5": Value(0)}, {"x2": Range(0, 1), "x4": Value(0)}]
    for r in ranges:
        targets.append(r)
        kinds.append("range")
    pair_marginals.update(zip(edge_pairs, base.marginals(edge_pairs)))
    cells(edge_pairs + other, pair_marginals.get, lambda t: t < 20, 5, "low count")
    truths = [np.asarray(a, np.float64) for a in base.answers(targets)]
    return data, ms, means, base, targets, kinds, truths, loss


def run(config: str, R: int, B: int, key, methods=None, boot_iters=100, fit_iters=500, fit_method=None,
        draws_per_call=None):
    """U4 for one configuration: ``(Coverage, query kinds)``. L2 fits are exact (``fit_method="qp"``), L1 fits
    by mirror descent with the doubling checks."""
    data, ms, means, base, targets, kinds, truths, loss = u4_design(config)
    if methods is None:
        methods = ("bootstrap", "linear") if loss == "l2" else ("bootstrap",)
    cov = simulate_coverage(base, ms, means, targets, truths, R=R, B=B, key=key, level=0.9, methods=methods, loss=loss,
                            fit_iters=fit_iters, boot_iters=boot_iters, draws_per_call=draws_per_call or max(1, 4000 // B),
                            fit_method=fit_method or ("qp" if loss == "l2" else "mirror_descent"))
    return cov, kinds


def summary(cov, kinds) -> dict:
    gated = np.array([k != "low count" for k in kinds])
    out = {}
    for method in cov.covered:
        rates = np.array([float(np.ravel(r)[0]) for r in cov.rate(method)])
        ratio = np.array([np.mean(s) / max(np.std(e), 1e-12) for s, e in zip(cov.se[method], cov.estimates)])
        out[method] = {"rates": rates.tolist(), "gated_mean": float(rates[gated].mean()),
                       "gated_min": float(rates[gated].min()), "gated_max": float(rates[gated].max()),
                       "se_over_sd": ratio.tolist(), "se_over_sd_gated_mean": float(ratio[gated].mean())}
    out["seconds"] = cov.seconds
    out["iterations"] = cov.iterations
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--R", type=int, default=400)
    ap.add_argument("--B", type=int, default=200)
    ap.add_argument("--configs", default="gauss-l2,laplace-l2,laplace-l1")
    ap.add_argument("--out", default="uncertainty_u4_cpu", help="result name under bench/results/papers/ (or a path)")
    ap.add_argument("--note", default=None, help="a sentence for the .md (e.g. why R, B are reduced)")
    ap.add_argument("--render", action="store_true", help="only re-render the .md from the .json (with --note)")
    args = ap.parse_args(argv)
    args.out = schema.result_path("papers", args.out)
    if args.render:
        with open(args.out + ".json") as f:
            out = json.load(f)
        if args.note is not None:
            out["note"] = args.note
        with open(args.out + ".json", "w") as f:
            json.dump(out, f, indent=1)
        schema.write_page(args.out, page(out))
        return
    res = {}
    t0 = time.perf_counter()
    meta = schema.run_meta("bench.uncertainty_u4", argv)
    for i, config in enumerate(args.configs.split(",")):
        cov, kinds = run(config, args.R, args.B, jax.random.key(i))
        res[config] = summary(cov, kinds)
        print(config, {m: (v["gated_mean"], v["gated_min"], v["gated_max"]) for m, v in res[config].items()
                       if isinstance(v, dict) and "gated_mean" in v}, flush=True)
        write(args, meta, res, kinds, time.perf_counter() - t0)  # after every configuration: a partial run keeps its results


def write(args, meta, res, kinds, seconds):
    """The result through ``bench.schema`` (its configurations are named sections, ``results``)."""
    meta["machine"]["load_average"] = [round(x, 2) for x in os.getloadavg()]
    out = {"meta": meta, "R": args.R, "B": args.B, "kinds": kinds, "results": res, "seconds": seconds,
           "note": args.note or ""}
    schema.write_result("papers", args.out, None, meta, page=page(out), quiet=True,
                        **{k: v for k, v in out.items() if k != "meta"})


def page(out) -> list[str]:
    """The result's Markdown page."""
    kinds = np.array(out["kinds"])
    groups = ("edge cell", "non-edge cell", "range", "low count")
    lines = [f"# U4 coverage simulation (90% intervals, {int(np.sum(kinds != 'low count'))} gated queries + "
             f"{int(np.sum(kinds == 'low count'))} low-count cell(s))", "",
             *schema.header_lines(schema.meta_of(out)),
             f"R = {out['R']} outer draws, B = {out['B']} refits. Total {out['seconds']:.0f} s.", ""]
    if out.get("note"):
        lines += [out["note"], ""]
    lines += ["| config | method | mean (gated) | min | max | " + " | ".join(groups) + " | se/sd (gated mean) | seconds | "
              "fits converged |", "|" + "---|" * 12]
    for config, r in out["results"].items():
        conv = r.get("iterations", {}).get("converged", {})
        for m, v in r.items():
            if isinstance(v, dict) and "gated_mean" in v:
                ok = conv.get("bootstrap" if m == "bootstrap" else "fits")
                rates = np.array(v["rates"])
                per = " | ".join(f"{rates[kinds == g].mean():.3f}" if np.any(kinds == g) else "" for g in groups)
                lines.append(f"| {config} | {m} | {v['gated_mean']:.3f} | {v['gated_min']:.2f} | {v['gated_max']:.2f} | {per} | "
                             f"{v['se_over_sd_gated_mean']:.2f} | {r['seconds'].get(m, 0):.0f} | "
                             f"{'outer ' + str(conv.get('fits')) + (', refits ' + str(ok) if m == 'bootstrap' else '')} |")
    lines += ["", f"Gated: the {int(np.sum(kinds != 'low count'))} queries other than the low-count cells (true count below "
              "20; the design asks for 5 and this truth has fewer). se/sd: the method's mean standard error over "
              "the sd of the R estimates. L2 configurations fit exactly (`fit_method=\"qp\"`); the L1 one by mirror "
              "descent (outer fits and refits with the doubling checks; 'False' means a check did not pass)."]
    return lines

if __name__ == "__main__":
    main()
