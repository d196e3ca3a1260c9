"""Front-ends by name: what the command line (and scripts) call for ``--mechanism NAME``.

Each entry names the module and function of a front-end and how the common run arguments map onto
its parameters. Modules are imported lazily, on first use, so a front-end that is absent (or fails to
import) gives a :class:`MechanismUnavailable` error naming it and why, and the others still work.

Common arguments and the parameter they become (found by name in the function's signature):

* ``epsilon`` -> ``epsilon``; ``delta`` -> ``delta`` where the function takes one (pure-DP
  front-ends such as PrivBayes ignore it, and :func:`run` says so in ``notes``);
* ``workload`` (a :class:`~pgmjax.Workload`) -> ``workload``, if the function takes one;
* ``iters`` (estimation iterations) -> ``pgm_iters`` / ``iters`` / ``max_iters``;
* ``rounds`` -> ``rounds``;
* ``callback`` (called after every compiled chunk of every engine run, see
  :func:`pgmjax.estimate`) -> into the function's engine-options mapping (``estimate_options`` /
  ``pgm_options`` / ``engine_options``) or its ``callback`` parameter; a front-end with neither runs
  without it;
* ``options``: any other keyword argument of the function, checked against its signature.

Example:
    >>> from pgmjax.mechanisms import registry
    >>> sorted(registry.MECHANISMS)
    ['aim', 'dualquery', 'hdmm', 'mldp', 'mst', 'mwem', 'privbayes']
    >>> res = registry.run("mwem", data, epsilon=1.0, key=jax.random.key(0), iters=100)   # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dataset import Dataset
from ..workload import Workload

__all__ = [
    "MechanismSpec",
    "MechanismUnavailable",
    "MECHANISMS",
    "load",
    "availability",
    "parameters",
    "prepare",
    "run",
]

_ITER_NAMES = ("pgm_iters", "iters", "max_iters", "estimation_iters")
_ROUND_NAMES = ("rounds",)
_ENGINE_OPTION_NAMES = ("estimate_options", "pgm_options", "engine_options")
_CALLBACK_NAMES = ("callback", "progress_callback")
#: Parameters the common arguments set; ``options`` may not name them.
MANAGED = ("data", "epsilon", "delta", "key", "workload", "rounds") + _ITER_NAMES


class MechanismUnavailable(ImportError):
    """The front-end's module is absent or failed to import (the message says which and why)."""


@dataclass(frozen=True)
class MechanismSpec:
    """One front-end.

    Attributes:
        name: the command-line name.
        module: the module holding it (``pgmjax.mechanisms.<name>``).
        function: the function's name in that module.
        title: a one-line description.
        privacy: what it guarantees: ``"pure"`` (epsilon-DP), ``"zcdp"`` ((epsilon, delta) through
            zCDP), ``"advanced"`` ((epsilon, delta) by advanced composition) or ``"option"`` (depends
            on an option, e.g. MWEM's ``noise``).
        defaults: command-line defaults that differ from the function's (the user's ``options``
            override them), e.g. skipping an expensive comparison arm.
    """

    name: str
    module: str
    function: str
    title: str
    privacy: str
    defaults: Mapping[str, Any] = field(default_factory=dict)


MECHANISMS: dict[str, MechanismSpec] = {
    s.name: s
    for s in [
        MechanismSpec(
            "mwem", "pgmjax.mechanisms.mwem", "mwem",
            "MWEM+PGM: exponential-mechanism selection of badly answered marginals, Laplace (or Gaussian) measurements",
            "option",
            # The multiplicative-weights comparison arm is not needed for synthetic data; --option original=true runs it.
            {"original": False},
        ),
        MechanismSpec(
            "privbayes", "pgmjax.mechanisms.privbayes", "privbayes",
            "PrivBayes+PGM: a private Bayesian network (GreedyBayes) and its noisy conditional tables",
            "pure",
        ),
        MechanismSpec(
            "dualquery", "pgmjax.mechanisms.dualquery", "dualquery",
            "DualQuery+PGM: a private game between a query player and a record player, model fitted to its transcript",
            "advanced",
        ),
        MechanismSpec(
            "hdmm", "pgmjax.mechanisms.hdmm", "hdmm",
            "HDMM+PGM: a measurement strategy optimised for the workload, Laplace noise",
            "pure",
        ),
        MechanismSpec(
            "mst", "pgmjax.mechanisms.mst", "mst",
            "MST: one-way marginals plus a private maximum spanning tree of two-way marginals (Gaussian, zCDP)",
            "zcdp",
        ),
        MechanismSpec(
            "aim", "pgmjax.mechanisms.aim", "aim",
            "AIM: adaptive, workload-aware selection of marginals under a model-size cap (Gaussian, zCDP)",
            "zcdp",
        ),
        MechanismSpec(
            "mldp", "pgmjax.mechanisms.mldp", "mldp",
            "MLDP+PGM: low-sensitivity training queries with Laplace noise, other queries answered by the model",
            "pure",
        ),
    ]
}


def _spec(name: str) -> MechanismSpec:
    if name not in MECHANISMS:
        raise ValueError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    return MECHANISMS[name]


