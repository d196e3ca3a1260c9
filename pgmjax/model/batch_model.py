"""The batched model: B fitted graphical models of one structure answering queries together.

:class:`BatchedModel` holds potentials and clique marginals with a leading batch axis (one junction tree,
one oracle plan), answers ``marginal``/``answer`` for every member in one compiled call and hands out any
member as a :class:`pgmjax.GraphicalModel`. Built by :func:`pgmjax.fit.batch.estimate_batch`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..graph.oracle_plan import suits_loop_emitters
from ..data.domain import Clique, CliqueLike
from ..graph import oracle
from ..queries import factors as queries_mod
from . import inference
from .graphical_model import GraphicalModel, ModelStructure, _evidence_query


# --------------------------------------------------------------------------- the batched model
@jit(engine=True, loop_emitters=suits_loop_emitters)
def _marginals_batched(plan: oracle.OraclePlan, theta: dict, total) -> dict:
    return jax.vmap(lambda th, n: oracle.marginals(plan, th, n)[0])(theta, total)


def _answers_batched_impl(plans, used, plan, blocks, matrices, totals):
    def one(b, n):
        return inference._answer_many_impl(plans, {j: plan.table(b, j) for j in used}, matrices, n)

    return jax.vmap(one)(blocks, totals)


_answers_batched = jit(_answers_batched_impl, static_argnums=(0, 1))


class BatchedModel(ModelStructure):
    """B fitted graphical models of one structure (one junction tree), potentials stacked on a leading axis.

    Args:
        plan: the shared oracle plan.
        theta: log-potentials ``{block: (B, ...)}`` in the oracle's block layout.
        total: the members' totals, ``(B,)``.
        history: the per-chunk log of the fit (``loss`` and ``oracle_calls`` as ``(B,)`` arrays).
        marginals: optional, the members' clique marginals ``{block: (B, ...)}`` (computed on first use otherwise).
        losses: the members' final losses ``(B,)``.
        step_sizes: mirror descent's last step per member (for warm starts of :meth:`member`), or None.

    Queries answer for every member at once: ``marginal(clique)`` is ``(B, *shape)``; :meth:`member`
    gives member ``i`` as an ordinary :class:`~pgmjax.GraphicalModel`.
    """

    def __init__(self, plan, theta, total, history=None, *, marginals=None, losses=None, step_sizes=None):
        self.plan = plan
        self.theta = theta
        self.total = np.asarray(total, np.float64).reshape(-1)
        self.history = history or []
        self.losses = None if losses is None else np.asarray(losses, np.float64)
        self.step_sizes = None if step_sizes is None else np.asarray(step_sizes, np.float64)
        self._blocks = marginals

    def __len__(self) -> int:
        return self.total.shape[0]

    @property
    def _marginal_blocks(self) -> dict:
        if self._blocks is None:
            self._blocks = _marginals_batched(self.plan, self.theta, jnp.asarray(self.total, self.dtype))
        return self._blocks

    def member(self, i: int) -> GraphicalModel:
        """Member ``i`` (negative counts from the end) as an ordinary :class:`~pgmjax.GraphicalModel`."""
        n = len(self)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not -n <= i < n:
            raise IndexError(f"BatchedModel.member: index {i!r} out of range for a batch of {n}")
        i = int(i) % n
        history = [
            {"iteration": h["iteration"], "loss": float(h["loss"][i]), "oracle_calls": int(h["oracle_calls"][i]),
             "seconds": h["seconds"]}
            for h in self.history
        ]
        blocks = None if self._blocks is None else {k: v[i] for k, v in self._blocks.items()}
        model = GraphicalModel(self.plan, {k: v[i] for k, v in self.theta.items()}, self.total[i], history, marginals=blocks)
        if self.losses is not None:
            model.loss = float(self.losses[i])
        if self.step_sizes is not None:
            model.step_size = float(self.step_sizes[i])
        return model

    def clique_marginals(self) -> dict[Clique, np.ndarray]:
        """``{clique: (B, *shape)}`` float64 marginals of every model clique."""
        blocks = self._marginal_blocks
        out = {}
        for j, c in enumerate(self.cliques):
            out[c] = np.asarray(self.plan.table(blocks, j, batch_dims=1), np.float64)
        return out

    def marginal(self, attrs: CliqueLike, given: Mapping[str, int | Sequence[int]] | None = None) -> np.ndarray:
        """Every member's marginal over ``attrs``: ``(B, *domain.shape_of(attrs))`` (see
        :meth:`pgmjax.GraphicalModel.marginal`; ``given`` is evidence shared by all members)."""
        return self.marginals([attrs], given=given)[0]

    def marginals(self, cliques: Sequence[CliqueLike], given: Mapping | None = None) -> list[np.ndarray]:
        """Many marginals of every member from one compiled program: a list of ``(B, *shape)`` arrays."""
        evidence = _evidence_query(self.domain, given)
        queries = []
        for attrs in cliques:
            attrs = self.domain.check_clique(attrs, what="marginal of")
            clash = [a for a in attrs if a in evidence]
            if clash:
                raise ValueError(f"marginal of {attrs}: {clash} also appear in `given`; condition on other attributes")
            queries.append(({a: queries_mod.Identity() for a in attrs} | evidence, len(attrs)))
        answers = self.answers([q for q, _ in queries])
        return [a.reshape(a.shape[: k + 1]) for a, (_, k) in zip(answers, queries)]

    def answer(self, query: Mapping[str, object]) -> np.ndarray:
        """Every member's answer to a factored query (see :meth:`pgmjax.GraphicalModel.answer`): ``(B, ...)``."""
        return self.answers([query])[0]

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        """Several factored queries, every member, one compiled program: a list of ``(B, ...)`` arrays."""
        plans, mats = [], []
        for q in queries:
            attrs, matrices = queries_mod.resolve(self.domain, q)
            plans.append(inference.plan_query(self.plan.tree, attrs, tuple(m is None for m in matrices)))
            mats.append(matrices)
        if not plans:
            return []
        used = tuple(sorted({c for p in plans for c in p.cliques}))
        dt = self.dtype
        mats = tuple(tuple(None if q is None else jnp.asarray(q, dt) for q in m) for m in mats)
        out = _answers_batched(tuple(plans), used, self.plan, self._marginal_blocks, mats, jnp.asarray(self.total, dt))
        return [np.asarray(o, np.float64) for o in out]

    def __repr__(self) -> str:
        return (
            f"BatchedModel({len(self)} members, {len(self.domain)} attributes, {len(self.cliques)} cliques, "
            f"treewidth {self.plan.tree.treewidth})"
        )
