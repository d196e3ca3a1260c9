"""MWEM and MWEM+PGM: the multiplicative-weights exponential mechanism, with and without the engine.

Hardt, Ligett & McSherry, "A simple and practical algorithm for differentially private data release",
NIPS 2012 (arXiv 1012.4763), Algorithm 1; the "+PGM" arm replaces the multiplicative-weights (MW)
update by graphical-model estimation (McKenna, Sheldon & Miklau, ICML 2019, arXiv 1901.09136,
Section 6).

Each round selects something badly answered by the current estimate with the exponential mechanism
(EM), measures it with Laplace or Gaussian noise and re-estimates. Two selection modes:

* ``selection="marginal"`` (recommended; private-pgm ``mechanisms/mwem+pgm.py``): the
  candidates are the workload's cliques whose addition keeps the model under a size cap that grows
  linearly over the rounds, the quality is ``||mu_C(D) - mu_hat_C||_1 - n_C`` and the whole marginal
  is measured (its cells are disjoint, so one noise scale covers them all).
* ``selection="query"`` (the ICML 2019 experiment; private-pgm ``examples/mwem.py``): the
  candidates are every row of every workload query (every cell for plain marginals, every prefix
  range for the benchmark workload), the quality is ``|w^T mu_C(D) - w^T mu_hat_C|`` and one row is
  measured per round.

Two arms on the same noisy measurements:

* **+PGM** (``result.model``): after every round :func:`pgmjax.estimate` refits the graphical model
  to all measurements so far, warm-started from the previous round's model; ``total = N`` when
  ``bounded`` (``N`` public), else estimated from the measurements.
* **original** (``result.original``): the MW update on a factored full table (one table per connected
  component of the measured cliques' co-occurrence graph, private-pgm's ``_cluster``), held by a
  :class:`~pgmjax.mechanisms.estimates.FactoredTable`. After round ``t``'s measurement it runs
  ``mw_iters`` passes over measurements ``1..t``; a pass accumulates ``sum_i Q_i^T (y_i - Q_i A)``
  and multiplies the table by ``exp(update / (2 N))`` once (the paper's update, batched as in the
  reference code), warm-started from round ``t - 1``'s table.

Which arm drives the selection: MWEM is adaptive (round ``t``'s EM scores candidates against the
current estimate), so only one estimator can be in the loop if both arms are to share every
measurement. Here the **+PGM arm drives the selection**, as in the ICML 2019 comparison of
estimators on one measurement transcript; the MW arm then replays that transcript (same selections,
same noisy answers). The MW arm is therefore "MW estimation on MWEM+PGM's measurements", not a
separate MWEM run whose own estimate chooses the queries. Before allocating anything the MW arm
computes the size of its tables; above ``max_table_cells`` (default 2^28 cells, 2 GiB of float64) it
does not run: ``result.original`` is None and ``result.original_error`` names the component, its
cells and memory. On Adult-sized data with many measured cliques this is the expected outcome: MWEM
is infeasible without the engine.

Budget (Hardt, Ligett & McSherry 2012; McKenna et al., ICML 2019), ``T`` rounds, measurement share ``alpha``:

* Laplace (pure ``eps``-DP): ``eps_r = eps / T``; measurement scale ``b = Delta1 / (alpha eps_r)``;
  EM ``eps_EM = (1 - alpha) eps_r``.
* Gaussian (``rho = cdp_rho(eps, delta)`` zCDP): ``rho_r = rho / T``;
  ``sigma = Delta2 sqrt(1 / (2 alpha rho_r))``; EM ``eps_EM = sqrt(8 (1 - alpha) rho_r)``.

The last measurement spends exactly what is left, so the ledger sums to the budget.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence

import jax
import numpy as np

from .. import queries as Q
from ..api import estimate
from ..dataset import Dataset
from ..domain import Clique, CliqueLike, Domain
from ..junction import junction_tree, maximal_cliques
from ..measurement import Measurement, estimate_total
from ..privacy import REST, Accountant, cdp_rho, check_bool as _bool, check_positive as _positive, check_real as _real
from ..privacy import check_count as _int
from ..privacy import check_key as _check_key
from ..programs import MAX_LIVE_PROGRAMS, release_compiled
from ..workload import Workload
from .estimates import FactoredTable
from .options import check_epsilon, engine_options
from .result import MechanismResult

__all__ = [
    "mwem",
    "mwem_budget",
    "mw_update",
    "hypothetical_model_size",
    "DEFAULT_MAX_TABLE_CELLS",
]

#: The original arm's memory guard: 2^28 float64 cells = 2 GiB of tables.
DEFAULT_MAX_TABLE_CELLS = 2**28

_NOISES = ("laplace", "gaussian")
_SELECTIONS = ("marginal", "query")
_RESERVED_OPTIONS = ("iters", "total", "warm_start", "measurements", "domain")


# ---------------------------------------------------------------------------------------------------
# Budget and model size
# ---------------------------------------------------------------------------------------------------


def mwem_budget(
    epsilon: float,
    rounds: int,
    *,
    delta: float | None = None,
    noise: str = "laplace",
    bounded: bool = False,
    alpha: float = 0.9,
    sensitivity: float | None = None,
) -> dict:
    """Per-round budget of MWEM (Hardt, Ligett & McSherry 2012; McKenna et al., ICML 2019): measurement noise and EM epsilon.

    Laplace: ``eps_r = eps/T``, ``b = Delta1 / (alpha eps_r)``, ``eps_EM = (1 - alpha) eps_r``.
    Gaussian: ``rho_r = cdp_rho(eps, delta) / T``, ``sigma = Delta2 sqrt(1 / (2 alpha rho_r))``,
    ``eps_EM = sqrt(8 (1 - alpha) rho_r)``, so a round costs ``alpha rho_r + (1 - alpha) rho_r = rho_r``.

    Args:
        epsilon: the whole run's epsilon.
        rounds: ``T``.
        delta: needed for Gaussian noise.
        noise: ``"laplace"`` or ``"gaussian"``.
        bounded: replace-one neighbours (sensitivities doubled / times sqrt 2) instead of add/remove.
        alpha: the share of each round's budget spent on the measurement.
        sensitivity: the measurement's sensitivity (L1 for Laplace, L2 for Gaussian); default that of
            one marginal under the convention (1 or 2, resp. 1 or sqrt 2).

    Returns:
        A dict: ``noise``, ``rounds``, ``scale`` (``b`` or ``sigma``), ``stddev`` (of one noisy value),
        ``em_epsilon``, and the per-round budgets (``round_epsilon``, ``measure_epsilon`` for Laplace;
        ``rho``, ``round_rho``, ``measure_rho``, ``em_rho`` for Gaussian).

    Example:
        >>> b = mwem_budget(1.0, 14, noise="gaussian", delta=1e-9)      # Adult, T = d = 14
        >>> round(b["scale"], 2), round(b["em_epsilon"], 5)
        (22.79, 0.02925)
    """
    where = "mwem_budget"
    epsilon = _positive(epsilon, "epsilon", where)
    rounds = _int(rounds, "rounds", where, 1)
    noise = _choice(noise, "noise", _NOISES, where)
    alpha = _alpha(alpha, where)
    bounded = _bool(bounded, "bounded", where)
    if noise == "laplace":
        d1 = (2.0 if bounded else 1.0) if sensitivity is None else _positive(sensitivity, "sensitivity", where)
        eps_r = epsilon / rounds
        b = d1 / (alpha * eps_r)
        return {
            "noise": noise,
            "rounds": rounds,
            "round_epsilon": eps_r,
            "measure_epsilon": alpha * eps_r,
            "em_epsilon": (1.0 - alpha) * eps_r,
            "scale": b,
            "stddev": math.sqrt(2.0) * b,
        }
    if delta is None:
        raise ValueError(f"{where}: Gaussian noise gives (epsilon, delta)-DP; pass delta= (e.g. 1e-9)")
    delta = _real(delta, "delta", where)
    if not 0 < delta < 1:
        raise ValueError(f"{where}: delta must be in (0, 1), got {delta!r}")
    d2 = (math.sqrt(2.0) if bounded else 1.0) if sensitivity is None else _positive(sensitivity, "sensitivity", where)
    rho = cdp_rho(epsilon, delta)
    rho_r = rho / rounds
    sigma = d2 * math.sqrt(1.0 / (2.0 * alpha * rho_r))
    return {
        "noise": noise,
        "rounds": rounds,
        "rho": rho,
        "round_rho": rho_r,
        "measure_rho": alpha * rho_r,
        "em_rho": (1.0 - alpha) * rho_r,
        "em_epsilon": math.sqrt(8.0 * (1.0 - alpha) * rho_r),
        "scale": sigma,
        "stddev": sigma,
    }


def hypothetical_model_size(domain: Domain, cliques: Sequence[CliqueLike]) -> float:
    """Size in MB (``8 * cells / 2^20``) of the graphical model over ``cliques``, before building it.

    The junction tree is the one :func:`pgmjax.estimate` builds for these cliques (the same
    triangulation), so the number is the fitted model's size exactly. Adding a clique can enlarge
    the model super-additively through fill-in.

    Example:
        >>> dom = Domain({"a": 10, "b": 10, "c": 10})
        >>> round(hypothetical_model_size(dom, [("a", "b"), ("b", "c")]) * 2**20 / 8)
        200
    """
    tree = junction_tree(domain, maximal_cliques(domain, cliques))
    return 8.0 * sum(domain.size(c) for c in tree.cliques) / 2**20


def _model_mb(model) -> float:
    return 8.0 * sum(model.domain.size(c) for c in model.cliques) / 2**20


# ---------------------------------------------------------------------------------------------------
# The original arm: multiplicative weights on a factored table
# ---------------------------------------------------------------------------------------------------


def _project(table: np.ndarray, attrs: Clique, clique: Clique) -> np.ndarray:
    """Sum a table over ``attrs`` down to ``clique`` (axes in the clique's order)."""
    summed = table.sum(axis=tuple(i for i, a in enumerate(attrs) if a not in clique))
    kept = [a for a in attrs if a in clique]
    return np.transpose(summed, [kept.index(a) for a in clique])


def _broadcast(table: np.ndarray, clique: Clique, attrs: Clique) -> np.ndarray:
    """A table over ``clique`` laid out to broadcast against a table over ``attrs`` (a superset)."""
    kept = [a for a in attrs if a in clique]
    t = np.transpose(table, [clique.index(a) for a in kept])
    return t.reshape([t.shape[kept.index(a)] if a in clique else 1 for a in attrs])


def _adjoint(m: Measurement, r: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``Q^T r`` as a table over the measurement's clique."""
    if m.kind == "identity":
        return r.reshape(shape)
    if m.kind == "dense":
        return (m.query.T @ r).reshape(shape)
    rows = tuple(q.shape[0] for q in m.query)
    return Q.kron_apply(r.reshape(rows), [q.T for q in m.query])


def mw_update(table: np.ndarray, attrs: Sequence[str], measurements: Sequence[Measurement], total: float) -> np.ndarray:
    """One multiplicative-weights pass over measurements (Hardt, Ligett & McSherry 2012, Algorithm 1, step 3).

    With ``A = total * p``: ``p'(x) ∝ p(x) exp( sum_i (Q_i^T (y_i - Q_i A_{C_i}))(x_{C_i}) / (2 total) )``.
    For one counting query ``q`` this is the paper's ``A_t(x) ∝ A_{t-1}(x) exp(q(x)(m - q(A_{t-1}))/(2N))``;
    several measurements are batched into one update, as in private-pgm's factored baseline
    (``examples/mwem.py``). ``q(A')`` moves toward ``m`` and never past it (the step on a 0/1 query is
    at most ``(m - q(A))/8``).

    Args:
        table: a probability table over ``attrs`` (non-negative, sums to one).
        attrs: the table's attributes (axes in this order).
        measurements: measurements whose cliques lie inside ``attrs``.
        total: the number of records ``N`` the table stands for.

    Returns:
        The updated probability table (same shape, sums to one).

    Example:
        >>> m = Measurement(("a",), [30.0, 10.0], stddev=1.0)
        >>> p = mw_update(np.full((2, 2), 0.25), ("a", "b"), [m], 40.0)
        >>> bool(p[0].sum() > 0.5)                       # moved toward 30 / 40
        True
    """
    attrs = tuple(attrs)
    p = np.asarray(table, np.float64)
    big_a = total * p
    update = np.zeros_like(p)
    for m in measurements:
        marg = _project(big_a, attrs, m.clique)
        r = m.y - m.answer(marg)
        update += _broadcast(_adjoint(m, r, marg.shape), m.clique, attrs)
    update /= 2.0 * total
    # Shifting the exponent by its maximum cancels in the normalisation and keeps exp() finite.
    p = p * np.exp(update - update.max())
    return p / p.sum()


def _components(domain: Domain, cliques: Sequence[Clique]) -> list[Clique]:
    """Connected components of the attribute co-occurrence graph of ``cliques`` (private-pgm ``_cluster``)."""
    parent = {a: a for c in cliques for a in c}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for c in cliques:
        for a in c[1:]:
            ra, rb = find(c[0]), find(a)
            if ra != rb:
                parent[rb] = ra
    groups: dict[str, set] = {}
    for a in parent:
        groups.setdefault(find(a), set()).add(a)
    comps = [domain.canonical(g) for g in groups.values()]
    return sorted(comps, key=lambda c: domain.index(c[0]))


def _mib(cells: int) -> str:
    b = 8 * cells
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b} B"


def _mw_guard(domain: Domain, cliques: Sequence[Clique], max_table_cells: int) -> tuple[list, str | None]:
    """The factored table's components and cells; an error message if it exceeds the cap (nothing allocated)."""
    comps = [(c, domain.size(c)) for c in _components(domain, cliques)]
    total_cells = sum(n for _, n in comps)
    if total_cells <= max_table_cells:
        return comps, None
    big, cells = max(comps, key=lambda x: x[1])
    return comps, (
        f"MWEM infeasible without the engine: the multiplicative-weights arm needs a full table over the "
        f"component {big} of the measured cliques' co-occurrence graph: {cells:,} cells, {_mib(cells)} of float64"
        + (f" ({total_cells:,} cells, {_mib(total_cells)}, in all {len(comps)} components)" if len(comps) > 1 else "")
        + f"; the limit is max_table_cells={max_table_cells:,} ({_mib(max_table_cells)}). The table was not allocated."
    )


def _mw_replay(domain: Domain, measurements: Sequence[Measurement], totals: Sequence[float], iters: int) -> FactoredTable:
    """MW over the transcript: after measurement ``t``, ``iters`` passes over measurements ``1..t``."""
    tables: dict[Clique, np.ndarray] = {}
    for t in range(1, len(measurements) + 1):
        so_far = measurements[:t]
        new: dict[Clique, np.ndarray] = {}
        for comp in _components(domain, [m.clique for m in so_far]):
            # Warm start: components only merge, and the factored table is a product, so the
            # previous tables inside this component multiply into its starting table exactly.
            p = np.ones(domain.shape_of(comp))
            for old, tab in tables.items():
                if set(old) <= set(comp):
                    p = p * _broadcast(tab, old, comp)
            p /= p.sum()
            group = [m for m in so_far if set(m.clique) <= set(comp)]
            for _ in range(iters):
                p = mw_update(p, comp, group, totals[t - 1])
            new[comp] = p
        tables = new
    return FactoredTable(domain, tables, totals[-1])


# ---------------------------------------------------------------------------------------------------
# Input checks (all before anything is computed)
# ---------------------------------------------------------------------------------------------------


def _choice(value, name: str, options: tuple, where: str) -> str:
    if value not in options:
        raise ValueError(f"{where}: unknown {name} {value!r}; expected one of {options}")
    return value


def _alpha(alpha, where: str) -> float:
    a = _real(alpha, "alpha", where)
    if not 0 < a < 1:
        raise ValueError(f"{where}: alpha (the measurement's share of each round) must be in (0, 1), got {alpha!r}")
    return a


def _as_workload(workload, domain: Domain, where: str) -> Workload:
    if workload is None:
        if len(domain) < 2:
            raise ValueError(f"{where}: the default workload (all 2-way marginals) needs at least 2 attributes")
        return Workload.all_kway(domain, 2)
    if isinstance(workload, Workload):
        if workload.domain != domain:
            for c in set(workload.cliques):
                for a in c:
                    if a not in domain or domain[a] != workload.domain[a]:
                        raise ValueError(f"{where}: workload attribute {a!r} is missing from, or sized differently in, the data's domain")
        return workload
    if isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence):
        raise TypeError(f"{where}: workload must be a pgmjax.Workload or a list of cliques, got {type(workload).__name__}")
    return Workload.marginals(domain, workload)


