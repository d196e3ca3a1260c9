"""The command line, end to end through the real command (``python -m pgmjax``), plus the schema and
registry pieces in-process.

Subprocess runs are grouped and run two at a time (jax start-up costs ~1.5 s per process); every
mechanism runs once with tiny settings on a generated table.
"""

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax import cli
from pgmjax import schema as S
from pgmjax.mechanisms import registry
from pgmjax.privacy import cdp_rho

ENV = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONWARNINGS="ignore")
AVAILABLE = list(registry.MECHANISMS)

# Tiny per-mechanism settings (few rounds and iterations); --engine-iters 20 for all.
MECH_ARGS = {
    "mwem": ["--rounds", "2", "--save-model", "model-mwem"],
    "privbayes": ["--records", "123"],  # resampled from the model by the CLI
    "dualquery": ["--delta", "1e-3", "--rounds", "3", "--option", "samples=10"],
    "hdmm": ["--option", "restarts=1"],
    "mst": ["--records", "123"],  # passed to the front-end's rows=
    "aim": ["--rounds", "4", "--max-model-mb", "1"],
    "mldp": [],
}


def pgmjax(args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pgmjax", *args], capture_output=True, text=True, cwd=cwd, env=ENV, timeout=600
    )


def pgmjax_many(arg_lists, cwd, workers=2):
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda a: pgmjax(a, cwd), arg_lists))


def no_traceback(proc):
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# ---------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    dom, rec, _ = cli.random_bayes_net_data(4, 600, seed=3)
    frame = pd.DataFrame(rec, columns=list(dom))
    frame.to_csv(d / "t.csv", index=False)
    (d / "t-domain.json").write_text(json.dumps(dom))
    # bad integer-coded inputs
    bad = frame.copy()
    bad.loc[7, "x2"] = dom["x2"]  # one past the last value
    bad.to_csv(d / "bad-range.csv", index=False)
    frame.assign(extra=1).to_csv(d / "bad-extra.csv", index=False)
    frame.drop(columns=["x3"]).to_csv(d / "bad-missing.csv", index=False)
    (d / "pairs.json").write_text(json.dumps([["x0", "x1"], ["x2", "x3"]]))
    # raw values: integers, decimals, text
    rng = np.random.default_rng(0)
    n = 500
    age = rng.integers(18, 91, n)
    raw = pd.DataFrame(
        {
            "age": age,
            "income": np.round(rng.lognormal(10, 0.6, n), 2),
            "color": rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2]),
            "city": np.where(age > 50, rng.choice(["Paris", "Lyon"], n), rng.choice(["Nice", "Paris"], n)),
        }
    )
    raw.to_csv(d / "raw.csv", index=False)
    raw.assign(color=raw["color"].where(raw.index != 3, "purple")).to_csv(d / "raw-badcat.csv", index=False)
    return d, dom, raw


RAW_RUN = ["run", "--seed", "0", "--data", "raw.csv", "--schema", "schema.json", "--allow-nonprivate-schema", "--mechanism", "privbayes", "--epsilon", "1",
           "--out", "raw-synth.csv", "--report", "raw-report.json", "--workload", "all-2way", "--engine-iters", "20"]  # not --quiet
BASE = ["--domain", "t-domain.json", "--mechanism", "mwem", "--epsilon", "1", "--quiet"]
SUBPROCESS_BAD = 3  # argparse errors exit through SystemExit: through the real command
# The bad inputs of the issue: (arguments, what the last stderr line must say). The first three run through the
# real command (exit code and stderr of the process); the others in-process (same main(), no interpreter start).
BAD = [
    (["run", "--seed", "0", "--data", "t.csv", *BASE[:-3], "--epsilon", "0"], "argument --epsilon/-e: must be positive"),
    (["run", "--seed", "0", "--data", "bad-range.csv", *BASE], "column 'x2' has a value outside [0, "),
    (["run", "--seed", "0", "--data", "t.csv", "--domain", "t-domain.json", "-m", "nosuch", "-e", "1"], "invalid choice: 'nosuch'"),
    (["run", "--seed", "0", "--data", "missing.csv", *BASE], "--data: file not found: missing.csv"),
    (["run", "--seed", "0", "--data", "bad-missing.csv", *BASE], "has no column 'x3'"),
    (["run", "--seed", "0", "--data", "bad-extra.csv", *BASE], "column 'extra' is not in the domain file"),
    (["run", "--seed", "0", "--data", "raw-badcat.csv", "--schema", "schema-fixed.json", "-m", "mwem", "-e", "1"],
     "column 'color': a value is not one of its 3 categories"),
]


