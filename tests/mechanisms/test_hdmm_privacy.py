"""HDMM's noise goes through the privacy layer (pgmjax.mechanisms.matrix_mechanism.measure).

The matrix mechanism (McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical
queries under differential privacy", PVLDB 2018) measures ``y = A x + noise``. Every block of ``A`` must be
drawn and recorded by the :class:`~pgmjax.privacy.Accountant`: the ledger holds one entry per block on one
common noise scale and sums to the budget, the front-end reaches the data only through it, and no module of
the sub-package draws noise by itself (read from the source with :mod:`ast`).
"""

import ast
import importlib
import inspect
import math
import pathlib

import jax
import numpy as np
import pytest
from conftest import dotted as _dotted

import pgmjax as pj
from pgmjax.mechanisms import matrix_mechanism as mm

PACKAGE = pathlib.Path(mm.__file__).parent
DOM = pj.Domain({"a": 8, "b": 3, "c": 2})


@pytest.fixture(scope="module")
def data():
    return pj.Dataset(np.random.default_rng(3).integers(0, [8, 3, 2], (400, 3)), DOM)


def _strategy():
    """Three blocks of unequal weight and sensitivity: a p-Identity-like factor, two identities."""
    A = mm.pidentity_matrix(np.full((1, 8), 0.5))
    return mm.UnionStrategy([
        mm.KronStrategy(("a", "b"), (A, np.eye(3)), 0.5),
        mm.KronStrategy(("b", "c"), (np.eye(3), np.eye(2)), 0.3),
        mm.KronStrategy(("c",), (np.eye(2),), 0.2),
    ])


@pytest.mark.parametrize("bounded", [False, True])
def test_laplace_measurement_is_drawn_and_recorded_by_the_accountant(data, bounded):
    acc = pj.Accountant(epsilon=0.8, bounded=bounded)
    S = _strategy()
    release = mm.measure_strategy(acc, jax.random.key(1), data, S)
    ledger = acc.ledger
    assert len(ledger) == len(S.terms) == len(release.measurements)
    assert acc.spent == acc.budget == 0.8
    assert [e.target for e in ledger] == [t.clique for t in S.terms]
    assert {e.mechanism for e in ledger} == {"laplace"}
    # one scale on every row: b = ||A||_1 / eps, with ||A||_1 doubled for replace-one neighbours
    assert release.sensitivity == pytest.approx((2.0 if bounded else 1.0) * S.sensitivity("laplace"))
    assert release.scale == pytest.approx(release.sensitivity / 0.8)
    # each block's share of epsilon is its share of the sensitivity; the drawn scale is the common one,
    # enlarged a little by the privacy layer's floating-point-safe lattice, and the measurement carries it
    shares = [t.sensitivity("laplace") / S.sensitivity("laplace") for t in S.terms]
    for e, m, share in zip(ledger, release.measurements, shares):
        assert e.epsilon == pytest.approx(0.8 * share, rel=1e-12)
        assert release.scale <= e.scale <= release.scale * 1.01
        assert float(m.stddev) == pytest.approx(math.sqrt(2.0) * e.scale, rel=1e-5)  # plus the rounding variance
    assert release.noise_std == pytest.approx(math.sqrt(2.0) * release.scale)


def test_gaussian_measurement_is_drawn_and_recorded_by_the_accountant(data):
    acc = pj.Accountant(epsilon=1.0, delta=1e-6)
    release = mm.measure_strategy(acc, jax.random.key(2), data, _strategy())
    assert {e.mechanism for e in acc.ledger} == {"gaussian"} and len(acc.ledger) == 3
    assert acc.spent == acc.budget
    assert release.scale == pytest.approx(release.sensitivity / math.sqrt(2.0 * acc.budget))
    for e, m in zip(acc.ledger, release.measurements):
        assert release.scale <= e.scale <= release.scale * 1.01
        assert float(m.stddev) == pytest.approx(e.scale, rel=1e-12)


def test_marginals_strategy_releases_one_block_per_weighted_marginal(data):
    theta = np.zeros(8)
    theta[[1, 6, 7]] = [0.2, 0.3, 0.5]  # ("a",), ("b", "c"), ("a", "b", "c")
    S = mm.MarginalsStrategy(("a", "b", "c"), (8, 3, 2), theta)
    acc = pj.Accountant(epsilon=1.0)
    release = mm.measure_strategy(acc, jax.random.key(3), data, S)
    assert [e.target for e in acc.ledger] == [c for c, _ in S.marginals()]
    assert acc.spent == 1.0 and release.sensitivity == pytest.approx(1.0)


