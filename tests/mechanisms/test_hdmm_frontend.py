"""HDMM front-end (pgmjax.mechanisms.matrix_mechanism.frontend; McKenna, Miklau, Hay & Machanavajjhala, VLDB 2018, and HDMM+LLS /
HDMM+PGM of McKenna, Sheldon & Miklau, ICML 2019, Section 6): exact ledger, noise calibration,
OPT_+ weights, closed-form error of the identity strategy, HDMM+LLS / HDMM+PGM / global least squares on the
same noise, and input checks.

Every run shares one small dataset and workload, so the compiled programs (strategy fits, engine) are reused.
"""

import importlib
import math

import jax
import numpy as np
import pytest
from conftest import chain_dataset

import pgmjax as pj
from pgmjax.mechanisms import matrix_mechanism as H
from pgmjax.mechanisms.original_estimates import CliqueTables

fe = importlib.import_module("pgmjax.mechanisms.matrix_mechanism.frontend")  # pgmjax.mechanisms.hdmm is the function
hdmm, hdmm_strategy, union_workload = fe.hdmm, fe.hdmm_strategy, fe.union_workload

SIZES = {"a": 16, "b": 3, "c": 4, "d": 2}
CLIQUES = [("a", "b"), ("b", "c"), ("a", "c", "d")]


@pytest.fixture(scope="module")
def data():
    """4 attributes, 2000 records, each attribute noisily copying the previous one (a chain)."""
    return chain_dataset(SIZES)


def workload(domain):
    return pj.Workload.benchmark(domain, CLIQUES, numeric=["a"])  # Prefix on "a": p-Identity in the strategy


def marginals_strategy():
    """An OPT_M-shaped strategy (weights on a few marginals), prebuilt so that no OPT_M fit is compiled here."""
    attrs = tuple(SIZES)
    theta = np.zeros(2 ** len(attrs))
    for clique, t in [(("a", "b"), 0.3), (("a", "c", "d"), 0.4), (("b", "c", "d"), 0.2), (("a",), 0.1)]:
        theta[sum(1 << attrs.index(x) for x in clique)] = t
    return H.MarginalsStrategy(attrs, tuple(SIZES.values()), theta)


_RUNS = {}
_STRATEGY = {}


def opt_strategy(domain):
    """The OPT_+ strategy of the test workload, optimised once (data-independent)."""
    if "S" not in _STRATEGY:
        _STRATEGY["S"] = hdmm_strategy(workload(domain), jax.random.key(3), restarts=4)
    return _STRATEGY["S"]


def run(data, seed=0, **kw):
    """One cached run per argument set; the OPT_+ strategy is optimised once and passed prebuilt."""
    key = (seed, tuple(sorted((k, repr(v)) for k, v in kw.items())))
    if key not in _RUNS:
        kw = {"epsilon": 1.0, "workload": workload(data.domain), "restarts": 4, "engine_iters": 200} | kw
        if kw.get("strategy") == "marginals":
            kw["strategy"] = marginals_strategy()
        elif "strategy" not in kw and kw.get("noise", "laplace") == "laplace":
            kw["strategy"] = opt_strategy(data.domain)[0] if kw.pop("weights", "opt") == "opt" else _equal(data.domain)
        eps = kw.pop("epsilon")
        _RUNS[key] = hdmm(data, eps, key=jax.random.key(seed), **kw)
    return _RUNS[key]


CONFIGS = {
    "laplace": {},
    "laplace-bounded": {"bounded": True},
    "gaussian": {"noise": "gaussian", "delta": 1e-6},
    "gaussian-bounded": {"noise": "gaussian", "delta": 1e-6, "bounded": True},
    "marginals": {"strategy": "marginals"},
    "equal": {"weights": "equal"},
}


