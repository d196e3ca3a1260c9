"""pgmjax.history: kernel PCA, cross-validation, the ridge (CG) form and the prior (Chen, Zhou & Bhowmick 2012).

Deterministic reference values H1-1 to H1-4 (worked out independently with NumPy); the rest are checks
against brute force over the full table (dense Q, constrained GLS), alternative forms (eigen vs ridge vs GP
formula) and Theorem 4 by simulation.
"""

import doctest
import importlib
import math

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.history import kernel_pca, kernel_ridge, prior_from_marginals, select_alpha, shrink_weights
from pgmjax.history import rows as rows_mod
from pgmjax.history.cv import cv_curve, make_folds

DOM2 = pj.Domain({"A": 2, "B": 2})
Q4 = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [1, 1, 1, 0.0]])
Y4 = np.array([52, 47, 57, 68.0])
V4 = np.array([4, 4, 9, 16.0])


def _rows(n):
    return [pj.Measurement(("A", "B"), Y4[i:i + 1], stddev=math.sqrt(V4[i]), query=Q4[i:i + 1]) for i in range(n)]


def _cell(i):
    return (("A", "B"), np.eye(4)[i])


# ---------------------------------------------------------------------------------------------- H1-1, H1-2
def test_h1_1_full_rank_equals_constrained_gls():
    fit = kernel_pca(DOM2, _rows(4), total=100)
    np.testing.assert_allclose(fit.lam2, [0.129195, 0.032024, 0.003278], atol=5e-7)
    for q, value, var in [(np.eye(4)[0], 41.5, 27.0), (np.eye(4)[3], 32.0, 16.0), (np.array([1, 1, 0, 0.0]), 52.5, 2.0)]:
        est = fit.answer((("A", "B"), q))
        np.testing.assert_allclose(est.value, [value], atol=1e-9)
        np.testing.assert_allclose(est.variance, [var], atol=1e-9)
        assert est.residual_norm2[0] < 1e-12
    # Brute force: min (y - Qx)^T S^-1 (y - Qx) s.t. sum x = 100, by the KKT system.
    Si = np.diag(1 / V4)
    kkt = np.block([[Q4.T @ Si @ Q4, np.ones((4, 1))], [np.ones((1, 4)), np.zeros((1, 1))]])
    inv = np.linalg.inv(kkt)
    x = (inv @ np.concatenate([Q4.T @ Si @ Y4, [100.0]]))[:4]
    np.testing.assert_allclose(x, [41.5, 11, 15.5, 32], atol=1e-9)
    cov = (inv[:4, :4] @ Q4.T @ Si) @ np.diag(V4) @ (inv[:4, :4] @ Q4.T @ Si).T
    est = fit.answer((("A", "B"), np.eye(4)))
    np.testing.assert_allclose(est.value, x, atol=1e-9)
    np.testing.assert_allclose(est.variance, np.diag(cov), atol=1e-9)
    np.testing.assert_allclose(fit.answer_past(), Q4 @ x, atol=1e-9)


H1_2 = [  # alpha, shrink weights, value, variance, GP posterior variance
    (math.inf, [1, 1], 29.75, 2.75, None),
    (10.0, [0.925926, 0.735294], 28.7309368192, 1.6451486489, 8.3673747277),
    (1.0, [0.111111, 0.027027], 25.2334834835, 0.0078163749, 0.1788663664),
]


