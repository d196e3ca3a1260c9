"""Privacy layer: conversions (anchor values), sensitivities, mechanisms (statistical checks), the accountant."""

import dataclasses
import doctest
import math

import jax
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import pgmjax as pj
import pgmjax.privacy as pv
from pgmjax.privacy import REST, Accountant, PrivacyBudgetExceeded


def keys(seed, n):
    return list(jax.random.split(jax.random.key(seed), n))


@pytest.fixture(scope="module")
def data14():
    """14 attributes like Adult (the MST, AIM and MWEM budget anchors depend only on d), small sizes, 2000 records."""
    rng = np.random.default_rng(0)
    sizes = [4, 3, 5, 2, 3, 2, 3, 4, 2, 3, 5, 3, 4, 2]
    dom = pj.Domain({f"x{i}": n for i, n in enumerate(sizes)})
    return pj.Dataset(rng.integers(0, sizes, size=(2000, 14)), dom)


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(1)
    dom = pj.Domain({"a": 4, "b": 3, "c": 2})
    return pj.Dataset(rng.integers(0, [4, 3, 2], size=(300, 3)), dom)


# --------------------------------------------------------------------------------------------------
# zCDP <-> (eps, delta)
# --------------------------------------------------------------------------------------------------

CDP_RHO_ANCHORS = [  # cdp_rho of Canonne, Kamath & Steinke, NeurIPS 2020, Section 2.3, by private-pgm's bisection
    (0.1, 1e-9, 1.77138e-4), (0.1, 1e-5, 4.32994e-4),
    (0.31, 1e-9, 1.57317e-3), (0.31, 1e-5, 3.50982e-3),
    (1.0, 1e-9, 1.49731e-2), (1.0, 1e-5, 3.05566e-2),
    (3.16, 1e-9, 1.32915e-1), (3.16, 1e-5, 2.45977e-1),
    (10.0, 1e-9, 1.09079), (10.0, 1e-5, 1.78270),
]


@pytest.mark.parametrize("eps, delta, rho", CDP_RHO_ANCHORS)
def test_cdp_rho_anchor_table(eps, delta, rho):
    # The table has 6 significant digits: the value must round to it.
    assert pv.cdp_rho(eps, delta) == pytest.approx(rho, rel=5e-6)
    assert float(f"{pv.cdp_rho(eps, delta):.6g}") == rho


def _reference_cdp_delta(rho, eps):
    """private-pgm's ``cdp2adp.py`` procedure literally: 1000 bisection steps on the derivative, alpha >= 1.01."""
    amin, amax = 1.01, (eps + 1) / (2 * rho) + 2
    for _ in range(1000):
        alpha = (amin + amax) / 2
        if (2 * alpha - 1) * rho - eps + math.log1p(-1.0 / alpha) < 0:
            amin = alpha
        else:
            amax = alpha
    return min(math.exp((alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1 / alpha)) / (alpha - 1.0), 1.0)


def test_cdp_delta_is_the_reference_procedure_bit_for_bit():
    for rho, eps in [(0.0149731, 1.0), (0.5, 0.3), (1e-4, 0.1), (2.0, 10.0), (0.3, 5.0)]:
        assert pv.cdp_delta(rho, eps) == _reference_cdp_delta(rho, eps)
    lo, hi = 0.0, 2.0  # one full 1000 x 1000 reference cdp_rho(1, 1e-9)
    for _ in range(1000):
        r = (lo + hi) / 2
        lo, hi = (r, hi) if _reference_cdp_delta(r, 1.0) <= 1e-9 else (lo, r)
    assert pv.cdp_rho(1.0, 1e-9) == lo


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-9), (1.0, 1e-9), (1.0, 1e-5), (3.16, 1e-6), (10.0, 1e-3)])
def test_cdp_round_trips(eps, delta):
    rho = pv.cdp_rho(eps, delta)
    assert pv.cdp_delta(rho, eps) <= delta
    assert pv.cdp_delta(rho, eps) == pytest.approx(delta, rel=1e-6)
    assert pv.cdp_delta(rho * (1 + 1e-6), eps) > delta  # rho is the largest that fits
    assert pv.cdp_eps(rho, delta) == pytest.approx(eps, rel=1e-6)
    assert pv.cdp_rho(pv.cdp_eps(rho, delta), delta) == pytest.approx(rho, rel=1e-6)


def test_cdp_edge_cases_and_monotonicity():
    assert pv.cdp_delta(0.0, 1.0) == 0.0 and pv.cdp_eps(0.0, 1e-6) == 0.0
    assert pv.cdp_delta(100.0, 0.0) == 1.0
    rhos = [pv.cdp_rho(e, 1e-6) for e in (0.1, 0.5, 1.0, 2.0, 5.0)]
    assert all(a < b for a, b in zip(rhos, rhos[1:]))
    # Never worse than the standard bound rho + 2 sqrt(rho ln(1/delta)).
    assert pv.cdp_eps(0.1, 1e-6) < 0.1 + 2 * math.sqrt(0.1 * math.log(1e6))


# --------------------------------------------------------------------------------------------------
# Advanced composition (Dwork, Rothblum & Vadhan, FOCS 2010, Theorem III.3), DualQuery (Gaboardi et al., ICML 2014)
# --------------------------------------------------------------------------------------------------


