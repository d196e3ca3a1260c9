"""``bench/`` as a suite (issue 44): the runner lists its suites, every suite's module imports as part of the
``bench`` package (no ``sys.path`` edits), and the one schema writer records machine, commit, versions, date
and command. Seconds: the imports run in one child interpreter, no benchmark runs."""

import ast
import json
import os
import pathlib
import re
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

#: One-off studies retired with issue 58 (their results stay in bench/results/; bench/README.md lists them).
RETIRED_58 = ("low_variance", "private_preprocessing", "synthesizer_tools", "mbi_door", "constraints", "mbi_constraints",
              "public_data", "public_fits", "jam_reference", "pair_sweep",
              "approximate_records", "data_engines", "memory_loop", "figure1_workloads", "uncertainty_coverage",
              "gpu_plan")


#: Modules of ``bench`` that are the runner and the shared code, in no suite.
SHARED = ("__init__", "__main__", "suites", "schema", "benchutil", "children", "problems")


def test_every_bench_module_is_in_a_suite_or_shared():
    """A module in no suite is neither listed nor imported by the tests that import every suite's modules."""
    from bench.suites import SUITES

    listed = {m for s in SUITES.values() for m in s.modules}
    loose = sorted(f[:-3] for f in os.listdir(BENCH) if f.endswith(".py") and f[:-3] not in listed | set(SHARED))
    assert not loose, f"bench modules in no suite (add them to bench/suites.py as a script, helper or part): {loose}"


def test_the_retired_scripts_and_flat_results_are_gone():
    from bench.suites import SUITES

    assert not [m for m in RETIRED + RETIRED_58 if os.path.exists(os.path.join(BENCH, f"{m}.py"))]
    assert not set(RETIRED + RETIRED_58) & {m for s in SUITES.values() for m in s.modules}
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


def test_no_test_edits_sys_path():
    """Tests import the bench package as ``bench`` and other files by location, never by editing ``sys.path``."""
    edit = re.compile(r"sys\.path\.(?:insert|append|extend|remove)\(|sys\.path\s*=[^=]")
    tests = os.path.join(ROOT, "tests")
    hits = [os.path.relpath(os.path.join(folder, name), ROOT)
            for folder, _, files in os.walk(tests) for name in files
            if name.endswith(".py") and edit.search(open(os.path.join(folder, name), encoding="utf-8").read())]
    assert not hits, hits


