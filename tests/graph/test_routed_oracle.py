"""The size-class oracle against brute force, and one compiled program per size class (counted)."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles
from oracle_reference import _brute_log_joint, _random_problem

import pgmjax as pj
from pgmjax.graph import oracle_plan, routed_oracle
from pgmjax.graph.routed_plan import make_routed_plan
from pgmjax.graph.routed_steps import class_size


KINDS = ("chain", "loopy", "disconnected", "random")


def _tables(rng, plan, scale=2.0, zeros=False):
    tables = {c: rng.normal(size=plan.domain.shape_of(c)) * scale for c in plan.cliques}
    if zeros:  # a structural zero in the first clique (never all of it)
        t = tables[plan.cliques[0]]
        if t.size > 1:
            t.reshape(-1)[0] = -np.inf
    return tables


def _brute_marginal(domain, tables, clique, total):
    logp = _brute_log_joint(domain, tables)
    p = np.exp(logp - logp.max())
    p = total * p / p.sum()
    axes = tuple(i for i, a in enumerate(domain.attributes) if a not in clique)
    canon = [a for a in domain.attributes if a in clique]
    return np.transpose(p.sum(axis=axes), [canon.index(a) for a in clique])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype, tol", [(jnp.float64, 1e-9), (jnp.float32, 2e-4)])
def test_marginals_and_log_partition_match_brute_force(kind, dtype, tol):
    rng = np.random.default_rng(7)
    for trial in range(4):
        dom, cliques = _random_problem(rng, kind)
        plan = make_routed_plan(dom, cliques)
        tables = _tables(rng, plan, zeros=trial % 2 == 1)
        theta = plan.from_tables(tables, dtype)
        mu, log_z = jax.jit(routed_oracle.marginals)(plan, theta, 1000.0)
        got = plan.tables({"cells": np.asarray(mu["cells"], np.float64)})
        for c in plan.cliques:
            np.testing.assert_allclose(got[c], _brute_marginal(dom, tables, c, 1000.0), atol=tol * 1000.0, rtol=tol)
        logp = _brute_log_joint(dom, tables)
        expected = float(np.log(np.exp(logp - logp.max()).sum()) + logp.max())
        assert float(log_z) == pytest.approx(expected, rel=tol, abs=tol)
        assert float(routed_oracle.log_partition(plan, theta)) == pytest.approx(float(log_z), rel=tol, abs=tol)
        assert not np.isnan(np.asarray(mu["cells"])).any()


def test_padding_holds_no_mass_and_every_clique_sums_to_the_total():
    rng = np.random.default_rng(3)
    dom, cliques = _random_problem(rng, "random")
    plan = make_routed_plan(dom, cliques)
    mu, _ = routed_oracle.marginals(plan, plan.from_tables(_tables(rng, plan), jnp.float64), 50.0)
    cells = np.asarray(mu["cells"])
    assert np.all(cells[plan.host.used:] == 0.0)
    for t in plan.tables({"cells": cells}).values():
        assert t.sum() == pytest.approx(50.0, rel=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_log_conditionals_keep_the_distribution_and_normalise_it(kind):
    rng = np.random.default_rng(11)
    dom, cliques = _random_problem(rng, kind)
    plan = make_routed_plan(dom, cliques)
    tables = _tables(rng, plan, zeros=True)
    theta = plan.from_tables(tables, jnp.float64)
    out = routed_oracle.log_conditionals(plan, theta)
    assert float(routed_oracle.log_partition(plan, out)) == pytest.approx(0.0, abs=1e-12)
    before = _brute_log_joint(dom, tables)
    after = _brute_log_joint(dom, plan.tables({"cells": np.asarray(out["cells"])}))
    finite = np.isfinite(before)
    assert np.array_equal(finite, np.isfinite(after))  # structural zeros stay exactly zero
    shift = before[finite] - after[finite]
    np.testing.assert_allclose(shift, shift[0], atol=1e-9)


def test_canonical_keeps_the_distribution_and_is_idempotent():
    rng = np.random.default_rng(5)
    dom, cliques = _random_problem(rng, "chain")
    plan = make_routed_plan(dom, cliques)
    tables = _tables(rng, plan)
    blocks = plan.from_tables(tables, jnp.float64)
    once = routed_oracle.canonical(plan, blocks)
    twice = routed_oracle.canonical(plan, once)
    np.testing.assert_allclose(np.asarray(twice["cells"]), np.asarray(once["cells"]), atol=1e-12)
    diff = _brute_log_joint(dom, tables) - _brute_log_joint(dom, plan.tables({"cells": np.asarray(once["cells"])}))
    np.testing.assert_allclose(diff, diff.reshape(-1)[0], atol=1e-9)


def test_class_sizes_grow_geometrically():
    sizes = [class_size(n) for n in range(1, 5000)]
    assert sizes == sorted(sizes) and all(s >= n for s, n in zip(sizes, range(1, 5000)))
    assert all(s <= max(16, 1.5 * n) for s, n in zip(sizes, range(1, 5000)))
    assert len(set(sizes)) <= 18


def _chain_in_order(seed: int):
    dom = pj.Domain({f"a{i}": 3 for i in range(8)})
    order = np.random.default_rng(seed).permutation(dom.attributes)
    return dom, [tuple(sorted(p, key=dom.attributes.index)) for p in zip(order[:-1], order[1:])]


def test_two_structures_of_one_class_run_one_compiled_program():
    marginals = jax.jit(routed_oracle.marginals)
    plans = [make_routed_plan(*_chain_in_order(seed)) for seed in range(3)]
    assert len({p.cliques for p in plans}) == 3 and len({p.size for p in plans}) == 1
    rng = np.random.default_rng(0)
    marginals(plans[0], plans[0].from_tables(_tables(rng, plans[0])), 10.0)
    with count_compiles() as counter:
        for plan in plans[1:]:
            mu, _ = marginals(plan, plan.from_tables(_tables(rng, plan)), 10.0)
            mu["cells"].block_until_ready()
    assert counter.count == 0


def test_a_new_structure_of_a_fitted_class_compiles_nothing():
    rng = np.random.default_rng(2)

    def measurements(cliques, dom):
        return [pj.Measurement(c, rng.uniform(5, 50, dom.size(c)), stddev=2.0) for c in cliques]

    # The worker's earlier tests may hold many programs: estimate frees them all once more than MAX_LIVE_PROGRAMS are
    # live, which between the two fits below would recompile the first one's. Start from none.
    pj.release_compiled()
    dom, first = _chain_in_order(10)
    pj.estimate(dom, measurements(first, dom), iters=40, chunk=20, program="size_class").marginal(first[0])
    dom, second = _chain_in_order(11)
    with count_compiles() as counter:
        model = pj.estimate(dom, measurements(second, dom), iters=40, chunk=20, program="size_class")
        model.marginal(second[0])
    assert counter.count == 0, counter.names



def test_measurements_hosted_by_larger_cliques_add_no_program_within_a_class():
    """A fit's routed measurements hold a pair per measured cell's host cell (the smallest model clique holding it):
    one-way marginals of a model's few-valued attributes, hosted by its large pairs, took the routing past the cells
    and a second program of the class (an AIM round that measured them, after rounds that measured only pairs; a
    TreeAIM batch whose picks all lay inside its larger cliques). The pairs are padded to at least four times the
    cells, so the three fits run one program."""
    rng = np.random.default_rng(3)
    dom = pj.Domain({"a": 2, "b": 1000, "c": 2, "d": 1000, "e": 2, "f": 1000})
    pairs = [("a", "b"), ("c", "d"), ("e", "f")]
    plan = make_routed_plan(dom, pairs)
    from pgmjax.estimation.routed_losses import stack_routed

    def measurements(cliques):
        return [pj.Measurement(c, rng.uniform(5, 50, dom.size(c)), stddev=2.0) for c in cliques]

    ones = [("a",), ("c",), ("e",)]  # 6 measured cells, 6,000 host cells
    sets = (pairs, pairs + ones, pairs + ones + ones)  # the last: 6,000 more host cells, past twice the cells
    assert sum(dom.size(c) for c in pairs) * 3 > 2 * plan.size.cells  # the third set's pairs need the floor's room
    shapes = {stack_routed(plan, measurements(cs), np.float32).shape.pairs for cs in sets}
    assert shapes == {4 * plan.size.cells}, shapes
    pj.release_compiled()
    pj.estimate(dom, measurements(pairs), iters=40, chunk=20, program="size_class").marginal(("a", "b"))
    with count_compiles() as counter:
        for cs in sets[1:]:
            model = pj.estimate(dom, measurements(cs), iters=40, chunk=20, program="size_class")
            model.marginal(("a", "b"))
    assert counter.count == 0, counter.names


def _growing_models():
    """The models a mechanism's run grows through on a table of 16 binary attributes (as NLTCS): one-way marginals,
    then pairs and triples added: three classes of 96 to 192 cells without the floors."""
    dom = pj.Domain({f"b{i}": 2 for i in range(16)})
    a = dom.attributes
    ones = [(x,) for x in a]
    return dom, [ones, ones + [(a[0], a[1])], ones + [(a[i], a[i + 1]) for i in range(8)],
                 ones + [(a[0], a[1], a[2]), (a[2], a[5]), (a[5], a[9], a[12])],
                 ones + [(a[i], a[j]) for i in range(6) for j in range(i + 1, 6)]]


def test_small_shallow_models_share_one_size_class_and_one_fit_program():
    """A shallow tree's window is at least the platform's shallow width and every class at least its smallest
    cells: the small models a run grows through are one class (three without the floors), and after the
    first fit the others compile nothing (counted), with the dense program's answers."""
    from pgmjax.graph.routed_steps import WINDOW_COSTS

    dom, structures = _growing_models()
    for platform in ("cpu", "gpu"):
        sizes = {make_routed_plan(dom, cliques, platform=platform).size for cliques in structures}
        assert len(sizes) == 1, sizes
        (size,) = sizes
        assert size.width == WINDOW_COSTS[platform].shallow_width and size.cells == WINDOW_COSTS[platform].smallest_cells
    rng = np.random.default_rng(3)

    def measurements(cliques):
        return [pj.Measurement(c, rng.uniform(5, 50, dom.size(c)), stddev=2.0) for c in cliques]

    pj.release_compiled()
    pj.estimate(dom, measurements(structures[0]), iters=40, chunk=20, program="size_class",
                dtype=jnp.float64).marginal(("b0",))
    for cliques in structures[1:]:
        ms = measurements(cliques)
        with count_compiles() as counter:
            model = pj.estimate(dom, ms, iters=40, chunk=20, program="size_class", dtype=jnp.float64)
        assert counter.count == 0, (cliques, counter.names)
        dense = pj.estimate(dom, ms, iters=40, chunk=20, program="dense", dtype=jnp.float64)
        for c in cliques:
            np.testing.assert_allclose(model.marginal(c), dense.marginal(c), rtol=1e-7, atol=1e-7)


