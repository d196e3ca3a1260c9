"""Raw data without a schema: private preprocessing by default, private ranges, datetimes, and ``pgmjax sample``."""

import json

import jax
import numpy as np
import pandas as pd
import pytest

from pgmjax import schema as S
from pgmjax.cli import main
from pgmjax.data.schema_columns import NumericColumn, datetime_days, days_to_datetimes
from pgmjax.preprocessing.private_bins import (
    candidate_edges,
    private_edges,
    private_quantiles,
    private_range,
    quantile_rounds,
    range_cells,
    recursive_quantiles,
)
from pgmjax.privacy import Accountant


def small_raw(n=2000, seed=0) -> pd.DataFrame:
    """Integers, floats with blanks and an outlier, a datetime column with blanks, and text."""
    rng = np.random.default_rng(seed)
    income = rng.lognormal(10, 0.8, n).round(2).astype(object)
    income[rng.random(n) < 0.05] = ""
    income[0] = 9.5e9  # one record far out: must not stretch the bins
    when = np.datetime64("2021-03-01T00:00:00") + rng.exponential(3 * 86400, n).astype("timedelta64[s]")
    when_text = pd.Series(np.datetime_as_string(when, unit="s")).str.replace("T", " ").to_numpy(dtype=object)
    when_text[rng.random(n) < 0.03] = ""
    return pd.DataFrame({"city": rng.choice(["Lyon", "Nice", "Paris"], n), "age": rng.integers(18, 91, n),
                         "when": when_text, "income": income})


# ---------------------------------------------------------------------------------------------------
# The private range and the edges inside it
# ---------------------------------------------------------------------------------------------------


def test_private_range_keeps_the_bulk_and_drops_an_outlier():
    x = np.random.default_rng(1).lognormal(10, 1, 5000)
    outside = 0
    for seed in range(40):
        acc = Accountant(epsilon=0.5)
        lo, hi = private_range(acc, jax.random.key(seed), np.append(x, 9.5e9), "number", budget=0.5)
        assert lo <= np.quantile(x, 0.01) and hi >= np.quantile(x, 0.99), (lo, hi)
        outside += hi > 1e9
        assert acc.spent == 0.5 and len(acc.ledger) == 1 and acc.ledger[0].mechanism == "laplace"
    # One record alone passes its cell's threshold only as often as an empty cell does (<= 1% per histogram);
    # 40 draws: P(more than 3 | p = 0.01) < 1e-3.
    assert outside <= 3


def test_private_range_falls_back_to_the_public_range_and_works_for_dates():
    acc = Accountant(rho=1e-6)
    lo, hi = private_range(acc, jax.random.key(0), np.array([5.0, 6.0]), "number", budget=1e-6)
    cells = range_cells("number")
    assert (lo, hi) == (cells[0], cells[-1])  # nothing passes: the whole public range, never a cell picked by noise
    days = datetime_days(["2021-03-01 10:00:00"] * 3000 + ["2021-07-01 00:00"] * 1000)
    lo, hi = private_range(Accountant(epsilon=1.0), jax.random.key(1), days, "datetime", budget=1.0)
    assert days_to_datetimes([lo])[0] == "2021-01-01 00:00:00" and days_to_datetimes([hi])[0] == "2022-01-01 00:00:00"


def test_private_edges_spend_the_budget_and_bracket_the_data():
    x = np.random.default_rng(2).normal(50, 10, 4000)
    acc = Accountant(epsilon=1.0)
    edges = private_edges(acc, jax.random.key(0), x, bins=5, tail=0.02, budget=1.0, kind="number", whole=False)
    assert acc.spent == pytest.approx(1.0) and len(acc.ledger) == 1 + 3 + 1  # range, 4 inner edges in 3 rounds, bounds
    assert np.all(np.diff(edges) > 0) and 2 <= len(edges) <= 6
    ranks = np.searchsorted(np.sort(x), edges) / len(x)
    assert ranks[0] < 0.1 and ranks[-1] > 0.9


