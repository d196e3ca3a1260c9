"""The privacy layer: neighbouring convention, sensitivities, mechanisms, conversions and the accountant.

Everything a front-end (MST, AIM, MWEM, PrivBayes, DualQuery, HDMM, MLDP) needs to read private data
with differential privacy, and nothing else:

* **Convention.** ``bounded=False`` (default) is add/remove-one-record neighbours (``N`` private);
  ``bounded=True`` is replace-one (``N`` public). It sets every sensitivity
  (:func:`l1_sensitivity`, :func:`l2_sensitivity`).
* **Primitives** (pure functions, no accounting): :func:`laplace_mechanism`, :func:`gaussian_mechanism`,
  :func:`exponential_mechanism` (Gumbel-max) and :func:`exponential_probabilities`; their costs
  :func:`laplace_scale` / :func:`laplace_epsilon`, :func:`gaussian_sigma` / :func:`gaussian_rho`,
  :func:`exponential_rho`, :func:`pure_dp_rho`.
* **Conversions**: zCDP <-> (eps, delta) (:func:`cdp_delta`, :func:`cdp_eps`, :func:`cdp_rho`, the
  Canonne-Kamath-Steinke bound), advanced composition (:func:`advanced_composition`,
  :func:`advanced_composition_hetero`, :func:`advanced_composition_inverse`) and DualQuery's privacy
  bound and round solver (:func:`dualquery_epsilon`, :func:`dualquery_rounds`).
* **Accountant**: one per run. Every read of private data goes through one of its methods
  (:meth:`Accountant.measure`, :meth:`~Accountant.laplace`, :meth:`~Accountant.gaussian`,
  :meth:`~Accountant.exponential`), which calibrates the noise, refuses to overspend and records a
  :class:`LedgerEntry`.

Randomness comes only from explicit ``jax.random`` keys: equal keys give equal noise, whatever the
``jax_enable_x64`` setting (the uniforms are built on the host in float64 from 52 random bits drawn
with ``jax.random.bits``, so the Gaussian tails reach about 8.2 sigma and the Laplace tails 36 b).
Releases are floating-point safe (Mironov, "On significance of the least significant bits for
differential privacy", CCS 2012): answers are integers, or rounded to a public lattice ``gamma * Z`` with
the rounding's extra sensitivity accounted, plus exact discrete Laplace or discrete Gaussian noise
(Canonne, Kamath & Steinke, NeurIPS 2020); the exponential mechanism is sampled exactly by rejection. See
:mod:`pgmjax.privacy.discrete_noise`. ``standard_normal``, ``standard_laplace`` and ``standard_gumbel`` are
continuous draws for simulations; no release uses them.

The package, one idea per module (imports go down this list, never up):

* the argument checks (:mod:`pgmjax.checks`, re-exported here) are shared by every layer (raise before any work).
* :mod:`~pgmjax.privacy.sensitivity`: L1/L2 sensitivities of marginals and linear queries on them.
* :mod:`~pgmjax.privacy.calibration`: noise scale <-> budget of the primitives.
* :mod:`~pgmjax.privacy.samplers`: continuous draws from ``jax.random`` keys (simulations only).
* :mod:`~pgmjax.privacy.lattice`: planning and drawing floating-point-safe releases.
* :mod:`~pgmjax.privacy.primitives`: Laplace, Gaussian and exponential mechanisms, unaccounted.
* :mod:`~pgmjax.privacy.conversions`: zCDP <-> (eps, delta).
* :mod:`~pgmjax.privacy.composition`: advanced composition.
* :mod:`~pgmjax.privacy.dualquery`: DualQuery's privacy bound and round solver.
* :mod:`~pgmjax.privacy.ledger`: the ledger's entries.
* :mod:`~pgmjax.privacy.ledger_state`: an accountant's budget and ledger as a JSON-friendly dict, and back.
* :mod:`~pgmjax.privacy.budget`: budget, composition, costing, the budget check, reports.
* :mod:`~pgmjax.privacy.accountant`: the :class:`Accountant`, the mechanisms with accounting.

Front-end recipes (the budget splits of the papers: MWEM, Hardt et al. 2012; PrivBayes, Zhang et al. 2017;
DualQuery, Gaboardi et al. 2014; MST, McKenna et al. 2021; AIM, McKenna et al. 2022)::

    # MST: rho-zCDP, thirds; one-way, then EM-selected two-way marginals.
    acc = Accountant(epsilon=1.0, delta=1e-9)                       # rho = cdp_rho(1, 1e-9)
    one_way = acc.measure_many(k1, data, [(a,) for a in attrs], rho=acc.budget / 3)
    for r in range(d - 1):                                          # Kruskal with the EM
        i = acc.exponential(keys[r], weights, sensitivity=acc.l1_sensitivity(), rho=acc.budget / 3 / (d - 1))
    two_way = acc.measure_many(k2, data, edges, rho=REST)           # spends exactly what is left

    # AIM: per-round sigma / eps_EM, annealed; the last round spends exactly the rest.
    round_cost = acc.cost("gaussian", sensitivity=1.0, scale=sigma) + acc.cost("exponential", sensitivity=1.0, epsilon=eps_em)
    if acc.remaining < 2 * round_cost:                              # last round: 10% select, 90% measure
        i = acc.exponential(k, q, max_w, rho=0.1 * acc.remaining)
        m = acc.measure(k2, data, cands[i], rho=REST)

    # MWEM (pure eps): eps/T per round; 1-alpha of it for the EM, alpha for Laplace.
    acc = Accountant(epsilon=1.0)
    i = acc.exponential(k, q, acc.l1_sensitivity(), epsilon=(1 - alpha) * eps / T)
    m = acc.measure(k2, data, cands[i], mechanism="laplace", epsilon=alpha * eps / T)

    # PrivBayes (pure eps, replace-one): EM per structure step, Laplace tables.
    acc = Accountant(epsilon=eps, bounded=True)
    tables = acc.measure_many(k, data, cliques, mechanism="laplace", epsilon=(1 - beta) * eps)

    # DualQuery: (eps, delta) by advanced composition of s EM draws per round.
    acc = Accountant(epsilon=1.0, delta=1e-3, composition="advanced")
    T = dualquery_rounds(1.0, eta=2.0, samples=50, records=N, delta=1e-3)
    idx = acc.exponential(k, quality_t, sensitivity=(t - 1) / N, epsilon=2 * eta * (t - 1) / N, num=50)
"""

