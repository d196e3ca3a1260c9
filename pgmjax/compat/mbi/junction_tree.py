"""``mbi.junction_tree.hypothetical_model_size``, backed by pgmjax's triangulation."""

from __future__ import annotations

from ...mechanisms.steps import hypothetical_model_size as _size
from .values import Domain, as_cliques

__all__ = ["hypothetical_model_size"]


def hypothetical_model_size(domain: Domain, cliques) -> float:
    """The size in MB (``8 * cells / 2^20``) of the model over ``cliques``: its junction tree's tables, as
    :func:`pgmjax.estimate` would build them.

    Example:
        >>> round(hypothetical_model_size(Domain(["a", "b", "c"], [10, 10, 10]), [("a", "b"), {"b", "c"}]) * 2**17)
        200
    """
    return _size(domain.to_pgmjax(), as_cliques(cliques))
