"""AIM's own options are one frozen, checked class (:class:`AIMOptions`): the front-end's signature lists its fields,
and a bad option is refused with its name before any data is read."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from pgmjax.cli.summary import jsonable
from pgmjax.data.dataset import Dataset
from pgmjax.data.domain import Domain
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.adaptive_iterative import aim
from pgmjax.mechanisms.aim_options import AIMInfo, AIMOptions
from pgmjax.mechanisms.checkpoint import Checkpoint
from pgmjax.queries.public import PublicData


def test_the_fields_are_the_front_end_s_own_options():
    own = registry.own_options("aim")
    fields = dataclasses.fields(AIMOptions)
    assert list(own) == [f.name for f in fields] == list(AIMOptions.names())
    assert [own[f.name].default for f in fields] == [f.default for f in fields]
    assert aim.options is AIMOptions and AIMOptions.mechanism == "aim"


def test_checked_values_are_normalised_and_frozen(tmp_path):
    own = AIMOptions(rounds=np.int64(40), final_iters=np.int64(7), synthetic=np.True_, checkpoint=str(tmp_path))
    assert (own.rounds, own.final_iters, own.synthetic) == (40, 7, True)
    assert type(own.rounds) is int and type(own.final_iters) is int and type(own.synthetic) is bool
    assert own.checkpoint == Checkpoint(str(tmp_path))
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.rounds = 3


PUBLIC = PublicData(marginals={("a", "b"): [[1.0, 2.0], [3.0, 4.0]]}, domain=Domain({"a": 2, "b": 2}))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"rounds": 0}, ValueError, "aim_budget: rounds must be at least 1, got 0"),
    ({"rounds": 2.5}, TypeError, "rounds must be an integer, got 2.5"),
    ({"final_iters": 0}, ValueError, "aim: final_iters must be at least 1, got 0"),
    ({"synthetic": 1}, TypeError, "aim: synthetic must be True or False, got 1"),
    ({"rows": 0}, ValueError, "aim: rows must be at least 1, got 0"),
    ({"synthetic_method": "iid"}, ValueError, "aim: synthetic_method must be one of"),
    ({"progress": "yes"}, TypeError, "aim: progress must be True, False or a callable taking a dict, got 'yes'"),
    ({"checkpoint": 5}, TypeError, "aim: checkpoint must be a folder name or a pgmjax.mechanisms.Checkpoint, got int"),
    ({"checkpoint": "ckpt-never-made", "public": PUBLIC}, ValueError,
     "aim: checkpoint= does not keep a run with public data; drop one of them"),
])
def test_a_bad_option_is_refused_where_made_and_before_the_data(kwargs, error, match):
    with pytest.raises(error, match=match):
        AIMOptions(**kwargs)
    with pytest.raises(error, match=match):  # data=None: the option's error, not the data's
        aim(None, 1.0, key=jax.random.key(0), **kwargs)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match=r"aim: unknown option\(s\) \['round'\]"):
        aim(None, 1.0, key=jax.random.key(0), round=5)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['round'\]"):
        AIMOptions.of({"round": 5})


def test_the_result_s_info_is_the_registry_s_class_and_publishes_the_old_report_keys():
    data = Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (300, 3)), Domain({"a": 3, "b": 4, "c": 2}))
    res = aim(data, 1.0, key=jax.random.key(0), rounds=4, max_model_mb=1.0, engine_iters=20)
    assert registry.get("aim").info is aim.info is AIMInfo and isinstance(res.info, AIMInfo)
    old = ("epsilon", "delta", "rho", "rounds", "rounds_run", "max_model_mb", "engine_iters", "final_iters", "log",
           "selected", "annealed", "total", "model_mb", "seconds", "public")
    assert sorted(AIMInfo.published_names()) == sorted(old) and len(AIMInfo.published_names()) == len(old)
    assert set(AIMInfo.private_names()) == {"candidates", "resumed_from", "oracle"}
    assert res.info.resumed_from is None and res.info.oracle is None and res.info.rounds_run == len(res.info.log)
    json.dumps(jsonable(res.info.published_values(), max_items=1000))
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.info.rounds = 3