@pytest.fixture(scope="module")
def runs(files):
    """Every subprocess of this file, two at a time: each mechanism once, the raw-values chain, bad inputs, help."""
    d, _, _ = files
    (d / "schema-fixed.json").write_text(
        json.dumps({"age": {"bins": [0, 50, 100]}, "income": {"bins": 2, "range": [0, 1e7]},
                    "color": {"categories": ["blue", "green", "red"]}, "city": {"categories": ["Lyon", "Nice", "Paris"]}})
    )
    jobs = {}
    for m in AVAILABLE:
        jobs[m] = [
            ["run", "--seed", "0", "--data", "t.csv", "--domain", "t-domain.json", "--mechanism", m, "--epsilon", "1",
             "--out", f"synth-{m}.csv", "--report", f"report-{m}.json", "--workload", "all-2way",
             "--engine-iters", "20", "--seed", "1", "--quiet", *MECH_ARGS.get(m, [])]
        ]
    jobs["raw"] = [["schema", "--seed", "0", "--data", "raw.csv", "--bins", "6", "--out", "schema.json"], RAW_RUN]  # in order
    for i, (args, _) in enumerate(BAD[:SUBPROCESS_BAD]):
        jobs[f"bad{i}"] = [args]

    def chain(arg_lists):
        out = []
        for a in arg_lists:
            out.append(pgmjax(a, d))
            if out[-1].returncode != 0:
                break
        return out

    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(jobs, pool.map(chain, jobs.values())))
    return done


# ---------------------------------------------------------------------------------------------------
# pgmjax run: every mechanism
# ---------------------------------------------------------------------------------------------------


def test_the_registry_knows_every_mechanism():
    assert list(registry.MECHANISMS) == ["mwem", "privbayes", "dualquery", "hdmm", "mst", "aim", "tree_aim", "mldp", "rr_synthetic"]
    assert all(e.name == e.function.__name__ == n for n, e in registry.MECHANISMS.items())


def test_tree_aim_is_the_default_of_the_command_line_and_the_synthesizer():
    args = cli.build_parser().parse_args(["run", "--data", "t.csv", "--domain", "t-domain.json", "-e", "1"])
    assert registry.DEFAULT_MECHANISM == "tree_aim" == args.mechanism == pj.Synthesizer().mechanism
    named = cli.build_parser().parse_args(["run", "--data", "t.csv", "--domain", "t-domain.json", "-m", "mst", "-e", "1"])
    assert named.mechanism == "mst"


