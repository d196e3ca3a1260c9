"""Fitting: from measurements to potentials.

* :mod:`~pgmjax.fit.losses`: the measurements' losses (L2, L1, Gaussian and Laplace likelihoods).
* :mod:`~pgmjax.fit.problem`: a fitting problem: loss of clique marginals, measurement-space predictions.
* :mod:`~pgmjax.fit.estimation`: the estimators (mirror descent, dual averaging, L-BFGS) as pure
  ``init``/``step`` pairs, and the chunked driver.
* :mod:`~pgmjax.fit.estimate`: :func:`pgmjax.estimate`, the one-call front door.
* :mod:`~pgmjax.fit.batch_problem` / :mod:`~pgmjax.fit.batch`: many problems of one structure fitted at
  once (:func:`pgmjax.estimate_batch`).
"""
