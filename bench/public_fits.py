"""Public tables as measurements in MST and MWEM on Adult: does a shifted table, entered with a stated weight, hurt?

The data and the public tables are :mod:`bench.public_data`'s, drawn by its own code (:func:`bench.public_data.prepare`,
the same generator seed, so the very same tables): Adult split once into a private part (90%, 43,958 records) and a
pool (4,884), and two tables of 2,198 records drawn from the pool, ``unbiased`` (a uniform sample) and ``shifted``
(income>50K weighted 4x, age above the private median 0.5x; with replacement).

Unlike AIM's joint selection (:mod:`bench.public_data`), MST and MWEM do not choose: the public table's marginals on
the cliques the mechanism measures join its fits as extra measurements (:func:`pgmjax.estimate`'s ``public=``), free,
with the standard deviation :class:`pgmjax.PublicData` states. Arms per (mechanism, seed), at epsilon 1:

* ``none``: no public data;
* ``unbiased``: ``pj.PublicData(unbiased)`` (``stddev="sampling"``: each cell weighted by the sampling error of a
  sample of the table's size, which assumes no shift);
* ``shifted``: ``pj.PublicData(shifted)`` (``stddev="sampling"``);
* ``shifted_100``: ``pj.PublicData(shifted, stddev=100.0)`` (100 records per cell: a user who distrusts the table).

Mechanisms: ``pgmjax.mechanisms.mst(private, 1.0, delta=1e-9, key=jax.random.key(seed), synthetic=False,
public=...)`` at its defaults otherwise (``engine_iters`` 10,000); ``pgmjax.mechanisms.mwem(private, 1.0,
key=jax.random.key(seed), workload=<all 91 two-way marginals>, rounds=30, max_model_mb=10, engine_iters=500,
original=False, synthetic=False, public=pj.PublicData(table, cliques=None, ...))`` (Laplace noise, pure DP; the
public cliques default to the measured ones). Seeds 0, 1, 2, the arms rotated by the seed so the first call of a
mechanism in the process (its compilations) falls on a different arm each seed.

Per run: ``tvd``, the mean total variation distance over the 91 two-way marginals between the final model's
marginals (``result.model.marginals``) and the private part's, both normalised (:func:`bench.public_data._tvd`); the
mechanism call's wall time (``time.perf_counter``, the model's arrays waited for); the public cliques taken
(``result.info.public``) and the ledger's ``public`` entries. Mean and sd over the seeds; per mechanism each
public arm's mean TVD less the no-public arm's against twice the standard error of the difference
(``sqrt(sd_a^2 / n + sd_b^2 / n)``), as :func:`bench.public_data.verdicts`.

All runs in one process, one after another.

Usage::

    python -m bench.public_fits [--quick] [--mechanisms mst mwem] [--seeds 0 1 2] [--mwem-rounds 30]
        [--mst-iters N] [--data-dir ../shared/data] [--out fits_adult] [--label TEXT] [--rounds-note TEXT]
    python -m bench.public_fits --render bench/results/public/fits_adult.json

``--quick``: MST only, seed 0, 1,000 engine iterations, written to ``/tmp/fits_adult_quick`` (not to commit).
Results: ``bench/results/public/fits_adult.json`` and ``.md``, rewritten after every run (``--render``: the page again
from the JSON). The committed run used ``--mwem-rounds 20`` (30 would have taken about 46 minutes on the shared
2-core machine; the page says so); it took 27.5 minutes.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench import schema
from bench.public_data import (DELTA, SHIFT, describe_tables, format_range, format_mean_sd, normalised_tvd, prepare,
                               summary_stats)
from bench.schema import ROOT

NAME = "public"
EPSILON = 1.0
MECHANISMS = ("mst", "mwem")
#: arm -> (public table or None, stddev)
ARMS = {"none": (None, None), "unbiased": ("unbiased", "sampling"), "shifted": ("shifted", "sampling"),
        "shifted_100": ("shifted", 100.0)}
LABELS = {"none": "no public", "unbiased": "+ unbiased (sampling)", "shifted": "+ shifted (sampling)",
          "shifted_100": "+ shifted (stddev 100)"}
MECH_LABELS = {"mst": "MST", "mwem": "MWEM+PGM"}


def _jax():
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    return jax


def _cmd_out(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"({type(e).__name__})"


def run_one(mech: str, arm: str, seed: int, private, tables: dict, pairs, truth2, args) -> dict:
    jax = _jax()
    import pgmjax as pj
    from pgmjax.mechanisms import mst, mwem

    table, stddev = ARMS[arm]
    key = jax.random.key(seed)
    t = time.perf_counter()
    if mech == "mst":
        public = pj.PublicData(tables[table], stddev=stddev) if table else None
        kw = {} if args.mst_iters is None else {"engine_iters": args.mst_iters}
        result = mst(private, EPSILON, delta=DELTA, key=key, synthetic=False, public=public, **kw)
    else:
        public = pj.PublicData(tables[table], cliques=None, stddev=stddev) if table else None
        result = mwem(private, EPSILON, key=key, workload=[tuple(p) for p in pairs], rounds=args.mwem_rounds,
                      max_model_mb=args.mwem_max_mb, engine_iters=args.mwem_iters, original=False, synthetic=False,
                      public=public)
    jax.block_until_ready(getattr(result.model, "theta", None))
    wall = time.perf_counter() - t
    answers = [np.asarray(m, np.float64) for m in result.model.marginals(pairs)]
    tvd = float(np.mean([normalised_tvd(a, b) for a, b in zip(truth2, answers)]))
    info = result.info
    taken = [list(c) for c in (info.public or [])]
    ledger = result.accountant.ledger
    public_entries = [e for e in ledger if e.mechanism == "public"]
    return {"mechanism": mech, "arm": arm, "table": table, "stddev": stddev, "epsilon": EPSILON, "seed": seed,
            "tvd": tvd, "wall_s": wall, "public_taken": len(taken), "public_cliques": taken,
            "ledger_public_entries": len(public_entries),
            "ledger_public_cost": float(sum(float(e.cost) for e in public_entries)),
            "ledger_spent": float(result.accountant.spent), "budget": float(result.accountant.budget),
            "rounds_run": len(info.log or []) if mech == "mwem" else None,
            "measured": len(result.measurements) - len(taken), "total": float(result.model.total),
            "seconds": info.seconds}


def weight_check(pj, table, attrs, total: float, threshold: float = 100.0) -> dict:
    """``stddev="sampling"`` against a flat ``threshold`` (records) on ``table``'s marginals, uncompressed domain:
    per order (1-way, 2-way), the share of cells whose sampling stddev exceeds the threshold (the flat one weights
    them more) and the mean share of the table's records in those cells, and the sampling stddevs' range."""
    public = pj.PublicData(table)
    out = {"threshold": threshold, "total": total}
    for name, cliques in (("1-way", [(a,) for a in attrs]), ("2-way", list(itertools.combinations(attrs, 2)))):
        cells = above = 0
        mass, lo, hi = [], np.inf, -np.inf
        for c in cliques:
            m = public.measurement(c, total)
            y = np.asarray(m.y, np.float64).ravel()
            sd = np.broadcast_to(np.asarray(m.stddev, np.float64), np.shape(m.y)).ravel()
            cells, above = cells + sd.size, above + int((sd > threshold).sum())
            mass.append(float(y[sd > threshold].sum() / y.sum()))
            lo, hi = min(lo, float(sd.min())), max(hi, float(sd.max()))
        out[name] = {"cells": cells, "share_above": above / cells, "mass_above": float(np.mean(mass)),
                     "sd_min": lo, "sd_max": hi}
    return out


def weight_note(w: dict) -> str:
    one, two = w["1-way"], w["2-way"]
    return (f"The `stddev=100` arm is not a lighter weight than `\"sampling\"` on most of the table: the shifted "
            f"table's sampling stddevs (N = {w['total']:,.0f}, m = 2,198) run from {one['sd_min']:.0f} records (a cell "
            f"with at most one public record) to {one['sd_max']:.0f} (a cell at half the table), and exceed "
            f"{w['threshold']:g} in {one['share_above']:.1%} of the one-way cells, holding on average "
            f"{one['mass_above']:.1%} of the table's records per marginal, and in {two['share_above']:.1%} of the "
            f"two-way cells, holding {two['mass_above']:.1%} (over the uncompressed domain, "
            "`bench.public_fits.weight_check`). So a flat 100 weights the well-filled cells more than the sampling "
            "rule does, and the sparse ones less.")


# ----------------------------------------------------------------------------- summaries and the page
def summarise(rows: list[dict]) -> list[dict]:
    out = []
    for mech in MECHANISMS:
        for arm in ARMS:
            group = [r for r in rows if r["mechanism"] == mech and r["arm"] == arm]
            if not group:
                continue
            s = {"mechanism": mech, "arm": arm, "seeds": [r["seed"] for r in group]}
            for k in ("tvd", "wall_s", "public_taken", "rounds_run"):
                st = summary_stats([r.get(k) for r in group])
                if st is not None:
                    s[k] = st
            out.append(s)
    return out


def verdicts(summary: list[dict]) -> list[dict]:
    by = {(s["mechanism"], s["arm"]): s for s in summary}
    out = []
    for mech in MECHANISMS:
        b = by.get((mech, "none"))
        for arm in ("unbiased", "shifted", "shifted_100"):
            a = by.get((mech, arm))
            if not (a and b):
                continue
            diff = a["tvd"]["mean"] - b["tvd"]["mean"]
            se = float(np.sqrt(a["tvd"]["sd"] ** 2 / a["tvd"]["n"] + b["tvd"]["sd"] ** 2 / b["tvd"]["n"]))
            if min(a["tvd"]["n"], b["tvd"]["n"]) < 2:
                word = "one seed: no spread to judge by"
            elif diff <= 0:
                word = "better" if diff < -2 * se else "no worse (lower mean, within 2 SE)"
            else:
                word = "worse" if diff > 2 * se else "no worse within seed spread (higher mean, within 2 SE)"
            out.append({"mechanism": mech, "arm": arm, "diff": diff, "se": se, "n": [a["tvd"]["n"], b["tvd"]["n"]],
                        "verdict": word})
    return out


def _phrase(v: dict) -> str:
    if v["verdict"].startswith("one seed"):
        return "one seed only, no spread to judge by"
    if v["verdict"] == "worse":
        return "higher beyond seed noise (it hurt)"
    if v["verdict"] == "better":
        return "lower beyond seed noise (it helped)"
    return "within seed noise (neither harm nor help shown)"


def reading(vd: list[dict], summary: list[dict]) -> str:
    """One plain paragraph from the verdicts: did each public arm move each mechanism's TVD beyond the seed spread?"""
    if not vd:
        return "(no pair of arms finished yet)"
    by = {(s["mechanism"], s["arm"]): s for s in summary}
    parts = []
    for mech in MECHANISMS:
        got = {v["arm"]: v for v in vd if v["mechanism"] == mech}
        if not got:
            continue
        bits = [f"{MECH_LABELS[mech]} without public data has mean TVD {by[(mech, 'none')]['tvd']['mean']:.4f}"]
        for arm in ("shifted", "shifted_100", "unbiased"):
            v = got.get(arm)
            if v is None:
                continue
            bits.append(f"{LABELS[arm]} {by[(mech, arm)]['tvd']['mean']:.4f}, a difference of {v['diff']:+.5f} "
                        f"against 2 SE {2 * v['se']:.5f}: {_phrase(v)}")
        parts.append("; ".join(bits) + ".")
    return " ".join(parts)


