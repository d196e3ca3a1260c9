"""A command line a data team can trust (issue 42): no file lost (existing outputs refused without
``--overwrite``, inputs never replaced, atomic writes), the data folder found from ``notebooks/``, the
input's column order kept, one-line usage errors. In-process (``cli.main``), a tiny table, one short run."""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pgmjax import cli
from pgmjax.cli import outputs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 400
# The CSV's column order differs from the domain file's: the output must follow the CSV.
CSV_ORDER = ["b", "c", "a"]
DOMAIN = {"a": 3, "b": 2, "c": 4}


def main(args, capsys):
    code = cli.main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """One short run: ``t.csv`` (columns b, c, a), its domain (a, b, c), a saved model and its synthetic table."""
    d = tmp_path_factory.mktemp("safety")
    rng = np.random.default_rng(0)
    pd.DataFrame({a: rng.integers(0, DOMAIN[a], N) for a in CSV_ORDER}).to_csv(d / "t.csv", index=False)
    (d / "dom.json").write_text(json.dumps(DOMAIN))
    old = os.getcwd()
    os.chdir(d)
    try:
        code = cli.main(["run", "--seed", "0", "--data", "t.csv", "--domain", "dom.json", "-m", "mst", "-e", "1", "--quiet",
                         "--engine-iters", "20", "--out", "s.csv", "--save-model", "m"])
    finally:
        os.chdir(old)
    assert code == 0
    return d


@pytest.fixture
def here(fitted, monkeypatch):
    monkeypatch.chdir(fitted)
    return fitted


def _only_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# ---------------------------------------------------------------------------------------------------
# 1. Never lose a file
# ---------------------------------------------------------------------------------------------------


def test_sample_refuses_to_overwrite_the_raw_table(here, capsys):
    before = (here / "t.csv").read_bytes()
    code, _, err = main(["sample", "--model", "m", "--out", "t.csv"], capsys)
    line = _only_line(err)
    assert code == 2 and "--out t.csv exists" in line and "--overwrite" in line, err
    assert (here / "t.csv").read_bytes() == before


@pytest.mark.parametrize("flag,name", [("--out", "s.csv"), ("--report", "s.csv"), ("--html", "s.csv"),
                                       ("--save-model", "m")])
def test_run_refuses_every_existing_output_before_reading(here, capsys, flag, name):
    before = (here / "s.csv").read_bytes()
    code, _, err = main(["run", "--seed", "0", "--data", "t.csv", "--domain", "dom.json", "-m", "mst", "-e", "1", "--quiet",
                         flag, name], capsys)
    line = _only_line(err)
    assert code == 2 and f"{flag} {name}" in line and "--overwrite" in line and "nothing was run" in line, err
    assert (here / "s.csv").read_bytes() == before


def test_schema_and_report_refuse_existing_outputs(here, capsys):
    (here / "page.html").write_text("keep")
    code, _, err = main(["report", "--real", "t.csv", "--synthetic", "s.csv", "--html", "page.html"], capsys)
    assert code == 2 and "--html page.html exists" in _only_line(err) and "--overwrite" in err
    code, _, err = main(["schema", "--seed", "0", "--data", "t.csv", "--out", "page.html"], capsys)
    assert code == 2 and "--out page.html exists" in _only_line(err) and "--overwrite" in err
    assert (here / "page.html").read_text() == "keep"


@pytest.mark.parametrize("args", [
    ["run", "--seed", "0", "--data", "t.csv", "--domain", "dom.json", "-m", "mst", "-e", "1", "--out", "./t.csv"],
    ["schema", "--seed", "0", "--data", "t.csv", "--out", "t.csv"],
    ["report", "--real", "t.csv", "--synthetic", "s.csv", "--html", "s.csv"],
    ["run", "--seed", "0", "--data", "t.csv", "--domain", "dom.json", "-m", "mst", "-e", "1", "--report", "dom.json"],
])
def test_an_input_is_refused_even_with_overwrite(here, capsys, args):
    before = {p: (here / p).read_bytes() for p in ("t.csv", "s.csv", "dom.json")}
    code, _, err = main([*args, "--overwrite"], capsys)
    assert code == 2 and "is the input file of" in _only_line(err), err
    assert {p: (here / p).read_bytes() for p in before} == before


def test_overwrite_replaces_atomically(here, capsys):
    (here / "more.csv").write_text("old\n")
    code, _, err = main(["sample", "--model", "m", "--records", "7", "--out", "more.csv", "--overwrite"], capsys)
    assert code == 0, err
    assert len(pd.read_csv(here / "more.csv")) == 7
    assert not [f for f in os.listdir(here) if f.endswith(".tmp") or ".pgmjax-tmp" in f]


def test_an_interrupted_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("precious\n")
    with pytest.raises(KeyboardInterrupt):
        with outputs.atomic_file(str(target), overwrite=True) as f:
            f.write("partial")
            raise KeyboardInterrupt
    assert target.read_text() == "precious\n"
    assert os.listdir(tmp_path) == ["out.csv"]


# ---------------------------------------------------------------------------------------------------
# 2. Notebooks open from notebooks/
# ---------------------------------------------------------------------------------------------------


def test_datasets_load_from_the_notebooks_folder():
    shared = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "titanic"))
    if not os.path.isdir(shared):
        pytest.skip(f"the shared data is absent ({shared} not found): nothing to load")
    env = {k: v for k, v in os.environ.items() if k != "PGMJAX_DATA"}
    env["JAX_PLATFORMS"] = "cpu"
    snippet = "import pgmjax as pj; print(len(pj.datasets.load('titanic')))"
    done = subprocess.run([sys.executable, "-c", snippet], cwd=os.path.join(REPO, "notebooks"), env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip().splitlines()[-1]) > 0


# ---------------------------------------------------------------------------------------------------
# 3. Output columns in the input's order
# ---------------------------------------------------------------------------------------------------


def test_integer_coded_output_keeps_the_input_column_order(here):
    assert list(pd.read_csv(here / "s.csv").columns) == CSV_ORDER


# ---------------------------------------------------------------------------------------------------
# 4. Usage errors in one line
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args,prog", [(["run", "--seed", "0", "--data", "x.csv"], "pgmjax run"), (["bogus"], "pgmjax"),
                                       (["sample", "--records", "0", "--model", "m"], "pgmjax sample")])
def test_usage_errors_are_one_line(capsys, args, prog):
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    line = _only_line(capsys.readouterr().err)
    assert exit_.value.code == 2
    assert line.startswith(f"{prog}: error: ") and line.endswith(f"(see {prog} --help)"), line
