"""Deprecated path: the module is :mod:`pgmjax.preprocessing.ranks` (private preprocessing sits above the privacy layer)."""
import warnings

warnings.warn("pgmjax.data.ranks is deprecated: import pgmjax.preprocessing.ranks instead", DeprecationWarning, stacklevel=2)
from pgmjax.preprocessing.ranks import *  # noqa: E402, F401, F403
