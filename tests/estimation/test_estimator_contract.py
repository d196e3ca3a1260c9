"""The estimator contract (``pgmjax.estimation.contract``): two functions and a :class:`pgmjax.StepInfo`, the
driver's loop over steps, an estimator's :class:`~pgmjax.estimation.contract.Traits` in place of switches on its
name, and a configured estimator kept wherever the front door passes it on.

References: the built-in estimators driven by hand (step by step, with the contract's own loop) against the
compiled driver; a fit's iteration counts and its stall."""

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.estimation import oracles
from pgmjax.estimation.batch_problem import make_problem
from pgmjax.estimation.contract import Traits

DOM = pj.Domain({"a": 3, "b": 4, "c": 2})
MS = [pj.Measurement(("a", "b"), np.arange(12.0).reshape(3, 4) + 5, stddev=1.0),
      pj.Measurement(("b", "c"), np.arange(8.0).reshape(4, 2) + 3, stddev=2.0)]


class _State(NamedTuple):
    params: dict
    iteration: jax.Array
    oracle_calls: jax.Array


def _loss(problem, theta):
    return problem.loss_of(problem.marginals(theta))


@dataclass(frozen=True)
class _Gradient(pj.Estimator):
    """A user's own estimator: the two functions and nothing else."""

    eta: float = 1e-3

    def init(self, problem, theta, step_size=None):
        return _State(theta, jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32)), _info(_loss(problem, theta))

    def step(self, problem, s):
        g = jax.grad(_loss, 1)(problem, s.params)
        theta = jax.tree_util.tree_map(lambda t, d: t - self.eta * d, s.params, g)
        return _State(theta, s.iteration + 1, s.oracle_calls + 2), _info(_loss(problem, theta))


def _info(loss):
    return pj.StepInfo(loss, jnp.zeros((), bool), None)


def test_a_users_own_estimator_has_the_default_traits_and_is_refused_what_needs_others():
    est = _Gradient()
    assert est.traits == Traits() and est.differentiable and not est.init_on_host
    with pytest.raises(ValueError, match=r"program='size_class' needs method 'mirror_descent', 'dual_averaging' or "
                                         r"'lbfgs' \(method='_Gradient'\)"):
        pj.estimate(DOM, MS, method=est, iters=10, program="size_class")
    with pytest.raises(ValueError, match=r"oracle=ApproximateOracle\(.*\) needs method='mirror_descent' \(got '_Gradient'\)"):
        pj.estimate(DOM, MS, method=est, iters=10, oracle="approximate")
    # No smooth-loss rule of dual averaging's: the L1 loss runs (its smoothing stages restart the estimator).
    model, report = pj.estimate(DOM, MS, method=est, iters=40, loss="l1", report=True)
    assert report.history[-1]["iteration"] == 40 and report.step_size is None
    # Traits are the classes' own; a configured or derived estimator keeps its class's.
    assert pj.MirrorDescent(momentum=0.0).traits.approximate_oracle and pj.DualAveraging().traits.smooth_loss_only
    assert pj.DualAveraging().traits.lock_step and not pj.MirrorDescent().traits.lock_step
    assert isinstance(pj.LBFGS().traits.finish_with, pj.MirrorDescent) and pj.LBFGS().traits.gradient_through_oracle
    assert oracles.uses_size_class("size_class", DOM, [m.clique for m in MS], MS, "l2", 10, method=pj.LBFGS())


def test_a_users_own_estimator_runs_through_estimate_and_fit():
    dom = pj.Domain({"a": 2})
    ms = [pj.Measurement(("a",), np.array([30.0, 10.0]))]
    for model in (pj.estimate(dom, ms, method=_Gradient(eta=2e-3), iters=300),
                  pj.fit(dom, ms, method=_Gradient(eta=2e-3), iters=300)):
        np.testing.assert_allclose(model.marginal("a"), [30.0, 10.0], atol=0.05)
    with pytest.raises(ValueError, match="unknown method 'newton'; expected one of .* or a pgmjax.Estimator instance"):
        pj.estimate(dom, ms, method="newton")


