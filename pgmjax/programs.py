"""The engine's compiled XLA programs, and freeing them.

Every model structure (cliques, measurement shapes) gets its own compiled programs, and JAX keeps each
one alive in its jit cache for the life of the process. An adaptive mechanism (MWEM, AIM) fits a new
structure every round, so a long run accumulates hundreds of programs it will never call again. On
XLA:CPU each program holds its own memory mappings, and a long run can fail inside LLVM with "Cannot
allocate memory" well before RAM is exhausted. :func:`release_compiled` frees the engine's programs, so
only the structures still in use get recompiled.

:func:`enable_compilation_cache` (opt-in) keeps compiled programs on disk, so a *new process* fitting a
structure it has fitted before loads its program instead of compiling it (JAX's persistent compilation
cache); the environment variable ``PGMJAX_COMPILATION_CACHE=<folder>`` turns it on at import.
"""

from __future__ import annotations

import os

# What an adaptive mechanism lets the engine hold before freeing: a few rounds' worth (each fit compiles
# about three programs), far below where XLA:CPU runs out of mappings (hundreds of large programs).
MAX_LIVE_PROGRAMS = 32


def _engine_functions() -> tuple:
    # Imported here: this module sits below the modules whose jitted functions it lists.
    from .fit import estimation
    from .model import graphical_model as model
    from .model import inference, sampling

    return (
        estimation._init,
        estimation._chunk,
        estimation._model_loss_and_marginals,
        model._marginals_jit,
        model._log_partition_jit,
        inference._answer_many_jit,
        sampling._conditional_cdf,
        sampling._draw,
    )


def compiled_count() -> int:
    """How many compiled programs the engine's jitted functions hold now."""
    return sum(fn._cache_size() for fn in _engine_functions())


def release_compiled(above: int = 0) -> bool:
    """Free every compiled program the engine's own jitted functions hold, if they hold more than ``above``.

    Programs of JAX functions outside the engine are untouched (unlike ``jax.clear_caches()``). The
    next call of an engine function for a structure recompiles it. MWEM and AIM call this with a
    threshold before each round's fit, so a long run holds a bounded number of programs while short
    runs (and repeated runs on one structure) keep reusing theirs.

    Args:
        above: free only if :func:`compiled_count` exceeds this (0: free whatever is held).

    Returns:
        Whether programs were freed.

    Example:
        >>> import pgmjax as pj
        >>> _ = pj.release_compiled()        # whatever was held is freed
        >>> compiled_count(), pj.release_compiled()
        (0, False)
    """
    if compiled_count() <= above:
        return False
    for fn in _engine_functions():
        fn.clear_cache()
    return True


#: The environment variable naming a folder for the persistent compilation cache (read at import).
CACHE_ENV = "PGMJAX_COMPILATION_CACHE"


def enable_compilation_cache(path: str | os.PathLike | None = None, min_compile_seconds: float = 0.5) -> str:
    """Keep compiled XLA programs in a folder on disk, so later processes load them instead of compiling.

    An opt-in front to JAX's persistent compilation cache (``jax_compilation_cache_dir``). A fit's time
    is mostly the compilation of its one program (seconds to minutes on a CPU); a process that finds the
    program of the same structure (cliques, domain sizes, measurement shapes, dtype, method) in the
    cache skips it. It applies to every JAX program of the process, not only pgmjax's, and must be
    called before the first compilation it should cover. The cache is keyed by the program, jaxlib
    version and compiler options, so a stale entry is never used; the folder may be deleted at any time.

    Args:
        path: the folder (created if needed); default ``$PGMJAX_COMPILATION_CACHE`` or
            ``~/.cache/pgmjax/xla``.
        min_compile_seconds: only programs that took at least this long to compile are written
            (the many tiny programs are cheaper to compile than to read back).

    Returns:
        The cache folder.

    Example:
        >>> import tempfile
        >>> folder = enable_compilation_cache(tempfile.mkdtemp())  # doctest: +SKIP
    """
    import jax

    path = os.fspath(path or os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "pgmjax", "xla"))
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_enable_compilation_cache", True)
    return path


if os.environ.get(CACHE_ENV):
    enable_compilation_cache(os.environ[CACHE_ENV])
