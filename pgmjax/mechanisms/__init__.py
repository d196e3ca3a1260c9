"""Privacy mechanisms as thin front-ends over the estimation engine.

Each front-end runs two arms on the same noisy measurements: the mechanism's
own estimator (``result.original``) and the engine (``result.model``), and
returns a :class:`MechanismResult` with the measurements and the privacy ledger.

Example:
    >>> import jax, pgmjax as pj
    >>> result = pj.mechanisms.privbayes(data, 1.0, key=jax.random.key(0))   # doctest: +SKIP
    >>> pj.metrics.workload_error(w, data, result.model), pj.metrics.workload_error(w, data, result.original)  # doctest: +SKIP
"""

from .dualquery import DualQueryTranscript, dualquery, dualquery_plan, max_sum_ve
from .estimates import CliqueTables, FactoredTable
from .mwem import DEFAULT_MAX_TABLE_CELLS, hypothetical_model_size, mw_update, mwem, mwem_budget
from .privbayes import greedy_bayes, noisy_conditionals, privbayes, sample_network
from .result import MechanismResult

__all__ = [
    "MechanismResult",
    "FactoredTable",
    "CliqueTables",
    "mwem",
    "mwem_budget",
    "mw_update",
    "hypothetical_model_size",
    "DEFAULT_MAX_TABLE_CELLS",
    "privbayes",
    "greedy_bayes",
    "noisy_conditionals",
    "sample_network",
    "dualquery",
    "dualquery_plan",
    "DualQueryTranscript",
    "max_sum_ve",
]
