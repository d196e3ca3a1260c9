"""XLA:CPU miscompilation guard (pgmjax.compiler) and the float32 Adult-structure regression it fixes."""

import os
import subprocess
import sys
import textwrap

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import settings
from pgmjax.compiler import jit, to_device
from pgmjax.compiler.options import ENGINE_OPTIONS, compiler_options, engine_options
from pgmjax.graph import oracle

# The smallest estimation problem found that reproduced the float32 failure on the Adult benchmark
# cliques: a greedy shrink of the 15 cliques and of the domain sizes that kept the oracle's
# float32 marginals of the uniform model wrong (NaN) under jaxlib 0.10.2's default XLA:CPU options.
SMALL_DOMAIN = {
    "age": 2, "capital-gain": 50, "education-num": 2, "hours-per-week": 2, "income>50K": 2,
    "marital-status": 2, "native-country": 10, "occupation": 2, "race": 2, "relationship": 2,
    "sex": 2, "workclass": 9,
}
SMALL_CLIQUES = [
    ("occupation", "sex", "native-country"), ("age", "education-num", "sex"),
    ("race", "native-country", "income>50K"), ("occupation", "capital-gain", "income>50K"),
    ("marital-status", "hours-per-week", "income>50K"), ("workclass", "race", "capital-gain"),
    ("marital-status", "relationship", "capital-gain"), ("education-num", "relationship", "race"),
    ("workclass", "sex", "native-country"),
]


def test_multiply_reduce_pattern_is_exact():
    # The pattern XLA:CPU (jaxlib 0.10.2, YNNPACK fusion) gets wrong: a broadcast multiply reduced
    # over an inner axis, with a leading unit axis.
    rng = np.random.default_rng(0)
    b = rng.random((1, 9, 2, 3, 5, 10, 2), dtype=np.float32)
    g = rng.random((1, 1, 2, 3, 5, 10, 2), dtype=np.float32)
    out = jit(lambda b, g: jnp.sum(b * g, axis=5))(b, g)
    ref = np.sum(b.astype(np.float64) * g.astype(np.float64), axis=5)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5)


def test_jit_keeps_user_options_and_merges_ours():
    f = jit(lambda x: x * 2, compiler_options={"xla_backend_optimization_level": 1})
    assert float(f(2.0)) == 4.0
    text = jit(lambda x: x + 1).lower(1.0).compile().as_text()
    assert "ynn_fusion" not in text or not compiler_options()
    g = jit(static_argnames=("n",))(lambda x, n: x * n)
    assert float(g(2.0, n=3)) == 6.0


def test_engine_programs_add_fast_max_and_keep_user_options(monkeypatch):
    seen = []
    monkeypatch.setattr(jax, "jit", lambda f, **kw: seen.append(kw["compiler_options"]) or f)
    monkeypatch.setattr(settings, "PROCESS", dataclasses.replace(settings.PROCESS, xla_level_named=False))
    jit(lambda x: x, engine=True)
    jit(lambda x: x)
    jit(engine=True, compiler_options={"xla_cpu_enable_fast_min_max": False})(lambda x: x)
    assert seen[0] == {**compiler_options(), **ENGINE_OPTIONS}
    assert seen[1] == compiler_options()
    assert seen[2]["xla_cpu_enable_fast_min_max"] is False


def test_a_level_in_xla_flags_wins_over_the_engine_level(monkeypatch):
    # The suite (tests/conftest.py) and users set the level in XLA_FLAGS; a per-program option would
    # silently override it for the engine's programs. The flags are read once, at import: changing them later
    # changes no program's options.
    assert settings.PROCESS.xla_level_named is ("xla_backend_optimization_level" in os.environ.get("XLA_FLAGS", ""))
    seen = []
    monkeypatch.setattr(jax, "jit", lambda f, **kw: seen.append(kw["compiler_options"]) or f)
    monkeypatch.setattr(settings, "PROCESS", dataclasses.replace(settings.PROCESS, xla_level_named=True))
    monkeypatch.setenv("XLA_FLAGS", "")  # read at import only: no effect now
    jit(lambda x: x, engine=True)
    assert "xla_backend_optimization_level" not in seen[0]
    assert seen[0]["xla_cpu_enable_fast_min_max"] is True
    monkeypatch.setattr(settings, "PROCESS", dataclasses.replace(settings.PROCESS, xla_level_named=False))
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    jit(lambda x: x, engine=True)
    assert seen[1]["xla_backend_optimization_level"] == 1


