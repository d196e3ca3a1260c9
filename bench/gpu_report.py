"""``bench/gpu.py``'s results page: the correctness summary and the Markdown of every section."""

from __future__ import annotations

import json
import math
import os


def correctness(engine_out: dict, refs_path: str | None) -> dict:
    """The correctness section, read off the pgmjax children (each ran its fit against the references)."""
    out = {"references": os.path.basename(refs_path) if refs_path else None, "rows": [], "skipped": []}
    if not refs_path or not os.path.exists(refs_path):
        out["skipped"].append({"what": "all", "why": f"no references file ({refs_path})"})
        return out
    with open(refs_path) as f:
        refs = json.load(f)
    out["reference_settings"] = refs["settings"]
    out["skipped"] += [{"what": s["problem"], "why": f"no reference: {s['why']}"} for s in refs.get("skipped", [])]
    for row in engine_out.get("rows", []):
        c = (row.get("pgmjax") or {}).get("correctness")
        if c is None:
            if row["problem"] in refs["problems"]:
                out["skipped"].append({"what": row["problem"], "why": "pgmjax's child did not reach its correctness fit "
                                       f"({(row.get('pgmjax') or {}).get('outcome')})"})
        elif "skipped" in c:
            out["skipped"].append({"what": row["problem"], "why": c["skipped"]})
        else:
            out["rows"].append({"problem": row["problem"], **c})
    out["all_ok"] = bool(out["rows"]) and all(r["ok"] for r in out["rows"])
    return out


def _n(x, fmt="{:.3g}") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—" if x is None else str(x)
    return fmt.format(x)


def _skipped(section: dict) -> list[str]:
    lines = [f"- skipped {s['what']}: {s['why']}" for s in section.get("skipped", [])]
    if section.get("error"):
        lines.append(f"- **failed**: {section['error']}")
    return lines


def per_iter_ms(result: dict) -> float | None:
    """A child's warm ms per iteration: the long trajectory call's figure where it ran (hundreds of iterations),
    else the short calls' difference (``bench/engine.py``)."""
    return result.get("ms_per_iter_traj") if result.get("ms_per_iter_traj") is not None else result.get("ms_per_iter")


