"""Constraints written in a schema file, in the columns' raw values, as :class:`pgmjax.Constraint` objects.

A schema (:mod:`pgmjax.data.schema`) may hold an entry ``"_constraints"``, a list whose items are one of::

    {"forbid": {"age": {"range": [0, 15]}, "marital": ["Married", "Divorced"]}}
    {"forbid": [{"relationship": "Husband", "sex": "Female"}, {"relationship": "Wife", "sex": "Male"}]}
    {"allow":  [{"workclass": "Never-worked", "occupation": ""}, {"workclass": ["Private", "State-gov"]}]}
    {"determines": {"source": "zip", "target": "state", "mapping": {"02139": "MA", "10001": "NY"}}}

* ``forbid``: every combination of the listed values is impossible; a list of such objects forbids each.
* ``allow``: over the columns the objects name, only the combinations they list are possible; a column an object
  does not name takes any value there (above: a "Never-worked" record has an empty occupation, the two other
  work classes any occupation, every other work class none).
* ``determines``: a functional dependency between two categorical columns; ``mapping`` gives the target's value
  for every category of the source (a source value left out is an error, never a guess).

A value is a category's text, a number naming the numeric bin that holds it, ``null`` for a column's missing
code, ``{"range": [lo, hi]}`` for every bin of a numeric column lying inside ``[lo, hi]``, or a list of these.

Constraints are public knowledge, like the schema: nothing here reads the data.

Example:
    >>> from pgmjax.data.schema import Schema
    >>> s = Schema.from_dict({"age": {"bins": [0, 16, 65, 100]}, "married": {"categories": ["no", "yes"]},
    ...                       "_constraints": [{"forbid": {"age": 10, "married": "yes"}}]})
    >>> schema_constraints(s)[0].allowed(s.domain).tolist()
    [[True, False], [True, True], [True, True]]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..data.schema import CONSTRAINTS_KEY, Schema
from ..data.schema_columns import CategoricalColumn, SchemaError
from .constraints import Constraint

KINDS = ("forbid", "allow", "determines")


def schema_constraints(schema: Schema, where: str = "schema") -> tuple[Constraint, ...]:
    """The schema's ``"_constraints"`` as checked :class:`~pgmjax.Constraint` objects over its domain.

    Raises:
        SchemaError: naming the constraint (its position), the column and the value that is wrong.
    """
    out = []
    for i, spec in enumerate(schema.constraint_specs):
        at = f"{where}: {CONSTRAINTS_KEY}[{i}]"
        kinds = [k for k in KINDS if k in spec]
        if len(kinds) != 1 or len(spec) != 1:
            raise SchemaError(f"{at}: must have exactly one key of {KINDS}, got {sorted(spec)}")
        kind, body = kinds[0], spec[kinds[0]]
        if kind == "determines":
            out.append(_dependency(schema, body, at))
            continue
        entries = [body] if isinstance(body, Mapping) else body
        if not isinstance(entries, list) or not entries or not all(isinstance(e, Mapping) and e for e in entries):
            raise SchemaError(f"{at}: {kind} takes an object of column -> values, or a non-empty list of them")
        columns = [c for c in schema.columns if any(c in e for e in entries)]  # the domain's order
        for e in entries:
            unknown = sorted(set(e) - set(schema.columns))
            if unknown:
                raise SchemaError(f"{at}: columns {unknown} are not in the schema")
        table = np.zeros(schema.domain.shape_of(columns), bool)
        for e in entries:  # each entry is a product of value sets; a column it leaves out takes any value
            index = np.ix_(*[_codes(schema, c, e[c], at) if c in e else np.arange(schema.domain[c]) for c in columns])
            table[index] = True
        try:  # the table marks the combinations listed: the allowed ones, or the forbidden ones
            out.append(Constraint(tuple(columns), kind, np.argwhere(table)).check(schema.domain, what=at))
        except ValueError as e:
            raise SchemaError(str(e)) from None
    return tuple(out)


def _codes(schema: Schema, column: str, value, at: str) -> np.ndarray:
    """The codes of ``column`` that ``value`` (a raw value, a range, null, or a list of these) names."""
    col = schema.columns[column]
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SchemaError(f"{at}: column {column!r} lists no value")
    codes = []
    for v in values:
        try:
            if v is None:
                if not getattr(col, "missing", False):
                    raise SchemaError(f"column {column!r} has no missing code (null)")
                codes.append(schema.domain[column] - 1)
            elif isinstance(v, Mapping):
                if isinstance(col, CategoricalColumn) or set(v) != {"range"} or len(v["range"]) != 2:
                    raise SchemaError(f"column {column!r}: a range is {{\"range\": [lo, hi]}} on a numeric column, "
                                      f"got {v!r}")
                lo, hi = col.values(pd.Series([str(x) for x in v["range"]]))
                edges = np.asarray(col.edges)
                inside = np.flatnonzero((edges[:-1] >= lo) & (edges[1:] <= hi))
                if not inside.size:
                    raise SchemaError(f"column {column!r}: no bin lies inside the range {v['range']}")
                codes.extend(inside.tolist())
            elif isinstance(col, CategoricalColumn):
                codes.extend(col.encode(np.array([str(v)], dtype=object)).tolist())
            else:
                codes.extend(col.encode(col.values(pd.Series([str(v)]))).tolist())
        except SchemaError as e:
            raise SchemaError(f"{at}: {e}") from None
    return np.unique(np.asarray(codes, np.int64))


def _dependency(schema: Schema, body, at: str) -> Constraint:
    """A ``determines`` entry: both columns categorical, every source category mapped to a target category."""
    if not isinstance(body, Mapping) or set(body) != {"source", "target", "mapping"}:
        raise SchemaError(f"{at}: determines takes {{\"source\": column, \"target\": column, \"mapping\": "
                          f"{{source value: target value}}}}, got {body!r}")
    source, target, mapping = body["source"], body["target"], body["mapping"]
    for c in (source, target):
        if c not in schema.columns or not isinstance(schema.columns[c], CategoricalColumn):
            raise SchemaError(f"{at}: {c!r} must be a categorical column of the schema")
    if not isinstance(mapping, Mapping):
        raise SchemaError(f"{at}: mapping must be an object of source value -> target value")
    src = schema.columns[source]
    names = list(src.categories) + ([src.other] if src.other is not None else [])
    missing = [n for n in names if n not in mapping]
    if missing:
        raise SchemaError(f"{at}: mapping gives no {target!r} value for {len(missing)} {source!r} value(s), "
                          f"e.g. {missing[:3]}")
    extra = sorted(set(mapping) - set(names))
    if extra:
        raise SchemaError(f"{at}: mapping names values {extra[:3]} that are not {source!r} categories")
    codes = [int(_codes(schema, target, mapping[n], at)[0]) for n in names]  # each a category of the target
    try:
        return Constraint.determines(source, target, codes).check(schema.domain, what=at)
    except ValueError as e:
        raise SchemaError(str(e)) from None
