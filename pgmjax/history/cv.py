"""Choosing kernel PCA's shrinkage alpha by cross-validation on the released answers.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 3.5, eq. 21-24 and Theorem 4: if ``b_i`` are predictions independent of unbiased
noisy answers ``c_i`` with variances ``sigma_i^2``, then ``mean (b_i - c_i)^2 - mean sigma_i^2`` is an unbiased
estimate of the predictions' mean squared error. Held-out answers play ``c``, the kernel-PCA fit on the other
folds plays ``b``. Each fold is eigen-decomposed once; the curve over alpha then costs ``O(m^2)`` per alpha.
Reads only released answers: no privacy cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import jax
import numpy as np

from ..data.domain import Domain
from ..queries.measurement import Measurement
from . import rows as rows_mod
from .pca import check_inputs, eigen_fit, shrink_weights


class Fold(NamedTuple):
    """One held-out fold: ``prediction(alpha) = base + C.T @ (shrink(alpha) * z)``."""

    test: np.ndarray  # indices (block row order) of the held-out rows
    C: np.ndarray  # (r_f, |test|) eigen-coordinates of the held-out rows under the training fit
    z: np.ndarray  # (r_f,) training eigen-answers
    lam2: np.ndarray  # (r_f,) training eigenvalues
    base: np.ndarray  # (|test|,) n * nu of the held-out rows
    y: np.ndarray  # held-out answers
    var: np.ndarray  # held-out noise variances

    def predict(self, alpha: float) -> np.ndarray:
        """Predictions of the held-out rows from the other folds at ``alpha``."""
        return self.base + self.C.T @ (shrink_weights(self.lam2, alpha) * self.z)

    def score(self, alpha: float) -> float:
        """Theorem 4's unbiased MSE estimate on this fold (may be negative)."""
        return float(np.mean((self.y - self.predict(alpha)) ** 2) - np.mean(self.var))


def make_folds(kt: np.ndarray, yt: np.ndarray, sigma: np.ndarray, base: np.ndarray, fold_of: np.ndarray,
               rank_tol: float = 1e-10) -> tuple[Fold, ...]:
    """Fit kernel PCA on every training part (deflated kernel ``kt``, deflated answers ``yt``).

    Args:
        kt, yt, sigma: deflated kernel (m x m), deflated answers and noise stds of all rows.
        base: ``n * nu`` of every row (added back to the predictions).
        fold_of: the fold id of every row.
        rank_tol: as in :func:`pgmjax.history.kernel_pca`.

    Returns:
        One :class:`Fold` per distinct fold id (ascending).

    Example:
        >>> f = make_folds(np.eye(2) / 4, np.zeros(2), np.ones(2), np.full(2, 5.0), np.array([0, 1]))
        >>> [round(x.score(math.inf), 6) for x in f]
        [-1.0, -1.0]
    """
    out = []
    for f in np.unique(fold_of):
        test, train = np.flatnonzero(fold_of == f), np.flatnonzero(fold_of != f)
        W, z, lam2 = eigen_fit(kt[np.ix_(train, train)], yt[train], sigma[train], rank_tol)
        C = W @ kt[np.ix_(train, test)]
        out.append(Fold(test, C, z, lam2, base[test], yt[test] + base[test], sigma[test] ** 2))
    return tuple(out)


