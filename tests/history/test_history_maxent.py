"""pgmjax.history.maxent: closed forms H1-5 and H1-6 (worked out by hand), and brute force over the full table."""

import doctest
import importlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import pgmjax as pj
from conftest import count_compiles
from pgmjax.history import maxent

DOM2 = pj.Domain({"a": 2, "b": 2})
F1 = np.array([[1, 1, 0, 0.0]])


def _cells(model):
    return model.marginal(("a", "b")).ravel() / model.total


# ---------------------------------------------------------------------------------------------- H1-5
@pytest.mark.parametrize("beta,w,p", [
    (math.inf, math.log(7 / 3), [0.35, 0.35, 0.15, 0.15]),
    (1.0, math.log(7 / 3), [0.35, 0.35, 0.15, 0.15]),
    (0.5, 0.5, [0.31122967, 0.31122967, 0.18877033, 0.18877033]),
    (0.2, 0.2, [0.274917, 0.274917, 0.225083, 0.225083]),
])
def test_h1_5_one_constraint_uniform_prior(beta, w, p):
    m = pj.Measurement(("a", "b"), [0.7], stddev=1.0, query=F1)
    model, report = maxent(DOM2, [m], beta=beta, total=1.0, report=True)
    np.testing.assert_allclose(_cells(model), p, atol=5e-7 if beta == 0.2 else 5e-9)
    np.testing.assert_allclose(report.info["w"], [w], atol=1e-7)
    assert report.info["converged"] and abs(report.info["gap"]) < 1e-8
    assert list(report.info["active"]) == ([0] if beta < 1 else [])


def test_h1_5_counts_and_alpha():
    # n = 1000, answer 700, Laplace b = 20, alpha = 0.01 -> beta = 0.01 * 1000 / 20 = 0.5.
    m = pj.Measurement(("a", "b"), [700.0], stddev=20 * math.sqrt(2), query=F1, noise="laplace")
    model, report = maxent(DOM2, [m], alpha=0.01, total=1000, report=True)
    np.testing.assert_allclose(report.info["beta"], [0.5])
    np.testing.assert_allclose(model.marginal(("a", "b")).ravel(), [311.22967, 311.22967, 188.77033, 188.77033], atol=5e-5)


@pytest.mark.parametrize("beta,w,p", [
    (math.inf, 1.25276297, [0.525, 0.175, 0.2, 0.1]),
    (1.0, 1.0, [0.48330374, 0.16110125, 0.23706334, 0.11853167]),
])
def test_h1_5_prior(beta, w, p):
    m = pj.Measurement(("a", "b"), [0.7], stddev=1.0, query=F1)
    prior = {("a", "b"): np.array([[0.3, 0.1], [0.4, 0.2]])}
    model, report = maxent(DOM2, [m], beta=beta, total=1.0, prior=prior, report=True)
    np.testing.assert_allclose(_cells(model), p, atol=5e-8)
    np.testing.assert_allclose(report.info["w"], [w], atol=5e-8)
    if beta == 1.0:
        assert abs(F1[0] @ _cells(model) - 0.64440498) < 5e-8
        assert abs(report.info["residual"][0] - (0.7 - 0.64440498)) < 5e-8


# ---------------------------------------------------------------------------------------------- H1-6
F3 = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 0.0]])
PI3 = [0.6, 0.7, 0.5]


def _three():
    return [pj.Measurement(("a", "b"), [PI3[i]], stddev=1.0, query=F3[i:i + 1]) for i in range(3)]


def test_h1_6_independence_when_the_third_row_is_ignored():
    model, report = maxent(DOM2, _three(), beta=np.array([np.inf, np.inf, 0.0]), total=1.0, report=True)
    np.testing.assert_allclose(_cells(model), [0.42, 0.18, 0.28, 0.12], atol=1e-8)
    assert report.info["w"][2] == 0.0