def test_advanced_composition_hand_value():
    # 0.1 * sqrt(2 * 10 * ln(1e5)) + 10 * 0.1 * (e^0.1 - 1)
    # = 0.1 * sqrt(230.2585092994046) + (1.1051709180756477 - 1) = 1.5174271293851465 + 0.1051709180756477
    assert pv.advanced_composition(0.1, 10, 1e-5) == pytest.approx(1.6225980474607942, rel=1e-14)
    assert pv.advanced_composition(0.1, 0, 1e-5) == 0.0
    assert pv.advanced_composition_hetero([0.1] * 10, 1e-5) == pytest.approx(1.6225980474607942, rel=1e-14)
    assert pv.advanced_composition_hetero([0.1, 0.2], 1e-5, counts=[10, 0]) == pytest.approx(1.6225980474607942, rel=1e-14)
    # Heterogeneous with different epsilons, by hand: sqrt(2 ln(1e3) (0.01 + 0.04)) + 0.1(e^.1-1) + 0.2(e^.2-1)
    hand = math.sqrt(2 * math.log(1e3) * 0.05) + 0.1 * 0.10517091807564771 + 0.2 * 0.22140275816016985
    assert pv.advanced_composition_hetero([0.1, 0.2], 1e-3) == pytest.approx(hand, rel=1e-14)


def test_advanced_composition_inverse():
    e0 = pv.advanced_composition_inverse(1.6225980474607942, 10, 1e-5)
    assert e0 == pytest.approx(0.1, rel=1e-12)
    assert pv.advanced_composition(e0, 10, 1e-5) <= 1.6225980474607942
    # delta close to 1 and k = 1: the composed epsilon is below eps0 (the bracket must grow).
    e1 = pv.advanced_composition_inverse(0.2, 1, 0.9)
    assert pv.advanced_composition(e1, 1, 0.9) == pytest.approx(0.2, rel=1e-12) and e1 > 0.2


def test_dualquery_anchors():
    kw = dict(eta=2.0, samples=50, records=48842, delta=1e-3)
    assert pv.dualquery_rounds(1.0, **kw) == 58
    assert pv.dualquery_epsilon(58, **kw) == pytest.approx(0.98854, abs=5e-6)
    assert pv.dualquery_epsilon(59, **kw) > 1.0
    assert pv.dualquery_rounds(1.0, form="heterogeneous", **kw) == 83
    assert pv.dualquery_epsilon(83, form="heterogeneous", **kw) == pytest.approx(0.99414, abs=5e-6)
    pure = dict(kw, delta=None)
    assert pv.dualquery_epsilon(58, form="pure", **pure) == pytest.approx(6.77, abs=5e-3)
    assert pv.dualquery_epsilon(1, **kw) == 0.0
    assert pv.dualquery_rounds(1e-9, **kw) == 1
    with pytest.raises(ValueError, match="needs delta"):
        pv.dualquery_epsilon(10, eta=2.0, samples=50, records=48842)
    with pytest.raises(ValueError, match="form must be one of"):
        pv.dualquery_epsilon(10, form="b3", **kw)


# --------------------------------------------------------------------------------------------------
# Sensitivities (add/remove-one and replace-one neighbours)
# --------------------------------------------------------------------------------------------------


def _brute_force(Q, order, bounded):
    cols = Q.T
    if not bounded:
        return max(np.linalg.norm(c, order) for c in cols)
    return max(np.linalg.norm(cols[j] - cols[k], order) for j in range(len(cols)) for k in range(len(cols)) if j != k)


def test_sensitivity_table():
    assert pv.l1_sensitivity() == 1.0 and pv.l1_sensitivity(bounded=True) == 2.0
    assert pv.l2_sensitivity() == 1.0 and pv.l2_sensitivity(bounded=True) == math.sqrt(2)
    prefix = np.tril(np.ones((5, 5)))
    assert pv.l1_sensitivity(prefix) == 5.0 and pv.l1_sensitivity(prefix, bounded=True) == 10.0
    assert pv.l2_sensitivity(prefix) == pytest.approx(math.sqrt(5))
    assert pv.l2_sensitivity(prefix, bounded=True) == pytest.approx(math.sqrt(10))
    assert pv.l1_sensitivity(np.array([0.0, 1.0, 1.0, 0.0])) == 1.0  # one counting query (1-D = one row)
    # A query with negative entries: columns can point in opposite directions under replacement.
    diff = np.array([[1.0, -1.0]])
    assert pv.l2_sensitivity(diff) == 1.0 and pv.l2_sensitivity(diff, bounded=True) == 2.0
    assert _brute_force(diff, 2, True) == 2.0


@pytest.mark.parametrize("signed", [False, True])
def test_kronecker_sensitivity_equals_dense_kron(signed):
    rng = np.random.default_rng(3)
    factors = [rng.uniform(0, 1, (3, 4)), rng.uniform(0, 1, (2, 3)), rng.uniform(0, 1, (4, 2))]
    if signed:
        factors[1] = factors[1] - 0.5
    dense = np.kron(np.kron(factors[0], factors[1]), factors[2])
    for bounded in (False, True):
        for fn in (pv.l1_sensitivity, pv.l2_sensitivity):
            assert fn(tuple(factors), bounded=bounded) == pytest.approx(fn(dense, bounded=bounded), rel=1e-12)


def test_sensitivity_bounds_hold_by_brute_force():
    rng = np.random.default_rng(4)
    cases = [np.eye(4), np.tril(np.ones((4, 4))), rng.uniform(0, 1, (3, 5)), rng.normal(size=(3, 5)), rng.normal(size=(1, 6))]
    for Q in cases:
        for bounded in (False, True):
            assert pv.l1_sensitivity(Q, bounded=bounded) >= _brute_force(Q, 1, bounded) - 1e-12
            assert pv.l2_sensitivity(Q, bounded=bounded) >= _brute_force(Q, 2, bounded) - 1e-12
        # Exact for add/remove-one, and the identity's values (L1 2, L2 sqrt 2) are exact for replace-one too.
        assert pv.l1_sensitivity(Q) == pytest.approx(_brute_force(Q, 1, False))
        assert pv.l2_sensitivity(Q) == pytest.approx(_brute_force(Q, 2, False))
    assert pv.l2_sensitivity(np.eye(4), bounded=True) == pytest.approx(_brute_force(np.eye(4), 2, True))
    assert pv.l1_sensitivity(np.eye(4), bounded=True) == pytest.approx(_brute_force(np.eye(4), 1, True))


