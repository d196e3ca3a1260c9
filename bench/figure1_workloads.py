"""Figure 1's workloads: the size of each benchmark workload against the paper's, and over random draws.

McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy", ICML 2019,
Section 5.1: each dataset's workload is 15 three-way cliques, Prefix queries on its numeric attributes and the
identity on the others. Only Adult's cliques are published; for Titanic, Loans and Stroke the benchmark draws 15
random three-way cliques (:func:`pgmjax.datasets.benchmark_cliques`, seed 0). The paper states the number of
queries of its workloads (Titanic 4,851, Loans 362,201, Stroke 17,716); this script counts ours (a query per row
of each clique's Prefix/identity product, the clique's cell count) and, over ``--draws`` other seeds of the same
draw, how the count spreads and how many draws come within ``--within`` of the paper's. The draws here skip the
benchmark's model-size cap (``max_model_cells=None``): the cap only refuses draws whose junction tree is large.

Usage::

    python -m bench papers figure1_workloads                 # 20,000 draws per table
    python -m bench papers figure1_workloads --quick         # 20 draws, Titanic only
    python -m bench papers figure1_workloads --factors A.json B.json --out figure1_titanic_draws_cpu
        # the improvement factors of Figure 1 runs on several draws (``bench.figure1 --workload-seed``), side by side

Writes ``bench/results/papers/figure1_workloads_cpu.{json,md}`` (``--out``).
"""

from __future__ import annotations

import argparse
import itertools
import math

import numpy as np

from bench import schema

#: ICML 2019, Section 5.1: the number of queries of each dataset's workload, as the paper states it.
PAPER_QUERIES = {"titanic": 4851, "loans": 362201, "stroke": 17716}


def queries(domain, cliques) -> int:
    """The benchmark workload's number of queries: each clique's Prefix/identity product has one row per cell."""
    return sum(math.prod(domain[a] for a in c) for c in cliques)


def smallest_possible(domain, count: int = 15, size: int = 3) -> int:
    """The fewest queries any workload of ``count`` distinct ``size``-way cliques can have on ``domain``."""
    cells = sorted(math.prod(c) for c in itertools.combinations(domain.shape, size))
    return sum(cells[:count])


def study(name: str, data_dir, draws: int, within: float) -> dict:
    """The benchmark workload's size on ``name`` and the spread of the size over ``draws`` random draws."""
    import pgmjax as pj

    domain = pj.datasets.load(name, data_dir).domain
    ours = queries(domain, pj.datasets.benchmark_cliques(name, domain))
    sizes = np.array([queries(domain, pj.datasets.benchmark_cliques(name, domain, max_model_cells=None, seed=s))
                      for s in range(draws)])
    paper = PAPER_QUERIES.get(name)
    row = {"dataset": name, "benchmark_queries": ours, "paper_queries": paper, "draws": draws,
           "smallest_possible": smallest_possible(domain),
           "median": float(np.median(sizes)), "min": int(sizes.min()), "max": int(sizes.max()),
           "smallest_seeds": [int(s) for s in np.argsort(sizes, kind="stable")[:3]]}
    if paper is not None:
        near = np.abs(sizes / paper - 1) <= within
        row.update(within=within, draws_near_paper=int(near.sum()), seeds_near_paper=[int(s) for s in np.flatnonzero(near)[:5]],
                   draws_at_most_paper=int((sizes <= paper).sum()))
    return row


