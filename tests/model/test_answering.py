"""Queries across cliques: the plan's top, its counted peak against a measured one, and answers in slices."""

import itertools
import tracemalloc

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles
from scipy.special import logsumexp
from oracle_reference import _brute_log_joint

import pgmjax as pj
from pgmjax import queries as Q
from pgmjax.graph import oracle, size_limit
from pgmjax.model import answering, inference, pair_sweep
from pgmjax.model.query_plan import peak_cells, plan_query

TOTAL = 777.0


def _chain_model(rng, sizes, dtype=jnp.float64, joint=True):
    """A chain a0 - a1 - ... of pairwise cliques (random log-potentials) and its dense joint (where asked)."""
    dom = pj.Domain({f"a{i}": n for i, n in enumerate(sizes)})
    names = dom.attributes
    cliques = [(names[i], names[i + 1]) for i in range(len(names) - 1)]
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) * 1.5 for c in cliques}
    model = pj.GraphicalModel(plan, plan.from_tables(tables, dtype), TOTAL)
    if not joint:
        return model, None
    logp = _brute_log_joint(dom, tables)
    return model, TOTAL * np.exp(logp - logsumexp(logp))


def _per_query_only(monkeypatch):
    """Every query through its own plan: the pair sweep (tests/model/test_pair_sweep.py) would answer the pairs
    on the host, whatever ``HOST_MARGINAL_CELLS``."""
    monkeypatch.setattr(pair_sweep, "pair_marginals", lambda tree, queries, table, cells: [None] * len(queries))


def _brute(domain, joint, attrs):
    names = list(domain.attributes)
    out = joint.sum(axis=tuple(i for i, a in enumerate(names) if a not in attrs))
    kept = [a for a in names if a in attrs]
    return np.transpose(out, [kept.index(a) for a in attrs])


def test_the_plan_carries_the_smaller_end_through_the_chain(rng, monkeypatch):
    """A pair at the two ends of a chain with wide separators: the plan roots the path at the end with more
    values, so every message carries the other end (300 x 2 cells, not 300 x 400); the answer is the one of the
    tree's own rooting."""
    from pgmjax.model import query_plan

    model, _ = _chain_model(rng, (400, 300, 300, 300, 2), joint=False)
    tree = model.junction_tree
    ends = ("a0", "a4")
    plan = plan_query(tree, ends, (True, True))
    carried = {v for step in plan.contractions[:-1] for v in step.out_vars} - {f"x:{a}" for a in ("a1", "a2", "a3")}
    assert carried == {"x:a4"}  # the 2-value end rides the messages; the 400-value one stays at the top
    query_plan._plan_query_cached.cache_clear()
    monkeypatch.setattr(query_plan, "_SMALL_MESSAGE_CELLS", 10**12)  # the tree's own top, whatever it carries
    own = plan_query(tree, ends, (True, True))
    query_plan._plan_query_cached.cache_clear()
    tables = {c: np.asarray(model.clique_marginals()[tree.cliques[c]], np.float64) for c in range(len(tree.cliques))}
    np.testing.assert_allclose(inference.run_plan_on_host(plan, tables, (None, None), TOTAL),
                               inference.run_plan_on_host(own, tables, (None, None), TOTAL), rtol=1e-9, atol=1e-9)
    assert peak_cells(plan, (400, 2)) <= peak_cells(own, (400, 2))