def render(doc: dict) -> list[str]:
    meta, settings, summary = doc["meta"], doc["settings"], doc["summary"]
    if settings.get("argv") is not None:
        meta = dict(meta, command="python -m bench.public_fits " + shlex.join(settings["argv"]))
    lines = ["# Public tables as measurements in MST and MWEM on Adult (unbiased, shifted)", "",
             *schema.header_lines(meta)]
    lines += [f"Machine (platform): {settings['platform']}, os.cpu_count() = {settings['cpu_count']} (a 2-core CPU "
              f"machine, shared); `python -c \"import jax; print(jax.__version__)\"`: {settings['jax_version_cli']}; "
              f"`date -u` at start: {settings['date_u']}. Load average at start {settings['load_start']}, at end "
              f"{settings.get('load_end')}. "
              + ("**Partial run**: " + settings["progress"] + "." if not settings.get("complete") else
                 f"Complete: {settings['progress']}, {settings.get('total_wall_s', 0) / 60:.1f} minutes."), ""]
    if settings.get("label"):
        lines += [f"**Machine state**: {settings['label']}", ""]
    lines += ["## The question", ""]
    vd = doc.get("verdicts") or []
    if vd:
        lines += ["Mean two-way TVD of each public arm less the same mechanism's no-public arm (negative: the public "
                  "table helped), against twice the standard error of the difference over the seeds:", ""]
        lines += schema.table([{"mechanism": MECH_LABELS[v["mechanism"]], "arm": LABELS[v["arm"]], "vs": "no public",
                                "TVD difference": f"{v['diff']:+.5f}", "2 SE": f"{2 * v['se']:.5f}",
                                "seeds": "/".join(map(str, v["n"])), "verdict": v["verdict"]} for v in vd])
        lines.append("")
    lines += [f"**Reading**: {doc['answer']}", ""]
    lines += ["## Setup", "",
              f"Data: Adult, {settings['records']:,} records, 14 attributes (`{settings['data_file']}`), split once by "
              f"`bench.public_data.prepare` (numpy.random.default_rng({settings['data_seed']})) into a private part of "
              f"{settings['private_records']:,} records and a pool of {settings['pool_records']:,}; public tables of "
              f"{settings['public_records']:,} records drawn from it with the same generator: the very tables of "
              "`bench/results/public/adult.md`, the same for every seed. Shifted table: " + SHIFT["about"]
              + f" (median age code {settings['median_age_code']:g}).", ""]
    lines += schema.table([{
        "table": t["table"], "records": t["records"], "distinct": t.get("distinct_records", ""),
        "1-way TVD (mean of 14)": f"{t['tvd_1way_mean']:.4f}" if "tvd_1way_mean" in t else "",
        "largest 1-way TVD": (lambda d: f"{max(d.values()):.4f} ({max(d, key=d.get)})")(t["tvd_1way"])
        if "tvd_1way" in t else "",
        "2-way TVD (mean of 91)": f"{t['tvd_2way_mean']:.4f}" if "tvd_2way_mean" in t else "",
        "income>50K share": f"{t['income_share']:.3f}", "age above median share": f"{t['old_share']:.3f}"}
        for t in settings["tables"] if t["table"] != "uniform"])
    lines += ["", "Arms (per mechanism and seed, one after another in one process; the arms' order rotated by the "
              "seed):", ""]
    lines += schema.table([{"arm": LABELS[a], "public table": ARMS[a][0] or "none",
                            "stddev": "" if ARMS[a][1] is None else (ARMS[a][1] if isinstance(ARMS[a][1], str)
                                                                      else f"{ARMS[a][1]:g} records")}
                           for a in ARMS])
    mst_iters = settings["mst_iters"] if settings["mst_iters"] is not None else "its default, 10,000"
    lines += ["", f"Settings: epsilon {EPSILON:g}; seeds {', '.join(map(str, settings['seeds']))} "
              "(`jax.random.key(seed)`). The public table enters as measurements on the cliques the mechanism "
              "measures (`pj.PublicData`; `pgmjax.estimate`'s `public=`), free: it joins every fit, and so also the "
              "models the selection scores against (MST's one-way model before Kruskal, MWEM's model each round); "
              "the private measurements' budget is unchanged. "
              f"MST: `mst(private, {EPSILON:g}, delta={DELTA:g}, key=..., synthetic=False, public=...)`, engine_iters "
              f"{mst_iters}, zCDP, domain compression on (its public cliques are counted over the compressed domain). "
              f"MWEM: `mwem(private, {EPSILON:g}, key=..., workload=<all 91 two-way marginals>, "
              f"rounds={settings['mwem_rounds']}, max_model_mb={settings['mwem_max_mb']:g}, "
              f"engine_iters={settings['mwem_iters']}, original=False, synthetic=False, "
              "public=pj.PublicData(table, cliques=None, stddev=...))`, Laplace noise (pure epsilon-DP), the +PGM arm "
              "(the model scored)." + (f" {settings['rounds_note']}" if settings.get("rounds_note") else ""), "",
              "Columns: `TVD` the mean total variation distance of the final model's 91 two-way marginals from the "
              "private part's (both normalised, exact model marginals); `public taken` the cliques the final fit took "
              "from the public table (`result.info.public`); `wall s` the mechanism call (data loading apart; "
              "the first call of each mechanism in the process includes its compilations). Mean ± sd over the seeds; "
              "counts as mean (min–max).", ""]
    for mech in MECHANISMS:
        group = [s for s in summary if s["mechanism"] == mech]
        if not group:
            continue
        lines += [f"## {MECH_LABELS[mech]}", ""]
        lines += schema.table([{
            "arm": LABELS[s["arm"]], "seeds": len(s["seeds"]), "TVD": format_mean_sd(s.get("tvd")),
            "TVD range": f"{s['tvd']['min']:.4f}–{s['tvd']['max']:.4f}" if s.get("tvd") else "n/a",
            "public taken": format_range(s.get("public_taken"), "{:.1f}"),
            **({"rounds": format_range(s.get("rounds_run"), "{:.1f}")} if mech == "mwem" else {}),
            "wall s": format_mean_sd(s.get("wall_s"), "{:.1f}")} for s in group])
        lines.append("")
    lines += ["## Runs", ""]
    lines += schema.table([{
        "mechanism": MECH_LABELS[r["mechanism"]], "seed": r["seed"], "arm": LABELS[r["arm"]], "TVD": f"{r['tvd']:.4f}",
        "public taken": r["public_taken"], "rounds": r.get("rounds_run") if r["mechanism"] == "mwem" else "",
        "wall s": f"{r['wall_s']:.1f}", "started": r.get("started", "")} for r in doc["rows"]])
    lines.append("")
    if doc.get("notes"):
        lines += ["## Notes", "", *[f"* {n}" for n in doc["notes"]], ""]
    return lines


