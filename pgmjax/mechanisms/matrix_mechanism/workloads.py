"""HDMM's implicit workloads: weighted Kronecker products of per-attribute queries and unions of them.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018, the implicit workload representation: a workload on a
multi-attribute table is a Kronecker product ``W_1 (x) ... (x) W_k`` of one predicate matrix per attribute
(:class:`KronWorkload`), or a weighted union (stack) of such products (:class:`UnionWorkload`), whose Gram is
``sum_j w_j^2 (x)_i W_i^(j)T W_i^(j)``. Only the per-attribute factors are stored; answers are computed on a
clique's marginal table without forming the product.

Example:
    >>> W = marginals_workload({"a": 2, "b": 3}, [("a",), ("a", "b")])
    >>> W.rows, W.answer({("a",): [4.0, 6.0], ("a", "b"): np.arange(6.0)}).tolist()
    (8, [4.0, 6.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .factors import KronTerm, as_clique, expand_dense, identity, union_terms
from .factors import prefix  # noqa: F401  (the docstring examples use it)

__all__ = ["KronWorkload", "UnionWorkload", "marginals_workload"]


class KronWorkload(KronTerm):
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

    __slots__ = ("_grams",)

    def __init__(self, clique, factors, weight: float = 1.0):
        super().__init__(clique, factors, weight, "KronWorkload", positive=False)
        self._grams = None

    @classmethod
    def marginal(cls, clique, sizes: Sequence[int] | Mapping[str, int], weight: float = 1.0) -> "KronWorkload":
        """The marginal (all cells) of ``clique``; ``sizes`` per attribute, or a mapping / ``Domain``."""
        clique = as_clique(clique)
        if isinstance(sizes, Mapping):
            sizes = [sizes[a] for a in clique]
        return cls(clique, tuple(identity(n) for n in sizes), weight)

    def grams(self) -> tuple[np.ndarray, ...]:
        """Per-attribute Gram matrices ``W_i^T W_i`` (the weight not included), cached."""
        if self._grams is None:
            self._grams = tuple(f.T @ f for f in self.factors)
        return self._grams

    def answer(self, marginal) -> np.ndarray:
        """The (weighted) query answers on a table over ``clique`` (axes in clique order), flat ``(rows,)``."""
        return self.apply(marginal)

    def dense(self) -> np.ndarray:
        """The explicit ``(rows, cells)`` matrix; for small cliques only (tests, brute force)."""
        return self.weight * self.query.matrix()

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
        terms, sizes = union_terms(terms, KronWorkload, "UnionWorkload")
        self.terms = terms
        self.attributes: tuple[str, ...] = tuple(sizes)
        self.sizes: dict[str, int] = sizes

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.terms)

    @property
    def cliques(self) -> tuple[tuple[str, ...], ...]:
        return tuple(t.clique for t in self.terms)

    def by_clique(self) -> dict[frozenset, list[KronWorkload]]:
        """The terms grouped by clique (as a set), groups in first-appearance order: OPT_+'s sub-workloads."""
        groups: dict[frozenset, list[KronWorkload]] = {}
        for t in self.terms:
            groups.setdefault(frozenset(t.clique), []).append(t)
        return groups

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
        return np.vstack([expand_dense(t.clique, t.factors, attrs, all_sizes) * t.weight for t in self.terms])

    def __repr__(self) -> str:
        return f"UnionWorkload({len(self.terms)} terms on {self.attributes}, rows={self.rows})"


def as_union(workload) -> UnionWorkload:
    """A workload as a :class:`UnionWorkload` (a :class:`KronWorkload` or a list of them is wrapped)."""
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
    cliques = [as_clique(c) for c in cliques]
    weights = [1.0] * len(cliques) if weights is None else list(weights)
    if len(weights) != len(cliques):
        raise ValueError(f"marginals_workload: {len(cliques)} cliques but {len(weights)} weights")
    return UnionWorkload([KronWorkload.marginal(c, sizes, w) for c, w in zip(cliques, weights)])


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

