"""HDMM's strategy parametrisations: Kronecker, union-of-Kronecker (OPT_+) and weighted-marginals (OPT_M).

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018. The matrix mechanism measures a strategy ``A`` instead of the
workload; HDMM searches three structured families of strategies, represented here without forming ``A``:

* :class:`KronStrategy`: ``A_1 (x) ... (x) A_k`` (OPT_kron); its sensitivity is the product of the factors'
  column norms;
* :class:`UnionStrategy`: a weighted stack ``[alpha_1 A^(1); ...; alpha_k A^(k)]`` of Kronecker strategies
  (OPT_+), sensitivity the sum (L1) or root-sum-of-squares (L2) of the terms';
* :class:`MarginalsStrategy`: weights ``theta`` on all ``2^d`` marginals (OPT_M), whose Gram lives in the
  marginals algebra (:mod:`.marginals_gram`).

Sensitivities are for add/remove-one neighbours; the privacy layer doubles L1 for replace-one.

Example:
    >>> S = UnionStrategy([KronStrategy(("a",), identity(4), 0.5), KronStrategy(("a", "b"), (identity(4), identity(2)), 0.5)])
    >>> S.sensitivity(), S.rows
    (1.0, 12)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ...queries.measurement import Measurement
from .factors import (
    KronTerm,
    as_clique,
    check_n,
    check_noise,
    expand_dense,
    identity,  # noqa: F401  (the docstring examples use it)
    union_terms,
)
from .marginals_gram import MarginalsGram

__all__ = ["KronStrategy", "UnionStrategy", "MarginalsStrategy"]


class KronStrategy(KronTerm):
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

    __slots__ = ()

    def __init__(self, clique, factors, weight: float = 1.0):
        super().__init__(clique, factors, weight, "KronStrategy", positive=True)

    def sensitivity(self, noise: str = "laplace") -> float:
        """``||A||_1`` (max column L1 norm, Laplace) or ``||A||_{1->2}`` (max column L2 norm, Gaussian).

        Product of the factors' norms (exact: a Kronecker column is a product of factor columns). This is the
        unbounded (add/remove one record) sensitivity; the bounded (replace) L1 sensitivity is twice it.
        """
        check_noise(noise)
        return self.weight * self.query.sensitivity(1 if noise == "laplace" else 2)

    def queries(self) -> tuple[np.ndarray, ...]:
        """The per-attribute query matrices for ``pgmjax.Measurement`` (the weight folded into the first)."""
        return (self.factors[0] * self.weight,) + self.factors[1:]

    def measurement(self, y, stddev) -> Measurement:
        """Wrap noisy answers ``y = A x + noise`` as a ``pgmjax.Measurement`` with a Kronecker query."""
        return Measurement(self.clique, y, stddev=stddev, query=self.queries())

    def dense(self, attributes: Sequence[str] | None = None, sizes: Mapping[str, int] | None = None) -> np.ndarray:
        """Explicit matrix (over ``attributes``, with a ``Total`` row for the others); small only."""
        attrs = tuple(attributes) if attributes is not None else self.clique
        all_sizes = dict(zip(self.clique, self.sizes))
        if sizes is not None:
            all_sizes.update(sizes)
        return self.weight * expand_dense(self.clique, self.factors, attrs, all_sizes)

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
        self.terms, _ = union_terms(terms, KronStrategy, "UnionStrategy")

    @property
    def weights(self) -> np.ndarray:
        return np.array([t.weight for t in self.terms])

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.terms)

    def sensitivity(self, noise: str = "laplace") -> float:
        """``sum_j ||A^(j)||_1`` (Laplace) or ``sqrt(sum_j ||A^(j)||_{1->2}^2)`` (Gaussian).

        An upper bound on the stack's sensitivity (a record hits one column of every term), exact when every
        factor's columns have equal norms - true for every strategy the optimisers build.
        """
        check_noise(noise)
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
        self.attributes = as_clique(attributes)
        self.sizes = tuple(check_n(n) for n in sizes)
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
        check_noise(noise)
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
            blocks.append(t * expand_dense(clique, [np.eye(sizes[a]) for a in clique], self.attributes, sizes))
        return np.vstack(blocks)

    def __repr__(self) -> str:
        return f"MarginalsStrategy({self.attributes}, {len(self.marginals())} marginals with positive weight)"

