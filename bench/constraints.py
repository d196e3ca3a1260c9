"""Structural constraints on Adult, pgmjax against mbi 2.0: accuracy, mass on forbidden cells, violations, time.

Two constraints that hold exactly in Adult (48,842 records, 14 attributes; the driver counts the records on their
forbidden cells, prints the counts and stops unless both are zero):

* C1 over (marital-status, relationship): the relationship codes 0 (Wife) and 2 (Husband) occur only with the
  married statuses, marital-status codes 0 and 6: ``Constraint.forbid`` of relationship in {0, 2} with
  marital-status in {1, ..., 5} (10 cells);
* C2 over (workclass, occupation): occupation code 14 occurs exactly when workclass is 7 or 8:
  ``Constraint.allow`` of (w, 14) for w in {7, 8} and (w, o) for w not in {7, 8}, o != 14 (100 of 135 cells).

Measurements: the 14 one-way marginals and the 10 two-way marginals of :data:`MEASURED_PAIRS` (neither constraint's
pair among them, so nothing measured says the constraints' cells are empty), 24 in all, each with Gaussian noise
calibrated to zCDP: ``rho = cdp_rho(epsilon, 1e-9)`` split equally, ``sigma = sqrt(24 / (2 rho))`` (sensitivity 1
each). The noise is drawn once per seed in this driver, ``numpy.random.default_rng(seed)`` (one standard normal
per cell, measurement after measurement, scaled by each epsilon's sigma: common random numbers across epsilons),
and the same noisy answers go to both libraries through one ``.npz`` per (epsilon, seed).

Four arms, each library fitted to the same answers with ``iters`` mirror-descent iterations (default 2,000; each
library's defaults otherwise: float32; pgmjax ``pj.estimate``'s accelerated mirror descent, mbi's
``MirrorDescent`` with Armijo line search) and the known total ``N`` (pgmjax ``total=N``, mbi ``known_total=N``):
pgmjax without and with ``constraints=[C1, C2]``, mbi without and with ``constraints=(C1, C2)`` (``mbi.Constraint``,
``invalid=`` for C1, ``valid=`` for C2; :mod:`bench.mbi_constraints`). Each (library, arm, epsilon) runs in a fresh
interpreter that fits the seeds one after another: the first seed's fit includes compiling, the later ones reuse
the programs (reported apart: ``fit_first_s`` and ``fit_warm_s``). Per fit, scored here with the same code for both:

* ``loss``: the fit's objective at the model, ``1/2 sum_c ||(mu_c - y_c) / sigma||^2`` over the 24 measurements
  (the same formula for both, from the model's marginals: how near each library came to its arm's optimum);
* ``tvd``: the mean total variation distance over all 91 two-way marginals between the model and the true data;
  ``tvd_C1``, ``tvd_C2``: on the constraints' pairs;
* ``forbidden_mass``: the model's count on the constraints' forbidden cells, as a fraction of ``N`` (C1 and C2);
* ``violations``: how many of ``N`` synthetic records lie on a forbidden cell (``Constraint.violations``); pgmjax
  ``model.synthetic_data(N, key=jax.random.key(seed))`` (its default, ``"exact"``: i.i.d. draws), mbi
  ``mbi.extensions.synthetic_data(model, N, seed)`` (Gumbel rounding, the sampler that folds the constraints in);
  ``tvd_synthetic``: their mean TVD over the 91 pairs against the data;
* ``fit_s`` (wall, ``time.perf_counter``, the model on the host's side of ``block_until_ready``; mbi's ``estimate``
  also computes the final marginals, pgmjax computes them on first use) and the model's size: ``jtree_cells``
  (the cells of the junction tree's maximal cliques each library's oracle works on) and ``parameter_cells``
  (the potentials it stores: pgmjax's are the junction tree's cliques, mbi's the measured cliques).

mbi's model is evaluated here as the distribution it stands for: its log-potentials plus its constraints'
log-space factors (``Constraint.potential``), marginalised exactly by pgmjax's junction tree; the page reports the
largest difference from mbi's own answers (its ``model.marginals`` and, for the constraints' pairs,
``variable_elimination`` with the constraints folded in), and beside them what mbi's public ``model.project`` and
``model.synthetic_data`` (``MarkovRandomField``'s sampler) give on the constraints' pairs.

Usage::

    python -m bench.constraints [--quick] [--eps 0.3 1 3] [--seeds 0 1 2 3 4] [--iters 2000]
        [--data-dir ../shared/data] [--mbi-python /tmp/v_mbi2/bin/python] [--out-dir bench/results/constraints]

Results: ``<out-dir>/adult.json`` and ``adult.md`` (``--out NAME``; a path is used as it is; ``--quick`` writes
``adult_quick``). The full run takes about 5 minutes on a 2-core machine (the quick one about 1).
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

NAME = "constraints"
DELTA = 1e-9
DEFAULT_MBI = "/tmp/v_mbi2/bin/python"

#: The measured two-way marginals (neither constraint's pair: (marital-status, relationship), (workclass, occupation)).
MEASURED_PAIRS = (
    ("age", "marital-status"), ("relationship", "sex"), ("education-num", "occupation"),
    ("workclass", "hours-per-week"), ("marital-status", "sex"), ("race", "native-country"),
    ("income>50K", "education-num"), ("income>50K", "relationship"), ("capital-gain", "income>50K"),
    ("occupation", "sex"),
)

#: The constraints: name, attributes, kind, cells (value codes), and what they say.
CONSTRAINTS = (
    {"name": "C1", "attributes": ["marital-status", "relationship"], "kind": "forbid",
     "cells": [[m, r] for m in range(1, 6) for r in (0, 2)],
     "about": "relationship 0 (Wife) and 2 (Husband) only with marital-status 0 and 6 (the married statuses): "
              "forbid relationship in {0, 2} with marital-status in {1, ..., 5}"},
    {"name": "C2", "attributes": ["workclass", "occupation"], "kind": "allow",
     "cells": [[w, 14] for w in (7, 8)] + [[w, o] for w in range(9) if w not in (7, 8) for o in range(14)],
     "about": "occupation 14 exactly when workclass is 7 or 8: allow (w, 14) for w in {7, 8} and (w, o) for "
              "w not in {7, 8}, o != 14"},
)

ARMS = ("without", "with")
LIBRARIES = ("pgmjax", "mbi")


def _jax():
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    return jax


def pj_constraints(pj):
    """The constraints as ``pj.Constraint`` objects, in :data:`CONSTRAINTS`' order."""
    make = {"forbid": pj.Constraint.forbid, "allow": pj.Constraint.allow}
    return [make[c["kind"]](tuple(c["attributes"]), [tuple(x) for x in c["cells"]]) for c in CONSTRAINTS]


