"""``pgmjax run --engine polars|dask`` (issue 48): the same synthetic data and ledger as the in-memory run, from
CSV and Parquet; the flags' misuse refused before anything runs. In process (``cli.main``), tiny settings."""

import json

import numpy as np
import pandas as pd
import pytest

from pgmjax import cli

pytest.importorskip("polars")
pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

DOMAIN = {"a": 3, "b": 4, "c": 2, "d": 5}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_engines")
    rng = np.random.default_rng(1)
    cols = [rng.integers(0, DOMAIN["a"], 800)]
    for name in list(DOMAIN)[1:]:
        cols.append(np.where(rng.random(800) < 0.6, cols[-1] % DOMAIN[name], rng.integers(0, DOMAIN[name], 800)))
    frame = pd.DataFrame(np.stack(cols, 1), columns=list(DOMAIN))[["d", "a", "c", "b"]]  # not the domain's order
    frame.to_csv(d / "t.csv", index=False)
    frame.to_parquet(d / "t.parquet")
    (d / "domain.json").write_text(json.dumps(DOMAIN))
    return d


def _run(files, data, engine, tag, *extra):
    out, report = files / f"out-{tag}.csv", files / f"report-{tag}.json"
    args = ["run", "--seed", "0", "--data", str(files / data), "--domain", str(files / "domain.json"), "-m", "mst", "-e", "1",
            "--records", "200", "--out", str(out), "--report", str(report), "--overwrite", "--quiet", "--engine", engine,
            "--seed", "0", *extra]  # one seed for every engine: their releases are compared
    assert cli.main(args) == 0
    return out.read_text(), json.loads(report.read_text())


def test_engines_release_what_memory_releases(files):
    want_csv, want = _run(files, "t.csv", "memory", "memory")
    assert want_csv.splitlines()[0] == "d,a,c,b"  # the input's column order
    for data, engine in [("t.csv", "polars"), ("t.parquet", "polars"), ("t.parquet", "dask")]:
        got_csv, got = _run(files, data, engine, f"{engine}-{data}")
        assert got_csv == want_csv, (engine, data)
        assert got["ledger"] == want["ledger"], (engine, data)
        assert got["input"]["records"] == want["input"]["records"] == 800


@pytest.mark.parametrize("data, domain, extra, expected", [
    ("t.parquet", True, ["--engine", "polars", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler ADDRESS applies to --engine dask"),
    ("nowhere/*.parquet", True, ["--engine", "polars"], "file, folder or glob not found"),
    ("t.parquet", False, ["--engine", "dask"], "a raw table (--schema, or a private schema derived from the data) is read "
                                               "from a CSV file"),
    ("t.csv", True, ["--engine", "polars", "-m", "rr"], "rr_synthetic randomizes every record"),
])
def test_engine_flags_misuse(files, capsys, data, domain, extra, expected):
    args = ["run", "--seed", "0", "--data", str(files / data), "-m", "mst", "-e", "1", "--quiet", *extra]
    if domain:
        args += ["--domain", str(files / "domain.json")]
    assert cli.main(args) == 2
    assert expected in capsys.readouterr().err


def test_bad_code_public_message(files, capsys):
    bad = pd.read_parquet(files / "t.parquet")
    bad.loc[3, "b"] = 11
    bad.to_parquet(files / "bad.parquet")
    args = ["run", "--seed", "0", "--data", str(files / "bad.parquet"), "--domain", str(files / "domain.json"), "-m", "mst", "-e", "1",
            "--quiet", "--engine", "polars"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "column 'b' has a value outside [0, 4)" in err and "11" not in err.replace(str(files), "")  # tmp names hold digits


def _raw_run(files, engine, *extra):
    out, report = files / f"raw-out-{engine}.csv", files / f"raw-report-{engine}.json"
    args = ["run", "--seed", "0", "--data", str(files / "raw.csv"), "-m", "mst", "-e", "2", "--records", "150", "--out", str(out),
            "--report", str(report), "--overwrite", "--quiet", "--engine", engine, "--seed", "0", *extra]
    assert cli.main(args) == 0
    return out.read_text(), json.loads(report.read_text())


def test_raw_table_on_engines_releases_what_memory_releases(files):
    """A raw CSV (nulls, unreadable fields, dates, rare categories) with the automatic private schema, then with a
    declared schema: the same synthetic records, preprocessing ledger and mechanism ledger on every engine."""
    rng = np.random.default_rng(2)
    n = 600
    raw = pd.DataFrame({
        "age": rng.integers(18, 91, n).astype(str), "city": rng.choice(["Paris", "Lyon", "Nice"], n, p=[.5, .3, .2]),
        "joined": (np.datetime64("2000-01-01") + rng.integers(0, 7000, n)).astype(str),
        "income": np.round(rng.lognormal(10, 1, n), 1).astype(str)})
    raw.loc[:9, "age"] = ["", "n/a", "", "1e400", "", "", "x", "", "", ""]
    raw.loc[:3, "city"] = ["Rare", "", "Rare", "Zz"]
    raw.loc[5:7, "joined"] = ["2020-02-30", "", "2001-03-04 10:00"]
    raw.to_csv(files / "raw.csv", index=False)
    want_csv, want = _raw_run(files, "memory")
    assert want["preprocessing"]["private"] and want_csv.splitlines()[0] == "age,city,joined,income"
    for engine in ("polars", "dask"):
        got_csv, got = _raw_run(files, engine)
        assert got_csv == want_csv, engine
        assert got["preprocessing"]["ledger"] == want["preprocessing"]["ledger"], engine
        assert got["ledger"] == want["ledger"], engine
    (files / "raw-schema.json").write_text(json.dumps({
        "age": {"bins": [0, 30, 60, 100], "missing": True, "clip": True}, "city": {"categories": ["Paris", "Lyon"],
                                                                                "other": "other"}}))
    want_csv, want = _raw_run(files, "memory", "--schema", str(files / "raw-schema.json"), "--ignore-extra-columns")
    got_csv, got = _raw_run(files, "polars", "--schema", str(files / "raw-schema.json"), "--ignore-extra-columns")
    assert got_csv == want_csv and got["ledger"] == want["ledger"]
