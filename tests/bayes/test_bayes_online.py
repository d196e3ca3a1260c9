"""pgmjax.bayes: the online query-answering system (X3-6) and coverage by simulation (X3-7).

Noise values are never hard-coded: fixed keys, and assertions on relationships and frequencies.
"""

import math

import jax
import numpy as np
import pytest

from pgmjax import Dataset
from pgmjax.bayes import OnlineQuerySystem, blue
from pgmjax.privacy import Accountant, PrivacyBudgetExceeded

H_XX = np.array(
    [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1], [2, 1, 0, 0], [0, 0, 2, -1], [0, -1, 0, 1]], float
)
B_XX = np.array([20, 10, 20, 10, 10, 40, 40, 10.0])
Y_XX = np.array([30.8, 30.3, 46.9, 20.2, 30.4, 68.9, 38.9, 9.5])
Q_XX = np.array([1.0, 0.0, 1.0, 0.0])
X_TRUE = np.array([10.0, 20.0, 20.0, 10.0])


def xx_system(**kw):
    kw.setdefault("key", jax.random.key(7))
    return OnlineQuerySystem(X_TRUE, kw.pop("budget", 1.0), history=(H_XX, Y_XX, B_XX), **kw)


# ---- X3-6 -------------------------------------------------------------------------------------------


def test_x3_6_answer_from_history_then_buy():
    s = xx_system()
    r = s.ask(Q_XX, 50.0, 0.05)
    assert r.source == "history" and r.cost == 0.0 and s.accountant.ledger == ()
    assert r.half_width == pytest.approx(47.3833297071, rel=1e-8)
    assert r.value == pytest.approx(42.0138030194, rel=1e-10) and r.confidence == 0.95
    assert r.interval == pytest.approx((r.value - r.half_width, r.value + r.half_width))
    r = s.ask(Q_XX, 40.0, 0.05)
    assert r.source == "fresh"
    (entry,) = s.accountant.ledger
    # the system asks for the scale of Theorem 5.3's budget, b = 40 / ln 20 = 1 / 0.0748933068; the accountant's
    # floating-point-safe release also pays for rounding to a lattice: epsilon = (1 + a) * 0.0748933068, a <= 2^-10
    added = entry.sensitivity - 1.0
    assert entry.mechanism == "laplace" and entry.scale == pytest.approx(13.3523280, rel=1e-8)
    assert 0 <= added <= 2.0**-10 and r.cost == entry.epsilon == pytest.approx((1 + added) * 0.0748933068, rel=1e-9)
    assert s.history.laplace_scale[-1] == entry.scale
    np.testing.assert_allclose(s.cell_cost, [0.1748933, 0.275, 0.3248933, 0.375], atol=1e-4)
    np.testing.assert_allclose(s.cell_cost - [0.1, 0.275, 0.25, 0.375], [r.cost, 0, r.cost, 0], atol=1e-14)
    assert s.cost == pytest.approx(0.375)
    assert r.half_width == pytest.approx(29.8389204, rel=1e-7)  # the combined BLUE, Var 217.0095219
    again = blue(s.history.H, s.history.y, scale=s.history.laplace_scale, query=Q_XX)
    assert again.variance == pytest.approx(217.0095219, rel=1e-8)
    assert r.value == pytest.approx(again.value, rel=1e-10)  # the answer is the BLUE of the new history


def test_x3_6_paper_system_and_history_aware_allocation():
    r = xx_system(combine=False).ask(Q_XX, 40.0, 0.05)
    assert r.source == "fresh" and r.half_width == 40.0
    assert r.interval[1] - r.interval[0] == pytest.approx(80.0)
    s = xx_system(allocation="history")
    r = s.ask(Q_XX, 40.0, 0.05)
    assert r.cost == pytest.approx(0.0376110418, rel=2.0**-10) and r.half_width <= 40.0
    assert r.half_width == pytest.approx(40.0, rel=1e-6)
    assert s.accountant.ledger[0].scale == pytest.approx(1 / 0.0376110418, rel=1e-6)