def load(name: str) -> Callable[..., Any]:
    """The front-end function of ``name``, importing its module now.

    Raises:
        ValueError: unknown name.
        MechanismUnavailable: the module is absent or fails to import, or lacks the function.
    """
    spec = _spec(name)
    try:
        module = importlib.import_module(spec.module)
    except ModuleNotFoundError as e:
        if e.name == spec.module:
            raise MechanismUnavailable(f"mechanism {name!r} is not available in this installation (no module {spec.module})") from None
        raise MechanismUnavailable(f"mechanism {name!r} is not available: importing {spec.module} failed: {e}") from None
    except Exception as e:  # a broken module must not take the other front-ends down
        raise MechanismUnavailable(
            f"mechanism {name!r} is not available: importing {spec.module} failed: {type(e).__name__}: {e}"
        ) from None
    fn = getattr(module, spec.function, None)
    if not callable(fn):
        raise MechanismUnavailable(f"mechanism {name!r} is not available: {spec.module} has no function {spec.function}()")
    return fn


def availability() -> dict[str, str | None]:
    """``{name: None if it loads, else the reason}`` for every registered front-end."""
    out = {}
    for name in MECHANISMS:
        try:
            load(name)
            out[name] = None
        except MechanismUnavailable as e:
            out[name] = str(e)
    return out


def parameters(name: str) -> dict[str, inspect.Parameter]:
    """The front-end function's parameters (imports it)."""
    return dict(inspect.signature(load(name)).parameters)


def _first(params: Mapping, names) -> str | None:
    return next((n for n in names if n in params), None)


def prepare(
    name: str,
    *,
    epsilon: float,
    delta: float | None = None,
    workload: Workload | None = None,
    iters: int | None = None,
    rounds: int | None = None,
    callback: Callable[[dict], Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[Callable, dict, list[str]]:
    """Map the common arguments onto the front-end's keyword arguments (nothing is run).

    Args:
        name: a key of :data:`MECHANISMS`.
        epsilon: the privacy budget.
        delta: passed where the function takes ``delta`` (required there if it has no default).
        workload: passed where the function takes ``workload``; a function that requires one gets
            every 2-way marginal when None (filled in by :func:`run`, which knows the domain).
        iters: estimation iterations.
        rounds: rounds of an iterative front-end.
        callback: the engine's per-chunk callback (progress reporting).
        options: further keyword arguments of the function.

    Returns:
        ``(function, kwargs, notes)``: everything but ``data`` and ``key``; notes are remarks for the
        user (an argument the front-end does not use).

    Raises:
        ValueError: an option the function does not take, an option that a common argument sets,
            ``rounds`` for a front-end without rounds, a required ``delta`` missing.
        MechanismUnavailable: see :func:`load`.
    """
    spec = _spec(name)
    fn = load(name)
    params = dict(inspect.signature(fn).parameters)
    kwargs: dict[str, Any] = {"epsilon": epsilon}
    notes: list[str] = []
    options = dict(options or {})
    clash = sorted(set(options) & set(MANAGED))
    if clash:
        raise ValueError(f"{name}: options {clash} are set by the common arguments (--epsilon, --delta, --workload, --iters, --rounds, --seed); use those")
    unknown = sorted(k for k in options if k not in params or params[k].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD))
    if unknown:
        allowed = [k for k, p in params.items() if k not in MANAGED and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        raise ValueError(f"{name}: unknown options {unknown}; {spec.function}() accepts: {', '.join(allowed)}")

    if "delta" in params:
        if delta is not None:
            kwargs["delta"] = delta
        elif params["delta"].default is inspect.Parameter.empty:
            raise ValueError(f"{name}: needs delta (an (epsilon, delta) guarantee); give one, e.g. 1e-9")
    elif delta is not None:
        notes.append(f"{name} is pure epsilon-DP: delta={delta:g} is not used (its guarantee is ({epsilon:g}, 0)-DP)")

    if "workload" in params:
        if workload is not None or params["workload"].default is inspect.Parameter.empty:
            kwargs["workload"] = workload  # None here is replaced by run() with every 2-way marginal
    elif workload is not None:
        notes.append(f"{name} does not take a workload: the workload is used for evaluation only")

    if iters is not None:
        key = _first(params, _ITER_NAMES)
        if key is None:
            notes.append(f"{name} has no estimation-iterations parameter: iters={iters} is not used")
        else:
            kwargs[key] = iters
    if rounds is not None:
        key = _first(params, _ROUND_NAMES)
        if key is None:
            raise ValueError(f"{name} has no rounds: drop rounds (it sets its own schedule)")
        kwargs[key] = rounds

    for k, v in spec.defaults.items():
        if k in params:
            kwargs[k] = v
    kwargs.update(options)

    if callback is not None:
        slot = _first(params, _ENGINE_OPTION_NAMES)
        direct = _first(params, _CALLBACK_NAMES)
        if slot is not None:
            merged = dict(kwargs.get(slot) or {})
            user_cb = merged.get("callback")
            if user_cb is None:
                merged["callback"] = callback
            else:
                def both(info, _a=callback, _b=user_cb):
                    _a(info)
                    return _b(info)

                merged["callback"] = both
            kwargs[slot] = merged
        elif direct is not None and direct not in options:
            kwargs[direct] = callback
    return fn, kwargs, notes


def run(name: str, data: Dataset, *, key, **common) -> tuple[Any, list[str]]:
    """Run a front-end by name on ``data``.

    Args:
        name: a key of :data:`MECHANISMS`.
        data: the private :class:`~pgmjax.Dataset`.
        key: a ``jax.random`` key.
        **common: the arguments of :func:`prepare`.

    Returns:
        ``(result, notes)``: the front-end's :class:`~pgmjax.mechanisms.result.MechanismResult` and
        the remarks of :func:`prepare`.
    """
    fn, kwargs, notes = prepare(name, **common)
    if "workload" in kwargs and kwargs["workload"] is None:
        kwargs["workload"] = Workload.all_kway(data.domain, min(2, len(data.domain)))
    return fn(data, key=key, **kwargs), notes
