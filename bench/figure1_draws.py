"""ICML 2019 Figure 1 over workload draws: each draw's improvement factors in one table, and their spread.

The paper publishes Adult's workload only; for Titanic, Loans and Stroke, Figure 1's fifteen three-way cliques
are a random draw (``python -m bench papers figure1 --workload-seed S``), and the factor depends on the draw.
This renderer reads finished ``bench.figure1`` results, one or more per draw, and writes one table: per
(dataset, workload seed, mechanism, settings) each arm's median over its runs and the factor (median original
error over median +PGM error, McKenna, Sheldon & Miklau, ICML 2019, Section 6), then the factor's range over
the draws. A mechanism run with settings other than the script's defaults (``--set``) is its own line, named by
the settings that differ, so HDMM's equal and optimised strategy weights stay apart.

Usage::

    python -m bench papers figure1_draws A.json B.json [...] --out bench/results/papers/figure1_stroke_draws_cpu
"""

from __future__ import annotations

import argparse
import json

from bench import schema
from bench.figure1 import PAPER_QUERIES, SETTINGS


def variant(mechanism: str, settings: dict) -> str:
    """The settings of a run that differ from ``bench.figure1``'s defaults, as ``key=value`` (empty: the defaults).

    Example:
        >>> from bench.figure1 import SETTINGS
        >>> variant("hdmm", {**SETTINGS["hdmm"], "weights": "equal"})
        'weights=equal'
    """
    default = SETTINGS[mechanism]
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items()) if default.get(k, None) != v)


def collect(docs: list[tuple[str, dict]]) -> list[dict]:
    """One row per (dataset, workload seed, mechanism, variant) of the finished ``bench.figure1`` results.

    Args:
        docs: ``(file, result)`` pairs, each result as ``bench.figure1`` writes it (``summary``, ``datasets``,
            ``settings``).

    Returns:
        Rows with ``dataset``, ``workload_seed``, ``queries``, ``mechanism``, ``variant``, ``runs``,
        ``original`` (a median, or ``"infeasible"``), ``pgm``, ``factor`` and ``file``, sorted by dataset,
        mechanism, variant and workload size.

    Raises:
        SystemExit: where two files hold the same (dataset, workload seed, mechanism, variant).
    """
    rows, seen = [], {}
    for path, doc in docs:
        for s in doc["summary"]:
            ds = doc["datasets"][s["dataset"]]
            var = variant(s["mechanism"], doc["settings"]["mechanisms"][s["mechanism"]])
            key = (s["dataset"], ds.get("workload_seed", 0), s["mechanism"], var)
            if key in seen:
                raise SystemExit(f"figure1_draws: {key} is in both {seen[key]} and {path}")
            seen[key] = path
            orig, pgm = s.get("original") or {}, s.get("pgm") or {}
            rows.append({
                "dataset": key[0], "workload_seed": key[1], "queries": ds["queries"], "mechanism": key[2],
                "variant": var, "runs": s["runs"] - s["failed"],
                "original": "infeasible" if orig.get("status") == "infeasible" else orig.get("median"),
                "pgm": pgm.get("median"), "factor": s.get("factor"), "file": path,
            })
    return sorted(rows, key=lambda r: (r["dataset"], r["mechanism"], r["variant"], r["queries"], r["workload_seed"]))


def spreads(rows: list[dict]) -> list[dict]:
    """The factor's range over the draws, per (dataset, mechanism, variant)."""
    groups: dict = {}
    for r in rows:
        if r["factor"] is not None:
            groups.setdefault((r["dataset"], r["mechanism"], r["variant"]), []).append(r["factor"])
    return [{"dataset": d, "mechanism": m, "variant": v, "draws": len(f), "min": min(f), "max": max(f)}
            for (d, m, v), f in groups.items()]


def page(rows: list[dict], meta: dict) -> list[str]:
    """The Markdown page: header, the table of draws and the spreads."""
    def num(x):
        return x if isinstance(x, str) else "-" if x is None else f"{x:.4g}"

    lines = ["# Figure 1 (ICML 2019) over workload draws: the improvement factor per draw", "",
             *schema.header_lines(meta),
             "Each draw is a workload of 15 random three-way cliques (`bench.figure1 --workload-seed`; seed 0 is the "
             "benchmark's own). Errors on the paper's scale, medians over the runs; factor = median original / "
             "median +PGM. 'settings' names what differs from the script's defaults.", "",
             "| dataset | workload seed | queries (paper's) | mechanism | settings | runs | original | +PGM | factor "
             "| file |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        paper = PAPER_QUERIES.get(r["dataset"])
        lines.append(f"| {r['dataset']} | {r['workload_seed']} | {r['queries']:,}"
                     + (f" ({paper:,})" if paper else "") + f" | {r['mechanism']} | {r['variant'] or 'defaults'} | "
                     f"{r['runs']} | {num(r['original'])} | {num(r['pgm'])} | {num(r['factor'])} | {r['file']} |")
    lines += ["", "Spread of the factor over the draws:", ""]
    lines += [f"* {s['dataset']}, {s['mechanism']} ({s['variant'] or 'defaults'}): {s['min']:.3g} to {s['max']:.3g} "
              f"over {s['draws']} draw{'s' if s['draws'] > 1 else ''}" for s in spreads(rows)]
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", nargs="+", metavar="JSON", help="finished bench.figure1 results (one or more per draw)")
    p.add_argument("--out", required=True, help="output name under bench/results/papers/ (or a path)")
    args = p.parse_args(argv)
    docs = []
    for path in args.results:
        with open(path) as f:
            docs.append((path, json.load(f)))
    rows = collect(docs)
    meta = schema.run_meta("bench.figure1_draws", argv, backend=False)
    lines = page(rows, meta)
    schema.write_result("papers", args.out, rows, meta, page=lines, spreads=spreads(rows), quiet=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
