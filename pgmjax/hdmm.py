"""HDMM: the high-dimensional matrix mechanism (strategy optimisation, expected error, reconstruction).

McKenna, Miklau, Hay, Machanavajjhala, *Optimizing error of high-dimensional statistical queries under
differential privacy*, VLDB 2018. The matrix mechanism answers a workload ``W`` by
measuring a *strategy* ``A`` (``y = A x + noise``, noise calibrated to the sensitivity of ``A``),
reconstructing ``x_hat = A^+ y`` and answering ``W x_hat``. Its expected total squared error is::

    Err(W, A) = (2 / eps^2) * ||A||_1^2 * trace[(A^T A)^+ W^T W]        (Laplace, ||A||_1 = max column L1)
    Err(W, A) = sigma^2 * ||A||_{1->2}^2 * trace[(A^T A)^+ W^T W]      (Gaussian, max column L2 norm)

whenever ``A`` supports ``W`` (``W A^+ A = W``), and infinity otherwise. HDMM minimises the data-independent
factor ``||A||^2 * trace[...]`` over parameterised strategy families ("templates"):

* **OPT_0** (:func:`opt_0`, :func:`opt_pidentity`): the p-Identity template
  ``A(Theta) = [I ; Theta] D_Theta`` (``Theta >= 0`` of shape ``(p, n)``, ``D_Theta`` scaling every column to
  norm 1), objective ``trace[(A^T A)^{-1} W^T W]`` through the Woodbury identity, ``O(p n^2)``.
* **OPT_kron** (:func:`opt_kron`): ``A = A_1 (x) ... (x) A_d``; for one Kronecker workload the
  error factorises and each attribute is optimised on its own; for a union of Kronecker products,
  block-coordinate descent on surrogate Grams.
* **OPT_+** (:func:`opt_union`): one Kronecker strategy per sub-workload, stacked with weights
  ``alpha_j ∝ e_j^(1/3)`` (Gaussian: ``e_j^(1/4)``).
* **OPT_M** (:func:`opt_marginals`): weights ``theta`` on all ``2^d`` marginals; the workload is
  projected into the commutative "marginals Gram algebra" (:class:`MarginalsGram`).

Everything here is numeric and small: workloads are Kronecker products (:class:`KronWorkload`) and weighted
unions of them (:class:`UnionWorkload`) over a clique's attributes, with dense per-attribute factors; the full
product is never formed. Objectives are JAX functions differentiated by autodiff and minimised by optax
L-BFGS (non-negativity through the parameterisation ``Theta = phi^2``), restarts vectorised with ``vmap``
from explicit ``jax.random`` keys. Use float64 (``jax.config.update("jax_enable_x64", True)``) for results
that match the NumPy error evaluation to many digits.

Reconstruction: :func:`least_squares_marginal` / :func:`local_least_squares` (HDMM+LLS of the ICML 2019
paper: per clique, Kronecker pseudo-inverses, never the full table) and :func:`global_least_squares` (the
full table, refused with :class:`TableTooLargeError` before anything is allocated when it would not fit).

Example:
    >>> import jax, numpy as np
    >>> from pgmjax import hdmm
    >>> W = hdmm.KronWorkload(("age",), (hdmm.prefix(16),))
    >>> A, loss = hdmm.opt_kron(W, jax.random.key(0))
    >>> loss < hdmm.expected_error(W, hdmm.KronStrategy(("age",), (hdmm.identity(16),)))
    True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .measurement import Measurement
from .compiler import jit

__all__ = [
    # factor builders
    "identity",
    "total",
    "prefix",
    "suffix",
    "allrange",
    "identity_total",
    "width_k_range",
    "prefix_gram",
    "allrange_gram",
    # workloads and strategies
    "KronWorkload",
    "UnionWorkload",
    "marginals_workload",
    "KronStrategy",
    "UnionStrategy",
    "MarginalsStrategy",
    "MarginalsGram",
    # error
    "expected_error",
    "factor_error",
    "dense_expected_error",
    "pidentity_matrix",
    "pidentity_error",
    "marginals_error",
    # optimisation
    "default_p",
    "opt_pidentity",
    "opt_0",
    "opt_kron",
    "opt_union",
    "opt_marginals",
    "optimize_strategy",
    # measurement and reconstruction
    "least_squares_marginal",
    "local_least_squares",
    "global_least_squares",
    "TableTooLargeError",
]

_NOISES = ("laplace", "gaussian")
_SUPPORT_TOL = 1e-8


def _check_noise(noise: str) -> str:
    if noise not in _NOISES:
        raise ValueError(f"noise must be one of {_NOISES}, got {noise!r}")
    return noise


# ---------------------------------------------------------------------------------------------------------
# Per-attribute building blocks (dense; n is one attribute's number of values)
# ---------------------------------------------------------------------------------------------------------


def _check_n(n) -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"a domain size must be a positive integer, got {n!r}")
    return int(n)


def identity(n: int) -> np.ndarray:
    """``Identity(n)``: every cell on its own, shape ``(n, n)``."""
    return np.eye(_check_n(n))


def total(n: int) -> np.ndarray:
    """``Total(n)``: the sum of all cells, shape ``(1, n)`` (an attribute summed out)."""
    return np.ones((1, _check_n(n)))


def prefix(n: int) -> np.ndarray:
    """``Prefix(n)``: the ``n`` prefix sums (CDF), lower-triangular ones of shape ``(n, n)``."""
    return np.tril(np.ones((_check_n(n), n)))


def suffix(n: int) -> np.ndarray:
    """``Suffix(n)``: the ``n`` suffix sums, upper-triangular ones of shape ``(n, n)``."""
    return np.triu(np.ones((_check_n(n), n)))


def allrange(n: int) -> np.ndarray:
    """``AllRange(n)``: all ``n(n+1)/2`` intervals ``[i, j]``, shape ``(n(n+1)/2, n)``.

    Dense; for large ``n`` give the Gram :func:`allrange_gram` to :func:`opt_0` instead.
    """
    n = _check_n(n)
    i, j = np.triu_indices(n)
    cols = np.arange(n)
    return ((cols[None, :] >= i[:, None]) & (cols[None, :] <= j[:, None])).astype(np.float64)


def identity_total(n: int) -> np.ndarray:
    """``IdentityTotal(n)``: the identity and the total, shape ``(n + 1, n)``."""
    return np.vstack([identity(n), total(n)])


def width_k_range(n: int, k: int) -> np.ndarray:
    """All ``n - k + 1`` ranges of width ``k``, shape ``(n - k + 1, n)``."""
    n = _check_n(n)
    if not 1 <= k <= n:
        raise ValueError(f"width_k_range: need 1 <= k <= n, got k={k}, n={n}")
    rows = np.arange(n - k + 1)
    cols = np.arange(n)
    return ((cols[None, :] >= rows[:, None]) & (cols[None, :] < rows[:, None] + k)).astype(np.float64)


def prefix_gram(n: int) -> np.ndarray:
    """``Prefix(n)^T Prefix(n)`` in closed form: entry ``(i, j) = n - max(i, j)``."""
    idx = np.arange(_check_n(n))
    return (n - np.maximum(idx[:, None], idx[None, :])).astype(np.float64)


def allrange_gram(n: int) -> np.ndarray:
    """``AllRange(n)^T AllRange(n)`` in closed form: entry ``(i, j) = (min(i, j) + 1) * (n - max(i, j))``."""
    idx = np.arange(_check_n(n))
    return ((np.minimum(idx[:, None], idx[None, :]) + 1) * (n - np.maximum(idx[:, None], idx[None, :]))).astype(np.float64)


# ---------------------------------------------------------------------------------------------------------
# Small Kronecker helpers (NumPy; tables are C-ordered with the clique's first attribute slowest)
# ---------------------------------------------------------------------------------------------------------


def _kron_apply(factors: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
    """``(F_1 (x) ... (x) F_k) vec(x)`` for a table ``x`` of shape ``(n_1, ..., n_k)``; returns a table."""
    for axis, f in enumerate(factors):
        x = np.moveaxis(np.tensordot(f, x, axes=([1], [axis])), 0, axis)
    return x


def _as_clique(clique) -> tuple[str, ...]:
    if isinstance(clique, str):
        return (clique,)
    clique = tuple(clique)
    for a in clique:
        if not isinstance(a, str):
            raise TypeError(f"attribute names must be strings, got {a!r} in {clique}")
    if len(set(clique)) != len(clique):
        raise ValueError(f"clique {clique}: an attribute appears more than once")
    return clique


def _check_factors(clique, factors, what) -> tuple[np.ndarray, ...]:
    if isinstance(factors, np.ndarray):
        factors = (factors,)
    factors = tuple(np.asarray(f, dtype=np.float64) for f in factors)
    if len(factors) != len(clique):
        raise ValueError(f"{what} on {clique}: needs one matrix per attribute ({len(clique)}), got {len(factors)}")
    for a, f in zip(clique, factors):
        if f.ndim != 2 or f.shape[0] < 1 or f.shape[1] < 1:
            raise ValueError(f"{what} on {clique}: the factor of {a!r} must be a non-empty 2-D matrix, got shape {f.shape}")
        if not np.all(np.isfinite(f)):
            raise ValueError(f"{what} on {clique}: the factor of {a!r} has non-finite entries")
    return factors


def _merge_sizes(target: dict, clique, sizes, what):
    for a, n in zip(clique, sizes):
        if a in target and target[a] != n:
            raise ValueError(f"{what}: attribute {a!r} has {target[a]} values in one place and {n} in another")
        target[a] = n


# ---------------------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------------------


class KronWorkload:
    """A weighted Kronecker product workload ``weight * (W_1 (x) ... (x) W_k)`` over a clique's marginal.

    Query ``r`` is the product of one predicate per attribute of ``clique``; attributes not listed are summed
    out (a ``Total`` factor). A marginal on ``C`` is ``KronWorkload(C, [identity(n_a) for a in C])``.

    Args:
        clique: the attributes, in the order of ``factors`` (and of the marginal table's axes).
        factors: one ``(r_i, n_i)`` matrix per attribute (see :func:`prefix`, :func:`allrange`, ...).
        weight: a non-negative scalar multiplying every query (its square weighs the error).

    Example:
        >>> W = KronWorkload(("age", "sex"), (prefix(85), identity(2)))
        >>> W.rows, W.sizes
        (170, (85, 2))
    """

    __slots__ = ("clique", "factors", "weight", "_grams")

    def __init__(self, clique, factors, weight: float = 1.0):
        self.clique = _as_clique(clique)
        if not self.clique:
            raise ValueError("KronWorkload: the clique must have at least one attribute")
        self.factors = _check_factors(self.clique, factors, "KronWorkload")
        weight = float(weight)
        if not np.isfinite(weight) or weight < 0:
            raise ValueError(f"KronWorkload on {self.clique}: weight must be finite and >= 0, got {weight}")
        self.weight = weight
        self._grams = None

    @classmethod
    def marginal(cls, clique, sizes: Sequence[int] | Mapping[str, int], weight: float = 1.0) -> "KronWorkload":
        """The marginal (all cells) of ``clique``; ``sizes`` per attribute, or a mapping / ``Domain``."""
        clique = _as_clique(clique)
        if isinstance(sizes, Mapping):
            sizes = [sizes[a] for a in clique]
        return cls(clique, tuple(identity(n) for n in sizes), weight)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(f.shape[1] for f in self.factors)

    @property
    def rows(self) -> int:
        """Number of queries, ``prod r_i``."""
        return int(np.prod([f.shape[0] for f in self.factors]))

    def grams(self) -> tuple[np.ndarray, ...]:
        """Per-attribute Gram matrices ``W_i^T W_i`` (the weight not included), cached."""
        if self._grams is None:
            self._grams = tuple(f.T @ f for f in self.factors)
        return self._grams

    def answer(self, marginal) -> np.ndarray:
        """The (weighted) query answers on a table over ``clique`` (axes in clique order), flat ``(rows,)``."""
        x = np.asarray(marginal, dtype=np.float64).reshape(self.sizes)
        return self.weight * _kron_apply(self.factors, x).reshape(-1)

    def dense(self) -> np.ndarray:
        """The explicit ``(rows, cells)`` matrix; for small cliques only (tests, brute force)."""
        return self.weight * functools.reduce(np.kron, self.factors)

    def __repr__(self) -> str:
        return f"KronWorkload({self.clique}, sizes={self.sizes}, rows={self.rows}, weight={self.weight:g})"


class UnionWorkload:
    """A union (stack) of weighted Kronecker workloads ``[w_1 K_1; ...; w_k K_k]``.

    Its Gram is ``sum_j w_j^2 (x)_i G_i^(j)``, with ``G_i^(j) = 1 1^T`` for an attribute that term ``j``
    sums out. The terms may live on different cliques; ``attributes`` is their union (first-appearance order).

    Args:
        terms: :class:`KronWorkload` objects (a single one is accepted too).

    Example:
        >>> W = UnionWorkload([KronWorkload.marginal(("a", "b"), (2, 3)), KronWorkload.marginal(("b", "c"), (3, 4))])
        >>> W.attributes, W.rows
        (('a', 'b', 'c'), 18)
    """

    __slots__ = ("terms", "attributes", "sizes")

    def __init__(self, terms):
        if isinstance(terms, KronWorkload):
            terms = [terms]
        terms = tuple(terms)
        if not terms:
            raise ValueError("UnionWorkload: needs at least one KronWorkload")
        sizes: dict[str, int] = {}
        for t in terms:
            if not isinstance(t, KronWorkload):
                raise TypeError(f"UnionWorkload: terms must be KronWorkload, got {type(t).__name__}")
            _merge_sizes(sizes, t.clique, t.sizes, "UnionWorkload")
        self.terms = terms
        self.attributes: tuple[str, ...] = tuple(sizes)
        self.sizes: dict[str, int] = sizes

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.terms)

    @property
    def cliques(self) -> tuple[tuple[str, ...], ...]:
        return tuple(t.clique for t in self.terms)

    def answer(self, marginals) -> np.ndarray:
        """All answers, concatenated in term order.

        Args:
            marginals: a callable ``clique -> table`` (e.g. ``Dataset.marginal``) or a mapping keyed by clique.
        """
        get = _marginal_getter(marginals)
        return np.concatenate([t.answer(get(t.clique)) for t in self.terms])

    def dense(self, attributes: Sequence[str] | None = None, sizes: Mapping[str, int] | None = None) -> np.ndarray:
        """Explicit matrix over the full table on ``attributes`` (default: :attr:`attributes`; ``sizes`` for
        attributes no term mentions); small only."""
        attrs = tuple(attributes) if attributes is not None else self.attributes
        all_sizes = dict(sizes or {})
        all_sizes.update(self.sizes)
        return np.vstack([_expand_dense(t.clique, t.factors, attrs, all_sizes) * t.weight for t in self.terms])

    def __repr__(self) -> str:
        return f"UnionWorkload({len(self.terms)} terms on {self.attributes}, rows={self.rows})"


def _as_union(workload) -> UnionWorkload:
    if isinstance(workload, UnionWorkload):
        return workload
    if isinstance(workload, KronWorkload):
        return UnionWorkload([workload])
    if isinstance(workload, (list, tuple)):
        return UnionWorkload(workload)
    raise TypeError(f"expected a KronWorkload or UnionWorkload, got {type(workload).__name__}")


def marginals_workload(sizes: Mapping[str, int], cliques, weights: Sequence[float] | None = None) -> UnionWorkload:
    """The union of the marginals on ``cliques`` (identity on every attribute of each clique).

    Args:
        sizes: ``attribute -> number of values`` (a mapping or ``pgmjax.Domain``).
        cliques: the marginals' attribute tuples.
        weights: optional per-marginal weights (default 1).

    Example:
        >>> marginals_workload({"a": 2, "b": 3, "c": 4}, [("a", "b"), ("b", "c")]).rows
        18
    """
    cliques = [_as_clique(c) for c in cliques]
    weights = [1.0] * len(cliques) if weights is None else list(weights)
    if len(weights) != len(cliques):
        raise ValueError(f"marginals_workload: {len(cliques)} cliques but {len(weights)} weights")
    return UnionWorkload([KronWorkload.marginal(c, sizes, w) for c, w in zip(cliques, weights)])


def _expand_dense(clique, factors, attributes, sizes) -> np.ndarray:
    missing = [a for a in clique if a not in attributes]
    if missing:
        raise ValueError(f"attributes {missing} of {clique} are not among {tuple(attributes)}")
    per = {a: f for a, f in zip(clique, factors)}
    mats = [per[a] if a in per else np.ones((1, sizes[a])) for a in attributes]
    return functools.reduce(np.kron, mats, np.ones((1, 1)))


# ---------------------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------------------


def _col_norm(A: np.ndarray, noise: str) -> float:
    if noise == "laplace":
        return float(np.abs(A).sum(axis=0).max())
    return float(np.sqrt((A * A).sum(axis=0).max()))


class KronStrategy:
    """A Kronecker strategy ``weight * (A_1 (x) ... (x) A_k)`` measuring the marginal of ``clique``.

    Args:
        clique: the measured attributes, in the order of ``factors``.
        factors: one ``(m_i, n_i)`` matrix per attribute.
        weight: a positive scalar multiplying every row (OPT_+ stacks terms with weights ``alpha_j``).

    Example:
        >>> S = KronStrategy(("age", "sex"), (identity(85), identity(2)))
        >>> S.sensitivity(), S.rows
        (1.0, 170)
    """

    __slots__ = ("clique", "factors", "weight")

    def __init__(self, clique, factors, weight: float = 1.0):
        self.clique = _as_clique(clique)
        if not self.clique:
            raise ValueError("KronStrategy: the clique must have at least one attribute")
        self.factors = _check_factors(self.clique, factors, "KronStrategy")
        weight = float(weight)
        if not np.isfinite(weight) or weight <= 0:
            raise ValueError(f"KronStrategy on {self.clique}: weight must be finite and > 0, got {weight}")
        self.weight = weight

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(f.shape[1] for f in self.factors)

    @property
    def rows(self) -> int:
        return int(np.prod([f.shape[0] for f in self.factors]))

    def sensitivity(self, noise: str = "laplace") -> float:
        """``||A||_1`` (max column L1 norm, Laplace) or ``||A||_{1->2}`` (max column L2 norm, Gaussian).

        Product of the factors' norms (exact: a Kronecker column is a product of factor columns). This is the
        unbounded (add/remove one record) sensitivity; the bounded (replace) L1 sensitivity is twice it.
        """
        _check_noise(noise)
        return self.weight * float(np.prod([_col_norm(f, noise) for f in self.factors]))

    def queries(self) -> tuple[np.ndarray, ...]:
        """The per-attribute query matrices for ``pgmjax.Measurement`` (the weight folded into the first)."""
        return (self.factors[0] * self.weight,) + self.factors[1:]

    def apply(self, marginal) -> np.ndarray:
        """``A x`` for a table over ``clique`` (axes in clique order), flat ``(rows,)``."""
        x = np.asarray(marginal, dtype=np.float64).reshape(self.sizes)
        return self.weight * _kron_apply(self.factors, x).reshape(-1)

    def measurement(self, y, stddev) -> Measurement:
        """Wrap noisy answers ``y = A x + noise`` as a ``pgmjax.Measurement`` with a Kronecker query."""
        return Measurement(self.clique, y, stddev=stddev, query=self.queries())

    def dense(self, attributes: Sequence[str] | None = None, sizes: Mapping[str, int] | None = None) -> np.ndarray:
        """Explicit matrix (over ``attributes``, with a ``Total`` row for the others); small only."""
        attrs = tuple(attributes) if attributes is not None else self.clique
        all_sizes = dict(zip(self.clique, self.sizes))
        if sizes is not None:
            all_sizes.update(sizes)
        return self.weight * _expand_dense(self.clique, self.factors, attrs, all_sizes)

    def __repr__(self) -> str:
        return f"KronStrategy({self.clique}, shapes={[f.shape for f in self.factors]}, weight={self.weight:g})"


class UnionStrategy:
    """A stack of Kronecker strategies ``[alpha_1 A^(1); ...; alpha_k A^(k)]`` (the OPT_+ template).

    Each term is measured as its own ``pgmjax.Measurement``; every row gets the same noise scale, calibrated to
    the sensitivity of the whole stack.

    Args:
        terms: :class:`KronStrategy` objects (their ``weight`` is ``alpha_j``).
    """

    __slots__ = ("terms",)

    def __init__(self, terms):
        terms = tuple(terms)
        if not terms:
            raise ValueError("UnionStrategy: needs at least one KronStrategy")
        sizes: dict[str, int] = {}
        for t in terms:
            if not isinstance(t, KronStrategy):
                raise TypeError(f"UnionStrategy: terms must be KronStrategy, got {type(t).__name__}")
            _merge_sizes(sizes, t.clique, t.sizes, "UnionStrategy")
        self.terms = terms

    @property
    def weights(self) -> np.ndarray:
        return np.array([t.weight for t in self.terms])

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.terms)

    def sensitivity(self, noise: str = "laplace") -> float:
        """``sum_j ||A^(j)||_1`` (Laplace) or ``sqrt(sum_j ||A^(j)||_{1->2}^2)`` (Gaussian).

        An upper bound on the stack's sensitivity (a record hits one column of every term), exact when every
        factor's columns have equal norms - true for every strategy built by this module.
        """
        _check_noise(noise)
        s = np.array([t.sensitivity(noise) for t in self.terms])
        return float(s.sum()) if noise == "laplace" else float(np.sqrt((s * s).sum()))

    def dense(self, attributes: Sequence[str], sizes: Mapping[str, int]) -> np.ndarray:
        """Explicit matrix over the full table on ``attributes``; small only."""
        return np.vstack([t.dense(attributes, sizes) for t in self.terms])

    def __repr__(self) -> str:
        return f"UnionStrategy({len(self.terms)} terms, weights={np.round(self.weights, 4).tolist()})"


class MarginalsStrategy:
    """Weighted marginals ``[theta_a M_a]`` over all ``2^d`` attribute subsets ``a`` (the OPT_M template).

    Subset ``a`` is a bitmask: bit ``i`` set means attribute ``attributes[i]`` is kept (``Identity``), unset
    means summed out (``Total``). A record adds ``theta_a`` to one cell of every marginal, so the L1
    sensitivity is ``sum(theta)`` and the L2 one ``sqrt(sum(theta^2))``.

    Args:
        attributes: the ``d`` attributes.
        sizes: their numbers of values.
        theta: ``2^d`` non-negative weights.
    """

    __slots__ = ("attributes", "sizes", "theta")

    def __init__(self, attributes, sizes: Sequence[int], theta):
        self.attributes = _as_clique(attributes)
        self.sizes = tuple(_check_n(n) for n in sizes)
        if len(self.sizes) != len(self.attributes):
            raise ValueError(f"MarginalsStrategy: {len(self.attributes)} attributes but {len(self.sizes)} sizes")
        theta = np.asarray(theta, dtype=np.float64).reshape(-1)
        if theta.size != 2 ** len(self.attributes):
            raise ValueError(f"MarginalsStrategy: theta needs 2^d = {2 ** len(self.attributes)} entries, got {theta.size}")
        if not np.all(np.isfinite(theta)) or np.any(theta < 0):
            raise ValueError("MarginalsStrategy: theta must be finite and non-negative")
        self.theta = theta

    def subset(self, key: int) -> tuple[str, ...]:
        """The attributes of subset ``key``."""
        return tuple(a for i, a in enumerate(self.attributes) if key >> i & 1)

    def marginals(self) -> list[tuple[tuple[str, ...], float]]:
        """``[(clique, theta)]`` for every marginal with positive weight."""
        return [(self.subset(k), float(t)) for k, t in enumerate(self.theta) if t > 0]

    def sensitivity(self, noise: str = "laplace") -> float:
        _check_noise(noise)
        return float(self.theta.sum()) if noise == "laplace" else float(np.sqrt((self.theta**2).sum()))

    def gram(self) -> "MarginalsGram":
        """``A^T A`` in the marginals algebra (weights ``theta^2``)."""
        return MarginalsGram(self.sizes, self.theta**2)

    @property
    def rows(self) -> int:
        return sum(int(np.prod([self.sizes[i] for i in range(len(self.sizes)) if k >> i & 1])) for k, t in enumerate(self.theta) if t > 0)

    def dense(self) -> np.ndarray:
        """Explicit matrix over the full table on ``attributes``; small only."""
        sizes = dict(zip(self.attributes, self.sizes))
        blocks = []
        for clique, t in self.marginals():
            blocks.append(t * _expand_dense(clique, [np.eye(sizes[a]) for a in clique], self.attributes, sizes))
        return np.vstack(blocks)

    def __repr__(self) -> str:
        return f"MarginalsStrategy({self.attributes}, {len(self.marginals())} marginals with positive weight)"


# ---------------------------------------------------------------------------------------------------------
# The marginals Gram algebra
# ---------------------------------------------------------------------------------------------------------


def _mult_dims(sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``mult[a] = prod_{i not in a} n_i`` and ``dims[s] = prod_{i in s} (n_i - 1)`` over the bitmasks."""
    mult = functools.reduce(np.kron, [np.array([n, 1.0]) for n in reversed(sizes)], np.ones(1))
    dims = functools.reduce(np.kron, [np.array([1.0, n - 1.0]) for n in reversed(sizes)], np.ones(1))
    return mult, dims


def _superset_sum(v, d: int, xp=jnp):
    """``out[s] = sum_{a superset of s} v[a]`` over ``2^d`` bitmasks (fast zeta transform, ``O(d 2^d)``)."""
    if d == 0:
        return v
    t = v.reshape((2,) * d)
    for axis in range(d):
        lo = xp.take(t, 0, axis=axis)
        hi = xp.take(t, 1, axis=axis)
        t = xp.stack([lo + hi, hi], axis=axis)
    return t.reshape(-1)


def _superset_mobius(v, d: int):
    """Inverse of :func:`_superset_sum` (NumPy)."""
    if d == 0:
        return v
    t = v.reshape((2,) * d)
    for axis in range(d):
        lo = np.take(t, 0, axis=axis)
        hi = np.take(t, 1, axis=axis)
        t = np.stack([lo - hi, hi], axis=axis)
    return t.reshape(-1)


class MarginalsGram:
    """A matrix ``sum_a u_a (x)_i (I if bit i of a else 1 1^T)`` of the marginals Gram algebra.

    The algebra is commutative and simultaneously diagonalisable: per attribute, ``I`` and ``1 1^T`` share the
    eigenspaces ``span(1)`` and its complement, so on the eigenspace indexed by the subset ``s`` (the
    attributes in the complement part, dimension ``prod_{i in s}(n_i - 1)``) the eigenvalue is
    ``lambda(s) = sum_{a superset of s} u_a prod_{i not in a} n_i``. Products, pseudo-inverses and traces are
    pointwise on ``lambda`` (``O(d 2^d)`` through a superset-sum transform). This is the same algebra as the
    reference's upper-triangular ``2^d x 2^d`` system (VLDB 2018, marginals template); the eigenvalue form
    avoids the ``O(4^d)`` matrix.

    Args:
        sizes: the ``d`` attribute sizes.
        weights: ``2^d`` weights ``u`` (bit ``i`` = attribute ``i`` kept).
    """

    __slots__ = ("sizes", "weights")

    def __init__(self, sizes: Sequence[int], weights):
        self.sizes = tuple(_check_n(n) for n in sizes)
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size != 2 ** len(self.sizes):
            raise ValueError(f"MarginalsGram: needs 2^d = {2 ** len(self.sizes)} weights, got {w.size}")
        self.weights = w

    @classmethod
    def from_eigenvalues(cls, sizes, lam) -> "MarginalsGram":
        mult, _ = _mult_dims(sizes)
        return cls(sizes, _superset_mobius(np.asarray(lam, dtype=np.float64), len(sizes)) / mult)

    @classmethod
    def from_workload(cls, workload, attributes: Sequence[str] | None = None, sizes: Mapping[str, int] | None = None) -> "MarginalsGram":
        """Project a workload's Gram into the algebra (exact for the error of any marginals strategy).

        Each Kronecker factor ``G`` is replaced by ``a I + b 1 1^T`` with ``b`` its mean off-diagonal entry and
        ``a`` its mean diagonal entry minus ``b`` (both traces ``trace(G P)`` with ``P`` in ``{I, 1 1^T}`` are
        kept, hence the exactness).

        Args:
            workload: :class:`KronWorkload` or :class:`UnionWorkload`.
            attributes: the algebra's attributes (default: the workload's); may include attributes the workload
                sums out, whose sizes then come from ``sizes``.
            sizes: ``attribute -> size`` for attributes the workload does not mention.
        """
        workload = _as_union(workload)
        attrs = tuple(attributes) if attributes is not None else workload.attributes
        extra = [a for a in workload.attributes if a not in attrs]
        if extra:
            raise ValueError(f"MarginalsGram.from_workload: workload attributes {extra} are not among {attrs}")
        known = dict(sizes or {})
        _merge_sizes(known, tuple(workload.sizes), tuple(workload.sizes.values()), "MarginalsGram.from_workload")
        missing = [a for a in attrs if a not in known]
        if missing:
            raise ValueError(f"MarginalsGram.from_workload: no size for attributes {missing}; pass sizes=")
        sizes = [known[a] for a in attrs]
        w = np.zeros(2 ** len(attrs))
        for t in workload.terms:
            grams = dict(zip(t.clique, t.grams()))
            vecs = []
            for a, n in zip(attrs, sizes):
                if a not in grams:
                    vecs.append(np.array([1.0, 0.0]))  # 1 1^T
                    continue
                G = grams[a]
                tr, tot = float(np.trace(G)), float(G.sum())
                b = (tot - tr) / (n * (n - 1)) if n > 1 else 0.0
                vecs.append(np.array([b, tr / n - b]))
            w += t.weight**2 * functools.reduce(np.kron, list(reversed(vecs)), np.ones(1))
        return cls(sizes, w)

    def eigenvalues(self) -> np.ndarray:
        mult, _ = _mult_dims(self.sizes)
        return np.asarray(_superset_sum(self.weights * mult, len(self.sizes), xp=np))

    def dims(self) -> np.ndarray:
        return _mult_dims(self.sizes)[1]

    def __matmul__(self, other: "MarginalsGram") -> "MarginalsGram":
        if not isinstance(other, MarginalsGram) or other.sizes != self.sizes:
            return NotImplemented
        return MarginalsGram.from_eigenvalues(self.sizes, self.eigenvalues() * other.eigenvalues())

    def pinv(self, rtol: float = 1e-12) -> "MarginalsGram":
        """The Moore-Penrose pseudo-inverse (reciprocal on the non-zero eigenspaces)."""
        lam = self.eigenvalues()
        keep = (np.abs(lam) > rtol * max(np.abs(lam).max(), 1e-300)) & (self.dims() > 0)
        inv = np.where(keep, 1.0 / np.where(keep, lam, 1.0), 0.0)
        return MarginalsGram.from_eigenvalues(self.sizes, inv)

    def trace(self) -> float:
        return float(np.prod(self.sizes) * self.weights.sum())

    def dense(self) -> np.ndarray:
        """The explicit matrix (attribute 0 slowest); small only."""
        n = int(np.prod(self.sizes))
        out = np.zeros((n, n))
        for key, u in enumerate(self.weights):
            if u != 0:
                mats = [np.eye(m) if key >> i & 1 else np.ones((m, m)) for i, m in enumerate(self.sizes)]
                out += u * functools.reduce(np.kron, mats, np.ones((1, 1)))
        return out

    def __repr__(self) -> str:
        return f"MarginalsGram(sizes={self.sizes})"


# ---------------------------------------------------------------------------------------------------------
# Expected error (NumPy)
# ---------------------------------------------------------------------------------------------------------


class _FactorInfo:
    """One SVD of a strategy factor ``A = U S V^T``, for ``trace[(A^T A)^+ G]`` and the support test.

    ``trace[(A^T A)^+ G] = sum_k (v_k^T G v_k) / s_k^2`` over the kept singular vectors and the residual
    ``||W (I - A^+ A)||_F^2 = sum_k v_k^T G v_k`` over the null-space ones: sums of non-negative terms (no
    cancellation between huge entries of a pseudo-inverse), with one rank threshold (NumPy's
    ``matrix_rank`` default), so a nearly singular strategy is charged its large ``1 / s^2`` instead of
    being silently truncated.
    """

    __slots__ = ("v", "s", "v_null")

    def __init__(self, A: np.ndarray):
        _, s, vt = np.linalg.svd(A, full_matrices=True)
        r = int(np.sum(s > s.max(initial=0.0) * max(A.shape) * np.finfo(np.float64).eps))
        self.v, self.s, self.v_null = vt[:r].T, s[:r], vt[r:].T

    def trace(self, G: np.ndarray) -> float:
        """``trace[(A^T A)^+ G]``, or ``inf`` when ``A`` does not support a workload with Gram ``G``."""
        tg = float(np.trace(G))
        if tg <= 0:
            return 0.0
        residual = float(np.sum((G @ self.v_null) * self.v_null)) if self.v_null.size else 0.0
        if residual > _SUPPORT_TOL * tg:
            return math.inf
        quad = np.maximum(np.sum((G @ self.v) * self.v, axis=0), 0.0)
        return float(np.sum(quad / self.s**2))


def factor_error(gram, A, noise: str = "laplace") -> float:
    """One-attribute error factor ``||A||^2 * trace[(A^T A)^+ G]`` (``inf`` if ``A`` does not support ``G``).

    Args:
        gram: the workload Gram ``W^T W`` (``n x n``).
        A: the strategy matrix (``m x n``).
        noise: ``"laplace"`` (``||A||_1``) or ``"gaussian"`` (``||A||_{1->2}``).

    Returns:
        The data-independent error factor (multiply by ``2/eps^2`` or ``sigma^2`` for the expected total
        squared error).
    """
    _check_noise(noise)
    A = np.asarray(A, dtype=np.float64)
    G = np.asarray(gram, dtype=np.float64)
    if G.shape != (A.shape[1], A.shape[1]):
        raise ValueError(f"factor_error: Gram shape {G.shape} does not match the strategy's {A.shape[1]} columns")
    return _col_norm(A, noise) ** 2 * _FactorInfo(A).trace(G)


def _scale(noise: str, eps, sigma) -> float:
    if noise == "laplace":
        if sigma is not None:
            raise ValueError("sigma is for noise='gaussian'; give eps for Laplace noise")
        return 1.0 if eps is None else 2.0 / float(eps) ** 2
    if eps is not None:
        raise ValueError("eps is for noise='laplace'; give sigma (noise std per unit L2 sensitivity) for Gaussian noise")
    return 1.0 if sigma is None else float(sigma) ** 2


def _kron_trace(term: KronWorkload, strat: KronStrategy, infos: dict, sizes: dict) -> float:
    """``trace[(A^T A)^+ W^T W]`` of one workload term on one Kronecker strategy (both expanded with Totals)."""
    if term.weight == 0:
        return 0.0
    grams = dict(zip(term.clique, term.grams()))
    factors = dict(zip(strat.clique, strat.factors))
    out = term.weight**2 / strat.weight**2
    for a in dict.fromkeys(term.clique + strat.clique):
        n = sizes[a]
        G = grams[a] if a in grams else np.ones((n, n))
        key = (id(strat), a)
        if key not in infos:
            infos[key] = _FactorInfo(factors[a] if a in factors else np.ones((1, n)))
        e = infos[key].trace(G)
        if e == 0.0:
            return 0.0
        out *= e
    return out


def _sizes_of(workload: UnionWorkload, strategy) -> dict:
    sizes = dict(workload.sizes)
    if isinstance(strategy, KronStrategy):
        _merge_sizes(sizes, strategy.clique, strategy.sizes, "workload and strategy")
    elif isinstance(strategy, UnionStrategy):
        for t in strategy.terms:
            _merge_sizes(sizes, t.clique, t.sizes, "workload and strategy")
    return sizes


def expected_error(
    workload,
    strategy,
    *,
    noise: str = "laplace",
    eps: float | None = None,
    sigma: float | None = None,
    per_query: bool = False,
) -> float:
    """Expected total squared error of the matrix mechanism (VLDB 2018).

    ``||A||^2 * trace[(A^T A)^+ W^T W]``, times ``2/eps^2`` (Laplace, when ``eps`` is given) or ``sigma^2``
    (Gaussian, ``sigma`` the noise standard deviation per unit of L2 sensitivity). Kronecker structure is
    exploited: a Kronecker strategy on a Kronecker workload has error ``prod_i`` of the factor errors, a union
    workload sums its terms (weighted by ``w_j^2``), and a marginals strategy is evaluated inside the
    marginals algebra. ``inf`` when the strategy does not support the workload.

    Args:
        workload: :class:`KronWorkload` or :class:`UnionWorkload`.
        strategy: :class:`KronStrategy`, :class:`UnionStrategy` or :class:`MarginalsStrategy`. For a
            :class:`UnionStrategy` the value is the OPT_+ **upper bound**: every workload term answered from
            its best single strategy term (the joint least squares can only do better);
            :func:`dense_expected_error` gives the exact value on small domains.
        noise: ``"laplace"`` (L1 sensitivity) or ``"gaussian"`` (L2).
        eps, sigma: optional noise calibration (see above); without them, the data-independent factor.
        per_query: divide by the number of workload queries.

    Returns:
        The expected (total or per-query) squared error.

    Example:
        >>> W = KronWorkload(("x",), (prefix(8),))
        >>> expected_error(W, KronStrategy(("x",), (identity(8),)), eps=1.0)   # (2/eps^2) n(n+1)/2
        72.0
    """
    _check_noise(noise)
    W = _as_union(workload)
    if isinstance(strategy, MarginalsStrategy):
        gw = MarginalsGram.from_workload(W, strategy.attributes, dict(zip(strategy.attributes, strategy.sizes)))
        if gw.sizes != strategy.sizes:
            raise ValueError(f"workload sizes {gw.sizes} differ from the strategy's {strategy.sizes}")
        tr = _marginals_trace_np(strategy.theta**2, gw)
        err = strategy.sensitivity(noise) ** 2 * tr
    elif isinstance(strategy, KronStrategy):
        sizes = _sizes_of(W, strategy)
        infos: dict = {}
        err = strategy.sensitivity(noise) ** 2 * sum(_kron_trace(t, strategy, infos, sizes) for t in W.terms)
    elif isinstance(strategy, UnionStrategy):
        sizes = _sizes_of(W, strategy)
        infos = {}
        tr = sum(min(_kron_trace(t, s, infos, sizes) for s in strategy.terms) for t in W.terms)
        err = strategy.sensitivity(noise) ** 2 * tr
    else:
        raise TypeError(f"expected a KronStrategy, UnionStrategy or MarginalsStrategy, got {type(strategy).__name__}")
    err *= _scale(noise, eps, sigma)
    return err / W.rows if per_query else err


def _marginals_trace_np(u: np.ndarray, gw: MarginalsGram) -> float:
    """``trace[M(u)^+ G_w]`` in the algebra, ``inf`` if ``M(u)`` does not support ``G_w``."""
    mult, dims = _mult_dims(gw.sizes)
    lam_u = _superset_sum(u * mult, len(gw.sizes), xp=np)
    lam_w = gw.eigenvalues()
    live = (dims > 0) & (lam_w > 1e-12 * max(lam_w.max(), 1e-300))
    dead = lam_u <= 1e-12 * max(lam_u.max(), 1e-300)
    if np.any(live & dead):
        return math.inf
    return float(np.sum(np.where(live, dims * lam_w / np.where(live, lam_u, 1.0), 0.0)))


def dense_expected_error(W, A, *, noise: str = "laplace", eps: float | None = None, sigma: float | None = None) -> float:
    """Brute-force ``||A||^2 * trace[(A^T A)^+ W^T W]`` from explicit matrices (the reference for small sizes).

    Args:
        W: workload matrix ``(r, N)``; A: strategy matrix ``(m, N)``.

    Returns:
        The expected total squared error (``inf`` when ``W A^+ A != W``).
    """
    _check_noise(noise)
    W = np.asarray(W, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    Ap = np.linalg.pinv(A)
    if np.linalg.norm(W @ Ap @ A - W) > 1e-6 * max(np.linalg.norm(W), 1e-300):
        return math.inf
    tr = float(np.sum((W @ Ap) ** 2))  # trace[W (A^T A)^+ W^T] = ||W A^+||_F^2
    return _col_norm(A, noise) ** 2 * tr * _scale(noise, eps, sigma)


# ---------------------------------------------------------------------------------------------------------
# JAX objectives
# ---------------------------------------------------------------------------------------------------------


def _column_scale(theta, l1):
    """Column norms of ``[I ; Theta]``: L1 (``Theta >= 0``) when ``l1`` (a bool, possibly traced), else L2."""
    return jnp.where(l1, 1.0 + jnp.sum(theta, axis=0), jnp.sqrt(1.0 + jnp.sum(theta * theta, axis=0)))


def pidentity_matrix(theta, noise: str = "laplace") -> np.ndarray:
    """The p-Identity strategy ``[I ; Theta] D_Theta`` with unit column norms (VLDB 2018, OPT_0 template).

    Args:
        theta: ``(p, n)`` non-negative parameters.
        noise: ``"laplace"`` scales columns to L1 norm 1, ``"gaussian"`` to L2 norm 1.

    Returns:
        The ``(n + p, n)`` strategy matrix (NumPy).
    """
    _check_noise(noise)
    theta = np.asarray(theta, dtype=np.float64)
    s = 1.0 + theta.sum(axis=0) if noise == "laplace" else np.sqrt(1.0 + (theta * theta).sum(axis=0))
    return np.vstack([np.eye(theta.shape[1]), theta]) / s[None, :]


def pidentity_error(theta, gram, noise: str = "laplace"):
    """``trace[(A^T A)^{-1} G]`` for the unit-norm p-Identity strategy ``A(Theta)`` (VLDB 2018, Woodbury form).

    With ``s`` the column norms of ``[I ; Theta]`` and ``C = diag(s) G diag(s)``,
    ``(A^T A)^{-1} = diag(s) (I + Theta^T Theta)^{-1} diag(s)`` and by Woodbury
    ``trace = trace(C) - trace[(I_p + Theta Theta^T)^{-1} Theta C Theta^T]``: ``O(p n^2)``, differentiable
    (JAX). The sensitivity is 1, so this is the whole error factor.

    Args:
        theta: ``(p, n)`` parameters, ``>= 0`` for Laplace (signs do not matter for Gaussian).
        gram: ``(n, n)`` workload Gram.
        noise: ``"laplace"`` or ``"gaussian"`` (column normalisation).

    Returns:
        A JAX scalar.
    """
    theta = jnp.asarray(theta)
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        theta = theta.astype(_float_dtype())
    return _pidentity_error(theta, gram, _check_noise(noise) == "laplace")


def _pidentity_error(theta, gram, l1):
    G = jnp.asarray(gram, dtype=theta.dtype)
    p = theta.shape[0]
    s = _column_scale(theta, l1)
    C = G * s[:, None] * s[None, :]
    L = jnp.linalg.cholesky(jnp.eye(p, dtype=theta.dtype) + theta @ theta.T)
    Y = jax.scipy.linalg.solve_triangular(L, theta, lower=True)
    Z = jax.scipy.linalg.solve_triangular(L, theta @ C, lower=True)
    return jnp.trace(C) - jnp.sum(Y * Z)


def marginals_error(theta, workload_weights, sizes: Sequence[int], noise: str = "laplace"):
    """OPT_M objective ``||A(theta)||^2 * trace[(A^T A)^+ W^T W]`` in the marginals algebra (VLDB 2018).

    ``A^T A = M(theta^2)`` has eigenvalues ``lambda(s) = sum_{a superset of s} theta_a^2 prod_{i not in a} n_i``
    and the trace is ``sum_s dim(s) lambda_w(s) / lambda(s)`` (``lambda_w`` of the projected workload) - equal
    to the closed form ``n * sum(phi)`` with ``X(theta^2) phi = u`` when ``M(theta^2)`` is invertible. ``||A||^2``
    is ``(sum theta)^2`` (Laplace) or ``sum theta^2`` (Gaussian). JAX, differentiable.

    Args:
        theta: ``2^d`` non-negative marginal weights (bit ``i`` = attribute ``i`` kept).
        workload_weights: the projected workload Gram's ``2^d`` weights (:meth:`MarginalsGram.from_workload`).
        sizes: the ``d`` attribute sizes.
        noise: ``"laplace"`` or ``"gaussian"``.

    Returns:
        A JAX scalar.
    """
    theta = jnp.asarray(theta)
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        theta = theta.astype(_float_dtype())
    sizes = tuple(int(n) for n in sizes)
    d = len(sizes)
    mult, dims = _mult_dims(sizes)
    lam_w = np.asarray(_superset_sum(np.asarray(workload_weights, dtype=np.float64) * mult, d, xp=np))
    live = (dims > 0) & (lam_w > 1e-12 * max(lam_w.max(), 1e-300))
    coef = np.where(live, dims * lam_w, 0.0)
    l1 = _check_noise(noise) == "laplace"
    return _marginals_objective(theta, jnp.asarray(coef, dtype=theta.dtype), jnp.asarray(live), jnp.asarray(mult, dtype=theta.dtype), d, l1)


def _marginals_objective(theta, coef, live, mult, d, l1):
    lam = _superset_sum(theta * theta * mult, d)
    tr = jnp.sum(jnp.where(live, coef / jnp.where(live, lam, 1.0), 0.0))
    sens2 = jnp.where(l1, jnp.sum(theta) ** 2, jnp.sum(theta * theta))
    return sens2 * tr


# ---------------------------------------------------------------------------------------------------------
# L-BFGS (optax) with restarts
# ---------------------------------------------------------------------------------------------------------


def _lbfgs(fun, x0, maxiter: int, tol):
    """Minimise ``fun`` from ``x0`` with optax L-BFGS (zoom line search) until the relative decrease of the
    objective falls below ``tol`` or ``maxiter`` iterations. Returns ``(x, f(x), iterations)``."""
    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(fun)

    def cond(c):
        _, _, k, f_prev, f = c
        moving = jnp.abs(f_prev - f) > tol * jnp.abs(f)
        return (k < maxiter) & ((k == 0) | moving) & jnp.isfinite(f)

    def body(c):
        x, state, k, _, _ = c
        value, grad = value_and_grad(x, state=state)
        updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=fun)
        x = optax.apply_updates(x, updates)
        return x, state, k + 1, value, optax.tree_utils.tree_get(state, "value")

    f0 = fun(x0)
    x, _, k, _, _ = jax.lax.while_loop(cond, body, (x0, opt.init(x0), jnp.asarray(0), f0, f0))
    return x, fun(x), k


@jit(static_argnames=("maxiter",))
def _fit_pidentity(gram, phi0, mask, tied, l1, tol, maxiter):
    """Vectorised L-BFGS restarts for the p-Identity template on a padded problem.

    ``gram`` is zero-padded and ``mask`` zeroes the padding rows/columns of ``Theta``, so padded columns keep
    scale 1 and contribute nothing: one compilation serves every ``(p, n)`` of a size bucket. With ``tied``,
    ``Theta = phi[0, 0]^2 * mask`` (the one-parameter IdTotal template). ``tied`` and ``l1`` are traced
    flags, so the templates and both noise kinds share the compiled program.
    """

    def to_theta(phi):
        th = phi * phi  # Theta >= 0 through the square
        return jnp.where(tied, th[0, 0] * mask, th * mask)

    def loss(phi):
        return _pidentity_error(to_theta(phi), gram, l1)

    def one(x0):
        x, f, k = _lbfgs(loss, x0, maxiter, tol)
        return to_theta(x), f, k

    return jax.vmap(one)(phi0)


def _bucket(k: int, least: int = 1) -> int:
    return max(least, 1 << (int(k) - 1).bit_length())


def _restarts(restarts: int) -> int:
    """Restarts are rounded up to a power of two (at least 4): extra starts are cheap next to a compilation."""
    if restarts < 1:
        raise ValueError(f"restarts must be >= 1, got {restarts}")
    return _bucket(restarts, 4)


def _run_pidentity(G: np.ndarray, p: int, phi0: np.ndarray, tied: bool, noise: str, maxiter: int, tol: float, pad_p: int | None = None):
    """Pad to power-of-two sizes, run :func:`_fit_pidentity`, return the best ``(p, n)`` Theta."""
    n = G.shape[0]
    nb, pb = _bucket(n, 32), _bucket(max(p, pad_p or 1), 2)
    dtype = _float_dtype()
    Gp = np.zeros((nb, nb))
    Gp[:n, :n] = G
    mask = np.zeros((pb, nb))
    mask[:p, :n] = 1.0
    phi = np.full((phi0.shape[0], pb, nb), 0.5)
    phi[:, :p, :n] = phi0
    thetas, values, _ = _fit_pidentity(
        jnp.asarray(Gp, dtype=dtype),
        jnp.asarray(phi, dtype=dtype),
        jnp.asarray(mask, dtype=dtype),
        jnp.asarray(tied),
        jnp.asarray(noise == "laplace"),
        tol,
        maxiter=maxiter,
    )
    # every restart's strategy is scored by the NumPy error (consistent with factor_error: a run that drifted
    # to a numerically singular but equal-valued point loses here)
    thetas = np.asarray(thetas, dtype=np.float64)[:, :p, :n]
    scores = [factor_error(G, pidentity_matrix(t, noise), noise) if np.isfinite(v) else math.inf for t, v in zip(thetas, np.asarray(values))]
    return thetas[int(np.argmin(scores))]


@jit(static_argnames=("d", "maxiter"))
def _fit_marginals(coef, live, mult, phi0, l1, tol, d, maxiter):
    def loss(phi):
        return _marginals_objective(phi * phi, coef, live, mult, d, l1)

    def one(x0):
        x, f, k = _lbfgs(loss, x0, maxiter, tol)
        return x * x, f, k

    return jax.vmap(one)(phi0)


def _float_dtype():
    return jnp.asarray(0.0).dtype


def _best(thetas, values):
    values = np.where(np.isfinite(values), values, np.inf)
    i = int(np.argmin(values))
    return np.asarray(thetas[i], dtype=np.float64), float(values[i])


def default_p(n: int) -> int:
    """The reference's default number of p-Identity rows, ``max(1, n // 16)``."""
    return max(1, int(n) // 16)


def opt_pidentity(
    gram,
    key,
    p: int | None = None,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    init=None,
    maxiter: int = 250,
    tol: float = 1e-9,
) -> tuple[np.ndarray, float, np.ndarray]:
    """Optimise the p-Identity template for one attribute (OPT_0's main template, VLDB 2018).

    Minimises :func:`pidentity_error` over ``Theta = phi^2 >= 0`` with optax L-BFGS from ``restarts``
    ``U(0, 1)`` starting points (drawn from ``key``; vectorised with ``vmap``), keeping the best.

    Args:
        gram: workload Gram ``(n, n)``.
        key: a ``jax.random`` key.
        p: extra rows (default ``max(1, n // 16)``).
        restarts: number of random starting points (rounded up to a power of two, at least 4, so that one
            compiled program serves many calls).
        noise: ``"laplace"`` (unit L1 columns) or ``"gaussian"`` (unit L2 columns).
        init: optional ``(p, n)`` starting ``Theta`` used in place of the first random start (warm start).
        maxiter, tol: L-BFGS iteration cap and relative-decrease stopping tolerance.

    Returns:
        ``(A, loss, theta)``: the strategy matrix ``(n + p, n)``, its error factor
        ``||A||^2 trace[(A^T A)^{-1} G]`` (:func:`factor_error`) and the parameters.

    Example:
        >>> A, loss, _ = opt_pidentity(prefix_gram(32), jax.random.key(0))
        >>> bool(loss < np.trace(prefix_gram(32)))   # beats the identity strategy
        True
    """
    _check_noise(noise)
    G = np.asarray(gram, dtype=np.float64)
    n = G.shape[0]
    if G.shape != (n, n):
        raise ValueError(f"opt_pidentity: gram must be square, got shape {G.shape}")
    p = default_p(n) if p is None else int(p)
    if p < 1 or restarts < 1:
        raise ValueError(f"opt_pidentity: p and restarts must be >= 1, got p={p}, restarts={restarts}")
    scale = float(np.trace(G))
    if scale <= 0:
        theta = np.zeros((p, n))
        return pidentity_matrix(theta, noise), 0.0, theta
    phi0 = np.sqrt(np.asarray(jax.random.uniform(key, (_restarts(restarts), p, n)), dtype=np.float64))
    if init is not None:
        init = np.asarray(init, dtype=np.float64)
        if init.shape != (p, n) or np.any(init < 0):
            raise ValueError(f"opt_pidentity: init must be a non-negative ({p}, {n}) array, got shape {init.shape}")
        phi0[0] = np.sqrt(init)
    theta = _run_pidentity(G / scale, p, phi0, False, noise, maxiter, tol)
    A = pidentity_matrix(theta, noise)
    return A, factor_error(G, A, noise), theta


def opt_0(
    gram,
    key,
    p: int | None = None,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    maxiter: int = 250,
    tol: float = 1e-9,
) -> tuple[np.ndarray, float]:
    """OPT_0 for one attribute: the best of Identity, Total, p-Identity and IdTotal (identity plus one weighted
    all-ones row, a one-parameter p-Identity) - VLDB 2018 and the reference ``OPT0``.

    Args:
        gram: workload Gram ``(n, n)``; key: a ``jax.random`` key; p, restarts, noise, maxiter, tol: as in
            :func:`opt_pidentity`.

    Returns:
        ``(A, loss)``: the unit-sensitivity strategy matrix and its error factor.

    Example:
        >>> A, loss = opt_0(np.ones((5, 5)), jax.random.key(0))   # a Total workload: Total is optimal
        >>> A.shape, round(loss, 6)
        ((1, 5), 1.0)
    """
    _check_noise(noise)
    G = np.asarray(gram, dtype=np.float64)
    n = G.shape[0]
    cands = [np.eye(n)]
    scale = float(np.trace(G))
    if n > 1 and scale > 0 and np.allclose(G, G[0, 0] * np.eye(n), rtol=1e-12, atol=1e-12 * scale):
        return cands[0], factor_error(G, cands[0], noise)  # G ∝ I: Identity is optimal (AM-HM bound)
    if n > 1 and scale > 0 and np.allclose(G, G[0, 0] * np.ones((n, n)), rtol=1e-12, atol=1e-12 * scale):
        A = np.ones((1, n))  # G ∝ 1 1^T: Total is optimal
        return A, factor_error(G, A, noise)
    if n > 1:
        cands.append(np.ones((1, n)))
        k1, k2 = jax.random.split(key)
        p = default_p(n) if p is None else int(p)
        cands.append(opt_pidentity(G, k1, p, restarts=restarts, noise=noise, maxiter=maxiter, tol=tol)[0])
        if scale > 0:  # IdTotal: same compiled program as p-Identity (tied parameters, padded to p rows)
            phi0 = np.sqrt(np.asarray(jax.random.uniform(k2, (_restarts(restarts), 1, n)), dtype=np.float64))
            theta = _run_pidentity(G / scale, 1, phi0, True, noise, maxiter, tol, pad_p=p)
            cands.append(pidentity_matrix(theta, noise))
    losses = np.array([factor_error(G, A, noise) for A in cands])
    # the simplest candidate (Identity, Total, p-Identity, IdTotal order) among those within rounding of the best
    i = int(np.flatnonzero(losses <= losses.min() * (1 + 1e-9))[0])
    return cands[i], float(losses[i])


def _opt0_memo(memo: dict | None, G: np.ndarray, key, p: int, opts: dict) -> np.ndarray:
    """:func:`opt_0`'s strategy, reused for an identical Gram when ``memo`` is a dict."""
    if memo is None:
        return opt_0(G, key, p, **opts)[0]
    k = (G.shape, G.tobytes(), p, tuple(sorted(opts.items())))
    if k not in memo:
        memo[k] = opt_0(G, key, p, **opts)[0]
    return memo[k]


def _grams_by_attribute(W: UnionWorkload, attributes) -> list[list[np.ndarray]]:
    """``G[j][i]``: term ``j``'s Gram on attribute ``i`` (``1 1^T`` where the term sums it out)."""
    out = []
    for t in W.terms:
        grams = dict(zip(t.clique, t.grams()))
        out.append([grams[a] if a in grams else np.ones((W.sizes[a], W.sizes[a])) for a in attributes])
    return out


def opt_kron(
    workload,
    key,
    ps: Sequence[int] | Mapping[str, int] | None = None,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    sweeps: int = 10,
    maxiter: int = 250,
    tol: float = 1e-9,
    _memo: dict | None = None,
) -> tuple[KronStrategy, float]:
    """OPT_kron: one Kronecker strategy ``A_1 (x) ... (x) A_d`` over the workload's attributes (VLDB 2018).

    For a single :class:`KronWorkload` the error factorises (``||A||_1 = prod ||A_i||_1``,
    ``trace = prod trace_i``), so each attribute is optimised independently by :func:`opt_0`. For a union,
    block-coordinate descent: ``C_ij = trace(G_i^(j))`` initially; for ``sweeps`` rounds and each
    attribute ``i``, re-optimise ``A_i`` by :func:`opt_0` on the surrogate ``sum_j c_j G_i^(j)`` with
    ``c_j = w_j^2 prod_{i' != i} C_i'j`` (normalised by its mean) and update
    ``C_ij = trace[(A_i^T A_i)^+ G_i^(j)]``. The best strategy seen (by the true union error) is returned.

    Args:
        workload: :class:`KronWorkload` or :class:`UnionWorkload`.
        key: a ``jax.random`` key.
        ps: p-Identity rows per attribute (default ``max(1, n_i // 16)``).
        restarts, noise, maxiter, tol: passed to :func:`opt_0`.
        sweeps: block-coordinate sweeps for a union.

    Returns:
        ``(strategy, loss)`` with ``loss = expected_error(workload, strategy, noise=noise)``.

    Example:
        >>> W = KronWorkload(("a", "b"), (prefix(16), allrange(8)))
        >>> S, loss = opt_kron(W, jax.random.key(0))
    """
    _check_noise(noise)
    W = _as_union(workload)
    attrs = W.attributes
    if ps is None:
        ps = [default_p(W.sizes[a]) for a in attrs]
    elif isinstance(ps, Mapping):
        ps = [ps.get(a, default_p(W.sizes[a])) for a in attrs]
    ps = list(ps)
    if len(ps) != len(attrs):
        raise ValueError(f"opt_kron: {len(attrs)} attributes but {len(ps)} values of p")
    keys = iter(jax.random.split(key, len(attrs) * (1 + (sweeps if len(W.terms) > 1 else 0))))
    G = _grams_by_attribute(W, attrs)
    w2 = np.array([t.weight**2 for t in W.terms])
    if len(W.terms) == 1:
        opts = dict(restarts=restarts, noise=noise, maxiter=maxiter, tol=tol)
        factors = [_opt0_memo(_memo, G[0][i], next(keys), ps[i], opts) for i in range(len(attrs))]
        S = KronStrategy(attrs, factors)
        return S, expected_error(W, S, noise=noise)

    d, k = len(attrs), len(W.terms)
    factors = [np.eye(W.sizes[a]) for a in attrs]
    C = np.array([[np.trace(G[j][i]) for j in range(k)] for i in range(d)])
    best = KronStrategy(attrs, factors)
    best_loss = expected_error(W, best, noise=noise)
    for _ in range(sweeps):
        for i in range(d):
            c = w2 * np.prod(np.delete(C, i, axis=0), axis=0)
            if c.mean() <= 0:
                continue
            c = c / c.mean()
            surrogate = sum(cj * G[j][i] for j, cj in enumerate(c))
            key_i = next(keys)
            A_i = opt_0(surrogate, key_i, ps[i], restarts=restarts, noise=noise, maxiter=maxiter, tol=tol)[0]
            info = _FactorInfo(A_i)
            row = [info.trace(G[j][i]) for j in range(k)]
            if not np.all(np.isfinite(row)):  # e.g. Total chosen for a surrogate that ignores some term
                A_i = opt_pidentity(surrogate, key_i, ps[i], restarts=restarts, noise=noise, maxiter=maxiter, tol=tol)[0]
                info = _FactorInfo(A_i)
                row = [info.trace(G[j][i]) for j in range(k)]
            factors[i] = A_i
            C[i] = np.array(row) * _col_norm(A_i, noise) ** 2
        S = KronStrategy(attrs, list(factors))
        loss = expected_error(W, S, noise=noise)
        if loss < best_loss * (1 - 1e-12):
            best, best_loss = S, loss
        elif loss >= best_loss:
            break  # no more progress
    return best, best_loss


def opt_union(
    workload,
    key,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    maxiter: int = 250,
    tol: float = 1e-9,
) -> tuple[UnionStrategy, float]:
    """OPT_+: a union of Kronecker strategies, one per sub-workload (VLDB 2018).

    Workload terms on the same clique (as a set) form one sub-workload; each is optimised by :func:`opt_kron`
    (unit sensitivity, error ``e_j``) and the strategies are stacked with weights ``alpha_j``. Minimising the
    upper bound ``||A||^2 sum_j e_j / alpha_j^2`` gives ``alpha_j ∝ e_j^(1/3)`` normalised to
    ``sum alpha = 1`` (Laplace; bound ``(sum_j e_j^(1/3))^3``) or ``alpha_j ∝ e_j^(1/4)`` with
    ``sum alpha^2 = 1`` (Gaussian; bound ``(sum_j e_j^(1/2))^2``).

    Args:
        workload: :class:`UnionWorkload` (or a single :class:`KronWorkload`).
        key: a ``jax.random`` key; restarts, noise, maxiter, tol: passed on.

    Returns:
        ``(strategy, loss)``, ``loss`` the upper bound (= ``expected_error(workload, strategy)`` when no
        strategy term answers another group's queries better than its own).
    """
    _check_noise(noise)
    W = _as_union(workload)
    groups: dict[frozenset, list[KronWorkload]] = {}
    for t in W.terms:
        groups.setdefault(frozenset(t.clique), []).append(t)
    subs, errs = [], []
    memo: dict = {}  # identical factor Grams (e.g. one Prefix attribute in many cliques) are optimised once
    for g, k in zip(groups.values(), jax.random.split(key, len(groups))):
        clique = g[0].clique
        aligned = [t if t.clique == clique else _reorder(t, clique) for t in g]
        S, e = opt_kron(UnionWorkload(aligned), k, restarts=restarts, noise=noise, maxiter=maxiter, tol=tol, _memo=memo)
        if e > 0:
            subs.append(S)
            errs.append(e)
    if not subs:
        raise ValueError("opt_union: the workload has no queries with positive weight")
    errs = np.array(errs)
    if noise == "laplace":
        alpha = errs ** (1 / 3)
        alpha /= alpha.sum()
    else:
        alpha = errs**0.25
        alpha /= np.sqrt((alpha**2).sum())
    strategy = UnionStrategy([KronStrategy(S.clique, S.factors, a) for S, a in zip(subs, alpha)])
    return strategy, expected_error(W, strategy, noise=noise)


def _reorder(t: KronWorkload, clique) -> KronWorkload:
    f = dict(zip(t.clique, t.factors))
    return KronWorkload(clique, [f[a] for a in clique], t.weight)


def opt_marginals(
    workload,
    key,
    *,
    restarts: int = 8,
    noise: str = "laplace",
    maxiter: int = 1000,
    tol: float = 1e-10,
    max_attributes: int = 20,
) -> tuple[MarginalsStrategy, float]:
    """OPT_M: weights on all ``2^d`` marginals of the workload's attributes (VLDB 2018).

    The workload Gram is projected into the marginals algebra (:meth:`MarginalsGram.from_workload`) and
    :func:`marginals_error` is minimised over ``theta = phi^2`` by optax L-BFGS from ``restarts`` ``U(0, 1)``
    starts. The result is scaled to unit sensitivity; weights below ``1e-3`` / ``1e-6`` / ``1e-9`` of the
    largest are dropped when that costs less than ``1e-4`` of relative error (fewer marginals to measure).

    Args:
        workload: :class:`KronWorkload` or :class:`UnionWorkload`.
        key: a ``jax.random`` key; restarts, noise, maxiter, tol: as in :func:`opt_pidentity`.
        max_attributes: refuse more attributes than this (memory and time grow as ``d 2^d``).

    Returns:
        ``(strategy, loss)`` with ``loss = expected_error(workload, strategy, noise=noise)``.

    Example:
        >>> W = marginals_workload({"a": 2, "b": 3, "c": 4}, [("a", "b"), ("b", "c")])
        >>> S, loss = opt_marginals(W, jax.random.key(0))
    """
    _check_noise(noise)
    W = _as_union(workload)
    d = len(W.attributes)
    if d > max_attributes:
        raise ValueError(f"opt_marginals: {d} attributes means 2^{d} marginal weights; max_attributes={max_attributes}")
    gw = MarginalsGram.from_workload(W)
    sizes = gw.sizes
    mult, dims = _mult_dims(sizes)
    lam_w = gw.eigenvalues()
    top = float(lam_w.max())
    if top <= 0:
        raise ValueError("opt_marginals: the workload has no queries with positive weight")
    live = (dims > 0) & (lam_w > 1e-12 * top)
    coef = np.where(live, dims * lam_w / top, 0.0)
    dtype = _float_dtype()
    phi0 = jnp.sqrt(jax.random.uniform(key, (_restarts(restarts), 2**d), dtype=dtype))
    thetas, values, _ = _fit_marginals(
        jnp.asarray(coef, dtype=dtype),
        jnp.asarray(live),
        jnp.asarray(mult, dtype=dtype),
        phi0,
        jnp.asarray(noise == "laplace"),
        tol,
        d=d,
        maxiter=maxiter,
    )
    theta, _ = _best(np.asarray(thetas), np.asarray(values))
    theta = theta / (theta.sum() if noise == "laplace" else np.sqrt((theta**2).sum()))
    best = MarginalsStrategy(W.attributes, sizes, theta)
    best_loss = expected_error(W, best, noise=noise)
    for cut in (1e-3, 1e-6, 1e-9):
        pruned = np.where(theta >= cut * theta.max(), theta, 0.0)
        pruned = pruned / (pruned.sum() if noise == "laplace" else np.sqrt((pruned**2).sum()))
        S = MarginalsStrategy(W.attributes, sizes, pruned)
        loss = expected_error(W, S, noise=noise)
        if loss <= best_loss * (1 + 1e-4):
            return S, loss
    return best, best_loss


def optimize_strategy(
    workload,
    key,
    *,
    templates: Sequence[str] = ("kron", "union", "marginals"),
    restarts: int = 8,
    noise: str = "laplace",
    max_marginal_attributes: int = 16,
) -> tuple[KronStrategy | UnionStrategy | MarginalsStrategy, float]:
    """HDMM's top-level choice (the reference's ``BestHD``): the lowest-loss strategy among the templates.

    Args:
        workload: :class:`KronWorkload` or :class:`UnionWorkload`.
        key: a ``jax.random`` key.
        templates: any of ``"kron"`` (:func:`opt_kron`), ``"union"`` (:func:`opt_union`) and ``"marginals"``
            (:func:`opt_marginals`, skipped above ``max_marginal_attributes`` attributes).
        restarts, noise: passed on.

    Returns:
        ``(strategy, loss)``. A union strategy's loss is its OPT_+ upper bound.
    """
    W = _as_union(workload)
    unknown = set(templates) - {"kron", "union", "marginals"}
    if unknown or not templates:
        raise ValueError(f"optimize_strategy: templates must be among 'kron', 'union', 'marginals', got {list(templates)}")
    k1, k2, k3 = jax.random.split(key, 3)
    results = []
    if "kron" in templates:
        results.append(opt_kron(W, k1, restarts=restarts, noise=noise))
    if "union" in templates:
        results.append(opt_union(W, k2, restarts=restarts, noise=noise))
    if "marginals" in templates and len(W.attributes) <= max_marginal_attributes:
        results.append(opt_marginals(W, k3, restarts=restarts, noise=noise))
    if not results:
        raise ValueError("optimize_strategy: no template applies (too many attributes for 'marginals' alone)")
    return min(results, key=lambda r: r[1])


# ---------------------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------------------


def _marginal_getter(data) -> Callable:
    if hasattr(data, "marginal") and callable(data.marginal):
        return data.marginal
    if isinstance(data, Mapping):
        def get(clique):
            if clique in data:
                return data[clique]
            for k, v in data.items():
                if tuple(k) == tuple(clique):
                    return v
            raise KeyError(f"no marginal for {clique}")
        return get
    if callable(data):
        return data
    raise TypeError("marginals must be a Dataset, a callable clique -> table, or a mapping clique -> table")


class TableTooLargeError(ValueError):
    """Raised before allocating when a least-squares table would not fit the memory allowance."""


def _sizes_lookup(domain) -> Callable[[str], int]:
    def size(a):
        try:
            return int(domain[a])
        except KeyError:
            raise ValueError(f"attribute {a!r} is not in the domain") from None

    return size


def _m_apply(m: Measurement, x: np.ndarray) -> np.ndarray:
    """``Q x`` for a table ``x`` over ``m.clique`` (axes in clique order)."""
    if m.kind == "identity":
        return x.reshape(-1)
    if m.kind == "dense":
        return m.query @ x.reshape(-1)
    return _kron_apply(m.query, x).reshape(-1)


def _m_rapply(m: Measurement, r: np.ndarray, shape) -> np.ndarray:
    """``Q^T r`` as a table over ``m.clique``."""
    if m.kind == "identity":
        return r.reshape(shape)
    if m.kind == "dense":
        return (m.query.T @ r).reshape(shape)
    return _kron_apply([q.T for q in m.query], r.reshape([q.shape[0] for q in m.query]))


def _lsmr(matvec, rmatvec, rows, cells, rhs, atol, btol, maxiter):
    from scipy.sparse.linalg import LinearOperator, lsmr

    op = LinearOperator((rows, cells), matvec=matvec, rmatvec=rmatvec, dtype=np.float64)
    return lsmr(op, rhs, atol=atol, btol=btol, maxiter=maxiter)[0]


def _solve_group(group: list[Measurement], clique, shape, atol, btol, maxiter) -> np.ndarray:
    """Least squares (rows weighted by 1/stddev) for measurements on one clique; a table over ``clique``."""
    if len(group) == 1 and group[0].stddev.ndim == 0 and tuple(group[0].clique) == tuple(clique):
        m = group[0]
        if m.kind == "identity":
            return m.y.reshape(shape)
        if m.kind == "kron":  # x_hat = (x)_i Q_i^+ y
            return _kron_apply([np.linalg.pinv(q) for q in m.query], m.y.reshape([q.shape[0] for q in m.query]))
        return np.linalg.lstsq(m.query, m.y, rcond=None)[0].reshape(shape)
    perms = [[clique.index(a) for a in m.clique] for m in group]
    inv = [list(np.argsort(p)) for p in perms]
    rows = [m.rows for m in group]
    offsets = np.cumsum([0] + rows)
    w = [1.0 / m.row_stddev() for m in group]
    cells = int(np.prod(shape))

    def matvec(v):
        x = v.reshape(shape)
        return np.concatenate([wi * _m_apply(m, np.transpose(x, p)) for m, p, wi in zip(group, perms, w)])

    def rmatvec(r):
        out = np.zeros(shape)
        for m, p, ip, wi, lo, hi in zip(group, perms, inv, w, offsets[:-1], offsets[1:]):
            out += np.transpose(_m_rapply(m, wi * r[lo:hi], tuple(shape[i] for i in p)), ip)
        return out.reshape(-1)

    rhs = np.concatenate([wi * m.y for m, wi in zip(group, w)])
    return _lsmr(matvec, rmatvec, int(offsets[-1]), cells, rhs, atol, btol, maxiter).reshape(shape)


def _sum_to(table: np.ndarray, clique, target) -> np.ndarray:
    keep = [clique.index(a) for a in target]
    drop = tuple(i for i in range(len(clique)) if i not in keep)
    reduced = table.sum(axis=drop) if drop else table
    remaining = [a for i, a in enumerate(clique) if i not in drop]
    return np.transpose(reduced, [remaining.index(a) for a in target])


def least_squares_marginal(domain, measurements: Sequence[Measurement], clique, *, atol=1e-12, btol=1e-12, maxiter=None) -> np.ndarray:
    """Local least squares (HDMM+LLS, the ICML 2019 baseline) for one clique's marginal.

    Uses the measurements on ``clique`` itself (as a set) or, when there are none, those on the smallest
    measured superset clique (the first such in measurement order). One Kronecker measurement with a scalar
    standard deviation is solved in closed form ``x_hat = (x)_i Q_i^+ y`` (the ICML setting); several are
    solved jointly (rows weighted by ``1/stddev``) by LSMR with Kronecker matvecs on the clique's table.
    A superset's estimate is summed down to ``clique``. Unconstrained (no non-negativity), minimum-norm where
    the measurements leave directions free.

    Args:
        domain: ``pgmjax.Domain`` or a mapping ``attribute -> size``.
        measurements: ``pgmjax.Measurement`` objects.
        clique: the target attributes.
        atol, btol, maxiter: LSMR settings for the iterative case.

    Returns:
        The estimated table over ``clique`` (axes in clique order).

    Raises:
        ValueError: when no measurement's clique contains ``clique``.
    """
    clique = _as_clique(clique)
    size = _sizes_lookup(domain)
    target = frozenset(clique)
    groups: dict[frozenset, list[Measurement]] = {}
    for m in measurements:
        if not isinstance(m, Measurement):
            raise TypeError(f"expected pgmjax.Measurement, got {type(m).__name__}")
        if target <= frozenset(m.clique):
            groups.setdefault(frozenset(m.clique), []).append(m)
    if not groups:
        raise ValueError(f"least_squares_marginal: no measurement covers the clique {clique}")
    if target in groups:
        chosen = groups[target]
    else:
        chosen = min(groups.values(), key=lambda g: int(np.prod([size(a) for a in g[0].clique])))
    base = tuple(chosen[0].clique)
    shape = tuple(size(a) for a in base)
    for m in chosen:
        m.validate(_DomainView(size), None)
    table = _solve_group(chosen, base, shape, atol, btol, maxiter)
    return _sum_to(table, base, clique)


class _DomainView:
    """The bits of ``pgmjax.Domain`` that ``Measurement.validate`` uses, over a size lookup."""

    def __init__(self, size):
        self._size = size

    def check_clique(self, clique, what="clique"):
        for a in clique:
            self._size(a)
        return tuple(clique)

    def size(self, clique):
        return int(np.prod([self._size(a) for a in clique])) if clique else 1

    def shape_of(self, clique):
        return tuple(self._size(a) for a in clique)

    def __getitem__(self, a):
        return self._size(a)


def local_least_squares(domain, measurements: Sequence[Measurement], cliques, **kw) -> dict[tuple[str, ...], np.ndarray]:
    """HDMM+LLS for many cliques: ``{clique: least_squares_marginal(domain, measurements, clique)}``.

    Args:
        domain: ``pgmjax.Domain`` or mapping ``attribute -> size``.
        measurements: ``pgmjax.Measurement`` objects.
        cliques: target cliques, or a :class:`KronWorkload` / :class:`UnionWorkload` (its terms' cliques).

    Returns:
        A dict ``clique -> estimated table``; answer a workload with ``workload.answer(result)``.

    Example:
        >>> domain = {"a": 2, "b": 3}
        >>> W = marginals_workload(domain, [("a", "b")])
        >>> est = local_least_squares(domain, [Measurement(("a", "b"), [10.0, 20, 30, 40, 50, 60])], W)
        >>> W.answer(est).tolist()
        [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    """
    if isinstance(cliques, (KronWorkload, UnionWorkload)):
        cliques = _as_union(cliques).cliques
    out = {}
    for c in cliques:
        c = _as_clique(c)
        if c not in out:
            out[c] = least_squares_marginal(domain, measurements, c, **kw)
    return out


def global_least_squares(
    domain,
    measurements: Sequence[Measurement],
    *,
    attributes: Sequence[str] | None = None,
    max_bytes: int = 2**30,
    atol: float = 1e-12,
    btol: float = 1e-12,
    maxiter: int | None = None,
) -> np.ndarray:
    """HDMM's global least squares ``x_hat = argmin_x ||D^{-1}(A x - y)||_2`` over the full table (minimum norm).

    Solved by LSMR with matvecs that sum the table down to each measurement's clique and apply its query
    (adjoint: broadcast back). The memory need (about six float64 tables plus the answers) is checked against
    ``max_bytes`` **before** anything is allocated; at Adult's size (~6.4e17 cells) this raises, which is why
    the ICML paper uses HDMM+LLS or PGM instead.

    Args:
        domain: ``pgmjax.Domain`` (or mapping ``attribute -> size``).
        measurements: ``pgmjax.Measurement`` objects over attributes of the table.
        attributes: the table's attributes (default: all of ``domain``, in its order).
        max_bytes: the memory allowance.
        atol, btol, maxiter: LSMR settings.

    Returns:
        The estimated table, shape ``(n_a for a in attributes)``.

    Raises:
        TableTooLargeError: when the table would not fit in ``max_bytes``.
    """
    size = _sizes_lookup(domain)
    attrs = tuple(attributes) if attributes is not None else tuple(domain)
    shape = tuple(size(a) for a in attrs)
    cells = math.prod(shape)
    rows = sum(int(m.rows) for m in measurements)
    need = 8 * (6 * cells + 3 * rows)
    if need > max_bytes:
        raise TableTooLargeError(
            f"global least squares needs the full table over {len(attrs)} attributes: {cells:.3g} cells, about "
            f"{need / 2**30:.3g} GiB with the solver's work vectors, above max_bytes={max_bytes} ({max_bytes / 2**30:.3g} GiB); "
            "use local_least_squares (HDMM+LLS) or pgmjax.estimate instead, or raise max_bytes"
        )
    view = _DomainView(size)
    for i, m in enumerate(measurements):
        if not isinstance(m, Measurement):
            raise TypeError(f"measurement {i} is a {type(m).__name__}, expected pgmjax.Measurement")
        missing = [a for a in m.clique if a not in attrs]
        if missing:
            raise ValueError(f"measurement {i} on {m.clique}: attributes {missing} are not in the table {attrs}")
        m.validate(view, i)
    plans = []
    for m in measurements:
        axes = [attrs.index(a) for a in m.clique]
        drop = tuple(i for i in range(len(attrs)) if i not in axes)
        kept = sorted(axes)  # remaining axes after the sum, in table order
        perm = [kept.index(ax) for ax in axes]  # to clique order
        inv = list(np.argsort(perm))
        expand = tuple(i for i in range(len(attrs)) if i not in axes)
        plans.append((m, drop, perm, inv, expand, 1.0 / m.row_stddev()))
    offsets = np.cumsum([0] + [m.rows for m in measurements])

    def matvec(v):
        x = v.reshape(shape)
        outs = []
        for m, drop, perm, _, _, w in plans:
            t = x.sum(axis=drop) if drop else x
            outs.append(w * _m_apply(m, np.transpose(t, perm)))
        return np.concatenate(outs) if outs else np.zeros(0)

    def rmatvec(r):
        out = np.zeros(shape)
        for (m, _, perm, inv, expand, w), lo, hi in zip(plans, offsets[:-1], offsets[1:]):
            t = _m_rapply(m, w * r[lo:hi], tuple(size(a) for a in m.clique))
            t = np.transpose(t, inv)
            out += np.expand_dims(t, expand) if expand else t
        return out.reshape(-1)

    rhs = np.concatenate([w * m.y for m, *_, w in plans]) if plans else np.zeros(0)
    return _lsmr(matvec, rmatvec, int(offsets[-1]), cells, rhs, atol, btol, maxiter).reshape(shape)
