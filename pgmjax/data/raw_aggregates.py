"""Deprecated path: the module is :mod:`pgmjax.preprocessing.raw_aggregates` (private preprocessing sits above the privacy layer)."""
import warnings

warnings.warn("pgmjax.data.raw_aggregates is deprecated: import pgmjax.preprocessing.raw_aggregates instead", DeprecationWarning, stacklevel=2)
from pgmjax.preprocessing.raw_aggregates import *  # noqa: E402, F401, F403
