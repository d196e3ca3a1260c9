"""MST and AIM on Adult, pgmjax vs mbi 2.0 (issue 5, MST/AIM part): 2-way TVD of the synthetic data and wall time.

For each mechanism (MST, AIM), each ``epsilon`` (default 0.3, 1, 3; ``delta = 1e-9``) and each seed,
pgmjax (:func:`pgmjax.mechanisms.spanning_tree.mst`, :func:`pgmjax.mechanisms.adaptive_iterative.aim`) and mbi 2.0
(``bench/mbi_mst_aim.py``: the same algorithm written on mbi's public API, since mbi 2.0 on PyPI
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

    PYTHONPATH=. python bench/mst_aim.py --mbi-python /work/venv-mbi/bin/python \\
        --out bench/results/mst_aim_cpu.json [--data /path/to/shared/data] \\
        [--eps 0.3 1 3] [--seeds 0] [--mechanisms mst aim] [--aim-rounds 224 --aim-max-model-size 80 ...]

``--merge OLD.json`` keeps the runs of an earlier results file (new runs replace equal keys), so a
grid can be filled in pieces; ``--render JSON`` only re-renders the Markdown next to it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchutil import cpu_model  # noqa: E402

DELTA = 1e-9


def _jax_setup():
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    return jax


# ----------------------------------------------------------------------------- problem
def prepare(data_folder, path: str) -> dict:
    """Write Adult's records and domain to ``path`` (npz) for the child processes."""
    import numpy as np

    import pgmjax as pj

    data = pj.datasets.load("adult", data_folder)
    csv, _ = pj.datasets.files("adult", data_folder)
    meta = {"dataset": "adult", "data_file": os.path.abspath(csv), "records": len(data), "domain": dict(data.domain)}
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

    from pgmjax.mechanisms.adaptive_iterative import aim
    from pgmjax.mechanisms.spanning_tree import mst

    data = _load(problem)
    t0 = time.perf_counter()
    if mechanism == "mst":
        res = mst(data, epsilon, DELTA, key=jax.random.key(seed), select_iters=s["mst_select_iters"],
                  engine_iters=s["mst_fit_iters"])
    else:
        res = aim(data, epsilon, DELTA, key=jax.random.key(seed), rounds=s["aim_rounds"],
                  max_model_mb=s["aim_max_model_size"], engine_iters=s["aim_max_iters"])
    wall = time.perf_counter() - t0
    np.savez(out, records=np.asarray(res.synthetic.records))
    info = res.info
    row = {
        "wall_s": wall,
        "seconds": info["seconds"],
        "total": info["total"],
        "rho": res.accountant.budget,
        "rho_spent": res.accountant.spent,
        "ledger_entries": len(res.ledger),
        "epsilon_spent": res.accountant.epsilon_delta()[0],
    }
    if mechanism == "mst":
        row["edges"] = [list(e) for e in info["edges"]]
        row["compressed_domain"] = dict(info["compressed_domain"])
    else:
        row.update(
            rounds=info["rounds"],
            rounds_run=info["rounds_run"],
            annealed=info["annealed"],
            selected=[list(c) for c in info["selected"]],
            model_mb=info["model_mb"],
            log=[{k: (list(v) if k == "clique" else v) for k, v in e.items()} for e in info["log"]],
        )
    pairs = list(itertools.combinations(data.domain.attributes, 2))
    from pgmjax.model.metrics import marginal_tvd

    row["tvd_model"] = marginal_tvd(data, res.model, pairs)
    return row


# ----------------------------------------------------------------------------- driver
def environment() -> dict:
    import importlib.metadata
    import platform

    def version(pkg):
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return None

    jax = _jax_setup()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": platform.python_version(),
        "pgmjax": version("pgmjax"),
        "jax": version("jax"),
        "jaxlib": version("jaxlib"),
        "numpy": version("numpy"),
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
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-5000:])
        raise RuntimeError(f"{label} failed (exit {proc.returncode})")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["process_wall_s"] = time.perf_counter() - t
    row["load_start"], row["load_end"] = list(load0), list(os.getloadavg())
    print(f"[{label}] done in {row['process_wall_s']:.1f} s", file=sys.stderr, flush=True)
    return row


