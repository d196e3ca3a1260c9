"""What a run reports about itself is one frozen value per mechanism (issue 58, item 4): ``result.info`` is an
instance of the front-end's own :class:`~pgmjax.mechanisms.run_info.RunInfo` subclass, and the fields a published
report may print are marked on the class, not listed apart."""

import dataclasses
import inspect

import pytest

from pgmjax.mechanisms import registry
from pgmjax.mechanisms.run_info import CompressedRunInfo, ResumableRunInfo, RunInfo, published, reports


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class ToyInfo(ResumableRunInfo):
    rounds: int = published()
    scores: list = dataclasses.field(default_factory=list)
    label: str = published("x")


def test_published_and_private_fields_are_marked_on_the_class():
    info = ToyInfo(rounds=3, scores=[0.5])
    assert ToyInfo.names() == ("resumed_from", "rounds", "scores", "label")
    assert ToyInfo.published_names() == ("rounds", "label") and ToyInfo.private_names() == ("resumed_from", "scores")
    assert info.published_values() == {"rounds": 3, "label": "x"}
    assert info.values() == {"resumed_from": None, "rounds": 3, "scores": [0.5], "label": "x"}
    assert info.values()["scores"] is info.scores  # the values themselves, not copies
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.rounds = 4
    with pytest.raises(TypeError):  # a field without default must be given, by name
        ToyInfo()
    with pytest.raises(TypeError):
        ToyInfo(3)


def test_reports_attaches_the_class_and_refuses_anything_else():
    @reports(ToyInfo)
    def toy():
        return None

    assert toy.info is ToyInfo
    with pytest.raises(TypeError, match="expected a RunInfo subclass"):
        reports(dict)


def _documented(cls) -> set[str]:
    """The names an ``Attributes:`` section of the class's docstring or its bases' documents (``a, b: ...`` counts
    for both)."""
    names = set()
    for klass in cls.__mro__:
        doc = inspect.getdoc(klass) or ""
        if "Attributes:" not in doc:
            continue
        for line in doc.split("Attributes:", 1)[1].splitlines():
            if line.startswith("    ") and not line.startswith("     ") and ":" in line:
                names |= {n.strip() for n in line.split(":", 1)[0].split(",")}
    return names


@pytest.mark.parametrize("name", list(registry.MECHANISMS))
def test_every_front_end_reports_one_frozen_documented_class(name):
    entry = registry.get(name)
    info = getattr(entry.function, "info", None)
    assert isinstance(info, type) and issubclass(info, RunInfo), f"{name} has no info class"
    assert entry.info is info and info.__dataclass_params__.frozen
    assert info.published_names(), f"{name} publishes nothing"
    missing = set(info.names()) - _documented(info)
    assert not missing, f"{info.__name__} does not document {sorted(missing)}"


def test_the_compressing_mechanisms_say_so():
    assert issubclass(registry.get("mst").info, CompressedRunInfo)
    assert issubclass(registry.get("tree_aim").info, CompressedRunInfo)
    assert issubclass(registry.get("aim").info, ResumableRunInfo)
    assert issubclass(registry.get("mwem").info, ResumableRunInfo)
