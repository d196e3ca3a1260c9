"""A self-contained HTML utility report: synthetic vs real marginals, 2-way TVD, workload errors, the ledger.

Every number and picture of the report except the ledger is computed from the real (private) table
without noise: the page says so at the top and is not fit for publication as is. Figures are
matplotlib PNGs embedded as base64 ``data:`` URIs, so the page is one file.

The total variation distance of a marginal is ``TVD(p, q) = 1/2 sum_x |p(x) - q(x)|`` over the
normalised tables (Levin, Peres & Wilmer, "Markov chains and mixing times", 2009, Proposition 4.2).

With ``raw=`` (:func:`pgmjax.cli.report_raw.raw_scale_comparison`, what ``pgmjax report`` and ``run --html``
on raw data pass) the one-way section compares the values as the user holds them, on an axis spanning both
tables, and warns about columns whose synthetic range covers under 50% of the real one: binned by the schema,
a tail clipped away by a narrow private range would look perfect. The 2-way section stays on the schema's bins.

Example:
    >>> real = Dataset(np.array([[0, 1], [1, 0], [1, 1], [0, 0]]), {"a": 2, "b": 2})
    >>> synth = Dataset(np.array([[0, 1], [1, 1], [1, 1], [1, 0]]), {"a": 2, "b": 2})
    >>> round(marginal_tvds(real, synth, [("a",), ("a", "b")])[("a",)], 3)
    0.25
    >>> page = utility_report(real, synth)
    >>> page.startswith("<!DOCTYPE html>") and "NOT private" in page and page.count("data:image/png;base64,") >= 2
    True
"""

from __future__ import annotations

import base64
import html
import io
import itertools

import numpy as np

from ..data.dataset import Dataset
from .report_raw import count_tvd

__all__ = ["marginal_tvds", "utility_report", "write_report"]


def marginal_tvds(real: Dataset, synthetic: Dataset, cliques) -> dict:
    """Total variation distance between the normalised marginals of two tables, per clique.

    Args:
        real, synthetic: datasets over the same domain.
        cliques: attribute tuples.

    Returns:
        ``{clique: TVD}`` with TVD in [0, 1].
    """
    if real.domain != synthetic.domain:
        raise ValueError(f"marginal_tvds: the domains differ: {real.domain} vs {synthetic.domain}")
    out = {}
    for c in cliques:
        c = tuple(c)
        out[c] = count_tvd(real.marginal(c), synthetic.marginal(c))
    return out


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return '<img alt="figure" src="data:image/png;base64,' + base64.b64encode(buf.getvalue()).decode("ascii") + '">'


def _labels(schema, attr: str, size: int) -> list[str]:
    """Readable labels of an attribute's codes: bin ranges or categories (codes without a schema)."""
    col = None if schema is None else schema.columns.get(attr)
    if col is None:
        return [str(i) for i in range(size)]
    if hasattr(col, "categories"):
        labels = [c if c != "" else "(empty)" for c in col.categories]
        return labels + ([col.other] if col.other is not None else [])
    if getattr(col, "kind", "number") == "date":
        from ..data.schema_columns import days_to_dates

        e = days_to_dates(col.edges)
    else:
        e = [f"{v:.4g}" for v in col.edges]
    labels = [f"[{e[i]}, {e[i + 1]})" for i in range(len(col.edges) - 1)]
    return labels + (["(missing)"] if col.missing else [])


