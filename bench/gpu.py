"""The GPU check in one command: correctness, the engine against mbi, batches, the largest model, bandwidth.

    python3 -m bench gpu OUT_DIR            # on a GPU machine: at most 8 minutes; OUT_DIR/gpu.json, gpu.md
    python3 -m bench gpu --smoke OUT_DIR    # the same code on tiny problems on the CPU, in seconds (a test)
    python -m bench gpu --make-references bench/results/gpu/gpu_references.json   # float64 references, CPU

``bench/GPU.md`` says how to run it on a machine with no network (``bench/gpu_run.sh``). Run from the
repository root, pgmjax is imported from this checkout (no ``pip install`` needed). Sections, each with its own time budget (``FULL.budgets``,
seconds; a section that would not fit says what it skipped and why), in this order:

1. ``bandwidth``: device-to-device copy bandwidth (:func:`gpu_checks.bandwidth`).
2. ``engine``: the engine benchmark's problems (``bench/problems.py``), each engine in a fresh child
   process (``bench.engine``'s children: first call, compile, ms per iteration, the 1,000-iteration loss
   trajectory, time to mbi's 1,000-iteration loss), pgmjax then mbi on each problem. mbi may be absent: its
   columns are then empty, with a note.
3. ``correctness``: in the same pgmjax child, after its timings (the program is compiled by then): a
   float32 fit of ``gpu_checks.ITERS_REF`` iterations against the committed CPU float64 references
   (``bench/results/gpu/gpu_references.json``): final loss within 1e-3 relative, marginals within 1e-3 L1/N.
4. ``floor``: each problem's ms per iteration against the memory-bandwidth floor (:func:`gpu_checks.floor`).
5. ``invariants``: the invariant suite (``tests/integration/test_invariants.py``) in a child pytest, 4 workers.
6. ``aim``: AIM end to end at its published defaults on the generated 30-attribute table, in a child that
   reports every round (``bench/gpu_workloads.py``).
7. ``batch``: ``estimate_batch`` of 64 noise draws against 64 sequential ``estimate`` fits.
8. ``largest``: chains and generated models grown until out of memory or the budget.

This process runs with ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` (unless set), so the children, which keep the
environment it was started with, get the device's memory as a user's process would.
"""

from __future__ import annotations

import os
import sys

ENV0 = dict(os.environ)  # the children's environment: as this process was started
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # before JAX starts: leave the GPU to the children

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from bench import gpu_checks as gc  # noqa: E402
from bench import gpu_report, schema  # noqa: E402
from bench import gpu_workloads as gw  # noqa: E402
from bench.schema import ROOT  # noqa: E402

