"""The command-line page's recipe (docs/cli.md, "A release, step by step") runs as written.

Its bash block is read from the page and run in a fresh folder, on a smaller generated table (2,000 records
instead of 20,000) and 8 of AIM's rounds (the same commands, a shorter run), in this process
(``pgmjax.cli.parser.main``, the console script's entry, and the Python line itself); each step's outputs must exist
and the release's report must say the budget was spent in full.
"""

import json
import pathlib
import re
import shlex

ROOT = pathlib.Path(__file__).resolve().parents[2]


def recipe_commands() -> list[str]:
    """The commands of the page's first bash block, continuation lines joined, comments dropped."""
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    block = re.search(r"## A release, step by step\n+```bash\n(.*?)```", page, re.S).group(1)
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_recipe_is_what_the_page_shows():
    cmds = recipe_commands()
    assert [shlex.split(c)[:2] for c in cmds] == [["python", "-c"], ["pgmjax", "run"], ["pgmjax", "sample"],
                                                  ["pgmjax", "report"]]


def test_the_recipe_runs(tmp_path, monkeypatch, capsys):
    from pgmjax.cli.parser import main

    monkeypatch.chdir(tmp_path)
    for cmd in recipe_commands():
        argv = shlex.split(cmd.replace("raw_table(20_000)", "raw_table(2_000)"))
        if argv[0] == "python":  # python -c CODE
            exec(compile(argv[2], "<recipe>", "exec"), {})
            continue
        if argv[1] == "run":
            argv += ["--rounds", "8"]  # AIM's default rounds are 16 per attribute: fewer, for a shorter run
        assert main(argv[1:]) == 0, (cmd, capsys.readouterr().err[-2000:])
    for name in ("people.csv", "synthetic.csv", "report.json", "model", "more.csv", "utility.html"):
        assert (tmp_path / name).exists(), name
    assert len((tmp_path / "more.csv").read_text().splitlines()) == 100_001  # the header and 100,000 records
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["mechanism"] == "aim" and report["privacy"]["fraction_spent"] == 1.0
    assert report["privacy"]["epsilon_given"] == 1.0 and report["ledger"]
