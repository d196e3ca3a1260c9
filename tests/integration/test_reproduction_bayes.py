"""Xiao & Xiong, "Bayesian Inference under Differential Privacy", Section 6, reproduced by
``bench/bayes_experiments.py``: its quick mode end to end, and the "pc" error law against the closed form.

The quick run is a subprocess (about 20 s of CPU; 40-90 s of wall time on the loaded shared 2-core machine)
writing into a temporary folder; the tests read its JSON.
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from bench.bayes_experiments import law_for, scale_width

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("PGMJAX_DATA", os.path.join(ROOT, "..", "shared", "data"))
SCALE_PC = "pc default h=sd/(4 sqrt m), gamma=1e-6"
PAPER_PC = "pc h=1 (paper)"
FORMER_PC = "pc h=min(s)/8 (former default)"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    if not os.path.isdir(os.path.join(DATA, "adult")):
        pytest.skip(f"no shared Adult data at {DATA}")
    out = tmp_path_factory.mktemp("bayes") / "bayes_quick"
    proc = subprocess.run([sys.executable, "-m", "bench.bayes_experiments", "--quick", "--data", DATA, "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(f"{out}.json") as f:
        return json.load(f), out


def test_quick_run_writes_every_figure_through_the_schema(quick):
    res, out = quick
    assert {"machine", "versions", "date", "commit", "command"} <= set(res["meta"])
    assert res["meta"]["command"].startswith("python -m bench.bayes_experiments --quick")
    assert set(res["runs"]) == {"timing", "online", "coverage"}
    assert {r["series"] for r in res["blue"]} == {"m", "N"} and all(r["estimable"] for r in res["blue"])
    parts = {r["part"] for r in res["methods"]}
    assert parts == {"methods_m", "methods_N", "pc_beta", "mc_samples"}
    page = open(f"{out}.md").read()
    for heading in ("Fig. 5", "Fig. 6 left", "Fig. 6 right", "Fig. 7", "Fig. 8", "Fig. 9-10", "OLS"):
        assert heading in page, heading
    assert os.path.getsize(f"{out}.png") > 10_000


def test_pc_at_a_scale_derived_width_matches_cf_and_the_papers_unit_width_does_worse(quick):
    res, _ = quick
    for part in ("methods_m", "methods_N"):
        rows = [r for r in res["methods"] if r["part"] == part]
        for size in sorted({(r["m"], r["N"]) for r in rows}):
            at = {r["method"]: r for r in rows if (r["m"], r["N"]) == size}
            assert set(at) == {"cf", PAPER_PC, FORMER_PC, "pc h=sd/(4 sqrt m), gamma=0.01", SCALE_PC, "mc", "gaussian"}
            assert abs(at[SCALE_PC]["rel_error"]) < 0.01, (size, at[SCALE_PC])
            assert abs(at[PAPER_PC]["rel_error"]) > 2 * abs(at[SCALE_PC]["rel_error"]), (size, at[PAPER_PC])
            # gamma = 0.01 (the paper's) alone puts the 95% half-width about 2% too wide: its lost tail mass is
            # a fifth of the 5% the interval leaves out
            assert 0.01 < at["pc h=sd/(4 sqrt m), gamma=0.01"]["rel_error"] < 0.04, (size, at)
            # the library's former default width min(s)/8 follows the smallest term: far more bins than the scale width
            assert at[FORMER_PC]["bins"] > 10 * at[SCALE_PC]["bins"], (size, at[FORMER_PC])


def test_beta_sweep_counts_bins_as_theorem_4_6_and_error_falls_with_the_width(quick):
    res, _ = quick
    rows = [r for r in res["methods"] if r["part"] == "pc_beta"]
    for gamma in (0.01, 1e-6):
        g = sorted((r for r in rows if r["gamma"] == gamma), key=lambda r: -r["bin_width"])
        assert len(g) == 3
        betas = [r["beta"] for r in g]
        # beta = (sum s / h)^2: the same law at widths h1, h2 has beta1 / beta2 = (h2 / h1)^2
        assert betas[1] / betas[0] == pytest.approx((g[0]["bin_width"] / g[1]["bin_width"]) ** 2, rel=1e-9)
        assert [r["bins"] for r in g] == sorted(r["bins"] for r in g) and g[-1]["bins"] > 10 * g[0]["bins"]
    fine = sorted((r for r in rows if r["gamma"] == 1e-6), key=lambda r: -r["bin_width"])
    assert abs(fine[-1]["rel_error"]) < abs(fine[0]["rel_error"]) / 10, fine


def test_online_systems_include_the_ols_arm_within_budget(quick):
    res, _ = quick
    fig10 = {r["system"]: r for r in res["online"] if r["setting"].startswith("fig10") and r["data"] == "adult capital-gain"}
    ols = fig10["OLS (Li et al. 2010; history; fresh alone)"]
    paper = fig10["paper (history; fresh alone)"]
    for r in fig10.values():
        assert r["system_cost"] <= 1.0 * (1 + 1e-9), r
        assert 0.0 <= r["R_i"] <= 1.0 and math.isfinite(r["E"]) and r["answered"] == round(r["R_a"] * res["requests"])
    # Same allocation, a less precise estimate (OLS ignores the rows' noise scales): fewer requests met from the
    # history, so more budget spent on the same stream.
    assert ols["from_history"] <= paper["from_history"], (ols, paper)
    assert ols["system_cost"] >= paper["system_cost"], (ols, paper)
    assert not any("OLS" in r["system"] for r in res["online"] if r["setting"].startswith("fig9"))
    cov = res["coverage"]
    assert cov["keys"] == 2 and len(cov["per_key"]) == 2 and len(cov["ols"]["per_key"]) == 2
    # Every decision depends on the requests and noise scales only: other noise keys answer the same requests.
    assert cov["answered_per_key"] == fig10["paper + BLUE combine"]["answered"]
    assert cov["ols"]["answered_per_key"] == ols["answered"]
    assert 0.0 <= cov["overall"] <= 1.0 and 0.0 <= cov["ols"]["overall"] <= 1.0


@pytest.mark.parametrize("m", [200, 400, 600, 1000])
def test_pc_intervals_at_the_default_width_match_the_closed_form_on_the_experiments_laws(m):
    """Fig. 6's laws (N = 100, max S = 5, m history rows): "pc" with nothing set (the width sd / (4 sqrt m), gamma =
    1e-6) gives the 95% half-width within 2% of "cf" at every m (measured: 0.2%); the paper's unit width is 5% to
    74% off on these laws."""
    E = law_for(m, 100, np.random.default_rng(m))
    ref = E.half_width(0.95)
    pc = E.with_method("pc").half_width(0.95)
    assert abs(pc - ref) / ref < 0.02, (m, pc, ref)
    assert E.with_method("pc", bin_width=scale_width(E, m)).half_width(0.95) == pc  # the bench's width is the default
    unit = E.with_method("pc", bin_width=1.0, gamma=0.01).half_width(0.95)
    assert abs(unit - ref) / ref > 0.005, (m, unit, ref)