REFERENCES = os.path.join(schema.RESULTS, "gpu", "gpu_references.json")
ENGINE_PROBLEMS = ("chain100", "adult_mst", "nltcs_2way", "chain1000", "gen50", "adult", "gen200")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What one mode runs; ``budgets``: seconds per section (the whole stays under ``total_s``)."""

    engine_problems: tuple
    iters: int
    first_iters: int
    repeats: int
    child_cap: float
    batch_problems: tuple
    batch_size: int
    batch_iters: int
    chain_sizes: tuple
    tree_sizes: tuple
    largest_iters: int
    max_cells: int
    copy_bytes: int
    budgets: dict
    total_s: float
    tree_values: tuple = (100, 1000)  # the generated models' attribute sizes (tree_structure's small, big)
    aim: tuple = ("generated30", 100_000, 0)  # AIM's table, its rows, its rounds (0: the published 16 d)
    invariant_workers: int = 4
    invariant_select: str | None = None  # a pytest -k expression (smoke: one test)


FULL = Settings(
    engine_problems=ENGINE_PROBLEMS, iters=1000, first_iters=50, repeats=2, child_cap=120.0,
    batch_problems=("chain100", "adult_mst"), batch_size=64, batch_iters=200,
    chain_sizes=tuple(1000 * 2**k for k in range(8)), tree_sizes=tuple(200 * 2**k for k in range(8)),
    largest_iters=200, max_cells=2**30, copy_bytes=2**30,
    budgets={"bandwidth": 10, "engine": 150, "invariants": 150, "aim": 90, "batch": 30, "largest": 20}, total_s=450,
)
# Generous budgets: a slow shared CI machine must still run every section (they cut only what is too slow).
SMOKE = Settings(
    engine_problems=("chain6",), iters=100, first_iters=50, repeats=1, child_cap=90.0,
    batch_problems=("chain6",), batch_size=4, batch_iters=50,
    chain_sizes=(5, 8), tree_sizes=(6,), largest_iters=50, max_cells=10**5, copy_bytes=2**22,
    budgets={"bandwidth": 30, "engine": 180, "invariants": 120, "aim": 120, "batch": 60, "largest": 60}, total_s=570,
    tree_values=(6, 20), aim=("generated6", 2000, 8), invariant_workers=1,
    invariant_select="batch_member and mirror_descent",  # a quick invariant test (about 9 s on 2 cores)
)
#: Smoke mode's references: these problems, this many iterations (computed in a child process first).
SMOKE_REFERENCES = (("chain6",), 200)


def run_record(argv) -> dict:
    """The result's ``meta`` (:func:`bench.schema.run_meta`) with the device: its kind, backend, devices and
    CUDA plugin."""
    return schema.run_meta("bench.gpu", argv, extra=("mbi",), also=_device_record(argv))


def _device_record(argv) -> dict:
    """Device and versions (the modules' own: a device machine's copy of the tree may not be installed); the date,
    commit and command are :func:`bench.schema.run_meta`'s."""
    import jax
    import jaxlib
    import numpy as np

    import pgmjax
    from pgmjax.cli.info import device_info

    info = device_info()
    return {
        "device": info["devices"][0]["kind"], "backend": info["backend"], "devices": info["devices"],
        "cuda_plugin": info["cuda_plugin"], "cpu": schema.cpu_model(), "cores": os.cpu_count(),
        "versions": {"pgmjax": pgmjax.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
                     "mbi": schema.version("mbi"), "numpy": np.__version__, "python": sys.version.split()[0]},
    }


def child_env() -> dict:
    """The children's environment: as this process was started, with this checkout first on the path."""
    return dict(ENV0, PYTHONPATH=os.pathsep.join(p for p in (ROOT, ENV0.get("PYTHONPATH")) if p))


def _section(name: str, settings: Settings, total: gc.Budget) -> gc.Budget:
    return gc.Budget(max(0.0, min(settings.budgets[name], total.left() - 5)))


def engine_section(s: Settings, budget: gc.Budget, refs: str | None, tmp: str) -> dict:
    """Each problem: pgmjax's child (timings, then the correctness fit), then mbi's (``bench/engine.py``)."""
    from bench import engine
    from bench import problems as ep

    has_mbi = schema.version("mbi") is not None
    out = {"rows": [], "skipped": [], "notes": [] if has_mbi else ["mbi is not installed: its columns are empty"]}
    env = child_env()
    for name in s.engine_problems:
        if budget.left() < 15:
            out["skipped"].append({"what": name, "why": f"engine section's time budget ({budget.seconds:.0f} s) spent"})
            continue
        try:
            t = time.perf_counter()
            problem = ep.make(name)
        except Exception as e:  # the shared data is absent here: say so, go on
            out["skipped"].append({"what": name, "why": f"cannot build it: {type(e).__name__}: {e}"})
            continue
        path = os.path.join(tmp, f"{name}.npz")
        ep.save(problem, path)
        row = {"problem": name, "description": problem["description"], "records": problem["records"],
               "measured_cells": int(sum(y.size for y in problem["noisy"])), "problem_build_s": time.perf_counter() - t}
        for arm in ("pgmjax", "mbi") if has_mbi else ("pgmjax",):
            cap = min(s.child_cap, budget.left())
            if cap < 10:
                out["skipped"].append({"what": f"{name} {arm}", "why": "engine section's time budget spent"})
                continue
            cargs = argparse.Namespace(first_iters=s.first_iters, iters=s.iters, repeats=s.repeats, cap=cap)
            extra = ("--name", name, "--reference", refs or "")
            row[arm] = engine.run_child(arm, path, cargs, module="bench.gpu" if arm == "pgmjax" else None,
                                        extra_args=extra if arm == "pgmjax" else (), env=env)
            engine._say(name, row[arm])
        row["mbi_ref"] = row.get("mbi") or {}
        engine.derive(row)
        del row["mbi_ref"]
        out["rows"].append(row)
        os.remove(path)
    return out