# ----------------------------------------------------------------------------- the problem
def verify(data, pj) -> list[dict]:
    """The records on each constraint's forbidden cells (all must be 0), with the cells' counts."""
    out = []
    for spec, con in zip(CONSTRAINTS, pj_constraints(pj)):
        table = data.marginal(con.attributes)
        forbidden = ~con.allowed(data.domain)
        out.append({"name": spec["name"], "attributes": spec["attributes"], "kind": spec["kind"],
                    "forbidden_cells": int(forbidden.sum()), "cells": int(forbidden.size),
                    "records_on_forbidden_cells": int(table[forbidden].sum()),
                    "violations": con.violations(data.records, data.domain),
                    "records_on_allowed_cells": int(table[~forbidden].sum())})
    return out


def prepare(data, folder: str, eps_list, seeds, iters: int) -> tuple[str, dict]:
    """Write ``meta.json`` and one ``eps<e>_seed<s>.npz`` of noisy answers per (epsilon, seed) into ``folder``."""
    from pgmjax.privacy import cdp_rho

    attrs = list(data.domain.attributes)
    cliques = [(a,) for a in attrs] + [tuple(p) for p in MEASURED_PAIRS]
    k = len(cliques)
    meta = {"dataset": "adult", "records": len(data), "domain": {a: int(data.domain[a]) for a in attrs},
            "cliques": [list(c) for c in cliques], "constraints": [dict(c) for c in CONSTRAINTS], "iters": iters}
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f)
    true = [np.asarray(data.marginal(c), np.float64) for c in cliques]
    calibration, problems = {}, {}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        z = [rng.standard_normal(t.shape) for t in true]
        for eps in eps_list:
            rho = cdp_rho(eps, DELTA)
            sigma = float(np.sqrt(k / (2 * rho)))
            calibration[f"{eps:g}"] = {"epsilon": eps, "delta": DELTA, "rho": rho, "measurements": k, "sigma": sigma}
            path = os.path.join(folder, f"eps{eps:g}_seed{seed}.npz")
            np.savez(path, sigma=sigma, seed=seed, epsilon=eps,
                     **{f"y_{j}": t + sigma * zj for j, (t, zj) in enumerate(zip(true, z))})
            problems[(eps, seed)] = path
    return os.path.join(folder, "meta.json"), {"calibration": calibration, "problems": problems}


