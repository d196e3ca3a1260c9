"""Issue 57, item 6: the raw scale kept. A messy table without a schema goes through the raw path and comes back
with its dates read, its values inside its range, its decimals and its blanks.

The findings, each tested here: dates written dd/mm/yyyy dropped as blanks; bins past the values (a 0-5 score to
6.995, ids of 100000-119999 to 126220); 17-digit floats and decimals unlike the input's; blanks in a column that
has none; a clipping warning of 97% where 2.5% is clipped. The last test runs the whole raw path (private
schema, MST, decoding) on a generated messy table and compares the released table with the input.
"""

import jax
import numpy as np
import pandas as pd
import pytest

from pgmjax import schema as S
from pgmjax.data.raw_fields import column_values
from pgmjax.data.schema_columns import NumericColumn
from pgmjax.preprocessing.preprocess import private_schema
from pgmjax.preprocessing.private_bins import private_edges
from pgmjax.preprocessing.private_format import class_counts, decide_kind, encode_raw
from pgmjax.preprocessing.private_range import range_release, range_warnings
from pgmjax.privacy import Accountant


def messy(n: int, seed: int = 0, month_first: bool = False) -> pd.DataFrame:
    """Dates 47% dd/mm/yyyy (or mm/dd/yyyy), 48% ISO, 5% blank or n/a; 0-5 scores with 1 decimal (3% blank);
    ids 100000-119999 (no blanks); amounts with 2 decimals (no blanks)."""
    rng = np.random.default_rng(seed)
    d = pd.Series((np.datetime64("2010-01-01") + rng.integers(0, 3650, n)).astype("datetime64[s]"))
    other = d.dt.strftime("%m/%d/%Y" if month_first else "%d/%m/%Y")
    date = np.where(rng.random(n) < 0.47, other, d.dt.strftime("%Y-%m-%d")).astype(object)
    blank = rng.random(n) < 0.05
    date[blank] = np.where(rng.random(blank.sum()) < 0.5, "", "n/a")
    score = np.array([f"{v:.1f}" for v in np.round(rng.uniform(0, 5, n), 1)], object)
    score[rng.random(n) < 0.03] = ""
    ids = rng.permutation(np.arange(100000, 120000))[:n].astype(str).astype(object)
    amount = np.array([f"{v:.2f}" for v in np.round(rng.lognormal(5, 1, n), 2)], object)
    return pd.DataFrame({"date": date, "score": score, "id": ids, "amount": amount})


def blank_share(values) -> float:
    s = pd.Series(values, dtype=object)
    return float((s.isna() | (s.astype(str).str.strip() == "")).mean())


# -- dates ----------------------------------------------------------------------------------------------------------

def test_dates_written_day_first_are_read_not_blanked():
    frame = messy(4000)
    out = private_schema(frame, Accountant(epsilon=4.0), jax.random.key(0))
    col = out.schema.columns["date"]
    data = encode_raw(out.schema, frame)
    missing = float((data.records[:, 0] == col.bins).mean())
    assert abs(missing - blank_share(frame["date"].replace("n/a", ""))) < 0.01  # 5%, not 52%
    assert col.kind == "date" and col.date_format == "dd/mm/yyyy"
    assert not any(w.startswith("date:") for w in out.schema.provenance["warnings"])


def test_month_first_is_told_from_day_first_by_the_noisy_counts():
    frame = messy(4000, month_first=True)
    out = private_schema(frame, Accountant(epsilon=4.0), jax.random.key(1))
    assert out.schema.columns["date"].date_format == "mm/dd/yyyy"
    days = column_values(frame["date"], out.schema.columns["date"].read_as)
    assert np.isnan(days).mean() == pytest.approx(blank_share(frame["date"].replace("n/a", "")), abs=1e-9)


def test_a_declared_date_format_is_public_and_kept_in_the_schema_json():
    frame = messy(2000)
    out = private_schema(frame, Accountant(epsilon=2.0), jax.random.key(0), kinds={"date": "date"},
                         date_formats={"date": "mm/dd/yyyy"})
    col = out.schema.columns["date"]
    assert col.date_format == "mm/dd/yyyy" and "date_formats" not in out.schema.provenance  # declared, no vote
    again = S.Schema.from_dict(out.schema.to_dict())
    assert again.columns["date"].date_format == "mm/dd/yyyy" and again.to_dict() == out.schema.to_dict()
    with pytest.raises(S.SchemaError, match="date format of column 'date' must be one of"):
        private_schema(frame, Accountant(epsilon=2.0), jax.random.key(0), date_formats={"date": "yyyy/dd/mm"})
    with pytest.raises(S.SchemaError, match="declared number; a date format applies to date columns"):
        private_schema(frame, Accountant(epsilon=2.0), jax.random.key(0), kinds={"score": "number"},
                       date_formats={"score": "dd/mm/yyyy"})


