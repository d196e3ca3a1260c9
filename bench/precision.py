"""float32 against float64 on every engine benchmark problem (``engine_problems.py``).

For each problem a fresh child process (x64 enabled, so both precisions run in one process on the same
measurements) fits the problem twice with the same method, iterations and chunking, once in float32 (the
default, and the GPU's precision) and once in float64, and compares:

* ``loss_rel``: ``|L32 - L64| / L64``, both losses recomputed in float64 NumPy from the returned models'
  clique marginals (``1/2 sum ((mu - y) / sigma)^2``), so the comparison does not trust either fit's own sum;
* ``marg_l1``: the largest, over the measured cliques, of ``||mu32 - mu64||_1 / N``;
* ``finite``: every float32 marginal finite, the fit raised nothing;
* ``same_potentials``: the float32 model's own potentials evaluated by the float64 oracle, its loss and
  marginals against the float32 oracle's (the error of float32 arithmetic alone, separated from the two
  fits taking different paths).

The targets are 1e-3 for both. Mirror descent (the default method) runs the engine benchmark's iterations
(1000, or 500 on the largest problems); its Armijo line search makes rounding-dependent choices, so the two
runs follow different paths and agree to the extent that both are near the optimum. Dual averaging, whose
step sizes do not depend on the iterates, follows the same path in both precisions and is run with
``--methods dual_averaging``.

Usage::

    python bench/precision.py --problems all --out bench/results/precision_cpu.json
    python bench/precision.py --problems chain10 titanic --methods mirror_descent dual_averaging --out /tmp/p.json
    python bench/precision.py --render bench/results/precision_cpu.json      # .md from the JSON only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchutil import proc_status  # noqa: E402

TOL = 1e-3


def child(args) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    import engine_problems as ep
    import jax.numpy as jnp
    import numpy as np

    import pgmjax as pj
    from engine import common_loss

    p = ep.load(args.problem_file)
    domain = pj.Domain(p["domain"])
    meas = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]
    out = {"problem": args.problem, "method": args.method, "iters": args.iters}
    tables = {}
    for name, dtype in (("float32", jnp.float32), ("float64", jnp.float64)):
        t = time.perf_counter()
        try:
            model = pj.estimate(domain, meas, args.method, iters=args.iters, dtype=dtype)
            mus = [np.asarray(m, np.float64) for m in model.marginals(p["cliques"])]
        except Exception as e:  # recorded: a float32 failure is the finding, not a crash of the benchmark
            out[name] = {"error": f"{type(e).__name__}: {e}", "seconds": time.perf_counter() - t}
            continue
        tables[name] = mus
        if name == "float32":
            # The float32 model's own potentials through the float64 oracle: float32 arithmetic alone, no path.
            same = model.plan.from_tables({c: np.asarray(t, np.float64) for c, t in model.potentials.items()}, jnp.float64)
            tables["same64"] = [np.asarray(m, np.float64) for m in pj.GraphicalModel(model.plan, same, model.total).marginals(p["cliques"])]
        out[name] = {
            "seconds": time.perf_counter() - t,
            "loss": common_loss(mus, p["noisy"], p["sigma"]),
            "reported_loss": float(model.loss),
            "finite": bool(all(np.all(np.isfinite(m)) for m in mus)),
            "total": float(model.total),
        }
    if "same64" in tables:
        n, l64 = out["float32"]["total"], common_loss(tables["same64"], p["noisy"], p["sigma"])
        out["same_potentials"] = {
            "loss_rel": abs(out["float32"]["loss"] - l64) / abs(l64),
            "marg_l1": max(float(np.abs(a - b).sum() / n) for a, b in zip(tables["float32"], tables["same64"])),
        }
    if "float32" in tables and "float64" in tables:
        l32, l64 = out["float32"]["loss"], out["float64"]["loss"]
        diffs = [np.abs(a - b).sum() / out["float64"]["total"] for a, b in zip(tables["float32"], tables["float64"])]
        worst = int(np.argmax(diffs))
        out.update(loss_rel=abs(l32 - l64) / abs(l64), marg_l1=float(diffs[worst]),
                   worst_clique=list(p["cliques"][worst]), float32_lower=bool(l32 < l64))
    out["peak_mib"] = proc_status("VmHWM").get("VmHWM")
    with open(args.result_file, "w") as f:
        json.dump(out, f)


def run_all(args) -> None:
    import engine_problems as ep

    import benchutil

    problems = list(ep.PROBLEMS) if args.problems == ["all"] else args.problems
    results = {"run": benchutil.run_record("precision.py"), "tolerance": TOL, "rows": []}
    if os.path.exists(args.out) and args.append:
        with open(args.out) as f:
            results["rows"] = [r for r in json.load(f)["rows"] if (r["problem"], r["method"]) not in
                               {(q, m) for q in problems for m in args.methods}]
    with tempfile.TemporaryDirectory() as tmp:
        for name in problems:
            path = os.path.join(tmp, f"{name}.npz")
            ep.save(ep.make(name), path)
            for method in args.methods:
                iters = args.iters or ep.ITERS.get(name, 1000)
                res = os.path.join(tmp, f"{name}-{method}.json")
                cmd = [sys.executable, __file__, "--child", "--problem", name, "--problem-file", path,
                       "--method", method, "--iters", str(iters), "--result-file", res]
                t = time.perf_counter()
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.cap)
                    row = json.load(open(res)) if proc.returncode == 0 else {
                        "problem": name, "method": method, "iters": iters,
                        "error": f"child exited {proc.returncode}: {proc.stderr[-2000:]}"}
                except subprocess.TimeoutExpired:
                    row = {"problem": name, "method": method, "iters": iters, "error": f"exceeded cap ({args.cap} s)"}
                row["child_wall_s"] = time.perf_counter() - t
                results["rows"].append(row)
                print(_line(row), flush=True)
                with open(args.out, "w") as f:
                    json.dump(results, f, indent=1)
    render(args.out)


def _line(r) -> str:
    if "loss_rel" not in r:
        return f"{r['problem']:>11} {r['method']:>15}: {r.get('error') or r.get('float32', {}).get('error')}"
    ok = "ok" if max(r["loss_rel"], r["marg_l1"]) <= TOL else "MISSED"
    return (f"{r['problem']:>11} {r['method']:>15}: loss32 {r['float32']['loss']:.6g} loss64 {r['float64']['loss']:.6g} "
            f"rel {r['loss_rel']:.2e}  L1/N {r['marg_l1']:.2e}  {ok}")


def render(path: str) -> None:
    with open(path) as f:
        res = json.load(f)
    run = res["run"]
    lines = [
        "# float32 vs float64 on the engine benchmark problems",
        "",
        f"Machine: {run['machine']['cpu']}, {run['machine']['cores']} cores, {run['machine'].get('backend', '')} "
        f"backend. Date: {run['date']}. Commit {run['commit']}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in run["versions"].items()) + ".",
        f"Command: `{run['command']}`.",
        *([run["note"]] if run.get("note") else []),
        "",
        "Each problem of `bench/engine_problems.py` (the same noisy measurements as `bench/engine.py`) fitted "
        "twice in one fresh process, float32 and float64, same method and iterations. Losses recomputed in "
        "float64 from each model's clique marginals; L1/N = the largest over the measured cliques of "
        f"||mu32 - mu64||_1 / N. Target: both within {res['tolerance']:g}.",
        "",
        "| problem | method | iters | loss float32 | loss float64 | relative difference | max L1/N | worst clique "
        "| same potentials: loss rel. / max L1/N | float32 finite | seconds f32 / f64 | within 1e-3 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        if "loss_rel" not in r:
            err = r.get("error") or r.get("float32", {}).get("error") or r.get("float64", {}).get("error")
            lines.append(f"| {r['problem']} | {r['method']} | {r['iters']} | - | - | - | - | - | - | - | - | "
                         f"**error**: {str(err)[:200]} |")
            continue
        ok = max(r["loss_rel"], r["marg_l1"]) <= res["tolerance"]
        sp = r.get("same_potentials")
        same = f"{sp['loss_rel']:.1e} / {sp['marg_l1']:.1e}" if sp else "-"
        lines.append(
            f"| {r['problem']} | {r['method']} | {r['iters']} | {r['float32']['loss']:,.3f} | "
            f"{r['float64']['loss']:,.3f} | {r['loss_rel']:.2e} | {r['marg_l1']:.2e} | {', '.join(r['worst_clique'])} "
            f"| {same} | {r['float32']['finite']} | {r['float32']['seconds']:.1f} / {r['float64']['seconds']:.1f} | "
            f"{'yes' if ok else '**no**'} |")
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", default=["all"])
    ap.add_argument("--methods", nargs="+", default=["mirror_descent"])
    ap.add_argument("--iters", type=int, default=0, help="iterations (default: the engine benchmark's)")
    ap.add_argument("--cap", type=float, default=1800.0, help="seconds per child process")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "precision_cpu.json"))
    ap.add_argument("--append", action="store_true", help="keep the rows of other problems/methods in --out")
    ap.add_argument("--render", metavar="JSON")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--problem", help=argparse.SUPPRESS)
    ap.add_argument("--problem-file", help=argparse.SUPPRESS)
    ap.add_argument("--method", help=argparse.SUPPRESS)
    ap.add_argument("--result-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.render:
        render(args.render)
    elif args.child:
        child(args)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
