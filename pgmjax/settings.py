"""The process settings the engine takes from the environment: read once, here, when pgmjax is imported.

Two environment variables shape what the engine does, and both are process settings in the way XLA's own flags
are (XLA reads ``XLA_FLAGS`` once, when its backends start):

* ``XLA_FLAGS`` naming a backend optimisation level (``--xla_backend_optimization_level=N``): that level then holds
  for every program, the engine's included (:func:`pgmjax.compiler.options.engine_options` leaves its own out);
* ``PGMJAX_MAX_MODEL_BYTES``: the model-size limit where neither a call's ``max_bytes`` nor
  :func:`pgmjax.set_max_model_bytes` gives one (:mod:`pgmjax.graph.size_limit`; checked where a check first needs it,
  so a bad value fails that check, not the import).

:func:`read` turns an environment into a :class:`Settings`; :data:`PROCESS` is this process's, read at import. No
function of the engine reads the environment: they read :data:`PROCESS` (set the variables before importing pgmjax).
The command line's and the persistent cache's own switches are :mod:`pgmjax.programs`'.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

#: The environment variable holding the model-size limit in bytes (:mod:`pgmjax.graph.size_limit`).
MAX_MODEL_BYTES_ENV = "PGMJAX_MAX_MODEL_BYTES"


@dataclasses.dataclass(frozen=True)
class Settings:
    """The engine's process settings.

    Attributes:
        xla_level_named: ``XLA_FLAGS`` names a backend optimisation level.
        max_model_bytes: ``PGMJAX_MAX_MODEL_BYTES`` as written, stripped ("" where unset).
    """

    xla_level_named: bool = False
    max_model_bytes: str = ""


def read(environ: Mapping[str, str]) -> Settings:
    """The :class:`Settings` an environment gives.

    Example:
        >>> read({"XLA_FLAGS": "--xla_backend_optimization_level=0", "PGMJAX_MAX_MODEL_BYTES": " 8e9 "})
        Settings(xla_level_named=True, max_model_bytes='8e9')
        >>> read({})
        Settings(xla_level_named=False, max_model_bytes='')
    """
    return Settings(xla_level_named="--xla_backend_optimization_level" in environ.get("XLA_FLAGS", ""),
                    max_model_bytes=environ.get(MAX_MODEL_BYTES_ENV, "").strip())


#: This process's settings, read once at import.
PROCESS: Settings = read(os.environ)