def _equal(domain):
    S = opt_strategy(domain)[0]
    return H.UnionStrategy([H.KronStrategy(t.clique, t.factors, 1 / len(S.terms)) for t in S.terms])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ledger_sums_exactly_to_the_budget_with_one_noise_scale(data, name):
    cfg = CONFIGS[name]
    res = run(data, **cfg)
    acc = res.accountant
    gaussian = cfg.get("noise") == "gaussian"
    bounded = cfg.get("bounded", False)
    budget = pj.privacy.cdp_rho(1.0, 1e-6) if gaussian else 1.0
    assert acc.budget == budget
    assert acc.spent == acc.budget  # exactly, not approximately
    assert len(res.ledger) == len(res.measurements) == res.info.terms
    assert all(e.mechanism == ("gaussian" if gaussian else "laplace") for e in res.ledger)
    # every row of the stacked strategy has the same noise: b = c ||A||_1 / eps, sigma = c ||A||_{1->2} / sqrt(2 rho)
    S = res.info.strategy
    norm = S.sensitivity("gaussian" if gaussian else "laplace")
    c = (math.sqrt(2.0) if gaussian else 2.0) if bounded else 1.0
    scale = c * norm / (math.sqrt(2 * budget) if gaussian else 1.0)
    assert res.info.sensitivity == pytest.approx(c * norm, rel=1e-12)
    assert res.info.noise_scale == pytest.approx(scale, rel=1e-12)
    assert res.info.sensitivity_exact
    if isinstance(S, H.MarginalsStrategy):
        return  # OPT_M releases marginal a with scale b / theta_a: see the next test
    for e, m in zip(res.ledger, res.measurements):
        # Real-valued strategy rows are released on a fine lattice; the ledger charges what rounding adds
        # to the sensitivity (at most 2^-10 of it), so each term's scale is a hair above the common one.
        assert scale <= e.scale <= scale * (1 + 2**-10) and e.sensitivity <= c * norm * (1 + 2**-10)
        np.testing.assert_allclose(m.row_stddev(), res.info.noise_std, rtol=2**-9)
        assert m.kind == "kron" and e.query.startswith("kron")


def test_marginals_strategy_scales_each_marginal_by_its_weight(data):
    res = run(data, strategy="marginals")
    S = res.info.strategy
    assert isinstance(S, H.MarginalsStrategy) and S.sensitivity() == pytest.approx(1.0)
    assert res.info.sensitivity_exact and res.info.strategy_info == {"template": "given"}
    b = res.info.noise_scale
    thetas = dict(S.marginals())
    assert [m.clique for m in res.measurements] == list(thetas)
    for e, m in zip(res.ledger, res.measurements):
        # y_a = theta_a mu_a + Lap(b)  <=>  mu_a + Lap(b / theta_a): budget share eps theta_a / sum(theta)
        assert e.scale == pytest.approx(b / thetas[m.clique], rel=1e-9)
        assert e.epsilon == pytest.approx(thetas[m.clique], rel=1e-9)


def test_opt_plus_weights_and_strategy_record(data):
    w = workload(data.domain)
    S, info = opt_strategy(data.domain)
    e = np.array(info["term_errors"])
    alpha = S.weights
    assert alpha.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(alpha / e ** (1 / 3), (alpha / e ** (1 / 3))[0], rtol=1e-12)  # alpha ∝ e^(1/3)
    # the union bound (sum_j e_j^(1/3))^3 is the loss of the OPT_+ weights
    assert info["loss"] == pytest.approx(np.sum(e ** (1 / 3)) ** 3, rel=1e-9)
    by_clique = {t.clique: t for t in S.terms}
    assert set(by_clique) == set(CLIQUES)
    for t in S.terms:
        for a, f in zip(t.clique, t.factors):
            np.testing.assert_allclose(np.abs(f).sum(axis=0), 1.0, rtol=1e-12)  # unit column L1 norms
            if a == "a":  # Prefix: p-Identity [I; Theta] D with p = 16 // 16 = 1 row, beats the identity
                assert f.shape == (17, 16)
                top = f[:16]
                np.testing.assert_array_equal(top, np.diag(np.diag(top)))  # the identity block stays diagonal
                assert np.all(f[16] > 0)
            else:
                np.testing.assert_array_equal(f, np.eye(SIZES[a]))
    # the optimised strategy beats the identity strategy, and equal weights lose to OPT_+ weights
    S_id, info_id = hdmm_strategy(w, jax.random.key(3), strategy="identity")
    S_eq, info_eq = hdmm_strategy(w, jax.random.key(3), weights="equal", restarts=4)
    assert info["loss"] < info_id["loss"]
    assert info["loss"] <= info_eq["loss"]
    np.testing.assert_allclose(S_eq.weights, 1 / 3)
    W = union_workload(w)
    assert H.expected_error(W, S) == pytest.approx(info["loss"])
    # the result records the strategy
    res = run(data)
    rec = res.info.strategy_record
    assert rec["kind"] == "union" and rec["cliques"] == [t.clique for t in res.info.strategy.terms]
    np.testing.assert_allclose(rec["weights"], res.info.strategy.weights)


