"""Public data in AIM's rounds on Adult: pgmjax's joint selection against JAM (mbi's repository), unbiased and shifted.

Does a shifted public table hurt more than it helps? Adult (48,842 records, 14 attributes) is split once
(``numpy.random.default_rng(data_seed)``, default 0) into a private part (90%, 43,958 records) and a pool (the
other 10%, 4,884). Three tables of 5% of the private part's size (2,198 records) are drawn from the pool, with the
same generator, once for the whole run:

* ``unbiased``: a uniform sample of the pool, without replacement;
* ``shifted``: i.i.d. draws from the pool reweighted: a record with income>50K = 1 weighs 4, one whose age code is
  above the private part's median age code weighs 0.5 (the two multiply); with replacement, so the draw follows the
  tilted distribution exactly (the pool holds too few high-income records for a draw without replacement to);
* ``uniform`` (JAM's no-public arm): 2,198 records with every attribute uniform over its domain, a table no round
  ever takes (its marginals are far from the private ones, so a public option scores far below every private one):
  JAM with it is JAM without public data, under JAM's own neighbouring relation. JAM needs a public table.

The page reports each table's one-way TVD from the private part (per attribute and the mean) and its mean two-way TVD.

Arms, each run once per (epsilon, seed) in a fresh process:

* ``pgmjax AIM``, ``+ unbiased``, ``+ shifted``: ``pgmjax.mechanisms.aim(private, epsilon, delta=1e-9,
  key=jax.random.key(seed), rounds=T_AIM, max_model_mb=M, engine_iters=I, synthetic=False,
  public=pj.PublicData(table))`` (joint selection each round: measure a marginal privately or take it from the
  public table; :mod:`pgmjax.mechanisms.public_selection`); add/remove-one-record neighbours, the record count
  private (estimated);
* ``JAM (no public)``, ``JAM + unbiased``, ``JAM + shifted``: ``JAM(epsilon, delta=1e-9, rounds=T_JAM,
  size_limit=M, optim_iters=I).run(private, public, workload)`` from ``mechanisms/jam.py`` of mbi's repository
  (private-pgm, HEAD of the local mirror) on mbi 2.0.0, in the ``--mbi-python`` interpreter
  (:mod:`bench.jam_reference`, which says what it adapts); bounded (replace-one) neighbours, the record count public
  (JAM scales the public table by it and draws that many records);
* optionally (``--arms ... mbi_aim``) ``mechanisms/aim.py`` of the same repository at ``T_AIM`` (add/remove
  neighbours: its Gaussian sensitivity is 1, its selection's the largest weight), not in the default run (time).

Settings: the workload is all 91 two-way marginals (weight 1; JAM's default is all 3-way, too slow here; AIM's
candidates and JAM's are its downward closure, 105 cliques). Rounds: AIM's ``T_AIM`` = 30 (its default 16 d = 224),
JAM's ``T_JAM`` = 20 (its default 30). AIM's ``T`` divides its budget (its 14 one-way measurements take
0.9 x 14 / T of it first, and its rounds anneal), so T = 30 runs about 17 to 22 rounds after the one-way
measurements; JAM runs exactly ``T`` rounds, its first from nothing. Equal ``T`` would give AIM far fewer rounds
(T = 20: about 5 after the one-ways), and JAM at its 30 costs about 140 s per run (a program compiled per round),
too long for 18 runs here; AIM at 224 takes 3 to 4 minutes at epsilon 3. The model-size limit ``M`` = 10 MB (both
defaults 80), ``I`` = 1,000 mirror-descent iterations per fit (both defaults; pgmjax's round fits stop earlier once
converged, its default). epsilon in {1, 3}, delta = 1e-9, seeds 0, 1, 2 (``--quick``: epsilon 1, seed 0, T_JAM =
10, 500 iterations).

Per run: ``tvd``, the mean total variation distance over the 91 two-way marginals between the final model and the
private part (both normalised; the model's marginals exact: pgmjax's ``model.marginals``, JAM's final model by
pgmjax's junction tree on its log-potentials); JAM's synthetic records' TVD beside (``tvd_synthetic``, what JAM's
own script reports); how many marginals the rounds took from the public table (and which); the rounds run; the
mechanism's wall time (``time.perf_counter`` around the call, in its process; the process's import and data loading
apart). JAM's processes run with ``PYTHONHASHSEED`` set to the seed: its candidate order, and so its draws,
follow Python's string hashing (``bench.jam_reference``). Mean, sd and range over the seeds; the answer per library
and epsilon: the shifted arm's mean TVD less the
no-public arm's, against twice the standard error of that difference (``sqrt(sd_a^2 / n + sd_b^2 / n)``).

Usage::

    python -m bench.public_data [--quick] [--eps 1 3] [--seeds 0 1 2] [--aim-rounds 30] [--jam-rounds 20]
        [--max-model-mb 10]
        [--iters 1000] [--arms ...] [--data-dir ../shared/data] [--mbi-python /tmp/v_mbi2/bin/python]
        [--jam-source /work/.mirror/ryan112358+private-pgm/repo] [--out-dir bench/results/public] [--out adult]

Results: ``<out-dir>/adult.json`` and ``adult.md`` (``--quick``: ``adult_quick``), rewritten after every run so a
partial run leaves its rows; ``--render RESULT.json`` writes a result's page again from its JSON (``--label``: the
machine's state). The full run takes about 35 minutes on the 2-core machine (the quick one about 2).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from bench import schema
from bench.children import child_command, json_child
from bench.schema import ROOT

NAME = "public"
DELTA = 1e-9
DEFAULT_MBI = "/tmp/v_mbi2/bin/python"
DEFAULT_MIRROR = "/work/.mirror/ryan112358+private-pgm/repo"

#: arm -> (library, mechanism, public table or None, neighbouring relation)
ARMS = {
    "pgmjax_none": ("pgmjax", "AIM", None, "add/remove one record (N private)"),
    "pgmjax_unbiased": ("pgmjax", "AIM + joint selection", "unbiased", "add/remove one record (N private)"),
    "pgmjax_shifted": ("pgmjax", "AIM + joint selection", "shifted", "add/remove one record (N private)"),
    "jam_none": ("mbi", "JAM", "uniform", "replace one record (N public)"),
    "jam_unbiased": ("mbi", "JAM", "unbiased", "replace one record (N public)"),
    "jam_shifted": ("mbi", "JAM", "shifted", "replace one record (N public)"),
    "mbi_aim": ("mbi", "AIM (mechanisms/aim.py)", None, "add/remove one record (N private)"),
}
DEFAULT_ARMS = tuple(a for a in ARMS if a != "mbi_aim")
LABELS = {"pgmjax_none": "pgmjax AIM", "pgmjax_unbiased": "pgmjax AIM + unbiased",
          "pgmjax_shifted": "pgmjax AIM + shifted", "jam_none": "JAM, no public (uniform table)",
          "jam_unbiased": "JAM + unbiased", "jam_shifted": "JAM + shifted", "mbi_aim": "mbi AIM (aim.py)"}
SHIFT = {"income_weight": 4.0, "old_weight": 0.5,
         "about": "income>50K = 1 weighted 4x; age code above the private part's median weighted 0.5x (multiplied); "
                  "i.i.d. draws from the pool with probability proportional to the weight (with replacement)"}


#: What the page says about the arms whatever the run (the adaptations, the reference's choices).
STATIC_NOTES = (
    "JAM is `mechanisms/jam.py` (with `mechanism.py`, `cdp2adp.py`) of mbi's repository, unchanged, run on mbi 2.0.0: "
    "the repository's own `src/mbi` at that commit fails on jax 0.10.2 (its `Factor` arithmetic under `jit`). "
    "`bench.jam_reference` adapts, and says so in its docstring: (1) an empty `matplotlib.pyplot` where matplotlib is "
    "missing (`cdp2adp.py` imports it, unused); (2) HEAD's `estimation.mirror_descent(domain, measurements, "
    "potentials=, iters=)` provided as mbi 2.0.0's `MirrorDescent().estimate(..., warm_start=potentials)` (Armijo "
    "line search as HEAD's, first step 2 / (L N) against HEAD's 2 / N, blocks of 50 iterations); (3) the model's "
    "`project(clique)`, called for every candidate every round, answered exactly by a numpy junction-tree route "
    "instead of mbi's variable elimination jitted per clique (about 100 compilations a round; checked against it, "
    "below), and `model.cliques` as a list as HEAD gives it; (4) seeding by `numpy.random.seed(seed)`: JAM passes "
    "its `prng` to `Mechanism.__init__` as the `bounded` parameter, so it draws from numpy's global state; (5) mbi "
    "2.0.0's `Dataset` built from columns.",
    "JAM's selection uses score sensitivity 2 for every option (replace-one neighbours). For a private option (the "
    "model's L1 error less a constant) that is the bound; a public option scores the model's error less the public "
    "table's, and one replaced record (a cell +1, another -1) can raise the first by 2 while lowering the second by "
    "2, so by our reading its sensitivity under replace-one is 4, and the rounds' draws would be up to twice as "
    "revealing as accounted. pgmjax's joint selection draws every option with twice AIM's sensitivity (2 per unit "
    "weight against 1, add/remove), so its selection is noisier with a public table given, taken or not.",
    "JAM weights every measurement alike (stddev 1, private and public), while its private noise changes from round "
    "to round (the budget a public round saves is spread over the rounds left); pgmjax enters a public marginal "
    "with the noise scale of the private measurement it replaces. pgmjax's 14 one-way measurements (AIM's first "
    "step) are always private; JAM measures nothing before its first round and may take one-way marginals publicly.",
    "TVDs across libraries are not like for like (neighbouring relations: JAM's Gaussian sensitivity is sqrt 2, "
    "AIM's 1; AIM's T divides its budget, JAM's counts its rounds; different engines): the question is answered "
    "within each library.",
)


def _jax():
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    return jax


def normalised_tvd(p, q) -> float:
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    return float(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())


# ----------------------------------------------------------------------------- the data
def prepare(data, folder: str, data_seed: int, private_share: float = 0.9, public_share: float = 0.05) -> dict:
    """Split Adult, draw the public tables, write them as ``.npy`` into ``folder`` with ``meta.json``; returns the
    meta (paths and how each table was drawn)."""
    records = np.asarray(data.records, np.int64)
    attrs = list(data.domain.attributes)
    rng = np.random.default_rng(data_seed)
    perm = rng.permutation(len(records))
    n_private = int(round(private_share * len(records)))
    private, pool = records[perm[:n_private]], records[perm[n_private:]]
    m = int(round(public_share * n_private))
    income, age = pool[:, attrs.index("income>50K")], pool[:, attrs.index("age")]
    median_age = float(np.median(private[:, attrs.index("age")]))
    weight = np.where(income == 1, SHIFT["income_weight"], 1.0) * np.where(age > median_age, SHIFT["old_weight"], 1.0)
    tables = {
        "unbiased": pool[rng.choice(len(pool), m, replace=False)],
        "shifted": pool[rng.choice(len(pool), m, replace=True, p=weight / weight.sum())],
        "uniform": rng.integers(0, [data.domain[a] for a in attrs], size=(m, len(attrs))).astype(np.int64),
    }
    paths = {"private": os.path.join(folder, "private.npy")}
    np.save(paths["private"], private)
    for name, t in tables.items():
        paths[name] = os.path.join(folder, f"public_{name}.npy")
        np.save(paths[name], t)
    meta = {"domain": {a: int(data.domain[a]) for a in attrs}, "private": paths["private"], "tables": paths,
            "records": len(records), "private_records": n_private, "pool_records": len(pool), "public_records": m,
            "data_seed": data_seed, "median_age_code": median_age}
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f)
    return meta


def describe_tables(pj, domain, meta: dict) -> list[dict]:
    """Each public table against the private part: one-way TVD per attribute and mean, mean two-way TVD, shares."""
    attrs = list(domain.attributes)
    private = pj.Dataset(np.load(meta["private"]), domain)
    pairs = list(itertools.combinations(attrs, 2))
    truth1 = private.marginals([(a,) for a in attrs])
    truth2 = private.marginals(pairs)
    i_inc, i_age = attrs.index("income>50K"), attrs.index("age")
    out = []
    for name in ("unbiased", "shifted", "uniform"):
        rec = np.load(meta["tables"][name])
        table = pj.Dataset(rec, domain)
        one = {a: normalised_tvd(t, p) for a, t, p in zip(attrs, truth1, table.marginals([(a,) for a in attrs]))}
        out.append({"table": name, "records": int(len(rec)), "distinct_records": int(len(np.unique(rec, axis=0))),
                    "tvd_1way": one, "tvd_1way_mean": float(np.mean(list(one.values()))),
                    "tvd_2way_mean": float(np.mean([normalised_tvd(t, p) for t, p in zip(truth2, table.marginals(pairs))])),
                    "income_share": float(np.mean(rec[:, i_inc] == 1)),
                    "old_share": float(np.mean(rec[:, i_age] > meta["median_age_code"]))})
    priv = np.load(meta["private"])
    out.append({"table": "private part", "records": int(len(priv)), "income_share": float(np.mean(priv[:, i_inc] == 1)),
                "old_share": float(np.mean(priv[:, i_age] > meta["median_age_code"]))})
    return out


# ----------------------------------------------------------------------------- the pgmjax side (a child process)
def run_pgmjax(args) -> dict:
    jax = _jax()
    import pgmjax as pj
    from pgmjax.mechanisms import aim

    with open(args.meta) as f:
        meta = json.load(f)
    domain = pj.Domain(meta["domain"])
    private = pj.Dataset(np.load(meta["private"]), domain)
    public = pj.PublicData(pj.Dataset(np.load(args.public), domain)) if args.public else None
    t = time.perf_counter()
    result = aim(private, args.epsilon, DELTA, key=jax.random.key(args.seed), rounds=args.aim_rounds,
                 max_model_mb=args.max_model_mb, engine_iters=args.iters, synthetic=False, public=public)
    jax.block_until_ready(result.model.theta)
    wall = time.perf_counter() - t
    pairs = list(itertools.combinations(domain.attributes, 2))
    np.savez(args.arrays, **{f"pair_{j}": np.asarray(m, np.float64)
                             for j, m in enumerate(result.model.marginals(pairs))})
    info = result.info
    log = [{"round": e.get("round"), "clique": list(e["clique"]), "source": e.get("source", "private"),
            "sigma": e.get("sigma"), "em_epsilon": e.get("em_epsilon"), "model_mb": e.get("model_mb"),
            "annealed": e.get("annealed"), "last": e.get("last")} for e in info.log]
    ledger = result.ledger
    public_entries = [e for e in ledger if e.mechanism == "public"]
    em = sorted({float(e.sensitivity) for e in ledger if e.mechanism == "exponential"})
    return {"library": "pgmjax", "mechanism": "aim", "epsilon": args.epsilon, "delta": DELTA, "seed": args.seed,
            "wall_s": wall, "rounds_nominal": info.rounds, "rounds_run": info.rounds_run,
            "public_taken": len(info.public or []),
            "public_cliques": [list(c) for c in info.public or []],
            "log": log, "ledger_public_entries": len(public_entries),
            "ledger_public_cost": float(sum(e.cost for e in public_entries)),
            "ledger_spent": float(result.accountant.spent), "rho": float(result.accountant.budget),
            "em_sensitivities": em, "annealed": info.annealed, "total": float(result.model.total),
            "model_mb": log[-1]["model_mb"] if log else None, "seconds": info.seconds,
            "model_cliques": [list(c) for c in result.model.cliques], "arrays": args.arrays,
            "backend": jax.default_backend()}


# ----------------------------------------------------------------------------- scoring (the same code for both)
def score(row: dict, pj, domain, truth2, pairs) -> dict:
    with np.load(row["arrays"]) as z:
        arrays = {k: z[k] for k in z.files}
    out = {}
    if row["library"] == "pgmjax":
        answers = [arrays[f"pair_{j}"] for j in range(len(pairs))]
    else:
        tables = {tuple(c): arrays[f"pot_{j}"] for j, c in enumerate(row["potential_cliques"])}
        plan = pj.graph.oracle.make_plan(domain, list(tables))
        model = pj.GraphicalModel(plan, plan.from_tables(tables), float(row["total"]))
        answers = [np.asarray(m, np.float64) for m in model.marginals(pairs)]
        synth = pj.Dataset(arrays["records"], domain)
        out["tvd_synthetic"] = float(np.mean([normalised_tvd(t, s) for t, s in zip(truth2, synth.marginals(pairs))]))
    out["tvd"] = float(np.mean([normalised_tvd(t, a) for t, a in zip(truth2, answers)]))
    return out


# ----------------------------------------------------------------------------- children
def _child(cmd: list[str], label: str, env: dict, timeout: float) -> dict | None:
    t = time.perf_counter()
    row = json_child(cmd, cmd[cmd.index("--result") + 1], env, label, timeout)
    if row is None:
        return None
    row["process_wall_s"] = time.perf_counter() - t
    return row


# ----------------------------------------------------------------------------- summaries and the page
def summary_stats(xs) -> dict | None:
    xs = [float(x) for x in xs if x is not None]
    if not xs:
        return None
    return {"mean": float(np.mean(xs)), "sd": float(statistics.stdev(xs)) if len(xs) > 1 else 0.0,
            "min": min(xs), "max": max(xs), "n": len(xs)}


SUMMARY_KEYS = ("tvd", "tvd_synthetic", "public_taken", "rounds_run", "wall_s", "process_wall_s", "model_mb")


def summarise(rows: list[dict], arms) -> list[dict]:
    out = []
    for eps in dict.fromkeys(r["epsilon"] for r in rows):
        for arm in arms:
            group = [r for r in rows if r["epsilon"] == eps and r["arm"] == arm]
            if not group:
                continue
            s = {"epsilon": eps, "arm": arm, "seeds": [r["seed"] for r in group]}
            for k in SUMMARY_KEYS:
                st = summary_stats([r.get(k) for r in group])
                if st is not None:
                    s[k] = st
            counts: dict = {}
            for r in group:
                for c in r.get("public_cliques") or []:
                    counts[", ".join(c)] = counts.get(", ".join(c), 0) + 1
            s["public_cliques"] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
            out.append(s)
    return out


def verdicts(summary: list[dict]) -> list[dict]:
    """Per (library, epsilon): each public arm's mean TVD less the no-public arm's, against 2 standard errors."""
    out = []
    by = {(s["epsilon"], s["arm"]): s for s in summary}
    for eps in dict.fromkeys(s["epsilon"] for s in summary):
        for base, arms in (("pgmjax_none", ("pgmjax_unbiased", "pgmjax_shifted")),
                           ("jam_none", ("jam_unbiased", "jam_shifted"))):
            b = by.get((eps, base))
            for arm in arms:
                a = by.get((eps, arm))
                if not (a and b and "tvd" in a and "tvd" in b):
                    continue
                diff = a["tvd"]["mean"] - b["tvd"]["mean"]
                se = float(np.sqrt(a["tvd"]["sd"] ** 2 / a["tvd"]["n"] + b["tvd"]["sd"] ** 2 / b["tvd"]["n"]))
                if min(a["tvd"]["n"], b["tvd"]["n"]) < 2:
                    word = "one seed: no spread to judge by"
                elif diff <= 0:
                    word = "better" if diff < -2 * se else "no worse (lower mean, within 2 SE)"
                else:
                    word = "worse" if diff > 2 * se else "no worse within seed spread (higher mean, within 2 SE)"
                out.append({"epsilon": eps, "baseline": base, "arm": arm, "diff": diff, "se": se,
                            "n": [a["tvd"]["n"], b["tvd"]["n"]], "verdict": word})
    return out


def format_mean_sd(st, fmt="{:.4f}") -> str:
    if not st:
        return "n/a"
    if st["n"] == 1:
        return fmt.format(st["mean"])
    return f"{fmt.format(st['mean'])} ± {fmt.format(st['sd'])}"


def format_range(st, fmt="{:.0f}") -> str:
    if not st:
        return "n/a"
    if st["min"] == st["max"]:
        return fmt.format(st["min"])
    return f"{fmt.format(st['mean'])} ({fmt.format(st['min'])}–{fmt.format(st['max'])})".replace(".0 (", " (")


def render(doc: dict) -> list[str]:
    meta, settings, summary = doc["meta"], doc["settings"], doc["summary"]
    lines = ["# Public data in AIM's rounds on Adult: pgmjax's joint selection against JAM", "",
             *schema.header_lines(meta)]
    lines += [f"Machine (platform): {settings['platform']}, os.cpu_count() = {settings['cpu_count']}; load average "
              f"at start {settings['load_start']}, at end {settings.get('load_end')}. "
              + ("**Partial run**: " + settings["progress"] + "." if not settings.get("complete") else
                 f"Complete: {settings['progress']}, {settings.get('total_wall_s', 0) / 60:.1f} minutes."), ""]
    if settings.get("label"):
        lines += [f"**Machine state**: {settings['label']}", ""]
    mv, ref = settings.get("mbi_versions"), settings.get("jam_reference")
    lines += ["mbi side: " + (f"`{settings['mbi_python']}`" if settings.get("mbi_python") else "not run")
              + (f" (mbi {mv.get('mbi')}, jax {mv.get('jax')}, jaxlib {mv.get('jaxlib')}, numpy {mv.get('numpy')}, "
                 f"scipy {mv.get('scipy')}, Python {mv.get('python')})" if mv else "")
              + (f"; JAM from `{ref['source']}` at commit {ref['commit']} ({ref['commit_date']}): "
                 + ", ".join(f"`{k}` blob {v[:10]}" for k, v in (ref.get("blobs") or {}).items())
                 if ref and ref.get("commit") else "") + ".", ""]
    lines += ["## The question", ""]
    vd = doc.get("verdicts") or []
    if vd:
        lines += ["Mean two-way TVD of each public arm less its library's no-public arm (negative: the public table "
                  "helped), against twice the standard error of the difference over the seeds:", ""]
        lines += schema.table([{"epsilon": f"{v['epsilon']:g}", "arm": LABELS[v["arm"]], "vs": LABELS[v["baseline"]],
                                "TVD difference": f"{v['diff']:+.4f}", "2 SE": f"{2 * v['se']:.4f}",
                                "seeds": "/".join(map(str, v["n"])), "verdict": v["verdict"]} for v in vd])
        lines.append("")
    else:
        lines += ["(no pair of arms finished yet)", ""]
    for note in doc.get("answer") or []:
        lines += [note, ""]
    lines += ["## Setup", "",
              f"Data: Adult, {settings['records']:,} records, 14 attributes (`{settings['data_file']}`), split once "
              f"(numpy.random.default_rng({settings['data_seed']})) into a private part of "
              f"{settings['private_records']:,} records and a pool of {settings['pool_records']:,}; public tables of "
              f"{settings['public_records']:,} records (5% of the private part) drawn from it with the same generator, "
              "the same tables for every seed and epsilon. Shifted table: " + SHIFT["about"]
              + f" (median age code {settings['median_age_code']:g}). The uniform table (every attribute uniform "
              "over its domain) is JAM's no-public arm.", ""]
    lines += schema.table([{
        "table": t["table"], "records": t["records"], "distinct": t.get("distinct_records", ""),
        "1-way TVD (mean of 14)": f"{t['tvd_1way_mean']:.4f}" if "tvd_1way_mean" in t else "",
        "largest 1-way TVD": (lambda d: f"{max(d.values()):.4f} ({max(d, key=d.get)})")(t["tvd_1way"])
        if "tvd_1way" in t else "",
        "2-way TVD (mean of 91)": f"{t['tvd_2way_mean']:.4f}" if "tvd_2way_mean" in t else "",
        "income>50K share": f"{t['income_share']:.3f}", "age above median share": f"{t['old_share']:.3f}"}
        for t in settings["tables"]])
    lines += ["", "Arms (each run in a fresh process, one after another, the arms alternating within each (epsilon, "
              "seed)):", ""]
    lines += schema.table([{"arm": LABELS[a], "library": ARMS[a][0], "mechanism": ARMS[a][1],
                            "public table": ARMS[a][2] or "none", "neighbouring relation": ARMS[a][3]}
                           for a in settings["arms"]])
    lines += ["", f"Settings: workload all 91 two-way marginals, weight 1 (JAM's default is all 3-way). Rounds: "
              f"AIM T = {settings['aim_rounds']} (its default 16 d = 224), JAM T = {settings['jam_rounds']} (its "
              "default 30). AIM's T divides its budget (its 14 one-way measurements take 0.9 x 14 / T of it first, "
              "and its rounds anneal), so its rounds run (below) are fewer than T; JAM runs exactly T rounds, its "
              "first from nothing: the two T give about equal rounds run; equal T would leave AIM few rounds, and "
              "JAM's default 30 costs about 140 s a run on this machine (a program compiled per round). Model-size "
              f"limit {settings['max_model_mb']:g} MB (both defaults 80); {settings['iters']:,} mirror-descent "
              "iterations per fit (both defaults; pgmjax's round fits stop earlier once converged, its default); "
              "epsilon " + ", ".join(f"{e:g}" for e in settings["eps"])
              + f", delta {DELTA:g}; seeds {', '.join(map(str, settings['seeds']))} (pgmjax `jax.random.key(seed)`; "
              "JAM `numpy.random.seed(seed)`).", "",
              "Columns: `TVD` the mean total variation distance of the final model's 91 two-way marginals from the "
              "private part's (exact marginals for both: pgmjax's model, and JAM's final model through pgmjax's "
              "junction tree on its log-potentials); `TVD synth` JAM's synthetic records (N of them, mbi's "
              "randomised rounding), what JAM's own script reports; `public taken` marginals the rounds took from the "
              "public table; `rounds` rounds run; `wall s` the mechanism's call (process start, imports, data "
              "loading apart); `model MB` the final junction tree (pgmjax: its log's last size; mbi: "
              "`hypothetical_model_size`). Mean ± sd over the seeds; counts as mean (min–max).", ""]
    for eps in settings["eps"]:
        group = [s for s in summary if s["epsilon"] == eps]
        if not group:
            continue
        lines += [f"## epsilon = {eps:g}", ""]
        lines += schema.table([{
            "arm": LABELS[s["arm"]], "seeds": len(s["seeds"]), "TVD": format_mean_sd(s.get("tvd")),
            "TVD range": f"{s['tvd']['min']:.4f}–{s['tvd']['max']:.4f}" if s.get("tvd") else "n/a",
            "TVD synth": format_mean_sd(s.get("tvd_synthetic")), "public taken": format_range(s.get("public_taken"), "{:.1f}"),
            "rounds": format_range(s.get("rounds_run"), "{:.1f}"), "wall s": format_mean_sd(s.get("wall_s"), "{:.1f}"),
            "model MB": format_mean_sd(s.get("model_mb"), "{:.2f}")} for s in group])
        lines.append("")
        taken = [s for s in group if s.get("public_cliques")]
        if taken:
            lines += ["Public marginals taken (times over the seeds):", ""]
            lines += [f"* {LABELS[s['arm']]}: " + "; ".join(f"({k}) x{v}" for k, v in s["public_cliques"].items())
                      for s in taken]
            lines.append("")
    lines += ["## Runs", ""]
    lines += schema.table([{
        "epsilon": f"{r['epsilon']:g}", "seed": r["seed"], "arm": LABELS[r["arm"]], "TVD": f"{r['tvd']:.4f}",
        "TVD synth": f"{r['tvd_synthetic']:.4f}" if r.get("tvd_synthetic") is not None else "",
        "public taken": r.get("public_taken"), "rounds": r.get("rounds_run"), "wall s": f"{r['wall_s']:.1f}",
        "process s": f"{r['process_wall_s']:.1f}"} for r in doc["rows"]])
    lines.append("")
    if doc.get("notes"):
        lines += ["## Notes", "", *[f"* {n}" for n in doc["notes"]], ""]
    return lines


# ----------------------------------------------------------------------------- driver
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.public_data", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="epsilon 1, seed 0, JAM 10 rounds, 500 iterations "
                                                         "(results not to commit)")
    ap.add_argument("--eps", type=float, nargs="+", default=None, help="epsilons (default 1 3)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default 0 1 2)")
    ap.add_argument("--aim-rounds", type=int, default=30, help="AIM's T, pgmjax's arms and mbi_aim (default 30)")
    ap.add_argument("--jam-rounds", type=int, default=None, help="JAM's rounds (default 20; quick 10)")
    ap.add_argument("--max-model-mb", type=float, default=10.0, help="model-size limit in MB, every arm (default 10)")
    ap.add_argument("--iters", type=int, default=None, help="mirror-descent iterations per fit (default 1000; "
                                                            "quick 500)")
    ap.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(DEFAULT_ARMS))
    ap.add_argument("--data-seed", type=int, default=0, help="the split's and the public tables' generator seed")
    ap.add_argument("--check", type=int, default=1, help="JAM: candidates per model checked against mbi's own "
                                                         "project (bench.jam_reference)")
    ap.add_argument("--data-dir", default=os.environ.get("PGMJAX_DATA", os.path.join(ROOT, "..", "shared", "data")),
                    help="the shared data folder (default $PGMJAX_DATA or ../shared/data)")
    ap.add_argument("--mbi-python", default=DEFAULT_MBI if os.path.exists(DEFAULT_MBI) else None,
                    help=f"interpreter with mbi==2.0.0 (default {DEFAULT_MBI} where it exists; else the mbi arms "
                         "are skipped)")
    ap.add_argument("--jam-source", default=DEFAULT_MIRROR, help="git directory of mbi's repository (private-pgm)")
    ap.add_argument("--jam-commit", default="HEAD", help="its commit to run JAM from")
    ap.add_argument("--out-dir", default=os.path.join(schema.RESULTS, NAME), help="folder of the results")
    ap.add_argument("--out", default=None, help="result name in --out-dir (default adult; --quick: adult_quick), "
                                                 "or a path used as it is")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child process before it is killed")
    ap.add_argument("--render", default=None, metavar="RESULT.json",
                    help="write a result's page (and its notes, summary and verdicts) again from its JSON")
    ap.add_argument("--label", default=None, help="the machine's state, shown on the page (with --render: replaces "
                                                   "the result's)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--meta", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--public", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--epsilon", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--arrays", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.render:
        return rerender(args.render, args.label)
    if args.child:
        row = run_pgmjax(args)
        with open(args.result, "w") as f:
            json.dump(row, f)
        return 0

    eps_list = args.eps or ([1.0] if args.quick else [1.0, 3.0])
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    jam_rounds = args.jam_rounds or (10 if args.quick else 20)
    iters = args.iters or (500 if args.quick else 1000)
    name = args.out or ("adult_quick" if args.quick else "adult")
    out_path = name if (os.sep in name or "/" in name) else os.path.join(args.out_dir, name)

    csv = os.path.join(args.data_dir, "adult", "adult.csv")
    if not (os.path.isfile(csv) and os.path.isfile(os.path.join(args.data_dir, "adult", "adult-domain.json"))):
        print(f"public_data: no adult/adult.csv and adult-domain.json under {args.data_dir} "
              "(pass --data-dir or set PGMJAX_DATA); skipped")
        return 0
    notes: list[str] = list(STATIC_NOTES)
    arms = list(args.arms)
    mbi_arms = [a for a in arms if ARMS[a][0] == "mbi"]
    if mbi_arms and not (args.mbi_python and os.path.exists(args.mbi_python)):
        notes.append(f"mbi arms not run: no interpreter at {args.mbi_python or DEFAULT_MBI} (pass --mbi-python)")
        print("public_data:", notes[-1], file=sys.stderr)
        arms = [a for a in arms if a not in mbi_arms]
    elif mbi_arms and not os.path.isdir(args.jam_source):
        notes.append(f"mbi arms not run: no git directory at {args.jam_source} (pass --jam-source)")
        print("public_data:", notes[-1], file=sys.stderr)
        arms = [a for a in arms if a not in mbi_arms]

    import platform

    import pgmjax as pj

    load_start = [round(x, 2) for x in os.getloadavg()]
    data = pj.datasets.load("adult", args.data_dir)
    domain = data.domain
    pairs = list(itertools.combinations(domain.attributes, 2))
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PGMJAX_COMPILATION_CACHE")}
    started = time.perf_counter()
    rows: list[dict] = []
    folder = tempfile.mkdtemp(prefix="pgmjax_public_")
    meta_run = schema.run_meta("bench.public_data", argv)
    try:
        meta = prepare(data, folder, args.data_seed)
        meta_path = os.path.join(folder, "meta.json")
        tables = describe_tables(pj, domain, meta)
        for t in tables:
            if "tvd_1way_mean" in t:
                print(f"public table {t['table']}: 1-way TVD {t['tvd_1way_mean']:.4f}, 2-way {t['tvd_2way_mean']:.4f}, "
                      f"income share {t['income_share']:.3f}", file=sys.stderr, flush=True)
        private = pj.Dataset(np.load(meta["private"]), domain)
        truth2 = private.marginals(pairs)
        settings = {
            "dataset": "adult", "data_file": os.path.abspath(csv), "records": meta["records"],
            "private_records": meta["private_records"], "pool_records": meta["pool_records"],
            "public_records": meta["public_records"], "data_seed": args.data_seed,
            "median_age_code": meta["median_age_code"], "shift": SHIFT, "tables": tables, "eps": eps_list,
            "seeds": seeds, "aim_rounds": args.aim_rounds, "jam_rounds": jam_rounds,
            "max_model_mb": args.max_model_mb, "iters": iters, "delta": DELTA,
            "arms": arms, "arm_settings": {a: dict(zip(("library", "mechanism", "public", "neighbours"), ARMS[a]))
                                           for a in arms},
            "workload": "all 91 two-way marginals, weight 1", "mbi_python": args.mbi_python if mbi_arms else None,
            "mbi_versions": None, "jam_reference": None, "platform": platform.platform(),
            "cpu_count": os.cpu_count(), "load_start": load_start, "label": args.label, "quick": args.quick,
            "complete": False,
        }
        total_runs = len(eps_list) * len(seeds) * len(arms)

        def write(final: bool = False):
            settings["load_end"] = [round(x, 2) for x in os.getloadavg()]
            settings["total_wall_s"] = time.perf_counter() - started
            settings["complete"] = final
            settings["progress"] = f"{len(rows)} of {total_runs} runs"
            given = {"mbi": settings["mbi_versions"]["mbi"]} if settings.get("mbi_versions") else {}
            meta_out = dict(meta_run, versions={**meta_run["versions"], **given})
            doc = document(meta_out, settings, rows, notes)
            schema.write_result(NAME, out_path, rows, meta_out, page=render(doc), quiet=not final,
                                settings=settings, summary=doc["summary"], verdicts=doc["verdicts"],
                                answer=doc["answer"],
                                notes=doc["notes"])

        for eps, seed, arm in ((e, s, a) for e in eps_list for s in seeds for a in arms):
            library, _, table, _ = ARMS[arm]
            result = os.path.join(folder, f"row_{arm}_{eps:g}_{seed}.json")
            arrays = os.path.join(folder, f"arrays_{arm}_{eps:g}_{seed}.npz")
            common = ["--meta", meta_path, "--epsilon", eps, "--seed", seed, "--arrays", arrays, "--result", result]
            if library == "pgmjax":
                cmd = [*child_command("bench.public_data"), "--child", *map(str, common), "--aim-rounds",
                       str(args.aim_rounds),
                       "--max-model-mb", str(args.max_model_mb), "--iters", str(iters)]
                if table:
                    cmd += ["--public", meta["tables"][table]]
            else:
                cmd = [*child_command("bench.jam_reference", python=args.mbi_python), *map(str, common),
                       "--mechanism", "aim" if arm == "mbi_aim" else "jam",
                       "--rounds", str(args.aim_rounds if arm == "mbi_aim" else jam_rounds),
                       "--size-limit", str(args.max_model_mb), "--iters", str(iters), "--check", str(args.check),
                       "--source", args.jam_source, "--commit", args.jam_commit]
                if table:
                    cmd += ["--public", meta["tables"][table]]
            label = f"{LABELS[arm]}, eps={eps:g}, seed {seed}"
            begun = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            load = [round(x, 2) for x in os.getloadavg()]
            # JAM's candidate order (a set's) and so its draws depend on Python's string hashing: fix it per seed
            row = _child(cmd, label, env if library == "pgmjax" else {**env, "PYTHONHASHSEED": str(seed)},
                         args.timeout)
            if row is None:
                notes.append(f"{label}: the child process failed or was killed (see its output)")
                write()
                continue
            row["arm"] = arm
            row["started"], row["load_average_start"] = begun, load
            row.update(score(row, pj, domain, truth2, pairs))
            os.remove(row.pop("arrays"))
            if library == "mbi":
                settings["mbi_versions"] = settings["mbi_versions"] or row.get("versions")
                settings["jam_reference"] = settings["jam_reference"] or row.get("reference")
            rows.append(row)
            print(f"[{label}] TVD {row['tvd']:.4f}, public taken {row.get('public_taken')}, rounds "
                  f"{row.get('rounds_run')}, wall {row['wall_s']:.1f} s (process {row['process_wall_s']:.1f} s)",
                  file=sys.stderr, flush=True)
            write()
        write(final=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def document(meta: dict, settings: dict, rows: list[dict], run_notes: list[str]) -> dict:
    """The result's sections from its rows: summary, verdicts, the answer and the notes."""
    summary = summarise(rows, settings["arms"])
    doc = {"meta": meta, "settings": settings, "summary": summary, "verdicts": verdicts(summary), "rows": rows,
           "notes": list(run_notes) + auto_notes(rows, summary, settings)}
    doc["answer"] = answer(doc["verdicts"], summary)
    return doc


