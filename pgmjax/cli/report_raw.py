"""The utility report's one-way comparison on the raw scale: values as the user holds them, not the schema's bins.

Comparing two tables after a schema has clipped and binned them hides what the clipping lost: when a private
range collapses to 1980, the real dates are clipped into 1980 too and the binned distance looks perfect. Here
numbers and dates are read from the raw fields (leniently, :func:`pgmjax.data.raw_fields.column_values`:
an unparsable field is missing), histogrammed on one axis spanning both tables, and compared there:

* **Numbers and dates**: :func:`common_edges` cuts the union of both tables' values between its 1st and 99th
  percentiles into equal bins, plus one bin for each tail beyond (down to the union's minimum, up to its
  maximum), plus a "(missing)" bin; the shares of each table below / above the other's range are reported.
* **Categories**: a category under ``rare`` (1%) of the real rows, or absent from them, is folded into
  ``"(other)"`` in both tables alike.
* **Range coverage** (:func:`range_coverage`): the share of the real range (its 1st-99th percentiles) that the
  synthetic 1st-99th percentile range overlaps; a column under ``threshold`` (50%) is flagged with a warning.

Everything here reads the real table without noise: it is NOT private (the report says so).

Example:
    >>> import pandas as pd
    >>> real = pd.DataFrame({"x": [str(v) for v in range(100)], "c": ["a"] * 99 + ["b"]})
    >>> synth = pd.DataFrame({"x": ["5"] * 100, "c": ["a"] * 100})
    >>> out = raw_scale_comparison(real, synth, {"x": "number", "c": "category"}, rare=0.05)
    >>> out["columns"]["x"]["flagged"], out["columns"]["x"]["tvd"] > 0.9, out["columns"]["c"]["labels"]
    (True, True, ['a', '(other)'])
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..data.date_forms import split_kind
from ..data.raw_fields import column_values
from ..data.schema_columns import as_text, days_to_dates, days_to_datetimes

__all__ = ["BINS", "COVERAGE_THRESHOLD", "RARE_SHARE", "common_edges", "compare_categorical", "compare_numeric",
           "count_tvd", "format_value", "range_coverage", "raw_scale_comparison", "schema_kinds"]

#: Flag a column whose synthetic 1st-99th percentile range covers less than this share of the real one.
COVERAGE_THRESHOLD = 0.5
#: Categories under this share of the real rows are folded into "(other)" in both tables.
RARE_SHARE = 0.01
#: Equal-width bins between the union's 1st and 99th percentiles.
BINS = 30
OTHER = "(other)"
MISSING = "(missing)"


def count_tvd(p, q) -> float:
    """Total variation distance ``1/2 sum |p/|p| - q/|q||`` of two count (or share) vectors on the same cells.

    Args:
        p, q: non-negative arrays of one shape (an all-zero one counts as all-zero shares).

    Returns:
        The distance in [0, 1].

    Example:
        >>> count_tvd([3, 1], [1, 1])
        0.25
    """
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    return 0.5 * float(np.abs(p / max(p.sum(), 1e-300) - q / max(q.sum(), 1e-300)).sum())


def format_value(x: float, kind: str) -> str:
    """A value for the page: an ISO date or datetime for date columns (days since 1970-01-01), else 6 significant digits."""
    if kind == "date":
        return str(days_to_dates([np.floor(x)])[0])
    if kind == "datetime":
        return str(days_to_datetimes([x])[0])
    return f"{x:.6g}"


def common_edges(real: np.ndarray, synthetic: np.ndarray, bins: int = BINS) -> np.ndarray:
    """Bin edges spanning both tables' values: ``bins`` equal bins between the union's 1st and 99th percentiles,
    widened by one tail bin down to the union's minimum and one up to its maximum where they lie beyond.

    Args:
        real, synthetic: float arrays (NaN: missing, ignored).
        bins: the number of equal bins between the percentiles.

    Returns:
        Increasing edges (the last bin closed, as :func:`numpy.histogram`); empty when neither table has a value.

    Example:
        >>> common_edges(np.arange(101.0), np.array([np.nan]), bins=2).tolist()
        [0.0, 1.0, 50.0, 99.0, 100.0]
    """
    u = np.concatenate([real, synthetic])
    u = u[np.isfinite(u)]
    if u.size == 0:
        return np.array([])
    lo, hi = np.percentile(u, [1, 99])
    if hi <= lo:  # most values equal: the whole span (a single point gets one bin of width 1)
        lo, hi = u.min(), (u.max() if u.max() > u.min() else u.min() + 1)
    edges = np.linspace(lo, hi, bins + 1)
    # Tails beyond the percentiles get their own bin, so the share lost beyond the other table's range shows.
    return np.concatenate([[u.min()] if u.min() < lo else [], edges, [u.max()] if u.max() > hi else []])


def range_coverage(real: np.ndarray, synthetic: np.ndarray) -> float | None:
    """The share of the real range covered by the synthetic one, both as 1st-99th percentiles.

    Args:
        real, synthetic: float arrays (NaN: missing, ignored).

    Returns:
        ``len([r1, r99] & [s1, s99]) / len([r1, r99])`` in [0, 1] (a one-point real range: 1 if the synthetic
        range holds it, else 0); 0 when the synthetic table has no value; None when the real one has none.

    Example:
        >>> range_coverage(np.arange(1985.0, 2021.0), np.full(50, 1980.0))
        0.0
    """
    r, s = real[np.isfinite(real)], synthetic[np.isfinite(synthetic)]
    if r.size == 0:
        return None
    if s.size == 0:
        return 0.0
    (r1, r99), (s1, s99) = np.percentile(r, [1, 99]), np.percentile(s, [1, 99])
    if r99 <= r1:
        return float(s1 <= r1 <= s99)
    return float(max(0.0, min(r99, s99) - max(r1, s1)) / (r99 - r1))


def compare_numeric(real: np.ndarray, synthetic: np.ndarray, kind: str = "number", *, bins: int = BINS,
                    threshold: float = COVERAGE_THRESHOLD) -> dict:
    """One number or date column of both tables on a common axis (:func:`common_edges`).

    Args:
        real, synthetic: float arrays (NaN: missing), e.g. from :func:`pgmjax.data.raw_fields.column_values`.
        kind: ``"number"``, ``"date"`` or ``"datetime"`` (how edges and ranges are written).
        bins: equal bins between the union's 1st and 99th percentiles.
        threshold: flag the column when :func:`range_coverage` is under it.

    Returns:
        A JSON-able dict: ``kind``, ``edges``, ``labels``, ``real`` and ``synthetic`` shares per bin (a last
        ``"(missing)"`` bin when either has a missing value), ``tvd`` over those bins, ``coverage``, ``flagged``,
        ``real_range`` and ``synthetic_range`` (1st, 99th percentiles, written as values of ``kind``) and
        ``tails``: the share of each table's values below / above the other's minimum / maximum.

    Example:
        >>> c = compare_numeric(np.arange(1000.0), np.arange(1000.0) + 0.5)
        >>> c["flagged"], round(c["tvd"], 2), c["tails"]["real_below_synthetic"], c["labels"][0]
        (False, 0.01, 0.001, '[0, 9.995)')
    """
    real, synthetic = np.asarray(real, np.float64), np.asarray(synthetic, np.float64)
    edges = common_edges(real, synthetic, bins)
    missing = bool(np.isnan(real).any() or np.isnan(synthetic).any())

    def shares(x):
        h = np.histogram(x[np.isfinite(x)], edges)[0].astype(np.float64) if len(edges) else np.zeros(0)
        h = np.append(h, np.isnan(x).sum()) if missing else h
        return h / max(len(x), 1)

    p, q = shares(real), shares(synthetic)
    e = [format_value(v, kind) for v in edges]
    labels = [f"[{e[i]}, {e[i + 1]}{']' if i == len(e) - 2 else ')'}" for i in range(len(e) - 1)] + [MISSING] * missing
    r, s = real[np.isfinite(real)], synthetic[np.isfinite(synthetic)]
    cov = range_coverage(real, synthetic)

    def share(x, test):
        return float(test(x).mean()) if x.size else 0.0

    def written(x):
        return [format_value(v, kind) for v in np.percentile(x, [1, 99])] if x.size else None

    tails = {"real_below_synthetic": share(r, lambda x: x < s.min()) if s.size else None,
             "real_above_synthetic": share(r, lambda x: x > s.max()) if s.size else None,
             "synthetic_below_real": share(s, lambda x: x < r.min()) if r.size else None,
             "synthetic_above_real": share(s, lambda x: x > r.max()) if r.size else None}
    return {"kind": kind, "edges": [float(v) for v in edges], "labels": labels, "real": p.tolist(),
            "synthetic": q.tolist(), "tvd": count_tvd(p, q), "coverage": cov,
            "flagged": cov is not None and cov < threshold, "real_range": written(r),
            "synthetic_range": written(s), "tails": tails}


def compare_categorical(real, synthetic, *, rare: float = RARE_SHARE) -> dict:
    """One categorical column of both tables, rare categories folded into ``"(other)"`` identically in both.

    Args:
        real, synthetic: raw values (compared as text; an empty field is the category ``"(empty)"``).
        rare: a category under this share of the real rows (or absent from them) becomes ``"(other)"``.

    Returns:
        A JSON-able dict: ``kind`` (``"category"``), ``labels`` (kept categories by real share, then
        ``"(other)"`` if either table has one), ``real`` and ``synthetic`` shares, ``tvd``, ``flagged`` (False).

    Example:
        >>> c = compare_categorical(["a"] * 98 + ["b", "c"], ["a"] * 90 + ["d"] * 10, rare=0.02)
        >>> c["labels"], c["synthetic"], round(c["tvd"], 2)
        (['a', '(other)'], [0.9, 0.1], 0.08)
    """
    r = as_text(pd.Series(real, dtype=object)).replace("", "(empty)").to_numpy()
    s = as_text(pd.Series(synthetic, dtype=object)).replace("", "(empty)").to_numpy()
    counts = pd.Series(r).value_counts()
    kept = [str(c) for c, n in counts.items() if n >= rare * max(len(r), 1) and c != OTHER]
    folded_r, folded_s = ~np.isin(r, kept), ~np.isin(s, kept)
    labels = kept + ([OTHER] if folded_r.any() or folded_s.any() else [])

    def shares(x, folded):
        vc = pd.Series(x[~folded]).value_counts()
        h = np.array([vc.get(c, 0) for c in kept] + ([folded.sum()] if len(labels) > len(kept) else []), np.float64)
        return h / max(len(x), 1)

    p, q = shares(r, folded_r), shares(s, folded_s)
    return {"kind": "category", "labels": labels, "real": p.tolist(), "synthetic": q.tolist(),
            "tvd": count_tvd(p, q), "coverage": None, "flagged": False}


def schema_kinds(schema) -> dict:
    """``{column: "number" | "date" | "datetime" | "category"}`` of a :class:`~pgmjax.Schema`'s columns; a date column
    with a date format is ``"date dd/mm/yyyy"`` (or ``mm/dd/yyyy``), so that the real table's dates are read as
    the schema reads them (:func:`pgmjax.data.date_forms.read_kind`), not dropped on both sides."""
    return {name: col.read_as if hasattr(col, "edges") else "category" for name, col in schema.columns.items()}


def raw_scale_comparison(real: pd.DataFrame, synthetic: pd.DataFrame, kinds: dict, *, bins: int = BINS,
                         rare: float = RARE_SHARE, threshold: float = COVERAGE_THRESHOLD) -> dict:
    """Every column of two raw tables compared on the raw scale (NOT private: it reads the real table).

    Args:
        real, synthetic: raw frames (e.g. :func:`pgmjax.data.schema.read_raw_csv`, or ``Schema.decode``).
        kinds: ``{column: kind}`` (:func:`schema_kinds`): ``"number"``, ``"date"``, ``"datetime"`` or
            ``"category"``; columns absent from ``real`` are skipped.
        bins, rare, threshold: see :func:`compare_numeric` and :func:`compare_categorical`.

    Returns:
        ``{"threshold": t, "columns": {name: comparison}, "warnings": [text, ...]}`` (JSON-able): one warning
        line per flagged column and per column missing from the synthetic table.
    """
    out = {"threshold": threshold, "columns": {}, "warnings": []}
    for name, kind in kinds.items():
        if name not in real.columns:
            continue
        if name not in synthetic.columns:
            out["warnings"].append(f"{name}: absent from the synthetic table")
            continue
        if kind == "category":
            c = compare_categorical(real[name], synthetic[name], rare=rare)
        else:
            c = compare_numeric(column_values(real[name], kind), column_values(synthetic[name], kind),
                                split_kind(kind)[0], bins=bins, threshold=threshold)
        if c["flagged"]:
            sr = "no values" if c["synthetic_range"] is None else "[{}, {}]".format(*c["synthetic_range"])
            c["warning"] = (f"{name}: the synthetic range {sr} covers {c['coverage']:.0%} of the real range "
                            "[{}, {}]".format(*c["real_range"]) + f" (1st-99th percentiles), under the "
                            f"{threshold:.0%} threshold: real values outside it are missing from the synthetic data "
                            "(e.g. clipped by a narrow private range)")
            out["warnings"].append(c["warning"])
        out["columns"][name] = c
    return out
