"""Log-space kernels against their NumPy references; -inf safety of values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgmjax import kernels
from pgmjax.kernels import reference


def test_logsumexp_matches_reference(rng):
    x = rng.normal(size=(4, 5, 6)) * 30
    x[0, 0, :] = -np.inf
    x[1, 2, 3] = -np.inf
    for axis in [-1, 0, (1, 2), None]:
        got = np.asarray(kernels.logsumexp(jnp.asarray(x), axis=axis))
        np.testing.assert_allclose(got, reference.logsumexp(x, axis=axis), rtol=1e-12)


def test_logsumexp_gradient_is_softmax_and_nan_free():
    x = jnp.array([[0.0, 1.0, -jnp.inf], [-jnp.inf, -jnp.inf, -jnp.inf]])
    g = jax.grad(lambda v: jnp.sum(kernels.logsumexp(v, axis=-1)[0]))(x)
    np.testing.assert_allclose(g[0], np.array([1, np.e, 0]) / (1 + np.e), rtol=1e-12)
    g_all = jax.grad(lambda v: jnp.sum(jnp.where(jnp.isfinite(kernels.logsumexp(v)), kernels.logsumexp(v), 0.0)))(x)
    assert np.all(np.isfinite(g_all))
    np.testing.assert_array_equal(g_all[1], 0.0)
    # second order (used by L-BFGS through the oracle) stays finite
    h = jax.hessian(lambda v: kernels.logsumexp(v))(jnp.array([0.0, 1.0, -jnp.inf]))
    assert np.all(np.isfinite(h))


@pytest.mark.parametrize("method", ["stable", "scaled"])
def test_log_einsum(rng, method):
    a, b, c = rng.normal(size=(3, 4)), rng.normal(size=(4, 5)), rng.normal(size=(5, 3))
    a[0, 0] = -np.inf
    got = kernels.log_einsum("ij,jk,ki->i", jnp.asarray(a), jnp.asarray(b), jnp.asarray(c), method=method)
    np.testing.assert_allclose(np.asarray(got), reference.log_einsum("ij,jk,ki->i", a, b, c), rtol=1e-10)


def test_log_einsum_stable_survives_wide_range():
    a = jnp.array([-2000.0, 0.0])
    b = jnp.array([-2000.0, -3000.0])
    got = kernels.log_einsum("i,i->", a, b, method="stable")
    np.testing.assert_allclose(float(got), -3000.0 + np.log1p(np.exp(-1000.0)), rtol=1e-12)


@pytest.mark.parametrize(
    "shape, axes, keepdims",
    [((2,) * 14, tuple(range(1, 14)), False), ((2,) * 12, (0, 3, 5, 6, 7, 8, 9, 11), True), ((7, 40, 9, 11), (-1, 1), False),
     ((5, 3), (0,), True), ((30, 4, 50), (0, 2), False)],
)
def test_sum_axes_matches_reference(rng, shape, axes, keepdims):
    x = rng.exponential(1.0, shape)
    got = np.asarray(kernels.sum_axes(jnp.asarray(x, jnp.float32), axes, keepdims=keepdims), np.float64)
    want = reference.sum_axes(x.astype(np.float32), tuple(a % len(shape) for a in axes), keepdims=keepdims)
    assert got.shape == want.shape == np.sum(x, axis=tuple(axes), keepdims=keepdims).shape
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_sum_axes_float32_error_grows_with_the_root_of_the_cells(rng):
    # A skewed 2^16-cell table (one cell holds a third of the mass) summed to its 2-way marginals: 16,384
    # cells per output. Within 1e-6 of the total (2.5e-7 measured); one reduction over the scattered axes was
    # 1.2e-5 on XLA:CPU.
    x = rng.exponential(1.0, (2,) * 16) ** 4
    x.flat[0] = x.sum() / 2
    x *= 20_000 / x.sum()
    x32 = jnp.asarray(x, jnp.float32)
    f = jax.jit(lambda t: [kernels.sum_axes(t, [a for a in range(16) if a not in (i, j)]) for i, j in [(0, 1), (3, 9), (14, 15)]])
    for (i, j), got in zip([(0, 1), (3, 9), (14, 15)], f(x32)):
        want = reference.sum_axes(np.asarray(x32), [a for a in range(16) if a not in (i, j)])
        assert np.abs(np.asarray(got, np.float64) - want).sum() / 20_000 < 1e-6


def test_sum_axes_is_linear_under_autodiff_and_transposition():
    x = jnp.arange(2.0**12, dtype=jnp.float32).reshape((2,) * 12)
    axes = tuple(range(2, 12))
    g = jax.grad(lambda t: jnp.sum(kernels.sum_axes(t, axes) * jnp.array([[1.0, 2.0], [3.0, 4.0]])))(x)
    np.testing.assert_array_equal(np.asarray(g)[1, 0], np.full((2,) * 10, 3.0))
    (t,) = jax.linear_transpose(lambda t: kernels.sum_axes(t, axes), x)(jnp.ones((2, 2), jnp.float32))
    np.testing.assert_array_equal(np.asarray(t), np.ones_like(x))


@pytest.mark.parametrize("shape, axes", [((1, 101, 101, 26), (1, 2, 3)), ((3, 4, 10, 7), (2, 3)), ((5, 6), (1,)), ((4, 5, 6), (0, 2))])
def test_max_axes_matches_reference(rng, shape, axes):
    x = rng.normal(size=shape)
    x.flat[rng.integers(x.size)] = -np.inf
    for keepdims in (False, True):
        got = np.asarray(jax.jit(lambda t: kernels.max_axes(t, axes, keepdims=keepdims))(jnp.asarray(x, jnp.float32)), np.float64)
        np.testing.assert_array_equal(got, reference.max_axes(x.astype(np.float32), axes, keepdims=keepdims))


def test_marginalize_matches_reference(rng):
    x = rng.exponential(1.0, (3, 4, 50, 40))
    for keep in (("d", "b"), ("a", "b", "c", "d"), ("c",), ()):
        got = np.asarray(kernels.marginalize(jnp.asarray(x, jnp.float32), tuple("abcd"), keep), np.float64)
        np.testing.assert_allclose(got, reference.marginalize(x.astype(np.float32), tuple("abcd"), keep), rtol=2e-6)


def _reduce_operand_ranks(f, x) -> list[int]:
    """The ranks of the arrays the reductions in ``f``'s jaxpr read."""
    eqns = jax.make_jaxpr(f)(x).jaxpr.eqns
    return [e.invars[0].aval.ndim for e in eqns if e.primitive.name.startswith("reduce")]


@pytest.mark.parametrize("reduce", [kernels.sum_axes, kernels.max_axes])
def test_reductions_collapse_adjacent_axes_of_one_role(rng, reduce):
    # A 2-way marginal of a 16-axis binary table: runs of summed and of kept axes are merged, so every
    # reduction reads an array of rank at most 5 (kept, summed, kept, summed runs), and the values are unchanged.
    x = rng.normal(size=(2,) * 16)
    axes = [a for a in range(16) if a not in (3, 9)]
    ranks = _reduce_operand_ranks(lambda t: reduce(t, axes), jnp.asarray(x, jnp.float32))
    assert ranks and max(ranks) <= 5, ranks
    got = np.asarray(jax.jit(lambda t: reduce(t, axes))(jnp.asarray(x, jnp.float32)), np.float64)
    want = (np.sum if reduce is kernels.sum_axes else np.max)(x.astype(np.float32).astype(np.float64), axis=tuple(axes))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
