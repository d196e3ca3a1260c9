"""Private preprocessing: a discretisation schema derived from the raw table with differential privacy.

:func:`private_schema` spends a declared part of a run's budget, through a
:class:`pgmjax.privacy.Accountant` (every noise addition is recorded in its ledger), to build a
:class:`pgmjax.Schema`:

* **numeric, date and datetime columns**: bin edges by :func:`pgmjax.data.private_bins.private_edges`: a
  private range first (a noisy histogram over orders of magnitude, or calendar years), then private
  quantiles inside it by the exponential mechanism over public candidate edges with the rank
  quality ``q(c) = -|(1 - p) #{x < c} - p #{x >= c}|`` (sensitivity 1 under both neighbouring
  relations; McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007, Theorem 6;
  the quantile use is Smith, "Privacy-preserving statistical estimation with optimal convergence
  rates", STOC 2011, Section 3). The outer edges are private quantiles ``tail`` and ``1 - tail`` (or
  a public range given by the user); values outside are **clipped** into the end bins. Every binned
  column has a **missing** code of its own.
* **categorical columns**: private category discovery by thresholded noisy counts over the observed
  values (Korolova, Kenthapadi, Mishra & Ntoulas, "Releasing search queries and clicks privately",
  WWW 2009, Section 4; Wilson et al., "Differentially private SQL with bounded user contribution",
  PoPETs 2020, Section 3.3): Laplace noise (pure-DP accountants) or Gaussian noise (zCDP
  accountants) on each value's count, and a value is kept only when its noisy count passes a
  threshold ``tau`` chosen so that a value held by one record passes with probability at most
  ``delta_c``, and ``tau >= min_count``. Every other value is folded into one ``other`` code; the
  empty field is always a category (a data-independent choice).

Privacy: the schema release is ``(budget, delta)``-DP (pure accountant) or ``delta``-approximately
``budget``-zCDP (Bun & Steinke, "Concentrated differential privacy", TCC 2016, Definition 8.1;
composition Lemma 8.2), where ``delta`` (default 1e-9 in all) is the discovery's threshold
failure probability: it adds to the delta of the whole release. Column kinds (number, integer, date,
text) and the number of decimals are read from the data and treated as public, like the header.

Example:
    >>> from pgmjax.privacy import Accountant
    >>> rng = np.random.default_rng(0)
    >>> frame = pd.DataFrame({"x": rng.normal(50, 10, 2000).round(1), "c": rng.choice(["a", "b"], 2000)})
    >>> acc = Accountant(epsilon=2.0)
    >>> out = private_schema(frame, acc, jax.random.key(0), bins=4)
    >>> out.schema.domain, acc.spent == 2.0, out.schema.private
    (Domain({'x': 5, 'c': 4}), True, True)
    >>> out.schema.columns["c"].categories
    ('', 'a', 'b')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import jax
import numpy as np
import pandas as pd

from ..privacy import Accountant
from .schema import Schema, SchemaError
from .private_bins import (
    DATE_RANGE,
    candidate_edges,
    noisy_counts,
    private_edges,
    private_quantiles,
    quantile_rounds,
    rank_error,
    tail_edges_parts,
)
from .schema_columns import (
    ISO_DATE,
    ISO_DATETIME,
    CategoricalColumn,
    NumericColumn,
    as_text,
    date_days,
    datetime_days,
    days_to_dates,
    days_to_datetimes,
)

__all__ = ["PrivateSchema", "candidate_edges", "private_quantiles", "private_edges", "private_categories", "column_kinds",
           "private_schema", "DATE_RANGE"]



class PrivateSchema(NamedTuple):
    """Result of :func:`private_schema`.

    Attributes:
        schema: the :class:`~pgmjax.Schema` (its ``provenance`` says how it was made).
        spent: what the preprocessing spent, in the accountant's currency.
        delta: the discovery's added delta (0 without categorical columns).
        thresholds: noisy-count threshold ``tau`` of every categorical column.
        notes: remarks for the user (what was clipped, folded, public).
    """

    schema: Schema
    spent: float
    delta: float
    thresholds: dict
    notes: list


def private_categories(acc: Accountant, key, values, *, budget: float, delta: float, min_count: int = 5,
                       target: str = "categories") -> tuple[list[str], float]:
    """Values whose noisy count passes a threshold (thresholded noisy histogram; Korolova et al. 2009, Section 4).

    Each distinct value's count gets Laplace noise (pure accountant) or Gaussian noise (zCDP
    accountant) of cost ``budget``; the threshold ``tau = max(min_count, Delta_inf + z)``, with ``z`` the
    noise's ``1 - delta`` quantile, makes a value held by one record (absent from the neighbour, so never a
    candidate there) come out with probability at most ``delta``.

    Args:
        acc: the accountant (pure or zCDP).
        key: a ``jax.random`` key.
        values: the private column as text.
        budget: cost in the accountant's currency.
        delta: the failure probability (0 < delta < 1).
        min_count: the threshold is at least this.
        target: ledger label.

    Returns:
        ``(kept values sorted as text, tau)``.

    Example:
        >>> acc = Accountant(epsilon=1.0)
        >>> kept, tau = private_categories(acc, jax.random.key(0), ["a"] * 500 + ["b"] * 3, budget=1.0, delta=1e-6)
        >>> kept, round(tau, 2)
        (['a'], 14.12)
    """
    if not 0.0 < delta < 1.0:
        raise SchemaError(f"private_categories: delta must lie in (0, 1), got {delta!r}; category discovery of unknown "
                          "values needs a delta > 0")
    counts = pd.Series(list(values), dtype=object).value_counts()
    labels = [str(v) for v in counts.index]
    c = counts.to_numpy(np.float64)
    noisy, z = noisy_counts(acc, key, c, budget=budget, alpha=delta, target=target)
    tau = max(float(min_count), 1.0 + z)
    return sorted(v for v, y in zip(labels, noisy) if y > tau), tau


def column_kinds(frame: pd.DataFrame) -> dict:
    """Public type metadata of every column: ``{"kind": "number"|"date"|"datetime"|"text", "integer": bool, "decimals": int}``.

    A column is a number (resp. a date) when every non-empty field parses as one; a datetime when
    every non-empty field is an ISO date with or without a time ``HH:MM[:SS]`` and one has a time. This reads the data,
    but only its format, which is treated as public like the header (give ``kinds`` to
    :func:`private_schema` to set it from public knowledge instead).

    Example:
        >>> column_kinds(pd.DataFrame({"a": ["1.5", ""], "d": ["2020-01-02", "2021-03-04"], "t": ["x", "1"]}))["a"]
        {'kind': 'number', 'integer': False, 'decimals': 1}
    """
    out = {}
    for name in frame.columns:
        text = as_text(frame[name]).str.strip()
        filled = text[text != ""]
        info = {"kind": "text", "integer": False, "decimals": 0}
        if len(filled) and filled.str.fullmatch(ISO_DATE).all():
            info["kind"] = "date"
        elif len(filled) and filled.str.fullmatch(ISO_DATETIME).all():
            info["kind"] = "datetime"
        elif len(filled) and np.isfinite(pd.to_numeric(filled, errors="coerce").to_numpy(np.float64)).all():
            frac = filled.str.extract(r"\.(\d*)$")[0].fillna("").str.rstrip("0").str.len()
            exp = filled.str.contains("[eE]").any()
            info.update(kind="number", decimals=int(min(frac.max(), 12)), integer=bool(frac.max() == 0 and not exp))
        out[str(name)] = info
    return out


def private_schema(frame: pd.DataFrame, acc: Accountant, key, *, budget: float | None = None, delta: float = 1e-9,
                   bins: int = 10, tail: float = 0.02, ranges: Mapping | None = None, kinds: Mapping | None = None,
                   min_count: int = 5, decode: str = "uniform") -> PrivateSchema:
    """Derive a discretisation schema with differential privacy, spending ``budget`` of ``acc``.

    The budget is split equally over the columns; a binned column spends its share on a private range
    and ``bins + 1`` private quantiles at levels ``tail, 1/bins, ..., (bins-1)/bins, 1 - tail`` (or on
    ``bins - 1`` quantiles inside a public range), a categorical column on one noisy histogram. See the module
    docstring for the mechanisms and the guarantee.

    Args:
        frame: the raw private table (text as read by :func:`pgmjax.read_raw_csv`, or as read by
            ``pandas.read_csv``).
        acc: the run's accountant (``"pure"`` or ``"zcdp"`` composition).
        key: a ``jax.random`` key.
        budget: what the preprocessing spends, in ``acc``'s currency (None: all that is left).
        delta: the discovery's total added delta, split over the categorical columns.
        bins: bins per binned column (>= 2); duplicate private edges are merged.
        tail: the quantile level of the clipping bounds (0 < tail < 1/bins).
        ranges: optional public ``{column: (lo, hi)}`` (numbers, or ISO dates for date columns): then
            the outer edges are the range, no budget spent on them.
        kinds: optional ``{column: "number"|"integer"|"date"|"datetime"|"text"}`` overriding :func:`column_kinds`.
        min_count: a category needs a noisy count above this (and above the delta threshold).
        decode: decoding of the binned columns (``"uniform"`` or ``"midpoint"``).

    Returns:
        A :class:`PrivateSchema`. Its ``schema.provenance`` records the mechanism and the spending.

    Raises:
        SchemaError: bad arguments (before any noise is drawn).
        PrivacyBudgetExceeded: the budget exceeds what ``acc`` has left.
    """
    if acc.composition not in ("pure", "zcdp"):
        raise SchemaError(f"private_schema: the accountant must use pure or zcdp composition, not {acc.composition!r}")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise SchemaError(f"private_schema: bins must be an integer >= 2, got {bins!r}")
    if not 0.0 < tail < 1.0 / bins:
        raise SchemaError(f"private_schema: tail must lie in (0, 1/bins), got {tail!r}")
    if len(frame) == 0 or len(frame.columns) == 0:
        raise SchemaError("private_schema: the table has no records or no columns")
    budget = acc.remaining if budget is None else float(budget)
    if not budget > 0 or budget > acc.remaining * (1 + 1e-9):
        raise SchemaError(f"private_schema: budget must be > 0 and at most what the accountant has left "
                          f"({acc.remaining:g} {acc.currency}), got {budget!r}")
    info = column_kinds(frame)
    for name, kind in dict(kinds or {}).items():
        if name not in info or kind not in ("number", "integer", "date", "datetime", "text"):
            raise SchemaError(f"private_schema: kinds[{name!r}] must name a column and be number|integer|date|datetime|text, "
                              f"got {kind!r}")
        info[name] = {"kind": "number" if kind == "integer" else kind, "integer": kind == "integer", "decimals": 0}
    ranges = _public_ranges(ranges, info)
    n_text = sum(i["kind"] == "text" for i in info.values())
    if n_text and not 0.0 < delta < 1.0:
        raise SchemaError(f"private_schema: delta must lie in (0, 1) for the {n_text} categorical column(s), got {delta!r}")
    share = budget / len(info)
    start = acc.spent
    keys = jax.random.split(key, len(info))
    columns, thresholds, notes = [], {}, []
    for k, (name, meta) in zip(keys, info.items()):
        raw = frame[name]
        if meta["kind"] == "text":
            cats, tau = private_categories(acc, k, as_text(raw).str.strip(), budget=share, delta=delta / n_text,
                                           min_count=min_count, target=f"preprocess {name}: categories")
            cats = [c for c in cats if c != ""]
            other = "other" if "other" not in cats else "(other)"
            columns.append(CategoricalColumn(name, tuple([""] + cats), other))
            thresholds[name] = tau
            notes.append(f"column {name!r}: {len(cats)} categories kept (noisy count > {tau:.1f}); every other value is {other!r}")
            continue
        kind = meta["kind"]
        date = kind in ("date", "datetime")  # both counted in days since 1970-01-01
        text = as_text(raw).str.strip()
        days = {"date": date_days, "datetime": datetime_days}.get(kind)
        x = days(text, name) if date else pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
        whole = kind == "date" or meta["integer"]
        edges = private_edges(acc, k, x, bins=bins, tail=tail, budget=share, kind=kind, whole=whole, public_range=ranges.get(name),
                              target=f"preprocess {name}")
        if kind == "datetime":  # whole seconds, as decoded datetimes are (post-processing of the draws)
            edges = np.unique(np.round(edges * 86400.0) / 86400.0)
        columns.append(NumericColumn(name, edges, bool(meta["integer"]) and not date, decode, True, True,
                                     kind if date else "number", None if whole or date else meta["decimals"]))
        draws = quantile_rounds(bins - 1) if name in ranges else tail_edges_parts(bins)  # budget parts of a column
        notes.append(f"column {name!r}: {len(edges) - 1} bins at private quantiles; values outside "
                     f"[{_shown(edges[0], kind)}, {_shown(edges[-1], kind)}] are clipped into the end bins; a missing code; "
                     f"an edge's rank error is typically below {rank_error(acc, share / draws, 3000):,.0f} records "
                     "(larger budgets or public ranges shrink it)")
    spent = acc.spent - start
    provenance = {
        "private": True,
        "mechanism": "private quantiles (exponential mechanism) and thresholded noisy counts",
        "currency": acc.currency, "spent": spent, "delta": delta if n_text else 0.0, "min_count": min_count,
        "public": "column kinds (number, integer, date, datetime, text) and decimals are read from the data and treated as public",
    }
    return PrivateSchema(Schema(columns, provenance), spent, delta if n_text else 0.0, thresholds, notes)


def _public_ranges(ranges: Mapping | None, info: dict) -> dict:
    """``{column: (lo, hi)}`` as floats (days for dates), checked before any noise is drawn."""
    out = {}
    for name, bounds in dict(ranges or {}).items():
        if name not in info:
            raise SchemaError(f"private_schema: a range names column {name!r}, which the table does not have "
                              f"(columns: {list(info)})")
        kind = info[name]["kind"]
        if kind == "text":
            raise SchemaError(f"private_schema: column {name!r} is categorical (text); a range applies to numeric, "
                              "date and datetime columns")
        try:
            lo, hi = bounds
            days = {"date": date_days, "datetime": datetime_days}.get(kind)
            lo, hi = (float(days([v], name)[0]) if days else float(v) for v in (lo, hi))
        except (TypeError, ValueError):
            raise SchemaError(f"private_schema: the range of column {name!r} must be two {kind} values (low, high), "
                              f"got {bounds!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise SchemaError(f"private_schema: the range of column {name!r} must have finite low < high, got {bounds!r}")
        out[name] = (lo, hi)
    return out


def _shown(edge: float, kind: str) -> str:
    """An edge as the user writes it: a number, a date or a datetime."""
    if kind == "date":
        return str(days_to_dates([edge])[0])
    if kind == "datetime":
        return str(days_to_datetimes([edge])[0])
    return f"{edge:g}"
