"""The fitted model: answering queries, sampling, saving, and scoring.

* :mod:`~pgmjax.model.graphical_model`: :class:`~pgmjax.GraphicalModel`, potentials and clique marginals.
* :mod:`~pgmjax.model.consistency`: the checks a model passes at construction and before it is sampled or saved.
* :mod:`~pgmjax.model.answer_programs`: the compiled programs a model's marginals and ``log Z`` come from.
* :mod:`~pgmjax.model.fit_report`: :class:`~pgmjax.FitReport` and :class:`~pgmjax.Fit`: what a fit learned.
* :mod:`~pgmjax.model.inference`: answers to factored queries from clique marginals.
* :mod:`~pgmjax.model.sampling` / :mod:`~pgmjax.model.rounding`: synthetic records from the model.
* :mod:`~pgmjax.model.serialization`: saving and loading fitted models.
* :mod:`~pgmjax.model.batch_model`: a batch of models of one structure.
* :mod:`~pgmjax.model.metrics`: errors of a model (or any estimate) against data.
"""
