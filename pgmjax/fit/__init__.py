"""Fitting: from measurements to potentials.

* :mod:`~pgmjax.fit.losses`: the measurements' losses (L2, L1, Gaussian and Laplace likelihoods).
* :mod:`~pgmjax.fit.problem`: a fitting problem: loss of clique marginals, measurement-space predictions.
* :mod:`~pgmjax.fit.mirror_descent`, :mod:`~pgmjax.fit.dual_averaging`, :mod:`~pgmjax.fit.lbfgs`: the
  estimators as pure ``init``/``step`` pairs (shared pytree arithmetic in :mod:`~pgmjax.fit.tree_math`).
* :mod:`~pgmjax.fit.driver`: the methods by name and the chunked driver (:func:`~pgmjax.fit.driver.run`).
* :mod:`~pgmjax.fit.estimate`: :func:`pgmjax.estimate`, the one-call front door.
* :mod:`~pgmjax.fit.batch_problem` / :mod:`~pgmjax.fit.batch`: many problems of one structure fitted at
  once (:func:`pgmjax.estimate_batch`).
"""
