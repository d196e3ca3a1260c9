"""The one query algebra (pgmjax.queries.linear.LinearQuery) against explicit dense matrices, in float64.

For every form (identity, dense, Kronecker with and without kept axes, a stack of those): ``apply`` is the
dense matrix product, ``transpose`` the dense transpose (and the adjoint identity ``<Qx, y> = <x, Q^T y>``
holds), ``lipschitz`` the top eigenvalue of the dense weighted Gram, ``sensitivity`` the largest column
norm, ``total_weights`` solves ``Q^T a = 1``; the NumPy and JAX paths agree, and ``jit``/``vmap`` take new
numbers without compiling again.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgmjax.queries.linear import LinearQuery, kron_apply
from pgmjax.queries.measurement import Measurement, total_rule

jax.config.update("jax_enable_x64", True)

SIZES = (3, 4, 2)


def _forms():
    rng = np.random.default_rng(0)
    cells = int(np.prod(SIZES))
    kron = LinearQuery.kron(tuple(rng.normal(size=(r, n)) for r, n in zip((2, 5, 3), SIZES)))
    kept = LinearQuery.kron((np.tril(np.ones((3, 3))), None, rng.normal(size=(1, 2))), sizes=SIZES)
    dense = LinearQuery.from_matrix(rng.normal(size=(7, cells)), sizes=SIZES)
    return {
        "identity": LinearQuery.identity(SIZES),
        "dense": dense,
        "kron": kron,
        "kron_kept": kept,
        "stack": LinearQuery.stack([kron, dense, LinearQuery.identity(SIZES)]),
    }


FORMS = _forms()


@pytest.mark.parametrize("name", sorted(FORMS))
def test_apply_and_transpose_match_the_dense_matrix(name):
    q = FORMS[name]
    Q = q.matrix()
    assert Q.shape == q.shape
    rng = np.random.default_rng(1)
    x = rng.normal(size=SIZES)
    y = rng.normal(size=q.rows)
    np.testing.assert_allclose(q.apply(x), Q @ x.reshape(-1), rtol=1e-12, atol=1e-12)
    t = q.transpose(y)
    assert t.shape == SIZES
    np.testing.assert_allclose(t.reshape(-1), Q.T @ y, rtol=1e-12, atol=1e-12)
    assert abs(q.apply(x) @ y - np.sum(x * t)) <= 1e-10 * (1 + abs(q.apply(x) @ y))


@pytest.mark.parametrize("name", sorted(FORMS))
def test_lipschitz_sensitivity_and_total_match_the_dense_matrix(name):
    q = FORMS[name]
    Q = q.matrix()
    w = 2.5
    top = np.linalg.eigvalsh(w * Q.T @ Q)[-1]
    if name == "stack":  # the sum of the terms' values bounds the stack's
        assert q.lipschitz(w) >= top * (1 - 1e-12)
    else:
        assert q.lipschitz(w) == pytest.approx(top, rel=1e-10)
    for p in (1, 2):
        assert q.sensitivity(p) == pytest.approx(np.max(np.sum(np.abs(Q) ** p, axis=0)) ** (1 / p), rel=1e-12)
    a = q.total_weights(np.ones(q.rows))
    if a is not None:
        np.testing.assert_allclose(Q.T @ a, np.ones(Q.shape[1]), atol=1e-8)


def test_per_row_weights_of_a_dense_query_are_exact():
    q = FORMS["dense"]
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=q.rows)
    Q = q.matrix()
    assert q.lipschitz(w) == pytest.approx(np.linalg.eigvalsh((Q * w[:, None]).T @ Q)[-1], rel=1e-10)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_jax_and_numpy_paths_agree_and_jit_takes_new_numbers(name):
    q = FORMS[name]
    rng = np.random.default_rng(3)
    x = rng.normal(size=SIZES)
    y = rng.normal(size=q.rows)
    qj = jax.tree_util.tree_map(jnp.asarray, q)
    np.testing.assert_allclose(np.asarray(qj.apply(jnp.asarray(x))), q.apply(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(qj.transpose(jnp.asarray(y))), q.transpose(y), rtol=1e-12, atol=1e-12)
    traces = []

    @jax.jit
    def both(query, table, answers):
        traces.append(1)
        return query.apply(table), query.transpose(answers)

    for scale in (1.0, 2.0):
        qs = jax.tree_util.tree_map(lambda a: a * scale, qj)
        qn = jax.tree_util.tree_map(np.asarray, qs)
        out, back = both(qs, jnp.asarray(x), jnp.asarray(y))
        np.testing.assert_allclose(np.asarray(out), qn.apply(x), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(back), qn.transpose(y), rtol=1e-12, atol=1e-12)
    assert len(traces) == 1


def test_vmap_over_stacked_queries_and_tables():
    rng = np.random.default_rng(4)
    queries = [LinearQuery.kron(tuple(rng.normal(size=(2, n)) for n in SIZES)) for _ in range(3)]
    tables = rng.normal(size=(3, *SIZES))
    stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *queries)
    out = jax.vmap(LinearQuery.apply)(stacked, jnp.asarray(tables))
    for i, q in enumerate(queries):
        np.testing.assert_allclose(np.asarray(out[i]), q.apply(tables[i]), rtol=1e-12)
    # the autodiff transpose of apply is transpose
    g = jax.linear_transpose(lambda t: queries[0].apply(t), jnp.zeros(SIZES))(jnp.ones(queries[0].rows))[0]
    np.testing.assert_allclose(np.asarray(g), queries[0].transpose(np.ones(queries[0].rows)), rtol=1e-12)


def test_kron_apply_keeps_none_axes_and_values_compare_by_content():
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(kron_apply(x, [None, None]), x)
    a = LinearQuery.kron((np.ones((1, 3)), np.eye(2)))
    b = LinearQuery.kron((np.ones((1, 3)), np.eye(2)))
    assert a == b and hash(a) == hash(b)
    assert a != LinearQuery.kron((2 * np.ones((1, 3)), np.eye(2)))


def test_measurement_holds_one_linear_query_and_keeps_its_spellings():
    rng = np.random.default_rng(5)
    fac = (np.tril(np.ones((3, 3))), np.eye(2))
    m = Measurement(("a", "b"), rng.normal(size=6), stddev=2.0, query=fac)
    assert m.kind == "kron" and isinstance(m.linear, LinearQuery)
    assert all(q is f2 for q, f2 in zip(m.query, m.linear.matrices))
    dense = Measurement(("a", "b"), rng.normal(size=6), stddev=2.0, query=m.linear.matrix())
    np.testing.assert_allclose(dense.answer(np.arange(6.0)), m.answer(np.arange(6.0).reshape(3, 2)), rtol=1e-12)
    assert dense.lipschitz() == pytest.approx(m.lipschitz(), rel=1e-10)
    ident = Measurement(("a", "b"), rng.normal(size=(3, 2)))
    assert ident.query is None and ident.linear.rows == 6
    w, var = total_rule([m, dense, ident])
    assert w.shape == (18,) and var > 0
