"""Bayesian inference under differential privacy: Xiao & Xiong, "Bayesian Inference under Differential Privacy".

* :func:`blue`: the best linear unbiased estimate of a query from a history of noisy linear answers
  (section 3), with an estimability test for rank-deficient histories.
* :class:`LinearNoise`: the exact law of its error, a weighted sum of Laplace (and Gaussian) variables
  (section 4): CDF, quantiles, half-widths, probabilities, by "cf" (Fourier inversion), "exact"
  (partial fractions), "pc" (the paper's Algorithm 2), "mc" (Monte Carlo) or "gaussian".
* :func:`posterior`, :func:`confidence_interval` (alias :func:`credible_interval`),
  :func:`claim_probability`: intervals and probabilities of claims (section 5.2).
* :func:`allocate`, :func:`allocate_with_history`: the budget for a requested accuracy (Theorem 5.3);
  :func:`cell_cost`, :func:`system_cost`, :func:`per_record_cost`: the privacy cost of a history
  (Theorem 5.4).
* :class:`OnlineQuerySystem`: answers from history, buys fresh answers through an
  :class:`~pgmjax.privacy.Accountant`, or refuses (section 5, Fig. 4).

Example:
    >>> from pgmjax import bayes
    >>> r = bayes.blue([[1.0], [1.0]], [10.0, 14.0], scale=[1.0, 2.0], query=[1.0])
    >>> round(r.value, 6), round(r.error.half_width(0.95), 6)
    (10.8, 2.619124)
"""

from .blue import BLUEResult, History, blue, blue_history, history_matrix
from .convolution import bin_counts, default_bin_width
from .cost import Allocation, allocate, allocate_with_history, cell_cost, combined_error, per_record_cost, system_cost
from .errors import METHODS, LinearNoise
from .intervals import Interval, Posterior, claim_probability, confidence_interval, credible_interval, posterior
from .online import OnlineQuerySystem, Response

__all__ = [
    "blue",
    "blue_history",
    "history_matrix",
    "History",
    "BLUEResult",
    "LinearNoise",
    "METHODS",
    "bin_counts",
    "default_bin_width",
    "posterior",
    "Posterior",
    "Interval",
    "confidence_interval",
    "credible_interval",
    "claim_probability",
    "allocate",
    "allocate_with_history",
    "combined_error",
    "Allocation",
    "cell_cost",
    "system_cost",
    "per_record_cost",
    "OnlineQuerySystem",
    "Response",
]