def test_refused_request_spends_nothing():
    s = xx_system(budget=0.4)  # the history costs 0.375 per record
    spent, B = s.accountant.spent, s.cell_cost
    r = s.ask(Q_XX, 1.0, 0.05)  # needs epsilon ln 20 = 3.0
    assert r.source == "refused" and r.value is None and r.interval is None and r.cost == 0.0
    assert "budget" in r.reason and "nothing was spent" in r.reason
    assert r.history_interval is not None  # the history's own (wider) interval is offered
    assert s.accountant.spent == spent and s.accountant.ledger == () and np.array_equal(s.cell_cost, B)
    assert s.history.H.shape[0] == 8
    # a sequential accountant refuses too (its own budget), again without spending
    s2 = xx_system(budget=10.0, accountant=Accountant(epsilon=0.1))
    r2 = s2.ask(Q_XX, 20.0, 0.05)
    assert r2.source == "refused" and "accountant" in r2.reason and s2.accountant.ledger == ()
    with pytest.raises(PrivacyBudgetExceeded):
        s.release(np.eye(4), 1.0)
    assert s.accountant.ledger == ()


def test_input_errors():
    s = xx_system()
    with pytest.raises(ValueError, match="query must be"):
        s.ask([1.0, 2.0], 10.0, 0.1)
    with pytest.raises(ValueError, match="all zeros"):
        s.ask(np.zeros(4), 10.0, 0.1)
    with pytest.raises(ValueError, match="delta"):
        s.ask(Q_XX, 10.0, 1.0)
    with pytest.raises(ValueError, match="allocation"):
        xx_system(allocation="greedy")
    with pytest.raises(ValueError, match="history alone costs"):
        xx_system(budget=0.1)
    with pytest.raises(TypeError, match="key"):
        OnlineQuerySystem(X_TRUE, 1.0, key=3)
    assert s.responses == []


def test_dataset_cells():
    data = Dataset(np.array([[0, 1], [1, 2], [1, 0], [1, 2]]), {"a": 2, "b": 3})
    s = OnlineQuerySystem(data, 2.0, key=jax.random.key(0), attributes=("a",))
    r = s.ask([0.0, 1.0], 3.0, 0.1)
    assert r.source == "fresh" and s.history.H.tolist() == [[0.0, 1.0]]


# ---- a seeded request stream --------------------------------------------------------------------------
# Sparse queries (1-3 of 48 cells, weights 1-2) on top of an identity release: intervals of different
# queries share little noise, so their coverage indicators are nearly independent and the binomial
# standard error applies (10 keys: spread 0.041 against 0.033 binomial). The paper's generator ([XX]
# eq. 37-38), whose queries all overlap, is run in bench/bayes_experiments.py.


def request_stream(n, N, rng, width=(1.0, 12.0)):
    for _ in range(n):
        q = np.zeros(N)
        cells = rng.choice(N, size=rng.integers(1, 4), replace=False)
        q[cells] = rng.integers(1, 3, size=cells.size)
        yield q, float(rng.uniform(*width))


def run_stream(key, seed=11, n=200, budget=2.0, delta=0.2, N=48, **kw):
    rng = np.random.default_rng(seed)
    x = np.random.default_rng(0).integers(0, 50, N).astype(float)
    s = OnlineQuerySystem(x, budget, key=key, **kw)
    s.release(np.eye(N), 0.5)
    costs, rows = [], []
    for q, w in request_stream(n, N, rng):
        r = s.ask(q, w, delta)
        costs.append(s.cost)
        rows.append((r, float(q @ x)))
    return s, rows, costs


