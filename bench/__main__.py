"""``python -m bench``: the benchmark runner (run from the repository root).

    python -m bench --list                     # the suites, one line each
    python -m bench SUITE --help-scripts       # a suite's scripts, one line each
    python -m bench SUITE [options]            # the suite's first script with these options
    python -m bench SUITE SCRIPT [options]     # one script of the suite (same as python -m bench.SCRIPT)

Each script is a module with ``main(argv)``; its ``--help`` lists its options (most have ``--quick`` or
``--smoke`` for a short run). Results are written to ``bench/results/<suite>/`` (``bench.schema``).
"""

from __future__ import annotations

import sys

from bench.suites import SUITES, load, summary


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


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        _list()
        return 0 if argv else 2
    if argv[0] == "--list":
        _list()
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUITES:
        print(f"python -m bench: unknown suite {name!r}; the suites are {', '.join(SUITES)} (python -m bench --list)",
              file=sys.stderr)
        return 2
    suite = SUITES[name]
    if rest[:1] == ["--help-scripts"]:
        _scripts(suite)
        return 0
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
