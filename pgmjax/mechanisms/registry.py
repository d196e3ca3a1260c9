"""Front-ends by name: what the command line (and scripts) call for ``--mechanism NAME``.

Each entry names the module and function of a front-end and how the common run arguments map onto
its parameters. Modules are imported lazily, on first use, so a front-end that is absent (or fails to
import) gives a :class:`MechanismUnavailable` error naming it and why, and the others still work.

Common arguments and where they go (the entry's :class:`MechanismSpec` fields, checked against the
function's signature):

* ``epsilon`` -> ``epsilon``; ``delta`` by the entry's ``delta`` policy: always for DualQuery
  (:data:`DEFAULT_DELTA` if not given), when given for MST/AIM (else their own default 1e-9), only
  with ``noise="gaussian"`` for MWEM/HDMM, never for the pure-DP PrivBayes and MLDP (a given delta is
  then reported in ``notes`` as unused);
* ``workload`` (a :class:`~pgmjax.Workload`) -> ``workload`` (MWEM, DualQuery, HDMM, AIM), or turned
  into MLDP's ``training`` queries (every cell of every workload marginal);
* ``iters`` (estimation iterations per fit) -> ``pgm_iters``, MST's ``select_iters`` and
  ``fit_iters``, AIM's ``max_iters``; ``rounds`` -> ``rounds``; ``records`` -> ``rows`` (MST, AIM);
* ``callback`` (after every compiled chunk of every engine fit, see :func:`pgmjax.estimate`) -> into
  the function's engine options (``estimate_options`` / ``pgm_options``); ``step_callback`` (per round
  or step) -> ``progress`` (MST, AIM);
* ``options``: any other keyword argument of the function, checked against its signature; an entry's
  ``defaults`` (e.g. skipping a comparison arm the command line does not need) come first.

Example:
    >>> from pgmjax.mechanisms import registry
    >>> sorted(registry.MECHANISMS)
    ['aim', 'dualquery', 'hdmm', 'mldp', 'mst', 'mwem', 'privbayes', 'rr']
    >>> import jax, numpy as np, pgmjax as pj
    >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), {"a": 3, "b": 4, "c": 2})
    >>> res, notes = registry.run("privbayes", data, key=jax.random.key(0), epsilon=1.0, iters=200)
    >>> res.info["network"], notes
    ([('b', ()), ('a', ('b',)), ('c', ('b',))], [])
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.dataset import Dataset
from ..queries.workload import Workload

__all__ = [
    "MechanismSpec",
    "MechanismUnavailable",
    "MECHANISMS",
    "DEFAULT_DELTA",
    "load",
    "availability",
    "parameters",
    "engine_slot",
    "prepare",
    "run",
]

#: The delta used when a front-end needs one and none is given (MST/AIM's reference default).
DEFAULT_DELTA = 1e-9
#: A mechanism's ``training`` queries built from a workload (MLDP) must fit in this many matrix entries.
MAX_TRAINING_ENTRIES = 2**24

_ENGINE_OPTION_NAMES = ("estimate_options", "pgm_options", "engine_options")
_DELTA_POLICIES = ("required", "default", "gaussian", "none")


class MechanismUnavailable(ImportError):
    """The front-end's module is absent or failed to import (the message says which and why)."""


@dataclass(frozen=True)
class MechanismSpec:
    """One front-end and how the common arguments map onto its parameters.

    Attributes:
        name: the command-line name.
        module: the module holding it (e.g. ``pgmjax.mechanisms.spanning_tree`` for ``mst``; the function is
            also ``pgmjax.mechanisms.<function>``).
        function: the function's name in that module.
        title: a one-line description.
        privacy: what it guarantees: ``"pure"`` (epsilon-DP), ``"zcdp"`` ((epsilon, delta) through
            zCDP), ``"advanced"`` ((epsilon, delta) by advanced composition) or ``"noise"`` (pure with
            Laplace noise, zCDP with ``noise="gaussian"``).
        delta: how ``delta`` is passed: ``"required"`` (always; :data:`DEFAULT_DELTA` when not
            given), ``"default"`` (when given; else the function's default), ``"gaussian"`` (only with
            the option ``noise="gaussian"``, :data:`DEFAULT_DELTA` when not given), ``"none"`` (pure
            DP: never).
        iters: the parameters that ``iters`` (estimation iterations per fit) sets.
        rows: the parameter for the number of synthetic records, if any.
        progress: a parameter taking a per-step callable (rounds, stages), if any.
        workload_to: None when the function takes ``workload`` itself; else the name of a function
            of this module turning ``(workload, domain)`` into keyword arguments (e.g. MLDP's training queries).
        defaults: command-line defaults that differ from the function's (the user's ``options``
            override them), e.g. skipping an expensive comparison arm.
        report_info: the keys of ``result.info`` that are safe to publish in a run report: settings,
            released (noisy) values and what was selected. The others are left out: some are
            computed from the data without noise (e.g. MST's selection weights, PrivBayes's scores),
            others are internal objects.
    """

    name: str
    module: str
    function: str
    title: str
    privacy: str
    delta: str = "none"
    iters: tuple[str, ...] = ("pgm_iters",)
    rows: str | None = None
    progress: str | None = None
    workload_to: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    report_info: tuple[str, ...] = ()


