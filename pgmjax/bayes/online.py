"""The online query-answering system: answer from history when it is accurate enough, else buy budget.

Xiao & Xiong, "Bayesian Inference under Differential Privacy", section 5 (Fig. 4). A user asks for a
linear query ``q x`` to within ``half_width`` with probability ``1 - delta``. The system computes the BLUE
of ``q x`` from every answer released so far and the exact law of its error; if the history meets the
request it answers for free. Otherwise it buys one fresh Laplace answer of ``q`` (budget by Theorem 5.3,
or the least budget for which the BLUE combining history and fresh answer meets the request), provided
the per-cell privacy cost of the whole history stays within the budget (Theorem 5.4); else it refuses
and spends nothing. Every fresh answer is drawn by a :class:`~pgmjax.privacy.Accountant`.

The accountant's releases are floating-point safe: each answer is rounded to a public lattice of spacing
``gamma`` (at most ``b / 1024``) and discrete Laplace noise of scale ``b`` is added, with the rounding's
share of the sensitivity paid for (epsilon ``= (S + gamma) / b``). The system asks for the scale ``b`` its
allocation rule gives (so a fresh answer costs up to ``2^-10`` more than ``S / b``), records the scale
and cost from the ledger and counts the rounding in the per-cell cost; its intervals use the continuous
Laplace law of scale ``b``, which the lattice law matches to within ``gamma`` (its atoms carry at most
``gamma / (2 b)`` probability each).

Two properties follow from the design: (i) every decision (answer from history, how much to buy, refuse)
depends on the queries and the noise scales, never on the noisy values, so the budget trajectory is a
deterministic function of the request stream; (ii) for a request stream fixed in advance the BLUE weights
are independent of the noise and every interval has exact coverage ``1 - delta``. If users choose later
queries after seeing answers, coverage is only approximate.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np

from ..data.dataset import Dataset
from ..privacy import Accountant, PrivacyBudgetExceeded, check_key
from ..privacy.discrete_noise import lattice_spacing
from .blue import History, blue_history, factorize, row_noise
from .cost import allocate, allocate_with_history, combined_error

__all__ = ["Response", "OnlineQuerySystem"]

_SLACK = 1e-9  # relative float slack on the budget check (as the Accountant's)


def _lattice_calibration(S: float, size: int, *, eps: float | None = None, scale: float | None = None) -> tuple[float, float]:
    """The rounding share ``a`` of the sensitivity and the Laplace scale ``b`` of the accountant's
    floating-point-safe release of ``size`` real answers (rounded to a public lattice of spacing ``gamma``,
    ``a = size * gamma``, :func:`pgmjax.privacy.discrete_noise.lattice_spacing`): ``b = (S + a) / eps`` for a
    budget, or the given ``scale`` (then the release costs ``(S + a) / b``)."""
    gamma = lattice_spacing(S / eps if scale is None else scale, S, size, False)
    a = size * gamma
    return a, ((S + a) / eps if scale is None else scale)


def _cell_loss(rows: np.ndarray, S: float, added: float, b: float) -> np.ndarray:
    """Privacy loss of one release for a record in each cell: row ``i`` moves by at most ``|R_ij|`` plus
    one lattice step ``gamma = added / rows`` when ``R_ij != 0`` (rounding), so the loss is
    ``sum_i (|R_ij| + gamma [R_ij != 0]) / b`` ([XX] eq. 34 with the rounding's share)."""
    gamma = added / rows.shape[0]
    return (np.abs(rows).sum(axis=0) + gamma * np.count_nonzero(rows, axis=0)) / b


class Response(NamedTuple):
    """The answer to one request (frozen).

    Attributes:
        value: the estimate (None when refused).
        interval: ``(lo, hi)`` (None when refused).
        confidence: the probability that the interval covers the true answer (``1 - delta``; 0 when refused).
        cost: the epsilon bought for this request (0 from history or when refused).
        source: ``"history"``, ``"fresh"`` or ``"refused"``.
        half_width: half-width of the interval (None when refused).
        system_cost: the privacy cost of the whole history after this request.
        reason: how the request was answered, or why it was refused.
        history_interval: when refused, the history's own interval at ``1 - delta`` (wider than asked), if
            the query is estimable from it; else None.
    """

    value: float | None
    interval: tuple[float, float] | None
    confidence: float
    cost: float
    source: str
    half_width: float | None
    system_cost: float
    reason: str
    history_interval: tuple[float, float] | None = None


def _cells(data, attributes) -> np.ndarray:
    if isinstance(data, Dataset):
        attrs = data.domain.attributes if attributes is None else data.domain.check_clique(attributes, "OnlineQuerySystem: attributes")
        if data.domain.size(attrs) > 10**5:
            raise ValueError("OnlineQuerySystem: more than 1e5 cells; pass attributes= (a small marginal)")
        return np.asarray(data.marginal(attrs), dtype=np.float64).reshape(-1)
    if attributes is not None:
        raise ValueError("OnlineQuerySystem: attributes= is for a Dataset; data is a cell vector")
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"OnlineQuerySystem: data must be a Dataset or a finite 1-D cell vector, got shape {x.shape}")
    return x


