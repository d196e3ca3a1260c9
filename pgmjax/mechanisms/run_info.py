"""What a front-end's run says about itself (``result.info`` of a :class:`~pgmjax.mechanisms.result.MechanismResult`),
as one frozen value per mechanism, and which of it a published report may print.

Each front-end declares a frozen dataclass, a subclass of :class:`RunInfo`, one documented field per thing it
reports (MST's edges, AIM's rounds and log, the seconds each stage took). A field made with :func:`published` is
safe to print in a report that leaves the data holder: a setting, a released (noisy) value or what a private
selection chose. Any other field stays with the data holder: some are computed from the data without noise (MST's
selection weights, PrivBayes's scores), others are internal objects (the model over a compressed domain). The run
report (``pgmjax run``'s ``report.json``) prints :meth:`RunInfo.published_values` and lists the other names.

:func:`reports` attaches the class to its front-end (``fn.info``), so the registry and the documentation read it
without running anything.

Example:
    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
    ... class ToyInfo(RunInfo):
    ...     rounds: int = published()
    ...     scores: list = dataclasses.field(default_factory=list)
    >>> info = ToyInfo(rounds=3, scores=[0.4, 0.1])
    >>> info.rounds, ToyInfo.published_names(), info.published_values(), info.private_names()
    (3, ('rounds',), {'rounds': 3}, ('scores',))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["CompressedRunInfo", "ResumableRunInfo", "RunInfo", "published", "reports"]

#: The field metadata key marking a field safe to publish.
_PUBLISHED = "published"


def published(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A :class:`RunInfo` field that a published report may print (a setting, a noisy release, a private
    selection's outcome): :func:`dataclasses.field` with that mark.

    Args:
        default: the field's default (none: the front-end always sets it).
        default_factory: a factory for a mutable default.

    Returns:
        The field.
    """
    return dataclasses.field(default=default, default_factory=default_factory, metadata={_PUBLISHED: True})


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class RunInfo:
    """The base of a front-end's run information: a frozen dataclass whose fields are what the run reports about
    itself; those made with :func:`published` may be printed in a published report. ``eq=False``: fields hold
    arrays and models, compared by identity."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every field's name, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def published_names(cls) -> tuple[str, ...]:
        """The names of the fields safe to publish, in order."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get(_PUBLISHED))

    @classmethod
    def private_names(cls) -> tuple[str, ...]:
        """The names of the fields a published report leaves out, in order."""
        return tuple(f.name for f in dataclasses.fields(cls) if not f.metadata.get(_PUBLISHED))

    def values(self) -> dict[str, Any]:
        """Every field, ``name -> value`` (the values themselves, not copies)."""
        return {name: getattr(self, name) for name in self.names()}

    def published_values(self) -> dict[str, Any]:
        """The fields safe to publish, ``name -> value``."""
        return {name: getattr(self, name) for name in self.published_names()}


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class CompressedRunInfo(RunInfo):
    """The run information of a mechanism that fits its model over a compressed domain (MST's step 2: rare values
    merged) and releases it over the original one. The synthesizer and the uncertainty intervals read these fields.

    Attributes:
        compressed_domain: the domain the model was fitted over.
        mapping: per compressed attribute, each original value's compressed value (empty: nothing compressed).
        spread: per compressed attribute, each original value's share of its compressed value, by which the released
            model and records spread merged values (:mod:`pgmjax.mechanisms.domain_compression`; None: evenly).
        compressed_model: the fitted model over ``compressed_domain`` (private: an internal object).
    """

    compressed_domain: Any = published()
    mapping: dict = published()
    spread: dict | None = published(None)
    compressed_model: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class ResumableRunInfo(RunInfo):
    """The run information of a mechanism that can resume from a checkpoint (:mod:`pgmjax.mechanisms.checkpoint`).

    Attributes:
        resumed_from: the last round read back from the checkpoint (None: the run started afresh).
    """

    resumed_from: int | None = None


def reports(info: type[RunInfo]) -> Callable:
    """A decorator: the front-end's results carry an ``info`` of class ``info``, which it records as ``fn.info``.

    Args:
        info: the front-end's :class:`RunInfo` subclass.

    Returns:
        The decorator (it returns the function itself).
    """
    if not (isinstance(info, type) and issubclass(info, RunInfo)):
        raise TypeError(f"reports: expected a RunInfo subclass, got {info!r}")

    def decorate(fn: Callable) -> Callable:
        fn.info = info
        return fn

    return decorate
