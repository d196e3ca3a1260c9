"""Private preprocessing: a raw table to a dataset, every data-dependent choice paid for through the accountant.

This layer sits above :mod:`pgmjax.privacy` (it spends budget) and below the mechanisms; what the lower
layers need of a raw table (the schema, its columns, the lenient field parsers) stays in :mod:`pgmjax.data`.

* :mod:`~pgmjax.preprocessing.preprocess` (``pgmjax.preprocess``): :func:`~pgmjax.preprocessing.preprocess.private_schema`,
  a schema derived under differential privacy.
* :mod:`~pgmjax.preprocessing.private_bins` / :mod:`~pgmjax.preprocessing.private_range`: bin edges from a
  private range and private quantiles.
* :mod:`~pgmjax.preprocessing.private_format`: each column's kind by a private vote, and from the same noisy
  counts its decimals, date format, unreadable share and blanks.
* :mod:`~pgmjax.preprocessing.declarations`: the public declarations (kinds, decimals, date formats, ranges),
  checked before any noise is drawn.
* :mod:`~pgmjax.preprocessing.ranks` / :mod:`~pgmjax.preprocessing.raw_aggregates`: the only aggregates of a
  raw column the releases read (rank counts, class counts, value counts).
* :mod:`~pgmjax.preprocessing.raw_engines` / :mod:`~pgmjax.preprocessing.polars_fields`: the same aggregates
  computed by Polars or Dask on a raw table beyond memory.
"""
