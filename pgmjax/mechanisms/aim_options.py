"""AIM's own options (:class:`AIMOptions`), checked where made, and what its run reports (:class:`AIMInfo`).

A bad option fails with its name before any data is read. The checks that need the data (the constraints and the
public data against the domain, ``rounds`` against the number of one-way candidates) and the default that needs a
common argument (``final_iters``) stay with :func:`pgmjax.mechanisms.aim`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..checks import check_count
from ..queries.constraints import Constraint
from ..queries.public import PublicData
from .checkpoint import Checkpoint
from .options import check_synthetic
from .own_options import OwnOptions
from .progress import check_progress
from .run_info import ResumableRunInfo, published

__all__ = ["AIMInfo", "AIMOptions"]


@dataclasses.dataclass(frozen=True)
class AIMOptions(OwnOptions):
    """AIM's own options (:func:`pgmjax.mechanisms.aim` takes them by name), checked here: a bad one fails with its
    name before any data is read.

    Attributes:
        rounds: ``T``, the nominal number of rounds (default ``16 d``); must exceed 0.9 times the
            number of one-way candidates, whose initial measurement costs ``0.9 rho k / T``.
        final_iters: iterations of the final fit (default ``engine_iters``, as the reference code).
        synthetic: draw synthetic records.
        rows: how many (default ``round(model.total)``).
        synthetic_method: ``"low_variance"`` (systematic sampling: the records' clique counts match
            the model's closely, like the randomised rounding of the reference code's mbi) or
            ``"exact"`` (i.i.d.); see :func:`pgmjax.model.sampling.synthetic_data`.
        progress: True for a tqdm bar over the rounds, or a callable receiving each round's log entry (a dict)
            with ``done``, ``expected`` (the rounds done plus those the budget left pays for at the current
            noise), ``elapsed`` and ``eta`` (:class:`pgmjax.mechanisms.progress.Progress`).
        checkpoint: a folder (or a :class:`~pgmjax.mechanisms.checkpoint.Checkpoint`) keeping the rounds: a run
            given a checkpoint of the same run resumes from its last round and releases what the uninterrupted
            run would; one of another run is refused (:mod:`pgmjax.mechanisms.checkpoint`). Exact oracle only;
            not with ``public``.
        constraints: :class:`pgmjax.Constraint` objects (public): every fit and the size limit hold them, and a
            candidate's expected error counts the cells they leave possible (:mod:`pgmjax.queries.constraints`).
        public: a :class:`pgmjax.queries.public.PublicData`: each round may take a marginal from it instead of
            measuring one, paying only the selection (joint selection, :mod:`pgmjax.mechanisms.public_selection`).

    Example:
        >>> AIMOptions(rounds=40, synthetic_method="exact").rounds
        40
        >>> AIMOptions(final_iters=0)
        Traceback (most recent call last):
        ...
        ValueError: aim: final_iters must be at least 1, got 0
    """

    mechanism = "aim"

    rounds: int | None = None
    final_iters: int | None = None
    synthetic: bool = True
    rows: int | None = None
    synthetic_method: str = "low_variance"
    progress: bool | Callable[[dict], object] = False
    checkpoint: Checkpoint | str | os.PathLike | None = None
    constraints: Sequence[Constraint] = ()
    public: PublicData | None = None

    def __post_init__(self):
        where = self.mechanism
        if self.public is not None and self.checkpoint is not None:
            raise ValueError(f"{where}: checkpoint= does not keep a run with public data; drop one of them")
        final_iters = None if self.final_iters is None else check_count(self.final_iters, "final_iters", where, 1)
        synthetic, rows, synthetic_method = check_synthetic(self.synthetic, self.rows, self.synthetic_method, where)
        self.keep(
            final_iters=final_iters, synthetic=synthetic, rows=rows, synthetic_method=synthetic_method,
            # named as aim_budget names it (it takes rounds= too), as before
            rounds=None if self.rounds is None else check_count(self.rounds, "rounds", "aim_budget", 1),
            checkpoint=Checkpoint.of(self.checkpoint, where),
            progress=check_progress(self.progress, where),
        )


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class AIMInfo(ResumableRunInfo):
    """What an AIM run reports (``result.info``). The report of ``pgmjax run`` prints the published fields.

    Attributes:
        epsilon: the run's epsilon.
        delta: its delta.
        rho: the zCDP budget it spent (:func:`~pgmjax.mechanisms.adaptive_iterative.aim_budget`).
        candidates: the candidates and their weights, ``{clique: weight}``
            (:func:`~pgmjax.mechanisms.adaptive_iterative.aim_candidates`; private: kept with the data holder).
        rounds: the nominal number of rounds ``T``.
        rounds_run: the rounds the run took.
        max_model_mb: the model-size cap in MB once the whole budget is spent.
        engine_iters: the most engine iterations of each round's fit.
        final_iters: iterations of the final fit.
        log: per round, a dict: ``round``, ``clique``, ``sigma``, ``em_epsilon``, ``limit_mb``, ``model_mb``,
            ``candidates``, ``annealed``, ``last``, ``spent``, ``source`` (``"private"`` or ``"public"``).
        selected: the cliques the rounds selected, in order.
        annealed: how many times the noise was halved.
        total: the model's total (its estimate of the number of records).
        model_mb: the final model's size in MB.
        seconds: the seconds each stage took (this process's; ``engine``: the fits; ``marginals``: the model's
            answers on every candidate after each fit; ``selection``: sizes, qualities, the exponential mechanism
            and the measurement; ``synthetic``; ``total``).
        resumed_from: the checkpoint's round the run resumed after, or None
            (:class:`~pgmjax.mechanisms.run_info.ResumableRunInfo`).
        public: the public marginals the rounds took (``public=``), in order.
        oracle: with an oracle other than ``"exact"``, which oracle the last fit took and why (the model's
            ``info``); None with the exact oracle (private: an internal object).
    """

    epsilon: float = published()
    delta: float = published()
    rho: float = published()
    candidates: dict
    rounds: int = published()
    rounds_run: int = published()
    max_model_mb: float = published()
    engine_iters: int = published()
    final_iters: int = published()
    log: list = published()
    selected: list = published()
    annealed: int = published()
    total: float = published()
    model_mb: float = published()
    seconds: dict = published()
    public: list = published()
    oracle: Any = None
