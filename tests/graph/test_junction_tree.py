"""Junction-tree construction: validity (running intersection), coverage, determinism, caching."""


import networkx as nx
import pytest

import pgmjax as pj
from pgmjax.graph.routed_plan import make_routed_plan


def _check_valid(tree, cliques):
    dom = tree.domain
    # every attribute and every input clique is covered
    for a in dom:
        assert any(a in c for c in tree.cliques)
    for c in cliques:
        assert tree.containing(c) is not None, c
    # it is a tree with one root
    g = tree.to_networkx()
    assert nx.is_tree(g) if len(tree.cliques) > 1 else True
    assert tree.parent.count(-1) == 1
    # running intersection: the cliques holding any attribute form a connected subtree
    for a in dom:
        holders = [i for i, c in enumerate(tree.cliques) if a in c]
        assert nx.is_connected(g.subgraph(holders)), a
    # separators are the intersections with the parent; cliques are maximal
    for i, c in enumerate(tree.cliques):
        p = tree.parent[i]
        if p >= 0:
            assert set(tree.separators[i]) == set(c) & set(tree.cliques[p])
        for j, d in enumerate(tree.cliques):
            assert i == j or not set(c) <= set(d)


STRUCTURES = {
    "single attribute": ({"a": 3}, [("a",)]),
    "chain": ({f"x{i}": 2 for i in range(6)}, [(f"x{i}", f"x{i+1}") for i in range(5)]),
    "3-cycle": ({"a": 2, "b": 3, "c": 4}, [("a", "b"), ("b", "c"), ("a", "c")]),
    "grid 3x3": (
        {f"g{i}{j}": 2 for i in range(3) for j in range(3)},
        [(f"g{i}{j}", f"g{i}{j+1}") for i in range(3) for j in range(2)]
        + [(f"g{i}{j}", f"g{i+1}{j}") for i in range(2) for j in range(3)],
    ),
    "disconnected + unmeasured": ({"a": 2, "b": 2, "c": 2, "d": 2, "e": 5}, [("a", "b"), ("c", "d")]),
    "nested and duplicate": ({"a": 2, "b": 2, "c": 2}, [("a", "b", "c"), ("a", "b"), ("b", "a"), ("c",)]),
}


@pytest.mark.parametrize("name", list(STRUCTURES))
def test_structures(name):
    dom_dict, cliques = STRUCTURES[name]
    dom = pj.Domain(dom_dict)
    tree = pj.junction_tree(dom, cliques)
    _check_valid(tree, cliques)


def test_three_cycle_is_triangulated_into_one_clique():
    dom = pj.Domain({"a": 2, "b": 3, "c": 4})
    assert pj.junction_tree(dom, [("a", "b"), ("b", "c"), ("a", "c")]).cliques == (("a", "b", "c"),)


def test_random_structures_are_valid(rng):
    for _ in range(40):
        d = int(rng.integers(1, 9))
        dom = pj.Domain({f"v{i}": int(rng.integers(1, 4)) for i in range(d)})
        cliques = [
            tuple(dom.attributes[i] for i in rng.choice(d, int(rng.integers(1, min(3, d) + 1)), replace=False))
            for _ in range(int(rng.integers(1, 7)))
        ]
        _check_valid(pj.junction_tree(dom, cliques), cliques)


def test_deterministic_and_cached():
    dom = pj.Domain({f"x{i}": 3 for i in range(8)})
    cl = [("x0", "x1"), ("x1", "x2", "x3"), ("x3", "x7"), ("x4", "x5"), ("x5", "x0")]
    t1 = pj.junction_tree(dom, cl)
    t2 = pj.junction_tree(dom, list(reversed(cl)))
    assert t1 is t2  # same clique set -> the cached tree
    t3 = pj.junction_tree(pj.Domain(dom.to_dict()), [tuple(reversed(c)) for c in cl])
    assert t3 == t1 and hash(t3) == hash(t1)