@pytest.mark.parametrize("estimator", [pj.MirrorDescent(), pj.DualAveraging(), pj.LBFGS(), _Gradient(eta=1e-2)])
def test_advance_makes_the_iterations_asked_from_a_state_not_evaluated_yet_and_from_one_that_is(estimator):
    problem = make_problem(DOM, MS, dtype=jnp.float64)
    step = 1.0 / float(problem.lipschitz * problem.total)
    state, info = estimator.init(problem, problem.plan.zeros(jnp.float64), step)
    assert int(state.iteration) == (-1 if estimator.init_on_host else 0)  # mirror descent: nothing computed yet
    advance = jax.jit(lambda s, i, n: estimator.advance(problem, s, i, n))
    once, info = advance(state, info, jnp.int32(7))
    assert int(once.iteration) == 7 and np.isfinite(float(info.loss))
    # the loss the info reports is that of the potentials the state returns
    np.testing.assert_allclose(float(problem.loss_of(problem.marginals(once.params))), float(info.loss), rtol=1e-9)
    twice, info2 = advance(once, info, jnp.int32(5))
    assert int(twice.iteration) == 12
    if not isinstance(estimator, _Gradient):  # the built-ins return their best iterate: the loss never rises
        assert float(info2.loss) <= float(info.loss) * (1 + 1e-12)
    # a Python count runs the same iterations (a fori_loop where the estimator is differentiable)
    static, _ = estimator.advance(problem, state, estimator.init(problem, problem.plan.zeros(jnp.float64), step)[1], 7)
    assert int(static.iteration) == 7


@dataclass(frozen=True)
class _RefusingAfterFive(pj.MirrorDescent):
    """Mirror descent whose line search accepts nothing after iteration 5 (only the zero steps pass)."""

    def trial(self, problem, s, eta, beta=0.0, slack=None):
        *out, ok = super().trial(problem, s, eta, beta, slack)
        return (*out, ok & (s.iteration < 5))


def test_a_batch_whose_members_all_stalled_ends_and_counts_the_iterations_made():
    ys = [np.stack([m.y + k for k in range(3)]) for m in MS]
    ms = [pj.BatchedMeasurement(m.clique, y, stddev=m.stddev) for m, y in zip(MS, ys)]
    stalled, stalled_report = pj.estimate_batch(DOM, ms, method=_RefusingAfterFive(), iters=1000, dtype=jnp.float32,
                                                report=True)
    assert stalled_report.history[-1]["stalled"] and stalled_report.history[-1]["iteration"] == 7
    assert len(stalled_report.history) == 1  # one chunk, not twenty
    plain, plain_report = pj.estimate_batch(DOM, ms, method="mirror_descent", iters=100, report=True)
    assert plain_report.history[-1]["iteration"] == 100 and "stalled" not in plain_report.history[-1]


def test_a_configured_estimator_is_the_one_that_fits_a_model_whose_dependency_is_eliminated():
    # c determined by a: the fit runs without c (pgmjax.estimation.dependencies), by the estimator given.
    dom = pj.Domain({"a": 3, "b": 2, "c": 2})
    ms = [pj.Measurement(("a", "b"), np.arange(6.0).reshape(3, 2) + 10, 1.0), pj.Measurement(("a", "c"), np.eye(3, 2) * 20 + 1, 1.0)]
    dep = pj.Constraint.determines("a", "c", [0, 1, 1])
    model, report = pj.estimate(dom, ms, method=_RefusingAfterFive(), iters=1000, constraints=[dep], report=True)
    assert report.info["eliminated"] == [dep]
    assert report.history[-1]["stalled"] and report.history[-1]["iteration"] == 7


def test_a_stalled_lbfgs_run_is_finished_by_its_traits_estimator_and_names_it():
    dom = pj.Domain({"a": 2, "b": 3})
    ms = [pj.Measurement(("a", "b"), np.array([[10.0, 20, 30], [5, 5, 30]]))]
    model, report = pj.estimate(dom, ms, method="lbfgs", iters=300, report=True)
    handed = [h for h in report.history if h.get("method") == "mirror_descent"]
    assert handed and report.history[-1]["iteration"] == 300
    # the model's step is mirror descent's, which finished it (a warm start continues from it)
    assert report.step_size is not None and report.step_size > 0
