"""Floating-point-safe releases: exact discrete samplers, lattice releases, randomized response, no overspend."""

import math
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtr

import pgmjax as pj
import pgmjax.privacy.discrete_noise as dn
from pgmjax import privacy as pv
from pgmjax.privacy import REST, Accountant
from pgmjax.privacy.randomized_response import keep_probability, randomize_records

# --------------------------------------------------------------------------------------------------
# Mironov's attack: can an output rule out the neighbouring input?
# --------------------------------------------------------------------------------------------------

GRID = 2.0**-52


def _continuous_reachable(y, x, scale, family):
    """Whether ``y`` is an output of the old float sampler ``x + scale * F^-1(u)``, ``u = (k + 1/2) 2^-52``.

    The attacker inverts the noise to the uniform it needs and checks that this uniform is on the
    sampler's grid and maps back to exactly ``y`` (neighbouring grid points too, for the inverse's rounding).
    """
    z = (y - x) / scale
    if family == "laplace":
        u = np.where(z < 0, 0.5 * np.exp(z), 1.0 - 0.5 * np.exp(-z))
    else:
        u = ndtr(z)
    k0 = np.floor(u / GRID - 0.5)
    ok = np.zeros(y.shape, dtype=bool)
    for dk in range(-3, 4):
        uk = (k0 + dk + 0.5) * GRID
        if family == "laplace":
            zk = np.where(uk < 0.5, np.log(2.0 * uk), -np.log(2.0 * (1.0 - uk)))
        else:
            zk = stats.norm.ppf(uk)
        ok |= (x + scale * zk) == y
    return ok


def _lattice_reachable(y, gamma):
    """Every point of ``gamma * Z`` is an output of a lattice release from any input (the law has full support)."""
    return (y / gamma) == np.round(y / gamma)


@pytest.mark.parametrize("family, scale", [("laplace", 10.0), ("laplace", 1.0), ("gaussian", 10.0)])
def test_mironov_attack_rules_out_neighbours_of_float_noise_but_not_of_lattice_noise(family, scale):
    n, x = 4000, 3.0
    key = jax.random.key(0)
    # The old sampler: continuous noise in float. The attack has power: it rules out x + 1 often.
    z = pv.standard_laplace(key, n) if family == "laplace" else pv.standard_normal(key, n)
    y_old = x + scale * z
    assert _continuous_reachable(y_old, x, scale, family).all()  # the attack recognises true outputs
    ruled_out = ~_continuous_reachable(y_old, x + 1.0, scale, family)
    assert ruled_out.mean() > 0.15
    # The release pgmjax makes: every output is reachable from x and from x + 1.
    acc = Accountant(epsilon=1e9) if family == "laplace" else Accountant(rho=1e9)
    for integer in (True, False):
        values = np.full(n, x)
        if family == "laplace":
            y = acc.laplace(key, values, 1.0, scale=scale, integer=integer)
        else:
            y = acc.gaussian(key, values, 1.0, sigma=scale, integer=integer)
        gamma = 1.0 if integer else dn.lattice_spacing(scale, 1.0, n, integer=False)
        assert gamma == 1.0 or gamma < scale * 2**-9  # fine enough that the noise keeps its shape
        # Reachable from x and from x + 1: both round onto the same public lattice, and its law has full support.
        assert _lattice_reachable(y, gamma).all() and _lattice_reachable(y - (x + 1.0), gamma).all()


def test_measurements_carry_only_lattice_values(small_data):
    acc = Accountant(epsilon=10.0)
    m = acc.measure(jax.random.key(1), small_data, ("a", "b"), epsilon=1.0)
    assert np.array_equal(m.y, np.round(m.y))  # counts plus integer noise
    real = acc.measure(jax.random.key(2), small_data, ("a",), query=np.array([[0.5, 0.25, 1.0, 0.1]]), epsilon=1.0)
    gamma = dn.lattice_spacing(acc.ledger[-1].scale, 1.0, 1, integer=False)
    assert np.array_equal(real.y / gamma, np.round(real.y / gamma))
    assert acc.ledger[-1].sensitivity == 1.0 + gamma  # L1 sensitivity 1 plus one lattice step for the rounding


