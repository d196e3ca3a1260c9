"""Outputs as a set, every check before the budget (issue 57, items 4 and 5).

A bad output folder or ``--records`` is refused (exit 2) before any budget is spent; an output that appears
while a run works is left alone and the run fails; a run that fails leaves none of its outputs and no
temporary file; a killed run's temporary file is removed by the next one. In-process (``cli.main``), a tiny
table, ``mst`` with a few iterations; the budget and the mechanism are replaced where they must not run.
"""

import dataclasses
import functools
import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax import cli
from pgmjax.cli import outputs
from pgmjax.cli import run as cli_run
from pgmjax.mechanisms import registry
from pgmjax.model import serialization

DOMAIN = {"a": 3, "b": 2, "c": 4}
RUN = ["run", "--seed", "0", "--data", "t.csv", "--domain", "dom.json", "-m", "mst", "-e", "1", "--quiet", "--engine-iters", "10"]
RAW_RUN = ["run", "--seed", "0", "--data", "t.csv", "-m", "mst", "-e", "1", "--quiet"]  # a private schema: spends budget first


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    pd.DataFrame({a: rng.integers(0, n, 300) for a, n in DOMAIN.items()}).to_csv("t.csv", index=False)
    (tmp_path / "dom.json").write_text(json.dumps(DOMAIN))
    return tmp_path


def main(args, capsys):
    code = cli.main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _wrap_mst(monkeypatch, before=None, after=None):
    """Replace mst's front-end by one calling ``before()`` and ``after(result)`` around it (same signature)."""
    entry = registry.MECHANISMS["mst"]

    @functools.wraps(entry.function)
    def run(*args, **kwargs):
        if before is not None:
            before()
        result = entry.function(*args, **kwargs)
        if after is not None:
            after(result)
        return result

    monkeypatch.setattr(registry, "MECHANISMS", {**registry.MECHANISMS, "mst": dataclasses.replace(entry, function=run)})


@pytest.fixture
def no_budget(monkeypatch):
    """Fail the run if the private table is read (where a private schema spends its share) or the mechanism runs."""
    def reached(*args, **kwargs):
        raise AssertionError("the private table was read: a check came after the private computation")

    monkeypatch.setattr(cli_run, "load_inputs", reached)
    _wrap_mst(monkeypatch, before=reached)