def test_a_program_run_once_per_model_asks_for_its_own_level(monkeypatch):
    # A dense model's marginals run once per model but compile at every new structure: level 0 there, while a
    # level in XLA_FLAGS still wins for every program.
    from pgmjax.compiler.options import ONCE_PER_MODEL_LEVEL
    from pgmjax.graph import marginal_oracle
    from pgmjax.model import answer_programs

    seen = []
    monkeypatch.setattr(jax, "jit", lambda f, **kw: seen.append(kw["compiler_options"]) or f)
    monkeypatch.setattr(settings, "PROCESS", dataclasses.replace(settings.PROCESS, xla_level_named=False))
    jit(lambda x: x, engine=True, level=0)
    jit(lambda x: x, engine=True, emitters=lambda x: True, level=0)
    assert seen[0]["xla_backend_optimization_level"] == 0 and seen[0]["xla_cpu_enable_fast_min_max"] is True
    assert all(o["xla_backend_optimization_level"] == 0 for o in seen[1:])  # every emitter's program
    monkeypatch.setattr(settings, "PROCESS", dataclasses.replace(settings.PROCESS, xla_level_named=True))
    jit(lambda x: x, engine=True, level=0)
    assert "xla_backend_optimization_level" not in seen[-1]
    with pytest.raises(ValueError, match="engine=True"):
        jit(lambda x: x, level=0)
    with pytest.raises(ValueError, match="level must be"):
        engine_options(level=7)
    assert ONCE_PER_MODEL_LEVEL == 0
    dense, size_class = (answer_programs.PROGRAMS[o] for o in (marginal_oracle.EXACT, marginal_oracle.SIZE_CLASS))
    assert [p.level for p in dense] == [ONCE_PER_MODEL_LEVEL] * 2
    assert [p.level for p in size_class] == [None] * 2  # shared by a class and run often: the engine's level 1


