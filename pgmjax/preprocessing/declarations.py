"""The public declarations of :func:`pgmjax.preprocessing.preprocess.private_schema`, checked before any noise is drawn.

What the user declares about a raw table's columns is public knowledge: it spends no budget, and the vote or
rule it replaces is skipped. Each function checks one kind of declaration against the column names (and the
declared kinds) and returns it in the form the private schema reads, or raises a
:class:`~pgmjax.data.schema_columns.SchemaError` naming the column and what was expected, before anything
private is read.

Example:
    >>> declared_kinds({"age": "integer"}, ["age", "city"])
    {'age': {'kind': 'number', 'integer': True}}
    >>> public_ranges({"joined": ("2000-01-01", "2001-01-01")}, ["joined"], {})
    {'joined': ('temporal', (10957.0, 11323.0))}
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..data.date_forms import DATE_FORMATS
from ..data.raw_fields import column_values
from ..data.schema_columns import SchemaError
from .private_format import KINDS

__all__ = ["declared_kinds", "declared_decimals", "declared_date_formats", "public_ranges", "range_values", "range_group"]


def range_group(kind: str) -> str | None:
    return {"number": "number", "date": "temporal", "datetime": "temporal"}.get(kind)


def declared_kinds(kinds: Mapping | None, names: list[str]) -> dict:
    """``{column: {"kind", "integer"}}`` of the declared kinds, checked before any noise is drawn."""
    out = {}
    for name, kind in dict(kinds or {}).items():
        if name not in names or kind not in KINDS:
            raise SchemaError(f"private_schema: kinds[{name!r}] must name a column and be {'|'.join(KINDS)}, got {kind!r}"
                              + ("" if name in names else f" (columns: {names})"))
        out[name] = {"kind": "number" if kind == "integer" else kind, "integer": kind == "integer"}
    return out


def declared_decimals(decimals: Mapping | None, names: list[str], declared: dict) -> dict:
    """``{column: d}`` of the declared decimals, checked before any noise is drawn."""
    out = {}
    for name, d in dict(decimals or {}).items():
        if name not in names:
            raise SchemaError(f"private_schema: decimals names column {name!r}, which the table does not have (columns: {names})")
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d <= 15:
            raise SchemaError(f"private_schema: decimals of column {name!r} must be an integer in [0, 15], got {d!r}")
        if name in declared and (declared[name]["kind"] != "number" or declared[name]["integer"]):
            raise SchemaError(f"private_schema: column {name!r} is declared {declared[name]['kind']}"
                              f"{' (integer)' if declared[name]['integer'] else ''}; decimals apply to non-integer numbers")
        out[name] = int(d)
    return out


def declared_date_formats(date_formats: Mapping | None, names: list[str], declared: dict) -> dict:
    """``{column: format}`` of the declared date formats, checked before any noise is drawn."""
    out = {}
    for name, fmt in dict(date_formats or {}).items():
        if name not in names:
            raise SchemaError(f"private_schema: a date format names column {name!r}, which the table does not have "
                              f"(columns: {names})")
        if fmt not in DATE_FORMATS:
            raise SchemaError(f"private_schema: the date format of column {name!r} must be one of {list(DATE_FORMATS)}, "
                              f"got {fmt!r}")
        if name in declared and declared[name]["kind"] != "date":
            raise SchemaError(f"private_schema: column {name!r} is declared {declared[name]['kind']}; a date format "
                              "applies to date columns")
        out[name] = None if fmt == "yyyy-mm-dd" else fmt
    return out


def public_ranges(ranges: Mapping | None, names: list[str], declared: dict) -> dict:
    """``{column: ("number" | "temporal", (lo, hi))}``: numbers, or days since 1970-01-01 for ISO dates and
    datetimes, checked (and checked against the declared kinds) before any noise is drawn."""
    out = {}
    for name, bounds in dict(ranges or {}).items():
        if name not in names:
            raise SchemaError(f"private_schema: a range names column {name!r}, which the table does not have "
                              f"(columns: {names})")
        try:
            lo, hi = bounds
        except (TypeError, ValueError):
            raise SchemaError(f"private_schema: the range of column {name!r} must be two values (low, high), got {bounds!r}") from None
        group, values = range_values(lo, hi)
        if group is None:
            raise SchemaError(f"private_schema: the range of column {name!r} must be two numbers or two ISO dates "
                              f"(YYYY-MM-DD[ HH:MM[:SS]]), got {bounds!r}")
        lo, hi = values
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise SchemaError(f"private_schema: the range of column {name!r} must have finite low < high, got {bounds!r}")
        kind = declared.get(name, {}).get("kind")
        if kind is not None and range_group(kind) != group:
            raise SchemaError(f"private_schema: column {name!r} is declared {kind}; its range must be "
                              f"{'numeric' if kind == 'number' else 'of dates' if kind != 'text' else 'absent (a range applies to numeric, date and datetime columns)'}")
        out[name] = (group, (lo, hi))
    return out


def range_values(lo, hi) -> tuple[str | None, tuple[float, float]]:
    """``("number", floats)`` or ``("temporal", days)`` of two bounds, or ``(None, ...)`` when they are neither."""
    try:
        return "number", (float(lo), float(hi))
    except (TypeError, ValueError):
        pass
    if isinstance(lo, str) and isinstance(hi, str):
        days = column_values([lo.strip(), hi.strip()], "datetime")
        if np.isfinite(days).all():
            return "temporal", (float(days[0]), float(days[1]))
    return None, (math.nan, math.nan)
