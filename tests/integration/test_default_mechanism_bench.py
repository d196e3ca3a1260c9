"""bench.default_mechanism: the verdict (TreeAIM against the better of MST and AIM) from fabricated runs, its page
and plots; and a real, seconds-long bench.mst_aim run of TreeAIM beside MST on a 3-column generated table."""

import json
import subprocess
import sys

import pytest

from bench import default_mechanism as dm
from bench.schema import ROOT


def _row(mech, eps, seed, tvd, tvd3, wall, dataset="toy"):
    return {"library": "pgmjax", "mechanism": mech, "dataset": dataset, "epsilon": eps, "seed": seed, "tvd": tvd,
            "tvd_3way": tvd3, "tvd_1way": tvd / 10, "wall_s": wall, "source": "runs.json"}


def _rows():
    return [
        _row("mst", 1.0, 0, 0.050, 0.10, 10.0), _row("mst", 1.0, 1, 0.052, 0.11, 12.0),
        _row("aim", 1.0, 0, 0.040, 0.09, 100.0), _row("aim", 1.0, 1, 0.042, 0.09, 120.0),
        _row("tree_aim", 1.0, 0, 0.041, 0.08, 20.0), _row("tree_aim", 1.0, 1, 0.043, 0.08, 24.0),  # within noise
        _row("mst", 3.0, 0, 0.030, 0.07, 10.0), _row("mst", 3.0, 1, 0.030, 0.07, 10.0),
        _row("aim", 3.0, 0, 0.020, 0.05, 100.0),
        _row("tree_aim", 3.0, 0, 0.025, 0.06, 30.0), _row("tree_aim", 3.0, 1, 0.026, 0.06, 30.0),  # loses to AIM
    ]


def test_the_verdict_compares_with_the_better_rival_within_twice_the_standard_error():
    table = dm.summarize(_rows(), [])
    one, three = table["toy"][1.0]["verdict"], table["toy"][3.0]["verdict"]
    assert one["tvd"]["best"] == "AIM" and one["tvd"]["best_mean"] == pytest.approx(0.041)
    assert one["tvd"]["slack"] == pytest.approx(2 * (0.002 ** 2 / 2) ** 0.5 / 2 ** 0.5)  # sd 0.00141, se 0.001
    assert one["tvd"]["wins"] and one["tvd_3way"]["wins"] and one["wall_ratio_to_mst"] == pytest.approx(2.0)
    # one AIM seed: its standard error 0; TreeAIM's own (sd 0.0007 / sqrt 2) is the slack, and 0.0255 > 0.021
    assert not three["tvd"]["wins"] and not three["tvd_3way"]["wins"] and three["wall_ratio_to_mst"] == 3.0


def test_earlier_aim_rows_count_only_where_the_run_has_none():
    earlier = [_row("aim", 1.0, s, 0.030, None, 500.0) for s in range(3)] + [_row("aim", 5.0, 0, 0.01, None, 9.0)]
    table = dm.summarize(_rows(), earlier)
    assert "aim_earlier" not in table["toy"][1.0]  # this run has AIM at epsilon 1
    assert table["toy"][5.0]["verdict"] == {"complete": False}  # no MST, no TreeAIM there
    rows = [r for r in _rows() if r["mechanism"] != "aim"]
    v = dm.summarize(rows, earlier)["toy"][1.0]["verdict"]
    assert v["aim_from"] == "earlier" and v["tvd"]["best"] == "AIM (earlier)" and not v["tvd"]["wins"]
    assert v["tvd_3way"]["best"] == "MST"  # the earlier rows have no three-way score


def test_the_wall_ratio_pairs_runs_of_one_file_and_a_file_can_give_some_mechanisms_only(tmp_path):
    # MST's runs from another file (another load, another seed) count in its accuracy, not in the wall ratio
    # (and a seed run in two files counts once, the first file's run)
    other = [dict(_row("mst", 1.0, s, 0.051, 0.10, 90.0), source="older.json") for s in (0, 2, 3)]
    v = dm.summarize(_rows() + other, [])["toy"][1.0]
    assert v["mst"]["tvd"]["n"] == 4 and v["mst"]["seeds"] == [0, 1, 2, 3]
    assert v["mst"]["tvd"]["mean"] == pytest.approx((0.050 + 0.052 + 0.051 + 0.051) / 4)
    assert v["verdict"]["wall_ratio_to_mst"] == pytest.approx(2.0)
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps({"rows": _rows() + [_row("mst", 1.0, 0, 0.06, 0.1, 9.0, dataset="other")]}))
    assert {r["mechanism"] for r in dm.rows_of(f"{path}:mst,aim")} == {"mst", "aim"}
    assert {(r["mechanism"], r["dataset"]) for r in dm.rows_of(f"{path}:mst:other")} == {("mst", "other")}
    assert len(dm.rows_of(f"{path}:mst,aim:toy,other")) == 8
    assert {r["mechanism"] for r in dm.rows_of(str(path))} == {"mst", "aim", "tree_aim"}
    with pytest.raises(SystemExit, match="unknown mechanism"):
        dm.rows_of(f"{path}:mwem")


