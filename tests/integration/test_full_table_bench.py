"""``python -m bench scalability full_table`` (ICML 2019 Figure 2b's full-table baselines): its operators and its
quick mode.

The LSMR arm's linear operator sums the 10^d table into the triples' marginals and its adjoint spreads them back;
with one measured triple (d = 3) the operator is the identity, so least squares returns the noisy answers
themselves. The multiplicative-weights arm's steps lower the loss.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from bench.full_table import _marginals, _spread, run_lsmr, run_mw
from bench.problems import markov_chain_problem

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_spread_is_the_adjoint_of_the_marginals():
    d = 5
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10,) * d)
    r = [rng.normal(size=(10, 10, 10)) for _ in range(d - 2)]
    lhs = sum(np.vdot(m, t) for m, t in zip(_marginals(x, d), r))
    assert np.isclose(lhs, np.vdot(x, _spread(r, d)), rtol=1e-12)


def test_lsmr_on_one_triple_returns_the_noisy_answers_and_mw_improves_with_iterations():
    problem = markov_chain_problem(3)
    noisy = float(np.mean([np.abs(y - t).sum() / problem["records"] for y, t in zip(problem["noisy"], problem["true"])]))
    assert abs(run_lsmr(problem, 3, 2, 1)["mean_l1_error_per_record"] - noisy) < 1e-9
    problem = markov_chain_problem(4)
    assert run_mw(problem, 4, 20, 1)["mean_l1_error_per_record"] < run_mw(problem, 4, 1, 1)["mean_l1_error_per_record"]


def test_quick_mode_writes_every_arm(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.full_table", "--quick", "--out", str(tmp_path / "ft")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((tmp_path / "ft.json").read_text())["rows"]
    assert {(r["d"], r["arm"]) for r in rows} == {(d, a) for d in (3, 4) for a in ("pgmjax", "mw", "lsmr")}
    assert all(r["status"] == "ok" and np.isfinite(r["mean_l1_error_per_record"]) for r in rows)
    assert all(r["sec_per_iter"] > 0 for r in rows if r["arm"] != "pgmjax")  # the engine's is a difference of times
    refused = subprocess.run([sys.executable, "-m", "bench.full_table", "--d", "5", "--arms", "mw", "--max-cells", "1000",
                              "--iters", "2", "--repeats", "1", "--out", str(tmp_path / "cap")],
                             cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 0, refused.stderr[-3000:]
    (row,) = json.loads((tmp_path / "cap.json").read_text())["rows"]
    assert row["status"].startswith("infeasible (1e+05 cells")
