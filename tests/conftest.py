"""Shared test helpers."""

import ast
import contextlib
import os

# The suite compiles hundreds of small XLA programs and runs each for milliseconds, so compilation is most
# of its time. XLA's backend optimisation level 0 halves it (one fit's programs on XLA:CPU: 3.45 s ->
# 1.7 s); results are the same IEEE arithmetic, only less optimised code. Set the flag yourself in
# XLA_FLAGS to choose another level. No preallocation: several test workers may share one GPU.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
# And XLA:CPU's loop emitters for every program, as the command line compiles (pgmjax.programs.fast_compile, which
# leaves a jaxlib without the switch alone): the suite's compiles about a third shorter again. The engine's
# choice of emitters by block size is tested in child processes of its own (tests/engine/test_emitters_by_size.py,
# test_fast_compile.py). PGMJAX_FAST_COMPILE=0 runs the suite with the library's defaults.
os.environ.setdefault("PGMJAX_FAST_COMPILE", "1")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# One BLAS thread per test worker: xdist already runs one worker per core, and small dense solves are
# far slower when several multi-threaded BLAS pools share two cores.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import jax  # noqa: E402  (after the flags above)
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)  # float64 is opt-in per call (dtype=); float32 stays the default.

DATA_DIR = os.environ.get("PGMJAX_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


class CompileCounter:
    """Counts XLA compilations (JAX's backend-compile events) while active."""

    def __init__(self):
        self.count = 0
        self.names = []  # the compiled functions' names, e.g. "jit(_chunk)", in order
        self.active = False

    def __call__(self, event, duration, **kwargs):
        if self.active and event == "/jax/core/compile/backend_compile_duration":
            self.count += 1
            self.names.append(kwargs.get("fun_name"))


_COUNTER = CompileCounter()
jax.monitoring.register_event_duration_secs_listener(_COUNTER)


@contextlib.contextmanager
def count_compiles():
    """``with count_compiles() as c: ...``; then ``c.count`` is the number of XLA compilations."""
    _COUNTER.count = 0
    _COUNTER.names = []
    _COUNTER.active = True
    try:
        yield _COUNTER
    finally:
        _COUNTER.active = False


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def data_dir_or_skip(name: str) -> str:
    path = os.path.join(DATA_DIR, name)
    if not os.path.isdir(path):
        pytest.skip(f"benchmark data folder {path} is absent (set PGMJAX_DATA to the shared data folder)")
    return path


def dotted(node) -> str:
    """``a.b.c`` for an attribute chain ``a.b.c`` (a call's function), ``""`` if it does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def chain_dataset(sizes: dict, n: int = 2000, seed: int = 7, keep: float = 0.7):
    """``n`` records over ``sizes`` (attribute -> size, in order), each attribute copying the previous one's
    value (modulo its size) with probability ``keep``, else uniform: a chain of dependent columns."""
    import pgmjax as pj

    rng = np.random.default_rng(seed)
    cols = []
    for i, size in enumerate(sizes.values()):
        fresh = rng.integers(0, size, n)
        cols.append(fresh if i == 0 else np.where(rng.random(n) < keep, cols[-1] % size, fresh))
    return pj.Dataset(np.stack(cols, axis=1), pj.Domain(sizes))


def run_script(script: str, tmp_path) -> dict:
    """Run ``script`` (Python source that writes a JSON object to the path given as its first argument) in a
    fresh interpreter, without the suite's ``XLA_FLAGS`` (a script forcing host devices sets its own, before JAX
    starts), and return what it wrote; its standard error's tail if it fails."""
    import json
    import subprocess
    import sys

    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PGMJAX_COMPILATION_CACHE")}
    proc = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def interrupted_at_fit(monkeypatch, module, fit: int) -> None:
    """``module.estimate`` replaced by one that raises KeyboardInterrupt (Ctrl-C) at its ``fit``-th call; restore it
    with ``monkeypatch.undo()`` or by setting it back."""
    real, calls = module.estimate, []

    def estimate(*a, **k):
        calls.append(1)
        if len(calls) == fit:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(module, "estimate", estimate)
