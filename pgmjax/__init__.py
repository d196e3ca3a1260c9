"""pgmjax: GPU-accelerated, differentiable graphical-model estimation for differentially private query answering.

Example:
    >>> import pgmjax as pj
    >>> domain = pj.Domain({"a": 2, "b": 3})
    >>> y = [10.0, 20, 30, 40, 50, 60]                  # noisy counts of the (a, b) table, row-major
    >>> model = pj.estimate(domain, [pj.Measurement(("a", "b"), y, stddev=1.0)], iters=200)
    >>> model.marginal("b").round(1).tolist()
    [50.0, 70.0, 90.0]
"""

from . import datasets, privacy, queries
from .data.dataset import Dataset
from .data.domain import Domain
from .estimation.batch import BatchedMeasurement, estimate_batch
from .estimation.estimate import estimate
from .estimation.driver import LBFGS, DualAveraging, MirrorDescent, Problem
from .estimation.oracles import ApproximateOracle
from .graph.junction import JunctionTree, junction_tree
from .graph.size_limit import ModelTooLarge, set_max_model_bytes
from .model import metrics
from .model.approximate_model import ApproximateModel
from .model.fit_report import Fit, FitReport
from .model.graphical_model import GraphicalModel
from .model.serialization import load_model, load_model_schema
from .privacy import REST, Accountant, PrivacyBudgetExceeded, discrete_noise
from .privacy.noisy_marginals import noisy_marginals
from .programs import fast_compile, release_compiled
from .queries.constraints import Constraint
from .queries.public import PublicData
from .queries.measurement import Measurement, estimate_total
from .queries.workload import Workload
from .estimation.contract import Estimator, StepInfo
from .estimation.options import FitOptions
from .estimation.pure import fit  # the function ``pj.fit``; the package of estimators is ``pgmjax.estimation``

__all__ = [
    "Domain",
    "Dataset",
    "Measurement",
    "Constraint",
    "PublicData",
    "estimate",
    "fit",
    "Estimator",
    "StepInfo",
    "FitOptions",
    "estimate_batch",
    "Synthesizer",
    "Release",
    "BatchedMeasurement",
    "estimate_total",
    "GraphicalModel",
    "Fit",
    "FitReport",
    "ApproximateModel",
    "ApproximateOracle",
    "JunctionTree",
    "junction_tree",
    "MirrorDescent",
    "DualAveraging",
    "LBFGS",
    "Problem",
    "noisy_marginals",
    "queries",
    "metrics",
    "datasets",
    "Workload",
    "privacy",
    "discrete_noise",
    "rr",
    "bayes",
    "history",
    "uncertainty",
    "preprocess",
    "report_html",
    "mechanisms",
    "schema",
    "engines",
    "Accountant",
    "PrivacyBudgetExceeded",
    "REST",
    "load_model",
    "load_model_schema",
    "release_compiled",
    "fast_compile",
    "ModelTooLarge",
    "set_max_model_bytes",
]
__version__ = "0.1.0"

# Subpackages imported on first use (PEP 562): a process that only fits and queries models skips them, and a
# noticeable part of a fresh process's import time with them.
_LAZY = {"bayes": ".bayes", "history": ".history", "mechanisms": ".mechanisms", "rr": ".rr",
         "uncertainty": ".uncertainty", "report_html": ".cli.report_html", "preprocess": ".preprocessing.preprocess",
         "schema": ".data.schema", "engines": ".data.engines"}


#: Public names defined in a lazily imported module (PEP 562), by module.
_LAZY_NAMES = {"Synthesizer": ".synthesizer", "Release": ".synthesizer"}


def __getattr__(name):
    if name in _LAZY_NAMES:
        import importlib

        value = getattr(importlib.import_module(_LAZY_NAMES[name], __name__), name)
        globals()[name] = value
        return value
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name], __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'pgmjax' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
