"""MWEM (Hardt, Ligett & McSherry, NIPS 2012, Algorithm 1) and MWEM+PGM (McKenna, Sheldon & Miklau, ICML 2019,
Section 6): budget anchors, exact ledger, size cap, both arms.

Every run here shares one small dataset, workload and round count, so the engine's compiled programs
(one per model structure and measurement layout) are reused from run to run.
"""

import importlib
import math

import jax
import networkx as nx
import numpy as np
import pytest
from conftest import chain_dataset

import pgmjax as pj
mw = importlib.import_module("pgmjax.mechanisms.multiplicative_weights.front_end")  # where mwem reads mw_guard, mw_replay
from pgmjax.mechanisms.original_estimates import FactoredTable
from pgmjax.mechanisms.multiplicative_weights import DEFAULT_MAX_TABLE_CELLS, hypothetical_model_size, mw_update, mwem, mwem_budget

SIZES = {"a": 4, "b": 3, "c": 5, "d": 2, "e": 3, "f": 4}
AB, BC, ABC = ("a", "b"), ("b", "c"), ("a", "b", "c")
T = 3
# Round caps are i/T of this: 28 cells in round 1 (AB or BC fit, ABC's 69-cell model does not),
# 56 in round 2, 84 in round 3 (ABC fits).
CAP_MB = 84 * 8 / 2**20


@pytest.fixture(scope="module")
def data():
    """6 attributes, 2000 records, each attribute noisily copying the previous one (a chain)."""
    return chain_dataset(SIZES)


def workload(domain):
    # Prefix on "c": in query mode the candidates are prefix ranges, as in the ICML 2019 benchmark.
    return pj.Workload.benchmark(domain, [AB, BC, ABC], numeric=["c"])


CONFIGS = {
    "laplace-marginal": dict(noise="laplace", selection="marginal", bounded=False),
    "gaussian-marginal": dict(noise="gaussian", delta=1e-9, selection="marginal", bounded=False),
    "laplace-query": dict(noise="laplace", selection="query", bounded=True),
    "gaussian-query": dict(noise="gaussian", delta=1e-9, selection="query", bounded=True),
}
_RUNS = {}


def run(data, name, seed=0, **extra):
    """Run (once per argument set) a configuration on the shared data."""
    key = (name, seed, tuple(sorted(extra.items())))
    if key not in _RUNS:
        kw = dict(CONFIGS[name], epsilon=1.0, rounds=T, max_model_mb=CAP_MB, engine_iters=100, mw_iters=30) | extra
        eps = kw.pop("epsilon")
        _RUNS[key] = mwem(data, eps, key=jax.random.key(seed), workload=workload(data.domain), **kw)
    return _RUNS[key]


# --------------------------------------------------------------------------------------------------
# Budget
# --------------------------------------------------------------------------------------------------


