"""RR+PGM: a query-set-independent randomized-response release, its companion estimators and a model fitted to them.

Wang, Ying & Zhang, "A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014;
Asilomar 2015), Sections III-IV: the mechanism publishes a synthetic table without knowing any query --
every record goes through k-ary randomized response (eq. 14-16; ``epsilon``-DP under replace-one
neighbours, Lemma 1) -- and each query is answered by an unbiased companion estimator (eq. 17-20).
Both arms of a :class:`~pgmjax.mechanisms.result.MechanismResult` run on the same release:

* ``result.original``: the :class:`pgmjax.rr.Release` itself, which answers any marginal or factored
  query with the companion estimators (unbiased; answers can be negative);
* ``result.model``: the engine fitted to the debiased marginals of ``cliques`` (RR+PGM,
  :func:`pgmjax.rr.measurements`): one consistent, non-negative model, and ``result.synthetic`` drawn from it.

Over the whole row domain (the paper's mechanism, ``per_attribute=False``) the squared error of a query
is about ``((e^eps + K - 1) / (e^eps - 1))^2 / (4 n)`` on the fraction scale, ``K`` the number of rows of the
domain: informative only for domains of a few dozen rows (``info.rmse_bound`` says how bad it is; a
warning is raised above 0.5). ``per_attribute=True`` randomises each attribute separately with
``epsilon / d`` (sequential composition; not in the paper), the usable variant on real tables.

Privacy: pure ``epsilon`` (``rho = epsilon^2 / 2`` under a zCDP accountant), all through
:meth:`pgmjax.privacy.Accountant.randomized_response`. The release has exactly ``n`` rows: it is DP under
replace-one neighbours (``bounded=True``, the default here); under add/remove neighbours the count must
be declared public (``public_count=True``), else the run is refused.

The front-end's own options are :class:`RRSyntheticOptions`; what its run reports is :class:`RRSyntheticInfo`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import jax
import networkx as nx
import numpy as np

from ..estimation.options import FitOptions
from ..data.dataset import Dataset
from ..data.domain import CliqueLike
from ..estimation.estimate import estimate
from ..privacy import Accountant
from ..checks import check_bool as _boolean
from ..checks import check_count as _count
from ..checks import check_key as _check_key
from ..checks import check_positive as _positive
from ..rr import (
    Release,
    debiased_marginal,
    max_informative_size,
    measurements,
    mse_bound,
)
from ..rr import release as rr_release
from .options import (check_attribute_matrices, check_domain_size, check_fit_options, check_pure_delta, check_synthetic,
                      refuse_option)
from .own_options import OwnOptions, takes_own_options
from .result import BudgetStep, MechanismResult, record_plan
from .run_info import RunInfo, published, reports
from .steps import Timer, synthesize

__all__ = ["RRSyntheticInfo", "RRSyntheticOptions", "rr_synthetic", "chow_liu_cliques"]

#: Above this ``rmse_bound`` (fraction scale) the whole-row release carries almost no information.
UNINFORMATIVE_RMSE = 0.5


def chow_liu_cliques(release: Release, max_cells: int = 10**6) -> list[tuple[str, ...]]:
    """Every attribute plus a maximum spanning tree of pairs (Chow & Liu 1968) weighted by the evidence of
    dependence in the release; post-processing, no privacy cost.

    A pair's weight is the standardised chi-square ``(sum_c z_c^2 - cells) / sqrt(2 cells)`` of its debiased
    two-way marginal against the product of its debiased one-way marginals, ``z_c`` the deviation over its
    standard deviation (:func:`pgmjax.rr.debiased_marginal`): about N(0, 1) for independent attributes
    whatever the noise and the table size. (The mutual information of the clipped debiased tables would
    favour the noisiest, largest pairs.)

    Args:
        release: a :class:`pgmjax.rr.Release`.
        max_cells: pairs with more cells are not candidates.

    Returns:
        The one-way cliques, then the tree's edges (``d - 1`` pairs when the candidates connect the domain).

    Example:
        >>> rel = Release.of(Dataset(np.array([[0, 0, 1], [1, 1, 0], [1, 1, 1]] * 30), {"a": 2, "b": 2, "c": 2}), 8.0)
        >>> chow_liu_cliques(rel)[3:]
        [('a', 'b'), ('a', 'c')]
    """
    dom = release.domain
    attrs = list(dom.attributes)
    n = release.total
    one = {a: np.maximum(x, 0.0) for a, x in zip(attrs, release.marginals([(a,) for a in attrs]))}
    pairs = [p for p in itertools.combinations(attrs, 2) if dom.size(p) <= max_cells]
    weights = []
    for a, b in pairs:
        x, var = debiased_marginal(release, (a, b))
        pa, pb = one[a] / max(one[a].sum(), 1e-300), one[b] / max(one[b].sum(), 1e-300)
        indep = n * np.outer(pa, pb)
        chi2 = float(np.sum((x - indep) ** 2 / np.maximum(var, 1e-12)))
        weights.append((chi2 - x.size) / math.sqrt(2.0 * x.size))
    graph = nx.Graph()
    graph.add_nodes_from(attrs)
    graph.add_weighted_edges_from((a, b, w) for (a, b), w in zip(pairs, weights))
    tree = nx.maximum_spanning_tree(graph, algorithm="kruskal")
    order = {p: i for i, p in enumerate(pairs)}
    edges = sorted((tuple(sorted(e, key=attrs.index)) for e in tree.edges), key=lambda e: -weights[order[e]])
    return [(a,) for a in attrs] + edges


@dataclasses.dataclass(frozen=True)
class RRSyntheticOptions(OwnOptions):
    """RR+PGM's own options (:func:`rr_synthetic` takes them by name), checked here: a bad one fails with its name
    before any data is read.

    Attributes:
        per_attribute: False: the paper's k-ary randomized response over the whole row domain (small
            domains only); True: each attribute separately with ``epsilon / d``.
        bounded: the accountant's neighbours when none is given: True (default) replace-one, the
            paper's setting; False add/remove, which needs ``public_count=True``.
        public_count: declare the number of records public (the release reveals it).
        cliques: the marginals to debias and fit (free: post-processing). Default: every attribute
            plus a Chow-Liu tree of the debiased pairs (:func:`chow_liu_cliques`).
        synthetic: draw synthetic records from the model.
        rows: how many (default ``n``).
        synthetic_method: ``"low_variance"`` or ``"exact"`` (:func:`pgmjax.model.sampling.synthetic_data`).
        accountant: an existing :class:`~pgmjax.privacy.Accountant` to spend ``epsilon`` from
            (default a fresh pure one, ``Accountant(epsilon=epsilon, bounded=bounded)``).

    Example:
        >>> RRSyntheticOptions(per_attribute=True, cliques=[("a", "b")]).cliques
        (('a', 'b'),)
        >>> RRSyntheticOptions(bounded=False)
        Traceback (most recent call last):
        ...
        ValueError: rr_synthetic: the release has exactly as many records as the data, so under add/remove neighbours (bounded=False) it is differentially private only if the record count is public: pass public_count=True, or use replace-one neighbours (bounded=True)
    """

    mechanism = "rr_synthetic"

    per_attribute: bool = False
    bounded: bool = True
    public_count: bool = False
    cliques: Sequence[CliqueLike] | None = None
    synthetic: bool = True
    rows: int | None = None
    synthetic_method: str = "low_variance"
    accountant: Accountant | None = None

    def __post_init__(self):
        where = self.mechanism
        per_attribute = _boolean(self.per_attribute, "per_attribute", where)
        bounded = _boolean(self.bounded, "bounded", where)
        public_count = _boolean(self.public_count, "public_count", where)
        synthetic, rows, synthetic_method = check_synthetic(self.synthetic, self.rows, self.synthetic_method, where)
        cliques = None if self.cliques is None else tuple(self.cliques)  # each checked against the data's domain
        if cliques is not None and not cliques:
            raise ValueError(f"{where}: cliques is empty; give None for the default (attributes + a Chow-Liu tree)")
        if self.accountant is not None and not isinstance(self.accountant, Accountant):
            raise TypeError(f"{where}: accountant must be a pgmjax.privacy.Accountant, got {type(self.accountant).__name__}")
        if not (self.accountant.bounded if self.accountant is not None else bounded) and not public_count:
            raise ValueError(
                f"{where}: the release has exactly as many records as the data, so under add/remove neighbours "
                "(bounded=False) it is differentially private only if the record count is public: pass public_count=True, "
                "or use replace-one neighbours (bounded=True)"
            )
        self.keep(per_attribute=per_attribute, bounded=bounded, public_count=public_count, cliques=cliques,
                  synthetic=synthetic, rows=rows, synthetic_method=synthetic_method)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class RRSyntheticInfo(RunInfo):
    """What an RR+PGM run reports (``result.info``). The report of ``pgmjax run`` prints the published fields; the
    released table stays out of it.

    Attributes:
        epsilon: the release's epsilon.
        per_attribute: each attribute randomised separately (True) or the whole row (False).
        bounded: the accountant's neighbours (True: replace-one).
        public_count: the record count declared public.
        epsilons: the epsilon of each randomised group (one per attribute, or one for the whole row).
        keep: each group's probability of reporting the true value.
        domain_rows: ``K``, the number of rows of the whole domain.
        rmse_bound: the whole-row release's fraction-scale RMSE bound of a query (None per attribute).
        informative_rows: the largest ``K`` with an RMSE bound of 0.05.
        cliques: the marginals debiased and fitted.
        release: the released (randomised) :class:`~pgmjax.Dataset`.
        total: the number of records, the model's total.
        engine_iters: engine iterations of the fit.
        seconds: the seconds each stage took.
    """

    epsilon: float = published()
    per_attribute: bool = published()
    bounded: bool = published()
    public_count: bool = published()
    epsilons: list = published()
    keep: list = published()
    domain_rows: float = published()
    rmse_bound: float | None = published()
    informative_rows: int = published()
    cliques: list = published()
    release: Dataset
    total: float = published()
    engine_iters: int = published()
    seconds: dict = published()


@reports(RRSyntheticInfo)
@takes_own_options(RRSyntheticOptions)
def rr_synthetic(
    data: Dataset,
    epsilon: float,
    delta: float = 0.0,
    *,
    key,
    workload=None,
    engine_iters: int = 1000,
    fit_options: FitOptions | None = None,
    max_model_mb: float | None = None,
    own: RRSyntheticOptions,
) -> MechanismResult:
    """Randomized-response release + companion estimators + RR+PGM model ([WYZ] Sections III-IV).

    Args:
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: the release's epsilon (pure DP).
        delta: 0 (the default): the release is pure epsilon-DP, any other value is refused.
        key: a ``jax.random`` key (release, then synthetic records).
        workload: must be None: the release is query-set independent (give ``cliques`` to choose
            the marginals the engine fits).
        engine_iters: engine iterations of the fit.
        fit_options: a :class:`pgmjax.FitOptions` for the fit.
        max_model_mb: must be None: the model's cliques are chosen after the release (``cliques``).
        **own: RR+PGM's own options, by name: the fields of :class:`RRSyntheticOptions` (``per_attribute``,
            ``bounded``, ``public_count``, ``cliques``, ``synthetic``, ``rows``, ``synthetic_method``,
            ``accountant``), checked before anything else.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` (RR+PGM), ``synthetic``,
        ``measurements`` (the debiased marginals), ``accountant`` (one ledger entry, pure ``epsilon``), ``plan`` (the release),
        ``original`` (the :class:`pgmjax.rr.Release`: the released table and its companion estimators),
        ``info``, an :class:`RRSyntheticInfo`: ``epsilon``, ``per_attribute``, ``bounded``, ``public_count``,
        ``epsilons`` and ``keep`` (per group), ``domain_rows`` (``K``), ``rmse_bound`` (whole row: the fraction-scale RMSE bound of a
        query), ``informative_rows`` (the largest ``K`` with an RMSE bound of 0.05), ``cliques``,
        ``release`` (the released Dataset), ``total``, ``engine_iters``, ``seconds``.

    Raises:
        TypeError / ValueError: bad input, add/remove neighbours without ``public_count``, a whole-row
            domain too large to represent, before the data is read.

    Example:
        >>> import jax, numpy as np, pgmjax as pj
        >>> dom = pj.Domain({"a": 3, "b": 2})
        >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 2], (2000, 2)), dom)
        >>> res = rr_synthetic(data, 2.0, key=jax.random.key(0), engine_iters=50)
        >>> res.ledger[0].epsilon, len(res.synthetic), res.info.cliques
        (2.0, 2000, [('a',), ('b',), ('a', 'b')])
    """
    run = _rr_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb, own)
    return _rr_synthetic(data, key, run)


class _Run(NamedTuple):
    """:func:`rr_synthetic`'s arguments checked against the data: the common ones, the whole-row RMSE bound and the
    own options with the data-dependent checks and defaults done (``cliques``, ``accountant``)."""

    epsilon: float
    engine_iters: int
    fit: dict  # the keyword arguments of the fit (FitOptions.given())
    rmse: float | None  # the whole-row release's RMSE bound (None per attribute)
    own: RRSyntheticOptions


def _rr_arguments(data, epsilon, delta, key, workload, engine_iters, fit_options, max_model_mb,
                  own: RRSyntheticOptions) -> _Run:
    """:func:`rr_synthetic`'s arguments checked (its own options were checked where made), before the data is read."""
    where = "rr_synthetic"
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    epsilon = _positive(epsilon, "epsilon", where)
    check_pure_delta(delta, where)
    _check_key(key, where)
    refuse_option(workload, "workload", where, "randomized response is query-set independent; give cliques= for the fit")
    refuse_option(max_model_mb, "max_model_mb", where, "its cliques are chosen after the release; give cliques=")
    engine_iters = _count(engine_iters, "engine_iters", where, 1)
    options = check_fit_options(fit_options, where)
    domain = data.domain
    own = dataclasses.replace(
        own,
        cliques=None if own.cliques is None else [domain.check_clique(c, what=f"{where}: clique") for c in own.cliques],
        accountant=Accountant(epsilon=epsilon, bounded=own.bounded) if own.accountant is None else own.accountant,
    )
    size = domain.size()
    if not own.per_attribute and size > 1e300:
        raise ValueError(f"{where}: the whole-row domain has about 10^{math.log10(size):.0f} rows; randomized response over it "
                         "carries no information: use per_attribute=True")
    # Huge attributes: ModelTooLarge naming the attribute, before the channel's n x n matrices are built.
    check_domain_size(domain, where)
    check_attribute_matrices(domain, domain.attributes, where, "channel and query matrices")
    n = len(data)
    rmse = math.sqrt(mse_bound(size, epsilon, n)) if not own.per_attribute else None
    if rmse is not None and rmse > UNINFORMATIVE_RMSE:
        warnings.warn(
            f"{where}: randomized response over the whole row domain ({float(size):.3g} rows) bounds the RMSE of a "
            f"query at {rmse:.3g} of the total (n = {n}, epsilon = {epsilon:g}); it is informative only up to about "
            f"{max_informative_size(epsilon, n, 0.05)} rows. Consider per_attribute=True.",
            stacklevel=4,  # the caller of rr_synthetic (through takes_own_options' wrapper)
        )
    return _Run(epsilon, engine_iters, options, rmse, own)


def _rr_synthetic(data: Dataset, key, run: _Run) -> MechanismResult:
    """[WYZ]'s release on checked arguments: randomized response on every record, the debiased marginals fitted
    by the engine, synthetic records."""
    domain, n, own = data.domain, len(data), run.own
    epsilon, accountant, cliques = run.epsilon, own.accountant, own.cliques
    plan = None
    if accountant.composition == "pure":  # the plan is in epsilon; a zCDP or advanced accountant keeps its own ledger
        step = BudgetStep("randomized response on every record", "randomized_response", epsilon, 1, epsilon=epsilon)
        plan = record_plan(accountant, "rr_synthetic", [step], epsilon=epsilon, delta=0.0, budget=epsilon)
    timer = Timer()
    k_release, k_synth = jax.random.split(key)
    # The release (sampler and accounting in the privacy layer, the channel beside the estimators in rr).
    with timer("release"):
        release = rr_release(k_release, data, epsilon, per_attribute=own.per_attribute, accountant=accountant,
                             public_count=own.public_count, target="records")
    channel, released = release.channel, release.data

    with timer("fit"):
        if cliques is None:
            cliques = chow_liu_cliques(release)
        ms = measurements(release, cliques)
        model, report = estimate(domain, ms, iters=run.engine_iters, total=float(n), report=True, **run.fit)
    synth = None
    if own.synthetic:
        with timer("synthetic"):
            synth = synthesize(model, k_synth, own.rows if own.rows is not None else n, own.synthetic_method)
    info = RRSyntheticInfo(
        epsilon=epsilon,
        per_attribute=own.per_attribute,
        bounded=accountant.bounded,
        public_count=own.public_count,
        epsilons=list(channel.epsilons),
        keep=list(channel.keep),
        domain_rows=float(domain.size()),
        rmse_bound=run.rmse,
        informative_rows=max_informative_size(epsilon, n, 0.05),
        cliques=[tuple(c) for c in dict.fromkeys(cliques)],
        release=released,
        total=float(n),
        engine_iters=run.engine_iters,
        seconds=timer.done(),
    )
    return MechanismResult(mechanism="rr_synthetic", model=model, synthetic=synth, measurements=ms, accountant=accountant,
                           original=release, info=info, plan=plan, report=report)