def rerender(path: str, label: str | None = None) -> int:
    """Rewrite ``path``'s page and derived sections from its rows and settings (the current notes and page); with
    ``label``, the machine's state the page shows."""
    with open(path) as f:
        old = json.load(f)
    if label is not None:
        old["settings"]["label"] = label
    run_notes = list(STATIC_NOTES) + [n for n in old.get("notes") or []
                                      if "failed or was killed" in n or " not run:" in n]
    doc = document(old["meta"], old["settings"], old["rows"], run_notes)
    schema.write_result(NAME, os.path.splitext(os.path.abspath(path))[0], doc["rows"], doc["meta"], page=render(doc),
                        quiet=True, settings=doc["settings"], summary=doc["summary"], verdicts=doc["verdicts"],
                        answer=doc["answer"], notes=doc["notes"])
    print(f"rewrote {os.path.splitext(path)[0]}.json and .md")
    return 0


def answer(vd: list[dict], summary: list[dict]) -> list[str]:
    """One sentence per library on the shifted table, from the verdicts."""
    out = []
    for lib, base, arm in (("pgmjax", "pgmjax_none", "pgmjax_shifted"), ("JAM", "jam_none", "jam_shifted")):
        got = [v for v in vd if v["arm"] == arm]
        if not got:
            continue
        parts = []
        for v in got:
            taken = next((s.get("public_taken") for s in summary if s["epsilon"] == v["epsilon"] and s["arm"] == arm),
                         None)
            parts.append(f"epsilon {v['epsilon']:g}: {v['diff']:+.4f} TVD against {2 * v['se']:.4f} (2 SE), "
                         f"{v['verdict']}" + (f"; {taken['mean']:.1f} public marginals taken per run" if taken else ""))
        worse = [v for v in got if v["verdict"] == "worse"]
        if all(v["verdict"].startswith("one seed") for v in got):
            head = "one seed only, no spread to judge by"
        elif worse:
            head = "the shifted table hurt beyond the seed spread at " + ", ".join(f"epsilon {v['epsilon']:g}"
                                                                                  for v in worse)
        else:
            head = "no worse than without public data within the seed spread"
        out.append(f"**{lib} + shifted table vs {lib} without public data**: " + head
                   + " (" + "; ".join(parts) + ").")
    return out


