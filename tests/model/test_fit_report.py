"""The model is its potentials and total alone (a frozen dataclass pytree with one explicit cache); what a fit
learned about itself is a :class:`pgmjax.FitReport` beside it (``report=True`` gives a :class:`pgmjax.Fit`)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.estimation import losses
from pgmjax.model.graphical_model import AnswerCache

DOM = pj.Domain({"a": 2, "b": 3, "c": 2})
CLIQUES = [("a", "b"), ("b", "c")]
F64 = dict(dtype=jnp.float64)


def _measurements(seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    return [pj.Measurement(c, rng.uniform(5, 40, DOM.shape_of(c)) + shift, stddev=2.0) for c in CLIQUES]


def _l2_loss(model, ms) -> float:
    """The L2 loss of the model's own marginals, recomputed on the host (float64)."""
    return sum(0.5 * float(np.sum(((np.asarray(model.marginal(m.clique), np.float64).ravel() - np.ravel(m.y))
                                   / np.asarray(m.stddev)) ** 2)) for m in ms)


@pytest.fixture(scope="module")
def fit():
    return pj.estimate(DOM, _measurements(), iters=50, chunk=20, **F64, report=True)


# ---------------------------------------------------------------------------------------------- the model alone
def test_the_models_leaves_are_theta_and_total_and_its_plan_is_static(fit):
    model = fit.model
    flat, treedef = jax.tree_util.tree_flatten_with_path(model)
    names = [path[0].name for path, _ in flat]
    assert set(names) == {"theta", "total"} and names.count("total") == 1
    assert len(flat) == len(jax.tree_util.tree_leaves(model.theta)) + 1
    assert [leaf for path, leaf in flat if path[0].name == "total"] == [model.total]
    # the plan is the structure: rebuilt from the leaves it is the same plan, and another plan another structure
    again = jax.tree_util.tree_unflatten(treedef, [leaf for _, leaf in flat])
    assert again.plan is model.plan and again.total == model.total
    other = pj.estimate(DOM, [pj.Measurement(("a", "c"), np.full((2, 2), 5.0))], iters=0, **F64)
    assert jax.tree_util.tree_structure(other) != treedef
    # nothing of the fit's is on the model, and the cache is no field of its value
    for name in ("history", "loss", "step_size", "info", "_marginal_blocks", "_host_blocks", "_members"):
        assert not hasattr(model, name), name
    assert [f.name for f in dataclasses.fields(model) if f.compare] == ["plan", "theta", "total"]
    assert isinstance(model.cache, AnswerCache)


def test_a_model_through_jit_answers_the_same_and_comes_back_with_an_empty_cache(fit):
    model = fit.model
    before = model.marginal(("a", "c"))
    model.clique_marginals()
    assert model.cache.marginal_blocks and model.cache.clique_marginals  # filled by the answers above
    back = jax.jit(lambda m: m)(model)
    assert isinstance(back, pj.GraphicalModel) and back is not model and back.plan is model.plan
    assert back.cache.marginal_blocks is None and back.cache.host_blocks == {} and back.cache.clique_marginals is None
    assert back.cache.device_marginals is None and back.cache.potentials is None
    assert back.cache.members == {} and back.cache.checked is False
    assert back.total == model.total and isinstance(back.total, float)
    np.testing.assert_array_equal(back.marginal(("a", "c")), before)
    for c, table in model.clique_marginals().items():
        np.testing.assert_array_equal(back.clique_marginals()[c], table)
    # the public views of the cache: the marginal blocks and the device tables, computed once and kept
    assert back.marginal_blocks() is back.marginal_blocks() and back.cache.marginal_blocks is back.marginal_blocks()
    assert back.device_marginals() is back.device_marginals() and set(back.device_marginals()) == {0, 1}


