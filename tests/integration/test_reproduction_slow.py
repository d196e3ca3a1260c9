"""A reproduction script whose quick mode takes minutes on a 2-core machine (a long check: ``-m slow``).

``bench.history_experiments --quick`` (EDBT 2012, section 5.1: kernel PCA, maximum entropy and the engine over a
history of noisy range queries; about two CPU minutes) writes to a temporary folder; the test reads the JSON back.
It needs the shared data folder and skips without it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("PGMJAX_DATA", os.path.join(ROOT, "..", "shared", "data"))

pytestmark = pytest.mark.slow


def _needs(name):
    if not os.path.isdir(os.path.join(DATA, name)):
        pytest.skip(f"the shared {name} table is absent from {DATA} (set PGMJAX_DATA)")


def _run(*args):
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_history_quick_mode_integrates_past_answers_better_than_the_raw_ones(tmp_path):
    _needs("nltcs")
    _run("bench.history_experiments", "--quick", "--data", DATA, "--out", str(tmp_path / "hx"))
    doc = json.loads((tmp_path / "hx.json").read_text())
    assert {"machine", "commit", "versions", "date", "command"} <= set(doc["meta"])
    assert doc["rows"] and {"scaling", "cv_check", "alpha_sweep"} <= set(doc)
    for row in doc["rows"]:
        past = row["rmse_past"]
        # every estimator is post-processing of the same release; the ledger holds epsilon plus the prior's 0.02
        assert row["ledger"] == pytest.approx(row["eps"] + 0.02)
        assert all(math.isfinite(v) for v in past.values())
        # the paper's first finding: integrating the history beats the raw noisy answers on the past queries
        assert min(past["kpca_inf"], past["maxent_cv"], past["pgm_l2"]) < past["raw"], row
        assert row["maxent"]["converged"], row["maxent"]
