"""Budget allocation for a requested accuracy, and the privacy cost of a history of answers.

Xiao & Xiong, "Bayesian Inference under Differential Privacy", Theorem 5.3 (allocation) and Theorem 5.4
(eq. 34-35, per-cell cost). Under add/remove-one neighbours (the paper's, and pgmjax's default) adding a
record in cell ``j`` moves row ``i`` of ``H x`` by ``H_ij``, so the privacy loss of a whole Laplace history is
exactly ``B_j = sum_i |H_ij| / b_i`` for a record in cell ``j`` and the history is ``max_j B_j``-DP: the L1
sensitivity of ``diag(1/b) H``. No assumption on the cells (the paper's "independent or negatively
correlated") is needed. It is never more than sequential composition ``sum_i alpha_i`` and less when
rows touch different cells (parallel composition). Under replace-one the cost is
``max_{j != k} sum_i |H_ij - H_ik| / b_i``; the zCDP analogue for Gaussian rows is
``rho = 1/2 max_j sum_i H_ij^2 / sigma_i^2``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy.special import ndtri

from ..data.domain import Domain
from ..graph.max_sum import max_sum_ve
from ..checks import check_positive as _positive
from ..queries.measurement import Measurement, validate_measurements
from .blue import History, blue_history, row_noise
from .errors import LinearNoise

__all__ = ["Allocation", "allocate", "allocate_with_history", "cell_cost", "system_cost", "per_record_cost"]


class Allocation(NamedTuple):
    """A budget for one fresh answer.

    Attributes:
        cost: ``epsilon`` (Laplace) or zCDP ``rho`` (Gaussian).
        scale: the noise scale: Laplace ``b`` or Gaussian ``sigma``.
        noise: ``"laplace"`` or ``"gaussian"``.
    """

    cost: float
    scale: float
    noise: str


def _delta(d, where: str) -> float:
    if isinstance(d, bool) or not isinstance(d, (int, float, np.integer, np.floating)) or not 0 < d < 1:
        raise ValueError(f"{where}: delta (the allowed miss probability) must be in (0, 1), got {d!r}")
    return float(d)


def allocate(half_width: float, delta: float, sensitivity: float = 1.0, *, noise: str = "laplace") -> Allocation:
    """The least budget for which a fresh answer alone is within ``half_width`` with probability ``1 - delta``.

    Laplace ([XX] Theorem 5.3): ``P(|Lap(b)| <= w) = 1 - exp(-w / b) >= 1 - delta`` iff
    ``epsilon = S / b >= S ln(1/delta) / w`` (the printed proof's factor 1/2 is a typo; the allocation is
    right). Gaussian (zCDP): ``sigma = w / Phi^{-1}(1 - delta/2)``, ``rho = S_2^2 / (2 sigma^2)``.

    Args:
        half_width: ``w``, the requested half-width.
        delta: the allowed probability of missing by more than ``w``.
        sensitivity: ``S`` (L1 for Laplace, L2 for Gaussian); ``max_j |q_j|`` for a query ``q`` under add/remove.
        noise: ``"laplace"`` or ``"gaussian"``.

    Returns:
        :class:`Allocation`.

    Example:
        >>> round(allocate(25.0, 0.2).cost, 10)                                 # ln 5 / 25
        0.0643775165
        >>> a = allocate(25.0, 0.2, noise="gaussian"); round(a.scale, 6), round(a.cost, 10)
        (19.507604, 0.0013138995)
    """
    where = "allocate"
    w = _positive(half_width, "half_width", where)
    d = _delta(delta, where)
    S = _positive(sensitivity, "sensitivity", where)
    if noise == "laplace":
        b = w / math.log(1.0 / d)
        return Allocation(S / b, b, "laplace")
    if noise == "gaussian":
        sigma = w / float(ndtri(1.0 - d / 2.0))
        return Allocation(S * S / (2.0 * sigma * sigma), sigma, "gaussian")
    raise ValueError(f"{where}: noise must be 'laplace' or 'gaussian', got {noise!r}")


def combined_error(history_error: LinearNoise | None, history_variance: float | None, history: History, b_new: float,
                   **law) -> LinearNoise:
    """Law of the BLUE of ``q x`` from a history plus one fresh Laplace answer of ``q`` of scale ``b_new``.

    When the new row is the query itself, Sherman-Morrison gives the combined weights in closed form:
    ``A_c = [kappa A_h, 1 - kappa]``, ``kappa = (1/V_h) / (1/V_h + 1/(2 b_new^2))`` (inverse-variance
    weighting of the history's BLUE and the fresh answer); a query the history cannot estimate is
    answered by the fresh row alone.

    Example:
        >>> h = History(np.ones((1, 1)), np.zeros(1), np.ones(1), np.zeros(1))
        >>> combined_error(LinearNoise([1.0], 1.0), 2.0, h, 1.0).weights.tolist()
        [0.5, 0.5]
    """
    if history_error is None:
        return LinearNoise([1.0], [b_new], **law)
    v_new = 2.0 * b_new * b_new
    kappa = (1.0 / history_variance) / (1.0 / history_variance + 1.0 / v_new)
    w = np.append(kappa * history_error.weights, 1.0 - kappa)
    return LinearNoise(w, np.append(history.laplace_scale, b_new), np.append(history.gaussian_sd, 0.0), **law)


def allocate_with_history(history: History, query, half_width: float, delta: float, sensitivity: float | None = None,
                          *, rtol: float = 1e-9, factor=None, **law) -> Allocation:
    """The least Laplace budget for one fresh answer of ``query`` such that the BLUE combining it with the
    history meets ``half_width`` with probability ``1 - delta`` (history-aware allocation; an improvement on
    [XX] Theorem 5.3, which ignores the history).

    The combined half-width decreases in ``epsilon``; the least ``epsilon`` is found by bisection between
    ``1e-6`` and ``2^k`` times the history-blind :func:`allocate` (Brent's method, then rounded up so the
    request is met). Returns cost 0 (scale inf) when the history alone suffices.

    Args:
        history: the :class:`~pgmjax.bayes.History` (its noisy values are not used: the decision depends
            only on ``H`` and the scales).
        query: ``(N,)`` the query row.
        half_width, delta: the request.
        sensitivity: ``S`` of the query (default ``max_j |q_j|``, add/remove).
        rtol: relative precision of the returned epsilon (rounded up, so the request is met).
        factor: the history's :func:`~pgmjax.bayes.blue.factorize`, to reuse.

    Returns:
        :class:`Allocation` (Laplace).

    Example:
        >>> h = History(np.ones((1, 1)), np.zeros(1), np.array([2.0]), np.zeros(1))
        >>> a = allocate_with_history(h, [1.0], 2.0, 0.05)
        >>> a.cost < allocate(2.0, 0.05).cost
        True
    """
    where = "allocate_with_history"
    w = _positive(half_width, "half_width", where)
    d = _delta(delta, where)
    q = np.asarray(query, dtype=np.float64)
    if q.ndim != 1 or q.size != history.H.shape[1] or not np.all(np.isfinite(q)):
        raise ValueError(f"{where}: query must be a finite ({history.H.shape[1]},) row, got shape {q.shape}")
    S = float(np.abs(q).max()) if sensitivity is None else _positive(sensitivity, "sensitivity", where)
    if S == 0:
        raise ValueError(f"{where}: the query is all zeros")
    err, var = None, None
    if history.H.shape[0]:
        r = blue_history(history, q, factor=factor, **law)
        if r.estimable:
            err, var = r.error, r.variance
            if err.half_width(1.0 - d) <= w:
                return Allocation(0.0, math.inf, "laplace")

    def meets(eps: float) -> bool:
        return combined_error(err, var, history, S / eps, **law).half_width(1.0 - d) <= w

    def excess(eps: float) -> float:
        return float(combined_error(err, var, history, S / eps, **law).half_width(1.0 - d)) - w

    hi = allocate(w, d, S).cost
    while excess(hi) > 0:  # combining can widen a Laplace law's tails a little at the same variance
        hi *= 2.0
    lo = hi * 1e-6
    if excess(lo) <= 0:
        return Allocation(lo, S / lo, "laplace")
    from scipy.optimize import brentq  # here: scipy.optimize is slow to import

    eps = brentq(excess, lo, hi, xtol=rtol * hi, rtol=4 * np.finfo(float).eps)
    while excess(eps) > 0:  # round up onto the side that meets the request
        eps = min(hi, eps * (1.0 + rtol))
    return Allocation(eps, S / eps, "laplace")


def _row_scales(H: np.ndarray, where: str, scale, epsilons, sensitivities) -> np.ndarray:
    m = H.shape[0]
    if (scale is None) == (epsilons is None):
        raise ValueError(f"{where}: give the Laplace rows either as scale= (b_i) or as epsilons= (alpha_i, with sensitivities=)")
    if scale is not None:
        b, _ = row_noise(m, scale, None, where)
        return b
    eps = np.broadcast_to(np.asarray(epsilons, dtype=np.float64), (m,))
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise ValueError(f"{where}: epsilons must be positive, got {epsilons!r}")
    S = np.abs(H).max(axis=1) if sensitivities is None else np.broadcast_to(np.asarray(sensitivities, dtype=np.float64), (m,))
    if np.any(S <= 0):
        raise ValueError(f"{where}: every row needs a positive sensitivity (an all-zero row costs nothing: drop it)")
    return S / eps


def _H(H, where: str) -> np.ndarray:
    a = np.asarray(H, dtype=np.float64)
    if a.ndim != 2 or a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"{where}: H must be a finite non-empty (m, N) matrix, got shape {a.shape}")
    return a


def cell_cost(H, *, scale=None, epsilons=None, sensitivities=None, stddev=None) -> np.ndarray:
    """Privacy loss of a whole history for a record in each cell ([XX] Theorem 5.4, eq. 34).

    Laplace rows: ``B_j = sum_i |H_ij| alpha_i / S_i = sum_i |H_ij| / b_i`` (epsilon). Gaussian rows
    (``stddev=``): ``rho_j = 1/2 sum_i H_ij^2 / sigma_i^2`` (zCDP).

    Args:
        H: ``(m, N)`` the history's rows.
        scale: Laplace ``b_i``; or epsilons: ``alpha_i`` with sensitivities ``S_i`` (default ``max_j |H_ij|``).
        stddev: Gaussian ``sigma_i`` (instead of the Laplace arguments).

    Returns:
        ``(N,)`` per-cell cost; the system cost is its maximum (:func:`system_cost`).

    Example (the paper's example, [XX] section 5.4):
        >>> H = [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1], [2, 1, 0, 0], [0, 0, 2, -1], [0, -1, 0, 1]]
        >>> cell_cost(H, epsilons=[.05, .1, .05, .1, .1, .05, .05, .1]).round(6).tolist()
        [0.1, 0.275, 0.25, 0.375]
    """
    where = "cell_cost"
    H = _H(H, where)
    if stddev is not None:
        if scale is not None or epsilons is not None:
            raise ValueError(f"{where}: give Laplace (scale=/epsilons=) or Gaussian (stddev=) rows, not both")
        _, sd = row_noise(H.shape[0], None, stddev, where)
        return 0.5 * ((H / sd[:, None]) ** 2).sum(axis=0)
    b = _row_scales(H, where, scale, epsilons, sensitivities)
    return (np.abs(H) / b[:, None]).sum(axis=0)


def system_cost(H, *, scale=None, epsilons=None, sensitivities=None, stddev=None, bounded: bool = False) -> float:
    """The privacy cost of a history ([XX] eq. 35): ``max_j B_j`` (add/remove), or under replace-one
    ``max_{j != k} sum_i |H_ij - H_ik| / b_i`` (Gaussian: ``1/2 max sum_i (H_ij - H_ik)^2 / sigma_i^2``).

    Example:
        >>> H = [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1], [2, 1, 0, 0], [0, 0, 2, -1], [0, -1, 0, 1]]
        >>> e = [.05, .1, .05, .1, .1, .05, .05, .1]
        >>> round(system_cost(H, epsilons=e), 6), round(system_cost(H, epsilons=e, bounded=True), 6)
        (0.375, 0.525)
    """
    where = "system_cost"
    if not isinstance(bounded, bool):
        raise TypeError(f"{where}: bounded must be True or False, got {bounded!r}")
    H = _H(H, where)
    if not bounded:
        return float(cell_cost(H, scale=scale, epsilons=epsilons, sensitivities=sensitivities, stddev=stddev).max())
    if stddev is not None:
        _, sd = row_noise(H.shape[0], None, stddev, where)
        Wm, power = H / sd[:, None], 2
    else:
        Wm, power = H / _row_scales(H, where, scale, epsilons, sensitivities)[:, None], 1
    N = Wm.shape[1]
    if N > 4096:
        raise ValueError(f"{where}: replace-one cost compares all pairs of {N} cells; at most 4096")
    best = 0.0
    for j in range(N):  # one column against all: O(m N) memory
        diff = np.abs(Wm[:, [j]] - Wm) ** power
        best = max(best, float(diff.sum(axis=0).max()))
    return best * (0.5 if power == 2 else 1.0)


def per_record_cost(domain: Domain, measurements: Sequence[Measurement], *, noise: str | None = None,
                    bounded: bool = False) -> float:
    """Exact privacy cost of measurements on cliques, by max-sum over the records ([XX] Theorem 5.4 on a
    factored domain).

    ``max_t sum_i |Q_i[t_{C_i}]| / b_i`` over records ``t`` (Laplace, epsilon), or
    ``1/2 max_t sum_i Q_i[t_{C_i}]^2 / sigma_i^2`` (Gaussian, zCDP); one term per row, summed per
    measurement into a table on its clique, maximised exactly by max-sum variable elimination (cost
    exponential only in the width of the measured cliques). Replace-one (``bounded=True``) maximises
    ``sum_i |Q_i[t] - Q_i[t']| / b_i`` over pairs of records, on a domain with every attribute twice.

    Args:
        domain: the domain.
        measurements: the measurements (their ``noise`` and ``stddev``; Laplace ``b = stddev / sqrt 2``).
        noise: ``"laplace"`` or ``"gaussian"``; default the measurements' (which must agree).
        bounded: replace-one neighbours.

    Returns:
        The cost (epsilon for Laplace, rho for Gaussian).

    Example (two Laplace measurements ``A = 0`` and ``A = 1``, each ``b = 1``):
        >>> dom = Domain({"A": 2})
        >>> ms = [Measurement(("A",), [0.0], 2**0.5, np.array([[1, 0]]), noise="laplace"),
        ...       Measurement(("A",), [0.0], 2**0.5, np.array([[0, 1]]), noise="laplace")]
        >>> round(per_record_cost(dom, ms), 9)                            # sequential composition says 2
        1.0
    """
    where = "per_record_cost"
    if not isinstance(domain, Domain):
        raise TypeError(f"{where}: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    ms = list(measurements)
    if not ms:
        raise ValueError(f"{where}: no measurements")
    validate_measurements(domain, ms, where)
    families = {m.noise for m in ms}
    if noise is None:
        if len(families) > 1:
            raise ValueError(f"{where}: the measurements mix Laplace and Gaussian noise; costs in epsilon and rho do not add")
        noise = families.pop()
    if noise not in ("laplace", "gaussian") or any(m.noise != noise for m in ms):
        raise ValueError(f"{where}: noise={noise!r}, but the measurements' noise is {sorted({m.noise for m in ms})}")
    if not isinstance(bounded, bool):
        raise TypeError(f"{where}: bounded must be True or False, got {bounded!r}")
    attrs = domain.canonical({a for m in ms for a in m.clique})
    prime = {a: a + "\u2032" for a in attrs}
    if bounded and any(p in domain for p in prime.values()):
        raise ValueError(f"{where}: an attribute name ends in a prime; cannot build the pair domain")
    factors = []
    for m in ms:
        q = m.linear.matrix()
        sd = m.row_stddev()
        wq = q / (sd / math.sqrt(2.0))[:, None] if noise == "laplace" else q / sd[:, None]
        shape = domain.shape_of(m.clique)
        if not bounded:
            col = np.abs(wq).sum(axis=0) if noise == "laplace" else 0.5 * (wq**2).sum(axis=0)
            factors.append((m.clique, col.reshape(shape)))
        else:
            diff = wq[:, :, None] - wq[:, None, :]
            pair = np.abs(diff).sum(axis=0) if noise == "laplace" else 0.5 * (diff**2).sum(axis=0)
            factors.append((m.clique + tuple(prime[a] for a in m.clique), pair.reshape(shape + shape)))
    sizes = {a: domain[a] for a in attrs}
    if bounded:
        sizes.update({prime[a]: domain[a] for a in attrs})
    _, value = max_sum_ve(factors, Domain(sizes))
    return float(value)
