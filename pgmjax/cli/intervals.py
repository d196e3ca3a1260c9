"""``pgmjax run --intervals LEVEL``: every workload answer of the model with its interval, in the report."""

from __future__ import annotations

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


def report_entry(args, result, workload, key) -> dict | None:
    """The report's ``intervals`` entry (post-processing of the measurements: private)."""
    if args.intervals is None:
        return None
    fit = getattr(args, "interval_fit", "auto")
    ivs = result.intervals(workload, level=args.intervals, key=jax.random.fold_in(key, 11), B=args.interval_replicates,
                           fit_method=fit)
    queries = []
    for wq, iv in zip(workload.queries, ivs):
        queries.append({
            "clique": list(wq.clique),
            "value": np.asarray(iv.value, float).reshape(-1).tolist(),
            "lo": np.asarray(iv.lo, float).reshape(-1).tolist(),
            "hi": np.asarray(iv.hi, float).reshape(-1).tolist(),
            "se": np.asarray(iv.se, float).reshape(-1).tolist(),
            "estimable": bool(iv.estimable),
            "converged": bool(iv.diagnostics.get("converged", True)),
        })
        if "fit_gap" in iv.diagnostics:  # the exact fit's answer minus the model's (the model's fit stopped early)
            queries[-1]["fit_gap"] = float(np.max(np.abs(iv.diagnostics["fit_gap"])))
    diag = ivs[0].diagnostics if ivs else {}
    entry = {"level": args.intervals, "method": "bootstrap", "fit_method": diag.get("fit_method", fit),
             "replicates": args.interval_replicates,
             "covers": "the measurement noise, given the selected cliques; not model mismatch", "queries": queries}
    if "fit_method_reason" in diag:
        entry["fit_method_reason"] = diag["fit_method_reason"]
    return entry