@pytest.mark.parametrize("mechanism", AVAILABLE)
def test_run_every_mechanism_end_to_end(files, runs, mechanism):
    d, dom, _ = files
    (proc,) = runs[mechanism]
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    report = json.loads((d / f"report-{mechanism}.json").read_text())
    priv = report["privacy"]

    # The budget: given == spent, in the mechanism's own currency, against an independent computation.
    assert priv["fraction_spent"] == pytest.approx(1.0, rel=1e-9)
    costs = math.fsum(e["cost"] for e in report["ledger"])
    if "rho_budget" in priv:  # zCDP: rho = cdp_rho(eps, delta) (Canonne, Kamath & Steinke 2020), and the ledger sums to it
        assert priv["rho_budget"] == pytest.approx(cdp_rho(1.0, priv["delta"]), rel=1e-9)
        assert costs == pytest.approx(priv["rho_budget"], rel=1e-9)
        assert priv["epsilon_spent"] == pytest.approx(1.0, rel=1e-6)
    else:
        assert priv["epsilon_budget"] == 1.0 and priv["epsilon_spent"] == pytest.approx(1.0, rel=1e-9)
        if priv["composition"] == "pure":
            assert priv["delta"] == 0.0 and costs == pytest.approx(1.0, rel=1e-9)
        else:  # DualQuery: advanced composition of the EM draws (eps_used >= their basic sum is not required)
            assert priv["delta"] == 1e-3
    assert priv["ledger_entries"] == len(report["ledger"]) > 0

    # The synthetic data: the domain's columns, values in range, the announced number of records.
    synth = pd.read_csv(d / f"synth-{mechanism}.csv")
    assert list(synth.columns) == list(dom)
    for a, n in dom.items():
        assert synth[a].between(0, n - 1).all() and synth[a].dtype.kind == "i"
    assert len(synth) == report["synthetic"]["records"]
    if "--records" in MECH_ARGS.get(mechanism, []):
        assert len(synth) == 123

    # The model summary matches the model's cliques.
    model = report["model"]
    assert model["cells"] == sum(int(np.prod([dom[a] for a in c])) for c in model["cliques"])
    assert model["n_cliques"] == len(model["cliques"]) >= 1
    if mechanism == "mwem":  # --save-model writes the fitted model
        saved = pj.load_model(d / "model-mwem")
        assert [list(c) for c in saved.cliques] == model["cliques"] and saved.total == pytest.approx(model["total"])

    # The report publishes exactly the info fields the mechanism's info class marks as published, and names the
    # others; nothing computed from the data without noise (such as MST's exact selection weights) is published.
    info_class = registry.MECHANISMS[mechanism].info
    assert list(report["info"]) == list(info_class.published_names())
    assert report["info_omitted"] == sorted(info_class.private_names())
    assert "weights" not in report["info"]
    assert report["not_private"] == ["input.records", "evaluation", "seconds"] + (["info.seconds"] if "seconds" in report["info"] else [])

    # The reported workload error is that of the written file against the input (recomputed here).
    data = pj.Dataset.from_csv(d / "t.csv", d / "t-domain.json")
    written = pj.Dataset(synth, data.domain)
    w = pj.Workload.all_kway(data.domain, 2)
    ev = report["evaluation"]
    assert ev["workload_error_synthetic"] == pytest.approx(pj.metrics.workload_error(w, data, written), rel=1e-9)
    assert ev["tvd_2way_synthetic"] == pytest.approx(pj.metrics.marginal_tvd(data, written, w.cliques), rel=1e-9)
    assert 0 <= ev["workload_error_synthetic"] <= 1 and ev["private"] is False  # identity queries: a TVD

    # The summary on stdout.
    out = proc.stdout
    assert f"pgmjax run: {mechanism} on t.csv" in out
    for word in ("privacy", "spent", "measurements", "model", "synthetic", "workload", "time", "NOT private"):
        assert word in out


# ---------------------------------------------------------------------------------------------------
# pgmjax schema + pgmjax run on raw values
# ---------------------------------------------------------------------------------------------------