MECHANISMS: dict[str, MechanismSpec] = {
    s.name: s
    for s in [
        MechanismSpec(
            "mwem", "pgmjax.mechanisms.multiplicative_weights", "mwem",
            "MWEM+PGM: exponential-mechanism selection of badly answered marginals, Laplace (or Gaussian) measurements",
            "noise", delta="gaussian",
            # The multiplicative-weights comparison arm is not needed for synthetic data; --option original=true runs it.
            defaults={"original": False},
            report_info=("selection", "noise", "bounded", "rounds", "alpha", "epsilon", "delta", "budget", "em_sensitivity",
                         "max_model_mb", "log", "selected", "total", "seconds"),
        ),
        MechanismSpec(
            "privbayes", "pgmjax.mechanisms.bayesian_network", "privbayes",
            "PrivBayes+PGM: a private Bayesian network (GreedyBayes) and its noisy conditional tables",
            "pure",
            report_info=("network", "order", "score", "bounded", "beta", "theta", "degree", "epsilon", "epsilon_count",
                         "epsilon_structure", "epsilon_step", "epsilon_tables", "cliques", "laplace_scale", "noisy_count",
                         "total", "pgm_iters"),
        ),
        MechanismSpec(
            "dualquery", "pgmjax.mechanisms.dual_query", "dualquery",
            "DualQuery+PGM: a private game between a query player and a record player, model fitted to its transcript",
            "advanced", delta="required",
            report_info=("rounds", "eta", "eta_used", "samples", "bound", "delta", "epsilon_at_eta", "epsilon_spent",
                         "queries", "pgm_iters", "seconds"),
        ),
        MechanismSpec(
            "hdmm", "pgmjax.mechanisms.matrix_mechanism", "hdmm",
            "HDMM+PGM: a measurement strategy optimised for the workload, Laplace (or Gaussian) noise",
            "noise", delta="gaussian",
            # The least-squares comparison arms are not needed for synthetic data.
            defaults={"original": False, "max_table_cells": 0},
            report_info=("strategy_info", "noise", "bounded", "epsilon", "delta", "rho", "sensitivity", "sensitivity_exact",
                         "noise_scale", "noise_std", "expected_error", "workload_rows", "terms", "total", "pgm_iters",
                         "pgm_method", "seconds"),
        ),
        MechanismSpec(
            "mst", "pgmjax.mechanisms.spanning_tree", "mst",
            "MST: one-way marginals plus a private maximum spanning tree of two-way marginals (Gaussian, zCDP)",
            "zcdp", delta="default", iters=("select_iters", "fit_iters"), rows="rows", progress="progress",
            report_info=("epsilon", "delta", "rho", "budget", "edges", "compressed_domain", "mapping", "total",
                         "select_iters", "fit_iters", "seconds"),
        ),
        MechanismSpec(
            "aim", "pgmjax.mechanisms.adaptive_iterative", "aim",
            "AIM: adaptive, workload-aware selection of marginals under a model-size cap (Gaussian, zCDP)",
            "zcdp", delta="default", iters=("max_iters",), rows="rows", progress="progress",
            report_info=("epsilon", "delta", "rho", "budget", "rounds", "rounds_run", "max_model_size", "max_iters",
                         "final_iters", "log", "selected", "annealed", "total", "model_mb", "seconds"),
        ),
        MechanismSpec(
            "mldp", "pgmjax.mechanisms.query_learning", "mldp",
            "MLDP+PGM: the workload's marginal cells as training queries with Laplace noise, a model fitted to them",
            "pure", workload_to="_mldp_training",
            # The regression arm is not needed for synthetic data; the CLI wants synthetic records.
            defaults={"original": False, "synthetic": True},
            report_info=("size", "bounded", "epsilon", "sensitivity", "sensitivity_exact", "scale", "stddev", "coverage",
                         "total", "total_source", "seconds"),
        ),
        MechanismSpec(
            "rr", "pgmjax.mechanisms.randomized_response_synthetic", "rr_synthetic",
            "RR+PGM: randomized response on every record (query-set independent), debiased marginals fitted by the engine",
            "pure", rows="rows",
            # The whole-row release is uninformative beyond a few dozen rows: the CLI randomises each attribute.
            defaults={"per_attribute": True},
            report_info=("epsilon", "per_attribute", "bounded", "public_count", "epsilons", "keep", "domain_rows",
                         "rmse_bound", "informative_rows", "cliques", "total", "pgm_iters", "seconds"),
        ),
    ]
}


