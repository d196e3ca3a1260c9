"""MST's own options are one frozen, checked class (:class:`MSTOptions`): the front-end's signature lists its fields,
and a bad option is refused with its name before any data is read."""

import dataclasses

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.spanning_tree import MSTOptions, mst


def test_the_fields_are_the_front_end_s_own_options():
    own = registry.own_options("mst")
    fields = dataclasses.fields(MSTOptions)
    assert list(own) == [f.name for f in fields] == list(MSTOptions.names())
    assert [own[f.name].default for f in fields] == [f.default for f in fields]
    assert mst.options is MSTOptions and MSTOptions.mechanism == "mst"


def test_checked_values_are_normalised_and_frozen():
    one = pj.Constraint.forbid(("a", "b"), [[0, 0]])
    own = MSTOptions(select_iters=np.int64(5), compress=np.False_, rows=np.int32(7), constraints=one)
    assert type(own.select_iters) is int and own.compress is False and type(own.rows) is int
    assert own.constraints == (one,) and MSTOptions(constraints=[one]).constraints == (one,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.select_iters = 3


@pytest.mark.parametrize("kwargs,error,match", [
    ({"select_iters": 0}, ValueError, "mst: select_iters must be at least 1, got 0"),
    ({"select_iters": 1.5}, TypeError, "mst: select_iters must be an integer"),
    ({"compress": "yes"}, TypeError, "mst: compress must be True or False"),
    ({"synthetic": 1}, TypeError, "mst: synthetic must be True or False"),
    ({"rows": 0}, ValueError, "mst: rows must be at least 1"),
    ({"synthetic_method": "fast"}, ValueError, "mst: synthetic_method must be one of"),
    ({"progress": "yes"}, TypeError, "mst: progress must be True, False or a callable taking a dict, got 'yes'"),
    ({"constraints": [1]}, TypeError, r"mst: constraints\[0\] must be a pgmjax.Constraint, got int"),
    ({"public": 3}, TypeError, "mst: public must be a pgmjax.queries.public.PublicData, got int"),
])
def test_a_bad_option_is_refused_where_made_and_before_the_data(kwargs, error, match):
    with pytest.raises(error, match=match):
        MSTOptions(**kwargs)
    with pytest.raises(error, match=match):  # data=None: the option's error, not the data's
        mst(None, 1.0, key=jax.random.key(0), **kwargs)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match=r"mst: unknown option\(s\) \['select_iter'\]"):
        mst(None, 1.0, key=jax.random.key(0), select_iter=5)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['select_iter'\]"):
        MSTOptions.of({"select_iter": 5})


def test_the_data_dependent_checks_stay_with_the_front_end():
    data = pj.Dataset(np.zeros((10, 2), dtype=int), pj.Domain({"a": 2, "b": 2}))
    with pytest.raises(ValueError, match=r"mst: constraints\[0\]"):  # an attribute the data lacks
        mst(data, 1.0, key=jax.random.key(0), constraints=[pj.Constraint.forbid(("a", "z"), [[0, 0]])])


def test_the_result_s_info_is_one_frozen_mst_info():
    from pgmjax.cli.summary import jsonable
    from pgmjax.mechanisms import MSTInfo

    data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (300, 3)), {"a": 3, "b": 4, "c": 2})
    res = mst(data, 1.0, key=jax.random.key(0), engine_iters=50, select_iters=50)
    assert isinstance(res.info, MSTInfo) and registry.get("mst").info is MSTInfo
    assert MSTInfo.published_names() == ("compressed_domain", "mapping", "spread", "epsilon", "delta", "rho", "edges", "total",
                                         "select_iters", "engine_iters", "seconds", "public")
    assert len(res.info.edges) == 2 and res.info.compressed_model is not None
    assert set(jsonable(res.info.published_values())) == set(MSTInfo.published_names())
