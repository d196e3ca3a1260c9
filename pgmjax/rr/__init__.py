"""Query-set-independent release by randomized response, with unbiased companion estimators.

Wang, Ying & Zhang, "A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014;
Asilomar 2015). The mechanism publishes a synthetic table without knowing any query: every record is
replaced by k-ary randomized response over the whole row domain (an exponential mechanism on the Hamming
distance; ``epsilon``-DP under replace-one neighbours, also local DP). Each query is then answered by a
*companion estimator* built for it and for the public mechanism: unbiased, squared error ``Theta(1/n)``
for a fixed domain -- with a constant ``((e^eps + K - 1) / (e^eps - 1))^2 / 4`` that makes the whole-row
release useless beyond a few dozen row values (:func:`max_informative_size`). The per-attribute variant
(each attribute randomised separately with ``epsilon / d``; not in the paper) scales to real domains: its
variance grows with the size of the queried clique, not of the domain.

* :func:`release` (through :meth:`pgmjax.privacy.Accountant.randomized_response`) -> :class:`Release`;
* :func:`answer` (linear, factored and statistical queries; variance; ``proper`` clip/round),
  :func:`exact_variance`, :func:`debiased_marginal`, :func:`proper_interval`;
* :func:`mse_bound`, :func:`bound_constant`, :func:`max_informative_size`, :func:`quantized_mse_bound`;
* RR+PGM: :func:`measurements`, :func:`fit`;
* cut queries under edge privacy: :func:`release_pairs`, :func:`cut`, :func:`cut_bound`.

Example:
    >>> import math, numpy as np, pgmjax as pj
    >>> data = pj.Dataset(np.array([[0, 1], [0, 0], [1, 0]]), {"b1": 2, "b2": 2})   # an already released table
    >>> rel = pj.rr.Release.of(data, math.log(3))
    >>> float(pj.rr.answer(rel, {"b1": pj.queries.Value(0)}, normalize=True, proper="round")[0])
    1.0
"""

from .bounds import bound_constant, max_informative_size, mse_bound, quantization_bits, quantized_mse_bound
from .channel import Channel, mixing_weight
from .engine import fit, measurements
from .estimators import Answer, StatisticalQuery, answer, debiased_marginal, exact_variance, proper_interval
from .graphs import CutEstimate, PairRelease, adjacency, cut, cut_bound, cut_count, pair_table, release_pairs
from .releases import Release, release

__all__ = [
    "Release",
    "release",
    "Channel",
    "mixing_weight",
    "Answer",
    "StatisticalQuery",
    "answer",
    "exact_variance",
    "debiased_marginal",
    "proper_interval",
    "measurements",
    "fit",
    "bound_constant",
    "mse_bound",
    "max_informative_size",
    "quantization_bits",
    "quantized_mse_bound",
    "PairRelease",
    "CutEstimate",
    "pair_table",
    "adjacency",
    "release_pairs",
    "cut",
    "cut_count",
    "cut_bound",
]
