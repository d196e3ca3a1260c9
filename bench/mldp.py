"""MLDP and MLDP+PGM against the Laplace method, MWEM and HDMM: the paper's Figures 3, 4 and 5 in spirit.

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model Publishing"
(IEEE BigData 2017, arXiv 1710.05095), Section V. The paper's datasets (NetTrace, Search Logs, Social Network)
are not available; the same kinds of query sets are built on a toy histogram, a simulated one and Adult.

Query sets (every run: the published queries, ``m`` training queries chosen among them by
:func:`pgmjax.mechanisms.query_learning.select_training`, one Laplace release of the training answers with
scale ``S_Fx / eps``, then three estimators on the same noisy answers):

* (a) the paper's Table I/II example: a 4-bin grade histogram (12, 24, 6, 7), the 10 range queries
  published; ``m = 1..10`` and the paper's choice f7..f10 (the single bins);
* (b) a simulated 10-bin histogram (10,000 records, bin probabilities from a Dirichlet(1) draw with
  seed 2017), the 1023 non-empty subset sums published;
* (c) Adult ``age`` (85 values): 1000 of its 3655 range queries published (drawn with
  ``jax.random.key(1)``), the other 2655 ranges are fresh queries;
* (d) Adult ``age`` x ``education-num`` (85 x 16 cells): 1000 random rectangles published, 1000
  other random rectangles fresh (``jax.random.key(2)``).

Experiments:

* **Figure 3** (MAE against the number of training queries ``m``): every query set, a grid of ``m``.
  MLDP arms: ``linear`` (regression on indicator features = least squares, the paper's best model for
  range queries), ``pgm`` (MLDP+PGM: the same answers as linear measurements, one ``pgmjax.estimate``,
  float64, 1000 mirror-descent iterations), ``gaussian`` (the Gaussian-basis model, every training
  query a centre, width = median distance between training queries, ridge 1e-2); ``laplace`` (every
  published query answered with noise calibrated to the whole published set; it cannot answer fresh
  queries) as a level.
* **Figure 5's other methods on the same published queries and budget** (b, c, d): PMW as MWEM
  (:func:`pgmjax.mechanisms.mwem`: the published queries as its workload, ``selection="query"``, 20
  rounds, Laplace noise, half of each round's budget to the exponential mechanism, replace-one
  neighbours with the record count public as in the MWEM paper; answers from its multiplicative-weights
  table, ``mwem``, 50 passes per round, and from its +PGM model, ``mwem_pgm``, 100 iterations per round)
  and the matrix mechanism as HDMM (:func:`pgmjax.mechanisms.hdmm`: the published queries as its
  workload, Laplace noise, add/remove-one; the strategy optimised once per workload by OPT_kron with the
  p-Identity template, p = n // 16, one L-BFGS restart of 25 iterations, one block sweep for the
  rectangles' union; answers from its local least squares, ``hdmm``, and from its +PGM model,
  ``hdmm_pgm``, 1000 iterations). Each spends the whole ``eps`` through its front-end's Accountant; both
  answer the fresh queries from their outputs. Rectangles enter the workload as one-row Kronecker
  products (:func:`as_workload`).
* **Figure 4** (MAE against the number of fresh queries; c, d): at a fixed ``m`` (c: 85, the number of
  cells; d: 400, the best of Figure 3's grid), the MAE over the first ``k`` fresh queries in a fixed
  random order (``jax.random.key(3)``), for every arm that answers fresh queries (all but ``laplace``).
* **Figure 5** (MAE against the number of published queries; c): the first ``n`` of (c)'s published
  permutation published (``n`` = 10 .. 1000), the Laplace method (noise grows with the published set's
  sensitivity), MLDP with ``m = min(n, 85)``, MWEM and HDMM with the ``n`` published queries as their
  workload (one HDMM strategy per ``n``); at the first budget only; ``n = 1000`` is the whole published
  set, whose Figure 3 and baseline runs are reused.

MAE over the published queries and, where there are fresh ones, over those. Medians over seeds (the
seed drives the selector's ties and the noise; MWEM and HDMM use their own keys ``2000 + seed``).

Seeds: 5 for MLDP and the Laplace method (3 on (d)), 3 for MWEM, HDMM and Figure 5 (``--seeds``,
``--baseline-seeds``). The quick mode: eps 1, 2 and 1 seeds, fewer ``m``, MWEM 5 rounds, Figure 5 at
``n`` = 30 and 1000, no (d).

Usage:
    python -m bench papers mldp                 # eps 1 and 0.1 -> bench/results/papers/mldp_cpu.{json,md,png}
    python -m bench papers mldp --quick         # a smoke run (tests/integration/test_reproduction_mldp.py)
    python -m bench.mldp --only d_age_edu --keep   # one experiment re-run, the others kept from the file
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bench import benchutil, schema

import pgmjax as pj  # noqa: E402
from pgmjax.mechanisms import hdmm, mwem  # noqa: E402
from pgmjax.mechanisms import matrix_mechanism as mm  # noqa: E402
from pgmjax.mechanisms.query_learning import QuerySet, fit_regression, laplace_baseline, mldp, training_sensitivity  # noqa: E402

GAUSSIAN = {"model": "gaussian", "ridge": 1e-2}
ARMS = ("linear", "pgm", "gaussian")
#: Figure 5's other methods, each answering the published and the fresh queries from its own output.
BASELINES = ("mwem", "mwem_pgm", "hdmm", "hdmm_pgm")
NAMES = {"linear": "MLDP linear", "pgm": "MLDP+PGM", "gaussian": "MLDP Gaussian basis", "mwem": "MWEM (MW table)",
         "mwem_pgm": "MWEM+PGM", "hdmm": "HDMM (LLS)", "hdmm_pgm": "HDMM+PGM", "laplace": "Laplace"}
COLOURS = {"linear": "tab:blue", "pgm": "tab:red", "gaussian": "tab:green", "mwem": "tab:orange",
           "mwem_pgm": "tab:brown", "hdmm": "tab:purple", "hdmm_pgm": "tab:pink", "laplace": "k"}
# MWEM as the MWEM paper runs it on counting queries: one query per round, N public (replace-one neighbours).
# 20 rounds: in a one-seed trial on (c) the MW table's MAE was 99.8 after 10 rounds and 67.9 after 30, at 6x the time.
MWEM = {"rounds": 20, "selection": "query", "bounded": True, "noise": "laplace", "alpha": 0.5, "engine_iters": 100,
        "mw_iters": 50}
# HDMM's strategy depends on the workload only, so it is optimised once per published set. One L-BFGS restart
# of 25 iterations: on (c) its error factor is 0.05% above 250 iterations' (17,975 against 17,966; 2 restarts give
# the same), at a fifth of the time.
HDMM = {"template": "OPT_kron, p-Identity (p = n // 16)", "restarts": 1, "maxiter": 25, "sweeps": 1,
        "engine_iters": 1000, "noise": "laplace", "bounded": False}
FRESH_KS = (10, 30, 100, 300, 1000)


def _mae(a, b) -> float:
    return float(np.mean(np.abs(np.asarray(a) - np.asarray(b))))


def _prefix_mae(estimate, truth, order, ks) -> list[float]:
    """MAE over the first ``k`` fresh queries (in the order ``order``) for each ``k``: Figure 4's curve."""
    err = np.abs(np.asarray(estimate) - np.asarray(truth))[order]
    return [float(np.mean(err[:k])) for k in ks]


