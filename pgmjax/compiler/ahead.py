"""Compiling ahead: a program the caller will soon need, compiled in a background thread while it works on.

A mechanism's rounds grow their model through a few size classes (:mod:`pgmjax.graph.routed_plan`), and the
first fit in each new class waits one to two seconds for XLA to compile its programs, while the rounds before it
spend most of their time in short fits and on the host. :func:`ahead` runs a compile (any function that calls the
jitted programs with arguments of the shapes to come) on a daemon thread; JAX puts what it compiles in the same
caches a later call on the main thread reads, so that call runs at once. XLA compiles without Python's global
interpreter lock, so on a machine with a second core the compile costs the caller little.

Nothing here chooses a program: the programs a call runs are those its arguments name, compiled ahead or not.
What is compiled ahead is decided by the caller's explicit request (:func:`pgmjax.estimate`'s ``compile_ahead``).

At most one compile is in flight: a request while another runs is dropped (the caller asks again at its next
fit). A key compiled ahead once is not compiled again until :func:`forget` (the programs were freed). A failing
compile is dropped without a word beyond a debug log: the caller's own call then compiles, and raises, as
without it. :func:`wait` joins a compile of the key the caller is about to run, recording how long it waited as the
``/pgmjax/compile_ahead/wait_duration`` event of :mod:`jax.monitoring` (what a profile counts as compiling the
caller waited for); :func:`wait_all` joins whatever is in flight, at :func:`pgmjax.release_compiled` and at exit.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable

import jax.monitoring

#: The :mod:`jax.monitoring` duration event recorded when a caller waits for a compile in flight.
WAIT_EVENT = "/pgmjax/compile_ahead/wait_duration"

#: Thread name of the background compiles (a profile tells their compile events from the caller's by it).
THREAD_NAME = "pgmjax-compile-ahead"

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_in_flight: dict[Hashable, threading.Thread] = {}
_done: set = set()


def ahead(key: Hashable, compile_fn: Callable[[], object]) -> bool:
    """Run ``compile_fn()`` on a background thread, unless ``key`` is compiled or in flight, or another compile is.

    Args:
        key: what ``compile_fn`` compiles (hashable): the same key is not compiled twice.
        compile_fn: calls the jitted programs with arguments of the shapes to come (its results are dropped).

    Returns:
        Whether a compile was started.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> f = jax.jit(lambda x: x * 2)
        >>> ahead(("doubling", 3), lambda: f(jnp.zeros(3)))
        True
        >>> wait(("doubling", 3)) >= 0.0
        True
    """
    with _lock:
        if key in _done or _in_flight:
            return False
        thread = threading.Thread(target=_compile, args=(key, compile_fn), name=THREAD_NAME, daemon=True)
        _in_flight[key] = thread
    thread.start()
    return True


def _compile(key: Hashable, compile_fn: Callable[[], object]) -> None:
    _lowest_priority()
    try:
        compile_fn()
    except Exception:  # the caller's own call compiles, and raises, as it would have without this
        _log.debug("compiling ahead failed for %r", key, exc_info=True)
    finally:
        with _lock:
            _in_flight.pop(key, None)
            _done.add(key)


def _lowest_priority() -> None:
    """This thread at the lowest scheduling priority, where the system lets one thread have its own (Linux): the
    compile then takes the time the caller leaves idle, not the caller's."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):  # no per-thread priority here: the compile runs at the caller's
        pass


def in_flight() -> tuple:
    """The keys being compiled now (at most one)."""
    with _lock:
        return tuple(_in_flight)


def wait(key: Hashable) -> float:
    """Join the compile of ``key`` if it is in flight (the caller is about to run it); seconds waited (0: none).

    A wait is recorded as :data:`WAIT_EVENT` in :mod:`jax.monitoring`.
    """
    with _lock:
        thread = _in_flight.get(key)
    if thread is None:
        return 0.0
    start = time.perf_counter()
    thread.join()
    waited = time.perf_counter() - start
    jax.monitoring.record_event_duration_secs(WAIT_EVENT, waited)
    return waited


def wait_all() -> None:
    """Join every compile in flight."""
    with _lock:
        threads = list(_in_flight.values())
    for thread in threads:
        thread.join()


def forget() -> None:
    """Forget which keys were compiled ahead (their programs were freed: :func:`pgmjax.release_compiled`), after
    joining any compile in flight."""
    wait_all()
    with _lock:
        _done.clear()


# A daemon thread inside XLA when the interpreter shuts down can take the process with it: join it first.
atexit.register(wait_all)

__all__ = ["THREAD_NAME", "WAIT_EVENT", "ahead", "forget", "in_flight", "wait", "wait_all"]
