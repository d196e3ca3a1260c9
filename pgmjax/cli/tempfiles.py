"""Temporary files of the command line's outputs: recognisable names, stale ones removed, SIGTERM unwinds.

A temporary file (or folder) of an output ``DIR/name`` is ``DIR/.name.pgmjax-tmp.{host}.{pid}.{random}``. A
run that is killed (SIGKILL, a power cut) cannot remove its own: :func:`clean_stale`, called by the next
command writing the same output, removes those of a process that is gone, on this host, owned by this user
(another host's process cannot be asked, and a live process's file is in use). :func:`stop_signals_raise`
turns SIGTERM into an exception, so that a terminated run cleans up like an interrupted one, and keeps a SIGTERM
or Ctrl-C whose exception Python dropped (:func:`raise_if_stopped`).

Example::

    >>> os.path.basename(tmp_path("/data/out.csv")).startswith(".out.csv" + TMP_MARK + ".")
    True
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import uuid

__all__ = ["TMP_MARK", "tmp_path", "clean_stale", "remove_path", "alive", "host", "Terminated", "stop_signals_raise",
           "raise_if_stopped"]

#: What names a temporary file of an output: ``.{name}`` + TMP_MARK + ``.{host}.{pid}.{random}``.
TMP_MARK = ".pgmjax-tmp"


def host() -> str:
    """This machine's name as temporary names carry it (a path separator replaced)."""
    return socket.gethostname().replace(os.sep, "_") or "localhost"


def tmp_path(path: str) -> str:
    """A new temporary name beside ``path``: hidden, recognisable, carrying this host and process."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}{TMP_MARK}.{host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (another user's counts: signal 0 is refused, not unanswered).
    Where signal 0 is no existence test (Windows: :func:`os.kill` terminates), every process counts as alive."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists (another user's)
        return True
    return True


def remove_path(path: str) -> None:
    """Remove a file, a link or a whole folder."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def clean_stale(path: str) -> list[str]:
    """Remove the temporary files of ``path`` left by killed runs: on this host, of a process that is gone,
    owned by this user (a live run's, another host's or another user's are kept).

    Args:
        path: an output path.

    Returns:
        The removed paths.
    """
    folder, name = os.path.split(os.path.abspath(path))
    prefix, here, removed = f".{name}{TMP_MARK}.", host(), []
    try:
        entries = os.listdir(folder)
    except OSError:
        return removed
    for entry in entries:
        if not entry.startswith(prefix):
            continue
        parts = entry[len(prefix):].rsplit(".", 2)  # host (may hold dots), pid, random
        if len(parts) != 3 or parts[0] != here or not parts[1].isdigit() or alive(int(parts[1])):
            continue
        full = os.path.join(folder, entry)
        with contextlib.suppress(OSError):
            if os.lstat(full).st_uid == os.getuid():  # posix only: alive() keeps every file elsewhere
                remove_path(full)
                removed.append(full)
    return removed


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so that ``finally`` blocks and
    :class:`pgmjax.cli.outputs.OutputSet` clean up."""


# The stopping signals received inside stop_signals_raise(). Python runs a signal handler between two bytecodes of
# the main thread, which may be inside a garbage-collector callback or a __del__ (JAX registers one): an exception
# raised there is printed and dropped, and the run would go on to write its outputs. A signal is process-wide
# state, so its record is too: raise_if_stopped() raises it again where outputs are placed and where progress is
# shown.
_received: list[int] = []


def raise_if_stopped() -> None:
    """Raise what a stopping signal received inside :func:`stop_signals_raise` raises (:class:`Terminated` for
    SIGTERM, KeyboardInterrupt for Ctrl-C), even one whose exception was dropped (raised inside a garbage-collector
    callback): called before outputs are placed and at each progress report."""
    if _received:
        if _received[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(_received[0])


@contextlib.contextmanager
def stop_signals_raise():
    """While inside, SIGTERM raises :class:`Terminated` and Ctrl-C (SIGINT, where Python's own handler is in place)
    KeyboardInterrupt, each also recorded: one whose exception was dropped is raised again on leaving (and by
    :func:`raise_if_stopped` before that). The previous handlers are restored on exit; a no-op outside the main
    thread, where no handler can be installed."""
    def on_term(signum, frame):
        _received.append(signum)
        raise Terminated(signum)

    def on_int(signum, frame):
        _received.append(signum)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread
        yield
        return
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:  # a caller's own Ctrl-C handler is left alone
        signal.signal(signal.SIGINT, on_int)
    _received.clear()
    try:
        yield
        raise_if_stopped()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
        _received.clear()