def markdown(doc: dict) -> list[str]:
    lines = ["# Figure 1 (ICML 2019): the benchmark workloads' sizes against the paper's", "",
             *schema.header_lines(doc["meta"]),
             f"Queries of a workload of 15 three-way cliques (Prefix on numeric attributes, identity otherwise); "
             f"{doc['draws']} random draws per table (seeds 0 to {doc['draws'] - 1}, no model-size cap). "
             f"'Near' = within {doc['within']:.0%} of the paper's count. 'Smallest possible' = the 15 three-way cliques "
             "with the fewest cells.", "",
             "| dataset | our benchmark workload | paper's | smallest possible | draws: median [min-max] | draws near the paper's | draws at most the paper's |",
             "|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        paper = f"{r['paper_queries']:,}" if r["paper_queries"] else "the same cliques (published)"
        near = f"{r['draws_near_paper']} of {r['draws']}" if r["paper_queries"] else "-"
        below = f"{r['draws_at_most_paper']} of {r['draws']}" if r["paper_queries"] else "-"
        spread = f"{r['median']:,.0f} [{r['min']:,}-{r['max']:,}]" if r["paper_queries"] else "- (the published cliques)"
        lines.append(f"| {r['dataset']} | {r['benchmark_queries']:,} | {paper} | {r['smallest_possible']:,} | {spread} | "
                     f"{near} | {below} |")
    return lines


def factors(paths: list[str]) -> list[dict]:
    """Per draw (one ``bench.figure1`` result each) and mechanism: the workload's size, the arms' median errors and
    the improvement factor."""
    import json
    import statistics

    rows = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        runs = [r for r in doc["rows"] if r.get("status") == "ok"]
        for ds, info in doc["datasets"].items():
            for mech in dict.fromkeys(r["mechanism"] for r in runs if r["dataset"] == ds):
                mine = [r for r in runs if r["dataset"] == ds and r["mechanism"] == mech]
                original = [r["arms"]["original"]["paper"] for r in mine if r["arms"]["original"]["status"] == "ok"]
                pgm = statistics.median(r["arms"]["pgm"]["paper"] for r in mine)
                orig = statistics.median(original) if original else None
                size = info.get("queries")
                if size is None:  # a result written before it recorded the size: count it from its cliques
                    import pgmjax as pj

                    size = queries(pj.datasets.load(ds).domain, [tuple(c) for c in info["cliques"]])
                rows.append({"dataset": ds, "workload_seed": info.get("workload_seed", 0), "queries": size,
                             "mechanism": mech, "runs": len(mine), "original": orig, "pgm": pgm,
                             "factor": orig / pgm if orig is not None else None, "source": path})
    return rows


def factors_markdown(meta: dict, rows: list[dict]) -> list[str]:
    lines = ["# Figure 1 (ICML 2019) on workloads of the paper's size: the improvement factors over draws", "",
             *schema.header_lines(meta),
             "Each draw is a workload of 15 random three-way cliques (`bench.figure1 --workload-seed`), chosen among "
             "the draws whose size is near the paper's (`figure1_workloads_cpu.md`). Errors on the paper's scale, "
             "medians over the runs; factor = median original / median +PGM.", "",
             "| dataset | workload seed | queries | mechanism | runs | original | +PGM | factor |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        orig = f"{r['original']:.4g}" if r["original"] is not None else "infeasible"
        factor = f"{r['factor']:.3g}" if r["factor"] is not None else "-"
        lines.append(f"| {r['dataset']} | {r['workload_seed']} | {r['queries']:,} | {r['mechanism']} | {r['runs']} | {orig} | "
                     f"{r['pgm']:.4g} | {factor} |")
    lines += ["", "Spread of the factor over the draws:", ""]
    for mech in dict.fromkeys(r["mechanism"] for r in rows):
        fs = [r["factor"] for r in rows if r["mechanism"] == mech and r["factor"] is not None]
        if fs:
            lines.append(f"* {mech}: {min(fs):.3g} to {max(fs):.3g} over {len(fs)} draws")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=None, help="the shared data folder (default: pgmjax.datasets.data_dir())")
    p.add_argument("--datasets", default="titanic,adult,loans,stroke")
    p.add_argument("--draws", type=int, default=20_000)
    p.add_argument("--within", type=float, default=0.25, help="relative distance from the paper's count that counts as near")
    p.add_argument("--quick", action="store_true", help="20 draws, Titanic only")
    p.add_argument("--factors", nargs="+", default=None, metavar="JSON",
                   help="only tabulate the improvement factors of these bench.figure1 results (one draw each)")
    p.add_argument("--out", default="figure1_workloads_cpu", help="result name under bench/results/papers/ (or a path)")
    args = p.parse_args(argv)
    if args.factors:
        rows = factors(args.factors)
        meta = schema.run_meta("bench.figure1_workloads", argv, backend=False)
        schema.write_result("papers", args.out, rows, meta, page=factors_markdown(meta, rows))
        return 0
    if args.quick:
        args.draws, args.datasets = 20, "titanic"
    rows = [study(name, args.data, args.draws, args.within) for name in args.datasets.split(",") if name]
    meta = schema.run_meta("bench.figure1_workloads", argv, backend=False)
    doc = {"meta": meta, "draws": args.draws, "within": args.within, "rows": rows}
    schema.write_result("papers", args.out, rows, meta, page=markdown(doc), draws=args.draws, within=args.within)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