def test_parallel_exponential_mechanism_charges_one_part_and_draws_each_part_exactly():
    # Two parts: each draw's frequencies match exp(eps q / 2) (brute force), the release costs one draw's budget
    # under add/remove neighbours and two under replace-one (a replaced record may leave one part, join another).
    q1, q2 = np.array([0.0, -1.0, -3.0]), np.array([-2.0, 0.0])
    eps, draws = 1.5, 3000
    acc = Accountant(epsilon=eps * draws)
    picks = np.array([acc.exponential_parallel(k, [q1, q2], 1.0, epsilon=eps)
                      for k in jax.random.split(jax.random.key(0), draws)])
    assert acc.spent == pytest.approx(eps * draws) and len(acc.ledger) == draws and acc.ledger[0].count == 1
    for j, q in enumerate((q1, q2)):
        p = np.exp(eps * q / 2) / np.exp(eps * q / 2).sum()
        freq = np.bincount(picks[:, j], minlength=len(q)) / draws
        assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / draws)), (freq, p)
    bounded = Accountant(epsilon=1.0, bounded=True)
    bounded.exponential_parallel(jax.random.key(1), [q1, q2], 1.0, epsilon=0.5)
    assert bounded.spent == pytest.approx(1.0) and bounded.ledger[0].count == 2
    single = Accountant(epsilon=1.0, bounded=True)
    single.exponential_parallel(jax.random.key(1), [q1], 1.0, epsilon=0.5)  # one part: one draw
    assert single.spent == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least one"):
        acc.exponential_parallel(jax.random.key(2), [], 1.0, epsilon=eps)


def test_recursive_quantiles_cost_log_rounds_and_beat_one_draw_per_level():
    rng = np.random.default_rng(3)
    x = rng.lognormal(10, 1, 5000)
    levels = [0.02] + [j / 10 for j in range(1, 10)] + [0.98]
    cand = candidate_edges(1e2, 1e7)
    rounds = quantile_rounds(len(levels))
    assert rounds == 4
    total, err_rec, err_one = 0.4, [], []
    for seed in range(8):
        acc = Accountant(epsilon=total)
        q = recursive_quantiles(acc, jax.random.key(seed), x, levels, cand, budget=total / rounds)
        assert acc.spent == pytest.approx(total) and len(acc.ledger) == rounds and np.all(np.diff(q) >= 0)
        assert [e.target.split(" (")[0] for e in acc.ledger] == [f"quantile round {r}" for r in range(1, 5)]
        err_rec.append(np.abs(np.searchsorted(np.sort(x), q) / len(x) - levels).mean())
        acc = Accountant(epsilon=total)
        q = private_quantiles(acc, jax.random.key(seed), x, levels, cand, budget=total / len(levels))
        err_one.append(np.abs(np.searchsorted(np.sort(x), np.sort(q)) / len(x) - levels).mean())
    # Same budget: the recursion's rank error is smaller (measured: about a third).
    assert np.mean(err_rec) < 0.7 * np.mean(err_one), (np.mean(err_rec), np.mean(err_one))


# ---------------------------------------------------------------------------------------------------
# Datetimes
# ---------------------------------------------------------------------------------------------------


def test_datetimes_round_trip_through_schema_json_encode_and_decode():
    col = S.Schema.from_dict({"t": {"bins": ["2021-03-01T00:00:00", "2021-03-01T12:30:00", "2021-03-02T00:00:00"],
                                    "type": "datetime", "missing": True}})
    assert S.Schema.from_dict(col.to_dict()).to_dict() == col.to_dict()
    frame = pd.DataFrame({"t": ["2021-03-01 00:00:00", "2021-03-01T12:29:59", "2021-03-01 12:30", "", "2021-03-02 00:00:00"]})
    codes = col.encode(frame).records[:, 0]
    assert codes.tolist() == [0, 0, 1, 2, 1]
    decoded = col.decode(np.repeat(codes, 50)[:, None], jax.random.key(0))["t"]
    assert (decoded[np.repeat(codes, 50) == 2] == "").all()
    assert np.array_equal(col.encode(pd.DataFrame({"t": decoded})).records[:, 0], np.repeat(codes, 50))
    filled = decoded[decoded != ""]
    assert filled.str.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}").all()
    with pytest.raises(S.SchemaError, match="must be a datetime"):
        S.Schema.from_dict({"t": {"bins": ["2021-03-01", "soon"], "type": "datetime"}})


def test_infer_schema_bins_datetimes_instead_of_listing_them():
    frame = small_raw(500)[["when"]]
    spec, _ = S.infer_schema(frame, bins=4)
    assert spec["when"]["type"] == "datetime" and len(spec["when"]["bins"]) <= 5 and spec["when"]["missing"] is True
    assert isinstance(S.Schema.from_dict(spec).columns["when"], NumericColumn)


# ---------------------------------------------------------------------------------------------------
# pgmjax run without a schema, then pgmjax sample
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("default")
    raw = small_raw()
    raw.to_csv(d / "raw.csv", index=False)
    code = main(["run", "--seed", "0", "--data", str(d / "raw.csv"), "-m", "mst", "-e", "1", "--engine-iters", "100", "--out", str(d / "s.csv"),
                 "--report", str(d / "r.json"), "--save-model", str(d / "model"), "-q"])
    return d, raw, code


