"""A batch of models: one :class:`~pgmjax.GraphicalModel` whose numbers have a leading batch axis.

:func:`pgmjax.estimate_batch` (and ``jax.vmap`` of :func:`pgmjax.fit`) return B fitted models of one structure
as one model whose potentials and total carry a leading axis of size B. Its queries answer for every member
at once (``model.marginal(clique)`` is ``(B, *shape)``), each member's answer being that member's own, bit for
bit: :meth:`~pgmjax.GraphicalModel.member` gives member ``i`` as an ordinary model, the same as saved and
loaded (a batch's :class:`~pgmjax.model.fit_report.FitReport` has its own
:meth:`~pgmjax.model.fit_report.FitReport.member`). This module holds the batch's host-side helpers.
"""

from __future__ import annotations

import numpy as np

from ..compiler import to_device


def batch_size(model) -> int | None:
    """The number of members of a batch of models (the total's leading axis), or None for one model."""
    return None if np.ndim(model.total) == 0 else int(np.shape(model.total)[0])


def member_index(i, n: int, what: str) -> int:
    """``i`` as an index into a batch of ``n`` members (negative counts from the end), or an IndexError naming
    ``what``: one rule for a batch of models and a batch's report."""
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not -n <= i < n:
        raise IndexError(f"{what}: index {i!r} out of range for a batch of {n}")
    return int(i) % n


def member(model, i):
    """Member ``i`` (negative counts from the end) of a batch of models as an ordinary model (kept in the batch's
    :attr:`~pgmjax.GraphicalModel.cache`)."""
    i = member_index(i, batch_size(model), "GraphicalModel.member")
    kept = model.cache.members
    if i not in kept:
        # Sliced on the host: slicing device arrays would compile a small program per block shape.
        if "theta" not in kept:
            kept["theta"] = {k: np.asarray(v) for k, v in model.theta.items()}
        theta = {k: to_device(v[i]) for k, v in kept["theta"].items()}
        kept[i] = type(model)(model.plan, theta, float(np.asarray(model.total)[i]))
    return kept[i]


def each(model, f) -> list:
    """``f`` of every member, in order."""
    return [f(member(model, i)) for i in range(batch_size(model))]


def stacked(results: list) -> list:
    """Per-member lists of arrays (one list per member) stacked into one ``(B, ...)`` array per position."""
    return [np.stack([r[j] for r in results]) for j in range(len(results[0]))]
