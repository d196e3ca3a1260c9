"""``python -m bench agreement --quick``: pgmjax and mbi 2.0 agree on unmeasured marginals of a small loopy problem.

The script runs one child process per precision (both engines in each), so this test is a subprocess of
about 10 s of CPU (20-30 s of wall time on the shared 2-core machine).
"""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("mbi")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quick_agreement_writes_results_and_agrees(tmp_path):
    out = tmp_path / "agreement.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "agreement", "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.exists(), proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert {"machine", "versions", "date", "commit", "command"} <= set(data["meta"])
    assert data["meta"]["versions"]["mbi"].startswith("2.")
    assert data["meta"]["command"].startswith("python -m bench.agreement --quick")
    rows = {r["precision"]: r for r in data["rows"]}
    assert set(rows) == {"float32", "float64"}
    for precision, r in rows.items():
        assert r["pgmjax"]["finite"] and r["mbi"]["finite"], r
        assert r["pgmjax"]["x64"] == r["mbi"]["x64"] == (precision == "float64")
        assert r["queries"] and all(len(q) in (2, 3) for q in r["queries"])
        # Both fit the same problem: the same loss to a few digits, then the same unmeasured answers.
        assert abs(r["pgmjax"]["loss"] - r["mbi"]["loss"]) < 1e-3 * r["mbi"]["loss"], r
        assert r["unmeasured"] < 1e-3, f"{precision}: pgmjax and mbi differ by {r['unmeasured']:.3g} L1/N"
    assert rows["float64"]["unmeasured"] < 1e-6, rows["float64"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "agreement.md").read_text().startswith("# Agreement with mbi 2.0")