@pytest.mark.parametrize("where", ["root", "leaf"])
def test_a_nan_potential_reaches_log_z_through_the_fast_max(where):
    # The engine's programs compile max without NaN propagation; a NaN potential must still make log Z
    # (and so the fit's acceptance test) NaN, through the sum of exponentials.
    dom = pj.Domain({"a": 7, "b": 40, "c": 3, "d": 50})
    plan = oracle.make_plan(dom, [("a", "b"), ("b", "c"), ("c", "d")])
    clique = plan.cliques[plan.tree.root] if where == "root" else next(
        c for j, c in enumerate(plan.cliques) if plan.tree.parent[j] >= 0)
    table = np.zeros(dom.shape_of(clique), np.float32)
    table.flat[table.size // 2] = np.nan
    theta = plan.from_tables({clique: table})
    from pgmjax.model import answer_programs

    assert np.isnan(float(answer_programs.log_partition(plan, theta)))
    assert np.isnan(float(answer_programs.marginals_and_log_partition(plan, theta, to_device(1.0, np.float32))[1]))


def _small_measurements(rng, dom, sigma):
    # Marginals of one table of correlated records (a chain of noisy copies), plus noise.
    n = 3000
    cols, prev = {}, rng.integers(0, 2, n)
    for a in dom:
        cols[a] = np.where(rng.random(n) < 0.7, prev % dom[a], rng.integers(0, dom[a], n))
        prev = cols[a]
    data = pj.Dataset(np.stack([cols[a] for a in dom], axis=1), dom)
    return [pj.Measurement(c, data.marginal(c) + rng.normal(0, sigma, dom.shape_of(c)), stddev=sigma) for c in SMALL_CLIQUES]


def test_uniform_marginals_of_adult_structure_are_exact_in_float32():
    dom = pj.Domain(SMALL_DOMAIN)
    plan = oracle.make_plan(dom, SMALL_CLIQUES)
    mu, log_z = jit(oracle.marginals)(plan, plan.zeros(jnp.float32), 1.0)
    assert abs(float(log_z) - np.log(float(np.prod(dom.shape)))) < 1e-4
    for j, c in enumerate(plan.cliques):
        table = np.asarray(plan.table(mu, j), np.float64)
        np.testing.assert_allclose(table, np.full(table.shape, 1.0 / table.size), rtol=1e-4, err_msg=str(c))


# Iterations and float32-vs-float64 tolerances (relative loss, L1/N of the measured marginals). The
# methods' trajectories differ by rounding (a line search takes other steps), so the agreement is that
# of two runs of one method at the same iteration, tight where the method is converged there.
ITERS = {"mirror_descent": 500, "dual_averaging": 300, "lbfgs": 200}
TOL = {"mirror_descent": (1e-2, 1e-2), "dual_averaging": (1e-4, 1e-4), "lbfgs": (5e-2, 1e-1)}


@pytest.mark.parametrize("method", ["mirror_descent", pytest.param("dual_averaging", marks=pytest.mark.slow),
                                    pytest.param("lbfgs", marks=pytest.mark.slow)])
def test_float32_fit_of_adult_structure_is_finite_and_matches_float64(method):
    dom = pj.Domain(SMALL_DOMAIN)
    ms = _small_measurements(np.random.default_rng(1), dom, 10.0)
    m32, m32_report = pj.estimate(dom, ms, method=method, iters=ITERS[method], report=True)
    m64, m64_report = pj.estimate(dom, ms, method=method, iters=ITERS[method], dtype=jnp.float64, report=True)
    assert np.isfinite(m32_report.loss)
    for c in SMALL_CLIQUES:
        a, b = np.asarray(m32.marginal(c), np.float64), np.asarray(m64.marginal(c))
        assert np.all(np.isfinite(a))
        assert np.abs(a - b).sum() / m64.total < TOL[method][1], c
    assert abs(m32_report.loss - m64_report.loss) <= TOL[method][0] * abs(m64_report.loss)


def test_lbfgs_float32_on_adult_structure_does_not_crash_the_process():
    # Run in a subprocess: under the miscompilation the process died with a segmentation fault.
    code = textwrap.dedent(
        f"""
        import numpy as np, pgmjax as pj
        dom = pj.Domain({SMALL_DOMAIN!r})
        rng = np.random.default_rng(0)
        ms = [pj.Measurement(c, rng.integers(0, 50, dom.shape_of(c)) + rng.normal(0, 1, dom.shape_of(c)), stddev=1.0)
              for c in {SMALL_CLIQUES!r}]
        m, m_report = pj.estimate(dom, ms, method="lbfgs", iters=100, report=True)
        assert np.isfinite(m_report.loss), m_report.loss
        print("LOSS", m_report.loss)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert "LOSS" in proc.stdout



def test_engine_programs_use_full_precision_matrix_products():
    """pgmjax's jit traces matrix products at HIGHEST precision (no TensorFloat-32 on GPUs), static arguments
    still work, and jax.jit's own default is left alone for other code."""
    import jax
    import jax.numpy as jnp

    from pgmjax.compiler import jit

    @jit(static_argnames=("k",))
    def f(a, b, k):
        return (a @ b) * k

    a = jnp.ones((3, 4), jnp.float32)
    b = jnp.ones((4, 2), jnp.float32)
    assert float(f(a, b, k=2)[0, 0]) == 8.0
    ours = f.lower(a, b, k=2).as_text()
    theirs = jax.jit(lambda a, b: a @ b).lower(a, b).as_text()
    assert "HIGHEST" in ours
    assert "HIGHEST" not in theirs
