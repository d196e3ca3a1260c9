"""Region graphs against brute force on tiny clique sets: closure, Hasse edges, counting-number sum rules."""

import itertools

import numpy as np
import pytest

import pgmjax as pj
from pgmjax.graph.region_graph import region_graph


def _random_cliques(rng):
    d = int(rng.integers(2, 7))
    dom = pj.Domain({f"x{i}": 2 for i in range(d)})
    cliques = [tuple(dom.attributes[i] for i in sorted(rng.choice(d, int(rng.integers(1, min(4, d) + 1)), replace=False)))
               for _ in range(int(rng.integers(1, 7)))]
    return dom, cliques


@pytest.mark.parametrize("seed", range(20))
def test_convex_region_graph_brute_force(seed):
    dom, cliques = _random_cliques(np.random.default_rng(seed))
    g = region_graph(dom, cliques, "convex")
    sets = [frozenset(r) for r in g.regions]
    assert len(set(sets)) == len(sets), "a region appears twice"
    maximal = {frozenset(c) for c in cliques if not any(set(c) < set(o) for o in cliques)}
    assert {frozenset(r) for r in g.top} == maximal
    # closed under (non-empty) intersection, and nothing else: every region is an intersection of maximal cliques
    for a, b in itertools.combinations(sets, 2):
        assert not (a & b) or (a & b) in sets
    for s in sets:
        assert s == frozenset.intersection(*[m for m in maximal if s <= m])
    # edges: exactly the Hasse diagram (child strictly inside parent, no region strictly between)
    hasse = {(p, c) for p, c in itertools.permutations(range(len(sets)), 2)
             if sets[c] < sets[p] and not any(sets[c] < s < sets[p] for s in sets)}
    assert set(g.edges) == hasse
    assert all(c == 1.0 for c in g.counting)  # convex: every counting number positive (1)
    # Kikuchi counting numbers: the sum rule, every attribute's regions sum to 1
    for a in set().union(*sets):
        assert sum(c for r, c in zip(sets, g.kikuchi) if a in r) == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(10))
def test_bethe_region_graph_sum_rule(seed):
    dom, cliques = _random_cliques(np.random.default_rng(100 + seed))
    g = region_graph(dom, cliques, "bethe")
    for a in set().union(*map(set, g.regions)):
        assert sum(c for r, c in zip(g.regions, g.counting) if a in r) == pytest.approx(1.0)
    for p, c in g.edges:  # factor -> attribute
        assert p < g.num_top <= c and set(g.regions[c]) < set(g.regions[p]) and len(g.regions[c]) == 1


def test_region_graph_is_hashed_by_value_and_cached():
    dom = pj.Domain({"a": 2, "b": 3, "c": 2})
    g1 = region_graph(dom, [("a", "b"), ("b", "c"), ("a", "c")])
    g2 = region_graph(dom, [("b", "a"), ("b", "c"), ("c", "a")])
    assert g1 == g2 and hash(g1) == hash(g2)
    assert g1.containing(("b",)) is not None and g1.containing(("a", "b", "c")) is None


def test_region_graph_refuses_bad_kind():
    with pytest.raises(ValueError, match="kind must be one of"):
        region_graph(pj.Domain({"a": 2}), [("a",)], "kikuchi")