def as_workload(queries: QuerySet) -> pj.Workload:
    """The published queries as a :class:`pgmjax.Workload`, the form MWEM and HDMM take.

    A one-attribute block is one query matrix; a row of a larger block must be a Kronecker product of
    per-attribute rows (every rectangle is: the outer product of its two ranges) and becomes one
    one-row Kronecker query.
    """
    entries = []
    for clique, m in queries.blocks:
        if len(clique) == 1:
            entries.append((clique, [np.asarray(m, dtype=float)]))
            continue
        shape = tuple(queries.domain[a] for a in clique)
        for row in np.asarray(m, dtype=float):
            t = row.reshape(shape)
            factors = [(t.sum(axis=tuple(j for j in range(len(shape)) if j != i)) != 0).astype(float) for i in range(len(shape))]
            outer = factors[0]
            for f in factors[1:]:
                outer = np.multiply.outer(outer, f)
            if not np.array_equal(outer, t):
                raise ValueError(f"as_workload: a query on {clique} is not a product of per-attribute 0/1 rows")
            entries.append((clique, [f[None, :] for f in factors]))
    return pj.Workload(queries.domain, entries)


def hdmm_plan(workload: pj.Workload, opts: dict) -> tuple[object, dict]:
    """HDMM's strategy for a workload, OPT_kron (data-independent: computed once, used for every seed and budget)."""
    t0 = time.perf_counter()
    S, loss = mm.opt_kron(mm.union_workload(workload), jax.random.key(4), restarts=opts["restarts"], sweeps=opts["sweeps"],
                          maxiter=opts["maxiter"], noise=opts["noise"])
    return S, {"error_factor": float(loss), "factor_shapes": [list(f.shape) for f in S.factors],
               "seconds": time.perf_counter() - t0}


