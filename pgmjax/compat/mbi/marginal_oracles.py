"""``mbi.marginal_oracles``: the names callers pass to ``mirror_descent(marginal_oracle=...)``. pgmjax runs its own
exact oracle (a compiled junction tree in log space); these stand for ``mbi``'s and are not called."""

from __future__ import annotations

__all__ = ["message_passing_stable", "message_passing_fast", "message_passing_shafer_shenoy"]


def _oracle(name: str):
    def oracle(*args, **kwargs):
        raise NotImplementedError(f"pgmjax.compat.mbi: {name} is accepted by mirror_descent(marginal_oracle=...) only; "
                                  "pgmjax computes marginals with its own junction tree")

    oracle.__name__ = oracle.__qualname__ = name
    return oracle


message_passing_stable = _oracle("message_passing_stable")
message_passing_fast = _oracle("message_passing_fast")
message_passing_shafer_shenoy = _oracle("message_passing_shafer_shenoy")
