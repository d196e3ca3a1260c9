"""Domain compression: rare values merged into one, and everything measured or fitted on it taken back.

MST's step 2 (McKenna, Miklau & Sheldon, "Winning the NIST contest: a scalable and general approach to
differentially private synthetic data", Journal of Privacy and Confidentiality 11(3), 2021, Section 4): for each
attribute, the values whose noisy one-way count is below a threshold are merged into one extra value
(:func:`compress_domain`, post-processing of the noisy counts). The records are mapped onto the compressed domain
to be measured (:func:`compress_data`); what comes back is taken to the original values: records uniformly within
each merged value (:func:`decompress_data`), the model as the distribution of those records
(:func:`decompress_model`), and the measurements as queries of the original marginals
(:func:`decompress_measurements`).

Example:
    >>> dom = Domain({"a": 4})
    >>> cdom, mapping, _ = compress_domain(dom, [Measurement(("a",), [50.0, 1.0, 40.0, 2.0], stddev=5.0)])
    >>> cdom["a"], mapping["a"].tolist()
    (3, [0, 2, 1, 2])
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping, Sequence

import jax
import numpy as np

from ..checks import check_key, check_real
from ..data.dataset import Dataset
from ..data.domain import Clique, Domain
from ..graph.oracle import make_plan
from ..model.graphical_model import GraphicalModel
from ..privacy import discrete_noise as dn
from ..queries.linear import LinearQuery
from ..queries.measurement import Measurement

__all__ = ["compress_domain", "compress_data", "decompress_data", "decompress_model", "decompress_measurements"]


def compress_domain(
    domain: Domain, one_way: Sequence[Measurement], threshold: float = 3.0, keep: Collection[str] = ()
) -> tuple[Domain, dict[str, np.ndarray], list[Measurement]]:
    """Merge the rare values of each attribute into one "other" value (MST step 2).

    For attribute ``a`` measured by ``y`` with noise std ``s``, the values with ``y >= threshold * s``
    are kept (renumbered ``0..m-1`` in their original order); if any are not, they become value
    ``m``. The one-way measurement is re-expressed on the compressed attribute as an identity query with
    one std per row: the kept entries unchanged, the merged entry ``sum(y_merged)`` with std
    ``sqrt(sum s_merged^2)`` (``s sqrt(k)``: the sum of ``k`` values with std ``s``). The reference code
    writes that row divided by ``sqrt(k)`` (coefficient ``1/sqrt(k)``, std ``s``): the same term of the
    least-squares loss, but as a dense ``(m+1) x (m+1)`` query, 1.5 GB where a 10^7-value attribute keeps
    its ~13,500 noise-only values above the threshold; this form is O(m).
    Only the noisy measurements are read: this is post-processing.

    Args:
        domain: the original domain.
        one_way: one identity measurement per attribute (clique ``(a,)``).
        threshold: keep values whose noisy count is at least ``threshold`` noise stds.
        keep: attributes left whole (public knowledge, no data: those a :class:`pgmjax.Constraint` names, whose
            forbidden cells a merged value would blur, and whose decompression would spread records over them).

    Returns:
        ``(compressed domain, mapping, compressed measurements)``; ``mapping[a][v]`` is the
        compressed value of original value ``v`` (only attributes that were compressed appear).

    Example:
        >>> dom = Domain({"a": 4})
        >>> m = Measurement(("a",), [50.0, 1.0, 40.0, 2.0], stddev=5.0)
        >>> cdom, mapping, (cm,) = compress_domain(dom, [m])
        >>> cdom["a"], mapping["a"].tolist(), cm.y.round(3).tolist(), cm.row_stddev().round(3).tolist()
        (3, [0, 2, 1, 2], [50.0, 40.0, 3.0], [5.0, 5.0, 7.071])
    """
    where = "compress_domain"
    threshold = check_real(threshold, "threshold", where)
    sizes = dict(domain)
    mapping: dict[str, np.ndarray] = {}
    out: list[Measurement] = []
    for m in one_way:
        if not isinstance(m, Measurement) or len(m.clique) != 1 or m.kind != "identity":
            raise ValueError(f"{where}: expected one-way identity measurements, got {m!r}")
        a = m.clique[0]
        m.validate(domain)
        s = m.row_stddev()
        kept_values = m.y >= threshold * s
        if a in keep or kept_values.all():
            out.append(m)
            continue
        kept = np.flatnonzero(kept_values)
        cmap = np.full(domain[a], kept.size, dtype=np.int64)
        cmap[kept] = np.arange(kept.size)
        mapping[a] = cmap
        sizes[a] = kept.size + 1
        y = np.append(m.y[kept_values], m.y[~kept_values].sum())
        std = np.append(s[kept_values], math.sqrt(np.sum(s[~kept_values] ** 2)))  # s sqrt(k) when the stds are equal
        out.append(Measurement((a,), y, std, noise=m.noise))
    return Domain(sizes), mapping, out


def compress_data(data: Dataset, mapping: Mapping[str, np.ndarray], compressed: Domain) -> Dataset:
    """The records with each compressed attribute's values mapped (``mapping[a][v]``).

    Example:
        >>> data = Dataset(np.array([[0], [1], [3]]), {"a": 4})
        >>> compress_data(data, {"a": np.array([0, 2, 1, 2])}, Domain({"a": 3})).records[:, 0].tolist()
        [0, 2, 2]
    """
    return data.recode(mapping, compressed)  # lazy for a Polars or Dask table (pgmjax.data.engines)


def _preimages(cmap: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, start, count)``: original values grouped by compressed value."""
    order = np.argsort(cmap, kind="stable")
    count = np.bincount(cmap, minlength=int(cmap.max()) + 1)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    return order, start, count


