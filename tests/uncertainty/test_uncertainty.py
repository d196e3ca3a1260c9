"""pgmjax.uncertainty: intervals for model answers (deterministic anchors U1, U2, U5; coverage U3)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles

import pgmjax as pj
from pgmjax.bayes import LinearNoise
from pgmjax.queries.factors import Value
from pgmjax.uncertainty import Linearization, conditional, intervals, linearize
from pgmjax.uncertainty.simulate import simulate_coverage

AC00 = {"A": Value(0), "C": Value(0)}
B0 = {"B": Value(0)}


def chain_toy(y_ab=((310, 195), (92, 405)), y_bc=((315, 84), (160, 442))):
    dom = pj.Domain({"A": 2, "B": 2, "C": 2})
    ms = [pj.Measurement(("A", "B"), np.array(y_ab, float), stddev=10.0),
          pj.Measurement(("B", "C"), np.array(y_bc, float), stddev=10.0)]
    return dom, ms


@pytest.fixture(scope="module")
def toy():
    dom, ms = chain_toy()
    model = pj.estimate(dom, ms, loss="l2", dtype=jnp.float64, iters=3000, tol=1e-14)
    return model, ms


def closed_form_ac00(y_ab, y_bc):
    """U1's closed form: B marginal averaged over both measurements, each pair table shifted to it."""
    y_ab, y_bc = np.asarray(y_ab, float), np.asarray(y_bc, float)
    mu_b = (y_ab.sum(0) + y_bc.sum(1)) / 2
    ab = y_ab + (mu_b - y_ab.sum(0)) / 2
    bc = y_bc + ((mu_b - y_bc.sum(1)) / 2)[:, None]
    return float(np.sum(ab[0] * bc[:, 0] / mu_b))


def test_u1_u2_fit_and_linearisation(toy):
    model, ms = toy
    # U2: the engine's L2 fit is the closed form (= GLS) to 1e-6 relative.
    np.testing.assert_allclose(model.marginal(("A", "B")), [[309.25, 195.5], [91.25, 405.5]], rtol=1e-6)
    np.testing.assert_allclose(model.marginal(("B", "C")), [[315.75, 84.75], [159.5, 441.5]], rtol=1e-6)
    lin = linearize(model, ms, AC00)
    assert lin.value.item() == pytest.approx(295.6934003565, rel=1e-7)
    a_ref = [0.47995074, 0.23720138, -0.30843877, -0.02818964, 0.47183588, -0.30032392, 0.26715146, -0.05813972]
    np.testing.assert_allclose(lin.weights.ravel(), a_ref, atol=1e-6)
    assert lin.sd.item() == pytest.approx(8.7756482680, rel=1e-6)
    # the weights are the derivative of the closed form (finite differences, an independent reference)
    y = np.concatenate([m.y for m in ms])
    fd = []
    for i in range(8):
        e = np.zeros(8)
        e[i] = 1e-4
        up, dn = y + e, y - e
        fd.append((closed_form_ac00(up[:4].reshape(2, 2), up[4:].reshape(2, 2))
                   - closed_form_ac00(dn[:4].reshape(2, 2), dn[4:].reshape(2, 2))) / 2e-4)
    np.testing.assert_allclose(lin.weights.ravel(), fd, atol=1e-6)
    lin_b = linearize(model, ms, B0)
    np.testing.assert_allclose(lin_b.weights.ravel(), [0.5, 0, 0.5, 0, 0.5, 0.5, 0, 0], atol=1e-6)
    assert lin_b.sd.item() == pytest.approx(10.0, rel=1e-6)


def test_u1_linear_intervals(toy):
    model, ms = toy
    ac, b0, ab, cond = intervals(model, ms, [AC00, B0, ("A", "B"), conditional({"C": Value(0)}, {"A": Value(0)})],
                                 method="linear", level=0.9)
    assert ac.lo.item() == pytest.approx(281.2587, abs=1e-3) and ac.hi.item() == pytest.approx(310.1281, abs=1e-3)
    assert not ac.estimable and b0.estimable and ab.estimable and not cond.estimable
    assert b0.hi.item() - b0.value.item() == pytest.approx(10 * 1.6448536269514722, rel=1e-6)
    # a conditional probability: the delta method through the ratio, inside [0, 1]
    assert cond.value.item() == pytest.approx(295.6934003565 / 504.75, rel=1e-6)
    assert 0 < cond.lo.item() < cond.value.item() < cond.hi.item() < 1
    assert ab.value.shape == (2, 2) and np.all(ab.se > 0)