def test_accountant_sensitivities_follow_the_convention():
    assert Accountant(epsilon=1.0).l1_sensitivity() == 1.0
    assert Accountant(epsilon=1.0, bounded=True).l1_sensitivity() == 2.0
    assert Accountant(rho=1.0, bounded=True).l2_sensitivity() == math.sqrt(2)


def test_cost_formulas():
    assert pv.laplace_scale(2.0, 0.5) == 4.0 and pv.laplace_epsilon(2.0, 4.0) == 0.5
    assert pv.gaussian_rho(1.0, pv.gaussian_sigma(1.0, 0.02)) == pytest.approx(0.02, rel=1e-15)
    assert pv.gaussian_sigma(math.sqrt(2), 0.25) == pytest.approx(2.0)
    assert pv.exponential_rho(0.4) == pytest.approx(0.02) and pv.pure_dp_rho(0.4) == pytest.approx(0.08)


# --------------------------------------------------------------------------------------------------
# Mechanisms: statistics with fixed keys
# --------------------------------------------------------------------------------------------------

N_DRAWS = 200_000


def _chisquare_integer_law(noise, weights_of):
    """Chi-square p-value of integer draws against the law with unnormalised pmf ``weights_of(z)``."""
    z = np.arange(-200, 201)
    p = weights_of(z.astype(np.float64))
    p /= p.sum()
    counts = np.bincount((noise.astype(np.int64) + 200).clip(0, 400), minlength=401)
    keep = p * noise.size >= 5  # pool the tails
    obs = np.r_[counts[keep], counts[~keep].sum()]
    exp = np.r_[p[keep], p[~keep].sum()] * noise.size
    return stats.chisquare(obs, exp).pvalue


def test_laplace_noise_scale():
    acc = Accountant(epsilon=1.0)
    noise = acc.laplace(jax.random.key(11), np.zeros(N_DRAWS), 2.0, epsilon=0.5, integer=True)  # b = 4
    assert acc.ledger[0].scale == pytest.approx(4.0, rel=1e-15) and acc.spent == 0.5
    assert np.array_equal(noise, np.round(noise))  # integer noise: no float low bits to leak
    assert noise.var() == pytest.approx(pv.dn.discrete_laplace_variance(4.0), rel=0.02)
    assert abs(noise.mean()) < 0.05
    assert _chisquare_integer_law(noise, lambda z: np.exp(-np.abs(z) / 4.0)) > 1e-3
    # The same test rejects a 5% scale error: it has the power to catch a wrong calibration.
    assert _chisquare_integer_law(noise, lambda z: np.exp(-np.abs(z) / 4.2)) < 1e-6


def test_gaussian_noise_scale():
    acc = Accountant(rho=1.0)
    noise = acc.gaussian(jax.random.key(12), np.zeros(N_DRAWS), 1.0, rho=0.02, integer=True)  # sigma = 5
    assert acc.ledger[0].scale == pytest.approx(5.0) and acc.spent == 0.02
    assert np.array_equal(noise, np.round(noise))
    assert noise.std() == pytest.approx(5.0, rel=0.02)
    assert _chisquare_integer_law(noise, lambda z: np.exp(-(z**2) / 50.0)) > 1e-3
    assert _chisquare_integer_law(noise, lambda z: np.exp(-(z**2) / (2 * 5.25**2))) < 1e-6


def test_real_valued_release_pays_for_its_lattice():
    """Real answers are rounded to a public lattice; the ledger counts the sensitivity rounding adds."""
    acc = Accountant(epsilon=1.0)
    x = np.array([0.3, 1.7, 2.25])
    y = acc.laplace(jax.random.key(2), x, 1.0, epsilon=0.5)
    e = acc.ledger[0]
    gamma = pv.dn.lattice_spacing(2.0, 1.0, 3, integer=False)
    assert np.array_equal(y / gamma, np.round(y / gamma))  # every output on the lattice gamma * Z
    assert e.sensitivity == 1.0 + 3 * gamma and e.scale >= e.sensitivity / 0.5 and acc.spent == 0.5


def test_gumbel_and_uniform_tails():
    g = pv.standard_gumbel(jax.random.key(13), N_DRAWS)
    assert stats.kstest(g, stats.gumbel_r.cdf).pvalue > 1e-3
    z = pv.standard_normal(jax.random.key(14), N_DRAWS)
    assert np.all(np.isfinite(z)) and np.all(np.isfinite(pv.standard_laplace(jax.random.key(14), N_DRAWS)))


def test_exponential_mechanism_frequencies():
    q = np.array([0.0, 1.0, 2.0, 4.0, -np.inf, 3.0])
    eps, sens = 1.0, 1.0
    p = pv.exponential_probabilities(q, sens, eps)
    by_hand = np.exp(eps * np.where(np.isfinite(q), q, -np.inf) / (2 * sens))
    np.testing.assert_allclose(p, by_hand / by_hand.sum(), rtol=1e-14)
    n = 100_000
    acc = Accountant(epsilon=n * eps)  # n draws cost n * eps (basic composition)
    draws = acc.exponential(jax.random.key(21), q, sens, epsilon=eps, num=n)
    assert acc.ledger[0].count == n and acc.spent == n * eps and draws.dtype == np.int64
    counts = np.bincount(draws, minlength=q.size)
    assert counts[4] == 0  # excluded candidate
    keep = p > 0
    assert stats.chisquare(counts[keep], n * p[keep]).pvalue > 1e-3
    # Power: the frequencies reject the distribution of a 10% larger epsilon.
    wrong = pv.exponential_probabilities(q, sens, 1.1 * eps)
    assert stats.chisquare(counts[keep], n * wrong[keep]).pvalue < 1e-6