def _row_sensitivity(query, domain: Domain, bounded: bool) -> float:
    """Largest sensitivity of one row ``w`` of a Kronecker workload query ``(Q_1 ⊗ ... ⊗ Q_k)``.

    Adding or removing a record changes ``w^T mu`` by one entry of ``w``: ``max |w_j|``. Replacing
    one moves it by ``w_k - w_j``: ``max(w) - min(w)`` (a single counting query has
    sensitivity 1 in both conventions). An entry of a Kronecker row is a product of one entry per
    factor row, so its extremes are among the products of the factor rows' extremes.
    """
    his, los = [], []
    for a, m in zip(query.clique, query.matrices):
        if m is None:  # identity: each row is a unit vector
            n = domain[a]
            his.append(np.ones(n))
            los.append(np.zeros(n) if n > 1 else np.ones(n))
        else:
            his.append(m.max(axis=1))
            los.append(m.min(axis=1))
    if not bounded:
        out = np.array(1.0)
        for hi, lo in zip(his, los):
            out = np.multiply.outer(out, np.maximum(np.abs(hi), np.abs(lo)))
        return float(out.max())
    best_hi = best_lo = None
    for pick in itertools.product((0, 1), repeat=len(his)):
        v = np.array(1.0)
        for s, hi, lo in zip(pick, his, los):
            v = np.multiply.outer(v, hi if s else lo)
        best_hi = v if best_hi is None else np.maximum(best_hi, v)
        best_lo = v if best_lo is None else np.minimum(best_lo, v)
    return float((best_hi - best_lo).max())