def test_u1_bootstrap(toy):
    model, ms = toy
    ac, b0 = intervals(model, ms, [AC00, B0], B=10_000, key=jax.random.key(1), iters=100)
    # U1: basic 90% interval about [281.08, 310.08] (Monte Carlo: +-0.6 at B = 1e4), sd 8.7994
    assert ac.lo.item() == pytest.approx(281.08, abs=0.6) and ac.hi.item() == pytest.approx(310.08, abs=0.6)
    assert ac.se.item() == pytest.approx(8.7994, abs=0.2)
    assert b0.se.item() == pytest.approx(10.0, abs=0.2)
    assert abs(ac.bias.item()) < 0.3 and ac.diagnostics["converged"]
    assert ac.diagnostics["replicates"] == 10_000


def test_bootstrap_no_recompile_on_new_answers(toy):
    model, ms = toy
    pj.release_compiled()  # what this worker's earlier tests left cannot reach the bound between the two calls
    intervals(model, ms, [AC00], B=64, key=jax.random.key(0), iters=60)
    dom, ms2 = chain_toy(((300, 210), (95, 400)), ((320, 80), (150, 450)))
    model2 = pj.estimate(dom, ms2, loss="l2", dtype=jnp.float64, iters=3000, tol=1e-14)
    with count_compiles() as c:
        intervals(model2, ms2, [AC00], B=64, key=jax.random.key(1), iters=60)
    assert c.count == 0


def test_u5_blue_inside_the_engine():
    # Xiao & Xiong's example history (X3-1) as one dense measurement of a 2x2 clique, Laplace rows.
    h = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1], [2, 1, 0, 0],
                  [0, 0, 2, -1], [0, -1, 0, 1.0]])
    b = np.array([20, 10, 20, 10, 10, 40, 40, 10.0])
    y = np.array([30.8, 30.3, 46.9, 20.2, 30.4, 68.9, 38.9, 9.5])
    m = pj.Measurement(("a", "b"), y, stddev=np.sqrt(2) * b, query=h, noise="laplace")
    model = pj.estimate(pj.Domain({"a": 2, "b": 2}), [m], loss="l2", total=71.6925953, dtype=jnp.float64,
                        iters=5000, tol=1e-15)
    np.testing.assert_allclose(model.marginal(("a", "b")).ravel(), [24.992308, 10.176923, 17.021495, 19.501869],
                               rtol=1e-6)
    lin = linearize(model, [m], {"b": Value(0)})  # Q = [1, 0, 1, 0]
    a_ref = [0.4769230769, 0.3644859813, -0.03271028037, 0.4953271028, -0.5000718907, 0.2615384615,
             0.07009345794, 0.2383896477]
    np.testing.assert_allclose(lin.weights.ravel(), a_ref, atol=1e-6)
    assert lin.value.item() == pytest.approx(42.0138030194, rel=1e-6)
    law = lin.law((0,))
    assert law.sd**2 == pytest.approx(554.450035945, rel=1e-6)
    for level, ref in [(0.9, 38.4580550194), (0.95, 47.3833297071), (0.99, 66.8848864496)]:
        assert law.half_width(level) == pytest.approx(ref, rel=1e-5)
    theta = lin.value.item()
    assert 1 - law.cdf(-theta) == pytest.approx(0.961904116142, abs=1e-6)  # P(theta > 0)
    assert law.cdf(theta) - law.cdf(theta - 50) == pytest.approx(0.607750229369, abs=1e-6)  # P(0 <= theta <= 50)
    (iv,) = intervals(model, [m], [{"b": Value(0)}], method="linear", level=0.95, total=71.6925953)
    # with the total public the log-total is not a parameter: the weights then differ from the BLUE's
    assert iv.estimable and iv.hi.item() > iv.value.item()