def test_exponential_mechanism_never_draws_excluded_candidates():
    q = np.array([-np.inf, 5.0, -np.inf, 0.0, -np.inf, -np.inf])
    draws = pv.exponential_mechanism(jax.random.key(3), q, 1.0, 0.5, num=50_000)
    assert set(np.unique(draws)) == {1, 3}
    assert pv.exponential_mechanism(jax.random.key(3), q, 1.0, 1e6) == 1
    # seeded: the same key gives the same draws
    np.testing.assert_array_equal(draws, pv.exponential_mechanism(jax.random.key(3), q, 1.0, 0.5, num=50_000))


def test_exponential_mechanism_stability_and_limits():
    q = np.array([1e300, 1e300 - 1e285, -1e300])  # no overflow thanks to the max-shift
    p = pv.exponential_probabilities(q, 1.0, 1.0)
    assert np.all(np.isfinite(p)) and p[0] == 1.0
    p2 = pv.exponential_probabilities([1e6, 1e6 + 2.0], 1.0, 1.0)
    np.testing.assert_allclose(p2, [1 / (1 + math.e), math.e / (1 + math.e)], rtol=1e-12)
    assert pv.exponential_mechanism(jax.random.key(0), [0.0, 5.0, 1.0], 1.0, 1e4) == 1  # huge eps: argmax
    one = pv.exponential_mechanism(jax.random.key(5), np.arange(7.0), 1.0, 0.3)
    assert isinstance(one, int) and one == pv.exponential_mechanism(jax.random.key(5), np.arange(7.0), 1.0, 0.3)


def test_noise_is_a_function_of_the_key_only():
    a = pv.standard_normal(jax.random.key(3), (4, 5))
    with jax.enable_x64(False):
        b = pv.standard_normal(jax.random.key(3), (4, 5))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, pv.standard_normal(jax.random.key(4), (4, 5)))
    raw = pv.standard_laplace(jax.random.PRNGKey(3), 6)
    np.testing.assert_array_equal(raw, pv.standard_laplace(jax.random.PRNGKey(3), 6))


# --------------------------------------------------------------------------------------------------
# The accountant: budgets, ledger, spending everything, refusing to overspend
# --------------------------------------------------------------------------------------------------


def test_accountant_budgets():
    assert Accountant(epsilon=2.0).composition == "pure" and Accountant(epsilon=2.0).budget == 2.0
    acc = Accountant(epsilon=1.0, delta=1e-9)
    assert acc.composition == "zcdp" and acc.currency == "rho"
    assert acc.budget == pv.cdp_rho(1.0, 1e-9)
    assert Accountant(rho=0.5).budget == 0.5 and Accountant(rho=0.5).remaining == 0.5
    adv = Accountant(epsilon=1.0, delta=1e-3, composition="advanced")
    assert adv.currency == "epsilon" and adv.budget == 1.0 and adv.delta == 1e-3


def test_pure_split_into_equal_parts_and_overspend(small):
    acc = Accountant(epsilon=1.0)
    ks = keys(0, 9)
    for i in range(7):  # 7 * (1/7) overshoots 1.0 by float round-off: the slack must absorb it
        acc.measure(ks[i], small, ("a", "b"), epsilon=1.0 / 7)
    assert acc.spent == pytest.approx(1.0, rel=1e-15) and acc.exhausted
    before = acc.ledger
    with pytest.raises(PrivacyBudgetExceeded, match=r"laplace on \('a',\) costs 0.01 epsilon .* left"):
        acc.measure(ks[7], small, ("a",), epsilon=0.01)
    with pytest.raises(PrivacyBudgetExceeded, match="nothing is left"):
        acc.measure(ks[8], small, ("a",), epsilon=REST)
    assert acc.ledger == before


def test_float_slack_is_tiny():
    acc = Accountant(epsilon=1.0)
    acc.laplace(jax.random.key(0), np.zeros(2), 1.0, epsilon=0.5)
    with pytest.raises(PrivacyBudgetExceeded):
        acc.laplace(jax.random.key(1), np.zeros(2), 1.0, epsilon=0.5 * (1 + 1e-6))
    acc.laplace(jax.random.key(1), np.zeros(2), 1.0, epsilon=0.5 * (1 + 1e-12))  # round-off, not overspending
    assert acc.exhausted and acc.remaining == 0.0


def test_rest_never_ends_above_the_budget():
    # Here no float cost makes the rounded sum exactly the budget: the rest stops one ulp below.
    acc = Accountant(epsilon=0.7000000000000003)
    acc.laplace(jax.random.key(0), np.zeros(1), 1.0, epsilon=0.12327452636024111)
    acc.laplace(jax.random.key(1), np.zeros(1), 1.0, epsilon=REST)
    assert acc.spent <= acc.budget and acc.budget - acc.spent <= math.ulp(acc.budget) and acc.exhausted
    # A typical case: sevenths of an odd budget, then the rest, sum exactly to it.
    acc = Accountant(rho=0.0149731)
    for i in range(6):
        acc.gaussian(jax.random.key(i), np.zeros(1), 1.0, rho=0.0149731 / 7)
    acc.gaussian(jax.random.key(9), np.zeros(1), 1.0, rho=REST)
    assert acc.spent == acc.budget


