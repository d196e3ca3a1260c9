"""pgmjax.bayes: BLUE, the error law, intervals, allocation and privacy cost (Xiao & Xiong, sections 3-5).

Deterministic reference values X3-1 to X3-5 (computed independently with mpmath / NumPy) and
reference implementations: partial fractions, numerical convolution, brute-force GLS and brute-force maxima.
"""

import math

import jax
import numpy as np
import pytest
from scipy import integrate
from scipy.special import ndtr

from pgmjax import Domain, Measurement
from pgmjax.bayes.fourier import cf_grid, grid_cdf, grid_quantile
from pgmjax.bayes import (
    History,
    LinearNoise,
    allocate,
    allocate_with_history,
    bin_counts,
    blue,
    blue_history,
    cell_cost,
    claim_probability,
    confidence_interval,
    history_matrix,
    per_record_cost,
    posterior,
    system_cost,
)

# [XX] eq. 11: the paper's example history (X3-1)
H_XX = np.array(
    [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1], [2, 1, 0, 0], [0, 0, 2, -1], [0, -1, 0, 1]], float
)
ALPHA_XX = np.array([0.05, 0.1, 0.05, 0.1, 0.1, 0.05, 0.05, 0.1])
S_XX = np.abs(H_XX).max(axis=1)
B_XX = S_XX / ALPHA_XX
Y_XX = np.array([30.8, 30.3, 46.9, 20.2, 30.4, 68.9, 38.9, 9.5])
Q_XX = np.array([1.0, 0.0, 1.0, 0.0])


def rel(a, b):
    return abs(a - b) / abs(b)


# ---- X3-1: the BLUE of the paper's example ----------------------------------------------------------


def test_x3_1_blue_of_the_papers_example():
    assert B_XX.tolist() == [20, 10, 20, 10, 10, 40, 40, 10]
    r = blue(H_XX, Y_XX, scale=B_XX, query=Q_XX)
    np.testing.assert_allclose(r.x_hat, [24.992308, 10.176923, 17.021495, 19.501869], atol=1e-6)
    A = [0.4769230769, 0.3644859813, -0.03271028037, 0.4953271028, -0.5000718907, 0.2615384615, 0.07009345794, 0.2383896477]
    np.testing.assert_allclose(r.A, A, atol=1e-10)
    assert rel(r.value, 42.0138030194) < 1e-10
    assert rel(r.variance, 554.450035945) < 1e-10
    assert r.estimable is True
    # unbiased: A H = Q
    np.testing.assert_allclose(r.A @ H_XX, Q_XX, atol=1e-12)


def test_blue_matches_brute_force_gls(rng):
    m, N = 12, 5
    H = rng.integers(-2, 3, size=(m, N)).astype(float)
    b = rng.uniform(0.5, 3.0, m)
    sd = np.where(rng.random(m) < 0.5, rng.uniform(0.5, 2.0, m), 0.0)  # some rows also Gaussian
    y = rng.normal(size=m) * 10
    Q = rng.normal(size=(3, N))
    r = blue(H, y, scale=b, stddev=sd, query=Q)
    v = 2 * b**2 + sd**2
    M = H.T @ np.diag(1 / v) @ H
    x_ref = np.linalg.solve(M, H.T @ (y / v))
    np.testing.assert_allclose(r.x_hat, x_ref, rtol=1e-10)
    np.testing.assert_allclose(r.value, Q @ x_ref, rtol=1e-10)
    np.testing.assert_allclose(r.variance, np.einsum("ij,jk,ik->i", Q, np.linalg.inv(M), Q), rtol=1e-10)
    assert r.estimable.all() and len(r.error) == 3
    # the error law's variance is the BLUE's
    assert rel(r.error[1].variance, r.variance[1]) < 1e-10


def test_rank_deficient_history_estimability():
    H = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    y = np.array([5.0, 3.0, 9.0])
    ok = blue(H, y, scale=1.0, query=[1.0, 1.0, 2.0])
    assert ok.estimable and ok.error is not None
    np.testing.assert_allclose(ok.A @ H, [1.0, 1.0, 2.0], atol=1e-12)
    bad = blue(H, y, scale=1.0, query=[1.0, 0.0, 0.0])
    assert bad.estimable is False and bad.error is None
    assert blue(H, y, scale=1.0).estimable is False  # x itself is not estimable
    with pytest.raises(ValueError, match="not estimable"):
        posterior(H, y, [1.0, 0.0, 0.0], scale=1.0)


