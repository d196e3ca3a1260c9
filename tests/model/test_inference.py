"""Marginals, conditioning and factored queries of a fitted model against brute-force enumeration."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles
from scipy.special import logsumexp
from oracle_reference import _brute_log_joint, _random_problem

import pgmjax as pj
from pgmjax import queries as Q
from pgmjax.graph import oracle
from pgmjax.model import pair_sweep

TOTAL = 1234.5


def _random_model(rng, kind, dtype=jnp.float64):
    dom, cliques = _random_problem(rng, kind)
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) * 1.5 for c in cliques}
    big = max(tables, key=lambda c: tables[c].size)
    if tables[big].size > 2 and rng.random() < 0.5:
        tables[big].flat[int(rng.integers(tables[big].size))] = -np.inf  # a structural zero
    model = pj.GraphicalModel(plan, plan.from_tables(tables, dtype), TOTAL)
    logp = _brute_log_joint(dom, tables)
    return model, TOTAL * np.exp(logp - logsumexp(logp))


def _brute_answer(domain, joint, query):
    """Apply each attribute's matrix to the full table, then sum out the unnamed attributes."""
    out = joint
    names = list(domain.attributes)
    for a, factor in query.items():
        m = Q.factor_matrix(factor, domain[a], a) if not isinstance(factor, Q.Identity) else np.eye(domain[a])
        axis = names.index(a)
        out = np.moveaxis(np.tensordot(m, out, axes=([1], [axis])), 0, axis)
    named = [a for a in query if not isinstance(query[a], Q.Total)]
    out = out.sum(axis=tuple(i for i, a in enumerate(names) if a not in named))
    kept = [a for a in names if a in named]
    return np.transpose(out, [kept.index(a) for a in named])


def _brute_marginal(domain, joint, attrs):
    return _brute_answer(domain, joint, {a: Q.Identity() for a in attrs})


@pytest.mark.parametrize("kind", ["chain", "loopy", "disconnected", "random"])
def test_every_marginal_equals_bruteforce(kind, rng):
    for _ in range(6):
        model, joint = _random_model(rng, kind)
        names = model.domain.attributes
        subsets = [s for k in range(len(names) + 1) for s in itertools.permutations(names, k)]
        picks = [subsets[i] for i in rng.choice(len(subsets), min(len(subsets), 25), replace=False)]
        got = model.marginals(picks)
        for attrs, m in zip(picks, got):
            np.testing.assert_allclose(m, _brute_marginal(model.domain, joint, attrs), rtol=1e-6, atol=1e-9)
            assert m.shape == model.domain.shape_of(attrs)


def test_long_chain_far_apart_marginal(rng):
    dom = pj.Domain({f"x{i}": 3 for i in range(9)})
    cliques = [(f"x{i}", f"x{i+1}") for i in range(8)]
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=(3, 3)) * 2 for c in cliques}
    model = pj.GraphicalModel(plan, plan.from_tables(tables, jnp.float64), 10.0)
    logp = _brute_log_joint(dom, tables)
    joint = 10.0 * np.exp(logp - logsumexp(logp))
    for attrs in [("x0", "x8"), ("x8", "x4", "x0"), ("x2", "x7")]:
        np.testing.assert_allclose(model.marginal(attrs), _brute_marginal(dom, joint, attrs), rtol=1e-6)


@pytest.mark.parametrize("kind", ["chain", "loopy", "random"])
def test_conditioning_equals_bruteforce(kind, rng):
    for _ in range(6):
        model, joint = _random_model(rng, kind)
        names = list(model.domain.attributes)
        if len(names) < 2:
            continue
        perm = [names[i] for i in rng.permutation(len(names))]
        ev_attr, attrs = perm[0], tuple(perm[1 : 1 + int(rng.integers(1, len(names)))])
        value = int(rng.integers(model.domain[ev_attr]))
        got = model.marginal(attrs, given={ev_attr: value})
        want = _brute_answer(model.domain, joint, {a: Q.Identity() for a in attrs} | {ev_attr: Q.Value(value)})
        np.testing.assert_allclose(got, want[..., 0], rtol=1e-6, atol=1e-9)
        # a set of values is the sum over its members
        values = sorted({value, int(rng.integers(model.domain[ev_attr]))})
        got_set = model.marginal(attrs, given={ev_attr: values})
        want_set = sum(model.marginal(attrs, given={ev_attr: v}) for v in values)
        np.testing.assert_allclose(got_set, want_set, rtol=1e-6, atol=1e-9)
        # the conditional distribution: joint restricted to the evidence, renormalised
        cond = got / got.sum() if got.sum() > 0 else got
        ref = want[..., 0] / want.sum() if want.sum() > 0 else want[..., 0]
        np.testing.assert_allclose(cond, ref, rtol=1e-6, atol=1e-9)


