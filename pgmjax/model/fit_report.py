"""What a fit learned about itself, kept beside the model it fitted: :class:`FitReport` and :class:`Fit`.

A :class:`~pgmjax.GraphicalModel` is its potentials and total alone; how it was reached (the per-chunk log,
the final loss, the step size a warm start continues from, the estimator's diagnostics) is a
:class:`FitReport`. :func:`pgmjax.estimate`, :func:`pgmjax.estimate_batch` and :func:`pgmjax.fit` return it
with ``report=True``, as a :class:`Fit` ``(model, report)``, in the form of blackjax's ``(state, info)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

from .batch_model import member_index


@dataclasses.dataclass(frozen=True, eq=False)
class FitReport:
    """A fit's account of itself (McKenna, Sheldon & Miklau, ICML 2019, Algorithm 1's iterates, summarised).

    Args:
        loss: the loss of the returned potentials (the exact L1 loss where the fit was smoothed); ``(B,)`` for
            a batch of models, a traced array inside a transformation, None where nothing was fitted.
        step_size: the step mirror descent's line search ended at (a warm start continues from it); None for
            estimators without one and for the L1 loss (its steps are per smoothing stage).
        history: one entry per compiled chunk, ``{"iteration", "loss", "oracle_calls", "seconds", ...}`` (a
            batch's losses and oracle calls per member).
        info: the fit's diagnostics, e.g. ``{"oracle": "approximate", ...}``, ``"forbidden_mass"``,
            ``"public"``, ``"eliminated"`` (:func:`pgmjax.estimate`) or the dual ascent's
            (:func:`pgmjax.history.maxent.maxent`).

    Every field is a pytree child (``loss`` and ``step_size`` the numbers a transformation carries; the
    history's and info's entries leaves as they are), so a report passes through ``jax.vmap`` of
    :func:`pgmjax.fit` whole, and nothing in it vanishes through a transformation.

    Example:
        >>> dom = pj.Domain({"a": 2})
        >>> model, report = pj.estimate(dom, [pj.Measurement(("a",), np.array([3.0, 7.0]))], iters=50, report=True)
        >>> report.iterations, round(report.loss, 6)
        (50, 0.0)
    """

    loss: Any = None
    step_size: Any = None
    history: tuple = ()
    info: Mapping = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        put = object.__setattr__  # normalised once, at construction: host scalars read as Python floats
        put(self, "loss", host_scalar(self.loss))
        put(self, "step_size", host_scalar(self.step_size))
        put(self, "history", tuple(self.history))
        put(self, "info", dict(self.info or {}))

    @property
    def iterations(self) -> int:
        """The iterations the fit made (the last chunk's count; 0 for no chunk)."""
        return int(self.history[-1]["iteration"]) if self.history else 0

    @property
    def batch(self) -> int | None:
        """The number of members of a batch's report (its loss's leading axis), or None for one fit's."""
        return None if self.loss is None or np.ndim(self.loss) == 0 else int(np.shape(self.loss)[0])

    def member(self, i: int) -> "FitReport":
        """Member ``i``'s report of a batch's (:func:`pgmjax.estimate_batch`): its loss, step and log."""
        if self.batch is None:
            raise TypeError("FitReport.member: this is one fit's report, not a batch's")
        i = member_index(i, self.batch, "FitReport.member")
        history = [{"iteration": h["iteration"], "loss": float(np.asarray(h["loss"])[i]),
                    "oracle_calls": int(np.asarray(h["oracle_calls"])[i]), "seconds": h["seconds"]}
                   for h in self.history]
        pick = (lambda v: None if v is None else float(np.asarray(v)[i]))
        return FitReport(pick(self.loss), pick(self.step_size), history, self.info)


jax.tree_util.register_dataclass(FitReport, data_fields=["loss", "step_size", "history", "info"], meta_fields=[])


class Fit(NamedTuple):
    """A fitted model and its report: what ``pgmjax.estimate(..., report=True)`` returns.

    ``warm_start=`` takes a :class:`Fit` as well as a model: the next fit then also continues from the step size
    its report ends at.

    Example:
        >>> dom = pj.Domain({"a": 2})
        >>> fit = pj.estimate(dom, [pj.Measurement(("a",), np.array([3.0, 7.0]))], iters=50, report=True)
        >>> model, report = fit
        >>> pj.estimate(dom, [pj.Measurement(("a",), np.array([4.0, 6.0]))], iters=50, warm_start=fit).total
        10.0
    """

    model: Any
    report: FitReport


def model_and_report(fitted) -> tuple:
    """``(model, report)`` of a :class:`Fit`, or ``(model, None)`` of a model alone: for the functions that take
    either (``warm_start=``, :func:`pgmjax.uncertainty.intervals`)."""
    if isinstance(fitted, Fit):
        return fitted.model, fitted.report
    return fitted, None


def host_scalar(x):
    """A concrete scalar as a Python float (how a total, a loss or a step reads on the host); None, an abstract
    value (inside a JAX transformation) or an array with axes (a batch's) as it is."""
    concrete = isinstance(x, (int, float, np.generic)) and not isinstance(x, bool)
    concrete = concrete or (isinstance(x, (np.ndarray, jax.Array)) and not isinstance(x, jax.core.Tracer) and x.ndim == 0)
    return float(x) if concrete else x  # anything else (JAX's own placeholders when it rebuilds a pytree) untouched
