"""The front-end's call from ``pgmjax run``'s options, derived from the registry and the function's signature.

Every front-end has the common parameters (:data:`pgmjax.mechanisms.options.COMMON_PARAMETERS`); each
has one command-line flag (:data:`COMMON_FLAGS`), the same for every mechanism. ``--option KEY=VALUE``
sets the front-end's own keyword-only options (:func:`pgmjax.mechanisms.registry.own_options`), checked
against its signature before anything is read.
"""

from __future__ import annotations

import dataclasses
import inspect

from ..estimation.options import FIELDS, FitOptions, unknown_fields
from ..mechanisms import registry
from ..mechanisms.options import DEFAULT_DELTA
from .errors import UserError

#: The command-line flag of each common parameter (``data`` is ``--data``, ``epsilon`` ``--epsilon``; ``key``
#: comes from ``--seed``).
COMMON_FLAGS = {
    "data": "--data",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "key": "--seed",
    "workload": "--workload",
    "engine_iters": "--engine-iters",
    "fit_options": "--engine-option",
    "max_model_mb": "--max-model-mb",
}
#: Front-ends whose ``max_model_mb`` must be None (their cliques are chosen after the release): ``--max-model-mb``
#: reaches them as the run's size limit only (:func:`pgmjax.graph.size_limit.limited`, set by ``pgmjax run``).
LIMIT_ONLY = ("rr_synthetic",)
#: Command-line names that stand for a registry name.
ALIASES = {"rr": "rr_synthetic"}


def mechanism_name(name: str) -> str:
    """The registry name of ``--mechanism NAME`` (``rr`` is ``rr_synthetic``)."""
    return ALIASES.get(name, name)


def _delta(entry: registry.Mechanism, delta, options: dict, notes: list) -> dict:
    """The ``delta`` keyword for the front-end, or a UserError when the guarantee takes none."""
    if not registry.takes_delta(entry.name, options):
        if delta is not None:
            how = "; add --option noise=gaussian for (eps, delta)-DP via zCDP" if entry.privacy == "noise" else ""
            raise UserError(f"{entry.name} is pure eps-DP (delta = 0) here: drop --delta{how}")
        return {}
    if delta is None:
        if entry.privacy != "zcdp":
            notes.append(f"no delta given: {entry.name} uses delta={DEFAULT_DELTA:g}")
        return {"delta": DEFAULT_DELTA}
    return {"delta": delta}


def front_end_call(args, options: dict, fit_options: dict) -> tuple[registry.Mechanism, dict, list[str]]:
    """The front-end and its keyword arguments (everything but ``data``, ``key`` and ``workload``), nothing run.

    Args:
        args: the parsed ``pgmjax run`` arguments (``mechanism``, ``epsilon``, ``delta``, ``engine_iters``,
            ``max_model_mb``, ``rounds``, ``records``).
        options: the ``--option`` values (the front-end's own options).
        fit_options: the ``--engine-option`` values (``--oracle`` joins them as ``oracle``).

    Returns:
        ``(registry entry, keyword arguments, notes for the user)``.

    Raises:
        UserError: an unknown mechanism or option, a common option given as ``--option``, a delta for a
            pure-DP run, ``--rounds`` for a front-end without rounds.
    """
    try:
        entry = registry.get(mechanism_name(args.mechanism))
    except ValueError as e:
        raise UserError(str(e)) from None
    own = registry.own_options(entry.name)
    common = sorted(set(options) & set(COMMON_FLAGS))
    if common:
        raise UserError(f"{entry.name}: {common} are common options: use {', '.join(COMMON_FLAGS[c] for c in common)}")
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    unknown = sorted(k for k in options if k not in own or own[k].kind in variadic)
    if unknown:
        raise UserError(f"{entry.name}: unknown options {unknown}; its own options are: {', '.join(own)}")
    notes: list[str] = []
    kwargs = dict(_delta(entry, args.delta, options, notes))
    kwargs["epsilon"] = args.epsilon
    if args.engine_iters is not None:
        kwargs["engine_iters"] = args.engine_iters
    if args.max_model_mb is not None and entry.name not in LIMIT_ONLY:
        kwargs["max_model_mb"] = args.max_model_mb  # the front-end's own cap; the run's size limit too (run.run)
    oracle = getattr(args, "oracle", None)
    if oracle is not None:
        if "oracle" in fit_options:
            raise UserError("give the oracle once: --oracle or --engine-option oracle=")
        fit_options = {**fit_options, "oracle": oracle}
    if fit_options:
        unknown = unknown_fields(fit_options)
        if unknown:
            raise UserError(f"--engine-option: unknown option(s) {unknown}; pgmjax.FitOptions takes {', '.join(FIELDS)}")
        try:
            kwargs["fit_options"] = FitOptions(**fit_options)
        except (TypeError, ValueError) as e:
            raise UserError(f"--engine-option: {e}") from None
    if args.rounds is not None:
        if "rounds" not in own:
            raise UserError(f"{entry.name} has no rounds (it sets its own schedule): drop --rounds")
        if "rounds" in options:
            raise UserError(f"{entry.name}: give the rounds once (--rounds or --option rounds=)")
        kwargs["rounds"] = args.rounds
    if args.records is not None and "rows" in own:
        kwargs["rows"] = args.records
    for k, v in entry.cli_defaults.items():
        kwargs.setdefault(k, v)
    kwargs.update(options)
    return entry, kwargs, notes


def with_progress(entry: registry.Mechanism, kwargs: dict, engine_callback, step_callback) -> dict:
    """``kwargs`` with the engine's per-chunk callback in ``fit_options`` and, where the front-end has a
    ``progress`` option, the per-step callback."""
    out = dict(kwargs)
    given = out.get("fit_options") or FitOptions()
    user = given.callback
    if user is None:
        callback = engine_callback
    else:
        def callback(info, _a=engine_callback, _b=user):
            _a(info)
            return _b(info)

    out["fit_options"] = dataclasses.replace(given, callback=callback)
    if "progress" in registry.own_options(entry.name) and "progress" not in out:
        out["progress"] = step_callback
    return out


def expected_iterations(entry: registry.Mechanism, kwargs: dict, domain) -> int | None:
    """Engine iterations the run will make where the schedule is fixed in advance (the bar's total), else None."""
    params = inspect.signature(entry.function).parameters

    def value(name):
        if name in kwargs:
            return kwargs[name]
        p = params.get(name)
        return None if p is None or p.default is p.empty else p.default

    iters = value("engine_iters")
    if not isinstance(iters, int):
        return None
    if entry.name == "mwem":  # one fit per round
        rounds = value("rounds")
        return iters * (rounds if isinstance(rounds, int) else len(domain))
    if entry.name == "mst":  # the one-way fit for the selection, then the final fit
        select = value("select_iters")
        return iters + (select if isinstance(select, int) else min(2500, iters))
    if entry.name in ("aim", "tree_aim"):  # rounds depend on the annealing; batch fits stop once converged
        return None
    return iters  # one fit
