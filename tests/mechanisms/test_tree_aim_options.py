"""TreeAIM's own options are one frozen, checked class (:class:`TreeAIMOptions`): the front-end's signature lists
its fields, and a bad option is refused with its name before any data is read."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from pgmjax.cli.summary import jsonable
from pgmjax.data.dataset import Dataset
from pgmjax.data.domain import Domain
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.tree_adaptive import tree_aim
from pgmjax.mechanisms.run_info import CompressedRunInfo
from pgmjax.mechanisms.tree_aim_options import TreeAIMInfo, TreeAIMOptions


def test_the_fields_are_the_front_end_s_own_options():
    own = registry.own_options("tree_aim")
    fields = dataclasses.fields(TreeAIMOptions)
    assert list(own) == [f.name for f in fields] == list(TreeAIMOptions.names())
    assert [own[f.name].default for f in fields] == [f.default for f in fields]
    assert tree_aim.options is TreeAIMOptions and TreeAIMOptions.mechanism == "tree_aim"


def test_checked_values_are_normalised_and_frozen():
    own = TreeAIMOptions(batches=np.int64(3), picks=np.int64(2), select_iters=np.int64(9), compress=np.False_)
    assert (own.batches, own.picks, own.select_iters, own.compress) == (3, 2, 9, False)
    assert type(own.batches) is int and type(own.picks) is int and type(own.compress) is bool
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.batches = 1


@pytest.mark.parametrize("kwargs,error,match", [
    ({"batches": 0}, ValueError, "tree_aim_budget: batches must be at least 1, got 0"),
    ({"picks": 0}, ValueError, "tree_aim_budget: picks must be at least 1, got 0"),
    ({"round_iters": 0}, ValueError, "tree_aim: round_iters must be at least 1, got 0"),
    ({"select_iters": 1.5}, TypeError, "tree_aim: select_iters must be an integer, got 1.5"),
    ({"compress": "yes"}, TypeError, "tree_aim: compress must be True or False, got 'yes'"),
    ({"rows": 0}, ValueError, "tree_aim: rows must be at least 1, got 0"),
    ({"synthetic_method": "iid"}, ValueError, "tree_aim: synthetic_method must be one of"),
    ({"progress": 1}, TypeError, "tree_aim: progress must be True, False or a callable taking a dict, got 1"),
])
def test_a_bad_option_is_refused_where_made_and_before_the_data(kwargs, error, match):
    with pytest.raises(error, match=match):
        TreeAIMOptions(**kwargs)
    with pytest.raises(error, match=match):  # data=None: the option's error, not the data's
        tree_aim(None, 1.0, key=jax.random.key(0), **kwargs)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match=r"tree_aim: unknown option\(s\) \['pick'\]"):
        tree_aim(None, 1.0, key=jax.random.key(0), pick=5)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['pick'\]"):
        TreeAIMOptions.of({"pick": 5})


def test_the_result_s_info_is_the_registry_s_class_and_publishes_the_old_report_keys():
    data = Dataset(np.random.default_rng(0).integers(0, [3, 4, 2, 3], (300, 4)), Domain({"a": 3, "b": 4, "c": 2, "d": 3}))
    res = tree_aim(data, 1.0, key=jax.random.key(0), select_iters=20, round_iters=20, engine_iters=40)
    assert registry.get("tree_aim").info is tree_aim.info is TreeAIMInfo and isinstance(res.info, TreeAIMInfo)
    assert isinstance(res.info, CompressedRunInfo)
    old = ("epsilon", "delta", "rho", "budget", "edges", "selected", "log", "compressed_domain", "mapping", "spread",
           "total", "model_mb", "engine_iters", "seconds", "public")
    assert sorted(TreeAIMInfo.published_names()) == sorted(old) and len(TreeAIMInfo.published_names()) == len(old)
    assert TreeAIMInfo.private_names() == ("compressed_model",)
    assert res.info.compressed_model.domain == res.info.compressed_domain and len(res.info.edges) == 3
    json.dumps(jsonable(res.info.published_values(), max_items=1000))
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.info.edges = []