def test_overspend_is_refused_before_anything_runs(small):
    acc = Accountant(rho=0.1)
    acc.gaussian(jax.random.key(0), np.zeros(3), 1.0, rho=0.06)
    with pytest.raises(PrivacyBudgetExceeded) as err:
        acc.exponential(jax.random.key(1), [1.0, 2.0], 1.0, epsilon=1.0, target="pick")  # 1/8 rho > 0.04 left
    msg = str(err.value)
    assert "exponential on 'pick'" in msg and "0.125 rho" in msg and "0.04 of the budget 0.1 is left" in msg
    with pytest.raises(PrivacyBudgetExceeded, match="2 gaussian measurements"):
        acc.measure_many(jax.random.key(2), small, [("a",), ("b",)], rho=0.05)
    assert len(acc.ledger) == 1 and acc.spent == 0.06


def test_mst_budget_flow_matches_hand_computed_anchors(data14):
    """MST (McKenna, Miklau & Sheldon, JPC 2021, Section 4) on Adult's d = 14, eps=1, delta=1e-9:
    one-way std 37.45, eps_EM 0.05542, two-way std 36.09 (anchor values computed by hand)."""
    acc = Accountant(epsilon=1.0, delta=1e-9)
    assert acc.budget == pytest.approx(0.0149731, rel=5e-6)
    k1, k2, k3 = keys(7, 3)
    attrs = list(data14.domain)
    one_way = acc.measure_many(k1, data14, [(a,) for a in attrs], rho=acc.budget / 3)
    assert float(one_way[0].stddev) == pytest.approx(37.45, abs=5e-3)
    assert math.sqrt(3 / (2 * acc.budget)) == pytest.approx(10.009, abs=5e-4)
    rng = np.random.default_rng(0)
    for r, k in enumerate(keys(8, 13)):
        acc.exponential(k, rng.normal(size=91 - r), acc.l1_sensitivity(), rho=acc.budget / 3 / 13, target=f"edge {r}")
    assert acc.ledger[-1].epsilon == pytest.approx(0.05542, abs=5e-6)
    edges = [(attrs[i], attrs[i + 1]) for i in range(13)]
    two_way = acc.measure_many(k3, data14, edges, rho=REST)
    assert all(float(m.stddev) == pytest.approx(36.09, abs=5e-3) for m in two_way)
    assert acc.spent == acc.budget  # exactly, not approximately
    assert acc.remaining == 0.0 and acc.exhausted
    eps, delta = acc.epsilon_delta()
    assert eps == pytest.approx(1.0, rel=1e-6) and delta == 1e-9


def test_aim_annealing_spends_exactly_the_budget(small):
    """AIM's loop (McKenna, Mullins, Sheldon & Miklau, VLDB 2022, Algorithm 1): charge per round, anneal, and spend
    exactly the remainder in the last round."""
    rho = pv.cdp_rho(1.0, 1e-9)
    T, d = 16 * 14, 14
    sigma, eps_em = math.sqrt(T / (2 * 0.9 * rho)), math.sqrt(8 * 0.1 * rho / T)
    assert sigma == pytest.approx(91.17, abs=5e-3) and eps_em == pytest.approx(0.007313, abs=5e-7)  # Adult, T = 16 d
    # A shorter run (T=12, 3 one-way marginals) with the same logic on the small dataset.
    acc = Accountant(rho=rho)
    T, d = 12, 3
    sigma, eps_em = math.sqrt(T / (2 * 0.9 * rho)), math.sqrt(8 * 0.1 * rho / T)
    acc.measure_many(jax.random.key(0), small, [("a",), ("b",), ("c",)], scale=sigma)
    assert acc.spent == pytest.approx(d / (2 * sigma**2))
    rng = np.random.default_rng(5)
    cands = [("a",), ("b",), ("c",), ("a", "b"), ("a", "c"), ("b", "c")]
    ks = iter(keys(9, 200))
    rounds, last = 0, False
    while not last:
        round_cost = acc.cost("gaussian", sensitivity=1.0, scale=sigma) + acc.cost("exponential", sensitivity=1.0, epsilon=eps_em)
        if acc.remaining < 2 * round_cost:
            last = True
            i = acc.exponential(next(ks), rng.normal(size=6), 1.0, rho=0.1 * acc.remaining)
            acc.measure(next(ks), small, cands[i], rho=REST)
        else:
            i = acc.exponential(next(ks), rng.normal(size=6), 1.0, epsilon=eps_em)
            acc.measure(next(ks), small, cands[i], scale=sigma)
            if rng.uniform() < 0.3:  # "the estimate barely moved": anneal
                sigma, eps_em = sigma / 2, eps_em * 2
        rounds += 1
    assert acc.spent == acc.budget
    assert all(e.cost > 0 for e in acc.ledger) and rounds >= 3
    assert acc.ledger[-1].mechanism == "gaussian"


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_mwem_round_budget_matches_hand_computed_anchors(noise, small):
    """MWEM+PGM, marginal version (private-pgm's mwem+pgm.py; d = T = 14, eps=1, delta=1e-9, alpha=0.9):
    Gaussian sigma 22.79, eps_EM 0.02925;
    Laplace b 15.56, eps_EM 0.007143. All rounds together spend the budget."""
    T, alpha = 14, 0.9
    acc = Accountant(epsilon=1.0) if noise == "laplace" else Accountant(epsilon=1.0, delta=1e-9)
    per_round = acc.budget / T
    ks = keys(3, 2 * T)
    for t in range(T):
        if noise == "laplace":
            acc.exponential(ks[2 * t], [1.0, 2.0, 3.0], acc.l1_sensitivity(), epsilon=(1 - alpha) * per_round)
            m = acc.measure(ks[2 * t + 1], small, ("a", "b"), mechanism="laplace", epsilon=alpha * per_round)
        else:
            acc.exponential(ks[2 * t], [1.0, 2.0, 3.0], acc.l1_sensitivity(), rho=(1 - alpha) * per_round)
            m = acc.measure(ks[2 * t + 1], small, ("a", "b"), rho=alpha * per_round)
    em, meas = acc.ledger[0], acc.ledger[1]
    if noise == "laplace":
        assert meas.scale == pytest.approx(15.56, abs=5e-3) and em.epsilon == pytest.approx(0.007143, abs=5e-7)
        assert float(m.stddev) == pytest.approx(math.sqrt(2) * meas.scale)
    else:
        assert meas.scale == pytest.approx(22.79, abs=5e-3) and em.epsilon == pytest.approx(0.02925, abs=5e-6)
    assert acc.spent == pytest.approx(acc.budget, rel=1e-12) and acc.exhausted