def test_online_ledger_never_exceeds_budget_and_coverage():
    s, rows, costs = run_stream(jax.random.key(5))
    answered = [(r, truth) for r, truth in rows if r.source != "refused"]
    sources = {src: sum(r.source == src for r, _ in rows) for src in ("history", "fresh", "refused")}
    assert sources["history"] > 50 and sources["fresh"] > 20 and sources["refused"] > 20, sources
    # the ledger never exceeds the budget, and the system's cost is the per-cell cost of the accountant's releases
    assert max(costs) <= s.budget * (1 + 1e-9)
    # recomputed from the accountant's ledger: each release's rows R, scale b and rounding share a (the
    # sensitivity beyond max_j sum_i |R_ij|), loss sum_i (|R_ij| + a / rows [R_ij != 0]) / b per cell
    ledger = s.accountant.ledger
    H, B, start = s.history.H, np.zeros(s.history.H.shape[1]), 0
    for e in ledger:
        R = H[start : start + e.size]
        start += e.size
        S = np.abs(R).sum(axis=0).max()
        assert 0 <= e.sensitivity - S <= S * 2.0**-10 and e.epsilon == pytest.approx(e.sensitivity / e.scale, rel=1e-12)
        B += (np.abs(R).sum(axis=0) + (e.sensitivity - S) / e.size * (R != 0).sum(axis=0)) / e.scale
    assert start == H.shape[0]
    assert B.max() == pytest.approx(s.cost, rel=1e-12) and B.max() <= s.budget * (1 + 1e-9)
    assert s.cost < sum(e.epsilon for e in ledger)  # parallel composition beats sequential
    # every refusal left the ledger as it was (one ledger entry per fresh answer, plus the release)
    assert len(ledger) == 1 + sources["fresh"]
    # each interval states its confidence and meets the request
    for r, _ in answered:
        assert r.confidence == pytest.approx(0.8) and r.interval[0] <= r.value <= r.interval[1]
    # coverage over the 200-request stream within 3 standard errors of 1 - delta
    cover = np.mean([r.interval[0] <= truth <= r.interval[1] for r, truth in answered])
    se = math.sqrt(0.8 * 0.2 / len(answered))
    assert abs(cover - 0.8) <= 3 * se, (cover, len(answered))


def test_decisions_do_not_depend_on_the_noise():
    _, rows_a, costs_a = run_stream(jax.random.key(1), n=40, budget=1.0)
    _, rows_b, costs_b = run_stream(jax.random.key(2), n=40, budget=1.0)
    assert [r.source for r, _ in rows_a] == [r.source for r, _ in rows_b]
    assert {"history", "fresh", "refused"} <= {r.source for r, _ in rows_a}
    assert [r.cost for r, _ in rows_a] == [r.cost for r, _ in rows_b]
    assert costs_a == costs_b
    assert [r.half_width for r, _ in rows_a] == pytest.approx([r.half_width for r, _ in rows_b])
    assert [r.value for r, _ in rows_a if r.value is not None] != [r.value for r, _ in rows_b if r.value is not None]


# ---- X3-7: coverage of the BLUE's intervals --------------------------------------------------------


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_x3_7_coverage_of_the_papers_design(family):
    R = 20_000
    rng = np.random.default_rng(2024)
    b = B_XX
    if family == "laplace":
        r = blue(H_XX, Y_XX, scale=b, query=Q_XX)
        noise = rng.laplace(size=(R, 8)) * b
    else:
        r = blue(H_XX, Y_XX, stddev=np.sqrt(2) * b, query=Q_XX)
        noise = rng.normal(size=(R, 8)) * np.sqrt(2) * b
    c = r.error.half_width(0.95)
    y = X_TRUE @ H_XX.T + noise
    est = y @ r.A  # the weights do not depend on y
    # spot check: blue's value on a few draws is A y
    for i in range(3):
        assert blue(H_XX, y[i], scale=b, query=Q_XX).value == pytest.approx(est[i], rel=1e-10)
    cover = np.mean(np.abs(est - Q_XX @ X_TRUE) <= c)
    assert 0.9454 <= cover <= 0.9546, cover
    if family == "laplace":  # the Gaussian approximation under-covers a little (0.9448 in a 4000-query reference run)
        g = r.error.with_method("gaussian").half_width(0.95)
        assert g < c and np.mean(np.abs(est - 30.0) <= g) < cover
