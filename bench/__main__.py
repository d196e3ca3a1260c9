"""``python -m bench``: the benchmark runner (run from the repository root).

    python -m bench --list                     # the suites, one line each
    python -m bench SUITE --help-scripts       # a suite's scripts, one line each
    python -m bench SUITE [options]            # the suite's first script with these options
    python -m bench SUITE SCRIPT [options]     # one script of the suite (same as python -m bench.SCRIPT)
    python -m bench SUITE all [--quick] [--out-dir DIR] [--dry-run]   # every script of the suite
    python -m bench all [--quick] [--out-dir DIR] [--dry-run]         # every suite, whole

Each script is a module with ``main(argv)``; its ``--help`` lists its options (most have ``--quick`` or
``--smoke`` for a short run). Results are written to ``bench/results/<suite>/`` (``bench.schema``).

``all`` runs every script of a suite (or of every suite), each in a fresh interpreter, one after another,
going on past a failure; it ends with a table of each script's exit code and seconds, and fails if any
script failed. ``--quick`` gives each script its short run (``bench.suites.QUICK``; a script without one runs in
full), ``--out-dir DIR`` writes each script's results under ``DIR/<script>`` instead of ``bench/results/``, and
``--dry-run`` prints the commands only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from bench.suites import SUITES, load, script_command, summary


def _list() -> None:
    width = max(map(len, SUITES))
    for s in SUITES.values():
        print(f"{s.name:<{width}}  {s.about}")


def _scripts(suite) -> None:
    print(f"{suite.name}: {suite.about}")
    for module in suite.scripts:
        print(f"  {module:<22} {summary(module)}")
    for module in suite.helpers:
        print(f"  {module:<22} (helper) {summary(module)}")
    for module in suite.parts:
        print(f"  {module:<22} (part, no command) {summary(module)}")


def run_all(suites, argv) -> int:
    """Every script of ``suites``, each in a fresh interpreter (``python -m bench.<script>``): see the docstring."""
    ap = argparse.ArgumentParser(prog="python -m bench ... all", description="every script of the suites, in turn")
    ap.add_argument("--quick", action="store_true", help="each script's short run (bench.suites.QUICK)")
    ap.add_argument("--out-dir", default=None, help="results under DIR/<script> instead of bench/results/")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = ap.parse_args(argv)
    rows = []
    for suite in suites:
        for module in suite.scripts:
            cmd = [sys.executable, "-m", f"bench.{module}", *script_command(module, args.quick, args.out_dir)]
            print(f"[{suite.name}] {' '.join(cmd[1:])}", flush=True)
            if args.dry_run:
                continue
            t0 = time.perf_counter()
            code = subprocess.run(cmd).returncode
            rows.append((suite.name, module, code, time.perf_counter() - t0))
    if rows:
        print("\n| suite | script | exit | seconds |\n|---|---|---|---|")
        for name, module, code, secs in rows:
            print(f"| {name} | {module} | {code} | {secs:.0f} |")
    return 1 if any(code != 0 for _, _, code, _ in rows) else 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        _list()
        return 0 if argv else 2
    if argv[0] == "--list":
        _list()
        return 0
    if argv[0] == "all":
        return run_all(list(SUITES.values()), argv[1:])
    name, rest = argv[0], argv[1:]
    if name not in SUITES:
        print(f"python -m bench: unknown suite {name!r}; the suites are {', '.join(SUITES)} (python -m bench --list)",
              file=sys.stderr)
        return 2
    suite = SUITES[name]
    if rest[:1] == ["--help-scripts"]:
        _scripts(suite)
        return 0
    if rest[:1] == ["all"]:
        return run_all([suite], rest[1:])
    module = suite.scripts[0]
    if rest and not rest[0].startswith("-"):
        if rest[0] not in suite.commands:
            print(f"python -m bench {name}: no script {rest[0]!r} in this suite; its scripts are "
                  f"{', '.join(suite.commands)}", file=sys.stderr)
            return 2
        module, rest = rest[0], rest[1:]
    out = load(module).main(rest)
    return out if isinstance(out, int) else 0


if __name__ == "__main__":
    sys.exit(main())
