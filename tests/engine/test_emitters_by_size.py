"""The engine's programs pick XLA:CPU's emitters by model (pgmjax.compiler.BySize).

Models whose largest potential block has at most LOOP_EMITTERS_CELLS cells (batch members counted) compile
with the loop emitters; models with larger blocks, and fits that reduce tables into many marginals per
clique, with XLA's defaults; a user's XLA_FLAGS choice holds for every program.
"""
import itertools

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import compiler
from pgmjax.estimation import driver
from pgmjax.estimation.batch_problem import make_problem, stack_problems
from pgmjax.graph.oracle_plan import make_plan
from pgmjax.graph.program_choice import block_cells, suits_loop_emitters


def _measurements(seed=0):
    rng = np.random.default_rng(seed)
    sizes = {"a": 7, "b": 3, "c": 11, "d": 2, "e": 5}
    data = pj.Dataset(np.stack([rng.integers(0, s, 2000) for s in sizes.values()], axis=1), pj.Domain(sizes))
    ms = pj.noisy_marginals(data, [("a", "b", "c"), ("c", "d"), ("d", "e"), ("a", "e")], stddev=3.0,
                            key=jax.random.key(seed))
    return data.domain, ms


def test_block_cells_is_the_largest_block_and_counts_the_members_of_a_batch():
    domain, ms = _measurements()
    problem = make_problem(domain, ms)
    largest = problem.plan.largest_block
    sizes = [int(np.prod(s)) for _, s in problem.plan.units]
    assert largest == max(sizes) >= 7 * 3 * 11 and largest < problem.plan.cells == sum(sizes)
    assert block_cells(driver.MirrorDescent(), problem, None) == largest  # the estimator (static) is skipped
    plan = make_plan(domain, [("a", "b", "c"), ("c", "d")])
    theta = plan.zeros()
    assert block_cells(plan, theta, 1.0) == plan.largest_block == 7 * 3 * 11
    assert block_cells(plan, {k: jnp.stack([t] * 3) for k, t in theta.items()}, jnp.ones(3)) == 3 * plan.largest_block
    with pytest.raises(TypeError, match="no OraclePlan"):
        block_cells(1.0, {"x": jnp.ones(3)})


def test_a_batch_counts_every_member():
    domain, ms = _measurements()
    draws = [pj.noisy_marginals(pj.Dataset(np.zeros((10, 5), int), domain), [m.clique for m in ms], stddev=1.0,
                                key=jax.random.key(i)) for i in range(3)]
    problem = stack_problems([make_problem(domain, d) for d in draws])
    assert block_cells(problem) == 3 * problem.plan.largest_block


def test_a_large_model_of_small_blocks_gets_the_loop_emitters(monkeypatch):
    # The rule reads the largest block, not the whole model: a model of many tables, each below the
    # limit, compiles with the loop emitters; one table above it does not.
    domain, ms = _measurements()
    problem = make_problem(domain, ms)
    monkeypatch.setattr(compiler, "LOOP_EMITTERS_CELLS", problem.plan.largest_block)
    assert problem.plan.cells > compiler.LOOP_EMITTERS_CELLS
    assert suits_loop_emitters(problem)
    monkeypatch.setattr(compiler, "LOOP_EMITTERS_CELLS", problem.plan.largest_block - 1)
    assert not suits_loop_emitters(problem)


def test_small_and_large_programs_fit_the_same_model(monkeypatch):
    # float64: the two emitters compute the same arithmetic; only the generated code differs.
    domain, ms = _measurements(1)
    small, small_report = pj.estimate(domain, ms, iters=150, dtype=jnp.float64, report=True)
    monkeypatch.setattr(compiler, "LOOP_EMITTERS_CELLS", 0)
    large, large_report = pj.estimate(domain, ms, iters=150, dtype=jnp.float64, report=True)
    assert abs(float(small_report.loss) - float(large_report.loss)) <= 1e-9 * abs(float(large_report.loss))
    for clique in [("a", "b", "c"), ("d", "e")]:
        np.testing.assert_allclose(np.asarray(small.marginal(clique)), np.asarray(large.marginal(clique)),
                                   rtol=1e-8, atol=1e-8)


def test_each_size_class_compiles_its_own_program_once(monkeypatch):
    domain, ms = _measurements(2)
    driver._chunk.clear_cache()
    pj.estimate(domain, ms, iters=20)
    assert (driver._chunk.small._cache_size(), driver._chunk.large._cache_size()) == (1, 0)
    pj.estimate(domain, ms, iters=40)  # same structure: nothing new
    assert (driver._chunk.small._cache_size(), driver._chunk.large._cache_size()) == (1, 0)
    monkeypatch.setattr(compiler, "LOOP_EMITTERS_CELLS", 0)
    pj.estimate(domain, ms, iters=20)
    assert (driver._chunk.small._cache_size(), driver._chunk.large._cache_size()) == (1, 1)
    assert driver._chunk._cache_size() == 2
    driver._chunk.clear_cache()
    assert driver._chunk._cache_size() == 0


