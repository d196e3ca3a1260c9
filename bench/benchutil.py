"""Small stdlib-only timing and memory helpers shared by the benchmark scripts (also imported by the mbi
drivers). The result schema and its writer are in :mod:`bench.schema`."""

from __future__ import annotations

import statistics
import threading
import time


def median(xs) -> float:
    return float(statistics.median(xs))


def timed(fn):
    """``(seconds, result)`` of one call."""
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def proc_status(*fields: str) -> dict:
    """Fields of /proc/self/status in MiB (VmHWM = peak resident set, VmRSS = current)."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in fields:
                    out[key] = int(value.split()[0]) / 1024  # kB -> MiB
    except OSError:
        pass
    return out


class CompileEvents:
    """JAX's compilation events (``jax.monitoring``'s duration events), summed while ``active``: seconds and count
    per event, the backend (XLA) compiles' durations in order (``xla``), and the running total of every
    ``/jax/core/compile/`` event's seconds (``total``). jax is imported only by :meth:`install`.

    Only the main thread's compiles count there: what a background thread compiles ahead
    (:mod:`pgmjax.compiler.ahead`) is summed apart (``ahead``, ``ahead_xla``), and the time the main thread waited
    for such a compile (``waited``) is added to ``total``, as compiling the caller waited for."""

    XLA = "/jax/core/compile/backend_compile_duration"
    LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
    TRACE = "/jax/core/compile/jaxpr_trace_duration"
    PREFIX = "/jax/core/compile/"
    WAIT = "/pgmjax/compile_ahead/wait_duration"

    def __init__(self, active: bool = False):
        self.active = active
        self.seconds: dict = {}
        self.counts: dict = {}
        self.xla: list = []
        self.total = 0.0
        self.ahead = 0.0
        self.ahead_xla: list = []
        self.waited = 0.0

    def __call__(self, event, duration, **_):
        if not self.active:
            return
        if event == self.WAIT:
            self.waited += duration
            self.total += duration
            return
        if threading.current_thread() is not threading.main_thread():
            if event.startswith(self.PREFIX):
                self.ahead += duration
            if event == self.XLA:
                self.ahead_xla.append(duration)
            return
        self.seconds[event] = self.seconds.get(event, 0.0) + duration
        self.counts[event] = self.counts.get(event, 0) + 1
        if event == self.XLA:
            self.xla.append(duration)
        if event.startswith(self.PREFIX):
            self.total += duration

    def install(self):
        """Register with ``jax.monitoring``; returns self."""
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def reset(self) -> None:
        """Forget everything recorded so far."""
        self.seconds.clear()
        self.counts.clear()
        self.xla.clear()
        self.total = 0.0
        self.ahead = 0.0
        self.ahead_xla.clear()
        self.waited = 0.0

    def summary(self) -> dict:
        return {"xla_compile_s": self.seconds.get(self.XLA, 0.0), "mlir_lowering_s": self.seconds.get(self.LOWER, 0.0),
                "xla_compilations": self.counts.get(self.XLA, 0)}
