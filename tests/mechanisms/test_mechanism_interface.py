"""One mechanism interface: every registry front-end has the common signature, the command line accepts the same
common options for each, and every run records a typed budget plan that sums to the budget it was given."""

import inspect
import json
import math

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import cli
from pgmjax.cli.call import COMMON_FLAGS, LIMIT_ONLY, front_end_call
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.options import COMMON_PARAMETERS
from pgmjax.privacy import BudgetPlan, BudgetStep

NAMES = list(registry.MECHANISMS)
KW = inspect.Parameter.KEYWORD_ONLY
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD


@pytest.mark.parametrize("name", NAMES)
def test_every_front_end_has_the_common_signature(name):
    entry = registry.MECHANISMS[name]
    assert entry.name == entry.function.__name__ == name and entry.description and entry.privacy in registry.GUARANTEES
    assert getattr(pj.mechanisms, name) is entry.function
    params = list(inspect.signature(entry.function).parameters.values())
    head = params[: len(COMMON_PARAMETERS)]
    assert [p.name for p in head] == list(COMMON_PARAMETERS)
    assert [p.kind for p in head] == [POS] * 3 + [KW] * 5
    by_name = {p.name: p for p in head}
    assert by_name["data"].default is by_name["epsilon"].default is by_name["key"].default is inspect.Parameter.empty
    assert all(p.default is not inspect.Parameter.empty for p in head if p.name not in ("data", "epsilon", "key"))
    # delta: 0 for the pure-DP front-ends (and the Laplace default of the "noise" ones), 1e-9 for the (eps, delta) ones
    assert by_name["delta"].default == (registry.DEFAULT_DELTA if entry.privacy in ("zcdp", "advanced") else 0.0)
    assert by_name["fit_options"].default is None
    assert isinstance(by_name["engine_iters"].default, int) and by_name["engine_iters"].default >= 1
    # every option after the common ones is keyword-only, and no retired name survives
    assert all(p.kind == KW for p in params[len(COMMON_PARAMETERS):])
    retired = {"pgm_iters", "fit_iters", "max_iters", "estimate_options", "pgm_options", "pgm_method", "pgm_step_size",
               "max_model_size", "max_memory_mb"}
    assert not retired & {p.name for p in params}
    assert list(registry.own_options(name)) == [p.name for p in params[len(COMMON_PARAMETERS):]]


def test_the_command_line_has_one_flag_per_common_parameter():
    assert list(COMMON_FLAGS) == list(COMMON_PARAMETERS)
    run_help = cli.build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    for flag in COMMON_FLAGS.values():
        assert flag in run_help, flag


COMMON_ARGS = ["--epsilon", "1", "--engine-iters", "10", "--engine-option", "tol=0", "--max-model-mb", "3", "--workload",
               "all-2way", "--seed", "2"]


@pytest.mark.parametrize("name", [*NAMES, "rr"])
def test_the_command_line_accepts_the_same_options_for_every_mechanism(name):
    parser = cli.build_parser()
    args = parser.parse_args(["run", "--seed", "0", "--data", "t.csv", "--domain", "d.json", "--mechanism", name, *COMMON_ARGS])
    assert (args.epsilon, args.engine_iters, args.engine_option, args.max_model_mb, args.workload) == (
        1.0, 10, ["tol=0"], 3.0, "all-2way")
    entry, kw, _ = front_end_call(args, {}, {"tol": 0})
    assert kw["engine_iters"] == 10 and kw["fit_options"] == pj.FitOptions(tol=0)
    # a front-end whose cliques are chosen after the release gets --max-model-mb as the run's size limit only
    assert kw.get("max_model_mb") == (None if entry.name in LIMIT_ONLY else 3.0)
    # the keyword arguments bind to the function's signature (nothing is run)
    inspect.signature(entry.function).bind(None, kw.pop("epsilon"), key=None, workload=None, **kw)


def test_a_pure_dp_front_end_refuses_a_delta_and_options_it_cannot_use():
    data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (200, 3)), {"a": 3, "b": 4, "c": 2})
    k = jax.random.key(0)
    for fn in (pj.mechanisms.privbayes, pj.mechanisms.mldp, pj.mechanisms.rr_synthetic, pj.mechanisms.mwem, pj.mechanisms.hdmm):
        with pytest.raises(ValueError, match="pure epsilon-DP"):
            fn(data, 1.0, 1e-6, key=k)
    for fn in (pj.mechanisms.privbayes, pj.mechanisms.mst, pj.mechanisms.rr_synthetic):
        with pytest.raises(ValueError, match="does not take workload"):
            fn(data, 1.0, key=k, workload=[("a", "b")])
    with pytest.raises(ValueError, match="does not take max_model_mb"):
        pj.mechanisms.rr_synthetic(data, 1.0, key=k, max_model_mb=1.0)
    # MST checks its largest model against the cap up front
    with pytest.raises(pj.ModelTooLarge, match=r"mst: the largest model MST may select.*\(max_model_mb=1e-06\).*raise max_model_mb"):
        pj.mechanisms.mst(data, 1.0, key=k, max_model_mb=1e-6)
    for fn in (pj.mechanisms.hdmm, pj.mechanisms.dualquery, pj.mechanisms.mldp):  # a cap on the workload's model
        with pytest.raises(pj.ModelTooLarge, match=r"\(max_model_mb=1e-06\).*raise max_model_mb"):
            fn(data, 1.0, key=k, max_model_mb=1e-6)


