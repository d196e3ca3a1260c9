"""``pj.fit`` (a fit as a pure function) and the model as a pytree (the estimator contract: test_estimator_contract.py).

References: ``pj.estimate`` on the same measurements (the host driver of the same estimator), sequential fits
for ``vmap``, central finite differences in float64 for ``grad``, and the host stacking of measurements for
the traced one.
"""


import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles

import pgmjax as pj
from pgmjax import programs
from pgmjax.estimation import losses
from pgmjax.graph import oracle

DOM = pj.Domain({"a": 2, "b": 3, "c": 4})


def _answers(rng, n=1):
    ab = rng.uniform(5, 40, size=(n, 2, 3))
    bc = rng.uniform(5, 40, size=(n, 3, 4))
    return ab, bc


def _l1_over_n(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).sum() / want.sum())


def _measurements(ab, bc):
    return [pj.Measurement(("a", "b"), ab, stddev=2.0), pj.Measurement(("b", "c"), bc, stddev=3.0)]


@pytest.mark.parametrize("method", ["mirror_descent", "dual_averaging", "lbfgs"])
def test_fit_is_the_estimate_of_the_same_iterations(method, rng):
    (ab,), (bc,) = _answers(rng)
    ms = _measurements(ab, bc)
    pure, pure_report = pj.fit(DOM, ms, method=method, iters=150, report=True)
    host, host_report = pj.estimate(DOM, ms, method, iters=150, chunk=150, report=True)
    assert pure.total == pytest.approx(host.total, rel=1e-6)  # the same total rule, inside the program
    assert pure_report.loss == pytest.approx(host_report.loss, rel=1e-5)
    # Two programs (the fit's and the driver's chunk) round differently; where the float32 loss is flat to
    # its rounding, mirror descent's line search then stops at different points of that flat valley.
    assert _l1_over_n(pure.marginal(("a", "c")), host.marginal(("a", "c"))) <= 1e-3


def test_fit_with_the_l1_loss_follows_the_same_smoothing_stages(rng):
    (ab,), (bc,) = _answers(rng)
    ms = _measurements(ab, bc)
    pure = pj.fit(DOM, ms, iters=200, loss="l1")
    host = pj.estimate(DOM, ms, iters=200, loss="l1")
    assert _l1_over_n(pure.marginal(("a", "c")), host.marginal(("a", "c"))) <= 1e-3


def test_vmap_of_fit_is_the_batch_of_sequential_fits(rng):
    ab, bc = _answers(rng, 3)

    def one(x, y):
        return pj.fit(DOM, _measurements(x, y), iters=120).marginal(("a", "c"))

    batch = jax.vmap(one)(ab, bc)
    assert batch.shape == (3, 2, 4)
    for i in range(3):  # as close as two programs' float32 roundings leave mirror descent (see above)
        assert _l1_over_n(batch[i], one(ab[i], bc[i])) <= 1e-3
    # the batch of models itself: one GraphicalModel whose leaves have a leading axis
    models = jax.vmap(lambda x, y: pj.fit(DOM, _measurements(x, y), iters=120))(ab, bc)
    assert isinstance(models, pj.GraphicalModel) and np.shape(models.total) == (3,)
    member = jax.tree_util.tree_map(lambda leaf: leaf[1], models)
    np.testing.assert_allclose(member.marginal(("a", "c")), np.asarray(batch[1]), rtol=1e-5)


def test_jit_of_fit_compiles_once_for_new_answers(rng):
    ab, bc = _answers(rng, 2)
    f = jax.jit(lambda x, y: pj.fit(DOM, _measurements(x, y), iters=50).marginal(("a", "c")))
    programs.release_compiled()
    f(ab[0], bc[0]).block_until_ready()
    with count_compiles() as c:
        out = f(ab[1], bc[1]).block_until_ready()
    assert c.count == 0
    assert _l1_over_n(out, pj.fit(DOM, _measurements(ab[1], bc[1]), iters=50).marginal(("a", "c"))) <= 1e-3


def test_grad_through_dual_averaging_matches_finite_differences(rng):
    (ab,), (bc,) = _answers(rng)

    def answer(x):
        model = pj.fit(DOM, _measurements(x, bc), method="dual_averaging", iters=300, dtype=jnp.float64)
        return model.marginal(("a", "c"))[0, 1]

    g = np.asarray(jax.grad(answer)(ab))
    h = 1e-4
    forward = jax.jit(answer)  # the four finite-difference fits share one program
    for idx in [(0, 0), (1, 2)]:
        up, down = ab.copy(), ab.copy()
        up[idx] += h
        down[idx] -= h
        fd = (float(forward(up)) - float(forward(down))) / (2 * h)
        assert g[idx] == pytest.approx(fd, rel=1e-4, abs=1e-7)