def auto_notes(rows: list[dict]) -> list[str]:
    notes = []
    for mech in MECHANISMS:
        rs = [r for r in rows if r["mechanism"] == mech and r["arm"] != "none"]
        if not rs:
            continue
        cliques = sorted({", ".join(c) for r in rs for c in r["public_cliques"]}, key=lambda c: (c.count(","), c))
        bad = [r for r in rs if r["public_taken"] != r["ledger_public_entries"] or r["ledger_public_cost"] != 0]
        lo, hi = min(r["public_taken"] for r in rs), max(r["public_taken"] for r in rs)
        notes.append(f"{MECH_LABELS[mech]}: the public arms took {lo if lo == hi else f'{lo} to {hi}'} public cliques "
                     f"per run ({len(cliques)} distinct cliques over these runs); every one has a zero-cost "
                     "`public` ledger entry"
                     + ("." if not bad else f", except in {len(bad)} runs."))
        spent = {round(r["ledger_spent"] / r["budget"], 6) for r in rows if r["mechanism"] == mech}
        notes.append(f"{MECH_LABELS[mech]}: ledger spent / budget over all its runs: {sorted(spent)}.")
    return notes


def document(meta, settings, rows, notes) -> dict:
    notes = list(notes) + ([weight_note(settings["weight_check"])] if settings.get("weight_check") else [])
    summary = summarise(rows)
    vd = verdicts(summary)
    return {"meta": meta, "settings": settings, "summary": summary, "verdicts": vd, "rows": rows,
            "answer": reading(vd, summary), "notes": list(notes) + auto_notes(rows)}