@pytest.fixture
def small_data():
    rng = np.random.default_rng(3)
    return pj.Dataset(rng.integers(0, [4, 3], size=(200, 2)), pj.Domain({"a": 4, "b": 3}))


# --------------------------------------------------------------------------------------------------
# The exact samplers
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.0, 0.4, 1.0, 2.7])
def test_bernoulli_exp_frequencies(gamma):
    n = 100_000
    hits = dn.bernoulli_exp(dn.generator(jax.random.key(5)), np.full(n, gamma)).sum()
    p = math.exp(-gamma)
    assert abs(hits - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1e-9


def test_bernoulli_exp_rejects_bad_exponents():
    with pytest.raises(ValueError, match="non-negative"):
        dn.bernoulli_exp(dn.generator(jax.random.key(0)), np.array([-1.0]))
    with pytest.raises(ValueError, match="finite"):
        dn.bernoulli_exp(dn.generator(jax.random.key(0)), np.array([np.inf]))


def _pmf_pvalue(draws, log_weight):
    z = np.arange(draws.min(), draws.max() + 1)
    p = np.exp(log_weight(z.astype(float)))
    p /= p.sum()
    counts = np.bincount(draws - draws.min(), minlength=z.size)
    keep = p * draws.size >= 5
    obs, exp = counts[keep], p[keep] * draws.size
    if (~keep).any():  # pool the tails
        obs, exp = np.r_[obs, counts[~keep].sum()], np.r_[exp, p[~keep].sum() * draws.size]
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


@pytest.mark.parametrize("scale", [0.3, 1.0, 3.5, 40.0])
def test_discrete_laplace_law(scale):
    z, b = dn.discrete_laplace(dn.generator(jax.random.key(6)), (100_000,), scale)
    assert scale <= b <= scale * (1 + 2**-20)
    assert _pmf_pvalue(z, lambda v: -np.abs(v) / b) > 1e-3
    assert z.var() == pytest.approx(dn.discrete_laplace_variance(b), rel=0.03)


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.5, 40.0])
def test_discrete_gaussian_law(sigma):
    z = dn.discrete_gaussian(dn.generator(jax.random.key(7)), (100_000,), sigma)
    assert _pmf_pvalue(z, lambda v: -(v**2) / (2 * sigma**2)) > 1e-3
    assert z.var() == pytest.approx(dn.discrete_gaussian_variance(sigma), rel=0.03)


def test_discrete_variances_against_sums():
    for b in (0.5, 2.0, 9.0):
        z = np.arange(-2000, 2001, dtype=float)
        w = np.exp(-np.abs(z) / b)
        assert dn.discrete_laplace_variance(b) == pytest.approx((w * z**2).sum() / w.sum(), rel=1e-12)
    assert dn.discrete_gaussian_variance(100.0) == 1e4


def test_exponential_choice_frequencies_and_exclusions():
    gaps = np.array([0.0, 0.5, 2.0, np.inf, 1.0])
    draws = dn.exponential_choice(dn.generator(jax.random.key(8)), gaps, 60_000)
    counts = np.bincount(draws, minlength=5)
    assert counts[3] == 0
    p = np.exp(-gaps[[0, 1, 2, 4]])
    assert stats.chisquare(counts[[0, 1, 2, 4]], 60_000 * p / p.sum()).pvalue > 1e-3


# --------------------------------------------------------------------------------------------------
# Randomized response
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps, k", [(1.0, 5), (0.1, 7), (4.0, 3), (0.7, 2)])
def test_randomized_response_law(eps, k):
    n = 100_000
    out = randomize_records(dn.generator(jax.random.key(9)), np.zeros((n, 1), int), [k], eps)[:, 0]
    counts = np.bincount(out, minlength=k)
    keep = keep_probability(eps, k)
    expected = np.r_[keep, np.full(k - 1, (1 - keep) / (k - 1))] * n
    assert stats.chisquare(counts, expected).pvalue > 1e-3


