"""MST and AIM on Adult, pgmjax vs mbi 2.0 (issue 5, MST/AIM part): 2-way TVD of the synthetic data and wall time.

For each mechanism (MST, AIM), each ``epsilon`` (default 0.3, 1, 3; ``delta = 1e-9``) and each seed,
pgmjax (:func:`pgmjax.mechanisms.spanning_tree.mst`, :func:`pgmjax.mechanisms.adaptive_iterative.aim`) and mbi 2.0
(``bench.mbi_mst_aim``: the same algorithm written on mbi's public API, since mbi 2.0 on PyPI
ships no mechanism scripts) each run in a fresh process, one after the other, with the same
budget ``rho = cdp_rho(epsilon, delta)`` and the same settings. Each writes its synthetic records;
this driver scores both with the same code: the average over all 91 two-way marginals of Adult of
the total variation distance between the synthetic data and the true data
(:func:`pgmjax.model.metrics.marginal_tvd`, the metric of the reference MST/AIM scripts). The noise
draws differ between the libraries (pgmjax: ``jax.random.key(seed)``; mbi driver:
``numpy.random.default_rng(seed)``), so single runs differ by noise as well as by engine.

Settings (the same on both sides; recorded in the JSON):

* MST: ``select_iters`` (one-way fit before the selection; reference 2500) and ``fit_iters``
  (final fit; reference 10,000).
* AIM: workload = all 2-way cliques with at most 10,000 cells, weight 1 (all 91 on Adult);
  ``rounds`` (``T``; reference ``16 d = 224``), ``max_model_size`` (MB; reference 80, which takes
  hours) and ``max_iters`` (per fit, warm-started; reference 1000). The final fit runs
  ``max_iters`` more iterations, as the reference.
* Both engines fit by mirror descent in float32 (their defaults); synthetic data: pgmjax
  ``low_variance`` (systematic sampling), mbi ``round`` (randomised rounding), each library's
  low-variance sampler and the reference scripts' choice.

Usage::

    python -m bench mechanisms mst_aim --mbi-python bench/mbi_lowmaps.sh \\
        --out mst_aim_cpu [--data /path/to/shared/data] \\
        [--eps 0.3 1 3] [--seeds 0] [--mechanisms mst aim] [--aim-rounds 224 --aim-max-model-size 80 ...]

``--datasets`` runs other tables than Adult (the shared ones by name, and ``generated``: a 9-column,
136,000-row table drawn from a random tree-structured model with up to 600 values per column, many
small cells; :func:`generated_table`). ``--libraries pgmjax_accelerated`` adds pgmjax's MST with
the accelerated mirror descent of :func:`pgmjax.estimate` (``fit_options=pj.FitOptions(method="mirror_descent")``)
instead of MST's default, the reference code's plain mirror descent: the ablation of issue 42 item 7.
The synthetic records are also scored on every one-way marginal (``tvd_1way``) and on up to
:data:`MAX_TRIPLES` three-way ones, evenly spread (``tvd_3way``, ``triples_scored``). Both sides also report the
fitted model's own 2-way TVD (``tvd_model``, over the original domain,
merged values spread uniformly), which splits the estimation error from the sampling error.

``--datasets generated30`` (or ``generated<d>``): the ``d``-column, 100,000-row table of
``bench.tables.load_table`` (columns of 2 to 40 values drawn from a random tree-structured model); ``wide<d>``:
its first ``d - 3`` columns and three near-duplicate 100-value timestamp columns (``bench.tables.with_timestamps``).

AIM's per-round trace (on by default; ``--no-trace`` turns it off; :mod:`bench.aim_trace`): for every round of
both sides, the seconds since the mechanism started (the trace's own evaluation taken out, and out of ``wall_s``
too) and the workload error of the model fitted so far (mean L1 / N over the workload's marginals,
``pgmjax.model.metrics.workload_error``, the same function for both sides), in each AIM run's ``trace``. mbi's AIM
takes minutes per round on Adult, so ``--mbi-max-rounds K`` and/or ``--mbi-time-limit S`` stop mbi's AIM after
round ``K``, or at the end of the first round after ``S`` seconds: such a run has no final fit and no synthetic
data (its TVD is n/a), says ``subset`` in its row and on the page, and is compared at round ``K``: pgmjax's time
and error at its round ``K`` against mbi's (``bench.aim_trace.speed_rows``), with pgmjax's full run beside, per
seed and as mean ± sd over ``--seeds``. The plots of workload error against time (one PNG per dataset and
epsilon, :mod:`bench.aim_trace_plot`) are written beside the result and linked from its page.

``--mechanisms tree_aim`` runs TreeAIM (:func:`pgmjax.mechanisms.tree_aim`, pgmjax only) at its defaults with the
MST settings' ``--mst-select-iters`` / ``--mst-fit-iters`` (``--tree-batches``, ``--tree-picks``,
``--tree-max-model-size`` change its own); ``bench.default_mechanism`` renders the three side by side.

``--merge OLD.json`` keeps the runs of an earlier results file (new runs replace equal keys), so a
grid can be filled in pieces; ``--render JSON`` only re-renders the Markdown next to it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import time

from bench import aim_trace, schema
from bench.tables import GENERATED, generated_table, is_generated, load_table
from bench.children import child_command, json_line
from bench.schema import cpu_model

DELTA = 1e-9


def _jax_setup():
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    return jax


# ----------------------------------------------------------------------------- problem
def prepare(data_folder, path: str, dataset: str = "adult") -> dict:
    """Write the dataset's records and domain to ``path`` (npz) for the child processes."""
    import numpy as np

    import pgmjax as pj

    if dataset == "generated":
        data = generated_table(**GENERATED)
        meta = {"dataset": dataset, "generator": dict(GENERATED), "records": len(data), "domain": dict(data.domain)}
    elif is_generated(dataset):

        data = load_table(dataset)
        meta = {"dataset": dataset, "generator": f"bench.tables.load_table({dataset!r})", "records": len(data),
                "domain": dict(data.domain)}
    else:
        data = pj.datasets.load(dataset, data_folder)
        csv, _ = pj.datasets.files(dataset, data_folder)
        meta = {"dataset": dataset, "data_file": os.path.abspath(csv), "records": len(data), "domain": dict(data.domain)}
    np.savez(path, meta=json.dumps(meta), records=np.asarray(data.records))
    return meta


