"""Optimality of the estimators against exact solutions over the full contingency table.

Acceptance criteria checked here:

1. On small problems each method's final loss is within 1e-4 (relative, L2)
   of the optimum of the same problem solved over the full contingency table
   by a generic convex solver; the three methods agree with each other; L1
   within 1e-3.
2. Noise-free measurements of the maximal cliques of a decomposable model
   are reproduced (error < 1e-6 * N in float64).
3. With ``total=None`` the total is the inverse-variance weighted estimate.

The references are computed independently of pgmjax: every measurement is
turned into an explicit matrix acting on the flattened full table
(marginalisation matrix, then the identity, the dense query or
``np.kron`` of the Kronecker factors, rows divided by their stddev). The L2
optimum is found by two different exact QP approaches (SLSQP and an
augmented Lagrangian over bounded least squares, BVLS) that must agree, and
is certified by its Frank-Wolfe duality gap; the L1 optimum is the exact LP
solved by HiGHS (dual simplex and interior point, which must agree).

L1 is minimised through Huber smoothing with continuation; mirror descent
needs many more iterations than L-BFGS there (see ITERS).
"""

from __future__ import annotations

import functools
import itertools

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import optimize  # noqa: E402

import pgmjax as pj  # noqa: E402
from maxent_reference import l1_lp  # noqa: E402

L2_RTOL = 1e-4
L1_RTOL = 1e-3
METHODS = ("mirror_descent", "dual_averaging", "lbfgs")
# Iterations per (method, loss); the problems are tiny, so these are cheap.
ITERS = {
    ("mirror_descent", "l2"): 6000,
    ("dual_averaging", "l2"): 60000,
    ("lbfgs", "l2"): 300,
    ("mirror_descent", "l1"): 100000,
    ("lbfgs", "l1"): 3000,
}
CHUNK = 10000


# --------------------------------------------------------------------------- explicit linear algebra
def marginal_matrix(domain: pj.Domain, clique) -> np.ndarray:
    """``A`` with ``A @ p.ravel()`` = the marginal of ``clique`` (axes in the clique's order, C-order)."""
    shape = domain.shape
    coords = np.unravel_index(np.arange(int(np.prod(shape))), shape)
    sub = tuple(coords[domain.attributes.index(a)] for a in clique)
    rows = np.ravel_multi_index(sub, domain.shape_of(clique))
    a = np.zeros((domain.size(clique), coords[0].size))
    a[rows, np.arange(coords[0].size)] = 1.0
    return a


def query_matrix(m: pj.Measurement, domain: pj.Domain) -> np.ndarray:
    if m.query is None:
        return np.eye(domain.size(m.clique))
    if isinstance(m.query, tuple):
        return functools.reduce(np.kron, m.query)
    return np.asarray(m.query)


def whitened_system(domain: pj.Domain, measurements) -> tuple[np.ndarray, np.ndarray]:
    """``(B, c)`` with the residuals of a full table ``p`` equal to ``B @ p.ravel() - c``."""
    bs, cs = [], []
    for m in measurements:
        w = 1.0 / np.broadcast_to(np.asarray(m.stddev, float), (m.rows,))
        bs.append(w[:, None] * (query_matrix(m, domain) @ marginal_matrix(domain, m.clique)))
        cs.append(w * m.y)
    return np.vstack(bs), np.concatenate(cs)


def loss_of_residual(r: np.ndarray, loss: str) -> float:
    return float(0.5 * r @ r) if loss == "l2" else float(np.abs(r).sum())


def model_residual(model: pj.GraphicalModel, measurements) -> np.ndarray:
    """Whitened residuals of the model's own marginals, computed outside pgmjax's loss code."""
    out = []
    for m in measurements:
        mu = np.asarray(model.marginal(m.clique), np.float64).reshape(-1)
        sd = np.broadcast_to(np.asarray(m.stddev, float), (m.rows,))
        out.append((query_matrix(m, model.domain) @ mu - m.y) / sd)
    return np.concatenate(out)