def _tmp_files(folder) -> list[str]:
    return [f for f in os.listdir(folder) if ".pgmjax-tmp" in f or f.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------------
# Every check before the budget
# ---------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc (a folder no one, root included, writes in)")
@pytest.mark.parametrize("base", [RUN, RAW_RUN], ids=["domain", "private-schema"])
@pytest.mark.parametrize("flag,path", [("--out", "/proc/s.csv"), ("--save-model", "/proc/m"),
                                       ("--report", "/proc/r.json"), ("--html", "/proc/p.html")])
def test_an_unwritable_output_folder_is_refused_before_the_budget(here, capsys, no_budget, base, flag, path):
    code, _, err = main([*base, flag, path], capsys)
    assert code == 2, err
    assert f"{flag} {path}: cannot create a file in /proc" in err and "nothing was run" in err, err
    assert sorted(os.listdir(here)) == ["dom.json", "t.csv"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes in a read-only folder")
def test_a_read_only_folder_is_refused_before_the_budget(here, capsys, no_budget):
    os.mkdir("ro")
    os.chmod("ro", 0o500)
    try:
        code, _, err = main([*RUN, "--out", "ro/s.csv"], capsys)
    finally:
        os.chmod("ro", 0o700)
    assert code == 2 and "--out ro/s.csv: cannot create a file in" in err, err


@pytest.mark.parametrize("base", [RUN, RAW_RUN], ids=["domain", "private-schema"])
def test_too_many_records_are_refused_before_the_budget(here, capsys, no_budget, base):
    code, _, err = main([*base, "--records", "1000000000000", "--out", "s.csv"], capsys)
    assert code == 2 and f"--records 1000000000000 is above the maximum of {outputs.MAX_RECORDS}" in err, err
    assert not os.path.exists("s.csv")


def test_sample_refuses_too_many_records_before_drawing(here, capsys, monkeypatch):
    code, _, err = main([*RUN, "--save-model", "m"], capsys)
    assert code == 0, err

    def drawn(*args, **kwargs):
        raise AssertionError("records were drawn before --records was checked")

    monkeypatch.setattr(pj.GraphicalModel, "synthetic_data", drawn)
    code, _, err = main(["sample", "--model", "m", "--records", "1000000000000", "--out", "more.csv"], capsys)
    assert code == 2 and "--records 1000000000000 is above the maximum" in err, err
    assert not os.path.exists("more.csv")


def test_records_beyond_the_free_disk_space_are_refused_before_the_budget(here, capsys, no_budget, monkeypatch):
    free = 10**6
    monkeypatch.setattr(outputs.shutil, "disk_usage", lambda p: outputs.shutil._ntuple_diskusage(10**9, 10**9 - free, free))
    # 3 columns at 2 bytes a value or more: 200,000 records take 1.2 MB at least, more than the 1 MB free.
    code, _, err = main([*RUN, "--records", "200000", "--out", "s.csv"], capsys)
    assert code == 2 and "--records 200000: --out s.csv would take at least" in err and "free" in err, err
    assert not os.path.exists("s.csv")


# ---------------------------------------------------------------------------------------------------
# Outputs as a set
# ---------------------------------------------------------------------------------------------------


def test_an_output_that_appears_during_the_run_is_kept_and_the_run_fails(here, capsys, monkeypatch):
    # Another run (same --out, no --overwrite) writes s.csv after this one's start-up checks.
    _wrap_mst(monkeypatch, before=lambda: (here / "s.csv").write_text("the other run's table\n"))
    code, _, err = main([*RUN, "--out", "s.csv", "--report", "r.json", "--save-model", "m"], capsys)
    assert code == 1 and "--out s.csv appeared while this run was working" in err, err
    assert (here / "s.csv").read_text() == "the other run's table\n"
    assert not os.path.exists("r.json") and not os.path.exists("m") and not _tmp_files(here)


def test_a_model_that_appears_during_the_run_removes_the_table_already_placed(here, capsys, monkeypatch):
    def other_run():
        os.mkdir("m")
        (here / "m" / serialization.STRUCTURE_FILE).write_text("the other run's model")

    _wrap_mst(monkeypatch, before=other_run)
    code, _, err = main([*RUN, "--out", "s.csv", "--save-model", "m"], capsys)
    assert code == 1 and "--save-model m appeared while this run was working" in err, err
    assert not os.path.exists("s.csv")  # this run's table, placed first, was removed with the failure
    assert os.listdir("m") == [serialization.STRUCTURE_FILE]
    assert (here / "m" / serialization.STRUCTURE_FILE).read_text() == "the other run's model"
    assert not _tmp_files(here)


def test_a_full_disk_while_saving_the_model_leaves_no_table(here, capsys, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(serialization, "save_model", full)
    code, _, err = main([*RUN, "--out", "s.csv", "--report", "r.json", "--save-model", "m"], capsys)
    assert code == 1 and "--save-model: could not write m" in err and "No space left" in err, err
    assert sorted(os.listdir(here)) == ["dom.json", "t.csv"]  # no table, no report, no temporary file


def test_sigterm_during_the_run_leaves_nothing(here, capsys, monkeypatch):
    def unhandled(signum, frame):  # what the test sees if the command line installs no handler of its own
        raise RuntimeError("SIGTERM reached the test's handler")

    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        _wrap_mst(monkeypatch, after=lambda result: os.kill(os.getpid(), signal.SIGTERM))
        code, _, err = main([*RUN, "--out", "s.csv", "--save-model", "m"], capsys)
        assert signal.getsignal(signal.SIGTERM) is unhandled  # the command line restored the handler
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert code == 143 and "terminated" in err, err
    assert sorted(os.listdir(here)) == ["dom.json", "t.csv"]


def _signal_inside_del(signum, dropped: list):
    """An ``after`` hook for :func:`_wrap_mst` that sends ``signum`` to this process from inside a ``__del__``, where
    Python prints the handler's exception and drops it; the dropped exceptions' types are appended to ``dropped``."""
    class SignalledWhileCollected:
        def __del__(self):
            os.kill(os.getpid(), signum)  # the handler raises here, inside __del__: Python drops it

    def after(result):
        hook = sys.unraisablehook
        sys.unraisablehook = lambda unraisable: dropped.append(unraisable.exc_type)
        try:
            obj = SignalledWhileCollected()
            del obj
        finally:
            sys.unraisablehook = hook
        return result

    return after


def test_a_sigterm_whose_exception_python_drops_still_terminates_and_leaves_nothing(here, capsys, monkeypatch):
    """A handler runs between two bytecodes, perhaps inside a ``__del__`` or a garbage-collector callback (JAX
    registers one), where Python prints the exception and drops it: the run must still end as terminated, with no
    output placed (this once let a terminated run finish and write its files, exit 0)."""
    dropped = []
    _wrap_mst(monkeypatch, after=_signal_inside_del(signal.SIGTERM, dropped))
    code, _, err = main([*RUN, "--out", "s.csv", "--save-model", "m"], capsys)
    assert dropped and dropped[0].__name__ == "Terminated"  # the exception was indeed dropped
    assert code == 143 and "terminated" in err, err
    assert sorted(os.listdir(here)) == ["dom.json", "t.csv"]


def test_a_ctrl_c_whose_exception_python_drops_still_interrupts_and_leaves_nothing(here, capsys, monkeypatch):
    """Ctrl-C likewise: its KeyboardInterrupt raised inside a ``__del__`` is dropped, and the run still ends as
    interrupted (exit 130) with no output placed."""
    dropped = []
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, as in a plain process
    try:
        _wrap_mst(monkeypatch, after=_signal_inside_del(signal.SIGINT, dropped))
        code, _, err = main([*RUN, "--out", "s.csv", "--save-model", "m"], capsys)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, previous)
    assert dropped and dropped[0] is KeyboardInterrupt
    assert code == 130 and "interrupted" in err, err
    assert sorted(os.listdir(here)) == ["dom.json", "t.csv"]


def test_a_stale_temporary_file_of_a_dead_run_is_removed(here, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is gone
    host = socket.gethostname()
    stale = f".s.json.pgmjax-tmp.{host}.{dead.pid}.0badc0de"
    live = f".s.json.pgmjax-tmp.{host}.{os.getpid()}.0123abcd"  # a run in progress: kept
    elsewhere = f".s.json.pgmjax-tmp.other-host.{dead.pid}.4567abcd"  # another machine's: kept
    for name in (stale, live, elsewhere):
        (here / name).write_text("partial")
    code, _, err = main(["schema", "--seed", "0", "--data", "t.csv", "--out", "s.json"], capsys)
    assert code == 0, err
    assert not os.path.exists(stale) and os.path.exists(live) and os.path.exists(elsewhere)
    assert json.loads((here / "s.json").read_text())


def test_an_output_that_cannot_be_removed_is_named(tmp_path, monkeypatch):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    second.write_text("someone else's")
    remove = os.remove

    def stuck(path, *args, **kwargs):
        if os.fspath(path) == str(first):
            raise PermissionError(1, "Operation not permitted")
        return remove(path, *args, **kwargs)

    monkeypatch.setattr(os, "remove", stuck)
    with pytest.raises(cli.RunFailure) as failure:
        with outputs.OutputSet({"--out": str(first), "--report": str(second)}, overwrite=False) as outs:
            outs.write_text("--out", "mine")
            outs.write_text("--report", "mine")
            outs.commit()  # first.txt is placed, second.txt exists: the set fails and cannot remove first.txt
    assert "--report" in str(failure.value) and f"could not remove this run's {first}" in str(failure.value)
    assert second.read_text() == "someone else's" and sorted(os.listdir(tmp_path)) == ["first.txt", "second.txt"]


def test_overwrite_replaces_and_an_exclusive_write_refuses(tmp_path):
    target = tmp_path / "o.txt"
    outputs.write_text(str(target), "one", overwrite=False)
    with pytest.raises(cli.RunFailure, match="appeared while this run was working"):
        outputs.write_text(str(target), "two", overwrite=False)
    assert target.read_text() == "one"
    outputs.write_text(str(target), "three", overwrite=True)
    assert target.read_text() == "three" and os.listdir(tmp_path) == ["o.txt"]


def test_a_terminated_process_leaves_nothing(here):
    """The real thing: ``python -m pgmjax run`` sent SIGTERM once it has read the table (the mechanism running)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join(filter(None, [
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(cli.__file__)))), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "pgmjax", *RUN[:-3], "--engine-iters", "3000", "--out", "s.csv",
                             "--save-model", "m"], cwd=here, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if line.startswith("pgmjax run: read "):  # after the checks, before the mechanism
                proc.send_signal(signal.SIGTERM)
                break
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 143, err
    finally:
        proc.kill()
    assert "terminated (SIGTERM)" in err
    assert sorted(os.listdir(here)) == ["dom.json", "t.csv"]