def test_without_the_floors_the_small_models_are_classes_of_their_own(narrow_windows):
    dom, structures = _growing_models()
    assert len({make_routed_plan(dom, cliques).size for cliques in structures}) == 3



def test_a_shallow_trees_window_is_its_size_classs():
    """A random tree of pairs over 20 attributes (6,812 cells): windows of 4,096 cells read 46,080 cell-units per
    pass and 1,024-cell windows 47,104, a near tie that the cheapest-window rule gave to the wider window, whose
    vector (the tables and one window past them) is a 12,288-cell class. A shallow tree takes its class's window
    (``window_of_class``): 1,024 cells and the 8,192-cell class; and every shallow model of a class the same one, so
    a growing model's window no longer flips between near ties, each width a program of its own."""
    from pgmjax.graph.junction import junction_tree, maximal_cliques
    from pgmjax.graph.routed_steps import steps

    rng = np.random.default_rng(66)
    dom = pj.Domain({f"x{i}": int(rng.integers(2, 30)) for i in range(20)})
    a = dom.attributes
    cliques = [tuple(sorted((a[i], a[int(rng.integers(0, i))]), key=a.index)) for i in range(1, 20)]
    tree = junction_tree(dom, maximal_cliques(dom, cliques))
    assert tree.cells == 6812 and steps(tree)[1] == 1024
    assert make_routed_plan(dom, cliques).size.cells == 8192
    from pgmjax.graph.routed_steps import WINDOW_COSTS, window_of_class

    for seed in range(40):  # shallow random trees of 6 to 60 attributes: each plan's window is its class's
        rng = np.random.default_rng(seed)
        n = int(rng.integers(6, 60))
        dom = pj.Domain({f"x{i}": int(rng.integers(2, 30)) for i in range(n)})
        a = dom.attributes
        plan = make_routed_plan(dom, [tuple(sorted((a[i], a[int(rng.integers(0, i))]), key=a.index)) for i in range(1, n)])
        assert plan.size.width == window_of_class(plan.size.cells, WINDOW_COSTS["cpu"]), (seed, plan.size)


