"""One- and two-way marginals by one sweep per carried attribute, against brute force and the per-query path."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from oracle_reference import _brute_log_joint
from scipy.special import logsumexp

import pgmjax as pj
from pgmjax.graph import oracle
from pgmjax.model import answering, inference, pair_sweep
from pgmjax.model.query_plan import plan_query

TOTAL = 321.0

STRUCTURES = {
    "chain": ({"a": 3, "b": 4, "c": 2, "d": 5, "e": 3}, [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")]),
    "triples": ({"a": 2, "b": 3, "c": 4, "d": 2, "e": 3, "f": 2},
                [("a", "b", "c"), ("b", "c", "d"), ("d", "e"), ("c", "f")]),
    "loopy": ({"a": 3, "b": 2, "c": 3, "d": 2, "e": 4}, [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("c", "e")]),
    "components": ({"a": 3, "b": 2, "c": 4, "d": 2, "e": 3}, [("a", "b"), ("c", "d")]),  # e alone, two parts
    "star": ({"h": 3, "a": 2, "b": 4, "c": 3, "d": 2}, [("h", "a"), ("h", "b"), ("h", "c"), ("h", "d")]),
}


def _model(rng, sizes, cliques, zeros=False):
    dom = pj.Domain(sizes)
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) * 1.5 for c in cliques}
    if zeros:  # structural zeros: whole rows of a separator value have probability 0
        first = cliques[1]
        tables[first][0] = -np.inf
    model = pj.GraphicalModel(plan, plan.from_tables(tables, jnp.float64), TOTAL)
    logp = _brute_log_joint(dom, tables)
    return model, TOTAL * np.exp(logp - logsumexp(logp))


def _brute(domain, joint, attrs):
    names = list(domain.attributes)
    out = joint.sum(axis=tuple(i for i, a in enumerate(names) if a not in attrs))
    kept = [a for a in names if a in attrs]
    return np.transpose(out, [kept.index(a) for a in attrs])


def _host_tables(model):
    marg = model.clique_marginals()
    tree = model.junction_tree
    return lambda j: np.asarray(marg[tree.cliques[j]], np.float64)


def _device_tables(model):
    host = _host_tables(model)
    return lambda: {j: jnp.asarray(host(j)) for j in range(len(model.junction_tree.cliques))}


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_every_pair_and_one_way_equals_brute_force(rng, name):
    """Every ordered pair (both orders) and every attribute alone, against the enumerated joint."""
    sizes, cliques = STRUCTURES[name]
    model, joint = _model(rng, sizes, cliques)
    names = list(sizes)
    queries = [*itertools.permutations(names, 2), *((a,) for a in names)]
    got = pair_sweep.pair_marginals(model.junction_tree, queries, _host_tables(model), 1 << 20)
    for q, answer in zip(queries, got):
        np.testing.assert_allclose(answer, _brute(model.domain, joint, q), rtol=1e-10, atol=1e-10, err_msg=str(q))


def test_structural_zeros_give_zeros_not_nan(rng):
    """A separator value of probability 0: the conditionals there are 0, and the answers are brute force's."""
    sizes, cliques = STRUCTURES["chain"]
    model, joint = _model(rng, sizes, cliques, zeros=True)
    queries = list(itertools.combinations(sizes, 2))
    got = pair_sweep.pair_marginals(model.junction_tree, queries, _host_tables(model), 1 << 20)
    assert any((_brute(model.domain, joint, q) == 0).any() for q in queries)  # the zeros reach some pairs
    for q, answer in zip(queries, got):
        assert np.isfinite(answer).all()
        np.testing.assert_allclose(answer, _brute(model.domain, joint, q), rtol=1e-10, atol=1e-10, err_msg=str(q))


def test_an_aim_style_model_matches_the_per_query_path(rng):
    """A model of random pairs and triples over 14 attributes (fill-in, a tree of many cliques): ``marginals``
    of every pair (the sweep) equals each pair's own query plan run on the host."""
    dom = pj.Domain({f"x{i}": int(rng.integers(2, 7)) for i in range(14)})
    names = dom.attributes
    cliques = [tuple(sorted(rng.choice(len(names), size=int(rng.integers(2, 4)), replace=False)))
               for _ in range(12)]
    cliques = [tuple(names[i] for i in c) for c in cliques] + [(a,) for a in names]
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in cliques}
    model = pj.GraphicalModel(plan, plan.from_tables(tables, jnp.float64), TOTAL)
    tree = model.junction_tree
    assert len(tree.cliques) >= 4
    pairs = list(itertools.combinations(names, 2))
    swept = model.marginals(pairs)
    host = _host_tables(model)
    tabs = {j: host(j) for j in range(len(tree.cliques))}
    across = 0
    for q, answer in zip(pairs, swept):
        across += tree.containing(q) is None
        one = inference.run_plan_on_host(plan_query(tree, q, (True, True)), tabs, (None, None), TOTAL)
        np.testing.assert_allclose(answer, one, rtol=1e-9, atol=1e-9, err_msg=str(q))
    assert across > len(pairs) // 2  # most pairs cross cliques: the sweep, not a clique's sum, answered them