def test_mldp_builds_its_training_queries_from_a_workload():
    from pgmjax.mechanisms.query_learning.front_end import workload_training

    dom = pj.Domain({"a": 3, "b": 2, "c": 100})
    blocks = [(c, np.asarray(m)) for c, m in workload_training(pj.Workload.all_kway(dom, 1), dom).blocks]
    assert [(c, m.shape) for c, m in blocks] == [(("a",), (3, 3)), (("b",), (2, 2)), (("c",), (100, 100))]
    assert all(np.array_equal(m, np.eye(len(m))) for _, m in blocks)  # every cell of every marginal
    big = pj.Domain({"a": 100, "b": 100})  # one 10^4-cell pair: 10^8 entries, refused before allocating
    with pytest.raises(ValueError, match="matrix entries"):
        workload_training(pj.Workload.all_kway(big, 2), big)


# Tiny runs of every front-end (a few iterations), for the budget plans.
DOM = {"a": 3, "b": 4, "c": 2, "d": 3}
SETTINGS = {
    "mwem": dict(rounds=2, mw_iters=5, original=False),
    "privbayes": {},
    "dualquery": dict(rounds=3, samples=5),
    "hdmm": dict(restarts=1, original=False),
    "mst": dict(select_iters=5),
    "aim": dict(rounds=6, max_model_mb=1.0),
    "tree_aim": dict(select_iters=5, round_iters=5, max_model_mb=1.0),
    "mldp": {},
    "rr_synthetic": dict(per_attribute=True),
}


@pytest.fixture(scope="module")
def results():
    data = pj.Dataset(np.random.default_rng(1).integers(0, list(DOM.values()), (300, 4)), DOM)
    return {n: registry.run(n, data, 0.7, key=jax.random.key(3), engine_iters=5, **SETTINGS[n]) for n in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_every_run_records_a_budget_plan_summing_to_its_budget(results, name):
    res = results[name]
    plan, acc = res.plan, res.accountant
    assert isinstance(plan, BudgetPlan) and all(isinstance(s, BudgetStep) for s in plan.steps)
    assert acc.plans == (plan,) and plan.mechanism == res.mechanism == name
    assert plan.currency == acc.currency and plan.composition == acc.composition and plan.epsilon == 0.7
    assert plan.budget == acc.budget and plan.total == pytest.approx(acc.budget, rel=1e-12, abs=0)
    assert all(s.cost >= 0 and math.isfinite(s.cost) for s in plan.steps)
    assert acc.spent == pytest.approx(acc.budget, rel=1e-9)  # and the run spent what it planned
    json.dumps(plan.to_dict())  # plain values, for the report
    with pytest.raises(AttributeError):  # frozen
        plan.budget = 1.0


def test_plans_name_their_steps_and_match_the_ledger_where_fixed(results):
    mst = results["mst"]
    d = len(DOM)
    assert [(s.mechanism, s.releases) for s in mst.plan.steps] == [("gaussian", d), ("exponential", d - 1), ("gaussian", d - 1)]
    ledger = mst.ledger
    assert math.fsum(e.cost for e in ledger[:d]) == pytest.approx(mst.plan.steps[0].cost, rel=1e-12)
    assert all(e.epsilon == pytest.approx(mst.plan.steps[1].epsilon, rel=1e-12) for e in ledger if e.mechanism == "exponential")
    pb = results["privbayes"]
    count, network, tables = pb.plan.steps
    assert count.cost == pytest.approx(pb.info.epsilon_count) and network.cost == pytest.approx(pb.info.epsilon_structure)
    assert tables.cost == pytest.approx(pb.info.epsilon_tables)


def test_record_plan_refuses_a_plan_of_another_currency_or_too_large():
    acc = pj.privacy.Accountant(epsilon=1.0, delta=1e-9)  # zCDP: counts rho
    plan = BudgetPlan.of("x", "epsilon", 1.0, [BudgetStep("all", "laplace", 1.0)], composition="pure", epsilon=1.0, delta=0.0)
    with pytest.raises(ValueError, match="counts rho"):
        acc.record_plan(plan)
    pure = pj.privacy.Accountant(epsilon=0.5)
    with pytest.raises(ValueError, match="more than the budget"):
        pure.record_plan(plan)
    with pytest.raises(TypeError, match="BudgetPlan"):
        pure.record_plan({"budget": 0.5})


def test_one_command_line_run_reports_its_plan(tmp_path, monkeypatch, capsys):
    dom, rec, _ = cli.random_bayes_net_data(3, 300, seed=1)
    monkeypatch.chdir(tmp_path)
    np.savetxt("t.csv", rec, delimiter=",", fmt="%d", header=",".join(dom), comments="")
    (tmp_path / "d.json").write_text(json.dumps(dom))
    code = cli.main(["run", "--seed", "0", "--data", "t.csv", "--domain", "d.json", "-m", "mst", "-e", "1", "--engine-iters", "10",
                     "--option", "select_iters=5", "--quiet", "--report", "r.json"])
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "r.json").read_text())
    plan = report["plan"]
    assert plan["mechanism"] == "mst" and plan["currency"] == "rho" and len(plan["steps"]) == 3
    assert math.fsum(s["cost"] for s in plan["steps"]) == pytest.approx(report["privacy"]["rho_budget"], rel=1e-12)
    assert report["info"]["engine_iters"] == 10 and report["info"]["select_iters"] == 5