def decompress_data(data: Dataset, mapping: Mapping[str, np.ndarray], domain: Domain, key) -> Dataset:
    """Undo :func:`compress_data`: each compressed value becomes one of its original values, uniformly.

    A kept value has one preimage (itself, renumbered back); an "other" value becomes a uniformly
    random one of the values merged into it (the reference code's ``reverse_data``). The randomness
    comes from ``key`` (one ``jax.random.split`` per compressed attribute).

    Args:
        data: records over the compressed domain.
        mapping: as returned by :func:`compress_domain`.
        domain: the original domain.
        key: a ``jax.random`` key.

    Returns:
        A :class:`~pgmjax.Dataset` over ``domain``; compressing it again gives ``data`` back.

    Example:
        >>> cdata = Dataset(np.array([[0], [2], [1]]), {"a": 3})
        >>> out = decompress_data(cdata, {"a": np.array([0, 2, 1, 2])}, Domain({"a": 4}), jax.random.key(0))
        >>> int(out.records[0, 0]), int(out.records[1, 0]) in (1, 3), int(out.records[2, 0])
        (0, True, 2)
    """
    check_key(key, "decompress_data")
    records = np.array(data.records)
    names = [a for a in domain.attributes if a in mapping]
    keys = jax.random.split(key, max(1, len(names)))
    for a, k in zip(names, keys):
        j = domain.index(a)
        order, start, count = _preimages(np.asarray(mapping[a]))
        col = records[:, j]
        offset = dn.generator(k).integers(0, count[col])  # exact uniform integers; the same with or without x64
        records[:, j] = order[start[col] + offset]
    return Dataset._trusted(records.astype(data.records.dtype, copy=False), domain)


