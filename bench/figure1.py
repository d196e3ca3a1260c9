"""Figure 1 of the ICML 2019 paper: four mechanisms with and without the graphical-model estimator.

McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential privacy",
ICML 2019 (arXiv 1901.09136), Section 6 / Figure 1, on the benchmark of its Section 5.1 (private-pgm
``examples/benchmarks.py``).

For each dataset (Titanic, Adult, Loans, Stroke; ``pgmjax.datasets.load``) the benchmark workload is the
15 three-way cliques of :func:`pgmjax.datasets.benchmark_cliques` with Prefix queries on the numeric
attributes of :data:`pgmjax.datasets.NUMERIC` and the identity on the others (``pgmjax.Workload.benchmark``).
Each mechanism runs at ``epsilon = 1`` (DualQuery: ``delta = 1e-3``), ``--runs`` seeds, and both of its
arms are evaluated on the *same* noisy measurements:

===========  ==================================  =================================================
mechanism    original arm                        +PGM arm
===========  ==================================  =================================================
MWEM         multiplicative weights on a         the engine, refitted every round (the arm that
             factored table (replays the          drives the selection; private-pgm's 2019
             transcript; refused above           ``examples/mwem.py``: single-query selection
             ``max_table_cells``: "infeasible")  over the workload's rows, bounded,
                                                 ``T = d`` rounds)
PrivBayes    noisy conditionals + sampling       the engine on the same noisy tables (bounded)
HDMM         local least squares (HDMM+LLS)      the engine on the same strategy answers (bounded;
                                                 OPT_+ strategy optimised once per dataset)
DualQuery    the transcript's records            the engine on the transcript's likelihood
===========  ==================================  =================================================

Error: the workload error of :func:`pgmjax.model.metrics.workload_error`, on the paper's scale (Section 5.1:
``||W mu - W mu_hat||_1 / (2 ||W mu||_1)`` averaged over the cliques; primary) and on the 2019 scripts' scale
(no 1/2; recorded too). The medians per (dataset, mechanism, arm) and the ratio ``original / +PGM`` are
set next to the improvement factors the paper reports (ICML 2019, Section 6).

Robustness: every (dataset, mechanism, run) is isolated: an exception is recorded with its traceback and the
script goes on; the JSON (every run, the machine, versions, settings) is rewritten after every run, so a
killed run leaves its data; the Markdown table and the plot are rewritten after every dataset and at the end.

Usage (the full experiment, on a GPU machine, from the repository root)::

    python -m bench papers figure1 --tag gpu                       # 4 datasets x 4 mechanisms x 5 runs
    python -m bench papers figure1 --quick --runs 1 --datasets titanic --tag cpu-quick   # smoke test
    python -m bench papers figure1 --datasets adult --mechanisms hdmm,privbayes --set hdmm.weights=equal
    python -m bench papers figure1 --merge bench/results/papers/figure1_a.json bench/results/papers/figure1_b.json --tag ab

Outputs ``bench/results/papers/figure1_<tag>.json``, ``.md`` and ``.png`` (``bench.schema``; or ``--out PREFIX``).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import os
import platform
import statistics
import time
import traceback

from bench import schema
from bench.schema import ROOT, cpu_model

DATASETS = ("titanic", "adult", "loans", "stroke")
MECHANISMS = ("mwem", "privbayes", "hdmm", "dualquery")
LABELS = {
    "mwem": ("MWEM", "MWEM+PGM"),
    "privbayes": ("PrivBayes", "PrivBayes+PGM"),
    "hdmm": ("HDMM+LLS", "HDMM+PGM"),
    "dualquery": ("DualQuery", "DualQuery+PGM"),
}

#: ICML 2019, Section 5.1: the number of queries of each dataset's workload, as the paper states it.
PAPER_QUERIES = {"titanic": 4851, "loans": 362201, "stroke": 17716}

#: ICML 2019, Section 6 / Figure 1: workload error without / with the engine, "improvement factors".
PAPER_FACTORS = {
    "privbayes": {"adult": "~1.3 (about 30% lower)", "loans": "6", "stroke": "7"},
    "dualquery": {"titanic": "1.2", "adult": "1.8", "loans": "3.5", "stroke": "4.4"},
    "hdmm": {"titanic": "6.6", "adult": "3.2", "loans": "27", "stroke": "6.3"},
    "mwem": {"titanic": "MWEM infeasible", "adult": "MWEM infeasible", "loans": "MWEM infeasible", "stroke": "both run"},
}

#: Settings per mechanism (the ICML 2019 experiment where it is known; see the module docstring).
#: ``--set mech.param=value`` overrides any of them; ``--pgm-iters`` overrides every ``engine_iters``.
SETTINGS = {
    "mwem": {
        "selection": "query",  # private-pgm's 2019 examples/mwem.py: one workload row per round (Prefix ranges
        # on numeric attributes)
        "bounded": True,  # N public, as in the 2019 script
        "noise": "laplace",
        "rounds": None,  # T = d
        "engine_iters": 1000,  # per round, warm-started
        "mw_iters": 1000,  # MW passes per round (the 2019 factored baseline's default)
        "max_model_mb": 25.0,  # the +PGM arm's model-size cap (private-pgm mechanisms/mwem+pgm.py's default)
        # The MW arm (NumPy, on the host) runs only if rounds x mw_iters x (its factored table's cells) is at
        # most this many cell-updates; above it, it would run for hours (measured ~1.5e7 cell-updates/s on a
        # loaded 2-core host): the paper's "fails (memory/time)". Gives mwem's max_table_cells (at most 2^28);
        # --set mwem.max_table_cells=N fixes the cap instead.
        "mw_work_limit": 1e10,
        "synthetic": False,
    },
    "privbayes": {"bounded": True, "score": "R", "beta": 0.3, "theta": 4.0, "engine_iters": 1000},
    "hdmm": {
        "bounded": True,
        "noise": "laplace",
        "strategy": "opt+",  # optimised once per dataset (key 0) and reused by every run
        "weights": "opt",  # "equal" reproduces the 2019 script's equal weights
        "restarts": 8,
        # The strategy fit (small L-BFGS problems in while-loops, once per dataset) runs on the host's CPU
        # backend, where its many tiny steps are cheaper than kernel launches; "default" = JAX's default device.
        "strategy_device": "cpu",
        "engine_iters": 1000,  # the 2019 run used 10,000: --set hdmm.engine_iters=10000
        # --set hdmm.loss='"l1"' fits the +PGM arm on the L1 loss (ICML 2019, Appendix D.1); default: L2
        "max_table_cells": 2**24,
        "synthetic": False,
    },
    "dualquery": {"eta": 2.0, "samples": 50, "engine_iters": 1000},
}

QUICK = {  # --quick: tiny settings to validate the pipeline end to end (not results)
    "mwem": {"rounds": 3, "engine_iters": 50, "mw_iters": 20},
    "privbayes": {"engine_iters": 50},
    "hdmm": {"restarts": 2, "engine_iters": 50},
    "dualquery": {"samples": 10, "engine_iters": 50},
}


# ----------------------------------------------------------------------------- environment and files


def machine() -> dict:
    """Host, devices, versions and load, for the record."""
    import jax
    import numpy as np
    import scipy

    import pgmjax

    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "device_kinds": sorted({getattr(d, "device_kind", "") for d in jax.devices()}),
        "versions": {
            "python": platform.python_version(),
            "jax": jax.__version__,
            "jaxlib": getattr(__import__("jaxlib"), "__version__", ""),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "pgmjax": getattr(pgmjax, "__version__", ""),
        },
        "git_commit": schema.git("rev-parse", "HEAD"),
        "git_dirty": bool(schema.git("status", "--porcelain", "--untracked-files=no")),
        "load_average_start": load,
    }


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _jsonable(x):
    """Numbers, strings, lists and dicts only (NumPy scalars and arrays, tuples, inf/nan made JSON-safe)."""
    import numpy as np

    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    return repr(x)


def write(prefix: str, doc: dict, page: str) -> None:
    """A result document (``runs`` its rows, ``meta`` from :func:`bench.schema.run_meta`, the rest as it is)
    and its page, through :func:`bench.schema.write_result` (the papers suite)."""
    d = _jsonable(doc)
    schema.write_result("papers", prefix, d.pop("runs"), d.pop("meta"), page=page.splitlines(), quiet=True, **d)


def read(path: str) -> dict:
    """A result document as this module holds it (``runs``), from its JSON (either schema)."""
    with open(path) as f:
        doc = json.load(f)
    if "rows" in doc:
        doc["runs"] = doc.pop("rows")
    return doc


def out_prefix(args, name: str) -> str:
    prefix = schema.result_path("papers", args.out or f"{name}_{args.tag}")
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    return prefix


def parse_sets(items) -> dict:
    """``["hdmm.weights=equal", "mwem.rounds=14"]`` -> ``{"hdmm": {"weights": "equal"}, "mwem": {"rounds": 14}}``."""
    out: dict = {}
    for item in items or []:
        name, _, value = item.partition("=")
        mech, _, param = name.partition(".")
        if not param or not _:
            raise SystemExit(f"--set expects mechanism.parameter=value, got {item!r}")
        try:
            v = json.loads(value)
        except json.JSONDecodeError:
            v = value
        out.setdefault(mech, {})[param] = v
    return out


# ----------------------------------------------------------------------------- benchmark problem


def benchmark(name: str, data_dir: str | None, workload_seed: int = 0):
    """``(data, workload, cliques, numeric)`` of the ICML 2019 benchmark on one dataset (``workload_seed``: the
    draw of the random cliques, :func:`pgmjax.datasets.benchmark_cliques`; Adult's are published)."""
    import pgmjax as pj

    data = pj.datasets.load(name, data_dir)
    cliques = pj.datasets.benchmark_cliques(name, data.domain, seed=workload_seed)
    numeric = [a for a in pj.datasets.NUMERIC.get(name, ()) if a in data.domain]
    return data, pj.Workload.benchmark(data.domain, cliques, numeric), cliques, numeric


def errors(workload, data, arm) -> dict:
    """Workload error on both scales (and per clique, paper scale)."""
    import pgmjax as pj

    paper, per = pj.metrics.workload_error(workload, data, arm, per_query=True)
    return {"paper": paper, "script": pj.metrics.workload_error(workload, data, arm, scale="script"), "per_query_paper": per}


def measured_queries(domain, measurements):
    """The queries a run measured, as a workload (Kronecker factors per clique; a plain marginal where a
    measurement has none): what "the error on the measurements" is computed over."""
    import pgmjax as pj

    return pj.Workload(domain, [(m.clique, None if m.query is None else list(m.query)) for m in measurements])


def run_one(mech: str, data, workload, settings: dict, seed: int, epsilon: float, delta: float, cache: dict) -> dict:
    """Run one mechanism once; return its arms' errors, times and notes (exceptions propagate)."""
    import jax

    import pgmjax as pj
    from pgmjax.mechanisms import hdmm, hdmm_strategy
    from pgmjax.mechanisms.bayesian_network import privbayes
    from pgmjax.mechanisms.dual_query import dualquery
    from pgmjax.mechanisms.multiplicative_weights import mwem

    kw = dict(settings)
    key = jax.random.key(seed)
    rec: dict = {}
    t0 = time.perf_counter()
    if mech == "mwem":
        limit = kw.pop("mw_work_limit", None)
        if "max_table_cells" not in kw and limit is not None:
            rounds = kw.get("rounds") or len(data.domain)
            kw["max_table_cells"] = max(1, min(2**28, int(limit / (rounds * kw.get("mw_iters", 1000)))))
        rec["mw_max_table_cells"] = kw.get("max_table_cells")
        res = mwem(data, epsilon, key=key, workload=workload, **kw)
        rec["rounds"] = res.info.rounds
        rec["selected"] = res.info.selected
        rec["mw_table_cells"] = res.info.mw_table_cells
        rec["model_mb"] = res.info.log[-1]["model_mb"] if res.info.log else None
    elif mech == "privbayes":
        res = privbayes(data, epsilon, key=key, **kw)
        rec["network"] = res.info.network
        rec["cliques"] = res.info.cliques
    elif mech == "hdmm":
        device = kw.pop("strategy_device", "cpu")
        if isinstance(kw.get("strategy"), str):
            skey = ("hdmm-strategy", kw["strategy"], kw.get("weights", "opt"), kw.get("noise", "laplace"), kw.get("restarts", 8))
            if skey not in cache:  # data-independent: once per dataset
                t = time.perf_counter()
                with jax.default_device(jax.devices("cpu")[0] if device == "cpu" else jax.devices()[0]):
                    S, info = hdmm_strategy(workload, jax.random.key(0), strategy=kw["strategy"], weights=kw.get("weights", "opt"),
                                            noise=kw.get("noise", "laplace"), restarts=kw.get("restarts", 8))
                cache[skey] = (S, info, time.perf_counter() - t)
            S, info, t_opt = cache[skey]
            kw["strategy"] = S
            rec["strategy_seconds"] = t_opt
            rec["strategy_template"] = info["template"]
            rec["strategy_loss"] = info["loss"]
        loss = kw.pop("loss", None)  # Appendix D.1: the +PGM arm's fit on the L1 loss ("l1") instead of L2
        if loss is not None:
            kw["fit_options"] = pj.FitOptions(loss=loss)
            rec["loss"] = loss
        res = hdmm(data, epsilon, key=key, workload=workload, **kw)
        rec["strategy_weights"] = res.info.strategy_record.get("weights")
        rec["strategy_factor_shapes"] = res.info.strategy_record.get("factor_shapes")
        rec["noise_scale"] = res.info.noise_scale
        rec["expected_error_per_query"] = res.info.expected_error_per_query
        rec["global_least_squares_error"] = res.info.global_least_squares_error
    elif mech == "dualquery":
        res = dualquery(data, epsilon, delta, key=key, workload=workload, **kw)
        rec["rounds"] = res.info.rounds
        rec["eta_used"] = res.info.eta_used
    else:
        raise ValueError(f"unknown mechanism {mech!r}")
    rec["seconds"] = time.perf_counter() - t0
    rec["mechanism_seconds"] = getattr(res.info, "seconds", None)  # PrivBayes keeps no timer
    rec["privacy_spent"] = res.accountant.spent
    rec["privacy_budget"] = res.accountant.budget
    rec["ledger_entries"] = len(res.ledger)
    arms = {}
    t1 = time.perf_counter()
    arms["pgm"] = {"status": "ok", **errors(workload, data, res.model)}
    if res.original is not None:
        arms["original"] = {"status": "ok", **errors(workload, data, res.original)}
    else:
        arms["original"] = {"status": "infeasible", "reason": res.original_error}
    if mech == "hdmm" and res.info.global_least_squares is not None:
        arms["global"] = {"status": "ok", **errors(workload, data, res.info.global_least_squares)}
    if mech == "hdmm":  # Figure 2a's second panel: each arm's error on the strategy's own (measured) queries
        measured = measured_queries(data.domain, res.measurements)
        for arm, estimate in (("pgm", res.model), ("original", res.original),
                              ("global", res.info.global_least_squares)):
            if arms.get(arm, {}).get("status") == "ok":
                arms[arm]["measured_paper"] = pj.metrics.workload_error(measured, data, estimate)
    rec["evaluation_seconds"] = time.perf_counter() - t1
    rec["arms"] = arms
    return rec


# ----------------------------------------------------------------------------- summaries


def _ok(runs, mech, arm):
    return [r["arms"][arm]["paper"] for r in runs if r.get("status") == "ok" and r["arms"].get(arm, {}).get("status") == "ok" and r["mechanism"] == mech]


def summarize(runs: list[dict], datasets, mechanisms) -> list[dict]:
    """Medians (and spread) per (dataset, mechanism, arm), and the factor original / +PGM."""
    rows = []
    for ds in datasets:
        for mech in mechanisms:
            rs = [r for r in runs if r["dataset"] == ds and r["mechanism"] == mech]
            if not rs:
                continue
            row = {"dataset": ds, "mechanism": mech, "runs": len(rs), "failed": sum(r.get("status") != "ok" for r in rs)}
            for arm in ("original", "pgm", "global"):
                vals = _ok(rs, mech, arm)
                script = [r["arms"][arm]["script"] for r in rs if r.get("status") == "ok" and r["arms"].get(arm, {}).get("status") == "ok"]
                if vals:
                    row[arm] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals),
                                "median_script": statistics.median(script)}
                else:
                    why = [r["arms"][arm].get("reason") for r in rs if r.get("status") == "ok" and arm in r["arms"]]
                    if why:
                        row[arm] = {"status": "infeasible", "reason": why[0]}
            if isinstance(row.get("original", {}).get("median"), float) and isinstance(row.get("pgm", {}).get("median"), float):
                row["factor"] = row["original"]["median"] / row["pgm"]["median"] if row["pgm"]["median"] > 0 else None
            secs = [r["seconds"] for r in rs if r.get("status") == "ok"]
            row["median_seconds"] = statistics.median(secs) if secs else None
            row["paper_factor"] = PAPER_FACTORS.get(mech, {}).get(ds, "not reported")
            rows.append(row)
    return rows


