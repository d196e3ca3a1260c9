"""How long a fresh process takes to ``import pgmjax``, and which imported packages take it.

Every CLI run, notebook kernel and test worker pays this before its first result. Fresh interpreters, wall
time of ``python -c "import pgmjax"`` (fastest and median of ``--runs``), and Python's ``-X importtime``
self-plus-children time of the heaviest third-party packages in one more run.

Usage::

    python bench/import_time.py --out bench/results/import_time_cpu.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PACKAGES = ("jax", "numpy", "scipy", "scipy.special", "scipy.stats", "scipy.optimize", "scipy.sparse", "pandas",
            "networkx", "optax", "pgmjax")


def wall(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import pgmjax"], check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def breakdown() -> dict[str, float]:
    """Seconds of each of :data:`PACKAGES` (with what it imports) in one ``-X importtime`` run (absent: not imported)."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pgmjax"], check=True,
                         capture_output=True, text=True).stderr
    found = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line.split("|"))
        if name in PACKAGES and cumulative.isdigit():
            found[name] = int(cumulative) / 1e6
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", help="results .json (a .md is written beside it)")
    args = ap.parse_args()
    import benchutil

    times = wall(args.runs)
    parts = breakdown()
    run = benchutil.run_record("import_time.py", backend=False)
    lines = [
        "# `import pgmjax` in a fresh process",
        "",
        *benchutil.results_header(run),
        "",
        f"Wall time of `python -c \"import pgmjax\"`, {args.runs} fresh processes: fastest {min(times):.2f} s, median "
        f"{statistics.median(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)}).",
        "",
        "`-X importtime` (one more process; a package's time includes what it imports first, so the rows overlap):",
        "",
        "| package | s |",
        "|---|---|",
        *(f"| {p} | {parts[p]:.3f} |" if p in parts else f"| {p} | not imported |" for p in PACKAGES),
    ]
    benchutil.publish(lines, args.out, {"run": run, "wall_s": times, "importtime_s": parts})


if __name__ == "__main__":
    main()