def test_privbayes_pure_bounded_flow(small):
    eps, beta = 1.0, 0.3
    acc = Accountant(epsilon=eps, bounded=True)
    ks = keys(4, 3)
    for i, k in enumerate(ks[:2]):  # d - 1 structure steps
        acc.exponential(k, [0.1, 0.4, 0.2], sensitivity=3 / len(small), epsilon=beta * eps / 2)
    tables = acc.measure_many(ks[2], small, [("a", "b"), ("b", "c"), ("c",)], mechanism="laplace", epsilon=REST)
    b = 2 * 3 / ((1 - beta) * eps)  # Delta1 = 2 (replace-one), m = 3 tables
    assert all(e.scale == pytest.approx(b, rel=1e-12) for e in acc.ledger[2:])
    # The realised discrete-Laplace scale is b rounded up to a rational (relative 2^-20 at most).
    assert all(math.sqrt(2) * b <= float(t.stddev) <= math.sqrt(2) * b * (1 + 2**-20) for t in tables)
    assert acc.spent == 1.0


def test_dualquery_advanced_composition_flow():
    N, eta, s, delta = 48842, 2.0, 50, 1e-3
    T = pv.dualquery_rounds(1.0, eta=eta, samples=s, records=N, delta=delta)
    for composition, form in [("advanced", "b2"), ("advanced_heterogeneous", "heterogeneous")]:
        acc = Accountant(epsilon=1.0, delta=delta, composition=composition)
        rng = np.random.default_rng(0)
        for t, k in zip(range(2, T + 1), keys(6, T - 1)):
            idx = acc.exponential(k, rng.uniform(size=40), (t - 1) / N, epsilon=2 * eta * (t - 1) / N, num=s)
            assert idx.shape == (s,)
        assert acc.spent == pytest.approx(pv.dualquery_epsilon(T, eta=eta, samples=s, records=N, delta=delta, form=form), rel=1e-12)
        assert acc.epsilon_delta() == (acc.spent, delta)
        if composition == "advanced":  # round T + 1 would exceed the budget under the b2 bound
            with pytest.raises(PrivacyBudgetExceeded):
                acc.exponential(jax.random.key(0), np.zeros(40), T / N, epsilon=2 * eta * T / N, num=s)
            assert acc.ledger[-1].index == T - 2
        with pytest.raises(ValueError, match="needs additive accounting"):
            acc.exponential(jax.random.key(0), np.zeros(4), 1.0, epsilon=REST)
    # Few draws: plain summation is the better of the two valid bounds.
    acc = Accountant(epsilon=1.0, delta=1e-3, composition="advanced")
    acc.laplace(jax.random.key(0), np.zeros(2), 1.0, epsilon=0.2)
    assert acc.spent == 0.2


def test_cost_does_not_spend():
    acc = Accountant(rho=1.0)
    assert acc.cost("gaussian", sensitivity=1.0, scale=10.0) == 0.005
    assert acc.cost("exponential", sensitivity=1.0, epsilon=0.2, count=3) == pytest.approx(3 * 0.04 / 8)
    assert acc.cost("laplace", sensitivity=1.0, epsilon=0.2) == pytest.approx(0.02)
    assert Accountant(epsilon=1.0).cost("laplace", sensitivity=2.0, scale=4.0) == 0.5
    assert acc.ledger == () and acc.spent == 0.0


# --------------------------------------------------------------------------------------------------
# measure()
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bounded", [False, True])
def test_measure_gaussian_stddev_and_noise_from_key(small, bounded):
    acc = Accountant(rho=1.0, bounded=bounded)
    key = jax.random.key(42)
    m = acc.measure(key, small, ("b", "a"), rho=0.125)
    sigma = (math.sqrt(2) if bounded else 1.0) / math.sqrt(2 * 0.125)
    assert isinstance(m, pj.Measurement) and m.clique == ("b", "a") and m.query is None
    assert float(m.stddev) == pytest.approx(sigma, rel=1e-15)
    noise = m.y - small.marginal(("b", "a")).reshape(-1)
    np.testing.assert_array_equal(noise, pv.dn.discrete_gaussian(pv.dn.generator(key), (12,), acc.ledger[0].scale))
    again = Accountant(rho=1.0, bounded=bounded).measure(key, small, ("b", "a"), rho=0.125)
    np.testing.assert_array_equal(again.y, m.y)
    other = Accountant(rho=1.0, bounded=bounded).measure(jax.random.key(43), small, ("b", "a"), rho=0.125)
    assert not np.array_equal(other.y, m.y)
    e = acc.ledger[0]
    assert (e.mechanism, e.target, e.query, e.size, e.cost) == ("gaussian", ("b", "a"), "identity", 12, 0.125)


