"""Which mechanism by default: TreeAIM against MST and AIM on every table, from ``bench.mst_aim`` result files.

Reads one or more ``bench.mst_aim`` results (``--runs``; pgmjax rows, mechanisms ``mst``, ``aim``, ``tree_aim``;
``FILE:mst,aim`` takes only those mechanisms' rows, where a change made the file's other rows stale, and
``FILE:mst,aim:nltcs`` only those tables') and
earlier AIM results that scored only two-way marginals (``--earlier``; their rows are kept as "earlier", and their
wall times, from another day, are not compared), and writes ``bench/results/mechanisms/<out>.json`` / ``.md`` and
two plots per result: error against epsilon, and error against wall time, one panel per table.

For each table and epsilon: each mechanism's mean ± sample standard deviation over its seeds of the synthetic
records' TVD on every two-way marginal (``tvd``), on up to 500 evenly spread three-way ones (``tvd_3way``) and on
the one-way ones, and its wall time. The verdict row says whether TreeAIM is "at least as accurate as the better
of AIM and MST within seed noise": its mean two-way (and three-way) TVD at most the better mean plus twice the
larger of the two standard errors (``sd / sqrt(n)``; with one seed, a standard error of 0: the comparison is
then strict), and the ratio of its mean wall time to MST's, from the same result file (the same load).

``--before FILES`` renders, instead, TreeAIM's runs in FILES against the same table, epsilon and seed in ``--runs``
(``before_after``): what a change to TreeAIM did, run by run.

Usage::

    python -m bench mechanisms default_mechanism --runs A.json B.json --earlier mst_aim_issue46_adult_cpu.json \\
        --out default_mechanism_cpu
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
from collections import defaultdict

from bench import schema

MECHANISMS = ("mst", "aim", "tree_aim")
NAMES = {"mst": "MST", "aim": "AIM", "tree_aim": "TreeAIM"}
METRICS = ("tvd", "tvd_3way", "tvd_1way")


def rows_of(spec: str) -> list[dict]:
    """The scored pgmjax rows of a result file; ``FILE:mst,aim`` keeps only those mechanisms' rows (a file whose
    other rows an engine or mechanism change has made stale), ``FILE:mst,aim:nltcs,adult`` only those tables'."""
    path, _, only = spec.partition(":") if not os.path.exists(spec) else (spec, "", "")
    only, _, tables = only.partition(":")
    keep = set(only.split(",")) if only else set(MECHANISMS)
    unknown = keep - set(MECHANISMS)
    if unknown:
        raise SystemExit(f"default_mechanism: {spec}: unknown mechanism(s) {sorted(unknown)}; expected some of {MECHANISMS}")
    with open(path) as f:
        doc = json.load(f)
    return [dict(r, source=os.path.basename(path)) for r in doc.get("rows", doc.get("runs", []))
            if r.get("library") == "pgmjax" and r.get("mechanism") in keep and r.get("tvd") is not None
            and (not tables or r.get("dataset", "adult") in tables.split(","))]


def _stat(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "sd": sd, "n": len(values), "se": sd / math.sqrt(len(values))}


def summarize(rows: list[dict], earlier: list[dict]) -> dict:
    """``{table: {epsilon: {mechanism: {metric: stat, "wall": stat, "source": ...}}}}``, and the verdicts."""
    groups: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        groups[r["dataset"]][r["epsilon"]][r["mechanism"]].append(r)
    for r in earlier:  # AIM rows scored on two-way marginals only, where this run has none
        if not groups[r["dataset"]][r["epsilon"]].get("aim"):
            groups[r["dataset"]][r["epsilon"]]["aim_earlier"].append(r)
    table = {}
    for dataset, by_eps in groups.items():
        for eps, by_mech in by_eps.items():
            cell = {}
            for mech, runs in by_mech.items():
                rs = list({r["seed"]: r for r in reversed(runs)}.values())  # a seed once: the first file's run
                cell[mech] = {m: _stat([r.get(m) for r in rs]) for m in METRICS}
                cell[mech]["wall"] = _stat([r["wall_s"] for r in rs])
                # TreeAIM's walls: the runs its figures come from (a later file's run of a seed may be of older code);
                # the others': every run, so that TreeAIM's pair with the runs beside them in their file
                paired = rs if mech == "tree_aim" else runs
                cell[mech]["walls"] = [(r["source"], r["seed"], r["wall_s"]) for r in paired]
                cell[mech]["seeds"] = sorted(r["seed"] for r in rs)
                cell[mech]["source"] = sorted({r["source"] for r in rs})
            cell["verdict"] = _verdict(cell)
            table.setdefault(dataset, {})[eps] = cell
    return table


