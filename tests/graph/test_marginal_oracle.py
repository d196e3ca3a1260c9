"""The marginal oracles as values: each plan names its oracle once, and the problem and model call that value."""

import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.estimation.inputs import build_problem
from pgmjax.graph import approximate_oracle, marginal_oracle, oracle
from pgmjax.graph.routed_plan import make_routed_plan


def test_each_plan_names_its_oracle_and_the_problem_holds_it():
    dom = pj.Domain({"a": 2, "b": 3, "c": 2})
    cliques = [("a", "b"), ("b", "c")]
    plans = {
        marginal_oracle.EXACT: oracle.make_plan(dom, cliques),
        marginal_oracle.SIZE_CLASS: make_routed_plan(dom, cliques),
        marginal_oracle.APPROXIMATE: approximate_oracle.make_approximate_plan(dom, cliques),
    }
    ms = [pj.Measurement(c, np.arange(dom.size(c), dtype=float) + 1) for c in cliques]
    for kind, plan in plans.items():
        assert marginal_oracle.oracle_of(plan) is kind
        problem, _, _ = build_problem(dom, ms, list(cliques), "l2", None, jnp.float64, caller="test", plan=plan)
        assert problem.oracle is kind
    with pytest.raises(TypeError, match="no marginal oracle runs a dict"):
        marginal_oracle.oracle_of({})


def test_the_approximate_oracle_has_no_gauge():
    dom = pj.Domain({"a": 2, "b": 2})
    plan = approximate_oracle.make_approximate_plan(dom, [("a", "b")])
    with pytest.raises(ValueError, match="no canonical gauge"):
        marginal_oracle.APPROXIMATE.canonical(plan, {})
    theta = {"x": jnp.zeros(3)}
    assert marginal_oracle.APPROXIMATE.log_conditionals(plan, theta) is theta
