"""Small stdlib-only timing and memory helpers shared by the benchmark scripts (also imported by the mbi
drivers). The result schema and its writer are in :mod:`bench.schema`."""

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
