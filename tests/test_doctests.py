"""The docstring examples of every module of the ``pgmjax`` package run and print what they show.

One test per module (walked with :mod:`pkgutil`, the kernels included), so a failure names the module.
Each module's examples run in that module's namespace plus the three names the examples may assume:
``np`` (NumPy), ``jax`` and ``pj`` (``import pgmjax as pj``). Options: ``ELLIPSIS`` and
``NORMALIZE_WHITESPACE``; ``# doctest: +SKIP`` marks the few examples that need a file or the shared
datasets.
"""

import doctest
import importlib
import pkgutil

import jax
import numpy as np
import pytest

import pgmjax as pj
import pgmjax.kernels

# Checked by their own tests for now: other work is editing these modules.
OWNED_ELSEWHERE = {
    "pgmjax.uncertainty",
    "pgmjax.bayes",
    "pgmjax.oracle",
    "pgmjax.junction",
    "pgmjax.estimation",
    "pgmjax.compiler",
    "pgmjax.programs",
    "pgmjax.api",
    "pgmjax.losses",
    "pgmjax.inference",
    "pgmjax.model",
    "pgmjax.batch",
}

# Run by tests/test_layout.py (each privacy submodule's examples in its own namespace) and
# tests/test_privacy.py (the package's ``__test__``: the public names' examples again).
RUN_ELSEWHERE = {"pgmjax.privacy"}

# ``python -m pgmjax`` runs the command line on import.
NOT_IMPORTABLE = {"pgmjax.__main__"}

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _excluded(name: str) -> bool:
    return name in NOT_IMPORTABLE or any(name == p or name.startswith(p + ".") for p in OWNED_ELSEWHERE | RUN_ELSEWHERE)


def _modules() -> list[str]:
    names = ["pgmjax", "pgmjax.kernels"]
    for package in (pj, pgmjax.kernels):
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(n for n in set(names) if not _excluded(n))


MODULES = _modules()


def test_the_walk_finds_the_package():
    assert {"pgmjax", "pgmjax.workload", "pgmjax.rr.releases", "pgmjax.mechanisms.mst", "pgmjax.kernels.logspace"} <= set(MODULES)
    assert not any(_excluded(n) for n in MODULES)


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