def test_budget_anchors_adult():
    # Anchor values computed by hand for the marginal version of private-pgm's mwem+pgm.py: Adult, d = T = 14,
    # eps = 1, delta = 1e-9, alpha = 0.9, unbounded.
    g = mwem_budget(1.0, 14, noise="gaussian", delta=1e-9)
    assert round(g["scale"], 2) == 22.79 and round(g["em_epsilon"], 5) == 0.02925
    assert g["measure_rho"] + g["em_rho"] == pytest.approx(pj.privacy.cdp_rho(1.0, 1e-9) / 14, rel=1e-12)
    assert g["em_epsilon"] ** 2 / 8 == pytest.approx(g["em_rho"], rel=1e-12)  # the EM's zCDP cost
    lap = mwem_budget(1.0, 14, noise="laplace")
    assert round(lap["scale"], 2) == 15.56 and round(lap["em_epsilon"], 6) == 0.007143
    assert lap["scale"] == pytest.approx(14 / 0.9) and lap["stddev"] == pytest.approx(math.sqrt(2) * 14 / 0.9)
    assert lap["measure_epsilon"] + lap["em_epsilon"] == pytest.approx(1 / 14, rel=1e-12)
    # Replace-one neighbours double the L1 sensitivity and multiply the L2 one by sqrt(2).
    assert mwem_budget(1.0, 14, noise="laplace", bounded=True)["scale"] == pytest.approx(2 * lap["scale"])
    assert mwem_budget(1.0, 14, noise="gaussian", delta=1e-9, bounded=True)["scale"] == pytest.approx(math.sqrt(2) * g["scale"])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ledger_spends_exactly_the_budget(data, name):
    res = run(data, name)
    acc, ledger, plan = res.accountant, res.ledger, res.plan
    b = {"em_epsilon": plan.steps[0].epsilon, "scale": plan.steps[1].scale}  # the typed plan: selection, then measurement
    assert acc.spent == acc.budget and acc.plans == (plan,) and plan.total == pytest.approx(acc.budget, rel=1e-12)
    assert [e.mechanism for e in ledger] == ["exponential", CONFIGS[name]["noise"]] * T
    for e in ledger[0::2]:  # every EM draw at eps_EM, scoring with the right sensitivity
        assert e.epsilon == pytest.approx(b["em_epsilon"], rel=1e-12)
        assert e.sensitivity == res.info.em_sensitivity
    for e, m in zip(ledger[1::2], res.measurements):  # the last one spends the rest: equal up to rounding
        assert e.scale == pytest.approx(b["scale"], rel=1e-9)
        want_std = e.scale * (math.sqrt(2) if CONFIGS[name]["noise"] == "laplace" else 1.0)
        # The measurement carries the noise's std: for discrete Laplace, b rounded up to a rational (2^-20).
        np.testing.assert_allclose(m.stddev, want_std, rtol=2**-20)
        assert m.stddev >= want_std * (1 - 1e-12)
    if CONFIGS[name]["selection"] == "marginal":
        assert res.info.em_sensitivity == 1.0  # ||mu_C(D) - v||_1, add/remove one record
    else:
        assert res.info.em_sensitivity == 1.0  # one 0/1 counting query, in both neighbour conventions
        assert ledger[1].sensitivity == 1.0


def test_query_selection_measures_one_workload_row(data):
    res = run(data, "laplace-query")
    w = {q.clique: q for q in workload(data.domain)}
    for m, entry in zip(res.measurements, res.info.log):
        assert m.rows == 1 and m.kind == "kron"  # one row, kept factored (one 1 x n_a matrix per attribute)
        wq = w[m.clique]
        rows = tuple(data.domain[a] if mat is None else mat.shape[0] for a, mat in zip(wq.clique, wq.matrices))
        full = np.eye(int(np.prod(rows)))[entry["row"]].reshape(rows)
        # the measured row, applied to any table, equals that row of the Kronecker workload query
        table = np.random.default_rng(0).random(data.domain.shape_of(m.clique))
        np.testing.assert_allclose(m.answer(table), [(wq.apply(table) * full).sum()])
        assert all(set(np.unique(f)) <= {0.0, 1.0} for f in m.query)


# --------------------------------------------------------------------------------------------------
# Selection, cap, accuracy
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CONFIGS))
def test_model_size_cap_never_exceeded(data, name):
    res = run(data, name)
    log = res.info.log
    assert log[0]["excluded"] == [ABC]  # the cap is active: the 3-way clique cannot enter in round 1
    # EM candidates in round 1: the two 2-way marginals, or their workload rows (AB: 4 x 3 cells, BC: 3 x 5 prefixes)
    assert log[0]["candidates"] == (2 if CONFIGS[name]["selection"] == "marginal" else 12 + 15)
    for i, entry in enumerate(log, start=1):
        assert entry["cap_mb"] == pytest.approx(CAP_MB * i / T)
        assert entry["model_mb"] <= entry["cap_mb"] * (1 + 1e-12)
    final = 8 * sum(data.domain.size(c) for c in res.model.cliques) / 2**20
    assert final == log[-1]["model_mb"] <= CAP_MB


