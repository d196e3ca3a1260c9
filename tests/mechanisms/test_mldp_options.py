"""MLDP's own options are one frozen, checked class (:class:`MLDPOptions`): its fields are the front-end's own
options, a bad value is refused where the options are made (before any data is read), unknown names are refused."""

import dataclasses

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.query_learning import MLDPOptions, QuerySet, mldp

TRAIN = QuerySet.ranges(pj.Domain({"a": 6}), "a")  # 21 queries

BAD = [
    ({"training": [("a",)]}, TypeError, "mldp: training must be a QuerySet"),
    ({"fresh": np.ones(6)}, TypeError, "mldp: fresh must be a QuerySet"),
    ({"size": 0}, ValueError, "mldp: size must be at least 1"),
    ({"size": 1.5}, TypeError, "mldp: size must be an integer"),
    ({"training": TRAIN, "size": 22}, ValueError, "mldp: size=22 exceeds the 21 queries of training"),
    ({"bounded": "yes"}, TypeError, "mldp: bounded must be True or False"),
    ({"model": "svm"}, ValueError, r"mldp: model must be one of \('linear', 'gaussian'\), got 'svm'"),
    ({"ridge": -1.0}, ValueError, "mldp: ridge must be non-negative"),
    ({"width": 2.0}, ValueError, "mldp: width= and centers= belong to model='gaussian'"),
    ({"model": "gaussian", "width": 0.0}, ValueError, "mldp: width must be positive"),
    ({"model": "gaussian", "centers": 0}, ValueError, "mldp: centers must be at least 1"),
    ({"original": 1}, TypeError, "mldp: original must be True or False"),
    ({"synthetic": "no"}, TypeError, "mldp: synthetic must be True or False"),
]


def test_the_fields_are_the_front_end_s_own_options():
    own = registry.own_options("mldp")
    fields = dataclasses.fields(MLDPOptions)
    assert [f.name for f in fields] == list(own) and mldp.options is MLDPOptions
    assert [f.default for f in fields] == [p.default for p in own.values()]
    assert MLDPOptions(training=TRAIN, size=21).size == 21 and MLDPOptions(ridge=1).ridge == 1.0


@pytest.mark.parametrize("kwargs, error, match", BAD)
def test_a_bad_option_is_refused_where_made_and_before_the_data(kwargs, error, match):
    with pytest.raises(error, match=match):
        MLDPOptions(**kwargs)
    with pytest.raises(error, match=match):  # data=None: the option's error, not the data's
        mldp(None, 1.0, key=jax.random.key(0), **kwargs)


def test_a_size_above_the_workload_s_training_queries_is_refused_before_the_release():
    dom = pj.Domain({"a": 2, "b": 3})
    data = pj.Dataset(np.zeros((5, 2), dtype=int), dom)
    with pytest.raises(ValueError, match="mldp: size=7 exceeds the 6 queries of training"):
        mldp(data, 1.0, key=jax.random.key(0), workload=[("a", "b")], size=7)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match=r"mldp: unknown option\(s\) \['sizes'\]"):
        mldp(None, 1.0, key=jax.random.key(0), sizes=2)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['sizes'\]"):
        MLDPOptions.of({"sizes": 2})


def test_the_result_s_info_is_one_frozen_mldp_info():
    import json

    from pgmjax.cli.summary import jsonable
    from pgmjax.mechanisms import MLDPInfo

    data = pj.Dataset(np.random.default_rng(0).integers(0, [6, 2], (300, 2)), pj.Domain({"a": 6, "b": 2}))
    res = mldp(data, 1.0, key=jax.random.key(0), training=TRAIN, size=5, engine_iters=20)
    assert isinstance(res.info, registry.get("mldp").info) and mldp.info is MLDPInfo
    assert MLDPInfo.published_names() == ("size", "bounded", "epsilon", "sensitivity", "sensitivity_exact", "scale",
                                          "stddev", "coverage", "total", "total_source", "seconds")
    assert set(MLDPInfo.private_names()) == {"training", "training_index", "published", "noisy_answers", "model",
                                             "weights", "answers"}
    assert res.info.size == 5 == len(res.info.training) and res.info.published is TRAIN
    published = jsonable(res.info.published_values(), max_items=1000)
    assert list(published) == list(MLDPInfo.published_names())
    json.dumps(published)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.info.size = 3
