"""RR+PGM's own options are one frozen, checked class (:class:`RRSyntheticOptions`): the front-end's signature lists
its fields, and a bad option is refused with its name before any data is read."""

import dataclasses

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.randomized_response_synthetic import RRSyntheticOptions, rr_synthetic
from pgmjax.privacy import Accountant


def test_the_fields_are_the_front_end_s_own_options():
    own = registry.own_options("rr_synthetic")
    fields = dataclasses.fields(RRSyntheticOptions)
    assert list(own) == [f.name for f in fields] == list(RRSyntheticOptions.names())
    assert [own[f.name].default for f in fields] == [f.default for f in fields]
    assert rr_synthetic.options is RRSyntheticOptions and RRSyntheticOptions.mechanism == "rr_synthetic"


def test_checked_values_are_normalised_and_frozen():
    own = RRSyntheticOptions(per_attribute=np.True_, rows=np.int64(9), cliques=[("a",), ("a", "b")])
    assert own.per_attribute is True and type(own.rows) is int and own.cliques == (("a",), ("a", "b"))
    assert RRSyntheticOptions(bounded=False, public_count=True).bounded is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.rows = 3


@pytest.mark.parametrize("kwargs,error,match", [
    ({"per_attribute": 1}, TypeError, "rr_synthetic: per_attribute must be True or False"),
    ({"bounded": "no"}, TypeError, "rr_synthetic: bounded must be True or False"),
    ({"public_count": None}, TypeError, "rr_synthetic: public_count must be True or False"),
    ({"cliques": []}, ValueError, "rr_synthetic: cliques is empty; give None for the default"),
    ({"synthetic": 0}, TypeError, "rr_synthetic: synthetic must be True or False"),
    ({"rows": 0}, ValueError, "rr_synthetic: rows must be at least 1"),
    ({"synthetic_method": "fast"}, ValueError, "rr_synthetic: synthetic_method must be one of"),
    ({"accountant": 1.0}, TypeError, "rr_synthetic: accountant must be a pgmjax.privacy.Accountant, got float"),
    ({"bounded": False}, ValueError, r"rr_synthetic: .* \(bounded=False\) .* pass public_count=True"),
    ({"accountant": Accountant(epsilon=1.0)}, ValueError, "pass public_count=True"),  # add/remove neighbours
])
def test_a_bad_option_is_refused_where_made_and_before_the_data(kwargs, error, match):
    with pytest.raises(error, match=match):
        RRSyntheticOptions(**kwargs)
    with pytest.raises(error, match=match):  # data=None: the option's error, not the data's
        rr_synthetic(None, 1.0, key=jax.random.key(0), **kwargs)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match=r"rr_synthetic: unknown option\(s\) \['per_attributes'\]"):
        rr_synthetic(None, 1.0, key=jax.random.key(0), per_attributes=True)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['per_attributes'\]"):
        RRSyntheticOptions.of({"per_attributes": True})


def test_the_data_dependent_checks_stay_with_the_front_end():
    data = pj.Dataset(np.zeros((10, 2), dtype=int), pj.Domain({"a": 2, "b": 2}))
    with pytest.raises(ValueError, match="rr_synthetic: clique"):  # an attribute the data lacks
        rr_synthetic(data, 1.0, key=jax.random.key(0), cliques=[("a", "z")])
    with pytest.warns(UserWarning, match="informative only up to") as seen:  # the caller's line
        rr_synthetic(data, 0.1, key=jax.random.key(0), engine_iters=2, synthetic=False)
    assert seen[0].filename == __file__


def test_the_result_s_info_is_one_frozen_rr_synthetic_info():
    import json

    from pgmjax.cli.summary import jsonable
    from pgmjax.mechanisms import RRSyntheticInfo

    data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 2, 2], (300, 3)), pj.Domain({"a": 3, "b": 2, "c": 2}))
    res = rr_synthetic(data, 2.0, key=jax.random.key(0), per_attribute=True, engine_iters=20)
    assert isinstance(res.info, registry.get("rr_synthetic").info) and rr_synthetic.info is RRSyntheticInfo
    assert RRSyntheticInfo.published_names() == (
        "epsilon", "per_attribute", "bounded", "public_count", "epsilons", "keep", "domain_rows", "rmse_bound",
        "informative_rows", "cliques", "total", "engine_iters", "seconds")
    assert RRSyntheticInfo.private_names() == ("release",)
    assert len(res.info.release) == 300 and res.info.rmse_bound is None and len(res.info.epsilons) == 3
    published = jsonable(res.info.published_values(), max_items=1000)
    assert list(published) == list(RRSyntheticInfo.published_names())
    json.dumps(published)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.info.epsilon = 3.0
