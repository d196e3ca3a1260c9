"""The package's layout: imports go down the layers, no module grows past 600 lines, private names stay private.

Read from the source files with :mod:`ast` (nothing is imported), so the checks see every module,
whether or not a test imports it, and every import statement in it: at module level, inside
functions and under ``if TYPE_CHECKING:`` alike:

* the sub-packages are stacked in ``LAYERS`` (lowest first; docs/architecture.md, "Layers"): a module
  imports from its own sub-package and the layers below it, never from a layer above, apart from
  the imports listed in ``UPWARD_IMPORTS`` and a deprecation shim's one re-export (:func:`shim_target`);
* there is no deprecation shim (a module left at an old path: a docstring, a ``DeprecationWarning`` naming the
  new module, ``from <new module> import *``, nothing else): a 0.x release moves a module outright;
* no module imports a ``_``-prefixed name from another module (a sibling in its package included),
  apart from the imports listed in ``PRIVATE_IMPORTS``;
* no module reads a ``_``-prefixed name of another module by attribute (``module._name``); the allow-list
  ``PRIVATE_ATTRIBUTE_USES`` is empty;
* the two allow-lists hold today's violations and may only shrink: a new violation fails, and so
  does an entry that no longer occurs (delete it once the code is fixed);
* the import graph has no cycle, imports inside functions included, other than through an
  allow-listed upward import; at module level none at all, apart from ``KNOWN_CYCLES``;
* no module is over 600 lines, apart from the oversized ones listed in ``OVERSIZED`` with today's
  length as a ceiling;
* the privacy package imports nothing upward (the mechanisms, the CLI, the fitting engine);
* the privacy submodules' docstring examples run, each in its own module's namespace.
* no comment or docstring holds a timing, a machine's name or a speed-up figure (those live in ``bench/``).
"""

from __future__ import annotations

import ast
import doctest
import importlib
import pathlib
import re

import jax
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Source folders and the package each one is installed as.
SOURCES = {"pgmjax": ROOT / "pgmjax"}

MAX_LINES = 600

#: Modules over MAX_LINES when this test was written, with their length then: a ceiling, not a target.
OVERSIZED = {
}

#: Module-level import cycles present when this test was written (strongly connected components of
#: the import graph). A cycle found later must lie inside one of these.
KNOWN_CYCLES: list[frozenset[str]] = []

#: The layers, lowest first: the sub-packages and top-level modules of ``pgmjax`` by their first name under
#: it (``"pgmjax"`` is the package's own ``__init__``, which re-exports the public API). A module may import
#: from its own layer and the layers below, never above (docs/architecture.md, "Layers"). A new sub-package
#: must be placed here.
LAYERS = (
    "settings", "checks", "kernels", "compiler", "data", "queries", "graph", "datasets", "model", "estimation", "programs", "privacy",
    "preprocessing", "rr", "bayes", "uncertainty", "mechanisms", "history", "synthesizer", "compat", "pgmjax", "cli",
    "__main__",
)

# The two allow-lists below are the violations present when the checks were written, as
# ``(importing module, imported module, name)`` (name "" for a whole module: ``import m``, ``from p import m``).
# They may only shrink: an entry whose import is gone fails the test until it is deleted here, and a new
# violation is never added: fix the import instead (move the shared code down a layer, or make a private
# helper public in its home module, with a docstring).

#: Imports from a higher layer (most of them inside functions, to dodge a cycle). Empty since issue 45: the private
#: preprocessing is the layer ``preprocessing`` above ``privacy``, the benchmark catalogue the module ``datasets``
#: above ``graph``. A deprecation shim's re-export is not listed here: :func:`shim_target` recognises it.
UPWARD_IMPORTS: frozenset[tuple[str, str, str]] = frozenset({
})

#: Imports inside functions that close a cycle within one sub-package (the module imported imports the importer).
CYCLE_IMPORTS: frozenset[tuple[str, str, str]] = frozenset({
})

#: Imports of another module's ``_``-prefixed name.
PRIVATE_IMPORTS: frozenset[tuple[str, str, str]] = frozenset({
})

#: Reads of another module's private name by attribute (``module._name``): none may be added.
PRIVATE_ATTRIBUTE_USES: frozenset[tuple[str, str, str]] = frozenset({
})


# ---------------------------------------------------------------------------------------------------
# The import graph, from the source
# ---------------------------------------------------------------------------------------------------


