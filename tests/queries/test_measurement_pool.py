"""Repeated measurements of one marginal pool into one (pgmjax.queries.measurement.pool_repeats): the same fit."""

import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.estimation.losses import stack_measurements
from pgmjax.graph.oracle import make_plan
from pgmjax.queries.measurement import Measurement, estimate_total, pool_repeats

DOMAIN = pj.Domain({"a": 3, "b": 4, "c": 2})


def _noisy(rng, clique, sd, truth):
    return Measurement(clique, truth[clique] + rng.normal(0, sd, truth[clique].shape), stddev=sd)


@pytest.fixture
def truth():
    rng = np.random.default_rng(0)
    joint = rng.dirichlet(np.ones(24)).reshape(3, 4, 2) * 1000
    return {("a",): joint.sum((1, 2)), ("a", "b"): joint.sum(2), ("b", "c"): joint.sum(0), ("c",): joint.sum((0, 1))}


def test_pooled_answers_are_the_inverse_variance_average(truth):
    rng = np.random.default_rng(1)
    ms = [_noisy(rng, ("a", "b"), 2.0, truth), _noisy(rng, ("c",), 1.0, truth), _noisy(rng, ("a", "b"), 4.0, truth)]
    pooled = pool_repeats(ms)
    assert [m.clique for m in pooled] == [("a", "b"), ("c",)] and pooled[1] is ms[1]
    w1, w2 = 1 / 4.0, 1 / 16.0
    np.testing.assert_allclose(pooled[0].y, (w1 * ms[0].y + w2 * ms[2].y) / (w1 + w2))
    assert float(pooled[0].stddev) == pytest.approx((w1 + w2) ** -0.5)
    assert estimate_total(pooled) == pytest.approx(estimate_total(ms), rel=1e-12)  # the same total estimate


def test_per_row_stddevs_pool_row_by_row_and_other_queries_stay():
    a = Measurement(("a",), [1.0, 2.0, 3.0], stddev=[1.0, 2.0, 1.0])
    b = Measurement(("a",), [3.0, 6.0, 5.0], stddev=[1.0, 1.0, 2.0])
    dense = Measurement(("a",), [4.0], query=np.ones((1, 3)))
    pooled = pool_repeats([a, dense, b])
    assert pooled[1] is dense and len(pooled) == 2
    np.testing.assert_allclose(pooled[0].y, [2.0, (2 / 4 + 6) / 1.25, (3 + 5 / 4) / 1.25])
    np.testing.assert_allclose(pooled[0].stddev, [0.5**0.5, 1.25**-0.5, 1.25**-0.5])


def test_a_fit_on_pooled_measurements_is_the_same_fit(truth):
    """Float64, L2: the same marginals and the same total; the losses differ by the constant the pooling drops."""
    rng = np.random.default_rng(2)
    ms = [_noisy(rng, ("a", "b"), 5.0, truth), _noisy(rng, ("b", "c"), 5.0, truth), _noisy(rng, ("a", "b"), 2.0, truth),
          _noisy(rng, ("c",), 3.0, truth), _noisy(rng, ("c",), 1.0, truth)]
    full, full_report = pj.estimate(DOMAIN, ms, iters=3000, dtype=jnp.float64, report=True)
    pooled, pooled_report = pj.estimate(DOMAIN, pool_repeats(ms), iters=3000, dtype=jnp.float64, report=True)
    assert full.total == pytest.approx(pooled.total, rel=1e-12)
    for clique in [("a", "b"), ("b", "c"), ("a", "b", "c")]:
        np.testing.assert_allclose(pooled.marginal(clique), full.marginal(clique), atol=1e-6 * full.total)
    # the dropped constant: sum_i ||y_i - ybar||^2 / (2 sigma_i^2) per pooled marginal
    const = 0.0
    for group in ([ms[0], ms[2]], [ms[3], ms[4]]):
        p = pool_repeats(group)[0]
        const += sum(float(np.sum((m.y - p.y) ** 2)) / (2 * float(m.stddev) ** 2) for m in group)
    assert float(full_report.loss) - float(pooled_report.loss) == pytest.approx(const, rel=1e-6)


def test_a_repeat_leaves_the_fits_measurement_structure_as_it_was(truth):
    """What a fit compiles for (the stacked measurements' static grouping) is unchanged by a repeat once pooled."""
    rng = np.random.default_rng(3)
    plan = make_plan(DOMAIN, [("a", "b"), ("b", "c")])
    before = [_noisy(rng, ("a", "b"), 5.0, truth), _noisy(rng, ("c",), 5.0, truth)]
    after = before + [_noisy(rng, ("c",), 2.0, truth)]
    groups = lambda ms: stack_measurements(plan, ms, np.float32).groups  # noqa: E731
    assert groups(pool_repeats(after)) == groups(pool_repeats(before))
    assert groups(after) != groups(before)  # without pooling the structure changes
