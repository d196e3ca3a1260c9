"""The persistent compilation cache's folder and its checks: where later processes load compiled programs from.

JAX's persistent compilation cache keeps compiled XLA programs (native code) in a folder, and a later process
loads and runs them instead of compiling. :func:`check_cache_folder` makes sure nobody but the user can write the
folder or replace it; :func:`use_cache_folder` points JAX's cache at a checked folder. The public switches (an
explicit call, or ``PGMJAX_COMPILATION_CACHE`` at import) are :mod:`pgmjax.programs`'.
"""

from __future__ import annotations

import os


class UntrustedCacheFolder(PermissionError):
    """The compilation cache folder is one that someone else could write: pgmjax will not run programs from it."""


def default_cache_folder() -> str:
    """``~/.cache/pgmjax/xla``: the folder used where none is named."""
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


#: Programs that compiled faster than this are not written to the cache (:func:`enable_compilation_cache`).
MIN_COMPILE_SECONDS = 0.1


def use_cache_folder(path: str | os.PathLike, min_compile_seconds: float = MIN_COMPILE_SECONDS) -> str:
    """Point JAX's persistent compilation cache at ``path`` once :func:`check_cache_folder` accepts it.

    Args:
        path: the folder (created with mode 0o700 if absent).
        min_compile_seconds: only programs that took at least this long to compile are written.

    Returns:
        The folder, as a string.

    Raises:
        UntrustedCacheFolder, OSError: as :func:`check_cache_folder`.
    """
    path = check_cache_folder(path)
    _use_folder(path, min_compile_seconds)
    return path


def _use_folder(path: str, min_compile_seconds: float) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_enable_compilation_cache", True)