def bench_imports() -> dict[str, set[str]]:
    """Each bench module's imports of other bench modules (any depth: module level and inside functions)."""
    out = {}
    for path in pathlib.Path(BENCH).glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "bench":
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith("bench.")}
        out[path.stem] = deps - {path.stem}
    return out


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in ``graph`` (module -> modules it imports), as a path, or None."""
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack + [m, d]
            if d in graph and not state.get(d) and (found := visit(d, stack + [m])):
                return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if not state.get(m) and (found := visit(m, [])):
            return found
    return None


def test_bench_modules_import_no_circle():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # the check finds one
    assert find_circle({"a": {"b"}, "b": set()}) is None
    circle = find_circle(bench_imports())
    assert circle is None, f"import circle in bench: {' -> '.join(circle)}"


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


# ----------------------------------------------------------------------------- issue 46: AIM traces against mbi
def _trace(points, final=None):
    out = [{"round": k, "seconds": s, "error": e, "eval_s": 0.01} for k, (s, e) in enumerate(points, 1)]
    return out + ([{"round": "final", "seconds": final[0], "error": final[1], "eval_s": 0.01}] if final else [])


def _fabricated_result():
    """Two seeds of AIM on one dataset: pgmjax's full runs, mbi's first 2 rounds (a subset); one MST row."""
    rows = []
    for seed, (p2, m2) in enumerate([(2.0, 50.0), (4.0, 70.0)]):
        rows.append({"dataset": "toy", "library": "pgmjax", "mechanism": "aim", "epsilon": 1.0, "seed": seed,
                     "rounds": 8, "rounds_run": 3, "wall_s": 6.0 + seed, "tvd": 0.1,
                     "trace": _trace([(1.0, 0.5), (p2, 0.4 + 0.1 * seed), (5.0, 0.3)], final=(5.5, 0.25 + 0.1 * seed))})
        rows.append({"dataset": "toy", "library": "mbi", "mechanism": "aim", "epsilon": 1.0, "seed": seed, "rounds": 8,
                     "rounds_run": 2, "wall_s": m2 + 1, "tvd": None, "trace": _trace([(20.0, 0.55), (m2, 0.45)]),
                     "subset": {"rounds_run": 2, "stopped_by": "max_rounds", "max_rounds": 2, "time_limit_s": None}})
    rows.append({"dataset": "toy", "library": "pgmjax", "mechanism": "mst", "epsilon": 1.0, "seed": 0, "wall_s": 1.0})
    return {"rows": rows}


def test_the_aim_trace_compares_pgmjax_and_mbi_at_mbis_last_round():
    """Like with like: pgmjax's time and error at mbi's last round K, the ratio, mean ± sd over seeds (by hand)."""
    from bench.aim_trace import speed_rows, summary_rows

    speed = speed_rows(_fabricated_result()["rows"])
    assert [(r["seed"], r["K"]) for r in speed] == [(0, 2), (1, 2)]
    assert [r["pgmjax_s_at_K"] for r in speed] == [2.0, 4.0] and [r["mbi_s_at_K"] for r in speed] == [50.0, 70.0]
    assert [r["ratio_at_K"] for r in speed] == [25.0, 17.5]
    assert [r["pgmjax_error_at_K"] for r in speed] == [0.4, 0.5] and [r["pgmjax_error"] for r in speed] == [0.25, 0.35]
    assert all(r["mbi_subset"] and "mbi_wall" not in r for r in speed)  # a subset has no full-run figures
    (s,) = summary_rows(speed)
    assert s["K"] == [2] and s["seeds"] == 2
    mean, sd, n = s["ratio_at_K"]
    assert n == 2 and mean == pytest.approx(21.25) and sd == pytest.approx(7.5 / 2 ** 0.5)
    assert s["mbi_wall"] == (None, None, 0)


def test_the_trace_plot_writes_one_png_per_dataset_and_the_page_links_it(tmp_path):
    from bench.aim_trace_plot import plot
    from bench.mst_aim import render

    doc = _fabricated_result()
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(doc))
    written = plot(json.loads(path.read_text()), str(path))
    assert written == [str(tmp_path / "traces_toy_eps1.png")]
    png = (tmp_path / "traces_toy_eps1.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert plot({"rows": [r for r in doc["rows"] if r["library"] == "pgmjax" and r["mechanism"] == "mst"]},
                str(tmp_path / "none")) == []  # no trace: nothing drawn
    res = {"meta": {"cpu": "c", "cores": 2, "cpu_affinity": 2, "backend": "cpu", "date": "d", "python": "3",
                    "pgmjax": "0", "jax": "0", "numpy": "0"}, "settings": {
        "delta": 1e-9, "mst_select_iters": 1, "mst_fit_iters": 1, "aim_workload": "w", "aim_rounds": 8,
        "aim_max_model_size": 1.0, "aim_max_iters": 5}, "load_start": [0, 0, 0],
        "problems": {"toy": {"dataset": "toy", "records": 10, "domain": {"a": 2}}}, **doc}
    page = render(res, str(path))
    assert "![AIM on toy, eps 1: workload error against time](traces_toy_eps1.png)" in page
    assert "**mbi ran a subset of its rounds** (--mbi-max-rounds 2)" in page and "its first 2 rounds" in page
    assert "| toy | 1 | 0 | 2 | 2.0 | 50.0 | 25.0 |" in page


def test_mst_aim_traces_aim_on_both_sides_and_stops_mbi_after_k_rounds(tmp_path):
    """A real run, seconds: the 3-column generated table (``--datasets generated<d>``), T = 5 (2 rounds), 5 iterations
    per fit; mbi's AIM stopped after round 1. Then the mbi driver alone, stopped by its time limit."""
    pytest.importorskip("mbi", reason="mbi 2.0 (the bench extra) is not installed: no comparison to run")
    out = tmp_path / "aim"
    proc = _run("-m", "bench", "mechanisms", "mst_aim", "--datasets", "generated3", "--mechanisms", "aim", "--eps", "1",
                "--seeds", "0", "--aim-rounds", "5", "--aim-max-model-size", "1", "--aim-max-iters", "5",
                "--mbi-max-rounds", "1", "--mbi-python", sys.executable, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.with_suffix(".json").read_text())
    pg, mb = (next(r for r in doc["rows"] if r["library"] == lib) for lib in ("pgmjax", "mbi"))
    assert doc["settings"]["mbi_max_rounds"] == 1 and doc["problems"]["generated3"]["records"] == 100_000
    # pgmjax: a point per round and the final model, in time order, the trace's evaluation out of wall_s
    assert [p["round"] for p in pg["trace"]] == [*range(1, pg["rounds_run"] + 1), "final"] and pg["rounds_run"] >= 2
    seconds = [p["seconds"] for p in pg["trace"]]
    assert seconds == sorted(seconds) and 0 < seconds[-1] <= pg["wall_s"] < pg["process_wall_s"]
    assert all(0 < p["error"] < 2 for p in pg["trace"]) and pg["tvd"] is not None
    # mbi: one round, then stopped: no final fit, no synthetic data, said so
    assert mb["subset"] == {**mb["subset"], "rounds_run": 1, "stopped_by": "max_rounds", "max_rounds": 1}
    assert [p["round"] for p in mb["trace"]] == [1] and 0 < mb["trace"][0]["error"] < 2 and mb["tvd"] is None
    assert mb["trace_eval_s"] > 0 and mb["wall_s"] < mb["process_wall_s"]
    page = out.with_suffix(".md").read_text()
    assert "mbi ran a subset of its rounds" in page and "(aim_generated3_eps1.png)" in page
    assert (tmp_path / "aim_generated3_eps1.png").stat().st_size > 10_000
    # the driver alone: stopped by its time limit at the end of round 1, no records written
    problem, synth = tmp_path / "problem.npz", tmp_path / "synth.npz"
    code = f"from bench.mst_aim import prepare; prepare(None, {str(problem)!r}, 'generated3')"
    assert _run("-c", code).returncode == 0
    proc = _run("-m", "bench.mbi_mst_aim", "--problem", str(problem), "--mechanism", "aim", "--rho", "0.05", "--out",
                str(synth), "--rounds", "5", "--max-model-size", "1", "--max-iters", "5", "--time-limit", "1e-6")
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["subset"]["stopped_by"] == "time_limit" and info["rounds_run"] == 1 and "trace" not in info
    assert not synth.exists()


