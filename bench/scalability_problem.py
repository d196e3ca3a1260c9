"""Synthetic problem for the scalability benchmark (McKenna et al., ICML 2019, Fig. 2b).

This module defines, with numpy only, the problem that both the incumbent
(``mbi``) and our engine (``pgmjax``) are timed on, so that the two benchmarks
see bit-identical inputs:

* ``d`` attributes named ``"a0" ... "a{d-1}"``, each with 10 values;
* ``records`` (default 10,000) records drawn from a random first-order Markov
  chain: ``a0`` is uniform and ``a{i+1} | a{i}`` follows a random 10x10
  transition matrix whose rows are ``Dirichlet(0.5 * ones(10))``, so the
  marginals are far from uniform;
* measurements: the full 10x10x10 count table (identity query) of every
  consecutive triple ``(a{i}, a{i+1}, a{i+2})``, ``i = 0 .. d-3``, with i.i.d.
  Gaussian noise of standard deviation ``sigma`` (default 10) on every cell.

Randomness is fully determined by ``seed``: one ``numpy.random.SeedSequence``
is split into three independent streams (transition matrices, records,
noise), so e.g. changing ``sigma`` does not change the records. The problems
are nested: for ``d1 < d2`` (same seed, records and sigma), the data,
cliques and noisy counts of ``make_problem(d1)`` are a prefix of those of
``make_problem(d2)``.

Only numpy is imported here (no jax, mbi or pgmjax), so the module can be
used from any environment.
"""

from __future__ import annotations

import numpy as np

#: Number of values of every attribute.
CARDINALITY = 10
#: Number of attributes in every measured clique.
CLIQUE_SIZE = 3


def attribute_names(d: int) -> list[str]:
    """Return the attribute names ``["a0", ..., "a{d-1}"]``."""
    return [f"a{i}" for i in range(d)]


def sample_markov_chain(
    d: int, records: int, rng_transitions: np.random.Generator,
    rng_records: np.random.Generator,
) -> np.ndarray:
    """Sample records from a random first-order Markov chain.

    Args:
        d: Number of attributes (chain length).
        records: Number of records (rows).
        rng_transitions: Generator for the ``d - 1`` transition matrices.
        rng_records: Generator for the records themselves.

    Returns:
        An ``int64`` array of shape ``(records, d)`` with values in
        ``[0, CARDINALITY)`` (Fortran-ordered, i.e. columns are contiguous).
    """
    k = CARDINALITY
    # transitions[i, u, v] = P(a_{i+1} = v | a_i = u).
    transitions = rng_transitions.dirichlet(0.5 * np.ones(k), size=(d - 1, k))
    # thresholds[i, v, u] = P(a_{i+1} <= v | a_i = u) for v < k - 1; the
    # last CDF value (1 up to round-off) is never needed.
    thresholds = np.ascontiguousarray(
        np.cumsum(transitions, axis=-1)[:, :, : k - 1].transpose(0, 2, 1)
    )

    data = np.empty((d, records), dtype=np.int64)
    first = (rng_records.random(records) * k).astype(np.int64)
    data[0] = np.minimum(first, k - 1)  # a0 is uniform
    # The chain dependency forces a loop over attributes; each step is
    # vectorised over records. Inverse-CDF sampling: the next value is the
    # number of CDF thresholds that the uniform draw reaches. Uniforms are
    # drawn attribute by attribute, so column j only depends on the first
    # (j + 1) * records draws and the problems are nested across d.
    for i in range(d - 1):
        uniform = rng_records.random(records)
        current = data[i]
        nxt = np.zeros(records, dtype=np.int64)
        for v in range(k - 1):
            nxt += uniform >= thresholds[i, v].take(current)
        data[i + 1] = nxt
    return data.T  # (records, d) view, Fortran-ordered: columns contiguous


def triple_counts(data: np.ndarray) -> np.ndarray:
    """Exact count tables of all consecutive triples of columns.

    Args:
        data: ``int`` array of shape ``(records, d)``, values in
            ``[0, CARDINALITY)``.

    Returns:
        ``int64`` array of shape ``(d - 2, 10, 10, 10)`` whose entry
        ``[i, u, v, w]`` counts the records with ``a{i}=u, a{i+1}=v,
        a{i+2}=w``.
    """
    k = CARDINALITY
    columns = np.asarray(data, dtype=np.int64).T  # (d, records)
    m = columns.shape[0] - CLIQUE_SIZE + 1
    cells = k**CLIQUE_SIZE
    # Flat cell index of every (record, clique), offset by clique * cells.
    flat = columns[:-2] * (k * k) + columns[1:-1] * k + columns[2:]
    flat += (np.arange(m, dtype=np.int64) * cells)[:, None]
    counts = np.bincount(flat.ravel(), minlength=m * cells)
    return counts.reshape(m, k, k, k)


def make_problem(
    d: int, records: int = 10_000, sigma: float = 10.0, seed: int = 0
) -> dict:
    """Build the scalability benchmark problem.

    Args:
        d: Number of attributes (at least 3).
        records: Number of records.
        sigma: Standard deviation of the Gaussian noise added to every cell.
        seed: Seed of the numpy random streams.

    Returns:
        A dict with keys

        * ``domain``: ``{"a0": 10, "a1": 10, ...}`` in attribute order;
        * ``cliques``: list of ``d - 2`` name triples ``("a{i}", "a{i+1}",
          "a{i+2}")``;
        * ``noisy``: list of ``float64`` arrays of shape ``(10, 10, 10)``, the
          noisy counts of each clique (axes in clique order);
        * ``true``: list of ``int64`` arrays of shape ``(10, 10, 10)``, the
          exact counts of each clique;
        * ``sigma``: the noise standard deviation (float);
        * ``records``: the number of records (int);
        * ``data``: the ``(records, d)`` ``int64`` record array (for
          validation; not needed by estimators).
    """
    if d < CLIQUE_SIZE:
        raise ValueError(f"d must be at least {CLIQUE_SIZE}, got {d}")
    names = attribute_names(d)
    ss_transitions, ss_records, ss_noise = np.random.SeedSequence(seed).spawn(3)
    data = sample_markov_chain(
        d, records, np.random.default_rng(ss_transitions),
        np.random.default_rng(ss_records),
    )
    true = triple_counts(data)
    noise = np.random.default_rng(ss_noise).normal(0.0, sigma, size=true.shape)
    noisy = true + noise
    return {
        "domain": {name: CARDINALITY for name in names},
        "cliques": [tuple(names[i:i + CLIQUE_SIZE]) for i in range(len(true))],
        "noisy": list(noisy),
        "true": list(true),
        "sigma": float(sigma),
        "records": int(records),
        "data": data,
    }
