"""pgmjax.graph.gauge.canonical and log_conditionals against brute force on tiny models: same distribution,
separator transfers and constants removed, idempotent, compiled once; canonical linear; log_conditionals'
tables log-conditionals (bounded by 0 whatever the drift) with structural zeros kept."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import programs
from pgmjax.graph import oracle
from pgmjax.estimation.inputs import warm_tables
from pgmjax.graph.gauge import canonical, log_conditional_tables, log_conditionals

from conftest import count_compiles
from maxent_reference import distribution

CASES = {
    "loop": ({"a": 3, "b": 2, "c": 4, "d": 2, "e": 3, "f": 2},
             [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("e", "f"), ("a", "e")]),
    "chain": ({f"x{i}": 2 + i % 3 for i in range(12)}, [(f"x{i}", f"x{i + 1}") for i in range(11)]),
    "mixed": ({f"x{i}": 2 + i % 4 for i in range(9)},
              [("x0", "x1", "x2"), ("x2", "x3"), ("x3", "x4", "x5"), ("x1", "x6"), ("x7",), ("x8", "x0")]),
}


def _random_blocks(plan, rng):
    return {k: jnp.asarray(rng.normal(size=s)) for k, s in plan.units}


def _full_log_table(plan, blocks, domain):
    """sum_c theta_c(x_c) over the full table (float64), by brute force from the clique tables."""
    attrs = list(domain)
    sizes = [domain[a] for a in attrs]
    with np.errstate(divide="ignore"):  # structural zeros: log 0 = -inf
        return np.log(distribution(plan.tables(blocks), attrs, sizes)), attrs, sizes


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_distribution_and_idempotent(case):
    domain, cliques = pj.Domain(CASES[case][0]), CASES[case][1]
    plan = oracle.make_plan(domain, cliques)
    blocks = _random_blocks(plan, np.random.default_rng(0))
    out = canonical(plan, blocks)
    p0, _, _ = _full_log_table(plan, blocks, domain)
    p1, _, _ = _full_log_table(plan, out, domain)
    np.testing.assert_allclose(p1, p0, atol=1e-12)  # distribution unchanged (both normalised)
    again = canonical(plan, out)
    for k in out:
        np.testing.assert_allclose(np.asarray(again[k]), np.asarray(out[k]), atol=1e-13)


def _with_transfers(plan, blocks, domain, rng, size=100.0):
    """``blocks`` plus a random function of each tree edge's separator added to one side and taken from the
    other (of ``size``: as a long run's drift), plus a constant on every table: the same distribution."""
    tables = {c: np.asarray(t) for c, t in plan.tables(blocks).items()}
    moved = dict(tables)
    edges = 0
    for p, c in plan.tree.edges:
        c1, c2 = plan.cliques[p], plan.cliques[c]
        sep = tuple(a for a in c1 if a in c2)
        if not sep:
            continue
        h = size * rng.normal(size=[domain[a] for a in sep])

        def spread(clique, sign, h=h, sep=sep):
            shape = [domain[a] if a in sep else 1 for a in clique]
            order = [sep.index(a) for a in clique if a in sep]
            return sign * np.transpose(h, order).reshape(shape)

        moved[c1] = moved[c1] + spread(c1, 1.0)
        moved[c2] = moved[c2] + spread(c2, -1.0)
        edges += 1
    assert edges > 0
    moved = {c: t + 7.0 for c, t in moved.items()}
    return plan.from_tables({c: jnp.asarray(t) for c, t in moved.items()}, dtype=jnp.float64)


@pytest.mark.parametrize("gauge", [canonical, log_conditionals])
@pytest.mark.parametrize("case", sorted(CASES))
def test_separator_transfers_and_constants_vanish(case, gauge):
    """Adding h(x_s) to a clique and taking it from a neighbour (every edge of the tree), and a constant to
    every table, gives the same tables; the gradient of an inconsistent problem is such a sum."""
    domain, cliques = pj.Domain(CASES[case][0]), CASES[case][1]
    plan = oracle.make_plan(domain, cliques)
    rng = np.random.default_rng(1)
    blocks = _random_blocks(plan, rng)
    shifted = _with_transfers(plan, blocks, domain, rng)
    a, b = gauge(plan, blocks), gauge(plan, shifted)
    for k in a:
        np.testing.assert_allclose(np.asarray(b[k]), np.asarray(a[k]), atol=1e-10)
    assert max(float(jnp.abs(v).max()) for v in b.values()) < 20  # the drift of size 100 is gone


@pytest.mark.parametrize("case", sorted(CASES))
def test_log_conditionals_same_distribution_and_normalised(case):
    """The same distribution; every table at most 0 and the full table's log-probabilities their sum (no
    constant left over: the root is normalised); idempotent."""
    domain, cliques = pj.Domain(CASES[case][0]), CASES[case][1]
    plan = oracle.make_plan(domain, cliques)
    blocks = _with_transfers(plan, _random_blocks(plan, np.random.default_rng(5)), domain, np.random.default_rng(6))
    out = log_conditionals(plan, blocks)
    p0, attrs, sizes = _full_log_table(plan, blocks, domain)
    p1, _, _ = _full_log_table(plan, out, domain)
    np.testing.assert_allclose(p1, p0, atol=1e-12)
    total = np.zeros(sizes)
    for c, t in plan.tables(out).items():
        t = np.asarray(t)
        assert t.max() <= 1e-12, f"{c}: a log-conditional above 0 ({t.max()})"
        total = total + np.transpose(t, [list(c).index(a) for a in attrs if a in c]).reshape(
            [domain[a] if a in c else 1 for a in attrs])
    np.testing.assert_allclose(total, p0, atol=1e-12)  # sum of the tables = log p, no constant
    again = log_conditionals(plan, out)
    for k in out:
        np.testing.assert_allclose(np.asarray(again[k]), np.asarray(out[k]), atol=1e-12)


def test_log_conditionals_keep_structural_zeros_and_far_cells_apart():
    """A -inf cell stays -inf (its distribution is unchanged), and a nearly impossible cell (-1e4) does not
    move the likely cells of its slice, as a mean would: float32 keeps them to a few eps."""
    domain, cliques = pj.Domain(CASES["loop"][0]), CASES["loop"][1]
    plan = oracle.make_plan(domain, cliques)
    tables = {c: np.asarray(t) for c, t in plan.tables(_random_blocks(plan, np.random.default_rng(7))).items()}
    first = next(iter(tables))
    low = tables[first].copy()
    low.reshape(-1)[0] = -np.inf
    low.reshape(-1)[1] = -1e4
    tables[first] = low
    blocks = plan.from_tables({c: jnp.asarray(t) for c, t in tables.items()}, dtype=jnp.float64)
    out = log_conditionals(plan, blocks)
    p0, _, _ = _full_log_table(plan, blocks, domain)
    p1, _, _ = _full_log_table(plan, out, domain)
    assert np.array_equal(np.isfinite(p1), np.isfinite(p0)) and np.isinf(p0).any()
    np.testing.assert_allclose(p1[np.isfinite(p0)], p0[np.isfinite(p0)], atol=1e-9)
    out32 = log_conditionals(plan, {k: v.astype(jnp.float32) for k, v in blocks.items()})
    p32, _, _ = _full_log_table(plan, {k: v.astype(jnp.float64) for k, v in out32.items()}, domain)
    likely = p0 > np.log(1e-6)
    assert np.abs(np.exp(p32[likely]) / np.exp(p0[likely]) - 1).max() < 1e-5


def test_linear_and_float32_bounded():
    domain, cliques = pj.Domain(CASES["loop"][0]), CASES["loop"][1]
    plan = oracle.make_plan(domain, cliques)
    rng = np.random.default_rng(2)
    x, y = _random_blocks(plan, rng), _random_blocks(plan, rng)
    lhs = canonical(plan, {k: 2.0 * x[k] - 3.0 * y[k] for k in x})
    cx, cy = canonical(plan, x), canonical(plan, y)
    for k in lhs:
        np.testing.assert_allclose(np.asarray(lhs[k]), np.asarray(2.0 * cx[k] - 3.0 * cy[k]), atol=1e-12)


@pytest.mark.parametrize("gauge", [canonical, log_conditionals])
def test_compiles_once(gauge):
    domain, cliques = pj.Domain(CASES["chain"][0]), CASES["chain"][1]
    plan = oracle.make_plan(domain, cliques)
    f = jax.jit(gauge)
    programs.release_compiled()
    f(plan, _random_blocks(plan, np.random.default_rng(3)))
    with count_compiles() as compiles:
        f(plan, _random_blocks(plan, np.random.default_rng(4)))
    assert compiles.count == 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_host_log_conditional_tables_are_the_device_ones(case):
    """pgmjax.graph.gauge.log_conditional_tables (host, float64, tables keyed by the tree's cliques) gives the
    tables log_conditionals gives on the device, structural zeros included; a warm start's tables keyed by
    smaller cliques (inputs.warm_tables) land in the cliques that hold them with the same distribution."""
    domain, cliques = pj.Domain(CASES[case][0]), CASES[case][1]
    plan = oracle.make_plan(domain, cliques)
    blocks = _with_transfers(plan, _random_blocks(plan, np.random.default_rng(8)), domain, np.random.default_rng(9))
    tables = {c: np.asarray(t) for c, t in plan.tables(blocks).items()}
    first = next(iter(tables))
    tables[first] = tables[first].copy()
    tables[first].reshape(-1)[:2] = -np.inf
    blocks = plan.from_tables(tables, jnp.float64)
    device = {c: np.asarray(t) for c, t in plan.tables(log_conditionals(plan, blocks)).items()}
    host = log_conditional_tables(plan.tree, tables)
    assert set(host) == set(device) == set(plan.tree.cliques)
    for c in device:
        assert np.array_equal(np.isfinite(host[c]), np.isfinite(device[c]))
        np.testing.assert_allclose(host[c][np.isfinite(host[c])], device[c][np.isfinite(device[c])], atol=1e-10)

    measured = {c: np.random.default_rng(10).normal(size=domain.shape_of(c)) * 300 for c in cliques}
    warm = warm_tables(plan, measured)
    p0, _, _ = _full_log_table(plan, plan.from_tables(measured, jnp.float64), domain)
    p1, _, _ = _full_log_table(plan, plan.from_tables(warm, jnp.float64), domain)
    np.testing.assert_allclose(p1, p0 - np.log(np.exp(p0 - p0.max()).sum()) - p0.max(), atol=1e-8)