# ----------------------------------------------------------------------------- the pgmjax side (a child process)
def run_pgmjax(meta_path: str, problems: list[str], arm: str) -> list[dict]:
    jax = _jax()
    import pgmjax as pj

    with open(meta_path) as f:
        meta = json.load(f)
    domain = pj.Domain(meta["domain"])
    cliques = [tuple(c) for c in meta["cliques"]]
    pairs = list(itertools.combinations(domain.attributes, 2))
    constraints = pj_constraints(pj) if arm == "with" else []
    n, iters = int(meta["records"]), int(meta["iters"])
    rows = []
    for i, problem in enumerate(problems):
        with np.load(problem) as z:
            ys = [z[f"y_{j}"] for j in range(len(cliques))]
            sigma, seed = float(z["sigma"]), int(z["seed"])
        measurements = [pj.Measurement(c, y, sigma) for c, y in zip(cliques, ys)]
        t = time.perf_counter()
        model = pj.estimate(domain, measurements, iters=iters, total=float(n), constraints=constraints)
        jax.block_until_ready(model.theta)
        fit_s = time.perf_counter() - t
        arrays = {f"pair_{j}": np.asarray(m, np.float64) for j, m in enumerate(model.marginals(pairs))}
        arrays.update({f"meas_{j}": np.asarray(m, np.float64) for j, m in enumerate(model.marginals(cliques))})
        t = time.perf_counter()
        arrays["records"] = np.asarray(model.synthetic_data(n, key=jax.random.key(seed)).records, np.int64)
        synth_s = time.perf_counter() - t
        out = os.path.splitext(problem)[0] + f"_pgmjax_{arm}.npz"
        np.savez(out, **arrays)
        cells = sum(domain.size(c) for c in model.cliques)
        rows.append({"library": "pgmjax", "arm": arm, "seed": seed, "problem": os.path.basename(problem),
                     "arrays": out, "fit_s": fit_s, "fit_compiles": i == 0, "synthetic_s": synth_s,
                     "synthetic_first": i == 0, "iters": iters, "total": float(model.total),
                     "jtree_cliques": [list(c) for c in model.cliques], "jtree_cells": cells,
                     "parameter_cells": cells, "treewidth": int(model.junction_tree.treewidth),
                     "iterations_run": int(model.history[-1]["iteration"]) if model.history else None,
                     "backend": jax.default_backend()})
        print(json.dumps(rows[-1]), flush=True)
    return rows


# ----------------------------------------------------------------------------- scoring (the same code for both)
def _tvd(p, q) -> float:
    return float(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())


def mbi_distribution(pj, domain, arrays, row, n: int, constraints: bool):
    """mbi's model as a pgmjax model: its log-potentials plus its constraints' log-space factors."""
    tables = {}
    for j, c in enumerate(row["potential_cliques"]):
        tables[tuple(c)] = arrays[f"pot_{j}"]
    if constraints:
        for j, spec in enumerate(CONSTRAINTS):
            c = tuple(spec["attributes"])
            tables[c] = tables[c] + arrays[f"factor_{j}"] if c in tables else arrays[f"factor_{j}"]
    plan = pj.graph.oracle.make_plan(domain, list(tables))
    return pj.GraphicalModel(plan, plan.from_tables(tables), float(n))


