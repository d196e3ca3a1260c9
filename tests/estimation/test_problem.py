"""The estimation problem's measurement-space pieces (pgmjax.estimation.problem): predict, loss_of_predictions, pull_back.

Mirror descent keeps its gradient as ``g = dL/dp`` over the predictions ``p = Q mu`` and maps it back with
``pull_back``; these tests check that this is the same arithmetic as differentiating the loss of the
marginals directly (float64, every query kind, L1 and L2, a measured sub-clique of a model clique).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.compiler import to_device
from pgmjax.estimation import losses
from pgmjax.estimation.problem import Problem
from pgmjax.graph import oracle


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _problem(loss: str) -> tuple[Problem, dict]:
    rng = np.random.default_rng(3)
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5})
    ms = [
        pj.Measurement(("a", "b"), rng.normal(50, 5, (3, 4)), stddev=2.0),  # identity on a model clique
        pj.Measurement(("b",), rng.normal(100, 5, 4), stddev=3.0),  # a marginal of a model clique
        pj.Measurement(("d", "c"), rng.normal(40, 5, 3), stddev=1.5, query=rng.normal(size=(3, 10))),  # dense
        pj.Measurement(("c", "d"), rng.normal(40, 5, (2, 2)), stddev=1.0,
                       query=(rng.normal(size=(2, 2)), rng.random((2, 5)))),  # Kronecker
        pj.Measurement(("b", "c"), rng.normal(60, 5, (4, 2)), stddev=2.5),
    ]
    plan = oracle.make_plan(dom, [m.clique for m in ms])
    meas = losses.stack_measurements(plan, ms, jnp.float64)
    problem = Problem(plan, meas, to_device(200.0, np.float64), to_device(1.0, np.float64),
                      to_device(0.3, np.float64), loss)
    theta = {k: to_device(rng.normal(size=s)) for k, s in plan.units}
    mu = problem.marginals(theta)
    return problem, mu


@pytest.mark.parametrize("loss", ["l2", "l1"])
def test_loss_of_predictions_is_the_loss_of_the_marginals(loss):
    problem, mu = _problem(loss)
    assert float(problem.loss_of_predictions(problem.predict(mu))) == pytest.approx(float(problem.loss_of(mu)), rel=1e-12)


def test_l1_loss_of_width_zero_is_finite_where_a_residual_is_zero():
    # Width 0 is the L1 loss itself; its quadratic branch divided 0 by 0 where a residual was exactly 0
    # (a zero-weight cell, or an answer the model matches): NaN in the value and the gradient.
    problem, mu = _problem("l1")
    exact = tuple(arr["y"] for arr in problem.meas.arrays)  # predictions equal to the answers: every residual 0
    value, grad = jax.value_and_grad(lambda p: losses.loss_of_predictions(p, problem.meas, "l1", jnp.zeros(())))(exact)
    assert float(value) == 0.0
    assert all(np.all(np.asarray(g) == 0.0) for g in grad)
    off = tuple(p + 1.0 for p in exact)  # and away from 0, the L1 loss: sum |r| / sigma
    want = sum(float(jnp.sum(jnp.abs(arr["inv_std"]))) for arr in problem.meas.arrays)
    assert float(losses.loss_of_predictions(off, problem.meas, "l1", jnp.zeros(()))) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("loss", ["l2", "l1"])
def test_pull_back_of_the_prediction_gradient_is_the_marginal_gradient(loss):
    problem, mu = _problem(loss)
    g = jax.grad(problem.loss_of_predictions)(problem.predict(mu))
    pulled = problem.pull_back(g, mu)
    direct = jax.grad(problem.loss_of)(mu)
    assert set(pulled) == set(direct)
    for k in direct:
        np.testing.assert_allclose(np.asarray(pulled[k]), np.asarray(direct[k]), rtol=1e-10, atol=1e-12, err_msg=k)


def test_decrease_in_measurement_space_equals_the_marginal_space_one():
    # <grad L(mu), mu - mu'> = <g, Q mu - Q mu'>: the Armijo test's decrease, computed over measured cells.
    problem, mu = _problem("l2")
    rng = np.random.default_rng(4)
    theta2 = {k: to_device(rng.normal(size=s)) for k, s in problem.plan.units}
    mu2 = problem.marginals(theta2)
    g = jax.grad(problem.loss_of_predictions)(problem.predict(mu))
    p, p2 = problem.predict(mu), problem.predict(mu2)
    in_measurements = sum(float(jnp.vdot(a, b - c)) for a, b, c in zip(g, p, p2))
    grad = jax.grad(problem.loss_of)(mu)
    in_marginals = sum(float(jnp.vdot(grad[k], mu[k] - mu2[k])) for k in mu)
    assert in_measurements == pytest.approx(in_marginals, rel=1e-10)


def test_callable_loss_predicts_the_marginals_themselves():
    problem, mu = _problem("l2")
    custom = Problem(problem.plan, problem.meas, problem.total, problem.lipschitz, problem.smoothing,
                     lambda view: jnp.sum(view[("a", "b")] ** 2))
    assert custom.predict(mu) is mu
    g = jax.grad(custom.loss_of_predictions)(mu)
    assert custom.pull_back(g, mu) is g


def test_expand_is_the_transpose_of_patterns_and_center_keeps_the_model():
    """``expand(base, phi) = base + P^T phi`` for the linear map ``P = patterns`` (``<P mu, phi> = <mu, P^T phi>``
    for random ``mu`` and ``phi``), and ``center`` shifts each measured table by a constant: the model it
    expands to has the same marginals."""
    from pgmjax.estimation.tree_math import vdot

    problem, _ = _problem("l2")
    rng = np.random.default_rng(3)
    zeros = problem.plan.zeros(jnp.float64)
    mu = {k: jnp.asarray(rng.normal(size=v.shape)) for k, v in zeros.items()}
    pats = problem.patterns(zeros)
    phi = jax.tree_util.tree_map(lambda a: jnp.asarray(rng.normal(size=a.shape)), pats)
    spread = problem.expand(zeros, phi)
    np.testing.assert_allclose(float(vdot(problem.patterns(mu), phi)), float(vdot(mu, spread)), rtol=1e-10)
    before = problem.marginals(spread)
    centered = problem.center(phi)
    after = problem.marginals(problem.expand(zeros, centered))
    for k in before:
        np.testing.assert_allclose(np.asarray(after[k]), np.asarray(before[k]), rtol=1e-9, atol=1e-9, err_msg=k)
    assert all(float(jnp.max(c)) <= 0.0 for c in jax.tree_util.tree_leaves(centered))


@pytest.mark.parametrize("padded", [False, True])
def test_whole_table_marginals_of_several_blocks_are_one_group_with_the_same_loss(padded, monkeypatch):
    """Marginal measurements in different blocks (whole tables and a sub-clique) become one flat group; the
    loss it computes equals the hand-computed sum of every measurement's weighted squared residuals, with
    the group padded (as long groups are) or not (as short ones are)."""
    if padded:
        monkeypatch.setattr(losses, "_MAX_PAD_FRACTION", 100.0)
    rng = np.random.default_rng(11)
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5, "e": 7})
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")]
    ms = [pj.Measurement(c, rng.normal(30, 5, dom.shape_of(c)), stddev=float(rng.uniform(1, 3))) for c in cliques]
    ms.append(pj.Measurement(("e",), rng.normal(60, 5, 7), stddev=2.0))  # a sub-clique
    ms.append(pj.Measurement(("c", "d"), rng.normal(40, 5, 2), stddev=1.0, query=rng.normal(size=(2, 10))))  # dense
    plan = oracle.make_plan(dom, cliques)
    assert len({plan.locations[plan.tree.containing(c)][0] for c in cliques}) > 1  # several blocks
    meas = losses.stack_measurements(plan, ms, jnp.float64)
    (merged,) = [g for g in meas.groups if g.parts]
    assert len(meas.groups) == 2 and len(merged.parts) >= 3  # the dense query is a group of its own
    flat = meas.arrays[meas.groups.index(merged)]
    assert flat["y"].shape == flat["inv_std"].shape == (1, merged.rows)
    if padded:  # to whole vector blocks, with cells that weigh nothing
        assert merged.rows % losses._ALIGN == 0 and merged.pad == merged.rows - sum(m.rows for m in ms[:5]) > 0
        assert not np.any(np.asarray(flat["inv_std"])[0, -merged.pad:])
    else:  # a short group is left as it is
        assert merged.pad == 0 and merged.rows == sum(m.rows for m in ms[:5])
    problem = Problem(plan, meas, to_device(100.0, np.float64), to_device(1.0, np.float64), to_device(0.0, np.float64), "l2")
    theta = {k: to_device(rng.normal(size=s)) for k, s in plan.units}
    mu = problem.marginals(theta)
    model = pj.GraphicalModel(plan, theta, 100.0)
    expected = sum(0.5 * np.sum(((model.marginal(m.clique) - m.y.reshape(dom.shape_of(m.clique))) / m.stddev) ** 2)
                   for m in ms[:5])
    q = ms[5].query
    expected += 0.5 * np.sum(((q @ model.marginal(ms[5].clique).reshape(-1) - ms[5].y) / ms[5].stddev) ** 2)
    assert float(problem.loss_of(mu)) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("sizes", [(40_960,), (30_000, 10_960), (1_000,), (33_333,)])
def test_sum_all_in_rows_of_32_is_the_sum(sizes):
    # float32 (the fixture's x64 is off here): long aligned vectors take the two-stage path
    with jax.enable_x64(False):
        rng = np.random.default_rng(0)
        arrays = [rng.normal(size=n).astype(np.float32) for n in sizes]
        got = float(jax.jit(lambda xs: losses.sum_all(xs))([jnp.asarray(a) for a in arrays]))
    want = sum(float(np.sum(a.astype(np.float64))) for a in arrays)
    scale = sum(float(np.sum(np.abs(a.astype(np.float64)))) for a in arrays)
    assert abs(got - want) <= 1e-6 * scale


def test_reduction_groups_counts_the_dense_programs_groups_of_measurements():
    """What ``program="auto"`` weighs the dense compile by: measurements of one shape and placement share one group
    (their code), one- and two-way marginals of one table one ``"pairs"`` group; every other shape its own."""
    from pgmjax.estimation.losses import reduction_groups

    rng = np.random.default_rng(0)
    one = pj.Domain({f"x{i}": 3 for i in range(12)})
    same = [pj.Measurement((f"x{i}", f"x{i + 1}"), rng.random((3, 3)), stddev=1.0) for i in range(11)]
    varied_dom = pj.Domain({f"x{i}": 2 + i for i in range(12)})
    varied = [pj.Measurement((f"x{i}", f"x{i + 1}"), rng.random(varied_dom.shape_of((f"x{i}", f"x{i + 1}"))), stddev=1.0)
              for i in range(11)]
    wide = pj.Domain({f"b{i}": 2 for i in range(8)})
    pairs = [pj.Measurement(tuple(wide.attributes), rng.random(wide.shape_of(wide.attributes)), stddev=1.0)]
    pairs += [pj.Measurement((f"b{i}", f"b{j}"), rng.random((2, 2)), stddev=1.0) for i in range(8) for j in range(i + 1, 8)]
    counts = {}
    for name, (dom, ms) in {"same": (one, same), "varied": (varied_dom, varied), "pairs": (wide, pairs)}.items():
        counts[name] = reduction_groups(oracle.make_plan(dom, [m.clique for m in ms]), ms)
    assert counts["same"] <= 3 and counts["varied"] == 11 and counts["pairs"] <= 2
