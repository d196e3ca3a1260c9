"""``bench/gpu.py``'s whole-workload sections: the invariant suite and AIM end to end, each in a child process.

* ``invariants``: ``tests/integration/test_invariants.py`` under pytest (``-n WORKERS --dist load`` where
  pytest-xdist is installed: one test per worker at a time, so no worker holds the whole file), killed at the
  section's budget; the counts of passed, failed and unfinished tests and the slowest tests' durations.
* ``aim``: AIM at its published defaults (``bench/aim_profile.py``'s ``profile``: every fit's wall and compile
  seconds) on a generated table; the child writes its progress after every round, so a run killed at the
  budget still reports how far it got and where the time went.

Both children keep the environment ``bench/gpu.py`` was started with, so they see the device as a user would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from bench.schema import ROOT

INVARIANTS = "tests/integration/test_invariants.py"


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def invariants_section(budget_s: float, env: dict, workers: int, select: str | None = None) -> dict:
    """The invariant suite in a child pytest, cut at ``budget_s``; ``select``: a ``-k`` expression (smoke)."""
    out = {"skipped": [], "budget_s": budget_s}
    if not _has("hypothesis"):
        out["skipped"].append({"what": "invariant suite", "why": "hypothesis is not installed"})
        return out
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-o", "addopts=", "--durations=8",
           "-W", "ignore", INVARIANTS]
    if workers > 1 and _has("xdist"):
        cmd += ["-n", str(workers), "--dist", "load"]
        out["workers"] = workers
    else:
        out["workers"] = 1
    if select:
        cmd += ["-k", select]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    try:
        text, _ = proc.communicate(timeout=budget_s)
        out["outcome"] = "finished" if proc.returncode in (0, 1) else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        proc.kill()
        text, _ = proc.communicate()
        out["outcome"] = f"cut at {budget_s:.0f} s"
    out["wall_s"] = time.perf_counter() - t
    out.update(_pytest_counts(text))
    out["tail"] = text[-2500:]
    return out


def _pytest_counts(text: str) -> dict:
    """Passed and failed tests, from ``-v``'s one line per test (``PASSED``/``FAILED``/``ERROR``, also in a killed
    run, whose summary line never comes), and the slowest tests' call durations."""
    verdicts = re.findall(r"\b(PASSED|FAILED|ERROR)\b", text)
    counts = {"passed": verdicts.count("PASSED"), "failed": verdicts.count("FAILED") + verdicts.count("ERROR")}
    counts["durations"] = [{"seconds": float(s), "test": name.strip()} for s, name in
                           re.findall(r"^([\d.]+)s call +(.+)$", text, flags=re.M)]
    return counts


def aim_section(budget_s: float, env: dict, tmp: str, dataset: str, rows: int, rounds: int | None) -> dict:
    """AIM on ``dataset`` (``generated<d>`` of ``rows`` rows) in a child, killed at ``budget_s``."""
    status = os.path.join(tmp, "aim.json")
    cmd = [sys.executable, "-m", "bench.gpu_workloads", "--aim-child", status, dataset, str(rows), str(rounds or 0)]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        _, err = proc.communicate(timeout=budget_s)
        outcome = "finished" if proc.returncode == 0 else f"crashed (exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        outcome = f"cut at {budget_s:.0f} s"
    res = {"skipped": []}
    if os.path.exists(status):
        with open(status) as f:
            res.update(json.load(f))
    res.update(outcome=outcome, wall_s=time.perf_counter() - t, dataset=dataset, records=rows,
               rounds_option=rounds or "16 d (published)")
    if not outcome == "finished":
        res["stderr_tail"] = err[-2000:]
    return res


def _aim_child(status: str, dataset: str, rows: int, rounds: int) -> None:
    import jax

    from bench import aim_profile
    from bench.tables import load_table

    jax.config.update("jax_enable_compilation_cache", False)  # the first call's compiling is part of the wait
    t0 = time.perf_counter()
    data = load_table(dataset, rows=rows)

    def write(payload):
        tmp = status + ".tmp"
        with open(tmp, "w") as f:
            json.dump(payload, f)
        os.replace(tmp, status)

    def progress(steps, fits):
        write({"rounds_done": len(steps), "expected_rounds": steps[-1].get("expected"), "at_s": time.perf_counter() - t0,
               "fits": len(fits), "fit_wall": sum(f["wall"] for f in fits),
               "fit_compile": sum(f["compile"] for f in fits), "cells": fits[-1]["cells"] if fits else None})

    options = {"max_model_mb": 80.0}
    if rounds:
        options["rounds"] = rounds
    res = aim_profile.profile("aim", data, 1.0, 0, on_step=progress, **options)
    write({"rounds_done": res["rounds"], "wall": res["wall"], "fits": res["fits"], "fit_wall": res["fit_wall"],
           "fit_compile": res["fit_compile"], "fit_iterations": res["fit_iterations"], "timer": res["timer"],
           "workload_error": res["workload_error"], "compiling_fits": sum(f["compile"] > 0.3 for f in res["per_fit"]),
           "largest_cells": max(f["cells"] for f in res["per_fit"]), "attributes": len(data.domain),
           "with_load_s": time.perf_counter() - t0})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--aim-child"]:
        _aim_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