def test_a_deep_tree_keeps_its_cost_chosen_window():
    """Past ``LEVELS_MIN`` levels a step's window is the cheapest one, not the shallow floor: a chain of 100 binary
    pairs (50 levels from its centre) steps through windows of 16 cells, as many trips as levels, each reading
    little."""
    from pgmjax.graph.routed_steps import LEVELS_MIN, WINDOW_COSTS

    dom = pj.Domain({f"a{i}": 2 for i in range(101)})
    plan = make_routed_plan(dom, [(f"a{i}", f"a{i + 1}") for i in range(100)])
    assert int(plan.arrays["num_levels"]) > LEVELS_MIN
    assert plan.size.width == 16 < WINDOW_COSTS["cpu"].shallow_width


def test_inside_a_program_a_routed_plan_has_no_structure():
    dom, cliques = _chain_in_order(0)
    plan = make_routed_plan(dom, cliques)

    def reads_cliques(p):
        return len(p.cliques)

    with pytest.raises(RuntimeError, match="read on the host only"):
        jax.jit(reads_cliques)(plan)


def test_auto_takes_the_size_class_program_where_it_ends_sooner_first_compile_included():
    """``program="auto"``'s cost model (``oracles.uses_size_class``): the size-class program's compile (a share of it
    where the caller fits many structures) and routed passes against the dense program's compile, which grows with
    its plan's block axes (oracles.dense_axes). Few shapes: dense, unless the compile is shared by many structures; many
    shapes: the size class on the CPU; a long chain of one shape: the size class for a short fit on the CPU, dense for a
    long one on a GPU (a launch per level step); one wide
    clique with many small marginals (nltcs-like: pairs summed into few cells): never."""
    from pgmjax.estimation.oracles import COMPILE_COSTS, dense_axes, uses_size_class

    def choice(dom, ms, iters, platform, structures=1, method="mirror_descent"):
        return uses_size_class("auto", dom, [m.clique for m in ms], ms, "l2", iters, platform=platform,
                               structures=structures, method=method)

    rng = np.random.default_rng(0)
    one_shape = pj.Domain({f"x{i}": 4 for i in range(8)})
    pairs = [pj.Measurement((f"x{i}", f"x{i + 1}"), rng.random((4, 4)), stddev=1.0) for i in range(7)]
    assert not choice(one_shape, pairs, 1000, "cpu") and not choice(one_shape, pairs, 1000, "gpu")
    assert choice(one_shape, pairs, 1000, "cpu", structures=50)  # AIM's rounds share the class's compile

    shapes = pj.Domain({f"x{i}": 2 + i % 7 for i in range(41)})
    varied = [pj.Measurement((f"x{i}", f"x{i + 1}"), rng.random(shapes.project((f"x{i}", f"x{i + 1}")).shape), stddev=1.0)
              for i in range(40)]
    assert choice(shapes, varied, 1000, "cpu")
    axes = dense_axes(oracle_plan.make_plan(shapes, [m.clique for m in varied]))
    for method, cost in COMPILE_COSTS.items():  # the dense compile follows the blocks' axes; the size class's does not
        assert cost.dense(axes, len(varied)) > cost.size_class, method

    chain = pj.Domain({f"x{i}": 3 for i in range(120)})
    links = [pj.Measurement((f"x{i}", f"x{i + 1}"), rng.random((3, 3)), stddev=1.0) for i in range(119)]
    assert choice(chain, links, 20, "cpu", structures=100) and not choice(chain, links, 1000, "gpu", structures=100)

    wide = pj.Domain({f"b{i}": 2 for i in range(16)})
    two_way = [pj.Measurement((f"b{i}", f"b{j}"), rng.random((2, 2)), stddev=1.0)
               for i in range(16) for j in range(i + 1, 16)]
    everything = [pj.Measurement(tuple(wide.attributes), rng.random(wide.shape_of(wide.attributes)), stddev=1.0)]
    model = [m.clique for m in everything]
    for platform in ("cpu", "gpu"):
        assert not uses_size_class("auto", wide, model, everything + two_way, "l2", 1000, platform=platform, structures=100)
    assert not uses_size_class("dense", one_shape, [m.clique for m in pairs], pairs, "l2", 10, structures=100)
    assert uses_size_class("size_class", wide, model, everything + two_way, "l2", 1000)