@pytest.mark.parametrize("bounded", [False, True])
def test_identity_strategy_closed_form_error(data, bounded):
    n, eps = SIZES["a"], 0.5
    w = pj.Workload.benchmark(data.domain, [("a",)], numeric=["a"])
    res = hdmm(data, eps, key=jax.random.key(0), workload=w, strategy="identity", bounded=bounded, engine_iters=0, synthetic=False)
    factor = 4.0 if bounded else 1.0  # replace-one doubles the L1 sensitivity
    # the matrix mechanism's error (VLDB 2018): Err(Prefix(n), I) = (2 / eps^2) ||Prefix(n)||_F^2 = (2 / eps^2) n (n + 1) / 2
    assert res.info.expected_error == pytest.approx(factor * 2 / eps**2 * n * (n + 1) / 2, rel=1e-12)
    assert res.info.noise_scale == pytest.approx((2.0 if bounded else 1.0) / eps)
    A = np.eye(n)
    assert res.info.expected_error == pytest.approx(factor * H.dense_expected_error(H.prefix(n), A, eps=eps), rel=1e-12)
    assert res.measurements[0].kind == "kron" and len(res.ledger) == 1


def test_identity_strategy_monte_carlo_matches_expected_error():
    """Average squared LLS error of the workload answers over independent runs vs the closed form."""
    dom = pj.Domain({"a": 16, "e": 32})
    small = pj.Dataset(np.random.default_rng(1).integers(0, [16, 32], (500, 2)), dom)
    w = pj.Workload.benchmark(dom, [("a", "e")], numeric=["a"])
    truth = w.answer(small)[0]
    errs = []
    for seed in range(40):
        res = hdmm(small, 1.0, key=jax.random.key(seed), workload=w, strategy="identity", engine_iters=0, synthetic=False, max_table_cells=0)
        errs.append(np.sum((w.answer(res.original)[0] - truth) ** 2))
    expected = 2.0 * (16 * 17 / 2) * 32  # (2 / eps^2) trace(W^T W), W = Prefix(16) (x) I_32
    assert res.info.expected_error == pytest.approx(expected)
    # one run's squared error has relative std ~0.22 here, so the 40-run mean ~3.5%: allow 5 standard errors
    assert np.mean(errs) == pytest.approx(expected, rel=0.18)


@pytest.mark.parametrize("strategy", ["opt+", "marginals"])
def test_huge_epsilon_every_arm_recovers_the_workload(data, strategy):
    w = workload(data.domain)
    res = run(data, epsilon=1e6, strategy=strategy, engine_iters=1000)
    err = {name: pj.metrics.workload_error(w, data, arm) for name, arm in res.arms().items()}
    assert err["original"] < 1e-6  # least squares of (almost) exact answers
    assert err["pgm"] < 1e-3  # float32 engine, 1000 iterations
    g = res.info.global_least_squares
    assert g is not None and pj.metrics.workload_error(w, data, g) < 1e-6
    # the engine reproduces the measured (strategy) answers themselves
    for m in res.measurements:
        fit = m.answer(res.model.marginal(m.clique))
        np.testing.assert_allclose(fit, m.answer(data.marginal(m.clique)), atol=1e-3 * len(data))


def test_both_arms_end_to_end_on_the_same_noise(data):
    w = workload(data.domain)
    res = run(data, engine_iters=500)
    assert res.mechanism == "hdmm"
    assert isinstance(res.original, CliqueTables) and res.original_error is None
    assert set(res.original.tables) == set(CLIQUES)
    # LLS: each clique's table is exactly (x)_i A_i^+ y_i of its own measurement
    for m in res.measurements:
        own = np.asarray(H.least_squares_marginal(data.domain, [m], m.clique))
        np.testing.assert_allclose(res.original.tables[m.clique], own, rtol=1e-12, atol=1e-9)
    err = {name: pj.metrics.workload_error(w, data, arm) for name, arm in res.arms().items()}
    err_script = {name: pj.metrics.workload_error(w, data, arm, scale="script") for name, arm in res.arms().items()}
    assert all(0 < e < 1 for e in err.values())
    assert err_script["pgm"] == pytest.approx(2 * err["pgm"])
    assert err["pgm"] <= err["original"]  # the engine's consistency never hurts much on a chain; here it helps
    # the global least-squares arm on the same y (the 384-cell table fits)
    g = res.info.global_least_squares
    assert res.info.global_table_cells == 16 * 3 * 4 * 2 and res.info.global_least_squares_error is None
    assert 0 < pj.metrics.workload_error(w, data, g) < 1
    # synthetic data from the model, the total estimated (add/remove neighbours)
    assert len(res.synthetic) == round(res.model.total)
    assert res.info.total == pytest.approx(len(data), rel=0.1)
    assert res.info.expected_error > 0 and res.info.workload_rows == 16 * 3 + 3 * 4 + 16 * 4 * 2
    for k in ("strategy", "measure", "lls", "pgm", "global", "total"):
        assert res.info.seconds[k] >= 0


