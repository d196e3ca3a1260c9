"""HDMM's own options are one frozen, checked class (:class:`HDMMOptions`): its fields are the front-end's own
options, a bad value is refused where the options are made (before any data is read), unknown names are refused."""

import dataclasses

import jax
import pytest

from pgmjax.mechanisms import registry
from pgmjax.mechanisms.matrix_mechanism import HDMMOptions, hdmm

BAD = [
    ({"noise": "cauchy"}, ValueError, "hdmm: unknown noise 'cauchy'"),
    ({"weights": "uniform"}, ValueError, "hdmm: unknown weights 'uniform'"),
    ({"bounded": "yes"}, TypeError, "hdmm: bounded must be True or False"),
    ({"restarts": 0}, ValueError, "hdmm: restarts must be at least 1"),
    ({"original": 1}, TypeError, "hdmm: original must be True or False"),
    ({"max_table_cells": -1}, ValueError, "hdmm: max_table_cells must be at least 0"),
    ({"synthetic": None}, TypeError, "hdmm: synthetic must be True or False"),
    ({"strategy": "best"}, ValueError, "hdmm: unknown strategy 'best'"),
    ({"strategy": 3}, TypeError, "hdmm: strategy must be one of"),
]


def test_the_fields_are_the_front_end_s_own_options():
    own = registry.own_options("hdmm")
    fields = dataclasses.fields(HDMMOptions)
    assert [f.name for f in fields] == list(own) and hdmm.options is HDMMOptions
    assert [f.default for f in fields] == [p.default for p in own.values()]
    assert HDMMOptions().restarts == 8 and HDMMOptions(strategy="identity").strategy == "identity"


@pytest.mark.parametrize("kwargs, error, match", BAD)
def test_a_bad_option_is_refused_where_made_and_before_the_data(kwargs, error, match):
    with pytest.raises(error, match=match):
        HDMMOptions(**kwargs)
    with pytest.raises(error, match=match):  # data=None: the option's error, not the data's
        hdmm(None, 1.0, key=jax.random.key(0), **kwargs)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match=r"hdmm: unknown option\(s\) \['restart'\]"):
        hdmm(None, 1.0, key=jax.random.key(0), restart=2)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['restart'\]"):
        HDMMOptions.of({"restart": 2})