def score(row: dict, data, pj, problem: str) -> dict:
    """The row's metrics against the true data (module docstring); ``problem``: the noisy answers it was fitted to."""
    domain, n = data.domain, len(data)
    pairs = list(itertools.combinations(domain.attributes, 2))
    cliques = [(a,) for a in domain.attributes] + [tuple(p) for p in MEASURED_PAIRS]
    cons = pj_constraints(pj)
    with np.load(row["arrays"]) as z:
        arrays = {k: z[k] for k in z.files}
    out = {}
    if row["library"] == "pgmjax":
        answers = [arrays[f"pair_{j}"] for j in range(len(pairs))]
        measured = [arrays[f"meas_{j}"] for j in range(len(cliques))]
    else:
        model = mbi_distribution(pj, domain, arrays, row, n, row["arm"] == "with")
        answers = [np.asarray(m, np.float64) for m in model.marginals(pairs)]
        measured = [np.asarray(m, np.float64) for m in model.marginals(cliques)]
        own = [np.asarray(m, np.float64) for m in model.marginals([tuple(c) for c in row["own_cliques"]])]
        out["check_own_marginals_max_abs"] = max(float(np.abs(a - arrays[f"own_{j}"]).max()) for j, a in enumerate(own))
        if row["arm"] == "with":
            out["check_constraint_pairs_max_abs"] = max(
                float(np.abs(np.asarray(model.marginal(c.attributes), np.float64) - arrays[f"ve_{j}"]).max())
                for j, c in enumerate(cons))
    with np.load(problem) as z:
        sigma = float(z["sigma"])
        out["loss"] = float(sum(0.5 * np.sum(((mu - z[f"y_{j}"]) / sigma) ** 2) for j, mu in enumerate(measured)))
    truth = data.marginals(pairs)
    out["tvd"] = float(np.mean([_tvd(p, q) for p, q in zip(truth, answers)]))
    synth = pj.Dataset(arrays["records"], domain)
    out["tvd_synthetic"] = float(np.mean([_tvd(p, q) for p, q in zip(truth, synth.marginals(pairs))]))
    out["synthetic_records"] = int(len(synth))
    records_bad = np.zeros(len(synth), bool)
    for j, (spec, c) in enumerate(zip(CONSTRAINTS, cons)):
        k = pairs.index(tuple(c.attributes))
        forbidden = ~c.allowed(domain)
        name = spec["name"]
        out[f"tvd_{name}"] = _tvd(truth[k], answers[k])
        out[f"forbidden_mass_{name}"] = float(answers[k][forbidden].sum() / n)
        out[f"violations_{name}"] = c.violations(arrays["records"], domain)
        cols = [domain.attributes.index(a) for a in c.attributes]
        records_bad |= forbidden[tuple(arrays["records"][:, i] for i in cols)]
        if row["library"] == "mbi":
            proj = arrays[f"project_{j}"]
            out[f"project_forbidden_mass_{name}"] = float(proj[forbidden].sum() / n)
            out[f"project_tvd_{name}"] = _tvd(truth[k], proj)
            out[f"round_violations_{name}"] = c.violations(arrays["records_round"], domain)
    out["forbidden_mass"] = sum(out[f"forbidden_mass_{s['name']}"] for s in CONSTRAINTS)
    out["violations"] = sum(out[f"violations_{s['name']}"] for s in CONSTRAINTS)
    out["records_violating"] = int(records_bad.sum())
    if row["library"] == "mbi":
        out["project_forbidden_mass"] = sum(out[f"project_forbidden_mass_{s['name']}"] for s in CONSTRAINTS)
        out["round_violations"] = sum(out[f"round_violations_{s['name']}"] for s in CONSTRAINTS)
    return out


# ----------------------------------------------------------------------------- children
def _child(cmd: list[str], label: str, env: dict, timeout: float) -> list[dict] | None:
    """Run a child that writes its rows to the JSON file after ``--result``; None (reported) if it failed."""
    t = time.perf_counter()
    rows = json_child(cmd, cmd[cmd.index("--result") + 1], env, label, timeout)
    if rows is None:
        return None
    wall = time.perf_counter() - t
    for r in rows:
        r["process_wall_s"] = wall
    print(f"[{label}] {len(rows)} fits in {wall:.1f} s", file=sys.stderr, flush=True)
    return rows


# ----------------------------------------------------------------------------- the page
def _stats(xs) -> dict | None:
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"mean": float(np.mean(xs)), "sd": float(statistics.stdev(xs)) if len(xs) > 1 else 0.0,
            "min": float(min(xs)), "max": float(max(xs)), "n": len(xs)}