@pytest.mark.parametrize("alpha,weights,value,var,post", H1_2)
def test_h1_2_rank_deficient_shrinkage(alpha, weights, value, var, post):
    fit = kernel_pca(DOM2, _rows(3), total=100)
    np.testing.assert_allclose(fit.lam2, [0.125, 1 / 36], rtol=1e-12)
    np.testing.assert_allclose(shrink_weights(fit.lam2, alpha), weights, atol=5e-7)
    est = fit.answer(_cell(0), alpha)
    np.testing.assert_allclose(est.value, [value], atol=1e-9)
    np.testing.assert_allclose(est.variance, [var], atol=1e-9)
    np.testing.assert_allclose(est.residual_norm2, [0.0625], atol=1e-12)
    if post is None:
        assert est.posterior_var is None
    else:
        np.testing.assert_allclose(est.posterior_var, [post], atol=1e-9)
        # The Gaussian-process formula n nu_q + k^T (K + Sigma / alpha^2)^-1 y_tilde, from the dense kernel.
        q = np.vstack([Q4[:3]])
        K = q @ q.T / 4 - np.outer(q.sum(1) / 4, q.sum(1) / 4)
        k = q[:, 0] / 4 - 0.25 * q.sum(1) / 4
        M = K + np.diag(V4[:3]) / alpha**2
        yt = Y4[:3] - 100 * q.sum(1) / 4
        assert abs(100 * 0.25 + k @ np.linalg.solve(M, yt) - value) < 1e-9
        assert abs(alpha**2 * (1 / 4 - 1 / 16 - k @ np.linalg.solve(M, k)) - post) < 1e-9


def test_h1_2_projection_and_limits():
    fit = kernel_pca(DOM2, _rows(3), total=100)
    # The projection q' = [0.75, 0.25, 0.25, -0.25] is estimable: its answer equals e_1's at alpha = inf.
    proj = fit.answer((("A", "B"), np.array([0.75, 0.25, 0.25, -0.25])))
    assert proj.residual_norm2[0] < 1e-12
    np.testing.assert_allclose(proj.value, [29.75], atol=1e-9)
    tiny = fit.answer(_cell(0), 1e-6)
    np.testing.assert_allclose(tiny.value, [25.0], atol=1e-6)  # n E_p0[e_1]
    assert tiny.variance[0] < 1e-12


def test_finite_alpha_shrinks_monotonically_towards_the_prior():
    fit = kernel_pca(DOM2, _rows(4), total=100)
    prior_answer = 100 * 0.25
    alphas = [1e6, 100.0, 10.0, 3.0, 1.0, 0.3, 0.01]
    est = [fit.answer(_cell(0), a) for a in alphas]
    dist = [abs(e.value[0] - prior_answer) for e in est]
    var = [e.variance[0] for e in est]
    assert all(d1 >= d2 for d1, d2 in zip(dist, dist[1:])) and dist[-1] < 0.01 * dist[0]
    assert all(v1 >= v2 for v1, v2 in zip(var, var[1:]))
    np.testing.assert_allclose(est[0].value, fit.answer(_cell(0)).value, atol=1e-5)  # large alpha -> GLS
    bias = [e.shrink_bias_norm2[0] for e in est]
    assert all(b1 <= b2 for b1, b2 in zip(bias, bias[1:]))


# ---------------------------------------------------------------------------------------------- H1-3
def test_h1_3_gram_by_contraction_matches_brute_force():
    dom = pj.Domain({"A": 2, "B": 3, "C": 2})
    prior = {"A": np.array([0.6, 0.4]), "B": np.array([0.2, 0.3, 0.5]), "C": np.array([0.7, 0.3])}
    q1 = pj.Measurement(("A", "B"), [0.0], query=np.array([[1, 0, 2, 0, 1, 1.0]]))
    q2 = pj.Measurement(("B", "C"), [0.0], query=np.array([[1, 1, 0, 1, 2, 0.0]]))
    q3 = pj.Measurement(("A", "C"), [0.0], query=(np.array([[1.0, 0]]), np.array([[0, 1.0]])))
    ms = [q1, q2, q3]
    full = rows_mod.check_prior(dom, prior, "test")
    blocks = [rows_mod.block_of_measurement(dom, m) for m in ms]
    K = rows_mod.gram_matrix(blocks, full)
    nu = np.concatenate([rows_mod.mean(b, full) for b in blocks])
    np.testing.assert_allclose(K, [[1.64, 1.276, 0.216], [1.276, 1.69, 0.09], [0.216, 0.09, 0.18]], atol=1e-12)
    np.testing.assert_allclose(nu, [1.04, 0.99, 0.18], atol=1e-12)
    # Brute force over the 12 cells.
    p = np.einsum("a,b,c->abc", *[full[a] for a in "ABC"])
    f = np.stack([
        np.broadcast_to(q1.query.reshape(2, 3)[:, :, None], (2, 3, 2)),
        np.broadcast_to(q2.query.reshape(3, 2)[None], (2, 3, 2)),
        np.broadcast_to(np.outer([1, 0], [0, 1])[:, None, :], (2, 3, 2)),
    ]).reshape(3, 12)
    np.testing.assert_allclose(K, (f * p.ravel()) @ f.T, atol=1e-12)
    np.testing.assert_allclose(nu, f @ p.ravel(), atol=1e-12)
    uniform = rows_mod.gram_matrix(blocks, rows_mod.uniform_prior(dom))
    np.testing.assert_allclose(uniform, [[7 / 6, 0.75, 0.25], [0.75, 7 / 6, 1 / 6], [0.25, 1 / 6, 0.25]], atol=1e-12)


