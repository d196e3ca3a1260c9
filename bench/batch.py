"""Batched fits (``pgmjax.estimation.batch.estimate_batch``, one vmapped program) vs sequential ``pgmjax.estimate`` calls.

B noise draws of one measurement structure, fitted (a) by one ``estimate_batch`` call and (b) by B
``estimate`` calls, same method (mirror descent), iterations, chunking and dtype (float32). Problems:

* ``adult-mst``: Adult (``pj.datasets.load("adult")``), all 14 one-way marginals plus the 13 two-way
  marginals of a maximum spanning tree of the attribute graph weighted by the (true, non-private) mutual
  information: an MST-style measurement set. Gaussian noise sigma on every cell.
* ``chain-100``: the scalability problem at d = 100 (``bench.problems.markov_chain_problem``: identity
  measurements of the 98 consecutive triples of a 100-attribute chain, 10 values each, 10,000 records),
  its true counts plus Gaussian noise sigma.

Draw b of either problem adds ``numpy.random.default_rng(seed + b).normal(0, sigma)`` noise to the true
marginals (the same draws in both modes). Every (problem, mode) runs in a fresh interpreter: the first
call is timed with its compilation ("cold"), then the same call again ("warm": every program cached).
The fitted clique marginals of every draw are saved, and the parent reports the largest difference
between a batched member and its sequential fit (L1 over a model clique / total, max over cliques and
members), and the largest relative difference of the final losses.

    python -m bench engine batch      # bench/results/engine/batch_cpu.json and .md (--out NAME or a path)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

from bench import schema
from bench.benchutil import CompileEvents, timed
from bench.children import json_line
from bench.schema import cpu_model

PROBLEMS = ("adult-mst", "chain-100")
MODES = ("batched", "sequential")


def build(problem: str, batch: int, sigma: float, seed: int):
    """``(domain, cliques, members)``: B lists of Measurement (draw b: true marginals + N(0, sigma) noise)."""
    import numpy as np

    import pgmjax as pj

    if problem == "adult-mst":
        data = pj.datasets.load("adult")
        from bench.problems import chow_liu

        cliques = [(a,) for a in data.domain.attributes] + chow_liu(data)[0]
        domain, truth = data.domain, data.marginals(cliques)
    elif problem == "chain-100":
        from bench.problems import markov_chain_problem

        p = markov_chain_problem(100, sigma=sigma)
        domain, cliques, truth = pj.Domain(p["domain"]), p["cliques"], [np.asarray(t, np.float64) for t in p["true"]]
    else:
        raise ValueError(problem)
    members = []
    for b in range(batch):
        rng = np.random.default_rng(seed + b)
        members.append([pj.Measurement(c, t + rng.normal(0.0, sigma, t.shape), stddev=sigma) for c, t in zip(cliques, truth)])
    return domain, cliques, members


def batch_fitters(domain, members, iters, chunk, dtype=None):
    """Each mode's fit, as a function of no arguments returning ``pj.Fit``s (``(model, report)``): one for a batch,
    a list of B for the sequential fits."""
    import pgmjax as pj
    from pgmjax.estimation.batch import estimate_batch

    return {
        "batched": lambda: estimate_batch(domain, members, iters=iters, chunk=chunk, dtype=dtype, report=True),
        "batched-all": lambda: estimate_batch(domain, members, iters=iters, chunk=chunk, dtype=dtype, group=None,
                                              report=True),
        "sequential": lambda: [pj.estimate(domain, ms, iters=iters, chunk=chunk, dtype=dtype, report=True)
                               for ms in members],
    }


def fit_summary(result) -> dict:
    """Clique marginals ``(B, *shape)`` per model clique, losses, totals and oracle calls of either mode's result
    (a batch's ``pj.Fit``, or a list of one ``pj.Fit`` per member)."""
    import numpy as np

    if isinstance(result, list):
        margs = [f.model.clique_marginals() for f in result]
        return {"marginals": [np.stack([mg[c] for mg in margs]) for c in result[0].model.cliques],
                "losses": np.array([f.report.loss for f in result]), "totals": np.array([f.model.total for f in result]),
                "calls": np.array([f.report.history[-1]["oracle_calls"] for f in result])}
    model, report = result
    cm = model.clique_marginals()
    return {"marginals": [cm[c] for c in model.cliques], "losses": report.loss, "totals": model.total,
            "calls": np.asarray(report.history[-1]["oracle_calls"])}


def fit_agreement(a: dict, b: dict) -> dict:
    """L1 distance / total between the two modes' clique marginals (max over cliques; median and max over
    members) and the largest relative difference of the losses."""
    import numpy as np

    totals = b["totals"]
    per_member = np.max([np.abs(x - y).reshape(len(totals), -1).sum(1) / totals
                         for x, y in zip(a["marginals"], b["marginals"])], axis=0)
    return {"l1_over_n_median": float(np.median(per_member)), "l1_over_n_max": float(per_member.max()),
            "rel_loss_diff_max": float(np.max(np.abs(a["losses"] - b["losses"]) / np.abs(b["losses"]))),
            "same_oracle_calls": bool(np.array_equal(a["calls"], b["calls"]))}


def child(kind: str, problem: str, batch: int, iters: int, sigma: float, seed: int, chunk: int, repeats: int) -> dict:
    """``kind``: ``cold-batched`` / ``cold-sequential`` (the first call in this fresh process, compilation
    included) or ``warm`` (every mode compiled first by a short fit, then ``repeats`` rounds of the full fits,
    modes alternating; then the agreement checks)."""
    import jax
    import numpy as np

    compiles = CompileEvents(active=True).install().xla
    from pgmjax.estimation.batch import auto_group, make_batch_problem

    domain, cliques, members = build(problem, batch, sigma, seed)
    fits = batch_fitters(domain, members, iters, chunk)
    load = [os.getloadavg()[0]]
    out = {"problem": problem, "kind": kind, "batch": batch, "iters": iters, "chunk": chunk, "sigma": sigma,
           "measurements": len(cliques)}
    if kind.startswith("cold-"):
        mode = kind[len("cold-"):]
        seconds, result = timed(fits[mode])
        s = fit_summary(result)
        out.update({"mode": mode, "cold_s": seconds, "xla_compiles": len(compiles), "xla_compile_s": sum(compiles),
                    "oracle_calls_mean": float(np.mean(s["calls"])), "oracle_calls_max": int(np.max(s["calls"])),
                    "loss_mean": float(np.mean(s["losses"]))})
    else:
        problem_ = make_batch_problem(domain, members[:1])
        out["model_cells"] = int(sum(domain.size(c) for c in problem_.plan.cliques))
        out["model_cliques"] = len(problem_.plan.cliques)
        out["group"] = auto_group(make_batch_problem(domain, members))
        for f in batch_fitters(domain, members, chunk, chunk).values():  # compile every program (the chunk count is traced)
            f()
        n0 = len(compiles)
        order = list(fits)
        times = {m: [] for m in order}
        results = {}
        for r in range(repeats):
            for mode in (order if r % 2 == 0 else order[::-1]):
                seconds, results[mode] = timed(fits[mode])
                times[mode].append(seconds)
                load.append(os.getloadavg()[0])
        out["warm_s"] = times
        out["xla_compiles_warm"] = len(compiles) - n0
        summ = {m: fit_summary(v) for m, v in results.items()}
        out["agreement_float32"] = fit_agreement(summ["batched"], summ["sequential"])
        out["agreement_float32_all_vs_grouped"] = fit_agreement(summ["batched-all"], summ["batched"])
        # float64: the same fits up to rounding (float32 trajectories drift apart at the noise level)
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        k = min(8, batch)
        f64 = batch_fitters(domain, members[:k], min(iters, 100), chunk, jnp.float64)
        out["agreement_float64"] = fit_agreement(fit_summary(f64["batched"]()), fit_summary(f64["sequential"]()))
        out["agreement_float64"].update({"members": k, "iters": min(iters, 100)})
    load.append(os.getloadavg()[0])
    out["loadavg_1min"] = [min(load), max(load)]
    return out


def environment() -> dict:
    import jax
    import jaxlib

    # (date and commit come from schema.run_meta, which this record extends)
    dirty = schema.git("status", "--porcelain", "--", "pgmjax", "bench/batch.py")
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(), "backend": jax.default_backend(),
        "python": platform.python_version(), "jax": jax.__version__, "jaxlib": jaxlib.__version__,
        "dirty": bool(dirty),
    }


