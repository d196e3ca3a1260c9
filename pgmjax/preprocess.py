"""Private preprocessing: a discretisation schema derived from the raw table with differential privacy.

:func:`private_schema` spends a declared part of a run's budget, through a
:class:`pgmjax.privacy.Accountant` (every noise addition is recorded in its ledger), to build a
:class:`pgmjax.Schema`:

* **numeric and date columns**: bin edges at private quantiles (:func:`private_quantiles`), the
  exponential mechanism over a public grid of candidate edges with the rank quality
  ``q(c) = -|(1 - p) #{x < c} - p #{x >= c}|`` (sensitivity 1 under both neighbouring relations;
  McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007, Theorem 6; the
  quantile use is Smith, "Privacy-preserving statistical estimation with optimal convergence
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
from scipy.stats import norm

from .privacy import Accountant
from .schema import Schema, SchemaError
from .schema_columns import CategoricalColumn, NumericColumn, as_text, date_days

__all__ = ["PrivateSchema", "candidate_edges", "private_quantiles", "private_categories", "column_kinds", "private_schema",
           "DATE_RANGE"]

#: Public range of candidate dates when none is given: 1900-01-01 .. 2100-12-31 (days since 1970-01-01).
DATE_RANGE = (-25567.0, 47846.0)
_ISO_DATE = r"\d{4}-\d{2}-\d{2}"


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


def candidate_edges(lo: float | None = None, hi: float | None = None, *, whole: bool = False, digits: int = 3) -> np.ndarray:
    """Public candidate bin edges: "nice" numbers with ``digits`` significant digits, both signs, from 1e-3 to
    1e12 and 0 (sorted); restricted to ``[lo, hi]`` with 1001 equally spaced points added when a range is given;
    integers only when ``whole``.

    Args:
        lo, hi: an optional public range (both or neither).
        whole: integer-valued column (integers and dates): integer candidates.
        digits: significant digits of the nice numbers.

    Returns:
        A sorted float64 array without duplicates. It depends on no data.

    Example:
        >>> c = candidate_edges(0, 100)
        >>> float(c[0]), float(c[-1]), bool(26.5 in c), len(candidate_edges(0, 10, whole=True))
        (0.0, 100.0, True, 11)
    """
    if (lo is None) != (hi is None):
        raise SchemaError("candidate_edges: give both lo and hi, or neither")
    mant = np.arange(10 ** (digits - 1), 10**digits) / 10 ** (digits - 1)
    mags = np.concatenate([mant * 10.0**k for k in range(-3, 12)])
    grid = np.concatenate([-mags, [0.0], mags])
    if lo is not None:
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise SchemaError(f"candidate_edges: need finite lo < hi, got [{lo}, {hi}]")
        grid = np.concatenate([grid[(grid >= lo) & (grid <= hi)], np.linspace(lo, hi, 1001)])
    if whole:
        grid = np.round(grid)
    return np.unique(grid)


def _budget_kwarg(acc: Accountant, amount: float) -> dict:
    return {"rho": amount} if acc.currency == "rho" else {"epsilon": amount}


def private_quantiles(acc: Accountant, key, values, levels, candidates, *, budget: float, target: str = "quantile") -> np.ndarray:
    """Private quantiles: one exponential-mechanism draw per level over public candidates (cost ``budget`` each).

    The quality of candidate ``c`` for level ``p`` is ``-|(1 - p) #{x < c} - p #{x >= c}|``: 0 where a
    fraction ``p`` of the values lies below ``c``; adding, removing or replacing one value moves it by at
    most 1 (McSherry & Talwar 2007, Theorem 6; Smith 2011, Section 3). With probability ``1 - beta`` a
    draw's quality is within ``(2 / eps) (ln |C| + ln(1/beta))`` of the best candidate's.

    Args:
        acc: the accountant that records the draws (pure or zCDP).
        key: a ``jax.random`` key.
        values: the private values (float64; NaN are ignored).
        levels: quantile levels in (0, 1).
        candidates: public candidate edges (e.g. :func:`candidate_edges`).
        budget: the cost of one draw in the accountant's currency (epsilon, or rho under zCDP).
        target: ledger label.

    Returns:
        One candidate per level (float64, in the order of ``levels``; not necessarily sorted).

    Example:
        >>> acc = Accountant(epsilon=1.0)
        >>> x = np.arange(1000.0)
        >>> q = private_quantiles(acc, jax.random.key(0), x, [0.5], candidate_edges(0, 1000), budget=1.0)
        >>> bool(abs(q[0] - 500) < 60), acc.spent
        (True, 1.0)
    """
    x = np.sort(np.asarray(values, np.float64))
    x = x[~np.isnan(x)]
    cand = np.asarray(candidates, np.float64)
    below = np.searchsorted(x, cand, side="left").astype(np.float64)  # #{x < c}
    keys = jax.random.split(key, max(len(levels), 1))
    out = []
    for k, p in zip(keys, levels):
        if not 0.0 < p < 1.0:
            raise SchemaError(f"private_quantiles: levels must lie in (0, 1), got {p}")
        quality = -np.abs((1 - p) * below - p * (len(x) - below))
        i = acc.exponential(k, quality, 1.0, target=f"{target} {p:.4g}", **_budget_kwarg(acc, budget))
        out.append(cand[int(i)])
    return np.asarray(out, np.float64)


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
    if acc.currency == "rho":
        noisy = acc.gaussian(key, c, math.sqrt(2.0) if acc.bounded else 1.0, rho=budget, target=target, integer=True)
        z = acc.ledger[-1].scale * float(norm.isf(delta))
    else:
        noisy = acc.laplace(key, c, 2.0 if acc.bounded else 1.0, epsilon=budget, target=target, integer=True)
        z = acc.ledger[-1].scale * math.log(1.0 / (2.0 * delta))
    tau = max(float(min_count), 1.0 + z)
    return sorted(v for v, y in zip(labels, noisy) if y > tau), tau


def column_kinds(frame: pd.DataFrame) -> dict:
    """Public type metadata of every column: ``{"kind": "number"|"date"|"text", "integer": bool, "decimals": int}``.

    A column is a number (resp. a date) when every non-empty field parses as one. This reads the data,
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
        if len(filled) and filled.str.fullmatch(_ISO_DATE).all():
            info["kind"] = "date"
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

    The budget is split equally over the columns; a binned column spends its share over its edge
    draws (``bins + 1`` private quantiles at levels ``tail, 1/bins, ..., (bins-1)/bins, 1 - tail``; or
    ``bins - 1`` inside a public range), a categorical column on one noisy histogram. See the module
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
        kinds: optional ``{column: "number"|"integer"|"date"|"text"}`` overriding :func:`column_kinds`.
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
        if name not in info or kind not in ("number", "integer", "date", "text"):
            raise SchemaError(f"private_schema: kinds[{name!r}] must name a column and be number|integer|date|text, got {kind!r}")
        info[name] = {"kind": "number" if kind == "integer" else kind, "integer": kind == "integer", "decimals": 0}
    ranges = dict(ranges or {})
    unknown = sorted(set(ranges) - set(info))
    if unknown:
        raise SchemaError(f"private_schema: ranges name columns {unknown} that the table does not have")
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
        date = meta["kind"] == "date"
        x = date_days(as_text(raw).str.strip(), name) if date else pd.to_numeric(as_text(raw).str.strip(), errors="coerce").to_numpy(np.float64)
        whole = date or meta["integer"]
        if name in ranges:
            lo, hi = (float(date_days([v], name)[0]) if date else float(v) for v in ranges[name])
            levels = [j / bins for j in range(1, bins)]
            cand = candidate_edges(lo, hi, whole=whole)
            q = private_quantiles(acc, k, x, levels, cand[(cand > lo) & (cand < hi)], budget=share / len(levels),
                                  target=f"preprocess {name}: quantile")
            edges = np.unique(np.concatenate([q, [lo, hi]]))
        else:
            edges = _free_edges(acc, k, x, bins, tail, share, date, whole, name)
        columns.append(NumericColumn(name, edges, bool(meta["integer"]) and not date, decode, True, True,
                                     "date" if date else "number", None if whole else meta["decimals"]))
        draws = bins - 1 if name in ranges else bins + 1
        grid = 1001 + 13500 if name in ranges else (DATE_RANGE[1] - DATE_RANGE[0] + 1 if date else 27001)
        notes.append(f"column {name!r}: {len(edges) - 1} bins at private quantiles; values outside "
                     f"[{edges[0]:g}, {edges[-1]:g}]{' (days)' if date else ''} are clipped into the end bins; a missing code; "
                     f"an edge's rank error is typically below {_rank_error(acc, share / draws, grid):,.0f} records "
                     "(larger budgets or public ranges shrink it)")
    spent = acc.spent - start
    provenance = {
        "private": True,
        "mechanism": "private quantiles (exponential mechanism) and thresholded noisy counts",
        "currency": acc.currency, "spent": spent, "delta": delta if n_text else 0.0, "min_count": min_count,
        "public": "column kinds (number, integer, date, text) and decimals are read from the data and treated as public",
    }
    return PrivateSchema(Schema(columns, provenance), spent, delta if n_text else 0.0, thresholds, notes)


