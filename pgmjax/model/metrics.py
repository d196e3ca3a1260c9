"""Error metrics between true data and a model or a synthetic dataset.

* :func:`workload_error`: McKenna, Sheldon & Miklau (ICML 2019, arXiv
  1901.09136), Section 5.1: ``(1/|W|) sum_q ||W_q mu - W_q mu_hat||_1 /
  (2 ||W_q mu||_1)``; with identity queries it is the total variation
  distance. ``scale="script"`` drops the 1/2, as the paper's 2019 scripts did
  (their numbers are twice the paper's definition).
* :func:`marginal_tvd`: mean total variation distance ``0.5 ||p_C - q_C||_1``
  between normalised marginals (the metric of the MST/AIM scripts).
* :func:`max_abs_error`: the largest absolute error of any workload answer.

A synthetic dataset whose size differs from the truth's is rescaled to the
true total before workload errors are taken (answers are counts).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..data.dataset import Dataset
from ..data.domain import CliqueLike
from ..queries.workload import Workload

SCALES = {"paper": 2.0, "script": 1.0}


def _total(source) -> float | None:
    if isinstance(source, Dataset):
        return float(len(source))
    return float(source.total) if hasattr(source, "total") else None


def _answers(workload: Workload, truth, estimate):
    true = workload.answer(truth)
    est = workload.answer(estimate)
    t_total, e_total = _total(truth), _total(estimate)
    if isinstance(estimate, Dataset) and t_total is not None and e_total != t_total:
        est = [a * (t_total / e_total) for a in est]
    return true, est


def workload_error(workload: Workload, truth, estimate, scale: str = "paper", per_query: bool = False):
    """Average relative L1 error of a workload's answers.

    Args:
        workload: the queries.
        truth: the true data (a Dataset), or precomputed answers.
        estimate: a model, a synthetic Dataset, or precomputed answers.
        scale: ``"paper"`` (divide by ``2 ||W mu||_1``, the default) or
            ``"script"`` (divide by ``||W mu||_1``).
        per_query: also return the error of every query.

    Returns:
        The mean error, or ``(mean, per-query array)``. A query whose true
        answers are all zero contributes 0 when the estimate is also zero and
        ``inf`` otherwise.

    Example:
        >>> dom = {"a": 2, "b": 3}
        >>> data = Dataset(np.array([[0, 0], [0, 1], [1, 2], [1, 2]]), dom)
        >>> synth = Dataset(np.array([[0, 0], [1, 1], [1, 2], [1, 2]]), dom)   # one record moved
        >>> w = Workload.marginals(data.domain, [("a", "b")])
        >>> workload_error(w, data, synth)            # ||(0, 1, 0, 0, -1, 0)||_1 / (2 * 4)
        0.25
    """
    if scale not in SCALES:
        raise ValueError(f"workload_error: scale must be one of {sorted(SCALES)}, got {scale!r}")
    true, est = _answers(workload, truth, estimate)
    errors = []
    for t, e in zip(true, est):
        if t.shape != e.shape:
            raise ValueError(f"workload_error: answer shapes differ ({t.shape} vs {e.shape})")
        num, den = np.abs(t - e).sum(), np.abs(t).sum()
        errors.append(num / (SCALES[scale] * den) if den > 0 else (0.0 if num == 0 else np.inf))
    errors = np.asarray(errors)
    return (float(errors.mean()), errors) if per_query else float(errors.mean())


def max_abs_error(workload: Workload, truth, estimate) -> float:
    """The largest absolute difference between any true and estimated workload answer (counts)."""
    true, est = _answers(workload, truth, estimate)
    return float(max(np.abs(t - e).max() for t, e in zip(true, est)))


def marginal_tvd(truth, estimate, cliques: Iterable[CliqueLike], per_clique: bool = False):
    """Mean total variation distance between normalised marginals on ``cliques``.

    Args:
        truth, estimate: Datasets or models (anything with ``marginal``).
        cliques: the marginals to compare.
        per_clique: also return each clique's distance.
    """
    cliques = list(cliques)
    if not cliques:
        raise ValueError("marginal_tvd: no cliques given")
    tm = _marginals(truth, cliques)
    em = _marginals(estimate, cliques)
    d = []
    for c, p, q in zip(cliques, tm, em):
        if p.shape != q.shape:
            raise ValueError(f"marginal_tvd: clique {c}: shapes differ ({p.shape} vs {q.shape})")
        d.append(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())
    d = np.asarray(d)
    return (float(d.mean()), d) if per_clique else float(d.mean())


def _marginals(source, cliques):
    if isinstance(source, Dataset):
        return source.marginals(cliques)
    if getattr(source, "approximate", False):  # pseudo-marginals; across regions, the relaxed problem's estimate
        return [np.asarray(m, np.float64) for m in source.infer_marginals(cliques)]
    return [np.asarray(m, np.float64) for m in source.marginals(cliques)]


def compare(truth: Dataset, estimate, workload: Workload | None = None, cliques=None) -> dict:
    """All the metrics at once, for reports.

    Args:
        truth: the true data.
        estimate: a model or a synthetic Dataset.
        workload: queries for the workload metrics (default: every 2-way marginal).
        cliques: marginals for the TVD (default: the workload's cliques).

    Returns:
        ``{"workload_error": ..., "workload_error_script_scale": ...,
        "max_abs_error": ..., "marginal_tvd": ...}``.
    """
    if workload is None:
        workload = Workload.all_kway(truth.domain, min(2, len(truth.domain)))
    cliques = list(dict.fromkeys(workload.cliques if cliques is None else cliques))
    true, est = _answers(workload, truth, estimate)
    return {
        "workload_error": workload_error(workload, true, est),
        "workload_error_script_scale": workload_error(workload, true, est, scale="script"),
        "max_abs_error": max_abs_error(workload, true, est),
        "marginal_tvd": marginal_tvd(truth, estimate, cliques),
    }
