"""What every front-end shares: the common signature and the checks of its shared options.

Every front-end is ``pgmjax.mechanisms.<name>(data, epsilon, delta=..., *, key, workload=...,
engine_iters=..., fit_options=..., max_model_mb=..., <its own keyword-only options>)``
(:data:`COMMON_PARAMETERS`):

* ``delta``: the ``delta`` of an ``(epsilon, delta)`` guarantee (default :data:`DEFAULT_DELTA` where the
  mechanism needs one); a pure-DP front-end takes ``delta=0`` (its default) and refuses any other value
  (:func:`check_pure_delta`), so a delta is never dropped silently;
* ``workload``: what the mechanism optimises for; a front-end that selects its measurements without one
  refuses it (:func:`refuse_option`);
* ``engine_iters``: iterations of each engine fit (:func:`pgmjax.estimate`);
* ``fit_options``: a :class:`pgmjax.FitOptions` (the fits' ``method``, ``loss``, ``dtype``, ``tol``, ``callback``,
  ...; checked where it is made; :func:`check_fit_options`);
* ``max_model_mb``: the model-size cap in MB of a float64 model (``8 * cells / 2**20`` of its junction
  tree), :func:`check_model_cap`; None for no cap where the mechanism has a default one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ..data.dataset import Dataset
from ..data.domain import Domain
from ..estimation.options import FitOptions
from ..graph import size_limit
from ..graph.junction import triangulated_cliques
from ..model.sampling import METHODS as SAMPLING_METHODS
from ..privacy import check_bool, check_count, check_delta, check_real
from ..queries.workload import Workload

# The largest epsilon a front-end accepts. Beyond it the noise is far below one count (scale 1e-9 at
# sensitivity 1), so answers are the data's own to float precision; far beyond it the arithmetic of the
# calibrations breaks down (at 1e300: noise variances 2 / eps^2 underflow to 0, e^eps overflows).
MAX_EPSILON = 1e9


def check_estimate_kwargs(given: Mapping | None, reserved: Iterable[str], where: str, *, argument: str = "options",
                          hint: str | None = None) -> dict:
    """A copy of the keyword arguments ``given`` for :func:`pgmjax.estimate` (None: empty), or a ValueError naming
    those the caller sets itself (a front-end's internal fits).

    Args:
        given: keyword arguments for :func:`pgmjax.estimate`.
        reserved: the names the caller sets (``given`` may not).
        where: the caller's name, for the message.
        argument: the parameter's name, for the message.
        hint: what to use instead, appended to the message.

    Returns:
        A new dict.

    Example:
        >>> check_estimate_kwargs({"tol": 1e-6}, ("iters", "total"), "fit_pgm")
        {'tol': 1e-06}
    """
    options = dict(given or {})
    bad = sorted(set(options) & set(reserved))
    if bad:
        raise ValueError(f"{where}: {argument} may not set {bad}{hint or ''}")
    return options


def check_fit_options(given, where: str, *, refused: Iterable[str] = ()) -> dict:
    """A front-end's ``fit_options`` (a :class:`pgmjax.FitOptions`, or None for the defaults) as the keyword
    arguments of :func:`pgmjax.estimate` it sets (:meth:`~pgmjax.FitOptions.given`), or an error naming what is
    wrong: a dictionary (the former ``engine_options``) or an option in ``refused`` (one the front-end sets
    itself).

    Example:
        >>> from pgmjax import FitOptions
        >>> check_fit_options(FitOptions(tol=1e-6), "mst")
        {'tol': 1e-06}
        >>> check_fit_options(FitOptions(loss="l1"), "dualquery", refused=("loss",))
        Traceback (most recent call last):
        ...
        ValueError: dualquery: fit_options may not set ['loss']; the mechanism sets it
    """
    if given is None:
        return {}
    if not isinstance(given, FitOptions):
        raise TypeError(f"{where}: fit_options must be a pgmjax.FitOptions (e.g. pj.FitOptions(method='lbfgs')) or None, "
                        f"got {type(given).__name__}")
    options = given.given()
    bad = sorted(set(options) & set(refused))
    if bad:
        raise ValueError(f"{where}: fit_options may not set {bad}; the mechanism sets it")
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


def check_data(data, where: str) -> Dataset:
    """``data`` if it is a non-empty :class:`~pgmjax.Dataset`, else a TypeError / ValueError naming ``where``.

    Example:
        >>> check_data([[0, 1]], "mst")
        Traceback (most recent call last):
        ...
        TypeError: mst: data must be a pgmjax.Dataset, got list
    """
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    if len(data) == 0:
        raise ValueError(f"{where}: the dataset has no records")
    return data


def check_synthetic(synthetic, rows, synthetic_method: str, where: str) -> tuple[bool, int | None, str]:
    """``(synthetic, rows, synthetic_method)`` checked: a bool, None or a count of at least 1, one of the
    sampling methods (:data:`pgmjax.model.sampling.METHODS`).

    Example:
        >>> check_synthetic(True, None, "low_variance", "mst")
        (True, None, 'low_variance')
    """
    synthetic = check_bool(synthetic, "synthetic", where)
    if rows is not None:
        rows = check_count(rows, "rows", where, 1)
    if synthetic_method not in SAMPLING_METHODS:
        raise ValueError(f"{where}: synthetic_method must be one of {SAMPLING_METHODS}, got {synthetic_method!r}")
    return synthetic, rows, synthetic_method


def check_choice(value, name: str, options: tuple, where: str) -> str:
    """``value`` if it is one of ``options``, else a ValueError naming ``where`` and ``name``.

    Example:
        >>> check_choice("gaussian", "noise", ("laplace", "gaussian"), "mwem")
        'gaussian'
    """
    if value not in options:
        raise ValueError(f"{where}: unknown {name} {value!r}; expected one of {options}")
    return value


def check_workload(workload, domain: Domain, where: str) -> Workload:
    """The workload a front-end works on, checked against the data's domain before anything is computed.

    Args:
        workload: None (all 2-way marginals, needs two attributes), a :class:`~pgmjax.Workload` whose
            attributes the domain has with the same sizes, or a list of cliques (their marginals).
        domain: the data's domain.
        where: the front-end's name, for the messages.

    Returns:
        A :class:`~pgmjax.Workload`.

    Example:
        >>> dom = Domain({"a": 2, "b": 3, "c": 2})
        >>> check_workload(None, dom, "mwem").cliques, check_workload([("a", "c")], dom, "mwem").cliques
        ((('a', 'b'), ('a', 'c'), ('b', 'c')), (('a', 'c'),))
    """
    if workload is None:
        if len(domain) < 2:
            raise ValueError(f"{where}: the default workload (all 2-way marginals) needs at least 2 attributes")
        return Workload.all_kway(domain, 2)
    if isinstance(workload, Workload):
        if workload.domain != domain:
            for c in set(workload.cliques):
                for a in c:
                    if a not in domain or domain[a] != workload.domain[a]:
                        raise ValueError(f"{where}: workload attribute {a!r} is missing from, or sized differently in, the data's domain")
        return workload
    if isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence):
        raise TypeError(f"{where}: workload must be a pgmjax.Workload or a list of cliques, got {type(workload).__name__}")
    return Workload.marginals(domain, workload)


#: The parameters every front-end takes, in this order: ``data, epsilon, delta`` (positional), then the
#: keyword-only ``key, workload, engine_iters, fit_options, max_model_mb``; mechanism-specific
#: keyword-only options follow.
COMMON_PARAMETERS = ("data", "epsilon", "delta", "key", "workload", "engine_iters", "fit_options", "max_model_mb")
#: The delta of the ``(epsilon, delta)`` front-ends when none is given (MST's and AIM's reference default).
DEFAULT_DELTA = 1e-9


def check_pure_delta(delta, where: str, why: str = "") -> float:
    """``0.0``, or a ValueError: a pure-DP front-end takes ``delta=0`` (its default) and nothing else.

    Args:
        delta: the front-end's ``delta`` argument.
        where: the front-end's name, for the message.
        why: what to do instead, appended to the message.

    Returns:
        ``0.0``.

    Example:
        >>> check_pure_delta(0, "privbayes")
        0.0
        >>> check_pure_delta(1e-9, "privbayes")
        Traceback (most recent call last):
        ...
        ValueError: privbayes: pure epsilon-DP (delta = 0) takes delta=0 (the default), got delta=1e-09
    """
    d = check_real(delta, "delta", where)
    if d != 0.0:
        raise ValueError(f"{where}: pure epsilon-DP (delta = 0) takes delta=0 (the default), got delta={delta!r}{why}")
    return 0.0


def check_positive_delta(delta, where: str, why: str = "") -> float:
    """``delta`` as a float in ``(0, 1)``, or a ValueError naming ``where`` (an ``(epsilon, delta)`` guarantee).

    Example:
        >>> check_positive_delta(1e-9, "mst")
        1e-09
    """
    try:
        return check_delta(delta, where)
    except ValueError as e:
        raise ValueError(f"{e}{why}") from None


def check_zcdp_delta(delta, where: str) -> float:
    """The ``delta`` of an ``(epsilon, delta)`` guarantee through zCDP (MST, AIM): a real number in ``(0, 1)``.

    Example:
        >>> check_zcdp_delta(1e-9, "aim")
        1e-09
    """
    check_real(delta, "delta", where)
    return check_positive_delta(delta, where)


def refuse_option(value, name: str, where: str, why: str) -> None:
    """A ValueError when a shared option the front-end cannot use is given (not None): never ignored silently.

    Example:
        >>> refuse_option(None, "workload", "mst", "it selects a spanning tree of pairs")
        >>> refuse_option([("a", "b")], "workload", "mst", "it selects a spanning tree of pairs")
        Traceback (most recent call last):
        ...
        ValueError: mst does not take workload (it selects a spanning tree of pairs); leave it None
    """
    if value is not None:
        raise ValueError(f"{where} does not take {name} ({why}); leave it None")


def check_model_cap(max_model_mb, where: str) -> float | None:
    """``max_model_mb`` as a positive float (None: no cap), or an error naming ``where``.

    The shared model-size cap is in MB of a float64 model: ``8 * cells / 2**20`` over the cliques of
    the junction tree the engine builds.

    Example:
        >>> check_model_cap(25, "mwem"), check_model_cap(None, "mwem")
        (25.0, None)
    """
    if max_model_mb is None:
        return None
    x = check_real(max_model_mb, "max_model_mb", where)
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"{where}: max_model_mb must be positive and finite (or None for no cap), got {max_model_mb!r}")
    return x


def check_cliques_within_cap(domain: Domain, cliques: Sequence, max_model_mb: float | None, where: str, what: str) -> None:
    """Refuse, before any computation, a model over ``cliques`` above the model-size cap ``max_model_mb``.

    The model is the junction tree :func:`pgmjax.estimate` builds for the cliques (its triangulation's cliques),
    measured as the cap is: ``8 * cells / 2^20`` MB.

    Raises:
        ModelTooLarge: naming ``where``, ``what``, the cells and MB, the cap and the largest clique.

    Example:
        >>> check_cliques_within_cap(Domain({"a": 1000, "b": 1000}), [("a", "b")], 1.0, "hdmm", "the workload's model")
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: hdmm: the workload's model: 1,000,000 cells (7.629 MB as float64 tables), above the limit of 1 MB (max_model_mb=1); its largest clique ('a', 'b') has 1,000,000 cells (7.629 MB); raise max_model_mb, or measure fewer or smaller cliques
    """
    if max_model_mb is None:
        return
    size_limit.check_cliques(domain, triangulated_cliques(domain, list(dict.fromkeys(cliques))), where,
                             max_bytes=max_model_mb * 2**20, what=what, source=f"max_model_mb={max_model_mb:g}",
                             hint="raise max_model_mb, or measure fewer or smaller cliques")


def check_domain_size(domain, where: str, cliques: Iterable = (), what: str = "the workload's marginals") -> None:
    """Refuse, before any computation, a domain or cliques whose tables break the model-size limit.

    Every model of ``domain`` holds a table for each attribute (an unmeasured one too), so a domain whose
    one-way tables alone break the limit can have no model; ``cliques`` (the workload's, whose marginals a
    front-end computes) are checked together. The limit is :func:`pgmjax.graph.size_limit.max_model_bytes`
    (``PGMJAX_MAX_MODEL_BYTES``, default a share of the machine's memory); sizes are Python integers, so a
    huge domain gives this error and never an overflow.

    Args:
        domain: the data's domain.
        where: the front-end's name, for the message.
        cliques: further cliques whose tables the front-end builds (all held at once).
        what: what those tables are, for the message.

    Raises:
        pgmjax.ModelTooLarge: (a ValueError) naming the cells, the bytes, the limit and the largest table.

    Example:
        >>> from pgmjax import Domain
        >>> check_domain_size(Domain({"a": 10**200, "b": 2}), "mwem")
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: mwem: the one-way tables every model of the domain holds: 1e+200 cells ...
    """
    from ..graph.size_limit import check_cliques

    check_cliques(domain, [(a,) for a in domain.attributes], where, what="the one-way tables every model of the domain holds")
    cliques = list(cliques)
    if cliques:
        check_cliques(domain, cliques, where, what=what)


def check_attribute_matrices(domain, attributes: Iterable[str], where: str, what: str = "query matrices") -> None:
    """Refuse attributes whose ``n x n`` matrices (an explicit identity query, a channel, a strategy factor)
    break the model-size limit, naming the attribute and its size (:class:`pgmjax.ModelTooLarge`).

    Example:
        >>> from pgmjax import Domain
        >>> check_attribute_matrices(Domain({"a": 10**6}), ["a"], "dualquery")
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: dualquery: the 1000000 x 1000000 query matrices of ('a',): 1,000,000,000,000 cells ...
    """
    from ..graph.size_limit import check_table

    for a in dict.fromkeys(attributes):
        n = domain[a]
        check_table(domain, (a,), where, f"the {n} x {n} {what}", entries=n * n)

