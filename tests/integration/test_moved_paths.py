"""Moved modules: the old paths are gone, and nothing in the repository names them.

The private preprocessing moved from ``pgmjax.data`` to the layer ``pgmjax.preprocessing`` (above the privacy
layer: it spends budget) and the benchmark catalogue to ``pgmjax.datasets`` (above the graph layer: its cliques'
draw bounds the junction tree); the old paths were deprecation shims for one release and are removed (the
changelog lists the moves). ``pj.preprocess`` and ``pj.datasets`` name the new homes.
"""

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MOVED = ("preprocess", "private_bins", "private_range", "private_format", "raw_aggregates", "raw_engines", "ranks",
         "polars_fields")
#: Old path -> new module.
MOVES = {f"pgmjax.data.{m}": f"pgmjax.preprocessing.{m}" for m in MOVED} | {"pgmjax.data.datasets": "pgmjax.datasets"}


@pytest.mark.parametrize("old", sorted(MOVES))
def test_an_old_path_is_gone_and_its_new_home_imports(old):
    with pytest.raises(ModuleNotFoundError, match=re.escape(old)):
        importlib.import_module(old)
    assert importlib.import_module(MOVES[old])


def test_the_top_level_names_are_the_new_modules():
    """``pj.preprocess`` and ``pj.datasets`` are the new modules; the package, the CLI and the engines import
    without a DeprecationWarning (in a fresh process where one is an error)."""
    code = ("import pgmjax as pj, pgmjax.cli, pgmjax.cli.preprocessing, pgmjax.cli.engine_inputs; "
            "import pgmjax.preprocessing.preprocess as p, pgmjax.datasets as d; "
            "assert pj.preprocess is p and pj.datasets is d, (pj.preprocess, pj.datasets); "
            "pj.preprocess.private_schema, pj.datasets.benchmark_cliques, pj.engines.open_dataset, pj.schema.Schema")
    out = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]


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
    found = {}
    for path in paths:
        if path == here:
            continue
        uses = _old_path_uses(path.read_text(encoding="utf-8"))
        if uses:
            found[str(path.relative_to(ROOT))] = uses
    assert not found, f"removed module paths in use (import the new home): {found}"


#: The estimators' package was ``pgmjax.fit`` until it shared its name with the function ``pj.fit``.
ESTIMATION_MODULES = sorted(p.stem for p in (ROOT / "pgmjax" / "estimation").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", ESTIMATION_MODULES)
def test_the_estimation_package_was_fit(name):
    with pytest.raises(ModuleNotFoundError, match="pgmjax.fit"):
        importlib.import_module(f"pgmjax.fit.{name}")
    assert importlib.import_module(f"pgmjax.estimation.{name}")


def test_the_repository_names_pgmjax_estimation_not_pgmjax_fit():
    old = re.compile(r"\bpgmjax\.fit\.\w|from pgmjax\.fit import|from \.+fit(?:\.| import)|\bpgmjax/fit/")
    paths = [*ROOT.glob("pgmjax/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("docs/**/*.md"),
             *ROOT.glob("bench/*.py"), *ROOT.glob("notebooks/*.ipynb"), ROOT / "README.md"]
    here = pathlib.Path(__file__).resolve()
    found = {str(p.relative_to(ROOT)): old.findall(p.read_text(encoding="utf-8")) for p in paths if p != here}
    assert not {k: v for k, v in found.items() if v}