def child_pgmjax(args) -> None:
    """``bench/engine.py``'s pgmjax child, then the plan's cells and the correctness fit, into its status file."""
    from bench import engine

    t0 = time.perf_counter()
    engine.child_pgmjax(args)
    from bench import problems as ep

    import pgmjax as pj
    from pgmjax.graph import oracle

    with open(args.status_file) as f:
        status = json.load(f)
    p = ep.load(args.problem_file)
    status["plan_cells"] = oracle.make_plan(pj.Domain(p["domain"]), p["cliques"]).cells
    status["stage"] = "correctness"
    if args.reference and os.path.exists(args.reference):
        refs, tables = gc.load_references(args.reference)
        ref = refs["problems"].get(args.name)
        iters = refs["settings"]["iters"]
        projected = (status.get("ms_per_iter") or 0) * 1e-3 * iters * 1.2 + 5
        if ref is None:
            status["correctness"] = {"skipped": "no reference for this problem"}
        elif time.perf_counter() - t0 + projected > args.cap:
            status["correctness"] = {"skipped": f"projected {projected:.0f} s past the child's cap ({args.cap:.0f} s)"}
        else:
            t = time.perf_counter()
            status["correctness"] = gc.compare(gc._fit(p, iters), p, ref, tables[args.name])
            status["correctness"].update(fit_s=time.perf_counter() - t, iters=iters,
                                         cpu_float32=ref.get("cpu_float32"))
    status["stage"] = "done"
    with open(args.status_file, "w") as f:
        json.dump(status, f)


def floor_section(engine_out: dict, bw: dict | None) -> dict:
    out = {"rows": [], "skipped": []}
    if not bw:
        out["skipped"].append({"what": "all", "why": "no bandwidth measured"})
        return out
    for row in engine_out["rows"]:
        pg = row.get("pgmjax") or {}
        ms = gpu_report.per_iter_ms(pg)
        if not (pg.get("plan_cells") and ms and pg.get("oracle_calls_per_iter")):
            out["skipped"].append({"what": row["problem"], "why": "pgmjax's child did not finish its timings"})
            continue
        out["rows"].append({"problem": row["problem"], **gc.floor(pg["plan_cells"], pg["oracle_calls_per_iter"],
                                                                   ms, bw["gb_per_s"])})
    return out