def _mldp_training(workload: Workload, domain) -> dict:
    """MLDP's training queries for a marginal workload: every cell of every workload clique (identity blocks)."""
    from .query_learning import QuerySet

    cliques = list(dict.fromkeys(workload.cliques))
    entries = sum(domain.size(c) ** 2 for c in cliques)
    if entries > MAX_TRAINING_ENTRIES:
        big = max(cliques, key=domain.size)
        raise ValueError(
            f"mldp: the training queries (every cell of every workload marginal, as dense identity blocks) would hold "
            f"{entries:,} matrix entries (largest clique {big}: {domain.size(big):,} cells); the limit is "
            f"{MAX_TRAINING_ENTRIES:,}: use a workload of smaller marginals, or call pgmjax.mechanisms.mldp with a QuerySet"
        )
    return {"training": QuerySet(domain, [(c, np.eye(domain.size(c))) for c in cliques])}


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


def engine_slot(name: str) -> str | None:
    """The parameter through which the front-end passes options to :func:`pgmjax.estimate` (where the
    engine callback goes), or None if it has none (then no per-iteration progress can be reported)."""
    params = parameters(name)
    return next((n for n in _ENGINE_OPTION_NAMES if n in params), None)


def _managed(spec: MechanismSpec) -> set[str]:
    """Parameters the common arguments set (``options`` may not name them)."""
    out = {"data", "epsilon", "delta", "key", "workload", "rounds", *spec.iters}
    if spec.rows:
        out.add(spec.rows)
    if spec.progress:
        out.add(spec.progress)
    if spec.workload_to == "_mldp_training":
        out.add("training")
    return out