def render(out: dict) -> list[str]:
    """The Markdown page of a ``gpu.py`` run."""
    from bench import schema

    r = schema.meta_of(out)
    v = r["versions"]
    lines = [
        f"# GPU check ({out['mode']}): {r['device']}", "",
        f"Device: {r['device']} (backend {r['backend']}; host {r['cpu']}, {r['cores']} cores). Date: {r['date']}. "
        f"Commit: {r['commit']}. Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".",
        f"Command: `{r['command']}`. Wall time: {out['wall_s']:.0f} s (budget {out['settings']['total_s']:.0f} s).", "",
    ]
    bw = out.get("bandwidth", {})
    lines += ["## Bandwidth", ""]
    if "gb_per_s" in bw:
        lines.append(f"`x + 1` on {bw['bytes'] / 2**20:.0f} MiB of float32 (one read, one write): best "
                     f"{1e3 * bw['best_s']:.3f} ms, **{bw['gb_per_s']:.0f} GB/s**.")
    lines += _skipped(bw) + [""]

    c = out.get("correctness", {})
    lines += ["## Correctness: float32 on the device against CPU float64 references", "",
              f"References: `{c.get('references')}`; tolerance: loss 1e-3 relative, marginals 1e-3 L1/N "
              "(max over the stored cliques). The CPU's own float32 fit beside it: what rounding alone gives.", "",
              "| problem | loss rel | L1/N max | ok | CPU float32: loss rel | CPU float32: L1/N max |", "|---|---|---|---|---|---|"]
    for row in c.get("rows", []):
        cpu = row.get("cpu_float32") or {}
        lines.append(f"| {row['problem']} | {_n(row['loss_rel'], '{:.2e}')} | {_n(row['l1_over_n_max'], '{:.2e}')} | "
                     f"{'yes' if row['ok'] else '**no**'} | {_n(cpu.get('loss_rel'), '{:.2e}')} | "
                     f"{_n(cpu.get('l1_over_n_max'), '{:.2e}')} |")
    lines += [""] + _skipped(c) + [""]

    e = out.get("engine", {})
    lines += ["## The engine benchmark's problems: pgmjax and mbi 2.0 on the same device", "",
              "Each engine in a fresh process, pgmjax then mbi per problem (`bench/engine.py`'s children). First: "
              "the first `estimate(50)`; ms/it: warm, from the long trajectory call (the short calls' difference is "
              "below a GPU call's fixed-cost noise); to mbi's loss: warm seconds to the loss mbi has after its "
              f"{out['settings']['iters']:,} iterations (speedup: mbi's seconds / pgmjax's).", "",
              "| problem | cells | pgmjax first s | compile s | ms/it | mbi first s | compile s | ms/it | ms/it ratio | "
              "to mbi's loss: pgmjax s | mbi s | speedup |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in e.get("rows", []):
        pg, mb, tt = row.get("pgmjax") or {}, row.get("mbi") or {}, row.get("to_mbi_loss") or {}
        ratio = (row.get("ratios_mbi_over_pgmjax") or {}).get("ms_per_iter_traj")
        lines.append(
            f"| {row['problem']} | {_n(pg.get('plan_cells'), '{:,}')} | {_n(pg.get('first_call_s'))} | "
            f"{_n(pg.get('compile_s'))} | {_n(per_iter_ms(pg))} | {_n(mb.get('first_call_s'))} | "
            f"{_n(mb.get('compile_s'))} | {_n(per_iter_ms(mb))} | {_n(ratio)} | {_n(tt.get('pgmjax_s'))} | "
            f"{_n(tt.get('mbi_s'))} | {_n(tt.get('speedup'))} |")
    for row in e.get("rows", []):
        for arm in ("pgmjax", "mbi"):
            res = row.get(arm) or {}
            if res and res.get("outcome") != "ok":
                lines.append(f"- {row['problem']} {arm}: {res.get('outcome')} at stage {res.get('stage')}")
    lines += [f"- {n}" for n in e.get("notes", [])] + _skipped(e) + [""]

    f = out.get("floor", {})
    lines += ["## Per iteration against the memory-bandwidth floor", "",
              "Floor: `cells x 4 B x (3 x oracle calls per iteration + 3)` / bandwidth (each oracle call reads every "
              "cell twice and writes it once; the update reads two arrays and writes one; `gpu_checks.floor`).", "",
              "| problem | cells | oracle calls/it | MB/it | floor ms | measured ms | ratio |", "|---|---|---|---|---|---|---|"]
    for row in f.get("rows", []):
        lines.append(f"| {row['problem']} | {row['cells']:,} | {_n(row['oracle_calls_per_iter'])} | "
                     f"{_n(row['bytes_per_iter'] / 1e6)} | {_n(row['floor_ms'])} | {_n(row['ms_per_iter'])} | {_n(row['ratio'])} |")
    lines += [""] + _skipped(f) + [""]

    lines += _workloads(out)
    b = out.get("batch", {})
    lines += ["## A batch of noise draws: `estimate_batch` against sequential `estimate`", "",
              "| problem | B | iters | batched cold s | batched warm s | sequential warm s | speedup | sequential fits run | "
              "L1/N max | loss rel max |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in b.get("rows", []):
        ag = row.get("agreement", {})
        lines.append(f"| {row['problem']} | {row['batch']} | {row['iters']} | {_n(row['batched_cold_s'])} | "
                     f"{_n(row['batched_warm_s'])} | {_n(row['sequential_warm_s'])}{' (extrapolated)' if row['sequential_extrapolated'] else ''} | "
                     f"{_n(row['speedup_warm'])} | {row['sequential_fits']} | {_n(ag.get('l1_over_n_max'), '{:.1e}')} | "
                     f"{_n(ag.get('rel_loss_diff_max'), '{:.1e}')} |")
    lines += [""] + _skipped(b) + [""]
    for row in b.get("rows", []):
        lines += _skipped(row)

    g = out.get("largest", {})
    lines += ["## The largest model on the device", "",
              "| model | attributes | cells | first call s | ms/it | device peak GiB |", "|---|---|---|---|---|---|"]
    for part in g.get("rows", []):
        for row in part.get("rows", []):
            peak = row.get("device_peak_bytes")
            lines.append(f"| {part.get('kind')} | {row['attributes']} | {row['cells']:,} | {_n(row['first_call_s'])} | "
                         f"{_n(row['ms_per_iter'])} | {_n(peak / 2**30 if peak else None)} |")
    lines.append("")
    for part in g.get("rows", []):
        lines.append(f"- {part.get('kind')}: stopped by {part.get('stopped_by')}" if "error" not in part
                     else f"- **failed**: {part['error']}")
    return lines + [""]


def _workloads(out: dict) -> list[str]:
    """The invariant suite's and AIM's sections (``bench/gpu_workloads.py``)."""
    inv = out.get("invariants", {})
    lines = ["## The invariant suite on the device", ""]
    if "outcome" in inv:
        lines += [f"`tests/integration/test_invariants.py`, {inv['workers']} worker(s), budget {inv['budget_s']:.0f} s: "
                  f"{inv['outcome']} after {inv['wall_s']:.0f} s; {inv.get('passed', 0)} passed, "
                  f"{inv.get('failed', 0)} failed.", ""]
        if inv.get("durations"):
            lines += ["| slowest tests | s |", "|---|---|"]
            lines += [f"| `{d['test'].split('::')[-1]}` | {d['seconds']:.1f} |" for d in inv["durations"]]
    lines += [f"- **failed**: {inv['error']}"] if "error" in inv else []
    lines += _skipped(inv) + [""]
    aim = out.get("aim", {})
    lines += ["## AIM end to end on the device", ""]
    if "outcome" in aim:
        done = f"{aim.get('rounds_done', 0)} rounds" + (f" of about {aim['expected_rounds']}" if aim.get("expected_rounds") else "")
        lines.append(f"AIM (epsilon 1, seed 0, rounds {aim.get('rounds_option')}, models up to 80 MB) on {aim['dataset']} ({aim['records']:,} rows): "
                     f"{aim['outcome']} after {aim['wall_s']:.0f} s (process start and table included); {done}; "
                     f"{aim.get('fits', 0)} fits, {_n(aim.get('fit_wall'))} s, of which compiling "
                     f"{_n(aim.get('fit_compile'))} s.")
        if "workload_error" in aim:
            lines.append(f"The run itself {aim['wall']:.1f} s (the front-end's timer: " + ", ".join(
                f"{k} {v:.1f}" for k, v in aim["timer"].items()) + f"); {aim['compiling_fits']} fits compiled a new "
                f"program; workload error {aim['workload_error']:.4f} (mean L1 / N over the workload's marginals).")
        if aim.get("stderr_tail") and not aim["outcome"].startswith("cut"):
            lines.append(f"- stderr: `{aim['stderr_tail'][-400:]}`")
    lines += [f"- **failed**: {aim['error']}"] if "error" in aim else []
    return lines + _skipped(aim) + [""]