def test_estimable_query_equals_gls_on_a_random_history(rng):
    dom = pj.Domain({"a": 3, "b": 2, "c": 4})
    prior = {"a": np.array([0.5, 0.3, 0.2]), "c": np.array([0.1, 0.2, 0.3, 0.4])}
    ms = [
        pj.Measurement(("a", "b"), rng.normal(20, 3, 6), stddev=2.0),
        pj.Measurement(("c", "b"), rng.normal(20, 3, 3), stddev=np.array([1.0, 2.0, 3.0]), query=rng.normal(size=(3, 8))),
        pj.Measurement(("a", "c"), rng.normal(20, 3, 2), stddev=1.5, query=(rng.normal(size=(2, 3)), rng.normal(size=(1, 4)))),
    ]
    fit = kernel_pca(dom, ms, total=200, prior=prior)
    Q = np.vstack([_dense_full(dom, m) for m in ms])  # (m, 24) over the full table, axes a, b, c
    y = np.concatenate([m.y for m in ms])
    S = np.concatenate([m.row_stddev() for m in ms]) ** 2
    # Constrained GLS over the full table (minimum-norm x; estimable answers do not depend on the choice).
    kkt = np.block([[Q.T @ (Q / S[:, None]), np.ones((24, 1))], [np.ones((1, 24)), np.zeros((1, 1))]])
    x = (np.linalg.pinv(kkt) @ np.concatenate([Q.T @ (y / S), [200.0]]))[:24]
    q = rng.normal(size=Q.shape[0]) @ Q + 0.7  # in the span of the history (and of the total)
    est = fit.answer((("a", "b", "c"), q))
    assert est.residual_norm2[0] < 1e-9
    np.testing.assert_allclose(est.value, [q @ x], rtol=1e-9)
    np.testing.assert_allclose(fit.answer_past(), Q @ x, rtol=1e-9)


def _dense_full(dom, m):
    b = rows_mod.block_of_measurement(dom, m)
    rows = b.dense_rows()  # (r, *clique shape) in the measurement's order
    full = np.zeros((b.rows, *dom.shape))
    idx = [dom.attributes.index(a) for a in m.clique]
    rows = np.moveaxis(rows, list(range(1, len(idx) + 1)), [1 + i for i in np.argsort(np.argsort(idx))])
    shape = [b.rows] + [dom[a] if a in m.clique else 1 for a in dom.attributes]
    return (full + rows.reshape(shape)).reshape(b.rows, -1)


# ---------------------------------------------------------------------------------------------- H1-4, H1-7a
H1_4_Y = np.array([11.2, 19.8, 18.1, 11.4, 10.5, 10.4, 14.8, 12.7, 27.7, 16.8, 32.8, 24.5])
H1_4_Q = np.vstack([np.eye(8)] + [np.eye(8)[2 * i] + np.eye(8)[2 * i + 1] for i in range(4)])
H1_4_X = np.array([11, 13, 12, 14, 12, 13, 12, 13.0])