def test_huge_epsilon_argmax_selection_and_exact_marginals(data):
    res = mwem(data, 1e6, key=jax.random.key(3), workload=workload(data.domain), rounds=T, max_model_mb=CAP_MB,
               engine_iters=1000, mw_iters=5)
    sel = res.info.selected
    # Round 1: the estimate is empty, quality N - n_C: the smaller fitting marginal wins. Round 2: AB is
    # known up to noise (quality ~ -12), BC is not, ABC does not fit yet: BC.
    assert sel[:2] == [AB, BC]
    for c in set(sel):  # within one record per cell, and 0.1% of the records in all (the noise std is 5e-6)
        fit, true = res.model.marginal(c), data.marginal(c)
        np.testing.assert_allclose(fit, true, atol=1.0)
        assert np.abs(fit - true).sum() < 1e-3 * len(data)
    assert res.model.total == pytest.approx(len(data), rel=1e-5)


# --------------------------------------------------------------------------------------------------
# The original arm: multiplicative weights
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("row", [[1.0, 0, 0, 0], [0, 1.0, 1.0, 0]])
def test_mw_update_moves_the_answer_toward_the_measurement(row):
    rng = np.random.default_rng(0)
    p = rng.random((4, 3))
    p /= p.sum()
    total, attrs, w = 500.0, ("a", "b"), np.array(row)
    q0 = total * w @ p.sum(axis=1)
    answers = []
    for m in sorted([0.0, 0.5 * q0, q0 - 1, q0, q0 + 1, 2 * q0, total]):
        meas = pj.Measurement(("a",), [m], stddev=1.0, query=w[None, :])
        p1 = mw_update(p, attrs, [meas], total)
        q1 = total * w @ p1.sum(axis=1)
        assert p1.sum() == pytest.approx(1.0) and np.all(p1 > 0)
        assert abs(q1 - m) <= abs(q0 - m) + 1e-9 and np.sign(q1 - q0) == np.sign(m - q0)  # toward m, never past
        answers.append(q1)
    assert np.all(np.diff(answers) > 0)  # monotone in m - q(A)


def test_original_arm_fits_the_same_measurements(data):
    res = run(data, "laplace-marginal")
    mw_table = res.original
    assert isinstance(mw_table, FactoredTable) and res.original_error is None
    comps = {g for g in mw_table.tables if len(g) > 1}
    assert comps == {c for c, _ in res.info.mw_components}
    uniform = FactoredTable(data.domain, {}, mw_table.total)
    for m in res.measurements:  # MW moved every measured marginal toward its noisy answer
        fit, flat = m.answer(mw_table.marginal(m.clique)), m.answer(uniform.marginal(m.clique))
        assert np.linalg.norm(fit - m.y) < 0.5 * np.linalg.norm(flat - m.y)


def test_both_arms_end_to_end(data):
    res = run(data, "laplace-marginal")
    assert isinstance(res.model, pj.GraphicalModel) and isinstance(res.original, FactoredTable)
    assert len(res.synthetic) == round(res.model.total)
    assert set(res.arms()) == {"pgm", "original"}
    measured = pj.Workload.marginals(data.domain, sorted(set(res.info.selected)))
    uniform = pj.metrics.workload_error(measured, data, FactoredTable(data.domain, {}, len(data)))
    for arm in res.arms().values():
        assert pj.metrics.workload_error(measured, data, arm) < 0.5 * uniform
    assert res.info.seconds["mw"] < 5.0