def test_a_sweep_past_its_limit_is_left_to_the_per_query_path(rng, monkeypatch):
    """A carried attribute whose messages would hold more than the limit: its pairs come back ``None`` from the
    sweep, and ``answer_untraced`` answers them by their own plans, the same numbers."""
    sizes, cliques = STRUCTURES["chain"]
    model, joint = _model(rng, sizes, cliques)
    tree = model.junction_tree
    queries = [("a", "e"), ("a", "b"), ("e",)]
    got = pair_sweep.pair_marginals(tree, queries, _host_tables(model), max_cells=30)
    assert got[0] is None  # across cliques: its tables and messages hold more than 30 cells
    np.testing.assert_allclose(got[1], _brute(model.domain, joint, ("a", "b")), rtol=1e-10)
    calls, real = [], pair_sweep.pair_marginals
    monkeypatch.setattr(pair_sweep, "pair_marginals",
                        lambda tree, qs, table, cells: calls.append(len(qs)) or real(tree, qs, table, 30))
    resolved = [pj.queries.resolve(model.domain, {a: pj.queries.Identity() for a in q}) for q in queries]
    answers = answering.answer_untraced(tree, resolved, _host_tables(model), _device_tables(model), TOTAL, 8, 1 << 20)
    assert calls == [3]
    for q, answer in zip(queries, answers):
        np.testing.assert_allclose(answer, _brute(model.domain, joint, q), rtol=1e-10, atol=1e-10, err_msg=str(q))


def test_the_sweep_holds_at_most_its_share_of_the_memory_limit(rng, monkeypatch):
    """Under a memory limit, the sweep's cells stay within a query run's share (counted before each allocation):
    what does not fit is left to the per-query path, and the answers are the same."""
    from pgmjax.graph import size_limit

    model, joint = _model(rng, *STRUCTURES["triples"])
    pairs = list(itertools.combinations(model.domain.attributes, 2))
    peaks, real = [], pair_sweep._Sweep.hold

    def hold(self, cells):
        real(self, cells)
        peaks.append(self.held)

    monkeypatch.setattr(pair_sweep._Sweep, "hold", hold)
    full = model.marginals(pairs)
    whole = max(peaks)
    peaks.clear()
    share = whole // 2
    with size_limit.limited(8 * share / answering.ANSWER_SHARE):
        limited = model.marginals(pairs)
    assert 0 < max(peaks) <= share
    for q, a, b in zip(pairs, full, limited):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10, err_msg=str(q))
        np.testing.assert_allclose(b, _brute(model.domain, joint, q), rtol=1e-10, atol=1e-10, err_msg=str(q))


def test_answers_of_larger_queries_are_not_swept(rng, monkeypatch):
    """Triples and queries with matrices keep the per-query path."""
    sizes, cliques = STRUCTURES["triples"]
    model, joint = _model(rng, sizes, cliques)
    seen = []
    real = pair_sweep.pair_marginals
    monkeypatch.setattr(pair_sweep, "pair_marginals", lambda tree, qs, table, cells: seen.append(list(qs)) or real(tree, qs, table, cells))
    Q = pj.queries
    queries = [{"a": Q.Identity(), "e": Q.Identity(), "f": Q.Identity()}, {"a": Q.Identity(), "e": Q.Prefix()},
               {"a": Q.Identity(), "f": Q.Identity()}]
    resolved = [Q.resolve(model.domain, q) for q in queries]
    answers = answering.answer_untraced(model.junction_tree, resolved, _host_tables(model), _device_tables(model), TOTAL, 8,
                                        1 << 20)
    assert seen == [[("a", "f")]]
    np.testing.assert_allclose(answers[0], _brute(model.domain, joint, ("a", "e", "f")), rtol=1e-10)
    np.testing.assert_allclose(answers[2], _brute(model.domain, joint, ("a", "f")), rtol=1e-10)


def test_a_model_past_the_host_cells_is_swept_in_float64(rng, monkeypatch):
    """A float32 model whose tables are past ``host_cells`` (its other queries run compiled): its pairs are swept on
    the host in float64, the compiled per-query answers' numbers to float32 rounding."""
    sizes, cliques = STRUCTURES["triples"]
    dom = pj.Domain(sizes)
    plan = oracle.make_plan(dom, cliques)
    model = pj.GraphicalModel(plan, plan.from_tables({c: rng.normal(size=dom.shape_of(c)) for c in cliques},
                                                     jnp.float32), TOTAL)
    tree = model.junction_tree
    pairs = [("a", "e"), ("f", "d"), ("a", "f")]  # each across cliques
    resolved = [pj.queries.resolve(dom, {v: pj.queries.Identity() for v in q}) for q in pairs]
    answered, real = [], pair_sweep.pair_marginals
    monkeypatch.setattr(pair_sweep, "pair_marginals",
                        lambda *a: answered.extend(x is not None for x in real(*a)) or real(*a))
    swept = answering.answer_untraced(tree, resolved, _host_tables(model), _device_tables(model), TOTAL, 4, 1)
    compiled = [inference.answer_many((plan_query(tree, q, (True, True)),), _device_tables(model)(), ((None, None),),
                                      TOTAL)[0] for q in pairs]
    assert answered == [True] * len(pairs)
    for q, a, b in zip(pairs, swept, compiled):
        assert a.dtype == np.float64
        np.testing.assert_allclose(a, np.asarray(b, np.float64), rtol=2e-5, atol=1e-4, err_msg=str(q))
