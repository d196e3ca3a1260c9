"""DualQuery and DualQuery+PGM: private query release as a zero-sum game, with and without the engine.

Gaboardi, Gallego Arias, Hsu, Roth & Wu, "Dual Query: Practical Private Query Release for High
Dimensional Data", ICML 2014; the "+PGM" arm: McKenna, Sheldon & Miklau, "Graphical-model based
estimation and inference for differential privacy", ICML 2019 (the DualQuery experiment).

Modules, one idea each; each imports only those above it:

* ``queries``: the query class (a workload's factored rows and their negations) and the data player's
  best response, solved exactly by max-sum variable elimination (:func:`max_sum_ve`).
* ``transcript``: what DualQuery releases (:class:`DualQueryTranscript`) and its negative
  log-likelihood as a loss of the marginals (:class:`TranscriptLoss`).
* ``dualquery_options``: the front-end's own options (:class:`DualQueryOptions`), checked where made, and what
  its run reports (:class:`DualQueryInfo`).
* ``front_end``: the privacy plan (:func:`dualquery_plan`), the game (:func:`simulate`) and
  :func:`dualquery`, both arms on the same transcript.

The package is named for what it does; the front-end keeps the mechanism's name
(``pgmjax.mechanisms.dualquery`` is the function).
"""

from .dualquery_options import DualQueryInfo, DualQueryOptions
from .front_end import dualquery, dualquery_plan, simulate
from .queries import max_sum_ve
from .transcript import DualQueryTranscript, TranscriptLoss

__all__ = ["dualquery", "DualQueryOptions", "DualQueryInfo", "dualquery_plan", "DualQueryTranscript", "TranscriptLoss", "max_sum_ve", "simulate"]
