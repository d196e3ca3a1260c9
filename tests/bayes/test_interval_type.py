"""One Interval type (issue 45): pgmjax.bayes and pgmjax.uncertainty return the same class, and the bayes
interval keeps the tuple form it had as a NamedTuple."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import bayes, uncertainty
from pgmjax.queries.factors import Value


def test_one_class_everywhere():
    assert uncertainty.Interval is bayes.Interval
    from pgmjax.uncertainty.intervals import Interval

    assert Interval is bayes.Interval


def test_bayes_interval_keeps_the_tuple_form():
    iv = bayes.confidence_interval([[1.0], [1.0]], [10.0, 14.0], [1.0], level=0.9, scale=[1.0, 2.0])
    value, lo, hi, level, half = iv  # unpacking, as the NamedTuple
    assert (value, lo, hi, level, half) == (iv.value, iv.lo, iv.hi, iv.level, iv.half_width)
    assert len(iv) == 5 and iv[1:3] == (lo, hi) and iv[-1] == half and iv.interval == (lo, hi)
    assert iv == tuple(iv) and iv == bayes.Interval(value, lo, hi, level, half)
    assert hash(iv) == hash(tuple(iv))
    assert iv.half_width == pytest.approx(2.056773, abs=1e-6) and lo == pytest.approx(value - half)
    # the fields the uncertainty intervals carry, filled for the exact interval of the BLUE
    assert iv.method == "exact" and iv.estimable and iv.bias == 0.0 and iv.se == pytest.approx(math.sqrt(1.6))
    assert bool(iv.covers(value)) and not bool(iv.covers(hi + 1.0))


def test_uncertainty_intervals_are_the_same_type():
    dom = pj.Domain({"A": 2, "B": 2})
    ms = [pj.Measurement(("A", "B"), np.array([[310.0, 195], [92, 405]]), stddev=10.0)]
    model = pj.estimate(dom, ms, loss="l2", dtype=jnp.float64, iters=500)
    (iv,) = uncertainty.intervals(model, ms, [{"A": Value(0)}], level=0.9, method="linear")
    assert isinstance(iv, bayes.Interval) and iv.method == "linear" and iv.level == 0.9
    # linear intervals are symmetric before clipping: value +- half_width
    np.testing.assert_allclose(iv.hi - iv.value, iv.half_width, rtol=1e-12)
    np.testing.assert_allclose(iv.half_width, 1.6448536269514722 * iv.se, rtol=1e-6)
    assert np.all(iv.covers(iv.value)) and iv.diagnostics["residual"].shape == iv.value.shape
    with pytest.raises(TypeError):
        hash(iv)  # array fields, as a tuple of arrays