def test_the_block_size_picks_the_program_and_the_environment_at_the_call_does_not(monkeypatch):
    domain, ms = _measurements()
    problem = make_problem(domain, ms)
    args = (driver.MirrorDescent(), problem, None, None)
    assert driver._chunk.program(*args) is driver._chunk.small
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")  # read when the program was made
    assert driver._chunk.program(*args) is driver._chunk.small
    monkeypatch.setattr(compiler, "LOOP_EMITTERS_CELLS", problem.plan.largest_block - 1)
    assert driver._chunk.program(*args) is driver._chunk.large


def test_xla_receives_the_option_for_small_models_only(tmp_path):
    # XLA's own record of each program's options (its dump): run in a fresh interpreter, since the dump
    # folder is read when JAX starts its backends.
    code = f"""
import numpy as np, jax, pgmjax as pj
from pgmjax import compiler
rng = np.random.default_rng(0)
sizes = {{"a": 7, "b": 3, "c": 11}}
data = pj.Dataset(np.stack([rng.integers(0, s, 500) for s in sizes.values()], axis=1), pj.Domain(sizes))
ms = pj.noisy_marginals(data, [("a", "b"), ("b", "c")], stddev=3.0, key=jax.random.key(1))
pj.estimate(data.domain, ms, iters=20)
compiler.LOOP_EMITTERS_CELLS = 0
pj.estimate(data.domain, ms[:1], iters=20)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PGMJAX_FAST_COMPILE")}
    env["XLA_FLAGS"] = f"--xla_dump_to={tmp_path}"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    chunks = sorted(f for f in os.listdir(tmp_path) if f.endswith("jit__chunk.debug_options"))
    assert len(chunks) == 2, chunks
    loop = ["xla_cpu_use_fusion_emitters: false" in (tmp_path / f).read_text() for f in chunks]
    assert loop == [True, False]  # the small model's program first, then the "large" one


def test_many_marginals_of_one_clique_keep_the_fusion_emitters():
    # All two-way marginals of 7 binary attributes: one junction-tree clique reduced into 21 marginals
    # (NLTCS's shape: 120 of one clique), where the loop emitters' reductions are the slower ones.
    rng = np.random.default_rng(3)
    domain = pj.Domain({f"x{i}": 2 for i in range(7)})
    pairs = list(itertools.combinations(domain.attributes, 2))
    ms = [pj.Measurement(c, rng.uniform(0, 10, 4), stddev=1.0) for c in pairs]
    many = make_problem(domain, ms)
    assert len(many.plan.cliques) == 1
    assert not suits_loop_emitters(driver.MirrorDescent(), many, None, None)
    assert driver._chunk.program(driver.MirrorDescent(), many, None, None) is driver._chunk.large
    few = make_problem(domain, ms[:8] + [pj.Measurement(domain.attributes, rng.uniform(0, 1, 128), stddev=1.0)])
    assert len(few.plan.cliques) == 1 and suits_loop_emitters(few)  # 8 reductions of the one clique
    assert suits_loop_emitters(many.plan, many.plan.zeros())  # the model's own programs: no reductions


def test_a_size_class_fit_keeps_the_fusion_emitters():
    # The size-class passes read through gathers, which the loop emitters write element by element: a routed
    # problem and its plan get the fusion emitters at any size, where the same model's dense problem gets the
    # loop emitters (its blocks are small).
    from pgmjax.estimation import inputs
    from pgmjax.graph.program_choice import emitters_for
    from pgmjax.graph.routed_plan import make_routed_plan

    domain, ms = _measurements()
    cliques = [m.clique for m in ms]
    dense = make_problem(domain, ms)
    routed, _, _ = inputs.build_problem(domain, ms, cliques, "l2", None, np.float32, caller="test",
                                        plan=make_routed_plan(domain, cliques))
    assert suits_loop_emitters(dense) and not suits_loop_emitters(routed)
    assert emitters_for(dense) is compiler.Emitters.LOOP
    assert emitters_for(routed) is emitters_for(routed.plan, routed.plan.zeros()) is compiler.Emitters.FUSION
    assert driver._chunk.program(driver.MirrorDescent(), routed, None, None) is driver._chunk.vector
    assert driver._chunk.program(driver.MirrorDescent(), dense, None, None) is driver._chunk.small


def test_the_programs_own_emitters_hold_whatever_the_flags_name():
    # pgmjax.fast_compile() (the command line's) names the loop emitters for the whole process, a user may name the
    # fusion emitters: a program the predicate gives the loop or the fusion emitters keeps them by its own option,
    # which wins over the flags; the flags govern the default program. Nothing reads the flags to choose.
    f = compiler.BySize(lambda x: x * 2, lambda x: compiler.Emitters.FUSION if x.size > 4 else x.size > 2, {})
    wide, narrow, tiny = jnp.ones(8), jnp.ones(3), jnp.ones(2)
    assert f.program(wide) is f.vector and f.program(narrow) is f.small and f.program(tiny) is f.large
    assert float(f(wide)[0]) == 2.0
    if compiler.options.has_loop_emitters():
        assert f.options("cpu", compiler.Emitters.FUSION)["xla_cpu_use_fusion_emitters"] is True
        assert f.options("cpu", True)["xla_cpu_use_fusion_emitters"] is False
        assert "xla_cpu_use_fusion_emitters" not in f.options("cpu", False)