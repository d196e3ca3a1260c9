"""The argument checks every layer uses: each raises before any computation, allocation or noise.

Each check takes the value, its name and ``where`` (the public function or method that received it,
named in the error message), and returns the value in canonical form (a Python ``float``, ``int``,
``bool`` or a float64 array). The data layer, the fitting engine, the privacy layer and the mechanism
front-ends use the same checks, so an invalid budget, total or limit fails with the same message
everywhere. This module sits below every sub-package (it imports only NumPy and JAX).

Example:
    >>> check_positive(0.5, "epsilon", "my_mechanism")
    0.5
    >>> check_count(3, "rounds", "my_mechanism")
    3
    >>> check_delta(1.5, "my_mechanism")
    Traceback (most recent call last):
        ...
    ValueError: my_mechanism: delta must be in (0, 1), got 1.5
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "check_real",
    "check_positive",
    "check_nonnegative",
    "check_delta",
    "check_count",
    "check_bool",
    "check_key",
    "check_values",
    "check_qualities",
    "exactly_one",
]


def check_real(value, name: str, where: str) -> float:
    """A real number (not a bool, string, array or nan), as a ``float``; infinities pass.

    Args:
        value: the argument to check.
        name: its name, for the error message.
        where: the function that received it, for the error message.

    Returns:
        ``float(value)``.

    Example:
        >>> check_real(np.float32(2.5), "scale", "f")
        2.5
    """
    if value is None or isinstance(value, (bool, np.bool_, str, bytes)) or np.ndim(value) != 0:
        raise TypeError(f"{where}: {name} must be a real number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be a real number, got {value!r}") from None
    if math.isnan(x):
        raise ValueError(f"{where}: {name} must be a number, got nan")
    return x


def check_positive(value, name: str, where: str) -> float:
    """A positive, finite real number (a budget, a sensitivity, a noise scale), as a ``float``.

    Args:
        value, name, where: as in :func:`check_real`.

    Returns:
        ``float(value)``, ``> 0`` and finite.

    Example:
        >>> check_positive(1, "epsilon", "f")
        1.0
    """
    x = check_real(value, name, where)
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"{where}: {name} must be positive and finite, got {value!r}")
    return x


def check_nonnegative(value, name: str, where: str) -> float:
    """A non-negative, finite real number, as a ``float``.

    Args:
        value, name, where: as in :func:`check_real`.

    Returns:
        ``float(value)``, ``>= 0`` and finite.

    Example:
        >>> check_nonnegative(0, "rho", "f")
        0.0
    """
    x = check_real(value, name, where)
    if not (x >= 0 and math.isfinite(x)):
        raise ValueError(f"{where}: {name} must be non-negative and finite, got {value!r}")
    return x


def check_delta(value, where: str) -> float:
    """The ``delta`` of an ``(epsilon, delta)`` guarantee: a real number in the open interval ``(0, 1)``.

    Args:
        value: the delta to check.
        where: the function that received it, for the error message.

    Returns:
        ``float(value)``.

    Example:
        >>> check_delta(1e-9, "f")
        1e-09
    """
    x = check_real(value, "delta", where)
    if not 0 < x < 1:
        raise ValueError(f"{where}: delta must be in (0, 1), got {value!r}")
    return x


def check_count(value, name: str, where: str, minimum: int = 1) -> int:
    """An integer (Python or NumPy, not a bool or a float) of at least ``minimum``, as an ``int``.

    Args:
        value, name, where: as in :func:`check_real`.
        minimum: the smallest value allowed (default 1).

    Returns:
        ``int(value)``.

    Example:
        >>> check_count(np.int64(0), "k", "f", minimum=0)
        0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{where}: {name} must be at least {minimum}, got {value}")
    return int(value)


