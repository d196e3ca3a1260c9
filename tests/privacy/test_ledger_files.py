"""An accountant written to JSON and read back (a saved release's stages), and ledgers composed across stages."""

import json

import jax
import numpy as np
import pytest

from pgmjax.privacy import REST, Accountant, cdp_eps, cdp_rho, compose_ledgers, from_ledger_state, ledger_state


def _spent(accountant, key=0):
    k1, k2 = jax.random.split(jax.random.key(key))
    values = np.zeros(5)
    if accountant.composition == "zcdp":
        accountant.gaussian(k1, values, 1.0, rho=accountant.budget / 3)
        accountant.exponential(k2, [1.0, 2.0, 0.5], 1.0, rho=REST)
    else:
        accountant.laplace(k1, values, 1.0, epsilon=accountant.budget / 4)
        accountant.exponential(k2, [1.0, 2.0, 0.5], 1.0, epsilon=accountant.budget / 8, num=3)
    return accountant


@pytest.mark.parametrize("make", [
    lambda: Accountant(epsilon=1.0, delta=1e-9, bounded=True),
    lambda: Accountant(rho=0.2),
    lambda: Accountant(epsilon=2.0),
    lambda: Accountant(epsilon=1.0, delta=1e-6, composition="advanced"),
])
def test_an_accountant_round_trips_through_json(make):
    acc = _spent(make())
    again = from_ledger_state(Accountant, json.loads(json.dumps(ledger_state(acc))))
    assert (again.composition, again.budget, again.delta, again.bounded) == (acc.composition, acc.budget, acc.delta, acc.bounded)
    assert again.ledger == acc.ledger and again.spent == acc.spent


def test_a_ledger_that_does_not_add_up_is_refused():
    state = ledger_state(_spent(Accountant(rho=0.2)))
    state["records"][0]["rho"] /= 2  # an under-counted noise addition
    state["records"][0]["cost"] /= 2
    with pytest.raises(ValueError, match="record 0 .* is not what its noise costs"):
        from_ledger_state(Accountant, state)
    with pytest.raises(ValueError, match="from_ledger_state: expected a dict with composition"):
        from_ledger_state(Accountant, {"budget": 1.0})
    over = ledger_state(_spent(Accountant(epsilon=1.0, delta=1e-6, composition="advanced")))
    over["budget"] = 0.1
    with pytest.raises(ValueError, match="more than the budget"):
        from_ledger_state(Accountant, over)


def test_zcdp_stages_add_in_rho_others_by_basic_composition():
    a, b = _spent(Accountant(rho=0.05)), _spent(Accountant(epsilon=1.0, delta=1e-9))
    eps, delta = compose_ledgers([a, b])
    assert delta == 1e-9 and eps == cdp_eps(0.05 + cdp_rho(1.0, 1e-9), 1e-9)
    assert eps < 1.0 + cdp_eps(0.05, 1e-9)  # tighter than adding the two epsilons
    pure, advanced = _spent(Accountant(epsilon=0.5)), _spent(Accountant(epsilon=1.0, delta=1e-6, composition="advanced"))
    assert compose_ledgers([pure, advanced]) == (pure.spent + advanced.spent, 1e-6)
    with pytest.raises(ValueError, match="need a delta"):
        compose_ledgers([Accountant(rho=0.1)])
    with pytest.raises(ValueError, match="no ledgers"):
        compose_ledgers([])
