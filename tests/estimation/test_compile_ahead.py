"""Compiling the next size class ahead (``estimate(..., compile_ahead=True)``, :mod:`pgmjax.compiler.ahead`): the
padded problem is a valid one, the next class's fit then compiles nothing, and the fits are the same either way."""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles

import pgmjax as pj
from pgmjax import programs
from pgmjax.compiler import ahead
from pgmjax.estimation import routed_losses
from pgmjax.graph import routed_oracle
from pgmjax.graph.routed_plan import make_routed_plan, next_class, padded


def _chain(n: int, seed: int = 0, values: int = 4):
    """A chain of ``n`` cliques of three ``values``-valued attributes (``values ** 3 * n`` cells), each measured."""
    rng = np.random.default_rng(seed)
    dom = pj.Domain({f"a{i}": values for i in range(n + 2)})
    cliques = [(f"a{i}", f"a{i + 1}", f"a{i + 2}") for i in range(n)]
    ms = [pj.Measurement(c, rng.random(dom.shape_of(c)) * 10 + 1, stddev=2.0) for c in cliques]
    return dom, cliques, ms


def test_next_class_is_the_next_cell_class_with_its_window():
    plan = make_routed_plan(*_chain(70)[:2])
    assert plan.size.cells == 6144
    assert next_class(plan) == plan.size._replace(cells=8192, pairs=4 * 8192)
    big = make_routed_plan(*_chain(21, values=8)[:2])  # 10,752 cells: the 12,288 class, the next a wider window
    assert (big.size.cells, big.size.width) == (12288, 1024)
    grown = next_class(big)
    assert (grown.cells, grown.width, grown.pair_width) == (16384, 4096, 4096)
    assert next_class(make_routed_plan(*_chain(20)[:2], differentiable=True)) is None


def test_a_padded_plan_and_padded_measurements_give_the_same_marginals_and_loss():
    """A plan padded into a larger class (here with a four times wider window) and its measurements padded into the
    matching shape are a valid problem: the same marginals, log Z and loss (float64)."""
    dom, cliques, ms = _chain(21, values=8)
    plan = make_routed_plan(dom, cliques)
    wide = padded(plan, next_class(plan))
    rng = np.random.default_rng(3)
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in plan.cliques}
    mu, log_z = jax.jit(routed_oracle.marginals)(plan, plan.from_tables(tables, jnp.float64), 500.0)
    mu_w, log_z_w = jax.jit(routed_oracle.marginals)(wide, wide.from_tables(tables, jnp.float64), 500.0)
    np.testing.assert_allclose(np.asarray(mu_w["cells"])[: plan.size.cells], np.asarray(mu["cells"]), rtol=1e-12,
                               atol=1e-12)
    assert float(log_z_w) == pytest.approx(float(log_z), rel=1e-13)
    meas = routed_losses.stack_routed(plan, ms, jnp.float64)
    shape = routed_losses.shape_in_class(meas, plan.size.cells, wide.size.cells)
    grown = routed_losses.padded(meas, shape)
    assert grown.shape == shape and shape.cells // 16384 == meas.shape.cells // 12288
    pats = meas.patterns(mu)[0][0]
    pats_w = grown.patterns(mu_w)[0][0]
    np.testing.assert_allclose(np.asarray(pats_w)[: meas.shape.cells], np.asarray(pats), rtol=1e-12, atol=1e-9)
    assert not np.asarray(pats_w)[meas.shape.cells:].any()
    with pytest.raises(ValueError, match="cannot be padded"):
        padded(wide, plan.size)
    with pytest.raises(ValueError, match="cannot be padded"):
        routed_losses.padded(grown, meas.shape)


def test_a_fit_compiles_the_next_class_ahead_and_the_next_class_fits_alike_without_compiling():
    """After a size-class fit with ``compile_ahead=True``, a structure of the next class compiles nothing on its
    first fit, and fits exactly as it does in a process that compiled it itself."""
    dom_a, _, ms_a = _chain(70)
    dom_b, _, ms_b = _chain(100, seed=1)
    programs.release_compiled()
    with count_compiles() as counter:
        pj.estimate(dom_a, ms_a, iters=30, program="size_class", compile_ahead=True)
        ahead.wait_all()
    assert counter.names.count("jit(_chunk)") == 2, counter.names  # its own class's, and the next one's ahead
    with count_compiles() as counter:
        fit = pj.estimate(dom_b, ms_b, iters=30, program="size_class", report=True)
    assert fit.model.plan.size.cells == 8192
    assert counter.count == 0, counter.names
    programs.release_compiled()  # the same fit, compiled by itself
    with count_compiles() as counter:
        again = pj.estimate(dom_b, ms_b, iters=30, program="size_class", report=True)
    assert counter.count >= 2, counter.names  # its chunk and its marginals: the program compiled ahead was that one
    assert float(fit.report.loss) == float(again.report.loss)
    np.testing.assert_array_equal(np.asarray(fit.model.theta["cells"]), np.asarray(again.model.theta["cells"]))


def test_compiling_ahead_runs_one_compile_at_a_time_and_drops_failures():
    started, release = threading.Event(), threading.Event()

    def slow():
        started.set()
        release.wait(10)

    ahead.forget()
    assert ahead.ahead(("test", 1), slow)
    started.wait(10)
    assert not ahead.ahead(("test", 2), lambda: None)  # one in flight: dropped
    assert ahead.in_flight() == (("test", 1),)
    release.set()
    assert ahead.wait(("test", 1)) >= 0.0 and ahead.in_flight() == ()
    assert not ahead.ahead(("test", 1), slow)  # compiled already
    assert ahead.ahead(("test", 3), lambda: 1 / 0)  # a failure is the caller's own call's to raise, not this one's
    ahead.wait(("test", 3))
    ahead.forget()
    assert ahead.ahead(("test", 1), lambda: None)  # forgotten: compiled again
    ahead.wait_all()
    ahead.forget()


def test_compile_ahead_must_be_a_bool():
    dom, _, ms = _chain(3)
    with pytest.raises(TypeError, match="compile_ahead must be True or False, got 'yes'"):
        pj.estimate(dom, ms, iters=5, compile_ahead="yes")
    with pytest.raises(TypeError, match="FitOptions: compile_ahead must be True, False or None, got 1"):
        pj.FitOptions(compile_ahead=1)