def decompress_measurements(measurements, mapping: Mapping[str, np.ndarray], domain: Domain) -> list[Measurement]:
    """Measurements on the compressed domain re-expressed on the original one: the same answers, the same noise.

    A measurement of a compressed attribute's value ``v`` is the sum of the original values merged into it, so
    its query becomes ``Q (M_1 (x) ... (x) M_k)`` with ``M_a[v, x] = 1`` where ``mapping[a][x] = v`` (an
    uncompressed attribute keeps its axis). The loss of a model over ``domain`` on the result equals the loss of
    the compressed model on ``measurements`` (what :func:`decompress_model` is fitted to), so they can be refitted
    with measurements over the original domain (a release that grows: :meth:`pgmjax.Release.extend`).

    Example:
        >>> cm = Measurement(("a",), [50.0, 40.0, 3.0], stddev=[5.0, 5.0, 7.071])
        >>> (m,) = decompress_measurements([cm], {"a": np.array([0, 2, 1, 2])}, Domain({"a": 4}))
        >>> m.kind, m.linear.apply(np.array([50.0, 1.0, 40.0, 2.0])).tolist()
        ('kron', [50.0, 40.0, 3.0])
    """
    out = []
    for m in measurements:
        factors = [_merge_matrix(mapping[a]) if a in mapping else None for a in m.clique]
        if all(f is None for f in factors):
            out.append(m)
            continue
        sizes = domain.shape_of(m.clique)
        q = m.linear
        if q.kind == "identity":
            lifted = LinearQuery.kron(factors, sizes)
        elif q.kind == "kron":
            lifted = LinearQuery.kron([g if f is None else (f if g is None else np.asarray(g) @ f)
                                       for g, f in zip(q.matrices, factors)], sizes)
        else:  # a dense query (or a stack) on the compressed table: composed with the merge as one matrix
            merge = functools.reduce(np.kron, [np.eye(n) if f is None else f for f, n in zip(factors, sizes)])
            lifted = LinearQuery.from_matrix(q.matrix() @ merge, sizes)
        out.append(Measurement(m.clique, m.y, m.stddev, query=lifted, noise=m.noise))
    return out


def _merge_matrix(cmap) -> np.ndarray:
    """``M[v, x] = 1`` where original value ``x`` is merged into compressed value ``v``."""
    cmap = np.asarray(cmap)
    out = np.zeros((int(cmap.max()) + 1, cmap.size))
    out[cmap, np.arange(cmap.size)] = 1.0
    return out


def decompress_model(model: GraphicalModel, mapping: Mapping[str, np.ndarray], domain: Domain) -> GraphicalModel:
    """The compressed model as a model over the original domain (uniform within each merged value).

    ``p(x) = p_c(c(x)) / prod_a k_a(c_a(x_a))`` where ``k_a(v)`` is the number of original values of
    ``a`` merged into ``v``: every potential is gathered through the mapping and each compressed
    attribute gets the one-way term ``-log k_a``. This is exactly the distribution of
    :func:`decompress_data` applied to records drawn from ``model``, and its marginals answer
    questions about the original values.

    Example:
        >>> cdom = Domain({"a": 3, "b": 2})
        >>> from pgmjax import estimate
        >>> m = estimate(cdom, [Measurement(("a", "b"), [[10.0, 10], [20, 20], [30, 10]])], iters=200)
        >>> lifted = decompress_model(m, {"a": np.array([0, 2, 1, 2])}, Domain({"a": 4, "b": 2}))
        >>> lifted.marginal("a").round().tolist()
        [20.0, 20.0, 40.0, 20.0]
    """
    tables: dict[Clique, np.ndarray] = {}
    for clique, table in model.potentials.items():
        t = np.asarray(table, np.float64)
        for axis, a in enumerate(clique):
            if a in mapping:
                t = np.take(t, np.asarray(mapping[a]), axis=axis)
        tables[clique] = t
    for a, cmap in mapping.items():
        cmap = np.asarray(cmap)
        k = np.bincount(cmap)[cmap].astype(np.float64)
        if np.any(k > 1):
            tables[(a,)] = tables.get((a,), 0.0) - np.log(k)
    plan = make_plan(domain, model.cliques)
    theta = plan.from_tables(tables, model.dtype)
    return GraphicalModel(plan, theta, model.total)