def _verdict(cell: dict) -> dict:
    tree = cell.get("tree_aim")
    aim = cell.get("aim") or cell.get("aim_earlier")
    if tree is None or cell.get("mst") is None:
        return {"complete": False}
    out = {"complete": aim is not None, "aim_from": "this run" if cell.get("aim") else ("earlier" if aim else None)}
    for metric in ("tvd", "tvd_3way"):
        rivals = [(k, cell[k][metric]) for k in ("mst", "aim", "aim_earlier") if cell.get(k) and cell[k][metric]]
        if not rivals or tree[metric] is None:
            out[metric] = None
            continue
        name, best = min(rivals, key=lambda kv: kv[1]["mean"])
        slack = 2.0 * max(best["se"], tree[metric]["se"])
        out[metric] = {"best": NAMES.get(name, "AIM (earlier)"), "best_mean": best["mean"], "tree_mean": tree[metric]["mean"],
                       "slack": slack, "wins": tree[metric]["mean"] <= best["mean"] + slack}
    # wall times compared under one load: MST's runs of the same result files and seeds as TreeAIM's
    both = {(src, seed) for src, seed, _ in tree["walls"]} & {(src, seed) for src, seed, _ in cell["mst"]["walls"]}
    mst_walls = [w for src, seed, w in cell["mst"]["walls"] if (src, seed) in both]
    tree_walls = [w for src, seed, w in tree["walls"] if (src, seed) in both]
    if both:
        out["wall_ratio_to_mst"] = statistics.fmean(tree_walls) / statistics.fmean(mst_walls)
    else:  # no MST run beside TreeAIM's: the means of whatever runs there are
        out["wall_ratio_to_mst"] = tree["wall"]["mean"] / cell["mst"]["wall"]["mean"]
    return out


def _fmt(stat: dict | None, digits: int = 4) -> str:
    if stat is None:
        return "n/a"
    return f"{stat['mean']:.{digits}f}" + (f" ± {stat['sd']:.{digits}f}" if stat["n"] > 1 else "") + f" ({stat['n']})"


