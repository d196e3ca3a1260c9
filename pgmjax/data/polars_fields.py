"""Deprecated path: the module is :mod:`pgmjax.preprocessing.polars_fields` (private preprocessing sits above the privacy layer)."""
import warnings

warnings.warn("pgmjax.data.polars_fields is deprecated: import pgmjax.preprocessing.polars_fields instead", DeprecationWarning, stacklevel=2)
from pgmjax.preprocessing.polars_fields import *  # noqa: E402, F401, F403
