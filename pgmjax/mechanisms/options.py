"""What every front-end checks the same way: the engine options it passes through to :func:`pgmjax.estimate`
(minus those it sets itself), and the largest budget it accepts."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

# The largest epsilon a front-end accepts. Beyond it the noise is far below one count (scale 1e-9 at
# sensitivity 1), so answers are the data's own to float precision; far beyond it the arithmetic of the
# calibrations breaks down (at 1e300: noise variances 2 / eps^2 underflow to 0, e^eps overflows).
MAX_EPSILON = 1e9


def engine_options(given: Mapping | None, reserved: Iterable[str], where: str, *, argument: str = "estimate_options",
                   hint: str | None = None) -> dict:
    """A copy of ``given`` (None: empty), or a ValueError naming the options the front-end sets itself.

    Args:
        given: the user's keyword arguments for :func:`pgmjax.estimate`.
        reserved: the names the front-end sets (the user may not).
        where: the front-end's name, for the message.
        argument: the parameter's name, for the message.
        hint: what to use instead, appended to the message.

    Returns:
        A new dict.

    Example:
        >>> engine_options({"tol": 1e-6}, ("iters", "total"), "mwem")
        {'tol': 1e-06}
    """
    options = dict(given or {})
    bad = sorted(set(options) & set(reserved))
    if bad:
        raise ValueError(f"{where}: {argument} may not set {bad}{hint or ''}")
    return options


def check_epsilon(epsilon, where: str) -> float:
    """``epsilon`` as a float, or a ValueError naming it: it must be positive and at most :data:`MAX_EPSILON`.

    Args:
        epsilon: the front-end's budget.
        where: the front-end's name, for the message.

    Returns:
        ``float(epsilon)``.

    Example:
        >>> check_epsilon(1e6, "mwem")
        1000000.0
        >>> check_epsilon(1e300, "mwem")
        Traceback (most recent call last):
        ...
        ValueError: mwem: epsilon=1e+300 is above the largest supported budget 1e+09 (noise scales at 1e+09 are already below 1e-9 of a count); pass epsilon <= 1e+09 for a (nearly) noise-free run
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) and not hasattr(epsilon, "__float__"):
        raise TypeError(f"{where}: epsilon must be a number, got {epsilon!r}")
    eps = float(epsilon)
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"{where}: epsilon must be positive and finite, got {epsilon!r}")
    if eps > MAX_EPSILON:
        raise ValueError(
            f"{where}: epsilon={eps:g} is above the largest supported budget {MAX_EPSILON:g} (noise scales at "
            f"{MAX_EPSILON:g} are already below 1e-9 of a count); pass epsilon <= {MAX_EPSILON:g} for a (nearly) noise-free run"
        )
    return eps
