"""Deprecated path: the module is :mod:`pgmjax.preprocessing.private_bins` (private preprocessing sits above the privacy layer)."""
import warnings

warnings.warn("pgmjax.data.private_bins is deprecated: import pgmjax.preprocessing.private_bins instead", DeprecationWarning, stacklevel=2)
from pgmjax.preprocessing.private_bins import *  # noqa: E402, F401, F403
