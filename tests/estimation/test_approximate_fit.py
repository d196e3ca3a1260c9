"""Fits with the approximate oracle (estimate(..., oracle=)) against exact fits; the model's answers, "auto",
recompilation, errors."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles

import pgmjax as pj
from pgmjax import programs
from pgmjax.estimation.oracles import ApproximateOracle
from pgmjax.graph import size_limit


def _data(rng, dom, n=2000):
    cols = [rng.integers(0, dom[dom.attributes[0]], n)]
    for a in dom.attributes[1:]:  # each attribute copies the previous one 60% of the time: correlated pairs
        prev = np.minimum(cols[-1], dom[a] - 1)
        cols.append(np.where(rng.random(n) < 0.6, prev, rng.integers(0, dom[a], n)))
    return pj.Dataset(np.stack(cols, 1), dom)


def _measure(rng, data, cliques, sigma):
    return [pj.Measurement(c, data.marginal(c) + rng.normal(size=data.domain.shape_of(c)) * sigma, stddev=max(sigma, 1.0))
            for c in cliques]


TREE = [("a", "b"), ("b", "c"), ("b", "d"), ("d", "e")]
LOOPY = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d"), ("d", "e"), ("a", "e")]


@pytest.mark.parametrize("kind,dtype,tol", [
    ("convex", jnp.float64, 1e-5), ("convex", jnp.float32, 5e-3), ("bethe", jnp.float64, 1e-5),
    pytest.param("bethe", jnp.float32, 5e-3, marks=pytest.mark.slow),  # a second parametrisation of a long fit
], ids=["convex-float64", "convex-float32", "bethe-float64", "bethe-float32"])
def test_tree_fit_equals_exact_fit(kind, dtype, tol):
    """On a tree the local polytope is the marginal polytope: with every clique measured, both fits are the one
    projection of the answers onto it (the L2 loss is strictly convex in the measured marginals). Against the
    float64 exact fit: float64 within 1e-5 (loss, relative; marginals, of N). float32 within 5e-3: the float32
    exact fit itself stops 3.4e-3 above the optimum on this problem (mirror descent's float32 line search, either
    oracle), and the oracle's float32 messages after 100 iterations are consistent to about 1e-4 of N, so the
    convex fit's loss can also land 5e-4 below the optimum."""
    rng = np.random.default_rng(0)
    dom = pj.Domain({"a": 2, "b": 3, "c": 4, "d": 2, "e": 3})
    ms = _measure(rng, _data(rng, dom), TREE, 5.0)
    exact, exact_report = pj.estimate(dom, ms, iters=400, dtype=jnp.float64, report=True)
    approx, approx_report = pj.estimate(dom, ms, iters=400, dtype=dtype, oracle=ApproximateOracle(kind=kind, iters=100),
                                        report=True)
    assert approx_report.loss == pytest.approx(exact_report.loss, rel=tol)
    for c in TREE:
        np.testing.assert_allclose(approx.marginal(c), exact.marginal(c), atol=tol * exact.total)


def test_loopy_fit_against_exact_fit():
    """Noise-free answers lie in the marginal polytope, hence in the local one: both fits reproduce them. With
    noise the relaxed problem's optimum is at most the exact one's (the local polytope contains the marginal
    polytope), and its answers stay close: measured here (float64, 300 iterations) 4.112072 against 4.112100, and
    the measured marginals 2.3e-6 of N apart (L1); asserted 1e-4 of N. Noise-free: 1.4e-5 of N from the data
    (float32), asserted 2e-4."""
    rng = np.random.default_rng(1)
    dom = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 3, "e": 2})
    data = _data(rng, dom)
    clean = [pj.Measurement(c, data.marginal(c), stddev=1.0) for c in LOOPY]
    approx = pj.estimate(dom, clean, iters=300, oracle="approximate")
    for c in LOOPY:
        np.testing.assert_allclose(approx.marginal(c), data.marginal(c), atol=2e-4 * len(data))
    noisy = _measure(rng, data, LOOPY, 20.0)
    exact, exact_report = pj.estimate(dom, noisy, iters=300, dtype=jnp.float64, report=True)
    approx, approx_report = pj.estimate(dom, noisy, iters=300, dtype=jnp.float64, oracle="approximate", report=True)
    assert approx_report.loss <= exact_report.loss * (1 + 1e-4)
    for c in LOOPY:
        assert np.abs(approx.marginal(c) - exact.marginal(c)).sum() <= 1e-4 * len(data)