def test_noise_law_two_answers():
    # X3-3: y = [10, 14], b = [1, 2]: A = [0.8, 0.2]; rows given as a Measurement gives them (stddev, family)
    law = LinearNoise.from_stddev(np.array([0.8, 0.2]), np.sqrt(2) * np.array([1.0, 2.0]), np.array([True, True]))
    for level, ref in [(0.9, 2.0567733645), (0.95, 2.6191237552), (0.99, 3.9127775703)]:
        assert law.half_width(level) == pytest.approx(ref, rel=1e-5)
    assert law.cdf(0.8) == pytest.approx(0.7773029198, abs=1e-6)  # P(theta > 10) = P(E < 0.8)
    assert 1 - law.cdf(1.2) == pytest.approx(0.1404555954, abs=1e-6)  # P(theta > 12) = P(E > 1.2)
    np.testing.assert_array_equal(law.laplace_scale, [1.0, 2.0])  # b = sigma / sqrt 2
    gauss = LinearNoise.from_stddev(np.array([0.8, 0.2]), np.sqrt(2) * np.array([1.0, 2.0]), False)
    assert gauss.half_width(0.95) == pytest.approx(2.4791801292, rel=1e-9)
    np.testing.assert_array_equal(gauss.laplace_scale, [0.0, 0.0])
    with pytest.raises(ValueError, match="laplace"):
        LinearNoise.from_stddev([1.0, 2.0], 1.0, [True, False, True])
    with pytest.raises(ValueError, match="non-negative"):
        LinearNoise.from_stddev([1.0, 2.0], [1.0, -1.0], True)


# Half-widths at levels 0.5, 0.9, 0.95, 0.99 by the former pgmjax.uncertainty.NoiseLaw (FFT grid with a
# cumulative trapezoid; Cornish-Fisher above 64 comparable Laplace terms), before the linearisation's law
# became pgmjax.bayes.LinearNoise.
_FORMER_LAW = {
    "mixed": ((np.array([0.5, -1.2, 0.8, 0.3, -0.1, 2.0]), np.array([2.0, 1.0, 3.0, 4.0, 1.5, 0.5]),
               np.array([True, True, False, True, False, True])),
              [2.1678127805, 5.3587466316, 6.4304204441, 8.602147657], 1e-6),
    "many": ((np.linspace(0.1, 1.0, 100), np.ones(100), np.ones(100, bool)),
             [4.0889779251, 10.0176542455, 11.9644434139, 15.8133784261], 2e-4),  # Cornish-Fisher's error
}


@pytest.mark.parametrize("case", sorted(_FORMER_LAW))
def test_linearization_law_agrees_with_the_former_noise_law(case):
    from scipy import integrate

    (a, sd, lap), former, rtol = _FORMER_LAW[case]
    law = LinearNoise.from_stddev(a, sd, lap)
    levels = np.array([0.5, 0.9, 0.95, 0.99])
    half = law.half_width(levels)
    np.testing.assert_allclose(half, former, rtol=rtol)
    # independent reference: Gil-Pelaez, F(x) = 1/2 + (1/pi) int_0^inf sin(t x) phi(t) / t dt, by quadrature
    for h, level in zip(half, levels):
        f = integrate.quad(lambda t: np.sin(t * h) * law.char_fn(t) / t, 0, np.inf, limit=2000, epsabs=1e-13)[0]
        assert 0.5 + f / np.pi == pytest.approx((1 + level) / 2, abs=1e-9)
    # what the linearisation hands out is this law
    lin = Linearization(np.zeros(1), a[None], np.broadcast_to(sd, a.shape), lap, np.zeros(1))
    np.testing.assert_allclose(lin.law((0,)).half_width(levels), half, rtol=1e-12)


def test_linearize_batch_agrees_with_linearize_all(toy):
    """simulate_coverage linearises its draws by one vmapped program (linearize_batch); it was one call each."""
    from pgmjax.uncertainty import linearize_all, linearize_batch

    model, ms = toy
    dom, ms2 = chain_toy(((300, 210), (95, 400)), ((320, 80), (150, 450)))
    model2 = pj.estimate(dom, ms2, loss="l2", dtype=jnp.float64, iters=3000, tol=1e-14)
    thetas = {k: jnp.stack([model.theta[k], model2.theta[k]]) for k in model.theta}
    batched = linearize_batch(model.plan, thetas, [model.total, model2.total], ms, [AC00, B0])
    for m, lins in zip((model, model2), batched):
        for one, got in zip(linearize_all(m, ms, [AC00, B0]), lins):
            np.testing.assert_allclose(got.weights, one.weights, atol=1e-9)
            np.testing.assert_allclose(got.value, one.value, rtol=1e-12)


