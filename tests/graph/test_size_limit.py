"""Models too large for the machine are refused before anything is allocated (issue 40, item 6).

Every fit builds its plan through ``make_plan``, which checks the junction tree's cells (Python integers)
against the limit (``PGMJAX_MAX_MODEL_BYTES``, ``pgmjax.set_max_model_bytes``, default a share of the
machine's memory) and raises ``pgmjax.ModelTooLarge`` (a ValueError) naming the cells, the bytes and the
largest clique. Huge domains give that error in the front-ends, never an overflow or NumPy's "Maximum
allowed dimension exceeded"; a measurement whose array has another shape than its marginal is refused.
"""

import dataclasses
import math
import os
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import settings
from pgmjax.graph import oracle_plan

try:
    from pgmjax.graph import size_limit
except ImportError:  # before the size check existed: every test below fails on its own
    size_limit = None


@pytest.fixture(autouse=True)
def _default_limit(monkeypatch):
    """Every test starts from the default limit (no environment variable, no process-wide setting)."""
    if size_limit is None:
        yield
        return
    _set_environment_limit(monkeypatch, "")
    previous = size_limit.set_max_model_bytes(None)
    yield
    size_limit.set_max_model_bytes(previous)


def _set_environment_limit(monkeypatch, value: str) -> None:
    """As if ``PGMJAX_MAX_MODEL_BYTES`` had been ``value`` when pgmjax was imported (the one time it is read)."""
    monkeypatch.setattr(settings, "PROCESS", dataclasses.replace(settings.PROCESS, max_model_bytes=value))


def _grid(k: int = 50, n: int = 5):
    names = [f"x{i}{j}" for i in range(n) for j in range(n)]
    dom = pj.Domain({a: k for a in names})
    cliques = [(f"x{i}{j}", f"x{i + 1}{j}") for i in range(n - 1) for j in range(n)]
    cliques += [(f"x{i}{j}", f"x{i}{j + 1}") for i in range(n) for j in range(n - 1)]
    return dom, cliques


# ---- the error and where it is exported ------------------------------------------------------------------

def test_model_too_large_is_a_value_error_exported_by_the_public_api():
    assert issubclass(pj.ModelTooLarge, ValueError)
    assert "ModelTooLarge" in pj.__all__ and "set_max_model_bytes" in pj.__all__


def test_an_extra_clique_of_1e10_cells_is_refused_before_allocation():
    dom = pj.Domain({"a": 2, "b": 3, "c": 100_000, "d": 100_000})
    m = pj.Measurement(("a", "b"), np.ones(6))
    t = time.perf_counter()
    with pytest.raises(pj.ModelTooLarge, match=r"10,000,000,006 cells \(74\.51 GB.*largest clique \('c', 'd'\)") as e:
        pj.estimate(dom, [m], iters=5, cliques=[("c", "d")])
    assert time.perf_counter() - t < 5
    err = e.value
    assert err.cells == 10_000_000_006 and err.bytes == 8 * err.cells and err.clique == ("c", "d")
    assert err.clique_cells == 10**10 and err.limit < err.bytes


def test_a_grid_of_pairwise_measurements_whose_junction_tree_is_huge_is_refused_quickly():
    dom, cliques = _grid()
    ms = [pj.Measurement(c, np.ones(dom.size(c))) for c in cliques]
    t = time.perf_counter()
    with pytest.raises(pj.ModelTooLarge, match=r"48,488,000,000 cells") as e:
        pj.estimate(dom, ms, iters=5)
    assert time.perf_counter() - t < 10
    assert e.value.clique_cells == 50**6 and len(e.value.clique) == 6


