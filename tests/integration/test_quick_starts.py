"""The quick starts a newcomer copies (the README's and the guide's) run on a fresh machine: no benchmark data
folder, any working directory. Issue 57: the guide's read ../shared/data and failed without it."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Each block in a fresh namespace of one process (one import of JAX for both).
RUN = r"""
import sys
for path in sys.argv[1:]:
    exec(compile(open(path).read(), path, "exec"), {"__name__": "__quickstart__"})
    print("ran", path)
"""


def _quick_start(page: pathlib.Path) -> str:
    """The first ```python block under the page's "## Quick start" heading."""
    text = page.read_text()
    assert "## Quick start" in text, f"{page.name} has no Quick start section"
    return text.split("## Quick start", 1)[1].split("```python", 1)[1].split("```", 1)[0]


def test_the_quick_starts_run_without_the_data_folder(tmp_path):
    blocks = []
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        block = tmp_path / f"{page.stem}.py"
        block.write_text(_quick_start(page))
        blocks.append(str(block))
    # No data folder anywhere it is searched: $PGMJAX_DATA names an absent folder, the working directory is
    # empty. (The folder beside the repository may exist; the blocks must not need it: they name no data file.)
    for block in blocks:
        assert "shared/data" not in pathlib.Path(block).read_text()
    env = {**os.environ, "PGMJAX_DATA": str(tmp_path / "no-data-here"), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", RUN, *blocks], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("ran ") == 2, done.stdout