def test_estimate_checks_structures():
    dom = pj.Domain({"a": 2, "b": 3})
    m = pj.Measurement(("a", "b"), np.ones((2, 3)), stddev=1.0)
    with pytest.raises(ValueError, match="estimate: structures must be at least 1"):
        pj.estimate(dom, [m], iters=5, structures=0)
    with pytest.raises(TypeError, match="estimate: structures must be an integer"):
        pj.estimate(dom, [m], iters=5, structures=2.0)
    with pytest.raises(ValueError, match="estimate: repeats must be at least 1"):
        pj.estimate(dom, [m], iters=5, repeats=0)
    with pytest.raises(ValueError, match="estimate: expected_iters must be at least 1"):
        pj.estimate(dom, [m], iters=5, expected_iters=0)


def test_auto_weighs_a_structure_fitted_again_and_the_iterations_a_fit_is_expected_to_run():
    """A structure the caller fits ``repeats`` times shares the dense compile among the fits; a fit expected to stop
    early (``expected_iters``) runs fewer routed passes. On many shapes (the size class for one short fit), many
    repeats of a long fit go dense; through ``estimate`` the expected iterations, not ``iters``, are weighed."""
    from pgmjax.estimation.oracles import uses_size_class

    rng = np.random.default_rng(0)
    dom = pj.Domain({f"x{i}": 2 + i % 7 for i in range(41)})
    ms = [pj.Measurement((f"x{i}", f"x{i + 1}"), rng.random(dom.project((f"x{i}", f"x{i + 1}")).shape), stddev=1.0)
          for i in range(40)]
    cliques = [m.clique for m in ms]
    assert uses_size_class("auto", dom, cliques, ms, "l2", 1000, structures=50)
    assert not uses_size_class("auto", dom, cliques, ms, "l2", 1000, structures=50, repeats=50)
    long_fit = next(n for n in (1000, 3000, 10_000, 30_000, 100_000) if not uses_size_class("auto", dom, cliques, ms, "l2", n))
    assert uses_size_class("auto", dom, cliques, ms, "l2", 100)  # ... and a short one the size class
    kinds = {}
    for expected in (None, 100):
        model = pj.estimate(dom, ms, iters=long_fit, expected_iters=expected, tol=1e-3)
        kinds[expected] = type(model.plan).__name__
    assert kinds == {None: "OraclePlan", 100: "RoutedPlan"}, kinds


def test_the_passes_differentiate_in_reverse_mode_as_the_dense_oracles_do():
    """A differentiable plan's passes scan over the class's levels (not a loop whose trip count is data), so a
    gradient through the marginals (what L-BFGS takes) exists and equals the dense oracle's; the forward passes of
    both plans agree."""
    from pgmjax.graph import oracle

    dom, cliques = _chain_in_order(3)
    routed, dense = make_routed_plan(dom, cliques, differentiable=True), oracle.make_plan(dom, cliques)
    tables = _tables(np.random.default_rng(4), routed)
    weights = {c: np.random.default_rng(5).normal(size=np.shape(t)) for c, t in tables.items()}

    def loss(plan, marginals_of, theta):
        mu = plan.tables(marginals_of(plan, theta, 10.0)[0])
        return sum(jnp.sum(jnp.asarray(weights[c]) * mu[c]) for c in weights)

    def grad_tables(plan, marginals_of):
        theta = plan.from_tables({c: jnp.asarray(t, jnp.float64) for c, t in tables.items()}, jnp.float64)
        return plan.tables(jax.jit(jax.grad(lambda t: loss(plan, marginals_of, t)))(theta))  # compiled: eager is slow

    g_routed, g_dense = grad_tables(routed, routed_oracle.marginals), grad_tables(dense, oracle.marginals)
    looped = make_routed_plan(dom, cliques)
    assert not looped.differentiable
    theta = looped.from_tables({c: jnp.asarray(t) for c, t in tables.items()})
    marginals = jax.jit(routed_oracle.marginals)
    np.testing.assert_allclose(np.asarray(marginals(looped, theta, 10.0)[0]["cells"]),
                               np.asarray(marginals(routed, theta, 10.0)[0]["cells"]), rtol=1e-6, atol=1e-6)
    for c in tables:
        np.testing.assert_allclose(np.asarray(g_routed[c]), np.asarray(g_dense[c]), rtol=1e-9, atol=1e-9)


