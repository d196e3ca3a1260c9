"""The marginal oracle against brute-force enumeration of the full joint."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracle_reference import _brute_log_joint, _random_problem
from scipy.special import logsumexp

import pgmjax as pj
from pgmjax.graph import oracle


def _assert_bruteforce(dom, plan, tables, mu, log_z, total, rtol=1e-9):
    """``log_z`` and every junction-tree clique's marginal in ``mu`` equal the full joint's."""
    logp = _brute_log_joint(dom, tables)
    ref = logsumexp(logp)
    np.testing.assert_allclose(float(log_z), ref, rtol=1e-12)
    p = total * np.exp(logp - ref)
    for c, m in plan.tables(mu).items():
        axes = tuple(i for i, a in enumerate(dom.attributes) if a not in c)
        np.testing.assert_allclose(np.asarray(m), p.sum(axis=axes), rtol=rtol, atol=1e-12)
    return ref


@pytest.mark.parametrize("kind", ["chain", "loopy", "disconnected", "random"])
def test_marginals_equal_bruteforce(kind, rng):
    f = jax.jit(oracle.marginals)
    for trial in range(12):
        dom, cliques = _random_problem(rng, kind)
        plan = oracle.make_plan(dom, cliques)
        tables = {c: rng.normal(size=dom.shape_of(c)) * 2 for c in cliques}
        big = max(tables, key=lambda c: tables[c].size)
        if trial % 2 == 0 and tables[big].size > 1:
            tables[big].flat[int(rng.integers(tables[big].size))] = -np.inf  # a structural zero
        theta = plan.from_tables(tables, jnp.float64)
        mu, log_z = f(plan, theta, 7.0)
        logp = _brute_log_joint(dom, tables)
        ref_log_z = logsumexp(logp)
        np.testing.assert_allclose(float(log_z), ref_log_z, rtol=1e-10)
        p = 7.0 * np.exp(logp - ref_log_z)
        for c, m in plan.tables(mu).items():
            axes = tuple(i for i, a in enumerate(dom.attributes) if a not in c)
            np.testing.assert_allclose(np.asarray(m), p.sum(axis=axes), rtol=1e-6, atol=1e-12)
        for leaf in jax.tree_util.tree_leaves(mu):
            assert np.all(np.isfinite(np.asarray(leaf)))


def test_float32_agrees_with_float64(rng):
    dom, cliques = _random_problem(rng, "loopy")
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in cliques}
    marginals = jax.jit(oracle.marginals)  # compiled: op by op, each call dispatches hundreds of small programs
    m64, _ = marginals(plan, plan.from_tables(tables, jnp.float64), 1.0)
    m32, _ = marginals(plan, plan.from_tables(tables, jnp.float32), 1.0)
    for k in m64:
        assert m32[k].dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(m32[k]), np.asarray(m64[k]), atol=1e-6)


def test_gradient_of_marginals_matches_finite_differences(rng):
    """Reverse-over-reverse through the oracle (what L-BFGS uses) is correct."""
    dom, cliques = _random_problem(rng, "loopy")
    plan = oracle.make_plan(dom, cliques)
    theta = plan.from_tables({c: rng.normal(size=dom.shape_of(c)) for c in cliques}, jnp.float64)
    w = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.normal(size=x.shape)), theta)

    @jax.jit
    def f(th):
        mu, _ = oracle.marginals(plan, th, 1.0)
        return sum(jnp.sum(jnp.sin(mu[k]) * w[k]) for k in mu)

    g = jax.jit(jax.grad(f))(theta)
    d = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.normal(size=x.shape)), theta)
    eps = 1e-6
    plus = f(jax.tree_util.tree_map(lambda a, b: a + eps * b, theta, d))
    minus = f(jax.tree_util.tree_map(lambda a, b: a - eps * b, theta, d))
    directional = sum(jnp.vdot(g[k], d[k]) for k in g)
    np.testing.assert_allclose(float(directional), float((plus - minus) / (2 * eps)), rtol=1e-6)


def test_vmap_over_problems(rng):
    """Many potentials on one structure run as one batched program."""
    dom, cliques = _random_problem(rng, "chain")
    plan = oracle.make_plan(dom, cliques)
    thetas = [plan.from_tables({c: rng.normal(size=dom.shape_of(c)) for c in cliques}, jnp.float64) for _ in range(3)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *thetas)
    one = jax.jit(lambda th: oracle.marginals(plan, th, 1.0))  # compiled: op by op, each call dispatches hundreds
    batched, log_z = jax.jit(jax.vmap(one))(stacked)
    for i, th in enumerate(thetas):
        single, lz = one(th)
        np.testing.assert_allclose(float(log_z[i]), float(lz), rtol=1e-12)
        for k in single:
            np.testing.assert_allclose(np.asarray(batched[k][i]), np.asarray(single[k]), rtol=1e-10, atol=1e-14)


def test_program_size_does_not_grow_with_the_chain():
    """A long chain compiles to the same number of loop bodies as a short one."""
    def runs(d):
        dom = pj.Domain({f"a{i}": 3 for i in range(d)})
        return len(oracle.make_plan(dom, [(f"a{i}", f"a{i+1}", f"a{i+2}") for i in range(d - 2)]).runs)

    assert runs(40) == runs(400) <= 4


def test_model_marginal_any_subset_matches_bruteforce(rng):
    """model.marginal on subsets outside every clique (variable elimination) equals brute force."""
    dom = pj.Domain({f"x{i}": int(rng.integers(2, 4)) for i in range(5)})
    cliques = [("x0", "x1"), ("x1", "x2"), ("x2", "x3"), ("x3", "x4")]
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in cliques}
    model = pj.GraphicalModel(plan, plan.from_tables(tables, jnp.float64), total=100.0)
    logp = _brute_log_joint(dom, tables)
    p = 100.0 * np.exp(logp - logsumexp(logp))
    for attrs in [("x0",), ("x4", "x0"), ("x1", "x3"), ("x0", "x2", "x4"), ("x3", "x1", "x0", "x4"), ("x2", "x1")]:
        keep = [dom.attributes.index(a) for a in attrs]
        ref = p.sum(axis=tuple(i for i in range(5) if i not in keep))
        ref = np.transpose(ref, np.argsort(np.argsort(keep)))
        got = model.marginal(attrs)
        np.testing.assert_allclose(got, ref, rtol=1e-8)
        assert got.sum() == pytest.approx(100.0)


@pytest.mark.parametrize("d", range(3, 12))
@pytest.mark.parametrize("width", [2, 3])
def test_chains_of_every_length_equal_bruteforce(d, width, rng):
    """Chains of pairs/triples: uneven branches around the centre leave padding slots in stacked levels."""
    if width > d:
        pytest.skip("clique wider than the chain")
    dom = pj.Domain({f"c{i}": 2 for i in range(d)})
    cliques = [tuple(f"c{i + j}" for j in range(width)) for i in range(d - width + 1)]
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in cliques}
    mu, log_z = jax.jit(oracle.marginals)(plan, plan.from_tables(tables, jnp.float64), 1.0)
    logp = _brute_log_joint(dom, tables)
    np.testing.assert_allclose(float(log_z), logsumexp(logp), rtol=1e-10)
    p = np.exp(logp - logsumexp(logp))
    for c, m in plan.tables(mu).items():
        axes = tuple(i for i, a in enumerate(dom.attributes) if a not in c)
        np.testing.assert_allclose(np.asarray(m), p.sum(axis=axes), rtol=1e-8, atol=1e-14)


@pytest.mark.parametrize("d", [14, 19])
def test_unrolled_level_loops_equal_bruteforce(d, rng, monkeypatch):
    """Several levels per loop trip (``compiler.SCAN_UNROLL``, the GPU's setting) is the same arithmetic:
    log Z, the marginals of both passes and the gauge's upward pass agree with brute force, with a run
    length the unroll does not divide."""
    from pgmjax import compiler
    from pgmjax.graph import gauge

    monkeypatch.setitem(compiler.SCAN_UNROLL, "cpu", 3)
    dom = pj.Domain({f"c{i}": 2 for i in range(d)})
    cliques = [(f"c{i}", f"c{i + 1}") for i in range(d - 1)]
    plan = oracle.make_plan(dom, cliques)
    assert max(run.num_levels for run in plan.runs) - 2 > 3  # the scan (levels past the first and last) takes two trips
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in cliques}
    theta = plan.from_tables(tables, jnp.float64)
    # fresh functions: jax's trace cache is keyed by the function, and the unroll is read when tracing
    mu, log_z = jax.jit(lambda p, t: oracle.marginals(p, t, 1.0))(plan, theta)
    lz = jax.jit(lambda p, t: oracle.log_partition(p, t))(plan, theta)
    logp = _brute_log_joint(dom, tables)
    np.testing.assert_allclose([float(log_z), float(lz)], [logsumexp(logp)] * 2, rtol=1e-10)
    p = np.exp(logp - logsumexp(logp))
    for c, m in plan.tables(mu).items():
        axes = tuple(i for i, a in enumerate(dom.attributes) if a not in c)
        np.testing.assert_allclose(np.asarray(m), p.sum(axis=axes), rtol=1e-8, atol=1e-14)
    canon3 = jax.jit(lambda p, t: gauge.canonical(p, t))(plan, theta)
    monkeypatch.setitem(compiler.SCAN_UNROLL, "cpu", 1)
    canon1 = jax.jit(lambda p, t: gauge.canonical(p, t))(plan, theta)
    for k in canon1:
        np.testing.assert_allclose(np.asarray(canon3[k]), np.asarray(canon1[k]), rtol=1e-12, atol=1e-12)


def _free_singleton_problem(rng, free_sizes):
    dom = pj.Domain({"x0": 3, "x1": 4, "x2": 2, **{f"f{i}": n for i, n in enumerate(free_sizes)}})
    cliques = [("x0", "x1"), ("x1", "x2")]
    return dom, cliques


def test_free_singletons_are_padded_into_one_class_and_match_bruteforce(rng):
    # attributes in no model clique: one stacked class (padded to 72: 70 rounded up to a multiple of 8), padding at -inf
    dom, cliques = _free_singleton_problem(rng, [2, 3, 70, 1, 5, 64])
    plan = oracle.make_plan(dom, cliques)
    free = [j for j, c in enumerate(plan.cliques) if c[0].startswith("f")]
    assert len(free) == 6
    assert [plan.padded[j] for j in free] == [dom[plan.cliques[j][0]] for j in free]  # all padded (64 too)
    assert len({plan.locations[j][0] for j in free}) == 1  # one block: one class
    assert all(plan.padded[j] is None for j, c in enumerate(plan.cliques) if not c[0].startswith("f"))
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in cliques}
    tables[("f2",)] = rng.normal(size=70)  # a free attribute may carry potentials (e.g. from a warm start)
    theta = plan.from_tables(tables, jnp.float64)
    for c, t in plan.tables(theta).items():
        assert t.shape == dom.shape_of(c)
    mu, log_z = jax.jit(oracle.marginals)(plan, theta, 5.0)
    ref = _assert_bruteforce(dom, plan, tables, mu, log_z, 5.0)
    np.testing.assert_allclose(float(jax.jit(oracle.log_partition)(plan, theta)), ref, rtol=1e-12)
    key = plan.locations[free[0]][0]
    block = np.asarray(mu[key])
    for j in free:
        _, l, k = plan.locations[j]
        assert np.all(block[l, k, dom[plan.cliques[j][0]]:] == 0.0)  # padding cells carry no mass
    # the autodiff transpose agrees, and the padding gets zero gradient
    mu_ad, _ = oracle.marginals_autodiff(plan, theta, 5.0)
    for k in mu:
        np.testing.assert_allclose(np.asarray(mu_ad[k]), np.asarray(mu[k]), rtol=1e-9, atol=1e-12)


def test_free_singletons_too_large_for_one_class_are_grouped(rng):
    dom, cliques = _free_singleton_problem(rng, [2**19 + 1, 3, 100])
    plan = oracle.make_plan(dom, cliques)
    free = {plan.cliques[j][0]: j for j, c in enumerate(plan.cliques) if c[0].startswith("f")}
    units = dict(plan.units)
    sizes = {a: units[plan.locations[j][0]][-1] for a, j in free.items()}
    # two classes: the small two share one (a third would save 96 cells), the large one its own
    assert sizes == {"f0": 2**19 + 8, "f1": 104, "f2": 104}
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in cliques}
    theta = plan.from_tables(tables, jnp.float64)
    mu, log_z = oracle.marginals(plan, theta, 2.0)
    ref = logsumexp(_brute_log_joint(pj.Domain({a: dom[a] for a in ("x0", "x1", "x2")}), tables))
    np.testing.assert_allclose(float(log_z), ref + np.log(2**19 + 1) + np.log(3) + np.log(100), rtol=1e-12)
    m = plan.tables(mu)
    np.testing.assert_allclose(np.asarray(m[("f0",)]), np.full(2**19 + 1, 2.0 / (2**19 + 1)), rtol=1e-9)


def test_one_message_class_landing_in_parents_of_different_layouts(rng):
    # Cliques 'p' and 'q' have the same shape but different separators, so different compute layouts;
    # their children 'cp' and 'cq' are of one class and land on the parents' middle attribute, which
    # sits at a different place in each layout (a PrivBayes network on Stroke crashed here).
    dom = pj.Domain({"c1": 4, "c2": 4, "d": 2, "i": 2, "n": 2, "pe": 2, "ra": 3, "rc": 2, "r3": 3, "rh": 3, "rx": 2, "t": 2})
    cliques = [("d", "rc", "rh"), ("d", "pe", "rc"), ("d", "ra", "t"), ("i", "r3", "rx"), ("n", "r3", "rx"),
               ("c1", "ra"), ("c2", "r3")]
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in cliques}
    theta = plan.from_tables(tables, jnp.float64)
    mu, log_z = jax.jit(oracle.marginals)(plan, theta, 3.0)
    _assert_bruteforce(dom, plan, tables, mu, log_z, 3.0)


def test_a_component_summed_whole_is_split_into_row_sums_and_matches_bruteforce(rng):
    # A three-way clique alone in its component (an empty separator, the only slot of its class) is summed
    # whole: the oracle splits it at its first eliminated axis into row sums (a matrix-vector product).
    dom = pj.Domain({"a": 5, "b": 4, "c": 3, "d": 2, "e": 3})
    cliques = [("a", "b", "c"), ("d", "e")]
    plan = oracle.make_plan(dom, cliques)
    big = plan.clique_class(plan.cliques.index(("a", "b", "c")))
    assert big.sep_axes == ()  # the root, or a child with an empty separator
    for dtype, rtol in ((jnp.float64, 1e-9), (jnp.float32, 2e-5)):
        tables = {c: rng.normal(size=dom.shape_of(c)) * 3 for c in cliques}
        tables[("a", "b", "c")][0, 0, 0] = -np.inf  # a structural zero
        theta = plan.from_tables(tables, dtype)
        mu, log_z = jax.jit(oracle.marginals)(plan, theta, 3.0)
        logp = _brute_log_joint(dom, tables)
        np.testing.assert_allclose(float(log_z), logsumexp(logp), rtol=rtol)
        p = 3.0 * np.exp(logp - logsumexp(logp))
        for c, m in plan.tables(mu).items():
            axes = tuple(i for i, a in enumerate(dom.attributes) if a not in c)
            np.testing.assert_allclose(np.asarray(m, np.float64), p.sum(axis=axes), rtol=rtol, atol=1e-6)


def test_blocks_without_padding_slots_carry_no_mask_and_match_bruteforce(rng):
    # A tree of pairs whose two deepest levels form one run of a block with two slots: the deepest level
    # holds one clique (a padding slot), the root's block none. The slot mask is in the compiled program
    # only where a block has padding slots.
    dom = pj.Domain({f"x{i}": 2 for i in range(5)})  # equal sizes: the two deeper levels share one class
    cliques = [("x0", "x1"), ("x1", "x2"), ("x1", "x3"), ("x2", "x4")]
    plan = oracle.make_plan(dom, cliques)
    masks = {k[: -len("_mask")] for k in plan.arrays if k.endswith("_mask")}
    assert masks == set(plan.slot_padded) and plan.slot_padded
    assert set(plan.slot_padded) < {k for k, _ in plan.units}  # and a block without padding slots
    for _ in range(3):
        tables = {c: rng.normal(size=dom.shape_of(c)) * 2 for c in cliques}
        theta = plan.from_tables(tables, jnp.float64)
        mu, log_z = jax.jit(oracle.marginals)(plan, theta, 7.0)
        _assert_bruteforce(dom, plan, tables, mu, log_z, 7.0)
        np.testing.assert_allclose(float(jax.jit(oracle.log_partition)(plan, theta)), float(log_z), rtol=1e-12)


def _padded_cells(sizes, groups):
    return sum(-(-max(g) // 8) * 8 * sum(1 for x in sizes if x in g) for g in groups)


@pytest.mark.parametrize("seed", range(6))
def test_singleton_sizes_is_the_cheapest_cut_brute_force(seed):
    # Against every cut of the sorted distinct sizes into k contiguous groups: the rule takes the cheapest
    # cut for its k, and stops where one more group would save fewer than SINGLETON_CLASS_CELLS cells.
    from itertools import combinations

    from pgmjax.graph.oracle_plan import SINGLETON_CLASS_CELLS, singleton_sizes

    r = np.random.default_rng(seed)
    sizes = list(r.choice([1, 2, 3, 5, 17, 40, 101, 300, 999, 4000, 9000], size=int(r.integers(1, 40))))
    got = singleton_sizes(sizes)
    assert set(got) == set(sizes) and all(got[x] >= x and got[x] % 8 == 0 for x in got)
    values = sorted(set(sizes))

    def best(k):
        out = None
        for inner in combinations(range(1, len(values)), k - 1):
            bounds = (0, *inner, len(values))
            cuts = [values[a:b] for a, b in zip(bounds, bounds[1:])]
            c = _padded_cells(sizes, cuts)
            out = c if out is None else min(out, c)
        return out

    k = len(set(got.values()))
    groups = [[v for v in values if got[v] == n] for n in sorted(set(got.values()))]
    assert _padded_cells(sizes, groups) == best(k)
    if k < min(8, len(values)):
        assert best(k) - best(k + 1) < SINGLETON_CLASS_CELLS
    if k > 1:
        assert best(k - 1) - best(k) >= SINGLETON_CLASS_CELLS


def test_singleton_sizes_stroke_like_widths():
    from pgmjax.graph.oracle_plan import singleton_sizes

    # the 70 free attributes of the Stroke benchmark problem: one class of 520 (two would save 27,040 cells)
    sizes = [2] * 20 + [3] * 11 + [4] * 18 + [5, 5, 7, 10, 48] + [101] * 11 + [118, 139, 252, 381, 516]
    got = singleton_sizes(sizes)
    assert set(got.values()) == {520} and sum(got[x] for x in sizes) == 36_400  # 71,680 as powers of two
    # with 40 more small ones a second class pays
    got = singleton_sizes(sizes + [2] * 40)
    assert set(got.values()) == {8, 520} and sum(got[x] for x in sizes + [2] * 40) == 10_096  # sizes up to 7 in 8
    assert singleton_sizes([]) == {}
