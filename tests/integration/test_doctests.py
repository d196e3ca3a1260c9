"""The docstring examples of every module of the ``pgmjax`` package run and print what they show.

One test per module (walked with :mod:`pkgutil`, the kernels included), so a failure names the module.
Each module's examples run in that module's namespace plus the three names the examples may assume:
``np`` (NumPy), ``jax`` and ``pj`` (``import pgmjax as pj``). Options: ``ELLIPSIS`` and
``NORMALIZE_WHITESPACE``; ``# doctest: +SKIP`` marks the few examples that need a file or the shared
datasets. Modules whose examples another test file already runs are not run twice (``RUN_ELSEWHERE``).
"""

import doctest
import importlib
import pathlib
import pkgutil

import jax
import numpy as np
import pgmjax.kernels
import pytest

import pgmjax as pj

# Checked by their own tests for now (none at present; a module being reworked may be listed here for a while).
OWNED_ELSEWHERE: set[str] = set()

# Modules (and packages, with everything under them) whose examples another test file runs in full.
RUN_ELSEWHERE = {
    # each submodule in its own namespace; the package's ``__test__`` (the public names) in privacy/test_privacy.py
    "pgmjax.privacy": "integration/test_layout.py",
    "pgmjax.rr": "rr/test_rr.py",
    "pgmjax.mechanisms.randomized_response_synthetic": "rr/test_rr_release.py",
    "pgmjax.mechanisms.query_learning": "mechanisms/test_mldp.py",
    "pgmjax.history.pca": "history/test_history.py",
    "pgmjax.history.cv": "history/test_history.py",
    "pgmjax.history.rows": "history/test_history.py",
    "pgmjax.history.ridge": "history/test_history.py",
    "pgmjax.history.prior": "history/test_history.py",
    "pgmjax.history.maxent": "history/test_history_maxent.py",
    "pgmjax.history.gibbs": "history/test_history_maxent.py",
    "pgmjax.cli.guards": "cli/test_cli_guards.py",
}

# ``python -m pgmjax`` runs the command line on import.
NOT_IMPORTABLE = {"pgmjax.__main__"}

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _excluded(name: str) -> bool:
    prefixes = OWNED_ELSEWHERE | set(RUN_ELSEWHERE)
    return name in NOT_IMPORTABLE or any(name == p or name.startswith(p + ".") for p in prefixes)


def _modules() -> list[str]:
    names = ["pgmjax", "pgmjax.kernels"]
    for package in (pj, pgmjax.kernels):
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(n for n in set(names) if not _excluded(n))


MODULES = _modules()


def test_the_walk_finds_the_package():
    assert {"pgmjax", "pgmjax.queries.workload", "pgmjax.mechanisms.spanning_tree", "pgmjax.kernels.logspace"} <= set(MODULES)
    assert not any(_excluded(n) for n in MODULES)


def test_the_modules_run_elsewhere_are_run_there():
    """Each test file named in RUN_ELSEWHERE runs doctests and names the module's last component."""
    here = pathlib.Path(__file__).parents[1]  # tests/
    for name, test_file in RUN_ELSEWHERE.items():
        importlib.import_module(name)
        text = (here / test_file).read_text(encoding="utf-8")
        assert "doctest" in text and name.rsplit(".", 1)[-1] in text, (name, test_file)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    globs = dict(vars(module), np=np, jax=jax, pj=pj)
    tests = doctest.DocTestFinder().find(module, name, globs=globs)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report = []
    for test in sorted(tests, key=lambda t: t.name):
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