def test_other_date_forms_and_their_classes():
    from pgmjax.data.date_forms import other_date_days

    assert other_date_days(["2020/3/7", "2020.03.07", "07/03/2020", "31/04/2020"], "dd/mm/yyyy").tolist()[:3] == [18328.0] * 3
    assert np.isnan(other_date_days(["31/04/2020", "07/03/2020"], None)).all()
    cls = class_counts(["25/12/2020", "12/25/2020", "01/02/2020", "2020-01-02", "", "n/a", "1.5", "2.25", "3"])
    assert cls.tolist() == [1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]


def test_a_column_mostly_unreadable_as_its_kind_is_warned_about_from_noisy_counts():
    from pgmjax.cli.preprocessing import summary_lines

    rng = np.random.default_rng(0)
    iso = (np.datetime64("2015-01-01") + rng.integers(0, 2000, 3000)).astype(str).astype(object)
    words = np.array([f"{d} March 2019" for d in rng.integers(1, 29, 3000)], object)
    frame = pd.DataFrame({"when": np.where(rng.random(3000) < 0.35, words, iso)})
    out = private_schema(frame, Accountant(epsilon=2.0), jax.random.key(0))
    (w,) = [w for w in out.schema.provenance["warnings"] if w.startswith("when:")]
    share = int(w.split("about ")[1].split("%")[0])
    assert 30 <= share <= 40 and "--date-format when=" in w and "released as blanks" in w
    entry = {"private": True, "split": "s", "spent": 1.0, "currency": "epsilon", "ledger": [], "discovery_delta": 0.0,
             "release_epsilon": 1.0, "release_delta": 0.0, "warnings": out.schema.provenance["warnings"]}
    assert any(line.strip().startswith("WARNING       when: about") for line in summary_lines(entry))
    # Read from the noisy counts alone (post-processing): the same counts give the same share.
    noisy = class_counts(frame["when"])
    assert decide_kind(noisy)["unreadable"] == pytest.approx(float((frame["when"] != iso).mean()), abs=1e-9)


# -- ranges, precision, blanks ------------------------------------------------------------------------------------

def test_clipping_bounds_stay_near_the_values_at_small_budgets():
    rng = np.random.default_rng(0)
    score = np.round(rng.uniform(0, 5, 20000), 1)
    ids = rng.permutation(np.arange(100000.0, 120000.0))
    tops = {"score": [], "id": []}
    for s in range(12):
        for name, x, whole in (("score", score, False), ("id", ids, True)):
            e = private_edges(Accountant(rho=1.0), jax.random.key(s), x, bins=10, tail=0.02, budget=1e-4, kind="number",
                              whole=whole)
            tops[name].append(e[-1])
    # The old window (the whole inner span beyond the last inner edge) drew up to 8.4 and 134600 here (85% and 90% of
    # the draws past the maximum); now half an end bin past the last inner edge, itself drawn with noise: within one
    # end bin (0.5, 2000) of the maximum.
    assert max(tops["score"]) <= 5.5 and max(tops["id"]) <= 122000


def test_the_clipped_share_counts_only_cells_wholly_outside_the_range():
    from pgmjax.preprocessing.preprocess import _shown

    ids = np.random.default_rng(0).permutation(np.arange(100000.0, 120000.0))
    r = range_release(Accountant(epsilon=1.0), jax.random.key(0), ids, "number", budget=1.0)
    assert range_warnings("id", "number", [100384.0, 119695.0], r, _shown) == []  # was "about 98%"; 3.5% is clipped
    score = np.round(np.random.default_rng(1).uniform(0, 5, 20000), 1)
    r = range_release(Accountant(epsilon=1.0), jax.random.key(0), score, "number", budget=1.0)
    assert range_warnings("score", "number", [0.2, 4.9], r, _shown) == []  # was "about 49%"; 5% is clipped
    (w,) = range_warnings("id", "number", [1000.0, 5000.0], range_release(
        Accountant(epsilon=1.0), jax.random.key(0), ids, "number", budget=1.0), _shown)
    assert "about 100% of the noisy range counts lie in cells wholly outside it" in w


def test_decimals_are_voted_and_decoded_values_are_written_with_them():
    frame = messy(4000)
    out = private_schema(frame, Accountant(epsilon=4.0), jax.random.key(0))
    assert out.schema.columns["score"].decimals == 1 and out.schema.columns["amount"].decimals == 2
    for name in ("score", "amount"):  # edges on the grid: every bin holds a value written so
        e = out.schema.columns[name].edges
        assert np.array_equal(e, np.round(e, out.schema.columns[name].decimals))


def test_decoded_floats_lie_on_the_decimals_grid_even_with_edges_off_it():
    col = NumericColumn("score", np.array([0.1650549, 0.413, 0.984, 1.46, 4.88970588]), decimals=1, missing=True,
                        clip=True)
    codes = np.random.default_rng(0).integers(0, col.bins, 5000)
    x = col.decode_codes(codes, jax.random.key(0))
    assert all(len(repr(float(v)).split(".")[1]) <= 1 for v in x)  # no 0.41237493119959203
    assert (col.encode(x) == codes).all()  # each value stays in its bin
    mid = NumericColumn("a", np.array([0.0, 0.25, 1.0]), decimals=1, decode="midpoint").decode_codes(
        np.array([0, 1]), jax.random.key(0))
    assert mid.tolist() == [0.1, 0.6]


