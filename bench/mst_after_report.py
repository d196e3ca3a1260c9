"""Render bench/results/mst_accuracy_after_cpu.{md,json} (issue 42, last item: MST's Adult gap to mbi).

Inputs: the ``bench/mst_aim.py`` results JSON (Adult, Loans, Stroke; pgmjax and mbi), the paired diagnosis and
the DISCREPANCY ablation of ``bench/mst_gap.py`` (JSON lines), and a notes JSON (machine, versions, commands,
failures, conclusion) written by hand.

Usage: ``python bench/mst_after_report.py --bench b.json --paired p.jsonl --ablation a.jsonl --notes n.json
[--trajectory t.json] --out bench/results/mst_accuracy_after_cpu.json``. The JSON written
holds every input, so the report can be re-rendered from it alone (split it back into the inputs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def mse(xs) -> tuple[float, float, int]:
    xs = [x for x in xs if x is not None]
    n = len(xs)
    m = sum(xs) / n
    se = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1) / n) if n > 1 else float("nan")
    return m, se, n


def f(m, se, digits=4):
    return f"{m:.{digits}f} ± {se:.{digits}f}"


def library_table(runs: list) -> list[str]:
    """Per dataset and library: seeds, mean ± SE of the synthetic and model TVD, wall; then pgmjax - mbi ± SE."""
    L = ["| dataset | library | seeds | n | synthetic TVD | model TVD | wall (s) |", "|---|---|---|---|---|---|---|"]
    groups, order = {}, []
    for r in runs:
        groups.setdefault((r["dataset"], r["library"]), []).append(r)
        if r["dataset"] not in order:
            order.append(r["dataset"])
    for (ds, lib), rs in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1] != "pgmjax")):
        rs = sorted(rs, key=lambda r: r["seed"])
        seeds = ",".join(str(r["seed"]) for r in rs)
        L.append(f"| {ds} | {lib} | {seeds} | {len(rs)} | {f(*mse([r['tvd'] for r in rs])[:2])} | "
                 f"{f(*mse([r.get('tvd_model') for r in rs])[:2])} | {mse([r['wall_s'] for r in rs])[0]:,.0f} |")
    diffs = []
    for ds in order:
        a, b = groups.get((ds, "pgmjax")), groups.get((ds, "mbi"))
        if a and b:
            for key, name in (("tvd", "synthetic TVD"), ("tvd_model", "model TVD")):
                ma, sa, na = mse([r.get(key) for r in a])
                mb, sb, nb = mse([r.get(key) for r in b])
                se = math.hypot(sa, sb)
                ok = math.isfinite(se) and se > 0
                diffs.append(f"| {ds} | {name} | {na} / {nb} | {f(ma, sa)} | {f(mb, sb)} | "
                             + (f"{ma - mb:+.4f} ± {se:.4f} | {(ma - mb) / se:+.1f} |" if ok else
                                f"{ma - mb:+.4f} (one seed: no SE) | n/a |") + f" {ma / mb:.3f} |")
    if diffs:
        L += ["", "pgmjax - mbi (unpaired: each side its own noise; SE of the difference = sqrt(SE_a^2 + SE_b^2)):", "",
              "| dataset | metric | seeds (pgmjax / mbi) | pgmjax | mbi | pgmjax - mbi ± SE | in SE | ratio |",
              "|---|---|---|---|---|---|---|---|"] + diffs
    L.append("")
    return L


def render(res: dict) -> str:
    notes = res["notes"]
    L = [f"# MST accuracy after issue 42's last item: pgmjax vs mbi 2.0 ({notes.get('datasets', 'Adult gap; Loans, Stroke')})",
         ""]
    L += [f"Machine: {notes['machine']}. Date: {notes['date']}.", f"Versions: {notes['versions']}.", ""]
    L += ["Privacy: eps = 1, delta = 1e-9 (rho = cdp_rho(eps, delta) zCDP, the same on both sides). Metric: mean over all "
          "two-way marginals of the total variation distance to the true data; `model TVD` is the fitted model's own "
          "(over the original domain, merged values spread uniformly; no sampling noise), `synthetic TVD` the synthetic "
          "records'. Mean ± standard error over seeds (SE = sample SD / sqrt(n)). MST settings on both sides: 2500 "
          "iterations for the one-way fit, 10,000 for the final fit, float32.", ""]
    L += ["## Commands", ""] + [f"    {c}" for c in notes["commands"]] + [""]

    # 1. Library against library, unpaired
    L += ["## 1. Library against library (each library's own noise and selection)", ""]
    L += library_table(res["bench"]["runs"])
    # 2. Paired diagnosis
    paired = res["paired"]
    variants = list(paired[0]["tvd_model"])
    L += ["## 2. Adult, paired: the same measurements fitted several ways (`bench/mst_gap.py`)", "",
          "Each seed: pgmjax's MST runs once; its own released measurements (one-way before/after compression, the "
          "tree's two-way marginals) are refitted. `shipped`: MST's model (warm start from the one-way model, plain "
          "mirror descent, 10,000 iterations, total from all measurements); `cold`: no warm start; `iters20k`: 20,000 "
          "iterations; `total_identity`: the total estimated as mbi does (identity measurements only); "
          "`accelerated`: pgmjax's accelerated mirror descent; `mbi`: mbi 2.0's `MirrorDescent` on the same "
          "measurements, as `bench/mbi_mst_aim.py` runs it. Model TVD.", "",
          "| variant | n | model TVD | minus `mbi` (paired) |", "|---|---|---|---|"]
    for v in variants:
        xs = [r["tvd_model"][v] for r in paired]
        ds = [r["tvd_model"][v] - r["tvd_model"]["mbi"] for r in paired]
        L.append(f"| {v} | {len(xs)} | {f(*mse(xs)[:2])} | {f(*mse(ds)[:2], 5)} |")
    L += ["", "Per seed (model TVD): " + "; ".join(
        f"seed {r['seed']}: " + ", ".join(f"{v} {r['tvd_model'][v]:.4f}" for v in variants) for r in paired), ""]
    if res.get("trajectory"):
        L += ["Trajectory (seed 1, `bench/mst_gap.py`-style refits; `2L` = standardised residual sum of squares "
              "`sum ((Q mu - y)/sigma)^2`, rows = measured cells; at the true marginals `2L` is about the rows):", "",
              "| fit | iterations | 2L | model TVD |", "|---|---|---|---|"]
        L += [f"| {t['fit']} | {t['iters']} | {t['two_l']:.0f} | {t['tvd']:.4f} |" for t in res["trajectory"]]
        L.append("")

    # 3. Ablation
    abl = res["ablation"]
    L += ["## 3. Opt-in stop at the noise level (`spanning_tree.DISCREPANCY`, off by default)", "",
          "The same MST run (same key, same releases) with the final fit stopped once `2L <= rows` (tau = 1, checked "
          "every 50 iterations) against the default (all 10,000 iterations). Model TVD.", "",
          "| dataset | n | default (no stop) | stop at 2L <= rows | stop - default (paired) | ratio | iterations at the stop | 2L / rows default |",
          "|---|---|---|---|---|---|---|---|"]
    order = []
    for r in abl:
        if r["dataset"] not in order:
            order.append(r["dataset"])
    for ds in order:
        rs = [r for r in abl if r["dataset"] == ds]
        a = [r["None"]["tvd_model"] for r in rs]
        b = [r["1.0"]["tvd_model"] for r in rs]
        it = [r["1.0"]["fit_iterations"] for r in rs]
        fr = [r["None"]["residual_rows"][0] / r["None"]["residual_rows"][1] for r in rs]
        ma = mse(a)[0]
        L.append(f"| {ds} | {len(rs)} | {f(*mse(a)[:2])} | {f(*mse(b)[:2])} | {f(*mse([y - x for x, y in zip(a, b)])[:2], 5)} | "
                 f"{mse(b)[0] / ma:.3f} | {min(it)}-{max(it)} | {mse(fr)[0]:.2f} |")
    L.append("")

    L += [f"## 4. {notes.get('mbi_runs_title', 'mbi on Loans and Stroke')}", ""] + [f"* {x}" for x in notes["mbi_runs"]] + [""]
    L += ["## Conclusion", ""] + [f"* {x}" for x in notes["conclusion"]] + [""]
    sys.path.insert(0, HERE)
    import mst_aim

    L += ["## Appendix: the benchmark driver's own rendering of its runs (± sample SD)", ""]
    L += [line.replace("# MST and AIM", "### MST and AIM", 1) for line in mst_aim.render(res["bench"]).splitlines()]
    return "\n".join(L) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", required=True)
    p.add_argument("--paired", required=True)
    p.add_argument("--ablation", required=True)
    p.add_argument("--trajectory", default=None, help="JSON list of {fit, iters, two_l, tvd}")
    p.add_argument("--notes", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    lines = lambda path: [json.loads(x) for x in open(path) if x.strip()]  # noqa: E731
    res = {"notes": json.load(open(a.notes)), "bench": json.load(open(a.bench)), "paired": lines(a.paired),
           "ablation": lines(a.ablation)}
    if a.trajectory:
        res["trajectory"] = json.load(open(a.trajectory))
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    with open(os.path.splitext(a.out)[0] + ".md", "w") as fh:
        fh.write(render(res))


if __name__ == "__main__":
    main()
