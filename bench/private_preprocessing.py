"""Raw table to private synthetic data: how faithful are the synthetic numbers, per mechanism and budget share?

Runs ``pgmjax run --data raw.csv -m M -e EPS --preprocess-fraction F`` (no schema: the schema is derived
with differential privacy inside the budget) on the generated table of :func:`pgmjax.data.examples.raw_table`
(20,000 rows: float ages, incomes with outliers and blanks, rare cities, dates with blanks), for several
seeds, and compares synthetic with real: income quantiles (ratio synthetic / real), the share of incomes
above 1M, the age range, rare cities in the output, and the spend. One run's HTML utility report is kept
as an example page.

Usage::

    nice python -m bench mechanisms private_preprocessing                 # the committed run
    python -m bench mechanisms private_preprocessing --seeds 1 --out /tmp/pp.json

Outputs ``bench/results/mechanisms/private_preprocessing_cpu.{json,md}`` and
``bench/results/mechanisms/example_report.html``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import pandas as pd

from bench import schema

RESULTS = os.path.join(schema.RESULTS, "mechanisms")


def one_run(raw: pd.DataFrame, mechanism: str, eps: float, fraction: float, seed: int, html: str | None):
    from pgmjax.cli import main
    from pgmjax.data.examples import RARE_CITIES

    data, out, rep = "raw.csv", "synth.csv", "report.json"  # in the current folder
    if not os.path.exists(data):
        raw.to_csv(data, index=False)
    args = ["run", "--data", data, "-m", mechanism, "-e", str(eps), "--preprocess-fraction", str(fraction),
            "--seed", str(seed), "--out", out, "--report", rep, "--workload", "all-2way", "-q", "--overwrite"]
    if html:
        args += ["--html", html]
    t0 = time.perf_counter()
    code = main(args)
    seconds = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"{mechanism} eps={eps} f={fraction} seed={seed}: exit {code}")
    synth = pd.read_csv(out, dtype={"city": str, "sex": str, "joined": str})
    report = json.load(open(rep))
    real_inc = pd.to_numeric(raw["income"], errors="coerce").dropna()
    syn_inc = synth["income"].dropna()
    real_age = pd.to_numeric(raw["age"])
    return {
        "mechanism": mechanism, "epsilon": eps, "fraction": fraction, "seed": seed, "seconds": seconds,
        "income_ratio": {str(q): float(np.percentile(syn_inc, q) / np.percentile(real_inc, q)) for q in (10, 50, 90)},
        "income_above_1M": {"real": float((real_inc > 1e6).mean()), "synthetic": float((syn_inc > 1e6).mean())},
        "age_2_98": {"real": [float(real_age.quantile(0.02)), float(real_age.quantile(0.98))],
                     "synthetic": [float(synth["age"].quantile(0.02)), float(synth["age"].quantile(0.98))]},
        "rare_cities_in_output": sorted(set(RARE_CITIES) & set(synth["city"].dropna())),
        "preprocessing_spent": report["preprocessing"]["spent"], "currency": report["preprocessing"]["currency"],
        "tvd_2way": (report.get("evaluation") or {}).get("tvd_2way_synthetic"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default="private_preprocessing_cpu", help="result name under bench/results/mechanisms/ "
                    "(or a path)")
    ap.add_argument("--html", default=os.path.join(RESULTS, "example_report.html"))
    a = ap.parse_args(argv)

    from pgmjax.data.examples import raw_table

    raw = raw_table()
    rows = []
    a.out, a.html = os.path.abspath(schema.result_path("mechanisms", a.out)), os.path.abspath(a.html)
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # relative paths: the report page names raw.csv, not a temporary folder
        for mechanism in ("mst", "privbayes"):
            for fraction in (0.1, 0.2):
                for seed in range(a.seeds):
                    html = a.html if (mechanism, fraction, seed) == ("mst", 0.1, 0) else None
                    rows.append(one_run(raw, mechanism, 1.0, fraction, seed, html))
                    r = rows[-1]
                    print(f"{mechanism:9s} f={fraction} seed={seed}: income p10/p50/p90 ratio "
                          + " ".join(f"{v:.3f}" for v in r["income_ratio"].values())
                          + f"; >1M {r['income_above_1M']['synthetic']:.4f}; {r['seconds']:.1f} s", flush=True)
        os.chdir(here)
    meta = schema.run_meta("bench.private_preprocessing", argv, extra=("pandas",))
    setting = {"table": "pgmjax.data.examples.raw_table(20000, seed=0)", "epsilon": 1.0, "delta_mst": 1e-9}
    schema.write_result("mechanisms", a.out, rows, meta, page=page(meta, setting, rows), **setting)
    return 0


def page(meta, setting, rows) -> list[str]:
    """The result's Markdown page."""
    lines = [
        "# Raw table to private synthetic data (`bench.private_preprocessing`)", "", *schema.header_lines(meta),
        f"Table: `{setting['table']}` (20,000 rows). `pgmjax run` without a schema at eps = 1 "
        "(MST: delta = 1e-9); the preprocessing fraction F of the budget derives the schema privately.", "",
        "Income quantiles: synthetic / real, median over seeds [min, max]. Age: 2% and 98% quantiles. "
        "Rare cities: values held by 1-4 records found in any output.", "",
        "| mechanism | F | seeds | income p10 | income p50 | income p90 | >1M synthetic (real) | age 2%-98% synthetic (real) | rare cities | 2-way TVD | s/run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups = {}
    for r in rows:
        groups.setdefault((r["mechanism"], r["fraction"]), []).append(r)
    for (m, f), rs in groups.items():
        def cell(q):
            v = [r["income_ratio"][q] for r in rs]
            return f"{np.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]"
        above = np.median([r["income_above_1M"]["synthetic"] for r in rs])
        ages = np.median([r["age_2_98"]["synthetic"] for r in rs], axis=0)
        real = rs[0]["age_2_98"]["real"]
        rare = sorted({c for r in rs for c in r["rare_cities_in_output"]})
        tvd = [r["tvd_2way"] for r in rs if r["tvd_2way"] is not None]
        lines.append(f"| {m} | {f} | {len(rs)} | {cell('10')} | {cell('50')} | {cell('90')} | {above:.4f} "
                     f"({rs[0]['income_above_1M']['real']:.4f}) | {ages[0]:g}-{ages[1]:g} ({real[0]:g}-{real[1]:g}) | "
                     f"{', '.join(rare) or 'none'} | {np.median(tvd):.4f} | {np.median([r['seconds'] for r in rs]):.1f} |")
    lines += ["", "The machine is shared with other work: times are indicative. `example_report.html` is the "
              "utility report of the MST run with F = 0.1, seed 0 (computed from the raw data: not private)."]
    return lines


if __name__ == "__main__":
    sys.exit(main())