SUMMARY_KEYS = ("loss", "tvd", "tvd_C1", "tvd_C2", "forbidden_mass_C1", "forbidden_mass_C2", "forbidden_mass", "violations_C1",
                "violations_C2", "violations", "records_violating", "tvd_synthetic", "fit_s", "synthetic_s",
                "jtree_cells", "parameter_cells", "project_forbidden_mass", "project_tvd_C1", "project_tvd_C2",
                "round_violations", "check_own_marginals_max_abs", "check_constraint_pairs_max_abs")


def summarise(rows: list[dict]) -> list[dict]:
    """Per (epsilon, library, arm): each metric's mean, sd, min, max over the seeds; the first fit (compiling) and
    the later ones apart."""
    out = []
    for key in dict.fromkeys((r["epsilon"], r["library"], r["arm"]) for r in rows):
        group = [r for r in rows if (r["epsilon"], r["library"], r["arm"]) == key]
        s = {"epsilon": key[0], "library": key[1], "arm": key[2], "seeds": [r["seed"] for r in group]}
        for m in SUMMARY_KEYS:
            st = _stats([r.get(m) for r in group])
            if st is not None:
                s[m] = st
        s["fit_first_s"] = _stats([r["fit_s"] for r in group if r["fit_compiles"]])
        s["fit_warm_s"] = _stats([r["fit_s"] for r in group if not r["fit_compiles"]])
        out.append(s)
    return out


def _ms(st, fmt="{:.4f}", scale=1.0) -> str:
    if not st:
        return "n/a"
    if st["min"] == st["max"] == 0:
        return "0"
    if st["n"] == 1:
        return fmt.format(st["mean"] * scale)
    return f"{fmt.format(st['mean'] * scale)} ± {fmt.format(st['sd'] * scale)}"


