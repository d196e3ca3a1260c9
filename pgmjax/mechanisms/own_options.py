"""A front-end's own options as one frozen value, checked where it is made, and the front-end's signature derived
from it.

Every front-end has the common parameters (:data:`~pgmjax.mechanisms.options.COMMON_PARAMETERS`) and options of its
own (MWEM's rounds and noise, MST's compression, ...). The own options are written once, as the fields of a frozen
dataclass (a subclass of :class:`OwnOptions`) whose ``__post_init__`` checks each of them; checks that need the
data (a default from the number of attributes, public data against the domain) stay with the front-end.
:func:`takes_own_options` lets the front-end be called as before, ``mwem(data, 1.0, key=k, rounds=5)``: the own
options given are gathered into one value of the class and passed as ``own=``, and the function's signature
(``inspect.signature``, ``help``, the command line's ``--option`` checks) lists the fields as keyword-only
parameters after the common ones.

Example:
    >>> import dataclasses
    >>> from pgmjax.checks import check_count
    >>> @dataclasses.dataclass(frozen=True)
    ... class ToyOptions(OwnOptions):
    ...     mechanism = "toy"
    ...     rounds: int = 3
    ...     def __post_init__(self):
    ...         check_count(self.rounds, "rounds", self.mechanism)
    >>> @takes_own_options(ToyOptions)
    ... def toy(data, epsilon, *, key, own: ToyOptions):
    ...     return own.rounds
    >>> toy(None, 1.0, key=0), toy(None, 1.0, key=0, rounds=5), list(inspect.signature(toy).parameters)
    (3, 5, ['data', 'epsilon', 'key', 'rounds'])
    >>> toy(None, 1.0, key=0, rounds=0)
    Traceback (most recent call last):
    ...
    ValueError: toy: rounds must be at least 1, got 0
    >>> toy(None, 1.0, key=0, round=5)
    Traceback (most recent call last):
    ...
    TypeError: toy: unknown option(s) ['round']; its own options are: rounds
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import ClassVar

__all__ = ["OwnOptions", "takes_own_options"]


@dataclasses.dataclass(frozen=True)
class OwnOptions:
    """The base of a front-end's own options: a frozen dataclass, one field per option with its default, checked in
    ``__post_init__`` (each subclass names its front-end in :attr:`mechanism`, for the messages)."""

    #: The front-end's name, for the messages.
    mechanism: ClassVar[str] = ""

    def keep(self, **checked) -> None:
        """Store checked (normalised) values of fields, from ``__post_init__`` (the instance is frozen)."""
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The options' names, in their order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def of(cls, given: Mapping):
        """The options ``given`` (the others at their defaults), or a TypeError naming the unknown ones.

        Args:
            given: option name -> value.

        Returns:
            An instance of ``cls``, checked.
        """
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            raise TypeError(f"{cls.mechanism}: unknown option(s) {unknown}; its own options are: {', '.join(cls.names())}")
        return cls(**given)


def takes_own_options(options: type[OwnOptions]) -> Callable:
    """A decorator: the front-end ``fn(..., *, <common>, own)`` called as ``fn(..., *, <common>, **own options)``.

    The own options given are gathered into ``options.of(...)`` (checked, unknown names refused) and passed as
    ``own=``; the wrapper's signature is ``fn``'s with ``own`` replaced by one keyword-only parameter per field (its
    default and annotation), and its ``options`` attribute is the class.

    Args:
        options: the front-end's :class:`OwnOptions` subclass.

    Returns:
        The decorator.
    """
    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        if "own" not in sig.parameters:
            raise TypeError(f"{fn.__name__}: a front-end taking own options needs an 'own' parameter")
        names = set(options.names())
        clash = names & set(sig.parameters)
        if clash:
            raise TypeError(f"{fn.__name__}: own options {sorted(clash)} are also parameters of the function")
        fields = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
                  for f in dataclasses.fields(options)]

        @functools.wraps(fn)
        def front_end(*args, **kwargs):
            if "own" in kwargs:
                raise TypeError(f"{fn.__name__}: give its own options by name ({', '.join(options.names())}), not own=")
            unknown = sorted(k for k in kwargs if k not in names and k not in sig.parameters)
            if unknown:
                raise TypeError(f"{fn.__name__}: unknown option(s) {unknown}; its own options are: "
                                f"{', '.join(options.names())}")
            own = options.of({k: kwargs.pop(k) for k in list(kwargs) if k in names})
            return fn(*args, own=own, **kwargs)

        front_end.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != "own"] + fields)
        front_end.options = options
        return front_end

    return decorate