def _rank_error(acc: Accountant, per_draw: float, candidates: int) -> float:
    """The exponential mechanism's rank-error scale ``(2 / eps) ln |C|`` for one draw of cost ``per_draw``
    (``eps = sqrt(8 rho)`` under zCDP; McSherry & Talwar 2007, Theorem 6 at beta = 1/e); data-independent."""
    eps = math.sqrt(8.0 * per_draw) if acc.currency == "rho" else per_draw
    return 2.0 / eps * (math.log(candidates) + 1.0)


def _free_edges(acc, key, x, bins, tail, share, date, whole, name) -> np.ndarray:
    """Edges without a public range: the inner quantiles over the wide public grid, then the clipping bounds.

    The clipping bounds (levels ``tail`` and ``1 - tail``) are drawn over 256 equally spaced candidates
    in windows placed by the inner private quantiles (``[q_1 - w, q_1]`` and ``[q_{k-1}, q_{k-1} + w]``
    with ``w = q_{k-1} - q_1``, not crossing zero unless ``q_1`` or ``q_{k-1}`` does: post-processing of
    released values, so adaptive composition applies).
    Over the wide grid, the many candidates below or above all the data (equal quality ``-tail n``)
    would outweigh the few good ones at small budgets; in a window they are few.
    """
    k_inner, k_outer = jax.random.split(key)
    levels = [j / bins for j in range(1, bins)]
    per_draw = share / (len(levels) + 2)
    grid = np.arange(DATE_RANGE[0], DATE_RANGE[1] + 1) if date else candidate_edges(whole=whole)
    inner = np.sort(private_quantiles(acc, k_inner, x, levels, grid, budget=per_draw, target=f"preprocess {name}: quantile"))
    width = inner[-1] - inner[0]
    if not width > 0:
        width = max(abs(inner[0]) * 0.5, 1.0)
    k_lo, k_hi = jax.random.split(k_outer)
    # A window does not cross zero when the inner quantiles do not: values beyond zero are then clipped to it
    # (a column of amounts whose 10% quantile is positive gets no negative synthetic values).
    lo_start = inner[0] - width if inner[0] < 0 else max(inner[0] - width, 0.0)
    hi_end = inner[-1] + width if inner[-1] > 0 else min(inner[-1] + width, 0.0)
    lo_cand = np.linspace(lo_start, inner[0], 256)
    hi_cand = np.linspace(inner[-1], hi_end, 256)
    if whole:
        lo_cand, hi_cand = np.unique(np.floor(lo_cand)), np.unique(np.ceil(hi_cand))
    lo = private_quantiles(acc, k_lo, x, [tail], lo_cand, budget=per_draw, target=f"preprocess {name}: lower bound")
    hi = private_quantiles(acc, k_hi, x, [1 - tail], hi_cand, budget=per_draw, target=f"preprocess {name}: upper bound")
    edges = np.unique(np.concatenate([lo, inner, hi]))
    if len(edges) < 2:
        edges = np.array([edges[0], edges[0] + 1.0])
    return edges
