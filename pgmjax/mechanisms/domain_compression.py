"""Domain compression: rare values merged into one, and everything measured or fitted on it taken back.

MST's step 2 (McKenna, Miklau & Sheldon, "Winning the NIST contest: a scalable and general approach to
differentially private synthetic data", Journal of Privacy and Confidentiality 11(3), 2021, Section 4): for each
attribute, the values whose noisy one-way count is below a threshold are merged into one extra value
(:func:`compress_domain`, post-processing of the noisy counts). The records are mapped onto the compressed domain
to be measured (:func:`compress_data`); what comes back is taken to the original values: records spread over the
values merged into each ("other") value (:func:`decompress_data`), the model as the distribution of those records
(:func:`decompress_model`), and the measurements as queries of the original marginals
(:func:`decompress_measurements`).

How a merged value spreads over its original values (a *spread*: for each original value, its share of the value it
was merged into) is either even (:func:`uniform_spread`, the reference code's) or read from the one-way
measurement the compression itself read (:func:`measured_spread`): the noisy counts of the merged values, shrunk
towards the even spread by as much as Stein's unbiased risk estimate asks. Both are post-processing.

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
from .options import check_choice

__all__ = ["MERGED_VALUES", "MERGES", "compress_domain", "compress_data", "decompress_data", "decompress_model",
           "decompress_measurements", "measured_spread", "spread_for", "uniform_spread"]

#: How merged values are spread back over their original values: ``"uniform"`` (:func:`uniform_spread`) or
#: ``"measured"`` (:func:`measured_spread`).
MERGED_VALUES = ("uniform", "measured")
#: How :func:`compress_domain` merges an attribute's rare values: ``"one"`` (all into one value, MST's) or ``"runs"``
#: (consecutive ones into groups whose noisy count is measurable).
MERGES = ("one", "runs")


def compress_domain(
    domain: Domain, one_way: Sequence[Measurement], threshold: float = 3.0, keep: Collection[str] = (),
    merge: str = "one",
) -> tuple[Domain, dict[str, np.ndarray], list[Measurement]]:
    """Merge the rare values of each attribute into one "other" value (MST step 2), or into runs (``merge="runs"``).

    For attribute ``a`` measured by ``y`` with noise std ``s``, the values with ``y >= threshold * s``
    are kept (renumbered ``0..m-1`` in their original order); if any are not, they become value
    ``m`` (``merge="one"``, MST's). With ``merge="runs"``, consecutive rare values (in the domain's order, which is
    public) are merged into groups instead, each closed once its noisy count reaches ``threshold`` times its
    noise std; a run cut short joins the group before it, and rare values that make no group share the last
    value (:func:`_run_groups`). A binned number (an age, a
    fare) keeps its rare values apart by neighbourhood: the children and the elderly of a passenger list stay two
    groups, where MST's one value would join them and lose every correlation that tells them apart.
    The one-way measurement is re-expressed on the compressed attribute as an identity query with
    one std per row: the kept entries unchanged, a merged entry ``sum(y_merged)`` with std
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
        merge: ``"one"`` (every rare value of an attribute into one value) or ``"runs"`` (:data:`MERGES`).

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
    merge = check_choice(merge, "merge", MERGES, where)
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
        cmap = _run_groups(m.y, s, kept_values, threshold) if merge == "runs" else _one_group(kept_values)
        mapping[a] = cmap
        k = int(cmap.max()) + 1
        sizes[a] = k
        y = np.bincount(cmap, weights=m.y, minlength=k)
        std = np.sqrt(np.bincount(cmap, weights=s ** 2, minlength=k))  # s sqrt(k) when the stds are equal
        out.append(Measurement((a,), y, std, noise=m.noise))
    return Domain(sizes), mapping, out


def _one_group(kept_values: np.ndarray) -> np.ndarray:
    """MST's mapping: the kept values renumbered in order, every other value the last."""
    kept = np.flatnonzero(kept_values)
    cmap = np.full(kept_values.size, kept.size, dtype=np.int64)
    cmap[kept] = np.arange(kept.size)
    return cmap


def _run_groups(y: np.ndarray, s: np.ndarray, kept_values: np.ndarray, threshold: float) -> np.ndarray:
    """The mapping of ``merge="runs"``: values in order; a kept value is a group of its own; rare values gather into
    the open run, which becomes a group once its noisy count reaches ``threshold`` times its noise std
    (``sum y >= threshold sqrt(sum s^2)``). A run cut short (by a kept value or the end) joins the group closed
    just before it in the same stretch of rare values, where there is one; the rest (stretches too rare to make a
    group) share one last value, as every rare value does in MST. Groups are numbered in the domain's order.

    Example:
        >>> y, kept = np.array([100.0, 20, 20, 20, 5, 100, 1]), np.array([1, 0, 0, 0, 0, 1, 0]) > 0
        >>> _run_groups(y, np.full(7, 10.0), kept, 3.0).tolist()
        [0, 1, 1, 1, 1, 2, 3]
    """
    groups: list[list[int]] = []
    other: list[int] = []
    run: list[int] = []
    total = var = 0.0  # the open run's noisy count and its noise variance
    continues = False  # whether the open run follows a group closed in the same stretch of rare values
    for i, (yi, si, kept) in enumerate(zip(y.tolist(), s.tolist(), kept_values.tolist())):
        if kept:
            (groups[-1] if continues else other).extend(run)
            run, total, var, continues = [], 0.0, 0.0, False
            groups.append([i])
            continue
        run.append(i)
        total, var = total + yi, var + si * si
        if total >= threshold * math.sqrt(var):
            groups.append(run)
            run, total, var, continues = [], 0.0, 0.0, True
    (groups[-1] if continues else other).extend(run)
    cmap = np.full(y.size, len(groups), dtype=np.int64)  # the values no group took: the last value
    for g, members in enumerate(groups):
        cmap[members] = g
    return cmap


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


