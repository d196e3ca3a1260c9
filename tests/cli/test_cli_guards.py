"""Guards of ``pgmjax run``: no output over an input, only privacy-safe numbers printed unless
``--show-private``, no private value or line in an error, epsilon printed as given, no near-empty table
from a tiny budget. In-process (``cli.main``), tiny tables, a few engine iterations."""

import dataclasses
import doctest
import functools
import json
import os

import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax import cli
from pgmjax import schema as S
from pgmjax.cli import guards as cli_guards
from pgmjax.data.dataset import DataValueError
from pgmjax.mechanisms import registry

N = 1234  # the private record count: printed only with --show-private
DOMAIN = {"x0": 3, "x1": 4, "x2": 2}
SECRET = 987654  # a private value planted in a bad file: never echoed without --show-private


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({a: rng.integers(0, n, N) for a, n in DOMAIN.items()})
    frame.to_csv("t.csv", index=False)
    (tmp_path / "dom.json").write_text(json.dumps(DOMAIN))
    bad = frame.copy()
    bad.loc[41, "x1"] = SECRET
    bad.to_csv("bad.csv", index=False)
    return tmp_path


def main(args, capsys):
    code = cli.main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


BASE = ["run", "--seed", "0", "--domain", "dom.json", "-m", "mwem", "-e", "1", "--quiet"]


# ---------------------------------------------------------------------------------------------------
# Outputs never overwrite inputs (checked before anything runs)
# ---------------------------------------------------------------------------------------------------


def _clash_cases(d):
    os.symlink("t.csv", "link.csv")
    os.link("t.csv", "hard.csv")
    os.makedirs("model-dir")
    return [
        (["--data", "t.csv", "--out", "t.csv"], "--out t.csv is the input file of --data"),
        (["--data", "t.csv", "--out", "./t.csv"], "--out ./t.csv is the input file of --data"),
        (["--data", "t.csv", "--out", str(d / "t.csv")], "is the input file of --data"),
        (["--data", "link.csv", "--out", "t.csv"], "is the input file of --data"),  # the data read through a link
        (["--data", "t.csv", "--out", "link.csv"], "is the input file of --data"),  # written through a link
        (["--data", "t.csv", "--out", "hard.csv"], "is the input file of --data"),  # a hard link: the same inode
        (["--data", "t.csv", "--out", "dom.json"], "--out dom.json is the input file of --domain"),
        (["--data", "t.csv", "--report", "t.csv"], "--report t.csv is the input file of --data"),
        (["--data", "t.csv", "--out", "s.csv", "--report", "s.csv"], "--out and --report name the same file"),
        (["--data", "model-dir/model.json", "--save-model", "model-dir"], "--save-model model-dir is the input file of --data"),
        (["--data", "t.csv", "--workload", "dom.json", "--out", "dom.json"], "is the input file of --domain"),
    ]


def test_an_output_over_an_input_is_refused_before_anything_runs(files, capsys):
    import shutil

    cases = _clash_cases(files)
    shutil.copy("t.csv", "model-dir/model.json")
    before = {p: open(p, "rb").read() for p in ("t.csv", "dom.json", "model-dir/model.json")}
    for args, expected in cases:
        code, out, err = main([*BASE, *args], capsys)
        assert code == 2 and expected in err and "(nothing was run)" in err, (args, err)
        assert out == ""  # no summary: nothing ran
    for p, blob in before.items():
        assert open(p, "rb").read() == blob  # untouched
    assert not os.path.exists("s.csv")


def test_schema_command_refuses_to_write_over_its_data(files, capsys):
    before = open("t.csv", "rb").read()
    code, _, err = main(["schema", "--seed", "0", "--data", "t.csv", "--out", "t.csv"], capsys)
    assert code == 2 and "--out t.csv is the input file of --data" in err
    assert open("t.csv", "rb").read() == before


def test_docstring_examples_run():
    from pgmjax.data import dataset

    runner = doctest.DocTestRunner()
    for t in doctest.DocTestFinder().find(cli_guards, globs=vars(cli_guards).copy()):
        runner.run(t)
    globs = dict(vars(dataset), np=np)
    for obj in (dataset.DataValueError, dataset.unreadable_csv):
        for t in doctest.DocTestFinder().find(obj, globs=globs):
            runner.run(t)
    assert runner.failures == 0 and runner.tries >= 9


# ---------------------------------------------------------------------------------------------------
# Errors never echo a private value or its line
# ---------------------------------------------------------------------------------------------------


def test_a_bad_value_names_the_column_not_the_value_or_line(files, capsys):
    code, _, err = main([*BASE, "--data", "bad.csv"], capsys)
    assert code == 2
    assert "column 'x1' has a value outside [0, 4)" in err and "--show-private" in err
    assert str(SECRET) not in err and "line" not in err.replace("its line", "") and "row" not in err
    assert "bad value(s)" not in err  # how many records are bad is data too
    assert "give a --schema" not in err  # the raw-values hint is for non-integer values only
    code, _, err = main([*BASE, "--data", "bad.csv", "--show-private"], capsys)
    assert code == 2 and f"column 'x1' line 43 has value {SECRET}" in err  # row 41 + header + 1