def test_reproducible_from_the_key(data):
    first = run(data, "gaussian-marginal")
    again = mwem(data, 1.0, key=jax.random.key(0), workload=workload(data.domain), rounds=T, max_model_mb=CAP_MB,
                 engine_iters=100, mw_iters=30, **CONFIGS["gaussian-marginal"])
    assert again.info.selected == first.info.selected
    for m1, m2 in zip(first.measurements, again.measurements):
        np.testing.assert_array_equal(m1.y, m2.y)
    assert again.ledger == first.ledger
    np.testing.assert_array_equal(again.model.marginal(ABC), first.model.marginal(ABC))
    np.testing.assert_array_equal(again.original.marginal(ABC), first.original.marginal(ABC))
    np.testing.assert_array_equal(again.synthetic.records, first.synthetic.records)
    other = run(data, "gaussian-marginal", seed=1)
    assert not all(np.array_equal(m1.y, m2.y) for m1, m2 in zip(first.measurements, other.measurements))


# --------------------------------------------------------------------------------------------------
# Memory guard
# --------------------------------------------------------------------------------------------------


def test_memory_guard_on_the_adult_domain_allocates_nothing():
    sizes = {"age": 85, "workclass": 9, "fnlwgt": 100, "education-num": 16, "marital-status": 7, "occupation": 15,
             "relationship": 6, "race": 5, "sex": 2, "capital-gain": 100, "capital-loss": 100, "hours-per-week": 99,
             "native-country": 42, "income>50K": 2}
    dom = pj.Domain(sizes)
    cliques = [dom.canonical(c) for c in pj.datasets.ADULT_CLIQUES]
    comps, message = mw.mw_guard(dom, cliques, DEFAULT_MAX_TABLE_CELLS)
    g = nx.Graph()
    for c in cliques:
        g.add_nodes_from(c)
        g.add_edges_from(zip(c, c[1:]))
    biggest = max(nx.connected_components(g), key=lambda s: dom.size(tuple(s)))
    cells = dom.size(tuple(biggest))
    assert cells > 10**15  # a full table over it would need petabytes: returning at all proves it was not built
    assert message.startswith("MWEM infeasible without the engine")
    assert f"{cells:,} cells" in message and str(dom.canonical(biggest)) in message
    assert "TiB" in message and "max_table_cells=268,435,456" in message
    assert mw.mw_guard(dom, cliques[:1], DEFAULT_MAX_TABLE_CELLS)[1] is None  # one 3-way table fits


def test_memory_guard_in_the_front_end(data, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the MW table must not be built when it is over the cap")

    monkeypatch.setattr(mw, "mw_replay", fail)
    res = run(data, "laplace-marginal", max_table_cells=10)
    assert res.original is None and "MWEM infeasible without the engine" in res.original_error
    big, cells = max(res.info.mw_components, key=lambda x: x[1])
    assert f"component {big}" in res.original_error and f"{cells:,} cells" in res.original_error
    assert res.model is not None and res.accountant.spent == res.accountant.budget  # the +PGM arm is unaffected
    assert set(res.arms()) == {"pgm"}


# --------------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(epsilon=0.0), ValueError, "epsilon must be positive"),
        (dict(epsilon=-1.0), ValueError, "epsilon must be positive"),
        (dict(epsilon=float("nan")), ValueError, "epsilon must be a number"),
        (dict(epsilon=True), TypeError, "epsilon must be a real number"),
        (dict(rounds=0), ValueError, "rounds must be at least 1"),
        (dict(rounds=2.5), TypeError, "rounds must be an integer"),
        (dict(noise="cauchy"), ValueError, "unknown noise 'cauchy'"),
        (dict(noise="gaussian"), ValueError, r"Gaussian noise gives \(epsilon, delta\)-DP"),
        (dict(delta=1e-6), ValueError, r"pure epsilon-DP \(delta = 0\) takes delta=0"),  # Laplace: a delta is refused, not ignored
        (dict(noise="gaussian", delta=1.5), ValueError, r"delta must be in \(0, 1\)"),
        (dict(selection="cells"), ValueError, "unknown selection 'cells'"),
        (dict(selection="query"), ValueError, "bounded=True"),
        (dict(alpha=1.0), ValueError, r"alpha .* must be in \(0, 1\)"),
        (dict(max_model_mb=1e-6), ValueError, "no workload clique fits the round-1 model-size cap"),
        (dict(engine_iters=0), ValueError, "engine_iters must be at least 1"),
        (dict(key=0), TypeError, "key must be one jax.random key"),
        (dict(workload=[("a", "zz")]), ValueError, "'zz' is not in the domain"),
        (dict(fit_options={"iters": 5}), TypeError, "fit_options must be a pgmjax.FitOptions"),
    ],
)
def test_bad_input_raises_before_running(data, kwargs, error, match):
    kw = dict(epsilon=1.0, key=jax.random.key(0)) | kwargs
    eps = kw.pop("epsilon")
    with pytest.raises(error, match=match):
        mwem(data, eps, **kw)