# ----------------------------------------------------------------------------- driver
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.public_fits", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="MST only, seed 0, 1,000 engine iterations, to /tmp")
    ap.add_argument("--mechanisms", nargs="+", choices=MECHANISMS, default=None)
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    ap.add_argument("--mst-iters", type=int, default=None, help="MST's engine_iters (default: its own, 10,000)")
    ap.add_argument("--mwem-rounds", type=int, default=30)
    ap.add_argument("--mwem-iters", type=int, default=500)
    ap.add_argument("--mwem-max-mb", type=float, default=10.0)
    ap.add_argument("--data-seed", type=int, default=0)
    ap.add_argument("--data-dir", default=os.environ.get("PGMJAX_DATA", os.path.join(ROOT, "..", "shared", "data")))
    ap.add_argument("--out-dir", default=os.path.join(schema.RESULTS, NAME))
    ap.add_argument("--out", default=None, help="result name (default fits_adult; --quick /tmp/fits_adult_quick)")
    ap.add_argument("--label", default=None, help="the machine's state, shown on the page")
    ap.add_argument("--rounds-note", default=None, help="a sentence on the MWEM rounds chosen, shown on the page")
    ap.add_argument("--render", default=None, metavar="RESULT.json",
                    help="write a result's page (and its summary, verdicts and reading) again from its JSON")
    args = ap.parse_args(argv)

    if args.render:
        return rerender(args.render, args.data_dir)
    mechs = args.mechanisms or (["mst"] if args.quick else list(MECHANISMS))
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    if args.quick and args.mst_iters is None:
        args.mst_iters = 1000
    name = args.out or ("/tmp/fits_adult_quick" if args.quick else "fits_adult")
    out_path = name if os.sep in name else os.path.join(args.out_dir, name)

    csv = os.path.join(args.data_dir, "adult", "adult.csv")
    if not (os.path.isfile(csv) and os.path.isfile(os.path.join(args.data_dir, "adult", "adult-domain.json"))):
        print(f"public_fits: no adult/adult.csv and adult-domain.json under {args.data_dir}; skipped")
        return 0
    _jax()
    import pgmjax as pj

    load_start = [round(x, 2) for x in os.getloadavg()]
    date_u = _cmd_out(["date", "-u"])
    jax_cli = _cmd_out([sys.executable, "-c", "import jax; print(jax.__version__)"])
    data = pj.datasets.load("adult", args.data_dir)
    domain = data.domain
    pairs = list(itertools.combinations(domain.attributes, 2))
    meta_run = schema.run_meta("bench.public_fits", argv)
    folder = tempfile.mkdtemp(prefix="pgmjax_public_fits_")
    started = time.perf_counter()
    rows: list[dict] = []
    notes: list[str] = []
    try:
        meta = prepare(data, folder, args.data_seed)
        described = describe_tables(pj, domain, meta)
        private = pj.Dataset(np.load(meta["private"]), domain)
        tables = {t: pj.Dataset(np.load(meta["tables"][t]), domain) for t in ("unbiased", "shifted")}
        truth2 = [np.asarray(m, np.float64) for m in private.marginals(pairs)]
        settings = {
            "dataset": "adult", "data_file": os.path.abspath(csv), "records": meta["records"],
            "private_records": meta["private_records"], "pool_records": meta["pool_records"],
            "public_records": meta["public_records"], "data_seed": args.data_seed,
            "median_age_code": meta["median_age_code"], "shift": SHIFT, "tables": described,
            "epsilon": EPSILON, "delta_mst": DELTA, "seeds": seeds, "mechanisms": mechs, "arms": list(args.arms),
            "mst_iters": args.mst_iters, "mwem_rounds": args.mwem_rounds, "mwem_iters": args.mwem_iters,
            "mwem_max_mb": args.mwem_max_mb, "rounds_note": args.rounds_note,
            "workload": "all 91 two-way marginals", "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "jax_version_cli": jax_cli, "date_u": date_u, "load_start": load_start, "label": args.label,
            "quick": args.quick, "complete": False,
            "argv": list(sys.argv[1:] if argv is None else argv),
            "weight_check": weight_check(pj, tables["shifted"], list(domain.attributes),
                                         float(meta["private_records"])),
        }
        total_runs = len(mechs) * len(seeds) * len(args.arms)

        def write(final: bool = False):
            settings["load_end"] = [round(x, 2) for x in os.getloadavg()]
            settings["total_wall_s"] = time.perf_counter() - started
            settings["complete"] = final
            settings["progress"] = f"{len(rows)} of {total_runs} runs"
            doc = document(meta_run, settings, rows, notes)
            schema.write_result(NAME, out_path, rows, meta_run, page=render(doc), quiet=not final, settings=settings,
                                summary=doc["summary"], verdicts=doc["verdicts"], answer=doc["answer"],
                                notes=doc["notes"])

        for mech in mechs:
            for seed in seeds:
                k = seed % len(args.arms)
                for arm in args.arms[k:] + args.arms[:k]:
                    label = f"{MECH_LABELS[mech]} {LABELS[arm]}, seed {seed}"
                    begun = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
                    print(f"[{len(rows) + 1}/{total_runs}] {label} ...", file=sys.stderr, flush=True)
                    try:
                        row = run_one(mech, arm, seed, private, tables, pairs, truth2, args)
                    except Exception as e:  # noqa: BLE001 - report, keep the others
                        notes.append(f"{label}: failed ({type(e).__name__}: {e})")
                        print(notes[-1], file=sys.stderr, flush=True)
                        write()
                        continue
                    row["started"] = begun
                    rows.append(row)
                    print(f"    TVD {row['tvd']:.4f}, public taken {row['public_taken']}, wall {row['wall_s']:.1f} s "
                          f"(elapsed {(time.perf_counter() - started) / 60:.1f} min)", file=sys.stderr, flush=True)
                    write()
        write(final=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def rerender(path: str, data_dir: str) -> int:
    """Rewrite ``path``'s page and derived sections from its rows and settings (the weight check recomputed where
    missing, from the same tables)."""
    import json

    with open(path) as f:
        old = json.load(f)
    settings = old["settings"]
    if "weight_check" not in settings:
        _jax()
        import pgmjax as pj

        data = pj.datasets.load("adult", data_dir)
        with tempfile.TemporaryDirectory() as folder:
            meta = prepare(data, folder, settings["data_seed"])
            shifted = pj.Dataset(np.load(meta["tables"]["shifted"]), data.domain)
        settings["weight_check"] = weight_check(pj, shifted, list(data.domain.attributes),
                                                float(settings["private_records"]))
    run_notes = [n for n in old.get("notes") or [] if ": failed (" in n]
    doc = document(old["meta"], settings, old["rows"], run_notes)
    schema.write_result(NAME, os.path.splitext(os.path.abspath(path))[0], doc["rows"], doc["meta"], page=render(doc),
                        quiet=True, settings=settings, summary=doc["summary"], verdicts=doc["verdicts"],
                        answer=doc["answer"], notes=doc["notes"])
    print(f"rewrote {os.path.splitext(path)[0]}.json and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
