"""MkDocs hooks for pgmjax's documentation site (``hooks:`` in mkdocs.yml; not part of the package).

The pages under ``docs/`` link to files outside it the way GitHub reads them (``../bench/results/engine/x.png``,
``../notebooks/01_quickstart_titanic.ipynb``), so the Markdown works on GitHub too. For the site, these
hooks copy the linked repository files (benchmark results, their notes, the notebooks) into the built site
under the same relative path, and rewrite each such link to the copy; a link to a folder of results points
to the performance page's list. A link to a repository file that is not copied stays a broken link, which
``mkdocs build --strict`` reports.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

# Repository folders (relative to the repository root) whose top-level files the site carries; every suite's
# folder of results (bench/results/<suite>/, written by bench.schema) is added to them.
COPIED = ("bench", "notebooks")
RESULTS = "bench/results"
SUFFIXES = {".png", ".json", ".md", ".html", ".txt", ".ipynb"}
# Folders linked as a whole: where the link leads on the site (the results folder and each suite's).
RESULT_FILES = "performance.md#result-files"

_LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?\))")


class _Copy(File):
    """A repository file copied as it is (never rendered as a page, whatever its suffix)."""

    def is_documentation_page(self) -> bool:
        return False

    def is_static_page(self) -> bool:
        return False

    def is_media_file(self) -> bool:
        return True

    def is_javascript(self) -> bool:
        return False

    def is_css(self) -> bool:
        return False


def _repo(config) -> Path:
    return Path(config["docs_dir"]).resolve().parent


def _suites(repo: Path) -> list[Path]:
    """The suites' result folders, ``bench/results/<suite>/``."""
    return sorted(p for p in (repo / RESULTS).glob("*") if p.is_dir())


def _folders(repo: Path) -> dict:
    """Folders linked as a whole and where each link leads."""
    return {RESULTS: RESULT_FILES, **{p.relative_to(repo).as_posix(): RESULT_FILES for p in _suites(repo)}}


def on_files(files, config):
    repo = _repo(config)
    # the copied folders' top-level files; a suite's results with its folders of parts (a grid run cell by cell)
    found = [path for folder in COPIED for path in (repo / folder).glob("*")]
    found += [path for suite in _suites(repo) for path in suite.rglob("*")]
    for path in sorted(found):
        if path.is_file() and path.suffix in SUFFIXES:
            rel = path.relative_to(repo).as_posix()
            f = _Copy(rel, str(repo), config["site_dir"], config["use_directory_urls"])
            f.dest_uri = rel
            files.append(f)
    return files


def _result_files(repo: Path) -> str:
    """The table of reports in each suite's folder of bench/results (suite, first line, report, JSON, plot), as
    links the hook rewrites."""
    rows = ["| suite | report | files |", "|---|---|---|"]
    for folder in _suites(repo):
        rel = folder.relative_to(repo).as_posix()
        for md in sorted(folder.glob("*.md")):
            lines = md.read_text(encoding="utf-8").splitlines()
            title = lines[0].lstrip("# ").strip() if lines else md.stem
            title = title.replace("|", "\\|")
            links = [f"[{md.name}](../{rel}/{md.name})"]
            for suffix in (".json", ".png"):
                if md.with_suffix(suffix).is_file():
                    links.append(f"[{md.stem}{suffix}](../{rel}/{md.stem}{suffix})")
            rows.append(f"| {folder.name} | {title} | {', '.join(links)} |")
    return "\n".join(rows)


_CLI_OPTIONS = re.compile(r"<!-- cli-options: (\w+) -->")


def _cli_options(command: str) -> str:
    """The options of ``pgmjax <command>`` as tables, one per argument group, read from the parser itself (so the
    page cannot fall behind ``--help``)."""
    import argparse

    from pgmjax.cli.parser import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for group in sub.choices[command]._action_groups:
        actions = [a for a in group._group_actions if a.option_strings and a.dest != "help"]
        if not actions:
            continue
        if group.title not in ("options", "optional arguments"):
            out += [f"**{group.title.capitalize()}**", ""]
        out += ["| option | meaning |", "|---|---|"]
        for a in actions:
            meta = a.metavar or ("{" + ",".join(map(str, a.choices)) + "}" if a.choices else
                                 ("" if a.nargs == 0 else a.dest.upper()))
            flags = ", ".join(a.option_strings) + (f" {meta}" if meta else "")
            meaning = " ".join((a.help or "").replace("%%", "%").split()).replace("|", "\\|")
            out.append(f"| `{flags}` | {meaning} |")
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):
    if "<!-- result-files -->" in markdown:
        markdown = markdown.replace("<!-- result-files -->", _result_files(_repo(config)))
    markdown = _CLI_OPTIONS.sub(lambda m: _cli_options(m.group(1)), markdown)
    here = posixpath.dirname(page.file.src_uri)
    folders = _folders(_repo(config))
    depth = len([p for p in here.split("/") if p])

    def sub(m):
        target = m.group(2)
        if "://" in target or not target.startswith("../"):
            return m.group(0)
        joined = posixpath.normpath(posixpath.join("docs", here, target))   # relative to the repository
        if joined.startswith("docs/") or joined.startswith(".."):
            return m.group(0)
        up = "../" * depth
        key = joined.rstrip("/")
        if key in folders:
            return f"{m.group(1)}{up}{folders[key]})"
        if files.get_file_from_path(joined) is not None:
            return f"{m.group(1)}{up}{joined}{m.group(3)}"
        return m.group(0)

    out, fence = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
        out.append(line if fence else _LINK.sub(sub, line))
    return "\n".join(out)


# A Sphinx role left raw in a built page (docs/griffe_roles.py turns the docstrings' into links): as mkdocs renders
# it, ":func:" then the target in a code span. A warning, so `mkdocs build --strict` fails on it.
_RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const|type):(?:<code>|`)")


def on_page_content(html, page, config, files):
    raw = _RAW_ROLE.findall(html)
    if raw:
        import logging

        logging.getLogger("mkdocs.plugins.pgmjax").warning(
            "%s: %d Sphinx role(s) printed raw (%s...); write them as :func:`pgmjax.x` in a docstring "
            "(docs/griffe_roles.py links those) or as a Markdown link in a page", page.file.src_uri, len(raw), raw[0])
    return html