def test_raw_values_with_a_schema_round_trip(files, runs):
    d, _, raw = files
    proc = runs["raw"][0]  # pgmjax schema --data raw.csv --bins 6 --out schema.json
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert "NOT private" in proc.stderr
    spec = json.loads((d / "schema.json").read_text())
    assert spec["color"] == {"categories": ["blue", "green", "red"]}
    assert spec["city"] == {"categories": ["Lyon", "Nice", "Paris"]}
    assert spec["age"]["integer"] is True and len(spec["age"]["bins"]) == 7
    assert spec["age"]["bins"][0] <= raw["age"].min() and spec["age"]["bins"][-1] >= raw["age"].max()
    assert spec["income"]["bins"][0] <= raw["income"].min() and spec["income"]["bins"][-1] >= raw["income"].max()
    schema = S.load_schema(d / "schema.json")

    proc = runs["raw"][1]  # RAW_RUN
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    # Without --quiet: a status line and a progress bar over the engine's iterations on stderr.
    assert "pgmjax run: read 4 attributes" in proc.stderr and "500 records" not in proc.stderr  # the count is private
    assert "privbayes" in proc.stderr and "20/20" in proc.stderr and "fit 1, loss" in proc.stderr
    assert "(decoded to raw values)" in proc.stdout
    synth = pd.read_csv(d / "raw-synth.csv", dtype={"color": str, "city": str})
    assert list(synth.columns) == ["age", "income", "color", "city"]
    # Decoded values are in the original vocabulary and inside the bins.
    assert set(synth["color"]) <= {"red", "green", "blue"} and set(synth["city"]) <= {"Paris", "Lyon", "Nice"}
    age_edges, inc_edges = schema.columns["age"].edges, schema.columns["income"].edges
    assert synth["age"].dtype.kind == "i" and synth["age"].between(age_edges[0], age_edges[-1]).all()
    assert synth["income"].between(inc_edges[0], inc_edges[-1]).all()
    assert synth["income"].nunique() > 50  # uniform within the bin, not one value per bin
    # Re-encoding the decoded file gives the synthetic codes back: the reported error is that of the file.
    codes = schema.encode(synth.astype(str))
    truth = schema.encode(raw.astype(str))
    report = json.loads((d / "raw-report.json").read_text())
    w = pj.Workload.all_kway(schema.domain, 2)
    assert report["evaluation"]["workload_error_synthetic"] == pytest.approx(pj.metrics.workload_error(w, truth, codes), rel=1e-9)
    assert report["input"]["domain"] == schema.domain.to_dict()


# ---------------------------------------------------------------------------------------------------
# Bad input: a clear message, exit code 2, no traceback; help and demo
# ---------------------------------------------------------------------------------------------------

def test_bad_inputs_clear_message_exit_2_no_traceback(runs):
    for i, (args, expected) in enumerate(BAD[:SUBPROCESS_BAD]):
        (proc,) = runs[f"bad{i}"]
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        no_traceback(proc)
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("pgmjax run: error: ") and expected in last, (args, last)


@pytest.mark.parametrize("args, expected", BAD[SUBPROCESS_BAD:], ids=lambda a: a if isinstance(a, str) else a[2])
def test_bad_inputs_in_process(files, monkeypatch, capsys, args, expected):
    d, _, _ = files
    monkeypatch.chdir(d)
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("pgmjax run: error: ") and expected in last and "Traceback" not in err, last