def test_run_without_schema_derives_one_privately_within_the_budget(default_run, capsys):
    d, raw, code = default_run
    assert code == 0
    report = json.loads((d / "r.json").read_text())
    pre = report["preprocessing"]
    assert pre["private"] is True and pre["fraction"] == 0.1 and report["not_private"] == [n for n in report["not_private"]
                                                                                            if "schema" not in n]
    from pgmjax.privacy import cdp_rho

    assert pre["spent"] + report["privacy"]["rho_spent"] == pytest.approx(cdp_rho(1.0, 1e-9), rel=1e-6)
    synth = pd.read_csv(d / "s.csv", dtype={"when": str})
    assert list(synth.columns) == list(raw.columns)
    age_text = pd.read_csv(d / "s.csv", dtype=str)["age"].dropna()  # blanks: the missing code (noisy, may be drawn)
    assert age_text.str.fullmatch(r"-?\d+").all()  # integers decode as integers, not 45.0
    assert synth["income"].max() < 1e8  # the outlier record did not set the range
    real_inc = pd.to_numeric(raw["income"], errors="coerce").dropna()
    assert abs(synth["income"].median() / real_inc.median() - 1) < 0.2
    assert synth["age"].dropna().between(0, 200).all()
    when = pd.to_datetime(synth["when"].dropna())
    assert when.min() >= pd.Timestamp("2021-01-01") and when.max() <= pd.Timestamp("2022-01-01")


def test_sample_decodes_a_saved_model_reproducibly(default_run, capsys):
    d, raw, _ = default_run
    args = ["sample", "--model", str(d / "model"), "--records", "300", "--seed", "3"]
    assert main([*args, "--out", str(d / "a.csv")]) == 0
    assert "no privacy cost" in capsys.readouterr().err
    assert main([*args, "--out", str(d / "b.csv")]) == 0
    a = pd.read_csv(d / "a.csv", dtype={"when": str})
    assert len(a) == 300 and list(a.columns) == list(raw.columns)
    assert (d / "a.csv").read_bytes() == (d / "b.csv").read_bytes()
    assert set(a["city"].dropna()) <= {"Lyon", "Nice", "Paris", "other"}
    assert main(["sample", "--model", str(d / "model"), "--records", "50", "--codes", "--out", str(d / "c.csv")]) == 0
    codes = pd.read_csv(d / "c.csv")
    assert codes.dtypes.map(pd.api.types.is_integer_dtype).all() and (codes >= 0).all().all()
    assert main(["sample", "--model", str(d / "model"), "--records", "50", "--decode", "midpoint"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "city,age,when,income" and len(printed) == 51


@pytest.mark.parametrize("args, expected", [
    (["--model", "nowhere"], "--model: nowhere is not a folder"),
    (["--model", "MODEL", "--codes", "--decode", "uniform"], "cannot be combined with --codes"),
    (["--model", "MODEL", "--out", "MODEL/x.csv"], "inside the model folder"),
])
def test_sample_refuses_bad_input(default_run, capsys, args, expected):
    d, _, _ = default_run
    args = [a.replace("MODEL", str(d / "model")) for a in args]
    assert main(["sample", *args]) == 2
    assert expected in capsys.readouterr().err


def test_public_ranges_from_the_command_line(tmp_path, capsys):
    data = tmp_path / "raw.csv"
    small_raw(1500).to_csv(data, index=False)
    out = tmp_path / "s.json"
    assert main(["schema", "--seed", "0", "--data", str(data), "--epsilon", "1", "--range", "age=0:120",
                 "--range", "when=2021-01-01:2021-06-01", "--out", str(out)]) == 0
    spec = json.loads(out.read_text())
    assert spec["age"]["bins"][0] == 0 and spec["age"]["bins"][-1] == 120
    assert spec["when"]["bins"][0] == "2021-01-01T00:00:00" and spec["when"]["bins"][-1] == "2021-06-01T00:00:00"
    capsys.readouterr()
    for bad, expected in ((["--range", "city=0:1"], "column 'city' is categorical"),
                          (["--range", "age=9:1"], "finite low < high"),
                          (["--range", "age=0:9", "--range", "age=1:5"], "--range age is given twice"),
                          (["--range", "nope=0:1"], "which the table does not have")):
        assert main(["schema", "--seed", "0", "--data", str(data), "--epsilon", "1", *bad]) == 2
        assert expected in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["schema", "--seed", "0", "--data", str(data), "--epsilon", "1", "--range", "age"])
