"""A fit's peak working set, counted from what its method allocates, and checked before it allocates.

The model-size limit (:mod:`pgmjax.graph.size_limit`) bounds a run's peak, so a fit is counted by every
copy of the junction tree's tables it holds at once, in its dtype, not by one float64 copy. The copies
below are read off the estimators' states and their step (the model's tables are ``T`` cells; the measured
cliques' tables, the space mirror descent and L-BFGS keep their parameters in, are ``P`` cells):

* every method runs its steps in a compiled chunk that takes a state and returns a new one, whose buffers
  are not donated: the state's tables are held **twice** (:data:`CHUNK_STATES`);
* one oracle call (:func:`pgmjax.graph.oracle.marginals`) holds **4** more: the potentials it is given
  (``Problem.expand(base, params)``), the beliefs, their exponentials (kept for the downward pass's
  conditional tables) and the marginals (:data:`ORACLE_COPIES`);
* the state (:data:`STATE_COPIES`): mirror descent keeps ``theta`` and ``base`` (2); dual averaging
  ``theta, theta0, w, v, gbar, best_theta`` (6) and forms ``u`` and the gradient ``g`` in its step (+2);
  L-BFGS keeps ``theta0`` and ``best_theta`` (2) and differentiates through the oracle (the cotangents of
  the marginals, the beliefs and the potentials: +3);
* in the parameters' space (:data:`PARAM_COPIES`, of ``P``): mirror descent's ``params, best, velocity,
  pred, pred_grad`` twice (chunk) and the trial's parameters and gradient (12); L-BFGS's ``delta,
  best_delta`` and optax's ``memory_size`` (20) curvature pairs, twice, and its line search's trial and
  gradient (2 (2 + 2 x 20) + 4 = 88); dual averaging keeps none. With a callable loss (DualQuery) the
  parameters are the marginals themselves: ``P = T``;
* :func:`pgmjax.estimation.losses.gathered_cells`: a group of measurements with query matrices gathers its host
  tables by index before summing them down (``count`` copies of the host clique).

So mirror descent holds ``2 x 2 + 4 = 8`` copies of ``T``, dual averaging ``2 x 6 + 4 + 2 = 18`` and
L-BFGS ``2 x 2 + 4 + 3 = 11``; ``bench/memory_peak.py`` measures them (``bench/results/memory/``).

Example:
    >>> import numpy as np, pgmjax as pj
    >>> dom = pj.Domain({"a": 100, "b": 100, "c": 100})
    >>> fit_peak_bytes(dom, [("a", "b", "c")], "mirror_descent", np.float32)  # 4 bytes x (8 + 12) x 1e6 cells
    80000000
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..data.domain import Clique, Domain
from ..graph import size_limit
from ..graph.junction import junction_tree, maximal_cliques
from ..graph.marginal_oracle import APPROXIMATE
from ..graph.routed_steps import WINDOW_COSTS
from .inputs import resolve_method
from .losses import gathered_cells

__all__ = ["CHUNK_STATES", "ORACLE_COPIES", "STATE_COPIES", "PARAM_COPIES", "model_copies", "fit_peak_bytes",
           "check_fit", "capped_fit_bytes", "check_capped_fit", "host_cells"]

#: The compiled chunk's input and output states are live at once (no buffer donation).
CHUNK_STATES = 2
#: One oracle call: the potentials, the beliefs, their exponentials, the marginals.
ORACLE_COPIES = 4
#: ``(kept in the state, formed in the step)`` copies of the model's tables, per method (module docstring).
STATE_COPIES = {"mirror_descent": (2, 0), "dual_averaging": (6, 2), "lbfgs": (2, 3)}
#: Copies of the parameters' space (the measured cliques' tables), per method (module docstring).
PARAM_COPIES = {"mirror_descent": 12, "dual_averaging": 0, "lbfgs": 88}

#: The measurement cells a size-class fit gathers at least, on any platform: its vector of routing pairs is at
#: least twice the class's cell vector (:func:`pgmjax.estimation.routed_losses.stack_routed`), whose length is at
#: least the platform's smallest (``WINDOW_COSTS[...].smallest_cells``).
ROUTED_FLOOR_CELLS = 2 * max(costs.smallest_cells for costs in WINDOW_COSTS.values())


def model_copies(method: str) -> int:
    """The copies of the junction tree's tables ``method``'s fit holds at its peak (module docstring).

    Example:
        >>> [model_copies(m) for m in ("mirror_descent", "dual_averaging", "lbfgs")]
        [8, 18, 11]
    """
    kept, formed = STATE_COPIES[_method(method)]
    return CHUNK_STATES * kept + ORACLE_COPIES + formed


def fit_peak_bytes(domain: Domain, cliques: Iterable[Clique], method: str = "mirror_descent", dtype=np.float32, *,
                   param_cells: int | None = None, gathered: int = 0, callable_loss: bool = False, batch: int = 1) -> int:
    """The peak working set of a fit of a model over ``cliques``, in bytes (a Python int, exact on any domain).

    Args:
        domain: the domain.
        cliques: the cliques the model must hold (the junction tree over them is counted).
        method: ``"mirror_descent"``, ``"dual_averaging"`` or ``"lbfgs"`` (an estimator instance's name).
        dtype: the fit's dtype (float32 or float64).
        param_cells: the measured cliques' cells (default: those of ``cliques``).
        gathered: the cells the loss gathers at once (:func:`pgmjax.estimation.losses.gathered_cells`).
        callable_loss: the loss is a callable reading the marginals (its parameters are the model's size).
        batch: the members fitted at once (:func:`pgmjax.estimate_batch`: every table has a batch axis).

    Returns:
        ``batch x itemsize x (model_copies x T + PARAM_COPIES x P + gathered)``.
    """
    cliques = [tuple(c) for c in cliques]
    tree = junction_tree(domain, maximal_cliques(domain, cliques))
    cells = sum(size_limit.clique_cells(domain, c) for c in tree.cliques)
    if callable_loss:
        param_cells = cells
    elif param_cells is None:
        param_cells = sum(size_limit.clique_cells(domain, c) for c in cliques)
    itemsize = np.dtype(dtype or np.float32).itemsize
    per_member = model_copies(method) * cells + PARAM_COPIES[_method(method)] * int(param_cells) + int(gathered)
    return int(batch) * itemsize * per_member


def check_fit(domain: Domain, cliques: Iterable[Clique], method: str = "mirror_descent", dtype=np.float32,
              where: str | None = None, max_bytes: float | None = None, *, param_cells: int | None = None,
              gathered: int = 0, callable_loss: bool = False, what: str = "", batch: int = 1) -> int:
    """Raise :class:`~pgmjax.graph.size_limit.ModelTooLarge` when :func:`fit_peak_bytes` breaks the limit.

    Called by :func:`pgmjax.estimate` before it allocates the potentials, and by the mechanisms before they
    spend any budget (with an upper bound of what they will measure), naming the method, the copies, the
    dtype and the largest clique.

    Args:
        domain, cliques, method, dtype, param_cells, gathered, callable_loss, batch: as :func:`fit_peak_bytes`.
        where: who asks, for the message.
        max_bytes: an explicit limit (default :func:`pgmjax.graph.size_limit.max_model_bytes`).
        what: what the fit is for, for the message (e.g. ``" of the workload's model"``).

    Returns:
        The peak in bytes.

    Raises:
        ModelTooLarge: (a ValueError) naming the peak, its copies, the limit and the largest clique.

    Example:
        >>> import pgmjax as pj
        >>> check_fit(pj.Domain({"a": 1000, "b": 1000}), [("a", "b")], where="demo", max_bytes=2**20)
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: demo: the mirror_descent fit's peak working set: 76.29 MB (8 float32 copies of the junction tree's 1,000,000 cells, 12 of the parameters' 1,000,000 (the measured cliques), 0 gathered; its largest clique ('a', 'b') has 1,000,000 cells), above the limit of 1 MB (max_bytes); ...
    """
    cliques = [tuple(c) for c in cliques]
    method = _method(method)
    tree = junction_tree(domain, maximal_cliques(domain, cliques))
    sizes = [(size_limit.clique_cells(domain, c), tuple(c)) for c in tree.cliques]
    cells = sum(n for n, _ in sizes)
    big_cells, big = max(sizes, key=lambda s: s[0]) if sizes else (0, None)
    if callable_loss:
        param_cells = cells
    elif param_cells is None:
        param_cells = sum(size_limit.clique_cells(domain, c) for c in cliques)
    dt = np.dtype(dtype or np.float32)
    nbytes = fit_peak_bytes(domain, cliques, method, dt, param_cells=param_cells, gathered=gathered, batch=batch)
    detail = (f"{f'{batch} members x ' if batch > 1 else ''}{model_copies(method)} {dt.name} copies of the junction tree's {_cells(cells)} cells, "
              f"{PARAM_COPIES[method]} of the parameters' {_cells(param_cells)} "
              f"({'the marginals: a callable loss' if callable_loss else 'the measured cliques'}), {_cells(gathered)} gathered; its largest clique {big} has {_cells(big_cells)} cells")
    return size_limit.check_peak(nbytes, where, f"the {method} fit{what}'s peak working set", detail, max_bytes,
                                 cells=cells, clique=big, clique_cells=big_cells)


def check_problem(problem, domain: Domain, cliques, measurements, method: str, dtype, where: str) -> None:
    """:func:`check_fit` of a built :class:`~pgmjax.estimation.problem.Problem`, before its potentials exist: its
    measured cells and the cells its stacked measurements gather. The approximate oracle's region graph is bounded
    by its own plan (:mod:`pgmjax.graph.approximate_oracle`), so its problem is not checked here."""
    if problem.oracle is APPROXIMATE:
        return
    custom = callable(problem.loss)
    check_fit(domain, cliques, method, dtype, where, callable_loss=custom,
              param_cells=sum(domain.size(m.clique) for m in measurements),
              gathered=0 if custom else gathered_cells(problem.meas))


def capped_fit_bytes(max_model_mb: float, method="mirror_descent", dtype=None) -> int:
    """The peak working set of a fit of a model at a model-size cap: the limit a cap stands for.

    A cap of ``max_model_mb`` (``8 * cells / 2^20``: one float64 copy of the junction tree's tables, AIM's,
    MWEM's and MST's ``max_model_mb``, ``pgmjax run --max-model-mb``) admits models of up to
    ``cap = max_model_mb * 2^20 / 8`` cells; their fit holds :func:`model_copies` of them in its dtype and
    parameters of about as many (the measured cliques, counted as ``cap``), and a size-class fit gathers its
    measurements' cells from vectors of at least the smallest class (:data:`ROUTED_FLOOR_CELLS`), whatever the
    model's size: a cap that admits a model admits that floor too.

    Example:
        >>> capped_fit_bytes(1.0)  # mirror descent, float32: 4 bytes x ((8 + 12) copies x 131,072 cells + 131,072)
        11010048
    """
    method = _method(method)
    copies = model_copies(method) + PARAM_COPIES[method]
    cells = copies * float(max_model_mb) * 2**20 / 8 + ROUTED_FLOOR_CELLS
    return max(1, math.ceil(np.dtype(dtype or np.float32).itemsize * cells))


def check_capped_fit(max_model_mb: float | None, method="mirror_descent", dtype=None, where: str | None = None,
                     max_bytes: float | None = None) -> int | None:
    """Refuse, before a mechanism spends any budget, a model-size cap whose largest fit breaks the limit.

    AIM and MWEM choose their models round by round under ``max_model_mb``, so no model they may fit is known up
    front, but its fit is bounded by :func:`capped_fit_bytes`. Without this check a cap above what the machine
    holds is found by the fit of a late round, after most of the budget is spent.

    Args:
        max_model_mb: the mechanism's cap in MB (None: no cap, nothing to check; each fit is still checked).
        method, dtype: the fit's (:func:`fit_peak_bytes`).
        where: who asks, for the message.
        max_bytes: an explicit limit (default :func:`pgmjax.graph.size_limit.max_model_bytes`).

    Returns:
        The peak in bytes, or None without a cap.

    Raises:
        ModelTooLarge: naming the cap, the copies and the limit.

    Example:
        >>> check_capped_fit(80.0, where="aim")  # the published cap: (8 + 12) float32 copies of 10.5M cells, and more
        839385088
        >>> check_capped_fit(80.0, where="aim", max_bytes=2**28)
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: aim: the peak working set of a mirror_descent fit at max_model_mb=80: 800.5 MB (8 float32 copies ...
    """
    if max_model_mb is None:
        return None
    method = _method(method)
    cap = int(float(max_model_mb) * 2**20 / 8)
    dt = np.dtype(dtype or np.float32)
    detail = (f"{model_copies(method)} {dt.name} copies of the cap's {_cells(cap)} cells, "
              f"{PARAM_COPIES[method]} of as many parameters and a size class's smallest {_cells(ROUTED_FLOOR_CELLS)} "
              "gathered")
    hint = "; lower max_model_mb (--max-model-mb), or raise the limit"
    return size_limit.check_peak(capped_fit_bytes(max_model_mb, method, dt), where,
                                 f"the peak working set of a {method} fit at max_model_mb={max_model_mb:g}",
                                 detail, max_bytes, cells=cap, hint=hint)


def host_cells(domain: Domain, cliques: Iterable[Clique], measured: Iterable[Clique]) -> int:
    """The cells of the model clique hosting each of ``measured`` (the smallest that holds it), summed: an upper
    bound of :func:`pgmjax.estimation.losses.gathered_cells` for one measurement with a query matrix per clique, for
    a mechanism that counts its fit before it has measured.

    Example:
        >>> import pgmjax as pj
        >>> host_cells(pj.Domain({"a": 2, "b": 3, "c": 4}), [("a", "b", "c")], [("a", "b"), ("b", "c")])
        48
    """
    tree = junction_tree(domain, maximal_cliques(domain, [tuple(c) for c in cliques]))
    sizes = sorted((size_limit.clique_cells(domain, c), set(c)) for c in tree.cliques)
    return sum(next((n for n, host in sizes if set(m) <= host), 0) for m in measured)


def _method(method) -> str:
    name = method if isinstance(method, str) else resolve_method(method)[1]
    if name not in STATE_COPIES:  # a user's own estimator: counted as the costliest built-in
        return "dual_averaging"
    return name


def _cells(n: int) -> str:
    return f"{n:,}" if n < 10**15 else f"{float(n):.4g}" if n < 10**300 else f"about 10^{len(str(n)) - 1}"
