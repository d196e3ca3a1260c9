"""Issue 57, item 7: nothing lost. Long runs (AIM, MWEM) checkpoint their rounds and resume them; Ctrl-C keeps what
was measured; AIM's time left converges.

* A run interrupted after k rounds (Ctrl-C in a progress callback, or inside a round's fit) and resumed from its
  checkpoint releases what the uninterrupted run releases for the same key: the measurements, the ledger (its
  spend equal to the budget, nothing counted twice), the log and the model's answers.
* A checkpoint of another run (data, key, budget, settings) is refused before anything is spent, naming what
  differs and no digest; a tampered ledger (a cost below what its noise costs) is refused.
* The checkpoint is the user's only: folders 0700, files 0600.
* The time left of :class:`pgmjax.mechanisms.progress.Progress` follows the recent rounds and reaches 0.
"""

import json
import os
import stat

import jax
import numpy as np
import pytest

from conftest import interrupted_at_fit

import pgmjax as pj
from pgmjax import cli
from pgmjax.mechanisms import aim, mwem
from pgmjax.mechanisms import adaptive_iterative
from pgmjax.mechanisms.checkpoint import Checkpoint, RunInterrupted
from pgmjax.mechanisms.multiplicative_weights import rounds as mwem_rounds
from pgmjax.mechanisms.progress import Progress
from pgmjax.privacy import Accountant

DOMAIN = {"a": 3, "b": 4, "c": 2, "d": 3}
AIM = dict(rounds=80, max_model_mb=1.0, engine_iters=30)  # 7 rounds on this table with key 1
MWEM = dict(rounds=3, engine_iters=20, original=False)  # Laplace: pure epsilon-DP


def _data(seed: int = 0, n: int = 400) -> pj.Dataset:
    return pj.Dataset(np.random.default_rng(seed).integers(0, [3, 4, 2, 3], (n, 4)), DOMAIN)


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def aim_full(data):
    return aim(data, 1.0, key=jax.random.key(1), **AIM)


def _same_release(res, full):
    """Measurements, ledger, log and the model's answers equal (bit for bit)."""
    assert [m.clique for m in res.measurements] == [m.clique for m in full.measurements]
    assert all(np.array_equal(a.y, b.y) and np.array_equal(a.stddev, b.stddev) for a, b in zip(res.measurements, full.measurements))
    assert res.ledger == full.ledger and res.accountant.spent == full.accountant.spent == res.accountant.budget
    assert res.info.log == full.info.log
    for c in [("a", "b"), ("c", "d"), ("a", "d")]:
        assert np.array_equal(res.model.marginal(c), full.model.marginal(c))
    assert res.synthetic.df.equals(full.synthetic.df)


def _stop_at(round_: int):
    def progress(info):
        if info["round"] == round_:
            raise KeyboardInterrupt
    return progress


def test_aim_interrupted_and_resumed_equals_the_uninterrupted_run(data, aim_full, tmp_path):
    assert aim_full.info.rounds_run >= 5
    folder = tmp_path / "aim.ckpt"
    with pytest.raises(RunInterrupted) as err:
        aim(data, 1.0, key=jax.random.key(1), progress=_stop_at(3), checkpoint=str(folder), **AIM)
    assert err.value.round == 3 and err.value.checkpoint == str(folder)
    assert "after round 3" in str(err.value) and "holds rounds 1..3" in str(err.value) and "to resume" in str(err.value)
    # only the user can read it: the folder 0700, every file 0600
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    files = [os.path.join(r, f) for r, _, fs in os.walk(folder) for f in fs]
    assert files and all(stat.S_IMODE(os.stat(f).st_mode) == 0o600 for f in files)
    assert all(stat.S_IMODE(os.stat(r).st_mode) == 0o700 for r, _, _ in os.walk(folder))
    res = aim(data, 1.0, key=jax.random.key(1), checkpoint=str(folder), **AIM)
    _same_release(res, aim_full)
    assert res.info.resumed_from == 3 and aim_full.info.resumed_from is None
    # run again: every round is in the checkpoint, nothing is measured or spent again
    again = aim(data, 1.0, key=jax.random.key(1), checkpoint=Checkpoint(str(folder)), **AIM)
    assert again.ledger == aim_full.ledger and again.accountant.spent == again.accountant.budget


