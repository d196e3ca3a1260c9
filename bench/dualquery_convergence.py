"""DualQuery+PGM: how the +PGM arm's workload error depends on the engine's iteration budget.

Figure 1 (``bench.figure1``) fits DualQuery+PGM with 500 mirror-descent iterations; the 2019 example
script (private-pgm ``examples/dual_query.py``) ran 10,000. This study asks whether our smaller
DualQuery factors on Loans and Stroke come from stopping early: for each seed it plays the game once
(the same transcript, so the original arm is fixed), then continues the engine in warm-started blocks
(``pgmjax.estimate(warm_start=...)`` carries the potentials and the line search's step, so a block
continues the previous fit) and records, after every block, the transcript's negative log-likelihood and
the +PGM workload error. As references it records the original arm's error and that of the uniform
model with the right total (what the engine knows with no transcript at all), per clique.

Usage (from the repository root)::

    python -m bench papers dualquery_convergence --dataset stroke --seeds 0,1 --checkpoints 500,1000,2000,4000
    python -m bench papers dualquery_convergence --dataset titanic --seeds 0 --checkpoints 100,500 --tag cpu-quick

Outputs ``bench/results/papers/dualquery_convergence_<dataset>_<tag>.json`` and ``.md`` (``--out PREFIX`` overrides).
"""

from __future__ import annotations

import argparse
import time


from bench import figure1  # shared bench helpers: machine record, benchmark problem, writers
from bench import schema


def run_seed(data, workload, seed: int, checkpoints: list[int], settings: dict) -> dict:
    """One transcript, the engine continued block by block to each checkpoint."""
    import jax

    import pgmjax as pj
    from pgmjax.mechanisms.dual_query import dualquery

    t0 = time.perf_counter()
    res = dualquery(data, settings["epsilon"], settings["delta"], key=jax.random.key(seed), workload=workload,
                    eta=settings["eta"], samples=settings["samples"], engine_iters=checkpoints[0])
    transcript = res.info["transcript"]
    model = res.model
    rows = [{"iterations": checkpoints[0], "nll": float(model.loss), "seconds": res.info["seconds"]["fit"],
             **figure1.errors(workload, data, model)}]
    print(f"  seed {seed}: {checkpoints[0]} iterations, NLL {model.loss:.6g}, error {rows[-1]['paper']:.4g}", flush=True)
    for done, target in zip(checkpoints, checkpoints[1:]):
        t = time.perf_counter()
        model = pj.estimate(data.domain, [], iters=target - done, loss=transcript.loss(), total=len(data),
                            warm_start=model)
        rows.append({"iterations": target, "nll": float(model.loss), "seconds": time.perf_counter() - t,
                     **figure1.errors(workload, data, model)})
        print(f"  seed {seed}: {target} iterations, NLL {model.loss:.6g}, error {rows[-1]['paper']:.4g}", flush=True)
    uniform = pj.estimate(data.domain, [], iters=0, loss=transcript.loss(), total=len(data),
                          cliques=list(dict.fromkeys(workload.cliques)))
    return {
        "seed": seed,
        "rounds": res.info["rounds"],
        "eta_used": res.info["eta_used"],
        "original": figure1.errors(workload, data, res.original),
        "uniform": {"nll": float(uniform.loss), **figure1.errors(workload, data, uniform)},
        "checkpoints": rows,
        "seconds": time.perf_counter() - t0,
    }


def markdown(doc: dict) -> str:
    m = doc["machine"]
    s = doc["settings"]
    lines = [
        f"# DualQuery+PGM against the engine's iteration budget ({s['dataset']})",
        "",
        f"Date: {doc['started']} to {doc.get('finished', '(unfinished)')}. Machine: {m.get('cpu')}, {m.get('cpus')} CPUs, "
        f"backend {m.get('backend')}. Load average at start: {m.get('load_average_start')}. pgmjax commit "
        f"{(m.get('git_commit') or '')[:12]}{' (dirty tree)' if m.get('git_dirty') else ''}; jax {m['versions']['jax']}.",
        "",
        f"Setting: epsilon = {s['epsilon']}, delta = {s['delta']}, eta = {s['eta']}, s = {s['samples']}; the benchmark "
        "workload of Figure 1; error = workload error on the paper's scale (Section 5.1, with the 1/2). One transcript "
        "per seed; the engine (mirror descent) is continued in warm-started blocks up to each checkpoint. "
        "'uniform' = the model with the right total and no other information.",
        "",
        "| seed | iterations | transcript NLL | +PGM error | original error | uniform error | factor original / +PGM | block seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        for c in r["checkpoints"]:
            lines.append(f"| {r['seed']} | {c['iterations']} | {c['nll']:.6g} | {c['paper']:.4g} | {r['original']['paper']:.4g} | "
                         f"{r['uniform']['paper']:.4g} | {r['original']['paper'] / c['paper']:.2f} | {c['seconds']:.0f} |")
    lines += ["", "Per clique (paper scale), last checkpoint:", "",
              "| seed | clique | +PGM | original | uniform |", "|---|---|---|---|---|"]
    cliques = doc["settings"]["cliques"]
    for r in doc["runs"]:
        last = r["checkpoints"][-1]
        for i, cl in enumerate(cliques):
            lines.append(f"| {r['seed']} | {', '.join(cl)} | {last['per_query_paper'][i]:.4g} | "
                         f"{r['original']['per_query_paper'][i]:.4g} | {r['uniform']['per_query_paper'][i]:.4g} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="the shared data folder (default: pgmjax.datasets.data_dir())")
    p.add_argument("--dataset", default="stroke", choices=("titanic", "adult", "loans", "stroke"))
    p.add_argument("--seeds", default="0", help="comma-separated seeds")
    p.add_argument("--checkpoints", default="500,1000,2000,4000", help="increasing engine iteration counts")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-3)
    p.add_argument("--eta", type=float, default=2.0)
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--tag", default="cpu", help="output name dualquery_convergence_<dataset>_<tag>")
    p.add_argument("--out", default=None, help="output prefix (overrides --tag)")
    args = p.parse_args(argv)
    checkpoints = [int(x) for x in args.checkpoints.split(",")]
    if not checkpoints or checkpoints[0] < 1 or any(b <= a for a, b in zip(checkpoints, checkpoints[1:])):
        raise SystemExit(f"--checkpoints must be positive and increasing, got {args.checkpoints!r}")
    seeds = [int(x) for x in args.seeds.split(",")]

    data, workload, cliques, numeric = figure1.benchmark(args.dataset, args.data)
    settings = {"dataset": args.dataset, "epsilon": args.epsilon, "delta": args.delta, "eta": args.eta,
                "samples": args.samples, "seeds": seeds, "checkpoints": checkpoints, "cliques": cliques,
                "numeric": numeric, "command": schema.command("bench.dualquery_convergence", argv)}
    prefix = figure1.out_prefix(args, f"dualquery_convergence_{args.dataset}")
    doc = {"experiment": "DualQuery+PGM error against engine iterations", "started": figure1.now(),
           "meta": schema.run_meta("bench.dualquery_convergence", argv),
           "machine": figure1.machine(), "settings": settings, "runs": []}
    print(f"dualquery_convergence: {args.dataset}, seeds {seeds}, checkpoints {checkpoints} -> {prefix}.json/.md", flush=True)
    for seed in seeds:
        doc["runs"].append(run_seed(data, workload, seed, checkpoints, settings))
        figure1.write(prefix, doc, markdown(doc))
    doc["finished"] = figure1.now()
    figure1.write(prefix, doc, markdown(doc))


if __name__ == "__main__":
    main()
