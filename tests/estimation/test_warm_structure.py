"""A warm start's structure (pgmjax.estimation.warm_structure): the warm model's cliques imposed, or a fresh
triangulation that holds the warm model's distribution through its marginals."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.estimation import inputs
from pgmjax.estimation.warm_structure import FRESH_SHARE, marginal_tables, warm_cliques
from pgmjax.graph import oracle
from pgmjax.graph.junction import junction_tree, maximal_cliques

DOM = pj.Domain({"a": 3, "b": 4, "c": 3, "d": 4, "e": 2})
CHAIN = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")]
WIDE = [("a", "b", "c", "d", "e")]  # the warm model's tree: one clique of every attribute


def _measurements(seed=0):
    rng = np.random.default_rng(seed)
    return [pj.Measurement(c, rng.uniform(5, 50, DOM.shape_of(c)), stddev=1.0) for c in CHAIN]


def _start(plan, warm):
    """The model a fit on ``plan`` starts from, warm-started from ``warm`` (float64)."""
    theta = inputs.starting_potentials(plan, warm, (), jnp.float64)
    return pj.GraphicalModel(plan, theta, warm.total)


def test_a_fresh_tree_is_taken_where_the_imposed_one_is_much_larger():
    ms = _measurements()
    fit = pj.estimate(DOM, ms, iters=300, cliques=WIDE, dtype=jnp.float64, report=True)
    warm = fit.model
    assert warm.cliques == (WIDE[0],)
    fresh = junction_tree(DOM, maximal_cliques(DOM, CHAIN))
    assert fresh.cells <= FRESH_SHARE * DOM.size(WIDE[0])
    assert warm_cliques(DOM, CHAIN, warm) == []
    refit = pj.estimate(DOM, ms, iters=5, warm_start=fit, dtype=jnp.float64)  # the Fit: its step size carried on
    assert sorted(refit.cliques) == sorted(CHAIN)


def test_a_warm_model_fitted_to_the_fresh_cliques_is_carried_exactly():
    """Fitted to the chain's pairs, the warm model factorizes over the chain: the fresh tree's start is the same
    distribution, on every marginal (pairs the chain does not hold included)."""
    warm = pj.estimate(DOM, _measurements(), iters=300, cliques=WIDE, dtype=jnp.float64)
    plan = oracle.make_plan(DOM, CHAIN)
    start = _start(plan, warm)
    for c in itertools.combinations(DOM.attributes, 2):
        np.testing.assert_allclose(start.marginal(c), warm.marginal(c), rtol=1e-9, atol=1e-9 * warm.total)
    np.testing.assert_allclose(start.marginal(DOM.attributes), warm.marginal(DOM.attributes), rtol=1e-8,
                               atol=1e-9 * warm.total)


def test_any_other_warm_model_enters_as_the_fresh_trees_maximum_entropy_distribution_with_its_marginals():
    """Random potentials on the wide clique do not factorize over the chain: the start keeps the warm model's
    marginals on the chain's cliques (what the fresh tree can hold), the maximum-entropy distribution with them."""
    rng = np.random.default_rng(3)
    wide_plan = oracle.make_plan(DOM, WIDE)
    warm = pj.GraphicalModel(wide_plan, wide_plan.from_tables({WIDE[0]: rng.normal(0, 1, DOM.shape_of(WIDE[0]))},
                                                              jnp.float64), 1000.0)
    plan = oracle.make_plan(DOM, CHAIN)
    start = _start(plan, warm)
    for c in CHAIN:
        np.testing.assert_allclose(start.marginal(c), warm.marginal(c), rtol=1e-9)
    # the chain's maximum-entropy joint: the product of its pairs over its separators
    joint = start.marginal(DOM.attributes) / start.total
    pairs = [warm.marginal(c) / warm.total for c in CHAIN]
    singles = [warm.marginal((s,)) / warm.total for s in ("b", "c", "d")]
    want = np.einsum("ab,bc,cd,de->abcde", *pairs) / np.einsum("b,c,d->bcd", *singles)[None, :, :, :, None]
    np.testing.assert_allclose(joint, want, rtol=1e-9, atol=1e-15)


def test_the_refit_from_the_fresh_tree_reaches_the_cold_fits_optimum():
    ms = _measurements(1)
    warm = pj.estimate(DOM, ms[:3], iters=200, cliques=WIDE, dtype=jnp.float64, report=True)
    refit, refit_report = pj.estimate(DOM, ms, iters=2000, warm_start=warm, dtype=jnp.float64, report=True)
    cold, cold_report = pj.estimate(DOM, ms, iters=2000, dtype=jnp.float64, report=True)
    assert sorted(refit.cliques) == sorted(cold.cliques)
    assert refit_report.loss == pytest.approx(cold_report.loss, rel=1e-6, abs=1e-8)
    np.testing.assert_allclose(refit.marginal(("a", "e")), cold.marginal(("a", "e")), rtol=1e-5)


@pytest.mark.filterwarnings("ignore:estimate. the measurement on")
def test_the_imposed_cliques_stay_where_the_fresh_tree_saves_little_or_the_warm_model_has_structural_zeros():
    ms = _measurements()
    # the warm model's own tree is the chain: nothing to save
    warm = pj.estimate(DOM, ms, iters=50, dtype=jnp.float64)
    assert warm_cliques(DOM, CHAIN, warm) == [c for c in warm.cliques if len(c) > 1]
    # structural zeros are potentials of -inf: a marginal would floor them, so the warm cliques load as they are
    zero = pj.Constraint.forbid(("a", "b"), [(0, 0)])
    zeros = pj.estimate(DOM, ms, iters=50, cliques=WIDE, constraints=[zero], dtype=jnp.float64, report=True)
    assert warm_cliques(DOM, CHAIN, zeros.model) == [WIDE[0]]
    refit = pj.estimate(DOM, ms, iters=5, warm_start=zeros, dtype=jnp.float64)
    assert refit.marginal(("a", "b"))[0, 0] == 0.0


def test_marginal_tables_keys_the_cliques_and_the_separators():
    warm = pj.estimate(DOM, _measurements(), iters=50, dtype=jnp.float64)
    tree = junction_tree(DOM, maximal_cliques(DOM, CHAIN))
    tables = marginal_tables(tree, warm)
    assert set(tables) == set(tree.cliques) | {s for s, p in zip(tree.separators, tree.parent) if p >= 0 and s}
    assert all(np.isfinite(t).all() for t in tables.values())
