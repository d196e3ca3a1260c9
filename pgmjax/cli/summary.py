"""The run's report pieces: JSON-safe values, the privacy summary and its line, the model, the evaluation."""

from __future__ import annotations

import itertools

import numpy as np

from .guards import number


def jsonable(x, max_items: int = 10_000):
    """Plain JSON types: tuples -> lists, numpy/jax scalars -> numbers, non-finite -> strings, big arrays -> a shape note."""
    import math

    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, np.bool_):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {str(k): jsonable(v, max_items) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        if len(x) > max_items:
            return f"<{len(x)} items>"
        return [jsonable(v, max_items) for v in x]
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        a = np.asarray(x)
        if a.dtype.kind in "biuf" and a.size <= max_items:
            return jsonable(a.tolist(), max_items)
        return f"<array {a.dtype} {tuple(a.shape)}>"
    return repr(x)


def privacy_summary(acc, epsilon_given: float | None = None) -> dict:
    """Budget given and spent, in the accountant's currency, with the (epsilon, delta) guarantee.

    The epsilon budget is reported as given: converting the zCDP budget ``rho = cdp_rho(eps, delta)``
    back with ``cdp_eps`` is not exact at large epsilon (1e6 comes back as 997103: the two bisections
    use different bounds), and spending all of ``rho`` is spending all of the given (eps, delta).
    """
    s = acc.summary()
    out = {"composition": s["composition"], "bounded": s["bounded"], "ledger_entries": s["entries"]}
    if acc.currency == "rho":
        out.update({"rho_budget": s["budget"], "rho_spent": s["spent"]})
        if acc.delta is not None:
            from ..privacy import cdp_eps

            eps_budget = float(epsilon_given) if epsilon_given is not None else float(cdp_eps(acc.budget, acc.delta))
            eps_spent, delta = (float(v) for v in acc.epsilon_delta())
            out["epsilon_budget"], out["delta"] = eps_budget, delta
            out["epsilon_spent"] = eps_budget if s["spent"] >= s["budget"] * (1 - 1e-12) else min(eps_spent, eps_budget)
    else:
        out.update({"epsilon_budget": s["budget"], "epsilon_spent": s["spent"]})
        out["delta"] = 0.0 if s["composition"] == "pure" else acc.delta
    out["fraction_spent"] = s["spent"] / s["budget"]
    return out


def privacy_line(p: dict) -> str:
    num = number  # as a person writes it: 1e6, not 1e+06
    pct = f"{100 * p['fraction_spent']:.1f}%"
    if "rho_budget" in p:
        line = f"rho-zCDP budget rho={num(p['rho_budget'])}, spent {num(p['rho_spent'])} ({pct})"
        if "delta" in p:
            line = f"(eps={num(p['epsilon_budget'])}, delta={num(p['delta'])})-DP via " + line + f" -> eps={num(p['epsilon_spent'])}"
        return line
    if p["composition"] == "pure":
        return f"pure eps-DP: budget eps={num(p['epsilon_budget'])}, spent {num(p['epsilon_spent'])} ({pct}), delta=0"
    return (
        f"(eps, delta)-DP by {p['composition'].replace('_', ' ')} composition: budget eps={num(p['epsilon_budget'])}, "
        f"delta={num(p['delta'])}; spent eps={num(p['epsilon_spent'])} ({pct})"
    )


def model_info(model) -> dict:
    cliques = [list(c) for c in model.cliques]
    cells = int(sum(model.domain.size(c) for c in model.cliques))
    if getattr(model, "approximate", False):  # the approximate oracle's model: a region graph, no junction tree
        return {"cliques": cliques, "n_cliques": len(cliques), "cells": cells, "size_mb": 8.0 * cells / 2**20,
                "oracle": dict(model.info), "regions": len(model.regions), "total": float(model.total)}
    return {
        "cliques": cliques,
        "n_cliques": len(cliques),
        "cells": cells,
        "size_mb": 8.0 * cells / 2**20,  # float64 convention of hypothetical_model_size
        "treewidth": int(model.junction_tree.treewidth),
        "total": float(model.total),
    }


def evaluate(workload, label, data, synth, result) -> dict:
    """Workload error (paper scale) and mean 2-way TVD of the outputs against the input (NOT private)."""
    from ..model import metrics

    out = {
        "workload": label,
        "queries": len(workload),
        "scale": "paper: mean over queries of ||W mu - W mu_hat||_1 / (2 ||W mu||_1)",
        "private": False,
    }
    pairs = list(itertools.combinations(data.domain.attributes, 2))
    arms = {"synthetic": synth, "model": result.model}
    if result.original is not None:
        arms["original"] = result.original
    for arm, est in arms.items():
        try:
            out[f"workload_error_{arm}"] = metrics.workload_error(workload, data, est)
            if pairs:
                out[f"tvd_2way_{arm}"] = metrics.marginal_tvd(data, est, pairs)
        except Exception as e:  # an arm without the query interface: report why, keep the others
            out[f"{arm}_not_evaluated"] = f"{type(e).__name__}: {e}"
    return out



def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def version() -> str:
    try:
        from .. import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "unknown"
