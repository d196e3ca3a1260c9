"""pgmjax's benchmark suites: ``python -m bench --list``, ``python -m bench SUITE [SCRIPT] [options]``.

Not part of the installed package: run from the repository root. ``bench.problems`` holds the problems,
``bench.schema`` the result schema and its writer, ``bench.suites`` the suites; see ``bench/README.md``.
"""
