"""Agreement with mbi 2.0 on answers no measurement constrains (issue 40, item 4).

Both engines fit the maximum-entropy distribution whose clique marginals minimise the same loss: with identity
measurements the L2 loss is strictly convex in the measured marginals, so at convergence both engines hold the
same measured marginals and therefore (maximum entropy being unique given them) the same answer to every
other query. This script fits each problem with pgmjax's and mbi's mirror descent (default settings, each
engine's own Armijo line search) in float32 and in float64, on the same noisy measurements and the same total
(the record count, given to both so that both solve the same problem), and compares, in L1 over the total:

* ``unmeasured``: the largest distance between the two engines' answers to a fixed set of marginals not
  inside any measured clique (up to :data:`PAIRS` random pairs and :data:`TRIPLES` random triples of at most
  :data:`MAX_QUERY_CELLS` cells, drawn with seed 0). Target: under 1e-3.
* ``measured``: the largest distance on the measured cliques (both fits converged to the same marginals?).
* ``unmeasured_vs_ref``: each engine's distance on those queries from the reference, the float64 fit (of
  either engine) with the lower loss (which engine is off where the two disagree);
* each engine's loss ``1/2 sum ((mu - y) / sigma)^2`` recomputed in float64 from its marginals, and whether
  it is converged (within :data:`CONVERGED` of the problem's lowest loss): a disagreement where one engine is
  not converged measures its iteration budget, not maximum entropy (mbi's mirror descent has no momentum and
  needs many more iterations than pgmjax's on the dataset problems).

Problems (``bench/problems.py``): the engine benchmark's (benchmark cliques of the shared datasets, Adult's
MST-style set, NLTCS's 120 pairs, generated irregular problems) and generated loopy problems
(``bench.problems.loopy``: cycles and grids, records drawn from a random pairwise model, every edge measured).

Each precision runs in a fresh child process that fits both engines (``JAX_ENABLE_X64`` set for float64
only, so that mbi, whose tables follow JAX's default dtype, runs in the precision asked), at most
``--timeout`` seconds; a child that fails or times out is reported and its row marked.

Usage::

    python -m bench agreement --quick                          # one small loopy problem, seconds (printed only)
    python -m bench agreement --out agreement_cpu               # bench/results/agreement/agreement_cpu.json, .md
    python -m bench agreement --problems nltcs_2way cycle8 --iters 5000 --out /tmp/a.json
    python -m bench.agreement --render bench/results/agreement/agreement_before_cpu.json --notes "..."   # .md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench import schema
from bench.schema import ROOT

TOL = 1e-3
PAIRS = 6
TRIPLES = 4
MAX_QUERY_CELLS = 200_000

#: Problems of the full run (each fit within a few minutes on the 2-core CPU) and of ``--quick``.
FULL = ("cycle8", "grid3x3", "grid3x4", "nltcs_2way", "adult_mst", "titanic", "stroke", "gen15")
QUICK = ("cycle5_tiny",)
#: Iterations of each problem's fits (both engines, both precisions); ``--iters`` overrides.
#: mbi's mirror descent has no momentum and needs more iterations than pgmjax's to converge (engine_cpu.md:
#: on every problem its loss after 1,000 iterations is pgmjax's after fewer), so both get the same, generous
#: count: the loopy problems' fits cost milliseconds per 1,000 iterations.
ITERS = {"cycle5_tiny": 1000, "grid2x3_tiny": 1000, "cycle8": 20000, "grid3x3": 20000, "grid3x4": 20000,
         "nltcs_2way": 5000, "adult_mst": 5000, "titanic": 5000, "stroke": 5000, "gen15": 3000}


def unmeasured_queries(problem: dict, seed: int = 0) -> list[tuple]:
    """Up to :data:`PAIRS` pairs and :data:`TRIPLES` triples inside no measured clique, of at most
    :data:`MAX_QUERY_CELLS` cells each, drawn at random (seed ``seed``) among all such pairs and triples."""
    import numpy as np

    rng = np.random.default_rng(seed)
    attrs = list(problem["domain"])
    measured = [set(c) for c in problem["cliques"]]
    out = []
    for k, count in ((2, PAIRS), (3, TRIPLES)):
        if len(attrs) < k:
            continue
        # Sample candidates rather than enumerate them: Stroke has 110 attributes (215,820 triples).
        seen, found = set(), []
        for _ in range(200 * count):
            q = tuple(sorted(rng.choice(len(attrs), size=k, replace=False)))
            if q in seen:
                continue
            seen.add(q)
            names = tuple(attrs[i] for i in q)
            cells = int(np.prod([problem["domain"][a] for a in names]))
            if cells <= MAX_QUERY_CELLS and not any(set(names) <= m for m in measured):
                found.append(names)
                if len(found) == count:
                    break
        out += found
    return out


# ---------------------------------------------------------------------------------------------- child
def child(engines: list[str], precision: str, problem_file: str, iters: int, result: str) -> None:
    """Fit one problem with each engine in one precision; write each engine's measured and queried marginals
    (``<result>.<engine>.npz``) and a JSON summary per engine to ``result``."""
    summary = {}
    for engine in engines:
        summary[engine] = _fit_one(engine, precision, problem_file, iters, f"{result}.{engine}.npz")
    with open(result, "w") as f:
        json.dump(summary, f)


def _fit_one(engine: str, precision: str, problem_file: str, iters: int, arrays: str) -> dict:
    """One engine's fit (see :func:`child`): writes its marginals to ``arrays`` and returns its summary."""
    import numpy as np

    from bench import problems as ep

    p = ep.load(problem_file)
    with np.load(problem_file) as f:
        queries = [tuple(q) for q in json.loads(str(f["queries"]))]
    cliques = p["cliques"]
    total = float(p["records"])
    t = time.perf_counter()
    if engine == "pgmjax":
        import jax
        import jax.numpy as jnp

        import pgmjax as pj

        dtype = jnp.float64 if precision == "float64" else jnp.float32
        domain = pj.Domain(p["domain"])
        meas = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(cliques, p["noisy"])]
        model = pj.estimate(domain, meas, "mirror_descent", iters=iters, total=total, dtype=dtype)
        jax.block_until_ready(model.potentials)
        fit_s = time.perf_counter() - t
        answer = model.marginal
    else:
        import warnings

        import jax

        jax.config.update("jax_enable_compilation_cache", False)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="JAX is running in float32")
            import mbi
        import jax.numpy as jnp
        from mbi import estimation

        names = list(p["domain"])
        domain = mbi.Domain(names, [p["domain"][a] for a in names])
        dtype = jnp.float64 if precision == "float64" else jnp.float32
        meas = [mbi.LinearMeasurement(jnp.asarray(y.ravel(), dtype), tuple(c), stddev=p["sigma"])
                for c, y in zip(cliques, p["noisy"])]
        model = estimation.MirrorDescent().estimate(domain, meas, known_total=total, iters=iters)
        jax.block_until_ready(model)
        fit_s = time.perf_counter() - t

        def answer(q):
            return np.asarray(model.project(tuple(q)).datavector(flatten=False))

    measured = [np.asarray(answer(c), np.float64) for c in cliques]
    asked = [np.asarray(answer(q), np.float64) for q in queries]
    loss = sum(0.5 * float((((m - y) / p["sigma"]) ** 2).sum()) for m, y in zip(measured, p["noisy"]))
    import jax

    np.savez(arrays, **{f"m{i}": m for i, m in enumerate(measured)}, **{f"q{i}": a for i, a in enumerate(asked)})
    return {"fit_s": fit_s, "loss": loss, "x64": bool(jax.config.jax_enable_x64),
            "finite": bool(all(np.isfinite(a).all() for a in measured + asked))}


