"""``pgmjax run --config FILE``: a Synthesizer configuration as flags; the command line's own flags win."""

import json

import pytest

from pgmjax.cli.config import config_flags
from pgmjax.cli.errors import UserError
from pgmjax.cli.parser import build_parser, main
from pgmjax.data.examples import raw_table

CONFIG = {"mechanism": "mst", "epsilon": 1.0, "bins": 6, "ranges": {"joined": ["2000-01-01", "2023-12-31"]},
          "options": {"select_iters": 50}, "engine_iters": 50, "fit_options": {"tol": 1e-6}}
FLAGS = ["--mechanism", "mst", "--epsilon", "1.0", "--bins", "6", "--range", "joined=2000-01-01:2023-12-31",
         "--option", "select_iters=50", "--engine-iters", "50", "--engine-option", "tol=1e-06"]


def test_the_file_says_what_the_flags_say(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(CONFIG))
    assert config_flags(str(tmp_path / "s.json")) == FLAGS


def test_a_run_from_the_file_releases_what_the_flags_release(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw_table(1_500, seed=2).to_csv("people.csv", index=False)
    (tmp_path / "s.yaml").write_text("mechanism: mst\nepsilon: 1.0\nbins: 6\nranges:\n  joined: ['2000-01-01', '2023-12-31']\n"
                                     "options:\n  select_iters: 50\nengine_iters: 50\nfit_options:\n  tol: 1.0e-6\n")
    common = ["--data", "people.csv", "--seed", "7", "--quiet"]
    assert main(["run", "--config", "s.yaml", *common, "--out", "a.csv", "--report", "a.json"]) == 0
    assert main(["run", *FLAGS, *common, "--out", "b.csv"]) == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert json.loads((tmp_path / "a.json").read_text())["privacy"]["epsilon_given"] == 1.0
    # a flag on the command line wins over the file's value: it comes after the file's flags
    args = build_parser().parse_args(["run", *config_flags("s.yaml"), *common, "--epsilon", "0.5"])
    assert args.epsilon == 0.5 and args.mechanism == "mst"


@pytest.mark.parametrize("text, match", [
    ("mechanism: mst\nepsilonn: 1\n", r"unknown setting\(s\) \['epsilonn'\]"),
    ("mechanism: mst\nepsilon: -1\n", "epsilon must be a positive finite number"),
    ("mechanism: mst\nfit_options: {iters: 5}\n", r"fit_options has unknown field\(s\) \['iters'\]"),
    ("mechanism: [mst\n", "is not valid YAML"),
    ("- mst\n", "holds a list, not a mapping of settings"),
    ("mechanism: mst\nworkload: [[a, b]]\n", "workload must be all-2way, all-3way or a JSON file"),
])
def test_a_bad_file_is_refused_before_anything_runs(tmp_path, capsys, text, match):
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(UserError, match=match):
        config_flags(str(tmp_path / "s.yaml"))
    assert main(["run", "--config", str(tmp_path / "s.yaml"), "--data", "nowhere.csv"]) == 2
    assert "pgmjax run: error: --config" in capsys.readouterr().err


def test_a_missing_file_is_named():
    with pytest.raises(UserError, match="--config: no such file: absent.yaml"):
        config_flags("absent.yaml")