def test_data_must_be_a_dataset():
    with pytest.raises(TypeError, match="data must be a pgmjax.Dataset"):
        mwem(np.zeros((3, 2)), 1.0, key=jax.random.key(0))


def test_hypothetical_model_size_matches_the_fitted_model(data):
    res = run(data, "laplace-marginal")
    sizes = [hypothetical_model_size(data.domain, [c]) for c in (AB, BC, ABC)]
    assert [round(s * 2**20 / 8) for s in sizes] == [26, 28, 69]  # clique cells + the other attributes' singletons
    assert hypothetical_model_size(data.domain, res.model.cliques) == res.info.log[-1]["model_mb"]


def test_the_result_s_info_is_one_frozen_mwem_info():
    from pgmjax.cli.summary import jsonable
    from pgmjax.mechanisms import MWEMInfo, registry

    data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (300, 3)), {"a": 3, "b": 4, "c": 2})
    res = mwem(data, 1.0, key=jax.random.key(0), engine_iters=20, mw_iters=5)
    assert isinstance(res.info, MWEMInfo) and registry.get("mwem").info is MWEMInfo
    assert MWEMInfo.published_names() == ("selection", "noise", "bounded", "rounds", "alpha", "epsilon", "delta",
                                          "em_sensitivity", "max_model_mb", "log", "selected", "total", "seconds",
                                          "public")
    assert set(MWEMInfo.private_names()) == {"resumed_from", "mw_components", "mw_table_cells"}
    assert res.info.resumed_from is None and len(res.info.selected) == res.info.rounds == 3
    assert set(jsonable(res.info.published_values())) == set(MWEMInfo.published_names())


def test_rounds_before_the_last_stop_when_converged_and_the_last_runs_all_its_iterations(data, monkeypatch):
    """A round before the last stops once converged (ROUND_TOL: its model only scores the next selection); the last
    round's fit, the release's model, runs all engine_iters; a tol the caller gives holds for every round."""
    rounds_mod = importlib.import_module("pgmjax.mechanisms.multiplicative_weights.rounds")
    from pgmjax.mechanisms.steps import ROUND_TOL

    fits = []
    real = rounds_mod.estimate

    def recorded(domain, measurements, iters, **kw):
        fitted = real(domain, measurements, iters=iters, **kw)
        fits.append({"iters": iters, "ran": fitted.report.iterations, "tol": kw.get("tol")})
        return fitted

    monkeypatch.setattr(rounds_mod, "estimate", recorded)
    kw = dict(CONFIGS["gaussian-marginal"], rounds=T, max_model_mb=CAP_MB, engine_iters=1000, mw_iters=5,
              original=False, synthetic=False)
    mwem(data, 1.0, key=jax.random.key(1), workload=workload(data.domain), **kw)
    assert len(fits) == T
    assert [f["tol"] for f in fits] == [ROUND_TOL] * (T - 1) + [None]
    assert any(f["ran"] < f["iters"] for f in fits[:-1])  # converged rounds stop early
    assert fits[-1]["ran"] == fits[-1]["iters"]  # the release's fit runs all its iterations
    fits.clear()
    mwem(data, 1.0, key=jax.random.key(1), workload=workload(data.domain), fit_options=pj.FitOptions(tol=1e-2), **kw)
    assert [f["tol"] for f in fits] == [1e-2] * T
