"""Engine options a front-end passes through to :func:`pgmjax.estimate`, minus those it sets itself."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


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
