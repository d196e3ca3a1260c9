"""The run's warnings are stored in its JSON report, not only printed (issue 42, items 3 and 6).

The case of item 3: a schema whose date and number ranges collapsed to 1980 while the real values span
1985-2020. ``run --html`` flags those columns (synthetic range covering under 50% of the real one) on the page
and, with ``--show-private``, on stdout; ``--report`` now holds the same sentences in its ``warnings`` list,
marked NOT private (read from the input without noise), and says so in ``not_private``.
"""

import json

import numpy as np
import pandas as pd

from pgmjax import cli
from pgmjax.cli.preprocessing import report_warnings
from pgmjax.data import schema as S

DAY = np.datetime64("1970-01-01")


def _days(iso: str) -> int:
    return int((np.datetime64(iso) - DAY).astype(int))


def _dates(days) -> list[str]:
    return [str(DAY + int(d)) for d in days]


def _inputs(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    real = pd.DataFrame({"hire_date": _dates(rng.integers(_days("1985-01-01"), _days("2020-12-31") + 1, n)),
                         "year": rng.integers(1985, 2021, n), "dept": rng.choice(["sales", "ops", "it"], n)})
    real.to_csv(tmp_path / "real.csv", index=False)
    # A hand-written (public) schema whose ranges collapsed to 1980: every synthetic date and year lands there.
    schema = S.Schema.from_dict({
        "hire_date": {"type": "date", "bins": _dates(np.linspace(_days("1980-01-01"), _days("1981-01-01"), 11).round()),
                      "clip": True, "missing": True},
        "year": {"bins": np.linspace(1980, 1981, 11).tolist(), "clip": True, "missing": True},
        "dept": {"categories": ["sales", "ops", "it"], "other": "other"}})
    (tmp_path / "schema.json").write_text(S.dumps(schema.to_dict()))
    return ["run", "--seed", "0", "--data", str(tmp_path / "real.csv"), "--schema", str(tmp_path / "schema.json"), "-m", "mst",
            "-e", "1", "--engine-iters", "20", "--out", str(tmp_path / "synth.csv"), "-q"]


def test_run_report_stores_the_printed_warnings(tmp_path, capsys):
    args = _inputs(tmp_path)
    rep, page = tmp_path / "report.json", tmp_path / "page.html"
    assert cli.main([*args, "--report", str(rep), "--html", str(page), "--show-private"]) == 0
    out = capsys.readouterr().out
    printed = [line.split("WARNING", 1)[1].strip() for line in out.splitlines() if "WARNING" in line]
    report = json.loads(rep.read_text())
    warnings = report["warnings"]
    assert all(isinstance(w, str) for w in warnings)
    flagged = sorted(w.split(":")[0] for w in warnings)
    assert flagged == ["hire_date", "year"], warnings
    assert all("under the 50% threshold" in w and w.endswith("(NOT private)") for w in warnings)
    assert printed == warnings  # the same sentences as the summary prints (with --show-private)
    assert any("NOT private" in x and "warnings" in x for x in report["not_private"])
    html = page.read_text()
    assert html.count('class="warn">Warning: ') == len(warnings)  # the page shows the same ones


def test_run_report_without_html_has_an_empty_warnings_list(tmp_path, capsys):
    args = _inputs(tmp_path)
    rep = tmp_path / "report.json"
    assert cli.main([*args, "--report", str(rep)]) == 0
    capsys.readouterr()
    report = json.loads(rep.read_text())
    assert report["warnings"] == []  # no raw-scale comparison without --html, no private-schema warning
    assert not any("warnings" in x for x in report["not_private"])


def test_report_warnings_collects_schema_and_raw_warnings():
    private = {"private": True, "warnings": ["income: the private range 0 to 1 is narrow; ..."]}
    raw = {"warnings": ["year: the synthetic range covers 0% of the real one"]}
    assert report_warnings(private, raw) == ["income: the private range 0 to 1 is narrow; ...",
                                             "year: the synthetic range covers 0% of the real one (NOT private)"]
    flagged = report_warnings({"private": False, "warning": "the schema was read from the data"}, None)
    assert flagged == ["schema: the schema was read from the data"]
    assert report_warnings(None, None) == []
