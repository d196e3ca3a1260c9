"""Sensitivities of PrivBayes' scores, what its exponential mechanism is calibrated with.

Zhang, Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via Bayesian
Networks", ACM TODS 42(4) 2017, Lemma 4.1 (mutual information) and Sections 4.2-4.3 (``F``: ``1/N``,
``R``: ``3/N``) for replace-one neighbours; the add/remove-one constants of ``N R`` and ``N F`` are
proved in :func:`score_sensitivity`.
"""

from __future__ import annotations

import math

from .scores import MI_UNBOUNDED, SCORES


def mutual_information_sensitivity(records: int, binary: bool) -> float:
    """Sensitivity of ``I(X; Pi)`` (bits) under replace-one neighbours (TODS paper, Lemma 4.1).

    ``(1/N) log2 N + ((N-1)/N) log2(N/(N-1))`` when ``X`` or ``Pi`` is binary, else
    ``(2/N) log2((N+1)/2) + ((N-1)/N) log2((N+1)/(N-1))`` (the authors' C++ always uses the
    second). Adult (``N = 48842``): 3.48e-4 and 6.56e-4.

    Args:
        records: ``N >= 2`` (public under replace-one).
        binary: whether the child or the parent configuration has two values.

    Returns:
        The sensitivity.

    Example:
        >>> round(1e4 * mutual_information_sensitivity(48842, True), 2), round(1e4 * mutual_information_sensitivity(48842, False), 2)
        (3.48, 6.56)
    """
    n = float(records)
    if not n >= 2:
        raise ValueError(f"mutual_information_sensitivity: needs at least 2 records, got {records!r}")
    if binary:
        return math.log2(n) / n + (n - 1) / n * math.log2(n / (n - 1))
    return 2 / n * math.log2((n + 1) / 2) + (n - 1) / n * math.log2((n + 1) / (n - 1))


def score_sensitivity(score: str, records: int | None, *, bounded: bool, binary: bool = False) -> float:
    """Sensitivity of :func:`score_quality` (what the exponential mechanism is calibrated with).

    * ``bounded=True`` (replace one record; ``N`` public): ``R``: ``3/N``; ``F``: ``1/N`` (TODS
      paper); ``I``: :func:`mutual_information_sensitivity`.
    * ``bounded=False`` (add/remove one record): the qualities are ``N R`` and ``N F``.
      ``N R`` has sensitivity 2. Proof: let ``c`` be the counts of the smaller dataset (``N``
      records, ``p = c/N``) and add ``r = (x, pi)``. With ``f(c) = 1/2 ||c - c_X c_Pi^T / N||_1``, the
      argument of the norm changes by exactly ``(N/(N+1)) (e_x - p_X)(e_pi - p_Pi)^T``, of L1 norm
      ``(N/(N+1)) ||e_x - p_X||_1 ||e_pi - p_Pi||_1 <= 4 N / (N+1)``; so ``|Delta f| < 2``.
      ``N F`` has sensitivity 1: ``N F = max_f [min(A_f, C) + min(B_f, C)] - N`` (:func:`f_score`);
      one added record raises one of ``A_f, B_f`` by at most 1 and ``C`` by at most 1, so each capped
      term rises by 0 or 1, the maximum by 0 to 2, and ``N F`` changes by -1 to +1.
    * ``I`` has no data-independent add/remove sensitivity (one record can change ``N I`` by about
      ``log2 N``): refused.

    Args:
        score: ``"R"``, ``"I"`` or ``"F"``.
        records: ``N`` (needed when bounded).
        bounded: the neighbouring relation.
        binary: for ``I``: whether the child or the parent configuration is binary.

    Returns:
        The sensitivity.

    Example:
        >>> score_sensitivity("R", 1000, bounded=True), score_sensitivity("R", None, bounded=False)
        (0.003, 2.0)
    """
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; expected one of {SCORES}")
    if not bounded:
        if score == "I":
            raise ValueError(MI_UNBOUNDED)
        return 2.0 if score == "R" else 1.0
    if records is None or not float(records) >= 2:
        raise ValueError(f"score_sensitivity: needs the number of records (at least 2), got {records!r}")
    if score == "R":
        return 3.0 / float(records)
    if score == "F":
        return 1.0 / float(records)
    return mutual_information_sensitivity(records, binary)
