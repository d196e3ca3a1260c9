"""The approximate marginal oracle (convex generalized BP) against mbi 2.0's, and against the exact fit where it fits.

    python -m bench approximate [--quick] [--iters 100,300] [--skip-mbi] [--skip-aim]

Problems (generated tables: each attribute copies the previous one with probability 0.6, else uniform):

* ``allpairs30``: all 435 pairs of a 30-attribute table (4 values each, N = 10,000), Gaussian noise sigma 10;
  the exact junction tree is the whole table (4^30 cells): no exact fit;
* ``grid10``: the 180 edges of a 10x10 grid of attributes (3 values each), sigma 10; exact treewidth 10;
* ``allpairs8``, ``grid4``: small versions with an exact fit, for accuracy against it.

For each, in one process: pgmjax's ``estimate(..., oracle="approximate")`` (mirror descent with its line
search, 100 message-passing iterations per oracle call from zero messages) and mbi's
``approximate_oracles.mirror_descent`` (fixed step, one message-passing iteration per step, messages warm
started; its step is the best of a small grid on the small problem of each family), each at the same numbers of
iterations: the L2 loss ``1/2 sum ||(mu - y) / sigma||^2`` of the returned pseudo-marginals (computed the same
way for both), seconds per iteration after compilation, the first call's seconds, the pseudo-marginals'
inconsistency (largest L1/N between two measured cliques' marginals of one attribute) and their error against
the data (mean L1/N over the measured cliques). Where the exact fit exists: its loss and the L1/N distance of
the two fits' measured marginals. ``aim30``: AIM (all 2-way workload) on the 30-attribute table with the
approximate oracle and with the exact one (its model capped by ``max_model_mb``), workload error of each.

Results: ``bench/results/approximate/approximate_oracle.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

import numpy as np

from bench import schema

SUITE, NAME = "approximate", "approximate_oracle"


def _table(rng, sizes, n):
    cols = [rng.integers(0, sizes[0], n)]
    for k in sizes[1:]:
        prev = np.minimum(cols[-1], k - 1)
        cols.append(np.where(rng.random(n) < 0.6, prev, rng.integers(0, k, n)))
    return np.stack(cols, 1)


def problem(name: str, seed: int = 0) -> dict:
    """A problem: ``domain`` (name -> size), ``cliques``, the data's marginals ``truth``, noisy answers ``y``, the
    table itself (``records``)."""
    rng = np.random.default_rng(seed)
    if name.startswith("allpairs"):
        d = int(name[len("allpairs"):])
        names, k = [f"a{i}" for i in range(d)], 4 if d > 10 else 3
        cliques = list(itertools.combinations(names, 2))
    else:  # grid<s>
        s = int(name[len("grid"):])
        names, k = [f"g{i}_{j}" for i in range(s) for j in range(s)], 3
        cliques = [(f"g{i}_{j}", f"g{i}_{j + 1}") for i in range(s) for j in range(s - 1)]
        cliques += [(f"g{i}_{j}", f"g{i + 1}_{j}") for i in range(s - 1) for j in range(s)]
    n, sigma = 10_000, 10.0
    x = _table(rng, [k] * len(names), n)
    index = {a: i for i, a in enumerate(names)}
    truth = []
    for c in cliques:
        flat = np.ravel_multi_index(tuple(x[:, index[a]] for a in c), (k,) * len(c))
        truth.append(np.bincount(flat, minlength=k ** len(c)).reshape((k,) * len(c)).astype(float))
    ys = [t + rng.normal(0, sigma, t.shape) for t in truth]
    return {"name": name, "domain": {a: k for a in names}, "cliques": cliques, "truth": truth, "y": ys, "sigma": sigma,
            "n": n, "exact": name in ("allpairs8", "grid4"), "records": x}


def loss(p, marginals) -> float:
    return float(sum(0.5 * np.sum(((m - y) / p["sigma"]) ** 2) for m, y in zip(marginals, p["y"])))


def inconsistency(p, marginals) -> float:
    """Largest L1/N between two measured cliques' marginals of one attribute."""
    by_attr: dict = {}
    for c, m in zip(p["cliques"], marginals):
        for i, a in enumerate(c):
            by_attr.setdefault(a, []).append(m.sum(axis=tuple(j for j in range(len(c)) if j != i)))
    return max(float(np.abs(t - u).sum()) / p["n"] for ts in by_attr.values() for t, u in itertools.combinations(ts, 2))


