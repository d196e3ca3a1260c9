"""The steps the front-ends are made of: what MST, AIM, MWEM, ... share besides their argument checks.

A front-end reads as its paper's algorithm: check the arguments (:mod:`~pgmjax.mechanisms.options`), open
the :class:`~pgmjax.privacy.Accountant` and record the plan (:func:`~pgmjax.mechanisms.result.record_plan`),
then repeat the steps below, every private read going through the accountant:

* measure marginals: ``Accountant.measure_many`` / ``Accountant.measure`` (the noise, the ledger);
* select by the exponential mechanism: ``Accountant.exponential`` on qualities built from
  :func:`l1_errors` (how badly the current estimate answers each candidate);
* keep the model under a size cap: :func:`hypothetical_model_size` before a fit, :func:`model_mb` after;
* fit: :func:`pgmjax.estimate` (warm-started), timed by a :class:`Timer`;
* synthesize: :func:`synthesize`;
* return a :class:`~pgmjax.mechanisms.result.MechanismResult` (:func:`pgm_native_result` for the
  mechanisms built on the engine from the start, which have no separate original arm).

The progress reporter is :class:`pgmjax.mechanisms.progress.Progress`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

from ..data.domain import CliqueLike, Domain
from ..graph.junction import junction_tree, maximal_cliques
from .result import MechanismResult

__all__ = ["Timer", "hypothetical_model_size", "l1_errors", "model_mb", "pgm_native_result", "synthesize"]


class Timer:
    """Seconds per named step, added up over repeated steps; ``seconds["total"]`` since it started.

    Args:
        *names: steps that start at 0.0 (reported even when they never run), in this order.

    Example:
        >>> timer = Timer("engine")
        >>> with timer("engine"):
        ...     pass
        >>> sorted(timer.done())
        ['engine', 'total']
    """

    def __init__(self, *names: str):
        self.start = time.perf_counter()
        self.seconds: dict[str, float] = dict.fromkeys(names, 0.0)

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def done(self) -> dict[str, float]:
        """The seconds, with ``total`` (since the timer started) added."""
        self.seconds["total"] = time.perf_counter() - self.start
        return self.seconds


def l1_errors(truth: Sequence[np.ndarray], estimate: Sequence[np.ndarray]) -> np.ndarray:
    """``||truth_i - estimate_i||_1`` for each pair of tables: the selections' score of how badly each is answered.

    Example:
        >>> l1_errors([np.array([3.0, 1.0])], [np.array([2.0, 2.0])]).tolist()
        [2.0]
    """
    return np.array([np.abs(t - e).sum() for t, e in zip(truth, estimate)])


def hypothetical_model_size(domain: Domain, cliques: Sequence[CliqueLike]) -> float:
    """Size in MB (``8 * cells / 2^20``) of the graphical model over ``cliques``, before building it.

    The junction tree is the one :func:`pgmjax.estimate` builds for these cliques (the same
    triangulation), so the number is the fitted model's size exactly. Adding a clique can enlarge
    the model super-additively through fill-in.

    Example:
        >>> dom = Domain({"a": 10, "b": 10, "c": 10})
        >>> round(hypothetical_model_size(dom, [("a", "b"), ("b", "c")]) * 2**20 / 8)
        200
    """
    tree = junction_tree(domain, maximal_cliques(domain, cliques))
    return 8.0 * sum(domain.size(c) for c in tree.cliques) / 2**20


def model_mb(model) -> float:
    """Size in MB (``8 * cells / 2^20``) of a fitted model's cliques: :func:`hypothetical_model_size` after the fit."""
    return 8.0 * sum(model.domain.size(c) for c in model.cliques) / 2**20


def synthesize(model, key, rows: int | None = None, method: str = "exact"):
    """``rows`` synthetic records drawn from ``model`` (default ``round(model.total)``, at least 1).

    Args:
        model: a fitted :class:`~pgmjax.GraphicalModel`.
        key: a ``jax.random`` key.
        rows: how many records (None: ``max(1, round(model.total))``).
        method: the sampling method (:func:`pgmjax.model.sampling.synthetic_data`).

    Returns:
        A :class:`~pgmjax.Dataset` over the model's domain.
    """
    n = rows if rows is not None else max(1, int(round(model.total)))
    return model.synthetic_data(n, key, method=method)


def pgm_native_result(mechanism: str, name: str, *, model, synthetic, measurements, accountant, info: dict,
                      plan) -> MechanismResult:
    """The result of a mechanism built on graphical-model estimation from the start (MST, AIM): one arm,
    ``original=None`` and an ``original_error`` saying why.

    Args:
        mechanism: the front-end's name (``"mst"``).
        name: the mechanism's name in the message (``"MST"``).
        model, synthetic, measurements, accountant, info, plan: as in :class:`~pgmjax.mechanisms.result.MechanismResult`.
    """
    return MechanismResult(
        mechanism=mechanism,
        model=model,
        synthetic=synthetic,
        measurements=measurements,
        accountant=accountant,
        original=None,
        original_error=f"{name} is PGM-native: it has no separate original estimator",
        info=info,
        plan=plan,
    )
