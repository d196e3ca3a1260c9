"""Data: the domain, the encoded dataset, schemas from raw tables to codes, and the shipped benchmarks.

* :mod:`~pgmjax.data.domain`: attributes and their sizes; cliques.
* :mod:`~pgmjax.data.dataset`: an integer-coded table over a domain, and its marginals.
* :mod:`~pgmjax.data.schema` / :mod:`~pgmjax.data.schema_columns`: how raw columns become codes and back.
* :mod:`~pgmjax.data.raw_fields`: raw fields parsed leniently (numbers, dates, datetimes; unparsable is missing).
* :mod:`~pgmjax.data.date_forms`: dates written year first, day first or month first besides ISO.
* :mod:`~pgmjax.data.engines` / :mod:`~pgmjax.data.frame_backends`: a dataset whose records stay with Polars or Dask.
* :mod:`~pgmjax.data.examples`: a generated raw table with a real table's difficulties.

A raw table's private preprocessing (it spends budget) is the layer :mod:`pgmjax.preprocessing`, above
:mod:`pgmjax.privacy`; the benchmark catalogue (its cliques' draw reads junction trees) is :mod:`pgmjax.datasets`.
"""
