"""The engine's compiled XLA programs, and freeing them.

Every model structure (cliques, measurement shapes) gets its own compiled programs, and JAX keeps each
one alive in its jit cache for the life of the process. An adaptive mechanism (MWEM, AIM) fits a new
structure every round, so a long run accumulates hundreds of programs it will never call again. On
XLA:CPU each program holds its own memory mappings, and a long run can fail inside LLVM with "Cannot
allocate memory" well before RAM is exhausted. :func:`release_compiled` frees the engine's programs, so
only the structures still in use get recompiled.

:func:`enable_compilation_cache` (opt-in) keeps compiled programs on disk, so a *new process* fitting a
structure it has fitted before loads its program instead of compiling it: the engine's own programs by model
structure (:mod:`pgmjax.program_store`, no tracing either), the others in JAX's persistent compilation cache;
the environment variable ``PGMJAX_COMPILATION_CACHE=<folder>`` turns it on at import.

The engine's own programs for models whose largest potential block has at most
:data:`pgmjax.compiler.LOOP_EMITTERS_CELLS` cells are compiled with XLA:CPU's loop emitters, which generate
their code in about half the time (a per-program option, :class:`pgmjax.compiler.BySize`).
:func:`fast_compile` (opt-in; on by default in the command line) sets them for every program of the process,
models with larger blocks and the user's own programs included; ``PGMJAX_FAST_COMPILE=1`` turns it on at
import.
"""

from __future__ import annotations

import gc
import os

# What an adaptive mechanism lets the engine hold before freeing: a few rounds' worth (each fit compiles
# about three programs), far below where XLA:CPU runs out of mappings (hundreds of large programs).
MAX_LIVE_PROGRAMS = 32


