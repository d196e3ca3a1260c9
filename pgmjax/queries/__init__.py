"""Queries: per-attribute query factors, workloads, and noisy measurements of clique marginals.

* :mod:`~pgmjax.queries.factors`: the per-attribute building blocks of factored (Kronecker) queries
  (:class:`Identity`, :class:`Prefix`, :class:`Range`, ...), re-exported here as ``pgmjax.queries.<name>``.
* :mod:`~pgmjax.queries.workload`: sets of marginal queries and their answers on data.
* :mod:`~pgmjax.queries.linear`: :class:`LinearQuery`, linear queries on a clique's marginal (identity, dense,
  Kronecker, stacks) with one apply, transpose, curvature and sensitivity, in NumPy and in JAX.
* :mod:`~pgmjax.queries.measurement`: a noisy answer ``y = Q mu_C + noise`` to linear queries of one clique.
* :mod:`~pgmjax.queries.constraints`: :class:`Constraint`, combinations of values no record holds (forbidden,
  allowed, functional dependencies), and what noisy measurements put on them; written in a schema file's raw
  values, :mod:`~pgmjax.queries.schema_constraints`.
* :mod:`~pgmjax.queries.public`: :class:`PublicData`, a public table or its marginals, used beside the private
  measurements at no privacy cost.

Example:
    >>> import pgmjax as pj
    >>> pj.queries.Prefix().matrix(3).tolist()
    [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
"""

from .factors import (
    AllRange,
    Compress,
    Identity,
    Mean,
    Moments,
    Prefix,
    QueryFactor,
    Range,
    Total,
    Value,
    ValueSet,
    factor_matrix,
    resolve,
)
from .constraints import Constraint, ForbiddenMass, forbidden_mass, possible_cells
from .linear import LinearQuery, kron_apply
from .public import PublicData

__all__ = [
    "QueryFactor",
    "Identity",
    "Total",
    "Value",
    "ValueSet",
    "Prefix",
    "Range",
    "AllRange",
    "Compress",
    "Mean",
    "Moments",
    "factor_matrix",
    "resolve",
    "kron_apply",
    "LinearQuery",
    "Constraint",
    "ForbiddenMass",
    "forbidden_mass",
    "possible_cells",
    "PublicData",
]