def render(res: dict) -> str:
    env, a = res.get("environment") or res["meta"], res["args"]
    lines = [
        "# Batched fits: `estimate_batch` (one vmapped program) vs sequential `estimate` calls",
        "",
        f"Machine: {env['cpu']}, {env['cores']} cores, backend {env['backend']}. Date: {env['date']}. "
        f"Commit: {env['commit'][:12]}{' (+ uncommitted changes)' if env['dirty'] else ''}.",
        f"Versions: Python {env['python']}, jax {env['jax']}, jaxlib {env['jaxlib']}.",
        "",
        f"{a['batch']} noise draws (Gaussian, sigma {a['sigma']:g}) of each problem; mirror descent, {a['iters']} "
        f"iterations, {a['chunk']}-iteration chunks, float32, in every mode. Times are for all {a['batch']} fits. "
        "Cold: the first call in a fresh process (tracing + XLA compilation + the fits). Warm: every program "
        f"compiled, then {a['repeats']} rounds of the modes in one process, alternating (best of the rounds; all "
        "rounds in the JSON). batched: `estimate_batch` with its default `group=\"auto\"` (members vectorised "
        "together, groups looped inside the one program); batched-all: `group=None`, all members in one "
        "vectorised group; sequential: one `estimate` per draw.",
        "",
        "| problem | measurements | model cells | group (auto) | mode | cold (s) | XLA compiles, compile s (cold) | warm (s), best | warm rounds (s) | speedup cold | speedup warm |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in schema.rows_of(res, "problems"):
        w, c = p["warm"], p["cold"]
        seq_cold, seq_warm = c["sequential"]["cold_s"], min(w["warm_s"]["sequential"])
        for mode in ("batched", "batched-all", "sequential"):
            times = w["warm_s"][mode]
            cold = c.get(mode)
            cold_cells = (f"{cold['cold_s']:.1f} | {cold['xla_compiles']}, {cold['xla_compile_s']:.1f}" if cold else "- | -")
            sp_cold = f"{seq_cold / cold['cold_s']:.2f}x" if cold and mode != "sequential" else ""
            sp_warm = f"{seq_warm / min(times):.2f}x" if mode != "sequential" else ""
            lines.append(
                f"| {p['problem']} | {w['measurements']} | {w['model_cells']:,} | {w['group']} | {mode} | {cold_cells} | "
                f"{min(times):.1f} | {', '.join(f'{t:.1f}' for t in times)} | {sp_cold} | {sp_warm} |"
            )
    lines += [
        "",
        "Agreement, batched member vs its own fit: L1 distance between clique marginals over the total (max over "
        "model cliques; median and max over members), largest relative loss difference, and whether every member "
        "made the same number of oracle calls (line-search trials).",
        "",
        "| problem | comparison | L1/N median | L1/N max | max rel. loss diff | same oracle calls |",
        "|---|---|---|---|---|---|",
    ]
    for p in schema.rows_of(res, "problems"):
        w = p["warm"]
        f64 = w["agreement_float64"]
        for label, ag in (
            (f"float32, {a['batch']} draws, batched vs sequential", w["agreement_float32"]),
            (f"float32, {a['batch']} draws, batched vs batched-all", w["agreement_float32_all_vs_grouped"]),
            (f"float64, first {f64['members']} draws, {f64['iters']} it., batched vs sequential", f64),
        ):
            lines.append(
                f"| {p['problem']} | {label} | {ag['l1_over_n_median']:.2e} | {ag['l1_over_n_max']:.2e} | "
                f"{ag['rel_loss_diff_max']:.2e} | {'yes' if ag['same_oracle_calls'] else 'no'} |"
            )
    loads = [x for p in schema.rows_of(res, "problems") for r in [p["warm"], *p["cold"].values()] for x in r["loadavg_1min"]]
    lines += ["", f"1-minute load average during the runs: {min(loads):.1f} to {max(loads):.1f} on {env['cores']} cores "
              f"(above {env['cores']}: other processes shared the CPU, and the times are noisier)."]
    if res.get("notes"):
        lines += ["", res["notes"]]
    return "\n".join(lines).rstrip() + "\n"


def _run_child(args, kind: str, prob: str) -> dict:
    cmd = [sys.executable, "-m", "bench.batch", "--child", kind, prob, str(args.batch), str(args.iters), str(args.sigma),
           str(args.seed), str(args.chunk), str(args.repeats)]
    r = json_line(cmd, f"child {kind} {prob}", env=dict(os.environ, JAX_PLATFORMS="cpu"), tail=None)
    print(json.dumps(r), flush=True)
    return r


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=PROBLEMS)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iters", type=int, default=500)
    p.add_argument("--chunk", type=int, default=50)
    p.add_argument("--sigma", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=2, help="warm rounds of every mode")
    p.add_argument("--out", default="batch_cpu", help="result name under bench/results/engine/ (or a path)")
    p.add_argument("--notes", default="", help="a paragraph appended to the Markdown")
    p.add_argument("--child", nargs=8, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        kind, prob, batch, iters, sigma, seed, chunk, repeats = args.child
        print(json.dumps(child(kind, prob, int(batch), int(iters), float(sigma), int(seed), int(chunk), int(repeats))))
        return

    res = {"meta": schema.run_meta("bench.batch", argv, also=environment()),
           "args": {k: v for k, v in vars(args).items() if k != "child"}, "rows": [], "notes": args.notes}
    for prob in args.problems:
        cold = {m: _run_child(args, f"cold-{m}", prob) for m in ("batched", "sequential")}
        warm = _run_child(args, "warm", prob)
        res["rows"].append({"problem": prob, "cold": cold, "warm": warm})
    schema.write_result("engine", args.out, res["rows"], res["meta"], page=render(res).splitlines(),
                        args=res["args"], notes=args.notes)


if __name__ == "__main__":
    main()
