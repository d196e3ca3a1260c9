"""A fit's options as one typed, frozen, checked value: what a mechanism passes to every :func:`pgmjax.estimate`.

Every front-end (``pgmjax.mechanisms.<name>``) takes ``fit_options=pj.FitOptions(...)``: the estimation
method, its loss, tolerance, dtype and program for each of its fits. The mechanism sets the rest itself (the
iterations, the measurements, the total, the warm start). Each field is checked where the value is made, so a
bad option fails with its name before any data is read or any budget is spent.

Example:
    >>> FitOptions(method="lbfgs", tol=1e-6).given()
    {'method': 'lbfgs', 'tol': 1e-06}
    >>> FitOptions().given()  # every fit as the mechanism chooses
    {}
    >>> FitOptions(method="newton")
    Traceback (most recent call last):
    ...
    ValueError: FitOptions: unknown method 'newton'; expected one of ['dual_averaging', 'lbfgs', 'mirror_descent'] or a pgmjax.Estimator instance
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

from . import inputs, oracles, sharding

_WHERE = "FitOptions"


@dataclass(frozen=True)
class FitOptions:
    """The options of a mechanism's fits (the keyword arguments of :func:`pgmjax.estimate` it does not set itself).

    Every field defaults to None: the mechanism's own choice (most take :func:`pgmjax.estimate`'s defaults; MST
    fits with plain mirror descent as its reference code does, AIM stops a round's fit at a tolerance of its own).
    A field given is passed to every fit, checked here.

    Args:
        method: ``"mirror_descent"``, ``"dual_averaging"``, ``"lbfgs"`` or an :class:`~pgmjax.Estimator` instance
            (McKenna, Sheldon & Miklau, ICML 2019, Algorithms 1 and 2, Appendix A.3).
        loss: ``"l2"``, ``"l1"`` or a callable of the marginals.
        tol: stop a fit once a chunk of iterations changes its loss by at most this (relative); 0 stops only a
            fit whose loss no longer changes.
        dtype: float32 or float64 (needs ``jax_enable_x64``).
        oracle: ``"exact"``, ``"approximate"``, ``"auto"`` or a :class:`~pgmjax.estimation.oracles.ApproximateOracle`.
        program: the compiled program: ``"auto"``, ``"dense"``, ``"size_class"`` or ``"paths"``.
        step_size: the first step (:func:`pgmjax.estimate`'s default: ``1 / (L N)``).
        chunk: iterations per compiled chunk.
        callback: called with each chunk's log entry; returning True stops the fit.
        devices: devices the junction tree's tables are split over.
        structures: how many structures the caller fits (``program="auto"`` shares the size-class compile among
            them).
        compile_ahead: compile the next size class's programs on a background thread after each size-class fit
            (:func:`pgmjax.estimate`; AIM and MWEM ask it of their rounds' fits, not of their final one). Off
            unless given (the compilation page says when it pays).

    Example:
        >>> FitOptions(loss="l1", method="mirror_descent").given()
        {'method': 'mirror_descent', 'loss': 'l1'}
    """

    method: Any = None
    loss: str | Callable | None = None
    tol: float | None = None
    dtype: Any = None
    oracle: Any = None
    program: str | None = None
    step_size: float | None = None
    chunk: int | None = None
    callback: Callable | None = None
    devices: int | None = None
    structures: int | None = None
    compile_ahead: bool | None = None

    def __post_init__(self):
        method = "mirror_descent" if self.method is None else self.method
        loss = "l2" if self.loss is None else self.loss
        estimator, _, _ = inputs.check_options(method, loss, 0, self.dtype, caller=_WHERE)
        if self.oracle is not None:
            oracles.check_oracle(self.oracle, estimator, loss, caller=_WHERE)
        if self.program is not None:
            oracles.check_program(self.program, caller=_WHERE)
        if self.devices is not None:
            sharding.check_devices(self.devices, _WHERE)
        for name, least in (("tol", 0.0), ("step_size", None)):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
                    value < least if least is not None else value <= 0):
                kind = "a non-negative" if least is not None else "a positive"
                raise ValueError(f"{_WHERE}: {name} must be {kind} number or None, got {value!r}")
        for name in ("chunk", "structures"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{_WHERE}: {name} must be a positive integer or None, got {value!r}")
        if self.compile_ahead is not None and not isinstance(self.compile_ahead, bool):
            raise TypeError(f"{_WHERE}: compile_ahead must be True, False or None, got {self.compile_ahead!r}")
        if self.callback is not None and not callable(self.callback):
            raise TypeError(f"{_WHERE}: callback must be callable or None, got {self.callback!r}")

    def given(self) -> dict:
        """The options given (not None), as keyword arguments of :func:`pgmjax.estimate`."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


#: The fields of :class:`FitOptions`, in order.
FIELDS = tuple(f.name for f in dataclasses.fields(FitOptions))


def unknown_fields(mapping) -> list[str]:
    """The keys of ``mapping`` that are not :class:`FitOptions` fields, sorted.

    Example:
        >>> unknown_fields({"tol": 1e-6, "iters": 5})
        ['iters']
    """
    return sorted(set(mapping) - set(FIELDS))


__all__ = ["FIELDS", "FitOptions", "unknown_fields"]
