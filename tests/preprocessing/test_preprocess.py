"""Private preprocessing (pgmjax.preprocessing.preprocess), the extended schema columns, and the raw-table case of issue 19.

The raw table is generated here: 20,000 rows with a float age (halves), an income with 0.2% outliers
above 2M and 2% blanks, a 30-valued city column of which 5 values appear 1 to 4 times, a date column
with blanks, and a binary column.
"""

import json
import math

import jax
import numpy as np
import pandas as pd
import pytest

from pgmjax import schema as S
from pgmjax.cli import main
from pgmjax.data.examples import RARE_CITIES, raw_table
from pgmjax.data.schema_columns import NumericColumn
from pgmjax.model.serialization import load_model_schema
from pgmjax.preprocessing.preprocess import (
    candidate_edges,
    private_categories,
    private_quantiles,
    private_schema,
)
from pgmjax.privacy import Accountant, cdp_rho

RARE = RARE_CITIES


@pytest.fixture(scope="module")
def raw():
    return raw_table()


# ---------------------------------------------------------------------------------------------------
# Mechanisms
# ---------------------------------------------------------------------------------------------------


def test_candidate_edges_are_public_and_fine():
    c = candidate_edges()
    assert np.all(np.diff(c) > 0) and 0.0 in c and 26.5 in c and 1.23e9 in c and -4.56e-3 in c
    assert np.array_equal(c, candidate_edges())  # no data, no randomness
    w = candidate_edges(0, 10, whole=True)
    assert np.array_equal(w, np.arange(11.0))
    r = candidate_edges(-5, 5)
    assert r.min() == -5 and r.max() == 5 and len(r) > 1001
    with pytest.raises(S.SchemaError, match="both lo and hi"):
        candidate_edges(0, None)


def test_private_quantiles_within_the_exponential_mechanism_rank_bound():
    # McSherry & Talwar: with probability 1 - beta, quality >= OPT - (2/eps)(ln|C| + ln(1/beta)); OPT is 0 up to
    # the grid's gap (at most one value per 0.1 here), quality = -rank error.
    x = np.random.default_rng(1).uniform(0, 1000, 5000)
    cand = candidate_edges(0, 1000)
    levels = np.arange(1, 10) / 10
    eps = 0.5
    bound = 2 / eps * (math.log(len(cand)) + math.log(1e4)) + 5
    acc = Accountant(epsilon=eps * 9)
    q = private_quantiles(acc, jax.random.key(3), x, levels, cand, budget=eps)
    rank = np.searchsorted(np.sort(x), q)
    assert np.all(np.abs(rank - levels * len(x)) <= bound), (rank, levels * len(x), bound)
    assert len(acc.ledger) == 9 and acc.spent == pytest.approx(acc.budget, rel=1e-12)
    # The bound is tight enough to fail: a tiny epsilon is far off somewhere.
    acc = Accountant(epsilon=9e-4)
    q = private_quantiles(acc, jax.random.key(3), x, levels, cand, budget=1e-4)
    assert np.any(np.abs(np.searchsorted(np.sort(x), q) - levels * len(x)) > 50)
    with pytest.raises(S.SchemaError, match=r"levels must lie in \(0, 1\)"):
        private_quantiles(Accountant(epsilon=1), jax.random.key(0), x, [1.0], cand, budget=1)


def test_private_quantiles_selection_probabilities_match_brute_force():
    # Tiny case: 3 candidates, the empirical selection frequencies equal exp(eps q / 2) / Z (tolerance 5 sigma).
    x = np.array([1.0, 2.0, 3.0, 4.0])
    cand = np.array([0.0, 2.5, 10.0])
    eps = 1.0
    quality = -np.abs(0.5 * np.array([0, 2, 4]) - 0.5 * np.array([4, 2, 0]))
    p = np.exp(eps * quality / 2)
    p /= p.sum()
    draws = 400
    acc = Accountant(epsilon=eps * draws)
    keys = jax.random.split(jax.random.key(0), draws)
    picks = np.array([private_quantiles(acc, k, x, [0.5], cand, budget=eps)[0] for k in keys[:draws]])
    freq = np.array([(picks == c).mean() for c in cand])
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / draws)), (freq, p)


