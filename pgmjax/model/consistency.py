"""Whether a model is one: the checks every model passes at construction and before it is sampled or saved.

:func:`check_blocks` refuses potentials outside the plan's block layout when a model is built;
:func:`check_consistent` refuses a model whose potentials, total or marginals are not those of a distribution.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from ..graph import oracle


#: Relative tolerance on ``|sum of a clique's marginal - total| / total``: float32 sums of up to
#: millions of cells are exact to ~1e-6 relative, so 1e-3 flags a broken model only.
CONSISTENCY_RTOL = 1e-3


def check_consistent(plan: oracle.OraclePlan, theta: dict, marginals: dict | Callable[[], dict], total: float, *, what: str,
                     rtol: float = CONSISTENCY_RTOL) -> None:
    """Refuse a model that is not one: the single check behind ``estimate``, sampling, ``save`` and ``load_model``.

    A model ``p(x) ∝ exp(sum_c theta_c(x_c))`` scaled to ``total`` records
    (McKenna, Sheldon & Miklau, ICML 2019, Section 3) has a positive finite
    total, potentials that are finite or ``-inf`` (a structural zero), finite
    clique marginals, and every clique's marginal summing to ``total``
    (each is a projection of the same distribution).

    Args:
        plan: the model's oracle plan.
        theta: log-potentials in the plan's block layout.
        marginals: the clique marginals of ``theta`` (scaled to ``total``) in the same layout, or a
            function returning them (called only once the potentials have passed).
        total: the number of records the model stands for.
        what: the operation named in the error message (``"estimate"``, ``"save"``, ...).
        rtol: the relative tolerance of the sums.

    Returns:
        None.

    Raises:
        FloatingPointError: naming the clique and what is wrong with it.

    Example:
        >>> dom = pj.Domain({"a": 2, "b": 3})
        >>> plan = pj.graph.oracle.make_plan(dom, [("a", "b")])
        >>> theta = plan.zeros()
        >>> check_consistent(plan, theta, plan.from_tables({("a", "b"): np.full((2, 3), 5.0)}), 30.0, what="demo")
        >>> check_consistent(plan, theta, plan.from_tables({("a", "b"): np.full((2, 3), 50.0)}), 30.0, what="demo")
        Traceback (most recent call last):
        FloatingPointError: demo: the marginal of clique ('a', 'b') sums to 300, not the total 30
    """
    total = float(total)
    if not (math.isfinite(total) and total > 0):
        raise FloatingPointError(f"{what}: the model's total is {total}, expected a positive finite number")
    # On the host: indexing device arrays block by block would compile a small program per block shape.
    tables = plan.tables({k: np.asarray(v) for k, v in theta.items()})
    for clique in plan.cliques:  # potentials first: a NaN potential is the cause of NaN marginals
        potentials = np.asarray(tables[clique])
        for bad, word in ((np.isnan, "NaN"), (np.isposinf, "+inf")):
            if bad(potentials).any():
                raise FloatingPointError(f"{what}: the potentials of clique {clique} hold {word} "
                                         f"({int(bad(potentials).sum())} of {potentials.size} cells)")
    margs = plan.tables({k: np.asarray(v) for k, v in (marginals() if callable(marginals) else marginals).items()})
    # A clique whose potentials are all -inf empties every marginal: name it, the cause, first.
    dead = [c for c in plan.cliques if np.isneginf(np.asarray(tables[c])).all()]
    for clique in dead + [c for c in plan.cliques if c not in dead]:
        table = np.asarray(margs[clique], np.float64)
        why = " (all its potentials are -inf: no cell can hold a record)" if np.isneginf(np.asarray(tables[clique])).all() else ""
        if not np.isfinite(table).all():
            raise FloatingPointError(f"{what}: the marginal of clique {clique} is not finite{why}")
        s = table.sum()
        if abs(s - total) > rtol * total:
            raise FloatingPointError(f"{what}: the marginal of clique {clique} sums to {s:.6g}, not the total {total:.6g}{why}")


def check_blocks(plan, theta) -> None:
    """Refuse potentials that are not in ``plan``'s block layout (a model built by hand from another plan's
    ``theta``), naming the blocks, before any answer reads them. A block may carry leading batch axes (a batch of
    models, ``jax.vmap`` of ``jax.vmap``); JAX's placeholders (leaves without a shape, when it rebuilds a model)
    pass."""
    units = dict(plan.units)
    if not isinstance(theta, Mapping) or set(theta) != set(units):
        got = sorted(theta) if isinstance(theta, Mapping) else type(theta).__name__
        raise ValueError(f"GraphicalModel: theta must hold the plan's blocks {sorted(units)}, got {got} "
                         "(potentials in another plan's layout? build them with plan.from_tables or plan.zeros)")
    for key, shape in units.items():
        got = getattr(theta[key], "shape", None)
        if got is not None and (len(got) < len(shape) or tuple(got[len(got) - len(shape):]) != shape):
            raise ValueError(f"GraphicalModel: theta block {key!r} has shape {tuple(got)}, the plan's is {shape} "
                             "(after any leading batch axes)")
