"""Deprecated path: the module is :mod:`pgmjax.preprocessing.preprocess` (private preprocessing sits above the privacy layer)."""
import warnings

warnings.warn("pgmjax.data.preprocess is deprecated: import pgmjax.preprocessing.preprocess instead", DeprecationWarning, stacklevel=2)
from pgmjax.preprocessing.preprocess import *  # noqa: E402, F401, F403