def render(doc: dict) -> list[str]:
    meta, settings, summary = doc["meta"], doc["settings"], doc["summary"]
    lines = ["# Structural constraints on Adult: pgmjax against mbi 2.0", "", *schema.header_lines(meta)]
    lines += [f"Machine (platform): {settings['platform']}, os.cpu_count() = {settings['cpu_count']}; "
              f"load average at start {settings['load_start']}, at end {settings.get('load_end')}.", ""]
    mv = settings.get("mbi_versions")
    lines += [f"mbi side: {settings['mbi_python'] or 'not run'}" + (
        f" (mbi {mv.get('mbi')}, jax {mv.get('jax')}, jaxlib {mv.get('jaxlib')}, numpy {mv.get('numpy')}, "
        f"Python {mv.get('python')})" if mv else "") + ".", ""]
    lines += ["## Setup", "",
              f"Data: Adult, {settings['records']:,} records, 14 attributes (`{settings['data_file']}`). Constraints "
              "(each holds exactly in the data: the records on forbidden cells are counted before anything runs):", ""]
    lines += schema.table([{"constraint": c["name"], "over": ", ".join(c["attributes"]), "kind": c["kind"],
                            "what": next(s["about"] for s in CONSTRAINTS if s["name"] == c["name"]),
                            "forbidden cells": f"{c['forbidden_cells']} of {c['cells']}",
                            "records on them": c["records_on_forbidden_cells"], "violations": c["violations"]}
                           for c in settings["data_check"]])
    lines += ["", f"Measurements: the 14 one-way marginals and {len(MEASURED_PAIRS)} two-way marginals "
              f"({'; '.join('(' + ', '.join(p) + ')' for p in MEASURED_PAIRS)}), neither constraint's pair among "
              "them; Gaussian noise, zCDP: rho = cdp_rho(epsilon, 1e-9) split equally over the 24 measurements, "
              "sigma = sqrt(24 / (2 rho)) (sensitivity 1 each), drawn once per seed by numpy.random.default_rng(seed) "
              "(the same standard normals scaled for each epsilon) and fed identically to both libraries.", ""]
    lines += schema.table([{"epsilon": c["epsilon"], "rho": c["rho"], "sigma": c["sigma"]}
                           for c in settings["calibration"].values()])
    lines += ["", f"Fits: {settings['iters']:,} mirror-descent iterations (mbi runs blocks of 50: "
              f"{settings['mbi_effective_iters']}), known total N = {settings['records']:,} on both sides, float32, "
              "each library's defaults otherwise (pgmjax: `pj.estimate`'s accelerated mirror descent; mbi: "
              "`MirrorDescent`, Armijo line search). Seeds: "
              f"{', '.join(map(str, settings['seeds']))}. Each (library, arm, epsilon) runs in a fresh process and "
              "fits the seeds in turn: the first fit's time includes compiling (`fit first`), the later ones reuse "
              "the compiled programs (`fit warm`).", "",
              "Synthetic data: N records; pgmjax `model.synthetic_data(N, key=jax.random.key(seed))` (default "
              "method `exact`, i.i.d.), mbi `mbi.extensions.synthetic_data(model, N, seed)` (Gumbel rounding). "
              "mbi's model is scored as the distribution it stands for (its log-potentials plus its constraints' "
              "-inf factors, marginalised exactly by pgmjax's junction tree; the check table gives the largest "
              "difference from mbi's own answers).", "",
              "Columns: `loss` the fit's objective, 1/2 sum over the 24 measurements of ((model - noisy answer) / "
              "sigma)^2, computed here for both libraries from the model's marginals (lower: closer to the optimum "
              "of its arm; the arms' optima differ); `TVD` the mean total variation distance of the model's 91 two-way marginals from the data's; "
              "`TVD C1`, `TVD C2` on the constraints' pairs; `mass C1`, `mass C2` the model's count on the "
              "forbidden cells as a fraction of N; `viol.` records of the N synthetic ones on a forbidden cell "
              "(C1 + C2); `TVD synth` the synthetic records' mean 2-way TVD; `cells` the junction tree's maximal "
              "cliques (mbi: over the measured and the constraints' cliques; parameters in the JSON). Mean ± "
              "sd over the seeds.", ""]
    for eps in settings["eps"]:
        group = [s for s in summary if s["epsilon"] == eps]
        if not group:
            continue
        cal = settings["calibration"][f"{eps:g}"]
        lines += [f"## epsilon = {eps:g} (sigma = {cal['sigma']:.1f}, {len(group[0]['seeds'])} seeds)", ""]
        lines += schema.table([{
            "library": s["library"], "constraints": s["arm"], "loss": _ms(s.get("loss"), "{:.1f}"),
            "TVD": _ms(s.get("tvd")), "TVD C1": _ms(s.get("tvd_C1")), "TVD C2": _ms(s.get("tvd_C2")),
            "mass C1": _ms(s.get("forbidden_mass_C1"), "{:.2e}"), "mass C2": _ms(s.get("forbidden_mass_C2"), "{:.2e}"),
            "viol.": _ms(s.get("violations"), "{:.1f}"), "TVD synth": _ms(s.get("tvd_synthetic")),
            "fit first s": _ms(s.get("fit_first_s"), "{:.2f}"), "fit warm s": _ms(s.get("fit_warm_s"), "{:.2f}"),
            "cells": _ms(s.get("jtree_cells"), "{:,.0f}")} for s in group])
        lines.append("")
    mbi = [s for s in summary if s["library"] == "mbi"]
    if mbi:
        lines += ["## mbi's own calls on the constraints' pairs", "",
                  "`project mass`: the forbidden mass (fraction of N, C1 + C2) of `model.project(pair)`, mbi's public "
                  "marginal call (for a pair outside `model.marginals` it eliminates variables from the potentials "
                  "without the constraints' factors); `project TVD C1/C2`: its TVD from the data on the pairs; "
                  "`MRF.synthetic_data viol.`: violations in N records of `model.synthetic_data(N)` "
                  "(`MarkovRandomField`'s randomised rounding, over the measured cliques' junction tree); "
                  "`check own` / `check pairs`: the largest absolute difference (counts) between the distribution "
                  "scored above and mbi's `model.marginals` / `variable_elimination(..., constraints=...)` on the "
                  "constraints' pairs.", ""]
        lines += schema.table([{
            "epsilon": f"{s['epsilon']:g}", "constraints": s["arm"],
            "project mass": _ms(s.get("project_forbidden_mass"), "{:.3f}"),
            "project TVD C1": _ms(s.get("project_tvd_C1")), "project TVD C2": _ms(s.get("project_tvd_C2")),
            "MRF.synthetic_data viol.": _ms(s.get("round_violations"), "{:.1f}"),
            "check own": f"{s['check_own_marginals_max_abs']['max']:.3g}" if s.get("check_own_marginals_max_abs") else "n/a",
            "check pairs": f"{s['check_constraint_pairs_max_abs']['max']:.3g}"
            if s.get("check_constraint_pairs_max_abs") else "n/a"} for s in mbi])
        lines.append("")
    if doc.get("notes"):
        lines += ["## Notes", "", *[f"* {n}" for n in doc["notes"]], ""]
    return lines


