"""Reusing a history of noisy answers (Chen, Zhou & Bhowmick, EDBT 2012).

* :func:`kernel_pca`: eigen-queries of the past queries and least-squares / shrunk answers to any linear query
  (section 3), from inner products between queries only; :func:`kernel_ridge` is the same estimator at finite
  alpha by conjugate gradients for histories too large for a dense eigen-decomposition.
* :func:`select_alpha`: the shrinkage parameter by cross-validation on the released answers (section 3.5).
* :func:`maxent`: the maximum-entropy model with L1 soft constraints and a prior (section 4), solved exactly
  through its box-constrained dual with the junction-tree oracle; a :class:`pgmjax.GraphicalModel`
  (``solver="sgd_gibbs"``: the paper's stochastic Gibbs-sampling learner, section 4.2).
* :func:`prior_from_marginals`: a product prior from noisy one-way marginals (section 4.3, footnote 3).

Everything here is post-processing of released answers: no privacy cost (a prior measured from the data is
charged where it is measured, through the :class:`pgmjax.Accountant`).
"""

from .cv import select_alpha
from .maxent import maxent
from .pca import AnswerEstimate, EigenQueryFit, kernel_pca, shrink_weights
from .prior import prior_from_marginals
from .ridge import KernelOperator, RidgeFit, kernel_ridge
from .rows import RowBlock, uniform_prior

__all__ = [
    "kernel_pca",
    "EigenQueryFit",
    "AnswerEstimate",
    "shrink_weights",
    "select_alpha",
    "kernel_ridge",
    "RidgeFit",
    "KernelOperator",
    "maxent",
    "prior_from_marginals",
    "RowBlock",
    "uniform_prior",
]
