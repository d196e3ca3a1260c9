"""``pgmjax run --public``: a public table read as --data is (integer codes, raw values through the given or the
privately derived schema), its marginals in the mechanism's fits at no cost, listed by the ledger and the report;
refused, before anything is read, for a mechanism that takes no public data."""

import json

import numpy as np
import pandas as pd
import pytest

from pgmjax import cli

DOMAIN = {"a": 3, "b": 2, "c": 2}


def coded(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.8, a % 2, rng.integers(0, 2, n))
    c = np.where(rng.random(n) < 0.8, b, rng.integers(0, 2, n))
    return pd.DataFrame({"a": a, "b": b, "c": c})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("public")
    coded(2000, 0).to_csv(d / "private.csv", index=False)
    coded(1000, 1).to_csv(d / "public.csv", index=False)
    (d / "domain.json").write_text(json.dumps(DOMAIN))
    words = {"a": ["x", "y", "z"], "b": ["no", "yes"], "c": ["lo", "hi"]}
    for name in ("private", "public"):
        frame = pd.read_csv(d / f"{name}.csv")
        pd.DataFrame({k: np.asarray(v)[frame[k]] for k, v in words.items()}).to_csv(d / f"{name}_raw.csv", index=False)
    (d / "schema.json").write_text(json.dumps({k: {"categories": v} for k, v in words.items()}))
    return d


def test_mst_takes_the_public_tables_marginals_and_the_report_lists_them(files, tmp_path, capsys):
    report = tmp_path / "r.json"
    code = cli.main(["run", "--seed", "0", "--data", str(files / "private.csv"), "--domain", str(files / "domain.json"),
                     "--public", str(files / "public.csv"), "--public-stddev", "20", "-m", "mst", "-e", "1",
                     "--engine-iters", "200", "--report", str(report), "--quiet"])
    assert code == 0, capsys.readouterr().err
    entry = json.loads(report.read_text())
    assert entry["input"]["public"] == str(files / "public.csv")
    assert entry["public"] and entry["ledger_by_mechanism"]["public"] == len(entry["public"])
    assert all(e["epsilon"] == 0 or e.get("cost", 0) == 0 for e in entry["ledger"] if e["mechanism"] == "public")
    assert f"{len(entry['public'])} marginals taken from public.csv at no privacy cost" in capsys.readouterr().out


@pytest.mark.parametrize("schema", ["given", "private"])
def test_raw_public_values_go_through_the_runs_schema(files, tmp_path, capsys, schema):
    report = tmp_path / "r.json"
    extra = ["--schema", str(files / "schema.json")] if schema == "given" else []
    code = cli.main(["run", "--seed", "1", "--data", str(files / "private_raw.csv"), *extra,
                     "--public", str(files / "public_raw.csv"), "-m", "mst", "-e", "2", "--engine-iters", "200",
                     "--report", str(report), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(report.read_text())["public"]


@pytest.mark.parametrize("args,message", [
    (["-m", "privbayes", "--public", "public.csv"], "privbayes takes no public data; mwem, mst, aim, tree_aim do"),
    (["-m", "mst", "--public", "nowhere.csv"], "--public: file not found"),
    (["-m", "mst", "--public", "public.csv", "--public-stddev", "wide"], "expected 'sampling' or a positive number"),
])
def test_bad_public_arguments_are_refused_before_anything_is_read(files, capsys, args, message):
    args = [str(files / a) if a.endswith(".csv") else a for a in args]
    try:  # a flag's own type check is argparse's: it exits 2
        code = cli.main(["run", "--data", str(files / "private.csv"), "--domain", str(files / "domain.json"), "-e", "1", *args])
    except SystemExit as e:
        code = e.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_public_table_missing_a_column_is_named(files, tmp_path, capsys):
    pd.read_csv(files / "public_raw.csv")[["a", "b"]].to_csv(tmp_path / "p.csv", index=False)
    code = cli.main(["run", "--data", str(files / "private_raw.csv"), "--schema", str(files / "schema.json"),
                     "--public", str(tmp_path / "p.csv"), "-m", "mst", "-e", "1", "--quiet"])
    assert code == 2
    assert "no column(s) ['c']" in capsys.readouterr().err
