"""Many one- and two-way marginals of one clique as matrix products (pgmjax.estimation.pair_marginals).

References: brute-force marginals (numpy sums) on irregular tables, the reductions path of the same
problem (the products turned off), and sequential fits for the batched and bootstrap paths.
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import programs
from pgmjax.estimation import losses, pair_marginals
from pgmjax.estimation.batch_problem import make_problem, stack_problems
from pgmjax.estimation.pair_marginals import PairLayout, onehots, plan_layout, positions, predict

from conftest import count_compiles

SHAPES = [(2, 3, 4), (5, 1, 3, 2), (3, 7), (2, 2, 2, 2, 2, 2), (4, 3, 1, 6, 2)]


def _all_marginals(ndim):
    return [(a,) for a in range(ndim)] + list(itertools.combinations(range(ndim), 2))


@pytest.mark.parametrize("shape", SHAPES)
def test_products_hold_every_one_and_two_way_marginal(shape):
    rng = np.random.default_rng(len(shape))
    tables = rng.uniform(0, 1, (3, *shape))
    measured = _all_marginals(len(shape))
    for split in range(1, len(shape)):
        layout = PairLayout(shape, split, ("cross", "left", "right"), len(measured))
        left, right = onehots(layout, np.float64)
        flat = np.asarray(predict(layout, jnp.asarray(tables), jnp.asarray(left), jnp.asarray(right)))
        assert flat.shape == (3, layout.rows)
        seen = set()
        for axes in measured:
            for order in {axes, axes[::-1]}:  # a measurement's attributes in either order
                at = positions(layout, order)
                drop = tuple(1 + a for a in range(len(shape)) if a not in axes)
                want = tables.sum(axis=drop)
                if order != axes:
                    want = np.swapaxes(want, 1, 2)
                np.testing.assert_allclose(flat[:, at], want.reshape(3, -1), rtol=1e-12, atol=1e-12)
            seen |= set(positions(layout, axes).tolist())
        assert len(seen) == sum(int(np.prod([shape[a] for a in axes])) for axes in measured)  # one place each


def test_layout_choice():
    pairs8 = list(itertools.combinations(range(8), 2))
    assert plan_layout((2,) * 8, pairs8[: pair_marginals.MIN_MARGINALS - 1]) is None  # few: the reductions
    assert plan_layout((5,), [(0,)] * 20) is None  # one axis: nothing to split
    layout = plan_layout((2,) * 8, pairs8)
    assert layout.split == 4 and layout.blocks == ("cross", "left", "right") and layout.marginals == 28
    costs = [PairLayout((2,) * 8, s, ("cross", "left", "right")).flops() for s in range(1, 8)]
    assert layout.flops() == min(costs)
    # Only pairs across a split that is cheap: no "left"/"right" products where nothing needs them.
    assert plan_layout((3, 4, 5, 6), [(0, 2), (0, 3), (1, 2), (1, 3)] * 3).blocks == ("cross",)
    # Products larger than the limit (a 2,000-value attribute's one-hot matrix): the reductions instead.
    assert plan_layout((2000, 2000, 3), [(0, 2), (1, 2), (0,), (1,), (2,)] * 2) is None


def _pairs_problem(seed=0, attrs=7):
    rng = np.random.default_rng(seed)
    sizes = {f"x{i}": int(s) for i, s in enumerate(rng.integers(2, 5, attrs))}
    domain = pj.Domain(sizes)
    data = pj.Dataset(np.stack([rng.integers(0, s, 3000) for s in sizes.values()], axis=1), domain)
    cliques = [(a,) for a in domain.attributes] + list(itertools.combinations(domain.attributes, 2))
    cliques = [c[::-1] if i % 3 == 0 else c for i, c in enumerate(cliques)]  # either attribute order
    ms = pj.noisy_marginals(data, cliques, stddev=2.0, key=jax.random.key(seed))
    ms[5] = pj.Measurement(ms[5].clique, ms[5].y, stddev=np.linspace(1, 3, ms[5].rows))  # per-row noise
    ms.append(pj.Measurement(ms[9].clique, ms[9].y + 1.0, stddev=4.0))  # a repeat: stays with the reductions
    return domain, ms


@pytest.fixture
def no_products(monkeypatch):
    def off():
        monkeypatch.setattr(pair_marginals, "MIN_MARGINALS", 10**9)
    return off


@pytest.mark.parametrize("kind", ["l2", "l1"])
def test_loss_and_gradient_equal_the_reductions(kind, no_products):
    domain, ms = _pairs_problem()
    with_products = make_problem(domain, ms, loss=kind, dtype=jnp.float64)
    assert len(with_products.plan.cliques) == 1
    parts = [p for g in with_products.meas.groups for p in (g.parts or (g,))]
    assert [p.kind for p in parts].count("pairs") == 1 and sum(p.count for p in parts if p.sum_axes) == 1  # the repeat
    no_products()
    reductions = make_problem(domain, ms, loss=kind, dtype=jnp.float64)
    assert all(p.kind != "pairs" for g in reductions.meas.groups for p in (g.parts or (g,)))
    rng = np.random.default_rng(1)
    theta = {k: jnp.asarray(rng.normal(0, 1, t.shape)) for k, t in with_products.plan.zeros(jnp.float64).items()}
    out = []
    for problem in (with_products, reductions):
        def pieces(theta, problem=problem):  # jitted: one program, not op-by-op dispatch of every piece
            mu = problem.marginals(theta)
            value, grad = jax.value_and_grad(problem.loss_of)(mu)
            pulled = problem.pull_back(jax.grad(problem.loss_of_predictions)(problem.predict(mu)), mu)
            return value, grad, pulled
        value, grad, pulled = jax.jit(pieces)(theta)
        out.append((float(value), grad, pulled))
    (v1, g1, p1), (v2, g2, p2) = out
    assert v1 > 0 and abs(v1 - v2) <= 1e-12 * v2
    for k in theta:
        np.testing.assert_allclose(g1[k], g2[k], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(p1[k], p2[k], rtol=1e-10, atol=1e-12)


def test_a_fit_equals_the_reductions_fit_and_compiles_once(no_products):
    domain, ms = _pairs_problem(2)
    # Free what earlier tests of this worker hold: past programs.MAX_LIVE_PROGRAMS the engine frees them all
    # after a fit, and the second fit below would then compile again.
    programs.release_compiled()
    fit, fit_report = pj.estimate(domain, ms, iters=200, dtype=jnp.float64, report=True)
    with count_compiles() as c:
        again, again_report = pj.estimate(domain, [pj.Measurement(m.clique, m.y * 1.01, m.stddev) for m in ms], iters=200,
                                          dtype=jnp.float64, report=True)
    assert c.count == 0 and np.isfinite(float(again_report.loss))
    no_products()
    ref, ref_report = pj.estimate(domain, ms, iters=200, dtype=jnp.float64, report=True)
    assert abs(float(fit_report.loss) - float(ref_report.loss)) <= 1e-9 * float(ref_report.loss)
    for clique in [("x0", "x3"), ("x6",)]:
        np.testing.assert_allclose(np.asarray(fit.marginal(clique)), np.asarray(ref.marginal(clique)), rtol=1e-8)
    # float32, the default: the same fit within its precision
    f32, f32_report = pj.estimate(domain, ms, iters=200, report=True)
    assert abs(float(f32_report.loss) - float(fit_report.loss)) <= 1e-4 * float(fit_report.loss)


def test_batched_members_equal_their_own_fits():
    domain, ms = _pairs_problem(3)
    draws = [[pj.Measurement(m.clique, m.y + 0.5 * b * np.cos(np.arange(m.rows)), m.stddev) for m in ms]
             for b in range(3)]
    batch = pj.estimate_batch(domain, draws, iters=100, dtype=jnp.float64)
    for b, d in enumerate(draws):
        one = pj.estimate(domain, d, iters=100, dtype=jnp.float64)
        np.testing.assert_allclose(np.asarray(batch.marginal(("x1", "x4")))[b], np.asarray(one.marginal(("x1", "x4"))),
                                   rtol=1e-6, atol=1e-9)


def test_bootstrap_replicates_stack_like_separate_problems():
    from pgmjax.uncertainty import stacked_problem

    domain, ms = _pairs_problem(4)
    model = pj.estimate(domain, ms, iters=20, dtype=jnp.float64)
    ys = [np.stack([m.y + b for b in range(2)]) for m in ms]
    stacked = stacked_problem(model, ms, ys, total=1000.0, dtype=jnp.float64)
    separate = stack_problems([make_problem(domain, [pj.Measurement(m.clique, y[b], m.stddev) for m, y in zip(ms, ys)],
                                            total=1000.0, dtype=jnp.float64) for b in range(2)])
    assert stacked.meas.groups == separate.meas.groups
    assert any(p.kind == "pairs" for g in stacked.meas.groups for p in (g.parts or (g,)))
    for a, b in zip(stacked.meas.arrays, separate.meas.arrays):
        np.testing.assert_array_equal(np.asarray(a["y"]), np.asarray(b["y"]))
        np.testing.assert_array_equal(np.asarray(a["inv_std"]), np.asarray(b["inv_std"]))


def test_loss_group_sizes_are_the_products_not_the_reductions():
    # Every marginal of the 7-attribute clique is read through its products: no per-marginal group remains.
    domain, ms = _pairs_problem(5)
    problem = make_problem(domain, ms[:-1], dtype=jnp.float64)
    (group,) = problem.meas.groups
    layout = next(p for p in (group.parts or (group,)) if p.kind == "pairs").pairs
    assert layout.marginals == len(ms) - 1
    assert losses.predictions(problem.plan.zeros(jnp.float64), problem.meas)[0].shape[1] >= layout.rows


@pytest.mark.parametrize("method", ["dual_averaging", pytest.param("lbfgs", marks=pytest.mark.slow)])
def test_other_estimators_fit_the_same_model_through_the_products(method, no_products):
    domain, ms = _pairs_problem(6)
    fit, fit_report = pj.estimate(domain, ms, method, iters=150, dtype=jnp.float64, report=True)
    no_products()
    ref, ref_report = pj.estimate(domain, ms, method, iters=150, dtype=jnp.float64, report=True)
    assert np.isfinite(float(fit_report.loss))
    assert abs(float(fit_report.loss) - float(ref_report.loss)) <= 1e-7 * float(ref_report.loss)
    np.testing.assert_allclose(np.asarray(fit.marginal(("x2", "x5"))), np.asarray(ref.marginal(("x2", "x5"))),
                               rtol=1e-6, atol=1e-6)
