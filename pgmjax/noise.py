"""Noisy marginal measurements for experiments and tests (not a privacy mechanism: no accounting)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from .dataset import Dataset
from .domain import CliqueLike
from .measurement import Measurement


def noisy_marginals(
    data: Dataset, cliques: Sequence[CliqueLike], stddev: float, key: jax.Array, noise: str = "gaussian"
) -> list[Measurement]:
    """Identity measurements of ``cliques`` with i.i.d. noise of standard deviation ``stddev``.

    Args:
        data: the dataset.
        cliques: the cliques to measure.
        stddev: noise standard deviation (for Laplace noise, scale ``stddev / sqrt(2)``).
        key: a ``jax.random`` key; equal keys give equal noise.
        noise: ``"gaussian"`` or ``"laplace"``.

    Returns:
        One :class:`Measurement` per clique.
    """
    if noise not in ("gaussian", "laplace"):
        raise ValueError(f"noisy_marginals: noise must be 'gaussian' or 'laplace', got {noise!r}")
    tables = data.marginals(cliques)
    # One draw for all cliques: one compiled sampler whatever the clique shapes.
    cells = sum(t.size for t in tables)
    if noise == "gaussian":
        z = np.asarray(jax.random.normal(key, (cells,)), np.float64)
    else:
        z = np.asarray(jax.random.laplace(key, (cells,)), np.float64) / np.sqrt(2.0)
    out, start = [], 0
    for clique, table in zip(cliques, tables):
        out.append(Measurement(clique, table + stddev * z[start : start + table.size].reshape(table.shape), stddev=stddev, noise=noise))
        start += table.size
    return out
