"""Old module paths kept by deprecation shims (issue 45): they import, warn naming the new path, and re-export it.

The private preprocessing moved from ``pgmjax.data`` to the layer ``pgmjax.preprocessing`` (above the privacy
layer: it spends budget) and the benchmark catalogue to ``pgmjax.datasets`` (above the graph layer: its cliques'
draw bounds the junction tree). ``pj.preprocess`` and ``pj.datasets`` name the new homes without a warning;
code inside the repository uses the new paths only (checked here for the tests, docs and notebooks, and by
tests/integration/test_layout.py for the package).
"""

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

from test_layout import deprecation_shims  # same folder: pytest puts it on sys.path

ROOT = pathlib.Path(__file__).resolve().parents[2]
MOVED = ("preprocess", "private_bins", "private_range", "private_format", "raw_aggregates", "raw_engines", "ranks",
         "polars_fields")
#: Old path -> new module. A shim disappears only with a CHANGELOG entry (and an edit here).
SHIMS = {f"pgmjax.data.{m}": f"pgmjax.preprocessing.{m}" for m in MOVED} | {"pgmjax.data.datasets": "pgmjax.datasets"}


def test_the_shims_are_the_ones_the_layout_test_recognises():
    assert deprecation_shims() == SHIMS


@pytest.mark.parametrize("old", sorted(SHIMS))
def test_an_old_path_warns_and_re_exports_the_new_module(old, monkeypatch):
    new = importlib.import_module(SHIMS[old])
    # A fresh import (an earlier test may have imported the shim): the warning is raised on import.
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"{re.escape(old)} is deprecated: import {re.escape(SHIMS[old])}"):
        shim = importlib.import_module(old)
    public = getattr(new, "__all__", None) or [n for n in vars(new) if not n.startswith("_")]
    assert public
    assert all(getattr(shim, n) is getattr(new, n) for n in public), old


def test_the_top_level_names_are_the_new_modules_without_a_warning():
    """``pj.preprocess`` and ``pj.datasets`` (and the package, the CLI) import no shim: in a fresh process with
    DeprecationWarning an error."""
    code = ("import sys, pgmjax as pj, pgmjax.cli, pgmjax.cli.preprocessing, pgmjax.cli.engine_inputs; "
            "import pgmjax.preprocessing.preprocess as p, pgmjax.datasets as d; "
            "assert pj.preprocess is p and pj.datasets is d, (pj.preprocess, pj.datasets); "
            "pj.preprocess.private_schema, pj.datasets.benchmark_cliques, pj.engines.open_dataset, pj.schema.Schema; "
            f"print(sorted(m for m in {sorted(SHIMS)!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def _old_path_uses(text: str) -> list[str]:
    names = "|".join([*MOVED, "datasets"])
    dotted = re.findall(rf"\bpgmjax\.data\.(?:{names})\b", text)
    from_data = re.findall(rf"from (?:pgmjax|\.+)\.?data import [^\n]*\b(?:{names})\b", text)
    return dotted + from_data


def test_the_finder_sees_old_paths():
    assert _old_path_uses("from pgmjax.data.preprocess import private_schema") == ["pgmjax.data.preprocess"]
    assert _old_path_uses("from ..data import datasets\n") == ["from ..data import datasets"]
    assert _old_path_uses("pgmjax.data.dataset, pgmjax.preprocessing.preprocess, from pgmjax.data import schema") == []


def test_the_repository_uses_the_new_paths():
    """Tests, docs, notebooks, the benchmarks and the package's own docstrings name the new modules
    (CHANGELOG.md keeps its history)."""
    here = pathlib.Path(__file__).resolve()
    paths = [*ROOT.glob("pgmjax/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("docs/**/*.md"),
             *ROOT.glob("bench/**/*.py"), *ROOT.glob("bench/**/*.md"),
             *ROOT.glob("notebooks/*.ipynb"), ROOT / "README.md"]
    shim_files = {ROOT.joinpath(*old.split(".")).with_suffix(".py") for old in SHIMS}
    found = {}
    for path in paths:
        if path == here or path in shim_files:
            continue
        uses = _old_path_uses(path.read_text(encoding="utf-8"))
        if uses:
            found[str(path.relative_to(ROOT))] = uses
    assert not found, f"deprecated module paths in use (import the new home): {found}"