def shim_target(tree: ast.Module) -> str | None:
    """The module that a deprecation shim re-exports, or None when the module is not a shim.

    A deprecation shim keeps an old module path importing after its code moved. It is recognised by its
    whole body, statement by statement, so that no real code (an upward import among it) can pass as one:

    1. a docstring (optional);
    2. ``import warnings``;
    3. ``warnings.warn("<message>", DeprecationWarning, stacklevel=2)``, the message a string literal that
       names the new module;
    4. ``from <new module> import *``, absolute.

    Nothing else: a second import, a def, an assignment or a different warning makes it an ordinary module,
    whose every import is checked. Its one import may go up the layers (the new home may sit above the old
    path's layer); no module of the package may import a shim (internal code uses the new path).
    """
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) != 3:
        return None
    imp, warn, star = body
    if not (isinstance(imp, ast.Import) and [(a.name, a.asname) for a in imp.names] == [("warnings", None)]):
        return None
    if not (isinstance(star, ast.ImportFrom) and star.level == 0 and star.module
            and [a.name for a in star.names] == ["*"]):
        return None
    call = warn.value if isinstance(warn, ast.Expr) else None
    if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "warnings.warn" and len(call.args) == 2
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
            and star.module in call.args[0].value
            and isinstance(call.args[1], ast.Name) and call.args[1].id == "DeprecationWarning"
            and [(k.arg, ast.unparse(k.value)) for k in call.keywords] == [("stacklevel", "2")]):
        return None
    return star.module


def deprecation_shims(files=None) -> dict[str, str]:
    """Every deprecation shim of the package (:func:`shim_target`): old module -> the module it re-exports."""
    files = module_files() if files is None else files
    out = {}
    for name, path in files.items():
        target = shim_target(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        if target is not None:
            out[name] = target
    return out


def module_files() -> dict[str, pathlib.Path]:
    """Every module of the package: dotted name -> source file (a package is its ``__init__.py``)."""
    out = {}
    for package, folder in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if any(p == "__pycache__" or not p.isidentifier() for p in parts):
                continue
            out[".".join([package, *parts])] = path
    return out


def _is_package(name: str, files: dict[str, pathlib.Path]) -> bool:
    return files[name].name == "__init__.py"


def _imports(tree: ast.Module):
    """``(node, level)`` for every import statement; level is "module" or "function" (inside a def or lambda)."""
    found = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, "function" if in_function else "module"))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return found


def _resolve(name: str, node: ast.ImportFrom, files) -> str:
    """The absolute module that ``from <node.module> import ...`` in module ``name`` reads from."""
    if node.level == 0:
        return node.module or ""
    base = name.split(".") if _is_package(name, files) else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(target: str, files) -> str | None:
    """The module of the package that ``target`` names, or its closest enclosing module; None outside."""
    while target and target not in files:
        target = target.rpartition(".")[0]
    return target or None


