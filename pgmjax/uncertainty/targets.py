"""What an interval is about: marginals, factored queries and ratios of them, resolved once per model.

A *target* is one of

* a plain attribute or tuple of attributes: the counts of that marginal (every cell);
* a ``{attribute: factor}`` mapping: a factored query, answered like ``model.answer``;
* :class:`Ratio`: ``answer(numerator) / answer(denominator)`` (the denominator a single number), e.g. a
  conditional probability built by :func:`conditional`.

:func:`resolve_targets` turns a list of targets into a hashable :class:`TargetPlan` (the junction-tree
query plans, built once) plus its query matrices; :func:`evaluate` computes every target's value from a
model's clique marginals as a pure JAX function (jit, vmap over bootstrap replicates, differentiate for
the linearisation); :func:`combine` does the same from answers already computed (NumPy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from ..data.domain import Domain
from ..graph import oracle
from ..model import inference, query_plan
from ..queries import factors as queries_mod
from ..queries.measurement import Measurement

__all__ = ["Ratio", "conditional", "TargetPlan", "resolve_targets", "evaluate", "combine", "estimable_attrs"]


@dataclass(frozen=True, eq=False)
class Ratio:
    """``answer(numerator) / answer(denominator)``: a derived, non-linear quantity.

    Args:
        numerator: a factored query ``{attribute: factor}``.
        denominator: a factored query whose answer is a single number (e.g. ``{"sex": Value(1)}``).
        bounds: the feasible range of the ratio, used to clip intervals (``(0, 1)`` for a probability;
            None: no clipping).

    Example:
        >>> from pgmjax.queries.factors import Value
        >>> r = Ratio({"income": Value(1), "sex": Value(0)}, {"sex": Value(0)}, bounds=(0.0, 1.0))
        >>> r.bounds
        (0.0, 1.0)
    """

    numerator: Mapping
    denominator: Mapping
    bounds: tuple[float, float] | None = None


def conditional(target: Mapping, given: Mapping) -> Ratio:
    """The conditional probability ``P(target | given)`` as a :class:`Ratio` clipped to ``[0, 1]``.

    Args:
        target: ``{attribute: factor}`` of the event (or :class:`~pgmjax.queries.factors.Identity` for the whole
            conditional distribution of an attribute).
        given: ``{attribute: factor}`` of the conditioning event (indicator factors such as ``Value``).

    Returns:
        ``Ratio(target | given, given, bounds=(0, 1))``.

    Example:
        >>> from pgmjax.queries.factors import Value
        >>> conditional({"c": Value(0)}, {"a": Value(0)}).numerator
        {'c': Value(value=0), 'a': Value(value=0)}
    """
    clash = set(target) & set(given)
    if clash:
        raise ValueError(f"conditional: attributes {sorted(clash)} appear in both target and given")
    return Ratio(dict(target) | dict(given), dict(given), bounds=(0.0, 1.0))


@dataclass(frozen=True)
class TargetPlan:
    """The static part of a list of targets (hashable: a compiled program is keyed on it).

    Attributes:
        plans: one junction-tree query plan per factored query (numerators and denominators included).
        used: the junction-tree cliques the plans read.
        items: per target ``(numerator index, denominator index or -1, output shape)``.
        bounds: per target the feasible range ``(lo, hi)`` (``hi`` may be inf; None: unbounded).
        attrs: per target the attributes it depends on (for estimability).
    """

    plans: tuple
    used: tuple[int, ...]
    items: tuple[tuple[int, int, tuple[int, ...]], ...]
    bounds: tuple
    attrs: tuple[frozenset, ...]


def _as_query(domain: Domain, target, index: int) -> Mapping:
    if isinstance(target, str):
        target = (target,)
    if isinstance(target, tuple):
        attrs = domain.check_clique(target, what=f"target {index}: marginal of")
        if len(set(attrs)) != len(attrs):
            raise ValueError(f"target {index}: the marginal {attrs} names an attribute twice")
        return {a: queries_mod.Identity() for a in attrs}
    if isinstance(target, Mapping):
        return target
    raise TypeError(
        f"target {index}: expected an attribute, a tuple of attributes, a factored query mapping or a Ratio, "
        f"got {type(target).__name__}"
    )


def _count_bounds(matrices) -> tuple | None:
    """``(0, inf)`` when every factor is non-negative (a count cannot be negative), else None."""
    return (0.0, np.inf) if all(m is None or np.all(m >= 0) for m in matrices) else None


def resolve_targets(domain: Domain, tree, targets: Sequence) -> tuple[TargetPlan, tuple]:
    """Check targets against a domain and plan them on a junction tree.

    Args:
        domain: the model's :class:`~pgmjax.Domain`.
        tree: the model's junction tree (``model.junction_tree``).
        targets: a list of targets (see the module docstring).

    Returns:
        ``(plan, matrices)``: the static :class:`TargetPlan` and, per factored query, its tuple of
        float64 matrices (None for kept attributes).

    Raises:
        ValueError / TypeError: naming the bad target, before anything is compiled.

    Example:
        >>> import pgmjax as pj
        >>> dom = pj.Domain({"a": 2, "b": 3})
        >>> tree = pj.estimate(dom, [pj.Measurement(("a", "b"), np.ones(6))], iters=5).junction_tree
        >>> plan, mats = resolve_targets(dom, tree, [("a",), {"b": pj.queries.Prefix()}])
        >>> [shape for _, _, shape in plan.items]
        [(2,), (3,)]
    """
    if isinstance(targets, (str, Mapping, Ratio)) or not isinstance(targets, Sequence):
        raise TypeError("targets must be a list of targets (wrap a single target in a list)")
    if not targets:
        raise ValueError("targets: the list is empty")
    plans, mats, items, bounds, attrs_of = [], [], [], [], []

    def add(query, index, what):
        try:
            attrs, matrices = queries_mod.resolve(domain, query)
        except (TypeError, ValueError) as e:
            raise type(e)(f"target {index} ({what}): {e}") from e
        if len(set(attrs)) != len(attrs):
            raise ValueError(f"target {index} ({what}): an attribute appears twice")
        plans.append(query_plan.plan_query(tree, attrs, tuple(m is None for m in matrices)))
        mats.append(tuple(None if m is None else np.asarray(m, np.float64) for m in matrices))
        shape = tuple(domain[a] if m is None else m.shape[0] for a, m in zip(attrs, matrices))
        return len(plans) - 1, shape, frozenset(attrs), matrices

    for i, t in enumerate(targets):
        if isinstance(t, Ratio):
            num, shape, a_num, _ = add(t.numerator, i, "numerator")
            den, dshape, a_den, _ = add(t.denominator, i, "denominator")
            if int(np.prod(dshape)) != 1:
                raise ValueError(f"target {i}: the denominator's answer has shape {dshape}; a Ratio needs a single number")
            items.append((num, den, shape))
            b = t.bounds
            if b is not None and not (len(b) == 2 and b[0] < b[1]):
                raise ValueError(f"target {i}: bounds must be (lo, hi) with lo < hi, got {b!r}")
            bounds.append(None if b is None else (float(b[0]), float(b[1])))
            attrs_of.append(a_num | a_den)
        else:
            q, shape, a, matrices = add(_as_query(domain, t, i), i, "query")
            items.append((q, -1, shape))
            bounds.append(_count_bounds(matrices))
            attrs_of.append(a)
    used = tuple(sorted({c for p in plans for c in p.cliques}))
    return TargetPlan(tuple(plans), used, tuple(items), tuple(bounds), tuple(attrs_of)), tuple(mats)


def evaluate(target_plan: TargetPlan, plan: oracle.OraclePlan, mu: dict, matrices: tuple, total) -> tuple:
    """Every target's value from a model's clique marginals (pure JAX: jit, vmap and grad work).

    Args:
        target_plan: from :func:`resolve_targets`.
        plan: the model's oracle plan.
        mu: clique marginals in the oracle's block layout (``oracle.marginals(plan, theta, total)[0]``).
        matrices: per factored query, its matrices as arrays (None for kept attributes).
        total: the model's number of records.

    Returns:
        A tuple of arrays, one per target, of the target's shape.
    """
    tables = {j: plan.table(mu, j) for j in target_plan.used}
    answers = inference.answer_many_traced(target_plan.plans, tables, matrices, total)
    return combine(target_plan, answers, jnp)


def combine(target_plan: TargetPlan, answers: Sequence, xp=np) -> tuple:
    """Targets from the answers of their factored queries (``xp``: ``numpy`` or ``jax.numpy``).

    Leading axes of the answers (bootstrap replicates) are kept: a target of shape ``s`` comes out as
    ``(*lead, *s)``.
    """
    out = []
    for num, den, shape in target_plan.items:
        a = answers[num]
        lead = a.shape[: a.ndim - len(shape)]
        a = xp.reshape(a, (*lead, *shape))
        if den >= 0:
            d = xp.reshape(answers[den], (*lead,) + (1,) * len(shape))
            a = a / d
        out.append(a)
    return tuple(out)


def estimable_attrs(domain: Domain, measurements: Sequence[Measurement]) -> list[frozenset]:
    """Attribute sets whose marginal the measurements determine (a sufficient condition).

    A clique counts when one measurement on it, or the measurements on it stacked (dense form, small
    cliques only), have full column rank over its cells; every subset of such a clique is determined too.
    A target whose attributes lie inside one of these sets is a function of the measured marginals
    (estimable); any other target is answered by the model's maximum-entropy completion.

    Returns:
        A list of frozensets of attributes.
    """
    by_clique: dict[frozenset, list[Measurement]] = {}
    for m in measurements:
        by_clique.setdefault(frozenset(m.clique), []).append(m)
    out = []
    for key, ms in by_clique.items():
        if any(_full_rank(m) for m in ms):
            out.append(key)
            continue
        cells = domain.size(ms[0].clique)
        if cells <= 2048:
            order = ms[0].clique
            rows = [_dense(m, order, domain) for m in ms]
            if np.linalg.matrix_rank(np.vstack(rows)) == cells:
                out.append(key)
    return out


def _full_rank(m: Measurement) -> bool:
    if m.kind == "identity":
        return True
    if m.kind == "kron":
        return all(np.linalg.matrix_rank(q) == q.shape[1] for q in m.query)
    return m.query.shape[0] >= m.query.shape[1] and np.linalg.matrix_rank(m.query) == m.query.shape[1]


def _dense(m: Measurement, order, domain: Domain) -> np.ndarray:
    """``m``'s query as a dense matrix over the cells of its clique in the attribute order ``order``."""
    shape = domain.shape_of(m.clique)
    cells = int(np.prod(shape))
    eye = np.eye(cells).reshape(cells, *shape)
    cols = np.stack([m.answer(e) for e in eye], axis=1)  # (rows, cells in m.clique order)
    perm = [m.clique.index(a) for a in order]
    return cols.reshape(-1, *shape).transpose(0, *(1 + p for p in perm)).reshape(-1, cells)
