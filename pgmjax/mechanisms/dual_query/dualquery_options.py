"""DualQuery's own options (:class:`DualQueryOptions`), checked where made, and what its run reports
(:class:`DualQueryInfo`).

A bad option fails with its name before any data is read. What needs the data (the rounds' cost at ``N`` records,
the plan of :func:`~pgmjax.mechanisms.dual_query.front_end.dualquery_plan`) stays with the front-end
(:func:`pgmjax.mechanisms.dualquery`).

Gaboardi, Gallego Arias, Hsu, Roth & Wu, "Dual Query: Practical Private Query Release for High Dimensional Data",
ICML 2014, Algorithm 1: the learning rate ``eta``, ``s`` samples per round, ``T`` rounds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...checks import check_positive
from ..own_options import OwnOptions
from ..run_info import RunInfo, published

__all__ = ["BOUNDS", "DualQueryInfo", "DualQueryOptions"]

#: The advanced-composition bounds, by option value -> the Accountant's composition.
BOUNDS = {"b2": "advanced", "heterogeneous": "advanced_heterogeneous"}


@dataclasses.dataclass(frozen=True)
class DualQueryOptions(OwnOptions):
    """DualQuery's own options (:func:`pgmjax.mechanisms.dualquery` takes them by name), checked here: a bad one
    fails with its name before any data is read.

    Attributes:
        eta: multiplicative-weights learning rate (the run may use a larger ``eta_used``: the largest at which the
            ``T`` rounds cost ``epsilon``, see :func:`~pgmjax.mechanisms.dual_query.dualquery_plan`).
        samples: ``s``, queries drawn per round.
        rounds: ``T``; None solves the largest ``T`` with ``eps(T) <= epsilon`` at ``eta``.
        bound: ``"b2"`` (default, as the 2019 experiments) or ``"heterogeneous"`` (tighter).

    Example:
        >>> DualQueryOptions(samples=20, bound="heterogeneous").samples
        20
        >>> DualQueryOptions(rounds=1)
        Traceback (most recent call last):
        ...
        ValueError: dualquery: rounds must be an integer >= 2 (round 1 reads no data), got 1
    """

    mechanism = "dualquery"

    eta: float = 2.0
    samples: int = 50
    rounds: int | None = None
    bound: str = "b2"

    def __post_init__(self):
        where = self.mechanism
        if self.bound not in BOUNDS:
            raise ValueError(f"{where}: bound must be 'b2' or 'heterogeneous', got {self.bound!r}")
        samples = self.samples
        if isinstance(samples, (bool, np.bool_)) or not isinstance(samples, (int, np.integer)) or samples < 1:
            raise ValueError(f"{where}: samples must be a positive integer, got {samples!r}")
        eta = check_positive(self.eta, "eta", where)
        rounds = self.rounds
        if rounds is not None and (isinstance(rounds, (bool, np.bool_)) or not isinstance(rounds, (int, np.integer))
                                   or rounds < 2):
            raise ValueError(f"{where}: rounds must be an integer >= 2 (round 1 reads no data), got {rounds!r}")
        self.keep(
            eta=eta,
            samples=int(samples),
            rounds=None if rounds is None else int(rounds),
        )


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class DualQueryInfo(RunInfo):
    """What a DualQuery run reports (``result.info``). The report of ``pgmjax run`` prints the published fields.

    Attributes:
        rounds: ``T``, the rounds played (:func:`~pgmjax.mechanisms.dual_query.dualquery_plan`).
        eta: the learning rate asked for (the option ``eta``).
        eta_used: the learning rate the game used, ``>= eta``: the largest at which the ``T`` rounds cost ``epsilon``.
        samples: ``s``, queries drawn per round.
        bound: the advanced-composition bound, ``"b2"`` or ``"heterogeneous"``.
        delta: the run's delta.
        epsilon_at_eta: what the ``T`` rounds would have cost at ``eta``.
        epsilon_spent: what the accountant spent (at ``eta_used``).
        queries: ``M = 2R``, the size of the query class (the workload's rows and their negations).
        satisfied: per round, the number of sampled queries the round's record satisfies (private: the transcript
            with the data player's values, an internal array).
        transcript: the :class:`~pgmjax.mechanisms.dual_query.DualQueryTranscript`, the engine's input (private: an
            internal object).
        engine_iters: iterations of the engine.
        seconds: the seconds each stage took (``game``, ``fit``, ``total``).
    """

    rounds: int = published()
    eta: float = published()
    eta_used: float = published()
    samples: int = published()
    bound: str = published()
    delta: float = published()
    epsilon_at_eta: float = published()
    epsilon_spent: float = published()
    queries: int = published()
    satisfied: np.ndarray
    transcript: Any
    engine_iters: int = published()
    seconds: dict = published()
