"""Property-based reliability suite (hypothesis): budgets, sensitivities, releases and fitted models.

Random domains, cliques, measurements, budgets from 1e-4 to 1e6 and neighbouring relations. CI runs a
few hundred examples of the cheap properties and a handful of the ones that fit models; the ``slow``
profile (``HYPOTHESIS_PROFILE=slow``) runs many more.
"""

import math
import os

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pgmjax as pj
import pgmjax.privacy.discrete_noise as dn
from pgmjax.privacy import (
    REST,
    Accountant,
    PrivacyBudgetExceeded,
    l1_sensitivity,
    l2_sensitivity,
)

settings.register_profile("ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("slow", deadline=None, max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

budgets = st.floats(min_value=1e-4, max_value=1e6).map(lambda v: float(np.float64(v)))
fractions = st.floats(min_value=1e-3, max_value=1.0)


@st.composite
def datasets(draw, max_attrs=4, max_size=5, max_rows=40):
    k = draw(st.integers(1, max_attrs))
    sizes = draw(st.lists(st.integers(1, max_size), min_size=k, max_size=k))
    n = draw(st.integers(1, max_rows))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    dom = pj.Domain({f"x{i}": s for i, s in enumerate(sizes)})
    return pj.Dataset(rng.integers(0, sizes, size=(n, k)), dom)


@st.composite
def cliques_of(draw, domain, min_size=1):
    attrs = list(domain.attributes)
    chosen = draw(st.lists(st.sampled_from(attrs), min_size=min_size, max_size=min(3, len(attrs)), unique=True))
    return tuple(chosen)


# --------------------------------------------------------------------------------------------------
# The ledger: never above the budget, exactly the budget with REST
# --------------------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(
    budget=budgets,
    zcdp=st.booleans(),
    requests=st.lists(st.tuples(st.sampled_from(["laplace", "gaussian", "exponential"]), fractions), min_size=1, max_size=12),
    finish=st.booleans(),
)
def test_ledger_never_exceeds_the_budget(budget, zcdp, requests, finish):
    acc = Accountant(rho=budget) if zcdp else Accountant(epsilon=budget)
    cur = "rho" if zcdp else "epsilon"
    x = np.arange(4.0)
    for i, (mech, frac) in enumerate(requests):
        if mech == "gaussian" and not zcdp:
            mech = "laplace"
        key = jax.random.key(i)
        amount = {cur: frac * budget / len(requests)}
        if mech == "exponential":
            acc.exponential(key, x, 1.0, **amount)
        elif mech == "laplace":
            acc.laplace(key, x, 1.0, integer=True, **amount)
        else:
            acc.gaussian(key, x, 1.0, integer=True, **amount)
        assert math.fsum(e.cost for e in acc.ledger) <= budget
    if finish and acc.remaining > budget * 1e-9:
        acc.laplace(jax.random.key(99), x, 1.0, integer=True, **{cur: REST})
        assert acc.spent == budget or acc.spent == math.nextafter(budget, 0.0)
    assert acc.spent <= budget
    with pytest.raises(PrivacyBudgetExceeded):
        acc.laplace(jax.random.key(7), x, 1.0, **{cur: budget * 1.01})


# --------------------------------------------------------------------------------------------------
# Sensitivities hold for every neighbouring pair
# --------------------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(data=datasets(), relation=st.sampled_from(["add", "remove", "replace"]), seed=st.integers(0, 2**31 - 1), st_data=st.data())
def test_marginal_sensitivities_hold_for_neighbours(data, relation, seed, st_data):
    clique = st_data.draw(cliques_of(data.domain))
    rng = np.random.default_rng(seed)
    rec = data.records
    sizes = np.array(data.domain.shape)
    if relation == "add":
        other = np.vstack([rec, rng.integers(0, sizes, size=(1, rec.shape[1]))])
    elif relation == "remove":
        assume(len(rec) > 1)
        other = np.delete(rec, rng.integers(len(rec)), axis=0)
    else:
        other = rec.copy()
        other[rng.integers(len(rec))] = rng.integers(0, sizes)
    neighbour = pj.Dataset(other, data.domain)
    cells = data.domain.size(clique)
    q = rng.integers(-3, 4, size=(3, cells)).astype(float)  # an integer query on the marginal
    bounded = relation == "replace"
    diff = q @ (data.marginal(clique).reshape(-1) - neighbour.marginal(clique).reshape(-1))
    assert np.abs(diff).sum() <= l1_sensitivity(q, bounded=bounded) + 1e-9
    assert np.linalg.norm(diff) <= l2_sensitivity(q, bounded=bounded) + 1e-9
    ident = data.marginal(clique) - neighbour.marginal(clique)
    assert np.abs(ident).sum() <= l1_sensitivity(None, bounded=bounded)


