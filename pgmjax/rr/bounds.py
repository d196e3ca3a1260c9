"""Error bounds of the companion estimators, and the domain sizes where a release is informative.

Wang, Ying & Zhang, "A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014):
the squared error of the unbiased estimator is at most ``((e^eps + K - 1) / (e^eps - 1))^2 w^2 / (4 n)``
(the role of eq. 20; every row's variance is at most ``w^2 / 4`` for row functions of range width ``w``),
four times that for the proper estimator (Lemma 3), so the error is ``Theta(1/n)`` for a fixed domain
(Theorem 1) -- but the constant grows like ``K^2``: the release over the whole row domain is only useful
for domains of a few dozen values (:func:`max_informative_size`). Continuous rows (Section V-A,
Proposition 1) are quantised to ``k`` bits first (:func:`quantized_mse_bound`). All values are on the
paper's fraction scale (answers divided by ``n``). The formulas are reconstructions: the equations of the
paper are illegible in our copy, and the constants of Theorem 1 are unknown.
"""

from __future__ import annotations

import math

from ..privacy import check_bool as _bool, check_count as _count, check_positive as _positive

__all__ = ["bound_constant", "mse_bound", "max_informative_size", "quantization_bits", "quantized_mse_bound"]


def bound_constant(size: float, epsilon: float) -> float:
    """``c(K, eps) = ((e^eps + K - 1) / (e^eps - 1))^2 / 4``: the bound is ``c w^2 / n``.

    Args:
        size: ``K``, the number of row values (the domain size; ``n_a`` for one attribute).
        epsilon: the release's epsilon.

    Returns:
        ``c`` (float).

    Example:
        >>> [round(bound_constant(2**d, 1.0), 3) for d in (1, 2, 4)]
        [1.171, 2.769, 26.582]
    """
    where = "bound_constant"
    k = _positive(size, "size", where)
    e = math.expm1(_positive(epsilon, "epsilon", where))
    return ((e + k) / e) ** 2 / 4.0


def mse_bound(size: float, epsilon: float, n: int, *, width: float = 1.0, proper: bool = False) -> float:
    """Bound on ``E (g^ - q)^2`` for a query on the fraction scale ([WYZ] eq. 20 and Lemma 3, reconstructed).

    Args:
        size: ``K``, the number of row values the release randomises over.
        epsilon: the release's epsilon.
        n: the number of records.
        width: ``w``, a bound on every row function's range ``max f_i - min f_i``.
        proper: the bound of the proper estimator (4 times the unbiased one's).

    Returns:
        The bound.

    Example:
        >>> mse_bound(4, math.log(3), 3)                       # two bits, eps = ln 3: 36 / (4 * 3 * 4)
        0.75
    """
    where = "mse_bound"
    n = _count(n, "n", where)
    w = _positive(width, "width", where)
    factor = 4.0 if _bool(proper, "proper", where) else 1.0
    return factor * bound_constant(size, epsilon) * w * w / n


def max_informative_size(epsilon: float, n: int, rmse: float = 0.01) -> int:
    """The largest domain ``K`` with ``sqrt(mse_bound) <= rmse`` (``w = 1``): ``K <= 2 tau sqrt(n) (e^eps - 1) - e^eps + 1``.

    Args:
        epsilon: the release's epsilon.
        n: the number of records.
        rmse: ``tau``, the root-mean-squared error wanted on the fraction scale.

    Returns:
        ``K`` (0 or 1 when no domain is informative at that accuracy).

    Example:
        >>> max_informative_size(1.0, 10**6), max_informative_size(1.0, 48842), max_informative_size(1.0, 48842, 0.05)
        (32, 5, 36)
    """
    where = "max_informative_size"
    e = math.expm1(_positive(epsilon, "epsilon", where))
    n = _count(n, "n", where)
    tau = _positive(rmse, "rmse", where)
    return max(int(math.floor(2.0 * tau * math.sqrt(n) * e - e)), 0)


def quantization_bits(n: int) -> int:
    """Bits ``k`` with ``2^k`` closest to ``n^(1/4)`` (at least 1): the choice of [WYZ] Proposition 1.

    Example:
        >>> quantization_bits(10**4), quantization_bits(10**8)
        (3, 7)
    """
    n = _count(n, "n", "quantization_bits")
    return max(1, round(math.log2(n) / 4.0))


def quantized_mse_bound(n: int, epsilon: float, bits: int, *, lipschitz: float = 1.0, width: float = 1.0) -> float:
    """Bound for rows in ``[0, 1]`` quantised to ``bits`` bits ([WYZ] Section V-A, Proposition 1, reconstructed).

    ``2 L^2 4^-k + 2 * mse_bound(2^k, eps, n, width, proper=True)``: the quantisation moves each row by at
    most ``2^-k`` (an ``L``-Lipschitz row function by ``L 2^-k``), then the proper estimator's bound.

    Args:
        n: the number of records.
        epsilon: the release's epsilon.
        bits: ``k``.
        lipschitz: ``L`` of the row functions.
        width: ``w``.

    Returns:
        The bound.

    Example:
        >>> round(quantized_mse_bound(10**6, 1.0, quantization_bits(10**6)), 6)
        0.002723
    """
    where = "quantized_mse_bound"
    k = _count(bits, "bits", where)
    lip = _positive(lipschitz, "lipschitz", where)
    return 2.0 * lip * lip * 4.0**-k + 2.0 * mse_bound(2**k, epsilon, n, width=width, proper=True)
