"""``pgmjax run --intervals LEVEL``: every workload answer of the model with its interval, in the report."""

from __future__ import annotations

import sys

import jax
import numpy as np


def add_run_arguments(parser, level_type) -> None:
    g = parser.add_argument_group("error bars")
    g.add_argument("--intervals", type=level_type, metavar="LEVEL",
                   help="with --workload and --report: each workload answer of the model with its LEVEL interval "
                        "(parametric bootstrap with batched refits; they cover the noise, not model mismatch)")
    g.add_argument("--interval-replicates", type=int, default=100, metavar="B",
                   help="bootstrap refits for --intervals (default 100)")
    g.add_argument("--interval-fit", choices=("auto", "qp", "mirror_descent", "lbfgs"), default="auto",
                   help="the refits' solver for --intervals: auto (default) fits exactly by a quadratic program where "
                        "that applies (L2 loss, MST's measurements), by mirror descent otherwise")


def check(args, workload) -> None:
    """Refuse --intervals without what it needs, before anything runs."""
    if args.intervals is None:
        return
    if workload is None:
        raise ValueError("--intervals needs --workload (the queries to put error bars on)")
    if args.report is None:
        raise ValueError("--intervals writes to the report: give --report JSON")
    if args.interval_replicates < 10:
        raise ValueError(f"--interval-replicates must be at least 10, got {args.interval_replicates}")


#: Significant digits of the report's per-cell numbers (value, lo, hi, se): far below the intervals' width.
DIGITS = 6


def report_entry(args, result, workload, key, quiet: bool = True) -> dict | None:
    """The report's ``intervals`` entry (post-processing of the measurements: private).

    What a user needs: per workload query its cells' estimates (``value``), interval (``lo``, ``hi``) and
    standard error (``se``), to :data:`DIGITS` significant digits, and the settings (level, replicates, solver);
    never the bootstrap replicates (``B`` refits per cell; :func:`pgmjax.uncertainty.workload_intervals` keeps
    them inside). ``run`` writes the report's number lists one per line (:func:`compact_json`).

    Args:
        args: ``pgmjax run``'s arguments (``intervals``, ``interval_replicates``, ``interval_fit``).
        result: the mechanism's result.
        workload: the workload.
        key: the run's key (folded for the bootstrap).
        quiet: no progress bar (``--quiet``).

    Returns:
        The entry, or None without ``--intervals``.
    """
    if args.intervals is None:
        return None
    from tqdm.auto import tqdm

    fit = getattr(args, "interval_fit", "auto")
    bar = tqdm(total=1 + len(workload.queries), desc=f"intervals: {args.interval_replicates} bootstrap refits",
               unit="step", file=sys.stderr, disable=quiet, dynamic_ncols=True)
    try:
        ivs = result.intervals(workload, level=args.intervals, key=jax.random.fold_in(key, 11),
                               B=args.interval_replicates, fit_method=fit)
        bar.update(1)
        bar.set_description_str("intervals: per query", refresh=False)
        queries = []
        for wq, iv in zip(workload.queries, ivs):
            queries.append({
                "clique": list(wq.clique),
                **{k: _digits(getattr(iv, k)) for k in ("value", "lo", "hi", "se")},
                "estimable": bool(iv.estimable),
                "converged": bool(iv.diagnostics.get("converged", True)),
            })
            if "fit_gap" in iv.diagnostics:  # the exact fit's answer minus the model's (the model's fit stopped early)
                queries[-1]["fit_gap"] = float(np.max(np.abs(iv.diagnostics["fit_gap"])))
            bar.update(1)
    finally:
        bar.close()
    diag = ivs[0].diagnostics if ivs else {}
    entry = {"level": args.intervals, "method": "bootstrap", "fit_method": diag.get("fit_method", fit),
             "replicates": args.interval_replicates, "digits": DIGITS,
             "covers": "the measurement noise, given the selected cliques; not model mismatch", "queries": queries}
    if "fit_method_reason" in diag:
        entry["fit_method_reason"] = diag["fit_method_reason"]
    return entry


def _digits(x) -> list:
    return [float(f"{v:.{DIGITS}g}") for v in np.asarray(x, float).reshape(-1)]


def compact_json(report: dict) -> str:
    """``json.dumps(report, indent=2)`` with every list of plain numbers on one line (not one number a line:
    an intervals report of 36 two-way marginals of 10^4 cells was 51.7 MB that way).

    Example:
        >>> print(compact_json({"a": {"v": [1, 2.5]}, "b": "x"}))
        {
          "a": {
            "v": [1, 2.5]
          },
          "b": "x"
        }
    """
    import json

    marks: dict[str, str] = {}

    def mark(x):
        if isinstance(x, dict):
            return {k: mark(v) for k, v in x.items()}
        if isinstance(x, list):
            if x and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x):
                token = f"@@list{len(marks)}@@"
                marks[token] = json.dumps(x)
                return token
            return [mark(v) for v in x]
        return x

    text = json.dumps(mark(report), indent=2)
    for token, value in marks.items():
        text = text.replace(f'"{token}"', value, 1)
    return text