def test_category_discovery_folds_rare_values():
    from pgmjax.privacy.discrete_tails import discrete_tail

    values = ["common"] * 400 + ["single"] + ["four"] * 4 + ["six"] * 6
    # A value held by one record passes with probability <= delta: never in 200 draws (delta = 1e-6).
    acc = Accountant(epsilon=200.0)
    kept = set()
    for k in jax.random.split(jax.random.key(1), 200):
        cats, tau = private_categories(acc, k, values, budget=1.0, delta=1e-6)
        kept |= set(cats)
        # tau: the smallest integer with P[1 + noise >= tau] <= delta under the discrete Laplace law (exact tail)
        scale = acc.ledger[-1].scale
        assert discrete_tail("laplace", scale, tau - 1) <= 1e-6 < discrete_tail("laplace", scale, tau - 2)
    assert kept == {"common"}
    # With a large budget, the threshold is min_count + 1: 4 records never pass, 6 nearly always (Laplace b = 0.02).
    acc = Accountant(epsilon=50.0)
    cats, tau = private_categories(acc, jax.random.key(2), values, budget=50.0, delta=1e-6, min_count=5)
    assert tau == 6 and cats == ["common", "six"]
    # zCDP accountant: discrete Gaussian noise, tau from its exact tail.
    acc = Accountant(rho=1.0)
    cats, tau = private_categories(acc, jax.random.key(3), values, budget=0.5, delta=1e-9)
    sigma = acc.ledger[-1].scale
    assert acc.ledger[-1].mechanism == "gaussian"
    assert discrete_tail("gaussian", sigma, tau - 1) <= 1e-9 < discrete_tail("gaussian", sigma, tau - 2)
    with pytest.raises(S.SchemaError, match="needs a delta > 0"):
        private_categories(Accountant(epsilon=1), jax.random.key(0), values, budget=1.0, delta=0.0)


# ---------------------------------------------------------------------------------------------------
# Schema columns: missing, clip, dates, exact decoding, read_csv frames
# ---------------------------------------------------------------------------------------------------


def test_missing_dates_round_trip_and_decoded_types():
    spec = {
        "n": {"bins": [0, 10, 20], "integer": True, "missing": True},
        "f": {"bins": [0.0, 0.5, 1.0], "missing": True, "decimals": 2},
        "d": {"bins": ["2020-01-01", "2020-02-01", "2021-01-01"], "type": "date", "missing": True},
        "c": {"categories": ["", "x"], "other": "other"},
    }
    schema = S.Schema.from_dict(spec)
    assert schema.domain.to_dict() == {"n": 3, "f": 3, "d": 3, "c": 3}
    assert S.Schema.from_dict(schema.to_dict()).to_dict() == schema.to_dict()
    frame = pd.DataFrame({"n": ["3", "", "20"], "f": ["0.25", "0.75", ""], "d": ["2020-01-15", "", "2020-12-31"],
                          "c": ["x", "", "zz"]})
    codes = schema.encode(frame).records
    assert codes.tolist() == [[0, 0, 0, 1], [2, 1, 2, 0], [1, 2, 1, 2]]
    back = schema.decode(codes, jax.random.key(0))
    assert back["n"].isna().tolist() == [False, True, False] and str(back["n"].dtype) == "Int64"
    assert back["d"].tolist()[1] == "" and all(len(v) == 10 for v in back["d"].tolist()[::2])
    assert back["c"].tolist() == ["x", "", "other"]
    assert np.all(np.round(back["f"].dropna(), 2) == back["f"].dropna())
    assert np.array_equal(schema.encode(back.astype(object).where(back.notna(), "")).records, codes)
    # Written to CSV and read back with pandas.read_csv (NaN, floats): the same codes.
    path = "/tmp/_pgmjax_roundtrip.csv"
    back.to_csv(path, index=False)
    assert np.array_equal(schema.encode(pd.read_csv(path)).records, codes)


def test_decoding_is_float64_and_exact():
    col = NumericColumn("age", np.array([18.0, 26.0, 27.0, 90.0]), decode="midpoint")
    assert col.decode_codes(np.array([1]), jax.random.key(0))[0] == 26.5  # not 26.500000953...
    col = NumericColumn("x", np.array([0.1, 0.2]))
    u = col.decode_codes(np.zeros(2000, np.int64), jax.random.key(0))
    assert np.all((u >= 0.1) & (u < 0.2))
    assert np.mean(u.astype(np.float32).astype(np.float64) == u) < 0.01  # float64 draws, not float32 ones
    assert len(np.unique(u)) == 2000


def test_clip_and_schema_encode_on_read_csv_frame(tmp_path):
    schema = S.Schema.from_dict({"x": {"bins": [0, 1, 2], "clip": True}, "c": {"categories": ["", "1", "a"]}})
    assert schema.encode(pd.DataFrame({"x": [-5.0, 9.0], "c": ["a", "1"]})).records[:, 0].tolist() == [0, 1]
    p = tmp_path / "t.csv"
    p.write_text("x,c\n0.5,1\n1.5,\n")
    assert schema.encode(pd.read_csv(p)).records.tolist() == [[0, 1], [1, 0]]  # 1.0 is "1", NaN is ""
    with pytest.raises(S.SchemaError, match='"missing": true'):
        S.Schema.from_dict({"x": {"bins": [0, 1]}}).encode(pd.DataFrame({"x": [np.nan]}))