def _guarded(name: str, out: dict, fn) -> None:
    """Run one measurement; an error is recorded under ``out[name]`` instead of ending the whole run."""
    try:
        out[name] = fn()
    except Exception as e:  # one section's failure must not cost the others' results
        out[name] = {"error": f"{type(e).__name__}: {str(e)[:1000]}", "skipped": []}
        print(f"[{name}] failed: {out[name]['error']}", flush=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", help="the folder to write gpu.json and gpu.md into")
    ap.add_argument("--smoke", action="store_true", help="tiny problems on the CPU, in seconds (CI)")
    ap.add_argument("--make-references", metavar="OUT.json", help="compute float64 references on the CPU")
    ap.add_argument("--problems", nargs="+", help="these engine problems, in this order (default: the engine's; with --make-references too)")
    ap.add_argument("--iters", type=int, default=gc.ITERS_REF, help="with --make-references: iterations")
    ap.add_argument("--max-seconds", type=float, default=gc.MAX_REFERENCE_S,
                    help="with --make-references: skip a problem whose fit is projected to take longer")
    ap.add_argument("--budget", type=float, default=None,
                    help="total seconds (default 450): every section's budget scaled to it, to leave room in a lease")
    ap.add_argument("--references", default=None, help=f"references file (default {os.path.relpath(REFERENCES, ROOT)})")
    ap.add_argument("--child", choices=("pgmjax",), help=argparse.SUPPRESS)
    for flag in ("--problem-file", "--status-file", "--name", "--reference"):
        ap.add_argument(flag, help=argparse.SUPPRESS)
    for flag, kind in (("--first-iters", int), ("--repeats", int), ("--cap", float)):
        ap.add_argument(flag, type=kind, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_pgmjax(args)
        return 0
    if args.make_references:
        if not os.environ.get("JAX_PLATFORMS"):
            os.environ["JAX_PLATFORMS"] = "cpu"  # references are the CPU's, also on a GPU machine
        gc.make_references(args.make_references, args.problems or ENGINE_PROBLEMS, args.iters, args.max_seconds)
        return 0
    if not args.out:
        ap.error("give the output folder")
    if args.smoke:
        os.environ["JAX_PLATFORMS"] = ENV0["JAX_PLATFORMS"] = "cpu"
    return run(args, argv)


def run(args, argv) -> int:
    s = SMOKE if args.smoke else FULL
    if args.problems and not args.smoke:
        s = dataclasses.replace(s, engine_problems=tuple(args.problems))
    if args.budget is not None:  # every section's share kept, scaled to the total asked for
        f = args.budget / s.total_s
        s = dataclasses.replace(s, budgets={k: v * f for k, v in s.budgets.items()}, total_s=args.budget)
    total = gc.Budget(s.total_s)
    os.makedirs(args.out, exist_ok=True)
    out = {"mode": "smoke" if args.smoke else "full", "meta": run_record(argv), "settings": dataclasses.asdict(s)}
    print(f"bench.gpu: {out['meta']['device']} ({out['meta']['backend']}), budget {s.total_s:.0f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        refs = args.references or REFERENCES
        if args.smoke and args.references is None:
            refs = os.path.join(tmp, "references.json")
            gc.make_references(refs, *SMOKE_REFERENCES)
        import jax

        limit = ((out["meta"]["devices"][0].get("memory") or {}).get("limit")) or 8 * s.copy_bytes
        b = _section("bandwidth", s, total)
        _guarded("bandwidth", out, lambda: gc.bandwidth(min(s.copy_bytes, limit // 8)))
        out["bandwidth"]["seconds"] = s.budgets["bandwidth"] - b.left()
        b = _section("engine", s, total)
        _guarded("engine", out, lambda: engine_section(s, b, refs if os.path.exists(refs) else None, tmp))
        out["correctness"] = gpu_report.correctness(out.get("engine", {}), refs)
        out["floor"] = floor_section(out.get("engine", {"rows": []}), out["bandwidth"] if "gb_per_s" in out["bandwidth"] else None)
        env = child_env()
        b = _section("invariants", s, total)
        _guarded("invariants", out, lambda: gw.invariants_section(b.left(), env, s.invariant_workers, s.invariant_select))
        b = _section("aim", s, total)
        _guarded("aim", out, lambda: gw.aim_section(b.left(), env, tmp, *s.aim))
        b = _section("batch", s, total)
        out["batch"] = {"rows": [], "skipped": []}
        for name in s.batch_problems:
            if b.left() < 10:
                out["batch"]["skipped"].append({"what": name, "why": "batch section's time budget spent"})
                continue
            try:
                out["batch"]["rows"].append(gc.batch(name, s.batch_size, s.batch_iters, b))
            except Exception as e:  # absent data, out of memory: recorded, the next goes on
                out["batch"]["skipped"].append({"what": name, "why": f"{type(e).__name__}: {str(e)[:300]}"})
        b = _section("largest", s, total)
        out["largest"] = {"rows": [], "skipped": []}
        for kind, sizes in (("chain", s.chain_sizes), ("generated", s.tree_sizes)):
            part = gc.Budget(b.left() / (2 if kind == "chain" else 1))
            small, big = s.tree_values
            # A fit holds about 16 arrays of the model's size: larger models cannot fit the device's memory
            cap = min(s.max_cells, limit // 64)
            _guarded("one", out, lambda: gc.largest(kind, sizes, s.largest_iters, part, cap, small=small, big=big))
            out["largest"]["rows"].append(out.pop("one"))
        jax.clear_caches()
    out["wall_s"] = total.seconds - total.left()
    # the sections (bandwidth, engine, correctness, floor, invariants, aim, batch, largest) are named sections of the result
    schema.write_result("gpu", os.path.join(os.path.abspath(args.out), "gpu"), None, out["meta"],
                        page=gpu_report.render(out), **{k: v for k, v in out.items() if k != "meta"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