def _fmt(x, digits=4):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}g}"


def markdown(doc: dict) -> str:
    m = doc["machine"]
    s = doc["settings"]
    lines = [
        "# Figure 1 (ICML 2019): workload error without / with the graphical-model estimator",
        "",
        *header(doc, f"Python {m['versions']['python']}, jax {m['versions']['jax']}, numpy {m['versions']['numpy']}, "
                     f"scipy {m['versions']['scipy']}"),
        *sources(doc),
        "",
        f"Setting: epsilon = {s['epsilon']} (DualQuery delta = {s['delta']}), {s['runs']} runs (seeds {s['seeds']}), "
        "benchmark workload = 15 three-way cliques, Prefix on numeric attributes, identity otherwise "
        "(cliques and numeric attributes recorded per dataset in the JSON). "
        "Error = workload error on the paper's scale (Section 5.1, with the 1/2; the 2019 scripts' numbers are twice these), "
        "median over runs (min-max in brackets). Factor = median original / median +PGM.",
        "",
        "| dataset | mechanism | original arm | +PGM arm | factor (ours) | factor (paper) | median run time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in doc["summary"]:
        lo, hi = LABELS[row["mechanism"]]

        def cell(arm, label):
            a = row.get(arm)
            if a is None:
                return f"{label}: no successful run"
            if a.get("status") == "infeasible":
                return f"{label}: **infeasible**"
            fewer = f" ({a['n']} run{'s' if a['n'] > 1 else ''})" if a["n"] != s["runs"] else ""
            return f"{label}: {_fmt(a['median'])} [{_fmt(a['min'], 3)}-{_fmt(a['max'], 3)}]{fewer}"

        fails = f" ({row['failed']} of {row['runs']} runs failed)" if row["failed"] else ""
        lines.append(
            f"| {row['dataset']} | {row['mechanism']}{fails} | {cell('original', lo)} | {cell('pgm', hi)} | "
            f"{_fmt(row.get('factor'), 3)} | {row['paper_factor']} | {_fmt(row.get('median_seconds'), 3)} |"
        )
    sizes = [f"{ds} {d['queries']:,}" + (f" (paper {PAPER_QUERIES[ds]:,})" if ds in PAPER_QUERIES else "")
             + (f", cliques drawn with seed {d['workload_seed']}" if d.get("workload_seed") else "")
             for ds, d in doc["datasets"].items() if "queries" in d]
    if sizes:
        lines += ["", "Workload queries: " + "; ".join(sizes) + "."]
    reasons = [(r["dataset"], r["mechanism"], r["original"]["reason"]) for r in doc["summary"] if r.get("original", {}).get("status") == "infeasible"]
    if reasons:
        lines += ["", "Infeasible arms (decided before allocating):", ""]
        lines += [f"* {ds}, {mech}: {why}" for ds, mech, why in reasons]
    errs = [r for r in doc["runs"] if r.get("status") != "ok"]
    if errs:
        lines += ["", "Failed runs (the script went on):", ""]
        lines += [f"* {r['dataset']}, {r['mechanism']}, seed {r['seed']}: {r.get('error', '')}" for r in errs]
    lines += ["", "Settings per mechanism (see bench/figure1.py):", ""]
    for mech, kw in s["mechanisms"].items():
        lines.append(f"* {mech}: " + ", ".join(f"{k}={v}" for k, v in kw.items()))
    for f in doc.get("replaced_failures", []):
        lines.append(f"* **re-run**: {f['dataset']}, {f['mechanism']}, seed {f['seed']} failed ({f['error']}) and was run again "
                     "after the fix (its record is the re-run's)")
    for name, kw in s.get("exceptions", {}).items():
        lines.append(f"* **exception, {name}**: " + ", ".join(f"{k}={v}" for k, v in kw.items()))
    hd = [r for r in doc["runs"] if r["mechanism"] == "hdmm" and r.get("status") == "ok" and r.get("global_least_squares_error")]
    if hd:
        lines += ["", f"HDMM's global least squares: {hd[0]['global_least_squares_error']}"]
    lines.append("")
    return "\n".join(lines)


def plot(doc: dict, path: str) -> str | None:
    """Bars per dataset and mechanism (both arms), log-scale error with min-max whiskers; None if no matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    rows = doc["summary"]
    datasets = [d for d in doc["settings"]["datasets"] if any(r["dataset"] == d for r in rows)]
    if not datasets:
        return "nothing to plot yet"
    mechs = doc["settings"]["mechanisms_order"]
    fig, axes = plt.subplots(1, len(datasets), figsize=(max(6.0, 4.2 * len(datasets)), 4.2), squeeze=False)
    colors = {"original": "#c44e52", "pgm": "#4c72b0"}
    for ax, ds in zip(axes[0], datasets):
        for i, mech in enumerate(mechs):
            row = next((r for r in rows if r["dataset"] == ds and r["mechanism"] == mech), None)
            if row is None:
                continue
            for j, arm in enumerate(("original", "pgm")):
                x = i + (j - 0.5) * 0.38
                a = row.get(arm)
                if a and "median" in a:
                    ax.bar(x, a["median"], width=0.36, color=colors[arm])
                    ax.plot([x, x], [a["min"], a["max"]], color="black", lw=1)
                elif a and a.get("status") == "infeasible":
                    ax.text(x, 0.03, "infeasible", rotation=90, ha="center", va="bottom", fontsize=8, color=colors[arm],
                            transform=ax.get_xaxis_transform())
        ax.set_yscale("log")
        ax.set_xticks(range(len(mechs)))
        ax.set_xticklabels(mechs, rotation=20, fontsize=8)
        ax.set_title(ds)
        ax.set_ylabel("workload error (paper scale)")
        ax.grid(axis="y", which="both", alpha=0.3)
    from matplotlib.patches import Patch

    axes[0][0].legend(handles=[Patch(color=colors["original"], label="original arm"), Patch(color=colors["pgm"], label="+PGM arm")], fontsize=8)
    quick = " - QUICK MODE (not results)" if doc["settings"]["quick"] else ""
    s_runs = doc["settings"]["runs"]
    fig.suptitle(f"ICML 2019 Figure 1: original vs +PGM arm, eps={doc['settings']['epsilon']}\n"
                 f"median of {'up to ' if any(a.get('n', s_runs) != s_runs for r in rows for a in (r.get('original', {}), r.get('pgm', {}))) else ''}"
                 f"{s_runs} runs, whiskers min-max{quick}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# ----------------------------------------------------------------------------- merging runs of several invocations


def header(doc, versions: str) -> list[str]:
    """The date, machine and versions lines; a merged document names every machine and commit of its parts."""
    m = doc["machine"]
    parts = doc.get("merged_from") or []
    cpus = collections.Counter(p["machine"]["cpu"] or p["machine"]["platform"] for p in parts)
    quick = "**QUICK MODE: tiny settings that validate the pipeline; these are NOT results.** " if doc["settings"]["quick"] else ""
    date = f"{quick}Date: {doc['started']} to {doc.get('finished', '(running)')}."
    if len(cpus) > 1 or len({p["machine"]["git_commit"] for p in parts}) > 1:
        machines = ", ".join(f"{cpu} ({n} of the {len(parts)} files)" for cpu, n in cpus.items())
        machines = f"Machines: {machines}" if len(cpus) > 1 else f"Machine: {next(iter(cpus))}"
        return [
            f"{date} {machines}; {m['cpus']} CPUs, backend {m['backend']} ({', '.join(m['device_kinds'])}).",
            f"Versions: {versions}; pgmjax commit and load at start per file, under 'Merged from'.",
        ]
    return [
        f"{date} Machine: {m['cpu'] or m['platform']}, {m['cpus']} CPUs, "
        f"backend {m['backend']} ({', '.join(m['device_kinds'])}). Load average at start: {m['load_average_start']}.",
        f"Versions: {versions}; pgmjax commit {m['git_commit'][:12]}{' (dirty tree)' if m['git_dirty'] else ''}.",
    ]


def sources(doc) -> list[str]:
    """Markdown lines naming the processes a merged document comes from (file, date, CPU, commit)."""
    parts = doc.get("merged_from")
    if not parts:
        return []
    return ["", "Merged from:"] + [
        f"* {p['file']}: {p['started']} to {p.get('finished') or '(unfinished)'}, {p['machine']['cpu'] or p['machine']['platform']}, "
        f"load at start {p['machine']['load_average_start']}, pgmjax commit {p['machine']['git_commit'][:12]}"
        f"{' (dirty tree)' if p['machine']['git_dirty'] else ''}"
        for p in parts
    ]


def merge(paths: list[str], prefix: str) -> dict:
    """One table from several result JSONs (e.g. MWEM run in its own processes, one per dataset).

    Runs, datasets and per-mechanism settings are concatenated (:func:`merge_docs`). Writes
    ``prefix.json``, ``.md`` and ``.png``.
    """
    doc = merge_docs(paths, ("dataset", "mechanism", "seed"))
    seeds = sorted({r["seed"] for r in doc["runs"]})  # the header names the seeds the merged runs hold
    doc["settings"]["seeds"], doc["settings"]["runs"] = seeds, len(seeds)
    order = [m for m in MECHANISMS if m in doc["settings"]["mechanisms_order"]]
    doc["settings"]["mechanisms_order"] = order
    doc["summary"] = summarize(doc["runs"], doc["settings"]["datasets"], order)
    doc["meta"] = schema.run_meta("bench.figure1", extra=("scipy",))
    write(prefix, doc, markdown(doc))
    note = plot(doc, prefix + ".png")
    if note:
        print(f"figure1 merge: {note}")
    return doc


def merge_docs(paths: list[str], key_fields: tuple[str, ...]) -> dict:
    """The result documents of several processes as one (runs, datasets, settings; no summary).

    A run is identified by ``key_fields`` (e.g. dataset, mechanism, seed) and must come from one file, except
    that a later file's successful run replaces an earlier failed one (noted under ``replaced_failures``).
    A mechanism's settings are those of the first file that ran it; runs made with other settings (fewer
    runs or iterations where time was short, say) are listed as exceptions. The machine record is the first
    file's, and every file's is kept under ``merged_from``.
    """
    docs = [read(p) for p in paths]
    doc = json.loads(json.dumps(docs[0]))
    doc["merged_from"] = [{"file": os.path.relpath(p, ROOT), "started": d["started"], "finished": d.get("finished"),
                           "machine": d["machine"], "command": d["settings"].get("command"),
                           "mechanisms": d["settings"]["mechanisms_order"]} for p, d in zip(paths, docs)]
    for d in docs[1:]:
        for ds in d["settings"]["datasets"]:
            if ds not in doc["settings"]["datasets"]:
                doc["settings"]["datasets"].append(ds)
        doc["datasets"].update({k: v for k, v in d["datasets"].items() if k not in doc["datasets"]})
        # A run that failed may be re-run in a later file: the later success replaces it (and is noted).
        key = lambda r: tuple(r[k] for k in key_fields)  # noqa: E731
        redone = {key(r) for r in d["runs"] if r.get("status") == "ok"}
        for r in doc["runs"]:
            if key(r) in redone and r.get("status") != "ok":
                doc.setdefault("replaced_failures", []).append({k: r.get(k) for k in ("dataset", "mechanism", "seed", "error")})
        doc["runs"] = [r for r in doc["runs"] if not (key(r) in redone and r.get("status") != "ok")]
        clash = sorted({key(r) for r in doc["runs"]} & {key(r) for r in d["runs"]})
        if clash:
            raise SystemExit(f"merge: {clash} are in more than one file")
        for mech in d["settings"]["mechanisms_order"]:
            if mech not in doc["settings"]["mechanisms_order"]:
                doc["settings"]["mechanisms_order"].append(mech)
                doc["settings"]["mechanisms"][mech] = d["settings"]["mechanisms"][mech]
            elif doc["settings"]["mechanisms"][mech] != d["settings"]["mechanisms"][mech]:
                for ds in {r["dataset"] for r in d["runs"] if r["mechanism"] == mech}:
                    doc["settings"].setdefault("exceptions", {})[f"{ds}/{mech}"] = {
                        **d["settings"]["mechanisms"][mech], "runs": d["settings"]["runs"]}
        doc["runs"] += d["runs"]
        doc["started"] = min(doc["started"], d["started"])
        doc["finished"] = max(doc.get("finished") or "", d.get("finished") or "") or None
    last_run = max((r.get("finished") or "" for r in doc["runs"]), default="")
    doc["finished"] = max(doc.get("finished") or "", last_run) or None
    return doc


# ----------------------------------------------------------------------------- main


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=None, help="the shared data folder (default: pgmjax.datasets.data_dir())")
    p.add_argument("--runs", type=int, default=5, help="seeds per (dataset, mechanism) (default 5)")
    p.add_argument("--seed0", type=int, default=0, help="first seed (runs use seed0 .. seed0 + runs - 1)")
    p.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated, from {DATASETS}")
    p.add_argument("--mechanisms", default=",".join(MECHANISMS), help=f"comma-separated, from {MECHANISMS}")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-3, help="DualQuery's delta")
    p.add_argument("--pgm-iters", type=int, default=None, help="engine iterations for every mechanism (default: per mechanism, 1000)")
    p.add_argument("--set", action="append", default=[], metavar="MECH.PARAM=VALUE", help="override a mechanism setting (JSON value)")
    p.add_argument("--workload-seed", type=int, default=0,
                   help="the draw of the random cliques (Titanic, Loans, Stroke); bench/results/papers/figure1_workloads_cpu.md "
                        "lists draws of the paper's sizes")
    p.add_argument("--quick", action="store_true", help="tiny settings to validate the pipeline (results are not meaningful)")
    p.add_argument("--tag", default=None, help="output name figure1_<tag> (default: the JAX backend, plus -quick)")
    p.add_argument("--out", default=None, help="output prefix (overrides --tag): PREFIX.json, .md, .png")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="only merge these result JSONs (one mechanism set each) into --out / --tag's files")
    args = p.parse_args(argv)
    if args.merge:
        return merge(args.merge, out_prefix(args, "figure1"))

    import jax

    import pgmjax as pj

    datasets = [d for d in args.datasets.split(",") if d]
    mechanisms = [m for m in args.mechanisms.split(",") if m]
    bad = [d for d in datasets if d not in DATASETS] + [m for m in mechanisms if m not in MECHANISMS]
    if bad:
        raise SystemExit(f"unknown dataset/mechanism {bad}; datasets: {DATASETS}, mechanisms: {MECHANISMS}")
    if args.tag is None:
        args.tag = jax.default_backend() + ("-quick" if args.quick else "")
    prefix = out_prefix(args, "figure1")
    data_dir = pj.datasets.data_dir(args.data)
    overrides = parse_sets(args.set)
    settings = {}
    for mech in mechanisms:
        kw = dict(SETTINGS[mech])
        if args.quick:
            kw.update(QUICK[mech])
        if args.pgm_iters is not None:
            kw["engine_iters"] = args.pgm_iters
        kw.update(overrides.get(mech, {}))
        settings[mech] = kw
    seeds = list(range(args.seed0, args.seed0 + args.runs))
    doc = {
        "experiment": "ICML 2019 Figure 1: original vs +PGM arms of MWEM, PrivBayes, HDMM, DualQuery",
        "meta": schema.run_meta("bench.figure1", argv, extra=("scipy",)),
        "started": now(),
        "machine": machine(),
        "settings": {
            "quick": args.quick,
            "epsilon": args.epsilon,
            "delta": args.delta,
            "runs": args.runs,
            "seeds": seeds,
            "datasets": datasets,
            "mechanisms_order": mechanisms,
            "mechanisms": settings,
            "data_dir": data_dir,
            "error_scale": "paper (Section 5.1, with 1/2); 'script' = twice it",
            "command": schema.command("bench.figure1", argv),
        },
        "datasets": {},
        "runs": [],
        "summary": [],
    }

    def flush(final=False):
        doc["summary"] = summarize(doc["runs"], datasets, mechanisms)
        if final:
            doc["finished"] = now()
            try:
                doc["machine"]["load_average_end"] = os.getloadavg()
            except OSError:
                pass
        write(prefix, doc, markdown(doc))

    print(f"figure1: writing {prefix}.json/.md/.png; backend {jax.default_backend()}; data {data_dir}", flush=True)
    for ds in datasets:
        try:
            data, workload, cliques, numeric = benchmark(ds, data_dir, args.workload_seed)
        except Exception as e:  # noqa: BLE001 - record and go on
            doc["datasets"][ds] = {"status": "error", "error": f"{type(e).__name__}: {e}"}
            print(f"  {ds}: cannot load: {e}", flush=True)
            flush()
            continue
        doc["datasets"][ds] = {"records": len(data), "attributes": len(data.domain), "cliques": cliques, "numeric": numeric,
                               "workload_seed": args.workload_seed, "queries": sum(data.domain.size(c) for c in cliques),
                               "log10_domain": sum(math.log10(n) for n in data.domain.values())}
        cache: dict = {}
        for mech in mechanisms:
            for seed in seeds:
                rec = {"dataset": ds, "mechanism": mech, "seed": seed, "started": now()}
                try:
                    rec.update(run_one(mech, data, workload, settings[mech], seed, args.epsilon, args.delta, cache))
                    rec["status"] = "ok"
                    arms = rec["arms"]
                    msg = ", ".join(f"{a}={arms[a]['paper']:.4g}" if arms[a]["status"] == "ok" else f"{a}=infeasible" for a in arms)
                    print(f"  {ds} {mech} seed {seed}: {msg} ({rec['seconds']:.1f} s)", flush=True)
                except Exception as e:  # noqa: BLE001 - one failure must not stop the experiment
                    rec["status"] = "error"
                    rec["error"] = f"{type(e).__name__}: {e}"
                    rec["traceback"] = traceback.format_exc()[-4000:]
                    print(f"  {ds} {mech} seed {seed}: ERROR {rec['error']}", flush=True)
                rec["finished"] = now()
                doc["runs"].append(rec)
                flush()
            # Free the compiled programs of this mechanism's model structures: a long process that keeps
            # thousands of XLA:CPU executables runs out of memory maps (LLVM "Cannot allocate memory").
            jax.clear_caches()
        note = plot(doc, prefix + ".png")
        if note:
            doc["plot_note"] = note
    flush(final=True)
    note = plot(doc, prefix + ".png")
    if note:
        doc["plot_note"] = note
        write(prefix, doc, markdown(doc))
    print(f"figure1: done; {sum(r.get('status') == 'ok' for r in doc['runs'])} of {len(doc['runs'])} runs ok", flush=True)
    return doc


if __name__ == "__main__":
    main()
