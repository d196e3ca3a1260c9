"""MWEM's query selection mode: one row of a Kronecker workload query, and its sensitivity.

Hardt, Ligett & McSherry, "A Simple and Practical Algorithm for Differentially Private Data Release",
NeurIPS 2012, Algorithm 1 selects single counting queries; the ICML 2019 experiment (McKenna, Sheldon
& Miklau, "Graphical-model based estimation and inference for differential privacy", Section 6)
selects rows of the workload's queries, kept factored here.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...data.domain import Domain


def row_sensitivity(query, domain: Domain, bounded: bool) -> float:
    """Largest sensitivity of one row ``w`` of a Kronecker workload query ``(Q_1 ⊗ ... ⊗ Q_k)``.

    Adding or removing a record changes ``w^T mu`` by one entry of ``w``: ``max |w_j|``. Replacing
    one moves it by ``w_k - w_j``: ``max(w) - min(w)`` (a single counting query has
    sensitivity 1 in both conventions). An entry of a Kronecker row is a product of one entry per
    factor row, so its extremes are among the products of the factor rows' extremes.
    """
    his, los = [], []
    for a, m in zip(query.clique, query.matrices):
        if m is None:  # identity: each row is a unit vector
            n = domain[a]
            his.append(np.ones(n))
            los.append(np.zeros(n) if n > 1 else np.ones(n))
        else:
            his.append(m.max(axis=1))
            los.append(m.min(axis=1))
    if not bounded:
        out = np.array(1.0)
        for hi, lo in zip(his, los):
            out = np.multiply.outer(out, np.maximum(np.abs(hi), np.abs(lo)))
        return float(out.max())
    best_hi = best_lo = None
    for pick in itertools.product((0, 1), repeat=len(his)):
        v = np.array(1.0)
        for s, hi, lo in zip(pick, his, los):
            v = np.multiply.outer(v, hi if s else lo)
        best_hi = v if best_hi is None else np.maximum(best_hi, v)
        best_lo = v if best_lo is None else np.minimum(best_lo, v)
    return float((best_hi - best_lo).max())


def kron_row(query, domain: Domain, row: int) -> tuple[np.ndarray, ...]:
    """Row ``row`` (flat index over the query's rows) of a Kronecker workload query, as a Kronecker query.

    One ``(1, n_a)`` matrix per attribute: the row is their Kronecker product. Kept factored, the
    engine's Lipschitz constant and total estimate stay per-attribute computations (a dense row over
    a 20,000-cell clique would make them 20,000 x 20,000 problems).
    """
    rows = tuple(domain[a] if m is None else m.shape[0] for a, m in zip(query.clique, query.matrices))
    index = np.unravel_index(row, rows)
    return tuple((np.eye(domain[a])[r] if m is None else m[r])[None, :] for a, m, r in zip(query.clique, query.matrices, index))
