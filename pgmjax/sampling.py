"""Synthetic records from a graphical model: forward sampling along the junction tree.

The model factorises as ``p(x) = p(x_root) prod_c p(x_c \\ sep(c) | x_sep(c))``,
so records are drawn clique by clique from the root down, each clique's new
attributes from the conditional table row picked by the separator values
already drawn. Every draw is an inverse-CDF lookup by binary search in that
row, vectorised over records, so memory is ``O(records)`` per clique (never
``records x cells``) and records are processed in chunks.

Two ways to turn uniforms into draws:

* ``"exact"``: i.i.d. uniforms, an exact sample of the model.
* ``"low_variance"``: systematic sampling within each separator group
  (records that share the separator's values get the stratified uniforms
  ``(rank + U) / n_group`` in a random order), so each group's counts are the
  model's conditional counts rounded up or down; at the root this makes every
  cell count ``floor`` or ``ceil`` of ``n p(cell)``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .dataset import Dataset

METHODS = ("exact", "low_variance")


def synthetic_data(model, n: int, key: jax.Array, method: str = "exact", chunk: int = 1 << 20) -> Dataset:
    """Draw ``n`` synthetic records from ``model``.

    Args:
        model: a fitted :class:`~pgmjax.GraphicalModel`.
        n: the number of records (``int(round(model.total))`` is the usual choice).
        key: a ``jax.random`` key; equal keys give equal data.
        method: ``"exact"`` (i.i.d. forward sampling) or ``"low_variance"``
            (systematic sampling; clique counts match the model's closely).
        chunk: records drawn per compiled call; bounds the peak memory
            (about 40 bytes per record and attribute). The low-variance
            stratification holds within each chunk.

    Returns:
        A :class:`~pgmjax.Dataset` of ``n`` records (``.df`` for pandas).

    Example:
        >>> data = model.synthetic_data(100_000, jax.random.key(0))   # doctest: +SKIP
        >>> data.df.head()                                            # doctest: +SKIP
    """
    if method not in METHODS:
        raise ValueError(f"synthetic_data: method must be one of {METHODS}, got {method!r}")
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"synthetic_data: n must be a positive integer, got {n!r}")
    if isinstance(chunk, (bool, np.bool_)) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"synthetic_data: chunk must be a positive integer, got {chunk!r}")
    tree = model.junction_tree
    domain = model.domain
    tables = model._device_marginals
    order = sorted(range(len(tree.cliques)), key=lambda c: (tree.depth[c], c))
    steps = []
    for c in order:
        clique, sep = tree.cliques[c], tree.separators[c]
        new = tuple(a for a in clique if a not in sep)
        if not new:
            continue
        table = jnp.transpose(tables[c], [clique.index(a) for a in sep + new])
        s_cells, k_cells = domain.size(sep), domain.size(new)
        steps.append((sep, new, _conditional_cdf(table.reshape(s_cells, k_cells))))
    records = np.empty((n, len(domain)), dtype=np.int32 if max(domain.shape) < 2**31 else np.int64)
    for i, start in enumerate(range(0, n, chunk)):
        m = min(chunk, n - start)
        # Shapes are padded to a power of two so that a new record count rarely compiles anything;
        # padded rows are routed to an extra separator row and cut off.
        padded = min(chunk, 1 << max(4, (m - 1).bit_length()))
        chunk_key, shuffle_key = jax.random.split(jax.random.fold_in(key, i))
        valid = jnp.arange(padded) < jnp.asarray(m, jnp.int32)
        columns: dict[str, jax.Array] = {}
        for j, (sep, new, cdf) in enumerate(steps):
            sep_codes = jnp.where(valid, _ravel(columns, sep, domain, padded), cdf.shape[0] - 1)
            draws = _draw(cdf, sep_codes, jax.random.fold_in(chunk_key, j), method == "low_variance")
            for a, col in zip(new, jnp.unravel_index(draws, domain.shape_of(new))):
                columns[a] = col.astype(jnp.int32)
        block = np.stack([np.asarray(columns[a])[:m] for a in domain.attributes], axis=1)
        if method == "low_variance":  # records were laid out group by group; shuffle the row order
            order = np.asarray(jax.random.permutation(shuffle_key, padded))
            block = block[order[order < m]]
        records[start : start + m] = block
    return Dataset._trusted(records, domain)


def _ravel(columns: dict, attrs: tuple, domain, m: int) -> jax.Array:
    code = jnp.zeros(m, jnp.int32)
    for a in attrs:
        code = code * domain[a] + columns[a]
    return code


@jax.jit
def _conditional_cdf(table: jax.Array) -> jax.Array:
    """Row-wise CDF of a ``(separator cells, new cells)`` table plus one uniform row; last column exactly 1."""
    table = jnp.maximum(table, 0)
    rows = jnp.sum(table, axis=1, keepdims=True)
    # A separator value of probability 0 is never drawn; a uniform row keeps the lookup defined.
    table = jnp.where(rows > 0, table, 1.0)
    table = jnp.concatenate([table, jnp.ones_like(table[:1])])  # the row of padded records
    cdf = jnp.cumsum(table, axis=1)
    return cdf / cdf[:, -1:]


@functools.partial(jax.jit, static_argnums=3)
def _draw(cdf: jax.Array, sep_codes: jax.Array, key: jax.Array, low_variance: bool) -> jax.Array:
    s_cells, k_cells = cdf.shape
    m = sep_codes.shape[0]
    if low_variance:
        k_perm, k_off = jax.random.split(key)
        # One two-key sort: grouped by separator, in random order within a group.
        tiebreak = jax.random.bits(k_perm, (m,), jnp.uint32)
        sorted_codes, _, order = jax.lax.sort((sep_codes, tiebreak, jnp.arange(m)), num_keys=2)
        counts = jnp.bincount(sep_codes, length=s_cells)
        starts = jnp.cumsum(counts) - counts
        rank = jnp.arange(m) - starts[sorted_codes]
        offset = jax.random.uniform(k_off, (s_cells,), dtype=cdf.dtype)
        u_sorted = (rank + offset[sorted_codes]) / counts[sorted_codes]
        u = jnp.zeros(m, cdf.dtype).at[order].set(u_sorted)
    else:
        u = jax.random.uniform(key, (m,), dtype=cdf.dtype)
    flat = cdf.reshape(-1)
    base = sep_codes * k_cells
    lo = jnp.zeros(m, jnp.int32)
    hi = jnp.full(m, k_cells - 1, jnp.int32)
    # Smallest k with cdf[k] > u: cdf[-1] == 1 > u, so the search always ends inside the row.
    for _ in range(max(1, int(np.ceil(np.log2(k_cells))))):
        mid = (lo + hi) // 2
        right = flat[base + mid] <= u
        lo = jnp.where(right, mid + 1, lo)
        hi = jnp.where(right, hi, mid)
    return lo