def test_a_column_without_blanks_decodes_no_blanks():
    frame = messy(4000)
    out = private_schema(frame, Accountant(epsilon=4.0), jax.random.key(0))
    cols = out.schema.columns
    assert not cols["id"].blanks and not cols["amount"].blanks and cols["score"].blanks and cols["date"].blanks
    assert S.Schema.from_dict(out.schema.to_dict()).columns["id"].blanks is False
    codes = np.where(np.arange(1000) % 300 == 0, cols["id"].bins, np.arange(1000) % cols["id"].bins)  # the model's 0.3%
    ids = cols["id"].decode_codes(codes, jax.random.key(0))
    assert not pd.isna(pd.Series(ids)).any() and ((ids >= cols["id"].edges[0]) & (ids <= cols["id"].edges[-1])).all()
    assert pd.isna(pd.Series(cols["score"].decode_codes(codes % cols["score"].size, jax.random.key(0)))).any()


# -- the messy table through the raw path ------------------------------------------------------------------------------

def test_messy_table_released_on_its_own_scale():
    """Private schema, MST and decoding at a generous budget: released ranges inside the input's, the input's decimals,
    its blank shares, its dates read. Tolerance of the ranges: none. The outer edges are private tail quantiles
    drawn over candidates inside [min, max] at this budget, rounded to the input's decimals (the values lie on that
    grid, so the rounding stays inside), and decoding draws inside the edges."""
    from pgmjax.mechanisms.spanning_tree import mst

    frame = messy(6000, seed=3)
    key = jax.random.key(0)
    k_schema, k_mst, k_decode = jax.random.split(key, 3)
    out = private_schema(frame, Accountant(epsilon=8.0), k_schema)
    data = encode_raw(out.schema, frame)
    synth = out.schema.decode(mst(data, 8.0, key=k_mst, engine_iters=30).synthetic, k_decode)
    for name in ("score", "id", "amount"):
        real = pd.to_numeric(frame[name], errors="coerce")
        got = pd.to_numeric(pd.Series(synth[name]), errors="coerce")
        assert real.min() <= got.min() and got.max() <= real.max(), name
        assert abs(blank_share(synth[name]) - blank_share(frame[name])) < 0.015, name
    score, amount = synth["score"].dropna().to_numpy(), synth["amount"].dropna().to_numpy()
    assert (np.round(score, 1) == score).all() and (np.round(score, 0) != score).mean() > 0.5
    assert (np.round(amount, 2) == amount).all() and (np.round(amount, 1) != amount).mean() > 0.5
    assert synth["id"].dtype.kind == "i"
    # Dates: mostly readable (the blanks are the input's 5%), all ISO in the release.
    assert abs(blank_share(synth["date"]) - blank_share(frame["date"].replace("n/a", ""))) < 0.015
    days = column_values(synth["date"], "date")
    real_days = column_values(frame["date"], "date dd/mm/yyyy")
    assert np.nanmin(real_days) <= np.nanmin(days) and np.nanmax(days) <= np.nanmax(real_days)


# -- where the user sees it -----------------------------------------------------------------------------------------

def test_the_html_report_shows_the_private_schema_warnings():
    from pgmjax.cli.report_html import utility_report
    from pgmjax.data.dataset import Dataset
    from pgmjax.data.domain import Domain

    rng = np.random.default_rng(0)
    data = Dataset(rng.integers(0, 3, (200, 2)), Domain({"a": 3, "b": 3}))
    warning = "when: about 35% of its non-empty fields cannot be read as dates (YYYY-MM-DD or YYYY/MM/DD)"
    report = {"privacy": {"eps": 1.0}, "ledger": [],
              "preprocessing": {"private": True, "split": "s", "discovery_delta": 0.0, "public": "p", "ledger": [],
                                "warnings": [warning]}}
    page = utility_report(data, data, report=report)
    assert f'<p class="warn">Warning: {warning}</p>' in page.replace("&#x27;", "'")


def test_date_format_on_the_command_line(tmp_path, capsys):
    import json

    from pgmjax.cli import main

    frame = messy(2000)
    frame.to_csv(tmp_path / "raw.csv", index=False)
    assert main(["schema", "--seed", "0", "--data", str(tmp_path / "raw.csv"), "--epsilon", "2", "--kind", "date=date",
                 "--date-format", "date=mm/dd/yyyy", "--out", str(tmp_path / "s.json")]) == 0
    column = json.loads((tmp_path / "s.json").read_text())["date"]
    assert column["type"] == "date" and column["date_format"] == "mm/dd/yyyy"
    with pytest.raises(SystemExit) as bad:
        main(["schema", "--seed", "0", "--data", str(tmp_path / "raw.csv"), "--epsilon", "2", "--date-format", "date=dd.mm.yy"])
    assert bad.value.code == 2
    assert "expected COLUMN=FORMAT with FORMAT one of yyyy-mm-dd, dd/mm/yyyy, mm/dd/yyyy" in capsys.readouterr().err
