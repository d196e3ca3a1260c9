"""The approximate oracle: exact on trees (Bethe), locally consistent at convergence (convex and Bethe), float32
as right as float64, structural zeros and bad potentials handled."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracle_reference import _brute_log_joint
from scipy.special import logsumexp

import pgmjax as pj
from pgmjax.graph import approximate_oracle as ao
from pgmjax.graph import oracle


def _tree(rng):
    d = int(rng.integers(3, 7))
    dom = pj.Domain({f"x{i}": int(rng.integers(2, 5)) for i in range(d)})
    cliques = [(f"x{int(rng.integers(0, i))}", f"x{i}") for i in range(1, d)]  # a random tree of pairs
    return dom, cliques


def _consistency(plan, flat):
    """Largest |marginal of a parent's belief onto a child - the child's belief| over the region graph's edges."""
    t = ao.region_tables(plan, flat)
    g = plan.graph
    worst = 0.0
    for p, c in g.edges:
        P, C = g.regions[p], g.regions[c]
        m = t[P].sum(axis=tuple(i for i, a in enumerate(P) if a not in C))
        worst = max(worst, float(np.abs(m - t[C]).max()))
    return worst


@pytest.mark.parametrize("dtype,atol", [(jnp.float64, 1e-10), (jnp.float32, 1e-5)])
def test_bethe_is_exact_on_trees(dtype, atol):
    rng = np.random.default_rng(7)
    f = jax.jit(ao.marginals)
    for _ in range(6):
        dom, cliques = _tree(rng)
        tables = {c: rng.normal(size=dom.shape_of(c)) * 2 for c in cliques}
        plan = ao.make_approximate_plan(dom, cliques, "bethe", iters=200)
        mu, log_z = f(plan, plan.from_tables(tables, dtype), 1.0)
        logp = _brute_log_joint(dom, tables)
        ref = logsumexp(logp)
        p = np.exp(logp - ref)
        for j, c in enumerate(plan.cliques):
            want = p.sum(axis=tuple(i for i, a in enumerate(dom.attributes) if a not in c))
            np.testing.assert_allclose(np.asarray(plan.table(mu, j)), want, atol=atol)
        np.testing.assert_allclose(float(log_z), ref, rtol=1e-8 if dtype == jnp.float64 else 1e-5)


@pytest.mark.parametrize("kind", ["convex", "bethe"])
def test_consistent_at_convergence_on_loopy_models(kind):
    rng = np.random.default_rng(3)
    dom = pj.Domain({f"x{i}": int(rng.integers(2, 4)) for i in range(5)})
    cliques = [("x0", "x1"), ("x1", "x2"), ("x0", "x2"), ("x2", "x3"), ("x3", "x4"), ("x1", "x4"), ("x0", "x3", "x4")]
    plan = ao.make_approximate_plan(dom, cliques, kind, iters=1000)
    for scale in (0.5, 1.0):
        tables = {c: rng.normal(size=dom.shape_of(c)) * scale for c in cliques}
        flat, log_z = jax.jit(ao.region_beliefs)(plan, plan.from_tables(tables, jnp.float64), 3.0)
        assert _consistency(plan, flat) < 1e-9
        for r, t in ao.region_tables(plan, flat).items():
            assert t.sum() == pytest.approx(3.0)
        assert np.isfinite(float(log_z))


def test_single_clique_equals_exact_and_float32_agrees():
    rng = np.random.default_rng(0)
    dom = pj.Domain({"a": 3, "b": 4, "c": 2})
    tables = {("a", "b", "c"): rng.normal(size=(3, 4, 2)) * 3}
    ex = oracle.make_plan(dom, list(tables))
    want = np.asarray(oracle.marginals(ex, ex.from_tables(tables, jnp.float64), 10.0)[0][next(iter(ex.zeros()))])
    for kind in ("convex", "bethe"):
        plan = ao.make_approximate_plan(dom, list(tables), kind)
        for dtype, tol in ((jnp.float64, 1e-12), (jnp.float32, 1e-5)):
            mu, _ = ao.marginals(plan, plan.from_tables(tables, dtype), 10.0)
            np.testing.assert_allclose(np.asarray(plan.table(mu, 0)), want.reshape(3, 4, 2), rtol=tol)


def test_float32_matches_float64_on_a_loopy_model():
    rng = np.random.default_rng(5)
    dom = pj.Domain({f"x{i}": 3 for i in range(4)})
    cliques = [("x0", "x1"), ("x1", "x2"), ("x2", "x3"), ("x0", "x3")]
    plan = ao.make_approximate_plan(dom, cliques, "convex", iters=300)
    tables = {c: rng.normal(size=(3, 3)) for c in cliques}
    m64 = ao.marginals(plan, plan.from_tables(tables, jnp.float64), 1.0)[0]
    m32 = ao.marginals(plan, plan.from_tables(tables, jnp.float32), 1.0)[0]
    for k in m64:
        np.testing.assert_allclose(np.asarray(m32[k]), np.asarray(m64[k]), atol=1e-5)


def test_structural_zeros_and_bad_potentials():
    dom = pj.Domain({"a": 2, "b": 2, "c": 2})
    cliques = [("a", "b"), ("b", "c"), ("a", "c")]
    plan = ao.make_approximate_plan(dom, cliques)
    t = np.zeros((2, 2))
    t[0, 1] = -np.inf
    for dtype in (jnp.float32, jnp.float64):
        mu, log_z = ao.marginals(plan, plan.from_tables({("a", "b"): t}, dtype), 1.0)
        ab = np.asarray(plan.table(mu, 0))
        assert np.isfinite(ab).all() and ab[0, 1] == 0.0 and np.isfinite(float(log_z))
        bad = np.zeros((2, 2))
        bad[1, 1] = np.nan
        assert not np.isfinite(float(ao.marginals(plan, plan.from_tables({("b", "c"): bad}, dtype), 1.0)[1]))


def test_plan_is_cached_and_checks_its_settings():
    dom = pj.Domain({"a": 2, "b": 3})
    assert ao.make_approximate_plan(dom, [("a", "b")]) is ao.make_approximate_plan(dom, [("b", "a")])
    with pytest.raises(ValueError, match="iters must be a positive integer"):
        ao.make_approximate_plan(dom, [("a", "b")], iters=0)
    with pytest.raises(ValueError, match="damping"):
        ao.make_approximate_plan(dom, [("a", "b")], damping=1.0)