def test_all_runs_every_script_of_every_suite_with_options_it_takes():
    """``python -m bench all --quick --out-dir DIR --dry-run`` names every suite's every script once, with its
    short-run flags and its output folder; each flag it passes is one the script's parser declares."""
    from bench.suites import OUT_POSITIONAL, QUICK, SUITES

    proc = _run("-m", "bench", "all", "--quick", "--out-dir", "/tmp/x", "--dry-run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    want = [(s.name, m) for s in SUITES.values() for m in s.scripts]
    assert [re.match(r"\[(\w+)\] -m bench\.(\w+)", line).groups() for line in lines] == want
    assert set(QUICK) <= {m for _, m in want} and OUT_POSITIONAL <= {m for _, m in want}
    for (_, module), line in zip(want, lines):
        declared = set(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", open(os.path.join(BENCH, f"{module}.py")).read()))
        flags = {a for a in line.split()[3:] if a.startswith("--")}
        assert flags <= declared, (module, flags - declared)
        assert line.endswith(f"/tmp/x/{module}"), line


def test_the_bench_readme_lists_every_suite_with_its_scripts_and_helpers():
    """bench/README.md's suite table is the registry's (``bench.suites.SUITES``), row for row."""
    from bench.suites import SUITES

    text = open(os.path.join(BENCH, "README.md"), encoding="utf-8").read()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    listed = {}
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        listed[cells[0].strip("`")] = re.findall(r"`([a-z0-9_]+)`", cells[1])
    assert listed == {s.name: list(s.scripts + s.helpers) for s in SUITES.values()}
