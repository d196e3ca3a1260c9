"""The notebooks in notebooks/ run top to bottom without an error (nbclient, a fresh kernel each).

A notebook that loads a shared dataset reads the data folder ($PGMJAX_DATA, else ../shared/data beside the
project); without it that notebook's test skips, saying so. Each notebook must finish within TIMEOUT seconds of cell time on the 2-core CPU.
"""

import os
import pathlib
import time

import pytest

from pgmjax import datasets

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
TIMEOUT = 120  # per cell; the whole notebook is also held to it below


def _data_or_skip():
    try:
        path = datasets.data_dir()
        datasets.files("titanic", path)
    except (FileNotFoundError, OSError, ValueError) as e:
        pytest.skip(f"shared data folder not found (set PGMJAX_DATA): {e}")
    return path


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 5, NOTEBOOKS


# The quick starts run with the suite; the longer tours (every front-end, the engine's insides, batched sweeps) are
# long checks (python -m pytest -m slow).
LONG_NOTEBOOKS = {"03_icml_frontends_titanic.ipynb", "04_engine_under_the_hood.ipynb", "05_batched_sweeps_and_error_bars.ipynb"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.name in LONG_NOTEBOOKS else p
                                  for p in NOTEBOOKS], ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    nbclient = pytest.importorskip("nbclient", reason="nbclient not installed: pip install -e .[test]")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel", reason="ipykernel not installed: pip install -e .[test]")
    book = nbformat.read(path, as_version=4)
    needs_data = any("datasets.load" in c.source for c in book.cells if c.cell_type == "code")
    data = _data_or_skip() if needs_data else datasets.data_dir()
    env_before = os.environ.get("PGMJAX_DATA")
    os.environ["PGMJAX_DATA"] = os.path.abspath(data)  # the kernel inherits it
    try:
        client = nbclient.NotebookClient(book, timeout=TIMEOUT, kernel_name="python3",
                                         resources={"metadata": {"path": str(path.parent)}})
        t0 = time.perf_counter()
        client.execute()  # raises CellExecutionError naming the cell on any error
        seconds = time.perf_counter() - t0
    finally:
        if env_before is None:
            os.environ.pop("PGMJAX_DATA", None)
        else:
            os.environ["PGMJAX_DATA"] = env_before
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert seconds < 2 * TIMEOUT, f"{path.name} took {seconds:.0f} s"
