"""The marginals Gram algebra: HDMM's closed-form error and pseudo-inverse for weighted-marginals strategies.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018, the marginals strategies (OPT_M): the Gram of any weighted set of
marginals is ``sum_a u_a (x)_i (I if attribute i is kept in a else 1 1^T)``, a commutative algebra of
``2^d``-dimensional matrices. Here it is handled through its eigenvalues (one per attribute subset, by a
superset-sum transform in ``O(d 2^d)``) instead of the paper's ``2^d x 2^d`` triangular system; products,
pseudo-inverses and traces are then pointwise.

Example:
    >>> G = MarginalsGram((2, 3), [0.0, 0.0, 0.0, 1.0])        # the full 2 x 3 marginal: the identity
    >>> bool(np.allclose(G.dense(), np.eye(6))), G.trace()
    (True, 6.0)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import jax.numpy as jnp
import numpy as np

from .factors import check_n, merge_sizes
from .workloads import as_union

__all__ = ["MarginalsGram"]


def mult_dims(sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``mult[a] = prod_{i not in a} n_i`` and ``dims[s] = prod_{i in s} (n_i - 1)`` over the bitmasks."""
    mult = functools.reduce(np.kron, [np.array([n, 1.0]) for n in reversed(sizes)], np.ones(1))
    dims = functools.reduce(np.kron, [np.array([1.0, n - 1.0]) for n in reversed(sizes)], np.ones(1))
    return mult, dims


def superset_sum(v, d: int, xp=jnp):
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
    """Inverse of :func:`superset_sum` (NumPy)."""
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
        self.sizes = tuple(check_n(n) for n in sizes)
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size != 2 ** len(self.sizes):
            raise ValueError(f"MarginalsGram: needs 2^d = {2 ** len(self.sizes)} weights, got {w.size}")
        self.weights = w

    @classmethod
    def from_eigenvalues(cls, sizes, lam) -> "MarginalsGram":
        mult, _ = mult_dims(sizes)
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
        workload = as_union(workload)
        attrs = tuple(attributes) if attributes is not None else workload.attributes
        extra = [a for a in workload.attributes if a not in attrs]
        if extra:
            raise ValueError(f"MarginalsGram.from_workload: workload attributes {extra} are not among {attrs}")
        known = dict(sizes or {})
        merge_sizes(known, tuple(workload.sizes), tuple(workload.sizes.values()), "MarginalsGram.from_workload")
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
        mult, _ = mult_dims(self.sizes)
        return np.asarray(superset_sum(self.weights * mult, len(self.sizes), xp=np))

    def dims(self) -> np.ndarray:
        return mult_dims(self.sizes)[1]

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