def test_help_documents_everything(capsys):
    helps = []
    for args in (["--help"], ["run", "--seed", "0", "--help"], ["schema", "--seed", "0", "--help"]):
        with pytest.raises(SystemExit) as e:
            cli.main(args)
        assert e.value.code == 0
        helps.append(capsys.readouterr().out)
    top, run_help, schema_help = helps
    for word in ("pgmjax run --data", "pgmjax schema", "pgmjax demo", "pgmjax mechanisms", "exit codes", "examples"):
        assert word in top
    for word in [*registry.MECHANISMS, "--workload", "--schema", "--option", "--report", "--records", "--seed",
                 "categories", "midpoint", "exit codes", "NOT private", "examples"]:
        assert word in run_help, word
    assert "NOT private" in schema_help and "--bins" in schema_help


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--domain", "nope.json", "-m", "mwem", "-e", "1"], "--domain: file not found: nope.json"),
        ([*BASE, "--option", "nosuch=1"], "mwem: unknown options ['nosuch']"),
        ([*BASE, "--option", "noise"], "--option expects key=value"),
        ([*BASE, "--workload", "nope.json"], "--workload: expected all-2way, all-3way"),
        ([*BASE, "--workload", "all-7way"], "k must be between 1 and the number of attributes (4)"),
        ([*BASE, "--workload", "bad-workload.json"], "attribute 'zz' is not in the domain"),
        ([*BASE, "--out", "no/such/dir/x.csv"], "--out: the folder"),
        ([*BASE, "--rounds", "2", "-m", "privbayes"], "privbayes has no rounds"),
        ([*BASE, "--option", "noise=uniform"], "mwem rejected the input: unknown noise 'uniform'"),
        (["-m", "mwem", "-e", "1", "--allow-nonprivate-schema"], "--allow-nonprivate-schema applies to a --schema"),
        (["--domain", "t-domain.json", "--schema", "t-domain.json", "-m", "mwem", "-e", "1"], "not both"),
    ],
)
def test_more_bad_inputs_in_process(files, monkeypatch, capsys, args, expected):
    d, _, _ = files
    monkeypatch.chdir(d)
    (d / "bad-workload.json").write_text(json.dumps([["x0", "zz"]]))
    assert cli.main(["run", "--seed", "0", "--data", "t.csv", *args]) == 2
    err = capsys.readouterr().err
    assert expected in err.strip().splitlines()[-1] and "Traceback" not in err


@pytest.mark.parametrize("args", [["-e", "-1"], ["-e", "nan"], ["-e", "1", "--delta", "1.5"], ["-e", "1", "--engine-iters", "0"]])
def test_argparse_rejects_bad_numbers(files, capsys, args):
    d, _, _ = files
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--seed", "0", "--data", str(d / "t.csv"), "--domain", str(d / "t-domain.json"), "-m", "mwem", *args])
    assert e.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("pgmjax run: error: argument") and ("must be" in last or "expected" in last)


