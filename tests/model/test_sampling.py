"""Synthetic data: chi-square goodness of fit, the low-variance option, reproducibility, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import pgmjax as pj
from pgmjax.graph import oracle


def _model(rng, domain, cliques, total=1000.0, zero=True):
    plan = oracle.make_plan(domain, cliques)
    tables = {c: rng.normal(size=domain.shape_of(c)) for c in cliques}
    if zero:
        tables[cliques[0]].flat[0] = -np.inf  # a structural zero must never be drawn
    return pj.GraphicalModel(plan, plan.from_tables(tables, jnp.float64), total)


MODELS = {
    "chain": (pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5}), [("a", "b"), ("b", "c"), ("c", "d")]),
    "loopy": (pj.Domain({"a": 3, "b": 3, "c": 2, "d": 4}), [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]),
    "star+isolated": (pj.Domain({"h": 4, "x": 3, "y": 2, "z": 3, "w": 5}), [("h", "x"), ("h", "y"), ("h", "z")]),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_clique_marginals_pass_chi_square(name):
    rng = np.random.default_rng(7)
    domain, cliques = MODELS[name]
    model = _model(rng, domain, cliques)
    n = 200_000
    data = model.synthetic_data(n, jax.random.key(11))
    assert len(data) == n and data.records.shape == (n, len(domain))
    for clique in model.cliques + tuple(cliques):
        observed = data.marginal(clique).ravel()
        expected = model.marginal(clique).ravel() / model.total * n
        assert np.all(observed[expected == 0] == 0), f"{clique}: a zero-probability cell was drawn"
        keep = expected > 0
        chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
        p = stats.chi2.sf(chi2, keep.sum() - 1)
        assert p > 0.01, f"{clique}: chi-square {chi2:.1f} on {keep.sum() - 1} dof, p = {p:.4f}"


LOW_VARIANCE_MODELS = dict(
    MODELS,
    # a clique with several children whose separators differ (three-way rounding)
    tree=(pj.Domain({"a": 3, "b": 4, "c": 3, "d": 2, "e": 3, "f": 2}),
          [("a", "b", "c"), ("b", "d"), ("c", "e"), ("a", "f"), ("b", "c", "d")]),
)


@pytest.mark.parametrize("n", [5000, 1237])
@pytest.mark.parametrize("name", list(LOW_VARIANCE_MODELS))
def test_low_variance_counts_match_the_model(name, n):
    rng = np.random.default_rng(3)
    domain, cliques = LOW_VARIANCE_MODELS[name]
    model = _model(rng, domain, cliques, total=5000.0)
    data = model.synthetic_data(n, jax.random.key(2), method="low_variance")
    assert len(data) == n
    for clique in model.cliques:
        expected = model.marginal(clique) * (n / model.total)
        dev = np.abs(data.marginal(clique) - expected)
        # controlled rounding: every clique count is the floor or ceiling of n p(c)
        assert dev.max() < 1 + 1e-9, (clique, dev.max())
        assert np.all(data.marginal(clique)[expected == 0] == 0)
    # exact sampling deviates far more at this size
    exact = model.synthetic_data(n, jax.random.key(2))
    root = model.cliques[model.junction_tree.root]
    assert np.abs(exact.marginal(root) - model.marginal(root) * (n / model.total)).max() > 3
    again = model.synthetic_data(n, jax.random.key(2), method="low_variance")
    np.testing.assert_array_equal(again.records, data.records)


def test_reproducible_and_chunked(rng):
    domain, cliques = MODELS["chain"]
    model = _model(rng, domain, cliques)
    a = model.synthetic_data(3000, jax.random.key(5))
    b = model.synthetic_data(3000, jax.random.key(5))
    c = model.synthetic_data(3000, jax.random.key(6))
    np.testing.assert_array_equal(a.records, b.records)
    assert not np.array_equal(a.records, c.records)
    small = model.synthetic_data(3001, jax.random.key(5), chunk=1000)
    assert len(small) == 3001
    # chunks are drawn from the same model: the marginals agree statistically
    np.testing.assert_allclose(small.marginal("b") / 3001, model.marginal("b") / model.total, atol=0.04)
    df = a.df
    assert list(df.columns) == list(domain.attributes) and len(df) == 3000


def test_default_size_and_errors(rng):
    domain, cliques = MODELS["chain"]
    model = _model(rng, domain, cliques, total=123.4)
    assert len(model.synthetic_data(key=jax.random.key(0))) == 123
    with pytest.raises(ValueError, match="jax.random key"):
        model.synthetic_data(10)
    with pytest.raises(ValueError, match="method"):
        model.synthetic_data(10, jax.random.key(0), method="fast")
    with pytest.raises(ValueError, match="positive integer"):
        model.synthetic_data(0, jax.random.key(0))


def test_new_record_counts_do_not_recompile(rng):
    from conftest import count_compiles

    domain, cliques = MODELS["chain"]
    model = _model(rng, domain, cliques)
    for method in ("exact", "low_variance"):
        model.synthetic_data(1000, jax.random.key(0), method=method)
        with count_compiles() as c:
            for n in (1001, 1010, 1024, 600):  # shapes are padded to powers of two: one bucket here
                model.synthetic_data(n, jax.random.key(1), method=method)
        assert c.count == 0, method