def _random_factor(rng, size):
    choice = int(rng.integers(9))
    if choice == 0:
        return Q.Prefix()
    if choice == 1:
        return Q.Moments(3, values=rng.normal(size=size))
    if choice == 2:
        return Q.Compress(rng.integers(0, 2, size=size))
    if choice == 3:
        lo = int(rng.integers(size))
        return Q.Range(lo, int(rng.integers(lo, size)))
    if choice == 4:
        return Q.Identity()
    if choice == 5:
        return Q.Total()
    if choice == 6:
        return Q.Mean()
    if choice == 7:
        return Q.AllRange()
    return rng.normal(size=(int(rng.integers(1, 4)), size))  # negative entries


@pytest.mark.parametrize("kind", ["chain", "loopy", "disconnected", "random"])
def test_factored_queries_equal_bruteforce(kind, rng):
    for _ in range(6):
        model, joint = _random_model(rng, kind)
        names = list(model.domain.attributes)
        qs = []
        for _ in range(8):
            attrs = [names[i] for i in rng.permutation(len(names))[: int(rng.integers(1, len(names) + 1))]]
            qs.append({a: _random_factor(rng, model.domain[a]) for a in attrs})
        for q, got in zip(qs, model.answers(qs)):
            np.testing.assert_allclose(got, _brute_answer(model.domain, joint, q), rtol=1e-6, atol=1e-8)