def test_infer_schema_bins_numbers_with_blanks_and_flags_itself(raw):
    spec, notes = S.infer_schema(raw, bins=8)
    assert "bins" in spec["income"] and spec["income"]["missing"] is True  # not 19,000 categories
    assert spec["joined"]["type"] == "date" and spec["joined"]["missing"] is True
    assert spec["_pgmjax"]["private"] is False and S.Schema.from_dict(spec).private is False
    assert S.Schema.from_dict(spec).domain.size("income") == 9


# ---------------------------------------------------------------------------------------------------
# The private schema on the raw table
# ---------------------------------------------------------------------------------------------------


def test_private_schema_on_the_raw_table(raw):
    rho = cdp_rho(1.0, 1e-9)
    acc = Accountant(rho=0.2 * rho)
    out = private_schema(raw, acc, jax.random.key(0))
    schema = out.schema
    assert list(schema.columns) == list(raw.columns)
    assert acc.spent == pytest.approx(acc.budget, rel=1e-9) and out.spent == pytest.approx(acc.budget, rel=1e-9)
    assert all(e.target.startswith("preprocess ") for e in acc.ledger)
    assert schema.private is True and schema.provenance["spent"] == pytest.approx(acc.budget, rel=1e-9)
    # No value seen fewer than 5 times is in the schema.
    counts = raw["city"].value_counts()
    cats = schema.columns["city"].categories
    assert not any(counts.get(c, 0) < 5 for c in cats if c != "") and not set(RARE) & set(cats)
    assert schema.columns["city"].other == "other" and "city00" in cats
    # Bin edges are not the data's extremes; numeric columns have a missing code and clip.
    age = raw["age"].astype(float)
    income = pd.to_numeric(raw["income"], errors="coerce")
    e_age, e_inc = schema.columns["age"].edges, schema.columns["income"].edges
    assert e_age[0] != age.min() and e_age[-1] != age.max() and e_inc[-1] < income.max() / 10
    assert schema.columns["income"].missing and schema.columns["income"].clip and schema.columns["income"].integer
    # Kinds and decimals by the private vote (the noisy counts of fields by the decimals they are written with).
    assert schema.columns["joined"].kind == "date" and schema.columns["city"].other == "other"
    age_col = schema.columns["age"]  # half-years: about half whole, half fractional; the vote may go either way
    assert age_col.decimals == (None if age_col.integer else 1)
    # Encoding the raw table works (clipping, blanks) and the private median edge is near the real median.
    data = schema.encode(raw)
    assert data.records[:, 1].max() == schema.domain.size("income") - 1  # the missing code is used
    mid = e_inc[np.argmin(np.abs(e_inc - income.median()))]
    assert abs(mid / income.median() - 1) < 0.2
    with pytest.raises(S.SchemaError, match="budget must be > 0 and at most"):
        private_schema(raw, acc, jax.random.key(0), budget=1.0)


# ---------------------------------------------------------------------------------------------------
# The command line end to end
# ---------------------------------------------------------------------------------------------------


def test_cli_private_schema_run_end_to_end(raw, tmp_path, capsys):
    data = tmp_path / "raw.csv"
    raw.to_csv(data, index=False)
    out, rep, html, model = (tmp_path / n for n in ("synth.csv", "report.json", "report.html", "model"))
    code = main(["run", "--seed", "0", "--data", str(data), "--preprocess-fraction", "0.2", "-m", "mst", "-e", "1",  # private schema: the default
                 "--workload", "all-2way", "--out", str(out), "--report", str(rep), "--html", str(html),
                 "--save-model", str(model), "-q"])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    assert "whole release (eps=1, delta=2e-09)-DP" in stdout and "preprocessing private schema" in stdout
    synth = pd.read_csv(out, dtype={"city": str, "sex": str, "joined": str})
    assert list(synth.columns) == list(raw.columns)
    real_inc = pd.to_numeric(raw["income"], errors="coerce").dropna()
    syn_inc = synth["income"].dropna()
    for q in (50, 90):
        assert abs(np.percentile(syn_inc, q) / np.percentile(real_inc, q) - 1) < 0.2, q
    assert abs((syn_inc > 1e6).mean() - (real_inc > 1e6).mean()) < 0.01  # not 80%
    assert not set(RARE) & set(synth["city"].dropna())
    assert synth["income"].isna().mean() == pytest.approx(0.02, abs=0.01)
    assert set(synth["joined"].dropna().str.len()) == {10}
    report = json.loads(rep.read_text())
    pre = report["preprocessing"]
    rho = cdp_rho(1.0, 1e-9)
    assert pre["private"] and pre["spent"] == pytest.approx(0.2 * rho, rel=1e-9)
    assert pre["spent"] + report["privacy"]["rho_spent"] == pytest.approx(rho, rel=1e-6)  # the ledger sums to the budget
    assert len(pre["ledger"]) == sum(1 for _ in pre["ledger"]) > 10
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Computed from the raw data: NOT private" in page
    assert page.count("data:image/png;base64,") == 2 and "Preprocessing ledger" in page and "worst two-way" in page
    stored = load_model_schema(model)
    assert stored is not None and stored.to_dict() == S.Schema.from_dict(stored.to_dict()).to_dict()
    assert stored.private is True and list(stored.columns) == list(raw.columns)