def test_h1_6_box_residuals_and_gap():
    model, report = maxent(DOM2, _three(), beta=np.array([2.0, 2.0, 0.3]), total=1.0, report=True)
    info = report.info
    np.testing.assert_allclose(_cells(model), [0.43525868, 0.16474132, 0.26474132, 0.13525868], atol=1e-7)
    np.testing.assert_allclose(info["w"], [0.19718734, 0.67156406, 0.3], atol=1e-7)
    np.testing.assert_allclose(info["residual"], [0, 0, 0.06474132], atol=1e-7)
    assert abs(info["dual_value"] - 0.124135454) < 1e-8 and abs(info["primal_value"] - 0.124135454) < 1e-8
    assert 0 <= info["gap"] <= 1e-9 and list(info["active"]) == [2] and info["converged"]
    # The primal value of the returned p, computed directly: KL(p || uniform) + sum beta |pi - p[f]|.
    p = _cells(model)
    primal = np.sum(p * np.log(4 * p)) + np.sum(np.array([2.0, 2.0, 0.3]) * np.abs(np.array(PI3) - F3 @ p))
    assert abs(primal - info["primal_value"]) < 1e-9
    assert report.loss == info["primal_value"]  # the report's loss is the primal value
    plain = maxent(DOM2, _three(), beta=np.array([2.0, 2.0, 0.3]), total=1.0)  # report=False: the model alone
    assert isinstance(plain, pj.GraphicalModel)


def test_h1_6_all_constraints_met():
    model, report = maxent(DOM2, _three(), beta=50.0, total=1.0, report=True)
    np.testing.assert_allclose(_cells(model), [0.5, 0.1, 0.2, 0.2], atol=1e-7)
    assert report.info["gap"] < 1e-6 and np.all(np.abs(report.info["residual"]) < 1e-8)


# ---------------------------------------------------------------------------------------------- brute force
def _full_features(dom, ms):
    """Every row as a function on the full table (cells in domain order)."""
    out = []
    for m in ms:
        axes = [dom.attributes.index(a) for a in m.clique]
        eye = np.eye(dom.size(m.clique)).reshape((-1, *dom.shape_of(m.clique)))
        rows = np.stack([m.answer(e) for e in eye], axis=1)  # (rows, cells of the clique)
        rows = rows.reshape((m.rows, *dom.shape_of(m.clique)))
        perm = np.argsort(axes)
        rows = np.transpose(rows, (0, *(1 + perm)))
        shape = [m.rows] + [dom[a] if a in m.clique else 1 for a in dom.attributes]
        out.append(np.broadcast_to(rows.reshape(shape), (m.rows, *dom.shape)).reshape(m.rows, -1))
    return np.vstack(out)


def _brute_force(F, pi, beta, p0):
    """max_{|w| <= beta} w.pi - log sum p0 exp(F^T w) over the full table (L-BFGS-B, float64)."""
    logp0 = np.log(p0)

    def neg(w):
        t = logp0 + F.T @ w
        lz = np.logaddexp.reduce(t)
        p = np.exp(t - lz)
        return -(w @ pi - lz), -(pi - F @ p)

    res = scipy.optimize.minimize(neg, np.zeros(F.shape[0]), jac=True, method="L-BFGS-B",
                                  bounds=[(-b, b) for b in beta], options=dict(ftol=1e-16, gtol=1e-13, maxiter=20000))
    t = logp0 + F.T @ res.x
    return np.exp(t - np.logaddexp.reduce(t)), -res.fun


@pytest.mark.parametrize("alpha", [0.002, 0.02, 0.2])
def test_maxent_matches_brute_force_on_a_small_domain(alpha):
    rng = np.random.default_rng(11)
    dom = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 2})
    truth = rng.dirichlet(np.ones(dom.size()) * 2).reshape(dom.shape) * 1000
    data_marg = lambda c: truth.sum(axis=tuple(i for i, a in enumerate(dom.attributes) if a not in c))  # noqa: E731
    ms = [
        pj.Measurement(("a", "b"), data_marg(("a", "b")).ravel() + rng.normal(0, 5, 6), stddev=5.0),
        pj.Measurement(("b", "c"), rng.normal(size=(3, 6)) @ data_marg(("b", "c")).ravel() + rng.normal(0, 5, 3),
                       stddev=5.0, query=rng.normal(size=(3, 6))),
        pj.Measurement(("d", "c"), np.zeros(2), stddev=np.array([3.0, 6.0]),
                       query=(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0], [0.0, 1.0]]))),
    ]
    # Answers of the Kronecker rows from the truth (query order d, c), plus noise.
    dc = np.transpose(data_marg(("c", "d")))
    ms[2] = pj.Measurement(("d", "c"), ms[2].answer(dc) + rng.normal(0, 3, 2), stddev=np.array([3.0, 6.0]), query=ms[2].query)
    # The (b, c) answers above used random rows, not the measurement's; recompute them consistently.
    ms[1] = pj.Measurement(("b", "c"), ms[1].answer(data_marg(("b", "c"))) + rng.normal(0, 5, 3), stddev=5.0, query=ms[1].query)
    prior = {"a": np.array([0.3, 0.7]), "b": np.array([0.2, 0.5, 0.3])}
    model, report = maxent(dom, ms, alpha=alpha, total=1000.0, prior=prior, report=True)
    F = _full_features(dom, ms)
    y = np.concatenate([m.y for m in ms])
    beta = alpha * 1000.0 / (np.concatenate([m.row_stddev() for m in ms]) / math.sqrt(2))
    p0 = np.einsum("a,b,c,d->abcd", prior["a"], prior["b"], np.full(2, 0.5), np.full(2, 0.5)).ravel()
    p, dual = _brute_force(F, y / 1000.0, beta, p0)
    full = model.marginal(dom.attributes).ravel() / 1000.0
    np.testing.assert_allclose(full, p, atol=1e-6)
    assert abs(report.info["dual_value"] - dual) < 1e-8
    assert report.info["converged"] and 0 <= report.info["gap"] < 1e-6
    # Answers of the model to the past queries are p[f] = pi - residual.
    np.testing.assert_allclose(F @ full, y / 1000.0 - report.info["residual"], atol=1e-8)


