"""The compiler options of pgmjax's programs depend on the platform each call compiles for (pgmjax.compiler).

XLA:CPU's options (the YNNPACK switch, the fast max, the backend optimisation level, the loop emitters) reach
only programs compiled for the CPU; a GPU's program gets the caller's own options alone. The platform is
faked here by replacing ``compiler.backend`` (the tests run on the CPU) and ``jax.jit`` (recording the
options each program is made with, compiling nothing).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import settings
from pgmjax import compiler
from pgmjax.compiler import BySize, jit
from pgmjax.compiler.options import ENGINE_OPTIONS, LOOP_EMITTERS, compiler_options, engine_options, options_for


class _Recorded:
    """What the fake ``jax.jit`` returns: the function and the options it was given, callable."""

    def __init__(self, f, options):
        self.f, self.options = f, options

    def __call__(self, *args, **kwargs):
        return self.f(*args, **kwargs)

    def _cache_size(self):
        return 0

    def clear_cache(self):
        pass


@pytest.fixture
def made(monkeypatch):
    """The options of every program made from now on, in order."""
    seen = []

    def fake_jit(f, **kw):
        seen.append(kw["compiler_options"])
        return _Recorded(f, kw["compiler_options"])

    monkeypatch.setattr(jax, "jit", fake_jit)
    monkeypatch.setattr(settings, "PROCESS", dataclasses.replace(settings.PROCESS, xla_level_named=False))
    return seen


def _cpu_only(options: dict) -> list[str]:
    return [k for k in options if k.startswith("xla_cpu_") or k == "xla_backend_optimization_level"]


@pytest.mark.parametrize("platform", ["gpu", "tpu"])
def test_no_cpu_option_reaches_another_platform(platform):
    assert compiler_options(platform) == {} and engine_options(platform) == {}
    assert options_for(platform, engine=True, loop_emitters=True) == {}
    assert options_for(platform, engine=True, user={"xla_gpu_foo": 1}) == {"xla_gpu_foo": 1}


def test_the_cpu_gets_the_engine_options_and_the_loop_emitters():
    options = options_for("cpu", engine=True, loop_emitters=True)
    assert options == {**compiler_options("cpu"), **engine_options("cpu"), **LOOP_EMITTERS}
    assert "xla_cpu_enable_fast_min_max" in options
    assert options_for("cpu") == compiler_options()
    assert options_for("cpu", engine=True, user={"xla_cpu_enable_fast_min_max": False})["xla_cpu_enable_fast_min_max"] is False


def test_a_program_picks_its_options_by_the_platform_of_each_call(made, monkeypatch):
    f = jit(lambda x: x + 1, engine=True)
    assert len(made) == 1 and made[0] == {**compiler_options(), **ENGINE_OPTIONS}  # the CPU's, made at once
    monkeypatch.setattr(compiler, "backend", lambda: "gpu")
    assert f(1) == 2
    assert len(made) == 2 and made[1] == {} and not _cpu_only(made[1])
    assert f.program(1) is f.on("gpu") and f(2) == 3 and len(made) == 2  # made once per platform
    monkeypatch.setattr(compiler, "backend", lambda: "cpu")
    assert f.program(1) is f.cpu and _cpu_only(f.program(1).options)


def test_user_options_reach_every_platform(made, monkeypatch):
    f = jit(lambda x: x, engine=True, compiler_options={"xla_dump_to": "/tmp/x"})
    monkeypatch.setattr(compiler, "backend", lambda: "gpu")
    f(0)
    assert made[-1] == {"xla_dump_to": "/tmp/x"}
    assert made[0]["xla_dump_to"] == "/tmp/x" and made[0]["xla_cpu_enable_fast_min_max"] is True


def test_by_size_chooses_emitters_only_on_the_cpu(made, monkeypatch):
    f = BySize(lambda x: x * 2, lambda x: np.size(x) <= 4, {}, engine=True)
    assert f.program(np.ones(3)) is f.small and f.program(np.ones(9)) is f.large
    assert LOOP_EMITTERS.items() <= f.small.options.items()
    assert "xla_cpu_use_fusion_emitters" not in f.large.options
    monkeypatch.setattr(compiler, "backend", lambda: "gpu")
    small, large = f.program(np.ones(3)), f.program(np.ones(9))
    assert small is large  # one program on a GPU: no emitters to choose, no second compilation
    assert small.options == {} and f.options("gpu") == {}
    f.clear_cache()


def test_the_environment_chooses_no_program_when_made_or_at_the_call(made, monkeypatch):
    # pgmjax.fast_compile() and the command line name the emitters in XLA_FLAGS; the program a call runs is the
    # one its arguments pick (its own emitters win over the flag), whatever XLA_FLAGS say when it is made or called
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    f = BySize(lambda x: x * 2, lambda x: x.size > 2, {}, engine=True)
    assert f.program(np.ones(3)) is f.small and f.program(np.ones(2)) is f.large
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    assert f.program(np.ones(3)) is f.small and f.program(np.ones(2)) is f.large
    g = BySize(lambda x: x * 2, lambda x: x.size > 2, {}, engine=True)
    assert g.program(np.ones(3)) is g.small and g._cpu_options == f._cpu_options


def test_every_program_is_counted_and_released_without_a_list():
    """A program made anywhere (here, in a test) is registered with the compiler: counted while it holds
    compiled code, freed by ``release_compiled``, forgotten when nobody holds it."""
    pj.release_compiled()
    f = jit(lambda x: x + 1)
    f(jnp.ones(3))
    assert compiler.compiled_count() >= f._cache_size() == 1
    assert pj.release_compiled() and f._cache_size() == 0 and compiler.compiled_count() == 0
    before = len(compiler._LIVE)
    del f
    import gc

    gc.collect()
    assert len(compiler._LIVE) == before - 1


def test_the_platform_follows_jax_default_device():
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        assert compiler.backend() == "cpu"
    assert compiler.backend() == jax.default_backend()


def test_engine_functions_run_and_count_their_programs_through_the_platform():
    # The real thing on this machine's platform: a Program behaves like jax.jit's function.
    f = jit(static_argnames=("n",))(lambda x, n: x * n)
    assert float(f(jnp.float32(2.0), n=3)) == 6.0
    assert f._cache_size() == 1
    g = jit(lambda a: a @ a)
    assert "HIGHEST" in g.lower(jnp.ones((2, 2))).as_text()
    f.clear_cache()
    assert f._cache_size() == 0


def test_a_jaxlib_without_the_emitter_switch_gets_neither_the_option_nor_the_flag(monkeypatch):
    """jaxlib 0.11's XLA has no ``xla_cpu_use_fusion_emitters``: an unknown flag in XLA_FLAGS aborts the process
    at JAX's start (seen on an H200 with jax 0.11.2, where ``pgmjax info`` died), so neither the per-program
    option nor :func:`pgmjax.programs.fast_compile`'s flag is used there."""
    from pgmjax import compiler, programs

    monkeypatch.setattr(compiler.options, "_jaxlib_version", lambda: (0, 11, 2))
    monkeypatch.setenv("XLA_FLAGS", "")
    assert not compiler.options.has_loop_emitters()
    assert "xla_cpu_use_fusion_emitters" not in compiler.options.options_for("cpu", engine=True, loop_emitters=True)
    assert programs.fast_compile(strict=False) is False
    assert "xla_cpu_use_fusion_emitters" not in __import__("os").environ["XLA_FLAGS"]
    monkeypatch.setattr(compiler.options, "_jaxlib_version", lambda: (0, 10, 2))
    assert compiler.options.options_for("cpu", loop_emitters=True)["xla_cpu_use_fusion_emitters"] is False


def test_the_oracle_loops_unroll_by_the_platform_they_compile_for(monkeypatch):
    """Several levels per loop trip on a GPU (launch-bound trips), one on the CPU (a bigger program only)."""
    assert compiler.scan_unroll("cpu") == 1 and compiler.scan_unroll("gpu") > 1 and compiler.scan_unroll("tpu") == 1
    monkeypatch.setattr(compiler, "backend", lambda: "gpu")
    assert compiler.scan_unroll() == compiler.SCAN_UNROLL["gpu"]
    monkeypatch.setattr(compiler, "backend", lambda: "cpu")
    assert compiler.scan_unroll() == 1