def test_tree_aim_s_wall_ratio_reads_the_runs_its_errors_come_from():
    """A later file's TreeAIM runs of the same seeds (older code, with MST beside them) count neither in its errors
    nor in its wall ratio: the first file's runs are TreeAIM's figures, and their MST pairs its time."""
    older = [dict(_row(m, 1.0, s, 0.09, 0.2, wall), source="older.json")
             for s in (0, 1) for m, wall in (("mst", 10.0), ("tree_aim", 80.0))]
    v = dm.summarize(_rows() + older, [])["toy"][1.0]
    assert v["tree_aim"]["tvd"]["mean"] == pytest.approx(0.042)
    assert v["verdict"]["wall_ratio_to_mst"] == pytest.approx(2.0)  # 22 s over 11 s; the older pairs would make 4.0


def test_before_and_after_pairs_a_mechanism_s_runs_by_table_epsilon_and_seed():
    before = [dict(r, selected=[["a", "b"]], tvd_model=r["tvd"]) for r in _rows()]
    after = [dict(r, tvd=r["tvd"] * 1.1, tvd_model=r["tvd"], wall_s=r["wall_s"] / 2,
                  selected=[["a", "b"]] if r["seed"] == 0 else [["b", "c"]]) for r in _rows()]
    ba = dm.before_after(before, after + [_row("tree_aim", 9.0, 0, 0.1, 0.1, 1.0)])  # a run with no before: left out
    assert ba["n"] == 4 and ba["same_picks"] == 2 and [r["seed"] for r in ba["rows"]] == [0, 1, 0, 1]
    assert ba["mean_change"]["tvd"] == pytest.approx(0.1) and ba["mean_change"]["wall_s"] == pytest.approx(-0.5)
    assert ba["mean_change"]["tvd_model"] == pytest.approx(0.0) and ba["mean_change_same_picks"]["tvd"] == pytest.approx(0.1)
    page = "\n".join(dm.render_before_after({"meta": {"cpu": "c"}, "before_files": ["b.json"], "runs_files": ["a.json"],
                                              "before_after": ba}))
    assert "Mean relative change over 4 runs: two-way TVD +10.00%" in page and "| toy | 3 | 1 | no |" in page


def test_the_page_and_plots(tmp_path):
    doc = {"meta": {"cpu": "c"}, "runs_files": ["runs.json"], "earlier_files": [],
           "table": {d: {str(e): c for e, c in by.items()} for d, by in dm.summarize(_rows(), []).items()}}
    paths = dm.plot(doc, str(tmp_path / "dm"))
    assert [p.rsplit("_", 1)[1] for p in paths] == ["epsilon.png", "wall.png"]
    assert all(open(p, "rb").read()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
    page = "\n".join(dm.render({**doc, "plots": paths}))
    assert "| toy | 1 | this run | AIM 0.0410 | 0.0420 | yes | AIM 0.0900 | 0.0800 | yes | 2.0 |" in page
    assert "| toy | 3 | this run | AIM 0.0200 | 0.0255 | **no** |" in page and "![dm_wall.png](dm_wall.png)" in page


@pytest.mark.slow  # a smoke run of two bench scripts in child processes (tests/README: the long checks)
def test_a_real_run_of_tree_aim_beside_mst(tmp_path):
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "bench", "mechanisms", "mst_aim", "--datasets", "generated4", "--mechanisms", "mst",
           "tree_aim", "--libraries", "pgmjax", "--eps", "1", "--mst-select-iters", "5", "--mst-fit-iters", "10",
           "--no-trace", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((tmp_path / "runs.json").read_text())["rows"]
    tree = next(r for r in rows if r["mechanism"] == "tree_aim")
    assert tree["rho_spent"] == pytest.approx(tree["rho"], rel=1e-9) and tree["selected"] and tree["tvd_3way"] is not None
    proc = subprocess.run([sys.executable, "-m", "bench", "mechanisms", "default_mechanism", "--runs", str(out) + ".json",
                           "--out", str(tmp_path / "dm")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| generated4 | 1 | none |" in (tmp_path / "dm.md").read_text()  # no AIM in this run: stated
