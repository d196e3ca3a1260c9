"""Measurements to arrays and back (a saved release, a checkpoint): every query form, checked on the way in."""

import numpy as np
import pytest

import pgmjax as pj
from pgmjax.queries.linear import LinearQuery
from pgmjax.queries.measurement_files import measurements_from_arrays, measurements_to_arrays

DOM = pj.Domain({"a": 3, "b": 4, "c": 2})


def _every_form():
    rng = np.random.default_rng(0)
    prefix = np.tril(np.ones((4, 4)))
    return [
        pj.Measurement(("a", "b"), rng.normal(size=(3, 4)), stddev=2.0),
        pj.Measurement(("b",), rng.normal(size=2), stddev=[1.0, 3.0], query=rng.normal(size=(2, 4)), noise="laplace"),
        pj.Measurement(("a", "b"), rng.normal(size=(2, 4)), stddev=1.5, query=LinearQuery.kron([np.ones((2, 3)), None], (3, 4))),
        pj.Measurement(("b", "c"), rng.normal(size=8 + 4), stddev=1.0,
                       query=LinearQuery.stack([LinearQuery.identity((4, 2)), LinearQuery.kron([prefix, np.ones((1, 2))])])),
    ]


def test_every_query_form_round_trips_and_answers_the_same():
    measurements = _every_form()
    arrays, meta = measurements_to_arrays(measurements)
    back = measurements_from_arrays(arrays, meta, DOM)
    rng = np.random.default_rng(1)
    for before, after in zip(measurements, back):
        assert (after.clique, after.kind, after.noise) == (before.clique, before.kind, before.noise)
        assert np.array_equal(after.y, before.y) and np.array_equal(after.row_stddev(), before.row_stddev())
        table = rng.random(DOM.shape_of(before.clique))
        np.testing.assert_array_equal(after.answer(table), before.answer(table))


def test_a_missing_array_or_a_wrong_domain_is_named():
    arrays, meta = measurements_to_arrays(_every_form())
    del arrays["stddev_1"]
    with pytest.raises(ValueError, match="release: measurement 1 cannot be read back: KeyError"):
        measurements_from_arrays(arrays, meta, DOM, "release")
    arrays, meta = measurements_to_arrays(_every_form()[:1])
    with pytest.raises(ValueError, match="measurement 0 cannot be read back"):
        measurements_from_arrays(arrays, meta, pj.Domain({"a": 3, "b": 5}))


def test_a_description_without_a_query_is_of_the_marginal_itself():
    (m,) = measurements_from_arrays({"y_0": np.ones(3), "stddev_0": np.array(1.0)}, [{"clique": ["a"], "noise": "gaussian"}], DOM)
    assert m.kind == "identity" and m.rows == 3
