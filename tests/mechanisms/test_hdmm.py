"""HDMM core (pgmjax.mechanisms.matrix_mechanism): workloads, expected error, strategy templates, measurement and least squares.

Brute-force references are explicit dense matrices (``dense_expected_error``: ``||A||^2 ||W A^+||_F^2``)
on small domains; everything runs in float64 (tests/conftest.py enables x64) with fixed seeds.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import pgmjax as pj
from pgmjax.mechanisms import matrix_mechanism as H
from pgmjax.mechanisms.matrix_mechanism.factors import expand_dense
from pgmjax.mechanisms.matrix_mechanism.least_squares import _sum_to
from pgmjax.mechanisms.matrix_mechanism.optimize import _grams_by_attribute

SIZES = {"a": 3, "b": 4, "c": 2}
ATTRS = ("a", "b", "c")


def _table(seed=0):
    return np.random.default_rng(seed).integers(0, 20, size=tuple(SIZES[a] for a in ATTRS)).astype(float)


def _marginal_of(x):
    def get(clique):
        return _sum_to(x, ATTRS, tuple(clique))

    return get


def _random_strategy(rng, m, n):
    return rng.random((m, n)) + 0.1  # dense, full column rank with probability 1 when m >= n


# ----------------------------------------------------------------------------------------------------------
# builders and closed forms
# ----------------------------------------------------------------------------------------------------------


def test_builders_and_closed_form_grams():
    for n in (1, 2, 7):
        P, R = H.prefix(n), H.allrange(n)
        np.testing.assert_array_equal(H.prefix_gram(n), P.T @ P)
        np.testing.assert_array_equal(H.allrange_gram(n), R.T @ R)
        assert R.shape == (n * (n + 1) // 2, n)
        assert len({tuple(r) for r in R}) == R.shape[0]  # all intervals, no repeats
        np.testing.assert_array_equal(H.suffix(n), P[::-1, ::-1])
    np.testing.assert_array_equal(H.width_k_range(5, 2).sum(axis=1), np.full(4, 2.0))
    np.testing.assert_array_equal(H.identity_total(3), np.vstack([np.eye(3), np.ones((1, 3))]))
    W = H.KronWorkload(("a", "b"), (H.prefix(3), H.identity(4)), weight=2.0)
    x = _table()[:, :, 0]
    np.testing.assert_allclose(W.answer(x), W.dense() @ x.reshape(-1))
    with pytest.raises(ValueError, match="one matrix per attribute"):
        H.KronWorkload(("a", "b"), (H.prefix(3),))


# ----------------------------------------------------------------------------------------------------------
# expected error
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 16, 85])
def test_identity_on_prefix_closed_form(n):
    W = H.KronWorkload(("x",), (H.prefix(n),))
    S = H.KronStrategy(("x",), (H.identity(n),))
    eps = 0.7
    closed = 2.0 / eps**2 * n * (n + 1) / 2  # ||Prefix||_F^2 = n(n+1)/2, ||I||_1 = 1
    assert H.expected_error(W, S, eps=eps) == pytest.approx(closed, rel=1e-12)
    assert H.expected_error(W, S, eps=eps, per_query=True) == pytest.approx(closed / n, rel=1e-12)
    assert H.dense_expected_error(W.dense(), S.dense(), eps=eps) == pytest.approx(closed, rel=1e-12)
    # Gaussian: ||I||_{1->2} = 1 as well
    assert H.expected_error(W, S, noise="gaussian", sigma=3.0) == pytest.approx(9.0 * n * (n + 1) / 2, rel=1e-12)


def test_factor_error_support_and_sensitivities():
    n = 6
    G = H.prefix_gram(n)
    assert H.factor_error(G, np.ones((1, n))) == np.inf  # Total does not support prefixes
    assert H.factor_error(np.ones((n, n)), np.ones((1, n))) == pytest.approx(1.0)  # Total answers Total exactly
    rng = np.random.default_rng(3)
    A = _random_strategy(rng, 9, n)
    W = H.prefix(n)
    for noise in ("laplace", "gaussian"):
        assert H.factor_error(G, A, noise) == pytest.approx(H.dense_expected_error(W, A, noise=noise), rel=1e-9)
    # column norms: L1 max column sum, L2 max column norm
    S = H.KronStrategy(("x",), (A,), weight=2.0)
    assert S.sensitivity() == pytest.approx(2.0 * A.sum(axis=0).max())
    assert S.sensitivity("gaussian") == pytest.approx(2.0 * np.linalg.norm(A, axis=0).max())


def test_kronecker_error_is_product_of_factors_and_matches_dense():
    rng = np.random.default_rng(0)
    Wf = (H.prefix(3), H.allrange(4), rng.random((3, 2)))
    W = H.KronWorkload(ATTRS, Wf, weight=1.5)
    Af = (_random_strategy(rng, 4, 3), _random_strategy(rng, 5, 4), _random_strategy(rng, 2, 2))
    S = H.KronStrategy(ATTRS, Af, weight=0.3)
    for noise in ("laplace", "gaussian"):
        prod = 1.5**2 * np.prod([H.factor_error(f.T @ f, a, noise) for f, a in zip(Wf, Af)])
        got = H.expected_error(W, S, noise=noise)
        assert got == pytest.approx(prod, rel=1e-9)
        assert got == pytest.approx(H.dense_expected_error(W.dense(), S.dense(), noise=noise), rel=1e-9)
    # attribute order of the strategy does not matter; the workload sums out c (a Total factor)
    S2 = H.KronStrategy(("c", "a", "b"), (Af[2], Af[0], Af[1]))
    W2 = H.KronWorkload(("b", "a"), (Wf[1], Wf[0]))
    dense_w = H.UnionWorkload([W2]).dense(ATTRS, SIZES)
    assert H.expected_error(W2, S2) == pytest.approx(H.dense_expected_error(dense_w, S2.dense(ATTRS)), rel=1e-9)


def test_union_error_is_sum_and_unsupported_is_inf():
    rng = np.random.default_rng(1)
    terms = [
        H.KronWorkload(("a", "b"), (H.prefix(3), H.identity(4))),
        H.KronWorkload(("b", "c"), (H.allrange(4), H.identity(2)), weight=2.0),
        H.KronWorkload(("c",), (H.prefix(2),), weight=0.5),
    ]
    W = H.UnionWorkload(terms)
    S = H.KronStrategy(ATTRS, [_random_strategy(rng, SIZES[a] + 1, SIZES[a]) for a in ATTRS])
    total = H.expected_error(W, S, eps=2.0)
    assert total == pytest.approx(sum(H.expected_error(t, S, eps=2.0) for t in terms), rel=1e-12)
    assert total == pytest.approx(H.dense_expected_error(W.dense(ATTRS), S.dense(ATTRS), eps=2.0), rel=1e-9)
    # a strategy on (a, b) cannot answer queries that involve c; nor can Total answer prefixes
    S_ab = H.KronStrategy(("a", "b"), (np.eye(3), np.eye(4)))
    assert H.expected_error(W, S_ab) == np.inf
    assert H.dense_expected_error(W.dense(ATTRS), S_ab.dense(ATTRS, SIZES)) == np.inf
    assert H.expected_error(terms[0], H.KronStrategy(("a", "b"), (np.ones((1, 3)), np.eye(4)))) == np.inf
    # ... but it answers a marginal it contains
    assert H.expected_error(H.KronWorkload.marginal(("b",), SIZES), S_ab) == pytest.approx(4 * 3.0)


# ----------------------------------------------------------------------------------------------------------
# JAX objectives: values and autodiff gradients
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_pidentity_objective_matches_dense_and_finite_differences(noise):
    rng = np.random.default_rng(7)
    n, p = 6, 2
    G = H.allrange_gram(n)
    theta = rng.random((p, n))
    A = H.pidentity_matrix(theta, noise)
    norms = np.abs(A).sum(0) if noise == "laplace" else np.linalg.norm(A, axis=0)
    np.testing.assert_allclose(norms, 1.0, rtol=1e-12)  # unit sensitivity by construction
    value = float(H.pidentity_error(jnp.asarray(theta), G, noise))
    assert value == pytest.approx(H.dense_expected_error(H.allrange(n), A, noise=noise), rel=1e-10)
    f = jax.jit(lambda t: H.pidentity_error(t, G, noise))
    grad = np.asarray(jax.grad(f)(jnp.asarray(theta)))
    fd = np.zeros_like(theta)
    h = 1e-6
    for i, j in itertools.product(range(p), range(n)):
        e = np.zeros_like(theta)
        e[i, j] = h
        fd[i, j] = (float(f(theta + e)) - float(f(theta - e))) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_marginals_objective_matches_dense_and_finite_differences(noise):
    rng = np.random.default_rng(8)
    W = H.UnionWorkload(
        [H.KronWorkload(("a", "b"), (H.prefix(3), H.identity(4))), H.KronWorkload(("b", "c"), (H.identity(4), H.identity(2)), 2.0)]
    )
    gw = H.MarginalsGram.from_workload(W)
    theta = rng.random(8) + 0.05
    S = H.MarginalsStrategy(ATTRS, (3, 4, 2), theta)
    value = float(H.marginals_error(jnp.asarray(theta), gw.weights, gw.sizes, noise))
    # the projection into the algebra is exact for marginal strategies, even for the Prefix factor
    assert value == pytest.approx(H.dense_expected_error(W.dense(ATTRS), S.dense(), noise=noise), rel=1e-9)
    assert value == pytest.approx(H.expected_error(W, S, noise=noise), rel=1e-12)
    f = jax.jit(lambda t: H.marginals_error(t, gw.weights, gw.sizes, noise))
    grad = np.asarray(jax.grad(f)(jnp.asarray(theta)))
    h = 1e-6
    fd = np.array([(float(f(theta + h * e)) - float(f(theta - h * e))) / (2 * h) for e in np.eye(8)])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


def test_marginals_algebra_against_dense():
    rng = np.random.default_rng(9)
    sizes = (2, 3, 2)
    u = rng.random(8) * (rng.random(8) > 0.3)
    v = rng.random(8)
    U, V = H.MarginalsGram(sizes, u), H.MarginalsGram(sizes, v)
    np.testing.assert_allclose((U @ V).dense(), U.dense() @ V.dense(), atol=1e-10)
    np.testing.assert_allclose(U.pinv().dense(), np.linalg.pinv(U.dense(), hermitian=True), atol=1e-8)
    assert U.trace() == pytest.approx(np.trace(U.dense()))
    # (A^T A)(A^T A)^+ W^T W = W^T W on random vectors, for a workload the strategy supports
    strat = H.MarginalsStrategy(("x", "y", "z"), sizes, [0, 0, 0, 1.0, 0, 0.5, 0, 0])  # marginals {x,y}, {x,z}
    W = H.marginals_workload(dict(zip("xyz", sizes)), [("x", "y"), ("z", "x"), ("x",)])
    AtA = strat.gram()
    WtW = H.MarginalsGram.from_workload(W, ("x", "y", "z"))
    np.testing.assert_allclose(WtW.dense(), W.dense(("x", "y", "z")).T @ W.dense(("x", "y", "z")), atol=1e-12)
    for _ in range(3):
        z = rng.normal(size=12)
        np.testing.assert_allclose((AtA @ AtA.pinv() @ WtW).dense() @ z, WtW.dense() @ z, atol=1e-9)
    # ... and not for one it does not support (the {y, z} marginal)
    W_yz = H.marginals_workload(dict(zip("xyz", sizes)), [("y", "z")])
    with pytest.raises(ValueError, match="no size for attributes"):
        H.MarginalsGram.from_workload(W_yz, ("x", "y", "z"))
    G_yz = H.MarginalsGram.from_workload(W_yz, ("x", "y", "z"), sizes={"x": 2})
    assert not np.allclose((AtA @ AtA.pinv() @ G_yz).dense(), G_yz.dense())
    assert H.expected_error(W_yz, strat) == np.inf
    assert H.expected_error(W, strat) == pytest.approx(H.dense_expected_error(W.dense(("x", "y", "z")), strat.dense()), rel=1e-9)


# ----------------------------------------------------------------------------------------------------------
# optimisation
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("builder", [H.prefix, H.allrange])
def test_opt0_beats_identity_and_matches_scipy(builder):
    n = 32
    W = builder(n)
    G = W.T @ W
    A, loss = H.opt_0(G, jax.random.key(0), restarts=4)
    identity_loss = np.trace(G)
    assert loss < 0.95 * identity_loss
    assert loss == pytest.approx(H.dense_expected_error(W, A), rel=1e-9)
    np.testing.assert_allclose(np.abs(A).sum(axis=0), 1.0, rtol=1e-12)  # unit column L1 norm
    top = A[:n]
    np.testing.assert_allclose(top, np.diag(np.diag(top)))  # p-Identity: the top block is diagonal
    # an independent optimiser (SciPy L-BFGS-B with bounds, as in the reference) on the same template
    p = H.default_p(n)
    vg = jax.jit(jax.value_and_grad(lambda t: H.pidentity_error(t.reshape(p, n), G)))
    ref = min(
        scipy.optimize.minimize(
            lambda t: tuple(np.asarray(v, dtype=float) for v in vg(jnp.asarray(t))),
            np.random.default_rng(s).random(p * n),
            jac=True,
            method="L-BFGS-B",
            bounds=[(0, None)] * (p * n),
            options={"ftol": 1e-12, "gtol": 1e-10, "maxiter": 3000},
        ).fun
        for s in range(2)
    )
    assert loss <= ref * (1 + 1e-3)


def test_opt0_closed_form_cases_are_optimal():
    n = 5
    A, loss = H.opt_0(np.ones((n, n)) * 3.0, jax.random.key(1), restarts=2)  # Total workload -> Total
    assert A.shape == (1, n) and loss == pytest.approx(3.0)
    A, loss = H.opt_0(np.eye(n) * 2.0, jax.random.key(1), restarts=2)  # Identity workload -> Identity
    np.testing.assert_array_equal(A, np.eye(n))
    assert loss == pytest.approx(2.0 * n)
    # no unit-sensitivity strategy does better (random p-Identity and random dense strategies)
    rng = np.random.default_rng(11)
    for _ in range(20):
        for B in (H.pidentity_matrix(rng.random((2, n)) * rng.exponential(3.0)), _random_strategy(rng, 7, n)):
            for noise in ("laplace", "gaussian"):
                assert H.factor_error(np.ones((n, n)) * 3.0, B, noise) >= 3.0 * (1 - 1e-12)
                assert H.factor_error(np.eye(n) * 2.0, B, noise) >= 2.0 * n * (1 - 1e-12)


def test_opt_kron_single_workload_factorises():
    W = H.KronWorkload(("a", "b"), (H.prefix(16), H.allrange(24)))
    S, loss = H.opt_kron(W, jax.random.key(2), restarts=2)
    assert loss == pytest.approx(H.dense_expected_error(W.dense(), S.dense()), rel=1e-8)
    assert S.sensitivity() == pytest.approx(1.0)
    per_attr = [H.factor_error(g, f) for g, f in zip(W.grams(), S.factors)]
    assert loss == pytest.approx(np.prod(per_attr), rel=1e-10)
    identity = H.KronStrategy(("a", "b"), (np.eye(16), np.eye(24)))
    assert loss < 0.9 * H.expected_error(W, identity)


def test_opt_kron_union_block_coordinate_descent():
    sizes = {"a": 32, "b": 12, "c": 2}
    W = H.UnionWorkload(
        [
            H.KronWorkload(("a", "b"), (H.prefix(32), H.prefix(12))),
            H.KronWorkload(("b", "c"), (H.allrange(12), H.identity(2)), weight=2.0),
            H.KronWorkload(("a",), (H.allrange(32),)),
        ]
    )
    S, loss = H.opt_kron(W, jax.random.key(3), restarts=4, sweeps=4)
    assert loss == pytest.approx(H.dense_expected_error(W.dense(ATTRS), S.dense(ATTRS)), rel=1e-8)
    assert S.sensitivity() == pytest.approx(1.0)
    identity = H.KronStrategy(ATTRS, [np.eye(sizes[a]) for a in ATTRS])
    assert loss < 0.9 * H.expected_error(W, identity)
    # block-coordinate descent on the union does at least as well as optimising each attribute for one term
    single = H.KronStrategy(ATTRS, [H.opt_0(g, jax.random.key(9), restarts=4)[0] for g in _grams_by_attribute(W, ATTRS)[0]])
    assert loss <= H.expected_error(W, single) * (1 + 1e-9)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_opt_union_weights_and_bound(noise):
    W = H.UnionWorkload(
        [
            H.KronWorkload(("a", "b"), (H.prefix(3), H.identity(4))),
            H.KronWorkload(("b", "c"), (H.allrange(4), H.identity(2)), weight=3.0),
            H.KronWorkload(("c",), (H.identity(2),)),
        ]
    )
    U, loss = H.opt_union(W, jax.random.key(4), restarts=2, noise=noise)
    alpha = U.weights
    assert [s.clique for s in U.terms] == list(W.cliques)
    # e_j: term j alone (unit sensitivity) on its own sub-workload
    e = np.array([H.expected_error(t, H.KronStrategy(s.clique, s.factors), noise=noise) for t, s in zip(W.terms, U.terms)])
    if noise == "laplace":
        assert alpha.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(alpha, e ** (1 / 3) / (e ** (1 / 3)).sum(), rtol=1e-10)
        paired = (e ** (1 / 3)).sum() ** 3  # (sum alpha)^2 sum e_j / alpha_j^2 at the optimum
    else:
        assert (alpha**2).sum() == pytest.approx(1.0)
        np.testing.assert_allclose(alpha, e**0.25 / np.sqrt((e**0.5).sum()), rtol=1e-10)
        paired = np.sqrt(e).sum() ** 2
    assert U.sensitivity(noise) == pytest.approx(1.0)
    assert paired == pytest.approx(U.sensitivity(noise) ** 2 * (e / alpha**2).sum(), rel=1e-10)
    # the reported loss lets each workload term use its best strategy term: at most the paired bound
    assert loss == pytest.approx(H.expected_error(W, U, noise=noise))
    assert loss <= paired * (1 + 1e-12)
    # both bound the exact (joint least squares) error from above
    exact = H.dense_expected_error(W.dense(ATTRS), U.dense(ATTRS, SIZES), noise=noise)
    assert exact <= loss * (1 + 1e-9)
    # the alpha_j minimise the paired bound: random perturbations of the weights do worse
    rng = np.random.default_rng(0)
    for _ in range(20):
        beta = alpha * np.exp(0.3 * rng.normal(size=alpha.size))
        sens2 = beta.sum() ** 2 if noise == "laplace" else (beta**2).sum()
        assert sens2 * (e / beta**2).sum() >= paired * (1 - 1e-12)


def _brute_force_marginals_optimum(W, sizes, noise, starts=4):
    """Independent optimum: SciPy L-BFGS-B (finite-difference gradients) on the dense brute-force objective."""
    attrs = W.attributes
    Wd = W.dense(attrs)
    subsets = [tuple(a for i, a in enumerate(attrs) if k >> i & 1) for k in range(2 ** len(attrs))]
    blocks = [expand_dense(c, [np.eye(sizes[a]) for a in c], attrs, sizes) for c in subsets]

    def f(theta):
        A = np.vstack([t * b for t, b in zip(theta, blocks)])
        return H.dense_expected_error(Wd, A, noise=noise)

    best = np.inf
    for s in range(starts):
        x0 = np.random.default_rng(100 + s).random(len(blocks)) + 0.1
        r = scipy.optimize.minimize(f, x0, method="L-BFGS-B", bounds=[(1e-9, None)] * len(blocks), options={"ftol": 1e-12, "maxiter": 2000})
        best = min(best, r.fun)
    return best


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_opt_marginals_vs_brute_force(noise):
    sizes = {"a": 2, "b": 3, "c": 2}
    W = H.marginals_workload(sizes, [("a", "b"), ("b", "c"), ("a",)], weights=[1.0, 2.0, 1.0])
    S, loss = H.opt_marginals(W, jax.random.key(5), restarts=4, noise=noise)
    assert S.sensitivity(noise) == pytest.approx(1.0)
    assert loss == pytest.approx(H.dense_expected_error(W.dense(), S.dense(), noise=noise), rel=1e-8)
    ref = _brute_force_marginals_optimum(W, sizes, noise)
    assert loss <= ref * (1 + 1e-4)
    assert ref <= loss * (1 + 1e-2)  # the dense search finds the same optimum (to its accuracy)
    # beats measuring the workload marginals themselves with equal weights (hdmm+appgm's "OPT+")
    keys = [sum(1 << W.attributes.index(a) for a in c) for c in W.cliques]
    theta = np.zeros(8)
    theta[keys] = 1.0
    assert loss < H.expected_error(W, H.MarginalsStrategy(W.attributes, (2, 3, 2), theta / 3), noise=noise)


def test_optimize_strategy_returns_the_best_template():
    W = H.marginals_workload(SIZES, [("a", "b"), ("b", "c")])
    key = jax.random.key(6)
    S, loss = H.optimize_strategy(W, key, restarts=2)
    k1, k2, k3 = jax.random.split(key, 3)
    losses = [H.opt_kron(W, k1, restarts=2)[1], H.opt_union(W, k2, restarts=2)[1], H.opt_marginals(W, k3, restarts=2)[1]]
    assert loss == pytest.approx(min(losses))
    assert H.expected_error(W, S) == pytest.approx(loss)


# ----------------------------------------------------------------------------------------------------------
# measurement and reconstruction
# ----------------------------------------------------------------------------------------------------------


def test_monte_carlo_error_matches_expected_error():
    n, eps = 8, 1.0
    W = H.prefix(n)
    A, loss = H.opt_0(W.T @ W, jax.random.key(7), restarts=2)
    b = np.abs(A).sum(0).max() / eps
    z = np.asarray(jax.random.laplace(jax.random.key(8), (20000, A.shape[0])), dtype=float) * b
    sq = np.sum((z @ np.linalg.pinv(A).T @ W.T) ** 2, axis=1)  # ||W (x_hat - x)||^2, x_hat = A^+ y
    expected = H.expected_error(H.KronWorkload(("x",), (W,)), H.KronStrategy(("x",), (A,)), eps=eps)
    assert expected == pytest.approx(2 / eps**2 * loss)
    assert abs(sq.mean() - expected) < 4 * sq.std() / np.sqrt(sq.size)


def test_local_least_squares_exact_without_noise():
    x = _table(2)
    get = _marginal_of(x)
    rng = np.random.default_rng(4)
    # one Kronecker measurement per clique (closed-form Kronecker pseudo-inverse) ...
    S1 = H.KronStrategy(("a", "b"), (H.pidentity_matrix(rng.random((1, 3))), _random_strategy(rng, 6, 4)))
    S2 = H.KronStrategy(("c", "b"), (np.eye(2), H.prefix(4)), 0.5)
    ms = [S.measurement(S.apply(get(S.clique)), 1.0) for S in (S1, S2)]
    # ... a superset measurement for ("a", "c"), and two measurements on one clique in different orders
    S3 = H.KronStrategy(ATTRS, (np.eye(3), H.prefix(4), np.eye(2)))
    ms.append(S3.measurement(S3.apply(x), 1.0))
    Q = H.allrange(3)[:4]
    ms.append(pj.Measurement(("a",), Q @ get(("a",)), stddev=2.0, query=Q))
    ms.append(pj.Measurement(("a",), H.prefix(3) @ get(("a",)), stddev=np.arange(1.0, 4.0), query=H.prefix(3)))
    W = H.UnionWorkload(
        [
            H.KronWorkload(("a", "b"), (H.prefix(3), np.eye(4))),
            H.KronWorkload(("b", "c"), (np.eye(4), np.eye(2))),
            H.KronWorkload(("a", "c"), (np.eye(3), np.eye(2))),
            H.KronWorkload(("a",), (H.allrange(3),)),
        ]
    )
    est = H.local_least_squares(SIZES, ms, W)
    for c in W.cliques:
        np.testing.assert_allclose(est[c], get(c), atol=1e-8)
    np.testing.assert_allclose(W.answer(est), W.answer(get), atol=1e-7)
    with pytest.raises(ValueError, match="no measurement covers"):
        H.least_squares_marginal(SIZES, ms[:2], ("a", "c"))


def test_local_least_squares_is_the_least_squares_solution_with_noise():
    rng = np.random.default_rng(5)
    S = H.KronStrategy(("a", "b"), (H.pidentity_matrix(rng.random((1, 3))), H.pidentity_matrix(rng.random((1, 4)))))
    y = rng.normal(size=S.rows) * 10
    est = H.least_squares_marginal(SIZES, [S.measurement(y, 1.0)], ("a", "b"))
    ref = np.linalg.lstsq(S.dense(), y, rcond=None)[0].reshape(3, 4)
    np.testing.assert_allclose(est, ref, atol=1e-10)


def test_global_least_squares_exact_and_refuses_huge_tables():
    x = _table(3)
    get = _marginal_of(x)
    rng = np.random.default_rng(6)
    # identifying measurements: x itself is recovered
    S = H.KronStrategy(("b", "a", "c"), (_random_strategy(rng, 5, 4), np.eye(3), H.prefix(2)))
    est = H.global_least_squares(pj.Domain(SIZES), [S.measurement(S.apply(get(S.clique)), 1.0)])
    np.testing.assert_allclose(est, x, atol=1e-8)
    # marginals (a,b) and (b,c) do not identify x, but every query they support is answered exactly
    ms = [pj.Measurement(c, get(c), stddev=1.0) for c in [("a", "b"), ("c", "b")]]
    est = H.global_least_squares(pj.Domain(SIZES), ms)
    W = H.marginals_workload(SIZES, [("a", "b"), ("b",), ("b", "c")])
    np.testing.assert_allclose(W.answer(_marginal_of(est)), W.answer(get), atol=1e-8)
    assert not np.allclose(est, x)
    # too large: refused before allocating (1e20 cells)
    huge = pj.Domain({f"x{i}": 100 for i in range(10)})
    with pytest.raises(H.TableTooLargeError, match="local_least_squares"):
        H.global_least_squares(huge, [pj.Measurement(("x0",), np.zeros(100))])
    with pytest.raises(H.TableTooLargeError):
        H.global_least_squares(pj.Domain(SIZES), ms, max_bytes=100)
