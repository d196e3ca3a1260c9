"""Deprecated path: the module is :mod:`pgmjax.preprocessing.private_range` (private preprocessing sits above the privacy layer)."""
import warnings

warnings.warn("pgmjax.data.private_range is deprecated: import pgmjax.preprocessing.private_range instead", DeprecationWarning, stacklevel=2)
from pgmjax.preprocessing.private_range import *  # noqa: E402, F401, F403