def test_the_model_is_frozen_and_replace_takes_only_its_own_fields(fit):
    model = fit.model
    for name, value in [("total", 1.0), ("theta", {}), ("loss", 0.0), ("cache", AnswerCache())]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(model, name, value)
    assert isinstance(dataclasses.FrozenInstanceError(), AttributeError)
    for field in ("loss", "history", "step_size", "info"):
        with pytest.raises(TypeError, match=rf"unknown field\(s\) \['{field}'\]"):
            model.replace(**{field: None})
    doubled = model.replace(total=2 * model.total)
    assert doubled.cache is not model.cache and doubled.cache.marginal_blocks is None
    np.testing.assert_allclose(doubled.marginal("a"), 2 * model.marginal("a"), rtol=1e-12)
    with pytest.raises(TypeError):
        pj.GraphicalModel(model.plan, model.theta, model.total, [])  # no history argument any more
    with pytest.raises(TypeError):
        pj.GraphicalModel(model.plan, model.theta, model.total, loss=1.0)


# ---------------------------------------------------------------------------------------------- pj.estimate's report
def test_the_report_holds_the_loss_of_the_returned_model_and_its_log(fit):
    model, report = fit
    assert isinstance(fit, pj.Fit) and isinstance(report, pj.FitReport) and fit.model is model
    ms = _measurements()
    assert report.loss == pytest.approx(_l2_loss(model, ms), rel=1e-10)
    assert [h["iteration"] for h in report.history] == [20, 40, 50]
    assert report.history[-1]["iteration"] == report.iterations == 50
    assert report.history[-1]["loss"] == report.loss
    assert report.step_size is not None and report.step_size > 0 and report.info == {}
    assert report.batch is None
    with pytest.raises(TypeError, match="one fit's report, not a batch's"):
        report.member(0)
    assert pj.FitReport().iterations == 0 and pj.FitReport().loss is None


def test_the_model_of_report_true_is_the_model_of_report_false(fit):
    plain = pj.estimate(DOM, _measurements(), iters=50, chunk=20, **F64)
    assert isinstance(plain, pj.GraphicalModel) and not isinstance(plain, tuple)
    assert plain.plan == fit.model.plan and plain.total == fit.model.total
    for k, v in fit.model.theta.items():
        np.testing.assert_array_equal(np.asarray(plain.theta[k]), np.asarray(v))
    for c in plain.cliques:
        np.testing.assert_array_equal(plain.potentials[c], fit.model.potentials[c])


def test_a_warm_start_from_a_fit_continues_at_its_reports_step_size(fit):
    """``first_step``: the larger of ``1 / (L N)`` and the warm fit's last step; the fit's line search grew its step
    well past ``1 / (L N)``, so a warm start from the Fit is the warm start from its model at that step, bit for bit.
    From the model alone no step is carried: the fit starts at ``1 / (L N)`` and goes elsewhere."""
    ms = _measurements(seed=1, shift=3.0)
    total = fit.model.total
    default = 1.0 / (losses.lipschitz_constant(ms) * total)
    assert fit.report.step_size > 2 * default
    from_fit, from_fit_report = pj.estimate(DOM, ms, iters=5, total=total, warm_start=fit, **F64, report=True)
    given = pj.estimate(DOM, ms, iters=5, total=total, warm_start=fit.model, step_size=max(default, fit.report.step_size),
                        **F64, report=True)
    assert from_fit_report.loss == given.report.loss and from_fit_report.step_size == given.report.step_size
    for k, v in from_fit.theta.items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(given.model.theta[k]))
    bare = pj.estimate(DOM, ms, iters=5, total=total, warm_start=fit.model, **F64, report=True)
    cold_step = pj.estimate(DOM, ms, iters=5, total=total, warm_start=fit.model, step_size=default, **F64, report=True)
    assert bare.report.loss == cold_step.report.loss  # a model alone starts at 1 / (L N)
    assert bare.report.loss != from_fit_report.loss
    # the report's step is only the smooth loss's: the L1 loss's steps are per smoothing stage
    l1 = pj.estimate(DOM, ms, iters=5, total=total, loss="l1", warm_start=fit, **F64, report=True)
    assert l1.report.step_size is None