def cv_curve(folds: Sequence[Fold], alphas: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The cross-validated MSE (mean of the per-fold Theorem 4 estimates) at every alpha.

    Returns:
        ``(cv, per_fold)`` of shapes ``(len(alphas),)`` and ``(len(alphas), folds)``.

    Example:
        >>> f = make_folds(np.eye(2) / 4, np.zeros(2), np.ones(2), np.full(2, 5.0), np.array([0, 1]))
        >>> cv_curve(f, [1.0, math.inf])[0]
        array([-1., -1.])
    """
    per = np.array([[f.score(a) for f in folds] for a in alphas]).reshape(len(alphas), len(folds))
    return per.mean(axis=1), per


def select_alpha(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    folds=5,
    key=None,
    total: float | None = None,
    prior=None,
    grid: Sequence[float] | None = None,
    refine: str | None = "golden",
    include_inf: bool = True,
    rank_tol: float = 1e-10,
):
    """Kernel PCA's alpha by k-fold cross-validation ([CZB] section 3.5, eq. 21-24, Theorem 4).

    Args:
        domain, measurements, total, prior, rank_tol: as in :func:`pgmjax.history.kernel_pca`.
        folds: the number of folds ``k`` (rows assigned by a random permutation from ``key``), or an integer
            array with the fold id of every row (rows in the measurements' order). Rows of one measurement
            have independent noise; correlated rows (a strategy) need folds that follow independent blocks.
        key: a ``jax.random`` key (needed when ``folds`` is a number).
        grid: the alphas to try; default 41 log-spaced values from ``0.01 / max lambda`` to
            ``100 / min lambda`` over the folds.
        refine: ``"golden"`` refines the grid minimum by golden-section search on ``log alpha`` (the paper's
            ternary search, assuming a unimodal curve); None keeps the grid.
        include_inf: also try ``alpha = inf`` (least squares).

    Returns:
        ``(alpha, table)``: the minimiser (possibly ``math.inf``) and a pandas DataFrame with columns
        ``alpha``, ``cv_mse`` (signed; ``sqrt(max(cv, 0))`` reads as an RMSE) and ``fold_0 ...``.

    Example:
        >>> dom = pj.Domain({"a": 4})
        >>> m = pj.Measurement(("a",), [11.0, 19.0, 18.0, 12.0], stddev=5.0)
        >>> alpha, table = select_alpha(dom, [m], folds=np.arange(4) % 2, total=60, grid=[0.1, 1.0], refine=None)
        >>> list(table.columns)[:2]
        ['alpha', 'cv_mse']
    """
    import pandas as pd

    where = "select_alpha"
    measurements, total, _ = check_inputs(domain, measurements, total, where)
    prior = rows_mod.check_prior(domain, prior, where)
    blocks, order = rows_mod.group_blocks(domain, measurements)
    m = order.size
    fold_of = _fold_ids(folds, key, m, where)[order]
    if refine not in (None, "golden"):
        raise ValueError(f"{where}: refine must be 'golden' or None, got {refine!r}")
    y = np.concatenate([x.y for x in measurements])[order]
    sigma = np.concatenate([x.row_stddev() for x in measurements])[order]
    nu = np.concatenate([rows_mod.mean(b, prior) for b in blocks])
    kt = rows_mod.gram_matrix(blocks, prior) - np.outer(nu, nu)
    fs = make_folds(kt, y - total * nu, sigma, total * nu, fold_of, rank_tol)
    if grid is None:
        tops = [f.lam2[0] for f in fs if f.lam2.size]
        lows = [f.lam2[-1] for f in fs if f.lam2.size]
        if not tops:
            raise ValueError(f"{where}: no fold's training rows determine anything beyond the total")
        grid = np.logspace(np.log10(0.01 / math.sqrt(max(tops))), np.log10(100 / math.sqrt(min(lows))), 41)
    grid = [float(a) for a in grid]
    if any(not a > 0 for a in grid):
        raise ValueError(f"{where}: grid values must be positive, got {grid}")
    alphas = sorted(set(grid))
    cv, per = cv_curve(fs, alphas)
    points = list(zip(alphas, cv, per))
    i = int(np.argmin(cv))
    if refine == "golden" and 0 < i < len(alphas) - 1:
        lo, hi = math.log(alphas[i - 1]), math.log(alphas[i + 1])
        for a in _golden(lambda la: cv_curve(fs, [math.exp(la)])[0][0], lo, hi):
            c, p = cv_curve(fs, [a])
            points.append((a, c[0], p[0]))
    if include_inf and math.inf not in alphas:
        c, p = cv_curve(fs, [math.inf])
        points.append((math.inf, c[0], p[0]))
    points.sort(key=lambda t: t[0])
    table = pd.DataFrame({"alpha": [p[0] for p in points], "cv_mse": [p[1] for p in points]})
    for j in range(len(fs)):
        table[f"fold_{j}"] = [p[2][j] for p in points]
    best = float(table["alpha"].iloc[int(np.argmin(table["cv_mse"].to_numpy()))])
    return best, table


def _golden(fun, lo: float, hi: float, iters: int = 20) -> list[float]:
    """Golden-section search of ``fun`` on ``[lo, hi]`` (log alpha); returns the alphas evaluated, last best."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = fun(c), fun(d)
    tried = [c, d]
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = fun(c)
            tried.append(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = fun(d)
            tried.append(d)
    return [math.exp(t) for t in tried]


def _fold_ids(folds, key, m: int, where: str) -> np.ndarray:
    if isinstance(folds, (int, np.integer)) and not isinstance(folds, bool):
        if not 2 <= folds <= m:
            raise ValueError(f"{where}: folds must be between 2 and the number of rows ({m}), got {folds}")
        if key is None:
            raise ValueError(f"{where}: a random partition into {folds} folds needs key= (a jax.random key)")
        perm = np.asarray(jax.random.permutation(key, m))
        out = np.empty(m, np.int64)
        out[perm] = np.arange(m) % folds
        return out
    ids = np.asarray(folds)
    if ids.shape != (m,) or ids.dtype.kind not in "iu":
        raise ValueError(f"{where}: folds must be a number or an integer array of {m} fold ids, got {folds!r}")
    if np.unique(ids).size < 2:
        raise ValueError(f"{where}: the fold ids name a single fold; cross-validation needs at least 2")
    return ids
