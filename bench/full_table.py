"""ICML 2019 Figure 2b's full-table baselines: multiplicative weights and LSMR over the data vector, against d.

McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy", ICML 2019,
Section 6 / Figure 2b: time per iteration as the number of attributes grows, for the graphical-model estimator and
for two estimators that hold the full data vector: multiplicative weights (Hardt, Ligett & McSherry, "A simple and
practical algorithm for differentially private data release", NeurIPS 2012) and least squares by LSMR (Fong &
Saunders, "LSMR: an iterative algorithm for sparse least-squares problems", SIAM J. Sci. Comput. 33(5), 2011).
The full-table methods stop where the table no longer fits; the engine goes on.

The problem is Figure 2b's, as in ``bench.scalability``: d attributes of 10 values, 10,000 records, noisy identity
marginals on every triple (i, i+1, i+2) (Gaussian, sigma 10; :func:`bench.problems.markov_chain_problem`). For each
d, each arm's time per iteration is the median over ``--repeats`` timed runs of ``--iters`` iterations
(``--engine-iters`` for the engine) after one untimed run, and its error the mean L1 distance per record of its triples' marginals from the true ones:

* ``pgmjax``: ``pj.estimate`` (mirror descent, float32): warm ``estimate(iters)`` minus a warm ``estimate(1)``, over
  ``iters - 1``;
* ``mw``: multiplicative weights on the 10^d table (float64, NumPy), the entropic mirror-descent step of the L2 loss
  on the distribution ``p``: ``p <- p * exp(-eta * sum_C (mu_C(p) - y_C / N))`` (each triple's residual broadcast
  over the table), renormalised, with the fixed step ``eta = 1 / (d - 2)``, one over the loss's smoothness;
* ``lsmr``: ``scipy.sparse.linalg.lsmr`` on the measurements' linear operator over the 10^d table (its ``matvec``
  sums the table into the triples' marginals, its ``rmatvec`` spreads them back), one LSMR iteration per iteration.

A table above ``--max-cells`` cells is refused before allocating (reported "infeasible").

Usage::

    python -m bench scalability full_table              # d = 3..8 and 10, 100 (the engine only beyond the cap)
    python -m bench scalability full_table --quick      # d = 3, 4

Writes ``bench/results/scalability/full_table_cpu.{json,md}`` (``--out``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from bench import schema
from bench.problems import markov_chain_problem


def _marginals(table: np.ndarray, d: int) -> list[np.ndarray]:
    """The triples' (i, i+1, i+2) marginals of a 10^d table of shape (10,) * d."""
    axes = tuple(range(d))
    return [table.sum(axis=tuple(a for a in axes if a not in (i, i + 1, i + 2))) for i in range(d - 2)]


def _spread(tables: list[np.ndarray], d: int) -> np.ndarray:
    """The adjoint of :func:`_marginals`: each triple's table broadcast over the other axes, summed."""
    out = np.zeros((10,) * d)
    for i, t in enumerate(tables):
        shape = [1] * d
        shape[i:i + 3] = t.shape
        out += t.reshape(shape)
    return out


def _error(marginals, problem) -> float:
    return float(np.mean([np.abs(m - t).sum() / problem["records"] for m, t in zip(marginals, problem["true"])]))


def _timed(run, iters: int, repeats: int):
    """Median seconds per iteration of ``run(iters)`` over ``repeats`` runs (after one untimed), and its result."""
    run(iters)
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = run(iters)
        times.append(time.perf_counter() - t)
    return float(np.median(times)) / iters, out


def run_mw(problem, d: int, iters: int, repeats: int) -> dict:
    n = problem["records"]
    targets = [y / n for y in problem["noisy"]]
    # Entropic mirror descent on the simplex with a fixed step 1 / L: L = d - 2, the largest entry of M^T M (every
    # cell lies in one cell of each of the d - 2 measured marginals).
    eta = 1.0 / (d - 2)

    def run(k):
        p = np.full((10,) * d, 10.0 ** -d)
        for _ in range(k):
            grad = _spread([m - q for m, q in zip(_marginals(p, d), targets)], d)
            p *= np.exp(-eta * grad)
            p /= p.sum()
        return [n * m for m in _marginals(p, d)]

    per, marginals = _timed(run, iters, repeats)
    return {"sec_per_iter": per, "mean_l1_error_per_record": _error(marginals, problem)}


def run_lsmr(problem, d: int, iters: int, repeats: int) -> dict:
    from scipy.sparse.linalg import LinearOperator, lsmr

    size, rows = 10 ** d, 1000 * (d - 2)
    y = np.concatenate([t.ravel() for t in problem["noisy"]])
    op = LinearOperator(
        (rows, size), dtype=np.float64,
        matvec=lambda x: np.concatenate([m.ravel() for m in _marginals(x.reshape((10,) * d), d)]),
        rmatvec=lambda r: _spread([r[1000 * i:1000 * (i + 1)].reshape(10, 10, 10) for i in range(d - 2)], d).ravel(),
    )

    def run(k):
        x = lsmr(op, y, maxiter=k, atol=0, btol=0)[0]
        return _marginals(x.reshape((10,) * d), d)

    per, marginals = _timed(run, iters, repeats)
    return {"sec_per_iter": per, "mean_l1_error_per_record": _error(marginals, problem)}