# --------------------------------------------------------------------------------------------------
# Releases: on their lattice, right shape, finite, from the key alone
# --------------------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(
    data=datasets(),
    budget=budgets,
    zcdp=st.booleans(),
    integer_query=st.booleans(),
    st_data=st.data(),
)
def test_measurements_are_lattice_points_of_the_right_shape(data, budget, zcdp, integer_query, st_data):
    clique = st_data.draw(cliques_of(data.domain))
    cells = data.domain.size(clique)
    rng = np.random.default_rng(cells)
    q = rng.integers(0, 3, size=(2, cells)).astype(float)
    if not integer_query:
        q = q * 0.37 + 0.01
    acc = Accountant(rho=budget) if zcdp else Accountant(epsilon=budget)
    m = acc.measure(jax.random.key(1), data, clique, query=q, **({"rho": REST} if zcdp else {"epsilon": REST}))
    e = acc.ledger[0]
    assert m.y.shape == (2,) and np.all(np.isfinite(m.y)) and m.stddev > 0
    gamma = 1.0 if integer_query else dn.lattice_spacing(
        e.scale, l1_sensitivity(q) if not zcdp else l2_sensitivity(q), 2, integer=False
    )
    assert np.array_equal(m.y / gamma, np.round(m.y / gamma))
    assert acc.spent <= budget


# --------------------------------------------------------------------------------------------------
# Fitted models: finite and consistent, whatever the measurements
# --------------------------------------------------------------------------------------------------


@settings(max_examples=12)
@given(
    data=datasets(max_attrs=3, max_size=4),
    log_std=st.floats(min_value=-2.0, max_value=4.0),
    method=st.sampled_from(["mirror_descent", "dual_averaging", "lbfgs"]),
    st_data=st.data(),
)
def test_every_fit_is_finite_and_consistent(data, log_std, method, st_data):
    cliques = st_data.draw(st.lists(cliques_of(data.domain), min_size=1, max_size=3))
    std = 10.0**log_std
    rng = np.random.default_rng(len(cliques))
    ms = [pj.Measurement(c, data.marginal(c) + rng.normal(0, std, data.marginal(c).shape), stddev=std) for c in cliques]
    try:
        model = pj.estimate(data.domain, ms, method=method, iters=60)
    except ValueError as err:  # refused before fitting, with a reason (e.g. the total cannot be estimated)
        assert "total" in str(err)
        return
    assert model.total > 0 and math.isfinite(model.total)
    for c in model.cliques:
        table = np.asarray(model.marginal(c), dtype=np.float64)
        assert np.all(np.isfinite(table)) and np.all(table >= 0)
        assert table.sum() == pytest.approx(model.total, rel=1e-3)


# --------------------------------------------------------------------------------------------------
# Bad input refused before any computation
# --------------------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(
    bad=st.sampled_from([0.0, -1.0, math.inf, math.nan, -math.inf]),
    field=st.sampled_from(["epsilon", "rho", "delta"]),
)
def test_bad_budgets_are_refused_by_name(bad, field):
    kwargs = {"epsilon": 1.0, "delta": bad} if field == "delta" else {field: bad}
    with pytest.raises(ValueError, match=field):
        Accountant(**kwargs)


@settings(max_examples=100)
@given(data=datasets(), extra=st.integers(1, 3), st_data=st.data())
def test_measurements_of_the_wrong_shape_are_refused_by_clique(data, extra, st_data):
    clique = st_data.draw(cliques_of(data.domain))
    y = np.zeros(data.domain.size(clique) + extra)
    with pytest.raises(ValueError, match="measurement 0 on"):
        pj.estimate(data.domain, [pj.Measurement(clique, y, stddev=1.0)], iters=5)


# --------------------------------------------------------------------------------------------------
# Mechanisms: random tables and budgets, the same structure so programs are reused across examples
# --------------------------------------------------------------------------------------------------

_MECH_DOMAIN = pj.Domain({"a": 4, "b": 3, "c": 2})


@settings(max_examples=10)
@given(
    seed=st.integers(0, 2**31 - 1),
    rows=st.integers(20, 300),
    log_eps=st.floats(min_value=-4.0, max_value=6.0),
    mechanism=st.sampled_from(["mst", "mwem", "privbayes", "aim"]),
)
def test_mechanisms_on_random_tables_and_budgets(seed, rows, log_eps, mechanism):
    from pgmjax.mechanisms import aim, mst, mwem, privbayes

    rng = np.random.default_rng(seed)
    data = pj.Dataset(rng.integers(0, _MECH_DOMAIN.shape, size=(rows, 3)), _MECH_DOMAIN)
    eps, key = 10.0**log_eps, jax.random.key(seed % 1000)
    run = {
        "mst": lambda: mst(data, eps, key=key, select_iters=20, engine_iters=20),
        "mwem": lambda: mwem(data, eps, key=key, rounds=2, engine_iters=20, mw_iters=10),
        "privbayes": lambda: privbayes(data, eps, key=key, engine_iters=20),
        "aim": lambda: aim(data, eps, key=key, rounds=3, engine_iters=20, max_model_mb=1.0),
    }[mechanism]
    res = run()
    acc = res.accountant
    assert math.fsum(e.cost for e in acc.ledger) <= acc.budget and acc.spent <= acc.budget
    model = res.model
    for c in model.cliques:
        table = np.asarray(model.marginal(c), dtype=np.float64)
        assert np.all(np.isfinite(table)) and np.all(table >= 0)
        assert table.sum() == pytest.approx(model.total, rel=1e-3)
    if res.synthetic is not None:
        rec = res.synthetic.records
        assert rec.shape[1] == 3 and rec.min() >= 0 and np.all(rec.max(axis=0) < np.array(_MECH_DOMAIN.shape))
        assert res.synthetic.domain == _MECH_DOMAIN