@pytest.mark.parametrize("transform", ["grad", "jacfwd", "vmap_of_grad", "grad_of_vmap"])
@pytest.mark.parametrize("method", ["mirror_descent", "lbfgs"])
def test_differentiating_through_a_line_search_is_refused(transform, method, rng):
    ab, bc = _answers(rng, 2)

    def answer(x, y):
        return pj.fit(DOM, _measurements(x, y), method=method, iters=20).marginal("a")[0]

    f = {
        "grad": lambda: jax.grad(answer)(ab[0], bc[0]),
        "jacfwd": lambda: jax.jacfwd(answer)(ab[0], bc[0]),
        "vmap_of_grad": lambda: jax.vmap(jax.grad(answer))(ab, bc),
        "grad_of_vmap": lambda: jax.grad(lambda x: jax.vmap(answer)(x, bc).sum())(ab),
    }[transform]
    with pytest.raises(ValueError, match=f"fit: {method} is not differentiable in the answers"):
        f()


def test_the_model_is_an_immutable_pytree(rng):
    (ab,), (bc,) = _answers(rng)
    model = pj.estimate(DOM, _measurements(ab, bc), iters=100)
    leaves, tree = jax.tree_util.tree_flatten(model)
    again = jax.tree_util.tree_unflatten(tree, leaves)
    assert again.total == model.total and again.plan is model.plan
    assert not hasattr(again, "loss")  # what the fit learned is its report's, not the model's
    np.testing.assert_array_equal(again.marginal(("a", "c")), model.marginal(("a", "c")))
    # its answers inside jit are the host's
    traced = jax.jit(lambda m: m.marginal(("a", "c")))(model)
    np.testing.assert_allclose(np.asarray(traced), model.marginal(("a", "c")), rtol=1e-5)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'loss'"):
        model.loss = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'total'"):
        model.total = 0.0
    assert model.replace(total=2 * model.total).marginal("a").sum() == pytest.approx(2 * model.total)
    with pytest.raises(TypeError, match=r"unknown field\(s\) \['potentials'\]"):
        model.replace(potentials={})


@pytest.mark.parametrize("method", [pj.MirrorDescent(momentum=0.0), pj.DualAveraging(), pj.LBFGS()])
def test_estimate_takes_a_configured_estimator(method, rng):
    (ab,), (bc,) = _answers(rng)
    ms = _measurements(ab, bc)
    configured, configured_report = pj.estimate(DOM, ms, method=method, iters=200, report=True)
    assert np.isfinite(configured_report.loss)
    if not isinstance(method, pj.MirrorDescent):  # default settings: the name's estimator, the same fit
        name = {pj.DualAveraging: "dual_averaging", pj.LBFGS: "lbfgs"}[type(method)]
        np.testing.assert_allclose(configured.marginal(("a", "c")), pj.estimate(DOM, ms, name, iters=200).marginal(("a", "c")),
                                   rtol=1e-6)


def test_traced_stacking_equals_the_host_stacking(rng):
    """Every kind of group: marginals merged into one group, a Kronecker and a dense query, repeated
    measurements of one clique padded to a power of two, and one-way marginals read from a pair table."""
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5})
    ms = [
        pj.Measurement(("a", "b"), rng.normal(size=(3, 4)), stddev=1.5),
        pj.Measurement(("b", "a"), rng.normal(size=(4, 3)), stddev=2.0),  # transposed: reordered on the host
        pj.Measurement(("c",), rng.normal(size=2)),
        pj.Measurement(("b", "c", "d"), rng.normal(size=6), query=(rng.normal(size=(2, 4)), np.ones((1, 2)),
                                                                     rng.normal(size=(3, 5)))),
        pj.Measurement(("c", "d"), rng.normal(size=4), query=rng.normal(size=(4, 10))),
        *[pj.Measurement(("d",), rng.normal(size=5), stddev=s) for s in (1.0, 2.0, 3.0)],
    ]
    plan = oracle.make_plan(dom, [m.clique for m in ms])
    host = losses.stack_measurements(plan, ms, jnp.float32)
    traced = losses.stack_measurements_traced(plan, ms, jnp.float32)
    assert host.groups == traced.groups
    for h, t in zip(jax.tree_util.tree_leaves(host.arrays), jax.tree_util.tree_leaves(traced.arrays)):
        np.testing.assert_array_equal(np.asarray(h), np.asarray(t))


def test_a_traced_answer_is_kept_and_a_concrete_one_still_checked():
    with pytest.raises(ValueError, match="y has non-finite values"):
        pj.Measurement(("a",), [1.0, np.nan])
    seen = []
    jax.jit(lambda y: seen.append(pj.Measurement(("a",), y)) or y)(jnp.ones(2))
    assert isinstance(seen[0].y, jax.core.Tracer) and seen[0].rows == 2