def test_aim_interrupted_inside_a_round_keeps_the_last_complete_round(data, aim_full, tmp_path, monkeypatch):
    """Ctrl-C in round 4's fit (its selection and measurement drawn, not kept); save="interrupt" writes only then."""
    folder = tmp_path / "aim.ckpt"
    fits, real = [], adaptive_iterative.estimate

    def estimate(*a, **k):
        fits.append(1)
        if len(fits) == 5:  # the first fit, then rounds 1-3, then round 4's
            raise KeyboardInterrupt
        assert not folder.exists()  # save="interrupt": nothing written while the run goes well
        return real(*a, **k)

    monkeypatch.setattr(adaptive_iterative, "estimate", estimate)
    with pytest.raises(RunInterrupted, match="after round 3"):
        aim(data, 1.0, key=jax.random.key(1), checkpoint=Checkpoint(str(folder), save="interrupt"), **AIM)
    monkeypatch.setattr(adaptive_iterative, "estimate", real)
    res = aim(data, 1.0, key=jax.random.key(1), checkpoint=Checkpoint(str(folder), save="interrupt"), **AIM)
    _same_release(res, aim_full)


def test_a_checkpoint_of_another_run_is_refused_before_anything_is_spent(data, tmp_path, monkeypatch):
    folder = str(tmp_path / "aim.ckpt")
    with pytest.raises(RunInterrupted):
        aim(data, 1.0, key=jax.random.key(1), progress=_stop_at(2), checkpoint=folder, **AIM)
    measured = []
    monkeypatch.setattr(Accountant, "measure_many", lambda *a, **k: measured.append(a) or pytest.fail("measured"))
    cases = [
        (dict(epsilon=2.0), r"epsilon \(checkpoint 1\.0, this run 2\.0\)"),
        (dict(key=jax.random.key(2)), r"the key \(another seed\)"),
        (dict(data=_data(seed=5)), r"the data \(not the same records"),
        (dict(engine_iters=31), r"engine_iters \(checkpoint 30, this run 31\)"),
        (dict(workload=[("a", "b")]), r"candidates \(checkpoint"),
    ]
    for change, message in cases:
        args = {"data": data, "epsilon": 1.0, "key": jax.random.key(1), **AIM, **change}
        with pytest.raises(ValueError, match=r"^aim: checkpoint .* is of another run: .*" + message) as err:
            aim(args.pop("data"), args.pop("epsilon"), checkpoint=folder, **args)
        # the digests stay in the checkpoint: the message names what differs, never a digest of the data
        assert not any(len(w) >= 32 and all(ch in "0123456789abcdef" for ch in w) for w in str(err.value).split())
    assert not measured
    with pytest.raises(ValueError, match=r"mwem: checkpoint .* is of another run: the mechanism \(checkpoint 'aim'"):
        mwem(data, 1.0, key=jax.random.key(1), checkpoint=folder, **MWEM)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        aim(data, 1.0, key=jax.random.key(1), checkpoint=str(tmp_path / "file"), **AIM)
    with pytest.raises(TypeError, match="checkpoint must be a folder name"):
        aim(data, 1.0, key=jax.random.key(1), checkpoint=3, **AIM)


def test_restore_refuses_a_ledger_that_undercounts_or_overspends():
    acc = Accountant(epsilon=1.0, delta=1e-9)
    acc.gaussian(jax.random.key(0), np.zeros(4), 1.0, sigma=20.0, integer=True, target=("a",))
    acc.exponential(jax.random.key(1), [0.0, 1.0], 1.0, epsilon=0.1, target="select")
    records = acc.records()
    fresh = Accountant(epsilon=1.0, delta=1e-9)
    fresh.restore(records)
    assert fresh.ledger == acc.ledger and fresh.spent == acc.spent
    with pytest.raises(ValueError, match="already has 2 entries"):
        fresh.restore(records)
    cheap = [dict(records[0], cost=records[0]["cost"] / 10), records[1]]
    with pytest.raises(ValueError, match=r"record 0 \(gaussian on \('a',\)\) records the cost"):
        Accountant(epsilon=1.0, delta=1e-9).restore(cheap)
    cheap = [dict(records[0], cost=records[0]["rho"] / 10, rho=records[0]["rho"] / 10), records[1]]
    with pytest.raises(ValueError, match=r"record 0 .* is not what its noise costs"):
        Accountant(epsilon=1.0, delta=1e-9).restore(cheap)
    with pytest.raises(ValueError, match="more than the budget"):
        Accountant(epsilon=0.01, delta=1e-9).restore(records)


