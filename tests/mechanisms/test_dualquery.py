"""DualQuery (Gaboardi, Gallego Arias, Hsu, Roth & Wu, ICML 2014, Algorithm 1) and DualQuery+PGM (McKenna, Sheldon &
Miklau, ICML 2019): pgmjax.mechanisms.dual_query.

Brute-force references: enumeration of every record of small domains (best response), central finite
differences and the closed-form gradient ``eta sum_t (t - 1) (s p_t(a) - h_t)`` of the transcript's likelihood.
Float64 (tests/conftest.py enables x64).
"""

import importlib
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import pgmjax as pj
DQ = importlib.import_module("pgmjax.mechanisms.dual_query.front_end")  # the code; pgmjax.mechanisms.dualquery is the function
from pgmjax.privacy import Accountant, dualquery_epsilon

ADULT_N = 48842


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------


def _small_data(n=2000, seed=0):
    """5 correlated attributes: structure a good estimator can find and a uniform model cannot."""
    rng = np.random.default_rng(seed)
    dom = pj.Domain({"a": 6, "b": 3, "c": 4, "d": 2, "e": 5})
    a = rng.integers(0, 6, n)
    b = (a // 2 + (rng.random(n) < 0.2)) % 3
    c = (a + (rng.random(n) < 0.3)) % 4
    d = (c > 1).astype(int) ^ (rng.random(n) < 0.1)
    e = np.minimum(rng.geometric(0.5, n) - 1, 4)
    return pj.Dataset(np.stack([a, b, c, d, e], 1), dom)


def _small_workload(dom):
    return pj.Workload.benchmark(dom, [("a", "b"), ("a", "c"), ("c", "d"), ("b", "e")], numeric=["a", "e"])


def _all_records(dom):
    return np.array(list(itertools.product(*[range(n) for n in dom.shape])))


def _factor_value(factors, dom, x):
    return sum(t[tuple(x[dom.index(a)] for a in c)] for c, t in factors)


# ----------------------------------------------------------------------------------------------------------
# parameters and privacy
# ----------------------------------------------------------------------------------------------------------


def test_plan_reproduces_the_hand_computed_anchors():
    b2 = DQ.dualquery_plan(1.0, 1e-3, records=ADULT_N, eta=2.0, samples=50)
    assert b2["rounds"] == 58
    assert b2["epsilon_at_eta"] == pytest.approx(0.98854, abs=5e-6)
    assert dualquery_epsilon(59, eta=2.0, samples=50, records=ADULT_N, delta=1e-3) > 1.0
    het = DQ.dualquery_plan(1.0, 1e-3, records=ADULT_N, eta=2.0, samples=50, bound="heterogeneous")
    assert het["rounds"] == 83
    assert het["epsilon_at_eta"] == pytest.approx(0.99414, abs=5e-6)
    assert dualquery_epsilon(84, eta=2.0, samples=50, records=ADULT_N, delta=1e-3, form="heterogeneous") > 1.0
    # pure DP at T = 58 would be 6.77 (eps = eta s T (T - 1) / N): b2 is the smaller bound here
    assert dualquery_epsilon(58, eta=2.0, samples=50, records=ADULT_N, form="pure") == pytest.approx(6.77, abs=5e-3)
    for plan, form in ((b2, "b2"), (het, "heterogeneous")):
        # eta is raised just enough to spend the whole budget: the largest float with cost <= 1
        assert plan["eta_used"] > 2.0
        assert plan["epsilon"] <= 1.0 and plan["epsilon"] == pytest.approx(1.0, rel=1e-13)
        assert plan["epsilon"] == pytest.approx(
            dualquery_epsilon(plan["rounds"], eta=plan["eta_used"], samples=50, records=ADULT_N, delta=1e-3, form=form), rel=1e-13
        )
        up = math.nextafter(plan["eta_used"], math.inf)
        assert DQ._ledger_total(plan["rounds"], up, 50, ADULT_N, 1e-3, form) > 1.0


@pytest.mark.parametrize("bound", ["b2", "heterogeneous"])
def test_ledger_of_the_draws_sums_exactly_to_the_budget(bound):
    """Record the Adult run's draws as dualquery does: the accountant's total is the budget."""
    plan = DQ.dualquery_plan(1.0, 1e-3, records=ADULT_N, bound=bound)
    acc = Accountant(epsilon=1.0, delta=1e-3, bounded=True, composition=DQ._BOUNDS[bound])
    T, eta = plan["rounds"], plan["eta_used"]
    for t in range(2, T + 1):  # qualities do not matter for the cost
        acc.exponential(jax.random.key(t), np.zeros(4), sensitivity=(t - 1) / ADULT_N, epsilon=2 * eta * (t - 1) / ADULT_N, num=50)
    assert acc.spent == plan["epsilon"]
    assert acc.spent <= 1.0 and acc.spent == pytest.approx(1.0, rel=1e-13)
    # one round more would overspend
    with pytest.raises(pj.privacy.PrivacyBudgetExceeded):
        acc.exponential(jax.random.key(0), np.zeros(4), sensitivity=T / ADULT_N, epsilon=2 * eta * T / ADULT_N, num=50)


def test_plan_with_given_rounds():
    p = DQ.dualquery_plan(1.0, 1e-3, records=ADULT_N, rounds=20)
    assert p["rounds"] == 20 and p["eta_used"] > 2.0
    assert p["epsilon"] == pytest.approx(1.0, rel=1e-13)
    with pytest.raises(ValueError, match="rounds=200 .* cost epsilon"):
        DQ.dualquery_plan(1.0, 1e-3, records=ADULT_N, rounds=200)
    with pytest.raises(ValueError, match="rounds must be an integer >= 2"):
        DQ.dualquery_plan(1.0, 1e-3, records=ADULT_N, rounds=1)
    with pytest.raises(ValueError, match="even 2 rounds cost"):
        DQ.dualquery_plan(1e-3, 1e-3, records=100, eta=2.0)


# ----------------------------------------------------------------------------------------------------------
# best response: max-sum variable elimination
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_max_sum_ve_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    dom = pj.Domain({"a": 3, "b": 2, "c": 4, "d": 2, "e": 3, "f": 2})
    factors = []
    for _ in range(rng.integers(3, 8)):
        k = rng.integers(1, 4)
        clique = tuple(rng.choice(dom.attributes, k, replace=False))
        # integer tables make ties common; real tables make a unique maximiser
        table = rng.integers(-2, 3, dom.shape_of(clique)).astype(float) if seed % 2 else rng.normal(size=dom.shape_of(clique))
        factors.append((clique, table))
    values = np.array([_factor_value(factors, dom, x) for x in _all_records(dom)])
    best = values.max()
    x, v = DQ.max_sum_ve(factors, dom)
    assert v == pytest.approx(best, abs=1e-12)
    assert _factor_value(factors, dom, x) == pytest.approx(best, abs=1e-12)
    found = set()
    for i in range(20):
        u = np.random.default_rng(100 + i).random(len(dom))
        x, v = DQ.max_sum_ve(factors, dom, uniforms=u)
        assert v == pytest.approx(best, abs=1e-12)
        assert _factor_value(factors, dom, x) == pytest.approx(best, abs=1e-12)
        found.add(tuple(x))
    maximisers = int(np.sum(values >= best - 1e-9))
    # random tie-breaking reaches several maximisers when there are several (attribute "f" may be free too)
    if maximisers > 1:
        assert len(found) > 1
    else:
        assert len(found) == 1


def test_best_response_maximises_satisfied_sampled_queries():
    data = _small_data(50)
    dom = data.domain
    w = _small_workload(dom)
    queries = DQ.QueryBlocks(w, dom)
    records = _all_records(dom)
    sat = queries.satisfied(records)  # (|X|, R)
    sat = np.concatenate([sat, 1 - sat], axis=1)
    # brute-force check of satisfied(): q_r(x) is the Kronecker row's entry at x's cell
    for r_block in queries.blocks:
        dense = np.ones((1, 1))
        for c in r_block.cols:
            dense = np.kron(dense, c)
        cells = np.ravel_multi_index(tuple(records[:, dom.index(a)] for a in r_block.clique), dom.shape_of(r_block.clique))
        np.testing.assert_array_equal(sat[:, r_block.offset : r_block.offset + r_block.rows], dense[:, cells].T)
    # row_values: the same entries for any subset of rows (the loss builds its linear term from them)
    some = np.random.default_rng(2).choice(queries.rows, 17, replace=False)
    np.testing.assert_array_equal(queries.row_values(some, records), sat[:, some])
    rng = np.random.default_rng(3)
    for _ in range(5):
        hist = np.bincount(rng.integers(0, queries.size, 30), minlength=queries.size).astype(float)
        x, value = queries.best_response(hist, rng.random(len(dom)))
        brute = sat @ hist
        assert value == pytest.approx(brute.max(), abs=1e-9)
        xi = np.flatnonzero((records == x).all(axis=1))[0]
        assert brute[xi] == pytest.approx(brute.max(), abs=1e-9)


# ----------------------------------------------------------------------------------------------------------
# the likelihood
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def transcript():
    data = _small_data(300, seed=1)
    w = _small_workload(data.domain)
    queries = DQ.QueryBlocks(w, data.domain)
    a = queries.answers(data) / len(data)
    tr = DQ.simulate(w, a, key=jax.random.key(7), eta=1.0, samples=20, rounds=12)
    # the same transcript with a public total of N, as dualquery builds it
    return data, w, DQ.DualQueryTranscript(tr.queries, tr.draws, tr.records, tr.eta, tr.samples, len(data))


def test_nll_gradient_matches_closed_form_and_finite_differences(transcript):
    _, _, tr = transcript
    rng = np.random.default_rng(0)
    a = rng.random(tr.size)
    nll = jax.jit(tr.nll)
    auto = np.asarray(jax.jit(jax.grad(tr.nll))(jnp.asarray(a)))
    closed = tr.nll_grad(a)
    np.testing.assert_allclose(auto, closed, rtol=1e-10, atol=1e-9)
    assert np.abs(closed).max() > 1.0  # not a trivial transcript
    h = 1e-5
    for j in rng.choice(tr.size, 8, replace=False):
        e = np.zeros(tr.size)
        e[j] = h
        fd = (float(nll(jnp.asarray(a + e))) - float(nll(jnp.asarray(a - e)))) / (2 * h)
        assert fd == pytest.approx(closed[j], rel=1e-6, abs=1e-6)
    # NLL is the negative log-probability of the ordered draws under p_t(a)
    p = tr.probabilities(a)
    direct = -sum(np.log(p[t, tr.draws[t]]).sum() for t in range(tr.rounds))
    assert float(tr.nll(jnp.asarray(a))) == pytest.approx(direct, rel=1e-12)


def test_marginal_loss_and_its_gradient_through_the_marginals(transcript):
    data, w, tr = transcript
    rng = np.random.default_rng(1)
    cliques = list(dict.fromkeys(w.cliques))
    mu = {c: jnp.asarray(rng.random(data.domain.shape_of(c)) * 30) for c in cliques}
    loss = jax.jit(tr.loss())
    value = float(loss(mu))
    assert value == pytest.approx(float(tr.nll(tr.answers(mu))), rel=1e-12)
    grads = jax.grad(loss)(mu)
    # chain rule with the closed form: dL/dmu_C = W_C^T (g_rows - g_negations) / N
    g = tr.nll_grad(np.asarray(tr.answers(mu)))
    R = tr.queries.rows
    gr = (g[:R] - g[R:]) / tr.total
    expect = {c: np.zeros(data.domain.shape_of(c)) for c in cliques}
    for b in tr.queries.blocks:
        expect[b.clique] += DQ.kron_np(gr[b.offset : b.offset + b.rows].reshape(b.row_shape), [c.T for c in b.cols])
    for c in cliques:
        np.testing.assert_allclose(np.asarray(grads[c]), expect[c], rtol=1e-9, atol=1e-12)
    c = cliques[1]
    h = 1e-4
    for idx in [(0, 0), (3, 2), (5, 1)]:
        up = dict(mu)
        dn = dict(mu)
        up[c] = mu[c].at[idx].add(h)
        dn[c] = mu[c].at[idx].add(-h)
        fd = (float(loss(up)) - float(loss(dn))) / (2 * h)
        assert fd == pytest.approx(float(grads[c][idx]), rel=1e-5, abs=1e-9)


def test_nll_is_minimised_near_the_true_answers():
    """With many rounds and large s the maximum-likelihood answers approach the true ones."""
    dom = pj.Domain({"a": 4, "b": 3})
    w = pj.Workload.benchmark(dom, [("a", "b"), ("a",)], numeric=["a"])
    p = np.random.default_rng(5).dirichlet(np.ones(12)).reshape(4, 3)
    queries = DQ.QueryBlocks(w, dom)
    margs = {("a", "b"): p, ("a",): p.sum(axis=1)}
    a_true = np.concatenate([DQ.kron_np(margs[b.clique], b.mats).reshape(-1) for b in queries.blocks])

    def fit(samples, rounds, seed):
        tr = DQ.simulate(w, a_true, key=jax.random.key(seed), eta=0.5, samples=samples, rounds=rounds)
        R = queries.rows

        def f(x):
            return tr.nll(jnp.concatenate([x, 1.0 - x]))

        vg = jax.jit(jax.value_and_grad(f))
        res = scipy.optimize.minimize(
            lambda x: tuple(np.asarray(v, np.float64) for v in vg(jnp.asarray(x))),
            np.full(R, 0.5),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 2000, "gtol": 1e-10},
        )
        return np.abs(res.x - a_true).max()

    small = fit(5, 10, 0)
    big = fit(2000, 30, 1)
    assert big < 0.02
    assert big < small / 3


