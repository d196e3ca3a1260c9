"""Deprecated path: the module is :mod:`pgmjax.preprocessing.raw_engines` (private preprocessing sits above the privacy layer)."""
import warnings

warnings.warn("pgmjax.data.raw_engines is deprecated: import pgmjax.preprocessing.raw_engines instead", DeprecationWarning, stacklevel=2)
from pgmjax.preprocessing.raw_engines import *  # noqa: E402, F401, F403
