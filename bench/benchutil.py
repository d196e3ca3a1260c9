"""Small stdlib-only helpers shared by the benchmark scripts (also imported under the mbi venv)."""

from __future__ import annotations

import statistics
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


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("" where unavailable)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return ""
