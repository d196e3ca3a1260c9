"""An ``mbi``-compatible door: the interface of ``mbi`` (Private-PGM, version 1.1) that smartnoise-synth's MST and
AIM and OpenDP's contingency tables call, backed by pgmjax's engine.

Those libraries import ``mbi`` themselves; :func:`installed` (or :func:`install`) puts this package where they find
it, as ``mbi`` and its submodules in ``sys.modules``, so their own synthesizers fit with :func:`pgmjax.estimate`
and sample with pgmjax's sampler, their privacy code untouched (the door only estimates: every measurement is
still theirs). The program that runs is chosen by the caller's explicit ``with installed():``; nothing is
installed on import.

Example:
    >>> import pgmjax.compat.mbi as door
    >>> with door.installed():
    ...     import mbi
    ...     from mbi import estimation
    ...     dom = mbi.Domain(["a", "b"], [2, 2])
    ...     y = mbi.Dataset(np.array([[0, 1], [1, 1], [1, 0]] * 20), dom).project(["a", "b"]).datavector()
    ...     model = estimation.mirror_descent(dom, [mbi.LinearMeasurement(y, ("a", "b"), 1.0)], iters=200)
    >>> model.project("b").datavector().round().tolist()
    [20.0, 40.0]

What is covered (the calls found in smartnoise-synth 1.0.8 and OpenDP 0.16's ``opendp.extras.mbi``):
``Domain(attributes, shape)`` with ``fromdict``, ``attrs``, ``config``, ``size``, ``project``; ``Dataset(array |
dict | DataFrame, domain)`` with ``project``, ``datavector``, ``df``, ``records``; ``Factor`` with ``datavector``,
``values``, ``project``; ``LinearMeasurement(y, clique, stddev)``; ``estimation.mirror_descent(domain,
measurements, known_total=, potentials=, marginal_oracle=, iters=)``; ``MarkovRandomField`` with ``project``,
``synthetic_data(rows, method)``, ``domain``, ``cliques``, ``potentials``, ``marginals``, ``total``;
``junction_tree.hypothetical_model_size``; the names of ``marginal_oracles``' message-passing oracles.

Not covered (a clear ``NotImplementedError`` or ``AttributeError``): ``mbi`` 2.0's ``MirrorDescent`` class
interface and the calls Google's DPSynth makes (constraints, ``precompile``, ``summarize``); loss function
objects (``MarginalLossFn``) and queries other than the marginal itself (OpenDP's prefix queries of keyed
columns); ``callback_fn``; potentials built by hand (``attr.evolve`` of a model's potentials, OpenDP's prior
tables); the other estimators (``lbfgs``, ``dual_averaging``); labels on domains. dpmm does not call ``mbi``: it
ships its own copy of Private-PGM.
"""

from __future__ import annotations

import contextlib
import sys

from . import estimation, junction_tree, marginal_oracles, markov_random_field, values
from .markov_random_field import MarkovRandomField
from .values import CliqueVector, Dataset, Domain, Factor, LinearMeasurement

__all__ = ["Domain", "Dataset", "Factor", "LinearMeasurement", "CliqueVector", "MarkovRandomField", "estimation",
           "marginal_oracles", "junction_tree", "install", "uninstall", "installed"]

#: ``mbi``'s module names and the modules of this door that stand for them.
MODULES = {
    "mbi": None, "mbi.estimation": estimation, "mbi.marginal_oracles": marginal_oracles,
    "mbi.junction_tree": junction_tree, "mbi.markov_random_field": markov_random_field, "mbi.domain": values,
    "mbi.dataset": values, "mbi.factor": values, "mbi.marginal_loss": values, "mbi.clique_vector": values,
}


def install() -> dict:
    """Put this door in ``sys.modules`` as ``mbi`` and its submodules, for code that imports ``mbi`` after it.

    Returns:
        What those names held before (None where nothing), for :func:`uninstall`.
    """
    before = {name: sys.modules.get(name) for name in MODULES}
    package = sys.modules[__name__]
    for name, module in MODULES.items():
        sys.modules[name] = package if module is None else module
    return before


def uninstall(before: dict) -> None:
    """Restore what :func:`install` replaced."""
    for name, module in before.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


@contextlib.contextmanager
def installed():
    """:func:`install` for a ``with`` block, undone after it (also on an error).

    A library that imported ``mbi`` before the block keeps the module it imported: import it (or call what
    imports it, like smartnoise's ``Synthesizer.create``) inside the block.
    """
    before = install()
    try:
        yield sys.modules["mbi"]
    finally:
        uninstall(before)


