"""The L1 loss's smoothing stages as one wrapper (pgmjax.estimation.continuation): one schedule for estimate,
fit and each member of a batch, fixed by the iteration count alone."""

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.estimation import continuation, driver
from pgmjax.estimation.batch import BatchedMeasurement, estimate_batch
from pgmjax.estimation.batch_problem import make_problem

DOMAIN = pj.Domain({"a": 2, "b": 3, "c": 2})
RNG = np.random.default_rng(3)
TRUTH_AB = np.array([[40.0, 25, 10], [5, 12, 8]])
TRUTH_BC = np.array([[30.0, 15], [20, 17], [9, 9]])


def _measurements(noise=1.0, rng=RNG):
    return [pj.Measurement(("a", "b"), TRUTH_AB + rng.laplace(0, noise, TRUTH_AB.shape), stddev=noise),
            pj.Measurement(("b", "c"), TRUTH_BC + rng.laplace(0, noise, TRUTH_BC.shape), stddev=noise)]


MS = _measurements()


def _potentials(model):
    return {k: np.asarray(v) for k, v in model.theta.items()}


def test_the_schedule_is_20_stages_of_the_iterations_and_only_the_l1_loss_is_wrapped():
    md = pj.MirrorDescent()
    assert continuation.smoothed(md, "l2", 1000) is md
    s = continuation.smoothed(md, "l1", 1000)
    assert (s.stage_iters, s.stages) == (50, 20)
    assert (continuation.smoothed(md, "l1", 3000).stage_iters, continuation.smoothed(md, "l1", 3000).stages) == (150, 20)
    assert continuation.smoothed(md, "l1", 205).stages == 21  # 20 of 10, and the shorter last of 5
    assert continuation.smoothed(md, "l1", 7).stage_iters == 1
    w = s.widths()
    assert w[0] == 1.0 and w[-1] == pytest.approx(1e-6) and np.all(np.diff(w) < 0)
    with pytest.raises(ValueError, match="stage_iters and stages"):
        continuation.Smoothed(md, 0, 20)
    with pytest.raises(ValueError, match="last <= first"):
        continuation.Smoothed(md, 10, 20, first=1e-3, last=1.0)


@pytest.mark.parametrize("method", ["mirror_descent", "lbfgs"])
def test_an_l1_fit_does_not_depend_on_how_the_driver_chunks_it(method):
    """The stages are the wrapper's, the chunks the host's: a chunk of 7 iterations (stages of 15 do not end on
    its boundaries) gives the model a chunk of 50 gives, bit for bit."""
    a, a_report = pj.estimate(DOMAIN, MS, method, 300, loss="l1", chunk=50, report=True)
    b, b_report = pj.estimate(DOMAIN, MS, method, 300, loss="l1", chunk=7, report=True)
    assert a_report.loss == b_report.loss
    for k, v in _potentials(a).items():
        np.testing.assert_array_equal(v, _potentials(b)[k])
    assert len(b_report.history) > len(a_report.history)  # the callback still sees every chunk


def test_the_stage_loop_is_the_step_loop():
    """Smoothed.advance (the restart test once per stage) makes the iterates the contract's loop over its step
    makes (the restart test at every step)."""
    problem = make_problem(DOMAIN, MS, loss="l1")
    est = continuation.smoothed(pj.MirrorDescent(), "l1", 200)
    start = est.init(problem, problem.plan.zeros(), 1.0 / (problem.lipschitz * problem.total))
    fast = jax.jit(est.advance, static_argnums=3)(problem, *start, 200)
    plain = jax.jit(lambda p, s, i: pj.Estimator.advance(est, p, s, i, jnp.asarray(200)))(problem, *start)
    assert int(fast[0].iteration) == int(plain[0].iteration) == 200
    assert int(fast[0].stage) == int(plain[0].stage) >= 19
    for k in fast[0].params:
        np.testing.assert_array_equal(np.asarray(fast[0].params[k]), np.asarray(plain[0].params[k]))


def test_tol_waits_for_the_last_stage():
    """A smoothed stage's loss barely moves while the width is wide; tol may end the run only once the last
    stage has begun (info.settled)."""
    model, report = pj.estimate(DOMAIN, MS, iters=400, loss="l1", tol=1e9, chunk=10, report=True)
    assert 19 * 20 <= report.history[-1]["iteration"] <= 400
    unsettled = [h for h in report.history if h["iteration"] < 19 * 20]
    assert len(unsettled) >= 37  # every chunk before the last stage ran


def test_fit_and_estimate_run_one_schedule():
    a, a_report = pj.estimate(DOMAIN, MS, iters=300, loss="l1", dtype=jnp.float64, report=True)
    b, b_report = pj.fit(DOMAIN, MS, iters=300, loss="l1", dtype=jnp.float64, report=True)
    np.testing.assert_allclose(float(b_report.loss), a_report.loss, rtol=1e-9)
    for c in (("a", "b"), ("b", "c")):
        np.testing.assert_allclose(np.asarray(b.marginal(c)), a.marginal(c), rtol=1e-8, atol=1e-8)


class _State(NamedTuple):
    params: dict
    iteration: jax.Array
    oracle_calls: jax.Array


@dataclass(frozen=True)
class _StallsAfter(pj.Estimator):
    """Makes no progress and stalls after ``total / 10`` iterations of a stage (a member's own count)."""

    def init(self, problem, theta, step_size):
        zero = jnp.zeros((), jnp.int32)
        return _State(theta, zero, zero), pj.StepInfo(jnp.zeros(()), jnp.zeros((), bool), None)

    def step(self, problem, s):
        s = _State(s.params, s.iteration + 1, s.oracle_calls + 1)
        return s, pj.StepInfo(jnp.zeros(()), s.iteration >= (problem.total / 10).astype(jnp.int32), None)


def test_a_stall_ends_a_stage_before_the_last_and_the_run_in_the_last_each_member_on_its_own():
    """Stages of 10 iterations, 4 of them: an estimator that stalls after 3 iterations of each stage restarts
    three times and ends in the last after 12 iterations, one that stalls after 5 after 20; in a batch each
    member keeps its own count (its stages restart when it stalls, not when the batch's chunk ends)."""
    est = continuation.Smoothed(_StallsAfter(), stage_iters=10, stages=4)
    for total, made in ((30.0, 12), (50.0, 20)):
        problem = make_problem(DOMAIN, MS, loss="l1", total=total)
        state, info = est.advance(problem, *est.init(problem, problem.plan.zeros(), 1.0), 100)
        assert (int(state.iteration), int(state.stage), bool(info.stalled)) == (made, 3, True)
    ys = [np.stack([m.y, m.y]) for m in MS]
    history = []
    model = estimate_batch(DOMAIN, [BatchedMeasurement(m.clique, y, stddev=m.stddev) for m, y in zip(MS, ys)],
                           method=_StallsAfter(), iters=100, loss="l1", total=np.array([30.0, 50.0]), chunk=100,
                           callback=lambda entry: history.append(np.asarray(entry["state"].iteration).tolist()))
    assert len(model) == 2
    # 20 stages of 5: the first member stalls after 3 in each and in the last ends, the second runs them all
    assert history == [[60, 100]]


def test_the_driver_knows_no_schedule():
    """The run's loop reads the step's info alone: what the wrapper said settled, and the stall."""
    assert not hasattr(driver, "smoothing_schedule") and not hasattr(driver, "SMOOTHING")
    info = pj.StepInfo(1.0, False, None)
    assert info.settled is True