def test_randomized_response_whole_rows_on_a_huge_domain():
    sizes = [1000] * 8  # 1e24 rows: never enumerated
    x = np.zeros((5000, 8), int)
    out = randomize_records(dn.generator(jax.random.key(10)), x, sizes, 60.0)
    kept = np.all(out == 0, axis=1).mean()
    assert kept == pytest.approx(keep_probability(60.0, 1000**8), abs=0.02)
    assert out.max() < 1000 and out.min() >= 0


def test_accountant_randomized_response_ledger_and_refusals(small_data):
    acc = Accountant(epsilon=1.0)
    with pytest.raises(ValueError, match="reveals the record count"):
        acc.randomized_response(jax.random.key(0), small_data, epsilon=1.0)
    assert acc.ledger == ()
    out = acc.randomized_response(jax.random.key(0), small_data, epsilon=1.0, public_count=True, per_attribute=True)
    assert len(out) == len(small_data) and out.domain == small_data.domain
    e = acc.ledger[0]
    assert (e.mechanism, e.epsilon, e.cost) == ("randomized_response", 1.0, 1.0) and acc.spent == 1.0
    bounded = Accountant(rho=0.5, bounded=True)
    bounded.randomized_response(jax.random.key(1), small_data, rho=REST)
    assert bounded.ledger[0].epsilon == pytest.approx(1.0) and bounded.spent == 0.5


# --------------------------------------------------------------------------------------------------
# Budgets: never exceeded, even by float round-off of splits
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [3, 7, 10, 49, 97])
@pytest.mark.parametrize("budget", [1.0, 0.3, 1e-4, 1e6])
def test_equal_splits_never_overspend(k, budget, small_data):
    acc = Accountant(epsilon=budget)
    for i in range(k):
        acc.measure(jax.random.key(i), small_data, ("a",), epsilon=budget / k)
    assert math.fsum(e.cost for e in acc.ledger) <= budget and acc.spent <= budget
    assert acc.spent == pytest.approx(budget, rel=1e-12)
    with pytest.raises(pv.PrivacyBudgetExceeded):
        acc.measure(jax.random.key(99), small_data, ("a",), epsilon=budget * 1e-6)


def test_same_key_same_release_with_and_without_x64():
    """Releases, PrivBayes' network and sampling, and MST's decompression depend on the key alone, whatever
    jax_enable_x64 says (the model fits themselves run in float32 either way)."""
    code = textwrap.dedent(
        """
        import sys, jax, numpy as np
        jax.config.update("jax_enable_x64", sys.argv[1] == "1")
        import pgmjax as pj
        from pgmjax.privacy import Accountant
        data = pj.Dataset(np.random.default_rng(0).integers(0, 3, size=(100, 3)), {"a": 3, "b": 3, "c": 3})
        acc = Accountant(epsilon=3.0, bounded=True)
        m = acc.measure(jax.random.key(1), data, ("a", "b"), epsilon=1.0)
        i = acc.exponential(jax.random.key(2), [0.0, 1.0, 3.0], 1.0, epsilon=0.05, num=20)
        rr = acc.randomized_response(jax.random.key(3), data, epsilon=1.0)
        print(m.y.tolist(), list(map(int, i)), rr.records.sum(axis=0).tolist())
        pb = pj.mechanisms.privbayes(data, 1.0, key=jax.random.key(4), engine_iters=5)
        print(pb.info.network, pb.original.records.sum(axis=0).tolist())
        wide = pj.Dataset(np.random.default_rng(1).integers(0, 40, size=(60, 2)), {"a": 40, "b": 40})
        ms = pj.mechanisms.mst(wide, 0.5, key=jax.random.key(5), select_iters=5, engine_iters=5)
        print(ms.info.mapping, ms.synthetic.records.sum(axis=0).tolist())
        """
    )
    outs = [subprocess.run([sys.executable, "-c", code, flag], capture_output=True, text=True, check=True).stdout for flag in "01"]
    assert outs[0] == outs[1] and len(outs[0]) > 20