def _engine_functions() -> tuple:
    # Imported here: this module sits below the modules whose jitted functions it lists.
    from .fit import batch, estimation
    from .model import graphical_model as model
    from .model import inference, sampling

    # estimate_batch's programs (one set per batched structure), those of them batch.py defines
    batched = tuple(f for f in (getattr(batch, n, None) for n in ("_vmapped_start", "_advance", "_vmapped_started", "_loss"))
                    if hasattr(f, "_cache_size"))
    return (
        estimation._init,
        estimation._chunk,
        estimation._model_loss,
        model._marginals_jit,
        model._log_partition_jit,
        inference._answer_many_jit,
        sampling._conditional_cdf,
        sampling._draw,
        *batched,
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
    # The executables (and their memory maps) go when their Python owners do, and some owners sit in reference
    # cycles: collect them now rather than at the collector's next full pass (the maps of a loop over new
    # structures kept growing by about 30 per fit without this).
    gc.collect()
    return True


#: The environment variable overriding :data:`MAX_LIVE_PROGRAMS` for :func:`bound_compiled` (read at every call;
#: ``0`` or ``inf``: never free automatically).
MAX_LIVE_ENV = "PGMJAX_MAX_LIVE_PROGRAMS"


def bound_compiled(limit: int | None = None) -> bool:
    """Free the engine's compiled programs once more than ``limit`` are live: called before every fit.

    :func:`pgmjax.graph.oracle_plan.make_plan`, which every fit calls before it compiles anything, calls
    this, so a loop that fits thousands of new structures holds at most ``limit`` (plus one fit's worth of)
    programs with no action of its own: without it each new structure left about 4.4 MB and 130 memory
    maps behind (``bench/results/memory_loop_cpu.md``). JAX's caches cannot drop single programs, so all of
    the engine's are freed at once; a process that reuses at most ``limit / 3`` structures (a fit compiles
    about three programs) never recompiles.

    Args:
        limit: the most live programs kept (default ``$PGMJAX_MAX_LIVE_PROGRAMS``, else
            :data:`MAX_LIVE_PROGRAMS`); 0 or ``math.inf`` never frees.

    Returns:
        Whether programs were freed.

    Example:
        >>> bound_compiled(10**6)
        False
    """
    if limit is None:
        env = os.environ.get(MAX_LIVE_ENV, "").strip().lower()
        if env in ("0", "inf", "none"):
            return False
        try:
            limit = int(env) if env else MAX_LIVE_PROGRAMS
        except ValueError:
            raise ValueError(f"{MAX_LIVE_ENV}={env!r}: expected a whole number of programs (0: never free)") from None
    if not limit or limit == float("inf"):
        return False
    return release_compiled(above=int(limit))


#: The environment variable naming a folder for the persistent compilation cache (read at import).
CACHE_ENV = "PGMJAX_COMPILATION_CACHE"


def enable_compilation_cache(path: str | os.PathLike | None = None, min_compile_seconds: float = 0.1,
                             programs: bool = True) -> str:
    """Keep compiled XLA programs in a folder on disk, so later processes load them instead of compiling.

    An opt-in front to JAX's persistent compilation cache (``jax_compilation_cache_dir``). A fit's time
    is mostly the compilation of its one program (seconds to minutes on a CPU); a process that finds the
    program of the same structure (cliques, domain sizes, measurement shapes, dtype, method) in the
    cache skips it. It applies to every JAX program of the process, not only pgmjax's, and must be
    called before the first compilation it should cover. The cache is keyed by the program, jaxlib
    version and compiler options, so a stale entry is never used; the folder may be deleted at any time.

    With ``programs`` (the default) the engine's own programs are also kept by model structure in a
    ``programs`` folder inside it (:mod:`pgmjax.program_store`): a later process then skips tracing and
    lowering them as well, which JAX's cache needs to find its key. Measured on the 2-core CPU
    (``bench/compilation_cache.py``, first ``estimate(50)`` in a later process, 2026-11-25): a generated
    50-attribute problem 1.30 s with the program store, 2.18 s with JAX's cache alone, 6.60 s with no cache;
    Adult MST-style 0.14, 0.53 and 1.44 s.

    Args:
        path: the folder (created if needed); default ``$PGMJAX_COMPILATION_CACHE`` or
            ``~/.cache/pgmjax/xla``.
        min_compile_seconds: only programs that took at least this long to compile are written to JAX's
            cache (the many tiny programs are cheaper to compile than to read back). Loading a fit's program took 5-10% of
            its compile time on the 2-core CPU (``bench/compilation_cache.py``: 0.02-0.05 s for programs of
            0.5 s, 0.28 s for one of 4 s); at the former 0.5 s, NLTCS's fit program (0.49-0.52 s) was written
            in one run of two and recompiled in the other.
        programs: also keep the engine's programs by structure (:mod:`pgmjax.program_store`).

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
    from . import program_store

    if programs:
        program_store.enable(os.path.join(path, "programs"))
    else:
        program_store.disable()
    return path


#: The XLA flag :func:`fast_compile` adds: XLA:CPU's loop emitters instead of its MLIR fusion emitters.
FAST_COMPILE_FLAG = "--xla_cpu_use_fusion_emitters=false"

#: The environment variable that turns :func:`fast_compile` on at import (``1``) or keeps the command line
#: from turning it on (``0``).
FAST_COMPILE_ENV = "PGMJAX_FAST_COMPILE"


def fast_compile_enabled() -> bool:
    """Whether this process's XLA:CPU compiles with the loop emitters (``XLA_FLAGS`` names the flag as false)."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    values = [f.split("=", 1)[1].lower() for f in flags if f.startswith("--xla_cpu_use_fusion_emitters=")]
    return bool(values) and values[-1] in ("false", "0")


def fast_compile(strict: bool = True) -> bool:
    """Compile every XLA:CPU program of this process with XLA's loop emitters.

    A fit's first call is nearly all XLA:CPU's code generation of its program's few hundred fused kernels.
    XLA's older loop emitters (``--xla_cpu_use_fusion_emitters=false``) generate them in about half the
    time of its MLIR fusion emitters, the default of jaxlib 0.10; the programs compute the same arithmetic.
    The engine already compiles its programs with them where the model's largest potential block has at
    most :data:`pgmjax.compiler.LOOP_EMITTERS_CELLS` cells (a per-program option); this flag adds the
    models with larger blocks (Adult's benchmark cliques then iterate 37% slower) and every other program
    of the process, the user's own included. Measured in ``bench/results/fast_compile_cpu.md``. The command line (``python -m pgmjax``) turns it on for its own
    process; a library user opts in, because the flag can only be set before JAX starts its CPU backend.
    GPU compilers ignore it. A jaxlib whose XLA has no such switch (0.11 and later,
    :func:`pgmjax.compiler.has_loop_emitters`) gets nothing: XLA aborts at start on a flag it does not know.

    Args:
        strict: raise if JAX's backends are already running (else return False and change nothing).

    Returns:
        Whether the loop emitters are in force for this process's programs compiled from now on: False
        where ``XLA_FLAGS`` already names the flag as true (the user's choice is kept) or the installed
        jaxlib has no such switch.

    Raises:
        RuntimeError: with ``strict``, when JAX has already started its backends (the flags are read then).

    Example (first thing in a fresh process):
        >>> import pgmjax
        >>> pgmjax.programs.fast_compile()  # doctest: +SKIP
        True
        >>> pgmjax.programs.fast_compile_enabled() in (True, False)
        True
    """
    if fast_compile_enabled():
        return True
    from .compiler import has_loop_emitters

    if not has_loop_emitters():  # an XLA without the switch aborts at start on an unknown flag
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_cpu_use_fusion_emitters" in flags:  # set to true by the user: theirs to keep
        return False
    from jax._src import xla_bridge

    # A JAX without this query is treated as started: the flag is then never set behind XLA's back.
    if getattr(xla_bridge, "backends_are_initialized", lambda: True)():
        if strict:
            raise RuntimeError(
                "pgmjax.fast_compile() must run before JAX's first computation (XLA reads its flags when its "
                "backends start, and they have started): call it right after importing pgmjax, or set "
                f"{FAST_COMPILE_ENV}=1 (or XLA_FLAGS={FAST_COMPILE_FLAG}) in the environment"
            )
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {FAST_COMPILE_FLAG}".strip()
    return True


if os.environ.get(CACHE_ENV):
    enable_compilation_cache(os.environ[CACHE_ENV])

if os.environ.get(FAST_COMPILE_ENV, "").strip() == "1" and not fast_compile(strict=False):
    import warnings

    warnings.warn(
        f"{FAST_COMPILE_ENV}=1 had no effect: JAX's backends had started before pgmjax was imported, or "
        "XLA_FLAGS sets --xla_cpu_use_fusion_emitters itself",
        stacklevel=2,
    )