def test_raw_values_and_unparsable_files_are_not_echoed(files, capsys):
    (files / "schema.json").write_text(json.dumps({"x0": {"categories": ["0", "1", "2"]}, "x1": {"bins": [0, 2, 4]},
                                                   "x2": {"categories": ["0", "1"]}}))
    raw = pd.read_csv("t.csv").astype(str)
    for column, secret in [("x0", "Ms Secret"), ("x1", "987654"), ("x1", "not-a-number-secret")]:
        raw.assign(**{column: raw[column].where(raw.index != 17, secret)}).to_csv("raw-bad.csv", index=False)
        args = ["run", "--seed", "0", "--data", "raw-bad.csv", "--schema", "schema.json", "-m", "mwem", "-e", "1", "--quiet"]
        code, _, err = main(args, capsys)
        assert code == 2 and f"column '{column}'" in err and secret not in err and "line 19" not in err, err
        code, _, err = main([*args, "--show-private"], capsys)
        assert code == 2 and "line 19" in err and secret.split("-")[0] in err, err
    # An unclosed quote: pandas' message quotes its row ("EOF inside string starting at row 30").
    text = open("t.csv").read().splitlines()
    text[31] = '"1,2,1'
    open("broken.csv", "w").write("\n".join(text) + "\n")
    code, _, err = main([*BASE, "--data", "broken.csv"], capsys)
    assert code == 2 and "could not be read as CSV (ParserError" in err and "31" not in err, err
    code, _, err = main([*BASE, "--data", "broken.csv", "--show-private"], capsys)
    assert code == 2 and "row 31" in err, err


def test_library_errors_carry_a_public_message():
    dom = pj.Domain(DOMAIN)
    with pytest.raises(DataValueError, match=f"row 2 has value {SECRET}") as info:
        pj.Dataset(np.array([[0, 0, 0], [1, 1, 1], [2, SECRET, 0]]), dom)
    assert info.value.public == "Dataset: column 'x1' has a value outside [0, 4)"
    schema = S.Schema.from_dict({"c": {"categories": ["a", "b"]}})
    with pytest.raises(S.SchemaError, match="value 'zz-secret'") as info:
        schema.encode(pd.DataFrame({"c": ["a", "zz-secret"]}))
    assert "zz-secret" not in info.value.public and "row" not in info.value.public
    assert isinstance(info.value, DataValueError)


# ---------------------------------------------------------------------------------------------------
# Runs: privacy-safe summary, epsilon as given, tiny budgets
# ---------------------------------------------------------------------------------------------------

RUN = ["run", "--seed", "0", "--data", "t.csv", "--domain", "dom.json", "-m", "mwem", "--rounds", "1", "--engine-iters", "10",
       "--records", "500", "--workload", "all-2way"]


def test_summary_prints_only_privacy_safe_numbers_and_epsilon_as_given(files, capsys):
    # zCDP (Gaussian noise) at epsilon 1e6: cdp_eps(cdp_rho(1e6, 1e-9)) is 997103, the budget given is 1e6.
    args = [*RUN, "-e", "1e6", "--delta", "1e-9", "--option", "noise=gaussian", "--out", "s.csv", "--report", "r.json"]
    code, out, err = main(args, capsys)  # not --quiet: the status lines too
    assert code == 0, err
    assert "pgmjax run: mwem on t.csv: 3 attributes" in out and "pgmjax run: read 3 attributes" in err
    # The model's estimated total is a noisy (private) estimate: at epsilon 1e6 it is the count itself, allowed.
    printed = [line for line in (out + err).splitlines() if "estimated total" not in line]
    assert printed and not any(f"{N:,}" in line or str(N) in line for line in printed), printed
    assert "errors against the input withheld" in out and "error 0." not in out
    assert "eps=1e6" in out and "997103" not in out
    report = json.loads(open("r.json").read())
    assert report["privacy"]["epsilon_budget"] == 1e6 and report["privacy"]["epsilon_spent"] == 1e6
    assert report["input"]["records"] == N and "input.records" in report["not_private"]  # flagged, for the data holder
    assert len(pd.read_csv("s.csv")) == 500

    code, out, err = main([*RUN, "-e", "1", "--quiet", "--show-private"], capsys)
    assert code == 0, err
    assert f"{N:,} records (private" in out and "error 0." in out and "NOT private" in out


def _tiny_total(monkeypatch, total):
    """Make the mechanism's model estimate ``total`` records (as a tiny budget does), deterministically."""
    entry = registry.MECHANISMS["mwem"]

    @functools.wraps(entry.function)  # the same signature: the command line reads the options from it
    def run(*args, **kwargs):
        result = entry.function(*args, **kwargs)
        m = result.model
        result.model, result.synthetic = pj.GraphicalModel(m.plan, m.theta, total), None
        return result

    monkeypatch.setattr(registry, "MECHANISMS", {**registry.MECHANISMS, "mwem": dataclasses.replace(entry, function=run)})


def test_a_tiny_estimated_total_is_refused_with_a_suggestion(files, capsys, monkeypatch):
    _tiny_total(monkeypatch, 1.0)
    args = ["run", "--seed", "0", "--data", "t.csv", "--domain", "dom.json", "-m", "mwem", "--rounds", "1", "--engine-iters", "10",
            "-e", "1e-4", "--quiet", "--out", "s.csv", "--report", "r.json", "--save-model", "m"]
    code, out, err = main(args, capsys)
    assert code == 1 and "the model estimates 1 record" in err and "--records N" in err, err
    assert not any(os.path.exists(p) for p in ("s.csv", "r.json", "m"))  # nothing written
    code, out, err = main([*args, "--records", "50"], capsys)  # the suggestion works
    assert code == 0, err
    assert len(pd.read_csv("s.csv")) == 50


def test_too_few_records_threshold():
    assert cli_guards.too_few_records(cli_guards.MIN_RECORDS, 1e-4) is None
    assert "estimates 9 records" in cli_guards.too_few_records(cli_guards.MIN_RECORDS - 1, 1e-4)
    assert cli_guards.number(1e6) == "1e6" and cli_guards.number(1e-9) == "1e-9" and cli_guards.number(2.5e-3) == "0.0025"