# --------------------------------------------------------------------------- reference solvers
def _l2_slsqp(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """min 0.5 ||b x - c||^2 over the probability simplex, by SLSQP."""
    n = b.shape[1]
    h = b.T @ b
    bc = b.T @ c
    scale = max(float(c @ c), 1.0)

    def f(x):
        r = b @ x - c
        return 0.5 * (r @ r) / scale

    res = optimize.minimize(
        f,
        np.full(n, 1.0 / n),
        jac=lambda x: (h @ x - bc) / scale,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * n,
        constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0, "jac": lambda x: np.ones((1, n))}],
        options={"ftol": 1e-16, "maxiter": 2000},
    )
    return np.clip(res.x, 0.0, None) / max(np.clip(res.x, 0.0, None).sum(), 1e-300)


def _l2_auglag_bvls(b: np.ndarray, c: np.ndarray, iters: int = 200) -> np.ndarray:
    """The same QP by an augmented Lagrangian on ``sum x = 1`` with exact BVLS subproblems."""
    n = b.shape[1]
    rho = float(np.linalg.norm(b, 2) ** 2)
    lam = 0.0
    x = np.full(n, 1.0 / n)
    for _ in range(iters):
        # min 0.5||bx - c||^2 + lam (1'x - 1) + rho/2 (1'x - 1)^2, x >= 0
        a = np.vstack([b, np.sqrt(rho) * np.ones((1, n))])
        t = np.concatenate([c, [np.sqrt(rho) * (1.0 - lam / rho)]])
        x = optimize.lsq_linear(a, t, bounds=(0.0, np.inf), method="bvls", tol=1e-14).x
        viol = x.sum() - 1.0
        lam += rho * viol
        if abs(viol) < 1e-14:
            break
    x = np.clip(x, 0.0, None)
    return x / x.sum()


def frank_wolfe_gap(b: np.ndarray, c: np.ndarray, x: np.ndarray) -> float:
    """Upper bound on ``f(x) - min_simplex f`` for the convex ``f = 0.5||bx - c||^2``."""
    g = b.T @ (b @ x - c)
    return float(g @ x - g.min())


def l2_optimum(b: np.ndarray, c: np.ndarray, total: float) -> float:
    """Certified optimal L2 loss over full tables with ``p >= 0`` and ``sum p = total``."""
    bn = b * total  # optimise over probabilities x = p / total
    xs = [solver(bn, c) for solver in (_l2_slsqp, _l2_auglag_bvls)]
    values = [loss_of_residual(bn @ x - c, "l2") for x in xs]
    assert abs(values[0] - values[1]) <= 1e-9 * min(values), f"QP solvers disagree: {values}"
    # The loss is not strictly convex (rank-deficient B), so the solvers may stop at different points of the
    # optimal face, equally good to 1e-9 but not equally well certified: keep the better-certified one.
    gaps = [frank_wolfe_gap(bn, c, x) for x in xs]
    best = int(np.argmin(gaps))
    gap = gaps[best]
    assert gap <= 1e-8 * values[best], f"reference not certified: duality gap {gap} at loss {values[best]}"
    return values[best]


def l1_optimum(b: np.ndarray, c: np.ndarray, total: float) -> float:
    """Exact optimal L1 loss: the LP ``min sum t, -t <= b p - c <= t, p >= 0, sum p = total``
    (:func:`maxent_reference.l1_lp`), by two solvers that must agree."""
    values = [loss_of_residual(b @ l1_lp(b, c, total, method=method) - c, "l1") for method in ("highs-ds", "highs-ipm")]
    assert abs(values[0] - values[1]) <= 1e-8 * min(values), f"LP solvers disagree: {values}"
    return min(values)


# --------------------------------------------------------------------------- problems
def _noisy(rng, clique, query, sd, domain, p_true):
    """A measurement of ``clique`` of the table ``p_true`` with Gaussian noise of stddev ``sd``."""
    if query is None:
        q = np.eye(domain.size(clique))
    elif isinstance(query, tuple):
        q = functools.reduce(np.kron, query)
    else:
        q = query
    exact = q @ (marginal_matrix(domain, clique) @ p_true)
    noise = np.broadcast_to(np.asarray(sd, float), exact.shape) * rng.normal(size=exact.shape)
    return pj.Measurement(clique, exact + noise, stddev=sd, query=query)