def test_measure_laplace_with_dense_and_kron_queries(small):
    prefix = np.tril(np.ones((4, 4)))
    total = np.ones((1, 3))
    acc = Accountant(epsilon=3.0, bounded=True)
    key = jax.random.key(8)
    m = acc.measure(key, small, ("a",), query=prefix, epsilon=1.0)
    b = 2 * 4 / 1.0  # bounded: 2 * ||Prefix||_1
    assert float(m.stddev) == pytest.approx(math.sqrt(2) * b) and m.kind == "dense"
    z, _ = pv.dn.discrete_laplace(pv.dn.generator(key), (4,), b)  # 0/1 prefix query: integer answers
    np.testing.assert_array_equal(m.y - prefix @ small.marginal("a"), z)
    kron = acc.measure(key, small, ("a", "b"), query=(prefix, total), epsilon=1.0)
    dense = acc.measure(key, small, ("a", "b"), query=np.kron(prefix, total), epsilon=1.0)
    assert kron.kind == "kron" and acc.ledger[1].query == "kron 4x4 ⊗ 1x3"
    np.testing.assert_allclose(kron.y, dense.y, atol=1e-9)
    assert float(kron.stddev) == float(dense.stddev) == pytest.approx(math.sqrt(2) * b)
    assert acc.spent == pytest.approx(3.0) and acc.ledger[2].query == "dense 4x12"


def test_measure_many_equals_measure_with_split_keys(small):
    cliques = [("a",), ("b", "c"), ("a", "c")]
    key = jax.random.key(5)
    acc = Accountant(rho=0.3)
    many = acc.measure_many(key, small, cliques, rho=0.3)
    one = Accountant(rho=0.3)
    for k, c, m in zip(jax.random.split(key, 3), cliques, many):
        single = one.measure(k, small, c, rho=0.1)
        np.testing.assert_array_equal(single.y, m.y)
        assert float(single.stddev) == float(m.stddev)
    assert acc.spent == pytest.approx(0.3) and acc.exhausted


def test_measure_estimates_end_to_end(small):
    """The Measurements go straight into the estimator; with a big budget it recovers the marginals."""
    acc = Accountant(rho=1e4)
    ms = acc.measure_many(jax.random.key(1), small, [("a", "b"), ("b", "c")], rho=REST)
    model = pj.estimate(small.domain, ms, iters=300)
    np.testing.assert_allclose(np.asarray(model.marginal(("a", "b"))), small.marginal(("a", "b")), atol=1.0)


# --------------------------------------------------------------------------------------------------
# Bad input: specific errors, raised before anything is spent
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(epsilon=0.0), ValueError, "epsilon must be positive"),
        (dict(epsilon=-1.0), ValueError, "epsilon must be positive"),
        (dict(epsilon=float("inf")), ValueError, "epsilon must be positive and finite"),
        (dict(epsilon=float("nan")), ValueError, "epsilon must be a number"),
        (dict(epsilon=1.0, delta=0.0), ValueError, r"delta must be in \(0, 1\)"),
        (dict(epsilon=1.0, delta=1.0), ValueError, r"delta must be in \(0, 1\)"),
        (dict(epsilon=1.0, delta=-1e-9), ValueError, r"delta must be in \(0, 1\)"),
        (dict(rho=0.0), ValueError, "rho must be positive"),
        (dict(), ValueError, "give a budget"),
        (dict(epsilon=1.0, rho=0.1), ValueError, "not both"),
        (dict(epsilon=1.0, composition="renyi"), ValueError, "composition must be one of"),
        (dict(epsilon=1.0, delta=1e-6, composition="pure"), ValueError, "takes epsilon= alone"),
        (dict(epsilon=1.0, composition="advanced"), ValueError, "needs epsilon= and delta="),
        (dict(epsilon=1.0, bounded="yes"), TypeError, "bounded must be True or False"),
        (dict(epsilon="1"), TypeError, "epsilon must be a real number"),
    ],
)
def test_accountant_construction_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Accountant(**kwargs)


