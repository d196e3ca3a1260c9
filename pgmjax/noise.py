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
    out = []
    tables = data.marginals(cliques)
    for clique, table, k in zip(cliques, tables, jax.random.split(key, len(cliques))):
        if noise == "gaussian":
            z = np.asarray(jax.random.normal(k, table.shape), np.float64)
        else:
            z = np.asarray(jax.random.laplace(k, table.shape), np.float64) / np.sqrt(2.0)
        out.append(Measurement(clique, table + stddev * z, stddev=stddev))
    return out