def test_h1_4_cross_validation_fixed_folds():
    dom = pj.Domain({"a": 8})
    m = pj.Measurement(("a",), H1_4_Y, stddev=5.0, query=H1_4_Q)
    grid = [math.inf, 30, 10, 5, 3, 2, 1, 0.5, 0.1]
    alpha, table = select_alpha(dom, [m], folds=np.arange(12) % 3, total=100, grid=grid, refine=None)
    cv = dict(zip(table["alpha"], table["cv_mse"]))
    expected = {math.inf: 19.616620, 30: 5.134412, 10: -3.660583, 3: -5.123941, 1: -5.243421, 0.1: -5.257360}
    for a, v in expected.items():
        assert abs(cv[a] - v) < 5e-7, (a, cv[a], v)
    row = table[table["alpha"] == math.inf].iloc[0]
    np.testing.assert_allclose(row[["fold_0", "fold_1", "fold_2"]].to_numpy(float), [8.883889, -2.322778, 52.28875], atol=5e-7)
    row = table[table["alpha"] == 0.1].iloc[0]
    np.testing.assert_allclose(row[["fold_0", "fold_1", "fold_2"]].to_numpy(float), [-6.142731, 4.541852, -14.171203], atol=5e-7)
    assert alpha == 0.1 and len(table) == len(grid)
    fit = kernel_pca(dom, [m], total=100)
    true = {math.inf: 12.708576, 30: 10.222142, 10: 4.192954, 3: 0.973510, 1: 0.695938, 0.1: 0.666951}
    for a, v in true.items():
        assert abs(np.mean((fit.answer_past(a) - H1_4_Q @ H1_4_X) ** 2) - v) < 5e-7
    assert min(true, key=true.get) == alpha


def test_h1_7a_theorem_4_cv_is_unbiased_for_a_fixed_predictor():
    # Fold predictions use only the training rows; held-out answers are redrawn 10,000 times.
    dom = pj.Domain({"a": 8})
    m = pj.Measurement(("a",), H1_4_Y, stddev=5.0, query=H1_4_Q)
    blocks, order = rows_mod.group_blocks(dom, [m])
    prior = rows_mod.uniform_prior(dom)
    nu = rows_mod.mean(blocks[0], prior)
    kt = rows_mod.gram_matrix(blocks, prior) - np.outer(nu, nu)
    folds = make_folds(kt, H1_4_Y - 100 * nu, np.full(12, 5.0), 100 * nu, np.arange(12) % 3)
    truth = H1_4_Q @ H1_4_X
    rng = np.random.default_rng(7)
    for alpha in (math.inf, 3.0):
        for f in folds:
            b = f.predict(alpha)
            true_mse = np.mean((b - truth[f.test]) ** 2)
            c = truth[f.test] + 5.0 * rng.standard_normal((10_000, f.test.size))
            est = np.mean((b - c) ** 2, axis=1) - 25.0
            assert abs(est.mean() - true_mse) < 3 * est.std() / 100, (alpha, est.mean(), true_mse)


def test_select_alpha_random_folds_are_reproducible_and_refined():
    dom = pj.Domain({"a": 8})
    m = pj.Measurement(("a",), H1_4_Y, stddev=5.0, query=H1_4_Q)
    key = jax.random.key(3)
    a1, t1 = select_alpha(dom, [m], folds=4, key=key, total=100)
    a2, t2 = select_alpha(dom, [m], folds=4, key=key, total=100)
    assert a1 == a2 and t1.equals(t2)
    assert len(t1) >= 42 and math.inf in set(t1["alpha"])  # 41 grid points (+ golden refinement) and inf
    assert t1["cv_mse"].min() == t1.loc[t1["alpha"] == a1, "cv_mse"].iloc[0]
    # A history whose CV curve has an interior minimum: the golden-section points lie between grid points.
    rng = np.random.default_rng(5)
    x = np.array([50, 1, 30, 2, 40, 3, 20, 4.0])
    y = H1_4_Q @ x + 3.0 * rng.standard_normal(12)
    m2 = pj.Measurement(("a",), y, stddev=3.0, query=H1_4_Q)
    grid = list(np.logspace(-2, 3, 11))
    a3, t3 = select_alpha(dom, [m2], folds=np.arange(12) % 4, total=150, grid=grid)
    cv_grid = t3[t3["alpha"].isin(grid)]
    i = int(np.argmin(cv_grid["cv_mse"].to_numpy()))
    assert 0 < i < len(grid) - 1 and len(t3) > len(grid) + 1
    assert grid[i - 1] < a3 < grid[i + 1] and t3["cv_mse"].min() <= cv_grid["cv_mse"].min()