def test_blue_from_measurements_equals_dense():
    dom = Domain({"a": 2, "b": 3, "c": 2})
    ms = [
        Measurement(("a",), [4.0, 6.0], 1.5, noise="laplace"),
        Measurement(("b", "a"), np.arange(6.0), 2.0, noise="laplace"),
        Measurement(("b",), [3.0, 7.0], 1.0, np.array([[1, 1, 0], [0, 1, 1.0]]), noise="gaussian"),
    ]
    h = history_matrix(dom, ms)
    assert h.attributes == ("a", "b") and h.H.shape == (10, 6)
    # row of the (b, a) marginal for b=2, a=1 is the cell (a=1, b=2) of the (a, b) grid
    assert h.H[2 + 2 * 2 + 1].tolist() == [0, 0, 0, 0, 0, 1]
    np.testing.assert_allclose(h.laplace_scale[:8], [1.5 / 2**0.5] * 2 + [2 / 2**0.5] * 6)
    np.testing.assert_allclose(h.gaussian_sd, [0] * 8 + [1, 1])
    q = np.array([1.0, 1, 1, 0, 0, 0])  # a = 0
    r1 = blue(ms, domain=dom, query=q)
    r2 = blue(h.H, h.y, scale=h.laplace_scale, stddev=h.gaussian_sd, query=q)
    assert r1.value == pytest.approx(r2.value, rel=1e-12) and r1.variance == pytest.approx(r2.variance, rel=1e-12)
    assert r1.error.gaussian_variance > 0 and r1.error.terms.size > 0


def test_blue_input_errors():
    with pytest.raises(ValueError, match="3 rows but y has 2"):
        blue(np.eye(3), [1.0, 2.0], scale=1.0)
    with pytest.raises(ValueError, match="give the noise"):
        blue(np.eye(2), [1.0, 2.0])
    with pytest.raises(ValueError, match="query must be"):
        blue(np.eye(2), [1.0, 2.0], scale=1.0, query=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="domain="):
        blue([Measurement(("a",), [1.0, 2.0])])
    with pytest.raises(ValueError, match="non-finite"):
        blue(np.eye(2), [1.0, np.nan], scale=1.0)


# ---- X3-2, X3-3: the error law -----------------------------------------------------------------


def xx_law(method="cf", **kw):
    return blue(H_XX, Y_XX, scale=B_XX, query=Q_XX, method=method, **kw)


def test_x3_2_error_law_half_widths_and_claims():
    r = xx_law()
    E = r.error
    np.testing.assert_allclose(E.terms, np.sort([9.538462, 3.64486, 0.654206, 4.953271, 5.000719, 10.461538, 2.803738, 2.383896]), atol=1e-6)
    for method in ("cf", "exact"):
        e = E.with_method(method)
        for level, ref in ((0.90, 38.4580550194), (0.95, 47.3833297071), (0.99, 66.8848864496)):
            assert rel(e.half_width(level), ref) < 1e-8, (method, level)
    p = posterior(H_XX, Y_XX, Q_XX, scale=B_XX)
    iv = p.interval(0.95)
    assert abs(iv.lo - -5.36952668773) < 1e-7 and abs(iv.hi - 89.3971327265) < 1e-7
    assert abs(p.prob_greater(0.0) - 0.961904116142) < 1e-9
    assert abs(p.prob(0.0, 50.0) - 0.607750229369) < 1e-9
    assert abs(claim_probability(H_XX, Y_XX, Q_XX, lo=0.0, scale=B_XX) - 0.961904116142) < 1e-9
    g = E.with_method("gaussian")
    assert rel(g.half_width(0.95), 46.1508073) < 1e-8
    assert abs(g.cdf(r.value) - 0.96281017) < 1e-8
    # Chebyshev (Theorem 3.2) holds and is loose: half-width sqrt(Var / 0.05) = 105.30. (A half-width of 148.92 would be
    # sqrt(2 Var / 0.05): the Laplace factor 2 counted twice; Var = 554.45 already includes it.)
    cheb = math.sqrt(r.variance / 0.05)
    assert abs(cheb - 105.3043243) < 1e-6 and E.prob_abs_le(cheb) > 0.99
    # the paper's printed 95% interval [-41, 125] is far wider than the exact one (errata)
    assert iv.hi - iv.lo < 0.6 * (125 - -41)