def test_bounded_gives_the_engine_the_true_total(data):
    res = run(data, bounded=True)
    assert res.model.total == len(data) and res.info.total == len(data)


def test_global_least_squares_refused_before_allocating(data, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("global_least_squares must not be called")

    monkeypatch.setattr(H, "global_least_squares", boom)
    res = hdmm(data, 1.0, key=jax.random.key(0), workload=workload(data.domain), max_table_cells=383, engine_iters=10, restarts=4)
    assert res.info.global_least_squares is None
    msg = res.info.global_least_squares_error
    assert "384 cells" in msg and "max_table_cells=383" in msg


def test_reproducible_from_the_key(data):
    """The same key gives the same strategy (its restarts), noise, estimates and synthetic data."""
    w = workload(data.domain)
    a, b = (hdmm(data, 1.0, key=jax.random.key(5), workload=w, restarts=4, engine_iters=50) for _ in range(2))
    assert a.info.strategy_info["template"].startswith("OPT_kron")
    for ta, tb in zip(a.info.strategy.terms, b.info.strategy.terms):
        assert ta.weight == tb.weight and all(np.array_equal(x, y) for x, y in zip(ta.factors, tb.factors))
    for ma, mb in zip(a.measurements, b.measurements):
        np.testing.assert_array_equal(ma.y, mb.y)
    for c in CLIQUES:
        np.testing.assert_array_equal(a.original.marginal(c), b.original.marginal(c))
        np.testing.assert_array_equal(a.model.marginal(c), b.model.marginal(c))
    np.testing.assert_array_equal(a.synthetic.records, b.synthetic.records)
    c = hdmm(data, 1.0, key=jax.random.key(6), workload=w, strategy=a.info.strategy, engine_iters=50)
    assert not np.array_equal(a.measurements[0].y, c.measurements[0].y)


def test_prebuilt_strategy_is_used_as_given(data):
    w = workload(data.domain)
    S, _ = hdmm_strategy(w, jax.random.key(9), restarts=4)
    res = hdmm(data, 1.0, key=jax.random.key(0), workload=w, strategy=S, engine_iters=10)
    assert res.info.strategy is S and res.info.strategy_info == {"template": "given"}
    assert [m.clique for m in res.measurements] == [t.clique for t in S.terms]
    for m, t in zip(res.measurements, S.terms):
        np.testing.assert_allclose(m.query[0], t.weight * t.factors[0])


def test_default_workload_is_every_two_way_marginal(data):
    res = hdmm(data, 1.0, key=jax.random.key(0), engine_iters=0, restarts=4, synthetic=False)
    assert res.info.strategy_info["template"].startswith("OPT_kron")
    assert all(np.array_equal(f, np.eye(f.shape[1])) for t in res.info.strategy.terms for f in t.factors)  # marginals: identity
    assert sorted(res.original.tables) == sorted(pj.Workload.all_kway(data.domain, 2).cliques)
    assert res.accountant.spent == 1.0


def _bad_cases(domain):
    w = workload(domain)
    unsupported = H.UnionStrategy([H.KronStrategy(("a", "b"), (np.eye(16), np.eye(3)))])  # misses b-c, a-c-d
    return [
        ({"epsilon": 0.0}, ValueError, "epsilon must be positive"),
        ({"epsilon": float("nan")}, ValueError, "epsilon must be a number"),
        ({"epsilon": "1"}, TypeError, "epsilon must be a real number"),
        ({"key": 0}, TypeError, "key must be one jax.random key"),
        ({"noise": "cauchy"}, ValueError, "unknown noise"),
        ({"noise": "gaussian"}, ValueError, r"Gaussian noise gives \(epsilon, delta\)-DP"),
        ({"noise": "gaussian", "delta": 1.5}, ValueError, "delta must be in"),
        ({"delta": 1e-6}, ValueError, "pure epsilon-DP .* with Laplace noise; pass noise='gaussian'"),
        ({"bounded": "yes"}, TypeError, "bounded must be True or False"),
        ({"strategy": "best"}, ValueError, "unknown strategy"),
        ({"strategy": 3}, TypeError, "strategy must be one of"),
        ({"strategy": unsupported}, ValueError, "does not support the workload"),
        ({"weights": "uniform"}, ValueError, "unknown weights"),
        ({"restarts": 0}, ValueError, "restarts must be at least 1"),
        ({"engine_iters": -1}, ValueError, "engine_iters must be at least 0"),
        ({"engine_iters": 1.5}, TypeError, "engine_iters must be an integer"),
        ({"fit_options": {"method": "adam"}}, TypeError, "fit_options must be a pgmjax.FitOptions"),
        ({"fit_options": pj.FitOptions(method=pj.MirrorDescent())}, ValueError, "unknown fit_options method"),
        ({"max_table_cells": -1}, ValueError, "max_table_cells must be at least 0"),
        ({"workload": [("a", "z")]}, ValueError, "z"),
        ({"workload": "ab"}, TypeError, "workload must be"),
        ({"original": 1}, TypeError, "original must be True or False"),
    ], w


def test_bad_input_raises_before_anything_runs(data, monkeypatch):
    cases, w = _bad_cases(data.domain)

    def no_private_reads(*a, **k):
        raise AssertionError("the accountant was reached")

    monkeypatch.setattr(pj.privacy.Accountant, "measure", no_private_reads)
    monkeypatch.setattr(fe, "hdmm_strategy", no_private_reads)
    for kwargs, error, match in cases:
        kw = {"epsilon": 1.0, "key": jax.random.key(0), "workload": w} | kwargs
        eps, key = kw.pop("epsilon"), kw.pop("key")
        with pytest.raises(error, match=match):
            hdmm(data, eps, key=key, **kw)
    with pytest.raises(TypeError, match="data must be a pgmjax.Dataset"):
        hdmm(data.records, 1.0, key=jax.random.key(0))


def test_marginals_strategy_refuses_many_attributes():
    dom = pj.Domain({f"x{i}": 2 for i in range(17)})
    data = pj.Dataset(np.zeros((3, 17), dtype=int), dom)
    w = pj.Workload.marginals(dom, [tuple(dom.attributes)])
    with pytest.raises(ValueError, match="at most 16"):
        hdmm(data, 1.0, key=jax.random.key(0), workload=w, strategy="marginals")
    with pytest.raises(ValueError, match="at most 16"):
        hdmm_strategy(w, jax.random.key(0), strategy="marginals")


def test_signed_prebuilt_strategy_keeps_one_noise_scale(data):
    """Under replace-one Gaussian noise a factor with negatively correlated columns has L2 sensitivity
    2 ||.||_{1->2} (not sqrt 2): the budget shares follow the accountant's sensitivities, so every row still
    gets the same sigma and the ledger still sums to the budget."""
    signed = np.array([[1.0, 0.0], [-1.0, 1.0]])  # columns (1, -1) and (0, 1): inner product -1
    S = H.UnionStrategy([
        H.KronStrategy(("a", "b"), (np.eye(16), np.eye(3)), 0.5),
        H.KronStrategy(("d",), (signed,), 0.5),
    ])
    w = pj.Workload.marginals(data.domain, [("a", "b"), ("d",)])
    res = hdmm(data, 1.0, key=jax.random.key(0), workload=w, strategy=S, noise="gaussian", delta=1e-6, bounded=True,
               engine_iters=0, synthetic=False)
    acc = res.accountant
    assert acc.spent == acc.budget
    # each term's sensitivity plus what rounding to its lattice adds (at most 2^-10 of it)
    assert [e.sensitivity for e in res.ledger] == pytest.approx([0.5 * math.sqrt(2), 0.5 * 2 * math.sqrt(2)], rel=2**-10)
    sigma = math.hypot(0.5 * math.sqrt(2), 0.5 * 2 * math.sqrt(2)) / math.sqrt(2 * acc.budget)
    assert [e.scale for e in res.ledger] == pytest.approx([sigma, sigma], rel=2**-10)  # plus the lattice's share
    assert res.info.noise_scale == pytest.approx(sigma) and not res.info.sensitivity_exact