@pytest.mark.parametrize(
    "fn, args, match",
    [
        (pv.cdp_rho, (0.0, 1e-9), "eps must be positive"),
        (pv.cdp_rho, (-1.0, 1e-9), "eps must be positive"),
        (pv.cdp_rho, (1.0, 1.5), r"delta must be in \(0, 1\)"),
        (pv.cdp_rho, (1.0, 0.0), r"delta must be in \(0, 1\)"),
        (pv.cdp_eps, (0.1, 1.0), r"delta must be in \(0, 1\)"),
        (pv.cdp_eps, (-0.1, 1e-6), "rho must be non-negative"),
        (pv.cdp_delta, (0.1, -1.0), "eps must be non-negative"),
        (pv.advanced_composition, (0.0, 3, 1e-6), "epsilon0 must be positive"),
        (pv.advanced_composition, (0.1, 3, 2.0), r"delta must be in \(0, 1\)"),
        (pv.advanced_composition_hetero, ([0.1, -0.2], 1e-6), "every epsilon must be positive"),
        (pv.laplace_scale, (-1.0, 1.0), "sensitivity must be positive"),
        (pv.gaussian_sigma, (1.0, 0.0), "rho must be positive"),
        (pv.l1_sensitivity, (np.zeros((2, 2, 2)),), "must be a non-empty"),
        (pv.l2_sensitivity, ((np.eye(2), np.ones(3)),), "query factor 1 must be a non-empty 2-D"),
        (pv.exponential_probabilities, ([1.0, np.nan], 1.0, 1.0), "nan or \\+inf"),
        (pv.exponential_probabilities, ([-np.inf, -np.inf], 1.0, 1.0), "every candidate is excluded"),
        (pv.exponential_probabilities, ([[1.0]], 1.0, 1.0), "1-D"),
    ],
)
def test_function_input_errors(fn, args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fn(*args)


def test_l1_sensitivity_rejects_non_bool_convention():
    with pytest.raises(TypeError, match="bounded must be True or False"):
        pv.l1_sensitivity(None, bounded=1)


def test_mechanism_input_errors(small):
    key = jax.random.key(0)
    pure, zcdp = Accountant(epsilon=1.0), Accountant(rho=1.0)
    bad = [
        (lambda: pure.laplace(key, [1.0], -1.0, epsilon=0.1), ValueError, "sensitivity must be positive"),
        (lambda: pure.laplace(key, [1.0], 0.0, epsilon=0.1), ValueError, "sensitivity must be positive"),
        (lambda: pure.laplace(key, [1.0], 1.0, epsilon=0.0), ValueError, "epsilon must be positive"),
        (lambda: pure.laplace(key, [1.0], 1.0, epsilon=0.1, scale=2.0), ValueError, "exactly one of epsilon=, rho=, scale="),
        (lambda: pure.laplace(key, [1.0], 1.0), ValueError, "exactly one of"),
        (lambda: pure.laplace(key, [np.nan], 1.0, epsilon=0.1), ValueError, "values has non-finite"),
        (lambda: pure.laplace(key, [1.0], 1.0, rho=0.1), ValueError, "counts epsilon"),
        (lambda: pure.laplace(key, [1.0], 1.0, epsilon="all"), ValueError, "must be a number or 'rest'"),
        (lambda: pure.laplace(7, [1.0], 1.0, epsilon=0.1), TypeError, "key must be one jax.random key"),
        (lambda: pure.gaussian(key, [1.0], 1.0, sigma=1.0), ValueError, "Gaussian noise is not pure DP"),
        (lambda: zcdp.gaussian(key, [1.0], 1.0, sigma=-1.0), ValueError, "scale must be positive"),
        (lambda: zcdp.exponential(key, [1.0, 2.0], 1.0), ValueError, "exactly one of epsilon=, rho="),
        (lambda: zcdp.exponential(key, [1.0, 2.0], 1.0, epsilon=1.0, num=0), ValueError, "num must be at least 1"),
        (lambda: zcdp.cost("uniform", sensitivity=1.0, epsilon=1.0), ValueError, "unknown mechanism 'uniform'"),
        (lambda: zcdp.measure(key, small, ("a",), mechanism="exponential", rho=0.1), ValueError, "mechanism must be 'laplace' or 'gaussian'"),
        (lambda: zcdp.measure(key, small, ("a",), mechanism="gauss", rho=0.1), ValueError, "mechanism must be 'laplace' or 'gaussian'"),
        (lambda: zcdp.measure(key, small, ("a", "zz"), rho=0.1), ValueError, "attribute 'zz' is not in the domain"),
        (lambda: zcdp.measure(key, small, ("a",), query=np.ones((2, 3)), rho=0.1), ValueError, "3 columns but the marginal has 4 cells"),
        (lambda: zcdp.measure(key, small, ("a", "b"), query=(np.eye(4),), rho=0.1), ValueError, "one matrix per attribute"),
        (lambda: zcdp.measure(key, small.records, ("a",), rho=0.1), TypeError, "data must be a pgmjax.Dataset"),
        (lambda: zcdp.measure(key, small, ("a",), rho=0.1, scale=1.0), ValueError, "exactly one of rho=, scale="),
        (lambda: zcdp.measure(key, small, ("a",), epsilon=0.1), ValueError, "not epsilon="),
        (lambda: zcdp.measure_many(key, small, [], rho=0.1), ValueError, "no cliques"),
        (lambda: zcdp.measure_many(key, small, [("a",), ("b",)], epsilon=REST), ValueError, "not epsilon="),
        (lambda: pure.measure_many(key, small, [("a",), ("b",)], rho=REST), ValueError, "counts epsilon"),
        (lambda: zcdp.measure_many(key, small, [("a",), ("q",)], rho=0.1), ValueError, r"clique 1.*'q' is not in the domain"),
        (lambda: pure.epsilon_delta(1e-6), ValueError, "do not pass delta"),
        (lambda: zcdp.epsilon_delta(), ValueError, "pass delta="),
    ]
    for call, exc, match in bad:
        with pytest.raises(exc, match=match):
            call()
    assert pure.ledger == () and zcdp.ledger == ()


# --------------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------------


def test_ledger_entries_are_immutable_and_render(small):
    acc = Accountant(epsilon=1.0, delta=1e-6)
    acc.measure(jax.random.key(0), small, ("a",), rho=acc.budget / 2)
    acc.exponential(jax.random.key(1), [1.0, 2.0], 1.0, epsilon=0.1, target="select", num=3)
    entry = acc.ledger[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.cost = 0.0
    recs = acc.records()
    assert [r["mechanism"] for r in recs] == ["gaussian", "exponential"]
    assert recs[1]["count"] == 3 and recs[1]["cost"] == pytest.approx(3 * 0.01 / 8)
    assert recs[1]["scale"] == pytest.approx(2 * 1.0 / 0.1)  # Gumbel scale on the qualities
    df = acc.to_frame()
    assert isinstance(df, pd.DataFrame) and len(df) == 2 and df["cost"].sum() == pytest.approx(acc.spent)
    assert list(df.columns)[:3] == ["index", "mechanism", "target"]
    assert Accountant(epsilon=1.0).to_frame().shape == (0, len(df.columns))
    s = acc.summary()
    assert s["entries"] == 2 and s["currency"] == "rho" and s["delta"] == 1e-6
    assert s["spent"] + s["remaining"] == pytest.approx(s["budget"])
    assert "zcdp" in repr(acc)


def test_module_docstring_examples():
    globs = dict(vars(pv), np=np, jax=jax, Dataset=pj.Dataset)
    result = doctest.testmod(pv, extraglobs=globs, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 30 and result.failed == 0