def test_lbfgs_runs_one_program_per_class_and_reaches_mirror_descents_optimum():
    rng = np.random.default_rng(6)

    def fit(seed, method, iters):
        dom, cliques = _chain_in_order(seed)
        ms = [pj.Measurement(c, rng.uniform(5, 50, dom.size(c)), stddev=2.0) for c in cliques]
        return pj.estimate(dom, ms, method=method, iters=iters, chunk=50, program="size_class", dtype=jnp.float64,
                           report=True), dom, ms

    pj.release_compiled()  # none of the worker's earlier programs (see the test above)
    fit(20, "lbfgs", 300)  # as many iterations: a fit that stalls finishes by mirror descent, its program too
    rng = np.random.default_rng(7)
    with count_compiles() as counter:
        (model, report), dom, ms = fit(21, "lbfgs", 300)
    assert counter.count == 0, counter.names
    reference = pj.estimate(dom, ms, method="mirror_descent", iters=3000, program="size_class", dtype=jnp.float64,
                            report=True).report
    assert isinstance(model.plan, type(make_routed_plan(*_chain_in_order(0)))) and model.plan.differentiable
    assert report.loss == pytest.approx(reference.loss, rel=1e-7)


@pytest.fixture
def narrow_windows(monkeypatch):
    """The windows' machinery on small problems: no shallow-tree window floor and no smallest class (each problem's
    own cost-chosen window and cell vector, as deep trees get them), so a few cells exercise split cliques and
    windows of pairs."""
    from pgmjax.graph import routed_plan, routed_steps

    costs = {k: c._replace(shallow_width=16, smallest_cells=16, cells_per_window=0) for k, c in routed_steps.WINDOW_COSTS.items()}
    monkeypatch.setattr(routed_steps, "WINDOW_COSTS", costs)
    monkeypatch.setattr(routed_plan, "WINDOW_COSTS", costs)
    routed_plan._routed_plan_cached.cache_clear()
    yield
    routed_plan._routed_plan_cached.cache_clear()


def _star():
    """A clique of 16 cells with six children: its 96 routing pairs fill two windows of the plan's 64."""
    dom = pj.Domain({"h1": 4, "h2": 4, **{f"l{i}": 2 for i in range(6)}})
    return dom, [("h1", "h2")] + [("h2", f"l{i}") for i in range(6)]


def test_a_clique_with_many_children_reads_its_pairs_window_by_window(narrow_windows):
    dom, cliques = _star()
    looped, scanned = make_routed_plan(dom, cliques), make_routed_plan(dom, cliques, differentiable=True)
    assert max(np.asarray(looped.arrays["pc"])) == 2 and looped.size.pair_width == looped.size.width == 64
    assert looped.size.chunks == 0 and scanned.size.chunks == 2  # the scan's static bound: the most windows
    tables = _tables(np.random.default_rng(8), looped, zeros=True)
    for plan in (looped, scanned):
        theta = plan.from_tables(tables, jnp.float64)
        mu, log_z = jax.jit(routed_oracle.marginals)(plan, theta, 100.0)
        got = plan.tables({"cells": np.asarray(mu["cells"])})
        for c in plan.cliques:
            np.testing.assert_allclose(got[c], _brute_marginal(dom, tables, c, 100.0), rtol=1e-9, atol=1e-9)
        logp = _brute_log_joint(dom, tables)
        assert float(log_z) == pytest.approx(float(np.log(np.exp(logp - logp.max()).sum()) + logp.max()), rel=1e-9)


def test_the_routing_pairs_add_no_dimension_to_a_size_class():
    """A clique with six children (96 routing pairs) and one with a single child of the same cells (16 pairs) run
    one program: the pairs' vector and window follow the cells and the window."""
    star_dom, star = _star()
    pair_dom = pj.Domain({"h1": 4, "h2": 4, "m": 12})
    plans = [make_routed_plan(star_dom, star), make_routed_plan(pair_dom, [("h1", "h2"), ("h2", "m")])]
    pairs = [int(np.sum(np.asarray(p.arrays["pair_level"]) >= 0)) for p in plans]
    assert pairs == [96, 16] and len({p.size for p in plans}) == 1, (pairs, [p.size for p in plans])
    marginals = jax.jit(routed_oracle.marginals)
    rng = np.random.default_rng(9)
    marginals(plans[0], plans[0].from_tables(_tables(rng, plans[0])), 10.0)
    with count_compiles() as counter:
        marginals(plans[1], plans[1].from_tables(_tables(rng, plans[1])), 10.0)[0]["cells"].block_until_ready()
    assert counter.count == 0