def test_table2_constructors_hand_values():
    assert Q.Prefix().matrix(3).tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert Q.Value(2).matrix(3).tolist() == [[0, 0, 1]]
    assert Q.ValueSet([0, 2]).matrix(3).tolist() == [[1, 0, 1]]
    assert Q.Range(1, 2).matrix(4).tolist() == [[0, 1, 1, 0]]
    assert Q.AllRange().matrix(3).tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1], [0, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert Q.Compress([0, 0, 1]).matrix(3).tolist() == [[1, 1, 0], [0, 0, 1]]
    assert Q.Mean([1.0, 5.0]).matrix(2).tolist() == [[1.0, 5.0]]
    assert Q.Moments(2, [1.0, 3.0]).matrix(2).tolist() == [[1.0, 3.0], [1.0, 9.0]]
    assert Q.Total().matrix(2).tolist() == [[1.0, 1.0]]


def test_mean_and_moments_of_a_known_model():
    dom = pj.Domain({"a": 3, "b": 2})
    plan = oracle.make_plan(dom, [("a", "b")])
    p = np.array([[0.1, 0.2], [0.3, 0.1], [0.2, 0.1]])
    model = pj.GraphicalModel(plan, plan.from_tables({("a", "b"): np.log(p)}, jnp.float64), 100.0)
    # sum of a over records = 100 * (0*0.3 + 1*0.4 + 2*0.3) = 100; second moment 100*(0.4 + 4*0.3) = 160
    np.testing.assert_allclose(model.answer({"a": Q.Moments(2)}), [100.0, 160.0], rtol=1e-12)
    np.testing.assert_allclose(model.answer({"a": Q.Mean(), "b": Q.Value(0)}), [[100 * (0.3 + 2 * 0.2)]], rtol=1e-12)
    np.testing.assert_allclose(model.answer({}), 100.0, rtol=1e-12)


def test_queries_do_not_recompile(rng):
    dom = pj.Domain({f"x{i}": 4 for i in range(6)})
    cliques = [(f"x{i}", f"x{i+1}") for i in range(5)]
    plan = oracle.make_plan(dom, cliques)
    make = lambda: pj.GraphicalModel(
        plan, plan.from_tables({c: rng.normal(size=(4, 4)) for c in cliques}, jnp.float64), 50.0
    )
    queries = lambda: [{"x0": rng.normal(size=(2, 4)), "x5": Q.Prefix()}, {"x1": Q.Identity(), "x3": Q.Identity()}]
    make().answers(queries())
    make().marginals([("x0", "x4"), ("x2",)])
    with count_compiles() as c:
        make().answers(queries())
        make().marginals([("x0", "x4"), ("x2",)])
    assert c.count <= 2  # the oracle call of each new model is compiled already; only ... nothing else
    with count_compiles() as c:
        make().answers(queries())
    assert c.count == 0


def test_float32_model_answers(rng):
    model, joint = _random_model(np.random.default_rng(5), "chain", dtype=jnp.float32)
    attrs = tuple(reversed(model.domain.attributes))
    np.testing.assert_allclose(model.marginal(attrs), _brute_marginal(model.domain, joint, attrs), rtol=1e-4, atol=1e-3)


def test_bad_queries_raise_clear_errors():
    dom = pj.Domain({"a": 3, "b": 2})
    plan = oracle.make_plan(dom, [("a", "b")])
    model = pj.GraphicalModel(plan, plan.zeros(jnp.float64), 10.0)
    with pytest.raises(ValueError, match="'zz'"):
        model.marginal(("a", "zz"))
    with pytest.raises(ValueError, match="more than once"):
        model.marginal(("a", "a"))
    with pytest.raises(ValueError, match="also appear in `given`"):
        model.marginal(("a", "b"), given={"a": 1})
    with pytest.raises(ValueError, match="evidence on 'b'.*value 2"):
        model.marginal("a", given={"b": 2})
    with pytest.raises(ValueError, match="query on 'a'.*3 columns"):
        model.answer({"a": np.ones((2, 4))})
    with pytest.raises(ValueError, match="Range"):
        model.answer({"a": Q.Range(2, 5)})
    with pytest.raises(ValueError, match="Compress"):
        model.answer({"a": Q.Compress([0, 1])})
    with pytest.raises(TypeError, match="mapping"):
        model.answer([("a", Q.Prefix())])


@pytest.mark.parametrize("dtype", [pytest.param(jnp.float64, marks=pytest.mark.slow), jnp.float32])  # float64: a second parametrisation
def test_marginals_are_computed_on_the_host_and_equal_the_compiled_answer(dtype, rng, monkeypatch):
    # The host sums and plans (float64) against the compiled program (forced by a host limit of 0 cells), on
    # every kind of model, subsets inside a clique and across cliques, in any order, and factored queries
    # with matrices and evidence: the same numbers within the model dtype's rounding, and no compilation.
    import pgmjax.model.graphical_model as gm

    for kind in ["chain", "loopy", "disconnected", "random"]:
        model, _ = _random_model(rng, kind, dtype)
        model.clique_marginals()  # the oracle call, compiled once per structure
        inside = [s for c in model.cliques for k in (1, 2, len(c)) for s in itertools.permutations(c, min(k, len(c)))]
        names = model.domain.attributes
        across = [s for k in (2, 3) for s in itertools.permutations(names, k) if model.junction_tree.containing(s) is None]
        if kind in ("chain", "disconnected"):
            assert across  # these always have marginals across cliques
        queries = inside + across[:20]
        a, b = names[0], names[-1]
        factored = [{a: Q.Prefix(), b: Q.Value(model.domain[b] - 1)}, {a: rng.normal(size=(3, model.domain[a])), b: Q.Identity()},
                    {b: Q.Mean()}, {}, {a: Q.Total(), b: Q.Identity()}]
        with count_compiles() as c:
            host = model.marginals(queries)
            host_factored = model.answers(factored)
            host_given = model.marginal((a,), given={b: 0})
        assert c.count == 0, c.names
        monkeypatch.setattr(gm, "HOST_MARGINAL_CELLS", 0)
        # the pair sweep answers pairs across cliques on the host whatever the limit: here, every query compiled
        monkeypatch.setattr(pair_sweep, "pair_marginals", lambda tree, qs, table, cells: [None] * len(qs))
        compiled = model.answers([{x: Q.Identity() for x in attrs} for attrs in queries])
        compiled_factored = model.answers(factored)
        compiled_given = model.marginal((a,), given={b: 0})
        monkeypatch.undo()
        tol = 1e-12 if dtype == jnp.float64 else 2e-6
        for attrs, h, d in zip(queries, host, compiled):
            assert h.dtype == np.float64 and h.shape == model.domain.shape_of(attrs)
            np.testing.assert_allclose(h, d, rtol=tol, atol=tol * TOTAL)
        for h, d in zip(host_factored + [host_given], compiled_factored + [compiled_given]):
            assert h.dtype == np.float64 and h.shape == d.shape
            np.testing.assert_allclose(h, d, rtol=tol, atol=tol * TOTAL)


@pytest.mark.parametrize("kind", ["chain", "random"])
def test_host_answers_in_one_call_equal_answers_one_by_one(kind, rng):
    """Queries answered together share each clique's table and conditional and each contraction's order: the
    very numbers, bit for bit, of the same queries asked one at a time (each with its own tables and conditionals)."""
    model, _ = _random_model(rng, kind)
    names = model.domain.attributes
    queries = [s for k in (1, 2, 3) for s in itertools.combinations(names, k)][:60]
    together = model.marginals(queries)
    for attrs, got in zip(queries, together):
        np.testing.assert_array_equal(got, model.marginal(attrs))


def test_marginal_of_a_large_clique_goes_through_the_compiled_program(monkeypatch, rng):
    import pgmjax.model.graphical_model as gm

    model, joint = _random_model(rng, "chain")
    monkeypatch.setattr(gm, "HOST_MARGINAL_CELLS", 0)
    attrs = model.cliques[0][:1]
    got = model.marginal(attrs)
    assert model.cache.host_blocks == {}  # no block was copied to the host: the compiled program answered
    assert model.cache.host_blocks == {} and np.asarray(model.answer({attrs[0]: Q.Prefix()})).shape == (model.domain[attrs[0]],)
    np.testing.assert_allclose(got, _brute_marginal(model.domain, joint, attrs), rtol=1e-6, atol=1e-9)
    monkeypatch.setattr(gm, "HOST_MARGINAL_CELLS", 2**24)
    np.testing.assert_allclose(model.marginal(attrs), got, rtol=1e-12)
    assert model.cache.host_blocks  # and below the limit, the host sum



def test_host_contractions_by_loop_and_by_path_agree(rng, monkeypatch):
    """Small host contractions run by NumPy's own loop (no path to check at each call), larger ones by the greedy
    path: both give the same answers (float64 rounding), across cliques and with matrices."""
    from pgmjax.model import inference, query_plan

    model, _ = _random_model(rng, "chain")
    names = model.domain.attributes
    queries = [{x: Q.Identity() for x in s} for k in (1, 2, 3) for s in itertools.combinations(names, k)][:40]
    queries.append({names[0]: rng.normal(size=(3, model.domain[names[0]])), names[-1]: Q.Prefix()})
    answers, orders, small = {}, {}, query_plan._LOOP_EINSUM_CELLS
    order = query_plan.einsum_path.__wrapped__  # uncached: every contraction asks it
    for limit in (small, 0):
        seen = orders[limit] = []
        monkeypatch.setattr(query_plan, "_LOOP_EINSUM_CELLS", limit)
        monkeypatch.setattr(inference, "einsum_path", lambda spec, shapes, seen=seen: seen.append(order(spec, shapes)) or seen[-1])
        answers[limit] = model.answers(queries)
    assert any(p is False for p in orders[small])  # this model's contractions are small
    assert orders[0] and all(p is not False for p in orders[0])
    for a, b in zip(*answers.values()):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)
