"""DualQuery and DualQuery+PGM (Gaboardi et al., ICML 2014; +PGM: McKenna, Sheldon & Miklau, ICML 2019).

DualQuery (Gaboardi, Gallego Arias, Hsu, Roth, Wu, "Dual query: practical private query release for
high dimensional data", ICML 2014) plays a zero-sum game between a *query player*, who runs
multiplicative weights over a query class ``Q~`` closed under negation, and a *data player*, who
best-responds with one record per round. Only the query player's sampling reads the data: round ``t``
draws ``s`` queries from ``w_t(j) ∝ exp(eta sum_{tau<t} (a_j - q_j(x_tau)))`` (``a_j = q_j(D) / N``),
an exponential-mechanism draw with ``eps_t = 2 eta (t - 1) / N`` (round 1 is free). The data player
answers with ``x_t = argmax_x sum_{j in S_t} q_j(x)``, solved exactly here by max-sum variable
elimination (:func:`max_sum_ve`) instead of the authors' CPLEX ILP.

Modules: the query class and best response in :mod:`~pgmjax.mechanisms.dual_query.queries`, the
transcript and its likelihood in :mod:`~pgmjax.mechanisms.dual_query.transcript`, plan, game and
front-end here.

Two arms on the same transcript:

* **original**: the ``T`` records ``x_1..x_T`` as a synthetic :class:`~pgmjax.Dataset` (its answers
  are ``(N / T) sum_t q(x_t)``: :mod:`pgmjax.model.metrics` rescales a synthetic dataset to the true total).
* **+PGM** (McKenna, Sheldon, Miklau, ICML 2019, the DualQuery experiment): the graphical model whose
  marginals minimise the negative log-likelihood of the sampled queries (McKenna, Sheldon & Miklau, ICML 2019),
  ``NLL(a) = sum_t [s logsumexp_k z_t(k) - <h_t, z_t>]``, ``z_t = eta ((t - 1) a - C_t)``, with
  ``a_j(mu) = <w_j, mu_Cj> / N`` and ``a_{not j} = 1 - a_j`` (:meth:`DualQueryTranscript.loss`).

The query class is the rows of a :class:`~pgmjax.Workload`'s factored queries (each row a counting
query on its clique, entries in ``[0, 1]``: Prefix, identity, Total, Value, Range, ... qualify) plus
their negations. Convention: the paper's (and the OCaml code's) sign, used alike in the sampler and
the likelihood.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...estimation.options import FitOptions
from ...data.dataset import Dataset
from ...estimation import estimate as api
from ...estimation.inputs import resolve_method
from ...estimation.memory import check_fit
from ...privacy import (
    Accountant,
    advanced_composition,
    advanced_composition_hetero,
    dualquery_epsilon,
    dualquery_rounds,
)
from ...checks import check_key as _check_key
from ...privacy import (
    check_positive as _positive,
)
from ...programs import MAX_LIVE_PROGRAMS, release_compiled
from ...queries.workload import Workload
from ..options import (DEFAULT_DELTA, check_attribute_matrices, check_domain_size, check_epsilon, check_fit_options,
                       check_cliques_within_cap, check_model_cap, check_positive_delta, check_workload)
from ..result import BudgetStep, MechanismResult, record_plan
from ..own_options import takes_own_options
from ..run_info import reports
from ..steps import Timer, synthesize
from .dualquery_options import BOUNDS as _BOUNDS
from .dualquery_options import DualQueryInfo, DualQueryOptions
from .queries import QueryBlocks, kron_np, max_sum_ve  # noqa: F401  (kron_np: used by the tests through this module)
from .transcript import DualQueryTranscript, TranscriptLoss

__all__ = ["dualquery", "dualquery_plan", "DualQueryTranscript", "TranscriptLoss", "max_sum_ve", "simulate"]

_WHERE = "dualquery"


# ---------------------------------------------------------------------------------------------------
# Parameters and privacy
# ---------------------------------------------------------------------------------------------------


def _ledger_total(T: int, eta: float, samples: int, records: float, delta: float, bound: str) -> float:
    """What an advanced-composition Accountant reports after rounds ``2..T`` of ``samples`` draws.

    The same arithmetic as :class:`~pgmjax.privacy.Accountant` (the smaller of basic and advanced
    composition; per-draw ``eps_t = 2 eta (t - 1) / N``), so the calibrated spend is the ledger's.
    """
    eps = [2 * eta * (t - 1) / records for t in range(2, T + 1)]
    basic = math.fsum(samples * e for e in eps)
    try:
        if bound == "b2":
            adv = advanced_composition(max(eps), samples * (T - 1), delta)
        else:
            adv = advanced_composition_hetero(eps, delta, counts=[samples] * (T - 1))
    except OverflowError:  # e^eps_t past the largest double: the advanced bound is infinite, basic applies
        adv = math.inf
    return min(basic, adv)


def dualquery_plan(
    epsilon: float,
    delta: float,
    *,
    records: int,
    eta: float = 2.0,
    samples: int = 50,
    rounds: int | None = None,
    bound: str = "b2",
) -> dict:
    """DualQuery's rounds and learning rate for an ``(epsilon, delta)`` budget (Gaboardi et al., ICML 2014).

    ``rounds=None`` takes the largest ``T`` with ``eps(T) <= epsilon`` at the given ``eta``
    (:func:`~pgmjax.privacy.dualquery_rounds`; Adult ``N = 48842, eta = 2, s = 50, delta = 1e-3,
    epsilon = 1``: ``T = 58`` with ``b2``, ``T = 83`` heterogeneous). Because ``T`` is an integer,
    ``eps(T) < epsilon`` in general; the run then raises the learning rate to ``eta_used >= eta``, the
    largest at which the ``T`` rounds cost ``epsilon`` (to float precision) under the chosen bound, so
    the whole budget is spent, as every pgmjax front-end does.

    Args:
        epsilon, delta: the budget.
        records: ``N`` (public).
        eta: learning rate (the smallest the run may use).
        samples: ``s``, queries drawn per round.
        rounds: ``T``; None solves for it.
        bound: ``"b2"`` (the authors' ``epsilon_delta_b2``; default) or ``"heterogeneous"``.

    Returns:
        ``{"rounds": T, "eta": eta, "eta_used": ..., "epsilon_at_eta": eps(T) at eta, "epsilon": the
        spend at eta_used}``.

    Example:
        >>> p = dualquery_plan(1.0, 1e-3, records=48842)
        >>> p["rounds"], round(p["epsilon_at_eta"], 5), p["eta_used"] > 2.0
        (58, 0.98854, True)
    """
    where = "dualquery_plan"
    if bound not in _BOUNDS:
        raise ValueError(f"{where}: bound must be 'b2' or 'heterogeneous', got {bound!r}")
    # dualquery_epsilon validates epsilon-free arguments (eta, samples, records, delta) with clear errors.
    dualquery_epsilon(1, eta=eta, samples=samples, records=records, delta=delta, form=bound)
    epsilon = _positive(epsilon, "epsilon", where)
    eta, records = float(eta), float(records)
    if rounds is None:
        T = dualquery_rounds(epsilon, eta=eta, samples=samples, records=records, delta=delta, form=bound)
        if T < 2:
            cost2 = dualquery_epsilon(2, eta=eta, samples=samples, records=records, delta=delta, form=bound)
            raise ValueError(
                f"{where}: even 2 rounds cost epsilon {cost2:.4g} > {epsilon:g} at eta={eta:g}, samples={samples}, "
                f"N={records:g} (round 1 reads no data); lower eta or samples"
            )
    else:
        if isinstance(rounds, (bool, np.bool_)) or not isinstance(rounds, (int, np.integer)) or rounds < 2:
            raise ValueError(f"{where}: rounds must be an integer >= 2 (round 1 reads no data), got {rounds!r}")
        T = int(rounds)
    at_eta = _ledger_total(T, eta, samples, records, delta, bound)
    if at_eta > epsilon:
        raise ValueError(
            f"{where}: rounds={T} at eta={eta:g}, samples={samples} cost epsilon {at_eta:.6g} > {epsilon:g} "
            f"({bound} bound, delta={delta:g}, N={records:g}); lower rounds, eta or samples"
        )
    # Largest eta with cost <= epsilon: the cost increases with eta; bisect to adjacent floats.
    lo, hi = eta, 2 * eta
    while _ledger_total(T, hi, samples, records, delta, bound) <= epsilon:
        lo, hi = hi, 2 * hi
    while True:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if _ledger_total(T, mid, samples, records, delta, bound) <= epsilon else (lo, mid)
    return {
        "rounds": T,
        "eta": eta,
        "eta_used": lo,
        "epsilon_at_eta": at_eta,
        "epsilon": _ledger_total(T, lo, samples, records, delta, bound),
    }


# ---------------------------------------------------------------------------------------------------
# The game
# ---------------------------------------------------------------------------------------------------


def _play(queries: QueryBlocks, answers: np.ndarray, *, eta: float, samples: int, rounds: int, key, draw):
    """Run the game for ``rounds`` rounds; ``draw(key, t, qualities)`` returns ``samples`` indices.

    ``qualities`` are the cumulative payoffs ``u_t = (t - 1) a - C_t`` of the rows followed by their
    negations (``-u_t``): the sampler draws from ``softmax(eta * qualities)``.
    """
    R = queries.rows
    C = np.zeros(R)
    draws, records, values = [], [], []
    # split(key, n)[:rounds] == split(key, rounds) (threefry counters): splitting into a power-of-two
    # bucket and indexing on the host compiles one program per bucket, not one per number of rounds.
    bucket = max(16, 1 << max(rounds - 1, 0).bit_length())
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    keys = np.asarray(jax.random.key_data(jax.random.split(key, bucket)) if typed else jax.random.split(key, bucket))
    for t in range(1, rounds + 1):
        k_t = jax.random.wrap_key_data(keys[t - 1], impl=jax.random.key_impl(key)) if typed else jnp.asarray(keys[t - 1])
        k_draw, k_tie = jax.random.split(k_t)
        u = (t - 1) * answers - C
        idx = np.asarray(draw(k_draw, t, np.concatenate([u, -u])), np.int64).reshape(samples)
        hist = np.bincount(idx, minlength=2 * R).astype(np.float64)
        uniforms = np.asarray(jax.random.uniform(k_tie, (len(queries.domain),), dtype=jnp.float32), np.float64)
        x, value = queries.best_response(hist, np.minimum(uniforms, np.nextafter(1.0, 0.0)))
        C += queries.satisfied(x[None, :])[0]
        draws.append(idx)
        records.append(x)
        values.append(value)
    return np.stack(draws), np.stack(records), np.asarray(values)


def simulate(workload: Workload, answers, *, key, eta: float, samples: int, rounds: int) -> DualQueryTranscript:
    """A DualQuery transcript for given normalised answers, sampled without privacy accounting.

    For testing the likelihood (e.g. its minimiser approaches ``answers`` as ``rounds`` and ``samples``
    grow). Draws with ``jax.random.categorical`` on the log-weights ``eta * u_t``.

    Args:
        workload: the query class's rows.
        answers: ``a`` of the positive rows (``R``,), in ``[0, 1]``.
        key, eta, samples, rounds: as in :func:`dualquery`.

    Returns:
        A :class:`DualQueryTranscript` (``total = 1``).
    """
    queries = QueryBlocks(workload, workload.domain, "simulate")
    a = np.asarray(answers, np.float64)
    if a.shape != (queries.rows,):
        raise ValueError(f"simulate: answers must have one entry per workload row ({queries.rows}), got shape {a.shape}")

    def draw(k, t, q):
        return jax.random.categorical(k, jnp.asarray(eta * q), shape=(samples,))

    draws, records, _ = _play(queries, a, eta=eta, samples=samples, rounds=rounds, key=key, draw=draw)
    return DualQueryTranscript(queries, draws, records, eta, samples, 1.0)


# ---------------------------------------------------------------------------------------------------
# The front-end
# ---------------------------------------------------------------------------------------------------


@reports(DualQueryInfo)
@takes_own_options(DualQueryOptions)
def dualquery(
    data: Dataset,
    epsilon: float,
    delta: float = DEFAULT_DELTA,
    *,
    key,
    workload: Workload | None = None,
    engine_iters: int = 1000,
    fit_options: FitOptions | None = None,
    max_model_mb: float | None = None,
    own: DualQueryOptions,
) -> MechanismResult:
    """DualQuery and DualQuery+PGM on the same transcript (Gaboardi et al., ICML 2014; +PGM: McKenna, Sheldon & Miklau, ICML 2019).

    Query class: the rows of ``workload``'s factored queries (each a counting query with entries in
    ``[0, 1]``) and their negations, ``M = 2R`` queries; ``N = len(data)`` is public (replace-one
    neighbours). Round ``t = 1..T``: draw ``s`` queries from the multiplicative weights
    ``w_t(j) ∝ exp(eta_used u_t(j))``, ``u_t = (t - 1) a - C_t`` (paper Algorithm 1, the exponential
    mechanism with ``eps_t = 2 eta_used (t - 1) / N`` per draw, recorded in the ledger; round 1 is
    uniform and reads no data); best-respond with the record satisfying the most sampled queries
    (exact max-sum variable elimination, :func:`max_sum_ve`); update ``C``. Privacy by advanced
    composition (``bound="b2"``: ``eps0 sqrt(2 k ln(1/delta)) + k eps0 (e^eps0 - 1)``, ``eps0 = 2 eta
    (T - 1) / N``, ``k = s (T - 1)``; ``"heterogeneous"``: per-round ``eps_t``), spent exactly:
    see :func:`dualquery_plan` for ``T`` and ``eta_used``.

    Arms: ``original`` = the ``T`` records as a :class:`~pgmjax.Dataset` (answers scaled to ``N`` by
    :mod:`pgmjax.model.metrics`); ``model`` = :func:`pgmjax.estimate` with the transcript's negative
    log-likelihood as the loss (:meth:`DualQueryTranscript.loss`, ICML 2019 DualQuery+PGM), the
    workload cliques as model cliques and ``total = N``.

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: privacy budget, ``> 0``.
        delta: in ``(0, 1)`` (default 1e-9).
        key: a ``jax.random`` key (sampling, tie-breaking, synthetic data).
        workload: a :class:`~pgmjax.Workload` on ``data``'s domain whose rows are counting queries, or a
            list of cliques (their marginals); default every 2-way marginal.
        engine_iters: iterations of the engine. The transcript's likelihood is a noisy objective, so more
            is not better past a point: on the Stroke benchmark the workload error is lowest near 500-1000
            iterations and rises by about 10% at 4000 while the likelihood keeps improving (the performance
            pages have the measurement); a fixed budget acts as early stopping.
        fit_options: a :class:`pgmjax.FitOptions` for the fit: ``method`` (``"mirror_descent"``, the default,
            or ``"lbfgs"``), ``step_size`` (default ``1 / (L N)`` with :meth:`DualQueryTranscript.lipschitz`; a
            line search adapts it), ``dtype`` (default float32), ``callback``, ``tol``, ``chunk``, ...; not
            ``loss`` (the transcript's likelihood is set here, as are the total, cliques and iterations).
        max_model_mb: None (default), or a cap in MB on the model over the workload's cliques, checked
            before anything is computed.
        **own: DualQuery's own options, by name: the fields of :class:`DualQueryOptions` (``eta``, ``samples``,
            ``rounds``, ``bound``), checked before anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (+PGM), ``synthetic`` (``N``
        records from it), ``measurements=[]`` (the engine's input is the transcript,
        ``info.transcript``), ``original`` (the ``T`` records), ``accountant``, ``plan`` (rounds ``2..T``, composed; round 1 is
        free) and ``info``, a :class:`DualQueryInfo`
        (rounds, eta, eta_used, samples, bound, queries ``M``, per-round satisfied counts, seconds).

    Example:
        >>> import pgmjax as pj
        >>> dom = pj.Domain({"a": 3, "b": 4, "c": 2})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), dom)
        >>> w = pj.Workload.benchmark(dom, [("a", "b"), ("b", "c")], numeric=["a"])
        >>> res = dualquery(data, 1.0, 1e-3, key=jax.random.key(0), workload=w, engine_iters=100)
        >>> errors = pj.metrics.workload_error(w, data, res.original), pj.metrics.workload_error(w, data, res.model)
        >>> res.info.rounds, [round(e, 2) for e in errors]
        (3, [0.56, 0.24])
    """
    run = _dualquery_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    return _dualquery(data, key, run)


class _Run(NamedTuple):
    """:func:`dualquery`'s arguments checked against the data, its fit's settings and its plan."""

    epsilon: float
    delta: float
    workload: Workload
    engine_iters: int
    options: dict  # the fit's other keyword arguments (FitOptions.given() less method, step_size, dtype)
    method: Any  # a name or an estimator
    step_size: float | None
    dtype: object
    queries: QueryBlocks
    plan: dict  # dualquery_plan's
    own: DualQueryOptions


def _dualquery_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb,
                         own: DualQueryOptions) -> _Run:
    """:func:`dualquery`'s arguments checked against the data (its own options were checked where made) and its plan
    made, before any private computation."""
    where = _WHERE
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    check_epsilon(_positive(epsilon, "epsilon", where), where)
    delta = check_positive_delta(delta, where)
    _check_key(key, where)
    workload = check_workload(workload, data.domain, where)
    if isinstance(engine_iters, (bool, np.bool_)) or not isinstance(engine_iters, (int, np.integer)) or engine_iters < 0:
        raise ValueError(f"{where}: engine_iters must be a non-negative integer, got {engine_iters!r}")
    options = check_fit_options(fit_options, where, refused=("loss",))
    method = options.pop("method", "mirror_descent")
    if resolve_method(method, where)[0].traits.smooth_loss_only:  # the fit's loss is the transcript's own
        raise ValueError(f"{where}: fit_options method must be 'mirror_descent' or 'lbfgs' (dual averaging needs the L2 loss), got {method!r}")
    step_size = options.pop("step_size", None)
    if step_size is not None:
        _positive(step_size, "fit_options step_size", where)
    dtype = options.pop("dtype", None)
    max_model_mb = check_model_cap(max_model_mb, where)
    # Huge domains: ModelTooLarge naming the attribute or clique, before a query matrix is built.
    check_domain_size(data.domain, where, list(dict.fromkeys(workload.cliques)), what="the workload cliques' query blocks")
    check_attribute_matrices(data.domain, (a for q in workload.queries for a, m in zip(q.clique, q.matrices) if m is None),
                             where, "identity query matrices")
    check_cliques_within_cap(data.domain, workload.cliques, max_model_mb, where, "the model over the workload's cliques")
    fdtype = jnp.dtype(dtype or jnp.float32)
    if fdtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"{where}: dtype must be float32 or float64, got {fdtype}")
    if fdtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError(f'{where}: dtype float64 needs jax.config.update("jax_enable_x64", True) before any computation')
    if len(data) == 0:
        raise ValueError(f"{where}: data has no records")
    # The fit to the transcript, counted at its peak (its loss is a callable: the parameters are the marginals).
    check_fit(data.domain, list(dict.fromkeys(workload.cliques)), method, fdtype, where, callable_loss=True,
              what=" of the transcript")
    queries = QueryBlocks(workload, data.domain, where)
    plan = dualquery_plan(epsilon, delta, records=len(data), eta=own.eta, samples=own.samples, rounds=own.rounds,
                          bound=own.bound)
    return _Run(float(epsilon), delta, workload, int(engine_iters), options, method, step_size, dtype, queries, plan, own)


def _dualquery(data: Dataset, key, run: _Run) -> MechanismResult:
    """DualQuery's Algorithm 1 on checked arguments: the game between the query and the record player (the
    private draws through the accountant), then the engine fitted to the transcript."""
    epsilon, delta, queries, plan, own = run.epsilon, run.delta, run.queries, run.plan, run.own
    samples, bound, step_size = own.samples, own.bound, run.step_size
    timer, N, M = Timer(), len(data), queries.size
    T, eta_used = plan["rounds"], plan["eta_used"]
    acc = Accountant(epsilon=epsilon, delta=float(delta), bounded=True, composition=_BOUNDS[bound])
    budget_plan = record_plan(acc, "dualquery", [
        BudgetStep("round 1: uniform draws (reads no data)", "exponential", 0.0, samples, epsilon=0.0),
        BudgetStep(f"rounds 2..{T}: {samples} draws each (advanced composition)", "exponential", 0.0, samples * (T - 1)),
    ], epsilon=epsilon, delta=float(delta))
    answers = queries.answers(data) / N  # private; read only through acc.exponential below

    def draw(k, t, qualities):
        if t == 1:  # uniform weights: no data read, no cost
            return jax.random.categorical(k, jnp.zeros(M), shape=(samples,))
        # P(j) ∝ exp(eps_t q_j / (2 Delta_t)) = exp(eta_used u_t(j)): the multiplicative weights.
        return acc.exponential(k, qualities, sensitivity=(t - 1) / N, epsilon=2 * eta_used * (t - 1) / N, num=samples,
                               target=f"round {t}: {samples} queries of {M}")

    k_game, k_synth = jax.random.split(key)
    with timer("game"):
        draws, records, values = _play(queries, answers, eta=eta_used, samples=samples, rounds=T, key=k_game, draw=draw)
    transcript = DualQueryTranscript(queries, draws, records, eta_used, samples, N)
    original = Dataset(records, data.domain)

    with timer("fit"):
        if step_size is None:
            step_size = 1.0 / (transcript.lipschitz() * N)
        release_compiled(above=MAX_LIVE_PROGRAMS)  # a sweep over many structures: free the dead ones, keep a bounded number
        model, report = api.estimate(data.domain, [], method=run.method, iters=run.engine_iters, loss=transcript.loss(),
                                     total=N, cliques=list(dict.fromkeys(run.workload.cliques)), dtype=run.dtype,
                                     step_size=step_size, report=True, **run.options)
    synthetic = synthesize(model, k_synth)
    info = DualQueryInfo(
        rounds=T,
        eta=plan["eta"],
        eta_used=eta_used,
        samples=samples,
        bound=bound,
        delta=float(delta),
        epsilon_at_eta=plan["epsilon_at_eta"],
        epsilon_spent=acc.spent,
        queries=M,
        satisfied=values,
        transcript=transcript,
        engine_iters=run.engine_iters,
        seconds=timer.done(),
    )
    return MechanismResult(mechanism="dualquery", model=model, synthetic=synthetic, measurements=[], accountant=acc,
                           original=original, original_error=None, info=info, plan=budget_plan, report=report)