def _load(path: str):
    import numpy as np

    import pgmjax as pj

    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        records = z["records"]
    return pj.Dataset(records, pj.Domain(meta["domain"]))


# ----------------------------------------------------------------------------- pgmjax side
def run_pgmjax(problem: str, out: str, mechanism: str, epsilon: float, seed: int, s: dict) -> dict:
    jax = _jax_setup()
    import numpy as np

    import pgmjax as pj
    from pgmjax.mechanisms.adaptive_iterative import aim
    from pgmjax.mechanisms.spanning_tree import mst

    data = _load(problem)
    trace = None
    t0 = time.perf_counter()
    if mechanism == "tree_aim":
        from pgmjax.mechanisms.tree_adaptive import tree_aim

        res = tree_aim(data, epsilon, DELTA, key=jax.random.key(seed), select_iters=s["mst_select_iters"],
                       engine_iters=s["mst_fit_iters"], max_model_mb=s.get("tree_max_model_size"),
                       compress=s.get("tree_compress", True), **_merged(s),
                       **({} if s.get("tree_merge") is None else {"merge": s["tree_merge"]}),
                       **{k: s[f"tree_{k}"] for k in ("batches", "picks") if s.get(f"tree_{k}") is not None})
    elif mechanism == "mst":
        options = pj.FitOptions(method=s["engine_method"]) if s.get("engine_method") else None
        res = mst(data, epsilon, DELTA, key=jax.random.key(seed), select_iters=s["mst_select_iters"],
                  engine_iters=s["mst_fit_iters"], fit_options=options, **_merged(s))
    else:
        options = dict(rounds=s["aim_rounds"], max_model_mb=s["aim_max_model_size"], engine_iters=s["aim_max_iters"])
        if s.get("trace"):
            from bench.aim_trace import traced_aim

            res, trace, wall = traced_aim(data, epsilon, DELTA, jax.random.key(seed), **options)
        else:
            res = aim(data, epsilon, DELTA, key=jax.random.key(seed), **options)
    if trace is None:
        wall = time.perf_counter() - t0
    np.savez(out, records=np.asarray(res.synthetic.records))
    info = res.info
    row = {
        "wall_s": wall,
        "seconds": info.seconds,
        "total": info.total,
        "rho": res.accountant.budget,
        "rho_spent": res.accountant.spent,
        "ledger_entries": len(res.ledger),
        "epsilon_spent": res.accountant.epsilon_delta()[0],
    }
    if mechanism in ("mst", "tree_aim"):
        from pgmjax.mechanisms.spanning_tree_options import MSTOptions
        from pgmjax.mechanisms.tree_aim_options import TreeAIMOptions

        default = (MSTOptions if mechanism == "mst" else TreeAIMOptions)().merged_values
        row["merged_values"] = s.get("merged_values") or default
        if mechanism == "tree_aim":
            row["merge"] = s.get("tree_merge") or TreeAIMOptions().merge
        row["edges"] = [list(e) for e in info.edges]
        row["compressed_domain"] = dict(info.compressed_domain)
    if mechanism == "tree_aim":
        row.update(selected=[list(c) for c in info.selected],
                   model_mb=info.model_mb,
                   **{k: info.budget.get(k) for k in ("tree_share", "batches", "picks")})
    elif mechanism == "aim":
        row.update(
            rounds=info.rounds,
            rounds_run=info.rounds_run,
            annealed=info.annealed,
            selected=[list(c) for c in info.selected],
            model_mb=info.model_mb,
            log=[{k: (list(v) if k == "clique" else v) for k, v in e.items()} for e in info.log],
        )
        if trace is not None:
            row.update(trace=trace, trace_eval_s=sum(p["eval_s"] for p in trace))
    pairs = list(itertools.combinations(data.domain.attributes, 2))
    from pgmjax.model.metrics import marginal_tvd

    try:  # the model's pair marginals across its cliques can outgrow memory (the child's is capped: CHILD_MEMORY)
        row["tvd_model"] = marginal_tvd(data, res.model, pairs)
    except (MemoryError, jax.errors.JaxRuntimeError) as e:
        row["tvd_model"], row["tvd_model_error"] = None, f"{type(e).__name__}: {str(e)[:300]}"
    return row


