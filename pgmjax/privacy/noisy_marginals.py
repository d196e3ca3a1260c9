"""Noisy marginals at a given noise level, for experiments: through the privacy layer, and priced."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax

from ..data.dataset import Dataset
from ..data.domain import CliqueLike
from ..queries.measurement import Measurement
from . import Accountant


def noisy_marginals(
    data: Dataset,
    cliques: Sequence[CliqueLike],
    stddev: float,
    key: jax.Array,
    noise: str = "gaussian",
    accountant: Accountant | None = None,
) -> list[Measurement]:
    """Identity measurements of ``cliques`` with noise of standard deviation ``stddev``, recorded.

    The noise level is given, not a budget: what it costs follows from it (Gaussian
    ``k / (2 stddev^2)`` zCDP for ``k`` cliques under add/remove neighbours, Laplace ``k sqrt(2) / stddev``
    epsilon). The noise is the privacy layer's floating-point-safe discrete noise, drawn and recorded by
    ``accountant`` (:meth:`pgmjax.privacy.Accountant.measure_many` with ``scale=``); without one, a fresh
    accountant with exactly that budget is used (pass your own to keep the ledger).

    Args:
        data: the dataset.
        cliques: the cliques to measure.
        stddev: noise standard deviation (for Laplace noise, scale ``stddev / sqrt(2)``).
        key: a ``jax.random`` key; equal keys give equal noise.
        noise: ``"gaussian"`` or ``"laplace"``.
        accountant: where to record the noise (zCDP for Gaussian noise); default a fresh one.

    Returns:
        One :class:`Measurement` per clique.

    Example:
        >>> data = Dataset(np.array([[0, 1], [1, 0], [1, 1]]), {"a": 2, "b": 2})
        >>> ms = noisy_marginals(data, [("a",), ("a", "b")], 10.0, jax.random.key(0))
        >>> [m.clique for m in ms], float(ms[0].stddev)
        ([('a',), ('a', 'b')], 10.0)
    """
    if noise not in ("gaussian", "laplace"):
        raise ValueError(f"noisy_marginals: noise must be 'gaussian' or 'laplace', got {noise!r}")
    stddev = float(stddev)
    if not (math.isfinite(stddev) and stddev > 0):
        raise ValueError(f"noisy_marginals: stddev must be positive and finite, got {stddev!r}")
    cliques = list(cliques)
    scale = stddev if noise == "gaussian" else stddev / math.sqrt(2.0)
    if accountant is None:
        probe = Accountant(rho=1.0) if noise == "gaussian" else Accountant(epsilon=1.0)
        sensitivity = probe.l1_sensitivity() if noise == "laplace" else probe.l2_sensitivity()
        budget = len(cliques) * probe.cost(noise, sensitivity=sensitivity, scale=scale) * (1 + 1e-12)
        accountant = Accountant(rho=budget) if noise == "gaussian" else Accountant(epsilon=budget)
    return accountant.measure_many(key, data, cliques, mechanism=noise, scale=scale)

