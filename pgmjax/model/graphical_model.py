"""A fitted graphical model: potentials over junction-tree cliques and a total."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ..compiler import to_device
from ..data.domain import Clique, CliqueLike, Domain, cells_text
from ..graph.size_limit import fmt_bytes
from ..graph import marginal_oracle, oracle
from ..queries import factors as queries_mod
from . import answer_programs, answering, batch_model, inference, query_plan, sampling
from .consistency import check_blocks, check_consistent
from .fit_report import host_scalar
from .model_files import save_model


#: :meth:`GraphicalModel.marginal` and :meth:`GraphicalModel.answers` compute on the host (float64, NumPy, nothing
#: compiled) where the tables a query reads hold up to this many cells; larger ones go through a compiled
#: program. Up to this size a host query takes less time than compiling a new query structure would
#: (``bench/NOTES.md`` has the measurements).
HOST_MARGINAL_CELLS = 2**22


class ModelStructure:
    """What a model (or a batch of models) reads off its plan and potentials: domain, cliques, tree, dtype."""

    plan: oracle.OraclePlan
    theta: dict

    @property
    def domain(self) -> Domain:
        return self.plan.domain

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return self.plan.cliques

    @property
    def junction_tree(self):
        return self.plan.tree

    @property
    def dtype(self):
        return jax.tree_util.tree_leaves(self.theta)[0].dtype


@dataclasses.dataclass(eq=False)
class AnswerCache:
    """What a model computed once and reads again: its one explicit cache (:attr:`GraphicalModel.cache`).

    Every entry is a function of the model's ``theta`` and ``total``, which never change (the model is frozen),
    so an entry never goes stale; None until first computed. Not part of the model's value: not compared, not a
    pytree child (a model rebuilt by a JAX transformation starts with an empty cache).
    """

    marginal_blocks: dict | None = None  # the clique marginals in the oracle's blocks
    device_marginals: dict | None = None  # {clique index: marginal table} on the device
    clique_marginals: dict | None = None  # {clique: marginal table} on the host, float64
    potentials: dict | None = None  # {clique: log-potential table} on the host, read-only
    host_blocks: dict = dataclasses.field(default_factory=dict)  # host copies of marginal blocks, as read
    members: dict = dataclasses.field(default_factory=dict)  # a batch's members, as made
    checked: bool = False  # check() passed


@dataclasses.dataclass(frozen=True, eq=False)
class GraphicalModel(ModelStructure):
    """The distribution ``p(x) ∝ exp(sum_c theta_c(x_c))`` scaled to ``total`` records.

    Args:
        plan: the oracle plan (junction tree and layout).
        theta: log-potentials in the oracle's block layout.
        total: the number of records the model stands for.

    The model is a frozen dataclass and a JAX pytree: ``theta`` and ``total`` are its leaves, the plan
    (hashed by value) its static structure, and nothing else is inside. It passes through ``jax.jit``,
    ``jax.vmap`` and ``jax.grad``, where its answers are traced arrays (:attr:`traced`), and a batch of
    models is one model whose leaves have a leading axis (``jax.vmap`` of :func:`pgmjax.fit`).
    :meth:`replace` gives a changed copy. What a fit learned about itself (its log, loss, step size) is a
    :class:`~pgmjax.model.fit_report.FitReport` beside the model (``pj.estimate(..., report=True)``).

    Every answer is a function of ``theta`` and ``total`` alone: the clique marginals come from one
    compiled program (the marginal oracle) on first use and are kept in :attr:`cache`, whether the model
    was just fitted, loaded from a file, taken from a batch or built by hand, so one model never gives two
    answers.

    Attributes:
        domain, cliques (junction-tree cliques holding potentials), total,
        potentials (``{clique: log-potential table}``), junction_tree, cache.

    Example:
        >>> model = pj.estimate(domain, measurements)            # doctest: +SKIP
        >>> model.marginal(("sex", "income")).sum() == model.total  # doctest: +SKIP
    """

    plan: oracle.OraclePlan
    theta: dict
    total: Any
    cache: AnswerCache = dataclasses.field(default_factory=AnswerCache, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "total", host_scalar(self.total))  # a concrete total reads as a Python float
        check_blocks(self.plan, self.theta)

    def replace(self, **changes) -> "GraphicalModel":
        """A new model with some of ``plan``, ``theta`` and ``total`` replaced (its cache starts empty).

        Example:
            >>> dom = pj.Domain({"a": 2})
            >>> plan = pj.graph.oracle.make_plan(dom, [("a",)])
            >>> pj.GraphicalModel(plan, plan.zeros(), 10.0).replace(total=30.0).marginal("a")
            array([15., 15.])
        """
        unknown = sorted(set(changes) - {"plan", "theta", "total"})
        if unknown:
            raise TypeError(f"GraphicalModel.replace: unknown field(s) {unknown}; expected some of "
                            "['plan', 'theta', 'total'] (a fit's loss, step size and log are its FitReport's)")
        return dataclasses.replace(self, **changes)

    def dense(self) -> "GraphicalModel":
        """The same model on the dense plan (:mod:`pgmjax.graph.oracle`): itself unless it was fitted with the
        size-class program (:mod:`pgmjax.graph.routed_oracle`), whose plan has no junction-tree structure inside a
        compiled program. What differentiates through the oracle or reads the tree inside ``jit`` (the
        uncertainty intervals' linearisation) runs on it.

        Example:
            >>> dom = pj.Domain({"a": 2, "b": 3})
            >>> m = pj.estimate(dom, [pj.Measurement(("a", "b"), np.arange(6.0) + 1)], iters=20, program="size_class")
            >>> type(m.dense().plan).__name__, bool(np.allclose(m.dense().marginal("a"), m.marginal("a")))
            ('OraclePlan', True)
        """
        if marginal_oracle.oracle_of(self.plan) is not marginal_oracle.SIZE_CLASS:
            return self
        plan, theta = self.plan.to_dense({k: np.asarray(v) for k, v in self.theta.items()}, batch_dims=0 if self.batch is None else 1)
        return self.replace(plan=plan, theta=theta)

    @property
    def batch(self) -> int | None:
        """The number of models in a batch of models (its numbers' leading axis: :func:`pgmjax.estimate_batch`,
        ``jax.vmap`` of :func:`pgmjax.estimation`), or None for one model."""
        return batch_model.batch_size(self)

    def __len__(self) -> int:
        if self.batch is None:
            raise TypeError("len() of one GraphicalModel: only a batch of models (model.batch is not None) has a length")
        return self.batch

    def member(self, i: int) -> "GraphicalModel":
        """Member ``i`` of a batch of models (negative counts from the end) as one model: its answers are the
        batch's answers for member ``i``, bit for bit.

        Example:
            >>> dom = pj.Domain({"a": 2, "b": 3})
            >>> ys = np.array([[[10.0, 20, 30], [5, 5, 30]], [[12.0, 18, 30], [5, 5, 30]]])
            >>> models = pj.estimate_batch(dom, [pj.BatchedMeasurement(("a", "b"), ys, stddev=1.0)], iters=200)
            >>> len(models), bool((models.marginal("a")[1] == models.member(1).marginal("a")).all())
            (2, True)
        """
        if self.batch is None:
            raise TypeError("GraphicalModel.member: this is one model, not a batch of models")
        return batch_model.member(self, i)

    def _one(self, what: str) -> None:
        """Refuse a host operation of one model on a batch of models."""
        if self.batch is not None:
            raise TypeError(f"{what}: this is a batch of {self.batch} models; take one with model.member(i)")

    @property
    def traced(self) -> bool:
        """Whether the model's numbers are abstract (inside ``jit``, ``vmap`` or ``grad``): its answers are then
        traced JAX arrays computed by the marginal oracle, and host-only methods (sampling, saving, summary)
        refuse."""
        return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves((self.theta, self.total)))

    @property
    def potentials(self) -> dict[Clique, np.ndarray]:
        """Each junction-tree clique's log-potential table (axes in the clique's order), as read-only NumPy
        arrays (cached). Indexed on the host, one transfer per block: slicing the device blocks dispatched a
        small computation per clique, which every warm start of a model of many cliques paid."""
        self._one("GraphicalModel.potentials")
        if self.cache.potentials is None:
            tables = self.plan.tables({k: np.asarray(v) for k, v in self.theta.items()})
            for t in tables.values():
                t.flags.writeable = False
            self.cache.potentials = tables
        return self.cache.potentials

    def marginal_blocks(self) -> dict:
        """The clique marginals (scaled to ``total``) in the plan's block layout, as the marginal oracle returns
        them: computed on first use by one compiled program, then kept (:attr:`cache`)."""
        if self.cache.marginal_blocks is None:
            total = to_device(self.total, self.dtype)
            self.cache.marginal_blocks = answer_programs.marginals_and_log_partition(self.plan, self.theta, total)[0]
        return self.cache.marginal_blocks

    def clique_marginals(self) -> dict[Clique, np.ndarray]:
        """Marginals of every model clique (one oracle call, cached); ``(B, *shape)`` for a batch of models."""
        if self.batch is not None:
            each = batch_model.each(self, GraphicalModel.clique_marginals)
            return {c: np.stack([m[c] for m in each]) for c in self.cliques}
        if self.cache.clique_marginals is None:
            host = {k: np.asarray(v) for k, v in self.marginal_blocks().items()}  # indexed on the host: no small programs
            self.cache.clique_marginals = {c: np.asarray(t, np.float64) for c, t in self.plan.tables(host).items()}
        return dict(self.cache.clique_marginals)

    def log_partition(self) -> float:
        self._one("GraphicalModel.log_partition")
        return float(answer_programs.log_partition(self.plan, self.theta))

    def device_marginals(self) -> dict[int, jax.Array]:
        """``{clique index: marginal counts}`` on the device, axes in the clique's order (cached): what the
        compiled query programs and the sampler read."""
        if self.cache.device_marginals is None:
            blocks = self.marginal_blocks()
            self.cache.device_marginals = {j: self.plan.table(blocks, j) for j in range(len(self.plan.cliques))}
        return self.cache.device_marginals

    def marginal(self, attrs: CliqueLike, given: Mapping[str, int | Iterable[int]] | None = None) -> np.ndarray:
        """Counts of the marginal over ``attrs`` (any subset), axes in the given order.

        Inside a model clique it is a projection of that clique's marginal; otherwise it
        is computed by variable elimination along the smallest subtree of the junction
        tree that covers ``attrs`` (McKenna et al., ICML 2019, Algorithm 3). Where the
        tables are small (:data:`HOST_MARGINAL_CELLS`) both run on the host in float64
        and compile nothing; otherwise one compiled program per query structure (cached).

        Args:
            attrs: an attribute or a tuple of distinct attributes.
            given: evidence ``{attribute: value}`` or ``{attribute: values}``
                (a set of values). The result then counts only the records
                that match the evidence: its sum is their expected number, and
                ``m / m.sum()`` is the conditional distribution.

        Returns:
            A float64 array of shape ``domain.shape_of(attrs)``.

        Example:
            >>> model.marginal(("sex", "income"))                # doctest: +SKIP
            >>> model.marginal("income", given={"sex": 1})       # doctest: +SKIP
        """
        return self.marginals([attrs], given=given)[0]

    def marginals(self, cliques: Sequence[CliqueLike], given: Mapping | None = None) -> list[np.ndarray]:
        """Many marginals (optionally under the same evidence): where the tables are small, computed on the
        host (no compilation, see :meth:`answers`; one- and two-way ones without evidence share their messages,
        :mod:`pgmjax.model.pair_sweep`); the others from one compiled program.

        Args:
            cliques: attribute tuples, each as in :meth:`marginal`.
            given: evidence shared by every marginal, as in :meth:`marginal`.

        Returns:
            A list of float64 count arrays, one per clique.
        """
        queries = answering.marginal_queries(self.domain, cliques, given)
        answers = self.answers([q for q, _ in queries])  # on the host where the tables are small (see answers)
        lead = 0 if self.batch is None else 1  # a batch's answers carry the batch axis first
        return [a.reshape(a.shape[: lead + k]) for a, (_, k) in zip(answers, queries)]

    def _host_table(self, j: int) -> np.ndarray:
        """Model clique ``j``'s marginal counts on the host (axes in the clique's order, the model's dtype)."""
        key, _ = self.plan._index(j)
        kept = self.cache.host_blocks
        if key not in kept:  # one transfer per block, kept: the next marginal reads it too
            kept[key] = np.asarray(self.marginal_blocks()[key])
        return np.asarray(self.plan.table(kept, j))

    def answer(self, query: Mapping[str, object]) -> np.ndarray:
        """Answer a factored (Kronecker) query without the full table (Algorithm 3 of the paper).

        Args:
            query: ``{attribute: factor}`` with one factor per queried
                attribute: a constructor from :mod:`pgmjax.queries.factors` (Identity,
                Total, Value, ValueSet, Prefix, Range, AllRange, Compress, Mean,
                Moments) or a matrix of shape ``(rows, size)``; entries may be
                negative. Attributes not named are summed out.

        Returns:
            ``sum_x p(x) prod_a Q_a[r_a, x_a]`` scaled to ``total``: one axis per
            named attribute (Total factors excepted), of length ``size`` for
            Identity and ``rows`` otherwise.

        Example:
            >>> from pgmjax.queries.factors import Prefix, Value
            >>> model.answer({"age": Prefix(), "sex": Value(1)})   # shape (85, 1)  # doctest: +SKIP
        """
        return self.answers([query])[0]

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        """Answer several factored queries (see :meth:`answer`): on the host in float64 where a query's tables
        hold at most :data:`HOST_MARGINAL_CELLS` cells (nothing compiled), the others compiled; one- and two-way
        marginals (identity factors only) across cliques on the host whatever their tables' size, together
        (:mod:`pgmjax.model.pair_sweep`); inside a JAX transformation (:attr:`traced`), all of them traced, as JAX
        arrays of the model's dtype.

        Each query's working set is counted before it runs (:func:`pgmjax.model.query_plan.peak_cells`); one that
        would hold more than a share of the memory limit is answered in slices of its rows
        (:mod:`pgmjax.model.answering`), and one no slicing fits raises
        :class:`~pgmjax.graph.size_limit.ModelTooLarge` before allocating."""
        if self.batch is not None:  # every member's own answers (each plans its queries), stacked: (B, ...) each
            if self.traced:  # a batch passed whole into a transformation
                return list(jax.vmap(lambda m: tuple(m.answers(queries)))(self))
            return batch_model.stacked(batch_model.each(self, lambda m: m.answers(queries)))
        resolved = [queries_mod.resolve(self.domain, q) for q in queries]
        if self.traced:  # inside jit / vmap / grad: the compiled path, traced, answers as JAX arrays
            plans = [query_plan.plan_query(self.junction_tree, attrs, tuple(m is None for m in matrices))
                     for attrs, matrices in resolved]
            return list(inference.answer_many(tuple(plans), self.device_marginals(),
                                              tuple(m for _, m in resolved), self.total))
        # A query whose tables are small runs its plan in NumPy (float64): a new model structure's queries
        # then compile nothing (AIM scores its candidates on every round's new model).
        return answering.answer_untraced(self.junction_tree, resolved, self._host_table, lambda: self.device_marginals(),
                                         self.total, np.dtype(self.dtype).itemsize, HOST_MARGINAL_CELLS)

    def synthetic_data(self, n: int | None = None, key: jax.Array | None = None, method: str = "exact", chunk: int = 1 << 20):
        """Draw synthetic records (see :func:`pgmjax.model.sampling.synthetic_data`).

        Args:
            n: number of records; default ``round(total)``.
            key: a ``jax.random`` key (required: runs are reproducible from it).
            method: ``"exact"`` or ``"low_variance"``.
            chunk: records per compiled call (bounds memory).

        Returns:
            A :class:`~pgmjax.Dataset`; ``.df`` gives a pandas DataFrame.
        """
        self._one("synthetic_data")
        if key is None:
            raise ValueError("synthetic_data: pass a jax.random key, e.g. jax.random.key(0)")
        n = max(1, int(round(self.total))) if n is None else n
        return sampling.synthetic_data(self, n, key, method=method, chunk=chunk)

    def check(self, what: str = "GraphicalModel") -> None:
        """Raise unless the model is finite and consistent (see :func:`check_consistent`); cached.

        Sampling and saving call it, so a broken model is refused instead of producing
        plausible-looking records or a file that loads into nonsense.

        Args:
            what: the operation named in the error message.

        Raises:
            FloatingPointError: the total, a potential table or a marginal is not finite, or a
                clique's marginal does not sum to the total.

        Example:
            >>> dom = pj.Domain({"a": 2, "b": 3})
            >>> plan = pj.graph.oracle.make_plan(dom, [("a", "b")])
            >>> pj.GraphicalModel(plan, plan.zeros(), 10.0).check()
            >>> pj.GraphicalModel(plan, plan.zeros(), float("nan")).check("sample")
            Traceback (most recent call last):
            FloatingPointError: sample: the model's total is nan, expected a positive finite number
        """
        self._one(what)
        if self.cache.checked:  # the model is frozen: once consistent, always
            return
        check_consistent(self.plan, self.theta, self.marginal_blocks, self.total, what=what)
        self.cache.checked = True

    def save(self, path, report=None) -> str:
        """Save to the folder ``path`` (JSON structure + NPZ arrays; see :mod:`pgmjax.model.serialization`).

        Args:
            path: the folder.
            report: the fit's :class:`~pgmjax.model.fit_report.FitReport`, whose loss and log are saved with the
                model (``pj.load_model(path, report=True)`` reads them back); None saves the model alone.

        Raises:
            FloatingPointError: the model is not finite and consistent (:meth:`check`).
        """
        self._one("save")
        return save_model(self, path, report=report)

    def summary(self) -> str:
        """A readable description: attributes, total, junction tree, clique tables and memory.

        Returns:
            A multi-line string (print it).
        """
        self._one("summary")
        tree = self.junction_tree
        itemsize = np.dtype(self.dtype).itemsize
        cells = [self.domain.size(c) for c in self.cliques]
        lines = [
            f"GraphicalModel over {len(self.domain)} attributes (full table {cells_text(self.domain.size())} cells), "
            f"total {self.total:g}, {np.dtype(self.dtype).name}",
            f"junction tree: {len(self.cliques)} cliques, treewidth {tree.treewidth}, depth {tree.num_levels}, "
            f"largest table {cells_text(max(cells))} cells",
            f"potentials: {cells_text(sum(cells))} cells, {fmt_bytes(sum(cells) * itemsize)} "
            f"(stored: {fmt_bytes(sum(int(np.prod(s)) for _, s in self.plan.units) * itemsize)})",
        ]
        lines.append(f"{'clique':<60} {'cells':>10} {'memory':>10}")
        for c, n in sorted(zip(self.cliques, cells), key=lambda t: -t[1]):
            lines.append(f"{', '.join(c):<60.60} {n:>10,} {fmt_bytes(n * itemsize):>10}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        if self.batch is not None or self.traced:
            what = f"a batch of {self.batch} models" if self.batch is not None else "traced"
            return (f"GraphicalModel({what}, {len(self.domain)} attributes, {len(self.cliques)} cliques, "
                    f"treewidth {self.plan.tree.treewidth})")
        return (
            f"GraphicalModel({len(self.domain)} attributes, {len(self.cliques)} cliques, "
            f"treewidth {self.plan.tree.treewidth}, total {self.total:g})"
        )


# The numbers are the pytree's leaves, the plan (hashed by value) its static structure; the cache is no part of it.
jax.tree_util.register_dataclass(GraphicalModel, data_fields=["theta", "total"], meta_fields=["plan"],
                                 drop_fields=["cache"])
