"""``python -m bench.rr_experiments --quick``: Wang, Ying & Zhang's minimax release, with its MWEM baseline, end to end.

The script's smoke mode runs every experiment (Figs. 2-5, Table I and the RR+PGM extra) at one epsilon with few sizes
and runs, in a subprocess of a few seconds of CPU (its output in a temporary folder); the test reads the JSON back.
Two unit checks pin the MWEM baseline's pieces to pgmjax's own: the batched multiplicative-weights pass equals
``mw_update`` on each sub-table, and the batched selection is the exponential mechanism with one ledger entry.
"""

import json
import math
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from bench.rr_experiments import MWEM_ROUNDS, mw_pass
from pgmjax.privacy import Accountant
from pgmjax.mechanisms.multiplicative_weights import mw_update
from pgmjax.queries.measurement import Measurement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("PGMJAX_DATA", os.path.join(ROOT, "..", "shared", "data"))

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(DATA, "adult")), reason="the shared data is not here")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("minimax") / "rr_quick"
    proc = subprocess.run([sys.executable, "-m", "bench.rr_experiments", "--quick", "--data", DATA, "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(f"{out}.json") as f:
        data = json.load(f)
    return data, out


def test_quick_run_records_its_settings(quick):
    data, out = quick
    meta = data["meta"]
    assert {"machine", "versions", "date", "commit", "command"} <= set(meta)
    assert meta["quick"] is True and meta["parts_run"] == "ABCDE"
    assert meta["command"].startswith("python -m bench.rr_experiments --quick")
    assert meta["mwem"] == {"rounds": MWEM_ROUNDS, "alpha": 0.5, "mw_passes_per_round": 100, "noise": "laplace"}
    assert set(meta["parts"]) == set("ABCDE")
    page = open(f"{out}.md").read()
    assert page.startswith("# Randomized-response release with companion estimators")
    assert "MWEM per sub-table" in page and "bound on the expected relative error" in page
    assert "bound / cut" not in page  # the old wording compared a worst case with an expected-error bound
    assert os.path.getsize(f"{out}.png") > 10_000


def test_heterogeneity_mwem_arm_and_flat_release(quick):
    """Fig. 2: every arm spends exactly eps; the proposed release is flat in h, the per-sub-table baselines are not."""
    rows = quick[0]["heterogeneity"]
    hs = [r["h"] for r in rows]
    assert hs == sorted(hs) and hs[0] == 1 and hs[-1] >= 1000
    for r in rows:
        for arm in ("rr", "rr_clip", "mwem", "laplace_per_group"):
            assert math.isfinite(r[arm]) and 0 < r[arm] < 1, (arm, r)
        assert r["rr_clip"] <= r["rr"] + 1e-12  # clipping onto [0, 1], which holds every answer, never hurts
        for arm, spent in r["epsilon_spent"].items():
            assert spent == pytest.approx(r["epsilon"], rel=1e-9), (arm, r)
    rr = [r["rr_clip"] for r in rows]
    assert max(rr) / min(rr) < 2.5, rr  # flat in the heterogeneity (the paper's Fig. 2)
    lap = [r["laplace_per_group"] for r in rows]
    assert lap[-1] > 20 * lap[0], lap  # a noisy histogram per sub-table degrades with h (about sqrt(h))
    # MWEM's ledger: T rounds of one selection (exponential) and one measurement (Laplace), summing to eps.
    ledger = rows[-1]["mwem_ledger"]
    assert [e["mechanism"] for e in ledger] == ["exponential", "laplace"] * MWEM_ROUNDS
    assert sum(e["cost"] for e in ledger) == pytest.approx(rows[-1]["epsilon"], rel=1e-9)
    assert all(e["count"] == 1 and e["sensitivity"] >= 1.0 for e in ledger)


def test_query_set_size_arms(quick):
    """Fig. 3: the proposed release and MWEM answer any query set with one budget; eps/m per query does not scale."""
    rows = quick[0]["query_set_size"]
    assert {r["m"] for r in rows} >= {1, 1000}
    for r in rows:
        for arm in ("rr", "mwem", "laplace_per_query", "laplace_histogram"):
            assert math.isfinite(r[arm]) and 0 <= r[arm] <= 1, (arm, r)
        assert set(r["epsilon_spent"]) == {"rr", "mwem", "laplace_per_query", "laplace_histogram"}
        assert all(s == pytest.approx(r["epsilon"], rel=1e-9) for s in r["epsilon_spent"].values())
    for n in {r["n"] for r in rows}:
        by_m = {r["m"]: r for r in rows if r["n"] == n}
        assert by_m[1000]["laplace_per_query"] > 5 * by_m[1]["laplace_per_query"]
        assert by_m[1000]["rr"] < by_m[1000]["laplace_per_query"]


def test_table_size_and_cuts(quick):
    data = quick[0]
    for r in data["table_size"]:  # Fig. 4: the measured MSE matches the exact variance, below the bound
        assert r["exact_variance"] < r["bound"]
        assert 1 / 3 < r["mse"] / r["exact_variance"] < 3, r
    for r in data["cuts"]:  # Table I: the mean error sits near the expected-error bound, the worst of 20 above the mean
        assert r["cuts"] == 20 and r["epsilon_spent"] == pytest.approx(r["epsilon"])
        assert r["mean_relative_error"] < 1.5 * r["expected_error_bound_relative"], r
        assert r["worst_relative_error"] > r["mean_relative_error"], r


def test_rr_pgm_beats_the_released_table(quick):
    for r in quick[0]["rr_pgm"]:
        assert r["epsilon_spent"] == pytest.approx(r["epsilon"])
        assert r["rr_pgm"] < r["naive"] and r["rr_pgm"] < r["raw"], r


def test_mw_pass_is_pgmjax_mw_update_per_subtable():
    rng = np.random.default_rng(0)
    A = rng.uniform(0.5, 4.0, (3, 5))
    sizes = A.sum(axis=1)
    R = rng.uniform(size=(4, 3, 5))
    Y = rng.uniform(0, 6, (4, 3))
    ours = mw_pass(A, sizes, R, Y)
    for g in range(3):
        ms = [Measurement(("race",), [Y[t, g]], stddev=1.0, query=R[t, g][None]) for t in range(4)]
        ref = sizes[g] * mw_update(A[g] / sizes[g], ("race",), ms, sizes[g])
        np.testing.assert_allclose(ours[g], ref, rtol=1e-12)
    empty = mw_pass(np.zeros((1, 5)), np.zeros(1), R[:, :1], Y[:, :1])
    assert np.all(empty == 0)


def test_selection_in_sub_tables_fixed_by_position():
    acc = Accountant(epsilon=1.0, bounded=True)
    q = np.zeros((4000, 3))
    q[:, 1] = 1.0  # candidate 1 is better by one sensitivity in every part
    picks = acc.exponential_parallel(jax.random.key(0), q, 1.0, epsilon=1.0, target="t", fixed_parts=True)
    assert picks.shape == (4000,) and set(np.unique(picks)) == {0, 1, 2}
    # P(1) = e^(1/2) / (e^(1/2) + 2) = 0.452 in every part
    assert abs(np.mean(picks == 1) - math.exp(0.5) / (math.exp(0.5) + 2)) < 0.03
    assert len(acc.ledger) == 1 and acc.ledger[0].count == 1 and acc.spent == pytest.approx(1.0)
