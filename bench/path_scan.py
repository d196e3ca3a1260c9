"""Deep trees: the dense program's level loop against the path scan (``program="paths"``, :mod:`pgmjax.graph.path_scan`).

For each problem (the engine benchmark's chains of triples, ``bench/problems.py``, and chains of binary pairs
``pairsD``), in this process, each program's first ``estimate(10)`` (with its compile), its milliseconds per
iteration (``estimate(510)`` less ``estimate(10)``, both run once before, over 500 iterations), the loss after 510 iterations and the
largest difference of its clique marginals from the level loop's (over the total).

Run: ``python -m bench engine path_scan chain100 chain1000 pairs1000`` (``--out`` names the result; default
``path_scan_<platform>``).
"""

from __future__ import annotations

import argparse
import time

from bench import schema

SUITE = "engine"


def problem(name: str):
    import numpy as np

    import pgmjax as pj

    if name.startswith("pairs"):  # a chain of binary attributes, noisy pair counts
        d = int(name[5:])
        rng = np.random.default_rng(d)
        dom = pj.Domain({f"a{i:04d}": 2 for i in range(d)})
        ms = []
        for i in range(d - 1):
            p = rng.dirichlet(np.ones(4))
            ms.append(pj.Measurement((f"a{i:04d}", f"a{i + 1:04d}"), 10_000 * p + rng.normal(0, 10.0, 4), stddev=10.0))
        return dom, ms
    from bench import problems as ep

    p = ep.make(name)
    return pj.Domain(p["domain"]), [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]


def measure(names) -> list[dict]:
    import jax
    import numpy as np

    import pgmjax as pj
    from pgmjax.graph import oracle, path_scan

    rows = []
    for name in names:
        dom, ms = problem(name)
        plan = oracle.make_plan(dom, [m.clique for m in ms])
        row = {"problem": name, "platform": jax.default_backend(), "cells": plan.cells,
               "levels": sum(r.num_levels for r in plan.runs), "scanned runs": len(path_scan.scanned_runs(plan))}
        models = {}
        for program in ("dense", "paths"):
            t = time.perf_counter()
            pj.estimate(dom, ms, iters=10, program=program)
            row[f"{program} first s"] = time.perf_counter() - t
            pj.estimate(dom, ms, iters=510, program=program)  # its chunks' programs compiled too
            t = time.perf_counter()
            pj.estimate(dom, ms, iters=10, program=program)
            t10 = time.perf_counter() - t
            t = time.perf_counter()
            models[program], report = pj.estimate(dom, ms, iters=510, program=program, report=True)
            row[f"{program} ms/it"] = (time.perf_counter() - t - t10) / 500 * 1e3
            row[f"{program} loss"] = float(report.loss)
        a, b = models["dense"].clique_marginals(), models["paths"].clique_marginals()
        total = float(models["dense"].total)
        row["max marginal diff / total"] = max(float(np.max(np.abs(np.asarray(a[c]) - np.asarray(b[c])))) for c in a) / total
        rows.append(row)
        print(row, flush=True)
    return rows


def main(argv=None) -> None:
    import jax

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("problems", nargs="+")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    rows = measure(args.problems)
    meta = schema.run_meta("bench.path_scan", argv)
    schema.write_result(SUITE, args.out or f"path_scan_{jax.default_backend()}", rows, meta,
                        title="Deep trees: the level loop against the path scan")


if __name__ == "__main__":
    main()
