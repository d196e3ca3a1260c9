"""Measurements as plain arrays and JSON: what a saved release or a checkpoint keeps of its noisy answers.

:func:`measurements_to_arrays` splits a list of :class:`~pgmjax.queries.measurement.Measurement` into NumPy
arrays (answers, standard deviations, query matrices) and a JSON-friendly description (cliques, noise families,
query forms); :func:`measurements_from_arrays` puts them back together, each one checked against the domain. The
arrays go to a NumPy archive (``np.savez``, read back with ``allow_pickle=False``: nothing in the file is executed),
the description to a JSON document beside it. Every query form round-trips: the marginal itself, a dense matrix,
a Kronecker product (identity factors kept as such) and stacks of those.

Example:
    >>> import numpy as np
    >>> from pgmjax.data.domain import Domain
    >>> from pgmjax.queries.measurement import Measurement
    >>> dom = Domain({"a": 2, "b": 3})
    >>> ms = [Measurement(("a", "b"), np.ones((2, 3)), 2.0), Measurement(("b",), [1.0, 2.0], 1.0, query=np.ones((2, 3)))]
    >>> arrays, meta = measurements_to_arrays(ms)
    >>> back = measurements_from_arrays(arrays, meta, dom)
    >>> [(m.clique, m.kind, m.rows) for m in back]
    [(('a', 'b'), 'identity', 6), (('b',), 'dense', 2)]
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from ..data.domain import Domain
from .linear import LinearQuery
from .measurement import Measurement

__all__ = ["measurements_to_arrays", "measurements_from_arrays"]


def measurements_to_arrays(measurements: Sequence[Measurement]) -> tuple[dict[str, np.ndarray], list[dict]]:
    """The arrays and the JSON description of ``measurements`` (inverse: :func:`measurements_from_arrays`).

    Args:
        measurements: concrete measurements (not traced inside a JAX transformation).

    Returns:
        ``(arrays, meta)``: arrays named ``y_<i>``, ``stddev_<i>`` and ``q_<i>_<j>`` (the query's matrices), and one
        dict per measurement (``clique``, ``noise``, ``query``: the query's form, its matrices by name).
    """
    arrays: dict[str, np.ndarray] = {}
    meta = []
    for i, m in enumerate(measurements):
        arrays[f"y_{i}"], arrays[f"stddev_{i}"] = np.asarray(m.y, np.float64), np.asarray(m.stddev, np.float64)
        counter = itertools.count()
        meta.append({"clique": list(m.clique), "noise": m.noise,
                     "query": _query_meta(m.linear, f"q_{i}", counter, arrays)})
    return arrays, meta


def measurements_from_arrays(arrays: Mapping[str, np.ndarray], meta: Sequence[Mapping], domain: Domain,
                             where: str = "measurements") -> list[Measurement]:
    """The measurements :func:`measurements_to_arrays` described, each checked against ``domain``.

    Args:
        arrays: the arrays (a mapping, or an open ``np.load`` archive).
        meta: the descriptions, one per measurement (one without ``query`` is of the marginal itself).
        domain: the domain the measurements are on.
        where: who reads them, for the messages.

    Returns:
        The measurements, in order.

    Raises:
        ValueError: a description or an array is missing or malformed, or a measurement does not fit ``domain``
            (naming the measurement's index).
    """
    out = []
    for i, m in enumerate(meta):
        try:
            clique = tuple(m["clique"])
            query = _query_of(m.get("query", {"kind": "identity"}), arrays, domain.shape_of(clique))
            y = np.asarray(arrays[f"y_{i}"], np.float64)
            measurement = Measurement(clique, y, stddev=np.asarray(arrays[f"stddev_{i}"], np.float64), query=query,
                                      noise=m["noise"])
            measurement.validate(domain, i)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: measurement {i} cannot be read back: {type(e).__name__}: {e}") from None
        out.append(measurement)
    return out


def _query_meta(q: LinearQuery, prefix: str, counter, arrays: dict) -> dict:
    if q.kind == "identity":
        return {"kind": "identity"}
    if q.kind == "stack":
        return {"kind": "stack", "terms": [_query_meta(t, prefix, counter, arrays) for t in q.terms]}
    names = []
    for matrix in q.matrices:
        if matrix is None:  # a Kronecker factor that keeps its attribute
            names.append(None)
            continue
        name = f"{prefix}_{next(counter)}"
        arrays[name] = np.asarray(matrix, np.float64)
        names.append(name)
    return {"kind": q.kind, "matrices": names}


def _query_of(meta: Mapping, arrays: Mapping, sizes: tuple) -> LinearQuery:
    kind = meta["kind"]
    if kind == "identity":
        return LinearQuery.identity(sizes)
    if kind == "stack":
        return LinearQuery.stack([_query_of(t, arrays, sizes) for t in meta["terms"]])
    matrices = [None if name is None else np.asarray(arrays[name], np.float64) for name in meta["matrices"]]
    if kind == "dense":
        return LinearQuery.from_matrix(matrices[0], sizes)
    if kind == "kron":
        return LinearQuery.kron(matrices, sizes)
    raise ValueError(f"unknown query form {kind!r}")
