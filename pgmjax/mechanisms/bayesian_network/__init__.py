"""PrivBayes and PrivBayes+PGM on the same noisy tables (Zhang et al., TODS 2017; +PGM: McKenna, Sheldon & Miklau, ICML 2019).

PrivBayes (Zhang, Cormode, Procopiuc, Srivastava, Xiao, "PrivBayes: private data release via
Bayesian networks", SIGMOD 2014 / ACM TODS 42(4) 2017) spends ``eps1 = beta eps`` on a Bayesian
network chosen greedily with the exponential mechanism (GreedyBayes, Algorithm 4 of the TODS paper)
and ``eps2 = (1 - beta) eps`` on Laplace-noised tables ``Pr[X_i, Pi_i]``; its own estimator clips
and normalises the noisy tables into conditionals and samples synthetic records from the network
(NoisyConditionals, Algorithm 1). PrivBayes+PGM (McKenna, Sheldon, Miklau, ICML 2019) feeds the very
same noisy tables to the graphical-model estimator (:func:`pgmjax.estimate`).

Neighbouring relation (``bounded``) and what it changes:

* ``bounded=True`` (replace one record, ``N`` public; the paper's and the authors' C++ convention):
  scores are the paper's, on normalised distributions, with the paper's sensitivities
  (``R``: ``3/N``; ``F``: ``1/N``; ``I``: :func:`mutual_information_sensitivity`); a table's L1
  sensitivity is 2; the usefulness rule uses the true ``N``; the original arm samples ``N`` records.
* ``bounded=False`` (add/remove one record, ``N`` private; the default of every pgmjax front-end):
  ``R`` and ``F`` are used on the count scale, ``N R`` and ``N F``, with sensitivities 2 and 1
  (proved in :func:`score_sensitivity`; ``R`` itself has no fixed sensitivity when ``N`` is private);
  the mutual-information score has no data-independent sensitivity under add/remove (one added
  record can raise ``N I`` by about ``log2 N``) and is refused; a table's L1 sensitivity is 1; the
  usefulness rule needs ``N``, so a share ``count_fraction`` of the budget buys a Laplace count
  first (only when ``degree`` is None); the number of records of both arms is estimated from the
  noisy count and the noisy tables.

Modules, one idea each; each imports only those above it:

* ``scores``: the candidates' scores ``I``, ``R``, ``F`` and the exponential mechanism's quality
  (:func:`score_quality`; TODS Section 4).
* ``sensitivity``: their sensitivities (:func:`score_sensitivity`; TODS Lemma 4.1).
* ``parent_sets``: the usefulness rules (:func:`usefulness_tau`, :func:`binary_degree`) and the
  maximal allowed parent sets (:func:`maximal_parent_sets`; TODS Section 4.4).
* ``network_search``: the private network (:func:`greedy_bayes`; TODS Algorithm 4).
* ``conditionals``: the original estimator (:func:`noisy_conditionals`, :func:`sample_network`;
  TODS Algorithm 1).
* ``privbayes_options``: the front-end's own options (:class:`PrivBayesOptions`), checked where made, and what
  its run reports (:class:`PrivBayesInfo`).
* ``front_end``: :func:`privbayes`, both arms on the same noisy tables.

The package is named for what it builds; the front-end keeps the mechanism's name
(``pgmjax.mechanisms.privbayes`` is the function).
"""

from .conditionals import noisy_conditionals, sample_network
from .front_end import ENGINE_BYTES_PER_CELL, privbayes
from .network_search import greedy_bayes
from .parent_sets import Network, binary_degree, maximal_parent_sets, usefulness_tau
from .privbayes_options import PrivBayesInfo, PrivBayesOptions
from .scores import SCORES, f_score, mutual_information, r_score, score_quality
from .sensitivity import mutual_information_sensitivity, score_sensitivity

__all__ = [
    "privbayes",
    "PrivBayesOptions",
    "PrivBayesInfo",
    "ENGINE_BYTES_PER_CELL",
    "SCORES",
    "Network",
    "greedy_bayes",
    "maximal_parent_sets",
    "usefulness_tau",
    "binary_degree",
    "mutual_information",
    "r_score",
    "f_score",
    "score_quality",
    "score_sensitivity",
    "mutual_information_sensitivity",
    "noisy_conditionals",
    "sample_network",
]
