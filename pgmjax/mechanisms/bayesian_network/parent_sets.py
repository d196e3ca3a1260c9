"""Which parent sets PrivBayes may choose: the usefulness rules and the maximal allowed parent sets.

Zhang, Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via Bayesian
Networks", ACM TODS 42(4) 2017, Section 4.4: the degree of the network from the usefulness ``theta``
(``tau`` for general domains, a fixed ``k`` for binary ones) and GreedyBayes' candidate parent sets,
the maximal sets whose table stays under ``tau``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: A Bayesian network: ``[(child, parents)]`` in placement order, parents placed before their child.
Network = list[tuple[str, tuple[str, ...]]]


class TooManyCandidates(Exception):
    """Internal: the enumeration of maximal parent sets went past the candidate limit."""


def usefulness_tau(records: float, epsilon2: float, attributes: int, theta: float) -> float:
    """``tau = N eps2 / (2 d theta)``: the largest allowed table ``n_X prod_{p in Pi} n_p`` (TODS, general domains).

    The average cell count of a table of ``tau`` cells is then ``theta`` times the noise scale
    ``2 d / eps2`` (replace-one Laplace over at most ``d`` tables). The authors' C++ writes
    ``eps N / (4 d theta)`` with ``eps2 = eps / 2``.

    Example:
        >>> usefulness_tau(48842, 0.7, 14, 4.0)
        305.2625
    """
    return float(records) * float(epsilon2) / (2.0 * attributes * float(theta))


def binary_degree(records: float, attributes: int, epsilon2: float, theta: float) -> int:
    """Fixed degree ``k`` of the binary-domain formulation (Zhang et al., TODS 2017; 0 if none is useful).

    The largest ``k < d`` with ``N eps2 / ((d - k) 2^(k+2)) >= theta``: the ratio of the average cell
    mass ``2^-(k+1)`` of a ``(k+1)``-way binary table to the noise scale ``2 (d - k) / (N eps2)``.

    Example:
        >>> binary_degree(48842, 14, 0.7, 4.0)   # k = 8: 34189.4 / (6 * 2^10) = 5.6 >= 4; k = 9: 3.3 < 4
        8
    """
    best = 0
    for k in range(1, attributes):
        if float(records) * float(epsilon2) / ((attributes - k) * 2.0 ** (k + 2)) >= theta:
            best = k
    return best


def maximal_parent_sets(
    sizes: Sequence[int], cap: int, max_size: int | None = None, limit: int | None = None
) -> list[tuple[int, ...]]:
    """Maximal subsets ``P`` of ``range(len(sizes))`` with ``prod(sizes[P]) <= cap`` and ``|P| <= max_size``.

    These are GreedyBayes' candidate parent sets (TODS paper, Section 4.4, general domains): for a
    child ``X`` with ``n_X`` values, ``cap = floor(tau / n_X)``. A set is maximal when adding any
    other attribute breaks a constraint. The recursion on the last attribute ``a``: maximal sets
    containing ``a`` are ``{a} + M(rest, cap // n_a, max_size - 1)``; a maximal set ``Z`` of the rest
    stays maximal without ``a`` only if ``Z + {a}`` is not allowed. Each intermediate family is no
    larger than the answer, so ``limit`` bounds the work.

    Args:
        sizes: the candidate parents' domain sizes (each ``>= 1``), in placement order.
        cap: the largest allowed product (an int; below 1 nothing is allowed, not even the empty set).
        max_size: the largest allowed number of parents (None: no limit).
        limit: raise ``TooManyCandidates`` past this many sets (None: no limit).

    Returns:
        Index tuples (ascending), in a deterministic order; ``[]`` when ``cap < 1``.

    Example:
        >>> maximal_parent_sets([2, 3, 5], 10)
        [(0, 2), (0, 1)]
        >>> maximal_parent_sets([2, 2, 2], 100, max_size=1)
        [(2,), (1,), (0,)]
    """
    sizes = [int(s) for s in sizes]
    if any(s < 1 for s in sizes):
        raise ValueError(f"maximal_parent_sets: sizes must be positive, got {sizes}")
    k0 = len(sizes) if max_size is None else int(max_size)
    memo: dict[tuple[int, int, int], list[tuple[int, ...]]] = {}

    def rec(j: int, c: int, k: int) -> list[tuple[int, ...]]:
        # maximal allowed subsets of the first j attributes
        if c < 1 or k < 0:
            return []
        if j == 0 or k == 0:
            return [()]
        key = (j, c, k)
        if key in memo:
            return memo[key]
        last = j - 1
        n = sizes[last]
        out = [z + (last,) for z in rec(j - 1, c // n, k - 1)]
        for z in rec(j - 1, c, k):
            # z + {last} allowed means z is not maximal here
            if len(z) + 1 > k or math.prod(sizes[i] for i in z) * n > c:
                out.append(z)
        if limit is not None and len(out) > limit:
            raise TooManyCandidates
        memo[key] = out
        return out

    return rec(len(sizes), int(cap), k0)