def test_estimate_batch_and_warm_starts_are_checked(monkeypatch):
    dom = pj.Domain({"a": 6, "b": 6})
    small = pj.estimate(dom, [pj.Measurement("a", np.full(6, 10.0))], iters=5)
    _set_environment_limit(monkeypatch, "200")  # 36 + 6 + 6 cells of the (a, b) model: 384 bytes
    with pytest.raises(pj.ModelTooLarge, match=r"above the limit of 200 bytes \(PGMJAX_MAX_MODEL_BYTES\)"):
        pj.estimate(dom, [pj.Measurement(("a", "b"), np.ones(36))], iters=5, warm_start=small)
    batch = pj.BatchedMeasurement(("a", "b"), np.ones((2, 36)))
    with pytest.raises(pj.ModelTooLarge, match=r"\('a', 'b'\)"):
        pj.estimate_batch(dom, [batch], iters=5)


# ---- the limit: argument, process-wide setting, environment variable, default -----------------------------

def test_the_limit_comes_from_the_argument_the_setting_the_environment_or_the_machine(monkeypatch):
    dom = pj.Domain({"a": 10, "b": 10})
    with pytest.raises(pj.ModelTooLarge, match=r"\(max_bytes\)"):
        oracle_plan.make_plan(dom, [("a", "b")], max_bytes=799)
    assert oracle_plan.make_plan(dom, [("a", "b")], max_bytes=800).cells >= 100

    _set_environment_limit(monkeypatch, "500")
    assert size_limit.max_model_bytes() == 500
    with pytest.raises(pj.ModelTooLarge, match="PGMJAX_MAX_MODEL_BYTES"):
        oracle_plan.make_plan(dom, [("a", "b")])
    previous = pj.set_max_model_bytes(10**6)  # the process-wide setting wins over the environment
    try:
        assert size_limit.max_model_bytes() == 10**6
        oracle_plan.make_plan(dom, [("a", "b")])
    finally:
        pj.set_max_model_bytes(previous)
    _set_environment_limit(monkeypatch, "inf")
    assert size_limit.max_model_bytes() == math.inf
    _set_environment_limit(monkeypatch, "lots")
    with pytest.raises(ValueError, match="PGMJAX_MAX_MODEL_BYTES='lots'"):
        size_limit.max_model_bytes()

    _set_environment_limit(monkeypatch, "")
    memory = size_limit._accelerator_memory() or size_limit.physical_memory()  # a GPU's where JAX runs on one
    assert memory and size_limit.max_model_bytes() == pytest.approx(size_limit.DEFAULT_FRACTION * memory)
    with pytest.raises(ValueError):
        pj.set_max_model_bytes(-1)