def test_x3_2_monte_carlo_and_pc():
    E = xx_law().error
    mc = E.with_method("mc", key=jax.random.key(3), samples=200_000)
    # 95% half-width: standard error about 0.2 at 2e5 draws
    assert abs(mc.half_width(0.95) - 47.3833297071) < 1.0
    assert abs(mc.cdf(42.0138030194) - 0.961904116142) < 0.003
    # Monte Carlo is reproducible from its key
    assert mc.half_width(0.9) == E.with_method("mc", key=jax.random.key(3), samples=200_000).half_width(0.9)
    pc = E.with_method("pc", bin_width=0.05, gamma=1e-9)
    assert rel(pc.half_width(0.95), 47.3833297071) < 1e-3
    # Algorithm 2's lengths ceil(2 s_k ln(8 / 0.01)) + 1 = [129, 50, 10, 68, 68, 141, 39, 33], made odd
    s = np.abs(xx_law().A) * B_XX
    assert bin_counts(s, 0.01).tolist() == [129, 51, 11, 69, 69, 141, 39, 33]


def test_x3_3_two_answers_of_one_cell():
    r = blue(np.ones((2, 1)), [10.0, 14.0], scale=[1.0, 2.0], query=[1.0])
    np.testing.assert_allclose(r.A, [0.8, 0.2], atol=1e-14)
    assert rel(r.value, 10.8) < 1e-14 and rel(r.variance, 1.6) < 1e-14
    np.testing.assert_allclose(r.error.terms, [0.4, 0.8], atol=1e-14)
    # closed form P(E > z) = 1/2 (4/3 e^{-z/0.8} - 1/3 e^{-z/0.4})
    z = np.linspace(0, 8, 33)
    closed = 0.5 * (4 / 3 * np.exp(-z / 0.8) - 1 / 3 * np.exp(-z / 0.4))
    for method in ("cf", "exact"):
        e = r.error.with_method(method)
        np.testing.assert_allclose(e.sf(z), closed, atol=1e-11)
        for level, ref in ((0.9, 2.0567733645), (0.95, 2.6191237552), (0.99, 3.9127775703)):
            assert rel(e.half_width(level), ref) < 1e-9
    p = posterior(np.ones((2, 1)), [10.0, 14.0], [1.0], scale=[1.0, 2.0])
    assert abs(p.prob_greater(10.0) - 0.7773029198) < 1e-9
    assert abs(p.prob_greater(12.0) - 0.1404555954) < 1e-9
    # same variances, Gaussian rows
    iv = confidence_interval(np.ones((2, 1)), [10.0, 14.0], [1.0], stddev=[2**0.5, 8**0.5], level=0.95)
    assert rel(iv.half_width, 2.4791801292) < 1e-9
    # the full-likelihood flat-prior posterior differs (mean 10.946, variance 2.230): not what this is
    t = np.linspace(-40, 60, 400_001)
    dens = np.exp(-np.abs(10 - t) - np.abs(14 - t) / 2)
    mean = np.sum(t * dens) / dens.sum()
    assert abs(mean - 10.9462459547) < 1e-5 and abs(np.sum((t - mean) ** 2 * dens) / dens.sum() - 2.2301417863) < 1e-5
    assert abs(mean - r.value) > 0.1


def test_cf_against_numerical_convolution_laplace_plus_gaussian():
    E = LinearNoise([1.0, 0.5], laplace_scale=[2.0, 0.0], gaussian_sd=[0.0, 3.0])  # Lap(2) + N(0, 1.5^2)

    def ref(x):
        f = lambda z: ndtr((x - z) / 1.5) * np.exp(-abs(z) / 2) / 4  # noqa: E731
        return integrate.quad(f, -np.inf, 0, epsabs=1e-13)[0] + integrate.quad(f, 0, np.inf, epsabs=1e-13)[0]

    for x in (-7.0, -1.3, 0.0, 0.4, 2.5, 9.0):
        assert abs(E.cdf(x) - ref(x)) < 1e-9  # the closed form, used by "cf" for one dominant term
        assert abs(E.with_method("exact").cdf(x) - ref(x)) < 1e-9
        assert abs(grid_cdf(cf_grid(E.terms, E.gaussian_variance), np.array(x)) - ref(x)) < 1e-9  # the FFT grid
    assert abs(E.cdf(0.0) - 0.5) < 1e-12
    # far into the tails (g / s large: the closed form's exponents are combined in log space)
    wide = LinearNoise([1.0, 1.0], laplace_scale=[0.05, 0.0], gaussian_sd=[0.0, 10.0])
    assert abs(wide.cdf(-30.0) - ndtr(-30.0 / wide.sd)) < 1e-5 and np.isfinite(wide.cdf(-300.0))


