"""Deprecated path: the module is :mod:`pgmjax.datasets` (``pj.datasets``; the benchmark cliques' draw reads the graph layer)."""
import warnings

warnings.warn("pgmjax.data.datasets is deprecated: import pgmjax.datasets instead", DeprecationWarning, stacklevel=2)
from pgmjax.datasets import *  # noqa: E402, F401, F403
