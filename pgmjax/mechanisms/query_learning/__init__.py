"""MLDP and MLDP+PGM: publish a model learned from noisy query answers, with and without the engine.

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model
Publishing", IEEE BigData 2017 (arXiv 1710.05095), Algorithm 1; the "+PGM" arm replaces the
regression model by graphical-model estimation (McKenna, Sheldon & Miklau, ICML 2019, arXiv
1901.09136).

MLDP treats queries as training samples. A set of training queries ``F_x`` is answered once with
Laplace noise calibrated to the set's sensitivity ``S_Fx`` (the paper's Definition 4); a prediction
model is fitted to the noisy answers and published; the model answers the published queries and
predicts fresh ones at no further privacy cost (post-processing).

Queries are linear counting queries on a clique's marginal, held by a :class:`QuerySet`: blocks of
rows over the clique's cells (the marginal's cells in row-major order of the clique's axes). 0/1 rows
are counting queries: range queries in 1-D (:meth:`QuerySet.ranges`) and 2-D
(:meth:`QuerySet.rectangles`), subset sums (:meth:`QuerySet.subset_sums`), single cells
(:meth:`QuerySet.cells`); any real row is accepted.

Pieces (each usable on its own), one module each; each imports only those above it:

* ``query_set``: :class:`QuerySet`, the queries (Section III-A).
* ``sensitivity``: :func:`training_sensitivity`, ``S_Fx`` exactly (Definition 4): the largest total
  change of all training answers when one record is added or removed (the max column L1 norm of the
  stacked training matrix, over records when the queries span several cliques); doubled for
  replace-one neighbours.
* ``selection``: :func:`select_training`, the paper's training-set selector (Section III-C:
  coverage vs correlation, a target size ``m``, seeded ties); it reads only the public queries.
* ``regression``: :func:`fit_regression`, the original arm, a regression model of Section III-D
  (:class:`RegressionModel`): linear regression on indicator features (least squares, optional
  ridge) or the Gaussian-basis model.
* ``pgm_arm``: :func:`fit_pgm`, the +PGM arm: the same noisy answers as linear measurements, one
  :func:`pgmjax.estimate`.
* ``mldp_options``: MLDP's own options (:class:`MLDPOptions`), checked where made, and what its run reports
  (:class:`MLDPInfo`).
* ``front_end``: :func:`mldp`, Algorithm 1 with both arms on the same noise, returning a
  :class:`~pgmjax.mechanisms.result.MechanismResult`; :func:`laplace_baseline`, the paper's
  baseline, every published query answered with Laplace noise calibrated to the whole published
  set's sensitivity.

The package is named for what it does; the front-end keeps the mechanism's name
(``pgmjax.mechanisms.mldp`` is the function).

Example:
    >>> import jax, numpy as np, pgmjax as pj
    >>> dom = pj.Domain({"grade": 4})
    >>> data = pj.Dataset(np.repeat(np.arange(4), [12, 24, 6, 7])[:, None], dom)
    >>> ranges = QuerySet.ranges(dom, "grade")                  # the paper's Table I: 10 range queries
    >>> training_sensitivity(ranges), training_sensitivity(QuerySet.cells(dom, "grade"))
    (6.0, 1.0)
    >>> res = mldp(data, 1.0, key=jax.random.key(0), training=ranges, size=4, engine_iters=200)
    >>> res.info.sensitivity, res.accountant.spent == 1.0
    (1.0, True)
"""

from .front_end import laplace_baseline, mldp
from .mldp_options import MLDPInfo, MLDPOptions
from .pgm_arm import fit_pgm, pgm_measurements
from .query_set import QuerySet
from .regression import MODELS, RegressionModel, fit_regression
from .selection import select_training
from .sensitivity import sensitivity_is_exact, training_sensitivity

__all__ = [
    "QuerySet",
    "RegressionModel",
    "MODELS",
    "mldp",
    "MLDPOptions",
    "MLDPInfo",
    "select_training",
    "training_sensitivity",
    "sensitivity_is_exact",
    "fit_regression",
    "fit_pgm",
    "pgm_measurements",
    "laplace_baseline",
]
