"""A griffe extension for the documentation site (mkdocs.yml, mkdocstrings' ``extensions``): Sphinx roles as links.

pgmjax's docstrings name other objects the Sphinx way, ``:func:`pgmjax.estimate``` or ``:class:`~pgmjax.Domain```
(readable in ``help()`` and in the source). mkdocstrings renders Markdown, where such a role would print raw. This
turns each into an autorefs cross-reference, ``<autoref identifier="pgmjax.estimate" optional>``, titled as Sphinx
would (the last name after ``~``, the whole path otherwise): a link where the object has a page, plain code where it
has none (a private module's function, say). A name without a module (``:func:`marginals```) is looked up in the
docstring's own module first, then its package's.
"""

from __future__ import annotations

import re

import griffe

#: A Sphinx cross-reference role: ``:kind:`~target```, the target optionally followed by ``()``.
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const|type):`(~?)([\w.]+?)(\(\))?`")


def _candidates(target: str, module: str) -> list[str]:
    """Where a role's target may be documented: as written if it names a pgmjax object, else under the docstring's
    module, then its parent package."""
    if target.startswith("pgmjax"):
        return [target]
    parent = module.rsplit(".", 1)[0]
    return [f"{module}.{target}", f"{parent}.{target}", target]


def link(text: str, module: str, exists=lambda path: True) -> str:
    """``text`` with every Sphinx role made an optional autorefs cross-reference (``exists``: whether a path names an
    object, to pick among the candidates for a name without a module).

    Example:
        >>> link("see :func:`~pgmjax.estimation.estimate`.", "pgmjax.model")
        'see <autoref identifier="pgmjax.estimation.estimate" optional><code>estimate</code></autoref>.'
    """

    def one(m: re.Match) -> str:
        short, target, call = m.group(1), m.group(2), m.group(3) or ""
        found = next((c for c in _candidates(target, module) if exists(c)), _candidates(target, module)[0])
        title = (target.rsplit(".", 1)[-1] if short else target) + call
        return f'<autoref identifier="{found}" optional><code>{title}</code></autoref>'

    return ROLE.sub(one, text)


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        doc = obj.docstring
        if doc is None or ":`" not in doc.value:
            return
        module = obj.module.path if hasattr(obj, "module") else obj.path

        def exists(path: str) -> bool:
            try:
                obj.modules_collection.get_member(path) if hasattr(obj.modules_collection, "get_member") \
                    else obj.modules_collection[path]
                return True
            except (KeyError, ValueError, AttributeError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                return False

        doc.value = link(doc.value, module, exists)
