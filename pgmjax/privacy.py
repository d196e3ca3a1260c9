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
:mod:`pgmjax.discrete_noise`. ``standard_normal``, ``standard_laplace`` and ``standard_gumbel`` are
continuous draws for simulations; no release uses them.

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

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from scipy.special import ndtri

from . import discrete_noise as dn
from . import randomized_response as rr
from .dataset import Dataset
from .domain import CliqueLike
from .measurement import Measurement

__all__ = [
    "REST",
    "PrivacyBudgetExceeded",
    "LedgerEntry",
    "Accountant",
    "check_key",
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
    "dualquery_epsilon",
    "dualquery_rounds",
]

#: Pass as ``epsilon=REST`` or ``rho=REST`` to spend exactly what is left of an accountant's budget.
REST = "rest"

# Relative slack when checking a request against the budget: splitting a budget into k equal float
# parts and spending them all can overshoot the exact budget by a few ulps.
_RTOL = 1e-9

_COMPOSITIONS = ("pure", "zcdp", "advanced", "advanced_heterogeneous")
_MECHANISMS = ("laplace", "gaussian", "exponential", "randomized_response")


class PrivacyBudgetExceeded(ValueError):
    """A mechanism asked for more privacy budget than the accountant has left. Nothing was run."""


# ---------------------------------------------------------------------------------------------------
# Input checks (all raise before any computation)
# ---------------------------------------------------------------------------------------------------


def _real(value, name: str, where: str) -> float:
    if value is None or isinstance(value, (bool, np.bool_, str, bytes)) or np.ndim(value) != 0:
        raise TypeError(f"{where}: {name} must be a real number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be a real number, got {value!r}") from None
    if math.isnan(x):
        raise ValueError(f"{where}: {name} must be a number, got nan")
    return x


def _positive(value, name: str, where: str) -> float:
    x = _real(value, name, where)
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"{where}: {name} must be positive and finite, got {value!r}")
    return x


def _nonnegative(value, name: str, where: str) -> float:
    x = _real(value, name, where)
    if not (x >= 0 and math.isfinite(x)):
        raise ValueError(f"{where}: {name} must be non-negative and finite, got {value!r}")
    return x


def _delta(value, where: str) -> float:
    x = _real(value, "delta", where)
    if not 0 < x < 1:
        raise ValueError(f"{where}: delta must be in (0, 1), got {value!r}")
    return x


