"""The utility report on the raw scale (issue 42, item 3): tails lost to clipping show, narrow ranges are flagged.

The case of the issue: hire dates over 1985-2020, a private range collapsed to 1980, every synthetic date in
1980. Binned by that schema the real dates are clipped into 1980 too and the distance looked perfect (~0.01);
on the raw scale it is large and the column is flagged.
"""

import numpy as np
import pandas as pd
import pytest

from pgmjax import cli
from pgmjax.cli.report_html import marginal_tvds, utility_report
from pgmjax.cli.report_raw import COVERAGE_THRESHOLD, compare_categorical, raw_scale_comparison, range_coverage
from pgmjax.data import schema as S

N = 2000
DAY = np.datetime64("1970-01-01")


def _dates(days) -> list[str]:
    return [str(DAY + int(d)) for d in days]


def _days(iso: str) -> int:
    return int((np.datetime64(iso) - DAY).astype(int))


def tables(seed: int = 0):
    """Real: hire dates 1985-2020, years 1985-2020, a department with a rare one. Synthetic ``bad``: all in 1980
    (99% in its last bin, as a model fitted to the clipped real table draws them); ``good``: the real law."""
    rng = np.random.default_rng(seed)
    lo, hi = _days("1985-01-01"), _days("2020-12-31")

    def real_like(n):
        depts = rng.choice(["sales", "ops", "it", "rare"], n, p=[0.5, 0.3, 0.195, 0.005])
        return pd.DataFrame({"hire_date": _dates(rng.integers(lo, hi + 1, n)),
                             "year": [str(v) for v in rng.integers(1985, 2021, n)], "dept": depts})

    real = real_like(N)
    real.loc[:4, "hire_date"] = "not a date"  # unparsable: missing, never an error
    good = real_like(N)
    top = rng.random(N) < 0.99
    bad_days = np.where(top, rng.integers(_days("1980-12-03"), _days("1980-12-31") + 1, N),
                        rng.integers(_days("1980-01-01"), _days("1980-12-03"), N))
    bad = pd.DataFrame({"hire_date": _dates(bad_days), "year": [f"{v:.2f}" for v in rng.uniform(1980.9, 1981, N)],
                        "dept": rng.choice(["sales", "ops", "it", "new"], N, p=[0.5, 0.3, 0.19, 0.01])})
    return real, good, bad


def collapsed_schema():
    """A private schema whose ranges collapsed to 1980 (10 bins each), clipping as the private schema does."""
    edges = np.linspace(_days("1980-01-01"), _days("1981-01-01"), 11).round()
    return S.Schema.from_dict({
        "hire_date": {"type": "date", "bins": _dates(edges), "clip": True, "missing": True},
        "year": {"bins": np.linspace(1980, 1981, 11).tolist(), "clip": True, "missing": True},
        "dept": {"categories": ["sales", "ops", "it"], "other": "other"}})


KINDS = {"hire_date": "date", "year": "number", "dept": "category"}


def test_binned_report_hid_the_collapse():
    # Today's (and the 2-way section's) view: both tables binned by the collapsed schema look alike.
    real, _, bad = tables()
    schema = collapsed_schema()
    tvd = marginal_tvds(schema.encode(real, unreadable="missing"), schema.encode(bad), [("hire_date",), ("year",)])
    assert tvd[("hire_date",)] < 0.05 and tvd[("year",)] < 0.05


def test_collapsed_synthetic_range_is_flagged_with_a_large_distance():
    real, good, bad = tables()
    out = raw_scale_comparison(real, bad, KINDS)
    assert out["threshold"] == COVERAGE_THRESHOLD == 0.5
    for name in ("hire_date", "year"):
        c = out["columns"][name]
        assert c["flagged"] and c["coverage"] == 0.0 and c["tvd"] >= 0.5, (name, c["tvd"])
        assert c["tails"]["real_above_synthetic"] > 0.99  # every real value lies beyond the synthetic range
        assert any(w.startswith(f"{name}: ") and "50%" in w for w in out["warnings"])
    assert out["columns"]["hire_date"]["real_range"][0].startswith("1985")
    assert out["columns"]["hire_date"]["synthetic_range"][1].startswith("1980")

    fine = raw_scale_comparison(real, good, KINDS)
    assert fine["warnings"] == []
    for name in ("hire_date", "year", "dept"):
        c = fine["columns"][name]
        assert not c["flagged"] and c["tvd"] < 0.1, (name, c["tvd"])
    assert fine["columns"]["hire_date"]["coverage"] > 0.9


