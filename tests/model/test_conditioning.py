"""``pgmjax.model.conditioning.condition``: a model conditioned on evidence, against brute force."""

import itertools

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.model.conditioning import condition


def _joint(model):
    """The model's full joint table (counts), brute force over the domain's tiny grid."""
    dom = model.domain
    return np.asarray(model.marginal(tuple(dom.attributes)), np.float64)


@pytest.mark.parametrize("program", ["dense", "size_class"])
def test_the_conditioned_model_is_the_joint_restricted_to_the_evidence(program):
    rng = np.random.default_rng(0)
    dom = pj.Domain({"a": 2, "b": 3, "c": 4, "d": 2})
    ms = [pj.Measurement(c, rng.uniform(5, 50, size=dom.shape_of(c)), stddev=1.0) for c in [("a", "b"), ("b", "c"), ("c", "d")]]
    model = pj.estimate(dom, ms, iters=200, program=program)
    given = {"b": [0, 2], "d": 1}
    conditioned = condition(model, given)
    joint = _joint(model)
    mask = np.zeros(joint.shape, bool)
    for a, b, c, d in itertools.product(*map(range, joint.shape)):
        mask[a, b, c, d] = b in (0, 2) and d == 1
    want = np.where(mask, joint, 0.0)
    assert conditioned.total == pytest.approx(want.sum(), rel=1e-5)
    np.testing.assert_allclose(_joint(conditioned), want, rtol=1e-4, atol=1e-6 * want.sum())
    records = conditioned.synthetic_data(400, jax.random.key(0)).records
    assert set(records[:, 1]) <= {0, 2} and set(records[:, 3]) == {1}


def test_bad_evidence_is_refused_naming_it():
    dom = pj.Domain({"a": 2, "b": 3})
    model = pj.estimate(dom, [pj.Measurement(("a", "b"), np.array([[10.0, 0, 30], [5, 0, 30]]), stddev=0.01)], iters=300,
                        loss="l1")
    assert condition(model, {}) is model
    with pytest.raises(ValueError, match="evidence on 'b': value 3 is not an integer in"):
        condition(model, {"b": 3})
    with pytest.raises(ValueError, match="'z' is not in the domain"):
        condition(model, {"z": 0})
    with pytest.raises(ValueError, match="no value given"):
        condition(model, {"a": []})
    ys = np.array([[[10.0, 20, 30], [5, 5, 30]]] * 2)
    batch = pj.estimate_batch(dom, [pj.BatchedMeasurement(("a", "b"), ys, stddev=1.0)], iters=20)
    with pytest.raises(TypeError, match="batch of models"):
        condition(batch, {"a": 0})