# ---------------------------------------------------------------------------------------------- batches
def test_a_batch_reports_member_i_as_its_ith_loss_and_log():
    ys = np.stack([np.asarray(_measurements(seed=s)[0].y).reshape(2, 3) for s in range(3)])
    batch = [pj.BatchedMeasurement(("a", "b"), ys, stddev=2.0), _measurements()[1]]
    models, report = pj.estimate_batch(DOM, batch, iters=30, chunk=10, **F64, report=True)
    assert isinstance(models, pj.GraphicalModel) and report.batch == len(models) == 3
    assert np.shape(report.loss) == (3,) and np.shape(report.step_size) == (3,)
    for i in (0, 1, 2, -1):
        one = report.member(i)
        assert one.batch is None and one.loss == report.loss[i] and one.step_size == report.step_size[i]
        assert [h["iteration"] for h in one.history] == [10, 20, 30] and one.iterations == report.iterations == 30
        assert one.history[-1]["loss"] == float(np.asarray(report.history[-1]["loss"])[i])
        ms = [pj.Measurement(("a", "b"), ys[i], stddev=2.0), _measurements()[1]]
        assert one.loss == pytest.approx(_l2_loss(models.member(i), ms), rel=1e-9)
    with pytest.raises(IndexError, match="out of range for a batch of 3"):
        report.member(3)
    assert isinstance(pj.estimate_batch(DOM, batch, iters=30, chunk=10, **F64), pj.GraphicalModel)


def test_vmap_of_the_pure_fit_gives_a_report_with_a_loss_per_member():
    ms = _measurements()
    ys = jnp.stack([jnp.asarray(ms[0].y), jnp.asarray(ms[0].y) + 2.0])

    def one(y):
        return pj.fit(DOM, [pj.Measurement(("a", "b"), y, stddev=2.0), ms[1]], iters=40, report=True, **F64)

    fitted = jax.vmap(one)(ys)
    assert isinstance(fitted, pj.Fit) and fitted.model.batch == 2
    assert np.shape(fitted.report.loss) == (2,) and np.shape(fitted.report.step_size) == (2,)
    for i in range(2):
        alone = one(ys[i])
        assert np.ndim(alone.report.loss) == 0
        np.testing.assert_allclose(np.asarray(fitted.report.loss)[i], alone.report.loss, rtol=1e-9)
        member = jax.tree_util.tree_map(lambda leaf: leaf[i], fitted.model)
        loss = _l2_loss(member, [pj.Measurement(("a", "b"), np.asarray(ys[i]), stddev=2.0), ms[1]])
        np.testing.assert_allclose(np.asarray(fitted.report.loss)[i], loss, rtol=1e-9)
    assert isinstance(jax.vmap(lambda y: one(y).model)(ys), pj.GraphicalModel)


# ---------------------------------------------------------------------------------------------- files
def test_save_with_the_report_and_load_it_back(fit, tmp_path):
    model, report = fit
    path = model.save(tmp_path / "with", report=report)
    back, loaded = pj.load_model(path, report=True)
    assert isinstance(loaded, pj.FitReport) and loaded.loss == report.loss
    assert [h["iteration"] for h in loaded.history] == [h["iteration"] for h in report.history]
    assert loaded.iterations == report.iterations == 50
    for c in model.cliques:
        np.testing.assert_array_equal(back.potentials[c], model.potentials[c])
    assert isinstance(pj.load_model(path), pj.GraphicalModel)  # report=False: the model alone
    # saved without a report: the file holds no loss and no log
    bare, nothing = pj.load_model(model.save(tmp_path / "without"), report=True)
    assert nothing.loss is None and nothing.history == () and nothing.iterations == 0
    np.testing.assert_array_equal(bare.marginal(("a", "c")), model.marginal(("a", "c")))


def test_a_model_refuses_potentials_in_another_layout_at_construction(fit):
    plan = fit.model.plan
    other = pj.graph.oracle.make_plan(DOM, [("a",), ("b",), ("c",)])
    with pytest.raises(ValueError, match=r"theta must hold the plan's blocks .* got \["):
        pj.GraphicalModel(plan, other.zeros(jnp.float64), 10.0)
    key, shape = plan.units[0]
    wrong = dict(fit.model.theta, **{key: np.zeros(shape[:-1] + (shape[-1] + 1,))})
    with pytest.raises(ValueError, match=rf"theta block '{key}' has shape"):
        pj.GraphicalModel(plan, wrong, 10.0)
    batched = {k: np.stack([np.asarray(v)] * 2) for k, v in fit.model.theta.items()}  # a leading batch axis
    assert pj.GraphicalModel(plan, batched, np.array([10.0, 20.0])).batch == 2
