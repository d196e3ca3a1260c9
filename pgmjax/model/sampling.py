"""Synthetic records from a graphical model: forward sampling along the junction tree.

The model factorises as ``p(x) = p(x_root) prod_c p(x_c \\ sep(c) | x_sep(c))``,
so records are drawn clique by clique from the root down, each clique's new
attributes from the conditional table row picked by the separator values
already drawn. Every draw is an inverse-CDF lookup by binary search in that
row, vectorised over records, so memory is ``O(records)`` per clique (never
``records x cells``) and records are processed in chunks.

Two ways to turn uniforms into draws:

* ``"exact"``: i.i.d. uniforms, an exact sample of the model.
* ``"low_variance"``: controlled rounding (:mod:`pgmjax.model.rounding`). Clique by
  clique from the root, the targets ``n p(c)`` are rounded to integer counts
  whose sums over the parent separator equal the counts already drawn, with
  every cell and every child separator's count the floor or ceiling of its
  target where the solver can achieve it (always with one child separator per
  clique, e.g. any tree of pairs); records of each separator group then get
  the new attributes' values in a random order. Clique counts are thus within
  1 of ``n p(c)`` (the reached maximum is reported by the tests and the
  benchmark), instead of the ``O(sqrt(n p))`` of i.i.d. draws.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

import math

from ..data.dataset import Dataset
from ..graph.size_limit import check_peak
from .rounding import controlled_round
from ..compiler import jit

METHODS = ("exact", "low_variance")


def synthetic_data(model, n: int, key: jax.Array, method: str = "exact", chunk: int = 1 << 20) -> Dataset:
    """Draw ``n`` synthetic records from ``model``.

    Args:
        model: a fitted :class:`~pgmjax.GraphicalModel`.
        n: the number of records (``int(round(model.total))`` is the usual choice).
        key: a ``jax.random`` key; equal keys give equal data.
        method: ``"exact"`` (i.i.d. forward sampling) or ``"low_variance"``
            (controlled rounding; clique counts within about 1 of the model's).
        chunk: records drawn per compiled call by ``"exact"``; bounds the peak
            memory (about 40 bytes per record and attribute). ``"low_variance"``
            rounds all records in one host pass (about 24 bytes per record and
            attribute, plus the solver's work on each clique table).

    Returns:
        A :class:`~pgmjax.Dataset` of ``n`` records (``.df`` for pandas).

    Raises:
        ValueError: a bad ``method``, ``n`` or ``chunk``.
        FloatingPointError: the model is not finite and consistent (``model.check``).

    Example:
        >>> import pgmjax as pj
        >>> domain = pj.Domain({"a": 2, "b": 3})
        >>> model = pj.estimate(domain, [pj.Measurement(("a", "b"), [10.0, 20, 30, 40, 50, 60])], iters=200)
        >>> data = model.synthetic_data(1000, jax.random.key(0))
        >>> len(data), list(data.df.columns)
        (1000, ['a', 'b'])
        >>> synthetic_data(model, 1000, jax.random.key(0), method="low_variance").marginal(("a", "b")).tolist()
        [[47.0, 96.0, 142.0], [191.0, 238.0, 286.0]]
    """
    if method not in METHODS:
        raise ValueError(f"synthetic_data: method must be one of {METHODS}, got {method!r}")
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"synthetic_data: n must be a positive integer, got {n!r}")
    if isinstance(chunk, (bool, np.bool_)) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"synthetic_data: chunk must be a positive integer, got {chunk!r}")
    # A NaN or inconsistent model would give plausible-looking records (NaN CDFs fall through the search).
    model.check("synthetic_data")
    domain = model.domain
    dtype = _record_dtype(domain)
    # The whole table is held here: refused up front where it cannot be (sample_chunks streams instead).
    # Controlled rounding holds about LOW_VARIANCE_BYTES_PER_VALUE a record and attribute in one host pass.
    per = LOW_VARIANCE_BYTES_PER_VALUE if method == "low_variance" else dtype.itemsize
    check_peak(n * len(domain) * per + sampler_peak_bytes(model, min(chunk, n)), "synthetic_data",
               f"{n:,} records of {len(domain)} attributes ({method})", f"{per} bytes a value, held at once; the "
               "sampler's tables and a chunk beside them",
               hint="; draw them in chunks with pgmjax.model.sampling.sample_chunks (pgmjax sample streams them to its "
                    "output), or raise the limit: pgmjax.set_max_model_bytes(<bytes>)")
    if method == "low_variance":
        return _low_variance(model, n, key)
    records = np.empty((n, len(domain)), dtype=dtype)
    start = 0
    for block in sample_chunks(model, n, key, chunk):
        records[start : start + len(block)] = block
        start += len(block)
    return Dataset._trusted(records, domain)


def sample_chunks(model, n: int, key: jax.Array, chunk: int = 1 << 20):
    """Draw ``n`` records from ``model`` as a stream of NumPy blocks of at most ``chunk`` records each.

    The same records as :func:`synthetic_data` with ``method="exact"`` for the same key and ``chunk`` (it is
    built on this), in the same order, but only one block is held at a time: the peak is
    :func:`sampler_peak_bytes` whatever ``n`` is, so ``pgmjax sample`` writes any number of records.

    Args:
        model: a fitted :class:`~pgmjax.GraphicalModel`.
        n: the number of records.
        key: a ``jax.random`` key; equal keys (and chunks) give equal records.
        chunk: records per block (and per compiled call).

    Yields:
        ``(m, len(domain))`` integer arrays, columns in the domain's order.

    Example:
        >>> import pgmjax as pj
        >>> model = pj.estimate(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), [10.0, 20, 30, 40, 50, 60])], iters=50)
        >>> [len(b) for b in sample_chunks(model, 2500, jax.random.key(0), chunk=1000)]
        [1000, 1000, 500]
    """
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"sample_chunks: n must be a positive integer, got {n!r}")
    if isinstance(chunk, (bool, np.bool_)) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"sample_chunks: chunk must be a positive integer, got {chunk!r}")
    model.check("sample_chunks")
    check_peak(sampler_peak_bytes(model, min(chunk, n)), "sample_chunks",
               f"the sampler's peak working set ({min(chunk, n):,} records a chunk)",
               "its conditional tables and one chunk", hint="; pass a smaller chunk, or raise the limit: "
               "pgmjax.set_max_model_bytes(<bytes>)")
    tree = model.junction_tree
    domain = model.domain
    dtype = _record_dtype(domain)
    tables = model.device_marginals()
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
    for i, start in enumerate(range(0, n, chunk)):
        m = min(chunk, n - start)
        # Shapes are padded to a power of two so that a new record count rarely compiles anything;
        # padded rows are routed to an extra separator row and cut off.
        padded = min(chunk, 1 << max(4, (m - 1).bit_length()))
        chunk_key = jax.random.fold_in(key, i)
        valid = jnp.arange(padded) < jnp.asarray(m, jnp.int32)
        columns: dict[str, jax.Array] = {}
        for j, (sep, new, cdf) in enumerate(steps):
            sep_codes = jnp.where(valid, _ravel(columns, sep, domain, padded), cdf.shape[0] - 1)
            draws = _draw(cdf, sep_codes, jax.random.fold_in(chunk_key, j))
            for a, col in zip(new, jnp.unravel_index(draws, domain.shape_of(new))):
                columns[a] = col.astype(jnp.int32)
        yield np.stack([np.asarray(columns[a])[:m] for a in domain.attributes], axis=1).astype(dtype, copy=False)


#: Bytes per record and attribute of ``"low_variance"`` sampling: its int64 columns, the random order of each
#: separator group and the stacked records (the docstring's "about 24 bytes per record and attribute").
LOW_VARIANCE_BYTES_PER_VALUE = 24

#: Bytes per record and attribute of one chunk in flight: the uniforms, the separator codes, the
#: binary search's bounds and the drawn columns as int32/float32 on the device (about 8 four-byte arrays),
#: and the host block they are stacked into.
CHUNK_BYTES_PER_VALUE = 40


def sampler_peak_bytes(model, chunk: int = 1 << 20) -> int:
    """The peak working set of :func:`sample_chunks` (and of :func:`synthetic_data` less its records), in bytes.

    Counted from what it allocates: per clique with new attributes its conditional table, transposed and
    its cumulative sums with a padding row (3 copies of the clique's marginal in the model's dtype), and one
    chunk in flight (:data:`CHUNK_BYTES_PER_VALUE` per record and attribute). It does not grow with the
    number of records.

    Args:
        model: a :class:`~pgmjax.GraphicalModel` (only its domain, cliques and dtype are read).
        chunk: records per chunk.

    Returns:
        Bytes (a Python int).

    Example:
        >>> import pgmjax as pj
        >>> model = pj.estimate(pj.Domain({"a": 2, "b": 3}), [pj.Measurement(("a", "b"), [10.0, 20, 30, 40, 50, 60])], iters=5)
        >>> sampler_peak_bytes(model, chunk=1000)
        80072
    """
    domain, tree = model.domain, model.junction_tree
    itemsize = np.dtype(model.dtype).itemsize if hasattr(model, "dtype") else 4
    tables = sum(3 * math.prod(int(domain[a]) for a in c) for c in tree.cliques)
    return itemsize * tables + CHUNK_BYTES_PER_VALUE * int(chunk) * len(domain)


def record_bytes(domain) -> int:
    """Bytes of one record as CSV integer codes at most: per attribute its largest code's digits and a separator.

    For a check of an output's size against free disk space before anything is drawn (decoded values
    depend on the schema: the codes are a lower bound there).

    Example:
        >>> import pgmjax as pj
        >>> record_bytes(pj.Domain({"a": 2, "b": 300}))
        6
    """
    return sum(len(str(int(domain[a]) - 1)) + 1 for a in domain.attributes)


#: Bytes per value of records held in memory: the int32 codes and one frame of them (``Dataset.df``), or, once
#: decoded to raw values (``Schema.decode``), a pointer and a Python object (a float or a short string) per value.
HELD_BYTES_PER_VALUE = {"codes": 8, "decoded": 64}


def check_held_records(attributes: int, n: int, where: str, decoded: bool = False, max_bytes: float | None = None) -> int:
    """Refuse, before anything is drawn (and before any budget is spent), ``n`` records a caller holds at once.

    For a caller that keeps the whole table (``pgmjax run`` keeps its records for the report and the
    evaluation); :func:`sample_chunks` and ``pgmjax sample`` stream instead.

    Args:
        attributes: the records' columns (the domain's attributes, or an input header's columns: a bound).
        n: the records.
        where: who asks (``"--records"``).
        decoded: the records are decoded to raw values (:data:`HELD_BYTES_PER_VALUE`).
        max_bytes: an explicit limit (default the limit in force).

    Returns:
        The bytes counted.

    Raises:
        ModelTooLarge: (a ValueError) naming the records, the bytes and the limit.

    Example:
        >>> check_held_records(2, 10**12, "--records")
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: --records: 1,000,000,000,000 records of 2 attributes held at once: 14.55 TB (8 bytes a value: the codes and a frame of them), above the limit ...
    """
    per = HELD_BYTES_PER_VALUE["decoded" if decoded else "codes"]
    what = "a pointer and a Python object" if decoded else "the codes and a frame of them"
    return check_peak(int(n) * int(attributes) * per, where, f"{int(n):,} records of {int(attributes)} attributes held at once",
                      f"{per} bytes a value: {what}", max_bytes,
                      hint="; ask for fewer records, or draw them with pgmjax sample --model DIR (it streams them to "
                           "its output), or raise the limit (--max-model-mb)")


def _record_dtype(domain) -> np.dtype:
    return np.dtype(np.int32 if max(domain.shape) < 2**31 else np.int64)


def _ravel(columns: dict, attrs: tuple, domain, m: int) -> jax.Array:
    code = jnp.zeros(m, jnp.int32)
    for a in attrs:
        code = code * domain[a] + columns[a]
    return code


@jit
def _conditional_cdf(table: jax.Array) -> jax.Array:
    """Row-wise CDF of a ``(separator cells, new cells)`` table plus one uniform row; last column exactly 1."""
    table = jnp.maximum(table, 0)
    rows = jnp.sum(table, axis=1, keepdims=True)
    # A separator value of probability 0 is never drawn; a uniform row keeps the lookup defined.
    table = jnp.where(rows > 0, table, 1.0)
    table = jnp.concatenate([table, jnp.ones_like(table[:1])])  # the row of padded records
    cdf = jnp.cumsum(table, axis=1)
    return cdf / cdf[:, -1:]


@jit
def _draw(cdf: jax.Array, sep_codes: jax.Array, key: jax.Array) -> jax.Array:
    s_cells, k_cells = cdf.shape
    m = sep_codes.shape[0]
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


def _low_variance(model, n: int, key: jax.Array) -> Dataset:
    """Records whose clique counts are controlled roundings of ``n p(c)`` (see the module docstring)."""
    tree, domain = model.junction_tree, model.domain
    rng = np.random.default_rng(np.asarray(jax.random.bits(key, (4,), jnp.uint32)))
    order = sorted(range(len(tree.cliques)), key=lambda c: (tree.depth[c], c))
    children: dict[int, list[int]] = {c: [] for c in order}
    for c in order:
        if tree.parent[c] >= 0:
            children[tree.parent[c]].append(c)
    columns: dict[str, np.ndarray] = {}
    sep_targets: dict[int, np.ndarray] = {}  # child -> targets of its separator cells, from the parent
    for c in order:
        clique, sep = tree.cliques[c], tree.separators[c]
        new = tuple(a for a in clique if a not in sep)
        axes = sep + new
        table = np.asarray(model.device_marginals()[c], np.float64)
        table = np.transpose(table, [clique.index(a) for a in axes]).reshape(domain.size(sep), domain.size(new))
        target = np.maximum(table, 0.0) * (n / float(model.total))
        rows_target = target.sum(axis=1)
        if c in sep_targets:  # make this clique's rows agree with the parent's view of the separator
            want = sep_targets[c]
            scale = np.divide(want, rows_target, out=np.zeros_like(want), where=rows_target > 0)
            target = target * scale[:, None]
        sep_code = _ravel_np(columns, sep, domain, n)
        row_totals = np.bincount(sep_code, minlength=target.shape[0])
        cells = np.arange(target.size)
        cell_values = np.unravel_index(cells, domain.shape_of(axes))
        families, fam_of = [], {}
        for child in children[c]:
            child_sep = tree.separators[child]
            key_attrs = tuple(a for a in axes if a in child_sep)
            if not any(a in new for a in key_attrs):
                fam_of[child] = None  # its counts are the rows', already fixed
                continue
            if key_attrs not in fam_of.values():
                families.append((key_attrs, _cell_codes(cell_values, axes, key_attrs, domain)))
            fam_of[child] = key_attrs
        families.sort(key=lambda f: -domain.size(f[0]))
        flat_target = target.ravel()
        counts, _ = controlled_round(flat_target, cells // target.shape[1], row_totals, [f for _, f in families], rng=rng)
        for child, key_attrs in fam_of.items():
            child_sep = tree.separators[child]
            by = tuple(a for a in axes if a in child_sep)
            code = _cell_codes(cell_values, axes, by, domain)
            sep_t = np.bincount(code, weights=flat_target, minlength=domain.size(by))
            perm = [by.index(a) for a in child_sep]
            sep_targets[child] = np.transpose(sep_t.reshape(domain.shape_of(by)), perm).ravel()
        # Records sorted by separator group (random order inside a group) take the group's new values.
        order_rec = np.lexsort((rng.random(n), sep_code))
        new_codes = np.repeat(cells % target.shape[1], counts)
        for a, col in zip(new, np.unravel_index(new_codes, domain.shape_of(new))):
            column = np.empty(n, np.int64)
            column[order_rec] = col
            columns[a] = column
    records = np.stack([columns[a] for a in domain.attributes], axis=1)
    dtype = np.int32 if max(domain.shape) < 2**31 else np.int64
    return Dataset._trusted(records.astype(dtype), domain)


def _ravel_np(columns: dict, attrs: tuple, domain, n: int) -> np.ndarray:
    if not attrs:
        return np.zeros(n, np.int64)
    return np.ravel_multi_index([columns[a] for a in attrs], domain.shape_of(attrs))


def _cell_codes(cell_values, axes: tuple, attrs: tuple, domain) -> np.ndarray:
    """Flat index of every table cell's values on ``attrs`` (a subset of ``axes``)."""
    if not attrs:
        return np.zeros(cell_values[0].shape if cell_values else (1,), np.int64)
    return np.ravel_multi_index([cell_values[axes.index(a)] for a in attrs], domain.shape_of(attrs))
