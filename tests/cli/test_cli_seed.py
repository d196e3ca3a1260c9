"""The run's seed reproduces its noise, so it is secret: drawn from the OS's entropy unless given, recorded nowhere.

Before, ``pgmjax run`` and ``pgmjax schema --epsilon`` defaulted to seed 0 and the report recorded it: anyone with
the release and the report could regenerate the noise and take it off the noisy answers.
"""

import json
import os
import stat

import numpy as np

from conftest import interrupted_at_fit

import pgmjax as pj
from pgmjax import cli
from pgmjax.cli import checkpoints
from pgmjax.mechanisms import adaptive_iterative

DOMAIN = {"a": 3, "b": 4, "c": 2, "d": 3}


def _files(tmp_path, n=300):
    data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2, 3], (n, 4)), DOMAIN)
    data.df.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "t-domain.json").write_text(json.dumps(DOMAIN))
    return ["run", "--data", str(tmp_path / "t.csv"), "--domain", str(tmp_path / "t-domain.json"), "--quiet"]


def _run(base, tmp_path, name, *extra):
    out, report = tmp_path / f"{name}.csv", tmp_path / f"{name}.json"
    assert cli.main([*base, "-m", "mst", "--epsilon", "1", "--engine-iters", "30", "--out", str(out),
                     "--report", str(report), *extra]) == 0
    return out.read_text(), json.loads(report.read_text())


def test_an_unset_seed_is_drawn_and_no_output_records_a_seed(tmp_path):
    base = _files(tmp_path)
    first, report = _run(base, tmp_path, "one")
    second, _ = _run(base, tmp_path, "two")
    assert first != second  # fresh noise each run (equal only with probability ~0)
    assert report["seed"] == "drawn from the operating system's entropy (not recorded)"
    given, report = _run(base, tmp_path, "three", "--seed", "12345")
    again, _ = _run(base, tmp_path, "four", "--seed", "12345")
    assert given == again  # a given seed reproduces the run
    assert "12345" not in json.dumps(report) and report["seed"].startswith("given by --seed (not recorded")


def test_a_drawn_seed_is_kept_with_the_checkpoint_so_the_same_command_resumes(tmp_path, monkeypatch, capsys):
    base = _files(tmp_path)
    command = [*base, "-m", "aim", "--epsilon", "1", "--rounds", "80", "--engine-iters", "30", "--max-model-mb", "1"]
    out = str(tmp_path / "resumed.csv")
    real, modes = adaptive_iterative.estimate, []
    interrupted_at_fit(monkeypatch, adaptive_iterative, 3)
    assert cli.main([*command, "--out", out]) == 130
    seed_file = os.path.join(out + checkpoints.AUTO_SUFFIX, checkpoints.SEED_FILE)
    modes.append(stat.S_IMODE(os.stat(seed_file).st_mode))
    modes.append(stat.S_IMODE(os.stat(os.path.dirname(seed_file)).st_mode))
    assert modes == [0o600, 0o700]
    capsys.readouterr()
    monkeypatch.setattr(adaptive_iterative, "estimate", real)
    loud = [a for a in command if a != "--quiet"]  # the status lines say it resumed
    assert cli.main([*loud, "--out", out, "--report", str(tmp_path / "r.json")]) == 0  # no --seed: the kept one
    assert "resumed from checkpoint" in capsys.readouterr().err
    assert not os.path.exists(out + checkpoints.AUTO_SUFFIX)  # removed with its seed once the run completed
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["seed"] == "the one kept with the checkpoint resumed (not recorded)"


def test_a_private_schema_draws_its_noise_unless_given_a_seed(tmp_path):
    rng = np.random.default_rng(1)
    (tmp_path / "raw.csv").write_text("age,city\n" + "\n".join(f"{rng.integers(18, 90)},{rng.choice(['a', 'b', 'c'])}"
                                                               for _ in range(400)) + "\n")
    schemas = []
    for name, extra in (("s1", []), ("s2", []), ("s3", ["--seed", "7"]), ("s4", ["--seed", "7"])):
        assert cli.main(["schema", "--data", str(tmp_path / "raw.csv"), "--epsilon", "1", "--range", "age=0:120",
                         "--out", str(tmp_path / f"{name}.json"), *extra]) == 0
        schemas.append((tmp_path / f"{name}.json").read_text())
    assert schemas[2] == schemas[3]
    assert schemas[0] != schemas[1] or schemas[0] != schemas[2]  # drawn noise: not the seeded run's every time
