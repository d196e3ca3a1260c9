"""The engine's compiled XLA programs, and freeing them.

Every model structure (cliques, measurement shapes) gets its own compiled programs, and JAX keeps each
one alive in its jit cache for the life of the process. An adaptive mechanism (MWEM, AIM) fits a new
structure every round, so a long run accumulates hundreds of programs it will never call again. On
XLA:CPU each program holds its own memory mappings, and a long run can fail inside LLVM with "Cannot
allocate memory" well before RAM is exhausted. :func:`release_compiled` frees the engine's programs, so
only the structures still in use get recompiled (the live programs are counted by :mod:`pgmjax.compiler`, where
every pgmjax program registers itself; the compiler owns the cache folder's checks too, :mod:`pgmjax.compiler.cache`:
this module holds the process's public switches).

:func:`enable_compilation_cache` (opt-in) keeps compiled programs on disk in JAX's persistent compilation
cache, so a *new process* fitting a structure it has fitted before loads its program instead of compiling it;
the environment variable ``PGMJAX_COMPILATION_CACHE=<folder>`` turns it on at import. The folder holds code
later processes run, so only a folder of the user's own that nobody else can write is accepted.

The engine's own programs for models whose largest potential block has at most
:data:`pgmjax.compiler.LOOP_EMITTERS_CELLS` cells are compiled with XLA:CPU's loop emitters, which generate
their code in about half the time (a per-program option, :class:`pgmjax.compiler.BySize`).
:func:`fast_compile` (opt-in; on by default in the command line) sets them for every program of the process,
models with larger blocks and the user's own programs included; ``PGMJAX_FAST_COMPILE=1`` turns it on at
import.
"""

from __future__ import annotations

import os

# The live programs and their release are the compiler's (every pgmjax program registers itself there); these
# names stay the public ones.
from .compiler import MAX_LIVE_PROGRAMS, bound_compiled, compiled_count, release_compiled  # noqa: E402,F401
# The cache folder and its checks are the compiler's too; this module holds the process's switches.
from .compiler.cache import (MIN_COMPILE_SECONDS, UntrustedCacheFolder, check_cache_folder,  # noqa: F401
                             default_cache_folder, use_cache_folder)


#: The environment variable naming a folder for the persistent compilation cache (read at import).
CACHE_ENV = "PGMJAX_COMPILATION_CACHE"


def enable_compilation_cache(path: str | os.PathLike | None = None,
                             min_compile_seconds: float = MIN_COMPILE_SECONDS) -> str | None:
    """Keep compiled XLA programs in a folder of your own, so later processes load them instead of compiling.

    An opt-in front to JAX's persistent compilation cache (``jax_compilation_cache_dir``). A fit's time
    is mostly the compilation of its one program (seconds to minutes on a CPU); a process that finds the
    program of the same structure (cliques, domain sizes, measurement shapes, dtype, method) in the
    cache skips compiling it (it still traces and lowers it, to find its key). It applies to every JAX
    program of the process, not only pgmjax's, and must be called before the first compilation it should
    cover. The cache is keyed by the program, jaxlib version and compiler options, so a stale entry is never
    used; the folder may be deleted at any time. What it saves a later process's first ``estimate`` is in the
    performance pages.

    The folder holds native code that later processes run: it must be yours and writable by nobody else
    (:func:`check_cache_folder`). A folder that is not is refused; one that cannot be created or written
    leaves the process uncached, with a warning (a fit never fails for the cache's sake).

    Args:
        path: the folder (created with mode 0o700 if absent); default ``$PGMJAX_COMPILATION_CACHE`` or
            ``~/.cache/pgmjax/xla``.
        min_compile_seconds: only programs that took at least this long to compile are written to JAX's
            cache (the many tiny programs are cheaper to compile than to read back; reading a fit's program
            back takes a small fraction of its compile time). A threshold near a program's own compile time
            writes it in some runs and not in others.

    Returns:
        The cache folder, or None where the cache stays off (the folder cannot be created or written).

    Raises:
        UntrustedCacheFolder: a ``PermissionError`` naming the folder, its owner and mode: a symbolic link,
            a folder owned by another user, or one its group or others can write.

    Example:
        >>> import tempfile
        >>> folder = enable_compilation_cache(tempfile.mkdtemp())  # doctest: +SKIP
    """
    import warnings

    path = os.fspath(path or os.environ.get(CACHE_ENV) or default_cache_folder())
    try:
        return use_cache_folder(path, min_compile_seconds)
    except UntrustedCacheFolder:
        raise
    except OSError as e:
        warnings.warn(f"pgmjax: compilation cache off: {_reason(e)}", UserWarning, stacklevel=2)
        return None


def _reason(e: Exception) -> str:
    # An OSError made with an errno carries its message in strerror (its str() starts "[Errno N]").
    return getattr(e, "strerror", None) or str(e)


def _enable_from_environment(path: str) -> None:
    """$PGMJAX_COMPILATION_CACHE at import: a folder refused or unusable warns, and the process runs uncached
    (an environment variable must never make ``import pgmjax`` fail)."""
    import warnings

    try:
        use_cache_folder(path, MIN_COMPILE_SECONDS)
    except Exception as e:  # anything at all: the import goes on, uncached
        warnings.warn(f"pgmjax: {CACHE_ENV} ignored, compilation cache off: {_reason(e)}", UserWarning, stacklevel=2)


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
    models with larger blocks (whose reductions then iterate markedly slower) and every other program
    of the process, the user's own included, except the size-class programs, which keep the fusion emitters
    by their own option (:func:`pgmjax.graph.program_choice.emitters_for`). The command line (``python -m pgmjax``) turns it on for its own
    process; a library user opts in, because the flag can only be set before JAX starts its CPU backend.
    GPU compilers ignore it. A jaxlib whose XLA has no such switch (0.11 and later,
    :func:`pgmjax.compiler.options.has_loop_emitters`) gets nothing: XLA aborts at start on a flag it does not know.

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
    from .compiler.options import has_loop_emitters

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
    _enable_from_environment(os.environ[CACHE_ENV])

if os.environ.get(FAST_COMPILE_ENV, "").strip() == "1" and not fast_compile(strict=False):
    import warnings

    warnings.warn(
        f"{FAST_COMPILE_ENV}=1 had no effect: JAX's backends had started before pgmjax was imported, or "
        "XLA_FLAGS sets --xla_cpu_use_fusion_emitters itself",
        stacklevel=2,
    )