def auto_notes(rows: list[dict], summary: list[dict], settings: dict) -> list[str]:
    notes = []
    jam = [r for r in rows if r["library"] == "mbi" and r.get("mechanism") == "jam"]
    if jam:
        checks = [r["check_max_abs"] for r in jam if r.get("check_max_abs") is not None]
        if checks:
            notes.append("JAM's candidate marginals (bench.jam_reference's exact junction-tree route) against "
                         f"mbi's own `MarkovRandomField.project`: largest absolute difference {max(checks):.3g} "
                         "counts over "
                         f"{sum(r['checks'] for r in jam)} checked candidates (float32 against float64).")
        unspent = [r for r in jam if r.get("rho_used") is not None and r["rho_used"] < r["rho"] * (1 - 1e-6)]
        if unspent:
            notes.append(f"JAM left budget unspent in {len(unspent)} of {len(jam)} runs (its last round took a public "
                         "marginal, which spends only the selection share; the rest of that round's budget is never "
                         "used): " + "; ".join(f"{r['arm']} eps {r['epsilon']:g} seed {r['seed']}: "
                                               f"{r['rho_used'] / r['rho']:.1%} of rho" for r in unspent) + ".")
        fixed = [r for r in jam if r.get("pythonhashseed") not in (None, "", "random")]
        about = ("JAM's draws depend on Python's string hashing (its candidates' order comes from a set: "
                 "`downward_closure` sorts a set by length only; with the hash seed free, two runs of one seed select "
                 "different marginals)")
        if len(fixed) == len(jam):
            notes.append(about + ": every JAM process ran with `PYTHONHASHSEED` = its seed, so a run reproduces.")
        else:
            notes.append(about + f": {len(jam) - len(fixed)} of these {len(jam)} JAM runs ran with the hash seed "
                         "free (written before the script fixed it per seed), so they do not reproduce seed by seed; "
                         "each is still an independent run.")
        none = [r for r in jam if r["arm"] == "jam_none"]
        if none:
            notes.append(f"JAM's no-public arm (uniform table) took {sum(r['public_taken'] for r in none)} public "
                         f"marginals over {len(none)} runs.")
        fits = [r for r in jam if r.get("fit_s") is not None]
        if fits:
            notes.append("JAM's time, mean over its runs: fits (mbi 2.0.0 MirrorDescent, compiling a program per "
                         f"round's structure) {np.mean([r['fit_s'] for r in fits]):.1f} s, candidate marginals "
                         f"{np.mean([r['project_s'] for r in fits]):.1f} s, of "
                         f"{np.mean([r['wall_s'] for r in fits]):.1f}"
                         " s per run.")
    pg = [r for r in rows if r["library"] == "pgmjax"]
    if pg:
        em = sorted({tuple(r["em_sensitivities"]) for r in pg if r["public_taken"] or r["arm"] != "pgmjax_none"})
        em0 = sorted({tuple(r["em_sensitivities"]) for r in pg if r["arm"] == "pgmjax_none"})
        notes.append(f"pgmjax's selection sensitivities (the ledger's exponential entries; a 2-way candidate weighs "
                     f"26): without public data {em0}, with a public table {em} (joint selection doubles it in the "
                     "rounds that offer public options; the last round measures privately).")
        bad = [r for r in pg if r["public_taken"] != r["ledger_public_entries"] or r["ledger_public_cost"] != 0]
        notes.append("pgmjax's ledgers: every public marginal taken has a zero-cost `public` entry"
                     + ("." if not bad else f", except in {len(bad)} runs."))
    return notes


if __name__ == "__main__":
    raise SystemExit(main())