def uniform_spread(mapping: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each merged value spread evenly over its original values (the reference code's ``reverse_data``):
    ``spread[a][x] = 1 / k`` where ``k`` original values share ``x``'s compressed value (1 for a kept value).

    Example:
        >>> uniform_spread({"a": np.array([0, 2, 1, 2])})["a"].tolist()
        [1.0, 0.5, 1.0, 0.5]
    """
    out = {}
    for a, cmap in mapping.items():
        cmap = np.asarray(cmap)
        out[a] = 1.0 / np.bincount(cmap)[cmap].astype(np.float64)
    return out


def measured_spread(mapping: Mapping[str, np.ndarray], one_way: Sequence[Measurement],
                    counts: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each merged value spread over its original values as their noisy one-way counts say, shrunk towards even.

    For a compressed value holding ``k > 1`` original values with noisy counts ``y`` (noise stds ``s``) and an
    estimated count ``T`` (``counts[a]``, the fitted model's), the counts are estimated by
    ``x = u + lam (p - u)``: ``u = T / k`` everywhere (the even spread), ``p`` the Euclidean projection of ``y`` onto
    ``{x >= 0, sum x = T}`` (the least-squares counts under the noise, which are never negative), and ``lam`` in
    ``[0, 1]`` the minimiser of Stein's unbiased estimate of the squared error (Stein, "Estimation of the mean of a
    multivariate normal distribution", Annals of Statistics 9(6), 1981, Section 2):
    ``||x - y||^2 + 2 sum_i s_i^2 dx_i/dy_i``, whose divergence for the projection onto an active set ``A`` of ``r``
    values is ``lam sum_{i in A} s_i^2 (1 - 1/r)``; the estimate is quadratic in ``lam``, so its minimiser is
    closed-form. Where the counts are mostly noise (a small table at a small epsilon) ``lam`` is near 0 and the
    spread near even; where they are signal, near 1. ``spread = x / T``, floored at ``1e-12`` of even so that
    every original value keeps some probability (a model's log-potential stays finite). Reads the noisy
    measurement and the model only: post-processing.

    Args:
        mapping: as returned by :func:`compress_domain`.
        one_way: the one-way measurements over the original domain that :func:`compress_domain` read (at least one
            per compressed attribute; others are ignored).
        counts: per compressed attribute, the estimated count of each compressed value (length its compressed size).

    Returns:
        ``{attribute: spread}``, each a float64 vector over the original values (1 for a kept value; each merged
        value's shares sum to 1).

    Example:
        >>> m = Measurement(("a",), [50.0, 30.0, 40.0, 0.0, 1.0], stddev=5.0)
        >>> cmap = np.array([0, 2, 1, 2, 2])          # the counts 30, 0 and 1 merged into value 2
        >>> measured_spread({"a": cmap}, [m], {"a": np.array([50.0, 40.0, 31.0])})["a"].round(3).tolist()
        [1.0, 0.94, 1.0, 0.014, 0.045]
    """
    where = "measured_spread"
    by_attr = {m.clique[0]: m for m in one_way if len(m.clique) == 1}
    out = uniform_spread(mapping)
    for a, cmap in mapping.items():
        if a not in by_attr:
            raise ValueError(f"{where}: no one-way measurement of the compressed attribute {a!r}")
        m = by_attr[a]
        cmap = np.asarray(cmap)
        if m.y.shape != cmap.shape:
            raise ValueError(f"{where}: the one-way measurement of {a!r} has {m.y.size} values, "
                             f"the mapping {cmap.size}")
        total = np.asarray(counts[a], np.float64)
        if total.shape != (int(cmap.max()) + 1,):
            raise ValueError(f"{where}: counts[{a!r}] must have {int(cmap.max()) + 1} entries, got shape {total.shape}")
        y, var = np.asarray(m.y, np.float64), m.row_stddev() ** 2
        order, start, count = _preimages(cmap)
        for v in np.flatnonzero(count > 1):
            members = order[start[v]:start[v] + count[v]]
            out[a][members] = _shrunk_shares(y[members], var[members], float(total[v]))
    return out


def spread_for(merged_values: str, mapping: Mapping[str, np.ndarray], one_way: Sequence[Measurement],
               model: GraphicalModel) -> dict[str, np.ndarray] | None:
    """The spread a mechanism's ``merged_values`` option names, for ``model`` fitted over the compressed domain:
    None (``"uniform"``: even, which :func:`decompress_model` and :func:`decompress_data` take as their default) or
    :func:`measured_spread` with the model's one-way counts (``"measured"``).

    Example:
        >>> from pgmjax import estimate
        >>> cdom = Domain({"a": 3})
        >>> m = estimate(cdom, [Measurement(("a",), [50.0, 40.0, 31.0])], iters=200)
        >>> one_way = [Measurement(("a",), [50.0, 30.0, 40.0, 0.0, 1.0], stddev=5.0)]
        >>> spread_for("measured", {"a": np.array([0, 2, 1, 2, 2])}, one_way, m)["a"].round(2).tolist()
        [1.0, 0.94, 1.0, 0.01, 0.05]
    """
    if check_choice(merged_values, "merged_values", MERGED_VALUES, "spread_for") == "uniform" or not mapping:
        return None
    return measured_spread(mapping, one_way, {a: np.asarray(model.marginal((a,)), np.float64) for a in mapping})


def _shrunk_shares(y: np.ndarray, var: np.ndarray, total: float) -> np.ndarray:
    """:func:`measured_spread` for one merged value: the shares of its ``k`` original values."""
    k = y.size
    if not total > 0:
        return np.full(k, 1.0 / k)
    even = np.full(k, total / k)
    p = _simplex_projection(y, total)
    active = p > 0
    r = int(active.sum())
    step = p - even
    norm = float(step @ step)
    if norm == 0.0 or r == 0:  # nothing to shrink, or a total far below the counts lost to rounding: even
        return np.full(k, 1.0 / k)
    divergence = float(var[active].sum()) * (1.0 - 1.0 / r)
    lam = min(1.0, max(0.0, (float((y - even) @ step) - divergence) / norm))
    shares = np.maximum((even + lam * step) / total, 1e-12 / k)
    return shares / shares.sum()


def _simplex_projection(y: np.ndarray, total: float) -> np.ndarray:
    """The Euclidean projection of ``y`` onto ``{x >= 0, sum x = total}`` (``total > 0``): ``max(y - tau, 0)``."""
    desc = np.sort(y)[::-1]
    excess = np.cumsum(desc) - total
    ranks = np.arange(1, y.size + 1)
    # The first rank always qualifies (its test is total > 0), unless a total far below the counts rounds it away.
    above = np.flatnonzero(desc - excess / ranks > 0)
    r = int(above[-1]) + 1 if above.size else 1
    return np.maximum(y - excess[r - 1] / r, 0.0)


def decompress_data(data: Dataset, mapping: Mapping[str, np.ndarray], domain: Domain, key,
                    spread: Mapping[str, np.ndarray] | None = None) -> Dataset:
    """Undo :func:`compress_data`: each compressed value becomes one of its original values, drawn by ``spread``.

    A kept value has one preimage (itself, renumbered back); an "other" value becomes one of the values merged into
    it: uniformly at random without ``spread`` (the reference code's ``reverse_data``), else value ``x`` with
    probability ``spread[a][x]``. The randomness comes from ``key`` (one ``jax.random.split`` per compressed
    attribute).

    Args:
        data: records over the compressed domain.
        mapping: as returned by :func:`compress_domain`.
        domain: the original domain.
        key: a ``jax.random`` key.
        spread: per compressed attribute, each original value's share of its compressed value
            (:func:`uniform_spread`, :func:`measured_spread`); None: even.

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
        if spread is None:
            offset = dn.generator(k).integers(0, count[col])  # exact uniform integers; the same with or without x64
        else:  # inverse CDF within each compressed value's run of preimages
            cum = np.cumsum(np.asarray(spread[a], np.float64)[order])
            before = np.concatenate([[0.0], cum])[start]
            share = cum[start + count - 1] - before
            target = before[col] + dn.generator(k).random(col.size) * share[col]
            offset = np.minimum(np.searchsorted(cum, target, side="right") - start[col], count[col] - 1)
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


def decompress_model(model: GraphicalModel, mapping: Mapping[str, np.ndarray], domain: Domain,
                     spread: Mapping[str, np.ndarray] | None = None) -> GraphicalModel:
    """The compressed model as a model over the original domain (each merged value spread by ``spread``).

    ``p(x) = p_c(c(x)) prod_a spread_a(x_a)``, ``spread_a(x) = 1 / k_a(c_a(x))`` by default (``k_a(v)`` original
    values of ``a`` merged into ``v``): every potential is gathered through the mapping and each compressed
    attribute gets the one-way term ``log spread_a``. This is exactly the distribution of
    :func:`decompress_data` (with the same ``spread``) applied to records drawn from ``model``, and its marginals
    answer questions about the original values.

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
    spread = uniform_spread(mapping) if spread is None else spread
    for a in mapping:
        shares = np.asarray(spread[a], np.float64)
        if np.any(shares < 1.0):
            tables[(a,)] = tables.get((a,), 0.0) + np.log(shares)
    plan = make_plan(domain, model.cliques)
    theta = plan.from_tables(tables, model.dtype)
    return GraphicalModel(plan, theta, model.total)
