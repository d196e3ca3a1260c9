"""Figure 2a of the ICML 2019 paper: HDMM+LLS vs HDMM+PGM on Adult as epsilon varies.

McKenna, Sheldon & Miklau, ICML 2019 (arXiv 1901.09136), Section 6 (HDMM as in private-pgm ``examples/hdmm.py``).
The Adult benchmark workload (15 three-way cliques, Prefix on age, fnlwgt, capital-gain, capital-loss,
hours-per-week; ``pgmjax.Workload.benchmark``), HDMM with its OPT_+ strategy (optimised once, key 0, reused
by every run: it depends neither on the data nor on epsilon), replace-one neighbours (``N`` public, as the
2019 run), Laplace noise, for ``epsilon`` in {0.1, 0.3, 1, 3, 10} and ``--runs`` seeds. Both arms on the same
noise: HDMM+LLS (per-clique least squares) and HDMM+PGM (the engine). Reported: the median workload error
(paper scale, Section 5.1; the 2019 scripts' scale is twice it and is recorded too) and its spread
(min, max, quartiles) per epsilon and arm. Expected shape (the HDMM rerun of McKenna, Pradhan, Sheldon & Miklau,
"Relaxed marginal consistency for differentially private query answering", NeurIPS 2021: private-pgm
``experiments/neurips/results/hdmm.csv`` @55a9c9e, a similar workload): LLS error scales like 1/epsilon, PGM
error saturates; their ratio shrinks as epsilon grows.

``--mechanisms`` can add the other Figure 1 mechanisms to the same sweep (their settings are those of
``bench.figure1``, overridable with ``--set``).

Usage (full, GPU machine, repository root)::

    python -m bench papers figure2a --tag gpu
    python -m bench papers figure2a --quick --runs 1 --epsilons 1,10 --tag cpu-quick     # smoke test

Outputs ``bench/results/papers/figure2a_<tag>.json`` (every run, machine, versions, settings; rewritten after every
run), ``.md`` and ``.png``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import traceback


from bench import figure1 as F  # shared helpers: machine record, files, benchmark, one run
from bench import schema

EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)


def _quantile(xs, q):
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    pos = q * (len(xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def summarize(runs, datasets, mechanisms, epsilons) -> list[dict]:
    rows = []
    for ds in datasets:
        for mech in mechanisms:
            for eps in epsilons:
                rs = [r for r in runs if r["dataset"] == ds and r["mechanism"] == mech and r["epsilon"] == eps]
                if not rs:
                    continue
                row = {"dataset": ds, "mechanism": mech, "epsilon": eps, "runs": len(rs), "failed": sum(r.get("status") != "ok" for r in rs)}
                for arm in ("original", "pgm", "global"):
                    ok = [r for r in rs if r.get("status") == "ok" and r["arms"].get(arm, {}).get("status") == "ok"]
                    if ok:
                        v = [r["arms"][arm]["paper"] for r in ok]
                        row[arm] = {
                            "median": statistics.median(v), "min": min(v), "max": max(v),
                            "q25": _quantile(v, 0.25), "q75": _quantile(v, 0.75), "n": len(v),
                            "median_script": statistics.median(r["arms"][arm]["script"] for r in ok),
                        }
                        measured = [r["arms"][arm]["measured_paper"] for r in ok if "measured_paper" in r["arms"][arm]]
                        if measured:  # the error on the measured queries (runs made before it was recorded lack it)
                            row[arm]["measured"] = {"median": statistics.median(measured), "min": min(measured),
                                                    "max": max(measured), "n": len(measured)}
                    else:
                        why = [r["arms"][arm].get("reason") for r in rs if r.get("status") == "ok" and arm in r["arms"]]
                        if why:
                            row[arm] = {"status": "infeasible", "reason": why[0]}
                o, g = row.get("original", {}).get("median"), row.get("pgm", {}).get("median")
                row["factor"] = o / g if isinstance(o, float) and isinstance(g, float) and g > 0 else None
                secs = [r["seconds"] for r in rs if r.get("status") == "ok"]
                row["median_seconds"] = statistics.median(secs) if secs else None
                rows.append(row)
    return rows


def markdown(doc) -> str:
    m, s = doc["machine"], doc["settings"]
    lines = [
        "# Figure 2a (ICML 2019): HDMM+LLS vs HDMM+PGM as epsilon varies",
        "",
        *F.header(doc, f"Python {m['versions']['python']}, jax {m['versions']['jax']}, numpy {m['versions']['numpy']}"),
        *F.sources(doc),
        "",
        f"{s['runs']} runs per epsilon (seeds {s['seeds']}). Error = workload error on the paper's scale (the 2019 scripts' "
        "numbers are twice these): median [min-max] over runs; factor = median original / median +PGM.",
        "",
        "| dataset | mechanism | epsilon | original arm | +PGM arm | factor | median run time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in doc["summary"]:
        lo, hi = F.LABELS[row["mechanism"]]

        def cell(arm, label):
            a = row.get(arm)
            if a is None:
                return f"{label}: no successful run"
            if a.get("status") == "infeasible":
                return f"{label}: **infeasible**"
            return f"{label}: {F._fmt(a['median'])} [{F._fmt(a['min'], 3)}-{F._fmt(a['max'], 3)}]"

        fails = f" ({row['failed']} of {row['runs']} failed)" if row["failed"] else ""
        lines.append(
            f"| {row['dataset']} | {row['mechanism']}{fails} | {row['epsilon']:g} | {cell('original', lo)} | {cell('pgm', hi)} | "
            f"{F._fmt(row.get('factor'), 3)} | {F._fmt(row.get('median_seconds'), 3)} |"
        )
    measured = [row for row in doc["summary"] if any("measured" in row.get(arm, {}) for arm in ("original", "pgm"))]
    if measured:
        lines += [
            "",
            "The error on the measurements: the same error over the queries the mechanism measured (its strategy's), "
            "against their true answers; median [min-max] over runs.",
            "",
            "| dataset | mechanism | epsilon | original arm | +PGM arm | original / +PGM |",
            "|---|---|---|---|---|---|",
        ]
        for row in measured:
            lo, hi = F.LABELS[row["mechanism"]]
            o, g = (row.get(arm, {}).get("measured") for arm in ("original", "pgm"))
            cells = [f"{label}: {F._fmt(a['median'])} [{F._fmt(a['min'], 3)}-{F._fmt(a['max'], 3)}]" if a else f"{label}: n/a"
                     for a, label in ((o, lo), (g, hi))]
            ratio = F._fmt(o["median"] / g["median"], 3) if o and g and g["median"] > 0 else "n/a"
            lines.append(f"| {row['dataset']} | {row['mechanism']} | {row['epsilon']:g} | {cells[0]} | {cells[1]} | {ratio} |")
    lines += [
        "",
        "Reference (McKenna, Pradhan, Sheldon & Miklau, NeurIPS 2021: private-pgm experiments/neurips/results/hdmm.csv, "
        "a comparable workload on the authors' Adult copy, mean error on the 2019 scripts' scale, i.e. twice the paper's): eps 0.1: LLS 4.980 / APPGM 0.643; 0.316: 1.575 / 0.340; "
        "1.0: 0.498 / 0.169; 3.16: 0.157 / 0.086; 10: 0.050 / 0.049.",
    ]
    errs = [r for r in doc["runs"] if r.get("status") != "ok"]
    if errs:
        lines += ["", "Failed runs (the script went on):", ""]
        lines += [f"* {r['dataset']}, {r['mechanism']}, eps {r['epsilon']}, seed {r['seed']}: {r.get('error', '')}" for r in errs]
    lines += ["", "Settings per mechanism:", ""]
    for mech, kw in s["mechanisms"].items():
        lines.append(f"* {mech}: " + ", ".join(f"{k}={v}" for k, v in kw.items()))
    lines.append("")
    return "\n".join(lines)


def plot(doc, path):
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
    # a second row of panels where the runs recorded the error on the measured queries (as the paper plots)
    panels = [("workload error (paper scale)", lambda a: a)]
    if any("measured" in r.get(arm, {}) for r in rows for arm in ("original", "pgm")):
        panels.append(("error on the measurements", lambda a: a.get("measured")))
    fig, axes = plt.subplots(len(panels), len(datasets), figsize=(max(6.0, 5.2 * len(datasets)), 4.4 * len(panels)),
                             squeeze=False)
    styles = {"original": "--", "pgm": "-"}
    for (ylabel, pick), ax_row in zip(panels, axes):
        for ax, ds in zip(ax_row, datasets):
            for mech in doc["settings"]["mechanisms_order"]:
                for arm in ("original", "pgm"):
                    pts = [(r["epsilon"], pick(r[arm])) for r in rows if r["dataset"] == ds and r["mechanism"] == mech
                           and "median" in r.get(arm, {}) and pick(r[arm])]
                    if not pts:
                        continue
                    pts.sort(key=lambda p: p[0])
                    eps = [p[0] for p in pts]
                    label = F.LABELS[mech][0 if arm == "original" else 1]
                    line, = ax.plot(eps, [p[1]["median"] for p in pts], styles[arm], marker="o", label=label)
                    ax.fill_between(eps, [p[1]["min"] for p in pts], [p[1]["max"] for p in pts], color=line.get_color(), alpha=0.15)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("epsilon")
            ax.set_ylabel(ylabel)
            ax.set_title(ds)
            ax.grid(which="both", alpha=0.3)
            ax.legend(fontsize=8)
    quick = " - QUICK MODE (not results)" if doc["settings"]["quick"] else ""
    fig.suptitle(f"ICML 2019 Figure 2a: original vs +PGM arm over epsilon\nmedian of {doc['settings']['runs']} runs, band min-max{quick}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def merge(paths: list[str], prefix: str) -> dict:
    """One table from several result JSONs of this script (e.g. more seeds run later); see ``figure1.merge_docs``."""
    doc = F.merge_docs(paths, ("dataset", "mechanism", "epsilon", "seed"))
    s = doc["settings"]
    s["seeds"] = sorted({r["seed"] for r in doc["runs"]})
    s["runs"] = len(s["seeds"])
    s["epsilons"] = sorted({r["epsilon"] for r in doc["runs"]})
    doc["summary"] = summarize(doc["runs"], s["datasets"], s["mechanisms_order"], s["epsilons"])
    doc["meta"] = schema.run_meta("bench.figure2a", extra=("scipy",))
    F.write(prefix, doc, markdown(doc))
    note = plot(doc, prefix + ".png")
    if note:
        print(f"figure2a merge: {note}")
    return doc


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=None, help="the shared data folder (default: pgmjax.datasets.data_dir())")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed0", type=int, default=0)
    p.add_argument("--datasets", default="adult", help="comma-separated (default adult)")
    p.add_argument("--mechanisms", default="hdmm", help=f"comma-separated, from {F.MECHANISMS} (default hdmm)")
    p.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS))
    p.add_argument("--delta", type=float, default=1e-3, help="DualQuery's delta, if it is run")
    p.add_argument("--pgm-iters", type=int, default=None, help="engine iterations (default: per mechanism, 1000)")
    p.add_argument("--set", action="append", default=[], metavar="MECH.PARAM=VALUE")
    p.add_argument("--quick", action="store_true", help="tiny settings to validate the pipeline (results are not meaningful)")
    p.add_argument("--tag", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="only merge these result JSONs of this script into --out / --tag's files")
    args = p.parse_args(argv)
    if args.merge:
        return merge(args.merge, F.out_prefix(args, "figure2a"))

    import jax

    import pgmjax as pj

    datasets = [d for d in args.datasets.split(",") if d]
    mechanisms = [m for m in args.mechanisms.split(",") if m]
    epsilons = [float(e) for e in args.epsilons.split(",") if e]
    bad = [d for d in datasets if d not in F.DATASETS] + [m for m in mechanisms if m not in F.MECHANISMS]
    if bad:
        raise SystemExit(f"unknown dataset/mechanism {bad}")
    if args.tag is None:
        args.tag = jax.default_backend() + ("-quick" if args.quick else "")
    prefix = F.out_prefix(args, "figure2a")
    data_dir = pj.datasets.data_dir(args.data)
    overrides = F.parse_sets(args.set)
    settings = {}
    for mech in mechanisms:
        kw = dict(F.SETTINGS[mech])
        if args.quick:
            kw.update(F.QUICK[mech])
        if args.pgm_iters is not None:
            kw["engine_iters"] = args.pgm_iters
        kw.update(overrides.get(mech, {}))
        settings[mech] = kw
    seeds = list(range(args.seed0, args.seed0 + args.runs))
    doc = {
        "experiment": "ICML 2019 Figure 2a: HDMM+LLS vs HDMM+PGM over epsilon",
        "meta": schema.run_meta("bench.figure2a", argv, extra=("scipy",)),
        "started": F.now(),
        "machine": F.machine(),
        "settings": {
            "quick": args.quick, "epsilons": epsilons, "delta": args.delta, "runs": args.runs, "seeds": seeds,
            "datasets": datasets, "mechanisms_order": mechanisms, "mechanisms": settings, "data_dir": data_dir,
            "error_scale": "paper (Section 5.1, with 1/2); 'script' = twice it", "command": schema.command("bench.figure2a", argv),
        },
        "datasets": {},
        "runs": [],
        "summary": [],
    }

    def flush(final=False):
        doc["summary"] = summarize(doc["runs"], datasets, mechanisms, epsilons)
        if final:
            doc["finished"] = F.now()
            try:
                doc["machine"]["load_average_end"] = os.getloadavg()
            except OSError:
                pass
        F.write(prefix, doc, markdown(doc))

    print(f"figure2a: writing {prefix}.json/.md/.png; backend {jax.default_backend()}; data {data_dir}", flush=True)
    for ds in datasets:
        try:
            data, workload, cliques, numeric = F.benchmark(ds, data_dir)
        except Exception as e:  # noqa: BLE001
            doc["datasets"][ds] = {"status": "error", "error": f"{type(e).__name__}: {e}"}
            print(f"  {ds}: cannot load: {e}", flush=True)
            flush()
            continue
        doc["datasets"][ds] = {"records": len(data), "attributes": len(data.domain), "cliques": cliques, "numeric": numeric}
        cache: dict = {}  # the HDMM strategy, once per dataset
        for mech in mechanisms:
            for eps in epsilons:
                for seed in seeds:
                    rec = {"dataset": ds, "mechanism": mech, "epsilon": eps, "seed": seed, "started": F.now()}
                    try:
                        rec.update(F.run_one(mech, data, workload, settings[mech], seed, eps, args.delta, cache))
                        rec["status"] = "ok"
                        arms = rec["arms"]
                        msg = ", ".join(f"{a}={arms[a]['paper']:.4g}" if arms[a]["status"] == "ok" else f"{a}=infeasible" for a in arms)
                        print(f"  {ds} {mech} eps {eps:g} seed {seed}: {msg} ({rec['seconds']:.1f} s)", flush=True)
                    except Exception as e:  # noqa: BLE001 - record and go on
                        rec["status"] = "error"
                        rec["error"] = f"{type(e).__name__}: {e}"
                        rec["traceback"] = traceback.format_exc()[-4000:]
                        print(f"  {ds} {mech} eps {eps:g} seed {seed}: ERROR {rec['error']}", flush=True)
                    rec["finished"] = F.now()
                    doc["runs"].append(rec)
                    flush()
            note = plot(doc, prefix + ".png")
            if note:
                doc["plot_note"] = note
    flush(final=True)
    note = plot(doc, prefix + ".png")
    if note:
        doc["plot_note"] = note
        F.write(prefix, doc, markdown(doc))
    print(f"figure2a: done; {sum(r.get('status') == 'ok' for r in doc['runs'])} of {len(doc['runs'])} runs ok", flush=True)
    return doc


if __name__ == "__main__":
    main()