def test_demo_still_runs(capsys):
    # The README's first command is `pgmjax demo`; a small version of it (same code path, in-process).
    assert cli.main(["demo", "--records", "300", "--attributes", "4", "--triples", "1", "--iters", "20", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "mean (measured)" in out and "model:" in out


# ---------------------------------------------------------------------------------------------------
# In-process: main() error paths, registry, schema
# ---------------------------------------------------------------------------------------------------


def test_runtime_failure_in_process(files, monkeypatch, capsys):
    d, _, _ = files
    args = ["run", "--seed", "0", "--data", str(d / "t.csv"), "--domain", str(d / "t-domain.json"), "-m", "privbayes", "-e", "1", "--quiet"]

    def broken(data, epsilon, delta=0.0, *, key, workload=None, engine_iters=1000, fit_options=None, max_model_mb=None):
        raise FloatingPointError("the loss became nan")

    entry = dataclasses.replace(registry.MECHANISMS["privbayes"], function=broken)
    monkeypatch.setattr(registry, "MECHANISMS", {**registry.MECHANISMS, "privbayes": entry})
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "pgmjax run: failed: FloatingPointError: the loss became nan (run again with --debug" in err
    with pytest.raises(FloatingPointError):
        cli.main(args + ["--debug"])


def _call(mechanism, **kw):
    from pgmjax.cli.call import front_end_call

    ns = dict(mechanism=mechanism, epsilon=1.0, delta=None, engine_iters=None, max_model_mb=None, rounds=None, records=None)
    options, fit_options = kw.pop("options", {}), kw.pop("fit_options", {})
    return front_end_call(argparse.Namespace(**(ns | kw)), options, fit_options)


def test_the_command_line_calls_the_front_ends_with_the_common_options():
    entry, kw, notes = _call("mst", engine_iters=30, records=50, options={"compress": False})
    assert entry.function is pj.mechanisms.mst
    assert kw == {"delta": 1e-9, "epsilon": 1.0, "engine_iters": 30, "rows": 50, "compress": False} and notes == []
    entry, kw, _ = _call("rr")  # the command line's short name
    assert entry.name == "rr_synthetic" and kw["per_attribute"] is True
    _, kw, notes = _call("dualquery")
    assert kw["delta"] == registry.DEFAULT_DELTA == 1e-9 and "1e-09" in notes[0]
    _, kw, _ = _call("hdmm", delta=1e-6, options={"noise": "gaussian"})
    assert kw["delta"] == 1e-6 and kw["original"] is False
    _, kw, _ = _call("aim", engine_iters=7, max_model_mb=2.0, fit_options={"method": "lbfgs"})
    assert kw["engine_iters"] == 7 and kw["max_model_mb"] == 2.0 and kw["fit_options"] == pj.FitOptions(method="lbfgs")
    with pytest.raises(cli.UserError, match=r"--engine-option: unknown option\(s\) \['iters'\]; pgmjax.FitOptions takes method"):
        _call("aim", fit_options={"iters": 5})
    with pytest.raises(cli.UserError, match="--engine-option: FitOptions: tol must be a non-negative number"):
        _call("aim", fit_options={"tol": -1})
    for mechanism, delta in [("privbayes", 1e-6), ("hdmm", 1e-6), ("mldp", 1e-9)]:  # pure DP: a delta is refused, not dropped
        with pytest.raises(cli.UserError, match="pure eps-DP"):
            _call(mechanism, delta=delta)
    with pytest.raises(cli.UserError, match=r"unknown options \['nope'\]"):
        _call("mwem", options={"nope": 1})
    with pytest.raises(cli.UserError, match="common options: use --engine-iters"):
        _call("aim", options={"engine_iters": 3})
    with pytest.raises(cli.UserError, match="has no rounds"):
        _call("privbayes", rounds=3)


def test_schema_parsing_and_errors():
    s = S.Schema.from_dict(
        {"x": {"bins": [0, 1.5, 3]}, "n": {"bins": 4, "range": [0, 8], "integer": True, "decode": "midpoint"},
         "c": {"categories": ["a", 7]}}
    )
    assert s.domain == pj.Domain({"x": 2, "n": 4, "c": 2})
    assert s.columns["n"].edges.tolist() == [0, 2, 4, 6, 8] and s.columns["c"].categories == ("a", "7")
    assert S.Schema.from_dict(s.to_dict()).to_dict() == s.to_dict()
    bad = [
        ({"x": {"bins": [0, 0, 1]}}, "strictly increasing"),
        ({"x": {"bins": [1]}}, "at least two edges"),
        ({"x": {"bins": 3}}, 'needs "range"'),
        ({"x": {"bins": [0, 1], "range": [0, 1]}}, "leave it out"),
        ({"x": {"bins": [0, 0.2, 0.4, 1.1], "integer": True}}, "bin 1 [0.2, 0.4) contains no integer"),
        ({"x": {"categories": ["a", "a"]}}, "duplicate categories"),
        ({"x": {"categories": [1.5]}}, "strings"),
        ({"x": {"bins": [0, 1], "categories": ["a"]}}, "exactly one of"),
        ({"x": {"categores": ["a"]}}, "exactly one of"),
        ({"x": {"bins": [0, 1], "decode": "mean"}}, "decode must be one of"),
        ({"x": {"categories": ["a"], "integer": True}}, "unknown keys ['integer']"),
        ({}, "no columns"),
    ]
    for spec, msg in bad:
        with pytest.raises(S.SchemaError, match=msg.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            S.Schema.from_dict(spec)


def test_schema_encode_boundaries_and_errors():
    s = S.Schema.from_dict({"x": {"bins": [0, 1, 2, 4]}, "c": {"categories": ["", "b"]}})
    frame = pd.DataFrame({"x": ["0", "0.999", "1", "2", "4", " 3.5"], "c": ["", "b", "b", "", "b", ""]})
    data = s.encode(frame)
    assert data.records[:, 0].tolist() == [0, 0, 1, 2, 2, 2]  # [e_i, e_i+1), the last bin closed
    assert data.records[:, 1].tolist() == [0, 1, 1, 0, 1, 0]  # the empty field is a listed category
    for x, msg in [("4.01", "value 4.01 is outside the range of its bins [0, 4]"), ("-1", "outside"),
                   ("abc", "value 'abc' is not a number"), ("", "missing or not a number")]:
        with pytest.raises(S.SchemaError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            s.encode(pd.DataFrame({"x": ["1", x], "c": ["b", "b"]}), line_offset=2)
    with pytest.raises(S.SchemaError, match="column 'c' line 3: value 'z' is not one of"):
        s.encode(pd.DataFrame({"x": ["1", "1"], "c": ["b", "z"]}), line_offset=2)
    with pytest.raises(S.SchemaError, match=r"columns \['c'\] of the schema are missing"):
        s.encode(pd.DataFrame({"x": ["1"]}))


def test_schema_decode_uniform_midpoint_integer():
    s = S.Schema.from_dict(
        {"u": {"bins": [0.0, 0.1, 10.0]}, "m": {"bins": [0, 2, 10], "decode": "midpoint"},
         "i": {"bins": [0, 3, 3.5, 7], "integer": True}, "c": {"categories": ["p", "q"]}}
    )
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, n, 4000) for n in s.domain.shape], axis=1)
    out = s.decode(codes, jax.random.key(1))
    again = s.decode(codes, jax.random.key(1))
    pd.testing.assert_frame_equal(out, again)  # seeded
    assert not np.array_equal(out["u"], s.decode(codes, jax.random.key(2))["u"])
    # uniform within the bin: re-encoding gives the codes back, and the draws fill the bin
    assert np.array_equal(s.encode(out).records, codes)
    u1 = out["u"][codes[:, 0] == 1].to_numpy()
    assert u1.min() < 0.5 and u1.max() > 9.5 and abs(u1.mean() - 5.05) < 0.3
    assert set(out["m"]) == {1.0, 6.0}  # midpoints
    i = out["i"].to_numpy()
    assert out["i"].dtype.kind == "i"
    assert set(i[codes[:, 2] == 0]) == {0, 1, 2} and set(i[codes[:, 2] == 1]) == {3} and set(i[codes[:, 2] == 2]) == {4, 5, 6, 7}
    assert set(out["c"]) == {"p", "q"} and all(isinstance(v, str) for v in out["c"])
    mid = S.Schema.from_dict({"i": {"bins": [0, 3, 3.5, 7], "integer": True}}, decode="midpoint")
    assert mid.decode(np.array([[0], [1], [2]]), jax.random.key(0))["i"].tolist() == [1, 3, 5]


def test_infer_schema_rules():
    frame = pd.DataFrame(
        {"num": [str(v) for v in np.arange(100) * 1.5],
         "few": ["10", "9", "10", "2"] * 25,
         "txt": ["b", "a", "", "c"] * 25}
    )
    spec, notes = S.infer_schema(frame, bins=5, max_categories=10)
    assert spec["num"]["bins"][0] <= 0 and spec["num"]["bins"][-1] >= 148.5 and len(spec["num"]["bins"]) == 6
    assert "integer" not in spec["num"]
    assert spec["few"] == {"categories": ["2", "9", "10"]}  # numbers sorted numerically
    assert spec["txt"] == {"categories": ["", "a", "b", "c"]} and any("empty" in n for n in notes)
    s = S.Schema.from_dict(spec)
    assert np.array_equal(s.decode(s.encode(frame), jax.random.key(0))["few"], frame["few"])
    spec, _ = S.infer_schema(pd.DataFrame({"age": [str(v) for v in range(17, 91)]}), bins=8, max_categories=10)
    assert spec["age"]["integer"] is True and spec["age"]["bins"][0] == 17 and spec["age"]["bins"][-1] == 90
