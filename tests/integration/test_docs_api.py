"""The documentation site's API reference covers every public name (fast: reads docs/, builds nothing).

Every name of ``pgmjax.__all__``, of every module it exports and of every sub-package with an ``__all__``
(plus ``pgmjax.kernels`` and the mechanisms' ``registry``) must have an entry in the pages under ``docs/``:
a ``::: identifier`` block (mkdocstrings) naming it or the same object under another public path. After
adding a public name, run ``python docs/gen_api.py``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import types
from pathlib import Path

import pytest

import pgmjax

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _identifiers() -> set[str]:
    found = set()
    for page in DOCS.rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        found.update(re.findall(r"^::: ([\w.]+)", text, flags=re.M))
    return found


def _resolve(identifier: str):
    parts = identifier.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


def _public_modules() -> list[types.ModuleType]:
    mods = [pgmjax]
    mods += [m for m in (getattr(pgmjax, n) for n in pgmjax.__all__) if isinstance(m, types.ModuleType)]
    for info in pkgutil.walk_packages(pgmjax.__path__, "pgmjax."):
        if info.ispkg:
            mods.append(importlib.import_module(info.name))
    mods += [importlib.import_module("pgmjax.kernels"), importlib.import_module("pgmjax.mechanisms.registry")]
    out, seen = [], set()
    for m in mods:
        if hasattr(m, "__all__") and m.__name__ not in seen:
            seen.add(m.__name__)
            out.append(m)
    return out


def test_every_public_name_has_an_api_entry():
    identifiers = _identifiers()
    documented = {id(_resolve(i)) for i in identifiers}
    missing = []
    for mod in _public_modules():
        for name in mod.__all__:
            obj = getattr(mod, name)
            if f"{mod.__name__}.{name}" in identifiers or id(obj) in documented:
                continue
            missing.append(f"{mod.__name__}.{name}")
    assert not missing, f"public names with no entry under docs/ (run python docs/gen_api.py): {missing}"


def test_api_pages_are_in_the_navigation():
    nav = (DOCS.parent / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "api").glob("*.md"))
    assert pages and all(p in nav for p in pages), [p for p in pages if p not in nav]


def test_every_mechanism_has_a_page():
    for name in pgmjax.mechanisms.registry.MECHANISMS:
        page = DOCS / "mechanisms" / f"{name}.md"
        assert page.is_file(), page
        assert f"::: pgmjax.mechanisms.{name}\n" in page.read_text(encoding="utf-8")


def test_the_notebook_pages_are_those_of_the_committed_notebooks():
    """docs/notebooks/ holds exactly what docs/gen_notebooks.py makes of notebooks/ (run it after changing a
    notebook), and every page is in the navigation."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen_notebooks", root / "docs" / "gen_notebooks.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    want = gen.pages()
    have = {p.name: p.read_bytes() for p in (root / "docs" / "notebooks").iterdir()}
    assert sorted(have) == sorted(want), "run python docs/gen_notebooks.py"
    stale = [name for name in want if have[name] != want[name]]
    assert not stale, f"pages out of date (run python docs/gen_notebooks.py): {stale}"
    nav = (root / "mkdocs.yml").read_text()
    assert all(f"notebooks/{name}" in nav for name in want if name.endswith(".md"))
    assert len(want) > 5 and any(name.endswith(".png") for name in want)


def _roles():
    """``docs/griffe_roles.py``, imported from its file (the docs folder is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("griffe_roles", DOCS / "griffe_roles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sphinx_roles_become_links_titled_as_sphinx_would():
    roles = _roles()
    text = "Use :func:`~pgmjax.estimation.estimate` or :class:`pgmjax.Domain`, :meth:`marginal()`, :py:data:`X`."
    out = roles.link(text, "pgmjax.model.graphical_model", exists=lambda p: p == "pgmjax.model.graphical_model.marginal")
    assert out == ('Use <autoref identifier="pgmjax.estimation.estimate" optional><code>estimate</code></autoref> or '
                   '<autoref identifier="pgmjax.Domain" optional><code>pgmjax.Domain</code></autoref>, '
                   '<autoref identifier="pgmjax.model.graphical_model.marginal" optional><code>marginal()</code></autoref>, '
                   '<autoref identifier="pgmjax.model.graphical_model.X" optional><code>X</code></autoref>.')
    assert not roles.ROLE.search(out)


def test_every_role_in_the_package_docstrings_is_one_the_extension_links():
    """A role the extension's pattern misses would print raw on the site (the site's build also fails on one,
    docs/hooks.py); this finds it without building: every ``:word:`target``` in a docstring is a role it links."""
    import ast

    roles = _roles()
    any_role = re.compile(r":[a-z:]+:`[^`]+`")
    missed = []
    for path in sorted(Path(pgmjax.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False) or ""
                missed += [(path.name, m) for m in any_role.findall(roles.link(doc, "pgmjax"))]
    assert not missed, f"roles the documentation site would print raw: {missed[:10]}"


def test_the_site_carries_each_suite_s_results_with_their_folders_of_parts(tmp_path):
    """docs/hooks.py copies every suite's result files into the site, those in sub-folders too (a grid run cell by
    cell, which the reproduction pages link), and each file once. Needs the docs extra (mkdocs), as the hooks do."""
    import importlib.util

    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') is not installed")
    spec = importlib.util.spec_from_file_location("pgmjax_docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    files = hooks.on_files([], {"docs_dir": str(DOCS), "site_dir": str(tmp_path), "use_directory_urls": True})
    uris = [f.dest_uri for f in files]
    assert len(uris) == len(set(uris))
    parts = [u for u in uris if u.startswith("bench/results/") and u.count("/") >= 4]
    assert any(u.startswith("bench/results/papers/figure1_current_parts/") for u in parts), parts[:5]
    assert "bench/results/mechanisms/default_mechanism_cpu.md" in uris and "bench/NOTES.md" in uris
