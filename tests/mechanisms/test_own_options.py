"""A front-end's own options are written once, as a frozen dataclass checked where made (issue 58, item 4): the
front-end's signature is derived from it, and every registry front-end has one."""

import dataclasses
import inspect

import numpy as np
import pytest

from pgmjax.checks import check_count
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.options import COMMON_PARAMETERS
from pgmjax.mechanisms.own_options import OwnOptions, takes_own_options


@dataclasses.dataclass(frozen=True)
class ToyOptions(OwnOptions):
    mechanism = "toy"
    rounds: int = 3
    label: str = "x"

    def __post_init__(self):
        self.keep(rounds=check_count(self.rounds, "rounds", self.mechanism))


@takes_own_options(ToyOptions)
def toy(data, epsilon, *, key, own: ToyOptions):
    return own


def test_the_options_are_gathered_checked_and_frozen():
    own = toy(None, 1.0, key=0, rounds=np.int64(5))  # kept as the Python int the check returns
    assert own == ToyOptions(rounds=5) and type(own.rounds) is int and own.label == "x"
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.rounds = 2
    with pytest.raises(ValueError, match="toy: rounds must be at least 1, got 0"):
        toy(None, 1.0, key=0, rounds=0)


def test_the_signature_lists_the_fields_after_the_function_s_own_parameters():
    params = inspect.signature(toy).parameters
    assert list(params) == ["data", "epsilon", "key", "rounds", "label"]
    assert params["rounds"].kind is inspect.Parameter.KEYWORD_ONLY and params["rounds"].default == 3
    assert toy.options is ToyOptions and toy.__name__ == "toy"


def test_unknown_names_own_and_clashes_are_refused():
    with pytest.raises(TypeError, match=r"toy: unknown option\(s\) \['round'\]; its own options are: rounds, label"):
        toy(None, 1.0, key=0, round=5)
    with pytest.raises(TypeError, match="not own="):
        toy(None, 1.0, key=0, own=ToyOptions())
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['x'\]"):
        ToyOptions.of({"x": 1})
    with pytest.raises(TypeError, match="also parameters"):
        takes_own_options(ToyOptions)(lambda data, *, rounds, own: None)
    with pytest.raises(TypeError, match="needs an 'own' parameter"):
        takes_own_options(ToyOptions)(lambda data: None)


@pytest.mark.parametrize("name", list(registry.MECHANISMS))
def test_every_front_end_s_own_options_are_one_frozen_class(name):
    entry = registry.get(name)
    fn = entry.function
    options = getattr(fn, "options", None)
    assert isinstance(options, type) and issubclass(options, OwnOptions), f"{name} has no options class"
    assert entry.options is options and options.mechanism == name and options.__dataclass_params__.frozen
    own = registry.own_options(name)
    assert list(own) == list(options.names())
    fields = {f.name: f for f in dataclasses.fields(options)}
    assert all(own[k].default == fields[k].default for k in own)
    # written once: the front-end itself lists only the common parameters and ``own``
    assert list(inspect.signature(inspect.unwrap(fn)).parameters) == [*COMMON_PARAMETERS, "own"]
    options()  # the defaults are valid
