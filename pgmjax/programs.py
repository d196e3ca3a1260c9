"""The engine's compiled XLA programs, and freeing them.

Every model structure (cliques, measurement shapes) gets its own compiled programs, and JAX keeps each
one alive in its jit cache for the life of the process. An adaptive mechanism (MWEM, AIM) fits a new
structure every round, so a long run accumulates hundreds of programs it will never call again. On
XLA:CPU each program holds its own memory mappings, and a long run can fail inside LLVM with "Cannot
allocate memory" well before RAM is exhausted. :func:`release_compiled` frees the engine's programs, so
only the structures still in use get recompiled (the live programs are counted by :mod:`pgmjax.compiler`, where
every pgmjax program registers itself).

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


#: The environment variable naming a folder for the persistent compilation cache (read at import).
CACHE_ENV = "PGMJAX_COMPILATION_CACHE"


class UntrustedCacheFolder(PermissionError):
    """The compilation cache folder is one that someone else could write: pgmjax will not run programs from it."""


def _default_cache_folder() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "pgmjax", "xla")


def check_cache_folder(path: str | os.PathLike) -> str:
    """Make sure ``path`` is a folder only this user can write, reached only through folders others cannot change.

    The folder's files are compiled programs (native code) that a later process loads and runs, so anyone who
    can write there, or can replace the folder, runs code as whoever next fits a model with the cache on. The
    check is therefore of the whole path, not of the folder alone:

    * **the folder** is a real folder (not a symbolic link, which could be pointed elsewhere) owned by the
      current user and not writable by its group or others; it is created with mode 0o700 if absent;
    * **every folder above it**, on the path as given and on the path with its symbolic links resolved, belongs
      to the user or to root and is not writable by its group or others, unless it has the sticky bit (as
      ``/tmp`` has), under which nobody else can rename or delete the user's folder. A parent another user
      could write would let them rename the checked folder away and put their own in its place after the
      check; a symbolic link on the way is judged by where it leads;
    * **its contents**: every entry belongs to the user, is not writable by its group or others, and is not a
      symbolic link (a file another user planted, or left world-writable, is code they could change).

    With all three true, no other user can change what the folder holds for as long as the process runs: its
    owner and mode, and those of every folder above it, can only be changed by the user or root. That is why
    the check runs once, when the cache is turned on, and not again before each read.

    Args:
        path: the folder.

    Returns:
        The folder, as a string (``os.fspath``).

    Raises:
        UntrustedCacheFolder: a symbolic link, a folder owned by another user or one its group or others can
            write, a parent folder others could change, or contents that are not the user's alone; the message
            names the folder (or the parent, or the entry), its owner and mode, and what is expected.
        OSError: the folder cannot be created, is not a folder, or cannot be written by this user.

    Example:
        >>> import tempfile, os
        >>> folder = check_cache_folder(os.path.join(tempfile.mkdtemp(), "xla"))
        >>> oct(os.stat(folder).st_mode & 0o777)
        '0o700'
    """
    import stat

    path = os.fspath(path)
    _check_parents(path)  # before creating anything there
    try:
        # Only the folder itself gets 0o700; parents missing on the way get the usual mode.
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:  # a file, or a link to one, of that name: reported below
        pass
    except OSError as e:
        raise OSError(e.errno, f"the compilation cache folder {path!r} cannot be created: {e.strerror}") from e
    st = os.lstat(path)  # the folder itself, not what a link points to
    if stat.S_ISLNK(st.st_mode):
        raise UntrustedCacheFolder(
            f"the compilation cache folder {path!r} is a symbolic link (to {os.readlink(path)!r}); expected a "
            f"real folder owned by you (uid {_uid()}) that group and others cannot write: its files are programs "
            "this process would run. Give the link's target itself, or another folder")
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(20, f"the compilation cache folder {path!r} is not a folder")
    mode = stat.S_IMODE(st.st_mode)
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or mode & 0o022):
        raise UntrustedCacheFolder(
            f"the compilation cache folder {path!r} is owned by uid {st.st_uid}{_user(st.st_uid)} with mode "
            f"0o{mode:03o}; expected a folder owned by you (uid {os.getuid()}{_user(os.getuid())}) that group "
            "and others cannot write (mode 0o700, say): its files are compiled programs this process would run, "
            "so whoever can write there runs code as you. Use a folder of your own "
            f"(`chmod 700 {path}` if it is yours and not shared), or leave the cache off")
    _check_parents(path)  # again, now that every part exists: the resolved path included
    _check_contents(path)
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(13, f"the compilation cache folder {path!r} (mode 0o{mode:03o}) is read-only: "
                                  "this process cannot write there")
    return path


def _ancestors(path: str) -> list[str]:
    """The folders above ``path`` (absolute, nearest first), as written and with symbolic links resolved."""
    seen: list[str] = []
    for start in (os.path.abspath(path), os.path.realpath(path)):
        parent = os.path.dirname(start)
        while True:
            if parent not in seen:
                seen.append(parent)
            up = os.path.dirname(parent)
            if up == parent:
                break
            parent = up
    return seen


def _check_parents(path: str) -> None:
    """Refuse a cache folder below a folder another user could change (see :func:`check_cache_folder`)."""
    import stat

    if not hasattr(os, "getuid"):
        return
    me = os.getuid()
    for parent in _ancestors(path):
        try:
            st = os.stat(parent)  # a link on the way is judged by its target; both paths are walked
        except FileNotFoundError:
            continue  # not created yet: makedirs makes it the user's own
        mode = stat.S_IMODE(st.st_mode)
        others_write = mode & 0o022 and not mode & stat.S_ISVTX
        if st.st_uid not in (me, 0) or others_write:
            where = f"{parent!r}" + (f" (a link to {os.path.realpath(parent)!r})" if os.path.islink(parent) else "")
            raise UntrustedCacheFolder(
                f"the compilation cache folder {path!r} lies under {where}, owned by uid {st.st_uid}"
                f"{_user(st.st_uid)} with mode 0o{mode:03o}; expected every folder above it to belong to you "
                f"(uid {me}{_user(me)}) or root and to be writable by nobody else unless sticky (as /tmp is): "
                "whoever can write there can replace the cache folder with one of their own after this check. "
                "Keep the cache under your home, or leave it off")


def _check_contents(path: str) -> None:
    """Refuse a cache folder holding an entry another user owns or could write, or a symbolic link."""
    import stat

    if not hasattr(os, "getuid"):
        return
    me = os.getuid()
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            entry = os.path.join(folder, name)
            st = os.lstat(entry)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode) or st.st_uid != me or mode & 0o022:
                what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else (
                    f"owned by uid {st.st_uid}{_user(st.st_uid)} with mode 0o{mode:03o}")
                raise UntrustedCacheFolder(
                    f"the compilation cache folder {path!r} holds {entry!r}, {what}; expected every entry to be a "
                    f"file or folder owned by you (uid {me}{_user(me)}) that group and others cannot write: it "
                    "may be a program this process would load. Delete the entry (or the whole folder: JAX "
                    "rebuilds it), or use another folder")


def _uid() -> str:
    return f"{os.getuid()}{_user(os.getuid())}" if hasattr(os, "getuid") else "?"


def _user(uid: int) -> str:
    """`` (name)`` of a user id, or nothing where it has no name."""
    try:
        import pwd

        return f" ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return ""


_NO_PROGRAMS = object()  # enable_compilation_cache's deprecated keyword, not given

#: Programs that compiled faster than this are not written to the cache (:func:`enable_compilation_cache`).
MIN_COMPILE_SECONDS = 0.1


def enable_compilation_cache(path: str | os.PathLike | None = None, min_compile_seconds: float = MIN_COMPILE_SECONDS,
                             programs=_NO_PROGRAMS) -> str | None:
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
            cache (the many tiny programs are cheaper to compile than to read back). Loading a fit's program took 5-10% of
            its compile time on the 2-core CPU (0.02-0.05 s for programs of 0.5 s, 0.28 s for one of 4 s); at
            the former 0.5 s, NLTCS's fit program (0.49-0.52 s) was written in one run of two and recompiled in
            the other.
        programs: deprecated and ignored (pgmjax's own store of programs, which it turned on, is removed).

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

    if programs is not _NO_PROGRAMS:
        warnings.warn("enable_compilation_cache(programs=...) is deprecated and ignored: pgmjax no longer keeps "
                      "programs of its own, only JAX's persistent compilation cache", DeprecationWarning, stacklevel=2)
    path = os.fspath(path or os.environ.get(CACHE_ENV) or _default_cache_folder())
    try:
        path = check_cache_folder(path)
    except UntrustedCacheFolder:
        raise
    except OSError as e:
        warnings.warn(f"pgmjax: compilation cache off: {_reason(e)}", UserWarning, stacklevel=2)
        return None
    _use_folder(path, min_compile_seconds)
    return path


def _use_folder(path: str, min_compile_seconds: float) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_enable_compilation_cache", True)


def _reason(e: Exception) -> str:
    # An OSError made with an errno carries its message in strerror (its str() starts "[Errno N]").
    return getattr(e, "strerror", None) or str(e)


def _enable_from_environment(path: str) -> None:
    """$PGMJAX_COMPILATION_CACHE at import: a folder refused or unusable warns, and the process runs uncached
    (an environment variable must never make ``import pgmjax`` fail)."""
    import warnings

    try:
        _use_folder(check_cache_folder(path), MIN_COMPILE_SECONDS)
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
    models with larger blocks (Adult's benchmark cliques then iterate 37% slower) and every other program
    of the process, the user's own included. The command line (``python -m pgmjax``) turns it on for its own
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
    _enable_from_environment(os.environ[CACHE_ENV])

if os.environ.get(FAST_COMPILE_ENV, "").strip() == "1" and not fast_compile(strict=False):
    import warnings

    warnings.warn(
        f"{FAST_COMPILE_ENV}=1 had no effect: JAX's backends had started before pgmjax was imported, or "
        "XLA_FLAGS sets --xla_cpu_use_fusion_emitters itself",
        stacklevel=2,
    )
