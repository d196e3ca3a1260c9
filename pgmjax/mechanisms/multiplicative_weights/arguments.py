"""MWEM's own argument checks; those other front-ends share (an option among choices, a workload on the data's
domain) live in :mod:`pgmjax.mechanisms.options` and are re-exported here.

The workload is what MWEM selects from (Hardt, Ligett & McSherry, "A Simple and Practical Algorithm
for Differentially Private Data Release", NeurIPS 2012, Algorithm 1: the query class ``Q``).
Everything is checked before any private value is read.
"""

from __future__ import annotations

from ...checks import check_real as _real
from ..options import check_choice, check_workload

__all__ = ["check_alpha", "check_choice", "check_workload"]


def check_alpha(alpha, where: str) -> float:
    """``alpha`` (the measurement's share of each round) as a float in ``(0, 1)``, else a ValueError naming ``where``.

    Example:
        >>> check_alpha(0.9, "mwem")
        0.9
    """
    a = _real(alpha, "alpha", where)
    if not 0 < a < 1:
        raise ValueError(f"{where}: alpha (the measurement's share of each round) must be in (0, 1), got {alpha!r}")
    return a