def _merged(s: dict) -> dict:
    """``merged_values=`` where the run names one (else the mechanism's default)."""
    return {} if s.get("merged_values") is None else {"merged_values": s["merged_values"]}


# ----------------------------------------------------------------------------- driver
def environment() -> dict:
    """What the result's ``meta`` (:func:`bench.schema.run_meta`, with the date and commit) records beside."""
    import platform

    jax = _jax_setup()
    return {
        "python": platform.python_version(),
        **{p: schema.version(p) for p in ("pgmjax", "jax", "jaxlib", "numpy")},
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def _child(cmd: list[str], label: str) -> dict:
    t = time.perf_counter()
    load0 = os.getloadavg()
    row = json_line(cmd, label, tail=5000)
    row["process_wall_s"] = time.perf_counter() - t
    row["load_start"], row["load_end"] = list(load0), list(os.getloadavg())
    print(f"[{label}] done in {row['process_wall_s']:.1f} s", file=sys.stderr, flush=True)
    return row


#: A child's address space is capped at this fraction of the machine's memory: an allocation past it fails
#: (a model's marginals across its cliques have asked for more than the machine has), where the kernel's
#: out-of-memory killer would end the child with nothing recorded.
CHILD_MEMORY = 0.75

#: At most this many 3-way marginals are scored (every ``k``-th triple in the domain's order, ``k`` fixed by the count).
MAX_TRIPLES = 500


def _score(problem: str, synth_path: str) -> dict:
    """The synthetic records' mean TVD over every one-way and two-way marginal and over up to :data:`MAX_TRIPLES`
    three-way ones (evenly spread over all of them), and their number."""
    import numpy as np

    import pgmjax as pj

    data = _load(problem)
    with np.load(synth_path) as z:
        synth = pj.Dataset(z["records"], data.domain)
    attrs = data.domain.attributes
    triples = list(itertools.combinations(attrs, 3))
    triples = triples[::max(1, -(-len(triples) // MAX_TRIPLES))]
    return {"tvd": pj.metrics.marginal_tvd(data, synth, list(itertools.combinations(attrs, 2))),
            "tvd_1way": pj.metrics.marginal_tvd(data, synth, [(a,) for a in attrs]),
            "tvd_3way": pj.metrics.marginal_tvd(data, synth, triples) if triples else None,
            "triples_scored": len(triples), "synthetic_records": len(synth)}


def _key(r) -> str:
    return f"{r.get('dataset', 'adult')}|{r['library']}|{r['mechanism']}|{r['epsilon']:g}|{r['seed']}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=None, help="shared data folder (default: $PGMJAX_DATA or ../shared/data)")
    p.add_argument("--mbi-python", default=None, help="interpreter with mbi==2.0.0 installed (omit to skip mbi)")
    p.add_argument("--out", default="mst_aim_cpu", help="result name under bench/results/mechanisms/ (or a path)")
    p.add_argument("--merge", default=None, help="an earlier results JSON whose runs are kept")
    p.add_argument("--eps", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--mechanisms", nargs="+", choices=("mst", "aim", "tree_aim"), default=["mst", "aim"])
    p.add_argument("--libraries", nargs="+", choices=("pgmjax", "pgmjax_accelerated", "mbi"), default=["pgmjax", "mbi"])
    p.add_argument("--datasets", nargs="+", default=["adult"], help="shared dataset names, or 'generated'")
    p.add_argument("--mst-select-iters", type=int, default=2500)
    p.add_argument("--mst-fit-iters", type=int, default=10000)
    p.add_argument("--aim-rounds", type=int, default=None, help="T (default 16 d = 224 on Adult)")
    p.add_argument("--aim-max-model-size", type=float, default=2.0, help="MB (reference 80)")
    p.add_argument("--aim-max-iters", type=int, default=200, help="per fit (reference 1000)")
    p.add_argument("--tree-batches", type=int, default=None, help="TreeAIM's batches (default: its own)")
    p.add_argument("--tree-picks", type=int, default=None, help="TreeAIM's picks per batch (default: its own)")
    p.add_argument("--tree-max-model-size", type=float, default=None,
                   help="TreeAIM's cap in MB (default: its own, pgmjax.mechanisms.tree_aim_shares.default_model_cap)")
    p.add_argument("--tree-compress", action=argparse.BooleanOptionalAction, default=True,
                   help="TreeAIM's domain compression (default: on, its own)")
    p.add_argument("--tree-merge", choices=("one", "runs"), default=None,
                   help="how TreeAIM's compression merges rare values (default: its own)")
    p.add_argument("--merged-values", choices=("uniform", "measured"), default=None,
                   help="how MST and TreeAIM spread merged values back (default: each mechanism's own: MST uniform, "
                        "TreeAIM measured)")
    p.add_argument("--trace", action=argparse.BooleanOptionalAction, default=True,
                   help="AIM: a point per round on both sides (seconds, workload error); --no-trace: none")
    p.add_argument("--mbi-max-rounds", type=int, default=None, metavar="K",
                   help="mbi's AIM stops after round K (a stated subset; compared with pgmjax at round K)")
    p.add_argument("--mbi-time-limit", type=float, default=None, metavar="S",
                   help="mbi's AIM stops at the end of the first round after S seconds (a stated subset)")
    p.add_argument("--label", default="", help="a note on this run (e.g. the machine), stored and rendered")
    p.add_argument("--render", default=None, metavar="JSON", help="only re-render the Markdown of a results JSON")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--problem", default=None, help=argparse.SUPPRESS)
    p.add_argument("--synth-out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--mechanism", default=None, help=argparse.SUPPRESS)
    p.add_argument("--epsilon", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--engine-method", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("mbi_max_rounds", "mbi_time_limit"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {value}")

    if args.render:
        with open(args.render) as f:
            schema.write_page(args.render, render(json.load(f), args.render).splitlines())
        return

    import pgmjax as pj
    from pgmjax.privacy import cdp_rho

    d = None
    settings = {
        "delta": DELTA,
        "mst_select_iters": args.mst_select_iters,
        "mst_fit_iters": args.mst_fit_iters,
        "aim_rounds": args.aim_rounds,
        "aim_max_model_size": args.aim_max_model_size,
        "aim_max_iters": args.aim_max_iters,
        "aim_workload": "all 2-way cliques with <= 10,000 cells, weight 1",
        "tree_batches": args.tree_batches,
        "tree_picks": args.tree_picks,
        "tree_max_model_size": args.tree_max_model_size,
        "tree_compress": args.tree_compress,
        "merged_values": args.merged_values,
        "tree_merge": args.tree_merge,
        "trace": args.trace,
        "mbi_max_rounds": args.mbi_max_rounds,
        "mbi_time_limit_s": args.mbi_time_limit,
    }
    if args.child:
        import resource

        cap = int(CHILD_MEMORY * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))  # a blow-up fails in the child, not the machine
        settings["aim_rounds"] = args.aim_rounds
        settings["engine_method"] = args.engine_method
        row = run_pgmjax(args.problem, args.synth_out, args.mechanism, args.epsilon, args.seed, settings)
        print(json.dumps(row))
        return

    try:
        for name in args.datasets:
            if name != "generated" and not is_generated(name):
                pj.datasets.files(name, args.data)
    except FileNotFoundError as e:
        print(f"skipping the MST/AIM benchmark: {e}", file=sys.stderr)
        return
    started = time.perf_counter()
    out = {"meta": schema.run_meta("bench.mst_aim", argv, extra=("mbi",), also=environment()), "settings": settings, "label": args.label, "load_start": list(os.getloadavg())}
    runs = []
    if args.merge:
        with open(args.merge) as f:
            old = json.load(f)
        runs = old.get("rows", old.get("runs", []))
        out["merged_from"] = {"file": args.merge, "meta": old.get("meta"), "settings": old.get("settings"),
                              "label": old.get("label")}
    workdir = tempfile.mkdtemp(prefix="pgmjax_mst_aim_")
    try:
        out["problems"] = dict(out.get("problems") or {})
        problems = {}
        for name in args.datasets:
            problems[name] = os.path.join(workdir, f"problem_{name}.npz")
            out["problems"][name] = prepare(args.data, problems[name], name)
        out["problem"] = out["problems"][args.datasets[0]]
        for dataset, mech, eps, seed, lib in itertools.product(args.datasets, args.mechanisms, args.eps, args.seeds,
                                                               args.libraries):
            if lib == "mbi" and not args.mbi_python:
                continue
            if lib == "pgmjax_accelerated" and mech != "mst":
                continue
            problem = problems[dataset]
            rounds = args.aim_rounds or 16 * len(out["problems"][dataset]["domain"])
            settings["aim_rounds"] = rounds
            synth = os.path.join(workdir, f"{dataset}_{lib}_{mech}_{eps:g}_{seed}.npz")
            rho = cdp_rho(eps, DELTA)
            common = ["--problem", problem, "--seed", str(seed)]
            if lib.startswith("pgmjax"):
                cmd = [*child_command("bench.mst_aim"), "--child", *common, "--synth-out", synth,
                       "--mechanism", mech, "--epsilon", repr(eps),
                       "--mst-select-iters", str(args.mst_select_iters), "--mst-fit-iters", str(args.mst_fit_iters),
                       "--aim-rounds", str(rounds), "--aim-max-model-size", repr(args.aim_max_model_size),
                       "--aim-max-iters", str(args.aim_max_iters)]
                cap = args.tree_max_model_size
                cmd += [] if cap is None else ["--tree-max-model-size", repr(cap)]
                cmd += [] if args.tree_batches is None else ["--tree-batches", str(args.tree_batches)]
                cmd += [] if args.tree_picks is None else ["--tree-picks", str(args.tree_picks)]
                cmd += [] if args.tree_compress else ["--no-tree-compress"]
                cmd += [] if args.merged_values is None else ["--merged-values", args.merged_values]
                cmd += [] if args.tree_merge is None else ["--tree-merge", args.tree_merge]
                if lib == "pgmjax_accelerated":
                    cmd += ["--engine-method", "mirror_descent"]
            else:
                cmd = [*child_command("bench.mbi_mst_aim", python=args.mbi_python), *common, "--out", synth,
                       "--mechanism", mech, "--rho", repr(rho),
                       "--select-iters", str(args.mst_select_iters), "--fit-iters", str(args.mst_fit_iters),
                       "--rounds", str(rounds), "--max-model-size", repr(args.aim_max_model_size),
                       "--max-iters", str(args.aim_max_iters)]
                if mech == "aim":
                    cmd += _mbi_aim_options(args)
            if lib.startswith("pgmjax"):
                cmd.append("--trace" if args.trace else "--no-trace")
            row = _child(cmd, f"{dataset} {lib} {mech} eps={eps:g} seed={seed}")
            row.update(dataset=dataset, library=lib, mechanism=mech, epsilon=eps, seed=seed, rho_budget=rho,
                       settings=dict(settings))
            if row.get("subset"):  # mbi ran its first rounds only: no final fit, no synthetic data
                row["tvd"], row["synthetic_records"] = None, None
                print(f"    subset: {row['rounds_run']} rounds of {row['rounds']} ({row['subset']['stopped_by']}), "
                      f"{row['subset']['seconds']:.0f} s", file=sys.stderr, flush=True)
            else:
                row.update(_score(problem, synth))
                print(f"    TVD {row['tvd']:.4f} (1-way {row['tvd_1way']:.4f}, 3-way "
                      f"{row['tvd_3way'] if row['tvd_3way'] is None else format(row['tvd_3way'], '.4f')}), "
                      f"wall {row['wall_s']:.0f} s", file=sys.stderr, flush=True)
            if row.get("trace"):
                last = row["trace"][-1]
                print(f"    trace: {len(row['trace'])} points, last {last['round']} at {last['seconds']:.1f} s, "
                      f"workload error {last['error']:.4f}", file=sys.stderr, flush=True)
            runs = [r for r in runs if _key(r) != _key(row)] + [row]
            out["runs"] = runs
            _write(args.out, out, quiet=True)  # after every run: long grids survive an interruption
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out["runs"] = runs
    out["load_end"] = list(os.getloadavg())
    out["total_wall_s"] = time.perf_counter() - started
    if any(r.get("trace") for r in runs):
        from bench.aim_trace_plot import plot

        for path in plot({"rows": runs, **out}, schema.result_path("mechanisms", args.out)):
            print(f"plot: {path}", file=sys.stderr)
    _write(args.out, out)


def _mbi_aim_options(args) -> list[str]:
    """The mbi driver's AIM options: its trace and the subset it runs."""
    out = ["--trace"] if args.trace else []
    if args.mbi_max_rounds is not None:
        out += ["--max-rounds", str(args.mbi_max_rounds)]
    if args.mbi_time_limit is not None:
        out += ["--time-limit", repr(args.mbi_time_limit)]
    return out


def _write(name: str, out: dict, quiet: bool = False) -> None:
    """The result through ``bench.schema``: the runs are its rows."""
    rest = {k: v for k, v in out.items() if k not in ("meta", "runs")}
    path = schema.result_path("mechanisms", name)
    schema.write_result("mechanisms", name, out["runs"], out["meta"], page=render(out, path).splitlines(), quiet=quiet,
                        **rest)


# ----------------------------------------------------------------------------- rendering
def render(res: dict, path: str | None = None) -> str:
    """The page; with ``path`` (the result's, any suffix) it links the trace plots found beside it."""
    meta, runs = res["meta"], res.get("rows", res.get("runs", []))
    mbi_meta = next((r["meta"] for r in runs if r.get("library") == "mbi" and "meta" in r), None)
    s = res["settings"]
    problems = res.get("problems") or {res["problem"]["dataset"]: res["problem"]}
    datasets = [name for name in problems if any(r.get("dataset", "adult") == name for r in runs)] or list(problems)
    data_text = "; ".join(f"{name} ({p['records']:,} records, {len(p['domain'])} attributes)" for name, p in problems.items()
                          if name in datasets)
    libraries = sorted({r["library"] for r in runs}, key=lambda x: ("pgmjax", "pgmjax_accelerated", "mbi").index(x))
    lines = [
        "# MST and AIM: pgmjax vs mbi 2.0 (issue 5, MST/AIM part; issue 42 item 7, MST accuracy)",
        "",
        f"Machine: {meta['cpu']}, {meta['cores']} cores ({meta['cpu_affinity']} usable), backend {meta['backend']}. "
        f"Date: {meta['date']}." + (f" Note: {res['label']}." if res.get("label") else ""),
        f"Versions: Python {meta['python']}, pgmjax {meta['pgmjax']}"
        + (f" (commit {meta['commit']})" if meta.get("commit") else "") + f", jax {meta['jax']}, numpy {meta['numpy']}"
        + (f"; mbi {mbi_meta['versions']['mbi']} (its venv: jax {mbi_meta['versions']['jax']}, numpy "
           f"{mbi_meta['versions']['numpy']})" if mbi_meta else "") + ".",
        f"Load average (1, 5, 15 min) at start {', '.join(f'{x:.2f}' for x in res['load_start'])}"
        + (f", at end {', '.join(f'{x:.2f}' for x in res['load_end'])}" if "load_end" in res else "")
        + ". **The machine is shared with other agents working at the same time**: wall times are indicative "
        "only (inflated, unevenly, by their load; the per-run load averages are in the JSON).",
        "",
        f"Data: {data_text}. "
        f"Privacy: (eps, delta = {s['delta']:g}) through rho = cdp_rho(eps, delta) zCDP, the same rho on both sides. "
        "Metric: mean over all two-way marginals of the total variation distance between the synthetic "
        "data and the true data (`pgmjax.model.metrics.marginal_tvd`, same code for both libraries); lower is better. "
        "mbi 2.0 has no mechanism scripts: its side is `bench/mbi_mst_aim.py`, the same algorithm on mbi's "
        "public API. Each run is a fresh process (compilation included in the wall time). The two sides draw "
        "different noise (pgmjax: `jax.random.key(seed)`; mbi driver: `numpy.random.default_rng(seed)`).",
        "",
        f"Settings, identical on both sides: MST {s['mst_select_iters']} iterations for the one-way fit before "
        f"selection, {s['mst_fit_iters']} for the final fit (the reference's 2500 / 10,000 if unchanged). "
        f"AIM: workload {s['aim_workload']}; T = {s['aim_rounds']} rounds (reference 16 d); "
        f"max_model_size {s['aim_max_model_size']:g} MB (reference 80, which takes hours); {s['aim_max_iters']} "
        "mirror-descent iterations per fit, warm-started (reference 1000), and as many for the final fit. "
        "Both engines in float32 (their default); synthetic data by each library's low-variance sampler "
        "(pgmjax `low_variance`, mbi `round`). `pgmjax` is MST as shipped (its fits by the reference code's plain "
        "mirror descent, `REFERENCE_MIRROR_DESCENT`); `pgmjax_accelerated` is the same run with pgmjax's accelerated "
        "mirror descent (`fit_options=pj.FitOptions(method=\"mirror_descent\")`, MST's fit before issue 42 item 7).",
        "",
        "| dataset | mechanism | eps | seed | " + " | ".join(f"{lib} TVD" for lib in libraries) + " | "
        + " | ".join(f"{lib} model TVD" for lib in libraries) + " | " + " | ".join(f"{lib} wall (s)" for lib in libraries) + " |",
        "|" + "---|" * (4 + 3 * len(libraries)),
    ]
    by = {}
    for r in runs:
        by.setdefault((r.get("dataset", "adult"), r["mechanism"], r["epsilon"], r["seed"]), {})[r["library"]] = r
    f4 = lambda x: "n/a" if x is None else f"{x:.4f}"  # noqa: E731
    f0 = lambda x: "n/a" if x is None else f"{x:,.0f}"  # noqa: E731
    order = lambda k: (datasets.index(k[0]) if k[0] in datasets else 99, k[1] != "mst", k[2], k[3])  # noqa: E731
    for key in sorted(by, key=order):
        libs = by[key]
        g = lambda lib, k: libs[lib].get(k) if lib in libs else None  # noqa: E731
        lines.append(
            f"| {key[0]} | {key[1].upper()} | {key[2]:g} | {key[3]} | " + " | ".join(f4(g(lib, "tvd")) for lib in libraries)
            + " | " + " | ".join(f4(g(lib, "tvd_model")) for lib in libraries) + " | "
            + " | ".join(f0(g(lib, "wall_s")) for lib in libraries) + " |"
        )

    def ms(xs, fmt):
        xs = [x for x in xs if x is not None]
        if not xs:
            return "n/a"
        m = sum(xs) / len(xs)
        sd = (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 if len(xs) > 1 else float("nan")
        return f"{m:{fmt}} ± {sd:{fmt}}" if len(xs) > 1 else f"{m:{fmt}}"

    groups = {}
    for (ds, mech, eps, seed), libs in by.items():
        for lib, r in libs.items():
            if r.get("tvd") is not None:
                groups.setdefault((ds, mech, eps, lib), []).append(r)
    if any(len(v) > 1 for v in groups.values()):
        lines += [
            "",
            "Mean over seeds (± sample standard deviation; n seeds). `model TVD` is the fitted model's own 2-way "
            "error (over the original domain, merged values spread uniformly), without sampling noise. "
            "`vs mbi` is the ratio of the means (synthetic-data TVD).",
            "",
            "| dataset | mechanism | eps | library | n | synthetic-data TVD | model TVD | vs mbi | wall (s) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for key in sorted(groups, key=lambda k: (*order(k[:3] + (0,))[:3], libraries.index(k[3]))):
            rs = groups[key]
            ref = groups.get(key[:3] + ("mbi",))
            mean = lambda rr: sum(r["tvd"] for r in rr) / len(rr)  # noqa: E731
            ratio = f"{mean(rs) / mean(ref):.3f}" if ref and key[3] != "mbi" else ""
            lines.append(
                f"| {key[0]} | {key[1].upper()} | {key[2]:g} | {key[3]} | {len(rs)} | {ms([r['tvd'] for r in rs], '.4f')} | "
                f"{ms([r.get('tvd_model') for r in rs], '.4f')} | {ratio} | {ms([r.get('wall_s') for r in rs], ',.0f')} |"
            )
    lines += [
        "",
        "Checks recorded per pgmjax run (JSON): the accountant's ledger spends exactly rho "
        "(`rho_spent == rho`), the (eps, delta) it reports, the selected edges / cliques, the per-round AIM log, "
        "and the model's own TVD (`tvd_model`, no sampling noise).",
    ]
    if res.get("merged_from"):
        lines += ["", f"Some runs come from an earlier file ({res['merged_from']['file']}); each run's settings are in the JSON."]
    for r in runs:  # a model's TVD scored after the run (its own scoring failed), with how
        if r.get("tvd_model_note"):
            lines += ["", f"{r['dataset']} {r['mechanism']} eps {r['epsilon']:g} seed {r['seed']}: {r['tvd_model_note']}"]
    lines += aim_trace.render(res, _plots_beside(path))
    return "\n".join(lines) + "\n"


def _plots_beside(path):
    """``png(dataset, eps)``: the plot's file name where it exists beside the result, else None."""
    if path is None:
        return None
    from bench.aim_trace_plot import png_name

    stem = os.path.splitext(path)[0]

    def png(dataset, eps):
        name = png_name(stem, dataset, eps)
        return name if os.path.exists(os.path.join(os.path.dirname(stem), name)) else None
    return png


if __name__ == "__main__":
    main()