@functools.lru_cache(maxsize=None)
def problem(name: str):
    """A small random problem with real noise: ``(domain, measurements, total)``."""
    if name == "chain":
        rng = np.random.default_rng(20240601)
        domain = pj.Domain({"a": 2, "b": 3, "c": 4, "d": 3})
        total = 1000.0
        p_true = rng.multinomial(int(total), rng.dirichlet(np.ones(domain.size()))).astype(float)
        specs = [
            (("a", "b"), None, 3.0),  # chain of pairs a-b-c-d
            (("b", "c"), None, rng.uniform(2.0, 6.0, size=12)),  # per-row stddev
            (("c", "d"), None, 4.0),
            (("c",), None, 2.0),  # a clique inside another
            (("c", "b"), rng.normal(size=(7, 12)), 5.0),  # dense query, reversed axis order
            (("d", "c"), (rng.normal(size=(2, 3)), rng.uniform(size=(3, 4))), 3.0),  # Kronecker
        ]
    elif name == "loopy":
        rng = np.random.default_rng(777)
        domain = pj.Domain({"a": 3, "b": 2, "c": 3, "d": 2})
        total = 800.0
        p_true = rng.multinomial(int(total), rng.dirichlet(np.ones(domain.size()))).astype(float)
        specs = [
            (("a", "b"), None, 2.0),  # a 3-cycle of pairs a-b-c-a
            (("b", "c"), None, 2.0),
            (("c", "a"), None, rng.uniform(1.0, 4.0, size=9)),
            (("b",), None, 1.5),  # a clique inside another
            (("c", "d"), (rng.uniform(size=(2, 3)), rng.normal(size=(3, 2))), 2.5),  # Kronecker
            (("d", "a"), rng.normal(size=(4, 6)), rng.uniform(2.0, 5.0, size=4)),  # dense, per-row stddev
        ]
    else:  # pragma: no cover
        raise KeyError(name)
    ms = [_noisy(rng, clique, query, sd, domain, p_true) for clique, query, sd in specs]
    return domain, tuple(ms), total


@functools.lru_cache(maxsize=None)
def reference(name: str, loss: str) -> float:
    domain, ms, total = problem(name)
    b, c = whitened_system(domain, ms)
    return l2_optimum(b, c, total) if loss == "l2" else l1_optimum(b, c, total)


@functools.lru_cache(maxsize=None)
def fit(name: str, method: str, loss: str):
    """``(report.loss, loss recomputed from model.marginal, whitened residuals)`` of one run."""
    domain, ms, total = problem(name)
    model, report = pj.estimate(
        domain, list(ms), method, ITERS[method, loss], loss=loss, total=total, dtype=jnp.float64, chunk=CHUNK, report=True
    )
    assert model.dtype == jnp.float64
    assert model.total == total
    r = model_residual(model, ms)
    return report.loss, loss_of_residual(r, loss), r


PROBLEMS = ("chain", "loopy")
CASES_L2 = [(p, m) for p in PROBLEMS for m in METHODS]
# The L1 loss is minimised through Huber smoothing with continuation (pgmjax.estimation.driver.run).
# Measured relative gaps (chain / loopy): L-BFGS 1.3e-7 / 1.5e-7 after 3000 iterations; mirror
# descent 2.2e-4 / 0.27 after 10000 and 1.3e-7 / 1.5e-7 after 100000 (loopy's optimum has empty
# cells, where first-order mirror descent is slow). No case is expected to fail.
L1_XFAIL: dict = {}
CASES_L1 = [
    pytest.param(p, m, marks=pytest.mark.xfail(strict=True, reason=L1_XFAIL[p, m])) if (p, m) in L1_XFAIL else (p, m)
    for p in PROBLEMS
    for m in ("mirror_descent", "lbfgs")
]
L1_AGREE_XFAIL: dict = {}
CASES_L1_AGREE = [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=L1_AGREE_XFAIL[p])) if p in L1_AGREE_XFAIL else p
    for p in PROBLEMS
]


