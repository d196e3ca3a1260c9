"""Synthetic records from approximate models (records updated gradually to the pseudo-marginals), measured.

    python -m bench approximate_records [--quick] [--iters 300] [--problems allpairs8,grid4,grid10,allpairs30]

The problems of ``bench/approximate_oracle.py`` (generated tables, N = 10,000, every measured marginal with Gaussian
noise sigma 10), and ``shared6``: a 6x6 grid of pairwise measurements (4 values) on a table where every attribute
copies one hidden value shifted by its row with probability 0.6 (dependences no tree carries). For each, ``estimate(..., oracle="approximate")`` and ``model.synthetic_data(N, key)``
(:mod:`pgmjax.model.record_updating`), then:

* ``to_pseudo``: mean and max total variation distance (TVD) between the records' marginals and the model's
  pseudo-marginals on the measured cliques: how well the records keep what the model holds;
* ``records_err`` against ``pseudo_err``: mean TVD to the data on the measured cliques, of the records and of the
  pseudo-marginals themselves;
* ``pairs_err``: mean TVD to the data over every pair of attributes (measured or not), and the same for records
  drawn with each attribute independent (``independent_err``): what the records keep beyond the measured cliques;
* where the junction tree fits (allpairs8, grid4), the exact fit on the same measurements: its records (exact
  sampling) on the same measures, and ``to_exact``: the updated records' mean TVD to the exact model's marginals
  on every pair;
* ``records_s``: seconds to make the records (host NumPy; first call included).

Results: ``bench/results/approximate/approximate_records.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from bench import schema
from bench.approximate_oracle import problem as oracle_problem

SUITE, NAME = "approximate", "approximate_records"


def _tvd(records, index, clique, shape, table) -> float:
    flat = np.ravel_multi_index(tuple(records[:, index[a]] for a in clique), shape)
    counts = np.bincount(flat, minlength=int(np.prod(shape))) / len(records)
    p = np.asarray(table, np.float64).reshape(-1)
    return 0.5 * float(np.abs(counts - p / p.sum()).sum())


def problem(name: str, seed: int = 0) -> dict:
    """A problem of ``bench/approximate_oracle.py``, or ``shared6`` (module docstring)."""
    if name != "shared6":
        return oracle_problem(name, seed)
    rng = np.random.default_rng(seed)
    side, k, n, sigma = 6, 4, 10_000, 10.0
    names = [f"s{i}_{j}" for i in range(side) for j in range(side)]
    hidden = rng.integers(0, k, n)
    x = np.stack([np.where(rng.random(n) < 0.6, (hidden + i) % k, rng.integers(0, k, n))
                  for i in range(side) for _ in range(side)], 1)
    cliques = [(f"s{i}_{j}", f"s{i}_{j + 1}") for i in range(side) for j in range(side - 1)]
    cliques += [(f"s{i}_{j}", f"s{i + 1}_{j}") for i in range(side - 1) for j in range(side)]
    index = {a: i for i, a in enumerate(names)}
    truth = [np.bincount(np.ravel_multi_index((x[:, index[a]], x[:, index[b]]), (k, k)), minlength=k * k)
             .reshape(k, k).astype(float) for a, b in cliques]
    ys = [t + rng.normal(0, sigma, t.shape) for t in truth]
    return {"name": name, "domain": {a: k for a in names}, "cliques": cliques, "truth": truth, "y": ys, "sigma": sigma,
            "n": n, "exact": False, "records": x}


def measure(p, records, pseudo=None, exact=None) -> dict:
    names = list(p["domain"])
    index = {a: i for i, a in enumerate(names)}
    k = next(iter(p["domain"].values()))
    x = p["records"]
    measured = [_tvd(records, index, c, (k,) * len(c), t) for c, t in zip(p["cliques"], p["truth"])]
    pairs = list(itertools.combinations(names, 2))
    if len(pairs) > 600:  # a fixed sample of the pairs on the large tables
        pairs = [pairs[i] for i in np.random.default_rng(0).choice(len(pairs), 600, replace=False)]
    truth = {c: np.bincount(np.ravel_multi_index((x[:, index[c[0]]], x[:, index[c[1]]]), (k, k)), minlength=k * k)
             for c in pairs}
    out = {"records_err": float(np.mean(measured)),
           "pairs_err": float(np.mean([_tvd(records, index, c, (k, k), truth[c]) for c in pairs]))}
    if pseudo is not None:
        gaps = [_tvd(records, index, c, (k,) * len(c), m) for c, m in zip(p["cliques"], pseudo)]
        out |= {"to_pseudo": float(np.mean(gaps)), "to_pseudo_max": float(np.max(gaps))}
    if exact is not None:
        out["to_exact"] = float(np.mean([_tvd(records, index, c, (k, k), exact.marginal(c)) for c in pairs]))
    return out


def run(p, iters: int, seed: int = 0) -> list[dict]:
    import jax
    import pgmjax as pj

    dom = pj.Domain(p["domain"])
    ms = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["y"])]
    model = pj.estimate(dom, ms, iters=iters, oracle="approximate")
    pseudo = model.marginals(p["cliques"])
    t0 = time.perf_counter()
    made = np.asarray(model.synthetic_data(p["n"], jax.random.key(seed)).records)
    seconds = time.perf_counter() - t0
    start = np.asarray(model.synthetic_data(p["n"], jax.random.key(seed), rounds=0).records)  # the tree alone
    pseudo_err = float(np.mean([0.5 * np.abs(m / m.sum() - t / t.sum()).sum() for m, t in zip(pseudo, p["truth"])]))
    exact = pj.estimate(dom, ms, iters=3 * iters) if p["exact"] else None
    rows = [{"problem": p["name"], "records": "updated (approximate model)", "records_s": seconds,
             "pseudo_err": pseudo_err, **measure(p, made, pseudo, exact)},
            {"problem": p["name"], "records": "tree start only (rounds=0)", **measure(p, start, pseudo, exact)}]
    rng = np.random.default_rng(seed)
    independent = np.stack([rng.permutation(col) for col in p["records"].T], 1)
    rows[0]["independent_err"] = measure(p, independent)["pairs_err"]
    if exact is not None:
        t0 = time.perf_counter()
        drawn = np.asarray(exact.synthetic_data(p["n"], jax.random.key(seed)).records)
        rows.append({"problem": p["name"], "records": "sampled (exact model)", "records_s": time.perf_counter() - t0,
                     **measure(p, drawn, exact=exact)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench approximate_records", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the small problems only")
    ap.add_argument("--iters", type=int, default=300, help="iterations of each fit (the exact one: three times more)")
    ap.add_argument("--problems", default="allpairs8,grid4,grid10,allpairs30,shared6")
    ap.add_argument("--out", default=NAME)
    args = ap.parse_args(argv)
    names = ["allpairs8", "grid4"] if args.quick else [n for n in args.problems.split(",") if n]
    rows = []
    for name in names:
        for r in run(problem(name), args.iters):
            print(r, flush=True)
            rows.append(r)
    meta = schema.run_meta(f"bench.{NAME}", argv)
    columns = ["problem", "records", "to_pseudo", "to_pseudo_max", "records_err", "pseudo_err", "pairs_err",
               "independent_err", "to_exact", "records_s"]
    page = ["# Synthetic records from approximate models", "", *schema.header_lines(meta),
            "Every number is a total variation distance (0: equal, 1: disjoint), a mean over cliques unless named "
            "max. to_pseudo: the records' marginals against the approximate model's pseudo-marginals on the "
            "measured cliques; records_err / pseudo_err: the records' / the pseudo-marginals' distance to the data "
            "on the measured cliques; pairs_err: the records' distance to the data over every pair of attributes "
            "(600 sampled pairs on allpairs30), independent_err the same for each attribute shuffled on its own; "
            "to_exact: the updated records against the exact fit's marginals over every pair. N = 10,000 records "
            "each.", "", *schema.table(rows, columns), ""]
    schema.write_result(SUITE, args.out, rows, meta, page=page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
