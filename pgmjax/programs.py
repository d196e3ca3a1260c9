"""The engine's compiled XLA programs, and freeing them.

Every model structure (cliques, measurement shapes) gets its own compiled programs, and JAX keeps each
one alive in its jit cache for the life of the process. An adaptive mechanism (MWEM, AIM) fits a new
structure every round, so a long run accumulates hundreds of programs it will never call again. On
XLA:CPU each program holds its own memory mappings, and a long run can fail inside LLVM with "Cannot
allocate memory" well before RAM is exhausted. :func:`release_compiled` frees the engine's programs, so
only the structures still in use get recompiled.
"""

from __future__ import annotations

# What an adaptive mechanism lets the engine hold before freeing: a few rounds' worth (each fit compiles
# about three programs), far below where XLA:CPU runs out of mappings (hundreds of large programs).
MAX_LIVE_PROGRAMS = 32


def _engine_functions() -> tuple:
    # Imported here: this module sits below the modules whose jitted functions it lists.
    from . import estimation, inference, model, sampling

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
        >>> pj.release_compiled()
        False
    """
    if compiled_count() <= above:
        return False
    for fn in _engine_functions():
        fn.clear_cache()
    return True