def prepare(
    name: str,
    *,
    epsilon: float,
    delta: float | None = None,
    workload: Workload | None = None,
    domain=None,
    iters: int | None = None,
    rounds: int | None = None,
    records: int | None = None,
    callback: Callable[[dict], Any] | None = None,
    step_callback: Callable[[dict], Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[Callable, dict, list[str]]:
    """Map the common arguments onto the front-end's keyword arguments (nothing is run).

    Args:
        name: a key of :data:`MECHANISMS`.
        epsilon: the privacy budget.
        delta: the delta of an ``(epsilon, delta)`` guarantee, passed by the :class:`MechanismSpec` entry's ``delta`` policy.
        workload: a :class:`~pgmjax.Workload`, for front-ends that take one (None: their default;
            every 2-way marginal where one is required, filled in by :func:`run`).
        domain: the data's domain, needed to turn a workload into training queries (MLDP).
        iters: estimation iterations per fit (the :class:`MechanismSpec` entry's ``iters`` parameters).
        rounds: rounds of an iterative front-end.
        records: number of synthetic records, where the front-end takes it.
        callback: the engine's per-chunk callback (:func:`pgmjax.estimate`), put into the function's
            engine-options mapping (``estimate_options`` / ``pgm_options``).
        step_callback: a per-round / per-step callable, for front-ends with a ``progress`` parameter.
        options: further keyword arguments of the function.

    Returns:
        ``(function, kwargs, notes)``: everything but ``data`` and ``key``; notes are remarks for the
        user (an argument the front-end does not use, a default delta).

    Raises:
        ValueError: an option the function does not take, an option that a common argument sets,
            ``rounds`` for a front-end without rounds, training queries too large.
        MechanismUnavailable: see :func:`load`.
    """
    spec = _spec(name)
    fn = load(name)
    params = dict(inspect.signature(fn).parameters)
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    managed = _managed(spec)
    kwargs: dict[str, Any] = {"epsilon": epsilon}
    notes: list[str] = []
    options = dict(options or {})
    clash = sorted(set(options) & managed)
    if clash:
        raise ValueError(
            f"{name}: options {clash} are set by the common arguments "
            "(--epsilon, --delta, --workload, --iters, --rounds, --records, --seed); use those"
        )
    unknown = sorted(k for k in options if k not in params or params[k].kind in variadic)
    if unknown:
        allowed = [k for k, p in params.items() if k not in managed and p.kind not in variadic]
        raise ValueError(f"{name}: unknown options {unknown}; {spec.function}() accepts: {', '.join(allowed)}")

    # delta, by the registry entry's policy
    if spec.delta == "required" or (spec.delta == "gaussian" and options.get("noise") == "gaussian"):
        kwargs["delta"] = DEFAULT_DELTA if delta is None else delta
        if delta is None:
            notes.append(f"no delta given: {name} uses delta={DEFAULT_DELTA:g}")
    elif spec.delta == "default":
        if delta is not None:
            kwargs["delta"] = delta
    elif delta is not None:
        why = "with Laplace noise (--option noise=gaussian for zCDP)" if spec.delta == "gaussian" else ""
        notes.append(f"{name} is pure epsilon-DP{' ' + why if why else ''}: delta={delta:g} is not used")

    if spec.workload_to is not None:
        if workload is not None and domain is not None:
            kwargs.update(globals()[spec.workload_to](workload, domain))
    elif "workload" in params:
        if workload is not None or params["workload"].default is inspect.Parameter.empty:
            kwargs["workload"] = workload  # None here is replaced by run() with every 2-way marginal
    elif workload is not None:
        notes.append(f"{name} does not take a workload: the workload is used for evaluation only")

    if iters is not None:
        names = [n for n in spec.iters if n in params]
        if not names:
            notes.append(f"{name} has no estimation-iterations parameter: iters={iters} is not used")
        for n in names:
            kwargs[n] = iters
    if rounds is not None:
        if "rounds" not in params:
            raise ValueError(f"{name} has no rounds (it sets its own schedule): drop --rounds")
        kwargs["rounds"] = rounds
    if records is not None and spec.rows is not None and spec.rows in params:
        kwargs[spec.rows] = records
    if step_callback is not None and spec.progress is not None and spec.progress in params:
        kwargs[spec.progress] = step_callback

    for k, v in spec.defaults.items():
        if k in params:
            kwargs[k] = v
    kwargs.update(options)

    if callback is not None:
        slot = engine_slot(name)
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
    return fn, kwargs, notes


def run(name: str, data: Dataset, *, key, workload: Workload | None = None, **common) -> tuple[Any, list[str]]:
    """Run a front-end by name on ``data``.

    Args:
        name: a key of :data:`MECHANISMS`.
        data: the private :class:`~pgmjax.Dataset`.
        key: a ``jax.random`` key.
        workload: see :func:`prepare`; a front-end that needs one (DualQuery, MLDP) gets every 2-way
            marginal (every 1-way marginal for one attribute) when None.
        **common: the other arguments of :func:`prepare`.

    Returns:
        ``(result, notes)``: the front-end's :class:`~pgmjax.mechanisms.result.MechanismResult` and
        the remarks of :func:`prepare`.

    Example:
        >>> data = Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), {"a": 3, "b": 4, "c": 2})
        >>> res, notes = run("privbayes", data, key=jax.random.key(0), epsilon=1.0, delta=1e-6, iters=200)
        >>> res.accountant.spent, notes
        (1.0, [...])
    """
    spec = _spec(name)
    params = parameters(name)
    needs = spec.workload_to is not None or ("workload" in params and params["workload"].default is inspect.Parameter.empty)
    if workload is None and needs:
        workload = Workload.all_kway(data.domain, min(2, len(data.domain)))
    fn, kwargs, notes = prepare(name, workload=workload, domain=data.domain, **common)
    return fn(data, key=key, **kwargs), notes