def _count(value, name: str, where: str, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{where}: {name} must be at least {minimum}, got {value}")
    return int(value)


def _bool(value, name: str, where: str) -> bool:
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


_check_key = check_key


def _values(values, where: str, name: str = "values") -> np.ndarray:
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be an array of numbers, got {type(values).__name__}") from None
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{where}: {name} has non-finite entries")
    return x


def _qualities(qualities, where: str) -> np.ndarray:
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


# ---------------------------------------------------------------------------------------------------
# Sensitivities
# ---------------------------------------------------------------------------------------------------


def _as_query(query, where: str):
    """``("identity", None)``, ``("dense", Q)`` or ``("kron", (Q_1, ..., Q_k))``, validated."""
    if query is None:
        return "identity", None
    if isinstance(query, (tuple, list)):
        if len(query) == 0:
            raise ValueError(f"{where}: a Kronecker query needs at least one factor")
        factors = []
        for i, f in enumerate(query):
            f = _values(f, where, f"query factor {i}")
            if f.ndim != 2 or f.size == 0:
                raise ValueError(f"{where}: query factor {i} must be a non-empty 2-D matrix, got shape {f.shape}")
            factors.append(f)
        return "kron", tuple(factors)
    q = _values(query, where, "query")
    if q.ndim == 1:
        q = q[None, :]  # one query row
    if q.ndim != 2 or q.size == 0:
        raise ValueError(f"{where}: a dense query must be a non-empty (rows, cells) matrix, got shape {q.shape}")
    return "dense", q


def _max_col_norm(m: np.ndarray, order: int) -> float:
    if order == 1:
        return float(np.abs(m).sum(axis=0).max())
    return float(np.sqrt((m * m).sum(axis=0)).max())


def _gram_nonnegative(m: np.ndarray) -> bool:
    """Whether every pair of columns has a non-negative inner product (checked cheaply when possible)."""
    if np.all(m >= 0) or np.all(m <= 0):
        return True
    if m.shape[1] <= 2048:
        return bool(np.all(m.T @ m >= 0))
    return False


def l1_sensitivity(query=None, *, bounded: bool = False) -> float:
    """L1 sensitivity of a marginal, or of a linear query on a marginal (Dwork et al. 2006, Definition 1).

    Adding or removing one record changes the marginal ``mu_C`` by one unit vector ``e_j``, so
    ``Q mu_C`` moves by column ``j`` of ``Q``: the sensitivity is the largest column L1 norm
    ``||Q||_1`` (1 for the marginal itself). Replacing one record moves it by ``Q (e_j - e_k)``,
    bounded by ``2 ||Q||_1`` (as in the reference code; the exact value
    ``max_{j != k} ||Q_j - Q_k||_1`` can be smaller, e.g. 1 for a single 0/1 counting query: pass
    your own proven ``sensitivity=`` to the mechanism if you need it). For a Kronecker query the
    columns are Kronecker products of the factors' columns, so ``||Q_1 x ... x Q_k||_1 = prod ||Q_i||_1``.

    Args:
        query: None (the marginal), a dense matrix ``(rows, cells)`` (a 1-D array is one row), or a
            tuple of per-attribute matrices whose Kronecker product is the query.
        bounded: False for add/remove-one neighbours, True for replace-one.

    Returns:
        The L1 sensitivity.

    Example:
        >>> l1_sensitivity(), l1_sensitivity(bounded=True)
        (1.0, 2.0)
        >>> l1_sensitivity(np.tril(np.ones((4, 4))))       # prefix queries: the first column has 4 ones
        4.0
    """
    where = "l1_sensitivity"
    bounded = _bool(bounded, "bounded", where)
    kind, q = _as_query(query, where)
    if kind == "identity":
        base = 1.0
    elif kind == "dense":
        base = _max_col_norm(q, 1)
    else:
        base = math.prod(_max_col_norm(f, 1) for f in q)
    return 2.0 * base if bounded else base


def l2_sensitivity(query=None, *, bounded: bool = False) -> float:
    """L2 sensitivity of a marginal, or of a linear query on a marginal (Bun & Steinke 2016, Proposition 1.6).

    Add/remove-one: the largest column L2 norm ``||Q||_{1->2}`` (1 for the marginal). Replace-one:
    ``||Q (e_j - e_k)||_2^2 = ||Q_j||^2 + ||Q_k||^2 - 2 <Q_j, Q_k>``, which is at most
    ``2 ||Q||_{1->2}^2`` when no two columns have a negative inner product (every marginal, every
    non-negative query: ``sqrt(2)``) and at most ``(2 ||Q||_{1->2})^2`` otherwise;
    this function returns that bound (``sqrt(2)`` or ``2`` times the column norm). A Kronecker query's
    column norm is the product of its factors', and its Gram matrix is non-negative when every
    factor's is.

    Args:
        query: None, a dense matrix ``(rows, cells)`` (1-D: one row), or a tuple of per-attribute
            matrices (Kronecker product).
        bounded: False for add/remove-one neighbours, True for replace-one.

    Returns:
        The L2 sensitivity.

    Example:
        >>> l2_sensitivity(), round(l2_sensitivity(bounded=True), 6)
        (1.0, 1.414214)
    """
    where = "l2_sensitivity"
    bounded = _bool(bounded, "bounded", where)
    kind, q = _as_query(query, where)
    if kind == "identity":
        base, nonneg = 1.0, True
    elif kind == "dense":
        base = _max_col_norm(q, 2)
        nonneg = _gram_nonnegative(q) if bounded else True
    else:
        base = math.prod(_max_col_norm(f, 2) for f in q)
        nonneg = all(_gram_nonnegative(f) for f in q) if bounded else True
    if not bounded:
        return base
    return (math.sqrt(2.0) if nonneg else 2.0) * base


# ---------------------------------------------------------------------------------------------------
# Costs of the primitives
# ---------------------------------------------------------------------------------------------------


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Laplace scale ``b = Delta1 / eps`` for an ``eps``-DP release (Dwork, McSherry, Nissim, Smith 2006).

    Example:
        >>> laplace_scale(2.0, 0.5)
        4.0
    """
    where = "laplace_scale"
    return _positive(sensitivity, "sensitivity", where) / _positive(epsilon, "epsilon", where)


def laplace_epsilon(sensitivity: float, scale: float) -> float:
    """The ``eps = Delta1 / b`` of Laplace noise of scale ``b`` on an L1-sensitivity-``Delta1`` query.

    Example:
        >>> laplace_epsilon(1.0, 4.0)
        0.25
    """
    where = "laplace_epsilon"
    return _positive(sensitivity, "sensitivity", where) / _positive(scale, "scale", where)


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """Noise std ``sigma = Delta2 / sqrt(2 rho)`` for a ``rho``-zCDP Gaussian release (Bun & Steinke 2016, Prop. 1.6).

    Example:
        >>> gaussian_sigma(1.0, 0.5)
        1.0
    """
    where = "gaussian_sigma"
    return _positive(sensitivity, "sensitivity", where) / math.sqrt(2.0 * _positive(rho, "rho", where))


def gaussian_rho(sensitivity: float, sigma: float) -> float:
    """The ``rho = Delta2^2 / (2 sigma^2)`` (zCDP) of Gaussian noise ``N(0, sigma^2)`` (Bun & Steinke 2016, Prop. 1.6).

    Example:
        >>> gaussian_rho(1.0, 10.0)
        0.005
    """
    where = "gaussian_rho"
    d = _positive(sensitivity, "sensitivity", where)
    s = _positive(sigma, "sigma", where)
    return d * d / (2.0 * s * s)


def exponential_rho(epsilon: float) -> float:
    """zCDP cost ``eps^2 / 8`` of one ``eps``-DP exponential-mechanism draw.

    The exponential mechanism is ``eps``-bounded-range, which implies ``eps^2/8``-zCDP (Cesar &
    Rogers, "Bounding, concentrating, and truncating", ALT 2021).

    Example:
        >>> exponential_rho(2.0)
        0.5
    """
    e = _positive(epsilon, "epsilon", "exponential_rho")
    return e * e / 8.0


def pure_dp_rho(epsilon: float) -> float:
    """zCDP cost ``eps^2 / 2`` of any ``eps``-DP mechanism, e.g. Laplace (Bun & Steinke 2016, Prop. 1.4).

    Example:
        >>> pure_dp_rho(1.0)
        0.5
    """
    e = _positive(epsilon, "epsilon", "pure_dp_rho")
    return e * e / 2.0


# ---------------------------------------------------------------------------------------------------
# Noise from jax.random keys
# ---------------------------------------------------------------------------------------------------


def _shape(shape) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    for s in shape:
        _count(s, "shape entry", "noise", minimum=0)
    return tuple(int(s) for s in shape)


def _uniform(key, n: int) -> np.ndarray:
    """``n`` uniforms in the open interval (0, 1), float64, from 52 random bits each."""
    if n == 0:
        return np.empty(0)
    # Draw in power-of-two buckets: jax.random compiles once per shape, and front-ends measure
    # marginals of many different sizes; the result is still a fixed function of (key, n).
    m = max(16, 1 << (n - 1).bit_length())
    bits = np.asarray(jax.random.bits(key, (2, m), dtype=jnp.uint32))[:, :n].astype(np.uint64)
    k = (bits[0] << np.uint64(20)) | (bits[1] >> np.uint64(12))
    # (k + 1/2) / 2^52 with k < 2^52 is exact and stays in [2^-53, 1 - 2^-53]: no log(0) below.
    return (k.astype(np.float64) + 0.5) * 2.0**-52


def standard_normal(key, shape) -> np.ndarray:
    """Standard normal draws (float64, inverse CDF of 52-bit uniforms from ``jax.random.bits``).

    Args:
        key: a ``jax.random`` key; equal keys give equal draws.
        shape: the output shape.

    Returns:
        A float64 NumPy array of the given shape.

    Example:
        >>> standard_normal(jax.random.key(0), (3,)).shape
        (3,)
    """
    _check_key(key, "standard_normal")
    shape = _shape(shape)
    return ndtri(_uniform(key, math.prod(shape))).reshape(shape)


def standard_laplace(key, shape) -> np.ndarray:
    """Laplace draws of scale 1 (std ``sqrt(2)``), float64, by the inverse CDF.

    Example:
        >>> standard_laplace(jax.random.key(0), 2).shape
        (2,)
    """
    _check_key(key, "standard_laplace")
    shape = _shape(shape)
    u = _uniform(key, math.prod(shape))
    # Each branch keeps full relative precision near its tail (2u and 1 - u are exact).
    lo = u < 0.5
    z = np.empty_like(u)
    z[lo] = np.log(2.0 * u[lo])
    z[~lo] = -np.log(2.0 * (1.0 - u[~lo]))
    return z.reshape(shape)


def standard_gumbel(key, shape) -> np.ndarray:
    """Standard Gumbel draws ``-log(-log U)``, float64.

    Example:
        >>> standard_gumbel(jax.random.key(0), (2, 2)).shape
        (2, 2)
    """
    _check_key(key, "standard_gumbel")
    shape = _shape(shape)
    return (-np.log(-np.log(_uniform(key, math.prod(shape))))).reshape(shape)


# ---------------------------------------------------------------------------------------------------
# Mechanisms (no accounting: front-ends use the Accountant's methods)
# ---------------------------------------------------------------------------------------------------


def _one_of(where: str, **given) -> tuple[str, Any]:
    present = [(k, v) for k, v in given.items() if v is not None]
    if len(present) != 1:
        names = ", ".join(f"{k}=" for k in given)
        got = ", ".join(f"{k}=" for k, _ in present) or "none"
        raise ValueError(f"{where}: give exactly one of {names} (got {got})")
    return present[0]


def laplace_mechanism(
    key, values, sensitivity: float, *, epsilon: float | None = None, scale: float | None = None, integer: bool = False
) -> np.ndarray:
    """Laplace mechanism, floating-point safe: ``values`` plus discrete Laplace noise of scale ``b`` (``eps``-DP).

    Dwork, McSherry, Nissim, Smith, "Calibrating noise to sensitivity", TCC 2006, with the discrete
    Laplace law of Canonne, Kamath & Steinke (NeurIPS 2020) on a public lattice
    (:func:`pgmjax.discrete_noise.lattice_noise`). With ``epsilon``, ``b = (Delta1 + a) / eps`` where ``a``
    is the sensitivity rounding to the lattice adds (0 for integer answers). No accounting: front-ends
    call :meth:`Accountant.laplace` or :meth:`Accountant.measure`.

    Args:
        key: a ``jax.random`` key.
        values: the exact answers (any shape); their L1 sensitivity is ``sensitivity``.
        sensitivity: L1 sensitivity ``Delta1 > 0`` of ``values`` as a whole.
        epsilon: the privacy parameter; or
        scale: the Laplace scale ``b`` directly (then ``eps = (Delta1 + a) / b``).
        integer: the answers are integers for every dataset (counts, integer-coefficient queries).

    Returns:
        The noisy values (float64 NumPy array of the same shape).

    Example:
        >>> laplace_mechanism(jax.random.key(0), np.zeros(3), 1.0, epsilon=1.0).shape
        (3,)
    """
    where = "laplace_mechanism"
    _check_key(key, where)
    x = _values(values, where)
    d = _positive(sensitivity, "sensitivity", where)
    name, v = _one_of(where, epsilon=epsilon, scale=scale)
    plan = _lattice_plan("laplace", d, x.size, integer, **{name: _positive(v, name, where)})
    return _lattice_release(key, x, "laplace", plan)


def gaussian_mechanism(
    key, values, sensitivity: float, *, rho: float | None = None, sigma: float | None = None, integer: bool = False
) -> np.ndarray:
    """Gaussian mechanism, floating-point safe: discrete Gaussian noise, ``rho = (Delta2 + a)^2 / (2 sigma^2)``-zCDP.

    Bun & Steinke, "Concentrated differential privacy", TCC 2016, Proposition 1.6, with the discrete
    Gaussian of Canonne, Kamath & Steinke (NeurIPS 2020, Theorem 14) on a public lattice (``a``: the
    sensitivity rounding adds, 0 for integer answers). No accounting.

    Args:
        key: a ``jax.random`` key.
        values: the exact answers (any shape), of L2 sensitivity ``sensitivity``.
        sensitivity: L2 sensitivity ``Delta2 > 0``.
        rho: the zCDP budget; or
        sigma: the noise scale directly.
        integer: the answers are integers for every dataset.

    Returns:
        The noisy values (float64 NumPy array of the same shape).

    Example:
        >>> gaussian_mechanism(jax.random.key(0), np.zeros(2), 1.0, sigma=3.0).shape
        (2,)
    """
    where = "gaussian_mechanism"
    _check_key(key, where)
    x = _values(values, where)
    d = _positive(sensitivity, "sensitivity", where)
    name, v = _one_of(where, rho=rho, sigma=sigma)
    plan = _lattice_plan("gaussian", d, x.size, integer, **{"scale" if name == "sigma" else name: _positive(v, name, where)})
    return _lattice_release(key, x, "gaussian", plan)


def _lattice_plan(family: str, sensitivity: float, size: int, integer: bool, *, epsilon=None, rho=None, scale=None) -> dict:
    """Calibrate a lattice release: ``{"scale", "lattice", "sensitivity" (with the rounding's share), ...}``.

    The lattice comes from the sensitivity, the size and the noise scale the budget asks for (all
    public); the scale is then calibrated to the enlarged sensitivity, so the cost is exactly the budget.
    """
    if family == "laplace":
        base = scale if scale is not None else sensitivity / epsilon
    else:
        base = scale if scale is not None else sensitivity / math.sqrt(2.0 * rho)
    gamma = dn.lattice_spacing(base, sensitivity, size, integer)
    added = 0.0 if integer else (size * gamma if family == "laplace" else math.sqrt(size) * gamma)
    d = sensitivity + added
    if scale is not None:
        s = scale
    elif family == "laplace":  # the sampler rounds b strictly up (discrete_laplace): d / b_real < epsilon
        s = d / epsilon
    else:  # one ulp up: the realised d^2 / (2 sigma^2) never exceeds the rho asked for
        s = math.nextafter(d / math.sqrt(2.0 * rho), math.inf)
    return {"scale": s, "lattice": gamma, "sensitivity": d, "integer": integer}


def _lattice_release(key, x: np.ndarray, family: str, plan: dict) -> np.ndarray:
    rel = dn.lattice_noise(
        dn.generator(key), x, family=family, scale=plan["scale"], gamma=plan["lattice"], integer=plan["integer"]
    )
    return rel.values


def _em_logits(q: np.ndarray, sensitivity: float, epsilon: float) -> np.ndarray:
    # Shift by the best finite quality first: exp() then never overflows, and the shift cancels
    # in the normalisation (the logits of excluded candidates stay -inf).
    return (epsilon / (2.0 * sensitivity)) * (q - q[np.isfinite(q)].max())


def exponential_probabilities(qualities, sensitivity: float, epsilon: float) -> np.ndarray:
    """Exact selection probabilities ``P(r) ∝ exp(eps q(r) / (2 Delta))`` of the exponential mechanism.

    McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007. Computed with a
    max-shift, so huge qualities do not overflow. A quality of ``-inf`` excludes a candidate
    (probability 0); exclusions must not depend on the private data.

    Args:
        qualities: 1-D array, one score per candidate.
        sensitivity: the qualities' sensitivity ``Delta > 0`` (max change of any one score).
        epsilon: the privacy parameter.

    Returns:
        Float64 probabilities summing to 1.

    Example:
        >>> exponential_probabilities([0.0, 2.0], 1.0, 1.0).round(4).tolist()
        [0.2689, 0.7311]
    """
    where = "exponential_probabilities"
    q = _qualities(qualities, where)
    w = np.exp(_em_logits(q, _positive(sensitivity, "sensitivity", where), _positive(epsilon, "epsilon", where)))
    return w / w.sum()


def exponential_mechanism(key, qualities, sensitivity: float, epsilon: float, *, num: int | None = None):
    """Exponential mechanism, sampled exactly: ``P(r) ∝ exp(eps q(r) / (2 Delta))`` (``eps``-DP, ``eps^2/8``-zCDP).

    McSherry & Talwar, FOCS 2007. Draws by rejection from uniform proposals accepted with an exact
    ``Bernoulli(exp(-g))`` (:func:`pgmjax.discrete_noise.exponential_choice`): unlike a Gumbel-max on
    float uniforms, no candidate's probability is rounded to zero. No accounting: front-ends call
    :meth:`Accountant.exponential`.

    Args:
        key: a ``jax.random`` key.
        qualities: 1-D array of scores (``-inf`` excludes a candidate, data-independently).
        sensitivity: sensitivity ``Delta > 0`` of the scores.
        epsilon: the privacy parameter of one draw.
        num: None for one draw; an int for that many independent draws (with replacement).

    Returns:
        The selected index (int), or an int64 array of ``num`` indices.

    Example:
        >>> exponential_mechanism(jax.random.key(0), [0.0, 100.0], 1.0, 10.0)
        1
    """
    where = "exponential_mechanism"
    _check_key(key, where)
    q = _qualities(qualities, where)
    logits = _em_logits(q, _positive(sensitivity, "sensitivity", where), _positive(epsilon, "epsilon", where))
    n = 1 if num is None else _count(num, "num", where)
    idx = dn.exponential_choice(dn.generator(key), -logits, n)
    return int(idx[0]) if num is None else idx


# ---------------------------------------------------------------------------------------------------
# zCDP <-> (eps, delta) and advanced composition
# ---------------------------------------------------------------------------------------------------


def _bisect(lo: float, hi: float, go_right, steps: int = 1000) -> tuple[float, float, float]:
    """Bisection as in the reference code (``steps`` halvings), stopping once the bracket stops
    changing: from then on every further step is identical, so the result is bit-for-bit the same."""
    mid = (lo + hi) / 2
    for _ in range(steps):
        mid = (lo + hi) / 2
        new = (mid, hi) if go_right(mid) else (lo, mid)
        if new == (lo, hi):
            break
        lo, hi = new
    return lo, hi, mid


def cdp_delta(rho: float, eps: float) -> float:
    """Smallest ``delta`` such that ``rho``-zCDP implies ``(eps, delta)``-DP, by the CKS bound.

    Canonne, Kamath, Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
    (arXiv 2004.00010): for every ``alpha > 1``,
    ``delta <= exp((alpha - 1)(alpha rho - eps)) / (alpha - 1) * (1 - 1/alpha)^alpha``. The best
    ``alpha`` is found by bisection on the derivative of the log, with ``alpha >= 1.01`` (as in
    the procedure of private-pgm ``mechanisms/cdp2adp.py``); any ``alpha`` gives a valid bound.

    Args:
        rho: zCDP parameter, ``>= 0``.
        eps: target epsilon, ``>= 0``.

    Returns:
        delta in ``[0, 1]``.

    Example:
        >>> round(cdp_delta(0.0149731, 1.0) / 1e-9, 2)
        1.0
    """
    where = "cdp_delta"
    rho = _nonnegative(rho, "rho", where)
    eps = _nonnegative(eps, "eps", where)
    if rho == 0:
        return 0.0
    _, _, alpha = _bisect(
        1.01, (eps + 1) / (2 * rho) + 2, lambda a: (2 * a - 1) * rho - eps + math.log1p(-1.0 / a) < 0
    )
    log_num = (alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1 / alpha)
    if log_num > 700:  # the bound is vacuous long before exp() overflows
        return 1.0
    return min(math.exp(log_num) / (alpha - 1.0), 1.0)


def cdp_eps(rho: float, delta: float) -> float:
    """Smallest ``eps`` such that ``rho``-zCDP implies ``(eps, delta)``-DP (1000-step bisection on :func:`cdp_delta`).

    The bracket's upper end is the standard bound ``rho + 2 sqrt(rho log(1/delta))`` (Bun & Steinke
    2016, Prop. 1.3).

    Args:
        rho: zCDP parameter, ``>= 0``.
        delta: in ``(0, 1)``.

    Returns:
        epsilon (the upper end of the final bracket, so ``cdp_delta(rho, eps) <= delta``).

    Example:
        >>> round(cdp_eps(cdp_rho(1.0, 1e-9), 1e-9), 6)
        1.0
    """
    where = "cdp_eps"
    rho = _nonnegative(rho, "rho", where)
    delta = _delta(delta, where)
    if rho == 0:
        return 0.0
    _, hi, _ = _bisect(0.0, rho + 2 * math.sqrt(rho * math.log(1 / delta)), lambda e: cdp_delta(rho, e) > delta)
    return hi


def cdp_rho(eps: float, delta: float) -> float:
    """Largest ``rho`` such that ``rho``-zCDP implies ``(eps, delta)``-DP (1000-step bisection on ``[0, eps + 1]``).

    Reference values: ``cdp_rho(1, 1e-9) = 1.49731e-2``, ``cdp_rho(1, 1e-5) = 3.05566e-2``.

    Args:
        eps: target epsilon, ``> 0``.
        delta: target delta, in ``(0, 1)``.

    Returns:
        rho (the lower end of the final bracket, so ``cdp_delta(rho, eps) <= delta``).

    Example:
        >>> round(cdp_rho(1.0, 1e-9), 7)
        0.0149731
    """
    where = "cdp_rho"
    eps = _positive(eps, "eps", where)
    delta = _delta(delta, where)
    lo, _, _ = _bisect(0.0, eps + 1.0, lambda r: cdp_delta(r, eps) <= delta)
    return lo


def advanced_composition(epsilon0: float, k: int, delta: float) -> float:
    """Epsilon of ``k`` adaptively composed ``epsilon0``-DP mechanisms, at ``delta`` (advanced composition).

    Dwork, Rothblum, Vadhan, "Boosting and differential privacy", FOCS 2010, Theorem III.3:
    ``eps = epsilon0 sqrt(2 k ln(1/delta)) + k epsilon0 (e^epsilon0 - 1)``. (Plain summation
    ``k epsilon0`` is also valid and smaller for small ``k``.)

    Args:
        epsilon0: epsilon of each mechanism, ``> 0``.
        k: number of mechanisms, ``>= 0``.
        delta: in ``(0, 1)``.

    Returns:
        The composed epsilon (with that delta).

    Example:
        >>> round(advanced_composition(0.1, 10, 1e-5), 6)
        1.622598
    """
    where = "advanced_composition"
    e = _positive(epsilon0, "epsilon0", where)
    k = _count(k, "k", where, minimum=0)
    d = _delta(delta, where)
    if e > 700:  # e^e overflows; the bound is astronomically above the plain sum k e anyway
        return math.inf
    return e * math.sqrt(2 * k * math.log(1 / d)) + k * e * math.expm1(e)


def advanced_composition_hetero(epsilons, delta: float, counts=None) -> float:
    """Advanced composition of mechanisms with different epsilons.

    ``eps = sqrt(2 ln(1/delta) sum_i eps_i^2) + sum_i eps_i (e^eps_i - 1)``: the Azuma argument of
    Dwork-Rothblum-Vadhan with per-step bounds (the heterogeneous form of DualQuery's reference code, ``epsilon_delta_core``
    of the DualQuery authors' code). Equal epsilons reduce to :func:`advanced_composition`.

    Args:
        epsilons: 1-D array of the mechanisms' epsilons (each ``> 0``).
        delta: in ``(0, 1)``.
        counts: optional multiplicities (how many mechanisms have each epsilon).

    Returns:
        The composed epsilon.

    Example:
        >>> advanced_composition_hetero([0.1], 1e-5, counts=[10]) == advanced_composition(0.1, 10, 1e-5)
        True
    """
    where = "advanced_composition_hetero"
    e = _values(epsilons, where, "epsilons").reshape(-1)
    if e.size == 0:
        raise ValueError(f"{where}: epsilons is empty")
    if np.any(e <= 0):
        raise ValueError(f"{where}: every epsilon must be positive, got {e[e <= 0][0]!r}")
    d = _delta(delta, where)
    if counts is None:
        c = np.ones_like(e)
    else:
        c = _values(counts, where, "counts").reshape(-1)
        if c.shape != e.shape or np.any(c < 0) or np.any(c != np.round(c)):
            raise ValueError(f"{where}: counts must be non-negative integers, one per epsilon")
    if e.size and e.max() > 700:  # as in advanced_composition: overflow means the bound is useless, not an error
        return math.inf
    return math.sqrt(2 * math.log(1 / d) * math.fsum(c * e * e)) + math.fsum(c * e * np.expm1(e))


def advanced_composition_inverse(epsilon: float, k: int, delta: float) -> float:
    """Largest per-mechanism ``epsilon0`` such that ``k`` of them compose to at most ``(epsilon, delta)``.

    Inverts :func:`advanced_composition` (increasing in ``epsilon0``) by bisection.

    Args:
        epsilon: the total epsilon, ``> 0``.
        k: number of mechanisms, ``>= 1``.
        delta: in ``(0, 1)``.

    Returns:
        ``epsilon0`` with ``advanced_composition(epsilon0, k, delta) <= epsilon``.

    Example:
        >>> round(advanced_composition_inverse(1.622598, 10, 1e-5), 6)
        0.1
    """
    where = "advanced_composition_inverse"
    total = _positive(epsilon, "epsilon", where)
    k = _count(k, "k", where)
    d = _delta(delta, where)

    def f(e):
        if e > 700:  # e^e overflows: far above any budget
            return math.inf
        return e * math.sqrt(2 * k * math.log(1 / d)) + k * e * math.expm1(e)

    hi = total
    while f(hi) <= total:  # f can be below the identity when 2 k ln(1/delta) < 1
        hi *= 2
    lo, _, _ = _bisect(0.0, hi, lambda e: f(e) <= total)
    return lo


_DQ_FORMS = ("b2", "heterogeneous", "pure")


def dualquery_epsilon(rounds: int, *, eta: float, samples: int, records: int, delta: float | None = None, form: str = "b2") -> float:
    """Privacy of DualQuery after ``rounds`` rounds (Gaboardi et al., "Dual query: practical private query release for high dimensional data", ICML 2014).

    A round-``t`` draw is an exponential-mechanism draw with ``eps_t = 2 eta (t - 1) / N`` (round 1
    is free), and each round makes ``s`` draws.

    * ``"b2"`` (default, the authors' ``epsilon_delta_b2``): ``eps0 = 2 eta (T-1) / N`` and
      ``k = s (T-1)`` in :func:`advanced_composition`.
    * ``"heterogeneous"``: :func:`advanced_composition_hetero` of the per-round ``eps_t``
      (``epsilon_delta_core``; tighter).
    * ``"pure"``: ``eta s T (T-1) / N`` (``delta`` unused).

    Args:
        rounds: ``T >= 1``.
        eta: the multiplicative-weights learning rate, ``> 0``.
        samples: ``s``, queries drawn per round.
        records: ``N``, the (public) number of records.
        delta: in ``(0, 1)``, needed unless ``form="pure"``.
        form: ``"b2"``, ``"heterogeneous"`` or ``"pure"``.

    Returns:
        epsilon.

    Example:
        >>> round(dualquery_epsilon(58, eta=2.0, samples=50, records=48842, delta=1e-3), 5)
        0.98854
    """
    where = "dualquery_epsilon"
    T = _count(rounds, "rounds", where)
    eta = _positive(eta, "eta", where)
    s = _count(samples, "samples", where)
    n = _positive(records, "records", where)
    if form not in _DQ_FORMS:
        raise ValueError(f"{where}: form must be one of {_DQ_FORMS}, got {form!r}")
    if form == "pure":
        return eta * s * T * (T - 1) / n
    if delta is None:
        raise ValueError(f"{where}: form={form!r} needs delta")
    d = _delta(delta, where)
    if T == 1:
        return 0.0
    if form == "b2":
        return advanced_composition(2 * eta * (T - 1) / n, s * (T - 1), d)
    eps_t = 2 * eta * np.arange(1, T) / n
    return advanced_composition_hetero(eps_t, d, counts=np.full(T - 1, s))


def dualquery_rounds(
    epsilon: float, *, eta: float, samples: int, records: int, delta: float | None = None, form: str = "b2", max_rounds: int = 10**7
) -> int:
    """Largest number of DualQuery rounds ``T`` with :func:`dualquery_epsilon` ``<= epsilon`` (Gaboardi et al. 2014).

    Args:
        epsilon: the target, ``> 0``.
        eta, samples, records, delta, form: as in :func:`dualquery_epsilon`.
        max_rounds: search limit.

    Returns:
        ``T >= 1`` (``1`` when even two rounds cost too much: round 1 reads no data).

    Example:
        >>> dualquery_rounds(1.0, eta=2.0, samples=50, records=48842, delta=1e-3)
        58
    """
    where = "dualquery_rounds"
    target = _positive(epsilon, "epsilon", where)
    limit = _count(max_rounds, "max_rounds", where)

    def fits(T):
        return dualquery_epsilon(T, eta=eta, samples=samples, records=records, delta=delta, form=form) <= target

    fits(1)  # validates every argument before the search
    lo, hi = 1, 2
    while hi <= limit and fits(hi):  # eps(T) increases with T: double, then bisect
        lo, hi = hi, 2 * hi
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


# ---------------------------------------------------------------------------------------------------
# The accountant
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One noise addition, as recorded by an :class:`Accountant` (immutable).

    Attributes:
        index: position in the ledger (0, 1, ...).
        mechanism: ``"laplace"``, ``"gaussian"`` or ``"exponential"``.
        target: what was released: a clique (tuple of attributes) or a label.
        query: ``"identity"``, ``"dense RxC"``, ``"kron r1xc1 ⊗ r2xc2"`` for a measured marginal;
            ``"values"`` for raw Laplace/Gaussian, ``"selection"`` for the exponential mechanism.
        size: number of noisy values, or of candidates for the exponential mechanism.
        count: independent draws (``num`` of :meth:`Accountant.exponential`), else 1.
        sensitivity: the sensitivity used (L1 for Laplace / EM, L2 for Gaussian).
        scale: the noise scale: Laplace ``b``, Gaussian ``sigma``, or the Gumbel scale ``2 Delta / eps``
            on the qualities for the exponential mechanism.
        epsilon: pure-DP epsilon of one draw (None for Gaussian noise).
        rho: zCDP rho of one draw.
        cost: privacy cost of the entry (all draws) in the accountant's currency (``epsilon`` or
            ``rho``); under advanced composition the basic-composition cost ``count * epsilon``.
    """

    index: int
    mechanism: str
    target: Any
    query: str
    size: int
    count: int
    sensitivity: float
    scale: float
    epsilon: float | None
    rho: float
    cost: float


def _describe_query(kind: str, q) -> str:
    if kind == "identity":
        return "identity"
    if kind == "dense":
        return f"dense {q.shape[0]}x{q.shape[1]}"
    return "kron " + " ⊗ ".join(f"{f.shape[0]}x{f.shape[1]}" for f in q)


def _freeze(target):
    if isinstance(target, list):
        return tuple(_freeze(t) for t in target)
    return target


class Accountant:
    """Privacy budget of one run: calibrates, adds and records every noise addition.

    Construct it from the whole run's budget:

    * ``Accountant(epsilon=e)``: pure ``e``-DP; costs add in epsilon (Laplace ``Delta1/b``,
      exponential mechanism ``eps``). Gaussian noise is refused.
    * ``Accountant(rho=r)``: ``r``-zCDP; costs add in rho (Gaussian ``Delta2^2/(2 sigma^2)``,
      exponential mechanism ``eps^2/8``, Laplace ``eps^2/2``).
    * ``Accountant(epsilon=e, delta=d)``: ``(e, d)``-DP through zCDP, with budget
      ``rho = cdp_rho(e, d)`` (MST, AIM, MWEM with Gaussian noise).
    * ``Accountant(epsilon=e, delta=d, composition="advanced")``: pure-DP mechanisms (Laplace, EM)
      composed by advanced composition, ``spent = min(sum eps_i, eps_max sqrt(2 k ln(1/d)) + k
      eps_max (e^eps_max - 1))`` over the ``k`` draws (DualQuery's ``b2`` bound);
      ``"advanced_heterogeneous"`` uses :func:`advanced_composition_hetero` instead. Both bounds hold
      for a schedule of per-draw epsilons fixed in advance (as DualQuery's is), not for epsilons chosen
      adaptively from earlier outputs; use ``"pure"`` or ``"zcdp"`` for adaptive schedules.

    ``bounded`` fixes the neighbouring relation, hence every default sensitivity
    (:meth:`l1_sensitivity`, :meth:`l2_sensitivity`, :meth:`measure`).

    Each mechanism method takes exactly one calibration: a budget (``epsilon=`` or, under zCDP,
    ``rho=``; ``REST`` spends exactly what is left) or a noise scale (``scale=`` / ``sigma=``). It
    checks everything and the budget first (:class:`PrivacyBudgetExceeded` names the request and
    what is left; a relative slack of 1e-9 absorbs float round-off of equal splits), then draws the
    noise and records a :class:`LedgerEntry`. Spending ``REST`` makes ``spent == budget`` exactly
    (``spent`` is the correctly rounded sum of the costs; in the rare float ties where no cost can
    make that sum the budget itself, it ends one ulp below, never above).

    Args:
        epsilon: pure-DP budget, or the epsilon of an ``(epsilon, delta)`` target.
        delta: the delta of an ``(epsilon, delta)`` target; with ``rho``, only used to report epsilon.
        rho: zCDP budget.
        bounded: False (default) for add/remove-one-record neighbours, True for replace-one.
        composition: ``"pure"``, ``"zcdp"``, ``"advanced"`` or ``"advanced_heterogeneous"``; default
            ``"pure"`` for ``epsilon`` alone, ``"zcdp"`` otherwise.

    Example:
        >>> acc = Accountant(epsilon=1.0, delta=1e-9)                 # rho = 0.0149731
        >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
        >>> keys = jax.random.split(jax.random.key(0), 3)
        >>> m = acc.measure(keys[0], data, ("a",), rho=acc.budget / 2)  # Gaussian, sigma = 1 / sqrt(budget)
        >>> i = acc.exponential(keys[1], [3.0, 1.0], sensitivity=1.0, rho=acc.remaining / 10)
        >>> m2 = acc.measure(keys[2], data, ("a", "b"), rho=REST)
        >>> acc.spent == acc.budget, len(acc.ledger)
        (True, 3)
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        bounded: bool = False,
        composition: str | None = None,
    ):
        where = "Accountant"
        self._bounded = _bool(bounded, "bounded", where)
        if composition is not None and composition not in _COMPOSITIONS:
            raise ValueError(f"{where}: composition must be one of {_COMPOSITIONS}, got {composition!r}")
        if epsilon is not None and rho is not None:
            raise ValueError(f"{where}: give a budget as epsilon= (with optional delta=) or as rho=, not both")
        if epsilon is None and rho is None:
            raise ValueError(f"{where}: give a budget: epsilon= (pure DP), epsilon= and delta=, or rho= (zCDP)")
        eps = _positive(epsilon, "epsilon", where) if epsilon is not None else None
        dlt = _delta(delta, where) if delta is not None else None
        if composition is None:
            composition = "pure" if (eps is not None and dlt is None) else "zcdp"
        if composition == "pure":
            if eps is None or dlt is not None:
                raise ValueError(f"{where}: composition='pure' takes epsilon= alone (no delta=, no rho=)")
            budget = eps
        elif composition == "zcdp":
            if rho is not None:
                budget = _positive(rho, "rho", where)
            else:
                if dlt is None:  # unreachable by the default rule; explicit 'zcdp' with epsilon alone
                    raise ValueError(f"{where}: composition='zcdp' needs rho=, or epsilon= and delta=")
                budget = cdp_rho(eps, dlt)
        else:
            if eps is None or dlt is None:
                raise ValueError(f"{where}: composition={composition!r} needs epsilon= and delta=")
            budget = eps
        self._composition = composition
        self._budget = float(budget)
        self._delta = dlt
        self._entries: list[LedgerEntry] = []

    # Budget ------------------------------------------------------------------------------------
    @property
    def composition(self) -> str:
        """``"pure"``, ``"zcdp"``, ``"advanced"`` or ``"advanced_heterogeneous"``."""
        return self._composition

    @property
    def currency(self) -> str:
        """``"rho"`` under zCDP, else ``"epsilon"``: the unit of :attr:`budget`, :attr:`spent`, costs."""
        return "rho" if self._composition == "zcdp" else "epsilon"

    @property
    def bounded(self) -> bool:
        return self._bounded

    @property
    def delta(self) -> float | None:
        """The delta given at construction (None for pure DP)."""
        return self._delta

    @property
    def budget(self) -> float:
        """The whole budget, in :attr:`currency`."""
        return self._budget

    @property
    def spent(self) -> float:
        """What the ledger has spent, in :attr:`currency` (composed, under advanced composition)."""
        return self._spent_with()

    @property
    def remaining(self) -> float:
        """``budget - spent``, never negative."""
        return max(self._budget - self.spent, 0.0)

    @property
    def exhausted(self) -> bool:
        """Whether the budget is spent (up to the 1e-9 relative slack)."""
        return self.spent >= self._budget * (1 - _RTOL)

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """Every noise addition so far, in order."""
        return tuple(self._entries)

    def _spent_with(self, extras: Sequence[dict] = ()) -> float:
        """Spent, counting also ``extras`` (resolved requests, not recorded)."""
        rows = [(e.cost, e.epsilon, e.count) for e in self._entries]
        rows += [(p["cost"], p["epsilon"], p["count"]) for p in extras]
        basic = math.fsum(r[0] for r in rows)
        if self._composition in ("pure", "zcdp") or not rows:
            return basic
        eps = [r[1] for r in rows]
        counts = [r[2] for r in rows]
        if self._composition == "advanced":
            adv = advanced_composition(max(eps), int(sum(counts)), self._delta)
        else:
            adv = advanced_composition_hetero(eps, self._delta, counts=counts)
        # Both bounds hold; plain summation wins for few draws.
        return min(basic, adv)

    def epsilon_delta(self, delta: float | None = None) -> tuple[float, float]:
        """The ``(epsilon, delta)``-DP guarantee of what has been spent so far.

        Args:
            delta: under zCDP, the delta to report at (default: the one given at construction);
                must be None otherwise.

        Returns:
            ``(epsilon, delta)``: ``(spent, 0)`` for pure DP, ``(cdp_eps(spent, delta), delta)``
            under zCDP, ``(spent, delta)`` under advanced composition.
        """
        where = "Accountant.epsilon_delta"
        if self._composition == "pure":
            if delta is not None:
                raise ValueError(f"{where}: a pure-DP accountant reports (epsilon, 0); do not pass delta")
            return self.spent, 0.0
        if self._composition == "zcdp":
            d = _delta(delta, where) if delta is not None else self._delta
            if d is None:
                raise ValueError(f"{where}: this accountant was built from rho alone; pass delta=")
            return cdp_eps(self.spent, d), d
        if delta is not None and _delta(delta, where) != self._delta:
            raise ValueError(f"{where}: advanced composition was set up for delta={self._delta}; got {delta}")
        return self.spent, self._delta

    # Sensitivities -----------------------------------------------------------------------------
    def l1_sensitivity(self, query=None) -> float:
        """:func:`l1_sensitivity` under this accountant's convention (e.g. of an EM quality ``||mu_C(D) - v||_1``)."""
        return l1_sensitivity(query, bounded=self._bounded)

    def l2_sensitivity(self, query=None) -> float:
        """:func:`l2_sensitivity` under this accountant's convention."""
        return l2_sensitivity(query, bounded=self._bounded)

    # Costing -----------------------------------------------------------------------------------
    def _allowed(self, mechanism: str, where: str) -> None:
        if mechanism not in _MECHANISMS:
            raise ValueError(f"{where}: unknown mechanism {mechanism!r}; known: {_MECHANISMS}")
        if mechanism == "gaussian" and self._composition != "zcdp":
            raise ValueError(
                f"{where}: Gaussian noise is not pure DP; this accountant uses composition={self._composition!r}. "
                "Build it with rho= or with epsilon= and delta= (zCDP), or use Laplace noise"
            )

    def _resolve(
        self, mechanism: str, where: str, sensitivity, count: int, epsilon=None, rho=None, scale=None, size: int = 1, integer: bool = True
    ) -> dict:
        """Calibrate one request: its noise scale, per-draw epsilon/rho and total cost (no budget check).

        Laplace and Gaussian releases of ``size`` answers are calibrated on their lattice
        (:func:`_lattice_plan`): for non-``integer`` answers the sensitivity includes what rounding adds.
        """
        self._allowed(mechanism, where)
        d = _positive(sensitivity, "sensitivity", where)
        given = {"epsilon": epsilon, "rho": rho}
        if mechanism == "laplace":
            given["scale"] = scale
        elif mechanism == "gaussian":
            if epsilon is not None:
                raise ValueError(f"{where}: calibrate Gaussian noise with rho= or sigma=/scale= (zCDP), not epsilon=")
            given = {"rho": rho, "scale": scale}
        elif scale is not None:
            raise ValueError(f"{where}: the {mechanism} mechanism is calibrated by epsilon= (or rho= under zCDP), not scale=")
        name, value = _one_of(where, **given)
        zcdp = self._composition == "zcdp"
        if name == "rho" and not zcdp:
            raise ValueError(f"{where}: this accountant counts epsilon (composition={self._composition!r}); give epsilon=")
        rest = isinstance(value, str)
        if rest:
            if value != REST:
                raise ValueError(f"{where}: {name} must be a number or {REST!r}, got {value!r}")
            if name == "scale":
                raise ValueError(f"{where}: {REST!r} is a budget; give it as epsilon= or rho=")
            cost = self._rest_cost(where, mechanism)
            # The rest, per draw, in the accountant's currency; calibrated below like any budget.
            name, v = ("rho" if zcdp else "epsilon"), cost / count
        else:
            cost = None
            v = _positive(value, name, where)
        lattice = None
        if mechanism == "gaussian":
            plan = _lattice_plan("gaussian", d, size, integer, **({"rho": v} if name == "rho" else {"scale": v}))
            s, d, lattice = plan["scale"], plan["sensitivity"], plan["lattice"]
            r = v if name == "rho" else d * d / (2.0 * s * s)
            e = None
        elif mechanism == "laplace":
            e = v if name == "epsilon" else (math.sqrt(2.0 * v) if name == "rho" else None)
            plan = _lattice_plan("laplace", d, size, integer, **({"scale": v} if e is None else {"epsilon": e}))
            s, d, lattice = plan["scale"], plan["sensitivity"], plan["lattice"]
            e = d / s if e is None else e
            r = e * e / 2.0  # zCDP of one eps-DP draw
        elif mechanism == "randomized_response":
            e = v if name == "epsilon" else math.sqrt(2.0 * v)  # pure eps-DP: eps^2/2-zCDP
            r = v if name == "rho" else e * e / 2.0
            s = None
        else:
            e = v if name == "epsilon" else math.sqrt(8.0 * v)  # the EM is eps^2/8-zCDP (bounded range)
            r = v if name == "rho" else e * e / 8.0
            s = 2.0 * d / e  # the scale of the qualities' exponent
        if cost is None:
            cost = count * (r if zcdp else e)
        return {
            "sensitivity": d, "scale": s, "epsilon": e, "rho": r, "cost": cost, "count": count, "rest": rest,
            "lattice": lattice, "integer": integer, "size": size,
        }

    def _rest_cost(self, where: str, mechanism: str) -> float:
        if self._composition not in ("pure", "zcdp"):
            raise ValueError(
                f"{where}: spending {REST!r} needs additive accounting (pure or zcdp); "
                f"composition={self._composition!r} does not add costs"
            )
        costs = [e.cost for e in self._entries]
        spent = math.fsum(costs)
        # The correctly rounded budget - sum(costs), or one of its float neighbours: the largest
        # whose ledger total (the exact sum, rounded once) does not exceed the budget. That total is
        # the budget itself except in rare float ties where no cost can reach it (then one ulp below).
        c0 = math.fsum([self._budget, *(-x for x in costs)])
        if not c0 > self._budget * _RTOL:
            raise PrivacyBudgetExceeded(
                f"{where}: {mechanism} asked for the rest of the budget, but nothing is left "
                f"(spent {spent:.6g} of {self._budget:.6g} {self.currency})"
            )
        near = [c0]
        for _ in range(2):
            near = [math.nextafter(near[0], -math.inf), *near, math.nextafter(near[-1], math.inf)]
        return max((c for c in near if math.fsum([*costs, c]) <= self._budget), default=near[0])

    def _check_budget(self, where: str, what: str, requests: Sequence[dict]) -> float:
        """Refuse ``requests`` that would overspend (beyond round-off); return the spend they would bring."""
        after = self._spent_with(requests)
        if after > self._budget * (1 + _RTOL):
            spent = self.spent
            raise PrivacyBudgetExceeded(
                f"{where}: {what} costs {after - spent:.6g} {self.currency} (spent would be {after:.6g}) "
                f"but only {max(self._budget - spent, 0.0):.6g} of the budget {self._budget:.6g} is left "
                f"(spent {spent:.6g}); nothing was run"
            )
        return after

    def cost(self, mechanism: str, *, sensitivity: float, epsilon=None, rho=None, scale=None, count: int = 1) -> float:
        """Cost of a request in :attr:`currency`, without running or recording anything.

        Args:
            mechanism: ``"laplace"``, ``"gaussian"`` or ``"exponential"``.
            sensitivity: its sensitivity.
            epsilon, rho, scale: exactly one calibration, as in the mechanism methods
                (``scale`` is ``b`` for Laplace, ``sigma`` for Gaussian).
            count: number of draws (exponential mechanism).

        Returns:
            The cost (basic composition under advanced composition).

        Example:
            >>> Accountant(rho=1.0).cost("gaussian", sensitivity=1.0, scale=10.0)
            0.005
        """
        where = "Accountant.cost"
        if isinstance(epsilon, str) or isinstance(rho, str):
            raise ValueError(f"{where}: the cost of {REST!r} is Accountant.remaining")
        return self._resolve(mechanism, where, sensitivity, _count(count, "count", where), epsilon, rho, scale)["cost"]

    def _record(self, mechanism, target, query, size, count, p) -> None:
        self._entries.append(
            LedgerEntry(
                index=len(self._entries),
                mechanism=mechanism,
                target=_freeze(target),
                query=query,
                size=int(size),
                count=int(count),
                sensitivity=p["sensitivity"],
                scale=p["scale"],
                epsilon=p["epsilon"],
                rho=p["rho"],
                cost=p["cost"],
            )
        )

    def _prepare(
        self, where, mechanism, target, sensitivity, count, epsilon=None, rho=None, scale=None, size: int = 1, integer: bool = True
    ) -> dict:
        p = self._resolve(mechanism, where, sensitivity, count, epsilon, rho, scale, size, integer)
        if not p["rest"]:
            after = self._check_budget(where, f"{mechanism} on {target!r}", [p])
            p = self._within_budget(where, mechanism, sensitivity, p, after)
        return p

    def _within_budget(self, where: str, mechanism: str, sensitivity: float, p: dict, after: float | None = None) -> dict:
        """``p``, or, when float round-off of a split budget puts it a hair over, exactly the rest (never above).

        ``after``: the spend with ``p`` included, when the caller has it already.
        """
        if after is None:
            after = self._spent_with([p])
        if self._composition in ("pure", "zcdp") and after > self._budget:
            as_cost = "rho" if self._composition == "zcdp" else "epsilon"
            return self._resolve(mechanism, where, sensitivity, p["count"], size=p["size"], integer=p["integer"], **{as_cost: REST})
        return p

    # Mechanisms --------------------------------------------------------------------------------
    def laplace(
        self, key, values, sensitivity: float, *, epsilon=None, rho=None, scale=None, target=None, integer: bool = False
    ) -> np.ndarray:
        """Laplace mechanism on private ``values``, recorded (Dwork et al. 2006).

        Args:
            key: a ``jax.random`` key.
            values: exact answers computed from the private data (any shape).
            sensitivity: their L1 sensitivity under this accountant's convention.
            epsilon: budget (``REST`` for what is left); or rho= (zCDP accountants: ``eps = sqrt(2 rho)``);
                or scale= the Laplace ``b``.
            target: a label for the ledger.
            integer: the values are integers for every dataset (counts): no lattice rounding. Otherwise
                they are rounded to a fine public lattice and the sensitivity grows by ``size * gamma``
                (see :func:`laplace_mechanism`).

        Returns:
            The values plus discrete Laplace noise, a float64 NumPy array.

        Example:
            >>> acc = Accountant(epsilon=1.0)
            >>> y = acc.laplace(jax.random.key(0), np.array([10.0, 3.0]), 1.0, epsilon=0.5, target="counts", integer=True)
            >>> acc.ledger[0].scale, acc.remaining
            (2.0, 0.5)
        """
        where = "Accountant.laplace"
        _check_key(key, where)
        x = _values(values, where)
        target = f"values{x.shape}" if target is None else target
        p = self._prepare(where, "laplace", target, sensitivity, 1, epsilon, rho, scale, x.size, integer)
        out = _lattice_release(key, x, "laplace", p)
        self._record("laplace", target, "values", x.size, 1, p)
        return out

    def gaussian(self, key, values, sensitivity: float, *, rho=None, sigma=None, target=None, integer: bool = False) -> np.ndarray:
        """Gaussian mechanism on private ``values``, recorded (zCDP accountants only; Bun & Steinke 2016).

        Args:
            key: a ``jax.random`` key.
            values: exact answers from the private data (any shape).
            sensitivity: their L2 sensitivity under this accountant's convention.
            rho: budget (``REST`` for what is left); or sigma= the noise scale.
            target: a label for the ledger.
            integer: the values are integers for every dataset (see :meth:`laplace`).

        Returns:
            The values plus discrete Gaussian noise, a float64 NumPy array.

        Example:
            >>> acc = Accountant(rho=1.0)
            >>> y = acc.gaussian(jax.random.key(0), np.zeros(4), 1.0, sigma=5.0, integer=True)
            >>> acc.spent
            0.02
        """
        where = "Accountant.gaussian"
        _check_key(key, where)
        x = _values(values, where)
        target = f"values{x.shape}" if target is None else target
        p = self._prepare(where, "gaussian", target, sensitivity, 1, None, rho, sigma, x.size, integer)
        out = _lattice_release(key, x, "gaussian", p)
        self._record("gaussian", target, "values", x.size, 1, p)
        return out

    def exponential(self, key, qualities, sensitivity: float, *, epsilon=None, rho=None, num: int | None = None, target=None):
        """Exponential mechanism (Gumbel-max) on private ``qualities``, recorded (McSherry & Talwar 2007).

        Selects ``r`` with probability ``∝ exp(eps q(r) / (2 Delta))`` (see
        :func:`exponential_probabilities`). Costs ``eps`` per draw (pure), ``eps^2/8`` (zCDP).

        Args:
            key: a ``jax.random`` key.
            qualities: 1-D scores computed from the private data; ``-inf`` excludes a candidate
                (only for data-independent reasons, e.g. a model-size cap).
            sensitivity: the scores' sensitivity under this accountant's convention.
            epsilon: per-draw budget (``REST``: what is left, split over the draws); or rho= per-draw
                zCDP budget (zCDP accountants: ``eps = sqrt(8 rho)``).
            num: None for one draw; an int for that many independent draws (e.g. DualQuery's ``s``).
            target: a label for the ledger.

        Returns:
            The selected index (int), or an int64 array of ``num`` indices.

        Example:
            >>> acc = Accountant(rho=0.5)
            >>> acc.exponential(jax.random.key(1), [0.0, 50.0, 1.0], sensitivity=1.0, epsilon=2.0)
            1
            >>> acc.spent
            0.5
        """
        where = "Accountant.exponential"
        _check_key(key, where)
        q = _qualities(qualities, where)
        count = 1 if num is None else _count(num, "num", where)
        target = f"selection among {q.size}" if target is None else target
        p = self._prepare(where, "exponential", target, sensitivity, count, epsilon, rho, None)
        choice = exponential_mechanism(key, q, p["sensitivity"], p["epsilon"], num=num)
        self._record("exponential", target, "selection", q.size, count, p)
        return choice

    def randomized_response(
        self, key, data: Dataset, *, epsilon=None, rho=None, per_attribute: bool = False, public_count: bool = False, target=None
    ) -> Dataset:
        """Randomized response on every record of ``data``, recorded: a synthetic table of the same length.

        Each record is kept with probability ``e^eps / (e^eps + K - 1)`` and otherwise replaced by one of
        the other ``K - 1`` rows of the domain, uniformly (Wang, Ying & Zhang, "A Minimax Distortion View
        of Differentially Private Query Release", section III; sampled exactly, see
        :mod:`pgmjax.randomized_response`). ``per_attribute`` randomizes each attribute with ``eps / d``
        (``K`` = that attribute's size), which stays informative on real domains. The release is
        ``eps``-DP under replace-one neighbours; it reveals the record count, so under add/remove
        neighbours (``bounded=False``) it is refused unless ``public_count=True`` declares the count public.

        Args:
            key: a ``jax.random`` key.
            data: the private dataset.
            epsilon: the budget (``REST``: what is left); or rho= (zCDP accountants, ``eps = sqrt(2 rho)``).
            per_attribute: randomize attribute by attribute.
            public_count: the record count is public (needed under add/remove neighbours).
            target: a ledger label.

        Returns:
            A :class:`~pgmjax.Dataset` on the same domain with ``len(data)`` records.

        Example:
            >>> acc = Accountant(epsilon=1.0, bounded=True)
            >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
            >>> out = acc.randomized_response(jax.random.key(0), data, epsilon=1.0)
            >>> len(out), acc.spent
            (3, 1.0)
        """
        where = "Accountant.randomized_response"
        _check_key(key, where)
        if not isinstance(data, Dataset):
            raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
        public_count = _bool(public_count, "public_count", where)
        if not self._bounded and not public_count:
            raise ValueError(
                f"{where}: randomized response releases exactly one row per record, so it reveals the record "
                "count, which is private under add/remove neighbours (bounded=False). Use an Accountant with "
                "bounded=True, or pass public_count=True if the count is public"
            )
        per_attribute = _bool(per_attribute, "per_attribute", where)
        target = ("randomized response per attribute" if per_attribute else "randomized response") if target is None else target
        p = self._prepare(where, "randomized_response", target, 1.0, 1, epsilon, rho, None)
        out = rr.randomize_records(dn.generator(key), data.records, data.domain.shape, p["epsilon"], per_attribute=per_attribute)
        self._record("randomized_response", target, "records", len(data), 1, p)
        return Dataset(out, data.domain)

    def _plan(self, where: str, data: Dataset, clique: CliqueLike, query, mechanism):
        """Validate one marginal measurement; return ``(clique, probe Measurement, query description, mechanism)``."""
        if not isinstance(data, Dataset):
            raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
        if mechanism is None:
            mechanism = "gaussian" if self._composition == "zcdp" else "laplace"
        if mechanism not in ("laplace", "gaussian"):
            raise ValueError(f"{where}: mechanism must be 'laplace' or 'gaussian', got {mechanism!r}")
        self._allowed(mechanism, where)
        clique = data.domain.check_clique(clique, what=f"{where}: clique")
        kind, q = _as_query(query, where)
        if kind == "identity":
            rows = data.domain.size(clique)
        elif kind == "dense":
            rows = q.shape[0]
        else:
            rows = math.prod(f.shape[0] for f in q)
        probe = Measurement(clique, np.zeros(rows), 1.0, q)
        probe.validate(data.domain)
        return clique, probe, _describe_query(kind, q), mechanism

    @staticmethod
    def _integer_query(probe: Measurement) -> bool:
        """Whether the query's answers are integers for every dataset (counts times integer coefficients)."""
        if probe.kind == "identity":
            return True
        factors = probe.query if probe.kind == "kron" else (probe.query,)
        return all(np.array_equal(f, np.round(f)) for f in factors)

    def _release(self, key, probe: Measurement, marginal, mechanism: str, p: dict) -> Measurement:
        answers = probe.answer(marginal)
        rel = dn.lattice_noise(dn.generator(key), answers, family=mechanism, scale=p["scale"], gamma=p["lattice"], integer=p["integer"])
        return Measurement(probe.clique, rel.values, rel.stddev, probe.query, noise=mechanism)

    def measure(
        self,
        key,
        data: Dataset,
        clique: CliqueLike,
        *,
        query=None,
        mechanism: str | None = None,
        epsilon=None,
        rho=None,
        scale=None,
        sensitivity: float | None = None,
        target=None,
    ) -> Measurement:
        """Noisy answers ``Q mu_C(D) + noise`` to a marginal (or linear queries on it), recorded.

        The sensitivity follows from the convention and the query (:meth:`l1_sensitivity` for
        Laplace, :meth:`l2_sensitivity` for Gaussian) unless given. The returned
        :class:`~pgmjax.Measurement` carries the true noise std (``sqrt(2) b`` for Laplace) and the
        query, ready for :func:`pgmjax.estimate`. The noise is ``scale * standard_laplace(key, rows)``
        or ``scale * standard_normal(key, rows)``: reproducible from the key.

        Args:
            key: a ``jax.random`` key.
            data: the private :class:`~pgmjax.Dataset`.
            clique: the attributes of the marginal (its axes in this order).
            query: None (the marginal), a dense ``(rows, cells)`` matrix (1-D: one row), or a tuple of
                per-attribute matrices (Kronecker product).
            mechanism: ``"gaussian"`` or ``"laplace"``; default Gaussian under zCDP, else Laplace.
            epsilon: Laplace budget; rho: zCDP budget (either may be ``REST``); or scale: the noise
                scale (Laplace ``b`` or Gaussian ``sigma``).
            sensitivity: override the sensitivity (only with a proof that it holds).
            target: ledger label (default: the clique).

        Returns:
            A :class:`~pgmjax.Measurement`.

        Example:
            >>> acc = Accountant(epsilon=1.0, bounded=True)
            >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
            >>> m = acc.measure(jax.random.key(0), data, ("a", "b"), epsilon=0.5)   # Laplace b = 2 / 0.5
            >>> round(float(m.stddev), 4)                                          # sqrt(2) * 4
            5.6569
        """
        where = "Accountant.measure"
        _check_key(key, where)
        clique, probe, qdesc, mechanism = self._plan(where, data, clique, query, mechanism)
        if sensitivity is None:
            sensitivity = (l1_sensitivity if mechanism == "laplace" else l2_sensitivity)(probe.query, bounded=self._bounded)
        target = clique if target is None else target
        p = self._prepare(where, mechanism, target, sensitivity, 1, epsilon, rho, scale, probe.rows, self._integer_query(probe))
        m = self._release(key, probe, data.marginal(clique), mechanism, p)
        self._record(mechanism, target, qdesc, probe.rows, 1, p)
        return m

    def measure_many(
        self,
        key,
        data: Dataset,
        cliques: Sequence[CliqueLike],
        *,
        queries: Sequence | None = None,
        mechanism: str | None = None,
        epsilon=None,
        rho=None,
        scale=None,
    ) -> list[Measurement]:
        """Measure several marginals, splitting a total budget equally (sequential composition).

        ``epsilon`` / ``rho`` is the total for the batch: each measurement gets ``1/k`` of it (with
        ``REST``, ``1/k`` of what is left, the last one exactly the remainder). ``scale`` is per
        measurement. Everything, the total budget included, is checked before anything is measured.
        Measurement ``i`` uses ``jax.random.split(key, k)[i]`` and equals ``measure`` with that key.

        Args:
            key: a ``jax.random`` key.
            data: the private dataset.
            cliques: the marginals to measure.
            queries: None, or one query per clique (None entries for plain marginals).
            mechanism, epsilon, rho, scale: as in :meth:`measure`.

        Returns:
            One :class:`~pgmjax.Measurement` per clique.

        Example:
            >>> acc = Accountant(rho=0.3)                        # MST's one-way step: rho/3 over d marginals
            >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
            >>> ms = acc.measure_many(jax.random.key(0), data, [("a",), ("b",)], rho=0.1)
            >>> [round(float(m.stddev), 4) for m in ms]        # sigma = 1 / sqrt(2 * 0.05)
            [3.1623, 3.1623]
        """
        where = "Accountant.measure_many"
        _check_key(key, where)
        cliques = list(cliques)
        k = len(cliques)
        if k == 0:
            raise ValueError(f"{where}: no cliques given")
        if queries is None:
            queries = [None] * k
        queries = list(queries)
        if len(queries) != k:
            raise ValueError(f"{where}: {len(queries)} queries for {k} cliques")
        plans = [self._plan(f"{where} (clique {i})", data, c, q, mechanism) for i, (c, q) in enumerate(zip(cliques, queries))]
        mechanism = plans[0][3]
        sens = [(l1_sensitivity if mechanism == "laplace" else l2_sensitivity)(pl[1].query, bounded=self._bounded) for pl in plans]
        shapes = [{"size": pl[1].rows, "integer": self._integer_query(pl[1])} for pl in plans]
        name, total = _one_of(where, epsilon=epsilon, rho=rho, scale=scale)
        as_cost = "rho" if self._composition == "zcdp" else "epsilon"  # the parameter that is the cost itself
        if isinstance(total, str):
            if total != REST:
                raise ValueError(f"{where}: {name} must be a number or {REST!r}, got {total!r}")
            if name == "scale":
                raise ValueError(f"{where}: {REST!r} is a budget; give it as epsilon= or rho=")
            # Equal parts of what is left; the last part is resolved after the others are recorded,
            # as exactly the rest, so that the ledger sums to the budget.
            part = self._rest_cost(where, mechanism) / k
            self._resolve(mechanism, where, sens[-1], 1, **{name: part})  # is `name` valid here? (raises now, not midway)
            params = [self._resolve(mechanism, where, d, 1, **{as_cost: part}, **shape) for d, shape in zip(sens[:-1], shapes)] + [None]
        else:
            per = total if name == "scale" else _positive(total, name, where) / k
            params = [self._resolve(mechanism, where, d, 1, **{name: per}, **shape) for d, shape in zip(sens, shapes)]
            self._check_budget(where, f"{k} {mechanism} measurements", params)
        tables = data.marginals([pl[0] for pl in plans])
        keys = jax.random.split(key, k)
        out = []
        for i, (pl, d, table) in enumerate(zip(plans, sens, tables)):
            if params[i] is None:
                p = self._resolve(mechanism, where, d, 1, **{as_cost: REST}, **shapes[i])
            else:
                p = self._within_budget(where, mechanism, d, params[i])
            out.append(self._release(keys[i], pl[1], table, mechanism, p))
            self._record(mechanism, pl[0], pl[2], pl[1].rows, 1, p)
        return out

    # Reports -----------------------------------------------------------------------------------
    def records(self) -> list[dict]:
        """The ledger as a list of dicts (one per entry, the :class:`LedgerEntry` fields)."""
        return [asdict(e) for e in self._entries]

    def to_frame(self) -> pd.DataFrame:
        """The ledger as a pandas DataFrame (one row per entry), e.g. for a report."""
        cols = [f.name for f in LedgerEntry.__dataclass_fields__.values()]
        return pd.DataFrame(self.records(), columns=cols)

    def summary(self) -> dict:
        """Budget, spend and guarantee in one JSON-friendly dict."""
        out = {
            "composition": self._composition,
            "currency": self.currency,
            "bounded": self._bounded,
            "budget": self._budget,
            "spent": self.spent,
            "remaining": self.remaining,
            "entries": len(self._entries),
        }
        if self._composition != "zcdp" or self._delta is not None:
            out["epsilon"], out["delta"] = self.epsilon_delta()
        return out

    def __repr__(self) -> str:
        return (
            f"Accountant({self._composition}, budget={self._budget:.6g} {self.currency}, spent={self.spent:.6g}, "
            f"bounded={self._bounded}, entries={len(self._entries)})"
        )
