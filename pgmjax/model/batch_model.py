"""The batched model: B fitted graphical models of one structure answering queries together.

:class:`BatchedModel` holds potentials with a leading batch axis (one junction tree, one oracle plan),
answers ``marginal``/``answer`` for every member and hands out any member as a
:class:`pgmjax.GraphicalModel`. Built by :func:`pgmjax.fit.batch.estimate_batch`.

A member's answers are those of its own :class:`~pgmjax.GraphicalModel` (a function of its potentials and
total alone, one compiled marginal oracle shared by every member): the batch's answer for member ``i`` is
``batch.member(i)``'s, bit for bit, and that of the same model saved and loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..compiler import to_device
from ..data.domain import Clique, CliqueLike
from .graphical_model import GraphicalModel, ModelStructure


class BatchedModel(ModelStructure):
    """B fitted graphical models of one structure (one junction tree), potentials stacked on a leading axis.

    Args:
        plan: the shared oracle plan.
        theta: log-potentials ``{block: (B, ...)}`` in the oracle's block layout.
        total: the members' totals, ``(B,)``.
        history: the per-chunk log of the fit (``loss`` and ``oracle_calls`` as ``(B,)`` arrays).
        losses: the members' final losses ``(B,)``.
        step_sizes: mirror descent's last step per member (for warm starts of :meth:`member`), or None.

    Queries answer for every member at once: ``marginal(clique)`` is ``(B, *shape)``; :meth:`member`
    gives member ``i`` as an ordinary :class:`~pgmjax.GraphicalModel`, whose answers these are.

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 3})
        >>> ys = np.array([[[10.0, 20, 30], [5, 5, 30]], [[12.0, 18, 30], [5, 5, 30]]])
        >>> models = pj.estimate_batch(dom, [pj.BatchedMeasurement(("a", "b"), ys, stddev=1.0)], iters=200)
        >>> bool((models.marginal("a")[1] == models.member(1).marginal("a")).all())
        True
    """

    def __init__(self, plan, theta, total, history=None, *, losses=None, step_sizes=None):
        self.plan = plan
        self.theta = theta
        self.total = np.asarray(total, np.float64).reshape(-1)
        self.history = history or []
        self.losses = None if losses is None else np.asarray(losses, np.float64)
        self.step_sizes = None if step_sizes is None else np.asarray(step_sizes, np.float64)
        self._members: dict[int, GraphicalModel] = {}
        self._host_theta: dict | None = None

    def __len__(self) -> int:
        return self.total.shape[0]

    def member(self, i: int) -> GraphicalModel:
        """Member ``i`` (negative counts from the end) as an ordinary :class:`~pgmjax.GraphicalModel`."""
        n = len(self)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not -n <= i < n:
            raise IndexError(f"BatchedModel.member: index {i!r} out of range for a batch of {n}")
        i = int(i) % n
        if i not in self._members:
            history = [
                {"iteration": h["iteration"], "loss": float(h["loss"][i]), "oracle_calls": int(h["oracle_calls"][i]),
                 "seconds": h["seconds"]}
                for h in self.history
            ]
            # Sliced on the host: slicing device arrays would compile a small program per block shape.
            if self._host_theta is None:
                self._host_theta = {k: np.asarray(v) for k, v in self.theta.items()}
            theta = {k: to_device(v[i]) for k, v in self._host_theta.items()}
            model = GraphicalModel(self.plan, theta, self.total[i], history,
                                   loss=None if self.losses is None else float(self.losses[i]),
                                   step_size=None if self.step_sizes is None else float(self.step_sizes[i]))
            self._members[i] = model
        return self._members[i]

    def _each(self, f) -> list:
        return [f(self.member(i)) for i in range(len(self))]

    def clique_marginals(self) -> dict[Clique, np.ndarray]:
        """``{clique: (B, *shape)}`` float64 marginals of every model clique."""
        each = self._each(GraphicalModel.clique_marginals)
        return {c: np.stack([m[c] for m in each]) for c in self.cliques}

    def marginal(self, attrs: CliqueLike, given: Mapping[str, int | Sequence[int]] | None = None) -> np.ndarray:
        """Every member's marginal over ``attrs``: ``(B, *domain.shape_of(attrs))`` (see
        :meth:`pgmjax.GraphicalModel.marginal`; ``given`` is evidence shared by all members)."""
        return self.marginals([attrs], given=given)[0]

    def marginals(self, cliques: Sequence[CliqueLike], given: Mapping | None = None) -> list[np.ndarray]:
        """Many marginals of every member: a list of ``(B, *shape)`` arrays."""
        cliques = list(cliques)
        each = self._each(lambda m: m.marginals(cliques, given=given))
        return [np.stack([e[j] for e in each]) for j in range(len(cliques))]

    def answer(self, query: Mapping[str, object]) -> np.ndarray:
        """Every member's answer to a factored query (see :meth:`pgmjax.GraphicalModel.answer`): ``(B, ...)``."""
        return self.answers([query])[0]

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        """Several factored queries, every member: a list of ``(B, ...)`` arrays."""
        queries = list(queries)
        each = self._each(lambda m: m.answers(queries))
        return [np.stack([e[j] for e in each]) for j in range(len(queries))]

    def __repr__(self) -> str:
        return (
            f"BatchedModel({len(self)} members, {len(self.domain)} attributes, {len(self.cliques)} cliques, "
            f"treewidth {self.plan.tree.treewidth})"
        )