def _qp_design():
    """A chain a - b - c with cells pushed below zero by the noise, a one-way measurement inside a clique,
    a repeat of a clique in another attribute order, and a diagonal (MST-compressed style) query."""
    dom = pj.Domain({"a": 2, "b": 3, "c": 2})
    ms = [pj.Measurement(("a", "b"), [[30.0, -4, 12], [10, 40, 2]], stddev=2.0),
          pj.Measurement(("b", "c"), [[35.0, 8], [20, 20], [-3, 9]], stddev=2.0),
          pj.Measurement(("b",), [41.0, 60, 10], stddev=3.0),
          pj.Measurement(("c", "b"), [[33.0, 22, -1], [9, 18, 11]], stddev=4.0),
          pj.Measurement(("a",), [44.0, 25.0], stddev=2.0, query=np.diag([1.0, 0.5]))]
    return dom, ms


def test_qp_refit_is_the_exact_l2_fit():
    from pgmjax.uncertainty import refit

    dom, ms = _qp_design()
    model = pj.estimate(dom, ms, dtype=jnp.float64, iters=50)
    targets = [("a", "b"), ("c", "b"), {"a": Value(1), "c": Value(0)}]
    rng = np.random.default_rng(5)
    ys = [np.asarray(m.y, float)[None] + rng.normal(0, 3.0, (3, m.rows)) for m in ms]
    reps = refit(model, ms, ys, targets, fit_method="qp")
    assert reps.converged and np.all(reps.residual <= 1e-4 * 2.0)
    for r in range(3):
        mr = [pj.Measurement(m.clique, y[r], m.stddev, m.query) for m, y in zip(ms, ys)]
        md = pj.estimate(dom, mr, dtype=jnp.float64, iters=20000, tol=1e-15)  # mirror descent, converged here
        for got, q in zip(reps.values, targets):
            want = md.marginal(q) if isinstance(q, tuple) else md.answer(q)
            np.testing.assert_allclose(got[r], want, atol=2e-3)
        assert reps.totals[r] == pytest.approx(md.total, rel=1e-12)
    assert np.any(reps.values[0] < 1e-6)  # some cells do sit at the boundary


def test_qp_float32_reaches_its_residual_bound():
    """optax's L-BFGS keeps the iterate of least residual, so a float32 fit reaches ``atol`` (the dual's value
    is known only to its rounding near the optimum), and the float32 fit agrees with the float64 one."""
    from pgmjax.uncertainty import qp

    dom, ms = _qp_design()
    rng = np.random.default_rng(8)
    ys = [np.asarray(m.y, float)[None] + rng.normal(0, 3.0, (4, m.rows)) for m in ms]
    fits = {}
    for dt in (jnp.float32, jnp.float64):
        plan = pj.estimate(dom, ms, dtype=dt, iters=5).plan
        fit = qp.solve(qp.layout(plan, ms), plan, ys, jnp.full(4, 80.0, dt), ms)
        assert np.all(fit.residual <= fit.atol) and np.all(fit.iterations < 5000)
        fits[dt] = [pj.GraphicalModel(plan, {k: v[r] for k, v in fit.theta.items()}, 80.0).marginal(("a", "b"))
                    for r in range(4)]
    np.testing.assert_allclose(np.float64(fits[jnp.float32]), fits[jnp.float64], atol=2e-3)


def test_qp_intervals_match_mirror_descent_on_u1(toy):
    model, ms = toy
    key = jax.random.key(4)
    (md,) = intervals(model, ms, [AC00], B=1000, key=key, iters=100)
    (qp,) = intervals(model, ms, [AC00], B=1000, key=key, fit_method="qp")
    assert md.diagnostics["converged"] and qp.diagnostics["converged"]
    np.testing.assert_allclose([qp.lo, qp.hi, qp.se], [md.lo, md.hi, md.se], atol=1e-3)
    assert abs(qp.diagnostics["fit_gap"].item()) < 1e-4  # the model is the exact fit of its measurements


