"""Randomized response on whole records or per attribute: the sampler (no accounting).

k-ary randomized response (Warner 1965; Wang, Ying & Zhang, "A Minimax Distortion View of Differentially
Private Query Release", section III) keeps a record with probability ``e^eps / (e^eps + K - 1)`` and
otherwise reports one of the other ``K - 1`` rows of the domain uniformly: ``eps``-DP under replace-one
neighbours. It is drawn here without enumerating the domain and without floating-point shortcuts:

* whether a record changes is ``Bernoulli(A / (1 + A))`` with ``A = (K - 1) e^-eps = exp(-g)``,
  ``g = eps - ln(K - 1)``, by a two-sided rejection whose only biased coin is the exact
  :func:`~pgmjax.privacy.discrete_noise.bernoulli_exp` (no probability rounds to zero at any epsilon);
* a changed record is a uniform row of the domain (exact integer uniforms per attribute), redrawn
  while it equals the original (probability ``1/K`` per draw).

The front-ends call :meth:`pgmjax.privacy.Accountant.randomized_response`, which checks, records and
calls :func:`randomize_records`.
"""

from __future__ import annotations

import math

import numpy as np

from .discrete_noise import bernoulli_exp

__all__ = ["keep_probability", "randomize_records"]


def keep_probability(epsilon: float, k: int) -> float:
    """``P(report the true row) = e^eps / (e^eps + K - 1)`` of k-ary randomized response (for reporting).

    Example:
        >>> round(keep_probability(math.log(3.0), 2), 6)
        0.75
    """
    if k <= 1:
        return 1.0
    return 1.0 / (1.0 + (k - 1) * math.exp(-epsilon))


def _changes(rng: np.random.Generator, n: int, epsilon: float, k: int) -> np.ndarray:
    """``n`` draws of ``Bernoulli(A / (1 + A))``, ``A = (k - 1) e^-eps``, exactly up to the float ``g``."""
    if k <= 1:
        return np.zeros(n, dtype=bool)
    g = epsilon - math.log(k - 1)  # A = exp(-g)
    out = np.zeros(n, dtype=bool)
    todo = np.arange(n)
    while todo.size:
        side = rng.random(todo.size) < 0.5  # True: propose "change"; False: propose "keep"
        if g >= 0:  # weights A <= 1 for change, 1 for keep
            accept = np.where(side, bernoulli_exp(rng, np.full(todo.size, g)), True)
        else:  # weights 1 for change, 1/A = exp(g) < 1 for keep
            accept = np.where(side, True, bernoulli_exp(rng, np.full(todo.size, -g)))
        out[todo[accept]] = side[accept]
        todo = todo[~accept]
    return out


def _other_rows(rng: np.random.Generator, rows: np.ndarray, sizes) -> np.ndarray:
    """A uniform row of the domain different from each given row (rejection; never enumerates the domain)."""
    out = rows.copy()
    todo = np.arange(rows.shape[0])
    while todo.size:
        draw = np.stack([rng.integers(0, s, size=todo.size) for s in sizes], axis=1)
        differs = np.any(draw != rows[todo], axis=1)
        out[todo[differs]] = draw[differs]
        todo = todo[~differs]
    return out


def randomize_records(rng: np.random.Generator, records: np.ndarray, sizes, epsilon: float, *, per_attribute: bool = False) -> np.ndarray:
    """k-ary randomized response on each record (``K`` = product of ``sizes``), or on each attribute.

    Args:
        rng: a :func:`pgmjax.privacy.discrete_noise.generator`.
        records: ``(n, d)`` integer codes.
        sizes: the ``d`` attribute domain sizes.
        epsilon: the whole record's epsilon; ``per_attribute`` splits it equally (``eps / d`` each,
            sequential composition).
        per_attribute: randomize each attribute separately (``K = sizes[i]``).

    Returns:
        ``(n, d)`` int64 codes.

    Example:
        >>> from pgmjax.privacy.discrete_noise import generator
        >>> import jax
        >>> out = randomize_records(generator(jax.random.key(0)), np.zeros((5, 2), int), [3, 4], 1e6)
        >>> out.tolist() == np.zeros((5, 2), int).tolist()     # eps huge: every record kept
        True
    """
    x = np.asarray(records, dtype=np.int64)
    sizes = [int(s) for s in sizes]
    if x.ndim != 2 or x.shape[1] != len(sizes):
        raise ValueError(f"randomize_records: records must be (n, {len(sizes)}), got shape {x.shape}")
    if per_attribute:
        out = x.copy()
        eps = epsilon / len(sizes)
        for j, s in enumerate(sizes):
            change = _changes(rng, x.shape[0], eps, s)
            out[change, j : j + 1] = _other_rows(rng, x[change, j : j + 1], [s])
        return out
    k = math.prod(sizes)
    change = _changes(rng, x.shape[0], epsilon, k)
    out = x.copy()
    out[change] = _other_rows(rng, x[change], sizes)
    return out