ENGINES = ("pgmjax", "mbi")


def run_child(precision: str, problem_file: str, iters: int, timeout: float, folder: str) -> dict:
    """Both engines' fits in one fresh interpreter (:func:`child`; one start and one import of JAX for both):
    ``{engine: summary and arrays}``, or ``{engine: {"error": ...}}`` for each when the child failed."""
    import numpy as np

    result = os.path.join(folder, f"{precision}.json")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_ENABLE_X64"] = "1" if precision == "float64" else "0"
    cmd = [sys.executable, "-m", "bench.agreement", "--child", ",".join(ENGINES), precision, problem_file,
           str(iters), result]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {e: {"error": f"timed out after {timeout:g} s"} for e in ENGINES}
    if proc.returncode:
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        print(proc.stderr[-2000:], file=sys.stderr)
        return {e: {"error": last} for e in ENGINES}
    with open(result) as f:
        out = json.load(f)
    for engine in ENGINES:
        with np.load(f"{result}.{engine}.npz") as z:
            out[engine]["measured"] = [z[k] for k in sorted((k for k in z if k[0] == "m"), key=lambda k: int(k[1:]))]
            out[engine]["asked"] = [z[k] for k in sorted((k for k in z if k[0] == "q"), key=lambda k: int(k[1:]))]
    return out