def test_qp_refuses_what_it_cannot_fit():
    from pgmjax.uncertainty import refit
    from pgmjax.uncertainty.qp import layout

    dom, ms = _qp_design()
    model = pj.estimate(dom, ms, dtype=jnp.float64, iters=10)
    dense = pj.Measurement(("a", "b"), [1.0, 2.0], stddev=1.0, query=np.ones((2, 6)))
    with pytest.raises(ValueError, match="not diagonal"):
        layout(model.plan, ms + [dense])
    wide = pj.estimate(dom, ms, dtype=jnp.float64, iters=10, cliques=[("a", "b", "c")])
    with pytest.raises(ValueError, match="not measured as a whole"):
        layout(wide.plan, ms)
    with pytest.raises(ValueError, match="qp"):
        refit(model, ms, [np.asarray(m.y, float)[None] for m in ms], [("a",)], loss="l1", fit_method="qp")


def test_laplace_renoise_matches_the_noise_law():
    from pgmjax.uncertainty import renoise

    m = pj.Measurement(("a",), [400.0, 600.0], stddev=20.0, noise="laplace")
    model = pj.estimate(pj.Domain({"a": 2}), [m], iters=200, dtype=jnp.float64)
    (ys,) = renoise(model, [m], 40_000, jax.random.key(3))
    z = ys - model.marginal("a")
    assert np.std(z) == pytest.approx(20.0, rel=0.02)
    # Laplace: E|z| = b = sigma / sqrt 2 (a Gaussian would give sigma sqrt(2 / pi))
    assert np.mean(np.abs(z)) == pytest.approx(20.0 / np.sqrt(2), rel=0.02)


def test_bad_input(toy):
    model, ms = toy
    with pytest.raises(ValueError, match="level"):
        intervals(model, ms, [B0], level=1.5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="method"):
        intervals(model, ms, [B0], method="jackknife", key=jax.random.key(0))
    with pytest.raises(ValueError, match="key"):
        intervals(model, ms, [B0])
    with pytest.raises(ValueError, match="target 0"):
        intervals(model, ms, [{"Z": Value(0)}], key=jax.random.key(0))
    with pytest.raises(TypeError, match="list of targets"):
        intervals(model, ms, B0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="denominator"):
        intervals(model, ms, [pj.uncertainty.Ratio(AC00, {"A": pj.queries.Identity()})], key=jax.random.key(0))
    with pytest.raises(ValueError, match="L2"):
        intervals(model, ms, [B0], method="linear", loss="l1")


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_u3_coverage_on_the_toy():
    """U3 with R = 1000 noise draws (4000 draws take minutes here); gate +-3 SE of 0.9 at R = 1000."""
    dom, _ = chain_toy()
    mu_ab = np.array([[300.0, 200], [100, 400]])
    mu_bc = np.array([[320.0, 80], [150, 450]])  # p(b) p(c | b) n
    ms = [pj.Measurement(("A", "B"), mu_ab, stddev=10.0), pj.Measurement(("B", "C"), mu_bc, stddev=10.0)]
    base = pj.estimate(dom, ms, dtype=jnp.float64, iters=2000, tol=1e-14)
    assert base.answer(AC00).item() == pytest.approx(290.0, rel=1e-6)
    cov = simulate_coverage(base, ms, [mu_ab.ravel(), mu_bc.ravel()], [AC00, B0], [290.0, 400.0], R=1000, B=100,
                            key=jax.random.key(7), fit_iters=300, boot_iters=50, draws_per_call=500)
    se = np.sqrt(0.9 * 0.1 / 1000)
    for method in ("bootstrap", "linear"):
        for rate in cov.rate(method):
            assert abs(rate.item() - 0.9) <= 3 * se, (method, rate)
    # the linearised sd at the truth (8.7297) against the spread of the 1000 estimates
    assert np.std(cov.estimates[0]) == pytest.approx(8.7297, rel=0.07)
    assert np.mean(cov.se["linear"][0]) == pytest.approx(8.7297, rel=0.02)