def _kron_row(query, domain: Domain, row: int) -> tuple[np.ndarray, ...]:
    """Row ``row`` (flat index over the query's rows) of a Kronecker workload query, as a Kronecker query.

    One ``(1, n_a)`` matrix per attribute: the row is their Kronecker product. Kept factored, the
    engine's Lipschitz constant and total estimate stay per-attribute computations (a dense row over
    a 20,000-cell clique would make them 20,000 x 20,000 problems).
    """
    rows = tuple(domain[a] if m is None else m.shape[0] for a, m in zip(query.clique, query.matrices))
    index = np.unravel_index(row, rows)
    return tuple((np.eye(domain[a])[r] if m is None else m[r])[None, :] for a, m, r in zip(query.clique, query.matrices, index))


# ---------------------------------------------------------------------------------------------------
# The front-end
# ---------------------------------------------------------------------------------------------------


def mwem(
    data: Dataset,
    epsilon: float,
    *,
    key,
    workload=None,
    rounds: int | None = None,
    delta: float | None = None,
    noise: str = "laplace",
    bounded: bool = False,
    alpha: float | None = None,
    selection: str = "marginal",
    max_model_mb: float | None = 25.0,
    pgm_iters: int = 1000,
    mw_iters: int = 1000,
    original: bool = True,
    max_table_cells: int = DEFAULT_MAX_TABLE_CELLS,
    synthetic: bool = True,
    estimate_options: Mapping | None = None,
) -> MechanismResult:
    """MWEM and MWEM+PGM on the same measurements (Hardt, Ligett & McSherry 2012; McKenna et al. 2019).

    Round ``i = 1..T``:

    1. candidates: workload cliques ``C`` with ``hypothetical_model_size(model + C) <= max_model_mb * i / T``
       (``selection="marginal"``), or every row of the workload queries on such cliques
       (``selection="query"``);
    2. EM with quality ``||mu_C(D) - mu_hat_C||_1 - n_C`` (sensitivity 1, 2 if bounded), resp.
       ``|w^T mu_C(D) - w^T mu_hat_C|`` (sensitivity of one row), where ``mu_hat`` is the +PGM arm's
       estimate (``N``-uniform before round 1 when ``bounded``, zero otherwise: ``N`` is private);
    3. measure the selected marginal (or row) with Laplace ``b`` / Gaussian ``sigma``
       (:func:`mwem_budget`); the measurement carries the true noise std;
    4. refit the +PGM arm, ``pgmjax.estimate(..., iters=pgm_iters, warm_start=previous)``.

    Measured cliques stay candidates, and re-measuring one never grows the model, so after round 1
    a candidate always fits (the cap only grows); that round 1 has one is checked up front. Then the
    original arm (multiplicative weights on a factored table, ``mw_iters`` passes per round) replays
    the transcript if its tables fit in ``max_table_cells`` (see the module docstring: the +PGM
    arm drives the selection).

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: the privacy budget (pure ``epsilon`` with Laplace noise; ``(epsilon, delta)`` via zCDP
            with Gaussian noise).
        key: a ``jax.random`` key; the whole run (selections, noise, synthetic data) follows from it.
        workload: a :class:`~pgmjax.Workload` or a list of cliques; default all 2-way marginals. In
            marginal mode only its cliques matter; in query mode its query matrices define the
            candidates (``Workload.marginals`` gives the 2019 script's cell-level candidates,
            ``Workload.benchmark`` the prefix ranges).
        rounds: ``T``; default the number of attributes.
        delta: required for Gaussian noise; ignored with Laplace noise (pure DP implies any delta).
        noise: ``"laplace"`` (pure DP, the paper's MWEM) or ``"gaussian"`` (zCDP, private-pgm's default).
        bounded: replace-one neighbours (``N`` public; the engine gets ``total = N``) instead of
            add/remove-one (``N`` private, estimated).
        alpha: the share of each round's budget spent on the measurement; default 0.9 for marginal
            selection and 0.5 for query selection (the 2019 script's ``eps/(2T)`` each).
        selection: ``"marginal"`` or ``"query"`` (needs ``bounded=True``: one
            counting query does not reveal the total, and the paper's MWEM takes ``N`` as public).
        max_model_mb: the final model-size cap in MB (the cap at round ``i`` is ``i/T`` of it);
            None for no cap.
        pgm_iters: engine iterations per round.
        mw_iters: multiplicative-weights passes per round (over all measurements so far).
        original: run the original (MW) arm.
        max_table_cells: the MW arm runs only if its factored table has at most this many cells in all
            (default 2^28 = 2 GiB of float64).
        synthetic: draw ``round(model.total)`` synthetic records from the +PGM model.
        estimate_options: more keyword arguments for :func:`pgmjax.estimate` (``method``, ``loss``,
            ``dtype``, ``tol``, ...; not ``iters``, ``total`` or ``warm_start``).

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (+PGM), ``synthetic``,
        ``measurements``, ``accountant`` (ledger: EM and measurement alternating, summing exactly to
        the budget), ``original`` (a :class:`~pgmjax.mechanisms.estimates.FactoredTable` or None) with
        ``original_error``, and ``info``: ``selection``, ``noise``, ``bounded``, ``rounds``, ``alpha``,
        ``budget`` (:func:`mwem_budget`), ``em_sensitivity``, ``log`` (one dict per round: round,
        clique, row, cap_mb, model_mb, candidates, excluded, noise_std), ``selected``, ``total``,
        ``mw_components`` (component, cells), ``mw_table_cells``, ``seconds``.

    Raises:
        ValueError / TypeError: bad input (epsilon <= 0, rounds < 1, unknown noise or selection,
            Gaussian noise without delta, alpha outside (0, 1), query selection without bounded, a
            size cap no candidate fits in round 1, ...), before anything is computed.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 3, "b": 4, "c": 2})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), dom)
        >>> res = mwem(data, 1.0, key=jax.random.key(0), pgm_iters=50, mw_iters=20)
        >>> res.accountant.spent == res.accountant.budget, len(res.ledger)
        (True, 6)
        >>> res.model.marginal(("a", "b")).shape, res.original.marginal(("a", "b")).shape
        ((3, 4), (3, 4))
    """
    where = "mwem"
    # ---- validation: everything before any private computation
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    if len(data) == 0:
        raise ValueError(f"{where}: the dataset has no records")
    epsilon = check_epsilon(_positive(epsilon, "epsilon", where), where)
    _check_key(key, where)
    noise = _choice(noise, "noise", _NOISES, where)
    selection = _choice(selection, "selection", _SELECTIONS, where)
    bounded = _bool(bounded, "bounded", where)
    domain = data.domain
    rounds = len(domain) if rounds is None else _int(rounds, "rounds", where, 1)
    alpha = (0.9 if selection == "marginal" else 0.5) if alpha is None else _alpha(alpha, where)
    if noise == "gaussian":
        if delta is None:
            raise ValueError(f"{where}: Gaussian noise gives (epsilon, delta)-DP; pass delta= (e.g. 1e-9), or use noise='laplace'")
        delta = _real(delta, "delta", where)
        if not 0 < delta < 1:
            raise ValueError(f"{where}: delta must be in (0, 1), got {delta!r}")
    if selection == "query" and not bounded:
        raise ValueError(
            f"{where}: selection='query' measures single counting queries, which do not determine the number of "
            "records; it needs the public total of the replace-one convention (bounded=True), as in the paper's MWEM"
        )
    if max_model_mb is not None:
        max_model_mb = _positive(max_model_mb, "max_model_mb", where)
    pgm_iters = _int(pgm_iters, "pgm_iters", where, 1)
    mw_iters = _int(mw_iters, "mw_iters", where, 1)
    original = _bool(original, "original", where)
    max_table_cells = _int(max_table_cells, "max_table_cells", where, 1)
    synthetic = _bool(synthetic, "synthetic", where)
    options = engine_options(estimate_options, _RESERVED_OPTIONS, where, hint="; use pgm_iters= and bounded= instead")
    wl = _as_workload(workload, domain, where)

    cliques: list[Clique] = list(dict.fromkeys(wl.cliques))  # distinct, first-seen order
    if max_model_mb is not None:
        first = {c: hypothetical_model_size(domain, [c]) for c in cliques}
        if min(first.values()) > max_model_mb / rounds:
            c = min(first, key=first.get)
            raise ValueError(
                f"{where}: no workload clique fits the round-1 model-size cap max_model_mb/rounds = "
                f"{max_model_mb / rounds:.4g} MB (the smallest, {c}, needs {first[c]:.4g} MB); raise max_model_mb or lower rounds"
            )

    if noise == "laplace":
        acc = Accountant(epsilon=epsilon, bounded=bounded)
    else:
        acc = Accountant(epsilon=epsilon, delta=delta, bounded=bounded)
    if selection == "marginal":
        queries = None
        em_sens = acc.l1_sensitivity()  # of ||mu_C(D) - v||_1
        meas_sens = None  # the accountant's: one marginal under the convention
    else:
        queries = list(wl.queries)
        # The EM scores every row with one sensitivity: the largest row's. The measurement uses the
        # same (a scalar's L1 and L2 sensitivities coincide), so all noise is equal as in the 2019 script.
        em_sens = max(_row_sensitivity(q, domain, bounded) for q in queries)
        if em_sens <= 0:
            raise ValueError(f"{where}: every workload query row is constant over the domain (sensitivity 0): nothing to measure")
        meas_sens = em_sens
    budget = mwem_budget(epsilon, rounds, delta=delta, noise=noise, bounded=bounded, alpha=alpha, sensitivity=meas_sens)
    if noise == "laplace":
        em_spend = {"epsilon": budget["em_epsilon"]}
        meas_spend = {"epsilon": budget["measure_epsilon"]}
    else:
        em_spend = {"rho": budget["em_rho"]}
        meas_spend = {"rho": budget["measure_rho"]}
    n_records = len(data)
    total_known = float(n_records) if bounded else None

    # ---- the +PGM arm drives the selection
    start = time.perf_counter()
    keys = jax.random.split(key, 2 * rounds + 1)
    truth = dict(zip(cliques, data.marginals(cliques)))  # EM qualities only (released through the EM)
    if queries is not None:
        true_rows = [q.apply(truth[q.clique]).reshape(-1) for q in queries]
    model = None
    measurements: list[Measurement] = []
    log: list[dict] = []
    engine_seconds = 0.0
    for i in range(1, rounds + 1):
        cap = math.inf if max_model_mb is None else max_model_mb * i / rounds
        base = list(model.cliques) if model is not None else []
        fits = {c: max_model_mb is None or hypothetical_model_size(domain, base + [c]) <= cap for c in cliques}
        if model is not None:
            est = dict(zip(cliques, model.marginals(cliques)))
        else:
            fill = total_known or 0.0
            est = {c: np.full(domain.shape_of(c), fill / domain.size(c)) for c in cliques}
        if queries is None:
            # Candidates excluded by the (data-independent) size cap get -inf: probability zero.
            q = np.array([np.abs(truth[c] - est[c]).sum() - domain.size(c) if fits[c] else -np.inf for c in cliques])
            n_candidates = int(np.isfinite(q).sum())
            pick = acc.exponential(keys[2 * i - 2], q, em_sens, **em_spend, target=f"round {i}: select a marginal")
            clique, row, query = cliques[pick], None, None
        else:
            parts = []
            for qi, wq in enumerate(queries):
                if fits[wq.clique]:
                    parts.append(np.abs(true_rows[qi] - wq.apply(est[wq.clique]).reshape(-1)))
                else:
                    parts.append(np.full(true_rows[qi].size, -np.inf))
            offsets = np.cumsum([0] + [p.size for p in parts])
            n_candidates = int(sum(p.size for p, wq in zip(parts, queries) if fits[wq.clique]))
            pick = acc.exponential(keys[2 * i - 2], np.concatenate(parts), em_sens, **em_spend, target=f"round {i}: select a query")
            qi = int(np.searchsorted(offsets, pick, side="right") - 1)
            row = int(pick - offsets[qi])
            clique = queries[qi].clique
            query = _kron_row(queries[qi], domain, row)
        spend = meas_spend if i < rounds else {next(iter(meas_spend)): REST}
        m = acc.measure(
            keys[2 * i - 1], data, clique, query=query, mechanism=noise, sensitivity=meas_sens, **spend,
            target=clique if row is None else (clique, row),
        )
        measurements.append(m)
        t0 = time.perf_counter()
        release_compiled(above=MAX_LIVE_PROGRAMS)  # a long run's dead structures: keep them bounded
        model = estimate(domain, measurements, iters=pgm_iters, total=total_known, warm_start=model, **options)
        engine_seconds += time.perf_counter() - t0
        log.append(
            {
                "round": i,
                "clique": clique,
                "row": row,
                "cap_mb": cap,
                "model_mb": _model_mb(model),
                "candidates": n_candidates,
                "excluded": [c for c in cliques if not fits[c]],
                "noise_std": float(m.row_stddev()[0]),
            }
        )
    pgm_seconds = time.perf_counter() - start
    synth = model.synthetic_data(max(1, int(round(model.total))), keys[-1]) if synthetic else None

    # ---- the original arm: MW on the same transcript, if its tables fit
    comps, guard = _mw_guard(domain, [m.clique for m in measurements], max_table_cells)
    mw_table, mw_error, mw_seconds = None, None, 0.0
    if not original:
        mw_error = "not run (original=False)"
    elif guard is not None:
        mw_error = guard
    else:
        t0 = time.perf_counter()
        if bounded:
            totals = [float(n_records)] * rounds
        else:  # the same inverse-variance estimate the engine makes from the measurements so far
            totals = [estimate_total(measurements[:t])[0] for t in range(1, rounds + 1)]
        mw_table = _mw_replay(domain, measurements, totals, mw_iters)
        mw_seconds = time.perf_counter() - t0

    info = {
        "selection": selection,
        "noise": noise,
        "bounded": bounded,
        "rounds": rounds,
        "alpha": alpha,
        "epsilon": epsilon,
        "delta": delta if noise == "gaussian" else None,
        "budget": budget,
        "em_sensitivity": em_sens,
        "max_model_mb": max_model_mb,
        "log": log,
        "selected": [e["clique"] if e["row"] is None else (e["clique"], e["row"]) for e in log],
        "total": model.total,
        "mw_components": comps,
        "mw_table_cells": sum(n for _, n in comps),
        "seconds": {"pgm": pgm_seconds, "engine": engine_seconds, "mw": mw_seconds},
    }
    return MechanismResult(
        mechanism="mwem",
        model=model,
        synthetic=synth,
        measurements=measurements,
        accountant=acc,
        original=mw_table,
        original_error=mw_error,
        info=info,
    )