def test_a_model_that_grows_clique_by_clique_meets_few_classes():
    """As an AIM run's models do: 40 models over 24 attributes, each the last plus a measured pair or triple, from a
    few hundred cells to 60,000, meet 12 classes (plan and measurements together; the window is each model's
    cheapest, 256 to 16,384 cells), in each of two draws; with the pairs a dimension of their own (a window of
    pairs as wide as a level's most) the first draw's models met 16."""
    from pgmjax.estimation.routed_losses import stack_routed
    from pgmjax.graph.junction import junction_tree, maximal_cliques

    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        dom = pj.Domain({f"x{i}": int(rng.integers(2, 13)) for i in range(24)})
        measured, classes, models = [(a,) for a in dom.attributes], set(), 0
        while models < 40:
            c = tuple(sorted(rng.choice(dom.attributes, int(rng.integers(2, 4)), replace=False), key=dom.attributes.index))
            if junction_tree(dom, maximal_cliques(dom, measured + [c])).cells > 60_000:
                continue
            measured, models = measured + [c], models + 1
            plan = make_routed_plan(dom, measured)
            ms = [pj.Measurement(m, np.ones(dom.shape_of(m)), stddev=1.0) for m in measured]
            classes.add((plan.size, stack_routed(plan, ms, np.float32).shape))
        assert len(classes) <= 12, (seed, sorted(classes))


def _split_problem(root: bool):
    """A clique of 1,024 cells among long chains of 9-cell cliques: the plan's window is narrower than it, so its
    messages are merged over the windows it is split into. ``root``: four chains around it make it the root;
    otherwise one chain hangs from it and the root is in the chain."""
    chains, length = (4, 12) if root else (1, 20)
    dom = pj.Domain({**{f"b{i}": 4 for i in range(5)}, **{f"x{j}_{i}": 3 for j in range(chains) for i in range(length)}})
    cliques = [tuple(f"b{i}" for i in range(5))]
    for j in range(chains):
        cliques += [(f"b{j}", f"x{j}_0")] + [(f"x{j}_{i}", f"x{j}_{i + 1}") for i in range(length - 1)]
    return dom, cliques


@pytest.mark.parametrize("root", [False, True], ids=["inner clique split", "root split"])
def test_a_clique_wider_than_the_window_is_split_and_gives_the_dense_oracles_answers(narrow_windows, root):
    """The dense oracle (itself tested against brute force) is the reference: marginals, log Z, log-conditionals,
    the canonical gauge, and (through a differentiable plan's scans) gradients, with structural zeros."""
    from pgmjax.graph import gauge, oracle

    dom, cliques = _split_problem(root)
    looped, scanned, dense = (make_routed_plan(dom, cliques), make_routed_plan(dom, cliques, differentiable=True),
                              oracle.make_plan(dom, cliques))
    n = int(looped.arrays["num_levels"])
    split = [j for j in range(len(looped.cliques)) if dom.size(looped.cliques[j]) > looped.size.width]
    assert split and not np.asarray(looped.arrays["first"])[:n].all()  # a clique really is split
    assert (looped.tree.parent[split[0]] == -1) == root
    tables = _tables(np.random.default_rng(10), looped, zeros=True)
    weights = {c: np.random.default_rng(12).normal(size=np.shape(t)) for c, t in tables.items()}
    theta_d = dense.from_tables(tables, jnp.float64)
    mu_d, log_z_d = jax.jit(oracle.marginals)(dense, theta_d, 100.0)
    want = dense.tables({k: np.asarray(v) for k, v in mu_d.items()})
    conditionals_d = dense.tables({k: np.asarray(v) for k, v in jax.jit(gauge.log_conditionals)(dense, theta_d).items()})
    canonical_d = dense.tables({k: np.asarray(v) for k, v in jax.jit(gauge.canonical)(dense, theta_d).items()})

    def weighted(plan, marginals_of, theta):
        mu = plan.tables(marginals_of(plan, theta, 100.0)[0])
        return sum(jnp.sum(jnp.asarray(weights[c]) * jnp.where(jnp.isfinite(mu[c]), mu[c], 0.0)) for c in weights)

    def finite(t):
        return np.where(np.isfinite(t), t, 0.0)

    grad_d = dense.tables(jax.jit(jax.grad(lambda t: weighted(dense, oracle.marginals, t)))(theta_d))
    for plan in (looped, scanned):
        theta = plan.from_tables(tables, jnp.float64)
        mu, log_z = jax.jit(routed_oracle.marginals)(plan, theta, 100.0)
        got = plan.tables({"cells": np.asarray(mu["cells"])})
        for c in plan.cliques:
            np.testing.assert_allclose(got[c], want[c], rtol=1e-9, atol=1e-9)
        assert float(log_z) == pytest.approx(float(log_z_d), rel=1e-12)
        conditionals = plan.tables({"cells": np.asarray(jax.jit(routed_oracle.log_conditionals)(plan, theta)["cells"])})
        canonical = plan.tables({"cells": np.asarray(jax.jit(routed_oracle.canonical)(plan, theta)["cells"])})
        for c in plan.cliques:
            assert np.array_equal(np.isfinite(conditionals[c]), np.isfinite(conditionals_d[c]))
            np.testing.assert_allclose(finite(conditionals[c]), finite(conditionals_d[c]), atol=1e-9)
            np.testing.assert_allclose(finite(canonical[c]), finite(canonical_d[c]), atol=1e-9)
    grad = scanned.tables(jax.jit(jax.grad(lambda t: weighted(scanned, routed_oracle.marginals, t)))(
        scanned.from_tables(tables, jnp.float64)))
    for c in tables:
        np.testing.assert_allclose(np.asarray(grad[c]), np.asarray(grad_d[c]), rtol=1e-9, atol=1e-9)


