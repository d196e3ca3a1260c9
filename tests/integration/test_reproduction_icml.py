"""ICML 2019's reproduction scripts in their quick modes: one Figure 1 cell, and Figure 2a's second panel.

``python -m bench papers figure1 --quick`` (one mechanism, one run, Titanic) writes its results to a temporary
folder; the test reads them back. It needs the shared data folder and skips without it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import pgmjax as pj

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


def test_figure1_draws_tables_each_draw_and_the_factors_spread(tmp_path):
    """``bench.figure1_draws`` reads finished Figure 1 results: one row per (dataset, workload seed, mechanism,
    settings), HDMM's equal weights apart from its default, the factor's range over the draws, and a draw held by
    two files refused."""
    from bench import figure1 as F
    from bench import figure1_draws as D

    def doc(seed, queries, mech, original, pgm, **changed):
        arm = {"status": "infeasible"} if original is None else {"median": original}
        return {"datasets": {"stroke": {"workload_seed": seed, "queries": queries}},
                "settings": {"mechanisms": {mech: {**F.SETTINGS[mech], **changed}}},
                "summary": [{"dataset": "stroke", "mechanism": mech, "runs": 3, "failed": 0, "original": arm,
                             "pgm": {"median": pgm}, "factor": None if original is None else original / pgm}]}

    docs = [("a.json", doc(0, 384_974, "hdmm", 4.0, 0.25)), ("b.json", doc(28, 18_586, "hdmm", 0.7, 0.16)),
            ("c.json", doc(0, 384_974, "hdmm", 1.9, 0.15, weights="equal")),
            ("d.json", doc(28, 18_586, "mwem", None, 0.3))]
    rows = D.collect(docs)
    assert [(r["workload_seed"], r["mechanism"], r["variant"]) for r in rows] == [
        (28, "hdmm", ""), (0, "hdmm", ""), (0, "hdmm", "weights=equal"), (28, "mwem", "")]
    assert rows[3]["original"] == "infeasible" and rows[3]["factor"] is None
    spread = {(s["mechanism"], s["variant"]): (s["draws"], s["min"], s["max"]) for s in D.spreads(rows)}
    assert spread == {("hdmm", ""): (2, 0.7 / 0.16, 4.0 / 0.25), ("hdmm", "weights=equal"): (1, 1.9 / 0.15, 1.9 / 0.15)}
    for name, d in docs:
        (tmp_path / name).write_text(json.dumps(d))
    D.main([str(tmp_path / n) for n, _ in docs] + ["--out", str(tmp_path / "draws")])
    text = (tmp_path / "draws.md").read_text()
    assert "| stroke | 28 | 18,586 (17,716) | hdmm | defaults | 3 | 0.7 | 0.16 | 4.375 |" in text
    assert "* stroke, hdmm (defaults): 4.38 to 16 over 2 draws" in text
    with pytest.raises(SystemExit, match="in both"):
        D.collect(docs + [("e.json", docs[1][1])])
