"""DualQuery's own options are one frozen, checked class (:class:`DualQueryOptions`): the front-end's signature lists
its fields, and a bad option is refused with its name before any data is read."""

import dataclasses

import jax
import numpy as np
import pytest

from pgmjax.mechanisms import registry
from pgmjax.mechanisms.dual_query import DualQueryOptions, dualquery


def test_the_fields_are_the_front_end_s_own_options():
    own = registry.own_options("dualquery")
    fields = dataclasses.fields(DualQueryOptions)
    assert list(own) == [f.name for f in fields] == list(DualQueryOptions.names())
    assert [own[f.name].default for f in fields] == [f.default for f in fields]
    assert dualquery.options is DualQueryOptions and DualQueryOptions.mechanism == "dualquery"


def test_checked_values_are_normalised_and_frozen():
    own = DualQueryOptions(eta=np.float32(1.5), samples=np.int64(7), rounds=np.int64(3), bound="heterogeneous")
    assert (own.eta, own.samples, own.rounds) == (1.5, 7, 3)
    assert type(own.eta) is float and type(own.samples) is int and type(own.rounds) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.eta = 1.0


@pytest.mark.parametrize("kwargs,error,match", [
    ({"bound": "b3"}, ValueError, "dualquery: bound must be 'b2' or 'heterogeneous', got 'b3'"),
    ({"samples": 0}, ValueError, "dualquery: samples must be a positive integer, got 0"),
    ({"samples": True}, ValueError, "dualquery: samples must be a positive integer"),
    ({"eta": -1.0}, ValueError, "dualquery: eta must be positive and finite, got -1.0"),
    ({"eta": "2"}, TypeError, "dualquery: eta must be a real number"),
    ({"rounds": 1}, ValueError, r"dualquery: rounds must be an integer >= 2 \(round 1 reads no data\), got 1"),
    ({"rounds": 2.0}, ValueError, "dualquery: rounds must be an integer >= 2"),
])
def test_a_bad_option_is_refused_where_made_and_before_the_data(kwargs, error, match):
    with pytest.raises(error, match=match):
        DualQueryOptions(**kwargs)
    with pytest.raises(error, match=match):  # data=None: the option's error, not the data's
        dualquery(None, 1.0, key=jax.random.key(0), **kwargs)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match=r"dualquery: unknown option\(s\) \['sample'\]"):
        dualquery(None, 1.0, key=jax.random.key(0), sample=5)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['sample'\]"):
        DualQueryOptions.of({"sample": 5})


def test_the_result_s_info_is_one_frozen_dualquery_info():
    import json

    import pgmjax as pj
    from pgmjax.cli.summary import jsonable
    from pgmjax.mechanisms import DualQueryInfo
    from pgmjax.mechanisms.dual_query import DualQueryTranscript

    dom = pj.Domain({"a": 3, "b": 4, "c": 2})
    data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (300, 3)), dom)
    res = dualquery(data, 1.0, 1e-3, key=jax.random.key(0), workload=[("a", "b"), ("b", "c")], engine_iters=20)
    assert isinstance(res.info, registry.get("dualquery").info) and dualquery.info is DualQueryInfo
    assert DualQueryInfo.published_names() == ("rounds", "eta", "eta_used", "samples", "bound", "delta", "epsilon_at_eta",
                                               "epsilon_spent", "queries", "engine_iters", "seconds")
    assert DualQueryInfo.private_names() == ("satisfied", "transcript")
    assert isinstance(res.info.transcript, DualQueryTranscript) and len(res.info.satisfied) == res.info.rounds
    assert res.info.epsilon_spent == res.accountant.spent and res.info.samples == 50 and res.info.bound == "b2"
    published = json.loads(json.dumps(jsonable(res.info.published_values(), max_items=1000)))
    assert list(published) == list(DualQueryInfo.published_names()) and published["rounds"] == res.info.rounds
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.info.rounds = 3