def test_rare_categories_fold_into_other_in_both():
    real, _, bad = tables()
    c = compare_categorical(real["dept"], bad["dept"])
    # "rare" (0.5% of the real rows) and "new" (absent from them) are both "(other)", in both tables.
    assert c["labels"] == ["sales", "ops", "it", "(other)"]
    assert c["real"][-1] == pytest.approx((real["dept"] == "rare").mean())
    assert c["synthetic"][-1] == pytest.approx((bad["dept"] == "new").mean())
    assert sum(c["real"]) == pytest.approx(1) and sum(c["synthetic"]) == pytest.approx(1)


def test_range_coverage_edges():
    r = np.arange(100.0)
    assert range_coverage(r, r) == 1.0
    assert range_coverage(r, np.array([np.nan])) == 0.0
    assert range_coverage(np.array([np.nan]), r) is None
    assert range_coverage(r, r[:50]) == pytest.approx(0.5, abs=0.02)


def test_page_shows_the_warning():
    real, _, bad = tables()
    schema = collapsed_schema()
    page = utility_report(schema.encode(real, unreadable="missing"), schema.encode(bad), schema=schema,
                          raw=raw_scale_comparison(real, bad, KINDS))
    assert "NOT private" in page and "raw scale" in page and page.count('class="warn">Warning: ') == 2
    assert "less than 50% of the real one" in page


def test_cli_report_end_to_end(tmp_path, capsys):
    real, good, bad = tables()
    # Rows 5 on: infer_schema (the default schema) reads a date column with unparsable fields as categories.
    real.iloc[5:305].to_csv(tmp_path / "real.csv", index=False)
    bad.iloc[:300].to_csv(tmp_path / "bad.csv", index=False)
    good.iloc[:300].to_csv(tmp_path / "good.csv", index=False)
    for synth, flagged in (("bad", True), ("good", False)):
        html = tmp_path / f"{synth}.html"
        code = cli.main(["report", "--real", str(tmp_path / "real.csv"), "--synthetic", str(tmp_path / f"{synth}.csv"),
                         "--html", str(html)])
        out = capsys.readouterr().out
        assert code == 0 and "NOT private" in out
        page = html.read_text()
        assert ("warning: hire_date: " in out) is flagged and ("warning: year: " in out) is flagged
        assert ("Warning: hire_date: " in page) is flagged and "TVD (raw scale)" in page


def test_cli_report_of_integer_coded_tables_with_domain(tmp_path, capsys):
    """Issue 57: integer-coded CSVs were binned as numbers ("[0, 1.133)"); with --domain each code is a category,
    and a code outside the domain is refused with the column named (exit 2)."""
    import json

    rng = np.random.default_rng(0)
    domain = {"a": 3, "b": 100}  # over infer_schema's 32 categories: read without --domain, b is binned as a number
    for name in ("real", "synth"):
        pd.DataFrame({"a": rng.integers(0, 3, 500), "b": rng.integers(0, 100, 500)}).to_csv(
            tmp_path / f"{name}.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    html = tmp_path / "report.html"
    args = ["report", "--real", str(tmp_path / "real.csv"), "--synthetic", str(tmp_path / "synth.csv"),
            "--domain", str(tmp_path / "domain.json"), "--html", str(html)]
    assert cli.main(args) == 0, capsys.readouterr()
    page = html.read_text()
    assert "<tr><td>b</td><td>category</td>" in page and "<tr><td>b</td><td>number</td>" not in page
    pd.DataFrame({"a": [0, 3], "b": [0, 1]}).to_csv(tmp_path / "synth.csv", index=False)
    html.unlink()
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "column 'a' has a value outside [0, 3)" in err and "line" not in err.replace("its line", ""), err
    assert not html.exists()
