"""Deprecated path: the module is :mod:`pgmjax.preprocessing.private_format` (private preprocessing sits above the privacy layer)."""
import warnings

warnings.warn("pgmjax.data.private_format is deprecated: import pgmjax.preprocessing.private_format instead", DeprecationWarning, stacklevel=2)
from pgmjax.preprocessing.private_format import *  # noqa: E402, F401, F403