def experiments(data_dir: str | None, quick: bool) -> list[dict]:
    out = []
    # (a) Table I/II
    dom = pj.Domain({"grade": 4})
    grades = pj.Dataset(np.repeat(np.arange(4), [12, 24, 6, 7])[:, None], dom)
    spans = sorted(((lo, hi) for lo in range(4) for hi in range(lo, 4)), key=lambda s: (-(s[1] - s[0]), s[0]))
    f = QuerySet(dom, [(("grade",), [[1.0 if lo <= j <= hi else 0.0 for j in range(4)] for lo, hi in spans])])
    out.append(
        dict(
            name="a_table1",
            plot_title="(a) Table I/II, 10 ranges",
            title="(a) Table I/II: 4 grade bins, the 10 ranges",
            data=grades, published=f, fresh=None,
            ms=[1, 4, 10] if quick else list(range(1, 11)),
            fixed={"paper f7..f10": np.arange(6, 10)},
        )
    )
    # (b) simulated 10-bin histogram, all 1023 subset sums
    rng = np.random.default_rng(2017)
    dom = pj.Domain({"bin": 10})
    sim = pj.Dataset(rng.choice(10, 10_000, p=rng.dirichlet(np.ones(10)))[:, None], dom)
    out.append(
        dict(
            name="b_subsets",
            plot_title="(b) 10 bins, 1023 subset sums",
            title="(b) simulated 10 bins, 1023 subset sums",
            data=sim, published=QuerySet.subset_sums(dom, "bin"), fresh=None,
            ms=[10, 1023] if quick else [3, 5, 10, 15, 20, 50, 100, 200, 500, 1023],
            fixed={},
            baselines=True, ref_m=10,
        )
    )
    try:
        adult = pj.datasets.load("adult", data_dir)
    except (FileNotFoundError, OSError, ValueError) as e:
        print(f"Adult data not found ({e}); skipping experiments (c) and (d)", file=sys.stderr)
        return out
    # (c) Adult age, 1-D ranges
    age = adult.project(("age",))
    ranges = QuerySet.ranges(age.domain, "age")
    perm = np.asarray(jax.random.permutation(jax.random.key(1), len(ranges)))
    out.append(
        dict(
            name="c_age",
            plot_title="(c) Adult age ranges",
            title="(c) Adult age: 1000 of 3655 ranges published, 2655 fresh",
            data=age, published=ranges.take(np.sort(perm[:1000])), fresh=ranges.take(np.sort(perm[1000:])),
            ms=[85] if quick else [10, 20, 42, 85, 170, 340, 1000],
            fixed={},
            baselines=True, ref_m=85,
            # Figure 5: the first n of the same permutation published (nested sets), the fresh queries unchanged
            sweep={"ns": [30, 1000] if quick else [10, 30, 100, 300, 1000], "m_cap": 85,
                   "published": lambda n, r=ranges, p=perm: r.take(np.sort(p[:n]))},
        )
    )
    if quick:  # each engine fit on the 1360-cell clique takes seconds: (d) is left to the full run
        return out
    # (d) Adult age x education-num, 2-D rectangles
    pair = adult.project(("age", "education-num"))
    rects = QuerySet.rectangles(pair.domain, ("age", "education-num"), 2000, key=jax.random.key(2))
    out.append(
        dict(
            name="d_age_edu",
            plot_title="(d) Adult age x edu-num rectangles",
            title="(d) Adult age x education-num: 1000 rectangles published, 1000 fresh",
            data=pair, published=rects.take(np.arange(1000)), fresh=rects.take(np.arange(1000, 2000)),
            ms=[25, 100, 400, 1000],
            fixed={},
            max_seeds=3,  # each engine fit here spends seconds in estimate_total / lipschitz on the 1360-cell Gram
            baselines=True, ref_m=400,
        )
    )
    return out


def setting(data, published: QuerySet, fresh: QuerySet | None) -> dict:
    """The true answers and Figure 4's fresh-query order for one published set."""
    out = {"data": data, "published": published, "fresh": fresh, "truth": {"published": published.answer(data)}}
    if fresh is not None:
        out["truth"]["fresh"] = fresh.answer(data)
        out["order"] = np.asarray(jax.random.permutation(jax.random.key(3), len(fresh)))
        out["ks"] = [k for k in FRESH_KS if k < len(fresh)] + [len(fresh)]
    return out


def _score(row: dict, s: dict, arm: str, answer) -> None:
    """MAE of one arm on the published and the fresh queries (and Figure 4's prefix curve); ``answer(qs)`` answers a QuerySet."""
    for part in ("published", "fresh"):
        qs = s[part]
        if qs is None:
            continue
        est = answer(qs)
        row[f"mae_{part}_{arm}"] = _mae(est, s["truth"][part])
        if part == "fresh":
            row[f"curve_fresh_{arm}"] = _prefix_mae(est, s["truth"]["fresh"], s["order"], s["ks"])


def run_one(s: dict, eps: float, seed: int, *, m: int | None = None, index=None, pgm_iters: int = 1000,
            gaussian: bool = True) -> dict:
    """One MLDP run (both arms and the Gaussian-basis model on the same noisy answers)."""
    data, published = s["data"], s["published"]
    key = jax.random.key(seed)
    t0 = time.perf_counter()
    if index is None:
        res = mldp(data, eps, key=key, training=published, size=m, engine_iters=pgm_iters,
                   fit_options=pj.FitOptions(dtype=jnp.float64))
    else:  # a fixed training set: the published queries are answered as fresh ones
        res = mldp(data, eps, key=key, training=published.take(index), engine_iters=pgm_iters,
                   fit_options=pj.FitOptions(dtype=jnp.float64))
    seconds = time.perf_counter() - t0
    assert res.accountant.spent == eps
    row = {
        "seed": seed,
        "m": len(res.info.training),
        "sensitivity": res.info.sensitivity,
        "sensitivity_exact": res.info.sensitivity_exact,
        "laplace_scale": res.info.scale,
        "coverage": res.info.coverage,
        "total_source": res.info.total_source,
        "seconds": seconds,
    }
    _score(row, s, "linear", res.original.predict)
    _score(row, s, "pgm", lambda qs: qs.answer(res.model))
    if gaussian:
        gauss = fit_regression(res.info.training, res.info.noisy_answers, **GAUSSIAN)
        _score(row, s, "gaussian", gauss.predict)
    return row