# --------------------------------------------------------------------------- criterion 1
def test_reference_problems_have_positive_optimum_and_consistent_loss_definitions():
    """The optima are clearly > 0 (real noise), and the explicit loss equals pgmjax's at the uniform start."""
    for name in PROBLEMS:
        domain, ms, total = problem(name)
        b, c = whitened_system(domain, ms)
        # pgmjax's Measurement.answer agrees with the explicit matrices.
        rng = np.random.default_rng(0)
        for m in ms:
            mu = rng.uniform(size=domain.shape_of(m.clique))
            np.testing.assert_allclose(m.answer(mu), query_matrix(m, domain) @ mu.reshape(-1), rtol=1e-12)
        for loss in ("l2", "l1"):
            assert reference(name, loss) > 1.0
            # Zero iterations: the uniform model; its loss must be ours at the uniform table.
            _, report = pj.estimate(domain, list(ms), "mirror_descent", 0, loss=loss, total=total, dtype=jnp.float64,
                                    report=True)
            uniform = np.full(domain.size(), total / domain.size())
            expected = loss_of_residual(b @ uniform - c, loss)
            assert report.loss == pytest.approx(expected, rel=1e-10)
            assert expected > reference(name, loss)


def _assert_reaches_optimum(name, method, loss, rtol):
    opt = reference(name, loss)
    model_loss, own_loss, _ = fit(name, method, loss)
    assert model_loss == pytest.approx(own_loss, rel=1e-9), f"report.loss is not the {loss} loss of the model's marginals"
    assert model_loss >= opt * (1 - 1e-9), f"loss {model_loss} below the optimum {opt}: the loss definitions differ"
    assert (model_loss - opt) / opt <= rtol, f"{method} on {name}: loss {model_loss}, optimum {opt}"


@pytest.mark.parametrize("name,method", CASES_L2)
def test_l2_loss_reaches_full_table_optimum(name, method):
    """Each method's final L2 loss is within 1e-4 (relative) of the exact full-table QP optimum."""
    _assert_reaches_optimum(name, method, "l2", L2_RTOL)


@pytest.mark.parametrize("name", PROBLEMS)
def test_l2_methods_agree(name):
    """The three methods reach the same L2 loss and (up to the loss tolerance) the same fitted answers.

    At the optimum the whitened answers ``B p*`` are unique and
    ``f(p) - f* >= 0.5 ||B (p - p*)||^2``, so two runs within ``eps * f*``
    of the optimum have answers within ``2 sqrt(2 eps f*)`` of each other.
    """
    opt = reference(name, "l2")
    fits = {m: fit(name, m, "l2") for m in METHODS}
    losses = [f[0] for f in fits.values()]
    assert (max(losses) - min(losses)) / opt <= L2_RTOL, losses
    bound = 2 * np.sqrt(2 * L2_RTOL * opt)
    for m1, m2 in itertools.combinations(METHODS, 2):
        dist = np.linalg.norm(fits[m1][2] - fits[m2][2])
        assert dist <= bound, f"{m1} vs {m2} on {name}: answers differ by {dist} (bound {bound})"


@pytest.mark.parametrize("name,method", CASES_L1)
def test_l1_loss_reaches_full_table_optimum(name, method):
    """Each method's final L1 loss is within 1e-3 (relative) of the exact full-table LP optimum."""
    _assert_reaches_optimum(name, method, "l1", L1_RTOL)


@pytest.mark.parametrize("name", CASES_L1_AGREE)
def test_l1_methods_agree(name):
    """Mirror descent and L-BFGS reach the same L1 loss (within 1e-3 relative)."""
    opt = reference(name, "l1")
    losses = [fit(name, m, "l1")[0] for m in ("mirror_descent", "lbfgs")]
    assert abs(losses[0] - losses[1]) / opt <= L1_RTOL, losses


def test_dual_averaging_rejects_l1():
    """Dual averaging needs the smooth L2 loss: asking for L1 is a ValueError."""
    domain, ms, total = problem("chain")
    with pytest.raises(ValueError, match="dual_averaging"):
        pj.estimate(domain, list(ms), "dual_averaging", 10, loss="l1", total=total, dtype=jnp.float64)


