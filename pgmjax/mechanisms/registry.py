"""Front-ends by name: a name -> function map with a one-line description each (the command line's ``--mechanism``).

Every front-end has the common signature (:data:`~pgmjax.mechanisms.options.COMMON_PARAMETERS`)::

    fn(data, epsilon, delta=..., *, key, workload=..., engine_iters=..., fit_options=..., max_model_mb=..., **own)

so running one by name is calling it: :func:`run` adds nothing but the lookup. Its own keyword-only
options are the fields of one frozen class (:attr:`Mechanism.options`, :mod:`pgmjax.mechanisms.own_options`), which
the function's signature lists after the common parameters (:func:`own_options`); the command line derives its
``--option`` checks from them. Its results' ``info`` is one frozen value of another (:attr:`Mechanism.info`,
:mod:`pgmjax.mechanisms.run_info`), whose published fields the run report prints.

Example:
    >>> from pgmjax.mechanisms import registry
    >>> sorted(registry.MECHANISMS)
    ['aim', 'dualquery', 'hdmm', 'mldp', 'mst', 'mwem', 'privbayes', 'rr_synthetic', 'tree_aim']
    >>> import jax, numpy as np, pgmjax as pj
    >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), {"a": 3, "b": 4, "c": 2})
    >>> res = registry.run("privbayes", data, 1.0, key=jax.random.key(0), engine_iters=200)
    >>> res.info.network, res.plan.total == res.accountant.budget
    ([('b', ()), ('a', ('b',)), ('c', ('b',))], True)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .adaptive_iterative import aim
from .bayesian_network import privbayes
from .dual_query import dualquery
from .matrix_mechanism import hdmm
from .multiplicative_weights import mwem
from .options import COMMON_PARAMETERS, DEFAULT_DELTA
from .query_learning import mldp
from .randomized_response_synthetic import rr_synthetic
from .result import MechanismResult
from .spanning_tree import mst
from .tree_adaptive import tree_aim

__all__ = ["Mechanism", "MECHANISMS", "COMMON_PARAMETERS", "DEFAULT_DELTA", "DEFAULT_MECHANISM", "get", "own_options", "run", "taking"]

#: The privacy kinds of :attr:`Mechanism.privacy`, as the command line prints them.
GUARANTEES = {
    "pure": "eps-DP (delta = 0)",
    "zcdp": "(eps, delta)-DP via zCDP",
    "advanced": "(eps, delta)-DP by advanced composition",
    "noise": "eps-DP (Laplace noise), or (eps, delta)-DP via zCDP with noise='gaussian'",
}


@dataclass(frozen=True)
class Mechanism:
    """One registered front-end (immutable).

    Attributes:
        name: the registry name, the function's own name.
        function: the front-end (the common signature).
        description: a one-line description.
        privacy: its guarantee: ``"pure"`` (epsilon-DP: ``delta`` must be 0), ``"zcdp"`` ((epsilon, delta)
            through zCDP), ``"advanced"`` ((epsilon, delta) by advanced composition) or ``"noise"``
            (pure with Laplace noise, zCDP with ``noise="gaussian"``); see :data:`GUARANTEES`.
        workload: whether it takes a workload (the others refuse one).
        cli_defaults: the command line's values for some of its own options (e.g. skipping a comparison
            arm that synthetic data does not need); ``--option`` overrides them.
    """

    name: str
    function: Callable[..., MechanismResult]
    description: str
    privacy: str
    workload: bool
    cli_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def options(self) -> type:
        """The front-end's own options: a frozen :class:`~pgmjax.mechanisms.own_options.OwnOptions` subclass whose
        fields are the options after the common parameters."""
        return self.function.options

    @property
    def info(self) -> type:
        """The class of its results' ``info``: a frozen :class:`~pgmjax.mechanisms.run_info.RunInfo` subclass whose
        published fields (:meth:`~pgmjax.mechanisms.run_info.RunInfo.published_names`) a run report may print:
        settings, released (noisy) values and what was selected. The others stay with the data holder: some are
        computed from the data without noise (e.g. MST's selection weights, PrivBayes's scores), others are internal
        objects."""
        return self.function.info


def _entry(function, description, privacy, workload, **cli_defaults) -> Mechanism:
    return Mechanism(function.__name__, function, description, privacy, workload, MappingProxyType(dict(cli_defaults)))


#: Every front-end, by name, in the order the command line lists them.
MECHANISMS: Mapping[str, Mechanism] = MappingProxyType({
    m.name: m
    for m in [
        _entry(mwem, "MWEM+PGM: exponential-mechanism selection of badly answered marginals, Laplace (or Gaussian) measurements",
               "noise", True,
               original=False),  # the multiplicative-weights comparison arm is not needed for synthetic data
        _entry(privbayes, "PrivBayes+PGM: a private Bayesian network (GreedyBayes) and its noisy conditional tables", "pure", False),
        _entry(dualquery, "DualQuery+PGM: a private game between a query player and a record player, model fitted to its transcript",
               "advanced", True),
        _entry(hdmm, "HDMM+PGM: a measurement strategy optimised for the workload, Laplace (or Gaussian) noise", "noise", True,
               original=False, max_table_cells=0),  # the least-squares comparison arms are not needed for synthetic data
        _entry(mst, "MST: one-way marginals plus a private maximum spanning tree of two-way marginals (Gaussian, zCDP)", "zcdp",
               False),
        _entry(aim, "AIM: adaptive, workload-aware selection of marginals under a model-size cap (Gaussian, zCDP)", "zcdp", True),
        _entry(tree_aim, "TreeAIM: MST's spanning tree of pairs, then a few batches of AIM's selection where the model errs most "
               "(Gaussian, zCDP)", "zcdp", True),
        _entry(mldp, "MLDP+PGM: the workload's marginal cells as training queries with Laplace noise, a model fitted to them",
               "pure", True,
               original=False, synthetic=True),  # the regression arm is not needed; the command line wants records
        _entry(rr_synthetic, "RR+PGM: randomized response on every record (query-set independent), debiased marginals fitted by the engine",
               "pure", False,
               per_attribute=True),  # the whole-row release is uninformative beyond a few dozen rows
    ]
})


#: The mechanism ``pgmjax run`` and :class:`pgmjax.Synthesizer` use where none is named: TreeAIM, as accurate as the
#: better of MST and AIM on two-way marginals of every shared and generated table measured but Adult at epsilon 3,
#: and far faster than AIM on large tables (the documentation's performance page has the figures).
DEFAULT_MECHANISM = "tree_aim"


def get(name: str) -> Mechanism:
    """The :class:`Mechanism` registered as ``name`` (ValueError naming the known ones otherwise).

    Example:
        >>> get("mst").privacy, get("mst").function.__name__
        ('zcdp', 'mst')
    """
    if name not in MECHANISMS:
        raise ValueError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    return MECHANISMS[name]


def takes_delta(name: str, options: Mapping | None = None) -> bool:
    """Whether the front-end ``name``, with its own ``options``, gives an ``(epsilon, delta)`` guarantee (and so
    takes a ``delta``): not for a pure-DP one, nor for one whose noise is Laplace (``options["noise"]``, default).

    Example:
        >>> takes_delta("mst"), takes_delta("privbayes"), takes_delta("mwem"), takes_delta("mwem", {"noise": "gaussian"})
        (True, False, False, True)
    """
    entry = get(name)
    if entry.privacy == "pure":
        return False
    return entry.privacy != "noise" or dict(options or {}).get("noise", "laplace") == "gaussian"


def own_options(name: str) -> dict[str, inspect.Parameter]:
    """The front-end's own keyword-only options: its parameters after the common ones (the fields of
    :attr:`Mechanism.options`, with their defaults).

    Example:
        >>> list(own_options("mst"))
        ['select_iters', 'compress', 'merged_values', 'synthetic', 'rows', 'synthetic_method', 'progress', 'constraints', 'public']
    """
    params = inspect.signature(get(name).function).parameters
    return {k: p for k, p in params.items() if k not in COMMON_PARAMETERS}


def taking(option: str) -> list[str]:
    """The front-ends that have ``option`` among their own options, in the registry's order.

    Example:
        >>> taking("public")
        ['mwem', 'mst', 'aim', 'tree_aim']
    """
    return [n for n in MECHANISMS if option in own_options(n)]


def run(name: str, data, epsilon: float, delta: float | None = None, *, key, **kwargs) -> MechanismResult:
    """Run the front-end ``name``: ``function(data, epsilon, delta, key=key, **kwargs)``.

    Args:
        name: a key of :data:`MECHANISMS`.
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: the budget.
        delta: the delta (None: the front-end's default, 0 for the pure-DP ones).
        key: a ``jax.random`` key.
        **kwargs: the common keyword options and the front-end's own.

    Returns:
        The front-end's :class:`~pgmjax.mechanisms.result.MechanismResult`.
    """
    fn = get(name).function
    if delta is None:
        return fn(data, epsilon, key=key, **kwargs)
    return fn(data, epsilon, delta, key=key, **kwargs)
