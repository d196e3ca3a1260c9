"""A griffe extension for the documentation site (mkdocs.yml, mkdocstrings' ``extensions``).

pgmjax's docstrings head their doctests ``Example:``; griffe's Google parser reads that singular title as
an admonition (Markdown text, where ``history[-1]["loss"]`` looks like a link), and only ``Examples:`` as
examples, rendered as code. This reads ``Example:`` as ``Examples:`` when the section holds a doctest.
"""

from __future__ import annotations

import re

import griffe

_TITLE = re.compile(r"^(\s*)Example:[ \t]*\n(?=(?:\s*\n)*\s*>>>)", re.M)


class DoctestExamples(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        doc = obj.docstring
        if doc is not None and "Example:" in doc.value:
            doc.value = _TITLE.sub(r"\1Examples:\n", doc.value)