def run_baselines(s: dict, eps: float, seed: int, workload: pj.Workload, strategy, rounds: int) -> dict:
    """MWEM and HDMM on the published queries with the whole budget each (Figure 5's other methods)."""
    k_mwem, k_hdmm = jax.random.split(jax.random.key(2000 + seed))
    fit = pj.FitOptions(dtype=jnp.float64)
    t0 = time.perf_counter()
    mw = mwem(s["data"], eps, key=k_mwem, workload=workload, rounds=rounds, selection=MWEM["selection"], bounded=MWEM["bounded"],
              noise=MWEM["noise"], alpha=MWEM["alpha"], engine_iters=MWEM["engine_iters"], mw_iters=MWEM["mw_iters"],
              synthetic=False, fit_options=fit)
    t1 = time.perf_counter()
    hd = hdmm(s["data"], eps, key=k_hdmm, workload=workload, strategy=strategy, engine_iters=HDMM["engine_iters"],
              noise=HDMM["noise"], bounded=HDMM["bounded"], synthetic=False, max_table_cells=0, fit_options=fit)
    t2 = time.perf_counter()
    for res in (mw, hd):
        assert abs(res.accountant.spent - eps) <= 1e-9 * eps, (res.mechanism, res.accountant.spent)
    if mw.original is None:
        raise RuntimeError(f"MWEM's multiplicative-weights table did not run: {mw.original_error}")
    row = {"seed": seed, "seconds_mwem": t1 - t0, "seconds_hdmm": t2 - t1, "hdmm_noise_scale": hd.info.noise_scale,
           "hdmm_expected_mae_bound": float(np.sqrt(hd.info.expected_error_per_query))}
    for arm, source in (("mwem", mw.original), ("mwem_pgm", mw.model), ("hdmm", hd.original), ("hdmm_pgm", hd.model)):
        _score(row, s, arm, lambda qs, src=source: qs.answer(src))
    return row


def summarise(rows: list[dict]) -> dict:
    """Medians over seeds of every error (elementwise for the Figure 4 curves) and of the run's figures."""
    out = {k: rows[0][k] for k in ("m",) if k in rows[0]}
    for k in rows[0]:
        if k.startswith("curve_"):
            out[k] = [benchutil.median(col) for col in zip(*(r[k] for r in rows))]
        elif k.startswith("mae_") or k in ("sensitivity", "coverage", "laplace_scale", "seconds", "seconds_mwem",
                                           "seconds_hdmm", "hdmm_noise_scale", "hdmm_expected_mae_bound"):
            out[k] = benchutil.median([r[k] for r in rows])
    if "sensitivity_exact" in rows[0]:
        out["sensitivity_exact"] = all(r["sensitivity_exact"] for r in rows)
        out["sensitivity_range"] = [min(r["sensitivity"] for r in rows), max(r["sensitivity"] for r in rows)]
    return out


def laplace_runs(data, queries: QuerySet, truth, eps: float, n_seeds: int) -> dict:
    lap = []
    for seed in range(n_seeds):
        y, acc = laplace_baseline(data, eps, queries, key=jax.random.key(1000 + seed))
        assert acc.spent == eps
        lap.append(_mae(y, truth))
    return {"scale": training_sensitivity(queries) / eps, "mae_published": benchutil.median(lap), "runs": lap}