def _loops(jaxpr) -> list[int]:
    """The nesting depth of every ``while`` in ``jaxpr`` (a loop of data trip count, each trip a loop iteration)."""
    depths = []

    def walk(j, depth):
        for eqn in j.eqns:
            inner = depth + (eqn.primitive.name == "while")
            if eqn.primitive.name == "while":
                depths.append(inner)
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                walk(sub, inner)

    walk(jaxpr.jaxpr, 0)
    return depths


def _hub():
    """A clique of 1,024 cells with ten children: its 10,240 routing pairs fill three of a GPU plan's windows."""
    dom = pj.Domain({**{f"b{i}": 4 for i in range(5)}, **{f"l{i}": 2 for i in range(10)}})
    return dom, [tuple(f"b{i}" for i in range(5))] + [(f"b{i % 5}", f"l{i}") for i in range(10)]


def test_a_plan_shaped_for_a_gpu_reads_its_pairs_unrolled_in_fewer_steps(narrow_windows):
    """On a GPU each trip of a loop costs tens of microseconds whatever its width: the plan for ``platform="gpu"``
    takes wider windows (no clique split, fewer steps) and reads each step's windows of pairs unrolled, the class's
    number of them, so its passes are one loop each; the CPU's plan loops over a step's pair windows inside the
    step's trip. Both give the dense oracle's answers; a saved GPU-shaped model loads as the same plan."""
    from pgmjax.graph import oracle

    for (dom, cliques), windows in ((_split_problem(False), 1), (_split_problem(True), 1), (_hub(), 4)):
        cpu, gpu = make_routed_plan(dom, cliques), make_routed_plan(dom, cliques, platform="gpu")
        assert gpu.host.platform == "gpu" and not gpu.differentiable
        n_cpu, n_gpu = int(cpu.arrays["num_levels"]), int(gpu.arrays["num_levels"])
        assert n_gpu <= n_cpu and gpu.size.width >= cpu.size.width
        assert np.asarray(gpu.arrays["first"])[:n_gpu].all()  # no clique split
        # the class's windows of pairs: the most a step takes, rounded up to a power of 2 (the hub's 3 to 4)
        assert gpu.size.chunks == windows >= max(np.asarray(gpu.arrays["pc"]))
        theta_c, theta_g = (p.from_tables(_tables(np.random.default_rng(11), cpu, zeros=True), jnp.float64)
                            for p in (cpu, gpu))
        assert max(_loops(jax.make_jaxpr(routed_oracle.log_partition)(gpu, theta_g))) == 1
        assert max(_loops(jax.make_jaxpr(routed_oracle.log_partition)(cpu, theta_c))) == 2
        dense = oracle.make_plan(dom, cliques)
        tables = _tables(np.random.default_rng(11), cpu, zeros=True)
        mu_d, log_z_d = jax.jit(oracle.marginals)(dense, dense.from_tables(tables, jnp.float64), 100.0)
        want = dense.tables({k: np.asarray(v) for k, v in mu_d.items()})
        mu, log_z = jax.jit(routed_oracle.marginals)(gpu, gpu.from_tables(tables, jnp.float64), 100.0)
        got = gpu.tables({"cells": np.asarray(mu["cells"])})
        for c in gpu.cliques:
            np.testing.assert_allclose(got[c], want[c], rtol=1e-9, atol=1e-9)
        assert float(log_z) == pytest.approx(float(log_z_d), rel=1e-12)
    dom, cliques = _split_problem(False)
    assert int(make_routed_plan(dom, cliques, platform="gpu").arrays["num_levels"]) < int(
        make_routed_plan(dom, cliques).arrays["num_levels"])  # the split clique's windows are steps no more


def test_a_gpu_shaped_size_class_model_saves_and_loads_as_the_same_plan(tmp_path):
    dom, cliques = _hub()
    plan = make_routed_plan(dom, cliques, platform="gpu")
    model = pj.GraphicalModel(plan, plan.from_tables(_tables(np.random.default_rng(4), plan), jnp.float64), 50.0)
    back = pj.load_model(model.save(tmp_path / "m"))
    assert back.plan.host.platform == "gpu" and back.plan.size == plan.size
    np.testing.assert_array_equal(np.asarray(back.plan.arrays["pc"]), np.asarray(plan.arrays["pc"]))
    np.testing.assert_array_equal(back.marginal(("b3", "l3")), model.marginal(("b3", "l3")))