def test_cf_grid_against_partial_fractions_for_three_to_six_terms(rng):
    for n in (3, 4, 6):
        s = np.sort(rng.uniform(0.3, 4.0, n))
        E = LinearNoise(np.ones(n), s)
        g = cf_grid(E.terms, 0.0)
        x = np.linspace(-8, 8, 41) * E.sd
        np.testing.assert_allclose(grid_cdf(g, x), E.with_method("exact").cdf(x), atol=1e-10)
        p = np.array([0.05, 0.5, 0.9, 0.995])
        np.testing.assert_allclose(grid_quantile(g, p), E.with_method("exact").quantile(p), rtol=1e-9, atol=1e-12)


def test_cf_against_partial_fractions_random_laws(rng):
    for _ in range(5):
        s = np.sort(rng.uniform(0.2, 5.0, size=rng.integers(1, 6)))
        E = LinearNoise(np.ones(s.size), s)
        x = np.linspace(-6, 6, 41) * E.sd
        np.testing.assert_allclose(E.cdf(x), E.with_method("exact").cdf(x), atol=1e-9)
        np.testing.assert_allclose(E.cdf(x) + E.cdf(-x), 1.0, atol=1e-12)  # symmetric
        p = np.array([0.01, 0.3, 0.5, 0.77, 0.999])
        np.testing.assert_allclose(E.cdf(E.quantile(p)), p, atol=1e-10)


def test_tiny_terms_folded_into_the_gaussian_part():
    E = LinearNoise([1.0, 1.0, 1.0], [1.0, 5e-4, 7e-4])
    x = np.linspace(-8, 8, 33)
    np.testing.assert_allclose(E.cdf(x), E.with_method("exact").cdf(x), atol=1e-8)


def test_many_terms_are_cheap_and_near_gaussian(rng):
    w, b = rng.normal(size=2000), rng.uniform(1, 3, 2000)
    E = LinearNoise(w, b)
    assert E._grid.cdf.size <= 2**16
    assert rel(E.half_width(0.95), E.with_method("gaussian").half_width(0.95)) < 2e-3


