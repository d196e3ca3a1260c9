"""Every mechanism at extreme budgets: a finite, consistent model or a clear ValueError before computing (issue 15).

Budgets 1e-4, 1e-2, 1e2, 1e6 and 1e300 on a tiny generated table. A run either returns a model whose
one-way marginals are finite and sum to its total, or raises a ValueError naming ``epsilon`` (or the
parameter to change) before any data is read; never ZeroDivisionError, OverflowError, NaN or a crash.
Above :data:`pgmjax.mechanisms.options.MAX_EPSILON` (1e9) every front-end refuses.
"""

import importlib
import math

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms import QuerySet, aim, dualquery, hdmm, mldp, mst, mwem, privbayes
from pgmjax.mechanisms.options import MAX_EPSILON, check_epsilon

DQ = importlib.import_module("pgmjax.mechanisms.dual_query.front_end")  # the code; pgmjax.mechanisms.dualquery is the function

EPSILONS = (1e-4, 1e-2, 1e2, 1e6, 1e300)


def _tiny(n=200, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = (a + (rng.random(n) < 0.3)) % 3
    c = (b + rng.integers(0, 2, n)) % 2
    return pj.Dataset(np.stack([a, b, c], 1), {"a": 4, "b": 3, "c": 2})


DATA = _tiny()
DOM = DATA.domain
WORKLOAD = pj.Workload.benchmark(DOM, [("a", "b"), ("b", "c")], numeric=["a"])
TRAINING = QuerySet.cells(DOM, ("a", "b")) + QuerySet.cells(DOM, ("b", "c"))

RUNS = {
    "mwem": lambda eps, k: mwem(DATA, eps, key=k, workload=WORKLOAD, rounds=2, engine_iters=10, mw_iters=10),
    "mst": lambda eps, k: mst(DATA, eps, key=k, select_iters=10, engine_iters=10),
    "aim": lambda eps, k: aim(DATA, eps, key=k, rounds=3, engine_iters=10, max_model_mb=1.0),
    "privbayes": lambda eps, k: privbayes(DATA, eps, key=k, engine_iters=10),
    "dualquery": lambda eps, k: dualquery(DATA, eps, 1e-3, key=k, workload=WORKLOAD, samples=10, engine_iters=10),
    "hdmm": lambda eps, k: hdmm(DATA, eps, key=k, workload=WORKLOAD, engine_iters=10, restarts=1),
    "mldp": lambda eps, k: mldp(DATA, eps, key=k, training=TRAINING, engine_iters=10),
}

KNOWN: dict = {}  # (mechanism, epsilon) -> pytest mark, for failures reported elsewhere


def _consistent(res):
    m = res.model
    total = float(m.total)
    assert math.isfinite(total) and total > 0
    for a in DOM.attributes:
        marg = np.asarray(m.marginal((a,)), np.float64)
        assert np.all(np.isfinite(marg)) and np.all(marg >= 0)
        assert marg.sum() == pytest.approx(total, rel=1e-4), (a, marg.sum(), total)
    syn = res.synthetic
    if syn is not None:
        assert syn.records.shape[1] == len(DOM) and np.all(syn.records >= 0) and np.all(syn.records < np.array(DOM.shape))
    # the ledger never exceeds the budget
    assert res.accountant.spent <= res.accountant.budget * (1 + 1e-12)


@pytest.mark.parametrize(
    "name,eps",
    [pytest.param(n, e, marks=KNOWN.get((n, e), ())) for n in RUNS for e in EPSILONS],
)
def test_extreme_budget(name, eps):
    try:
        res = RUNS[name](eps, jax.random.key(0))
    except ValueError as err:
        msg = str(err)
        assert "epsilon" in msg, msg  # a refusal of the budget itself, saying what to change
        if eps > MAX_EPSILON:
            assert "largest supported budget" in msg
        return
    assert eps <= MAX_EPSILON, f"{name} ran at epsilon {eps:g}, above MAX_EPSILON"
    _consistent(res)


def test_check_epsilon():
    assert check_epsilon(1, "x") == 1.0 and check_epsilon(MAX_EPSILON, "x") == MAX_EPSILON
    for bad in (0.0, -1.0, math.inf, math.nan, np.nextafter(MAX_EPSILON, math.inf)):
        with pytest.raises(ValueError, match="x: epsilon"):
            check_epsilon(bad, "x")
    with pytest.raises(TypeError):
        check_epsilon("1", "x")


def test_dualquery_plan_survives_overflowing_advanced_composition():
    # eps_t = 2 eta (t - 1) / N past 709: e^eps_t overflows; basic composition bounds the ledger then.
    total = DQ._ledger_total(50, 1e4, 10, 200.0, 1e-3, "b2")
    assert total == pytest.approx(sum(10 * 2 * 1e4 * (t - 1) / 200.0 for t in range(2, 51)))
    plan = DQ.dualquery_plan(1e6, 1e-3, records=200, eta=2.0, samples=10)
    assert plan["epsilon"] <= 1e6 and plan["rounds"] >= 2