def test_a_widened_plan_is_the_plan_built_at_the_wider_size_and_answers_alike(narrow_windows, monkeypatch):
    """widened(plan) pads the vectors to the next power of 4 exactly as the builder would lay them out at that
    size, and its marginals and log Z are the narrow plan's."""
    import pgmjax.graph.routed_plan as rp
    from pgmjax.graph.routed_steps import width_class

    dom, cliques = _hub()
    narrow = make_routed_plan(dom, cliques)
    monkeypatch.setattr(rp, "ANSWER_MIN_CELLS", 0)  # the padding alone (the floor is tested below)
    wide = rp.widened(narrow)
    assert wide.size.cells == width_class(narrow.size.cells) > narrow.size.cells
    monkeypatch.setattr(rp, "class_size", lambda n, _c=rp.class_size: width_class(_c(n)))
    rp._routed_plan_cached.cache_clear()
    built = make_routed_plan(dom, cliques)
    rp._routed_plan_cached.cache_clear()
    assert built.size == wide.size
    for k in built.arrays:
        np.testing.assert_array_equal(np.asarray(wide.arrays[k]), np.asarray(built.arrays[k]), err_msg=k)
    tables = _tables(np.random.default_rng(5), narrow, zeros=True)
    mu_n, z_n = jax.jit(routed_oracle.marginals)(narrow, narrow.from_tables(tables, jnp.float64), 100.0)
    mu_w, z_w = jax.jit(routed_oracle.marginals)(wide, wide.from_tables(tables, jnp.float64), 100.0)
    np.testing.assert_allclose(np.asarray(mu_w["cells"])[: narrow.size.cells], np.asarray(mu_n["cells"]), rtol=1e-13, atol=1e-12)
    assert float(z_w) == pytest.approx(float(z_n), rel=1e-14)


def _second_answers_without_compiling(models, sizes):
    """``models[1]`` answers its clique marginals without a compile once ``models[0]`` has answered, and its answers
    are its own plan's (the size-class oracle on its unwidened plan)."""
    models[0].clique_marginals()
    with count_compiles() as counter:
        got = models[1].clique_marginals()
    assert counter.count == 0, sizes
    want = models[1].plan.tables({"cells": np.asarray(routed_oracle.marginals(models[1].plan, models[1].theta, 100.0)[0]["cells"])})
    for c in got:
        np.testing.assert_allclose(got[c], want[c], rtol=1e-12, atol=1e-12)


def test_models_of_several_fit_classes_share_one_answering_program():
    """Two size-class models whose fits are of different classes (6,144 and 8,192 cells) answer with one compiled
    program: their plans widened to 16,384 cells (counted), with the answers of their own plans."""
    from pgmjax.model.graphical_model import GraphicalModel

    rng = np.random.default_rng(6)
    models = []
    for n in (70, 100):  # chains of n 4x4x4 cliques over 4-valued attributes: about 64 n cells
        dom = pj.Domain({f"a{i}": 4 for i in range(n + 2)})
        cliques = [(f"a{i}", f"a{i + 1}", f"a{i + 2}") for i in range(n)]
        plan = make_routed_plan(dom, cliques)
        models.append(GraphicalModel(plan, plan.from_tables(_tables(rng, plan), jnp.float64), 100.0))
    sizes = [m.plan.size.cells for m in models]
    assert len(set(sizes)) == 2 and all(4096 < n < 16384 for n in sizes), sizes
    _second_answers_without_compiling(models, sizes)


def test_shallow_models_of_classes_with_other_windows_share_one_answering_program():
    """A shallow model's class sets its window by its cells (1,024 up to the 12,288 class, 4,096 from 16,384 on a
    CPU): two models of 16 binary attributes (as TreeAIM's on NLTCS), of the 8,192 and 16,384 classes, answer
    with one compiled program, their plans widened to 16,384 cells and the wider window (counted)."""
    from pgmjax.graph.routed_plan import widened
    from pgmjax.model.graphical_model import GraphicalModel

    rng = np.random.default_rng(7)
    dom = pj.Domain({f"x{i}": 2 for i in range(16)})
    names = list(dom.attributes)
    models = []
    for k in (12, 13):  # cliques of k and 12 attributes: 6,144 and 12,288 cells, plans of 8,192 and 16,384
        plan = make_routed_plan(dom, [tuple(names[:k]), tuple(names[k - 8:k + 3] if k == 12 else names[4:])])
        models.append(GraphicalModel(plan, plan.from_tables(_tables(rng, plan), jnp.float64), 100.0))
    sizes = [m.plan.size for m in models]
    assert sizes[0].width < sizes[1].width and sizes[0].cells < sizes[1].cells, sizes
    assert widened(models[0].plan).size == widened(models[1].plan).size
    _second_answers_without_compiling(models, sizes)


def test_the_smallest_class_answers_in_the_next_class_program():
    """A model of the smallest class (4,096 cells, TreeAIM's first batches on NLTCS) answers in the program of the
    16,384-cell class (``ANSWER_MIN_CELLS``), which the larger models after it compile anyway (counted), with its own
    plan's answers."""
    from pgmjax.graph.routed_plan import ANSWER_MIN_CELLS, widened
    from pgmjax.model.graphical_model import GraphicalModel

    rng = np.random.default_rng(8)
    dom = pj.Domain({f"x{i}": 2 for i in range(16)})
    names = list(dom.attributes)
    models = []
    for cliques in ([tuple(names[:13]), tuple(names[4:])], [tuple(names[:3]), tuple(names[2:5])]):
        plan = make_routed_plan(dom, cliques)
        models.append(GraphicalModel(plan, plan.from_tables(_tables(rng, plan), jnp.float64), 100.0))
    sizes = [m.plan.size for m in models]
    assert sizes[1].cells < ANSWER_MIN_CELLS == sizes[0].cells, sizes
    assert widened(models[1].plan).size == widened(models[0].plan).size
    _second_answers_without_compiling(models, sizes)