def _histograms(real: Dataset, synthetic: Dataset, schema, tvd1: dict) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    attrs = list(real.domain.attributes)
    cols = 2
    rows = (len(attrs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(11, 2.8 * rows), squeeze=False)
    for ax, a in zip(axes.ravel(), attrs):
        p, q = real.marginal((a,)), synthetic.marginal((a,))
        p, q = p / max(p.sum(), 1), q / max(q.sum(), 1)
        x = np.arange(len(p))
        ax.bar(x - 0.2, p, 0.4, label="real")
        ax.bar(x + 0.2, q, 0.4, label="synthetic")
        labels = _labels(schema, a, len(p))
        if len(labels) <= 40:
            ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
        ax.set_title(f"{a} (TVD {tvd1[(a,)]:.3f})", fontsize=9)
        ax.legend(fontsize=7)
    for ax in axes.ravel()[len(attrs):]:
        ax.axis("off")
    fig.tight_layout()
    return _png(fig)


def _raw_histograms(raw: dict) -> str:
    """Per-column bars of :func:`pgmjax.cli.report_raw.raw_scale_comparison` (shares on the common axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = list(raw["columns"].items())
    rows = max((len(cols) + 1) // 2, 1)
    fig, axes = plt.subplots(rows, 2, figsize=(11, 2.8 * rows), squeeze=False)
    for ax, (name, c) in zip(axes.ravel(), cols):
        x = np.arange(len(c["real"]))
        ax.bar(x - 0.2, c["real"], 0.4, label="real")
        ax.bar(x + 0.2, c["synthetic"], 0.4, label="synthetic")
        step = max(1, len(x) // 12)  # ~12 readable tick labels whatever the bin count
        ax.set_xticks(x[::step], c["labels"][::step], rotation=60, ha="right", fontsize=7)
        ax.set_title(f"{name} (TVD {c['tvd']:.3f}{', NARROW RANGE' if c['flagged'] else ''})", fontsize=9,
                     color="#c00" if c["flagged"] else "black")
        ax.legend(fontsize=7)
    for ax in axes.ravel()[len(cols):]:
        ax.axis("off")
    fig.tight_layout()
    return _png(fig)


def _raw_section(raw: dict) -> list[str]:
    """The one-way section on the raw scale: range warnings, the bars, and a table of distances and tails."""
    t = raw["threshold"]
    parts = ["<h2>One-way distributions on the raw scale: real vs synthetic (NOT private)</h2>",
             f"<p>Values as held in both CSVs (unparsable fields missing), on one axis spanning both tables; rare "
             f"categories folded into (other) in both. A column is flagged when its synthetic range (1st-99th "
             f"percentiles) covers less than {t:.0%} of the real one.</p>"]
    parts += [f'<p class="warn">Warning: {html.escape(w)}</p>' for w in raw["warnings"]]
    if raw["columns"]:
        parts.append(_raw_histograms(raw))

    def pct(v):
        return "" if v is None else f"{v:.1%}"

    rows = []
    for name, c in raw["columns"].items():
        tails = c.get("tails", {})
        rows.append((name, c["kind"], f"{c['tvd']:.4f}", pct(c["coverage"]),
                     "" if not c.get("real_range") else " .. ".join(c["real_range"]),
                     "" if not c.get("synthetic_range") else " .. ".join(c["synthetic_range"]),
                     pct(tails.get("real_below_synthetic")), pct(tails.get("real_above_synthetic")),
                     "FLAGGED" if c["flagged"] else ""))
    parts.append(_table(rows, ["column", "kind", "TVD (raw scale)", "range covered", "real 1st..99th pct",
                               "synthetic 1st..99th pct", "real below synthetic min", "real above synthetic max",
                               f"range under {t:.0%}"]))
    return parts


def _heatmap(attrs, tvd2: dict) -> str:
    import matplotlib.pyplot as plt

    k = len(attrs)
    m = np.zeros((k, k))
    for (a, b), v in tvd2.items():
        i, j = attrs.index(a), attrs.index(b)
        m[i, j] = m[j, i] = v
    fig, ax = plt.subplots(figsize=(1.0 + 0.5 * k, 0.8 + 0.45 * k))
    im = ax.imshow(m, cmap="viridis", vmin=0)
    ax.set_xticks(range(k), attrs, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(k), attrs, fontsize=8)
    fig.colorbar(im, ax=ax, label="2-way TVD")
    return _png(fig)


def _table(rows, header) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def utility_report(real: Dataset, synthetic: Dataset, *, schema=None, workload=None, report: dict | None = None,
                   title: str = "pgmjax utility report", worst: int = 8, raw: dict | None = None) -> str:
    """The HTML page comparing a synthetic table with the real one.

    Args:
        real: the real table, integer-coded (e.g. ``schema.encode(frame)``).
        synthetic: the synthetic table over the same domain.
        schema: optional :class:`~pgmjax.Schema` to label bins and categories.
        workload: optional :class:`~pgmjax.Workload`: its error (paper scale, see
            :func:`pgmjax.model.metrics.workload_error`) is reported.
        report: optional ``pgmjax run`` report dict: its privacy summary and ledgers are shown
            (the only private numbers of the page).
        title: the page title.
        worst: how many of the worst 2-way marginals are listed.
        raw: optional :func:`pgmjax.cli.report_raw.raw_scale_comparison` of the raw tables: the one-way
            section and mean 1-way TVD are then on the raw scale, with its range warnings (without it, on the
            integer codes, as for integer-coded data).

    Returns:
        The page as a string (``<!DOCTYPE html>`` ... with embedded PNGs).
    """
    if real.domain != synthetic.domain:
        raise ValueError(f"utility_report: the domains differ: {real.domain} vs {synthetic.domain}")
    attrs = list(real.domain.attributes)
    tvd1 = marginal_tvds(real, synthetic, [(a,) for a in attrs])
    pairs = list(itertools.combinations(attrs, 2))
    tvd2 = marginal_tvds(real, synthetic, pairs)
    parts = [
        "<!DOCTYPE html>", '<html><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto} table{border-collapse:collapse}"
        " td,th{border:1px solid #999;padding:2px 6px;font-size:12px} .warn{background:#fdd;border:2px solid #c00;padding:8px}"
        " .ok{background:#dfd;border:1px solid #393;padding:8px}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        '<p class="warn"><b>Computed from the raw data: NOT private.</b> The histograms, distances and errors below compare '
        "the synthetic table with the real one; they read the real table without noise and are not differentially "
        "private. Only the privacy section (budget and ledger) describes the private release. Do not publish this page "
        "as is.</p>",
    ]
    if report is not None:
        priv = report.get("privacy", {})
        pre = report.get("preprocessing")
        parts.append("<h2>Privacy (what is private)</h2>")
        parts.append(_table([(k, v) for k, v in priv.items()], ["quantity", "value"]))
        if pre is not None and pre.get("private"):
            parts.append(f'<p class="ok">The schema was derived with differential privacy: {html.escape(pre["split"])}; '
                         f'category discovery adds delta={pre["discovery_delta"]:g}. {html.escape(str(pre.get("public")))}.</p>')
            # The schema's warnings (narrow ranges, columns largely unreadable as their kind): from released values only.
            parts += [f'<p class="warn">Warning: {html.escape(str(w))}</p>' for w in pre.get("warnings", [])]
        elif pre is not None:
            parts.append(f'<p class="warn">{html.escape(pre["warning"])}</p>')
        ledger = [(e.get("index"), e.get("mechanism"), e.get("target"), e.get("size"), f"{e.get('cost', 0):.4g}")
                  for e in (pre or {}).get("ledger", [])]
        if ledger:
            parts += ["<h3>Preprocessing ledger</h3>", _table(ledger, ["#", "mechanism", "target", "size", "cost"])]
        mech = [(e.get("index"), e.get("mechanism"), e.get("target"), e.get("size"), f"{e.get('cost', 0):.4g}")
                for e in report.get("ledger", [])]
        if mech:
            parts += ["<h3>Mechanism ledger</h3>", _table(mech[:200], ["#", "mechanism", "target", "size", "cost"])]
    if raw is not None:
        parts += _raw_section(raw)
    else:
        parts += ["<h2>One-way marginals: real vs synthetic (NOT private)</h2>", _histograms(real, synthetic, schema, tvd1)]
    if pairs:
        parts += ["<h2>Two-way total variation distance (NOT private)</h2>"
                  + (" <p>On the schema's bins (values outside its range clipped into the end bins).</p>" if raw else ""),
                  _heatmap(attrs, tvd2)]
        top = sorted(tvd2.items(), key=lambda kv: -kv[1])[:worst]
        parts += [f"<h3>The {len(top)} worst two-way marginals</h3>",
                  _table([(" x ".join(c), f"{v:.4f}") for c, v in top], ["marginal", "TVD"])]
    raw_tvds = [c["tvd"] for c in raw["columns"].values()] if raw else []
    summary = ([("mean 1-way TVD (raw scale)", f"{np.mean(raw_tvds):.4f}")] if raw_tvds else
               [("mean 1-way TVD", f"{np.mean(list(tvd1.values())):.4f}")])
    if pairs:
        summary.append(("mean 2-way TVD", f"{np.mean(list(tvd2.values())):.4f}"))
    if workload is not None:
        from ..model import metrics

        summary.append(("workload error (paper scale)", f"{metrics.workload_error(workload, real, synthetic):.4f}"))
    parts += ["<h2>Errors (NOT private)</h2>", _table(summary, ["measure", "value"]), "</body></html>"]
    return "\n".join(parts)


def write_report(path, real: Dataset, synthetic: Dataset, **kwargs) -> str:
    """Write :func:`utility_report` to ``path`` (UTF-8, atomically, replacing a file there:
    :func:`pgmjax.cli.outputs.write_text`); returns the path."""
    from .outputs import write_text

    write_text(path, utility_report(real, synthetic, **kwargs), overwrite=True)
    return str(path)