from __future__ import annotations

import inspect

from . import discrete_noise as dn  # noqa: F401  (``pgmjax.privacy.dn``: the exact samplers, read by the tests)
from .accountant import Accountant
from .budget import REST, PrivacyBudgetExceeded
from .calibration import (
    exponential_rho,
    gaussian_rho,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    pure_dp_rho,
)
from ..checks import (
    check_bool,
    check_count,
    check_delta,
    check_key,
    check_nonnegative,
    check_positive,
    check_real,
)
from .composition import (
    advanced_composition,
    advanced_composition_hetero,
    advanced_composition_inverse,
    compose_ledgers,
)
from .conversions import cdp_delta, cdp_eps, cdp_rho
from .dualquery import dualquery_epsilon, dualquery_rounds
from .ledger import BudgetPlan, BudgetStep, LedgerEntry
from .ledger_state import from_ledger_state, ledger_state
from .primitives import (
    exponential_mechanism,
    exponential_probabilities,
    gaussian_mechanism,
    laplace_mechanism,
)
from .samplers import standard_gumbel, standard_laplace, standard_normal
from .sensitivity import l1_sensitivity, l2_sensitivity

__all__ = [
    "REST",
    "PrivacyBudgetExceeded",
    "LedgerEntry",
    "BudgetPlan",
    "BudgetStep",
    "Accountant",
    "check_key",
    "check_real",
    "check_positive",
    "check_nonnegative",
    "check_delta",
    "check_count",
    "check_bool",
    "l1_sensitivity",
    "l2_sensitivity",
    "laplace_scale",
    "laplace_epsilon",
    "gaussian_sigma",
    "gaussian_rho",
    "exponential_rho",
    "pure_dp_rho",
    "standard_normal",
    "standard_laplace",
    "standard_gumbel",
    "laplace_mechanism",
    "gaussian_mechanism",
    "exponential_mechanism",
    "exponential_probabilities",
    "cdp_delta",
    "cdp_eps",
    "cdp_rho",
    "advanced_composition",
    "advanced_composition_hetero",
    "advanced_composition_inverse",
    "compose_ledgers",
    "ledger_state",
    "from_ledger_state",
    "dualquery_epsilon",
    "dualquery_rounds",
]


def _examples() -> dict:
    """The public objects' docstring examples (defined in the submodules), for ``doctest.testmod(pgmjax.privacy)``."""
    found = {}
    for name in __all__:
        obj = globals()[name]
        if not (inspect.isroutine(obj) or inspect.isclass(obj)):
            continue
        found[name] = obj
        for klass in obj.__mro__ if inspect.isclass(obj) else ():
            if klass.__module__.startswith(__name__ + "."):
                for attr, val in vars(klass).items():
                    if not attr.startswith("_") and inspect.isroutine(val):
                        found.setdefault(f"{name}.{attr}", val)
    return found


#: Read by :mod:`doctest`: ``doctest.testmod(pgmjax.privacy)`` runs the examples of every public name.
__test__ = _examples()

