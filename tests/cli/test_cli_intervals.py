"""pgmjax run --intervals: workload answers with their intervals in the report."""

import json
import subprocess
import sys

import numpy as np
import pytest


def _files(tmp_path):
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "t.csv", rng.integers(0, [3, 2, 4], size=(400, 3)), delimiter=",", fmt="%d", header="a,b,c", comments="")
    (tmp_path / "t-domain.json").write_text(json.dumps({"a": 3, "b": 2, "c": 4}))


def _run(tmp_path, *extra):
    cmd = [sys.executable, "-m", "pgmjax", "run", "--data", "t.csv", "--domain", "t-domain.json", "-m", "mst", "-e", "2", "-q", *extra]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_intervals_in_the_report(tmp_path, monkeypatch, capsys):
    from pgmjax.cli.parser import main  # in this process: the console script's entry, without a fresh JAX

    _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--data", "t.csv", "--domain", "t-domain.json", "-m", "mst", "-e", "2", "-q", "--workload",
                 "all-2way", "--intervals", "0.9", "--interval-replicates", "16", "--report", "r.json"])
    assert code == 0, capsys.readouterr().err
    iv = json.loads((tmp_path / "r.json").read_text())["intervals"]
    assert iv["level"] == 0.9 and len(iv["queries"]) == 3
    # MST's measurements, L2: the refits are the exact QP by default, and the report says so
    assert iv["method"] == "bootstrap" and iv["fit_method"] == "qp" and "exact QP" in iv["fit_method_reason"]
    for q in iv["queries"]:
        v, lo, hi = (np.array(q[k]) for k in ("value", "lo", "hi"))
        assert v.size == np.prod([{"a": 3, "b": 2, "c": 4}[a] for a in q["clique"]])
        assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(np.isfinite(q["se"]))
        assert np.all(lo <= v + 1e-6) and np.all(v <= hi + 1e-6) and np.all(hi > lo)
        assert q["converged"] and np.isfinite(q["fit_gap"])


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_intervals_fit_method_override(tmp_path):
    _files(tmp_path)
    proc = _run(tmp_path, "--workload", "all-2way", "--intervals", "0.9", "--interval-replicates", "16",
                "--interval-fit", "mirror_descent", "--report", "r.json")
    assert proc.returncode == 0, proc.stderr
    iv = json.loads((tmp_path / "r.json").read_text())["intervals"]
    assert iv["fit_method"] == "mirror_descent" and "fit_method_reason" not in iv
    for q in iv["queries"]:
        v, lo, hi = (np.array(q[k]) for k in ("value", "lo", "hi"))
        assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
        assert np.all(lo <= v + 1e-6) and np.all(v <= hi + 1e-6) and "fit_gap" not in q


def test_intervals_need_a_workload_and_a_report(tmp_path):
    _files(tmp_path)
    proc = _run(tmp_path, "--intervals", "0.9", "--report", "r.json")
    assert proc.returncode == 2 and "--intervals needs --workload" in proc.stderr
    proc = _run(tmp_path, "--workload", "all-2way", "--intervals", "1.5")
    assert proc.returncode == 2 and "must be in (0, 1)" in proc.stderr
    assert not (tmp_path / "r.json").exists()
