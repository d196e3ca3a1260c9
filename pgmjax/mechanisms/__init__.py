"""Privacy mechanisms as thin front-ends over the estimation engine.

Each front-end runs two arms on the same noisy measurements: the mechanism's
own estimator (``result.original``) and the engine (``result.model``), and
returns a :class:`MechanismResult` with the measurements, the privacy ledger and the budget plan.
Every front-end has the same leading parameters,
``(data, epsilon, delta=..., *, key, workload=..., engine_iters=..., fit_options=..., max_model_mb=...)``,
then its own keyword-only options, defined once as the fields of a frozen, checked dataclass
(:mod:`pgmjax.mechanisms.own_options`; e.g. :class:`MWEMOptions`). What a run reports about itself,
``result.info``, is likewise one frozen value of the front-end's own class (:mod:`pgmjax.mechanisms.run_info`; e.g.
:class:`MSTInfo`). :mod:`~pgmjax.mechanisms.registry` maps names to the front-ends.

Example:
    >>> import jax, numpy as np, pgmjax as pj
    >>> dom = pj.Domain({"a": 3, "b": 4, "c": 2})
    >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), dom)
    >>> w = pj.Workload.all_kway(dom, 2)
    >>> result = pj.mechanisms.privbayes(data, 1.0, key=jax.random.key(0), engine_iters=200)
    >>> errors = pj.metrics.workload_error(w, data, result.model), pj.metrics.workload_error(w, data, result.original)
    >>> [round(e, 2) for e in errors]
    [0.03, 0.06]
"""

from . import registry
from .adaptive_iterative import aim, aim_budget, aim_candidates, default_aim_workload
from .aim_options import AIMInfo, AIMOptions
from .dual_query import DualQueryInfo, DualQueryOptions, DualQueryTranscript, dualquery, dualquery_plan, max_sum_ve
from .matrix_mechanism import HDMMInfo, HDMMOptions, hdmm, hdmm_strategy, union_workload
from .query_learning import (
    MLDPInfo,
    MLDPOptions,
    QuerySet,
    RegressionModel,
    fit_pgm,
    fit_regression,
    laplace_baseline,
    mldp,
    select_training,
    training_sensitivity,
)
from .domain_compression import compress_domain
from .spanning_tree import mst, mst_budget
from .spanning_tree_options import MSTInfo, MSTOptions
from .tree_adaptive import tree_aim, tree_aim_budget
from .tree_aim_options import TreeAIMInfo, TreeAIMOptions
from .original_estimates import CliqueTables, FactoredTable
from .multiplicative_weights import DEFAULT_MAX_TABLE_CELLS, MWEMInfo, MWEMOptions, hypothetical_model_size, mw_update, mwem, mwem_budget
from .bayesian_network import PrivBayesInfo, PrivBayesOptions, greedy_bayes, noisy_conditionals, privbayes, sample_network
from .result import MechanismResult
from .randomized_response_synthetic import RRSyntheticInfo, RRSyntheticOptions, chow_liu_cliques, rr_synthetic
from .checkpoint import Checkpoint, RunInterrupted

__all__ = [
    "MechanismResult",
    "FactoredTable",
    "CliqueTables",
    "mwem",
    "MWEMOptions",
    "MWEMInfo",
    "mwem_budget",
    "mw_update",
    "hypothetical_model_size",
    "DEFAULT_MAX_TABLE_CELLS",
    "privbayes",
    "PrivBayesOptions",
    "PrivBayesInfo",
    "greedy_bayes",
    "noisy_conditionals",
    "sample_network",
    "dualquery",
    "DualQueryOptions",
    "DualQueryInfo",
    "dualquery_plan",
    "DualQueryTranscript",
    "max_sum_ve",
    "hdmm",
    "HDMMOptions",
    "HDMMInfo",
    "hdmm_strategy",
    "union_workload",
    "mldp",
    "MLDPOptions",
    "MLDPInfo",
    "QuerySet",
    "RegressionModel",
    "select_training",
    "training_sensitivity",
    "fit_regression",
    "fit_pgm",
    "laplace_baseline",
    "mst",
    "MSTOptions",
    "MSTInfo",
    "mst_budget",
    "compress_domain",
    "aim",
    "AIMOptions",
    "AIMInfo",
    "aim_budget",
    "aim_candidates",
    "default_aim_workload",
    "tree_aim",
    "TreeAIMOptions",
    "TreeAIMInfo",
    "tree_aim_budget",
    "rr_synthetic",
    "RRSyntheticOptions",
    "RRSyntheticInfo",
    "chow_liu_cliques",
    "registry",
    "Checkpoint",
    "RunInterrupted",
]