def test_long_chain_is_fast_and_shallow():
    import time

    d = 1000
    dom = pj.Domain({f"a{i}": 10 for i in range(d)})
    cl = [(f"a{i}", f"a{i+1}", f"a{i+2}") for i in range(d - 2)]
    from pgmjax.graph import junction

    junction._junction_tree_cached.cache_clear()
    t = time.perf_counter()
    tree = pj.junction_tree(dom, cl)
    elapsed = time.perf_counter() - t
    assert len(tree.cliques) == d - 2 and tree.treewidth == 2
    # rooted at a centre: about half as many levels as cliques
    assert tree.num_levels <= d // 2 + 1
    assert elapsed < 30  # a loose sanity bound; the benchmark measures the real time


def test_separate_components_hang_off_the_largest_as_a_star():
    # a 7-clique chain (the largest part) and 40 unmeasured attributes of assorted sizes
    sizes = {f"c{i}": 3 for i in range(8)} | {f"u{i}": 2 + i % 9 for i in range(40)}
    dom = pj.Domain(sizes)
    chain = [(f"c{i}", f"c{i+1}") for i in range(7)]
    tree = pj.junction_tree(dom, chain)
    _check_valid(tree, chain)
    singletons = [i for i, c in enumerate(tree.cliques) if c[0].startswith("u")]
    assert len(singletons) == 40
    hub = {tree.parent[i] for i in singletons}
    assert len(hub) == 1 and tree.cliques[hub.pop()][0].startswith("c")  # all on one clique of the chain
    assert all(tree.separators[i] == () for i in singletons)
    # depth: the chain's radius (a centre of 7 cliques is 3 away from its ends) plus one for the star
    assert tree.num_levels == 4
    # two equal-sized parts: each part hangs by its own centre, so the depth stays at the larger radius + 1
    two = pj.junction_tree(pj.Domain({f"x{i}": 2 for i in range(10)}),
                           [(f"x{i}", f"x{i+1}") for i in range(4)] + [(f"x{i}", f"x{i+1}") for i in range(5, 9)])
    assert two.num_levels <= 4



def test_separate_components_hang_off_the_smallest_clique_of_the_largest_part():
    # A parent takes a size-class routing pair per cell and child: one-way tables only (AIM's first fit) hang off
    # the smallest table, not the largest; a part whose centre is large hangs the others off its smallest clique.
    dom = pj.Domain({"big": 1000, "b": 2, "c": 50, "d": 7, "e": 300})
    tree = pj.junction_tree(dom, [(a,) for a in dom.attributes])
    hub = tree.cliques.index(("b",))
    assert all(tree.parent[i] == hub for i in range(len(tree.cliques)) if i != hub)
    plan = make_routed_plan(dom, [(a,) for a in dom.attributes])
    assert plan.size.cells == 4096  # the smallest class: 1,359 cells and 4 x 2 routing pairs
    # a chain whose centre holds 40 x 2 cells and whose end 2 x 3: 30 singletons hang off the end, not the centre
    dom = pj.Domain({"x": 1000, "y": 40, "z": 2, "w": 3} | {f"u{i}": 5 for i in range(30)})
    chain = [("x", "y"), ("y", "z"), ("z", "w")]
    tree = pj.junction_tree(dom, chain)
    _check_valid(tree, chain)
    singletons = [i for i, c in enumerate(tree.cliques) if c[0].startswith("u")]
    assert {tree.cliques[tree.parent[i]] for i in singletons} == {("z", "w")}


def _containing_by_scan(tree, attrs):
    """The definition: the smallest clique holding ``attrs``, the first on ties (a scan of every clique)."""
    best = None
    for i, c in enumerate(tree.cliques):
        if set(attrs) <= set(c) and (best is None or tree.domain.size(c) < tree.domain.size(tree.cliques[best])):
            best = i
    return best


def _maximal_by_scan(domain, cliques):
    canon = list(dict.fromkeys(domain.canonical(c) for c in cliques))
    return tuple(c for c in canon if not any(set(c) < set(d) for d in canon))


