"""Workloads, error metrics (hand-computed cases) and the shared datasets' benchmark workloads."""

import itertools
import math

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import data_dir_or_skip

import pgmjax as pj
from pgmjax import datasets
from pgmjax import queries as Q
from pgmjax.graph import oracle


@pytest.fixture
def tiny():
    dom = pj.Domain({"a": 3, "b": 2})
    # a: 0,0,1,2 ; b: 0,1,1,1
    return pj.Dataset(np.array([[0, 0], [0, 1], [1, 1], [2, 1]]), dom)


def test_answers_on_data_by_hand(tiny):
    w = pj.Workload(tiny.domain, [(("a",), [Q.Prefix()]), (("a", "b"), [None, Q.Value(1)]), (("b",), None)])
    got = w.answer(tiny)
    np.testing.assert_array_equal(got[0], [2, 3, 4])
    np.testing.assert_array_equal(got[1], [[1], [1], [1]])
    np.testing.assert_array_equal(got[2], [1, 3])


def test_workload_error_by_hand(tiny):
    w = pj.Workload(tiny.domain, [(("a",), [Q.Prefix()]), (("b",), None)])
    est = [np.array([3.0, 3.0, 4.0]), np.array([2.0, 2.0])]
    # query 1: |2-3| = 1 over 2 * (2+3+4) = 18 ; query 2: (1 + 1) / (2 * 4) = 0.25
    assert math.isclose(pj.metrics.workload_error(w, tiny, est), (1 / 18 + 0.25) / 2)
    assert math.isclose(pj.metrics.workload_error(w, tiny, est, scale="script"), (1 / 9 + 0.5) / 2)
    mean, each = pj.metrics.workload_error(w, tiny, est, per_query=True)
    np.testing.assert_allclose(each, [1 / 18, 0.25])
    assert pj.metrics.max_abs_error(w, tiny, est) == 1.0
    assert pj.metrics.workload_error(w, tiny, tiny) == 0.0


def test_identity_workload_error_is_total_variation(tiny, rng):
    other = pj.Dataset(rng.integers(0, [3, 2], size=(4, 2)), tiny.domain)
    w = pj.Workload.marginals(tiny.domain, [("a", "b")])
    p, q = tiny.marginal(("a", "b")) / 4, other.marginal(("a", "b")) / 4
    tvd = 0.5 * np.abs(p - q).sum()
    assert math.isclose(pj.metrics.workload_error(w, tiny, other), tvd)
    assert math.isclose(pj.metrics.marginal_tvd(tiny, other, [("a", "b")]), tvd)


def test_synthetic_data_of_another_size_is_rescaled(tiny):
    doubled = pj.Dataset(np.concatenate([tiny.records, tiny.records]), tiny.domain)
    w = pj.Workload.all_kway(tiny.domain, 1)
    assert pj.metrics.workload_error(w, tiny, doubled) == 0.0
    assert pj.metrics.marginal_tvd(tiny, doubled, w.cliques) == 0.0


def test_model_answers_match_data_for_an_exact_model(tiny):
    plan = oracle.make_plan(tiny.domain, [("a", "b")])
    with np.errstate(divide="ignore"):
        theta = plan.from_tables({("a", "b"): np.log(tiny.marginal(("a", "b")))}, jnp.float64)
    model = pj.GraphicalModel(plan, theta, 4.0)
    w = pj.Workload.benchmark(tiny.domain, [("a", "b"), ("b",)], numeric=["a"])
    for got, want in zip(w.answer(model), w.answer(tiny)):
        np.testing.assert_allclose(got, want, atol=1e-12)
    assert pj.metrics.workload_error(w, tiny, model) < 1e-12
    report = pj.metrics.compare(tiny, model)
    assert report["workload_error"] < 1e-12 and report["marginal_tvd"] < 1e-12


def test_builders():
    dom = pj.Domain({f"x{i}": 2 + i for i in range(5)})
    assert len(pj.Workload.all_kway(dom, 2)) == 10
    assert len(pj.Workload.all_kway(dom, 2, max_cells=12)) == sum(
        dom.size(c) <= 12 for c in itertools.combinations(dom.attributes, 2)
    )
    a = pj.Workload.random_kway(dom, 3, 4, seed=1)
    b = pj.Workload.random_kway(dom, 3, 4, seed=1)
    assert a.cliques == b.cliques and len(set(a.cliques)) == 4
    bench = pj.Workload.benchmark(dom, [("x0", "x3")], numeric=["x3"])
    assert bench.queries[0].matrices[0] is None
    np.testing.assert_array_equal(bench.queries[0].matrices[1], np.tril(np.ones((5, 5))))


def test_workload_errors():
    dom = pj.Domain({"a": 3, "b": 2})
    with pytest.raises(ValueError, match="'c'"):
        pj.Workload.marginals(dom, [("a", "c")])
    with pytest.raises(ValueError, match="2 attributes"):
        pj.Workload(dom, [(("a", "b"), [None])])
    with pytest.raises(ValueError, match="numeric attributes"):
        pj.Workload.benchmark(dom, [("a",)], numeric=["zz"])
    with pytest.raises(ValueError, match="count"):
        pj.Workload.random_kway(dom, 2, 5)
    with pytest.raises(ValueError, match="scale"):
        pj.metrics.workload_error(pj.Workload.marginals(dom, ["a"]), [np.ones(3)], [np.ones(3)], scale="x")


@pytest.mark.parametrize("name", ["titanic", "adult", "loans", "stroke", "nltcs"])
def test_shared_benchmark_workloads(name):
    folder = data_dir_or_skip(name)
    data = datasets.load(name, folder.rsplit("/", 1)[0])
    numeric = datasets.NUMERIC[name]
    assert set(numeric) <= set(data.domain.attributes)
    cliques = datasets.benchmark_cliques(name, data.domain)
    assert len(cliques) == 15 and len(set(cliques)) == 15
    w = pj.Workload.benchmark(data.domain, cliques, numeric)
    assert pj.metrics.workload_error(w, data, data) == 0.0
    tree_cells = sum(data.domain.size(c) for c in pj.junction_tree(data.domain, cliques).cliques)
    if name == "adult":
        # the paper's 15 cliques; their junction tree is about 3.9M cells
        assert 3.5e6 < tree_cells < 4.5e6
    else:
        assert tree_cells <= datasets.MAX_BENCHMARK_MODEL_CELLS


def _tree_cells(dom, cliques):
    return sum(dom.size(c) for c in pj.junction_tree(dom, cliques).cliques)


def test_benchmark_cliques_cap_skips_draws_that_grow_the_model():
    dom = pj.Domain({f"x{i}": n for i, n in enumerate([30, 25, 2, 3, 40, 2, 35, 4])})
    free = datasets.benchmark_cliques("toy", dom, count=6, max_model_cells=None)
    assert free == datasets.benchmark_cliques("toy", dom, count=6, max_model_cells=None)  # seeded, deterministic
    cap = _tree_cells(dom, free) // 4
    capped = datasets.benchmark_cliques("toy", dom, count=6, max_model_cells=cap)
    assert len(set(capped)) == 6 and all(len(c) == 3 for c in capped)
    assert _tree_cells(dom, capped) <= cap < _tree_cells(dom, free)
    # the draws the cap keeps are a subsequence of the uncapped draw order with the same seed
    assert capped[0] == free[0]
    with pytest.raises(ValueError, match="within 10 cells"):
        datasets.benchmark_cliques("toy", dom, count=10, max_model_cells=10)
    with pytest.raises(ValueError, match="fewer than 60"):
        datasets.benchmark_cliques("toy", dom, count=60)
