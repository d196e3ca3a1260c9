"""A warm start's structure: keep the warm model's junction-tree cliques in the new fit, or triangulate afresh.

A fit that starts from an earlier model (a mechanism's next round) must hold that model's distribution in its
starting potentials. Imposing the earlier model's junction-tree cliques does that trivially (its tables load
as they are), but each round then triangulates the previous round's fill-in again with the new clique, and the
fill-in piles up: on a generated 50-attribute table, AIM's model of round 57 held 261,295 cells where a fresh
triangulation of the same 106 measured cliques holds 70,127 (every later iteration, compile and size check paid
the difference).

Where a fresh triangulation of the new fit's own cliques (measured ones, ``cliques=``, constraints) is much
smaller (at most :data:`FRESH_SHARE` of the imposed tree's cells), the fit takes it, and the warm model enters
as its marginals on the fresh tree's cliques: the potentials ``log mu_K`` on each clique ``K`` less
``log mu_S`` on each separator ``S``, the clique tree measure of a calibrated tree (Koller & Friedman,
*Probabilistic Graphical Models*, 2009, Section 10.3, the clique tree invariant). The warm model was fitted
to cliques the fresh tree covers, so its distribution factorizes over the fresh tree and these potentials give
that same distribution; for any other warm model they give the fresh tree's maximum-entropy distribution with
the warm model's marginals on its cliques, still a starting point the fit moves from. A warm model with
structural zeros (``-inf`` potentials), an approximate model or a batch keeps its cliques imposed.
"""

from __future__ import annotations

import numpy as np

from ..data.domain import Domain
from ..graph.junction import JunctionTree, junction_tree, maximal_cliques
from ..model.graphical_model import GraphicalModel

__all__ = ["FRESH_SHARE", "marginal_tables", "warm_cliques"]

#: A fit warm-started from a model triangulates its own cliques afresh where that tree has at most this share of
#: the cells of the tree that imposes the warm model's cliques. Below it, computing the warm model's marginals on
#: the fresh cliques (one pass of its answering) costs less than the larger tree's iterations and compile.
FRESH_SHARE = 0.5

#: The least count a fresh clique's cell gets from a warm model's marginal (relative to the total): a cell the warm
#: model gives no mass to (an underflow) becomes a very unlikely cell, not a structural zero the fit would keep.
FLOOR = 1e-30


def warm_cliques(domain: Domain, cliques: list, warm_start) -> list:
    """The warm start's cliques the fit must hold: none where a fresh triangulation of ``cliques`` is at most
    :data:`FRESH_SHARE` of the imposed tree's cells (then :func:`marginal_tables` loads the warm model), else its
    cliques of two or more attributes (its tables then load as they are).

    Args:
        domain: the fit's domain.
        cliques: the fit's own cliques (measured, given, constraints').
        warm_start: the warm model (None: no cliques).

    Returns:
        A list of cliques to add to ``cliques``.

    Example:
        >>> import pgmjax as pj
        >>> dom = pj.Domain({"a": 2, "b": 2, "c": 2})
        >>> warm_cliques(dom, [("a", "b")], None)
        []
    """
    if warm_start is None:
        return []
    imposed = [c for c in warm_start.cliques if len(c) > 1]
    # one exact model on the host only (a batch or a traced model loads as it is), checked before any tree is built
    if not imposed or not cliques or type(warm_start) is not GraphicalModel or warm_start.batch is not None \
            or warm_start.traced:
        return imposed
    fresh = junction_tree(domain, maximal_cliques(domain, list(cliques)))
    whole = junction_tree(domain, maximal_cliques(domain, list(cliques) + imposed))
    if fresh.cells > FRESH_SHARE * whole.cells:
        return imposed
    # structural zeros (-inf potentials) would be floored by the marginals: such a model keeps its cliques
    return imposed if any(np.isneginf(t).any() for t in warm_start.potentials.values()) else []


def marginal_tables(tree: JunctionTree, warm_start: GraphicalModel) -> dict:
    """The warm model on ``tree`` as tables: ``log mu_K`` for each clique ``K``, ``-log mu_S`` for each separator
    ``S`` (keyed by ``S``; a separator of no attribute is left out), ``mu`` the warm model's marginals, floored at
    :data:`FLOOR` times its total.

    Example:
        >>> import pgmjax as pj
        >>> dom = pj.Domain({"a": 2, "b": 2, "c": 2})
        >>> ms = [pj.Measurement(c, np.array([[30.0, 10.0], [20.0, 40.0]])) for c in [("a", "b"), ("b", "c")]]
        >>> warm = pj.estimate(dom, ms, iters=200)
        >>> tables = marginal_tables(junction_tree(dom, [("a", "b"), ("b", "c")]), warm)
        >>> sorted(tables)
        [('a', 'b'), ('b',), ('b', 'c')]
    """
    separators = [s for s, parent in zip(tree.separators, tree.parent) if parent >= 0 and s]
    floor = FLOOR * max(float(warm_start.total), 1.0)
    logs = [np.log(np.maximum(np.asarray(mu, np.float64), floor))
            for mu in warm_start.marginals(list(tree.cliques) + separators)]
    tables = dict(zip(tree.cliques, logs))
    for s, log_mu in zip(separators, logs[len(tree.cliques):]):  # a separator shared by several children: each
        tables[s] = tables.get(s, 0.0) - log_mu
    return tables