class OnlineQuerySystem:
    """Answers linear queries on private cell counts to a requested accuracy ([XX] section 5, Fig. 4).

    Args:
        data: the private data: a :class:`~pgmjax.Dataset` (cells of ``attributes``, default all) or a 1-D
            vector of cell counts. Read only by the accountant's mechanisms.
        budget: the privacy budget (pure epsilon) for the per-cell cost ``max_j sum_i |H_ij| / b_i`` of
            everything released (Theorem 5.4; the exact loss under add/remove neighbours).
        key: a ``jax.random`` key; fresh answer ``k`` uses ``fold_in(key, k)``.
        history: answers released before (public): ``(H, y, b)`` with Laplace scales ``b``; their cost counts.
        allocation: ``"paper"`` (Theorem 5.3: ``S ln(1/delta) / w``) or ``"history"`` (the least epsilon
            for which the combined BLUE meets the request).
        combine: answer a fresh request by the BLUE of history and fresh answer (True), or by the fresh
            answer alone, ``y_q +- w`` (the paper's system).
        accountant: the :class:`~pgmjax.privacy.Accountant` that adds the noise (pure epsilon). By default one
            whose sequential budget ``budget * N`` the per-cell check always keeps (``sum_i eps_i <= sum_j
            B_j``); pass ``Accountant(epsilon=budget)`` to enforce sequential composition as well.
        attributes: the cells, for a Dataset.
        method: how error laws are evaluated (``"cf"``; see :class:`~pgmjax.bayes.LinearNoise`).

    Example (the paper's example history):
        >>> H = [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1], [2, 1, 0, 0], [0, 0, 2, -1], [0, -1, 0, 1]]
        >>> y = [30.8, 30.3, 46.9, 20.2, 30.4, 68.9, 38.9, 9.5]
        >>> system = OnlineQuerySystem([10.0, 20.0, 20.0, 10.0], 1.0, key=jax.random.key(0), history=(H, y, [20, 10, 20, 10, 10, 40, 40, 10]))
        >>> r = system.ask([1, 0, 1, 0], 50.0, 0.05)
        >>> r.source, r.cost, round(r.half_width, 3)
        ('history', 0.0, 47.383)
        >>> r = system.ask([1, 0, 1, 0], 40.0, 0.05)
        >>> r.source, round(r.cost, 4), round(r.half_width, 4), round(system.cost, 3)   # eps = ln(20)/40 (1 + 2^-10)
        ('fresh', 0.075, 29.8389, 0.375)
    """

    def __init__(self, data, budget: float, *, key, history=None, allocation: str = "paper", combine: bool = True,
                 accountant: Accountant | None = None, attributes=None, method: str = "cf"):
        where = "OnlineQuerySystem"
        self._x = _cells(data, attributes)
        N = self._x.size
        if isinstance(budget, bool) or not isinstance(budget, (int, float, np.integer, np.floating)) or not (budget > 0 and math.isfinite(budget)):
            raise ValueError(f"{where}: budget must be a positive finite epsilon, got {budget!r}")
        self.budget = float(budget)
        self._key = check_key(key, where)
        if allocation not in ("paper", "history"):
            raise ValueError(f"{where}: allocation must be 'paper' or 'history', got {allocation!r}")
        if not isinstance(combine, bool):
            raise TypeError(f"{where}: combine must be True or False, got {combine!r}")
        self.allocation, self.combine, self.method = allocation, combine, method
        if accountant is None:
            accountant = Accountant(epsilon=self.budget * N)
        if not isinstance(accountant, Accountant) or accountant.composition != "pure" or accountant.bounded:
            raise ValueError(f"{where}: accountant must be a pure-epsilon, add/remove Accountant (Accountant(epsilon=...))")
        self.accountant = accountant
        if history is None:
            H, y, b = np.zeros((0, N)), np.zeros(0), np.zeros(0)
        else:
            if len(history) != 3:
                raise ValueError(f"{where}: history must be (H, y, b): rows, noisy answers, Laplace scales")
            H = np.asarray(history[0], dtype=np.float64)
            y = np.asarray(history[1], dtype=np.float64).reshape(-1)
            if H.ndim != 2 or H.shape[1] != N or y.size != H.shape[0] or not (np.all(np.isfinite(H)) and np.all(np.isfinite(y))):
                raise ValueError(f"{where}: history H must be finite (m, {N}) with y of m values; got {H.shape}, {y.shape}")
            b, _ = row_noise(H.shape[0], history[2], None, where)
            if np.any(b <= 0):
                raise ValueError(f"{where}: history scales must be positive")
        self._H, self._y, self._b = H, y, b
        self._B = (np.abs(H) / b[:, None]).sum(axis=0) if H.shape[0] else np.zeros(N)
        if self._B.max() > self.budget * (1 + _SLACK):
            raise ValueError(f"{where}: the history alone costs {self._B.max():.6g} > budget {self.budget:.6g}")
        self._fresh = 0
        self._factor = None
        self.responses: list[Response] = []

    # ---- state ------------------------------------------------------------------------------
    @property
    def history(self) -> History:
        """Everything released so far (public)."""
        return History(self._H.copy(), self._y.copy(), self._b.copy(), np.zeros_like(self._b))

    @property
    def cell_cost(self) -> np.ndarray:
        """Per-cell privacy cost ``B_j = sum_i |H_ij| / b_i`` of the history ([XX] eq. 34)."""
        return self._B.copy()

    @property
    def cost(self) -> float:
        """System cost ``max_j B_j`` ([XX] eq. 35): the history is this-epsilon-DP."""
        return float(self._B.max())

    # ---- answering ---------------------------------------------------------------------------
    def _query(self, query) -> np.ndarray:
        q = np.asarray(query, dtype=np.float64)
        if q.ndim != 1 or q.size != self._x.size or not np.all(np.isfinite(q)):
            raise ValueError(f"OnlineQuerySystem.ask: query must be a finite ({self._x.size},) row, got shape {q.shape}")
        if not np.any(q):
            raise ValueError("OnlineQuerySystem.ask: the query is all zeros")
        return q

    def release(self, rows, epsilon: float) -> None:
        """Release ``rows @ x`` with one epsilon-DP Laplace draw (sensitivity: the largest column L1 norm of
        ``rows``), e.g. a hierarchical strategy to seed the history; refused if the per-cell cost would
        exceed the budget (PrivacyBudgetExceeded, nothing spent).

        Example:
            >>> s = OnlineQuerySystem([5.0, 7.0], 1.0, key=jax.random.key(0))
            >>> s.release([[1, 1], [1, 0], [0, 1]], 0.5); round(s.cost, 3)       # parallel composition: not 1.0
            0.5
        """
        R = np.asarray(rows, dtype=np.float64)
        if R.ndim != 2 or R.shape[1] != self._x.size or not np.all(np.isfinite(R)) or not np.any(R):
            raise ValueError(f"OnlineQuerySystem.release: rows must be a finite non-zero (r, {self._x.size}) matrix")
        if isinstance(epsilon, bool) or not (isinstance(epsilon, (int, float, np.floating)) and epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"OnlineQuerySystem.release: epsilon must be positive, got {epsilon!r}")
        S = float(np.abs(R).sum(axis=0).max())
        B_new = self._B + _cell_loss(R, S, *_lattice_calibration(S, R.shape[0], eps=float(epsilon)))
        if B_new.max() > self.budget * (1 + _SLACK):
            raise PrivacyBudgetExceeded(
                f"OnlineQuerySystem.release: the per-cell cost would reach {B_new.max():.6g} > budget {self.budget:.6g}; nothing was run"
            )
        y = self.accountant.laplace(self._next_key(), R @ self._x, S, epsilon=float(epsilon), target="strategy")
        self._append_release(R, y, S)

    def _next_key(self):
        k = jax.random.fold_in(self._key, self._fresh)
        self._fresh += 1
        return k

    def _append_release(self, rows: np.ndarray, y: np.ndarray, S: float) -> float:
        """Append the accountant's latest release; its scale and rounding share come from the ledger."""
        entry = self.accountant.ledger[-1]
        b, added = float(entry.scale), float(entry.sensitivity) - S
        self._H = np.vstack([self._H, rows])
        self._y = np.concatenate([self._y, y])
        self._b = np.concatenate([self._b, np.full(rows.shape[0], b)])
        self._B = self._B + _cell_loss(rows, S, added, b)
        self._factor = None
        return b

    def ask(self, query, half_width: float, delta: float) -> Response:
        """Answer ``query @ x`` to within ``half_width`` with probability ``1 - delta`` ([XX] Fig. 4).

        Args:
            query: ``(N,)`` the query row.
            half_width: the largest acceptable half-width ``w``.
            delta: the acceptable miss probability.

        Returns:
            :class:`Response`: from history (cost 0, the BLUE interval at ``1 - delta``, half-width
            at most ``w``), fresh (one Laplace answer bought through the accountant), or refused (the
            per-cell cost would exceed the budget; nothing spent, the reason stated).
        """
        q = self._query(query)
        alloc = allocate(half_width, delta, 1.0)  # validates the request
        level = 1.0 - float(delta)
        S = float(np.abs(q).max())
        hist = self.history
        err = var = None
        hist_iv = None
        if hist.H.shape[0]:
            if self._factor is None:  # refactorised only when the history has grown
                self._factor = factorize(hist)
            r = blue_history(hist, q, factor=self._factor, method=self.method)
            if r.estimable:
                err, var = r.error, r.variance
                c = float(err.half_width(level))
                hist_iv = (r.value - c, r.value + c)
                if c <= half_width:
                    return self._log(Response(r.value, hist_iv, level, 0.0, "history", c, self.cost,
                                              f"history meets the request: half-width {c:.6g} <= {half_width:.6g}"))
        # The allocation fixes the noise scale b (the interval's law needs exactly that b); the accountant
        # charges (S + a) / b, a the lattice rounding's share (at most 2^-10 S) of its floating-point-safe noise.
        if self.allocation == "paper":
            b = alloc.scale  # S / eps with eps = S ln(1/delta) / w (Theorem 5.3): w / ln(1/delta) for any S
        else:
            b = S / allocate_with_history(hist, q, half_width, delta, S, rtol=1e-6, factor=self._factor, method=self.method).cost
        added, _ = _lattice_calibration(S, 1, scale=b)
        eps = (S + added) / b
        B_new = self._B + _cell_loss(q[None, :], S, added, b)
        seq_cost = self.accountant.cost("laplace", sensitivity=S, scale=b)
        why = None
        if B_new.max() > self.budget * (1 + _SLACK):
            j = int(np.argmax(B_new))
            why = (f"refused: the request needs epsilon {eps:.6g} (half-width {half_width:.6g} at {level:.6g}); the per-cell "
                   f"cost of cell {j} would reach {B_new.max():.6g} > budget {self.budget:.6g}; nothing was spent")
        elif seq_cost > self.accountant.remaining * (1 + _SLACK):
            why = (f"refused: the request needs epsilon {eps:.6g}, but the accountant has {self.accountant.remaining:.6g} left; "
                   "nothing was spent")
        if why is not None:
            return self._log(Response(None, None, 0.0, 0.0, "refused", None, self.cost, why, hist_iv))
        try:
            y_q = float(self.accountant.laplace(self._next_key(), np.array([q @ self._x]), S, scale=b, target="query")[0])
        except PrivacyBudgetExceeded as e:  # the accountant's own check (float slack): nothing was spent
            return self._log(Response(None, None, 0.0, 0.0, "refused", None, self.cost, f"refused: {e}", hist_iv))
        eps = float(self.accountant.ledger[-1].epsilon)
        self._append_release(q[None, :], np.array([y_q]), S)
        if not self.combine:
            return self._log(Response(y_q, (y_q - half_width, y_q + half_width), level, eps, "fresh", float(half_width),
                                      self.cost, f"fresh answer alone, epsilon {eps:.6g}"))
        law = combined_error(err, var, hist, b, method=self.method)
        value = float(law.weights[:-1] @ hist.y) + float(law.weights[-1]) * y_q if err is not None else y_q
        c = float(law.half_width(level))
        return self._log(Response(value, (value - c, value + c), level, eps, "fresh", c, self.cost,
                                  f"fresh answer (epsilon {eps:.6g}) combined with the history by the BLUE"))

    def _log(self, r: Response) -> Response:
        self.responses.append(r)
        return r