def test_pseudo_marginals_consistent_after_a_fit():
    rng = np.random.default_rng(2)
    dom = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 3, "e": 2})
    model = pj.estimate(dom, _measure(rng, _data(rng, dom), LOOPY, 10.0), iters=300, oracle="approximate", dtype=jnp.float64)
    tables = model.clique_marginals()
    for p, c in model.plan.graph.edges:
        P, C = model.regions[p], model.regions[c]
        np.testing.assert_allclose(tables[P].sum(axis=tuple(i for i, a in enumerate(P) if a not in C)), tables[C],
                                   atol=1e-5 * model.total)  # 100 message-passing iterations per call


def test_second_fit_on_the_same_structure_compiles_nothing():
    rng = np.random.default_rng(3)
    dom = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 3, "e": 2})
    data = _data(rng, dom)
    programs.release_compiled()
    pj.estimate(dom, _measure(rng, data, LOOPY, 5.0), iters=60, oracle="approximate")
    with count_compiles() as counter:
        model = pj.estimate(dom, _measure(rng, data, LOOPY, 7.0), iters=60, oracle="approximate")
        model.marginal("a")
    assert counter.count == 0, counter.names


def test_model_answers_inside_regions_and_refuses_across():
    rng = np.random.default_rng(4)
    dom = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 3, "e": 2})
    fit = pj.estimate(dom, _measure(rng, _data(rng, dom), LOOPY, 5.0), iters=100, oracle="approximate", report=True)
    model = fit.model
    ab = model.marginal(("b", "a"))
    assert ab.shape == (3, 2) and ab.sum() == pytest.approx(model.total, rel=1e-5)
    np.testing.assert_allclose(model.answer({"a": pj.queries.factors.Identity()}), ab.sum(axis=0), rtol=1e-5)
    with pytest.raises(ValueError, match=r"not available from an approximate model: query across regions.*\('a', 'd'\)"):
        model.marginal(("a", "d"))
    ad = model.infer_marginals([("a", "d"), ("a", "b")])
    assert ad[0].shape == (2, 3) and ad[0].sum() == pytest.approx(model.total, rel=1e-4)
    np.testing.assert_allclose(ad[1], model.marginal(("a", "b")), rtol=1e-6)
    with pytest.raises(ValueError, match="pass a jax.random key"):
        model.synthetic_data(10)
    warm, report = pj.estimate(dom, _measure(rng, _data(rng, dom), LOOPY, 5.0), iters=20, oracle="approximate",
                               warm_start=fit, report=True)  # the Fit: its step size carried on
    assert warm.info["oracle"] == "approximate" and report.info["oracle"] == "approximate"


def test_auto_takes_exact_when_the_tree_fits_and_approximate_otherwise():
    rng = np.random.default_rng(5)
    dom = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 3, "e": 2})
    ms = _measure(rng, _data(rng, dom), LOOPY, 5.0)
    exact, exact_report = pj.estimate(dom, ms, iters=200, report=True)
    auto, auto_report = pj.estimate(dom, ms, iters=200, oracle="auto", report=True)
    assert auto_report.info["oracle"] == "exact" and auto_report.loss == exact_report.loss
    np.testing.assert_array_equal(auto.marginal(("a", "b")), exact.marginal(("a", "b")))
    assert exact_report.info == {}  # the default (exact) path is unchanged: no oracle diagnostics
    with size_limit.limited(8 * 30):  # the junction tree (72 cells) is over, the cliques (34 cells) are not
        with pytest.raises(size_limit.ModelTooLarge):
            pj.estimate(dom, ms, iters=10)
        with pytest.warns(UserWarning, match="approximate oracle"):
            model, report = pj.estimate(dom, ms, iters=50, oracle="auto", report=True)
    assert model.info["oracle"] == "approximate" and "size limit" in model.info["reason"]
    assert report.info == model.info


def test_bad_oracle_options_are_refused_before_fitting():
    dom = pj.Domain({"a": 2, "b": 2})
    ms = [pj.Measurement(("a", "b"), np.ones((2, 2)))]
    with pytest.raises(ValueError, match="oracle must be one of"):
        pj.estimate(dom, ms, oracle="loopy")
    with pytest.raises(ValueError, match="needs method='mirror_descent'"):
        pj.estimate(dom, ms, oracle="approximate", method="lbfgs")
    with pytest.raises(ValueError, match="kind must be one of"):
        ApproximateOracle(kind="tree")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pj.estimate(dom, ms, iters=5, oracle="auto", report=True).report.info["oracle"] == "exact"