def test_linear_noise_input_errors():
    with pytest.raises(ValueError, match="method must be one of"):
        LinearNoise([1.0], 1.0, method="fft")
    with pytest.raises(TypeError, match="key"):
        LinearNoise([1.0], 1.0, method="mc")
    with pytest.raises(ValueError, match="repeated"):
        LinearNoise([1.0, 1.0], 1.0, method="exact")
    with pytest.raises(ValueError, match="at most 8"):
        LinearNoise(np.arange(1.0, 10.0), 1.0, method="exact")
    with pytest.raises(ValueError, match="non-negative"):
        LinearNoise([1.0], -1.0)
    with pytest.raises(ValueError, match="has 2 entries but weights has 1"):
        LinearNoise([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="level must be in"):
        LinearNoise([1.0], 1.0).half_width(1.0)
    with pytest.raises(ValueError, match="give laplace_scale"):
        LinearNoise([1.0])


# ---- X3-4, X3-5: privacy cost and allocation -------------------------------------------------------


def test_x3_4_per_cell_cost():
    B = cell_cost(H_XX, epsilons=ALPHA_XX)
    np.testing.assert_allclose(B, [0.1, 0.275, 0.25, 0.375], atol=1e-14)
    np.testing.assert_allclose(cell_cost(H_XX, scale=B_XX), B, atol=1e-14)
    assert system_cost(H_XX, epsilons=ALPHA_XX) == pytest.approx(0.375, abs=1e-14)
    assert ALPHA_XX.sum() == pytest.approx(0.6)  # sequential composition
    assert system_cost(H_XX, epsilons=ALPHA_XX, bounded=True) == pytest.approx(0.525, abs=1e-14)


def test_x3_4_per_record_cost_factored():
    dom = Domain({"A": 2, "B": 3})
    r2 = 2**0.5
    ms = [
        Measurement(("A",), [0, 0], 2 * r2, noise="laplace"),
        Measurement(("A", "B"), np.zeros(6), 4 * r2, noise="laplace"),
        Measurement(("B",), np.zeros(3), r2, np.tril(np.ones((3, 3))), noise="laplace"),
    ]
    assert per_record_cost(dom, ms) == pytest.approx(3.75, abs=1e-12)
    two = [Measurement(("A",), [0.0], r2, np.array([[1.0, 0]]), noise="laplace"),
           Measurement(("A",), [0.0], r2, np.array([[0.0, 1]]), noise="laplace")]
    assert per_record_cost(dom, two) == pytest.approx(1.0, abs=1e-12)
    assert per_record_cost(dom, two, bounded=True) == pytest.approx(2.0, abs=1e-12)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_per_record_cost_equals_brute_force(rng, noise):
    dom = Domain({"a": 2, "b": 3, "c": 2, "d": 2})
    ms = [
        Measurement(("a", "b"), np.zeros(6), rng.uniform(1, 3, 6), noise=noise),
        Measurement(("b", "c"), np.zeros(2), 1.7, rng.normal(size=(2, 6)), noise=noise),
        Measurement(("c", "d"), np.zeros(4), 2.5, (rng.normal(size=(2, 2)), rng.normal(size=(2, 2))), noise=noise),
        Measurement(("a", "d"), np.zeros(4), 0.9, noise=noise),
    ]
    h = history_matrix(dom, ms, attributes=("a", "b", "c", "d"))
    if noise == "laplace":
        kw = {"scale": h.laplace_scale}
    else:
        kw = {"stddev": h.gaussian_sd}
    for bounded in (False, True):
        ref = system_cost(h.H, bounded=bounded, **kw)
        assert per_record_cost(dom, ms, bounded=bounded) == pytest.approx(ref, rel=1e-12)
    # brute force of the add/remove cost straight from the definition
    if noise == "laplace":
        assert system_cost(h.H, **kw) == pytest.approx(max(np.sum(np.abs(h.H[:, j]) / h.laplace_scale) for j in range(h.H.shape[1])))


def test_per_record_cost_input_errors():
    dom = Domain({"a": 2})
    with pytest.raises(ValueError, match="mix Laplace and Gaussian"):
        per_record_cost(dom, [Measurement(("a",), [0, 0], 1.0, noise="laplace"), Measurement(("a",), [0, 0], 1.0)])
    with pytest.raises(ValueError, match="no measurements"):
        per_record_cost(dom, [])


def test_x3_5_allocation():
    a = allocate(25.0, 0.2, 1.0)
    assert rel(a.cost, 0.0643775165) < 1e-9 and a.noise == "laplace"
    # the fresh answer alone then meets the request exactly
    assert LinearNoise([1.0], a.scale).prob_abs_le(25.0) == pytest.approx(0.8, abs=1e-10)
    g = allocate(25.0, 0.2, noise="gaussian")
    assert rel(g.scale, 19.5076036518) < 1e-9 and rel(g.cost, 0.0013138995) < 1e-7
    assert allocate(25.0, 0.2, 3.0).cost == pytest.approx(3 * a.cost)
    with pytest.raises(ValueError, match="delta"):
        allocate(25.0, 1.5)
    with pytest.raises(ValueError, match="half_width"):
        allocate(-1.0, 0.2)


def test_x3_6_history_aware_allocation():
    h = History(H_XX, Y_XX, B_XX, np.zeros(8))
    a = allocate_with_history(h, Q_XX, 40.0, 0.05)
    assert rel(a.cost, 0.0376110418) < 1e-6
    paper = allocate(40.0, 0.05).cost
    assert rel(paper, 0.0748933068) < 1e-9 and 1 - a.cost / paper == pytest.approx(0.498, abs=1e-3)
    # at that budget the combined BLUE meets the request (half-width 40 at 95%)
    h2 = History(np.vstack([H_XX, Q_XX]), np.append(Y_XX, 0.0), np.append(B_XX, 1 / a.cost), np.zeros(9))
    assert blue_history(h2, Q_XX).error.half_width(0.95) == pytest.approx(40.0, rel=1e-6)
    # the history alone meets a 50-wide request: nothing to buy
    assert allocate_with_history(h, Q_XX, 50.0, 0.05).cost == 0.0


def test_posterior_pmf_feasible_and_sampling():
    p = posterior(np.ones((2, 1)), [1.0, 2.0], [1.0], scale=[1.0, 2.0])  # theta_hat = 1.2
    edges = np.array([-np.inf, -1.0, 0.0, 1.2, 3.0, np.inf])
    pmf = p.pmf(edges)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12) and pmf[:3].sum() == pytest.approx(0.5, abs=1e-12)  # theta_hat = 1.2
    assert pmf[1] == pytest.approx(p.prob(-1.0, 0.0), abs=1e-12)
    iv = p.interval(0.99, feasible=(0.0, np.inf))  # a count: clip at 0, keeps the coverage
    assert iv.lo == 0.0 and iv.hi == pytest.approx(1.2 + iv.half_width) and iv.half_width > 1.2
    with pytest.raises(ValueError, match="lower <= upper"):
        p.interval(0.9, feasible=(1.0, 0.0))
    E = p.error
    draws = E.sample(jax.random.key(0), (200_000,))
    assert abs(draws.mean()) < 4 * E.sd / math.sqrt(draws.size)
    assert draws.var() == pytest.approx(E.variance, rel=0.02)
    assert np.mean(np.abs(draws) <= E.half_width(0.9)) == pytest.approx(0.9, abs=0.003)
