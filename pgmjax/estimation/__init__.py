"""Fitting: from measurements to potentials.

* :mod:`~pgmjax.estimation.losses`: the measurements' losses (L2, L1, Gaussian and Laplace likelihoods).
* :mod:`~pgmjax.estimation.problem`: a fitting problem: loss of clique marginals, measurement-space predictions.
* :mod:`~pgmjax.estimation.mirror_descent`, :mod:`~pgmjax.estimation.dual_averaging`, :mod:`~pgmjax.estimation.lbfgs`: the
  estimators as pure ``init``/``step`` pairs (shared pytree arithmetic in :mod:`~pgmjax.estimation.tree_math`).
* :mod:`~pgmjax.estimation.continuation`: the L1 loss's smoothing stages, one wrapper around any estimator.
* :mod:`~pgmjax.estimation.driver`: the chunked driver (:func:`~pgmjax.estimation.driver.run`).
* :mod:`~pgmjax.estimation.estimate`: :func:`pgmjax.estimate`, the one-call front door.
* :mod:`~pgmjax.estimation.batch_problem` / :mod:`~pgmjax.estimation.batch`: many problems of one structure fitted at
  once (:func:`pgmjax.estimate_batch`).
"""
