"""Cut queries on graphs under edge privacy: randomized response on every vertex pair.

Wang, Ying & Zhang, "A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014),
Section VI-B, eq. 32-36 (reconstructed). One record per unordered vertex pair, its bit ``x_uv`` (edge or
not): ``K = 2`` and ``n = |V| (|V| - 1) / 2`` (public: the vertex set is public). The release flips every
bit with probability ``1 / (1 + e^eps)`` (binary randomized response, :meth:`Accountant.randomized_response`
on the pair table); a cut ``C(S, T) = sum_{u in S, v in T} x_uv`` (disjoint ``S``, ``T``) is estimated by

    C^ = sum_{u in S, v in T} ((e^eps + 1) x~_uv - 1) / (e^eps - 1)             (eq. 34)

unbiased, with variance exactly ``|S| |T| e^eps / (e^eps - 1)^2`` whatever the graph, so
``E |C^ - C| <= sqrt(|S| |T|) e^(eps/2) / (e^eps - 1) <= |V| e^(eps/2) / (2 (e^eps - 1))`` (eq. 35-36).
The released graph is dense (about ``n / (1 + e^eps)`` false edges): fine for thousands of vertices
(4,039: 8.2M pairs), impossible for millions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..data.dataset import Dataset
from ..data.domain import Domain
from ..privacy import Accountant
from ..checks import check_count as _count
from ..checks import check_key as _check_key
from ..checks import check_positive as _positive

__all__ = ["PairRelease", "CutEstimate", "pair_table", "adjacency", "release_pairs", "cut", "cut_count", "cut_bound"]


class CutEstimate(NamedTuple):
    """A cut estimate: ``value`` (edges), its exact ``variance`` and the bound on ``E|value - C|`` (eq. 35)."""

    value: np.ndarray
    variance: np.ndarray
    bound: np.ndarray


@dataclass(frozen=True)
class PairRelease:
    """A released graph: the randomised pair bits and the law (``epsilon``) that produced them.

    Attributes:
        adjacency: ``(|V|, |V|)`` symmetric boolean matrix of released edges (zero diagonal).
        epsilon: the epsilon of the release.
    """

    adjacency: np.ndarray
    epsilon: float

    @property
    def vertices(self) -> int:
        return self.adjacency.shape[0]


def _edges(edges, vertices: int, where: str) -> np.ndarray:
    e = np.asarray(edges)
    if e.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if e.ndim != 2 or e.shape[1] != 2 or e.dtype.kind not in "iu":
        raise ValueError(f"{where}: edges must be an integer array of shape (m, 2), got {e.dtype} {e.shape}")
    if e.min() < 0 or e.max() >= vertices:
        raise ValueError(f"{where}: edge endpoints must lie in [0, {vertices})")
    if np.any(e[:, 0] == e[:, 1]):
        raise ValueError(f"{where}: self-loops are not vertex pairs")
    return e.astype(np.int64)


def pair_table(edges, vertices: int) -> Dataset:
    """The private table of [WYZ] Section VI-B: one record per pair ``u < v`` (row-major), ``edge = 1`` if adjacent.

    Args:
        edges: ``(m, 2)`` integer vertex ids (either orientation; duplicates allowed).
        vertices: ``|V|`` (ids in ``[0, |V|)``).

    Returns:
        A :class:`~pgmjax.Dataset` over ``{"edge": 2}`` with ``|V| (|V| - 1) / 2`` records.

    Example:
        >>> pair_table([[0, 2], [3, 1]], 4).records[:, 0].tolist()   # pairs 01 02 03 12 13 23
        [0, 1, 0, 0, 1, 0]
    """
    where = "pair_table"
    v = _count(vertices, "vertices", where, 2)
    e = _edges(edges, v, where)
    u, w = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
    bits = np.zeros(v * (v - 1) // 2, dtype=np.int32)
    bits[u * v - u * (u + 1) // 2 + (w - u - 1)] = 1
    return Dataset._trusted(bits[:, None], Domain({"edge": 2}))


def adjacency(bits, vertices: int) -> np.ndarray:
    """The symmetric boolean adjacency matrix of pair bits in :func:`pair_table` order.

    Example:
        >>> adjacency([1, 0, 0, 0, 0, 1], 4).astype(int)[0].tolist()
        [0, 1, 0, 0]
    """
    v = _count(vertices, "vertices", "adjacency", 2)
    b = np.asarray(bits).reshape(-1)
    if b.size != v * (v - 1) // 2:
        raise ValueError(f"adjacency: {b.size} pair bits for {v} vertices (expected {v * (v - 1) // 2})")
    a = np.zeros((v, v), dtype=bool)
    iu = np.triu_indices(v, 1)
    a[iu] = b.astype(bool)
    return a | a.T


def release_pairs(key, edges, vertices: int, epsilon: float, *, accountant: Accountant | None = None) -> PairRelease:
    """Release a graph under ``epsilon``-edge-DP by binary randomized response on every pair ([WYZ] eq. 32-33).

    Args:
        key: a ``jax.random`` key.
        edges: the private edges, ``(m, 2)``.
        vertices: ``|V|`` (public).
        epsilon: the release's epsilon.
        accountant: default a fresh replace-one ``Accountant(epsilon=epsilon, bounded=True)``: neighbouring
            graphs differ in one pair and the number of pairs is public. An add/remove accountant is used
            with ``public_count=True`` (the pair count follows from the public vertex count).

    Returns:
        A :class:`PairRelease`.

    Example:
        >>> rel = release_pairs(jax.random.key(0), [[0, 1]], 3, 1.0)
        >>> rel.adjacency.shape, rel.epsilon
        ((3, 3), 1.0)
    """
    where = "release_pairs"
    _check_key(key, where)
    eps = _positive(epsilon, "epsilon", where)
    table = pair_table(edges, vertices)
    if accountant is None:
        accountant = Accountant(epsilon=eps, bounded=True)
    released = accountant.randomized_response(key, table, epsilon=eps, public_count=not accountant.bounded,
                                              target=f"pairs of {int(vertices)} vertices")
    return PairRelease(adjacency(released.records[:, 0], vertices), eps)


def _masks(x, vertices: int, where: str, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == bool:
        if a.shape[-1] != vertices or a.ndim > 2:
            raise ValueError(f"{where}: boolean {name} must have shape (|V|,) or (cuts, |V|), got {a.shape}")
        return np.atleast_2d(a)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"{where}: {name} must be vertex ids (1-D integers) or boolean masks")
    if a.size and (a.min() < 0 or a.max() >= vertices):
        raise ValueError(f"{where}: {name} has vertex ids outside [0, {vertices})")
    m = np.zeros((1, vertices), dtype=bool)
    m[0, a.astype(np.int64)] = True
    return m


def cut_count(adj: np.ndarray, S, T) -> np.ndarray:
    """``sum_{u in S, v in T} adj[u, v]`` for disjoint ``S``, ``T`` (vertex ids, or boolean masks ``(cuts, |V|)``).

    Example:
        >>> cut_count(adjacency([1, 0, 1, 1, 1, 0], 4), [0, 1], [2, 3]).tolist()
        [3.0]
    """
    where = "cut_count"
    adj = np.asarray(adj)
    v = adj.shape[0]
    s, t = _masks(S, v, where, "S"), _masks(T, v, where, "T")
    if s.shape[0] != t.shape[0] and 1 not in (s.shape[0], t.shape[0]):
        raise ValueError(f"{where}: {s.shape[0]} S masks for {t.shape[0]} T masks")
    s, t = np.broadcast_arrays(s, t)
    if np.any(s & t):
        raise ValueError(f"{where}: S and T must be disjoint")
    at = adj.astype(np.float32) @ t.T.astype(np.float32)  # (|V|, cuts), exact: integer counts below 2^24
    return np.einsum("cv,vc->c", s.astype(np.float64), at.astype(np.float64))


def cut_bound(size_s: int, size_t: int, epsilon: float) -> float:
    """``sqrt(|S| |T|) e^(eps/2) / (e^eps - 1)``, the bound on ``E |C^ - C|`` ([WYZ] eq. 35).

    Example:
        >>> round(cut_bound(2, 2, math.log(3)), 7)                  # sqrt(3)
        1.7320508
    """
    eps = _positive(epsilon, "epsilon", "cut_bound")
    return math.sqrt(float(size_s) * float(size_t)) * math.exp(eps / 2) / math.expm1(eps)


def cut(release: PairRelease, S, T) -> CutEstimate:
    """The unbiased cut estimate ``C^(S, T)`` from a released graph ([WYZ] eq. 34-36).

    Args:
        release: a :class:`PairRelease`.
        S, T: disjoint vertex sets: 1-D vertex ids, or boolean masks ``(|V|,)`` / ``(cuts, |V|)`` for many cuts.

    Returns:
        A :class:`CutEstimate` (arrays, one entry per cut).

    Example:
        >>> rel = PairRelease(adjacency([0, 1, 0, 1, 1, 0], 4), math.log(3))   # bits 02 03 12 13 = 1 0 1 1
        >>> est = cut(rel, [0, 1], [2, 3])
        >>> float(est.value[0]), float(est.variance[0])
        (4.0, 3.0)
    """
    where = "cut"
    if not isinstance(release, PairRelease):
        raise TypeError(f"{where}: release must be a PairRelease, got {type(release).__name__}")
    v = release.vertices
    s, t = np.broadcast_arrays(_masks(S, v, where, "S"), _masks(T, v, where, "T"))
    released = cut_count(release.adjacency, s, t)
    pairs = s.sum(axis=1).astype(np.float64) * t.sum(axis=1)
    e = math.expm1(release.epsilon)  # e^eps - 1
    value = ((e + 2.0) * released - pairs) / e
    var = pairs * (e + 1.0) / e**2
    bound = np.sqrt(pairs) * math.exp(release.epsilon / 2) / e
    return CutEstimate(value, var, bound)
