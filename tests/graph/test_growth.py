"""A chordal model grown by one clique (pgmjax.graph.growth) against the whole triangulation it stands for."""

import itertools

import numpy as np
import pytest

from pgmjax import Domain
from pgmjax.graph.growth import Growth
from pgmjax.graph.junction import junction_tree, triangulated_cliques
from pgmjax.mechanisms.steps import candidate_model_sizes, hypothetical_model_size


def _random_problem(rng, n_attrs: int, n_extra: int, high: int):
    """A random tree of pairs (as an AIM or MST model starts) and ``n_extra`` random cliques of 1-3 attributes."""
    dom = Domain({f"x{i}": int(rng.integers(2, high + 1)) for i in range(n_attrs)})
    cliques = [(f"x{i}", f"x{int(rng.integers(0, i))}") for i in range(1, n_attrs)]
    cliques += [tuple(rng.choice(dom.attributes, size=int(rng.integers(1, 4)), replace=False))
                for _ in range(n_extra)]
    return dom, cliques


def _cells(dom, cliques):
    return sum(dom.size(c) for c in cliques)


@pytest.mark.parametrize("seed", range(6))
def test_grown_is_the_whole_triangulation(seed):
    """For a fitted model's cliques H (chordal) and any clique c, the grown model is exactly what
    triangulating H + [c] whole gives: the cliques and their cells. Many structures, every kind of candidate:
    inside a clique, across a few, spanning disconnected parts of the tree."""
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(25):
        dom, measured = _random_problem(rng, int(rng.integers(4, 20)), int(rng.integers(0, 6)), int(rng.choice([4, 40])))
        base = triangulated_cliques(dom, measured)  # a model's cliques: chordal
        growth = Growth(dom, base)
        assert growth.chordal
        candidates = [tuple(rng.choice(dom.attributes, size=int(rng.integers(1, min(4, len(dom)) + 1)), replace=False))
                      for _ in range(12)]
        for c in candidates:
            whole = triangulated_cliques(dom, list(base) + [c])
            assert set(growth.grown(c)) == set(whole), (base, c)
            assert growth.cells(c) == _cells(dom, whole)
            released = Domain({a: dom[a] * int(rng.integers(1, 4)) for a in dom.attributes})  # merged values restored
            assert growth.cells(c, released) == _cells(released, whole)
            checked += 1
    assert checked == 25 * 12


def test_cells_over_another_domain_need_the_models_attributes():
    growth = Growth(Domain({"a": 2, "b": 3, "c": 4}), [("a", "b"), ("b", "c")])
    assert growth.cells(("a", "c"), Domain({"a": 20, "b": 3, "c": 40})) == 20 * 3 * 40
    with pytest.raises(ValueError, match="domain must have the model's attributes"):
        growth.cells(("a", "c"), Domain({"a": 2, "b": 3}))


@pytest.mark.parametrize("seed", range(3))
def test_a_pairs_subtree_is_the_path_between_its_attributes(seed):
    """For two attributes no clique holds together, the subtree found along the tree path between them is the one
    pruning the whole tree finds (the smallest subtree holding both)."""
    rng = np.random.default_rng(seed)
    pairs = 0
    for _ in range(10):
        dom, measured = _random_problem(rng, int(rng.integers(4, 25)), int(rng.integers(0, 8)), 5)
        growth = Growth(dom, triangulated_cliques(dom, measured))
        for a, b in itertools.combinations(dom.attributes, 2):
            if growth._subtree((a, b)) is not None:
                assert growth._subtree((a, b)) == growth._pruned((a, b)), (a, b)
                pairs += 1
    assert pairs > 100


def test_grown_model_is_chordal_and_holds_both():
    """The grown cliques are their own junction tree (a fit on them builds exactly them) and hold the old
    model's cliques and the new one."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        dom, measured = _random_problem(rng, 10, 8, 6)
        base = triangulated_cliques(dom, measured)
        c = tuple(rng.choice(dom.attributes, size=3, replace=False))
        grown = Growth(dom, base).grown(c)
        assert set(junction_tree(dom, grown).cliques) == set(grown)
        for held in list(base) + [dom.canonical(c)]:
            assert any(set(held) <= set(g) for g in grown)


def test_a_clique_inside_the_model_leaves_it_unchanged():
    dom = Domain({"a": 2, "b": 3, "c": 4, "d": 5})
    growth = Growth(dom, [("a", "b"), ("b", "c"), ("c", "d")])
    assert growth.grown(("c", "b")) == (("a", "b"), ("b", "c"), ("c", "d"))
    assert growth.cells(("d",)) == growth.base_cells == 6 + 12 + 20


def test_a_cycle_closed_across_the_tree():
    """a-b-c-d closed by (a, d): the cycle is re-triangulated, by the cheaper chord (a, c: 24 + 40 cells,
    against b, d: 30 + 60)."""
    dom = Domain({"a": 2, "b": 3, "c": 4, "d": 5})
    growth = Growth(dom, [("a", "b"), ("b", "c"), ("c", "d")])
    assert growth.grown(("a", "d")) == (("a", "b", "c"), ("a", "c", "d"))
    assert growth.cells(("a", "d")) == 64


def test_cliques_that_are_not_chordal_are_flagged():
    """A 4-cycle's tree adds a chord: grown would be the grown triangulation, not the cycle's with c, so the
    caller is told (a triangle given as its three edges is chordal: no chord is added)."""
    dom = Domain({"a": 2, "b": 2, "c": 2, "d": 2})
    assert not Growth(dom, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]).chordal
    assert Growth(dom, [("a", "b"), ("b", "c"), ("a", "c")]).chordal
    assert Growth(dom, []).chordal


def test_candidate_model_sizes_are_hypothetical_model_sizes():
    """The round's size check, grown or whole, gives hypothetical_model_size's numbers: on a model's cliques
    (grown), on cliques that are not chordal (whole, the fallback) and with the approximate oracle."""
    rng = np.random.default_rng(3)
    dom, measured = _random_problem(rng, 12, 10, 8)
    candidates = list(itertools.combinations(dom.attributes[:7], 2)) + [(a,) for a in dom.attributes]
    for base in (list(triangulated_cliques(dom, measured)), measured):
        for oracle in ("exact", "approximate"):
            got = candidate_model_sizes(dom, base, candidates, oracle)
            want = [hypothetical_model_size(dom, base + [c], oracle) for c in candidates]
            np.testing.assert_allclose(got, want, rtol=0, atol=0)