# ----------------------------------------------------------------------------- driver
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.constraints", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="epsilon 1, seed 0, 500 iterations (results not to commit)")
    ap.add_argument("--eps", type=float, nargs="+", default=None, help="epsilons (default 0.3 1 3)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default 0 1 2 3 4)")
    ap.add_argument("--iters", type=int, default=None, help="mirror-descent iterations per fit (default 2000)")
    ap.add_argument("--libraries", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    ap.add_argument("--data-dir", default=os.environ.get("PGMJAX_DATA", os.path.join(ROOT, "..", "shared", "data")),
                    help="the shared data folder (default $PGMJAX_DATA or ../shared/data)")
    ap.add_argument("--mbi-python", default=DEFAULT_MBI if os.path.exists(DEFAULT_MBI) else None,
                    help=f"interpreter with mbi==2.0.0 (default {DEFAULT_MBI} where it exists; else mbi is skipped)")
    ap.add_argument("--out-dir", default=os.path.join(schema.RESULTS, NAME), help="folder of the results")
    ap.add_argument("--out", default=None, help="result name in --out-dir (default adult; --quick: adult_quick), "
                                                 "or a path used as it is")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per child process before it is killed")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--meta", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--problems", nargs="+", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        rows = run_pgmjax(args.meta, args.problems, args.arm)
        with open(args.result, "w") as f:
            json.dump(rows, f)
        return 0

    eps_list = args.eps or ([1.0] if args.quick else [0.3, 1.0, 3.0])
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2, 3, 4])
    iters = args.iters or (500 if args.quick else 2000)
    name = args.out or ("adult_quick" if args.quick else "adult")
    out_path = name if (os.sep in name or "/" in name) else os.path.join(args.out_dir, name)

    csv = os.path.join(args.data_dir, "adult", "adult.csv")
    if not (os.path.isfile(csv) and os.path.isfile(os.path.join(args.data_dir, "adult", "adult-domain.json"))):
        print(f"constraints: no adult/adult.csv and adult-domain.json under {args.data_dir} "
              "(pass --data-dir or set PGMJAX_DATA); skipped")
        return 0
    notes = []
    libraries = list(args.libraries)
    if "mbi" in libraries and not (args.mbi_python and os.path.exists(args.mbi_python)):
        notes.append(f"mbi not run: no interpreter at {args.mbi_python or DEFAULT_MBI} (pass --mbi-python)")
        print("constraints:", notes[-1], file=sys.stderr)
        libraries.remove("mbi")

    import platform

    import pgmjax as pj

    load_start = [round(x, 2) for x in os.getloadavg()]
    data = pj.datasets.load("adult", args.data_dir)
    check = verify(data, pj)
    for c in check:
        print(f"{c['name']} over {tuple(c['attributes'])}: {c['records_on_forbidden_cells']} records on its "
              f"{c['forbidden_cells']} forbidden cells ({c['violations']} violations)", file=sys.stderr)
    if any(c["records_on_forbidden_cells"] or c["violations"] for c in check):
        print("constraints: a constraint does not hold in the data; stopped", file=sys.stderr)
        return 1

    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PGMJAX_COMPILATION_CACHE")}
    started = time.perf_counter()
    rows: list[dict] = []
    folder = tempfile.mkdtemp(prefix="pgmjax_constraints_")
    try:
        meta_path, prepared = prepare(data, folder, eps_list, seeds, iters)
        for eps, arm, lib in itertools.product(eps_list, ARMS, libraries):
            problems = [prepared["problems"][(eps, s)] for s in seeds]
            result = os.path.join(folder, f"rows_{lib}_{arm}_{eps:g}.json")
            if lib == "pgmjax":
                cmd = [*child_command("bench.constraints"), "--child", "--meta", meta_path, "--arm", arm,
                       "--result", result, "--problems", *problems]
            else:
                cmd = [*child_command("bench.mbi_constraints", python=args.mbi_python), "--meta", meta_path,
                       "--arm", arm, "--result", result, *problems]
            got = _child(cmd, f"{lib} {arm} constraints, eps={eps:g}", env, args.timeout)
            if got is None:
                notes.append(f"{lib}, {arm} constraints, epsilon {eps:g}: the child process failed (see its output)")
                continue
            for r in got:
                r["epsilon"] = eps
                r.update(score(r, data, pj, prepared["problems"][(eps, r["seed"])]))
                print(f"    seed {r['seed']}: TVD {r['tvd']:.4f}, forbidden mass {r['forbidden_mass']:.2e}, "
                      f"violations {r['violations']}, fit {r['fit_s']:.2f} s", file=sys.stderr, flush=True)
            rows += got
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for r in rows:
        r.pop("arrays", None)

    mbi_versions = next((r["versions"] for r in rows if r["library"] == "mbi"), None)
    given = {"mbi": mbi_versions["mbi"]} if mbi_versions and mbi_versions.get("mbi") else {}
    meta = schema.run_meta("bench.constraints", argv, **given)
    settings = {
        "dataset": "adult", "data_file": os.path.abspath(csv), "records": len(data), "eps": eps_list, "seeds": seeds,
        "iters": iters, "mbi_effective_iters": -(-iters // 50) * 50, "delta": DELTA, "libraries": libraries,
        "measured_cliques": [[a] for a in data.domain.attributes] + [list(p) for p in MEASURED_PAIRS],
        "constraints": list(CONSTRAINTS), "data_check": check, "calibration": prepared["calibration"],
        "noise": "numpy.random.default_rng(seed).standard_normal per cell, measurement by measurement, times sigma",
        "pgmjax_synthetic": "model.synthetic_data(N, key=jax.random.key(seed)), method 'exact'",
        "mbi_synthetic": "mbi.extensions.synthetic_data(model, N, seed)",
        "mbi_python": args.mbi_python if "mbi" in libraries else None, "mbi_versions": mbi_versions,
        "platform": platform.platform(), "cpu_count": os.cpu_count(), "load_start": load_start,
        "load_end": [round(x, 2) for x in os.getloadavg()], "total_wall_s": time.perf_counter() - started,
        "quick": args.quick,
    }
    notes += auto_notes(rows)
    doc = {"meta": meta, "settings": settings, "summary": summarise(rows), "notes": notes}
    schema.write_result(NAME, out_path, rows, meta, page=render(doc), settings=settings, summary=doc["summary"],
                        notes=notes)
    return 0


def auto_notes(rows: list[dict]) -> list[str]:
    """What the run shows that a reader should not miss (forbidden mass or violations under constraints)."""
    notes = []
    for lib in LIBRARIES:
        with_ = [r for r in rows if r["library"] == lib and r["arm"] == "with"]
        if not with_:
            continue
        mass = max(r["forbidden_mass"] for r in with_)
        viol = max(r["violations"] for r in with_)
        notes.append(f"{lib} with the constraints: largest forbidden mass {mass:.3g} of N, largest violation count "
                     f"{viol} over {len(with_)} fits" + (" (exactly zero everywhere)." if mass == 0 and viol == 0
                                                         else "."))
    mbi_with = [r for r in rows if r["library"] == "mbi" and r["arm"] == "with"]
    if mbi_with:
        pm = [r["project_forbidden_mass"] for r in mbi_with]
        rv = [r["round_violations"] for r in mbi_with]
        notes.append(f"mbi with the constraints, its public calls: model.project on the constraints' pairs puts "
                     f"{min(pm):.3g} to {max(pm):.3g} of N on forbidden cells; MarkovRandomField.synthetic_data "
                     f"gives {min(rv)} to {max(rv)} violating records of N.")
    return notes


if __name__ == "__main__":
    raise SystemExit(main())
