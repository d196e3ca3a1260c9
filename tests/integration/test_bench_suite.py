"""``bench/`` as a suite (issue 44): the runner lists its suites, every suite's module imports as part of the
``bench`` package (no ``sys.path`` edits), and the one schema writer records machine, commit, versions, date
and command. Seconds: the imports run in one child interpreter, no benchmark runs."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench")


def _run(*args, **kw):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, **kw)


def test_the_runner_lists_every_suite_with_one_line():
    from bench.suites import SUITES

    proc = _run("-m", "bench", "--list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(SUITES)
    assert all(len(line.split(None, 1)) == 2 for line in lines)  # a name and what it measures
    assert {"engine", "mechanisms", "agreement", "scalability", "papers", "gpu", "memory"} <= set(SUITES)


def test_the_runner_refuses_an_unknown_suite_or_script_by_name():
    proc = _run("-m", "bench", "no_such_suite")
    assert proc.returncode == 2 and "unknown suite 'no_such_suite'" in proc.stderr and "engine" in proc.stderr
    proc = _run("-m", "bench", "engine", "figure1")
    assert proc.returncode == 2 and "no script 'figure1'" in proc.stderr


def test_every_suite_module_imports_from_the_package_and_has_main():
    """In a fresh interpreter whose sys.path is the repository root only as the working directory gives it (some
    modules set JAX flags on import, so not in this process)."""
    from bench.suites import SUITES

    commands = sorted({m for s in SUITES.values() for m in s.commands})
    parts = sorted({m for s in SUITES.values() for m in s.parts})
    code = ("import importlib, json, sys; before = list(sys.path); out = {}\n"
            f"for m in {commands + parts!r}:\n"
            "    mod = importlib.import_module('bench.' + m); out[m] = callable(getattr(mod, 'main', None))\n"
            "print(json.dumps({'main': out, 'path_changed': sys.path != before}))")
    proc = _run("-c", code, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not got["path_changed"]
    assert all(got["main"][m] for m in commands), [m for m in commands if not got["main"][m]]


#: One-off experiments retired with issue 44 (their conclusions are in the code and CHANGELOG.md).
RETIRED = ("ab_commits", "ab_full", "ab_oracle", "compile_options", "fit_compile", "flat_layout_costs", "import_time",
           "momentum_cost", "small_noise", "mst_gap", "mst_after_report", "profile_kernels", "profile_oracle",
           "size_limit_gpu_check", "lbfgs_reliability", "precision", "pair_marginals", "engine_problems",
           "scalability_problem")


def test_the_retired_scripts_and_flat_results_are_gone():
    from bench.suites import SUITES

    assert not [m for m in RETIRED if os.path.exists(os.path.join(BENCH, f"{m}.py"))]
    assert not set(RETIRED) & {m for s in SUITES.values() for m in s.modules}
    flat = [f for f in os.listdir(os.path.join(BENCH, "results")) if os.path.isfile(os.path.join(BENCH, "results", f))]
    assert not flat, f"results belong in bench/results/<suite>/: {flat}"


def test_no_file_in_bench_edits_sys_path():
    hits = []
    for folder, dirs, files in os.walk(BENCH):
        dirs[:] = [d for d in dirs if d not in ("results", "__pycache__")]
        for name in files:
            if name.endswith((".py", ".sh", ".md")):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    if "sys.path" in f.read():
                        hits.append(os.path.relpath(os.path.join(folder, name), ROOT))
    assert not hits, hits


def test_the_schema_writer_records_the_run(tmp_path):
    from bench import schema

    meta = schema.run_meta("bench.example", ["--quick"], backend=False, extra=("mbi",), also={"load_start": [1.0]})
    assert set(meta) >= {"machine", "commit", "versions", "date", "command", "load_start"}
    assert meta["machine"]["cores"] == os.cpu_count() and "cpu" in meta["machine"] and "gpu" in meta["machine"]
    assert meta["machine"]["memory_gib"] is None or meta["machine"]["memory_gib"] > 0
    assert {"python", "jax", "jaxlib", "numpy"} <= set(meta["versions"])
    assert meta["date"].endswith("UTC") and meta["command"] == "python -m bench.example --quick"
    rows = [{"problem": "chain10", "ms_per_iter": 0.25}, {"problem": "adult", "ms_per_iter": 3.5}]
    path = schema.write_result("engine", str(tmp_path / "example"), rows, meta, quiet=True, settings={"iters": 5})
    doc = json.loads((tmp_path / "example.json").read_text())
    assert path == str(tmp_path / "example")
    assert doc["meta"] == json.loads(json.dumps(meta)) and doc["rows"] == rows and doc["settings"] == {"iters": 5}
    page = (tmp_path / "example.md").read_text()
    assert page.startswith("# example") and "Command: `python -m bench.example --quick`" in page
    assert "| chain10 | 0.25 |" in page
    # a name without a folder goes to the suite's folder of results
    assert schema.result_path("engine", "x") == os.path.join(BENCH, "results", "engine", "x")


def test_the_schema_writer_refuses_an_incomplete_record(tmp_path):
    from bench import schema

    with pytest.raises(ValueError, match="meta lacks \\['commit', 'machine'"):
        schema.write_result("engine", str(tmp_path / "x"), [], {"versions": {}, "date": "d", "command": "c"})
    assert not (tmp_path / "x.json").exists()
    # a result made of named sections: rows null, the sections beside meta
    meta = schema.run_meta("bench.example", [], backend=False)
    schema.write_result("papers", str(tmp_path / "s"), None, meta, page=["# Sections", "", "text"], quiet=True,
                        part_a={"mse": 0.5})
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["rows"] is None and doc["part_a"] == {"mse": 0.5}
    assert (tmp_path / "s.md").read_text() == "# Sections\n\ntext\n"
