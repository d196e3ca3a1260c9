"""MechanismResult.intervals: a mechanism's answers with their error bars, through pgmjax.uncertainty."""

import jax
import numpy as np

import pgmjax as pj


def test_mechanism_result_gives_intervals_for_a_workload():
    rng = np.random.default_rng(0)
    data = pj.Dataset(rng.integers(0, [3, 2, 2], size=(400, 3)), pj.Domain({"a": 3, "b": 2, "c": 2}))
    res = pj.mechanisms.mst(data, 2.0, key=jax.random.key(0), select_iters=100, engine_iters=200, compress=False)
    work = pj.Workload.marginals(data.domain, [("a", "b")])
    (iv,) = res.intervals(work, level=0.9, key=jax.random.key(1), B=24)
    value = np.asarray(res.model.marginal(("a", "b"))).reshape(-1)
    assert np.allclose(np.asarray(iv.value).reshape(-1), value, rtol=1e-3, atol=1e-3)
    lo, hi = np.asarray(iv.lo).reshape(-1), np.asarray(iv.hi).reshape(-1)
    assert np.all(lo <= value + 1e-6) and np.all(value <= hi + 1e-6) and np.all(hi - lo > 0)


def test_mechanism_result_intervals_refit_exactly_by_default():
    """MST's design (identity marginals on every clique, L2): the refits are the exact QP, also in float32;
    an explicit fit_method overrides the choice; every interval is finite and contains the estimate."""
    rng = np.random.default_rng(1)
    data = pj.Dataset(rng.integers(0, [3, 2, 2], size=(400, 3)), pj.Domain({"a": 3, "b": 2, "c": 2}))
    res = pj.mechanisms.mst(data, 2.0, key=jax.random.key(0), select_iters=100, engine_iters=200, compress=False)
    work = pj.Workload.marginals(data.domain, [("a", "b"), ("b", "c")])
    for fit, want in ((None, "qp"), ("mirror_descent", "mirror_descent")):
        kw = {} if fit is None else {"fit_method": fit}
        ivs = res.intervals(work, level=0.9, key=jax.random.key(1), B=24, **kw)
        for iv in ivs:
            assert iv.diagnostics["fit_method"] == want and iv.diagnostics["converged"]
            assert ("fit_method_reason" in iv.diagnostics) == (fit is None)
            v, lo, hi = (np.asarray(x, np.float64).ravel() for x in (iv.value, iv.lo, iv.hi))
            assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(np.isfinite(iv.se))
            assert np.all(lo <= v + 1e-6) and np.all(v <= hi + 1e-6) and np.all(hi > lo)
            if want == "qp":  # the exact fit of the released answers, next to the model's (float32) answer
                assert np.all(np.isfinite(iv.diagnostics["fit_gap"])) and iv.diagnostics["residual"] < 1e-2


def test_mechanism_result_intervals_refit_from_the_fit_the_measurements_went_into():
    """``result.fitted`` is the fitted model with its report (the compressed one where MST compressed the domain),
    and the workload's intervals refit from it: the report's iterations and last step, as ``intervals`` of the Fit
    itself, bit for bit."""
    rng = np.random.default_rng(2)
    data = pj.Dataset(rng.integers(0, [6, 2, 2], size=(400, 3)), pj.Domain({"a": 6, "b": 2, "c": 2}))
    for compress in (False, True):
        res = pj.mechanisms.mst(data, 0.5, key=jax.random.key(0), select_iters=100, engine_iters=150, compress=compress)
        fitted = res.fitted
        assert fitted.report is res.report and fitted.report.iterations == 150
        assert fitted.model is (res.info.compressed_model if res.info.mapping else res.model)
    res = pj.mechanisms.mst(data, 0.5, key=jax.random.key(0), select_iters=100, engine_iters=150, compress=False)
    work = pj.Workload.marginals(data.domain, [("a", "b")])
    (via_result,) = res.intervals(work, key=jax.random.key(1), B=8, fit_method="mirror_descent")
    (via_fit,) = pj.uncertainty.intervals(res.fitted, res.measurements, [("a", "b")], B=8,
                                          key=jax.random.key(1), fit_method="mirror_descent")
    np.testing.assert_array_equal(np.asarray(via_result.lo), np.asarray(via_fit.lo))
    np.testing.assert_array_equal(np.asarray(via_result.hi), np.asarray(via_fit.hi))