# ---------------------------------------------------------------------------------------------- ridge form
def test_ridge_form_matches_eigen_form(rng):
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 3})
    ms = [
        pj.Measurement(("a", "b"), rng.normal(10, 3, 12), stddev=2.0),
        pj.Measurement(("c", "b"), rng.normal(10, 3, 3), stddev=1.5, query=rng.normal(size=(3, 8))),
        pj.Measurement(("d", "a"), rng.normal(10, 3, 2), stddev=1.0, query=(rng.normal(size=(1, 3)), rng.normal(size=(2, 3)))),
        pj.Measurement(("c",), rng.normal(10, 3, 2), stddev=3.0),
    ]
    prior = {"a": np.array([0.2, 0.3, 0.5]), "d": np.array([0.1, 0.6, 0.3])}
    fit = kernel_pca(dom, ms, total=50, prior=prior)
    q = (("a", "c", "d"), rng.normal(size=(2, 18)))
    for alpha in (0.5, 2.0, 20.0):
        rf = kernel_ridge(dom, ms, alpha=alpha, total=50, prior=prior, tol=1e-12)
        e, r = fit.answer(q, alpha), rf.answer(q)
        for name in ("value", "variance", "posterior_var", "bias_norm2"):
            np.testing.assert_allclose(getattr(r, name), getattr(e, name), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(rf.answer_past(), fit.answer_past(alpha), rtol=1e-9)
    # The matrix-free product is the dense centred kernel.
    op = rf.op
    dense = rows_mod.gram_matrix(op.blocks, op.prior) - np.outer(op.nu, op.nu)
    np.testing.assert_allclose(op.matvec(np.eye(op.size)), dense, atol=1e-12)
    with pytest.raises(ValueError, match="alpha must be finite"):
        kernel_ridge(dom, ms, alpha=math.inf, total=50)


def test_conjugate_gradients_solves_every_column_to_its_own_tolerance(rng):
    """Columns of very different norms in one solve: each column's relative residual meets tol, and the
    solution is the dense solve's."""
    from pgmjax.history.ridge import KernelOperator, conjugate_gradients

    dom = pj.Domain({"a": 3, "b": 4, "c": 2})
    ms = [pj.Measurement(("a", "b"), rng.normal(10, 3, 12), stddev=2.0), pj.Measurement(("b", "c"), rng.normal(10, 3, 8))]
    blocks, _ = rows_mod.group_blocks(dom, ms)
    op = KernelOperator.build(blocks, rows_mod.uniform_prior(dom))
    shift = rng.uniform(0.01, 0.1, op.size)
    B = rng.normal(size=(op.size, 4)) * np.array([1e-6, 1.0, 1e3, 0.0])
    result = conjugate_gradients(op, shift, B, tol=1e-10)
    A = op.matvec(np.eye(op.size)) + np.diag(shift)
    np.testing.assert_allclose(result.x, np.linalg.solve(A, B), rtol=1e-7, atol=1e-14)
    for j in range(3):
        assert np.linalg.norm(B[:, j] - A @ result.x[:, j]) <= 1e-10 * np.linalg.norm(B[:, j]) * 1.01
    assert result.converged and result.residual <= 1.01e-10 and not result.x[:, 3].any()
    assert not conjugate_gradients(op, shift, B, tol=1e-14, maxiter=1).converged


# ---------------------------------------------------------------------------------------------- prior
def test_prior_from_marginals_combines_clips_and_floors():
    dom = pj.Domain({"a": 3, "b": 2, "c": 2})
    ms = [pj.Measurement(("a",), [6.0, -2.0, 3.0], stddev=1.0), pj.Measurement(("a",), [8.0, 0.0, 6.0], stddev=2.0),
          pj.Measurement(("b",), [-5.0, 10.0], stddev=1.0)]
    p = prior_from_marginals(dom, ms, floor=0.5)
    a = np.maximum((np.array([6.0, -2, 3]) + np.array([8.0, 0, 6]) / 4) / 1.25, 0.5)
    np.testing.assert_allclose(p["a"], a / a.sum())
    np.testing.assert_allclose(p["b"], [0.5 / 10.5, 10 / 10.5])
    np.testing.assert_allclose(p["c"], [0.5, 0.5])
    with pytest.raises(ValueError, match="not a one-way marginal"):
        prior_from_marginals(dom, [pj.Measurement(("a", "b"), np.zeros(6))])
    with pytest.raises(ValueError, match="floor must be positive"):
        prior_from_marginals(dom, ms, floor=0.0)


def test_prior_from_accountant_release_costs_budget():
    data = pj.Dataset(np.array([[0, 1], [1, 1], [2, 0], [2, 1]]), {"a": 3, "b": 2})
    acc = pj.Accountant(epsilon=1.02)
    ms = acc.measure_many(jax.random.key(0), data, [("a",), ("b",)], epsilon=0.02)
    prior = prior_from_marginals(data.domain, ms)
    assert abs(acc.spent - 0.02) < 1e-12 and abs(acc.remaining - 1.0) < 1e-12
    assert all(np.all(p > 0) and abs(p.sum() - 1) < 1e-12 for p in prior.values())


# ---------------------------------------------------------------------------------------------- errors, docs
def test_input_errors():
    ms = _rows(3)
    with pytest.raises(ValueError, match="history is empty"):
        kernel_pca(DOM2, [], total=100)
    with pytest.raises(ValueError, match="total must be positive"):
        kernel_pca(DOM2, ms, total=-1)
    with pytest.raises(ValueError, match="prior of 'A' must be non-negative and sum to 1"):
        kernel_pca(DOM2, ms, total=100, prior={"A": [0.2, 0.2]})
    with pytest.raises(ValueError, match="prior names 'Z'"):
        kernel_pca(DOM2, ms, total=100, prior={"Z": [1.0]})
    with pytest.raises(ValueError, match="rank_tol"):
        kernel_pca(DOM2, ms, total=100, rank_tol=2.0)
    fit = kernel_pca(DOM2, ms, total=100)
    with pytest.raises(ValueError, match="alpha must be positive"):
        fit.answer(_cell(0), alpha=0.0)
    with pytest.raises(ValueError, match="does not fit the clique"):
        fit.answer((("A", "B"), np.ones(3)))
    with pytest.raises(ValueError, match="needs key="):
        select_alpha(DOM2, ms, folds=3, total=100)
    with pytest.raises(ValueError, match="between 2 and the number of rows"):
        select_alpha(DOM2, ms, folds=5, key=jax.random.key(0), total=100)
    with pytest.warns(UserWarning, match="total not given"):
        fit = kernel_pca(DOM2, [pj.Measurement(("A",), [50.0, 50.0])])
    assert fit.warnings and fit.total == 100.0


@pytest.mark.parametrize("name", [".pca", ".cv", ".rows", ".ridge", ".prior"])
def test_module_docstring_examples(name):
    mod = importlib.import_module("pgmjax.history" + name)
    globs = dict(vars(mod), np=np, jax=jax, pj=pj, math=math, Domain=pj.Domain, Measurement=pj.Measurement)
    result = doctest.testmod(mod, extraglobs=globs, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0