def check_bool(value, name: str, where: str) -> bool:
    """``True`` or ``False`` (Python or NumPy bool; not 0/1), as a ``bool``.

    Args:
        value, name, where: as in :func:`check_real`.

    Returns:
        ``bool(value)``.

    Example:
        >>> check_bool(np.True_, "bounded", "f")
        True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be True or False, got {value!r}")
    return bool(value)


def check_key(key, where: str = "key"):
    """Return ``key`` if it is one ``jax.random`` key (typed, or a raw uint32 key); else raise a TypeError naming ``where``.

    Example:
        >>> k = check_key(jax.random.key(0), "my_mechanism")
    """
    if isinstance(key, jax.Array):
        if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) and key.shape == ():
            return key
        if key.dtype == jnp.uint32 and key.ndim == 1:
            return key
    shape = getattr(key, "shape", None)
    raise TypeError(
        f"{where}: key must be one jax.random key (jax.random.key(seed) or jax.random.PRNGKey(seed)), "
        f"got {type(key).__name__}" + (f" of shape {shape}" if shape is not None else f" {key!r}")
    )


def check_values(values, where: str, name: str = "values") -> np.ndarray:
    """An array of finite numbers (any shape), as float64.

    Args:
        values: array-like of numbers (exact answers, query factors, epsilons).
        where: the function that received it, for the error message.
        name: its name, for the error message.

    Returns:
        ``np.asarray(values, dtype=np.float64)``.

    Example:
        >>> check_values([1, 2], "f").dtype
        dtype('float64')
    """
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be an array of numbers, got {type(values).__name__}") from None
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{where}: {name} has non-finite entries")
    return x


def check_qualities(qualities, where: str) -> np.ndarray:
    """Exponential-mechanism scores: a non-empty 1-D float64 array, finite or ``-inf`` (excluded), not all ``-inf``.

    Args:
        qualities: one score per candidate.
        where: the function that received it, for the error message.

    Returns:
        The scores as a float64 array.

    Example:
        >>> check_qualities([0.0, -np.inf, 2.0], "f").tolist()
        [0.0, -inf, 2.0]
    """
    try:
        q = np.asarray(qualities, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: qualities must be an array of numbers, got {type(qualities).__name__}") from None
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"{where}: qualities must be a non-empty 1-D array (one per candidate), got shape {q.shape}")
    if np.any(np.isnan(q)) or np.any(q == np.inf):
        raise ValueError(f"{where}: qualities must be finite (or -inf to exclude a candidate); got nan or +inf")
    if not np.any(np.isfinite(q)):
        raise ValueError(f"{where}: every candidate is excluded (all qualities are -inf)")
    return q


def check_quality_rows(qualities, where: str) -> np.ndarray:
    """Exponential-mechanism scores of many parts: a float64 ``(parts, candidates)`` array with at least one part and
    one candidate, finite or ``-inf`` (excluded), each part with a finite score.

    Args:
        qualities: one row of scores per part.
        where: the function that received it, for the error message.

    Returns:
        The scores as a float64 array.

    Example:
        >>> check_quality_rows([[0.0, -np.inf], [1.0, 2.0]], "f").shape
        (2, 2)
    """
    q = np.asarray(qualities, dtype=np.float64)
    if q.ndim != 2 or 0 in q.shape:
        raise ValueError(f"{where}: qualities must hold at least one part's scores, a 2-D array (parts, candidates); "
                         f"got shape {q.shape}")
    if np.isnan(q).any() or (q == np.inf).any():
        raise ValueError(f"{where}: qualities must be finite (or -inf to exclude a candidate); got nan or +inf")
    empty = np.flatnonzero(~np.isfinite(q).any(axis=1))
    if empty.size:
        raise ValueError(f"{where}: every candidate of part {int(empty[0])} is excluded (all qualities are -inf)")
    return q


def exactly_one(where: str, **given) -> tuple[str, Any]:
    """The one keyword argument that is not None, as ``(name, value)``; a ValueError if none or several are.

    Args:
        where: the function that received them, for the error message.
        **given: the alternatives (e.g. ``epsilon=..., scale=...``).

    Returns:
        ``(name, value)`` of the one given.

    Example:
        >>> exactly_one("f", epsilon=None, scale=2.0)
        ('scale', 2.0)
    """
    present = [(k, v) for k, v in given.items() if v is not None]
    if len(present) != 1:
        names = ", ".join(f"{k}=" for k in given)
        got = ", ".join(f"{k}=" for k, _ in present) or "none"
        raise ValueError(f"{where}: give exactly one of {names} (got {got})")
    return present[0]