def test_every_top_answers_as_the_dense_joint(rng, monkeypatch):
    """With every plan trying every top (no small-message shortcut), marginals and factored queries across cliques
    equal brute-force enumeration, and some plans do root away from the tree's own top."""
    from pgmjax.model import query_plan

    monkeypatch.setattr(query_plan, "_SMALL_MESSAGE_CELLS", -1)
    query_plan._plan_query_cached.cache_clear()
    moved = 0
    for sizes in [(3, 5, 2, 4, 6), (6, 2, 7, 3), (2, 9, 2, 9, 2, 3)]:
        model, joint = _chain_model(rng, sizes)
        names = model.domain.attributes
        for attrs in [s for k in (2, 3) for s in itertools.permutations(names, k)][:40]:
            np.testing.assert_allclose(model.marginal(attrs), _brute(model.domain, joint, attrs), rtol=1e-9, atol=1e-9)
            plan = plan_query(model.junction_tree, attrs, (True,) * len(attrs))
            moved += plan.contractions[-1].clique != _own_top(model.junction_tree, attrs)
        m = rng.normal(size=(4, sizes[0]))
        got = model.answer({names[0]: m, names[-1]: Q.Identity()})
        np.testing.assert_allclose(got, np.tensordot(m, _brute(model.domain, joint, (names[0], names[-1])), 1),
                                   rtol=1e-9, atol=1e-9)
    query_plan._plan_query_cached.cache_clear()
    assert moved > 0


def _own_top(tree, attrs):
    """The top of the covering subtree as the tree roots it (the clique of least depth in the plan)."""
    from pgmjax.model import query_plan

    whole = tree.containing(attrs)
    return whole if whole is not None else query_plan._covering_subtree(tree, attrs)[1]


@pytest.mark.parametrize("sizes", [(30, 200, 200, 50), (300, 4, 40, 4, 40, 300), (70, 300, 2, 300, 90)])
def test_the_counted_peak_bounds_the_measured_one(rng, sizes):
    """The host run of every pair and triple is traced by tracemalloc (NumPy's arrays are counted there): what it
    allocates at its peak is at most the count (which also holds the tables it is given), and not far below."""
    model, _ = _chain_model(rng, sizes, joint=False)
    tree = model.junction_tree
    names = model.domain.attributes
    ratios = []
    for attrs in [s for k in (2, 3) for s in itertools.combinations(names, k)]:
        rows = tuple(model.domain[a] for a in attrs)
        plan = plan_query(tree, attrs, (True,) * len(attrs), rows)
        tables = {c: np.asarray(model.clique_marginals()[tree.cliques[c]], np.float64) for c in plan.cliques}
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        inference.run_plan_on_host(plan, tables, (None,) * len(attrs), TOTAL)
        measured = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        counted = 8 * peak_cells(plan, rows)
        assert measured <= counted + 8 * 8192 * 4, (attrs, measured, counted)  # and NumPy's iterator buffers
        ratios.append(measured / counted)
    assert max(ratios) > 0.5  # the count is a bound that is reached, not a loose one


@pytest.mark.parametrize("compiled", [False, True])
def test_a_query_over_the_limit_share_is_answered_in_slices(rng, monkeypatch, compiled):
    """Under a limit a query's whole run breaks, it is answered in slices of its rows (kept attributes and
    matrices alike): the same numbers as the whole run; compiled, every slice runs one program."""
    import pgmjax.model.graphical_model as gm

    model, joint = _chain_model(rng, (40, 12, 12, 12, 40))
    if compiled:
        monkeypatch.setattr(gm, "HOST_MARGINAL_CELLS", 0)
    _per_query_only(monkeypatch)
    queries = [{"a0": Q.Identity(), "a4": Q.Identity()}, {"a0": Q.Prefix(), "a2": Q.Identity(), "a4": Q.Value(3)},
               {"a0": rng.normal(size=(70, 40)), "a4": Q.Identity()}]
    whole = model.answers(queries)
    tree = model.junction_tree
    attrs, matrices = Q.resolve(model.domain, queries[0])
    peak = 8 * peak_cells(plan_query(tree, attrs, (True, True)), (40, 40))
    runs = []
    for name in ("run_plan_on_host", "answer_many"):  # count the runs: slices, not one run per query
        real = getattr(inference, name)
        monkeypatch.setattr(inference, name, lambda *a, real=real, **k: runs.append(1) or real(*a, **k))
    with size_limit.limited(0.75 * peak / answering.ANSWER_SHARE):  # the share is below the whole run's peak
        with count_compiles() as c:
            sliced = model.answers(queries)
    assert len(runs) > len(queries) + 2
    for a, b in zip(whole, sliced):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(sliced[0], _brute(model.domain, joint, ("a0", "a4")), rtol=1e-9)
    if compiled:
        assert 0 < c.count <= 2 * len(queries), c.names  # a program per query's slice shape, not per slice
    else:
        assert c.count == 0


