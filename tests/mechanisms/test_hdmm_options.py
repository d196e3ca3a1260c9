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


def test_the_result_s_info_is_one_frozen_hdmm_info():
    import json

    import numpy as np

    import pgmjax as pj
    from pgmjax.cli.summary import jsonable
    from pgmjax.mechanisms import HDMMInfo

    dom = pj.Domain({"a": 8, "b": 2, "c": 3})
    data = pj.Dataset(np.random.default_rng(0).integers(0, [8, 2, 3], (300, 3)), dom)
    w = pj.Workload.benchmark(dom, [("a", "b"), ("b", "c")], numeric=["a"])
    res = hdmm(data, 1.0, key=jax.random.key(0), workload=w, restarts=1, engine_iters=20)
    assert isinstance(res.info, registry.get("hdmm").info) and hdmm.info is HDMMInfo
    assert HDMMInfo.published_names() == ("strategy_info", "noise", "bounded", "epsilon", "delta", "rho", "sensitivity",
                                          "sensitivity_exact", "noise_scale", "noise_std", "expected_error",
                                          "workload_rows", "terms", "total", "engine_iters", "engine_method", "seconds")
    assert HDMMInfo.private_names() == ("strategy", "strategy_record", "expected_error_per_query", "global_least_squares",
                                        "global_least_squares_error", "global_table_cells")
    assert res.info.terms == len(res.ledger) == 2 and res.info.rho is None and res.info.noise == "laplace"
    assert res.info.strategy_info["template"].startswith("OPT_kron") and res.info.global_least_squares is not None
    published = json.loads(json.dumps(jsonable(res.info.published_values(), max_items=1000)))
    assert list(published) == list(HDMMInfo.published_names()) and published["terms"] == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.info.terms = 3
