"""Write the API reference pages under docs/api/ from the packages' ``__all__`` (run after changing one).

    python docs/gen_api.py

One page per public module: ``pgmjax`` itself (``api/index.md``), every module that ``pgmjax.__all__``
exports, and every sub-package with an ``__all__`` (``pgmjax.cli``, ``pgmjax.kernels``, the mechanisms'
``registry``). Each public name gets a ``::: identifier`` block that mkdocstrings renders from the
docstring, or, where the name is documented on another page (a mechanism's page, a sub-package's page), a
link to it. ``tests/integration/test_docs_api.py`` checks that the committed pages cover every public name.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import types
from pathlib import Path

import pgmjax  # installed with the repository (pip install -e .)
from griffe_roles import link  # docs/griffe_roles.py (this script's folder): the Sphinx roles of a docstring as links

ROOT = Path(__file__).resolve().parent

# The mechanisms' own names are documented on their pages (docs/mechanisms/<page>.md, ::: blocks there).
MECHANISM_PAGES = {
    "mwem": ["mwem", "MWEMOptions", "MWEMInfo", "mwem_budget", "mw_update"],
    "hdmm": ["hdmm", "HDMMOptions", "HDMMInfo", "hdmm_strategy", "union_workload"],
    "privbayes": ["privbayes", "PrivBayesOptions", "PrivBayesInfo", "greedy_bayes", "noisy_conditionals", "sample_network"],
    "dualquery": ["dualquery", "DualQueryOptions", "DualQueryInfo", "dualquery_plan", "DualQueryTranscript", "max_sum_ve"],
    "mldp": ["mldp", "MLDPOptions", "MLDPInfo", "QuerySet", "RegressionModel", "select_training", "training_sensitivity",
             "fit_regression", "fit_pgm", "laplace_baseline"],
    "mst": ["mst", "MSTOptions", "MSTInfo", "mst_budget", "compress_domain"],
    "aim": ["aim", "AIMOptions", "AIMInfo", "aim_budget", "aim_candidates", "default_aim_workload"],
    "tree_aim": ["tree_aim", "TreeAIMOptions", "TreeAIMInfo", "tree_aim_budget"],
    "rr_synthetic": ["rr_synthetic", "RRSyntheticOptions", "RRSyntheticInfo", "chow_liu_cliques"],
}


def public_modules() -> dict[str, types.ModuleType]:
    """Page name -> module: the modules pgmjax.__all__ exports, and every sub-package with an __all__."""
    mods = {}
    for name in pgmjax.__all__:
        obj = getattr(pgmjax, name)
        if isinstance(obj, types.ModuleType):
            mods[name] = obj
    for info in pkgutil.walk_packages(pgmjax.__path__, "pgmjax."):
        if info.ispkg:
            mod = importlib.import_module(info.name)
            if hasattr(mod, "__all__") and mod not in mods.values():
                mods[info.name.split(".")[-1]] = mod
    mods["registry"] = importlib.import_module("pgmjax.mechanisms.registry")
    exported = {n: m for n, m in mods.items() if getattr(pgmjax, n, None) is m}
    return dict(sorted(exported.items())) | dict(sorted((n, m) for n, m in mods.items() if n not in exported))


def claims(mods: dict[str, types.ModuleType]) -> dict[int, str]:
    """Object id -> the one identifier that renders it (the mechanisms' pages first, then pgmjax, then the
    modules in order), so an object exported under several paths is rendered once and linked elsewhere."""
    out: dict[int, str] = {}
    for names in MECHANISM_PAGES.values():
        for n in names:
            out.setdefault(id(getattr(pgmjax.mechanisms, n)), f"pgmjax.mechanisms.{n}")
    for n in pgmjax.privacy.__all__:
        out.setdefault(id(getattr(pgmjax.privacy, n)), f"pgmjax.privacy.{n}")
    for n in pgmjax.__all__:
        obj = getattr(pgmjax, n)
        if not isinstance(obj, types.ModuleType):
            out.setdefault(id(obj), f"pgmjax.{n}")
    for mod in mods.values():
        for n in getattr(mod, "__all__", []):
            obj = getattr(mod, n)
            if not isinstance(obj, types.ModuleType):
                out.setdefault(id(obj), f"{mod.__name__}.{n}")
    return out


def _at_definition(name: str) -> bool:
    """Whether the index documents ``pgmjax.<name>`` at its definition: a name that is also a sub-package's (pj.fit,
    the function, once also a package name), or one the package imports on first use (pj.Synthesizer)."""
    return importlib.util.find_spec(f"pgmjax.{name}") is not None or name in getattr(pgmjax, "_LAZY_NAMES", {})


def _anchor(owner: str, obj) -> str:
    """The identifier the page of ``owner`` renders ``obj`` under (its definition, for :func:`_at_definition`)."""
    top = owner.removeprefix("pgmjax.")
    if owner.startswith("pgmjax.") and "." not in top and _at_definition(top):
        return f"{obj.__module__}.{obj.__qualname__}"
    return owner


def _first_line(obj) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


def _mechanism_page(name: str) -> str | None:
    for page, names in MECHANISM_PAGES.items():
        if name in names:
            return page
    return None


def module_page(page: str, mod: types.ModuleType, claimed: dict[int, str]) -> str:
    path = mod.__name__
    alias = f"pgmjax.{page}" if getattr(pgmjax, page, None) is mod else path
    lines = [f"# `{alias}`", ""]
    if alias != path:
        lines += [f"`{alias}` is the module `{path}`.", ""]
    names = list(getattr(mod, "__all__", []))
    opts = "    options:\n      members: false\n      show_root_heading: false\n      show_root_toc_entry: false"
    lines += [f"::: {path}", opts, ""]
    if not names:
        lines += ["Every public function and class of the module:", "", f"::: {path}",
                  "    options:\n      show_root_heading: false\n      show_root_toc_entry: false\n"
                  "      heading_level: 2", ""]
        return "\n".join(lines)
    for name in names:
        if mod is pgmjax.mechanisms and _mechanism_page(name):
            continue
        obj = getattr(mod, name)
        owner = claimed.get(id(obj))
        if not isinstance(obj, types.ModuleType) and owner and owner != f"{path}.{name}":
            lines += [f"## `{name}`", "", f"The same object as [`{owner}`][{_anchor(owner, obj)}].", ""]
            continue
        if isinstance(obj, types.ModuleType):
            target = next((p for p, m in public_modules().items() if m is obj), None)
            if target:
                lines += [f"## `{name}`", "", f"The module `{obj.__name__}`: see [its page]({target}.md).", "",
                          f"::: {path}.{name}", "    options:\n      members: false\n      show_root_heading: false"
                          "\n      show_root_toc_entry: false", ""]
                continue
        lines += [f"::: {path}.{name}", ""]
    if mod is pgmjax.mechanisms:
        lines += ["## The front-ends", "", "Documented on their own pages, with the helpers that belong to them:", ""]
        for page, ns in MECHANISM_PAGES.items():
            refs = ", ".join(f"[`{n}`][pgmjax.mechanisms.{n}]" for n in ns)
            lines += [f"- [{page}](../mechanisms/{page}.md): {refs}"]
        lines += [""]
    return "\n".join(lines)


def index_page(mods: dict[str, types.ModuleType]) -> str:
    lines = ["# API reference", "",
             "Every public name of `pgmjax` (`pgmjax.__all__`) and of its public modules (their `__all__`), "
             "generated from the docstrings (Google style: `Args`, `Returns`, `Raises`, `Example`). "
             "Names starting with `_` are private to their package.", "",
             "## Modules", "", "| module | |", "|---|---|"]
    for page, mod in mods.items():
        alias = f"pgmjax.{page}" if getattr(pgmjax, page, None) is mod else mod.__name__
        lines.append(f"| [`{alias}`]({page}.md) | {link(_first_line(mod), mod.__name__).replace('|', '/')} |")
    lines += ["", "## `pgmjax`", "", "::: pgmjax", "    options:\n      members: false\n      show_root_heading: false"
              "\n      show_root_toc_entry: false", ""]
    claimed = claims(mods)
    for name in pgmjax.__all__:
        obj = getattr(pgmjax, name)
        if isinstance(obj, types.ModuleType):
            continue
        owner = claimed[id(obj)]
        if owner != f"pgmjax.{name}":
            lines += [f"## `pgmjax.{name}`", "", f"The same object as [`{owner}`][{owner}].", ""]
            continue
        if _at_definition(name):
            # A name that is also a sub-package's (pj.fit, the function; pgmjax.fit, the package), or one the
            # package imports on first use (pj.Synthesizer): the documentation tool reads the package's source,
            # so the object is documented at its definition.
            lines += [f"## `pgmjax.{name}`", "", f"::: {obj.__module__}.{obj.__qualname__}",
                      "    options:\n      show_root_heading: false", ""]
            continue
        lines += [f"::: pgmjax.{name}", ""]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    mods = public_modules()
    out = {"index.md": index_page(mods)}
    claimed = claims(mods)
    for page, mod in mods.items():
        out[f"{page}.md"] = module_page(page, mod, claimed)
    return out


def main() -> None:
    api = ROOT / "api"
    api.mkdir(exist_ok=True)
    for old in api.glob("*.md"):
        old.unlink()
    for name, text in pages().items():
        (api / name).write_text(text.rstrip() + "\n", encoding="utf-8")
    print("\n".join(f"      - {n[:-3]}: api/{n}" if n != "index.md" else "      - api/index.md" for n in pages()))


if __name__ == "__main__":
    main()
