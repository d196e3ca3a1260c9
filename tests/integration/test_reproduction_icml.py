"""ICML 2019's reproduction scripts in their quick modes: Figure 1's workload sizes and one Figure 1 cell.

``python -m bench papers figure1_workloads --quick`` and ``python -m bench papers figure1 --quick`` (one mechanism,
one run, Titanic) write their results to a temporary folder; the tests read them back. They need the shared data
folder and skip without it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import pgmjax as pj
from bench.figure1_workloads import factors, queries, smallest_possible

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _titanic():
    try:
        return pj.datasets.load("titanic")
    except FileNotFoundError as e:
        pytest.skip(f"the shared data folder is absent ({e}); set PGMJAX_DATA to run the reproduction checks")


def _bench(*args):
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_workload_sizes_quick_mode_counts_the_benchmark_and_its_draws(tmp_path):
    data = _titanic()
    _bench("bench.figure1_workloads", "--quick", "--out", str(tmp_path / "w"))
    doc = json.loads((tmp_path / "w.json").read_text())
    (row,) = doc["rows"]
    cliques = pj.datasets.benchmark_cliques("titanic", data.domain)
    workload = pj.Workload.benchmark(data.domain, cliques, pj.datasets.NUMERIC["titanic"])
    rows = sum(math.prod(data.domain[a] if m is None else m.shape[0] for a, m in zip(q.clique, q.matrices))
               for q in workload)  # a row per query of each clique's Prefix/identity product
    assert row["benchmark_queries"] == queries(data.domain, cliques) == rows
    assert row["paper_queries"] == 4851 and row["draws"] == 20
    assert row["smallest_possible"] <= row["min"] <= row["median"] <= row["max"]
    assert "| titanic | 20,220 | 4,851 |" in (tmp_path / "w.md").read_text()


def test_smallest_possible_is_the_sum_of_the_smallest_cliques():
    dom = pj.Domain({"a": 2, "b": 3, "c": 4, "d": 5})
    assert smallest_possible(dom, count=2) == 2 * 3 * 4 + 2 * 3 * 5


def test_figure1_quick_mode_runs_both_arms_on_a_drawn_workload(tmp_path):
    _titanic()
    _bench("bench.figure1", "--quick", "--runs", "1", "--datasets", "titanic", "--mechanisms", "privbayes",
           "--workload-seed", "1448", "--out", str(tmp_path / "f"))
    doc = json.loads((tmp_path / "f.json").read_text())
    (run,) = doc["rows"]  # the runs (bench.schema stores them as rows)
    assert run["status"] == "ok", run.get("error")
    assert run["arms"]["original"]["status"] == run["arms"]["pgm"]["status"] == "ok"
    assert 0 < run["arms"]["pgm"]["paper"] < 1 and 0 < run["arms"]["original"]["paper"] < 1
    assert run["privacy_spent"] <= run["privacy_budget"] * (1 + 1e-9)
    ds = doc["datasets"]["titanic"]
    assert ds["workload_seed"] == 1448 and ds["queries"] < 6000  # a draw near the paper's 4,851 queries
    assert f"titanic {ds['queries']:,} (paper 4,851), cliques drawn with seed 1448" in (tmp_path / "f.md").read_text()


def test_factors_over_draws_are_the_median_ratios(tmp_path):
    def run(seed, original, pgm):
        return {"status": "ok", "dataset": "titanic", "mechanism": "privbayes", "seed": seed,
                "arms": {"original": {"status": "ok", "paper": original}, "pgm": {"status": "ok", "paper": pgm}}}

    doc = {"rows": [run(0, 0.2, 0.1), run(1, 0.4, 0.1), run(2, 0.9, 0.3)],
           "datasets": {"titanic": {"workload_seed": 7, "queries": 5000, "cliques": []}}}
    path = tmp_path / "draw.json"
    path.write_text(json.dumps(doc))
    (row,) = factors([str(path)])
    assert row["original"] == 0.4 and row["pgm"] == 0.1 and row["factor"] == pytest.approx(4.0)
    assert row["workload_seed"] == 7 and row["queries"] == 5000 and row["runs"] == 3


def test_figure2a_reports_the_error_on_the_measurements(tmp_path):
    """Figure 2a's second panel (the paper plots it beside the workload error): HDMM's run records each arm's
    error on the strategy's measured queries, and the summary, its table and its plot carry it. A tiny table
    (no shared data, a few seconds); the error is checked against the metric computed here on the same queries."""
    import jax
    import numpy as np

    from bench import figure1 as F
    from bench import figure2a

    rng = np.random.default_rng(0)
    dom = pj.Domain({"a": 6, "b": 4, "c": 3})
    data = pj.Dataset(rng.integers(0, dom.shape, size=(2_000, 3)), dom)
    workload = pj.Workload(dom, [(("a", "b"), [pj.queries.Prefix(), None]), (("b", "c"), None)])
    settings = {**F.SETTINGS["hdmm"], **F.QUICK["hdmm"]}
    runs, cache = [], {}  # the strategy optimised once, as a sweep does
    for eps in (1.0, 10.0):
        rec = F.run_one("hdmm", data, workload, settings, 0, eps, 1e-3, cache)
        runs.append({"dataset": "tiny", "mechanism": "hdmm", "epsilon": eps, "seed": 0, "status": "ok", **rec})
    (strategy, _, _), = cache.values()
    own = {k: v for k, v in settings.items() if k not in ("strategy_device", "strategy")}
    res = pj.mechanisms.hdmm(data, 1.0, key=jax.random.key(0), workload=workload, strategy=strategy, **own)
    measured = F.measured_queries(dom, res.measurements)
    assert len(measured) == len(res.measurements)
    for arm in ("original", "pgm"):
        got = runs[0]["arms"][arm]["measured_paper"]
        assert got == pytest.approx(pj.metrics.workload_error(measured, data, res.model if arm == "pgm" else res.original))
        assert 0 < got < 1
    rows = figure2a.summarize(runs, ["tiny"], ["hdmm"], [1.0, 10.0])
    assert all(row[arm]["measured"]["n"] == 1 for row in rows for arm in ("original", "pgm"))
    doc = {"machine": F.machine(), "settings": {"runs": 1, "seeds": [0], "quick": True, "datasets": ["tiny"],
                                                "mechanisms_order": ["hdmm"], "mechanisms": {"hdmm": settings}},
           "summary": rows, "runs": runs, "meta": {}, "started": F.now()}
    assert "The error on the measurements" in figure2a.markdown(doc)
    assert figure2a.plot(doc, str(tmp_path / "f.png")) is None and (tmp_path / "f.png").stat().st_size > 0