def _l1(a, b, n) -> float:
    import numpy as np

    return float(np.abs(np.asarray(a) - np.asarray(b)).sum() / n)


def compare(name: str, iters: int, timeout: float, precisions) -> list[dict]:
    """Rows (one per precision) comparing pgmjax and mbi on problem ``name``."""
    import numpy as np

    from bench import problems as ep

    problem = ep.make(name)
    queries = unmeasured_queries(problem)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "problem.npz")
        ep.save(problem, path)
        # The queries ride along in the problem file (ep.load ignores the extra entry).
        with np.load(path) as f:
            arrays = {k: f[k] for k in f.files}
        np.savez(path, queries=np.array(json.dumps([list(q) for q in queries])), **arrays)
        n = float(problem["records"])
        fits = {precision: run_child(precision, path, iters, timeout, folder) for precision in precisions}
    # The reference for "who is off": the float64 fit (of either engine) with the lower loss, where run.
    done64 = {e: f for e, f in fits.get("float64", {}).items() if "error" not in f}
    ref_engine = min(done64, key=lambda e: done64[e]["loss"]) if done64 else None
    ref = done64.get(ref_engine)
    for precision in precisions:
        pair = fits[precision]
        row = {"problem": name, "precision": precision, "iters": iters, "records": problem["records"],
               "reference": None if ref_engine is None else f"{ref_engine} float64", "description": problem["description"], "queries": [list(q) for q in queries]}
        for e, fit in pair.items():
            row[e] = {k: fit[k] for k in ("fit_s", "loss", "finite", "error", "x64") if k in fit}
            if ref is not None and "error" not in fit:
                row[e]["unmeasured_vs_ref"] = max((_l1(x, y, n) for x, y in zip(fit["asked"], ref["asked"])), default=None)
        if all("error" not in f for f in pair.values()):
            a, b = pair["pgmjax"], pair["mbi"]
            per_query = [_l1(x, y, n) for x, y in zip(a["asked"], b["asked"])]
            row["unmeasured_each"] = per_query
            row["unmeasured"] = max(per_query) if per_query else None
            row["measured"] = max(_l1(x, y, n) for x, y in zip(a["measured"], b["measured"]))
            row["ok"] = row["unmeasured"] is not None and row["unmeasured"] < TOL
        else:
            row["ok"] = False
        print(json.dumps({k: v for k, v in row.items() if k not in ("description", "queries", "unmeasured_each")}),
              flush=True)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------- report
def _fmt(x, spec=".2e"):
    return "—" if x is None else format(x, spec)


#: An engine's fit counts as converged when its loss is within this (relative) of the lowest loss of the
#: problem's fits; an "unmeasured" disagreement between fits that are not both converged measures iteration
#: budgets, not maximum entropy.
CONVERGED = 1e-5


def _converged(rows: list[dict]) -> dict:
    """``{(problem, precision, engine): bool}``: the fit's loss within :data:`CONVERGED` of the lowest loss of
    any fit of its problem (either engine, either precision)."""
    best = {}
    for r in rows:
        for e in ENGINES:
            if r[e].get("loss") is not None:
                best[r["problem"]] = min(best.get(r["problem"], float("inf")), r[e]["loss"])
    return {(r["problem"], r["precision"], e): r[e].get("loss") is not None
            and r[e]["loss"] <= best[r["problem"]] * (1 + CONVERGED) for r in rows for e in ENGINES}


