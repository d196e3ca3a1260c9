"""Data: the domain, the encoded dataset, schemas from raw tables to codes, and the shipped benchmarks.

* :mod:`~pgmjax.data.domain`: attributes and their sizes; cliques.
* :mod:`~pgmjax.data.dataset`: an integer-coded table over a domain, and its marginals.
* :mod:`~pgmjax.data.schema` / :mod:`~pgmjax.data.schema_columns`: how raw columns become codes and back.
* :mod:`~pgmjax.data.preprocess` / :mod:`~pgmjax.data.private_bins`: a raw table to a dataset, with bin
  edges found privately when asked.
* :mod:`~pgmjax.data.datasets`: the benchmark datasets (Titanic, Adult, Loans, Stroke, NLTCS) and their cliques.
* :mod:`~pgmjax.data.examples`: a generated raw table with a real table's difficulties.
"""