def test_indexed_lookups_equal_a_scan_of_every_clique(rng):
    # containing() and maximal_cliques() look only among the cliques that hold a query's rarest attribute;
    # on random structures (ties of equal sizes, nested and repeated cliques, the empty query, unknown
    # attributes) they answer what a scan of every clique answers.
    from pgmjax.graph.junction import maximal_cliques

    for trial in range(30):
        n = int(rng.integers(3, 12))
        dom = pj.Domain({f"v{i}": int(rng.choice([2, 2, 3, 4])) for i in range(n)})
        names = list(dom.attributes)
        cliques = [tuple(rng.choice(names, size=int(rng.integers(1, 4)), replace=False)) for _ in range(int(rng.integers(1, 12)))]
        cliques += cliques[: int(rng.integers(0, 3))]  # repeats
        assert maximal_cliques(dom, cliques) == _maximal_by_scan(dom, cliques)
        tree = pj.junction_tree(dom, cliques)
        queries = [(), ("unknown",), (names[0], "unknown")]
        queries += [tuple(rng.choice(names, size=int(rng.integers(1, min(4, n) + 1)), replace=False)) for _ in range(20)]
        queries += [c for c in tree.cliques] + [c[:1] for c in tree.cliques]
        for q in queries:
            assert tree.containing(q) == _containing_by_scan(tree, q), (trial, q)


def test_triangulated_cliques_are_the_junction_trees_without_filling_its_cache(rng):
    """A model's size from ``triangulated_cliques`` (AIM sizes every candidate's model with it) is the fitted
    junction tree's, and asking for it caches no tree."""
    from pgmjax.graph import junction

    for _ in range(60):
        d = int(rng.integers(1, 14))
        dom = pj.Domain({f"v{i}": int(rng.integers(1, 6)) for i in range(d)})
        cliques = [tuple(dom.attributes[i] for i in rng.choice(d, int(rng.integers(1, min(3, d) + 1)), replace=False))
                   for _ in range(int(rng.integers(1, 12)))]
        before = junction._junction_tree_cached.cache_info().currsize
        sized = junction.triangulated_cliques(dom, cliques)
        assert junction._junction_tree_cached.cache_info().currsize == before
        assert sized == pj.junction_tree(dom, cliques).cliques


def test_a_chordal_model_is_triangulated_by_min_fill_alone_as_by_all_three(rng, monkeypatch):
    """A fitted model's cliques are chordal: min-fill adds no fill, and the other two criteria are not run; the
    tree's cliques are those all three give (each finds the graph's maximal cliques), and a non-chordal graph
    still runs all three."""
    from pgmjax.graph import junction

    calls = []
    greedy = junction._greedy_elimination
    monkeypatch.setattr(junction, "_greedy_elimination", lambda *a: calls.append(a[2]) or greedy(*a))
    for _ in range(30):
        d = int(rng.integers(4, 12))
        dom = pj.Domain({f"v{i}": int(rng.integers(2, 6)) for i in range(d)})
        edges = [tuple(dom.attributes[i] for i in rng.choice(d, 2, replace=False)) for _ in range(int(rng.integers(3, 14)))]
        model = junction.triangulated_cliques(dom, edges)  # chordal
        calls.clear()
        fast = junction._elimination_cliques(dom, frozenset(model))[1]
        assert calls == ["fill"]
        monkeypatch.setattr(junction, "_adds_no_fill", lambda *a: False)
        calls.clear()
        assert junction._elimination_cliques(dom, frozenset(model))[1] == fast
        assert calls == ["fill", "weight", "fill_weight"]
        monkeypatch.undo()
        monkeypatch.setattr(junction, "_greedy_elimination", lambda *a: calls.append(a[2]) or greedy(*a))
        assert {frozenset(c) for c in model} == {frozenset(dom.attributes[v] for v in s) for s in fast}
    cycle = pj.Domain({f"c{i}": 2 for i in range(4)})
    calls.clear()
    junction._elimination_cliques(cycle, frozenset({("c0", "c1"), ("c1", "c2"), ("c2", "c3"), ("c0", "c3")}))
    assert calls == ["fill", "weight", "fill_weight"]  # a 4-cycle: min-fill adds a chord
