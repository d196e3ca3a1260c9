"""A model conditioned on evidence: ``p(x | x_A in V)``, itself a graphical model, for conditional sampling.

Evidence ``{attribute: value or values}`` multiplies the distribution by the indicator of the allowed values: in
log space, each evidence attribute's indicator (``0`` on the allowed values, ``-inf`` elsewhere) is added to the
potentials of one junction-tree clique that holds it. The result is the same junction tree with structural zeros,
so it answers, samples and saves like any model (the oracle never divides beliefs, so ``-inf`` potentials give
exact zeros, not NaN), scaled to the records the evidence keeps.

Reference: Koller & Friedman, "Probabilistic Graphical Models" (2009), Section 4.2.3 (reduced factors: conditioning
a Gibbs distribution on evidence).

Example:
    >>> import numpy as np, pgmjax as pj
    >>> dom = pj.Domain({"a": 2, "b": 3})
    >>> model = pj.estimate(dom, [pj.Measurement(("a", "b"), np.array([[10.0, 20, 30], [5, 5, 30]]))], iters=300)
    >>> given = condition(model, {"a": 1})
    >>> given.marginal("a").round(), given.marginal("b").round()
    (array([ 0., 40.]), array([ 5.,  5., 30.]))
"""

from __future__ import annotations

from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from .answering import evidence_codes
from .graphical_model import GraphicalModel

__all__ = ["condition"]


def condition(model: GraphicalModel, given: Mapping) -> GraphicalModel:
    """``model`` conditioned on ``given`` (Koller & Friedman 2009, Section 4.2.3): the records it keeps, and only
    those.

    Args:
        model: one :class:`~pgmjax.GraphicalModel` (not a batch).
        given: ``{attribute: code}`` or ``{attribute: codes}`` (integer codes of the model's domain).

    Returns:
        A :class:`~pgmjax.GraphicalModel` over the same junction tree whose total is the number of records the
        model gives the evidence.

    Raises:
        ValueError: an attribute not in the domain, a code out of range, or evidence the model gives no mass.
    """
    if model.batch is not None:
        raise TypeError("condition: this is a batch of models; take one with model.member(i)")
    if not given:
        return model
    domain, plan = model.domain, model.plan
    allowed = {}
    for attr, value in given.items():
        codes = evidence_codes(domain, attr, value)
        if not codes:
            raise ValueError(f"evidence on {attr!r}: no value given")
        allowed[attr] = sorted({int(v) for v in codes})
    joint = np.asarray(model.marginal(tuple(allowed)), np.float64)
    kept = float(joint[np.ix_(*allowed.values())].sum())
    if not kept > 0:
        raise ValueError(f"the model gives the evidence {dict(given)} no records: there is nothing to condition on")
    theta = dict(model.theta)
    for attr, codes in allowed.items():
        j = plan.tree.containing((attr,))
        clique = plan.cliques[j]
        mask = np.full(domain[attr], -np.inf)
        mask[codes] = 0.0
        shape = [domain[attr] if a == attr else 1 for a in clique]
        theta = plan.with_table(theta, j, jnp.asarray(mask.reshape(shape), model.dtype), add=True)
    return model.replace(theta=theta, total=kept)