def test_no_recompilation_and_synthetic_data():
    ms = _three()
    maxent(DOM2, ms, beta=np.array([2.0, 2.0, 0.3]), total=1.0)
    other = [pj.Measurement(m.clique, m.y * 0.9, stddev=2.0, query=m.query) for m in ms]
    with count_compiles() as c:
        model = maxent(DOM2, other, alpha=0.5, total=1000.0)
    assert c.count == 0
    data = model.synthetic_data(key=jax.random.key(0))
    assert len(data) == 1000 and data.domain == DOM2


def test_float32_runs_and_reports_its_gap():
    model, report = maxent(DOM2, _three(), beta=np.array([2.0, 2.0, 0.3]), total=1.0, dtype=jnp.float32, tol=1e-5,
                           report=True)
    np.testing.assert_allclose(_cells(model), [0.43525868, 0.16474132, 0.26474132, 0.13525868], atol=1e-5)
    assert report.info["gap"] < 1e-4


def test_input_errors():
    ms = _three()
    with pytest.raises(ValueError, match="exactly one of alpha"):
        maxent(DOM2, ms, total=1.0)
    with pytest.raises(ValueError, match="exactly one of alpha"):
        maxent(DOM2, ms, alpha=1.0, beta=1.0, total=1.0)
    with pytest.raises(ValueError, match="beta must be a non-negative"):
        maxent(DOM2, ms, beta=np.array([1.0, -1.0, 1.0]), total=1.0)
    with pytest.raises(ValueError, match="alpha must be positive"):
        maxent(DOM2, ms, alpha=0.0, total=1.0)
    with pytest.raises(ValueError, match="prior table on"):
        maxent(DOM2, ms, alpha=1.0, total=1.0, prior={("a", "b"): np.ones((2, 2))})
    with pytest.raises(ValueError, match="iters must be a positive integer"):
        maxent(DOM2, ms, alpha=1.0, total=1.0, iters=0)


@pytest.mark.parametrize("name", ["maxent", "gibbs"])
def test_module_docstring_examples(name):
    mod = importlib.import_module("pgmjax.history." + name)
    globs = dict(vars(mod), np=np, jax=jax, pj=pj, math=math)
    result = doctest.testmod(mod, extraglobs=globs, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_h1_7b_sgd_gibbs_learner_reaches_the_exact_solution():
    # The paper's stochastic learner (section 4.2) on H1-6 with beta = (2, 2, 0.3): lr 1e-3, 2e5 sweeps,
    # 64 chains averaged per step; p_w from its final w (exact, junction tree) within 0.01 of the exact dual.
    model, report = maxent(DOM2, _three(), beta=np.array([2.0, 2.0, 0.3]), total=1.0, solver="sgd_gibbs", lr=1e-3,
                           iters=200_000, chains=64, key=jax.random.key(0), report=True)
    np.testing.assert_allclose(_cells(model), [0.43525868, 0.16474132, 0.26474132, 0.13525868], atol=0.01)
    assert report.info["solver"] == "sgd_gibbs" and report.info["gap"] < 0.05
    with pytest.raises(ValueError, match="needs key="):
        maxent(DOM2, _three(), beta=1.0, total=1.0, solver="sgd_gibbs")
    with pytest.raises(ValueError, match="solver must be"):
        maxent(DOM2, _three(), beta=1.0, total=1.0, solver="newton")
