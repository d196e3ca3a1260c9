"""``python -m bench gpu --smoke``: the GPU check's every section, on tiny problems on the CPU, so the script cannot rot."""

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTIONS = ("bandwidth", "correctness", "engine", "floor", "invariants", "aim", "batch", "largest")


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_gpu_smoke_writes_every_section(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PGMJAX_COMPILATION_CACHE"}
    proc = subprocess.run([sys.executable, "-m", "bench", "gpu", "--smoke", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "gpu.json").read_text())
    page = (tmp_path / "gpu.md").read_text()
    assert out["mode"] == "smoke" and all(s in out for s in SECTIONS)
    run = out["meta"]  # bench.schema's record, with the device
    assert run["device"] and run["versions"]["jax"] and run["versions"]["pgmjax"] and run["date"] and run["commit"]
    assert run["machine"]["cores"] and run["command"].startswith("python -m bench.gpu --smoke")
    assert _finite(out["bandwidth"]["gb_per_s"]) and out["bandwidth"]["gb_per_s"] > 0

    (row,) = out["engine"]["rows"]
    pg = row["pgmjax"]
    assert pg["outcome"] == "ok", pg
    for key in ("first_call_s", "compile_s", "ms_per_iter", "final_loss", "plan_cells"):
        assert _finite(pg[key]), key
    if run["versions"].get("mbi"):  # mbi installed: its child ran beside, and the time to its loss was derived
        assert row["mbi"]["outcome"] == "ok" and _finite(row["mbi"]["ms_per_iter"])
        assert _finite(row["to_mbi_loss"]["mbi_s"])

    (check,) = out["correctness"]["rows"]
    assert check["ok"] and _finite(check["loss_rel"]) and _finite(check["l1_over_n_max"])
    (fl,) = out["floor"]["rows"]
    assert _finite(fl["floor_ms"]) and _finite(fl["ratio"])
    (b,) = out["batch"]["rows"]
    assert _finite(b["batched_warm_s"]) and _finite(b["sequential_warm_s"]) and b["agreement"]["l1_over_n_max"] < 1e-3
    inv = out["invariants"]  # one invariant test in a child pytest
    assert inv["outcome"] == "finished" and inv["passed"] == 1 and inv.get("failed", 0) == 0, inv
    aim = out["aim"]  # AIM end to end in a child, on a tiny generated table
    assert aim["outcome"] == "finished" and aim["rounds_done"] >= 1 and aim["fits"] >= 1, aim
    assert 0 < aim["workload_error"] < 2 and _finite(aim["fit_compile"]) and aim["fit_wall"] <= aim["wall"]
    for part in out["largest"]["rows"]:
        assert part["rows"] and all(_finite(r["ms_per_iter"]) and _finite(r["first_call_s"]) for r in part["rows"])

    for title in ("## Bandwidth", "## Correctness", "## The engine benchmark", "## Per iteration against the memory-bandwidth",
                  "## A batch of noise draws", "## The largest model", "## The invariant suite on the device",
                  "## AIM end to end on the device"):
        assert title in page
    assert out["wall_s"] < 180, out["wall_s"]