def error(p, marginals) -> float:
    return float(np.mean([np.abs(m - t).sum() / p["n"] for m, t in zip(marginals, p["truth"])]))


def run_pgmjax(p, iters_list):
    import jax
    import pgmjax as pj

    dom = pj.Domain(p["domain"])
    ms = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["y"])]
    t0 = time.perf_counter()
    pj.estimate(dom, ms, iters=2, oracle="approximate")
    first = time.perf_counter() - t0
    rows = []
    for iters in iters_list:
        t0 = time.perf_counter()
        model, report = pj.estimate(dom, ms, iters=iters, oracle="approximate", report=True)
        jax.block_until_ready(model.theta)
        seconds = time.perf_counter() - t0
        mus = model.marginals(p["cliques"])
        rows.append({"engine": "pgmjax", "iters": iters, "loss": loss(p, mus), "s_per_iter": seconds / iters,
                     "first_call_s": first, "oracle_calls": report.history[-1]["oracle_calls"],
                     "inconsistency": inconsistency(p, mus), "error": error(p, mus), "_mus": mus})
    return rows


def run_mbi(p, iters_list, steps):
    import jax
    import jax.numpy as jnp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mbi
        from mbi import approximate_oracles

    names = list(p["domain"])
    dom = mbi.Domain(names, [p["domain"][a] for a in names])
    meas = [mbi.LinearMeasurement(jnp.asarray(y.ravel(), jnp.float32), tuple(c), stddev=p["sigma"])
            for c, y in zip(p["cliques"], p["y"])]

    def fit(step, iters):
        t0 = time.perf_counter()
        mu = approximate_oracles.mirror_descent(dom, meas, known_total=float(p["n"]), stepsize=step, iters=iters)
        jax.block_until_ready(mu)
        return time.perf_counter() - t0, [np.asarray(mu[c].datavector(flatten=False), np.float64) for c in p["cliques"]]

    first, _ = fit(steps[0], 2)
    tried = {}
    for step in steps:  # the fixed step (mbi has no line search) with the lowest error against the data: the most
        # favourable to mbi (its loss is no guide: one message pass per step leaves its pseudo-marginals inconsistent,
        # and inconsistent tables reach losses below the relaxed problem's optimum)
        _, mus = fit(step, iters_list[0])
        ok = np.all([np.isfinite(m).all() for m in mus])
        tried[step] = {"loss": loss(p, mus) if ok else None, "error": error(p, mus) if ok else float("inf"),
                       "inconsistency": inconsistency(p, mus) if ok else None}
    best = min(tried, key=lambda s: tried[s]["error"])
    rows = []
    for iters in iters_list:
        seconds, mus = fit(best, iters)
        rows.append({"engine": "mbi", "iters": iters, "loss": loss(p, mus), "s_per_iter": seconds / iters,
                     "first_call_s": first, "step": best, "steps_tried": {f"{k:.3g}": v for k, v in tried.items()},
                     "inconsistency": inconsistency(p, mus), "error": error(p, mus)})
    return rows


def run_exact(p, iters):
    import pgmjax as pj

    dom = pj.Domain(p["domain"])
    ms = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["y"])]
    t0 = time.perf_counter()
    model = pj.estimate(dom, ms, iters=iters)
    mus = model.marginals(p["cliques"])
    return {"engine": "pgmjax exact", "iters": iters, "loss": loss(p, mus), "s_per_iter": (time.perf_counter() - t0) / iters,
            "error": error(p, mus), "inconsistency": inconsistency(p, mus), "_mus": mus}


