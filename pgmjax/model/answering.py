"""A model's answers to many factored queries: each run on the host or compiled, and in slices of its rows
where its run would outgrow its share of the memory limit.

A query whose attributes lie in different cliques is answered by messages along the junction tree
(:mod:`pgmjax.model.query_plan`), and a message carries, besides its separator, the queried attributes of
the side it comes from. Between two large cliques that product can reach hundreds of millions of cells.
Answering ``Q_1 ⊗ ... ⊗ Q_k`` is linear in each ``Q_j``, so the rows of the largest factor (an identity where
the attribute is kept) can be answered a slice at a time and the slices' answers stacked
(McKenna, Sheldon & Miklau, ICML 2019, Section 3.3: each query matrix meets its attribute once). Each
query's peak is counted (:func:`pgmjax.model.query_plan.peak_cells`) before anything is allocated; one that
no slicing brings under the limit raises :class:`~pgmjax.graph.size_limit.ModelTooLarge`. The compiled queries
run together in one program where XLA's own count of its memory (compiled, before it runs) fits the share, else
in as many parts as that count asks for, each checked again: a program per query would cost a compile each.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..data.domain import Domain
from ..graph import size_limit
from ..queries import factors
from ..graph.junction import JunctionTree
from . import inference, pair_sweep
from .query_plan import QueryPlan, peak_cells, plan_query

#: The share of the model-size limit (:func:`pgmjax.graph.size_limit.max_model_bytes`) that one query's run, or
#: one compiled group of queries, may hold at once: the limit bounds a run's peak, and the model's own tables (on
#: the host and the device) and the caller's arrays hold the rest.
ANSWER_SHARE = 0.5


def answer_untraced(tree: JunctionTree, queries: Sequence[tuple], host_table: Callable[[int], np.ndarray],
                    device_marginals: Callable[[], dict], total, itemsize: int, host_cells: int,
                    max_bytes: float | None = None) -> list[np.ndarray]:
    """Answer resolved factored queries, each on the host or compiled, sliced where its run would outgrow
    :data:`ANSWER_SHARE` of the limit; the compiled ones in as few programs as that share allows. The one-
    and two-way marginals are answered together first, on the host (:func:`pgmjax.model.pair_sweep.pair_marginals`,
    within the same share): every pair across cliques, and those inside a clique of at most ``host_cells``; the
    per-query path takes the rest.

    Args:
        tree: the model's junction tree.
        queries: ``(attrs, matrices)`` per query (:func:`pgmjax.queries.factors.resolve`).
        host_table: clique index -> its marginal counts on the host.
        device_marginals: returns ``{clique index: marginal counts}`` on the device (called only if a query
            runs compiled).
        total: the model's number of records.
        itemsize: bytes per cell of the compiled runs (the model's dtype); the host runs in float64.
        host_cells: a query whose tables and answer hold at most this many cells runs on the host (float64,
            nothing compiled); larger ones run compiled.
        max_bytes: an explicit limit (default :func:`pgmjax.graph.size_limit.max_model_bytes`).

    Returns:
        One float64 array per query, axes in its attributes' order.

    Raises:
        ModelTooLarge: a query whose run, sliced to one row of each queried attribute, still breaks the limit
            (before anything of it is allocated).
    """
    limit = size_limit.max_model_bytes(max_bytes)
    target = ANSWER_SHARE * limit
    tables, conditionals = {}, {}  # each clique's table and conditional, shared by the queries that pass it

    def table(c):  # each clique's host table fetched once, for the sweep and the plans alike
        if c not in tables:
            tables[c] = host_table(c)
        return tables[c]

    def on_host(plan, matrices):
        for c in plan.cliques:
            table(c)
        return inference.run_plan_on_host(plan, tables, matrices, total, conditionals)

    def compiled(plans, matrices):
        answers = inference.answer_many(tuple(plans), device_marginals(), tuple(matrices), total)
        return [np.asarray(a, np.float64) for a in answers]

    out: list = [None] * len(queries)
    marginals = [i for i, (attrs, matrices) in enumerate(queries) if len(attrs) <= 2 and all(m is None for m in matrices)
                 and _sweeps(tree, attrs, host_cells)]
    if marginals:  # one- and two-way marginals: a sweep of the tree per carried attribute, on the host
        # float64 cells, one run's share: the sweep's tables are the model's, its messages a pair's few rows, so even
        # where the tables are large (past host_cells) it beats a compiled program per pair
        swept = pair_sweep.pair_marginals(tree, [queries[i][0] for i in marginals], table, int(target // 8))
        for i, answer in zip(marginals, swept):
            out[i] = answer
    together = []  # the compiled queries, run in as few programs as XLA's own count of their memory allows
    for i, (attrs, matrices) in enumerate(queries):
        if out[i] is not None:
            continue
        rows = _rows(tree, attrs, matrices)
        plan = plan_query(tree, attrs, tuple(m is None for m in matrices), rows)
        host = sum(tree.clique_cells[c] for c in plan.cliques) + math.prod(rows) <= host_cells
        if peak_cells(plan, rows) * (8 if host else itemsize) > target:
            run = on_host if host else (lambda p, m: compiled([p], [m])[0])
            out[i] = _sliced(tree, attrs, matrices, run, 8 if host else itemsize, target, max_bytes)
        elif host:
            out[i] = on_host(plan, matrices)
        else:
            together.append((i, plan, matrices))
    groups = [together] if together else []
    while groups:
        group = groups.pop()
        plans, matrices = [p for _, p, _ in group], [m for _, _, m in group]
        nbytes = inference.answer_many_bytes(tuple(plans), device_marginals(), tuple(matrices), total)
        if nbytes is not None and nbytes > target and len(group) > 1:  # XLA holds several queries' messages at once
            parts = min(len(group), max(2, math.ceil(nbytes / target)))  # in proportion, each part checked again
            groups += [group[k * len(group) // parts:(k + 1) * len(group) // parts] for k in range(parts)]
            continue
        if nbytes is not None and len(group) == 1:  # XLA's count of a lone query, where it exceeds the counted one
            size_limit.check_peak(nbytes, "answers", f"the answer to a query over {group[0][1].attrs}",
                                  "the compiled program's temporaries and answer", max_bytes,
                                  hint="; ask for fewer attributes at once, or raise the limit")
        for (i, _, _), answer in zip(group, compiled(plans, matrices)):
            out[i] = answer
    return out


def marginal_queries(domain: Domain, cliques, given) -> list[tuple[dict, int]]:
    """The factored queries of marginals on ``cliques`` under the evidence ``given``
    (:meth:`pgmjax.GraphicalModel.marginals`), checked: one ``(query, number of the clique's axes)`` per clique, the
    clique's attributes as identity factors and the evidence's as indicators."""
    evidence = evidence_query(domain, given)
    queries = []
    for attrs in cliques:
        attrs = domain.check_clique(attrs, what="marginal of")
        if len(set(attrs)) != len(attrs):
            raise ValueError(f"marginal of {attrs}: an attribute appears more than once")
        clash = [a for a in attrs if a in evidence]
        if clash:
            raise ValueError(f"marginal of {attrs}: {clash} also appear in `given`; condition on other attributes")
        queries.append(({a: factors.Identity() for a in attrs} | evidence, len(attrs)))
    return queries


def evidence_codes(domain: Domain, attr, value) -> list:
    """Evidence on one attribute, ``value`` a code or a sequence of codes, checked against the domain: its codes
    as a list (what :func:`evidence_query` and :func:`pgmjax.model.conditioning.condition` read)."""
    domain.check_clique((attr,), what="evidence on")
    codes = [value] if np.ndim(value) == 0 else list(value)
    for v in codes:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 0 <= v < domain[attr]:
            raise ValueError(f"evidence on {attr!r}: value {v!r} is not an integer in [0, {domain[attr]})")
    return codes


def evidence_query(domain: Domain, given) -> dict:
    """Evidence ``{attr: value or values}`` as indicator query factors (checked against the domain)."""
    if not given:
        return {}
    out = {}
    for attr, value in given.items():
        codes = evidence_codes(domain, attr, value)
        out[attr] = factors.Value(int(codes[0])) if np.ndim(value) == 0 else factors.ValueSet(codes)
    return out


def _sweeps(tree: JunctionTree, attrs, host_cells: int) -> bool:
    """Whether the pair sweep answers a one- or two-way marginal: always across cliques (the sweep shares the
    messages a plan per pair would compile or run alone), inside a clique where the clique's table is the host's
    (a larger one is summed where it lies, compiled, not copied to the host)."""
    home = tree.containing(attrs)
    return home is None or tree.clique_cells[home] <= host_cells


def _rows(tree: JunctionTree, attrs, matrices) -> tuple[int, ...]:
    return tuple(tree.domain[a] if m is None else len(m) for a, m in zip(attrs, matrices))


def _sliced(tree: JunctionTree, attrs, matrices, run: Callable[[QueryPlan, tuple], np.ndarray], itemsize: int,
            target: float, max_bytes: float | None, sliced: frozenset = frozenset()) -> np.ndarray:
    """One query answered in slices of its largest attribute's rows, each slice's peak within ``target``
    (slicing the next attribute where a single row is still too large)."""
    def plan_of(m):
        r = _rows(tree, attrs, m)
        return plan_query(tree, attrs, tuple(x is None for x in m), r), r

    def peak(m):
        plan, r = plan_of(m)
        return peak_cells(plan, r) * itemsize

    whole_plan, rows = plan_of(matrices)
    free = [i for i in range(len(attrs)) if i not in sliced and rows[i] > 1]
    whole = peak_cells(whole_plan, rows) * itemsize
    if whole <= target or not free:
        size_limit.check_peak(whole, "answers", f"the answer to a query over {attrs}",
                              "its tables, conditionals and largest messages, sliced to one row per attribute",
                              max_bytes, hint="; ask for fewer attributes at once, or raise the limit")
        return run(whole_plan, matrices)
    j = max(free, key=lambda i: (rows[i], -i))
    n, values = rows[j], tree.domain[attrs[j]]

    def rows_of(lo, step):  # rows lo..lo+step of factor j (an identity's made on the fly), zero-padded to step
        part = np.eye(step, values, k=lo) if matrices[j] is None else np.asarray(matrices[j])[lo:lo + step]
        if len(part) < step:
            part = np.concatenate([part, np.zeros((step - len(part), values), part.dtype)])
        return matrices[:j] + (part,) + matrices[j + 1:]

    lo, hi = 1, n  # the largest slice whose peak fits (a peak grows with its rows)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if peak(rows_of(0, mid)) <= target else (lo, mid - 1)
    step = lo
    parts = [_sliced(tree, attrs, rows_of(start, step), run, itemsize, target, max_bytes, sliced | {j})
             for start in range(0, n, step)]
    return np.concatenate(parts, axis=j)[(slice(None),) * j + (slice(0, n),)]
