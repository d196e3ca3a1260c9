"""Plain NumPy float64 reference versions of the kernels, for tests."""

from __future__ import annotations

import numpy as np


def logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(x), axis=axis))


def gather_logsumexp(table, index):
    table = np.asarray(table, dtype=np.float64)
    return logsumexp(table[np.asarray(index)], axis=-1)


def log_einsum(subscripts, *log_factors):
    with np.errstate(divide="ignore"):
        return np.log(np.einsum(subscripts, *[np.exp(np.asarray(f, dtype=np.float64)) for f in log_factors]))
