"""Noisy linear measurements of clique marginals."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..data.domain import CliqueLike, Domain, as_clique
from .linear import LinearQuery


class Measurement:
    """Noisy answers ``y = Q mu_C + noise`` to linear queries of one clique's marginal.

    Args:
        clique: the attributes whose marginal ``mu_C`` is queried; the
            marginal's axes follow this order.
        y: the noisy answers (NumPy-convertible, or abstract inside a JAX transformation), flat ``(rows,)``; for the identity query also
            the marginal's shape (in the clique's attribute order; checked against the domain by
            :meth:`validate`), for a Kronecker query also ``(r_1, ..., r_k)``. Any other shape is
            refused, even of the right size (a transposed marginal would land in the wrong cells).
        stddev: noise standard deviation, a scalar or one per row. Laplace
            noise is given by its standard deviation too (``sqrt(2) * b``).
        query: None for the identity (the marginal itself); a dense matrix
            ``(rows, cells)``; a tuple of per-attribute matrices
            ``(Q_1, ..., Q_k)`` with ``Q_i`` of shape ``(r_i, size_i)`` whose
            Kronecker product is the query (never materialised); or a
            :class:`~pgmjax.queries.linear.LinearQuery` (held as :attr:`linear`).
        noise: the noise family, ``"gaussian"`` (default) or ``"laplace"``; the
            estimators use only ``stddev``, error laws and intervals also the family.

    Example:
        >>> m = Measurement(("age", "sex"), np.zeros((85, 2)), stddev=2.0)
        >>> m.rows
        170
    """

    __slots__ = ("clique", "y", "stddev", "linear", "noise", "_y_shape")

    def __init__(self, clique: CliqueLike, y, stddev=1.0, query=None, noise: str = "gaussian"):
        self.clique = as_clique(clique)
        if noise not in ("gaussian", "laplace"):
            raise ValueError(f"Measurement on {self.clique}: noise must be 'gaussian' or 'laplace', got {noise!r}")
        self.noise = noise
        if len(set(self.clique)) != len(self.clique):
            raise ValueError(f"Measurement on {self.clique}: an attribute appears more than once")
        # Answers abstract inside a JAX transformation (pgmjax.fit under vmap or grad) stay JAX arrays, their
        # values unchecked (they are not known yet); everything else about the measurement is checked the same.
        traced = isinstance(y, jax.core.Tracer)
        y = jnp.asarray(y) if traced else np.asarray(y, dtype=np.float64)
        self.linear = _check_query(self.clique, query)
        self._y_shape = y.shape  # checked against the clique's shape where the domain is known (validate)
        # Beyond the flat (rows,), y may take the answers' own shape: the marginal's for the identity, (r_1, ...,
        # r_k) for a Kronecker query; a dense or stacked query's answers are flat.
        expected = self.linear.sizes if self.linear.kind == "identity" else self.linear.row_shape
        if y.ndim > 1 and (self.linear.kind != "identity" or expected is not None) and y.shape != expected:
            raise ValueError(
                f"Measurement on {self.clique}: y has shape {y.shape} but the {self.linear.kind} query's answers "
                f"have shape {expected}{'' if expected is not None and len(expected) == 1 else f' (or flat, ({y.size},))'}: a {y.ndim}-D y of another shape would be read into "
                "the wrong rows"
            )
        y = y.reshape(-1)
        if self.linear.rows is None:  # an identity: one row per cell of the (flat) marginal
            self.linear = self.linear.with_sizes((y.size,))
        expected = self.linear.rows
        if expected is not None and y.size != expected:
            raise ValueError(f"Measurement on {self.clique}: the query has {expected} rows but y has {y.size} values")
        if not traced and not np.all(np.isfinite(y)):
            raise ValueError(f"Measurement on {self.clique}: y has non-finite values")
        self.y = y
        s = np.asarray(stddev, dtype=np.float64)
        if s.ndim > 1 or (s.ndim == 1 and s.size != y.size):
            raise ValueError(
                f"Measurement on {self.clique}: stddev must be a scalar or one per row ({y.size}), got shape {s.shape}"
            )
        if not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ValueError(f"Measurement on {self.clique}: stddev must be positive and finite, got {stddev!r}")
        # The loss weighs a row by 1 / stddev^2 and the total's rule by 1 / (rows * stddev^2): a stddev whose
        # square under- or overflows float64 would divide by zero or weigh a row by nothing.
        with np.errstate(over="ignore", divide="ignore", under="ignore"):
            weight = 1.0 / (np.max(s) ** 2 * y.size), 1.0 / np.min(s) ** 2
        if not all(np.isfinite(w) and w > 0 for w in weight):
            raise ValueError(
                f"Measurement on {self.clique}: stddev must lie where 1 / stddev**2 is a finite, nonzero float64 "
                f"(roughly 1e-154 < stddev < 1e154), got {stddev!r}")
        self.stddev = s

    @property
    def query(self):
        """The query as it was given: None (identity), the dense matrix, or the tuple of Kronecker factors
        (:attr:`linear` is the same query as a :class:`~pgmjax.queries.linear.LinearQuery`)."""
        if self.linear.kind == "identity":
            return None
        return self.linear.matrices if self.linear.kind == "kron" else self.linear.matrices[0]

    @property
    def rows(self) -> int:
        return self.y.size

    @property
    def kind(self) -> str:
        """``"identity"``, ``"dense"`` or ``"kron"``."""
        return self.linear.kind

    def row_stddev(self) -> np.ndarray:
        """The standard deviation of every row, shape ``(rows,)``."""
        return np.broadcast_to(self.stddev, (self.rows,)).astype(np.float64)

    def validate(self, domain: Domain, index: int | None = None) -> None:
        """Check the measurement against a domain; raise a ValueError naming what is wrong."""
        where = f"measurement {index} on {self.clique}" if index is not None else f"measurement on {self.clique}"
        domain.check_clique(self.clique, what=where[: -len(str(self.clique)) - 1])
        cells = domain.size(self.clique)
        if self.kind == "identity" and self.rows != cells:
            raise ValueError(
                f"{where}: y has {self.rows} values but the marginal has {cells} cells "
                f"(shape {domain.shape_of(self.clique)})"
            )
        shape = getattr(self, "_y_shape", None)  # absent on a measurement unpickled from an older pgmjax
        if self.kind == "identity" and shape is not None and len(shape) > 1 and shape != domain.shape_of(self.clique):
            raise ValueError(
                f"{where}: y has shape {shape} but the marginal on {self.clique} has shape "
                f"{domain.shape_of(self.clique)} (axes in the clique's order); give y in that shape or flat "
                f"({cells},) in row-major order of the clique"
            )
        if self.kind == "dense" and self.query.shape[1] != cells:
            raise ValueError(f"{where}: the query has {self.query.shape[1]} columns but the marginal has {cells} cells")
        if self.kind == "kron":
            for a, q, n in zip(self.clique, self.query, self.linear.sizes):
                columns = n if q is None else q.shape[1]  # None: the attribute's axis kept, of the query's size
                if columns != domain[a]:
                    raise ValueError(f"{where}: the query factor of {a!r} has {columns} columns but {a!r} has {domain[a]} values")

    def answer(self, marginal: np.ndarray) -> np.ndarray:
        """Apply the query to a (true or estimated) marginal, in NumPy."""
        return self.linear.apply(marginal)

    def lipschitz(self) -> float:
        """Largest eigenvalue of ``Q^T diag(1/stddev^2) Q``: the curvature of this measurement's L2 loss.

        Analytic for the identity and Kronecker queries (product of the
        factors' largest eigenvalues; with per-row stddev, an upper bound
        using the smallest stddev), eigen-decomposition or power iteration
        for dense queries (:meth:`~pgmjax.queries.linear.LinearQuery.lipschitz`).
        """
        return self.linear.lipschitz(1.0 / self.row_stddev() ** 2)

    def __repr__(self) -> str:
        sd = float(self.stddev) if self.stddev.ndim == 0 else f"per-row[{self.rows}]"
        return f"Measurement({self.clique}, rows={self.rows}, stddev={sd}, query={self.kind}, noise={self.noise})"


def _check_query(clique, query) -> LinearQuery:
    """The query of a measurement on ``clique`` as a :class:`LinearQuery`; errors name what is wrong."""
    if query is None or isinstance(query, LinearQuery):
        return LinearQuery.identity() if query is None else query
    if isinstance(query, (tuple, list)):
        factors = tuple(np.asarray(q, dtype=np.float64) for q in query)
        if len(factors) != len(clique):
            raise ValueError(
                f"Measurement on {clique}: a Kronecker query needs one matrix per attribute "
                f"({len(clique)}), got {len(factors)}"
            )
        for a, q in zip(clique, factors):
            if q.ndim != 2:
                raise ValueError(f"Measurement on {clique}: the query factor of {a!r} must be 2-D, got shape {q.shape}")
            if not np.all(np.isfinite(q)):
                raise ValueError(f"Measurement on {clique}: the query factor of {a!r} has non-finite entries")
        return LinearQuery.kron(factors)
    q = np.asarray(query, dtype=np.float64)
    if q.ndim != 2:
        raise ValueError(f"Measurement on {clique}: a dense query must be 2-D (rows, cells), got shape {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError(f"Measurement on {clique}: the query has non-finite entries")
    return LinearQuery.from_matrix(q)


def validate_measurements(domain: Domain, measurements: Sequence[Measurement], where: str | None = None) -> None:
    """Check every measurement against ``domain``; errors name the measurement (and ``where``, if given)."""
    prefix = f"{where}: " if where else ""
    for i, m in enumerate(measurements):
        if not isinstance(m, Measurement):
            raise TypeError(f"{prefix}measurement {i} is a {type(m).__name__}, expected pgmjax.Measurement")
        m.validate(domain, i)


def total_rule(measurements: Sequence[Measurement]) -> tuple[np.ndarray, float]:
    """The linear estimate of the number of records: row weights ``w`` (total ``= w . y`` over the stacked
    rows) and its variance (ICML 2019, Appendix E.1).

    Each measurement whose query row space contains the all-ones vector gives an unbiased estimate
    ``a^T y`` of the total with variance ``sum_r a_r^2 sigma_r^2`` (``a`` the minimum-variance solution of
    ``Q^T a = 1``; for Kronecker queries the product of the factors' solutions); the estimates are combined
    by inverse-variance weighting. ``w`` depends on the queries and noise scales only, not on ``y``.

    Returns:
        ``(w, variance)``.

    Raises:
        ValueError: when no measurement determines the total.
    """
    parts, den = [], 0.0
    for m in measurements:
        s2 = m.row_stddev() ** 2
        a = m.linear.total_weights(s2)
        if a is None:
            parts.append(np.zeros(m.rows))
            continue
        var = float(np.sum(a * a * s2))
        parts.append(a / var)
        den += 1.0 / var
    if den == 0.0:
        raise ValueError(
            "the total number of records cannot be estimated: no measurement's queries sum to the total; "
            "pass total= to estimate()"
        )
    return np.concatenate(parts) / den, 1.0 / den


def estimate_total(measurements: Sequence[Measurement]) -> tuple[float, float]:
    """Estimate the number of records from the measurements (:func:`total_rule` applied to their answers).

    Returns:
        ``(total, variance)``; the total is at least 1.

    Raises:
        ValueError: when no measurement determines the total.
    """
    w, var = total_rule(measurements)
    return max(float(w @ np.concatenate([m.y for m in measurements])), 1.0), var


def pool_repeats(measurements: Sequence[Measurement]) -> list[Measurement]:
    """Repeated measurements of one marginal combined into one by inverse-variance weighting.

    Identity measurements of the same clique (same attribute order) with answers ``y_1, ..., y_k`` and row
    standard deviations ``sigma_1, ..., sigma_k`` become one with answers ``sum_i y_i / sigma_i^2 / sum_i
    1 / sigma_i^2`` and standard deviation ``(sum_i 1 / sigma_i^2)^(-1/2)`` per row, at the first one's place.
    Their L2 loss (McKenna, Sheldon & Miklau, ICML 2019, Appendix C.2) is the original's less a constant, so a
    fit's gradients, its optimum and the estimate of the number of records (:func:`total_rule`) are the same;
    the pooled list keeps its structure when an adaptive mechanism measures a marginal again, so the fit's
    compiled program is reused. Not for the L1 loss, whose sum of absolute residuals does not pool.
    Other measurements (other queries, abstract answers) are left as they are, in order.

    Args:
        measurements: the measurements.

    Returns:
        A new list; a marginal measured once keeps its :class:`Measurement` object.

    Example:
        >>> ms = [Measurement(("a",), [10.0, 20.0], stddev=1.0), Measurement(("a",), [14.0, 24.0], stddev=1.0)]
        >>> [(m.y.tolist(), round(float(m.stddev), 4)) for m in pool_repeats(ms)]
        [([12.0, 22.0], 0.7071)]
    """
    groups: dict = {}
    order: list = []
    for i, m in enumerate(measurements):
        key = m.clique if m.kind == "identity" and not isinstance(m.y, jax.core.Tracer) else ("#", i)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(m)
    out = []
    for key in order:
        ms = groups[key]
        if len(ms) == 1:
            out.append(ms[0])
            continue
        w = [1.0 / m.row_stddev() ** 2 for m in ms]
        den = np.sum(w, axis=0)
        y = np.sum([wi * m.y for wi, m in zip(w, ms)], axis=0) / den
        sd = 1.0 / np.sqrt(den)
        out.append(Measurement(ms[0].clique, y, stddev=float(sd[0]) if np.all(sd == sd[0]) else sd, noise=ms[0].noise))
    return out
