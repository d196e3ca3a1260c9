"""The mechanisms' code lives in modules named for what they do; the front-ends keep the mechanisms' names.

``pgmjax.mechanisms`` exports each front-end function under the mechanism's name, so a submodule of that
same name would be shadowed (``import pgmjax.mechanisms.mwem`` would give the function). The sub-packages
have other names and import as modules.
"""

import importlib
import inspect
import types

import pytest

import pgmjax.mechanisms

PACKAGES = {
    "mldp": "pgmjax.mechanisms.query_learning",
    "privbayes": "pgmjax.mechanisms.bayesian_network",
    "mwem": "pgmjax.mechanisms.multiplicative_weights",
}


@pytest.mark.parametrize("function, package", sorted(PACKAGES.items()))
def test_sub_package_is_a_module_and_front_end_a_function(function, package):
    module = importlib.import_module(package)
    assert isinstance(module, types.ModuleType) and hasattr(module, "__path__")  # a package
    front_end = getattr(pgmjax.mechanisms, function)
    assert callable(front_end) and inspect.isfunction(front_end)
    assert getattr(module, function) is front_end  # the sub-package re-exports its front-end


def test_query_learning_re_exports_its_public_names():
    from pgmjax.mechanisms.query_learning import QuerySet, RegressionModel, fit_pgm, training_sensitivity  # noqa: F401
