"""Private preprocessing: a discretisation schema derived from the raw table with differential privacy.

:func:`private_schema` spends a declared part of a run's budget, through a
:class:`pgmjax.privacy.Accountant` (every noise addition is recorded in its ledger), to build a
:class:`pgmjax.Schema`. Every data-dependent choice is declared (public), decided under DP and charged, or
fixed by a rule that reads no private data:

==========================  ================================================================================
choice                      how
==========================  ================================================================================
column kind                 declared (``kinds=``), or a private vote: a noisy histogram of field classes
(number, integer, date,     (:mod:`pgmjax.preprocessing.private_format`), :data:`KIND_SHARE` of the column's share;
datetime, text)             plurality of the noisy counts (Dwork & Roth 2014, Section 3.3, post-processing)
date format (day or         declared (``date_formats=``), or the kind vote's noisy counts of year-last dates
month first)                only valid day first vs only month first (post-processing, no extra charge)
bin edges                   private range and quantiles (below), or a declared public range
categories                  thresholded noisy counts (below); the empty field always a category (rule)
decimals                    declared (``decimals=``), else the kind vote's plurality of decimals written (1..6),
                            else 1/100 of the narrowest *released* bin (rule); edges rounded to them
nulls                       a missing code in every binned column, ``""`` in every categorical one (rule); a
                            binned column decodes no blanks when the vote's noisy blank count does not pass
unreadable fields           missing (``n/a`` in a number column, ``2020-02-30`` in a date column): never an error
==========================  ================================================================================

* **numeric, date and datetime columns**: bin edges by :func:`pgmjax.preprocessing.private_bins.private_edges`: a
  private range first (a noisy histogram over public cells, ten a decade for numbers, or calendar years), then private
  quantiles inside it by the exponential mechanism over public candidate edges with the rank
  quality ``q(c) = -|(1 - p) #{x < c} - p #{x >= c}|`` (sensitivity 1 under both neighbouring
  relations; McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007, Theorem 6;
  the quantile use is Smith, "Privacy-preserving statistical estimation with optimal convergence
  rates", STOC 2011, Section 3; a parallel round of draws over disjoint parts costs one draw under
  add/remove and two under replace-one, as :meth:`~pgmjax.privacy.Accountant.exponential_parallel`
  charges). The outer edges are private quantiles ``tail`` and ``1 - tail`` (or a public range given by
  the user); values outside are **clipped** into the end bins.
* **categorical columns**: private category discovery by thresholded noisy counts over the observed
  values (Korolova, Kenthapadi, Mishra & Ntoulas, "Releasing search queries and clicks privately",
  WWW 2009, Section 4; Wilson et al., "Differentially private SQL with bounded user contribution",
  PoPETs 2020, Section 3.3): discrete Laplace noise (pure-DP accountants) or discrete Gaussian noise
  (zCDP accountants) on each value's count, and a value is kept only when its noisy count reaches the
  integer threshold ``tau``, the smallest with ``P[1 + noise >= tau] <= delta_c`` computed from the
  discrete law's exact tail (:func:`pgmjax.privacy.discrete_tails.tail_threshold`; the continuous law's
  quantile understates it up to 6x at small noise), and ``tau > min_count``. Every other value is folded
  into one ``other`` code.

Neighbouring relation: the accountant's ``bounded`` must be the mechanism's (the command line passes
it through :func:`pgmjax.mechanisms.budget_split.split_budget`). Under replace-one neighbours (``bounded=True``)
a histogram's sensitivity is 2 (L2 ``sqrt 2``) and a parallel quantile round counts twice; the accountant
calibrates every release to it, so the ledger is exactly what the noise pays for.

Privacy: the schema release is ``(budget, delta)``-DP (pure accountant) or ``delta``-approximately
``budget``-zCDP (Bun & Steinke, "Concentrated differential privacy", TCC 2016, Definition 8.1;
composition Lemma 8.2), where ``delta`` (default 1e-9 in all) is the discovery's threshold
failure probability: it adds to the delta of the whole release (basic composition with the mechanism:
Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, Theorem 3.16).

Example:
    >>> from pgmjax.privacy import Accountant
    >>> rng = np.random.default_rng(0)
    >>> frame = pd.DataFrame({"x": rng.normal(50, 10, 2000).round(1), "c": rng.choice(["a", "b"], 2000)})
    >>> acc = Accountant(epsilon=2.0)
    >>> out = private_schema(frame, acc, jax.random.key(0), bins=4)
    >>> out.schema.domain, acc.spent == 2.0, out.schema.private, out.schema.columns["x"].integer
    (Domain({'x': 5, 'c': 4}), True, True, False)
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

from ..data.date_forms import read_kind
from ..data.schema import Schema, SchemaError
from ..data.schema_columns import CategoricalColumn, NumericColumn, days_to_dates, days_to_datetimes
from ..privacy import Accountant
from .declarations import declared_date_formats, declared_decimals, declared_kinds, public_ranges, range_group
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
from .private_format import UNREADABLE_WARN, private_kind_of_counts, rule_decimals
from .private_range import range_warnings
from .raw_aggregates import RawFrame, merge_text_counts

__all__ = ["PrivateSchema", "candidate_edges", "private_quantiles", "private_edges", "private_categories",
           "private_schema", "DATE_RANGE", "KIND_SHARE"]

#: The share of a column's budget that the kind vote spends when the column's kind is not declared.
KIND_SHARE = 0.2



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


def private_categories(acc: Accountant, key, values=None, *, budget: float, delta: float, min_count: int = 5,
                       target: str = "categories", counted: tuple | None = None) -> tuple[list[str], int]:
    """Values whose noisy count reaches a threshold (thresholded noisy histogram; Korolova et al. 2009, Section 4).

    Each distinct value's count gets discrete Laplace noise (pure accountant) or discrete Gaussian noise
    (zCDP accountant) of cost ``budget``; a value is kept when its noisy count is at least ``tau``, the
    smallest integer above ``min_count`` with ``P[1 + noise >= tau] <= delta`` computed from the discrete
    law's exact tail (:func:`pgmjax.privacy.discrete_tails.tail_threshold`): a value held by one record
    (absent from the neighbour, so never a candidate there) comes out with probability at most ``delta``.

    Args:
        acc: the accountant (pure or zCDP; its ``bounded`` sets the sensitivity).
        key: a ``jax.random`` key.
        values: the private column as text.
        counted: instead of ``values``, ``(distinct texts sorted, their counts)``
            (:func:`pgmjax.preprocessing.raw_aggregates.merge_text_counts`, as the out-of-core engines compute them). The
            noise is drawn in the texts' sorted order, so the release depends on the counts alone.
        budget: cost in the accountant's currency.
        delta: the failure probability (0 < delta < 1/2).
        min_count: a kept value's noisy count exceeds this.
        target: ledger label.

    Returns:
        ``(kept values sorted as text, tau)``.

    Example:
        >>> acc = Accountant(epsilon=1.0)
        >>> kept, tau = private_categories(acc, jax.random.key(0), ["a"] * 500 + ["b"] * 3, budget=1.0, delta=1e-6)
        >>> kept, tau
        (['a'], 15)
    """
    if not 0.0 < delta < 0.5:
        raise SchemaError(f"private_categories: delta must lie in (0, 1/2), got {delta!r}; category discovery of unknown "
                          "values needs a delta > 0")
    if (values is None) == (counted is None):
        raise SchemaError("private_categories: give the values or their counts (counted=), not both")
    if counted is None:
        counted = merge_text_counts([pd.Series(list(values), dtype=object).astype(str).value_counts(sort=False)])
    labels, c = list(counted[0]), np.asarray(counted[1], np.float64)
    noisy, k = noisy_counts(acc, key, c, budget=budget, alpha=delta, target=target)
    tau = max(int(min_count) + 1, 1 + k)
    return sorted(v for v, y in zip(labels, noisy) if y >= tau), tau


def private_schema(frame: pd.DataFrame, acc: Accountant, key, *, budget: float | None = None, delta: float = 1e-9,
                   bins: int = 10, tail: float = 0.02, ranges: Mapping | None = None, kinds: Mapping | None = None,
                   decimals: Mapping | None = None, min_count: int = 5, decode: str = "uniform",
                   date_formats: Mapping | None = None) -> PrivateSchema:
    """Derive a discretisation schema with differential privacy, spending ``budget`` of ``acc``.

    The budget is split equally over the columns. A column whose kind is not declared spends
    :data:`KIND_SHARE` of its share on the kind vote (:func:`pgmjax.preprocessing.private_format.private_kind`); the
    rest goes to a private range and ``bins + 1`` private quantiles at levels ``tail, 1/bins, ...,
    (bins-1)/bins, 1 - tail`` (or ``bins - 1`` quantiles inside a public range) for a binned column, to one
    noisy histogram for a categorical one. See the module docstring for the mechanisms and the guarantee.

    Args:
        frame: the raw private table (text as read by :func:`pgmjax.read_raw_csv`, or as read by
            ``pandas.read_csv``), or a raw table kept by an out-of-core engine
            (:func:`pgmjax.preprocessing.raw_engines.open_raw`): either way only the aggregates of
            :mod:`pgmjax.preprocessing.raw_aggregates` are read, so the release is the same.
        acc: the run's accountant (``"pure"`` or ``"zcdp"`` composition; its ``bounded`` must be the
            mechanism's neighbouring relation, so that both are charged under the same one).
        key: a ``jax.random`` key.
        budget: what the preprocessing spends, in ``acc``'s currency (None: all that is left).
        delta: the discovery's total added delta, split over the columns that may be categorical.
        bins: bins per binned column (>= 2); duplicate private edges are merged.
        tail: the quantile level of the clipping bounds (0 < tail < 1/bins).
        ranges: optional public ``{column: (lo, hi)}`` (numbers, or ISO dates / datetimes): then the outer
            edges are the range, no budget spent on them. The column must come out numeric (resp. a date or
            datetime); otherwise a :class:`SchemaError` after the kind vote.
        kinds: optional public ``{column: "number"|"integer"|"date"|"datetime"|"text"}``: no vote for these.
        decimals: optional public ``{column: d}``: decoded values of a non-integer number column are rounded to
            ``d`` decimals (default: :func:`pgmjax.preprocessing.private_format.rule_decimals` of the released edges).
        min_count: a category needs a noisy count above this (and the delta threshold).
        decode: decoding of the binned columns (``"uniform"`` or ``"midpoint"``).
        date_formats: optional public ``{column: "dd/mm/yyyy"|"mm/dd/yyyy"|"yyyy-mm-dd"}``: how a date column's
            dates written with the year last read (default: the private kind vote's noisy counts of dates only
            valid day first against only valid month first; :mod:`pgmjax.data.date_forms`).

    Returns:
        A :class:`PrivateSchema`. Its ``schema.provenance`` records the mechanism, the spending and which
        choices were declared.

    Raises:
        SchemaError: bad arguments (before any noise is drawn); a range on a column voted categorical.
        PrivacyBudgetExceeded: the budget exceeds what ``acc`` has left.
    """
    if acc.composition not in ("pure", "zcdp"):
        raise SchemaError(f"private_schema: the accountant must use pure or zcdp composition, not {acc.composition!r}")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise SchemaError(f"private_schema: bins must be an integer >= 2, got {bins!r}")
    if not 0.0 < tail < 1.0 / bins:
        raise SchemaError(f"private_schema: tail must lie in (0, 1/bins), got {tail!r}")
    table = frame if hasattr(frame, "ranks") else RawFrame(frame)
    if len(table) == 0 or len(table.names) == 0:
        raise SchemaError("private_schema: the table has no records or no columns")
    budget = acc.remaining if budget is None else float(budget)
    if not budget > 0 or budget > acc.remaining * (1 + 1e-9):
        raise SchemaError(f"private_schema: budget must be > 0 and at most what the accountant has left "
                          f"({acc.remaining:g} {acc.currency}), got {budget!r}")
    names = list(table.names)
    declared = declared_kinds(kinds, names)
    ranges = public_ranges(ranges, names, declared)
    precision = declared_decimals(decimals, names, declared)
    forms = declared_date_formats(date_formats, names, declared)
    n_text = sum(declared.get(n, {"kind": "text"})["kind"] == "text" for n in names)  # may be categorical
    if n_text and not 0.0 < delta < 0.5:
        raise SchemaError(f"private_schema: delta must lie in (0, 1/2) for the {n_text} column(s) that may be categorical, "
                          f"got {delta!r}")
    share = budget / len(names)
    start = acc.spent
    keys = jax.random.split(key, len(names))
    columns, thresholds, notes, voted, warnings = [], {}, [], [], []
    for k, name in zip(keys, names):
        k_kind, k = jax.random.split(k)
        rest = share
        meta = declared.get(name)
        if meta is None:
            meta = private_kind_of_counts(acc, k_kind, table.class_counts(name), budget=share * KIND_SHARE,
                                          target=f"preprocess {name}: kind")
            if name in forms:  # declared: public, the vote's choice is dropped
                meta["date_format"] = forms[name]
            rest = share * (1.0 - KIND_SHARE)
            voted.append(name)
        kind = meta["kind"]
        if name in ranges and ranges[name][0] != range_group(kind):
            raise SchemaError(f"private_schema: column {name!r} is {_kind_text(kind)} (by the private kind vote), but its range "
                              f"is {'numeric' if ranges[name][0] == 'number' else 'of dates'}; declare the column's kind "
                              "(kinds= or --kind) to bin it")
        if kind == "text":
            cats, tau = private_categories(acc, k, budget=rest, delta=delta / n_text, min_count=min_count,
                                           target=f"preprocess {name}: categories", counted=table.value_counts(name))
            cats = [c for c in cats if c != ""]
            other = "other" if "other" not in cats else "(other)"
            columns.append(CategoricalColumn(name, tuple([""] + cats), other))
            thresholds[name] = tau
            how = "private kind vote" if name in voted else "declared"
            notes.append(f"column {name!r}: categorical ({how}); {len(cats)} categories kept (noisy count >= {tau}); "
                         f"every other value is {other!r}")
            continue
        if kind != "date" and name in forms:
            raise SchemaError(f"private_schema: column {name!r} has a date format but is {_kind_text(kind, meta['integer'])} "
                              f"(by the private kind vote); declare its kind (kinds= or --kind {name}=date)")
        date_format = meta.get("date_format", forms.get(name)) if kind == "date" else None
        date = kind in ("date", "datetime")  # both counted in days since 1970-01-01
        whole = kind == "date" or meta["integer"]
        x = table.ranks(name, read_kind(kind, date_format))  # the rank counts #{x < t}: all the range and quantiles read
        bounds = _range_for(ranges[name][1], kind) if name in ranges else None
        info = {}
        edges = private_edges(acc, k, x, bins=bins, tail=tail, budget=rest, kind=kind, whole=whole, public_range=bounds,
                              target=f"preprocess {name}", info=info)
        if kind == "datetime":  # whole seconds, as decoded datetimes are (post-processing of the draws)
            edges = np.unique(np.round(edges * 86400.0) / 86400.0)
        places = None if whole or date else precision.get(name, meta.get("decimals"))
        if places is None and not (whole or date):
            places = rule_decimals(edges)
        if places is not None:  # edges on the grid of the decimals: every bin holds a value that is written so
            edges = np.unique(np.round(edges, places))
            if len(edges) < 2:
                edges = np.array([edges[0], edges[0] + 10.0**-places])
        columns.append(NumericColumn(name, edges, bool(meta["integer"]) and not date, decode, True, True,
                                     kind if date else "number", places, date_format, bool(meta.get("blanks", True))))
        draws = quantile_rounds(bins - 1) if name in ranges else tail_edges_parts(bins)  # budget parts of a column
        how = "private kind vote" if name in voted else "declared"
        notes.append(f"column {name!r}: {_kind_text(kind, meta['integer'])} ({how}); {len(edges) - 1} bins at private quantiles; "
                     f"values outside [{_shown(edges[0], kind)}, {_shown(edges[-1], kind)}] are clipped into the end bins; "
                     f"empty and unreadable fields are missing; an edge's rank error is typically below "
                     f"{rank_error(acc, rest / draws, 3000):,.0f} records (larger budgets or public ranges shrink it)")
        # Post-processing of the released range histogram and edges: a narrow range or a large clipped share, in words.
        column_warnings = range_warnings(name, kind, edges, info.get("range"), _shown)
        if meta.get("unreadable", 0.0) > UNREADABLE_WARN:  # the noisy class counts' share: post-processing
            column_warnings.append(_unreadable_warning(name, kind, meta))
        for w in column_warnings:
            warnings.append(w)
            notes.append(f"WARNING {w}")
    spent = acc.spent - start
    provenance = {
        "private": True,
        "mechanism": "private kind vote (noisy class counts), private quantiles (exponential mechanism) and thresholded "
                     "noisy counts",
        "currency": acc.currency, "spent": spent, "bounded": acc.bounded,
        "delta": delta if n_text else 0.0, "min_count": min_count, "warnings": warnings,
        "public": "declared: kinds of " + (", ".join(sorted(declared)) or "no column") + "; ranges of "
                  + (", ".join(sorted(ranges)) or "no column") + "; decimals of " + (", ".join(sorted(precision)) or "no column")
                  + "; date formats of " + (", ".join(sorted(forms)) or "no column")
                  + ". Decided under DP: the other kinds, decimals, date formats and blanks (kind vote), bin edges, "
                  "categories. Fixed by rule: decimals from the released edges where the vote has none, a missing code in "
                  "every binned column, the empty category, unreadable fields missing",
    }
    return PrivateSchema(Schema(columns, provenance), spent, delta if n_text else 0.0, thresholds, notes)


def _unreadable_warning(name: str, kind: str, meta: dict) -> str:
    """The warning of a column whose non-empty fields are largely unreadable as its kind (from the noisy class counts)."""
    what = {"number": "numbers", "date": "dates" + (f" ({meta['date_format']} or YYYY-MM-DD)" if meta.get("date_format")
                                                  else " (YYYY-MM-DD or YYYY/MM/DD)"),
            "datetime": "datetimes (YYYY-MM-DD HH:MM:SS)"}[kind]
    advice = {"number": f"clean the column or declare it text (--kind {name}=text)",
              "date": f"declare how its dates are written (--date-format {name}=dd/mm/yyyy or mm/dd/yyyy)",
              "datetime": f"write its datetimes as YYYY-MM-DD HH:MM:SS, or declare it text (--kind {name}=text)"}[kind]
    return (f"{name}: about {100 * meta['unreadable']:.0f}% of its non-empty fields cannot be read as {what} "
            f"(estimated from the noisy class counts of the kind vote); they are released as blanks; {advice}")


def _kind_text(kind: str, integer: bool = False) -> str:
    if kind == "number":
        return "integer" if integer else "a number"
    return {"date": "a date", "datetime": "a datetime", "text": "categorical (text)"}[kind]


def _range_for(bounds: tuple[float, float], kind: str) -> tuple[float, float]:
    """A range in the column's unit: whole days for a date column (a datetime bound's day)."""
    lo, hi = bounds
    if kind == "date":
        lo, hi = math.floor(lo), max(math.floor(hi), math.floor(lo) + 1)
    return float(lo), float(hi)


def _shown(edge: float, kind: str) -> str:
    """An edge as the user writes it: a number, a date or a datetime."""
    if kind == "date":
        return str(days_to_dates([edge])[0])
    if kind == "datetime":
        return str(days_to_datetimes([edge])[0])
    return f"{edge:g}"