def test_measurement_is_reproducible_from_the_key(data):
    S = _strategy()
    ys = [
        [m.y for m in mm.measure_strategy(pj.Accountant(epsilon=1.0), jax.random.key(4), data, S).measurements]
        for _ in range(2)
    ]
    assert all(np.array_equal(a, b) for a, b in zip(*ys))


def test_measurement_refuses_what_the_privacy_layer_cannot_account(data):
    S = _strategy()
    with pytest.raises(TypeError, match="pgmjax.Accountant"):
        mm.measure_strategy(None, jax.random.key(0), data, S)
    with pytest.raises(ValueError, match="composition"):
        mm.measure_strategy(pj.Accountant(epsilon=1.0, delta=1e-6, composition="advanced"), jax.random.key(0), data, S)
    spent = pj.Accountant(epsilon=1.0)
    mm.measure_strategy(spent, jax.random.key(0), data, S)
    with pytest.raises(pj.PrivacyBudgetExceeded):
        mm.measure_strategy(spent, jax.random.key(0), data, S)
    assert len(spent.ledger) == 3  # the refused call recorded nothing


def test_the_front_end_reads_the_data_only_through_the_accountant(data, monkeypatch):
    calls = []
    measure = pj.Accountant.measure

    def spy(self, key, dataset, clique, **kw):
        calls.append(tuple(clique))
        return measure(self, key, dataset, clique, **kw)

    monkeypatch.setattr(pj.Accountant, "measure", spy)
    w = pj.Workload.benchmark(DOM, [("a", "b"), ("b", "c")], numeric=["a"])
    res = pj.mechanisms.hdmm(data, 1.0, key=jax.random.key(0), workload=w, restarts=4, engine_iters=10, synthetic=False)
    assert len(calls) == len(res.ledger) == len(res.measurements) == res.info.terms
    assert res.accountant.spent == 1.0
    assert calls == [e.target for e in res.ledger]


# ---------------------------------------------------------------------------------------------------
# No noise outside the privacy layer, read from the source
# ---------------------------------------------------------------------------------------------------

#: ``jax.random`` functions the sub-package may call: keys, and the U(0, 1) starting points of the
#: strategy fits (data-independent: the strategy never sees the data).
ALLOWED_RANDOM = {"split", "key", "PRNGKey", "fold_in", "uniform"}
#: Noise samplers and primitive mechanisms that only the Accountant may call.
SAMPLERS = {
    "standard_laplace", "standard_normal", "standard_gumbel", "laplace_mechanism", "gaussian_mechanism",
    "exponential_mechanism", "lattice_release", "discrete_noise", "samplers", "primitives", "lattice",
}
#: Accountant methods that draw noise.
DRAWS = {"measure", "measure_many", "laplace", "gaussian", "exponential", "exponential_parallel", "randomized_response"}


def _modules():
    return sorted(PACKAGE.glob("*.py"))


def test_the_walk_sees_the_sub_package():
    assert {"measure.py", "frontend.py", "optimize.py", "least_squares.py"} <= {p.name for p in _modules()}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_module_draws_noise_by_itself(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.startswith(("jax.random.", "random.")):
                assert name.rsplit(".", 1)[1] in ALLOWED_RANDOM, f"{path.name}:{node.lineno} calls {name}"
            assert not name.startswith(("np.random", "numpy.random")), f"{path.name}:{node.lineno} calls {name}"
            method = name.rsplit(".", 1)[-1]
            if method in DRAWS and "." in name and not name.startswith(("jax.", "np.")):
                # an Accountant draw: only the measurement module makes one
                assert path.name == "measure.py", f"{path.name}:{node.lineno} calls {name}"
        if isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names} | set((node.module or "").split("."))
            assert not names & SAMPLERS, f"{path.name}:{node.lineno} imports {sorted(names & SAMPLERS)}"
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("numpy.random") for a in node.names), path.name


def test_every_public_noise_function_takes_an_accountant():
    """The one public function that draws (it calls the Accountant) takes the Accountant as its argument."""
    drawing = []
    for path in _modules():
        module = importlib.import_module(f"{mm.__name__}.{path.stem}" if path.stem != "__init__" else mm.__name__)
        for name, fn in vars(module).items():
            if name.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                continue
            calls = {_dotted(n.func).rsplit(".", 1)[-1] for n in ast.walk(ast.parse(inspect.getsource(fn).lstrip())) if isinstance(n, ast.Call)}
            if "measure" in calls:
                drawing.append(name)
                assert list(inspect.signature(fn).parameters)[0] == "accountant", name
    assert drawing == ["measure_strategy"]


def test_the_old_unaccounted_module_is_gone():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pgmjax.hdmm")
    assert not hasattr(pj, "hdmm")
    assert inspect.ismodule(mm.measure)  # the name is the measurement module, not a noise function
    assert pj.mechanisms.hdmm is mm.hdmm
