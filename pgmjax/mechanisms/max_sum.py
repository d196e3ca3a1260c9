"""Exact max-sum variable elimination: :func:`pgmjax.graph.max_sum.max_sum_ve`, re-exported at its former path.

The algorithm lives in the graph layer (:mod:`pgmjax.graph.max_sum`), below the mechanisms and
:mod:`pgmjax.bayes`, which both use it.
"""

from ..graph.max_sum import max_sum_ve

__all__ = ["max_sum_ve"]