def render(doc: dict) -> list[str]:
    lines = [
        "# Which mechanism by default: TreeAIM, MST and AIM on every table",
        "",
        *(schema.header_lines(doc["meta"]) if "date" in doc["meta"] else []),
        f"Runs from {', '.join(doc['runs_files'])}"
        + (f"; earlier AIM rows (two-way TVD only) from {', '.join(doc['earlier_files'])}" if doc["earlier_files"] else "")
        + ". Each run a fresh process (`bench.mst_aim`: compiling included in the wall time); delta 1e-9; MST and TreeAIM "
        "at their defaults at the runs' commits (MST's final fit 10,000 iterations; TreeAIM's as its docstring says); "
        "AIM at its published defaults (T = 16 d, 80 MB, 1,000 iterations per fit). Synthetic records scored against "
        "the real table: mean TVD over every two-way marginal, up to 500 evenly spread three-way ones, and every "
        "one-way one; mean ± sample sd over seeds (n, each seed once). Wall times are from a shared 2-core machine "
        "with other runs beside them (the JSON has each run's load): compare them within a row.",
        "",
        "| table | eps | mechanism | seeds | two-way TVD | three-way TVD | one-way TVD | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    table = doc["table"]
    for dataset in table:
        for eps in sorted(table[dataset], key=float):
            cell = table[dataset][eps]
            for mech in ("mst", "aim", "aim_earlier", "tree_aim"):
                c = cell.get(mech)
                if c is None:
                    continue
                name = NAMES.get(mech, "AIM (earlier run)")
                wall = "n/a (another day)" if mech == "aim_earlier" else _fmt(c["wall"], 0)
                lines.append(f"| {dataset} | {float(eps):g} | {name} | {','.join(map(str, c['seeds']))} | {_fmt(c['tvd'])} | "
                             f"{_fmt(c['tvd_3way'])} | {_fmt(c['tvd_1way'])} | {wall} |")
    lines += ["", "## Verdict: TreeAIM against the better of MST and AIM", "",
              "Wins: TreeAIM's mean at most the better mean plus twice the larger standard error. Wall: TreeAIM's mean "
              "wall time over MST's, over the runs of the seeds both have in one result file (each such pair ran one "
              "after the other, under that file's load), TreeAIM's runs those its errors come from (a seed's run in "
              "the first file that has it).", "",
              "| table | eps | AIM from | two-way: best | TreeAIM | wins | three-way: best | TreeAIM | wins | wall / MST |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for dataset in table:
        for eps in sorted(table[dataset], key=float):
            v = table[dataset][eps]["verdict"]
            if "wall_ratio_to_mst" not in v:
                continue
            cols = []
            for metric in ("tvd", "tvd_3way"):
                m = v.get(metric)
                cols += (["n/a"] * 3 if m is None else
                         [f"{m['best']} {m['best_mean']:.4f}", f"{m['tree_mean']:.4f}", "yes" if m["wins"] else "**no**"])
            lines.append(f"| {dataset} | {float(eps):g} | {v['aim_from'] or 'none'} | " + " | ".join(cols)
                         + f" | {v['wall_ratio_to_mst']:.1f} |")
    lines += ["", *[f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in doc.get("plots", [])]]
    return lines


def plot(doc: dict, stem: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    table = doc["table"]
    names = [d for d in table if any(c.get("tree_aim") or c.get("mst") for c in table[d].values())]
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    styles = {"mst": ("o", "C0", "MST"), "aim": ("s", "C1", "AIM"), "aim_earlier": ("s", "C1", "AIM (earlier run)"),
              "tree_aim": ("^", "C2", "TreeAIM")}
    paths = []
    for kind in ("epsilon", "wall"):
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
        for ax, dataset in zip(axes.flat, names):
            for mech, (marker, color, label) in styles.items():
                pts = sorted(((float(e), c[mech]) for e, c in table[dataset].items() if c.get(mech)), key=lambda p: p[0])
                if not pts or (kind == "wall" and mech == "aim_earlier"):  # another day's wall times: not compared
                    continue
                y = [c["tvd"]["mean"] for _, c in pts]
                err = [c["tvd"]["sd"] for _, c in pts]
                x = [e for e, _ in pts] if kind == "epsilon" else [c["wall"]["mean"] for _, c in pts]
                ax.errorbar(x, y, yerr=err, marker=marker, color=color, label=label, capsize=2,
                            linestyle="-" if kind == "epsilon" and mech != "aim_earlier" else "none",
                            mfc="none" if mech == "aim_earlier" else color)
                if kind == "wall":
                    for (e, _), xi, yi in zip(pts, x, y):
                        ax.annotate(f"{e:g}", (xi, yi), fontsize=7, xytext=(2, 2), textcoords="offset points")
            ax.set_xscale("log")
            ax.set_yscale("log")
            if kind == "epsilon":
                ax.set_xticks([0.3, 1, 3], ["0.3", "1", "3"])
                ax.minorticks_off()
            # labels at 1, 2 and 5 times each power of ten: a panel within one decade still reads its values
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.3g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_title(dataset, fontsize=9)
            ax.set_xlabel("epsilon" if kind == "epsilon" else "wall s (labels: epsilon)", fontsize=8)
            ax.set_ylabel("two-way TVD", fontsize=8)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        fig.tight_layout()
        path = f"{stem}_{kind}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def before_after(before: list[dict], after: list[dict], mechanism: str = "tree_aim") -> dict:
    """``mechanism``'s runs of one (table, epsilon, seed) in both sets, side by side: the same key makes the same
    selections and measurements, so a change after them (the final fit) shows alone. Returns ``{"rows": [...],
    "mean_change": {metric: mean relative change}, "n": pairs}``."""
    def index(rows):
        return {(r["dataset"], r["epsilon"], r["seed"]): r for r in rows if r["mechanism"] == mechanism}

    old, new = index(before), index(after)
    pairs = [(k, old[k], new[k]) for k in sorted(set(old) & set(new), key=lambda k: (k[0], float(k[1]), k[2]))]
    keys = (*METRICS, "tvd_model", "wall_s")
    rows = [{"dataset": k[0], "epsilon": k[1], "seed": k[2], "same_picks": o.get("selected") == n.get("selected"),
             **{f"{m}_before": o.get(m) for m in keys}, **{f"{m}_after": n.get(m) for m in keys}}
            for k, o, n in pairs]

    def change(m, rs):
        rs = [r for r in rs if r[f"{m}_before"] and r[f"{m}_after"] is not None]
        return statistics.fmean(r[f"{m}_after"] / r[f"{m}_before"] - 1 for r in rs) if rs else None

    same = [r for r in rows if r["same_picks"]]
    return {"rows": rows, "n": len(rows), "same_picks": len(same),
            "mean_change": {m: change(m, rows) for m in ("tvd", "tvd_3way", "tvd_model", "wall_s")},
            "mean_change_same_picks": {m: change(m, same) for m in ("tvd", "tvd_3way", "tvd_model")}}


def render_before_after(doc: dict) -> list[str]:
    ba = doc["before_after"]
    lines = ["# TreeAIM before and after, run by run", "",
             *(schema.header_lines(doc["meta"]) if "date" in doc["meta"] else []),
             f"Before: {', '.join(doc['before_files'])}. After: {', '.join(doc['runs_files'])}. The same table, epsilon "
             "and seed (the same key); \"same picks\": the batches selected the same marginals in the same order, so "
             "the runs differ after the selections only (where the engine changed between the two commits, a batch's "
             "fit, and so its picks, may differ). Two-way and three-way TVD of the synthetic records, the model's "
             "two-way TVD, wall seconds (each set under its own load).", ""]

    def pct(x):
        return "n/a" if x is None else f"{100 * x:+.2f}%"

    c, cs = ba["mean_change"], ba["mean_change_same_picks"]
    lines += [f"Mean relative change over {ba['n']} runs: two-way TVD {pct(c['tvd'])}, three-way {pct(c['tvd_3way'])}, "
              f"the model's two-way {pct(c['tvd_model'])}, wall time {pct(c['wall_s'])}. Over the {ba['same_picks']} "
              f"runs with the same picks: two-way {pct(cs['tvd'])}, three-way {pct(cs['tvd_3way'])}, the model's "
              f"{pct(cs['tvd_model'])}.", "",
              "| table | eps | seed | same picks | two-way before | after | three-way before | after | model before | after "
              "| wall s before | after |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def num(x, digits=5):
        return "n/a" if x is None else f"{x:.{digits}f}"

    for r in ba["rows"]:
        lines.append(f"| {r['dataset']} | {float(r['epsilon']):g} | {r['seed']} | {'yes' if r['same_picks'] else 'no'} | "
                     f"{num(r['tvd_before'])} | {num(r['tvd_after'])} | {num(r['tvd_3way_before'])} | "
                     f"{num(r['tvd_3way_after'])} | {num(r['tvd_model_before'])} | {num(r['tvd_model_after'])} | "
                     f"{num(r['wall_s_before'], 0)} | {num(r['wall_s_after'], 0)} |")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="+", required=True,
                   help="bench.mst_aim result JSON files; FILE:mst,aim takes only those mechanisms' rows from FILE")
    p.add_argument("--earlier", nargs="*", default=[], help="earlier bench.mst_aim results (AIM, two-way TVD)")
    p.add_argument("--out", default="default_mechanism_cpu", help="result name under bench/results/mechanisms/")
    p.add_argument("--before", nargs="*", default=[],
                   help="instead of the verdict: TreeAIM's runs in these files against the same runs in --runs")
    args = p.parse_args(argv)
    if args.before:
        doc = {"meta": schema.run_meta("bench.default_mechanism", argv, backend=False),
               "runs_files": [os.path.basename(f) for f in args.runs], "before_files": [os.path.basename(f) for f in args.before],
               "before_after": before_after([r for f in args.before for r in rows_of(f)], [r for f in args.runs for r in rows_of(f)])}
        stem = os.path.splitext(schema.result_path("mechanisms", args.out))[0]
        with open(stem + ".json", "w") as f:
            json.dump(doc, f, indent=1, default=str)
        schema.write_page(stem + ".json", render_before_after(doc))
        print(f"wrote {stem}.json and .md")
        return
    rows = [r for f in args.runs for r in rows_of(f)]
    earlier = [r for f in args.earlier for r in rows_of(f) if r["mechanism"] == "aim"]
    doc = {"meta": schema.run_meta("bench.default_mechanism", argv, backend=False),
           "runs_files": [os.path.basename(f) for f in args.runs], "earlier_files": [os.path.basename(f) for f in args.earlier],
           "table": {d: {str(e): c for e, c in by.items()} for d, by in summarize(rows, earlier).items()}}
    path = schema.result_path("mechanisms", args.out)
    stem = os.path.splitext(path)[0]
    doc["plots"] = [os.path.relpath(p, os.path.dirname(stem)) for p in plot(doc, stem)]
    with open(stem + ".json", "w") as f:
        json.dump(doc, f, indent=1, default=str)
    schema.write_page(stem + ".json", render(doc))
    print(f"wrote {stem}.json and .md")


if __name__ == "__main__":
    main()