def _fmt(d: dict) -> str:
    return " ".join(f"{k[4:]}={v:.4g}" for k, v in d.items() if k.startswith("mae_"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="eps 1, fewer seeds, m, MWEM rounds and query sets")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per setting (default 5; 2 with --quick)")
    ap.add_argument("--baseline-seeds", type=int, default=None, help="seeds for MWEM, HDMM and Figure 5 (default 3; 1 with --quick)")
    ap.add_argument("--eps", type=float, nargs="+", default=None, help="budgets (default 1 0.1; 1 with --quick)")
    ap.add_argument("--data-dir", default=os.environ.get("PGMJAX_DATA"), help="the shared data folder (default: pgmjax's)")
    ap.add_argument("--out", default="mldp_cpu", help="result name under bench/results/papers/ (or a path)")
    ap.add_argument("--only", nargs="*", default=None, help="experiment names to run (a_table1 b_subsets c_age d_age_edu)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the other experiments already in the output's JSON (a run split in parts, e.g. by --only)")
    args = ap.parse_args(argv)
    seeds = args.seeds or (2 if args.quick else 5)
    base_seeds = args.baseline_seeds or (1 if args.quick else 3)
    eps_list = args.eps or ([1.0] if args.quick else [1.0, 0.1])
    rounds = 5 if args.quick else MWEM["rounds"]

    start = time.perf_counter()
    load_start = os.getloadavg()
    meta = {
        "cpu": schema.cpu_model(),
        "cores": os.cpu_count(),
        "backend": jax.default_backend(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "pgmjax": pj.__version__,
        "seeds": seeds,
        "baseline_seeds": base_seeds,
        "epsilons": eps_list,
        "quick": args.quick,
        "pgm": "pgmjax.estimate, mirror descent, 1000 iterations, float64, L2 loss with the Laplace std sqrt(2) S / eps",
        "gaussian": GAUSSIAN | {"width": "median distance between training queries", "centers": "every training query"},
        "mwem": MWEM | {"rounds": rounds},
        "hdmm": HDMM,
        "load_start": load_start,
    }
    results = []
    plans: dict = {}  # HDMM strategies by published-set size: data-independent, shared by every seed and budget
    for exp in experiments(args.data_dir, args.quick):
        if args.only and exp["name"] not in args.only:
            continue
        t_exp = time.perf_counter()
        n_seeds = min(seeds, exp.get("max_seeds", seeds))
        n_base = min(base_seeds, n_seeds)
        s = setting(exp["data"], exp["published"], exp["fresh"])
        entry = {
            "name": exp["name"],
            "title": exp["title"],
            "plot_title": exp["plot_title"],
            "records": len(exp["data"]),
            "cells": int(sum(exp["data"].domain.size(c) for c in exp["published"].cliques)),
            "published": len(exp["published"]),
            "fresh": 0 if exp["fresh"] is None else len(exp["fresh"]),
            "published_sensitivity": training_sensitivity(exp["published"]),
            "mean_abs_true_answer": float(np.mean(np.abs(s["truth"]["published"]))),
            "seeds": n_seeds,
            "baseline_seeds": n_base if exp.get("baselines") else 0,
            "ref_m": exp.get("ref_m"),
            "fresh_ks": s.get("ks"),
            "by_eps": {},
        }
        if exp.get("baselines"):
            wl = as_workload(exp["published"])
            plans[(exp["name"], entry["published"])] = plan = hdmm_plan(wl, HDMM)
            entry["hdmm_strategy"] = plan[1]
            print(f"{exp['name']}: HDMM strategy {plan[1]['factor_shapes']} in {plan[1]['seconds']:.1f} s", flush=True)
        for eps in eps_list:
            block = {"laplace": laplace_runs(exp["data"], exp["published"], s["truth"]["published"], eps, n_seeds), "m": [], "fixed": {}}
            for m in exp["ms"]:
                rows = [run_one(s, eps, seed, m=m) for seed in range(n_seeds)]
                summary = summarise(rows) | {"runs": rows}
                block["m"].append(summary)
                print(
                    f"{exp['name']} eps={eps:g} m={m}: S={summary['sensitivity_range']} cov={summary['coverage']:.3f} {_fmt(summary)}"
                    f" laplace={block['laplace']['mae_published']:.4g} ({summary['seconds']:.2f} s/run)",
                    flush=True,
                )
            for label, index in exp["fixed"].items():
                rows = [run_one(s, eps, seed, index=index) for seed in range(n_seeds)]
                block["fixed"][label] = summarise(rows) | {"runs": rows}
                print(f"{exp['name']} eps={eps:g} {label}: {_fmt(block['fixed'][label])}", flush=True)
            if exp.get("baselines"):
                rows = [run_baselines(s, eps, seed, wl, plan[0], rounds) for seed in range(n_base)]
                block["baselines"] = summarise(rows) | {"runs": rows}
                print(f"{exp['name']} eps={eps:g} MWEM, HDMM: {_fmt(block['baselines'])} "
                      f"({block['baselines']['seconds_mwem']:.1f} + {block['baselines']['seconds_hdmm']:.1f} s/run)", flush=True)
            if exp.get("sweep") and eps == eps_list[0]:
                block["sweep"] = []
                for n in exp["sweep"]["ns"]:
                    m = min(n, exp["sweep"]["m_cap"])
                    same = next((e for e in block["m"] if e["m"] == m), None) if n == entry["published"] else None
                    if same is not None and "baselines" in block:  # the whole published set: Figure 3's runs already measured it
                        block["sweep"].append({"n": n, "m": m, "published_sensitivity": entry["published_sensitivity"],
                                               "hdmm_strategy": entry["hdmm_strategy"], "laplace": block["laplace"],
                                               "mldp": same, "baselines": block["baselines"], "reused": True})
                        continue
                    pub = exp["sweep"]["published"](n)
                    sn = setting(exp["data"], pub, exp["fresh"])
                    wl_n = as_workload(pub)
                    if (exp["name"], n) not in plans:
                        plans[(exp["name"], n)] = hdmm_plan(wl_n, HDMM)
                    plan_n = plans[(exp["name"], n)]
                    mldp_rows = [run_one(sn, eps, seed, m=m, gaussian=False) for seed in range(n_base)]
                    base_rows = [run_baselines(sn, eps, seed, wl_n, plan_n[0], rounds) for seed in range(n_base)]
                    point = {
                        "n": n, "m": m, "published_sensitivity": training_sensitivity(pub), "hdmm_strategy": plan_n[1],
                        "laplace": laplace_runs(exp["data"], pub, sn["truth"]["published"], eps, n_base),
                        "mldp": summarise(mldp_rows) | {"runs": mldp_rows},
                        "baselines": summarise(base_rows) | {"runs": base_rows},
                    }
                    block["sweep"].append(point)
                    print(f"{exp['name']} eps={eps:g} Figure 5 n={n} (m={m}): laplace={point['laplace']['mae_published']:.4g} "
                          f"{_fmt(point['mldp'])} {_fmt(point['baselines'])}", flush=True)
            entry["by_eps"][str(eps)] = block
        entry["seconds"] = time.perf_counter() - t_exp
        results.append(entry)
    meta["seconds"] = time.perf_counter() - start
    meta["load_end"] = os.getloadavg()
    meta = schema.run_meta("bench.mldp", argv, also=meta)
    out = schema.result_path("papers", args.out)
    results = json.loads(json.dumps(results, default=float))
    if args.keep and os.path.exists(out + ".json"):
        with open(out + ".json") as fh:
            old = json.load(fh)
        done = {r["name"] for r in results}
        kept = [r for r in old["rows"] if r["name"] not in done]
        if kept:  # the earlier part's own record (command, date, load) stays with its experiments
            part = {k: old["meta"].get(k) for k in ("command", "date", "commit", "seconds", "load_start", "load_end", "seeds",
                                                    "baseline_seeds", "epsilons", "quick")}
            meta["earlier_parts"] = old["meta"].get("earlier_parts", []) + [part | {"experiments": [r["name"] for r in kept]}]
            order = ["a_table1", "b_subsets", "c_age", "d_age_edu"]
            results = sorted(kept + results, key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
    schema.write_result("papers", out, results, meta, page=render(meta, results, os.path.basename(out)).splitlines())
    plot(meta, results, out + ".png")
    print(f"wrote {out}.json, .md, .png in {meta['seconds']:.0f} s")


def _cell(v, best=None) -> str:
    """A number for the tables; bold where within 0.1% of ``best``."""
    if v is None:
        return "-"
    txt = f"{v:,.3g}" if v < 1000 else f"{v:,.0f}"
    return f"**{txt}**" if best is not None and v <= best * (1 + 1e-3) else txt


def render(meta: dict, results: list[dict], stem: str) -> str:
    lines = [
        "# MLDP vs MLDP+PGM vs the Laplace method, MWEM and HDMM (Zhu et al., IEEE BigData 2017, Figures 3-5 in spirit)",
        "",
        f"Machine: {meta['cpu']}, {meta['cores']} cores, backend {meta['backend']}. Date: {meta['date']}.",
        f"Versions: Python {meta['python']}, jax {meta['jax']}, numpy {meta['numpy']}, pgmjax {meta['pgmjax']}.",
        f"Load average (1, 5, 15 min) at start {', '.join(f'{x:.2f}' for x in meta['load_start'])}, at end "
        f"{', '.join(f'{x:.2f}' for x in meta['load_end'])}: the machine is shared, times are indicative. "
        f"Whole run {meta['seconds']:.0f} s (`{meta['command']}`).",
        *[f"Kept from an earlier part: {', '.join(p['experiments'])}, made by `{p['command']}` on {p['date']} in "
          f"{p['seconds']:.0f} s (load at start {', '.join(f'{x:.2f}' for x in p['load_start'])})."
          for p in meta.get("earlier_parts", [])],
        "",
        f"Every cell is the median over {meta['seeds']} seeds (fewer where stated) of the mean absolute error (MAE, in records) of one arm. "
        "The seed drives the selector's tie-breaks and the Laplace noise; all MLDP arms of a run share one noisy release "
        "of the m training answers (pure eps-DP, ledger = eps exactly, scale S / eps with S the training set's exact "
        "sensitivity, add/remove-one neighbours).",
        "",
        "* **linear**: MLDP with linear regression on the queries' indicator features (least squares, minimum norm);",
        "* **+PGM**: MLDP+PGM, the same noisy answers as linear measurements for `pgmjax.estimate` "
        "(1000 mirror-descent iterations, float64, total estimated from the measurements);",
        f"* **gauss**: MLDP with the Gaussian-basis model (every training query a centre, width = median distance "
        f"between training queries, ridge {meta['gaussian']['ridge']:g}; the ridge was picked from "
        "{0, 1e-2, 1, 100} on one run of (b): it is the paper's model, not a tuned competitor);",
        "* **Laplace**: every published query answered with Lap(S_pub / eps), S_pub the published set's sensitivity "
        "(it cannot answer fresh queries);",
        f"* **MWEM** (the paper's PMW arm): `pgmjax.mechanisms.mwem` with the published queries as its workload, one "
        f"query selected per round (exponential mechanism, then a Laplace measurement, half the round's budget each), "
        f"{meta['mwem']['rounds']} rounds, replace-one neighbours with the record count public (the MWEM paper's "
        f"setting); **MWEM (MW)** answers from its multiplicative-weights table ({meta['mwem']['mw_iters']} passes per "
        f"round), **MWEM+PGM** from its graphical model ({meta['mwem']['engine_iters']} iterations per round);",
        f"* **HDMM** (the paper's matrix-mechanism arm): `pgmjax.mechanisms.hdmm` with the published queries as its "
        f"workload and the strategy optimised for them ({meta['hdmm']['template']}, {meta['hdmm']['restarts']} "
        f"L-BFGS restart of {meta['hdmm']['maxiter']} iterations, {meta['hdmm']['sweeps']} block sweep for unions), "
        f"Laplace noise, add/remove-one; **HDMM (LLS)** answers from its least-squares tables, **HDMM+PGM** from its "
        f"graphical model ({meta['hdmm']['engine_iters']} iterations). MWEM and HDMM are medians over "
        f"{meta['baseline_seeds']} seeds and spend the whole eps each.",
        "",
        "S = the training set's sensitivity (median; the min-max over seeds when it varies), cov = share of cells "
        "touched by a training query. Published = the queries the curator publishes (training queries are chosen "
        "among them); fresh = queries outside that set, answered by the models at no privacy cost.",
        "",
    ]
    for r in results:
        lines += [f"## {r['title']}", ""]
        lines.append(
            f"{r['records']:,} records, {r['cells']:,} cells, {r['published']:,} published queries "
            f"(sensitivity {r['published_sensitivity']:g}), {r['fresh']:,} fresh; mean |true answer| "
            f"{r['mean_abs_true_answer']:,.1f}. Medians over {r['seeds']} seeds. Time {r['seconds']:.0f} s."
        )
        if r.get("hdmm_strategy"):
            h = r["hdmm_strategy"]
            lines.append(f"HDMM strategy: factors {h['factor_shapes']}, error factor {h['error_factor']:,.4g}, "
                         f"optimised in {h['seconds']:.0f} s.")
        lines.append("")
        fresh = r["fresh"] > 0
        for eps, block in r["by_eps"].items():
            head = "| m | S | cov | linear | +PGM | gauss |" + (" linear fresh | +PGM fresh | gauss fresh |" if fresh else "") + " Laplace |"
            lines += [f"### eps = {eps}", "", "Figure 3: MAE against the number of training queries m.", "",
                      head, "|" + "---|" * (head.count("|") - 1)]
            entries = [(str(s["m"]), s) for s in block["m"]] + [(k, s) for k, s in block["fixed"].items()]
            best_pub = min(min(s[f"mae_published_{a}"] for a in ARMS) for _, s in entries)  # bold: within 0.1% of the best
            for label, s in entries:
                lo, hi = s["sensitivity_range"]
                sens = f"{s['sensitivity']:g}" if lo == hi else f"{s['sensitivity']:g} ({lo:g}-{hi:g})"
                row = [label, sens, f"{s['coverage']:.3f}"]
                row += [_cell(s[f"mae_published_{a}"], best_pub) for a in ARMS]
                if fresh:
                    row += [_cell(s[f"mae_fresh_{a}"]) for a in ARMS]
                row.append(_cell(block["laplace"]["mae_published"]))
                lines.append("| " + " | ".join(row) + " |")
            lines.append("")
            if "baselines" in block:
                b = block["baselines"]
                ref = next((s for s in block["m"] if s["m"] == r["ref_m"]), None)
                lines += [f"Figure 5's methods on the same {r['published']:,} published queries (MWEM and HDMM: "
                          f"median of {r['baseline_seeds']} seeds; MLDP at m = {r['ref_m']}):", "",
                          "| arm | MAE published | MAE fresh |", "|---|---|---|",
                          f"| Laplace | {_cell(block['laplace']['mae_published'])} | - |"]
                if ref is not None:
                    lines += [f"| {NAMES[a]} (m = {r['ref_m']}) | {_cell(ref[f'mae_published_{a}'])} | "
                              f"{_cell(ref.get(f'mae_fresh_{a}'))} |" for a in ARMS]
                lines += [f"| {NAMES[a]} | {_cell(b[f'mae_published_{a}'])} | {_cell(b.get(f'mae_fresh_{a}'))} |" for a in BASELINES]
                lines += ["", f"Seconds per run: MWEM {b['seconds_mwem']:.1f}, HDMM {b['seconds_hdmm']:.1f} (strategy "
                          f"excluded); HDMM's noise scale per strategy row {b['hdmm_noise_scale']:.3g}.", ""]
                if fresh and ref is not None:
                    arms = [a for a in ARMS + BASELINES if f"curve_fresh_{a}" in (ref if a in ARMS else b)]
                    head = "| fresh queries k | " + " | ".join(NAMES[a] for a in arms) + " |"
                    lines += [f"Figure 4: MAE over the first k fresh queries (fixed random order), MLDP at m = {r['ref_m']}:", "",
                              head, "|" + "---|" * (len(arms) + 1)]
                    for i, k in enumerate(r["fresh_ks"]):
                        vals = [(ref if a in ARMS else b)[f"curve_fresh_{a}"][i] for a in arms]
                        lines.append(f"| {k:,} | " + " | ".join(_cell(v) for v in vals) + " |")
                    lines.append("")
            if "sweep" in block:
                arms = ["linear", "pgm", *BASELINES]
                head = "| published n | S_pub | m | Laplace | " + " | ".join(NAMES[a] for a in arms) + " |"
                lines += ["Figure 5: MAE over the published queries against their number n (the first n of the published "
                          f"permutation; MLDP at m = min(n, {r['ref_m']}); medians of {r['baseline_seeds']} seeds; at n = "
                          f"{r['published']:,} the runs above, {r['seeds']} seeds for MLDP and Laplace):", "",
                          head, "|" + "---|" * (len(arms) + 4)]
                for p in block["sweep"]:
                    vals = [(p["mldp"] if a in ARMS else p["baselines"])[f"mae_published_{a}"] for a in arms]
                    best = min(vals + [p["laplace"]["mae_published"]])
                    lines.append(f"| {p['n']:,} | {p['published_sensitivity']:g} | {p['m']} | {_cell(p['laplace']['mae_published'], best)} | "
                                 + " | ".join(_cell(v, best) for v in vals) + " |")
                lines.append("")
    lines += [f"Raw numbers (every seed): `{stem}.json`; plot: `{stem}.png`.", ""]
    return "\n".join(lines)


def plot(meta: dict, results: list[dict], path: str) -> None:
    """Figure 3 (MAE against m) on the top rows, one row per budget; Figures 4 and 5 on the rows below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps_list = [str(e) for e in meta["epsilons"]]
    lower = [(r, "fig4") for r in results if r["fresh"] and "baselines" in r["by_eps"][eps_list[0]]]
    lower += [(r, "fig5") for r in results if "sweep" in r["by_eps"][eps_list[0]]]
    ncols = max(len(results), len(lower), 1)
    nrows = len(eps_list) * (2 if lower else 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)

    def style(ax, title, xlabel):
        ax.set_visible(True)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel("MAE (records)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)

    for j, r in enumerate(results):  # Figure 3
        for i, eps in enumerate(eps_list):
            ax = axes[i, j]
            block = r["by_eps"][eps]
            ms = [s["m"] for s in block["m"]]
            for a in ARMS:
                ax.plot(ms, [s[f"mae_published_{a}"] for s in block["m"]], "o-", color=COLOURS[a], label=NAMES[a], ms=3)
                if r["fresh"]:
                    ax.plot(ms, [s[f"mae_fresh_{a}"] for s in block["m"]], "x--", color=COLOURS[a], label=NAMES[a] + " (fresh)", ms=4, lw=0.8)
            ax.axhline(block["laplace"]["mae_published"], color="k", ls=":", label="Laplace")
            if "baselines" in block:
                for a in ("mwem", "hdmm"):
                    ax.axhline(block["baselines"][f"mae_published_{a}"], color=COLOURS[a], ls="-.", lw=1, label=NAMES[a])
            style(ax, f"Fig. 3 {r['plot_title']}, eps = {eps}", "training queries m")
    for j, (r, kind) in enumerate(lower):  # Figures 4 and 5
        for i, eps in enumerate(eps_list):
            ax = axes[len(eps_list) + i, j]
            block = r["by_eps"][eps]
            if kind == "fig4":
                ref = next((s for s in block["m"] if s["m"] == r["ref_m"]), None)
                if ref is None or "baselines" not in block:
                    continue
                for a in ARMS + BASELINES:
                    src = ref if a in ARMS else block["baselines"]
                    if f"curve_fresh_{a}" in src:
                        ax.plot(r["fresh_ks"], src[f"curve_fresh_{a}"], "o-", color=COLOURS[a], label=NAMES[a], ms=3)
                style(ax, f"Fig. 4 {r['plot_title']}, m = {r['ref_m']}, eps = {eps}", "fresh queries answered k")
            else:
                if "sweep" not in block:
                    continue
                ns = [p["n"] for p in block["sweep"]]
                ax.plot(ns, [p["laplace"]["mae_published"] for p in block["sweep"]], "s:", color="k", label="Laplace", ms=3)
                for a in ("linear", "pgm", *BASELINES):
                    src = "mldp" if a in ARMS else "baselines"
                    ax.plot(ns, [p[src][f"mae_published_{a}"] for p in block["sweep"]], "o-", color=COLOURS[a], label=NAMES[a], ms=3)
                style(ax, f"Fig. 5 {r['plot_title']}, eps = {eps}", "published queries n")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    fig.suptitle(
        f"MLDP vs MLDP+PGM vs Laplace, MWEM, HDMM; {meta['cpu']} ({meta['cores']} cores), "
        f"jax {meta['jax']}, pgmjax {meta['pgmjax']}, {meta['date']}",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