def test_workload_intervals_on_a_compressed_domain():
    """MST-style result: measurements on a compressed domain, the workload on the original one."""
    from types import SimpleNamespace

    from pgmjax.mechanisms.domain_compression import decompress_model
    from pgmjax.mechanisms.run_info import CompressedRunInfo

    cdom = pj.Domain({"a": 3, "b": 2})
    ms = [pj.Measurement(("a", "b"), [[100.0, 80], [60, 40], [120, 100]], stddev=5.0)]
    model_c = pj.estimate(cdom, ms, iters=300, dtype=jnp.float64)
    mapping = {"a": np.array([0, 2, 1, 2])}  # original value 1 and 3 merged into 2
    dom = pj.Domain({"a": 4, "b": 2})
    lifted = decompress_model(model_c, mapping, dom)
    result = SimpleNamespace(model=lifted, measurements=ms,
                             info=CompressedRunInfo(compressed_domain=cdom, mapping=mapping, compressed_model=model_c))
    w = pj.Workload(dom, [(("a", "b"), None), (("a",), [pj.queries.Prefix()])])
    ivs = pj.uncertainty.workload_intervals(result, w, level=0.9, method="linear")
    np.testing.assert_allclose(ivs[0].value, lifted.marginal(("a", "b")), rtol=1e-9)
    np.testing.assert_allclose(ivs[1].value, lifted.answer({"a": pj.queries.Prefix()}), rtol=1e-9)
    # each merged original cell carries half of its compressed cell's noise: se = 5 / 2
    assert ivs[0].se[1, 0] == pytest.approx(2.5, rel=1e-6) and ivs[0].se[0, 0] == pytest.approx(5.0, rel=1e-6)
    assert all(iv.estimable for iv in ivs) and np.all(ivs[1].lo <= ivs[1].value)
    # the bootstrap: exact QP refits by default (identity measurement on the model's one clique, L2) on the
    # compressed model, mirror descent for an L1 fit or when asked; finite intervals around the estimate
    key = jax.random.key(3)
    for kw, want in (({}, "qp"), ({"loss": "l1"}, "mirror_descent"), ({"fit_method": "mirror_descent"}, "mirror_descent")):
        ivs = pj.uncertainty.workload_intervals(result, w, level=0.9, key=key, B=40, iters=200, **kw)
        for iv in ivs:
            assert iv.diagnostics["fit_method"] == want
            assert ("fit_method_reason" in iv.diagnostics) == ("fit_method" not in kw)
            assert np.all(np.isfinite(iv.lo)) and np.all(np.isfinite(iv.hi)) and np.all(np.isfinite(iv.se))
            assert np.all(iv.lo <= iv.value + 1e-9) and np.all(iv.value <= iv.hi + 1e-9) and np.all(iv.hi > iv.lo)
        np.testing.assert_allclose(ivs[0].value, lifted.marginal(("a", "b")), rtol=1e-9)


def test_choose_fit_method():
    """The exact QP wherever it applies (L2, identity or diagonal marginals covering every model clique);
    mirror descent for an L1 fit, a non-diagonal query, or a model clique that is not measured as a whole."""
    from pgmjax.uncertainty import choose_fit_method

    dom, ms = _qp_design()
    model = pj.estimate(dom, ms, dtype=jnp.float64, iters=10)
    assert choose_fit_method(model, ms)[0] == "qp"
    method, why = choose_fit_method(model, ms, "l1")
    assert method == "mirror_descent" and "L1" in why
    dense = ms + [pj.Measurement(("a", "b"), [1.0, 2.0], stddev=1.0, query=np.ones((2, 6)))]
    method, why = choose_fit_method(pj.estimate(dom, dense, dtype=jnp.float64, iters=10), dense)
    assert method == "mirror_descent" and "not diagonal" in why
    ones = [pj.Measurement((a,), np.full(dom[a], 10.0), stddev=1.0) for a in dom]  # no pair measured
    chain = pj.estimate(dom, ms[:2], dtype=jnp.float64, iters=10)
    method, why = choose_fit_method(chain, ms[:1] + ones)
    assert method == "mirror_descent" and "not measured as a whole" in why
    with pytest.raises(ValueError, match="fit_method"):
        intervals(model, ms, [{"b": Value(0)}], key=jax.random.key(0), fit_method="exact")