# ----------------------------------------------------------------------------------------------------------
# the front-end, end to end
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run():
    data = _small_data()
    w = _small_workload(data.domain)
    res = DQ.dualquery(data, 3.0, 1e-3, key=jax.random.key(0), workload=w, eta=2.0, samples=50, engine_iters=300)
    return data, w, res


def test_end_to_end_both_arms(run):
    data, w, res = run
    N = len(data)
    T = res.info.rounds
    assert T == DQ.dualquery_plan(3.0, 1e-3, records=N)["rounds"] and T >= 10
    assert res.mechanism == "dualquery"
    # the original arm: the T best responses
    assert isinstance(res.original, pj.Dataset) and len(res.original) == T
    tr = res.info.transcript
    np.testing.assert_array_equal(res.original.records, tr.records)
    assert tr.draws.shape == (T, 50) and tr.eta == res.info.eta_used
    # each record is a best response to its round's draws
    for t in [0, T // 2, T - 1]:
        hist = np.bincount(tr.draws[t], minlength=tr.size)
        sat = tr.satisfied()[t]
        assert float(sat @ hist) == pytest.approx(res.info.satisfied[t], abs=1e-9)
    # the +PGM arm
    assert res.model.total == N and len(res.synthetic) == N
    assert all(res.model.junction_tree.containing(c) is not None for c in w.cliques)
    assert res.report.iterations == 300
    cliques = list(dict.fromkeys(w.cliques))
    flat = {c: np.full(data.domain.shape_of(c), N / data.domain.size(c)) for c in cliques}  # the uniform model
    uniform_answers = [q.apply(flat[q.clique]) for q in w.queries]
    fitted = dict(zip(cliques, res.model.marginals(cliques)))  # one compiled program for every clique
    pgm_answers = [q.apply(fitted[q.clique]) for q in w.queries]
    err = {k: pj.metrics.workload_error(w, data, v) for k, v in [("pgm", pgm_answers), ("orig", res.original), ("uniform", uniform_answers)]}
    assert err["pgm"] < 0.75 * err["uniform"], err
    assert err["pgm"] < err["orig"], err
    # the fitted model explains the transcript better than the uniform model
    loss = jax.jit(tr.loss())
    assert float(loss({c: jnp.asarray(t) for c, t in fitted.items()})) < float(loss({c: jnp.asarray(t) for c, t in flat.items()}))


def test_end_to_end_ledger(run):
    data, _, res = run
    N = len(data)
    T, eta = res.info.rounds, res.info.eta_used
    acc = res.accountant
    ledger = res.ledger
    assert len(ledger) == T - 1  # round 1 reads no data
    assert all(e.mechanism == "exponential" and e.count == 50 and e.size == res.info.queries for e in ledger)
    np.testing.assert_allclose([e.epsilon for e in ledger], [2 * eta * (t - 1) / N for t in range(2, T + 1)], rtol=0)
    np.testing.assert_allclose([e.sensitivity for e in ledger], [(t - 1) / N for t in range(2, T + 1)], rtol=0)
    assert acc.spent <= 3.0 and acc.spent == pytest.approx(3.0, rel=1e-13)
    assert acc.epsilon_delta() == (acc.spent, 1e-3)
    assert res.info.epsilon_spent == acc.spent


def test_estimate_options_reach_the_engine():
    data = _small_data(200)
    w = _small_workload(data.domain)
    seen = []
    res = DQ.dualquery(data, 3.0, 1e-3, key=jax.random.key(1), workload=w, engine_iters=40,
                       fit_options=pj.FitOptions(callback=lambda info: seen.append(info["iteration"]), chunk=10))
    assert seen == [10, 20, 30, 40] and res.report.iterations == 40
    with pytest.raises(ValueError, match=r"fit_options may not set \['loss'\]; the mechanism sets it"):
        DQ.dualquery(data, 1.0, 1e-3, key=jax.random.key(0), workload=w, fit_options=pj.FitOptions(loss="l1"))
    with pytest.raises(TypeError, match="fit_options must be a pgmjax.FitOptions"):  # the former dictionary
        DQ.dualquery(data, 1.0, 1e-3, key=jax.random.key(0), workload=w, fit_options={"iters": 5})


def test_bad_inputs_raise_clear_errors():
    data = _small_data(100)
    dom = data.domain
    w = _small_workload(dom)
    k = jax.random.key(0)
    for delta in (0.0, 1.0, 1.5, -1e-3):
        with pytest.raises(ValueError, match="delta must be in"):
            DQ.dualquery(data, 1.0, delta, key=k, workload=w)
    bad = pj.Workload(dom, [(("a", "b"), [pj.queries.Mean(), None])])  # row entries up to 5
    with pytest.raises(ValueError, match=r"entries in \[0, 5\].*counting queries"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=bad)
    neg = pj.Workload(dom, [(("a",), [-np.eye(6)])])
    with pytest.raises(ValueError, match=r"entries in \[-1, 0\]"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=neg)
    with pytest.raises(ValueError, match="bound must be"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=w, bound="b3")
    with pytest.raises(ValueError, match="samples must be a positive integer"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=w, samples=0)
    with pytest.raises(ValueError, match="eta must be positive"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=w, eta=-1.0)
    with pytest.raises(ValueError, match="epsilon must be positive"):
        DQ.dualquery(data, 0.0, 1e-3, key=k, workload=w)
    with pytest.raises(ValueError, match="cost epsilon"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=w, rounds=500)
    with pytest.raises(ValueError, match="even 2 rounds cost"):
        DQ.dualquery(data, 0.01, 1e-3, key=k, workload=w, eta=5.0)
    with pytest.raises(TypeError, match="data must be a pgmjax.Dataset"):
        DQ.dualquery(data.records, 1.0, 1e-3, key=k, workload=w)
    with pytest.raises(TypeError, match="key must be one jax.random key"):
        DQ.dualquery(data, 1.0, 1e-3, key=0, workload=w)
    with pytest.raises(TypeError, match="workload must be a pgmjax.Workload"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload="ab")  # a list of cliques is their marginals; a string is refused
    other = pj.Workload.marginals(pj.Domain({"a": 7, "b": 3}), [("a", "b")])
    with pytest.raises(ValueError, match="sized differently"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=other)
    with pytest.raises(ValueError, match="engine_iters"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=w, engine_iters=-1)
    with pytest.raises(ValueError, match="method must be"):
        DQ.dualquery(data, 1.0, 1e-3, key=k, workload=w, fit_options=pj.FitOptions(method="dual_averaging"))