def import_edges(files=None):
    """Every import between the package's modules: ``(importer, imported, level, names)``.

    ``from p import x`` is an edge to the module ``p.x`` when that is a module, else to ``p`` (its
    ``__init__``); ``import p.q`` is an edge to ``p.q``. ``names`` are the imported names (for
    ``from`` imports) whose source is ``imported``.
    """
    files = module_files() if files is None else files
    edges = []
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, level in _imports(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _owner(alias.name, files)
                    if target is not None and target != name:
                        edges.append((name, target, level, ()))
                continue
            source = _resolve(name, node, files)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in files:
                    edges.append((name, sub, level, ()))
                else:
                    target = _owner(source, files)
                    if target is not None and target != name:
                        edges.append((name, target, level, (alias.name,)))
    return edges


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The cycles of a directed graph: its strongly connected components with more than one node (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(frozenset(component))
    return out


def module_level_cycles(edges=None) -> list[frozenset[str]]:
    """Cycles among imports that run when a module is first imported (the ones that can break)."""
    edges = import_edges() if edges is None else edges
    graph: dict[str, set[str]] = {}
    for a, b, level, _ in edges:
        if level == "module":
            graph.setdefault(a, set()).add(b)
    return strongly_connected(graph)


def function_level_cycles(edges=None) -> list[frozenset[str]]:
    """Cycles that appear once imports inside functions are counted too (reported, not checked)."""
    edges = import_edges() if edges is None else edges
    graph: dict[str, set[str]] = {}
    for a, b, _, _ in edges:
        graph.setdefault(a, set()).add(b)
    return [c for c in strongly_connected(graph) if c not in set(module_level_cycles(edges))]


# ---------------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def edges():
    return import_edges()


def test_the_graph_sees_the_package(edges):
    files = module_files()
    assert {"pgmjax", "pgmjax.privacy", "pgmjax.privacy.accountant", "pgmjax.kernels"} <= set(files)
    assert ("pgmjax.privacy.accountant", "pgmjax.privacy.budget", "module", ("BudgetLedger",)) in edges
    # relative imports resolve: `from ..privacy import Accountant` in a mechanism reads pgmjax.privacy
    assert any(a == "pgmjax.mechanisms.spanning_tree" and b == "pgmjax.privacy" for a, b, _, _ in edges)


def test_cycle_finder():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert strongly_connected(g) == [frozenset("abc")]


def test_no_new_module_level_import_cycle(edges):
    cycles = module_level_cycles(edges)
    grown = [sorted(c) for c in cycles if not any(c <= known for known in KNOWN_CYCLES)]
    assert not grown, f"import cycles (module level): {grown}"


def test_privacy_imports_only_downward(edges):
    """The privacy package is a floor: inside it no cycle, and it reads only data-model modules below it."""
    below = {"pgmjax.checks", "pgmjax.data.dataset", "pgmjax.data.domain", "pgmjax.queries.linear", "pgmjax.queries.measurement", "pgmjax.privacy.discrete_noise", "pgmjax.privacy.randomized_response"}
    for a, b, level, _ in edges:
        if a.startswith("pgmjax.privacy") and not b.startswith("pgmjax.privacy"):
            assert b in below, f"{a} imports {b} ({level} level): the privacy layer must not import upward"
    for cycle in module_level_cycles(edges) + function_level_cycles(edges):
        assert not any(m.startswith("pgmjax.privacy") for m in cycle), sorted(cycle)


def layer(module: str) -> str:
    """The layer of a module of ``pgmjax``: its first name under the package (``pgmjax`` for the root itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _tuples(edges):
    """``(importer, imported, name)`` per imported name of each edge; name "" for a whole module."""
    for a, b, _, names in edges:
        for n in names or ("",):
            yield a, b, n


def upward_imports(edges, layers=LAYERS, shims=None) -> set[tuple[str, str, str]]:
    """``(importer, imported, name)`` for every import, inside functions too, from a higher layer than the importer's,
    apart from each deprecation shim's re-export of its target (``shims``: :func:`deprecation_shims`)."""
    rank = {name: i for i, name in enumerate(layers)}
    shims = deprecation_shims() if shims is None else shims
    return {(a, b, n) for a, b, n in _tuples(edges)
            if rank[layer(b)] > rank[layer(a)] and not (n == "*" and shims.get(a) == b)}


def private_imports(edges) -> set[tuple[str, str, str]]:
    """``(importer, imported, name)`` for every ``_``-prefixed name imported from another module, inside functions too."""
    return {(a, b, n) for a, b, n in _tuples(edges) if n.startswith("_") and not n.startswith("__")}


def private_attribute_uses(files=None) -> set[tuple[str, str, str]]:
    """``(user, module, name)`` for every ``module._name`` read by attribute in another module of the package:
    ``from . import oracle`` then ``oracle._shift(...)``, ``import pgmjax.estimation.driver as d`` then ``d._chunk``, or
    ``pgmjax.estimation.driver._chunk`` spelled out (inside functions too)."""
    files = module_files() if files is None else files
    found = set()
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bound: dict[str, str] = {}  # local name -> the package module it names
        for node, _ in _imports(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in files:
                        bound[alias.asname] = alias.name
                    elif not alias.asname:
                        top = alias.name.split(".")[0]
                        if top in files:
                            bound[top] = top
                continue
            source = _resolve(name, node, files)
            for alias in node.names:
                if f"{source}.{alias.name}" in files:
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            dotted, base = [], node.value
            while isinstance(base, ast.Attribute):
                dotted.append(base.attr)
                base = base.value
            if not isinstance(base, ast.Name) or base.id not in bound:
                continue
            module = ".".join([bound[base.id], *reversed(dotted)])
            if module in files and module != name:
                found.add((name, module, node.attr))
    return found


def _against(found: set, allowed: frozenset, what: str, name: str) -> None:
    new, gone = sorted(found - allowed), sorted(allowed - found)
    assert not new, (f"{len(new)} new {what} (fix them; {name} may only shrink):\n"
                     + "\n".join(map(repr, new)))
    assert not gone, (f"{len(gone)} entries of {name} no longer occur: delete them from the list:\n"
                      + "\n".join(map(repr, gone)))


def test_every_module_has_a_layer():
    """A new sub-package or top-level module must be placed in LAYERS."""
    assert not {layer(m) for m in module_files()} - set(LAYERS), "place these in LAYERS (lowest first)"


def test_imports_go_down_the_layers(edges):
    _against(upward_imports(edges), UPWARD_IMPORTS, "imports from a higher layer", "UPWARD_IMPORTS")


def test_no_deprecation_shim_in_a_0x_release():
    """A 0.x release moves a module without leaving its old path behind (the changelog lists the moves)."""
    assert deprecation_shims() == {}, "deprecation shims left at old module paths"


def test_no_private_name_imported_from_another_module(edges):
    """A ``_``-prefixed name is private to its module: no other module (a sibling in its package included)
    imports it; a helper that another module needs is public in its home module, with a docstring."""
    _against(private_imports(edges), PRIVATE_IMPORTS, "imports of private names", "PRIVATE_IMPORTS")


def test_no_private_name_read_by_attribute_from_another_module():
    """``module._name`` is as private as ``from module import _name``: the allow-list is empty."""
    _against(private_attribute_uses(), PRIVATE_ATTRIBUTE_USES, "reads of another module's private name by attribute",
             "PRIVATE_ATTRIBUTE_USES")


def test_the_private_attribute_check_finds_what_it_looks_for(tmp_path):
    files = _made_up_package(tmp_path, {
        "p/__init__.py": "", "p/a/__init__.py": "", "p/b/__init__.py": "",
        "p/a/m.py": "from ..b import n\nimport p.b.n as alias\nimport p\n"
                    "def f():\n    return n._x, alias._y, p.b.n._z, n.public, n.__doc__\n",
        "p/b/n.py": "_x = _y = _z = public = 1\ndef g():\n    return _x\n",
    })
    assert private_attribute_uses(files) == {("p.a.m", "p.b.n", "_x"), ("p.a.m", "p.b.n", "_y"),
                                             ("p.a.m", "p.b.n", "_z")}


def test_no_cycle_even_inside_functions(edges):
    """With imports inside functions counted, every cycle passes through an allow-listed import (upward, or
    one of CYCLE_IMPORTS, each of which must still close a cycle)."""
    allowed = UPWARD_IMPORTS | CYCLE_IMPORTS
    graph: dict[str, set[str]] = {}
    for a, b, n in _tuples(edges):
        if (a, b, n) not in allowed:
            graph.setdefault(a, set()).add(b)
    cycles = strongly_connected(graph)
    assert not cycles, f"import cycles (imports inside functions counted): {[sorted(c) for c in cycles]}"
    found = set(_tuples(edges))
    closing = {(a, b, n) for a, b, n in CYCLE_IMPORTS if (a, b, n) in found and a in _reachable(graph, b)}
    _against(closing, CYCLE_IMPORTS, "cycle-closing imports", "CYCLE_IMPORTS")


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _made_up_package(tmp_path, sources: dict[str, str]) -> dict[str, pathlib.Path]:
    for rel, text in sources.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    files = {}
    for path in sorted((tmp_path / "p").rglob("*.py")):
        parts = list(path.relative_to(tmp_path).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def test_the_checks_find_violations(tmp_path):
    """On a made-up package: private names of any other module are reported (a sibling's too), imports
    inside functions count, and an import from a higher layer is reported where a lower one is not."""
    files = _made_up_package(tmp_path, {
        "p/__init__.py": "", "p/a/__init__.py": "", "p/b/__init__.py": "",
        "p/a/m.py": "from ..b.n import _secret, public\nfrom .k import _shared\n"
                    "def f():\n    from ..b import n\n    from ..b.n import _late\n",
        "p/a/k.py": "_shared = 1\n", "p/b/n.py": "_secret = public = _late = 1\nfrom . import _own\n",
        "p/b/_own.py": "",
    })
    edges = import_edges(files)
    assert private_imports(edges) == {("p.a.m", "p.b.n", "_secret"), ("p.a.m", "p.a.k", "_shared"),
                                      ("p.a.m", "p.b.n", "_late")}
    assert upward_imports(edges, layers=("p", "a", "b")) == {
        ("p.a.m", "p.b.n", "_secret"), ("p.a.m", "p.b.n", "public"), ("p.a.m", "p.b.n", ""),
        ("p.a.m", "p.b.n", "_late")}
    assert upward_imports(edges, layers=("p", "b", "a")) == set()


SHIM = ('"""Deprecated path."""\nimport warnings\n\n'
        'warnings.warn("p.a.old is deprecated: import p.b.new instead", DeprecationWarning, stacklevel=2)\n'
        'from p.b.new import *  # noqa\n')


@pytest.mark.parametrize("impostor", [
    SHIM + "from p.b.other import thing\n",                          # a second (upward) import
    SHIM + "def f():\n    return 1\n",                               # code
    SHIM.replace("DeprecationWarning", "UserWarning"),               # another warning
    SHIM.replace("import p.b.new instead", "import it elsewhere"),   # the message does not name the new module
    SHIM.replace("from p.b.new import *", "from p.b.new import thing"),  # not a re-export of the whole module
    SHIM.replace("import warnings\n", "import warnings, os\n"),
])
def test_only_a_whole_shim_is_one(tmp_path, impostor):
    """A shim's re-export is exempt from the layer check; a module that adds anything to a shim's body is not a
    shim, and its imports (the star import included) count as upward imports."""
    files = _made_up_package(tmp_path, {"p/__init__.py": "", "p/a/__init__.py": "", "p/b/__init__.py": "",
                                        "p/b/new.py": "thing = 1\n", "p/b/other.py": "thing = 1\n",
                                        "p/a/old.py": SHIM, "p/a/fake.py": impostor})
    shims = deprecation_shims(files)
    assert shims == {"p.a.old": "p.b.new"}
    found = upward_imports(import_edges(files), layers=("p", "a", "b"), shims=shims)
    assert found and {a for a, _, _ in found} == {"p.a.fake"}, found


def test_module_sizes():
    over = {}
    for name, path in module_files().items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        ceiling = OVERSIZED.get(name, MAX_LINES)
        if n > ceiling:
            over[name] = (n, ceiling)
    assert not over, f"modules over their line ceiling (lines, ceiling): {over}"


def test_privacy_modules_are_small():
    # ~400 lines each; the Accountant (one method per mechanism) may reach 450.
    for name, path in module_files().items():
        if name.startswith("pgmjax.privacy"):
            assert len(path.read_text(encoding="utf-8").splitlines()) <= 450, name


# The package's own __test__ re-runs its public names' examples in its namespace (tests/privacy/test_privacy.py).
PRIVACY_MODULES = sorted(n for n in module_files() if n.startswith("pgmjax.privacy."))


@pytest.mark.parametrize("name", PRIVACY_MODULES)
def test_privacy_docstring_examples(name):
    """Each submodule's examples run in that module's own namespace: every name they use is defined or imported there."""
    module = importlib.import_module(name)
    result = doctest.testmod(module, extraglobs={"jax": jax, "np": np}, optionflags=doctest.ELLIPSIS, report=True)
    assert result.failed == 0


# ---------------------------------------------------------------------------------------------------
# No hidden state in the engine's call path
# ---------------------------------------------------------------------------------------------------

#: The engine's layers: what a fit, a model's answers and the compiled programs run through.
ENGINE_LAYERS = ("checks", "kernels", "compiler", "data", "queries", "graph", "model", "estimation")

#: Environment reads in the engine's layers, as ``(module, function)``; may only shrink. None: the process settings the
#: engine takes from the environment (``XLA_FLAGS``'s level, ``PGMJAX_MAX_MODEL_BYTES``) are read once, at import, by
#: :mod:`pgmjax.settings`, below the engine, and the engine reads that one object.
ENVIRONMENT_READS: frozenset = frozenset()


def hidden_state(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The functions of a module that read the environment (``os.environ``, ``os.getenv``, ``environ``), and
    every use of a context variable (``contextvars``), each named by its enclosing function (``<module>`` at
    module level)."""
    env, ctx = set(), set()

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
            if isinstance(child, ast.Attribute) and child.attr in ("environ", "getenv", "environb"):
                env.add(scope)
            if isinstance(child, ast.Name) and child.id in ("environ", "getenv"):
                env.add(scope)
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in child.names] + ([child.module] if isinstance(child, ast.ImportFrom) else [])
                if any(n and n.split(".")[0] == "contextvars" for n in names):
                    ctx.add(scope)
                if isinstance(child, ast.ImportFrom) and child.module == "os" and \
                        any(a.name in ("environ", "getenv") for a in child.names):
                    env.add(scope)
            visit(child, inner)

    visit(tree, "<module>")
    return env, ctx


def engine_hidden_state() -> tuple[set, set]:
    env, ctx = set(), set()
    for name, path in module_files().items():
        layer = name.split(".")[1] if "." in name else "pgmjax"
        if layer not in ENGINE_LAYERS:
            continue
        e, c = hidden_state(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        env |= {(name, f) for f in e}
        ctx |= {(name, f) for f in c}
    return env, ctx


def test_no_context_variable_or_environment_read_in_the_engines_call_path():
    """Which program runs is decided by a call's arguments: no module of the engine uses a context variable, and
    none reads the environment outside :data:`ENVIRONMENT_READS` (whose entries must still occur)."""
    env, ctx = engine_hidden_state()
    assert not ctx, f"context variables in the engine: {sorted(ctx)}"
    assert env <= ENVIRONMENT_READS, f"environment reads in the engine: {sorted(env - ENVIRONMENT_READS)}"
    assert ENVIRONMENT_READS <= env, f"gone: delete from ENVIRONMENT_READS {sorted(ENVIRONMENT_READS - env)}"


def test_the_hidden_state_check_finds_what_it_looks_for():
    code = ("import os, contextvars\nX = contextvars.ContextVar('x')\n"
            "def f():\n    return os.environ.get('A')\n"
            "def g():\n    from os import getenv\n    return getenv('B')\n"
            "def h():\n    import contextvars\n")
    env, ctx = hidden_state(ast.parse(code))
    assert env == {"f", "g"} and ctx == {"<module>", "h"}


# Timings, machines and dated versions belong in bench/results/ and bench/NOTES.md, not in the library's comments
# and docstrings: a figure measured once on one machine goes stale while the code stays (issue 58).
MEASUREMENT = re.compile(
    r"\b\d[\d.,]*\s?(?:ms|us|µs|seconds)\b"  # 10 ms, 0.2 us, 3 seconds
    r"|\b\d+(?:\.\d+)?\s?s\b(?= (?:to|against|of|for|so|longer|faster|slower)\b)"  # 1.9 s to 1.5 s
    r"|\b(?:took|takes)\s\d"  # took 0.6 s, takes 0.12 s
    r"|\bH[12]00\b|\b2-core\b|\btwo cores\b"  # machines
    r"|\b\d+(?:-\d+)?% (?:faster|slower|longer|shorter)\b|\b\d+(?:\.\d+)?x (?:faster|slower|longer)\b"
    r"|\bjax \d+\.\d+\.\d+"  # a dated version observed on some machine
)


def measurements_in(text: str) -> list[str]:
    """Lines of ``text`` that hold a timing, a machine's name or a speed-up figure (doctest lines excepted)."""
    return [line.strip() for line in text.splitlines()
            if MEASUREMENT.search(line) and not line.strip().startswith((">>>", "..."))]


def test_no_measurements_in_library_code():
    found = {name: hits for name, path in module_files().items()
             if (hits := measurements_in(path.read_text(encoding="utf-8")))}
    assert not found, f"timings or machine names in library code (move them to bench/NOTES.md): {found}"


def test_no_measurements_in_the_readme():
    """The README says what pgmjax does and links the performance page, whose figures carry their machine and date."""
    hits = measurements_in((ROOT / "README.md").read_text(encoding="utf-8"))
    assert not hits, f"timings or machine names in the README (move them to docs/performance.md): {hits}"


@pytest.mark.parametrize("line, hit", [
    ("# a 101 x 101 x 26 table took 23 us so against 168 us", True),
    ("Titanic 1.9 s to 1.5 s, Stroke 4.0 to 3.4", True),
    ("8.8 ms per iteration on an H200 so", True),
    ("on the 2-core CPU the first estimate", True),
    ("compiled them 8-38% faster", True),
    ("seen on an H200 with jax 0.11.2", True),
    ("optax takes 0.12 s to import", True),
    ("return 2 s + 1  # the sensitivity", False),
    ("timeout=\"20s\"", False),
    ("B: bootstrap replicates (200 for 90% intervals)", False),
    (">>> time_it(0.5)  # 3 ms", False),
])
def test_the_measurement_check_finds_what_it_looks_for(line, hit):
    assert bool(measurements_in(line)) is hit