# --------------------------------------------------------------------------- criterion 2
def _chordal_dataset(records: int = 2000):
    """Records from a random distribution that factorises over the triples a-b-c, b-c-d, c-d-e."""
    rng = np.random.default_rng(11)
    domain = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 3, "e": 2})
    size = lambda *attrs: tuple(domain[x] for x in attrs)  # noqa: E731
    p_abc = rng.dirichlet(np.full(12, 4.0)).reshape(size("a", "b", "c"))
    p_d_bc = rng.dirichlet(np.full(3, 4.0), size=size("b", "c"))  # (b, c, d)
    p_e_cd = rng.dirichlet(np.full(2, 4.0), size=size("c", "d"))  # (c, d, e)
    abc = rng.choice(12, size=records, p=p_abc.ravel())
    a, b, c = np.unravel_index(abc, size("a", "b", "c"))
    d = np.array([rng.choice(3, p=p_d_bc[bi, ci]) for bi, ci in zip(b, c)])
    e = np.array([rng.choice(2, p=p_e_cd[ci, di]) for ci, di in zip(c, d)])
    return pj.Dataset(np.stack([a, b, c, d, e], axis=1), domain)


@pytest.mark.parametrize("method", METHODS)
def test_noise_free_decomposable_marginals_are_reproduced(method):
    """Exact measurements of the maximal cliques of a chordal model are reproduced to 1e-6 * N."""
    data = _chordal_dataset()
    n = len(data)
    cliques = [("a", "b", "c"), ("d", "c", "b"), ("c", "e", "d")]  # any axis order
    truth = [data.marginal(cl) for cl in cliques]
    assert all(t.min() > 0 for t in truth), "precondition: every cell is observed"
    ms = [pj.Measurement(cl, t, stddev=1e-3) for cl, t in zip(cliques, truth)]
    iters = {"mirror_descent": 1000, "dual_averaging": 4000, "lbfgs": 300}[method]
    model = pj.estimate(data.domain, ms, method, iters, total=n, dtype=jnp.float64, chunk=CHUNK)
    for cl, t in zip(cliques, truth):
        err = np.abs(model.marginal(cl) - t).max()
        assert err < 1e-6 * n, f"{method}: marginal {cl} off by {err}"


# --------------------------------------------------------------------------- criterion 3
def test_unknown_total_is_inverse_variance_weighted():
    """total=None uses the inverse-variance weighted mean of the measurements' totals (hand-computed)."""
    domain = pj.Domain({"a": 2, "b": 3})
    # Sum 100 over 6 cells of stddev 2: variance 6 * 4 = 24.
    m1 = pj.Measurement(("a", "b"), np.array([[10.0, 20, 30], [15, 5, 20]]), stddev=2.0)
    # Sum 120 over 3 cells of stddev (1, 2, 2): variance 1 + 4 + 4 = 9.
    m2 = pj.Measurement(("b",), np.array([30.0, 40, 50]), stddev=np.array([1.0, 2, 2]))
    # A query whose rows do not span the all-ones vector says nothing about the total.
    m3 = pj.Measurement(("b",), np.array([7.0]), stddev=1.0, query=np.array([[1.0, -1.0, 0.0]]))
    # (100/24 + 120/9) / (1/24 + 1/9) = (1260/72) / (11/72); variance 1 / (11/72).
    expected_total, expected_var = 1260.0 / 11.0, 72.0 / 11.0
    total, var = pj.estimate_total([m1, m2, m3])
    assert total == pytest.approx(expected_total, rel=1e-12)
    assert var == pytest.approx(expected_var, rel=1e-12)
    for ms in ([m1, m2], [m1, m2, m3]):
        model = pj.estimate(domain, ms, "mirror_descent", 50, total=None, dtype=jnp.float64)
        assert model.total == pytest.approx(expected_total, rel=1e-12)
        assert model.marginal(("a", "b")).sum() == pytest.approx(expected_total, rel=1e-9)
        assert model.marginal("b").sum() == pytest.approx(expected_total, rel=1e-9)
