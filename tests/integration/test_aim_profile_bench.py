"""bench.aim_profile: the before/after page's table over the seeds, and the final fit run again (--refit)."""

import pytest

from bench import aim_profile
from bench.tables import load_table


def _run(seed, wall, compile_s, iterations, error):
    return {"mechanism": "aim", "dataset": "t", "epsilon": 1.0, "seed": seed, "wall": wall, "fit_compile": compile_s,
            "fit_iterations": iterations, "workload_error": error}


def test_the_summary_pairs_each_seed_and_skips_a_single_seed():
    runs = [(_run(0, 10.0, 2.0, 1000, 0.10), _run(0, 8.0, 2.0, 600, 0.11)),
            (_run(1, 20.0, 4.0, 3000, 0.20), _run(1, 12.0, 2.0, 1000, 0.23)),
            ({**_run(0, 1.0, 0.0, 1, 0.5), "dataset": "u"}, {**_run(0, 1.0, 0.0, 1, 0.5), "dataset": "u"})]
    (row,) = aim_profile._summary(runs)
    assert row["dataset"] == "t" and row["seeds"] == 2
    assert row["wall s, mean"] == "15.0 / 10.0" and row["wall s, median"] == "15.0 / 10.0"
    assert row["compiling share"] == "20% / 20%" and row["iterations, mean"] == "2000 / 800"
    assert row["after - before"] == "+0.0200 ± 0.0141"  # differences 0.01 and 0.03 within the seeds
    assert row["workload error"] == "0.1500 ± 0.0707 / 0.1700 ± 0.0849"


def test_the_page_says_back_to_back_only_where_each_pair_ran_on_one_day_and_machine():
    def meta(day, commit, cpu="Xeon"):
        return {"meta": {"date": f"{day} 10:00 UTC", "commit": commit, "machine": {"cpu": cpu, "cores": 2}}}

    together = [(meta("2026-12-01", "aaa"), meta("2026-12-01", "bbb"))] * 2
    assert aim_profile._pairing(together).startswith("Each pair ran back to back")
    apart = [(meta("2026-11-30", "aaa"), meta("2026-12-02", "bbb")), (meta("2026-12-01", "aaa"), meta("2026-12-01", "bbb"))]
    text = aim_profile._pairing(apart)
    assert "back to back" not in text and "ran apart" in text
    assert "before: 2026-11-30, aaa, Xeon, 2 cores; 2026-12-01, aaa, Xeon, 2 cores" in text
    other_machine = [(meta("2026-12-01", "aaa", "EPYC"), meta("2026-12-01", "bbb"))]
    assert "ran apart" in aim_profile._pairing(other_machine)


def test_a_refit_at_the_final_fits_own_count_gives_its_answer():
    """The final fit run again with its own iterations from the same warm start is the same fit: same loss and
    error (a refit that dropped an argument, or read another fit's, would differ); more iterations lower the loss."""
    data = load_table("generated5", rows=2000)
    res = aim_profile.profile("aim", data, 1.0, 0, refits=(200, 2000), rounds=12, engine_iters=200, max_model_mb=80.0)
    same, longer = res["refits"]
    assert res["final_iters"] == 200 and same["iters"] == 200
    assert same["loss"] == pytest.approx(res["final_loss"], rel=1e-6)
    assert same["workload_error"] == pytest.approx(res["workload_error"], rel=1e-6)
    assert longer["loss"] <= same["loss"]