def test_cli_schema_commands_private_and_flagged(raw, tmp_path, capsys):
    small = raw.iloc[:3000]
    data = tmp_path / "raw.csv"
    small.to_csv(data, index=False)
    assert main(["schema", "--seed", "0", "--data", str(data), "--epsilon", "5", "--out", str(tmp_path / "p.json")]) == 0
    spec = json.loads((tmp_path / "p.json").read_text())
    assert spec["_pgmjax"]["private"] is True and spec["city"]["other"] == "other"
    assert "private: (5, 1e-09)-DP" in capsys.readouterr().err
    assert main(["schema", "--seed", "0", "--data", str(data), "--out", str(tmp_path / "s.json")]) == 0
    capsys.readouterr()
    # A schema read from the data without noise is refused before anything runs ...
    run_args = ["run", "--seed", "0", "--data", str(data), "--schema", str(tmp_path / "s.json"), "-m", "privbayes", "-e", "1", "-q",
                "--report", str(tmp_path / "r.json"), "--out", str(tmp_path / "o.csv")]
    assert main(run_args) == 2
    err = capsys.readouterr().err
    assert "without differential privacy" in err and "--allow-nonprivate-schema" in err
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "r.json").exists()
    # ... and accepted with the explicit flag, then flagged in the summary and the report.
    code = main([*run_args, "--allow-nonprivate-schema"])
    stdout = capsys.readouterr().out
    assert code == 0 and "WARNING: read from the data without differential privacy" in stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["preprocessing"]["private"] is False and "schema (read from the data without noise)" in report["not_private"]
    assert main(["run", "--seed", "0", "--data", str(data), "--private-schema", "--schema", str(tmp_path / "s.json"), "-m", "mst",
                 "-e", "1"]) == 2
    capsys.readouterr()
    # pgmjax report: the HTML page from two CSVs (the synthetic one has blanks and values the schema may not list).
    assert main(["report", "--real", str(data), "--synthetic", str(tmp_path / "o.csv"), "--html", str(tmp_path / "p.html")]) == 0
    assert "NOT private" in capsys.readouterr().out
    page = (tmp_path / "p.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "workload error" in page
    assert main(["report", "--real", str(data), "--synthetic", str(tmp_path / "o.csv"), "--html", str(data)]) == 2


def test_utility_report_distances_and_structure():
    from pgmjax import Dataset, metrics
    from pgmjax.cli.report_html import marginal_tvds, utility_report

    rng = np.random.default_rng(0)
    dom = {"a": 3, "b": 4, "c": 2}
    real = Dataset(rng.integers(0, [3, 4, 2], (500, 3)), dom)
    synth = Dataset(rng.integers(0, [3, 4, 2], (300, 3)), dom)
    pairs = [("a", "b"), ("a", "c"), ("b", "c")]
    tvd = marginal_tvds(real, synth, pairs)
    _, per = metrics.marginal_tvd(real, synth, pairs, per_clique=True)  # an independent implementation
    assert np.allclose([tvd[p] for p in pairs], per, rtol=1e-12)
    brute = 0.5 * sum(abs(np.mean((real.records[:, 0] == i)) - np.mean(synth.records[:, 0] == i)) for i in range(3))
    assert marginal_tvds(real, synth, [("a",)])[("a",)] == pytest.approx(brute, rel=1e-12)
    schema = S.Schema.from_dict({"a": {"categories": ["x", "y"], "other": "o"}, "b": {"bins": [0, 1, 2, 3], "missing": True},
                                 "c": {"categories": ["", "z"]}})
    page = utility_report(real, synth, schema=schema)
    assert page.count("data:image/png;base64,") == 2 and "NOT private" in page and "(missing)" not in page  # labels are in the PNGs
    assert page.count("<tr>") >= 3 + 1 + 2  # worst marginals (3 rows + header) and the error table
    import base64

    first = page.split("data:image/png;base64,")[1].split('"')[0]
    assert base64.b64decode(first)[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="domains differ"):
        utility_report(real, Dataset(np.zeros((2, 2), int), {"a": 3, "b": 4}))