def run_pgmjax(problem, d: int, iters: int, repeats: int) -> dict:
    import jax

    import pgmjax as pj

    domain = pj.Domain(problem["domain"])
    ms = [pj.Measurement(c, y, stddev=problem["sigma"]) for c, y in zip(problem["cliques"], problem["noisy"])]

    def run(k):
        model = pj.estimate(domain, ms, iters=k, chunk=max(k, 1))
        jax.block_until_ready(model.theta)
        return model

    one, _ = _timed(run, 1, repeats)  # a one-iteration fit: the per-call cost (checks, the plan) to subtract
    per, model = _timed(run, iters, repeats)
    per = max(per * iters - one, 0.0) / (iters - 1)
    est = model.clique_marginals()
    return {"sec_per_iter": per, "mean_l1_error_per_record": _error([est[c] for c in problem["cliques"]], problem)}


ARMS = {"pgmjax": run_pgmjax, "mw": run_mw, "lsmr": run_lsmr}


def markdown(meta: dict, rows: list[dict], settings: dict) -> list[str]:
    lines = ["# ICML 2019 Figure 2b: the engine against full-table multiplicative weights and LSMR", "",
             *schema.header_lines(meta),
             f"Load average at the start and the end (1, 5, 15 min): {meta['load_average_start']}, "
             f"{meta['load_average_end']}: other work on the machine slows every arm alike only roughly.", "",
             f"d attributes of 10 values, 10,000 records, noisy identity marginals on every triple (sigma 10). "
             f"Per iteration: the median of {settings['repeats']} timed runs of {settings['iters']} iterations "
             f"({settings['engine_iters']} for the engine, whose per-call cost is subtracted). "
             f"Error: mean L1 distance per record of the triples' marginals from the true ones after those iterations "
             f"(the noisy answers' own: about 0.8). Full-table arms refused above {settings['max_cells']:,} cells.", "",
             "| d | table cells | arm | per iteration (ms) | iterations | error after them |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] == "ok":
            lines.append(f"| {r['d']} | 10^{r['d']} | {r['arm']} | {1e3 * r['sec_per_iter']:.3g} | {r['iterations']} | "
                         f"{r['mean_l1_error_per_record']:.3g} |")
        else:
            lines.append(f"| {r['d']} | 10^{r['d']} | {r['arm']} | {r['status']} | - | - |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, nargs="+", default=[3, 4, 5, 6, 7, 8, 10, 100])
    p.add_argument("--arms", default="pgmjax,mw,lsmr")
    p.add_argument("--iters", type=int, default=10, help="iterations per timed run of the full-table arms")
    p.add_argument("--engine-iters", type=int, default=1000,
                   help="iterations per timed run of the engine (its iterations take well under a millisecond: fewer "
                        "drown in the per-call cost subtracted)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-cells", type=int, default=10 ** 7, help="the largest full table the MW and LSMR arms allocate")
    p.add_argument("--quick", action="store_true", help="d = 3, 4; 5 iterations, 1 repeat")
    p.add_argument("--out", default="full_table_cpu", help="result name under bench/results/scalability/ (or a path)")
    args = p.parse_args(argv)
    if args.quick:
        args.d, args.iters, args.engine_iters, args.repeats = [3, 4], 5, 20, 1
    arms = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise SystemExit(f"unknown arms {unknown}; expected some of {sorted(ARMS)}")
    load = os.getloadavg()
    rows = []
    for d in args.d:
        problem = markov_chain_problem(d)
        for arm in arms:
            row = {"d": d, "arm": arm}
            if arm != "pgmjax" and 10 ** d > args.max_cells:
                row["status"] = f"infeasible ({10 ** d:.0e} cells, {8 * 10 ** d / 2 ** 30:.3g} GiB per float64 copy)"
            else:
                iters = args.engine_iters if arm == "pgmjax" else args.iters
                row.update(ARMS[arm](problem, d, iters, args.repeats), iterations=iters, status="ok")
            rows.append(row)
            print(row, flush=True)
    settings = {"iters": args.iters, "engine_iters": args.engine_iters, "repeats": args.repeats, "max_cells": args.max_cells}
    meta = schema.run_meta("bench.full_table", argv, extra=("scipy",),
                           also={"load_average_start": load, "load_average_end": os.getloadavg()})
    schema.write_result("scalability", args.out, rows, meta, page=markdown(meta, rows, settings), quiet=True,
                        settings=settings)
    print("\n".join(markdown(meta, rows, settings)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
