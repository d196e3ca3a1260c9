"""The ledger's row: one :class:`LedgerEntry` per noise addition, and the labels it records.

An :class:`~pgmjax.privacy.Accountant` appends one immutable entry for every release it makes (a
measured marginal, raw Laplace or Gaussian values, exponential-mechanism draws, randomized response),
with the sensitivity, noise scale and privacy cost that the release used; the ledger is what a report
shows and what a reader checks the privacy claim against. :func:`describe_query` and
:func:`freeze_target` produce the entry's ``query`` and ``target`` fields.

Example:
    >>> describe_query("kron", (np.ones((2, 3)), np.eye(4)))
    'kron 2x3 ⊗ 4x4'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LedgerEntry", "describe_query", "freeze_target"]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One noise addition, as recorded by an :class:`Accountant` (immutable).

    Attributes:
        index: position in the ledger (0, 1, ...).
        mechanism: ``"laplace"``, ``"gaussian"`` or ``"exponential"``.
        target: what was released: a clique (tuple of attributes) or a label.
        query: ``"identity"``, ``"dense RxC"``, ``"kron r1xc1 ⊗ r2xc2"`` for a measured marginal;
            ``"values"`` for raw Laplace/Gaussian, ``"selection"`` for the exponential mechanism.
        size: number of noisy values, or of candidates for the exponential mechanism.
        count: independent draws (``num`` of :meth:`Accountant.exponential`), else 1.
        sensitivity: the sensitivity used (L1 for Laplace / EM, L2 for Gaussian).
        scale: the noise scale: Laplace ``b``, Gaussian ``sigma``, or the Gumbel scale ``2 Delta / eps``
            on the qualities for the exponential mechanism.
        epsilon: pure-DP epsilon of one draw (None for Gaussian noise).
        rho: zCDP rho of one draw.
        cost: privacy cost of the entry (all draws) in the accountant's currency (``epsilon`` or
            ``rho``); under advanced composition the basic-composition cost ``count * epsilon``.
    """

    index: int
    mechanism: str
    target: Any
    query: str
    size: int
    count: int
    sensitivity: float
    scale: float
    epsilon: float | None
    rho: float
    cost: float


def describe_query(kind: str, q) -> str:
    """The ledger's ``query`` field for a query parsed by :func:`pgmjax.privacy.sensitivity.parse_query`.

    Args:
        kind: ``"identity"``, ``"dense"`` or ``"kron"``.
        q: None, the dense matrix, or the tuple of Kronecker factors.

    Returns:
        ``"identity"``, ``"dense RxC"`` or ``"kron r1xc1 ⊗ r2xc2 ..."``.

    Example:
        >>> describe_query("dense", np.zeros((3, 8)))
        'dense 3x8'
    """
    if kind == "identity":
        return "identity"
    if kind == "dense":
        return f"dense {q.shape[0]}x{q.shape[1]}"
    return "kron " + " ⊗ ".join(f"{f.shape[0]}x{f.shape[1]}" for f in q)


def freeze_target(target):
    """The ledger's ``target`` field: ``target`` with every list turned into a tuple (recursively), so entries stay immutable.

    Args:
        target: a clique, a label, or a (nested) list of them.

    Returns:
        The same value, lists replaced by tuples.

    Example:
        >>> freeze_target(["a", ["b", "c"]])
        ('a', ('b', 'c'))
    """

    if isinstance(target, list):
        return tuple(freeze_target(t) for t in target)
    return target