def test_mwem_interrupted_inside_a_round_and_resumed_equals_the_uninterrupted_run(data, tmp_path, monkeypatch):
    full = mwem(data, 1.0, key=jax.random.key(3), **MWEM)
    folder = str(tmp_path / "mwem.ckpt")
    fits, real = [], mwem_rounds.estimate

    def estimate(*a, **k):
        fits.append(1)
        if len(fits) == 3:  # round 3's fit: its selection and measurement drawn, not kept
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(mwem_rounds, "estimate", estimate)
    with pytest.raises(RunInterrupted, match=r"after round 2: checkpoint .* holds rounds 1\.\.2 \(2 noisy measurements"):
        mwem(data, 1.0, key=jax.random.key(3), checkpoint=folder, **MWEM)
    monkeypatch.setattr(mwem_rounds, "estimate", real)
    res = mwem(data, 1.0, key=jax.random.key(3), checkpoint=folder, **MWEM)
    _same_release(res, full)
    with pytest.raises(ValueError, match="selection='marginal'"):
        mwem(data, 1.0, key=jax.random.key(3), checkpoint=folder, **{**MWEM, "selection": "query", "bounded": True})


def test_time_left_follows_the_recent_rounds_and_reaches_zero():
    """20 rounds after 30 s of set-up: rounds 1-10 take 2 s, rounds 11-20 (a bigger model) 10 s; the expected count is
    known late (as AIM's: the budget left over the current round's cost). The old estimate, ``elapsed / done`` per
    round, was a third under the truth five rounds from the end; from the recent rounds it is exact once they are all
    slow, and 0 at the end."""
    now = [0.0]
    seen = []
    bar = Progress(seen.append, 100, "AIM", "aim", unit="round", clock=lambda: now[0])
    durations = [30.0 + 2.0] + [2.0] * 9 + [10.0] * 10
    for i, d in enumerate(durations, 1):
        now[0] += d
        bar.step({"round": i}, total=20 if i > 5 else 100)
    for i, info in enumerate(seen, 1):
        true_left = sum(durations[i:])
        if 2 <= i <= 10:  # the set-up is not a round: the 2 s rounds give the time left
            assert info["eta"] == 2.0 * (info["expected"] - i)
        if i >= 15:
            assert info["eta"] == pytest.approx(true_left)
    assert seen[-1]["eta"] == 0.0 and seen[-1]["expected"] == 20
    old = seen[14]["elapsed"] / 15 * 5  # what elapsed / done gave after round 15
    assert old < 0.7 * sum(durations[15:])


def test_cli_checkpoint_resumes_and_is_refused_where_there_are_no_rounds(tmp_path, monkeypatch, capsys):
    d = _data(n=300)
    d.df.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "t-domain.json").write_text(json.dumps(DOMAIN))
    base = ["run", "--data", str(tmp_path / "t.csv"), "--domain", str(tmp_path / "t-domain.json"), "-m", "aim",
            "--epsilon", "1", "--rounds", "80", "--engine-iters", "30", "--max-model-mb", "1", "--quiet", "--seed", "4"]
    assert cli.main([*base, "--out", str(tmp_path / "full.csv")]) == 0
    capsys.readouterr()
    # --checkpoint for a mechanism without rounds: exit 2 before anything is read
    assert cli.main([*base[:6], "mst", "--epsilon", "1", "--checkpoint", str(tmp_path / "ck")]) == 2
    assert "--checkpoint: mst has no rounds to keep; it applies to mwem, aim" in capsys.readouterr().err
    assert cli.main([*base, "--option", f"checkpoint={tmp_path / 'ck'}"]) == 2
    assert "give the checkpoint folder as --checkpoint DIR" in capsys.readouterr().err
    # Ctrl-C in round 2 without --checkpoint: the rounds go to OUT.checkpoint; the same command resumes, then removes it
    real = adaptive_iterative.estimate
    interrupted_at_fit(monkeypatch, adaptive_iterative, 3)
    out = str(tmp_path / "resumed.csv")
    assert cli.main([*base, "--out", out]) == 130
    err = capsys.readouterr().err
    assert f"pgmjax run: interrupted after round 1: checkpoint {out}.checkpoint holds rounds 1..1" in err
    assert "run the same command again to resume" in err and not os.path.exists(out)
    monkeypatch.setattr(adaptive_iterative, "estimate", real)
    # --resume DIR: refused where DIR holds no checkpoint, before anything is read
    (tmp_path / "empty").mkdir()
    assert cli.main([*base, "--out", out, "--resume", str(tmp_path / "empty")]) == 2
    assert "holds no checkpoint to resume" in capsys.readouterr().err and not os.path.exists(out)
    assert cli.main([*base[:-3], "--seed", "4", "--out", out]) == 0  # without --quiet: the status lines
    assert f"resumed from checkpoint {out}.checkpoint after round 1" in capsys.readouterr().err
    assert not os.path.exists(out + ".checkpoint")
    assert open(out).read() == open(tmp_path / "full.csv").read()