def markdown(data: dict) -> list[str]:
    """The results page."""
    lines = ["# Agreement with mbi 2.0: unmeasured marginals at convergence (issue 40)", ""]
    lines += schema.header_lines(schema.meta_of(data))
    if data.get("label"):
        lines += ["", f"**{data['label']}**"]
    lines += ["", "Mirror descent in both engines (default settings), identity measurements, the same noisy tables and "
              "the same total (the record count) for both. Distances are L1 over the total. *unmeasured*: the "
              f"largest over up to {PAIRS} random pairs and {TRIPLES} random triples inside no measured clique "
              f"(target < {TOL:g}); *measured*: the largest over the measured cliques (whether both fits reached "
              "the same marginals). Losses: 1/2 sum ((mu - y) / sigma)^2, float64, from each model's marginals.", "",
              "*pgmjax / mbi vs ref*: each engine's unmeasured answers against the reference, the float64 fit of "
              "the lower loss (*ref*), which tells which engine is off where they disagree.", "",
              f"*converged*: which engines' losses are within {CONVERGED:g} (relative) of the problem's lowest; where "
              "one is not, a disagreement measures its iteration budget, not maximum entropy.", "",
              "| problem | precision | iters | unmeasured | measured | ref | pgmjax vs ref | mbi vs ref | pgmjax loss "
              "| mbi loss | converged | pgmjax fit (s) | mbi fit (s) | ok |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    conv = _converged(data["rows"])
    for r in data["rows"]:
        done = [e for e in ENGINES if conv[(r["problem"], r["precision"], e)]]
        pg, mb = r["pgmjax"], r["mbi"]
        err = "; ".join(f"{e}: {r[e]['error']}" for e in ("pgmjax", "mbi") if "error" in r[e])
        lines.append(f"| {r['problem']} | {r['precision']} | {r['iters']:,} | {_fmt(r.get('unmeasured'))} | "
                     f"{_fmt(r.get('measured'))} | {r.get('reference') or '—'} | {_fmt(pg.get('unmeasured_vs_ref'))} | "
                     f"{_fmt(mb.get('unmeasured_vs_ref'))} | "
                     f"{_fmt(pg.get('loss'), ',.3f')} | {_fmt(mb.get('loss'), ',.3f')} | "
                     f"{'both' if len(done) == 2 else (done[0] + ' only' if done else 'neither')} | "
                     f"{_fmt(pg.get('fit_s'), '.1f')} | {_fmt(mb.get('fit_s'), '.1f')} | "
                     f"{'yes' if r['ok'] else 'NO' + (' (' + err + ')' if err else '')} |")
    lines += ["", "## Problems", ""]
    for name in dict.fromkeys(r["problem"] for r in data["rows"]):
        r = next(x for x in data["rows"] if x["problem"] == name)
        lines.append(f"* **{name}**: {r['description']}; queries: "
                     + ", ".join("(" + ",".join(q) + ")" for q in r["queries"]))
    for name, why in data.get("skipped", {}).items():
        lines.append(f"* **{name}**: skipped ({why})")
    if data.get("notes"):
        lines += ["", data["notes"]]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problems", nargs="+", default=None,
                   help=f"problems (default: {' '.join(FULL)}; --quick: {' '.join(QUICK)})")
    p.add_argument("--quick", action="store_true", help="one small loopy problem (seconds)")
    p.add_argument("--iters", type=int, default=None, help="iterations of every fit (default: by problem, ITERS)")
    p.add_argument("--precisions", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per fit (child process)")
    p.add_argument("--out", default=None, help="result name under bench/results/agreement/ (or a path): a .json "
                   "and a .md; without it the page is only printed")
    p.add_argument("--label", default="", help="a line under the header (e.g. 'before the fix of issue 40')")
    p.add_argument("--notes", default="", help="a paragraph appended to the Markdown")
    p.add_argument("--render", default=None, help="rewrite the .md beside this JSON from it (no fits)")
    p.add_argument("--child", nargs=5, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            data = json.load(f)
        if args.notes:
            data["notes"] = args.notes
        schema.write_page(args.render, markdown(data))
        return 0
    if args.child:
        engines, precision, path, iters, result = args.child
        child(engines.split(","), precision, path, int(iters), result)
        return 0
    names = args.problems or (QUICK if args.quick else FULL)
    t = time.perf_counter()
    rows = []
    failed = {}
    for name in names:
        try:
            rows += compare(name, args.iters or ITERS.get(name, 3000), args.timeout, args.precisions)
        except Exception as e:  # a problem that cannot be built (e.g. its dataset absent) skips, reported
            failed[name] = f"{type(e).__name__}: {e}"
            print(f"{name}: skipped: {failed[name]}", file=sys.stderr, flush=True)
    data = {"meta": schema.run_meta("bench.agreement", argv, extra=("mbi",)), "label": args.label,
            "notes": args.notes, "seconds": time.perf_counter() - t, "tolerance": TOL, "rows": rows, "skipped": failed}
    if args.out:
        schema.write_result("agreement", args.out, rows, data["meta"], page=markdown(data),
                            **{k: v for k, v in data.items() if k not in ("meta", "rows")})
    else:
        print("\n".join(markdown(data)))
    return 0 if rows and all(r["ok"] for r in rows) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