def test_a_query_no_slicing_fits_is_refused_before_it_runs(rng):
    model, _ = _chain_model(rng, (40, 30, 30, 30, 40), joint=False)
    with size_limit.limited(1000.0):  # below even the tables the query reads
        with pytest.raises(size_limit.ModelTooLarge, match=r"answers: the answer to a query over \('a0', 'a4'\)"):
            model.marginal(("a0", "a4"))


def test_compiled_queries_run_in_as_few_programs_as_their_counted_memory_allows(rng, monkeypatch):
    """The compiled queries run in one program where XLA's count of its memory fits the share; under a limit that
    one program breaks but each query fits, in several, with the same answers."""
    import pgmjax.model.graphical_model as gm

    model, _ = _chain_model(rng, (40, 12, 12, 12, 40), joint=False)
    monkeypatch.setattr(gm, "HOST_MARGINAL_CELLS", 0)
    _per_query_only(monkeypatch)
    queries = [s for k in (2, 3) for s in itertools.combinations(model.domain.attributes, k)]
    tree = model.junction_tree
    plans = [plan_query(tree, q, (True,) * len(q)) for q in queries]
    mats = [(None,) * len(q) for q in queries]
    marginals = model.device_marginals()
    one = max(max(inference.answer_many_bytes((p,), marginals, (m,), TOTAL) for p, m in zip(plans, mats)),
              max(8 * peak_cells(p, model.domain.shape_of(p.attrs)) for p in plans))
    together = inference.answer_many_bytes(tuple(plans), marginals, tuple(mats), TOTAL)
    assert together > 1.5 * one  # the answers of twenty queries are live at once at the program's end
    whole = model.marginals(queries)
    programs = []
    real = inference.answer_many
    monkeypatch.setattr(inference, "answer_many", lambda p, *a: programs.append(len(p)) or real(p, *a))
    with size_limit.limited(1.2 * one / answering.ANSWER_SHARE):  # the share fits any one query, not all twenty
        split = model.marginals(queries)
    assert len(programs) > 1 and sum(programs) == len(queries) and max(programs) < len(queries)
    for a, b in zip(whole, split):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-9)


def test_a_compiled_query_xla_counts_over_the_limit_is_refused_before_it_runs(rng, monkeypatch):
    """Where the compiler's count of a lone query's program is over the limit, the query is refused, not run."""
    import pgmjax.model.graphical_model as gm

    model, _ = _chain_model(rng, (6, 5, 4), joint=False)
    monkeypatch.setattr(gm, "HOST_MARGINAL_CELLS", 0)
    _per_query_only(monkeypatch)
    monkeypatch.setattr(inference, "answer_many_bytes", lambda *a: 10**15)
    ran = []
    monkeypatch.setattr(inference, "answer_many", lambda *a: ran.append(1))
    with pytest.raises(size_limit.ModelTooLarge, match=r"the compiled program's temporaries and answer"):
        model.marginal(("a0", "a2"))
    assert not ran


def test_counting_a_compiled_program_compiles_it_once(rng, monkeypatch):
    """XLA's count is read from the program the call then runs: one compile of the answering program, not two."""
    import pgmjax.model.graphical_model as gm

    model, _ = _chain_model(rng, (9, 7, 5, 3), joint=False)
    monkeypatch.setattr(gm, "HOST_MARGINAL_CELLS", 0)
    _per_query_only(monkeypatch)
    model.device_marginals()  # the model's own marginals: compiled apart
    queries = [s for k in (2, 3) for s in itertools.combinations(model.domain.attributes, k)]
    with count_compiles() as c:
        model.marginals(queries)
    assert [n for n in c.names if "answer_many" in n] == ["jit(answer_many_traced)"], c.names