def run_aim(rounds: int, engine_iters: int, seed: int = 0, max_model_mb: float = 80.0) -> list[dict]:
    import jax
    import pgmjax as pj
    from pgmjax.mechanisms import aim

    p = problem("allpairs30", seed)
    dom = pj.Domain(p["domain"])
    rng = np.random.default_rng(seed + 1)
    data = pj.Dataset(_table(rng, list(dom.shape), p["n"]), dom)
    pairs = list(itertools.combinations(dom.attributes, 2))
    truth = data.marginals(pairs)
    out = []
    for oracle in ("approximate", "exact"):
        t0 = time.perf_counter()
        res = aim(data, 1.0, key=jax.random.key(seed), rounds=rounds, engine_iters=engine_iters, synthetic=False,
                  max_model_mb=max_model_mb, fit_options=pj.FitOptions(oracle=oracle))
        est = res.model.infer_marginals(pairs) if oracle == "approximate" else res.model.marginals(pairs)
        out.append({"engine": f"AIM, oracle={oracle}", "max_model_mb": max_model_mb, "rounds": res.info.rounds_run,
                    "engine_iters": engine_iters, "model_mb": res.info.model_mb,
                    "workload_error": float(np.mean([np.abs(e - t).sum() / len(data) for e, t in zip(est, truth)])),
                    "model_cliques": len(res.model.cliques), "selected_pairs": sum(len(c) == 2 for c in res.info.selected),
                    "seconds": time.perf_counter() - t0})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench approximate", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the small problems only, few iterations")
    ap.add_argument("--iters", default="100,300", help="iteration counts, comma-separated")
    ap.add_argument("--problems", default="allpairs8,grid4,allpairs30,grid10")
    ap.add_argument("--skip-mbi", action="store_true")
    ap.add_argument("--skip-aim", action="store_true")
    ap.add_argument("--aim-rounds", type=int, default=60)
    ap.add_argument("--aim-max-model-mb", default="80", help="AIM's size caps, comma-separated (one AIM pair each)")
    ap.add_argument("--out", default=NAME)
    args = ap.parse_args(argv)
    iters_list = [int(i) for i in args.iters.split(",")]
    names = args.problems.split(",")
    if args.quick:
        names, iters_list = ["allpairs8", "grid4"], [50]
    rows, best_step = [], {}
    for name in [n for n in names if n]:
        p = problem(name)
        got = run_pgmjax(p, iters_list)
        if p["exact"]:
            ex = run_exact(p, max(iters_list) * 3)
            for r in got:
                r["exact_loss"] = ex["loss"]
                r["l1_to_exact"] = float(np.mean([np.abs(a - b).sum() / p["n"] for a, b in zip(r["_mus"], ex["_mus"])]))
            ex.pop("_mus")
            got.append(ex)
        if not args.skip_mbi:
            # mbi's step moves the potentials by step * (mu - y) / sigma^2: in units of 1 / (L N) = sigma^2 / N.
            # Each step compiles mbi's program anew (minutes on the large problems): the grid runs on the small
            # problem of a family and the large one takes its best.
            family = name.rstrip("0123456789")
            unit = p["sigma"] ** 2 / p["n"]
            steps = [best_step[family]] if family in best_step else [unit * s for s in (1, 4, 16, 64)]
            mbi_rows = run_mbi(p, iters_list, steps)
            best_step.setdefault(family, mbi_rows[0]["step"])
            got += mbi_rows
        for r in got:
            r.pop("_mus", None)
            r["problem"] = name
            print({k: v for k, v in r.items() if k != "steps_tried"}, flush=True)
        rows += got
    aim_rows = [] if args.skip_aim or args.quick else [
        r for cap in args.aim_max_model_mb.split(",") for r in run_aim(args.aim_rounds, 100, max_model_mb=float(cap))]
    for r in aim_rows:
        print(r, flush=True)
    meta = schema.run_meta(f"bench.{NAME}", argv, extra=("mbi",))
    columns = ["problem", "engine", "iters", "loss", "exact_loss", "l1_to_exact", "error", "inconsistency", "s_per_iter",
               "first_call_s", "oracle_calls", "step"]
    page = ["# The approximate oracle: pgmjax (convex GBP, line search) against mbi 2.0 (convex GBP, fixed step)", "",
            *schema.header_lines(meta),
            "Loaded 2-core machine (other agents' jobs running): timings are noisy; losses are not.", "",
            "loss: `1/2 sum ||(mu - y)/sigma||^2` of the returned pseudo-marginals of the measured cliques (the same "
            "code for both engines); error: mean L1/N against the data's marginals; inconsistency: largest L1/N "
            "between two measured cliques' marginals of one attribute; l1_to_exact: mean L1/N between the "
            "approximate and the exact fit's measured marginals. mbi's step: of 1, 4, 16, 64 times "
            "sigma^2/N (= 1/(L N)), the one with the lowest error against the data at the first iteration count on "
            "the small problem of each family (allpairs8, grid4), used for the large one (each step compiles mbi's "
            "program anew: minutes there). The relaxed problem's optimum is a lower bound on the loss of any locally "
            "consistent pseudo-marginals: a loss below it (mbi's) comes with inconsistent tables, not a better fit.",
            "", *schema.table(rows, columns), ""]
    if aim_rows:
        page += ["## AIM on the 30-attribute table (all 2-way workload, epsilon 1)", "",
                 *schema.table(aim_rows), ""]
    schema.write_result(SUITE, args.out, rows, meta, page=page, aim=aim_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
