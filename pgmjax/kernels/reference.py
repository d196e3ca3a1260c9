"""Plain NumPy float64 reference versions of the kernels, for tests."""

from __future__ import annotations

import numpy as np


def logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(x), axis=axis))


def log_einsum(subscripts, *log_factors):
    """Log of an einsum of exponentiated float64 factors, each shifted by its (finite) maximum first."""
    factors = [np.asarray(f, dtype=np.float64) for f in log_factors]
    shifts = [float(f.max()) if f.size and np.isfinite(f.max()) else 0.0 for f in factors]
    with np.errstate(divide="ignore"):
        return np.log(np.einsum(subscripts, *[np.exp(f - s) for f, s in zip(factors, shifts)])) + sum(shifts)


def sum_axes(x, axes, keepdims=False):
    return np.sum(np.asarray(x, dtype=np.float64), axis=tuple(axes), keepdims=keepdims)


def max_axes(x, axes, keepdims=False):
    return np.max(np.asarray(x, dtype=np.float64), axis=tuple(axes), keepdims=keepdims)


def marginalize(x, attrs, keep):
    drop = tuple(i for i, a in enumerate(attrs) if a not in keep)
    kept = [a for a in attrs if a in keep]
    return np.transpose(sum_axes(x, drop), [kept.index(a) for a in keep])


def segment_logsumexp(values, ids, num_segments):
    values = np.asarray(values, dtype=np.float64)
    out = np.full(num_segments, -np.inf)
    for s in range(num_segments):
        out[s] = logsumexp(values[np.asarray(ids) == s], axis=-1)
    return out
