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
