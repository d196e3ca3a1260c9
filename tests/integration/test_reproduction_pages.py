"""The papers' reproduction pages (``docs/reproductions/``) stay true to the repository.

Every page the index lists exists; each experiment table has the five columns (the paper's experiment, its setup
and result, ours, the command, the file); every command names a script of a bench suite with options that script
takes; and every linked file exists.
"""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest

from bench.suites import SUITES

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "reproductions"
COLUMNS = ["paper's experiment", "paper's setup and stated result", "ours: setup and result", "command", "file"]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def _listed_pages() -> list[str]:
    index = (PAGES / "index.md").read_text()
    return sorted({m for m in re.findall(r"\]\(([\w-]+\.md)\)", index)})


def _table(page: pathlib.Path) -> list[list[str]]:
    """The experiment table's rows (cells stripped), header first: the first table whose header is COLUMNS."""
    rows, inside = [], False
    for line in page.read_text().splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not inside and cells == COLUMNS:
                inside = True
            if inside:
                rows.append(cells)
        elif inside:
            break
    return rows


def test_the_index_lists_five_pages_one_per_paper_and_each_exists():
    pages = _listed_pages()
    assert len(pages) == 5, pages
    missing = [p for p in pages if not (PAGES / p).exists()]
    assert not missing, f"listed in docs/reproductions/index.md but absent: {missing}"


def _commands(cell: str) -> list[str]:
    return [c for c in re.findall(r"`([^`]+)`", cell) if c.startswith("python -m bench")]


def _script(command: str) -> str:
    """The bench module a command runs: ``python -m bench SUITE SCRIPT ...``, ``python -m bench SUITE ...`` (the
    suite's first script) or ``python -m bench.SCRIPT ...``."""
    words = shlex.split(command)
    assert words[:2] == ["python", "-m"], command
    if words[2].startswith("bench."):
        return words[2].split(".", 1)[1]
    assert words[2] == "bench" and len(words) > 3 and words[3] in SUITES, f"{command!r}: no such suite"
    suite = SUITES[words[3]]
    if len(words) > 4 and words[4] in suite.commands:
        return words[4]
    return suite.scripts[0]


@pytest.mark.parametrize("page", _listed_pages())
def test_every_row_has_a_command_of_a_bench_script_and_files_that_exist(page):
    path = PAGES / page
    if not path.exists():
        pytest.fail(f"docs/reproductions/{page} is listed in the index but absent")
    rows = _table(path)
    assert rows, f"{page}: no experiment table with the columns {COLUMNS}"
    body = rows[2:]  # after the header and its rule
    assert len(body) >= 3, f"{page}: {len(body)} experiments"
    scripts = {m for s in SUITES.values() for m in s.commands}
    for cells in body:
        assert len(cells) == len(COLUMNS), f"{page}: a row with {len(cells)} cells: {cells[0]!r}"
        for command in _commands(cells[3]):
            assert _script(command) in scripts, f"{page}: {command!r} runs no bench script"
    text = path.read_text()
    for target in LINK.findall(text):
        if "://" in target:
            continue
        resolved = (path.parent / target).resolve()
        assert resolved.exists(), f"{page}: the link {target!r} leads nowhere"


def test_a_command_names_a_suite_and_script_that_exist():
    assert _script("python -m bench papers figure1 --datasets titanic") == "figure1"
    assert _script("python -m bench scalability") == "scalability"
    assert _script("python -m bench.rr_experiments --quick") == "rr_experiments"
    with pytest.raises(AssertionError, match="no such suite"):
        _script("python -m bench nosuch figure1")


def test_every_bench_command_the_docs_quote_runs_a_script_of_a_suite():
    """Beyond the reproduction pages: a ``python -m bench ...`` command quoted anywhere in the documentation, the
    README or the bench README names a suite and script that exist (a reader copies it)."""
    scripts = {m for s in SUITES.values() for m in s.commands}
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", ROOT / "bench" / "README.md"]
    wrong = []
    for path in pages:
        for command in re.findall(r"`(python -m bench[ .][^`]*)`", path.read_text(encoding="utf-8")):
            if "SUITE" in command or "SCRIPT" in command or "<" in command:  # a pattern, not a command
                continue
            if shlex.split(command)[3:4] in (["--list"], ["all"]):  # the runner's own commands
                continue
            try:
                ok = _script(command) in scripts
            except AssertionError:
                ok = False
            if not ok:
                wrong.append(f"{path.relative_to(ROOT)}: {command}")
    assert not wrong, wrong