def _score(problem: str, synth_path: str) -> float:
    import numpy as np

    import pgmjax as pj

    data = _load(problem)
    with np.load(synth_path) as z:
        synth = pj.Dataset(z["records"], data.domain)
    pairs = list(itertools.combinations(data.domain.attributes, 2))
    return pj.metrics.marginal_tvd(data, synth, pairs), len(synth)


def _key(r) -> str:
    return f"{r['library']}|{r['mechanism']}|{r['epsilon']:g}|{r['seed']}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=None, help="shared data folder (default: $PGMJAX_DATA or ../shared/data)")
    p.add_argument("--mbi-python", default=None, help="interpreter with mbi==2.0.0 installed (omit to skip mbi)")
    p.add_argument("--out", default=None, help="results JSON (the .md rendering goes next to it)")
    p.add_argument("--merge", default=None, help="an earlier results JSON whose runs are kept")
    p.add_argument("--eps", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--mechanisms", nargs="+", choices=("mst", "aim"), default=["mst", "aim"])
    p.add_argument("--libraries", nargs="+", choices=("pgmjax", "mbi"), default=["pgmjax", "mbi"])
    p.add_argument("--mst-select-iters", type=int, default=2500)
    p.add_argument("--mst-fit-iters", type=int, default=10000)
    p.add_argument("--aim-rounds", type=int, default=None, help="T (default 16 d = 224 on Adult)")
    p.add_argument("--aim-max-model-size", type=float, default=2.0, help="MB (reference 80)")
    p.add_argument("--aim-max-iters", type=int, default=200, help="per fit (reference 1000)")
    p.add_argument("--label", default="", help="a note on this run (e.g. the machine), stored and rendered")
    p.add_argument("--render", default=None, metavar="JSON", help="only re-render the Markdown of a results JSON")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--problem", default=None, help=argparse.SUPPRESS)
    p.add_argument("--synth-out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--mechanism", default=None, help=argparse.SUPPRESS)
    p.add_argument("--epsilon", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.render:
        with open(args.render) as f:
            md = render(json.load(f))
        with open(args.render.rsplit(".", 1)[0] + ".md", "w") as f:
            f.write(md)
        print(md)
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
    }
    if args.child:
        settings["aim_rounds"] = args.aim_rounds
        row = run_pgmjax(args.problem, args.synth_out, args.mechanism, args.epsilon, args.seed, settings)
        print(json.dumps(row))
        return

    try:
        pj.datasets.files("adult", args.data)
    except FileNotFoundError as e:
        print(f"skipping the MST/AIM benchmark: {e}", file=sys.stderr)
        return
    started = time.perf_counter()
    out = {"meta": environment(), "settings": settings, "label": args.label, "load_start": list(os.getloadavg())}
    runs = []
    if args.merge:
        with open(args.merge) as f:
            old = json.load(f)
        runs = old.get("runs", [])
        out["merged_from"] = {"file": args.merge, "meta": old.get("meta"), "settings": old.get("settings"),
                              "label": old.get("label")}
    workdir = tempfile.mkdtemp(prefix="pgmjax_mst_aim_")
    try:
        problem = os.path.join(workdir, "problem.npz")
        out["problem"] = prepare(args.data, problem)
        d = len(out["problem"]["domain"])
        rounds = args.aim_rounds or 16 * d
        settings["aim_rounds"] = rounds
        for mech, eps, seed, lib in itertools.product(args.mechanisms, args.eps, args.seeds, args.libraries):
            if lib == "mbi" and not args.mbi_python:
                continue
            synth = os.path.join(workdir, f"{lib}_{mech}_{eps:g}_{seed}.npz")
            rho = cdp_rho(eps, DELTA)
            common = ["--problem", problem, "--seed", str(seed)]
            if lib == "pgmjax":
                cmd = [sys.executable, os.path.abspath(__file__), "--child", *common, "--synth-out", synth,
                       "--mechanism", mech, "--epsilon", repr(eps),
                       "--mst-select-iters", str(args.mst_select_iters), "--mst-fit-iters", str(args.mst_fit_iters),
                       "--aim-rounds", str(rounds), "--aim-max-model-size", repr(args.aim_max_model_size),
                       "--aim-max-iters", str(args.aim_max_iters)]
            else:
                cmd = [args.mbi_python, os.path.join(HERE, "mbi_mst_aim.py"), *common, "--out", synth,
                       "--mechanism", mech, "--rho", repr(rho),
                       "--select-iters", str(args.mst_select_iters), "--fit-iters", str(args.mst_fit_iters),
                       "--rounds", str(rounds), "--max-model-size", repr(args.aim_max_model_size),
                       "--max-iters", str(args.aim_max_iters)]
            row = _child(cmd, f"{lib} {mech} eps={eps:g} seed={seed}")
            row.update(library=lib, mechanism=mech, epsilon=eps, seed=seed, rho_budget=rho, settings=dict(settings))
            row["tvd"], row["synthetic_records"] = _score(problem, synth)
            print(f"    TVD {row['tvd']:.4f}, wall {row['wall_s']:.0f} s", file=sys.stderr, flush=True)
            runs = [r for r in runs if _key(r) != _key(row)] + [row]
            out["runs"] = runs
            if args.out:  # save after every run: long grids survive an interruption
                os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
                with open(args.out, "w") as f:
                    json.dump(out, f, indent=1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out["runs"] = runs
    out["load_end"] = list(os.getloadavg())
    out["total_wall_s"] = time.perf_counter() - started
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
        md = render(out)
        with open(args.out.rsplit(".", 1)[0] + ".md", "w") as f:
            f.write(md)
        print(md)
    else:
        print(text)


# ----------------------------------------------------------------------------- rendering
def render(res: dict) -> str:
    meta, runs = res["meta"], res.get("runs", [])
    mbi_meta = next((r["meta"] for r in runs if r.get("library") == "mbi" and "meta" in r), None)
    s = res["settings"]
    lines = [
        "# MST and AIM on Adult: pgmjax vs mbi 2.0 (issue 5, MST/AIM part)",
        "",
        f"Machine: {meta['cpu']}, {meta['cores']} cores ({meta['cpu_affinity']} usable), backend {meta['backend']}. "
        f"Date: {meta['date']}." + (f" Note: {res['label']}." if res.get("label") else ""),
        f"Versions: Python {meta['python']}, pgmjax {meta['pgmjax']}, jax {meta['jax']}, numpy {meta['numpy']}"
        + (f"; mbi {mbi_meta['versions']['mbi']} (its venv: jax {mbi_meta['versions']['jax']}, numpy "
           f"{mbi_meta['versions']['numpy']})" if mbi_meta else "") + ".",
        f"Load average (1, 5, 15 min) at start {', '.join(f'{x:.2f}' for x in res['load_start'])}"
        + (f", at end {', '.join(f'{x:.2f}' for x in res['load_end'])}" if "load_end" in res else "")
        + ". **The machine is shared with other agents working at the same time**: wall times are indicative "
        "only (inflated, unevenly, by their load; the per-run load averages are in the JSON).",
        "",
        f"Data: Adult ({res['problem']['records']:,} records, {len(res['problem']['domain'])} attributes). "
        f"Privacy: (eps, delta = {s['delta']:g}) through rho = cdp_rho(eps, delta) zCDP, the same rho on both sides. "
        "Metric: mean over all 91 two-way marginals of the total variation distance between the synthetic "
        "data and the true data (`pgmjax.model.metrics.marginal_tvd`, same code for both libraries); lower is better. "
        "mbi 2.0 has no mechanism scripts: its side is `bench/mbi_mst_aim.py`, the same algorithm on mbi's "
        "public API. Each run is a fresh process (compilation included in the wall time). The two sides draw "
        "different noise (pgmjax: `jax.random.key(seed)`; mbi driver: `numpy.random.default_rng(seed)`).",
        "",
        f"Settings, identical on both sides: MST {s['mst_select_iters']} iterations for the one-way fit before "
        f"selection, {s['mst_fit_iters']} for the final fit (the reference's 2500 / 10,000 if unchanged). "
        f"AIM: workload {s['aim_workload']}; T = {s['aim_rounds']} rounds (reference 16 d = 224); "
        f"max_model_size {s['aim_max_model_size']:g} MB (reference 80, which takes hours); {s['aim_max_iters']} "
        "mirror-descent iterations per fit, warm-started (reference 1000), and as many for the final fit. "
        "Both engines in float32 (their default); synthetic data by each library's low-variance sampler "
        "(pgmjax `low_variance`, mbi `round`).",
        "",
        "| mechanism | eps | seed | pgmjax TVD | mbi TVD | pgmjax wall (s) | mbi wall (s) | pgmjax rounds run / annealed | mbi rounds run / annealed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by = {}
    for r in runs:
        by.setdefault((r["mechanism"], r["epsilon"], r["seed"]), {})[r["library"]] = r
    f4 = lambda x: "n/a" if x is None else f"{x:.4f}"  # noqa: E731
    f0 = lambda x: "n/a" if x is None else f"{x:,.0f}"  # noqa: E731
    for (mech, eps, seed) in sorted(by, key=lambda k: (k[0] != "mst", k[1], k[2])):
        pg, mb = by[(mech, eps, seed)].get("pgmjax"), by[(mech, eps, seed)].get("mbi")
        g = lambda r, k: None if r is None else r.get(k)  # noqa: E731
        rr = lambda r: "" if r is None or "rounds_run" not in r else f"{r['rounds_run']} / {r['annealed']}"  # noqa: E731
        lines.append(
            f"| {mech.upper()} | {eps:g} | {seed} | {f4(g(pg, 'tvd'))} | {f4(g(mb, 'tvd')) if mb else 'not run'} | "
            f"{f0(g(pg, 'wall_s'))} | {f0(g(mb, 'wall_s')) if mb else 'not run'} | {rr(pg)} | {rr(mb)} |"
        )
    seeds_of = {}
    for (mech, eps, seed), libs in by.items():
        for lib, r in libs.items():
            if r.get("tvd") is not None:
                seeds_of.setdefault((mech, eps, lib), []).append(r)
    if any(len(v) > 1 for v in seeds_of.values()):
        lines += [
            "",
            "Mean over seeds (± sample standard deviation; n seeds). `model TVD` is the fitted model's own 2-way "
            "error, without sampling noise.",
            "",
            "| mechanism | eps | library | n | synthetic-data TVD | model TVD | wall (s) |",
            "|---|---|---|---|---|---|---|",
        ]

        def ms(xs, fmt):
            xs = [x for x in xs if x is not None]
            if not xs:
                return "n/a"
            m = sum(xs) / len(xs)
            sd = (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 if len(xs) > 1 else float("nan")
            return f"{m:{fmt}} ± {sd:{fmt}}" if len(xs) > 1 else f"{m:{fmt}}"

        for (mech, eps, lib) in sorted(seeds_of, key=lambda k: (k[0] != "mst", k[1], k[2] != "pgmjax")):
            rs = seeds_of[(mech, eps, lib)]
            lines.append(
                f"| {mech.upper()} | {eps:g} | {lib} | {len(rs)} | {ms([r['tvd'] for r in rs], '.4f')} | "
                f"{ms([r.get('tvd_model') for r in rs], '.4f')} | {ms([r.get('wall_s') for r in rs], ',.0f')} |"
            )
    lines += [
        "",
        "Checks recorded per pgmjax run (JSON): the accountant's ledger spends exactly rho "
        "(`rho_spent == rho`), the (eps, delta) it reports, the selected edges / cliques, the per-round AIM log, "
        "and the model's own TVD (`tvd_model`, no sampling noise).",
    ]
    if res.get("merged_from"):
        lines += ["", f"Some runs come from an earlier file ({res['merged_from']['file']}); each run's settings are in the JSON."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
