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


def run_record(script: str, argv=None, backend: bool = True, **versions) -> dict:
    """What a results file records about its run: machine, versions, date (UTC), commit and the command.

    Args:
        script: the script's file name under ``bench/``.
        argv: its arguments (default ``sys.argv[1:]``).
        backend: also record JAX's backend.
        versions: further package versions, e.g. ``scipy=scipy.__version__``.
    """
    import datetime
    import os
    import platform
    import subprocess
    import sys

    import jax
    import numpy as np

    machine = {"cpu": cpu_model(), "cores": os.cpu_count()}
    if backend:
        machine["backend"] = jax.default_backend()
    machine["load_average_at_end"] = os.getloadavg()
    # $PGMJAX_COMMIT where set: a device machine's copy of the tree may have no git, or a stale one
    commit = os.environ.get("PGMJAX_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    return {
        "machine": machine,
        "versions": {"python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__, **versions},
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "command": f"python bench/{script} " + " ".join(sys.argv[1:] if argv is None else argv),
    }


def publish(lines: list[str], out: str | None, data: dict) -> None:
    """Print a results page (``lines``, Markdown) and, with ``out``, write ``data`` there as JSON and the page
    beside it as ``.md``."""
    import json
    import os

    print("\n".join(lines))
    if out:
        with open(out, "w") as f:
            json.dump(data, f, indent=1)
        with open(os.path.splitext(out)[0] + ".md", "w") as f:
            f.write("\n".join(lines) + "\n")


def results_header(run: dict) -> list[str]:
    """The lines a results page opens with about its run (a :func:`run_record`): machine, date, commit,
    versions and the command."""
    m, v = run["machine"], run["versions"]
    versions = ", ".join(f"{k} {val}" if k != "python" else f"Python {val}" for k, val in v.items())
    return [f"Machine: {m['cpu']}, {m['cores']} cores, backend {m.get('backend')}. Date: {run['date']}. "
            f"Commit: {run['commit']}. Versions: {versions}.", f"Command: `{run['command']}`."]