def test_the_environment_variable_is_read_once_at_import():
    # A process setting, as XLA's flags are: set before pgmjax is imported, it holds; changed after, a check does
    # not read it (no check reads the environment).
    code = ("import os, pgmjax\nfrom pgmjax.graph import size_limit\nos.environ['PGMJAX_MAX_MODEL_BYTES'] = '700'\n"
            "print(size_limit.max_model_bytes(), pgmjax.settings.PROCESS.max_model_bytes)")
    env = {**os.environ, "PGMJAX_MAX_MODEL_BYTES": "500"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["500.0", "500"]


def test_inspecting_a_junction_tree_of_a_huge_domain_neither_raises_nor_overflows():
    dom = pj.Domain({"a": 10**200, "b": 10**200, "c": 10**200})
    tree = pj.junction_tree(dom, [("a", "b"), ("b", "c")])  # OverflowError: math range error before
    assert tree.cells == 2 * 10**400
    with pytest.raises(pj.ModelTooLarge, match=r"about 10\^400 cells"):
        size_limit.check_tree(tree, "test")


# ---- the front-ends on huge domains ---------------------------------------------------------------------

def _data(size: int, d: int = 3) -> pj.Dataset:
    dom = pj.Domain({f"a{i}": size for i in range(d)})
    return pj.Dataset(np.random.default_rng(0).integers(0, 5, (100, d)), dom)


@pytest.mark.parametrize("name", ["mwem", "mst", "hdmm", "dualquery"])
def test_front_ends_refuse_a_huge_domain_with_the_size_error(name):
    fn = getattr(pj.mechanisms, name)
    # mwem raised OverflowError (math range error), the others NumPy's "Maximum allowed dimension exceeded"
    with pytest.raises(pj.ModelTooLarge, match=rf"^{name}: .*\('a0',\)"):
        fn(_data(10**200), 1.0, key=jax.random.key(0), engine_iters=5)


@pytest.mark.parametrize("name", ["mst", "hdmm", "dualquery", "rr_synthetic"])
def test_front_ends_refuse_attributes_whose_tables_cannot_fit_before_any_private_computation(name):
    fn = getattr(pj.mechanisms, name)
    # a million values per attribute: NumPy's "Unable to allocate 7.28 TiB" before (after 70 s in mst)
    t = time.perf_counter()
    with pytest.raises(pj.ModelTooLarge, match=rf"^{name}: .*'a0'"):
        fn(_data(10**6), 1.0, key=jax.random.key(0), engine_iters=5)
    assert time.perf_counter() - t < 10


def test_hdmm_names_the_attribute_whose_matrices_break_the_limit(monkeypatch):
    _set_environment_limit(monkeypatch, str(8 * 60_000))  # the data vectors fit; 300 x 300 matrices do not
    data = pj.Dataset(np.zeros((10, 2), int), pj.Domain({"a": 300, "b": 2}))
    with pytest.raises(pj.ModelTooLarge, match=r"hdmm: the 300 x 300 query and strategy matrices of \('a',\): 90,000 cells"):
        pj.mechanisms.hdmm(data, 1.0, key=jax.random.key(0), engine_iters=5)


# ---- measurement arrays of the wrong shape ----------------------------------------------------------------

def test_a_transposed_marginal_is_refused_naming_both_shapes():
    dom = pj.Domain({"a": 2, "b": 3})
    y = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match=r"y has shape \(3, 2\) but the marginal on \('a', 'b'\) has shape \(2, 3\)"):
        pj.estimate(dom, [pj.Measurement(("a", "b"), y.T)], iters=5)
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):  # same size, another 2-D shape
        pj.estimate(dom, [pj.Measurement(("a", "b"), y.reshape(3, 2))], iters=5)
    # the marginal's own shape and the flat array stay accepted, and mean the same cells
    a = pj.estimate(dom, [pj.Measurement(("a", "b"), y + 1)], iters=50)
    b = pj.estimate(dom, [pj.Measurement(("a", "b"), (y + 1).ravel())], iters=50)
    np.testing.assert_array_equal(a.marginal(("a", "b")), b.marginal(("a", "b")))


def test_kronecker_and_dense_answers_of_another_shape_are_refused():
    y = np.ones((2, 3))
    pj.Measurement(("a", "b"), y, query=(np.eye(2), np.eye(3)))  # (r_1, r_2): accepted
    with pytest.raises(ValueError, match=r"y has shape \(3, 2\) but the kron query's answers have shape \(2, 3\)"):
        pj.Measurement(("a", "b"), y.T, query=(np.eye(2), np.eye(3)))
    with pytest.raises(ValueError, match=r"y has shape \(2, 3\) but the dense query's answers have shape \(6,\)"):
        pj.Measurement(("a", "b"), y, query=np.eye(6))


def test_a_batched_measurement_of_another_shape_is_refused():
    """A batched ``y`` of shape (B, 3, 2) for a (2, 3) marginal is refused naming both shapes (it was flattened
    into the wrong cells); the marginal's shape and the flat rows stay accepted."""
    dom = pj.Domain({"a": 2, "b": 3})
    with pytest.raises(ValueError, match=r"y has shape \(3, 2\) but the marginal on \('a', 'b'\) has shape \(2, 3\)"):
        pj.estimate_batch(dom, [pj.BatchedMeasurement(("a", "b"), np.ones((4, 3, 2)), stddev=1.0)], iters=5)
    for y in (np.ones((4, 2, 3)), np.ones((4, 6))):
        assert len(pj.estimate_batch(dom, [pj.BatchedMeasurement(("a", "b"), y, stddev=1.0)], iters=5)) == 4
