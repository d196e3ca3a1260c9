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
