"""Inference benchmark (issue 3): answering marginals and drawing synthetic data from a fitted Adult model.

One model, fitted once per engine to the *same* noisy measurements, then
asked the questions a user asks of a fitted model. pgmjax and (optionally)
mbi 2.0 each run in a fresh process, one after the other, on the same
machine; this driver prepares the problem, starts them and writes the
results (JSON, then a rendered Markdown table).

Problem. Adult (48,842 records, 14 attributes, shared data folder). The
model's cliques are the 14 one-way marginals and the 13 two-way marginals of
the Chow-Liu tree of the data (maximum spanning tree, ``networkx``, of the
pairwise mutual information of the true data; its edges are recorded). Each
of the 27 marginals is measured with i.i.d. Gaussian noise of standard
deviation ``sigma`` = 10 drawn by :func:`pgmjax.noisy_marginals` with
``jax.random.key(seed)``; the noisy tables go to both engines through one
``.npz`` file. Both fit by mirror descent (their defaults: float32, Armijo
line search) for 1000 iterations; the fit time (first call, compilation
included) and final loss ``1/2 sum ||(mu - y) / sigma||^2`` are recorded but
are not the focus.

Measured, per engine (wall clock, ``time.perf_counter``; every result is on
the host before the clock stops):

1. All 91 two-way marginals. pgmjax: one ``model.marginals(pairs)`` call,
   first (its compilation, and the model's one-off clique-marginal oracle
   call, included) and warm (median of ``repeats``); and a Python loop of
   ``model.marginal(pair)`` (first, compiling one program per pair, and warm
   median). mbi: a Python loop of ``model.project(pair)`` (first and warm
   median; out-of-model pairs go through its variable elimination).
   Checks (pgmjax): every answer sums to ``model.total``, and every pair
   inside a model clique equals the projection of that clique's marginal.
2. 1,000,000 synthetic records. pgmjax ``synthetic_data(n, key,
   method="exact" | "low_variance")``; mbi ``synthetic_data(n,
   method="sample" | "round")`` (its i.i.d. and its randomised-rounding
   counterparts); first call and warm median of ``synth_repeats``. Average
   TVD (:func:`pgmjax.model.metrics.marginal_tvd`) over the 91 pairs between the
   1M draw and the engine's own model, and between the draw and the true
   data (also: model vs data, and pgmjax model vs mbi model).
3. Peak memory of a 5,000,000-record draw (default methods: pgmjax exact,
   mbi round) in a fresh process that loads the saved model (pgmjax:
   ``model.save``/``load_model``; mbi: pickle): ``VmHWM`` (peak resident set)
   of ``/proc/self/status`` before the draw (interpreter, JAX, model) and
   after it, plus the size of the returned records.
4. Low-variance accuracy: ``n = round(model.total)`` records (mbi:
   ``int(total)``, its own rule); for every model clique, the largest
   absolute difference between the synthetic counts and the model's
   counts scaled to ``n``; per clique and the maximum, for the stratified
   method and the i.i.d. one.

Usage::

    python -m bench.inference --mbi-python /work/venv-mbi/bin/python \\
        --out bench/results/engine/inference_cpu.json

The Markdown rendering goes next to ``--out`` (same name, ``.md``).
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

from bench import schema
from bench.benchutil import median, proc_status, timed
from bench.children import child_command, json_line
from bench.problems import chow_liu
from bench.schema import cpu_model

# ----------------------------------------------------------------------------- helpers


def _pairs(attrs) -> list[tuple[str, str]]:
    return list(itertools.combinations(attrs, 2))


def _jax_setup():
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    return jax


def _load_problem(path: str) -> dict:
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        ys = [z[f"y_{i}"] for i in range(len(meta["cliques"]))]
        records = z["records"]
    meta["cliques"] = [tuple(c) for c in meta["cliques"]]
    meta["pairs"] = [tuple(p) for p in meta["pairs"]]
    return dict(meta, ys=ys, records=records)


# ----------------------------------------------------------------------------- problem
def prepare(data_folder, path: str, sigma: float, seed: int) -> dict:
    """Load Adult, build the Chow-Liu cliques and their noisy answers; write them to ``path`` (npz)."""
    import jax
    import numpy as np

    import pgmjax as pj

    data = pj.datasets.load("adult", data_folder)
    csv, _ = pj.datasets.files("adult", data_folder)
    edges, mi = chow_liu(data)
    attrs = list(data.domain.attributes)
    cliques = [(a,) for a in attrs] + edges
    measurements = pj.noisy_marginals(data, cliques, sigma, jax.random.key(seed))
    meta = {
        "dataset": "adult",
        "data_file": os.path.abspath(csv),
        "records": len(data),
        "domain": dict(data.domain),
        "tree_edges": [list(e) for e in edges],
        "tree_edge_mutual_information_nats": mi,
        "cliques": [list(c) for c in cliques],
        "pairs": [list(p) for p in _pairs(attrs)],
        "sigma": sigma,
        "noise_key": f"jax.random.key({seed})",
    }
    arrays = {f"y_{i}": np.asarray(m.y, np.float64) for i, m in enumerate(measurements)}
    np.savez(path, meta=json.dumps(meta), records=np.asarray(data.records), **arrays)
    return meta


# ----------------------------------------------------------------------------- pgmjax side
def run_pgmjax(problem_path: str, workdir: str, iters: int, repeats: int, synth_repeats: int, n_synth: int) -> dict:
    jax = _jax_setup()
    import numpy as np

    import pgmjax as pj
    from pgmjax.data.dataset import project_table

    p = _load_problem(problem_path)
    domain = pj.Domain(p["domain"])
    truth = pj.Dataset(p["records"], domain)
    measurements = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["ys"])]
    pairs = p["pairs"]
    out: dict = {"engine": "pgmjax", "iters": iters}

    # The fit (not the focus).
    t = time.perf_counter()
    model, report = pj.estimate(domain, measurements, iters=iters, method="mirror_descent", report=True)
    jax.block_until_ready(model.theta)
    out["fit_s"] = time.perf_counter() - t
    out["final_loss"] = report.loss
    out["total"] = model.total
    out["model_cliques"] = [list(c) for c in model.cliques]
    out["treewidth"] = int(model.junction_tree.treewidth)

    # 1. All 91 two-way marginals.
    first, answers = timed(lambda: model.marginals(pairs))
    warm = [timed(lambda: model.marginals(pairs))[0] for _ in range(repeats)]
    loop_first, loop_answers = timed(lambda: [model.marginal(q) for q in pairs])
    loop_warm = [timed(lambda: [model.marginal(q) for q in pairs])[0] for _ in range(repeats)]
    out["marginals"] = {
        "count": len(pairs),
        "batch_first_s": first,
        "batch_warm_s": median(warm),
        "batch_warm_samples_s": warm,
        "loop_first_s": loop_first,
        "loop_warm_s": median(loop_warm),
        "loop_warm_samples_s": loop_warm,
    }
    # Checks: totals, agreement of batch and loop, in-model pairs vs the clique marginals.
    sums = np.array([a.sum() for a in answers])
    clique_marg = model.clique_marginals()
    in_model = []
    for q, a in zip(pairs, answers):
        host = next((c for c in model.cliques if set(q) <= set(c)), None)
        if host is not None:
            in_model.append(float(np.abs(a - project_table(clique_marg[host], host, q)).max()))
    out["checks"] = {
        "max_rel_dev_of_sum_from_total": float(np.abs(sums / model.total - 1).max()),
        "max_abs_diff_batch_vs_loop": float(max(np.abs(a - b).max() for a, b in zip(answers, loop_answers))),
        "in_model_pairs": len(in_model),
        "max_abs_diff_in_model_pairs_vs_clique_marginals": max(in_model) if in_model else None,
    }
    out["checks"]["ok"] = bool(
        out["checks"]["max_rel_dev_of_sum_from_total"] < 1e-4
        and (not in_model or max(in_model) <= 1e-4 * model.total)
        and out["checks"]["max_abs_diff_batch_vs_loop"] <= 1e-4 * model.total
    )
    np.savez(os.path.join(workdir, "pgmjax_pairs.npz"), *answers)

    # 2. One million synthetic records, both methods.
    synth = {}
    for method in ("exact", "low_variance"):
        key = jax.random.key(1)
        f, draw = timed(lambda: model.synthetic_data(n_synth, key, method=method))
        w = [timed(lambda: model.synthetic_data(n_synth, key, method=method))[0] for _ in range(synth_repeats)]
        synth[method] = {
            "n": n_synth,
            "first_s": f,
            "warm_s": median(w),
            "warm_samples_s": w,
            "tvd_draw_vs_model": pj.metrics.marginal_tvd(model, draw, pairs),
            "tvd_draw_vs_data": pj.metrics.marginal_tvd(truth, draw, pairs),
        }
    out["synthetic"] = synth
    out["tvd_model_vs_data"] = pj.metrics.marginal_tvd(truth, model, pairs)

    # 4. Low-variance accuracy at n = round(total).
    n = int(round(model.total))
    acc = {"n": n}
    for method in ("low_variance", "exact"):
        draw = model.synthetic_data(n, jax.random.key(2), method=method)
        dev = {}
        for c in model.cliques:
            dev["|".join(sorted(c, key=domain.index))] = float(np.abs(draw.marginal(c) - clique_marg[c] * (n / model.total)).max())
        acc[method] = {"per_clique": dev, "max": max(dev.values())}
    out["low_variance_accuracy"] = acc

    model.save(os.path.join(workdir, "pgmjax_model"), report=report)
    out["peak_rss_mib_process"] = proc_status("VmHWM").get("VmHWM")
    return out


def run_pgmjax_memory(model_dir: str, n: int, method: str) -> dict:
    """Peak resident memory of one ``n``-record draw in this (fresh) process."""
    jax = _jax_setup()
    import pgmjax as pj

    model = pj.load_model(model_dir)
    before = proc_status("VmHWM", "VmRSS")
    t, draw = timed(lambda: model.synthetic_data(n, jax.random.key(3), method=method))
    after = proc_status("VmHWM", "VmRSS")
    return {
        "engine": "pgmjax",
        "n": n,
        "method": method,
        "seconds_first_call": t,
        "vmhwm_before_mib": before.get("VmHWM"),
        "vmrss_before_mib": before.get("VmRSS"),
        "vmhwm_after_mib": after.get("VmHWM"),
        "records_mib": draw.records.nbytes / 2**20,
    }


# ----------------------------------------------------------------------------- environment and driver
def environment() -> dict:
    import platform

    version = schema.version
    cpu = cpu_model()
    import jax

    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": platform.python_version(),
        "jax": version("jax"),
        "jaxlib": version("jaxlib"),
        "numpy": version("numpy"),
        "networkx": version("networkx"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
    }


def _child(cmd: list[str], label: str) -> dict:
    t = time.perf_counter()
    row = json_line(cmd, label, tail=None)  # a failure prints the child's stderr and raises ChildFailed
    row["process_wall_s"] = time.perf_counter() - t
    print(f"[{label}] done in {row['process_wall_s']:.1f} s", file=sys.stderr, flush=True)
    return row


def _cross_engine(problem: dict, workdir: str, mbi: dict) -> None:
    """TVDs of mbi's answers and draws, with the same metric code as pgmjax's."""
    import numpy as np

    import pgmjax as pj

    domain = pj.Domain(problem["domain"])
    truth = pj.Dataset(problem["records"], domain)
    pairs = problem["pairs"]

    class Tables:  # marginal_tvd only needs .marginals(cliques)
        def __init__(self, tables):
            self.tables = dict(zip(pairs, tables))

        def marginals(self, cliques):
            return [self.tables[tuple(c)] for c in cliques]

    with np.load(os.path.join(workdir, "pgmjax_pairs.npz")) as z:
        pg = Tables([z[f"arr_{i}"] for i in range(len(pairs))])
    with np.load(os.path.join(workdir, "mbi_pairs.npz")) as z:
        mb = Tables([z[f"arr_{i}"] for i in range(len(pairs))])
    mbi["tvd_model_vs_data"] = pj.metrics.marginal_tvd(truth, mb, pairs)
    mbi["tvd_mbi_model_vs_pgmjax_model"] = pj.metrics.marginal_tvd(pg, mb, pairs)
    for method, info in mbi["synthetic"].items():
        with np.load(os.path.join(workdir, f"mbi_synth_{method}.npz")) as z:
            draw = pj.Dataset(z["records"], domain)
        info["tvd_draw_vs_model"] = pj.metrics.marginal_tvd(mb, draw, pairs)
        info["tvd_draw_vs_data"] = pj.metrics.marginal_tvd(truth, draw, pairs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=None, help="shared data folder (default: $PGMJAX_DATA or ../shared/data)")
    p.add_argument("--mbi-python", default=None, help="interpreter with mbi==2.0.0 installed (omit to skip mbi)")
    p.add_argument("--out", default="inference_cpu", help="result name under bench/results/engine/ (or a path)")
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--sigma", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="warm repetitions for the marginals (median)")
    p.add_argument("--synth-repeats", type=int, default=3, help="warm repetitions for the draws (median)")
    p.add_argument("--n-synth", type=int, default=1_000_000)
    p.add_argument("--n-memory", type=int, default=5_000_000)
    p.add_argument("--render", default=None, metavar="JSON", help="only re-render the Markdown of a results JSON")
    p.add_argument("--child", choices=("pgmjax", "memory"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.render:
        with open(args.render) as f:
            schema.write_page(args.render, render(json.load(f)).splitlines())
        return
    if args.child == "pgmjax":
        row = run_pgmjax(os.path.join(args.workdir, "problem.npz"), args.workdir, args.iters, args.repeats,
                         args.synth_repeats, args.n_synth)
        print(json.dumps(row))
        return
    if args.child == "memory":
        print(json.dumps(run_pgmjax_memory(os.path.join(args.workdir, "pgmjax_model"), args.n_memory, "exact")))
        return

    import pgmjax as pj

    try:
        pj.datasets.files("adult", args.data)
    except FileNotFoundError as e:
        print(f"skipping the inference benchmark: {e}", file=sys.stderr)
        return
    started = time.perf_counter()
    out = {"meta": schema.run_meta("bench.inference", argv, extra=("mbi", "networkx"), also=environment()),
           "load_start": list(os.getloadavg())}
    out["meta"]["args"] = {k: v for k, v in vars(args).items() if k not in ("child", "workdir", "render")}
    workdir = tempfile.mkdtemp(prefix="pgmjax_inference_")
    try:
        problem_path = os.path.join(workdir, "problem.npz")
        out["problem"] = prepare(args.data, problem_path, args.sigma, args.seed)
        common = ["--workdir", workdir, "--iters", str(args.iters), "--repeats", str(args.repeats),
                  "--synth-repeats", str(args.synth_repeats), "--n-synth", str(args.n_synth),
                  "--n-memory", str(args.n_memory)]
        out["pgmjax"] = _child(child_command("bench.inference", "--child", "pgmjax", *common), "pgmjax")
        out["pgmjax"]["memory"] = _child(child_command("bench.inference", "--child", "memory", *common), "pgmjax memory")
        if args.mbi_python:
            mbi = _child(child_command("bench.mbi_inference", *common, python=args.mbi_python), "mbi")
            mbi["memory"] = _child(child_command("bench.mbi_inference", "--memory", *common, python=args.mbi_python),
                                   "mbi memory")
            out["meta"]["mbi"] = mbi.pop("meta")
            _cross_engine(_load_problem(problem_path), workdir, mbi)
            out["mbi"] = mbi
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out["load_end"] = list(os.getloadavg())
    out["total_wall_s"] = time.perf_counter() - started
    rows = [out.pop("pgmjax")] + ([out.pop("mbi")] if "mbi" in out else [])
    meta = out.pop("meta")
    schema.write_result("engine", args.out, rows, meta, page=render({"meta": meta, "rows": rows, **out}).splitlines(),
                        **out)


# ----------------------------------------------------------------------------- rendering
def _ms(s):
    return "n/a" if s is None else f"{s * 1e3:,.1f}"


def _s(s):
    return "n/a" if s is None else f"{s:,.2f}"


def _ratio(a, b):
    if not a or not b:
        return ""
    r = b / a
    return f"{r:.1f}x" if r >= 0.95 else f"{r:.2g}x"


def render(res: dict) -> str:
    meta, prob = res["meta"], res["problem"]
    if "rows" in res:  # bench.schema: the rows are pgmjax's and, where run, mbi's
        pg, mb = res["rows"][0], (res["rows"][1] if len(res["rows"]) > 1 else None)
    else:
        pg, mb = res["pgmjax"], res.get("mbi")
    mbi_ver = meta.get("mbi", {}).get("versions", {}).get("mbi") if mb else None
    lines = [
        "# Inference benchmark (issue 3): marginals and synthetic data from a fitted Adult model, pgmjax vs mbi 2.0",
        "",
        f"Machine: {meta['cpu']}, {meta['cores']} cores ({meta['cpu_affinity']} usable), backend {meta['backend']}. "
        f"Date: {meta['date']}.",
        f"Versions: Python {meta['python']}, jax {meta['jax']}, jaxlib {meta['jaxlib']}, numpy {meta['numpy']}, "
        f"networkx {meta['networkx']}" + (f"; mbi {mbi_ver} (its venv: jax {meta['mbi']['versions']['jax']}, "
                                          f"numpy {meta['mbi']['versions']['numpy']})" if mb else "") + ".",
        f"Load average (1, 5, 15 min) at start {', '.join(f'{x:.2f}' for x in res['load_start'])}, at end "
        f"{', '.join(f'{x:.2f}' for x in res['load_end'])}. **The machine is shared with other agents**: timings "
        "are indicative and can be inflated by their load. Whole run: "
        f"{res['total_wall_s']:.0f} s (fresh processes: pgmjax {pg['process_wall_s']:.0f} s, its memory run "
        f"{pg['memory']['process_wall_s']:.0f} s" + (f", mbi {mb['process_wall_s']:.0f} s, its memory run "
                                                     f"{mb['memory']['process_wall_s']:.0f} s" if mb else "") + ").",
        "",
        f"Problem: Adult ({prob['records']:,} records, {len(prob['domain'])} attributes). Model cliques: the 14 "
        f"one-way marginals and the {len(prob['tree_edges'])} edges of the Chow-Liu tree (maximum spanning tree of "
        f"the data's pairwise mutual information), each measured with Gaussian noise sigma {prob['sigma']:g} "
        f"({prob['noise_key']}); both engines get the same noisy tables. Mirror descent, "
        f"{pg['iters']} iterations, float32, each engine in a fresh process.",
        "",
        "Chow-Liu edges: " + ", ".join(f"{a}-{b}" for a, b in prob["tree_edges"]) + ".",
        "",
        "Times are wall clock; mbi / pgmjax > 1 means pgmjax is faster (or, for memory, uses less).",
        "",
        "| | pgmjax | mbi | mbi / pgmjax |",
        "|---|---|---|---|",
    ]

    def row(label, a, b, fmt, ratio=True):
        lines.append(f"| {label} | {fmt(a)} | {fmt(b) if mb else 'not run'} | {_ratio(a, b) if (mb and ratio) else ''} |")

    g = lambda d, *ks: _get(d, ks)  # noqa: E731
    row(f"fit, {pg['iters']} iterations, first call (s)", pg["fit_s"], g(mb, "fit_s"), _s)
    row("final loss", pg["final_loss"], g(mb, "final_loss"), lambda x: "n/a" if x is None else f"{x:,.1f}", False)
    row("91 two-way marginals, first call (ms)", pg["marginals"]["batch_first_s"], g(mb, "marginals", "loop_first_s"), _ms)
    row("91 two-way marginals, warm (ms)", pg["marginals"]["batch_warm_s"], g(mb, "marginals", "loop_warm_s"), _ms)
    row("  - as 91 single-marginal calls, first (ms)", pg["marginals"]["loop_first_s"], g(mb, "marginals", "loop_first_s"), _ms)
    row("  - as 91 single-marginal calls, warm (ms)", pg["marginals"]["loop_warm_s"], g(mb, "marginals", "loop_warm_s"), _ms)
    n = pg["synthetic"]["exact"]["n"]
    for pm, mm, label in (("exact", "sample", "i.i.d. (pgmjax exact / mbi sample)"),
                          ("low_variance", "round", "stratified (pgmjax low_variance / mbi round)")):
        row(f"{n:,} records, {label}, first (s)", pg["synthetic"][pm]["first_s"], g(mb, "synthetic", mm, "first_s"), _s)
        row(f"{n:,} records, {label}, warm (s)", pg["synthetic"][pm]["warm_s"], g(mb, "synthetic", mm, "warm_s"), _s)
    pm_, mm_ = pg["memory"], g(mb, "memory")
    lines.append(
        f"| {pm_['n']:,}-record draw in a fresh process: peak RSS (VmHWM) before / after (MiB) | "
        f"{pm_['vmhwm_before_mib']:,.0f} / {pm_['vmhwm_after_mib']:,.0f} ({pm_['method']}; {pm_['seconds_first_call']:.1f} s) | "
        + (f"{mm_['vmhwm_before_mib']:,.0f} / {mm_['vmhwm_after_mib']:,.0f} ({mm_['method']}; {mm_['seconds_first_call']:.1f} s)"
           if mm_ else "not run")
        + f" | {_ratio(pm_['vmhwm_after_mib'] - pm_['vmhwm_before_mib'], mm_['vmhwm_after_mib'] - mm_['vmhwm_before_mib']) if mm_ else ''} (increase) |"
    )
    lines.append(
        f"| records array of that draw (MiB) | {pm_['records_mib']:,.0f} | "
        + (f"{mm_['records_mib']:,.0f}" if mm_ else "not run") + " | |"
    )
    f4 = lambda x: "n/a" if x is None else f"{x:.4f}"  # noqa: E731
    row("mean TVD over the 91 pairs: model vs true data", pg["tvd_model_vs_data"], g(mb, "tvd_model_vs_data"), f4, False)
    for pm, mm, label in (("exact", "sample", "i.i.d."), ("low_variance", "round", "stratified")):
        row(f"mean TVD: {n:,} {label} records vs own model", pg["synthetic"][pm]["tvd_draw_vs_model"],
            g(mb, "synthetic", mm, "tvd_draw_vs_model"), f4, False)
        row(f"mean TVD: {n:,} {label} records vs true data", pg["synthetic"][pm]["tvd_draw_vs_data"],
            g(mb, "synthetic", mm, "tvd_draw_vs_data"), f4, False)
    acc_p, acc_m = pg["low_variance_accuracy"], g(mb, "low_variance_accuracy")
    f2 = lambda x: "n/a" if x is None else f"{x:.2f}"  # noqa: E731
    row(f"n = round(total) stratified records: max abs count deviation from the model, over model cliques",
        acc_p["low_variance"]["max"], g(acc_m, "round", "max"), f2, False)
    row(f"same for i.i.d. records", acc_p["exact"]["max"], g(acc_m, "sample", "max"), f2, False)
    lines.append("")
    if mb:
        lines.append(f"mbi's and pgmjax's fitted models differ by a mean TVD of {mb['tvd_mbi_model_vs_pgmjax_model']:.2e} "
                     "over the 91 pairs (same measurements, same algorithm family).")
        lines.append("")

    ck = pg["checks"]
    lines += [
        f"Checks (pgmjax, {pg['marginals']['count']} pairs): every answer sums to the model total (largest relative "
        f"deviation {ck['max_rel_dev_of_sum_from_total']:.1e}); the {ck['in_model_pairs']} pairs inside a model clique "
        f"equal that clique's marginal (largest absolute difference {ck['max_abs_diff_in_model_pairs_vs_clique_marginals']:.1e} "
        f"records); batch and loop agree ({ck['max_abs_diff_batch_vs_loop']:.1e}). Passed: {'yes' if ck['ok'] else '**no**'}.",
        "",
        "Per-clique max abs count deviation, n = round(total) records "
        f"(pgmjax n = {acc_p['n']:,}" + (f", mbi n = {acc_m['n']:,}" if acc_m else "") + "):",
        "",
        "| model clique | pgmjax low_variance | pgmjax exact |" + (" mbi round | mbi sample |" if acc_m else ""),
        "|---|---|---|" + ("---|---|" if acc_m else ""),
    ]
    for c in acc_p["low_variance"]["per_clique"]:
        cells = [f"{acc_p['low_variance']['per_clique'][c]:.2f}", f"{acc_p['exact']['per_clique'][c]:.2f}"]
        if acc_m:
            cells += [f2(acc_m["round"]["per_clique"].get(c)), f2(acc_m["sample"]["per_clique"].get(c))]
        lines.append(f"| {c.replace('|', ', ')} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Definitions. First call: the first call of that kind in the process (compilation included; for pgmjax's",
        "first marginals call also the model's one-off clique-marginal oracle call). Warm: median of "
        f"{meta['args']['repeats']} (marginals) or {meta['args']['synth_repeats']} (draws) later identical calls.",
        "pgmjax answers the 91 pairs in one compiled program (`model.marginals`); mbi has no batch call, so its",
        "row is a loop of `model.project(pair)` (out-of-model pairs by its variable elimination), the same loop",
        "as pgmjax's single-marginal rows. Memory: VmHWM (peak resident set) of a fresh process that loads the",
        "saved model (before) and then draws once (after); the increase bounds the draw's own working memory",
        "from below. TVD: mean over the 91 pairs of 0.5 * L1 between normalised tables (`pgmjax.model.metrics.marginal_tvd`,",
        "applied to both engines' outputs). Count deviation: |synthetic count - model count * n / total|, per cell.",
    ]
    return "\n".join(lines) + "\n"


def _get(d, keys):
    for k in keys:
        if d is None:
            return None
        d = d.get(k)
    return d


if __name__ == "__main__":
    main()
