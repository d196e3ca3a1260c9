"""Argument types of the command line (argparse ``type=`` callables) and ``--option key=value`` parsing."""

from __future__ import annotations

import argparse

import numpy as np

from .errors import UserError

#: The help of ``--overwrite`` (every command that writes files has it; see :mod:`pgmjax.cli.outputs`).
OVERWRITE_HELP = ("replace output files (and a --save-model folder's model) that exist; without it an existing output "
                  "is refused before anything runs. An input is never replaced")


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (x > 0 and np.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be positive and finite, got {text}")
    return x


def unit_interval(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < x < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), e.g. 1e-9, got {text}")
    return x


def positive_int(text: str) -> int:
    try:
        x = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if x < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return x


def public_stddev(text: str) -> float | str:
    """``--public-stddev``: ``"sampling"`` or a positive number of records (:class:`pgmjax.queries.public.PublicData`)."""
    if text.strip().lower() == "sampling":
        return "sampling"
    try:
        return positive_float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected 'sampling' or a positive number of records, got {text!r}") from None


def seed_int(text: str) -> int:
    try:
        x = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= x < 2**63:
        raise argparse.ArgumentTypeError(f"must be in [0, 2^63), got {text}")
    return x


def secret_seed(seed: int | None) -> int:
    """``seed`` where given, else one drawn from the operating system's entropy (``secrets``): a run's seed
    reproduces its noise, so by default nobody, the user included, knows it.

    Example:
        >>> secret_seed(7), 0 <= secret_seed(None) < 2**63
        (7, True)
    """
    import secrets

    return secrets.randbits(63) if seed is None else seed


def parse_options(items, flag: str = "--option") -> dict:
    """``key=value`` strings -> dict; values are JSON when they parse (numbers, true/false, null, lists), else text.

    ``flag`` names the command-line flag in the messages."""
    import json

    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        k = k.strip()
        if not sep or not k.isidentifier():
            raise UserError(f"{flag} expects key=value (e.g. --option noise=gaussian), got {item!r}")
        if k in out:
            raise UserError(f"{flag} {k} is given twice")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out
