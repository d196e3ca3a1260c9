"""PrivBayes's own options are one frozen, checked class (:class:`PrivBayesOptions`): the front-end's signature lists
its fields, and a bad option is refused with its name before any data is read."""

import dataclasses

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.bayesian_network import PrivBayesOptions, privbayes


def test_the_fields_are_the_front_end_s_own_options():
    own = registry.own_options("privbayes")
    fields = dataclasses.fields(PrivBayesOptions)
    assert list(own) == [f.name for f in fields] == list(PrivBayesOptions.names())
    assert [own[f.name].default for f in fields] == [f.default for f in fields]
    assert privbayes.options is PrivBayesOptions and PrivBayesOptions.mechanism == "privbayes"


def test_checked_values_are_normalised_and_frozen():
    own = PrivBayesOptions(beta=np.float32(0.5), degree=np.int64(2), bounded=np.True_, score="I")
    assert type(own.beta) is float and type(own.degree) is int and own.bounded is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.beta = 0.4


@pytest.mark.parametrize("kwargs,error,match", [
    ({"beta": 1.0}, ValueError, r"privbayes: beta must be in \(0, 1\), got 1.0"),
    ({"beta": "x"}, TypeError, "privbayes: beta must be a number"),
    ({"theta": -1}, ValueError, "privbayes: theta must be positive"),
    ({"score": "G"}, ValueError, "privbayes: score must be one of"),
    ({"score": "I"}, ValueError, "privbayes: score='I' needs bounded=True"),
    ({"degree": -1}, ValueError, "privbayes: degree must be at least 0"),
    ({"degree": 1.5}, TypeError, "privbayes: degree must be an integer"),
    ({"bounded": "yes"}, TypeError, "privbayes: bounded must be True or False"),
    ({"count_fraction": 0}, ValueError, r"privbayes: count_fraction must be in \(0, 1\)"),
    ({"max_candidates": 0}, ValueError, "privbayes: max_candidates must be at least 1"),
    ({"max_cells": 0}, ValueError, "privbayes: max_cells must be at least 1"),
    ({"keep_scores": 1}, TypeError, "privbayes: keep_scores must be True or False"),
])
def test_a_bad_option_is_refused_where_made_and_before_the_data(kwargs, error, match):
    with pytest.raises(error, match=match):
        PrivBayesOptions(**kwargs)
    with pytest.raises(error, match=match):  # data=None: the option's error, not the data's
        privbayes(None, 1.0, key=jax.random.key(0), **kwargs)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match=r"privbayes: unknown option\(s\) \['betta'\]"):
        privbayes(None, 1.0, key=jax.random.key(0), betta=0.5)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['betta'\]"):
        PrivBayesOptions.of({"betta": 0.5})


def test_the_result_s_info_is_one_frozen_privbayes_info():
    from pgmjax.cli.summary import jsonable
    from pgmjax.mechanisms import PrivBayesInfo

    data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (300, 3)), {"a": 3, "b": 4, "c": 2})
    res = privbayes(data, 1.0, key=jax.random.key(0), engine_iters=20)
    assert isinstance(res.info, PrivBayesInfo) and registry.get("privbayes").info is PrivBayesInfo
    assert PrivBayesInfo.published_names() == (
        "network", "order", "score", "bounded", "beta", "theta", "degree", "epsilon", "epsilon_count",
        "epsilon_structure", "epsilon_step", "epsilon_tables", "cliques", "laplace_scale", "noisy_count", "total",
        "engine_iters")
    assert set(PrivBayesInfo.private_names()) == {"steps", "quality", "tau", "cap", "max_model_cells", "model_cells",
                                                  "tables", "conditionals"}
    assert len(res.info.network) == 3 and len(res.info.conditionals) == 3 and res.info.noisy_count is not None
    assert set(jsonable(res.info.published_values())) == set(PrivBayesInfo.published_names())
