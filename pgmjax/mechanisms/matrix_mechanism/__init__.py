"""HDMM, the high-dimensional matrix mechanism: workloads, strategies, their optimisation, measurement, reconstruction.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018. The matrix mechanism answers a workload ``W`` by measuring a
*strategy* ``A`` (``y = A x + noise``, noise calibrated to the sensitivity of ``A``), reconstructing
``x_hat = A^+ y`` and answering ``W x_hat``; HDMM chooses ``A`` by minimising the expected error
``||A||^2 trace[(A^T A)^+ W^T W]`` over structured strategy families. The modules, each importing only
those listed before it:

* :mod:`.factors`: per-attribute matrices (Identity, Total, Prefix, AllRange, ...) and Kronecker helpers;
* :mod:`.workloads`: :class:`KronWorkload`, :class:`UnionWorkload`, :func:`marginals_workload`;
* :mod:`.marginals_gram`: the marginals Gram algebra (:class:`MarginalsGram`);
* :mod:`.strategies`: :class:`KronStrategy`, :class:`UnionStrategy` (OPT_+), :class:`MarginalsStrategy` (OPT_M);
* :mod:`.error`: the expected error (:func:`expected_error`, :func:`factor_error`, :func:`dense_expected_error`);
* :mod:`.objectives`: the differentiable objectives (p-Identity, marginals) and the L-BFGS restarts (JAX);
* :mod:`.templates`: OPT_0 for one attribute (:func:`opt_pidentity`, :func:`opt_0`);
* :mod:`.optimize`: OPT_kron, OPT_+, OPT_M, :func:`optimize_strategy`;
* :mod:`.least_squares`: reconstruction, per clique (HDMM+LLS) or on the full table;
* :mod:`.planning`: the strategy for a :class:`pgmjax.Workload` (:func:`hdmm_strategy`);
* :mod:`.measure`: the measurement, drawn and recorded by the :class:`~pgmjax.privacy.Accountant`
  (:func:`measure_strategy`), the only module that reads private data;
* :mod:`.hdmm_options`: HDMM's own options (:class:`HDMMOptions`), checked where made, and what its run reports
  (:class:`HDMMInfo`);
* :mod:`.frontend`: the mechanism :func:`hdmm` (HDMM+LLS, HDMM+PGM, global least squares).

Use float64 (``jax.config.update("jax_enable_x64", True)``) for results that match the NumPy error
evaluation to many digits.

Example:
    >>> from pgmjax.mechanisms import matrix_mechanism as mm
    >>> W = mm.KronWorkload(("age",), (mm.prefix(16),))
    >>> A, loss = mm.opt_kron(W, jax.random.key(0))
    >>> loss < mm.expected_error(W, mm.KronStrategy(("age",), (mm.identity(16),)))
    True
"""

from .error import dense_expected_error, expected_error, factor_error
from .factors import (
    allrange,
    allrange_gram,
    identity,
    identity_total,
    prefix,
    prefix_gram,
    suffix,
    total,
    width_k_range,
)
from .frontend import DEFAULT_MAX_TABLE_CELLS, hdmm
from .hdmm_options import HDMMInfo, HDMMOptions
from .least_squares import (
    TableTooLargeError,
    global_least_squares,
    least_squares_marginal,
    local_least_squares,
)
from .marginals_gram import MarginalsGram
from .measure import StrategyRelease, equal_column_norms, measure_strategy
from .objectives import marginals_error, pidentity_error, pidentity_matrix
from .optimize import (
    opt_kron,
    opt_marginals,
    opt_plus_weights,
    opt_union,
    optimize_strategy,
)
from .planning import hdmm_strategy, union_workload
from .strategies import KronStrategy, MarginalsStrategy, UnionStrategy
from .templates import default_p, opt_0, opt_pidentity
from .workloads import KronWorkload, UnionWorkload, marginals_workload

__all__ = [
    # per-attribute factors
    "identity",
    "total",
    "prefix",
    "suffix",
    "allrange",
    "identity_total",
    "width_k_range",
    "prefix_gram",
    "allrange_gram",
    # workloads and strategies
    "KronWorkload",
    "UnionWorkload",
    "marginals_workload",
    "KronStrategy",
    "UnionStrategy",
    "MarginalsStrategy",
    "MarginalsGram",
    # error
    "expected_error",
    "factor_error",
    "dense_expected_error",
    "pidentity_matrix",
    "pidentity_error",
    "marginals_error",
    # optimisation
    "default_p",
    "opt_pidentity",
    "opt_0",
    "opt_kron",
    "opt_union",
    "opt_plus_weights",
    "opt_marginals",
    "optimize_strategy",
    # reconstruction
    "least_squares_marginal",
    "local_least_squares",
    "global_least_squares",
    "TableTooLargeError",
    # the mechanism
    "union_workload",
    "hdmm_strategy",
    "measure_strategy",
    "StrategyRelease",
    "equal_column_norms",
    "hdmm",
    "HDMMOptions",
    "HDMMInfo",
    "DEFAULT_MAX_TABLE_CELLS",
]
