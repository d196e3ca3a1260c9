"""Best linear unbiased estimates from a history of noisy linear answers.

Xiao & Xiong, "Bayesian Inference under Differential Privacy", section 3 (eq. 15-18): with answers
``y = H x + noise`` of independent rows of variances ``v_i``, the generalised least-squares estimate
``x_hat = (H^T D H)^+ H^T D y`` (``D = diag(1/v)``) gives every estimable query ``theta = Q x`` its BLUE
``theta_hat = A y``, ``A = Q (H^T D H)^+ H^T D``, with variance ``sum_i A_i^2 v_i`` (eq. 17).

A history is either a dense ``(m, N)`` matrix over ``N`` cells, or a list of :class:`~pgmjax.Measurement`
on a domain, materialised over the cells of the union of their cliques (:func:`history_matrix`; small
domains only: the solve is dense, ``O(m N^2)``). Rank-deficient histories are allowed: a query is
estimable when it lies in the row space of ``H`` (the paper's footnote 7, corrected:
``Q = Q (H^T D H)^+ H^T D H``); a non-estimable query gets ``estimable=False`` and no error law.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..data.domain import Domain
from ..queries.measurement import Measurement, validate_measurements
from .errors import LinearNoise

__all__ = ["History", "BLUEResult", "Factor", "blue", "blue_history", "factorize", "history_matrix", "row_noise"]

_ESTIMABLE_RTOL = 1e-9


class History(NamedTuple):
    """A history of noisy linear answers over ``N`` cells, materialised.

    Attributes:
        H: ``(m, N)`` float64 query rows.
        y: ``(m,)`` noisy answers.
        laplace_scale: ``(m,)`` Laplace scale ``b_i`` of each row (0 for a Gaussian row).
        gaussian_sd: ``(m,)`` Gaussian standard deviation of each row (0 for a Laplace row).
        attributes: the attributes whose cells index the columns (row-major), or None for a plain matrix.
    """

    H: np.ndarray
    y: np.ndarray
    laplace_scale: np.ndarray
    gaussian_sd: np.ndarray
    attributes: tuple[str, ...] | None = None

    @property
    def variance(self) -> np.ndarray:
        """Noise variance of each row: ``2 b^2`` (Laplace) plus ``sigma^2`` (Gaussian)."""
        return 2.0 * self.laplace_scale**2 + self.gaussian_sd**2


class BLUEResult(NamedTuple):
    """The BLUE of one or more queries (frozen).

    Attributes:
        x_hat: ``(N,)`` the generalised least-squares cell estimate (minimum-norm when ``H`` is rank-deficient).
        A: ``(m,)`` or ``(r, m)``: the weights, ``theta_hat = A y`` (None without a query).
        value: the estimate(s) ``theta_hat`` (None without a query).
        variance: ``Var theta_hat = sum_i A_i^2 v_i`` (None without a query).
        estimable: whether each query lies in the row space of ``H`` (True without a query iff ``rank H = N``).
        error: the law of ``theta_hat - theta`` (:class:`LinearNoise`; a list for several queries; None
            for a non-estimable query or without a query).
    """

    x_hat: np.ndarray
    A: np.ndarray | None
    value: np.ndarray | float | None
    variance: np.ndarray | float | None
    estimable: np.ndarray | bool
    error: LinearNoise | list | None


def _matrix(value, name: str, ndim: int) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"blue: {name} must be an array of numbers, got {type(value).__name__}") from None
    if a.ndim != ndim:
        raise ValueError(f"blue: {name} must be {ndim}-D, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"blue: {name} has non-finite entries")
    return a


def row_noise(m: int, scale=None, stddev=None, where: str = "blue") -> tuple[np.ndarray, np.ndarray]:
    """Per-row ``(laplace_scale, gaussian_sd)`` from ``scale=`` (Laplace ``b``) and/or ``stddev=`` (Gaussian).

    A row may carry one or the other (0 for the absent part); every row needs positive variance.

    Example:
        >>> row_noise(2, scale=[1.0, 0.0], stddev=[0.0, 3.0])
        (array([1., 0.]), array([0., 3.]))
    """
    if scale is None and stddev is None:
        raise ValueError(f"{where}: give the noise: scale= (Laplace b per row) and/or stddev= (Gaussian sigma per row)")
    out = []
    for name, v in (("scale", scale), ("stddev", stddev)):
        if v is None:
            out.append(np.zeros(m))
            continue
        a = np.asarray(v, dtype=np.float64)
        if a.ndim > 1 or (a.ndim == 1 and a.size != m):
            raise ValueError(f"{where}: {name} must be a scalar or one per row ({m}), got shape {a.shape}")
        a = np.broadcast_to(a, (m,)).copy()
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"{where}: {name} must be non-negative and finite, got {v!r}")
        out.append(a)
    b, sd = out
    if np.any(2.0 * b**2 + sd**2 <= 0):
        raise ValueError(f"{where}: every row needs positive noise (scale or stddev); rows {np.flatnonzero(2 * b**2 + sd**2 <= 0)} have none")
    return b, sd


def history_matrix(domain: Domain, measurements: Sequence[Measurement], attributes=None) -> History:
    """Materialise measurements on cliques as rows over the cells of ``attributes`` (default: the union of
    the cliques, in domain order).

    Row ``r`` of a measurement on clique ``C`` is ``H[r, t] = Q[r, t_C]`` for every cell ``t``. Laplace
    measurements (``noise="laplace"``) give ``b = stddev / sqrt(2)``, Gaussian ones ``sigma = stddev``.

    Args:
        domain: the domain.
        measurements: the history.
        attributes: the cells' attributes (must contain every clique); at most ``10**5`` cells.

    Returns:
        A :class:`History`.

    Example:
        >>> dom = Domain({"a": 2, "b": 2})
        >>> h = history_matrix(dom, [Measurement(("a",), [3.0, 4.0], 1.0)])
        >>> h.H.tolist(), h.attributes
        ([[1.0, 0.0], [0.0, 1.0]], ('a',))
    """
    if not isinstance(domain, Domain):
        raise TypeError(f"history_matrix: domain must be a pgmjax.Domain, got {type(domain).__name__}")
    ms = list(measurements)
    validate_measurements(domain, ms, "history_matrix")
    if attributes is None:
        attributes = domain.canonical({a for m in ms for a in m.clique})
    attrs = domain.check_clique(attributes, what="history_matrix: attributes")
    missing = [m.clique for m in ms if not set(m.clique) <= set(attrs)]
    if missing:
        raise ValueError(f"history_matrix: attributes {attrs} do not contain the cliques {missing}")
    cells = domain.size(attrs)
    if cells > 10**5:
        raise ValueError(f"history_matrix: {cells} cells; the dense BLUE is for small domains (at most 1e5 cells)")
    grid = np.indices(domain.shape_of(attrs)).reshape(len(attrs), -1)
    rows, ys, bs, sds = [], [], [], []
    for m in ms:
        sub = np.ravel_multi_index(tuple(grid[attrs.index(a)] for a in m.clique), domain.shape_of(m.clique))
        q = m.linear.matrix()
        rows.append(q[:, sub])
        ys.append(m.y)
        sd = m.row_stddev()
        lap = m.noise == "laplace"
        bs.append(sd / math.sqrt(2.0) if lap else np.zeros_like(sd))
        sds.append(np.zeros_like(sd) if lap else sd)
    if not rows:
        return History(np.zeros((0, cells)), np.zeros(0), np.zeros(0), np.zeros(0), attrs)
    return History(np.vstack(rows), np.concatenate(ys), np.concatenate(bs), np.concatenate(sds), attrs)


def blue(H, y=None, *, scale=None, stddev=None, query=None, domain=None, rcond: float = 1e-12, method: str = "cf", **law) -> BLUEResult:
    """Best linear unbiased estimate of ``x`` and of ``theta = Q x`` from noisy answers ([XX] eq. 15-18).

    Args:
        H: ``(m, N)`` query rows, or a list of :class:`~pgmjax.Measurement` (then ``domain=`` is needed,
            ``y`` and the noise come from the measurements and ``N`` is the cells of the union of cliques).
        y: ``(m,)`` noisy answers (dense ``H`` only).
        scale: Laplace scale ``b_i`` per row (the paper's ``S_i / alpha_i``), scalar or ``(m,)``.
        stddev: Gaussian standard deviation per row; rows may mix (0 where absent).
        query: ``(N,)`` one query or ``(r, N)`` several; None for ``x_hat`` only.
        domain: the domain of measurement histories.
        rcond: relative cut-off of the singular values of the whitened ``H``.
        method, **law: how the returned :class:`LinearNoise` evaluates its law.

    Returns:
        :class:`BLUEResult`. For one query ``value``, ``variance``, ``estimable`` are scalars.

    Example (the paper's example, [XX] eq. 11):
        >>> H = [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1], [2, 1, 0, 0], [0, 0, 2, -1], [0, -1, 0, 1]]
        >>> b = [20, 10, 20, 10, 10, 40, 40, 10]
        >>> y = [30.8, 30.3, 46.9, 20.2, 30.4, 68.9, 38.9, 9.5]
        >>> r = blue(H, y, scale=b, query=[1, 0, 1, 0])
        >>> round(r.value, 6), round(r.variance, 4), r.estimable
        (42.013803, 554.45, True)
    """
    if isinstance(H, (list, tuple)) and H and all(isinstance(m, Measurement) for m in H):
        if domain is None:
            raise ValueError("blue: a list of Measurements needs domain=")
        if y is not None or scale is not None or stddev is not None:
            raise ValueError("blue: with Measurements, y and the noise come from them; do not pass y, scale or stddev")
        hist = history_matrix(domain, H)
    else:
        Hm = _matrix(H, "H", 2)
        if y is None:
            raise ValueError("blue: a dense H needs y (one noisy answer per row)")
        ym = _matrix(y, "y", 1)
        if ym.size != Hm.shape[0]:
            raise ValueError(f"blue: H has {Hm.shape[0]} rows but y has {ym.size} values")
        b, sd = row_noise(Hm.shape[0], scale, stddev)
        hist = History(Hm, ym, b, sd)
    return blue_history(hist, query, rcond=rcond, method=method, **law)


class Factor(NamedTuple):
    """A history's factorisation, reusable for many queries: ``A = Q @ P`` and the row space ``Vt``."""

    P: np.ndarray  # (N, m): (H^T D H)^+ H^T D
    Vt: np.ndarray  # (r, N): orthonormal basis of the row space of H
    x_hat: np.ndarray  # (N,)
    full_rank: bool


def factorize(hist: History, rcond: float = 1e-12) -> Factor:
    """SVD of the whitened history ``D^{1/2} H`` (float64): what :func:`blue_history` needs for any query.

    Example:
        >>> f = factorize(History(np.array([[1.0], [1.0]]), np.array([10.0, 14.0]), np.array([1.0, 2.0]), np.zeros(2)))
        >>> f.P.round(3).tolist(), f.full_rank
        ([[0.8, 0.2]], True)
    """
    m, N = hist.H.shape
    if m == 0:
        raise ValueError("blue: the history is empty")
    if not (0 < rcond < 1):
        raise ValueError(f"blue: rcond must be in (0, 1), got {rcond!r}")
    w = 1.0 / np.sqrt(hist.variance)
    U, sv, Vt = np.linalg.svd(hist.H * w[:, None], full_matrices=False)
    keep = sv > rcond * (sv[0] if sv.size else 0.0)
    U, sv, Vt = U[:, keep], sv[keep], Vt[keep]
    P = ((Vt.T / sv) @ U.T) * w[None, :]  # (D^{1/2} H)^+ D^{1/2}
    return Factor(P, Vt, P @ hist.y, bool(keep.sum() == N))


def blue_history(hist: History, query=None, *, rcond: float = 1e-12, factor: Factor | None = None, method: str = "cf",
                 **law) -> BLUEResult:
    """:func:`blue` on a :class:`History` (see there); ``factor`` reuses :func:`factorize` across queries.

    Example:
        >>> h = History(np.array([[1.0], [1.0]]), np.array([10.0, 14.0]), np.array([1.0, 2.0]), np.zeros(2))
        >>> blue_history(h, [1.0]).A.round(3).tolist()
        [0.8, 0.2]
    """
    N = hist.H.shape[1]
    f = factorize(hist, rcond) if factor is None else factor
    if query is None:
        return BLUEResult(f.x_hat, None, None, None, f.full_rank, None)
    Q = _matrix(query, "query", np.ndim(query))
    if Q.ndim not in (1, 2) or Q.shape[-1] != N:
        raise ValueError(f"blue: query must be ({N},) or (r, {N}), got shape {Q.shape}")
    Q2 = np.atleast_2d(Q)
    resid = Q2 - (Q2 @ f.Vt.T) @ f.Vt  # the part of Q outside the row space of H
    norms = np.linalg.norm(Q2, axis=1)
    estimable = np.linalg.norm(resid, axis=1) <= _ESTIMABLE_RTOL * np.maximum(norms, 1e-300)
    A = Q2 @ f.P  # Q (H^T D H)^+ H^T D
    value = A @ hist.y
    variance = (A**2) @ hist.variance
    errors = [
        LinearNoise(a, hist.laplace_scale, hist.gaussian_sd, method=method, **law) if ok else None
        for a, ok in zip(A, estimable)
    ]
    if Q.ndim == 1:
        return BLUEResult(f.x_hat, A[0], float(value[0]), float(variance[0]), bool(estimable[0]), errors[0])
    return BLUEResult(f.x_hat, A, value, variance, estimable, errors)
