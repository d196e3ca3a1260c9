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
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# One BLAS thread per test worker: xdist already runs one worker per core, and small dense solves are
# far slower when several multi-threaded BLAS pools share two cores.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import jax  # noqa: E402  (after the flags above)
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)  # float64 is opt-in per call (dtype=); float32 stays the default.

# JAX's persistent compilation cache, shared by the run's xdist workers: many tests compile programs that
# another test (or the other worker) compiled before: the same structure fitted again after pgmjax released its
# programs, a fresh jit of the same function, the same fit in two files. A cache hit loads the executable
# (milliseconds) instead of compiling it again. The folder is new for every run (under pytest's base temporary
# folder, 0700, and removed with it), so nothing from an earlier run or another user is ever loaded. Compile
# counts (count_compiles) are unchanged: JAX reports its backend-compile event for every program it has to
# produce, read from the cache or compiled. Off with PGMJAX_TEST_XLA_CACHE=0, and left alone where the user
# already turned a cache on ($PGMJAX_COMPILATION_CACHE, $JAX_COMPILATION_CACHE_DIR). Child processes (the
# subprocess tests) run uncached, as before.
XLA_CACHE_OPTION = "pgmjax_test_xla_cache"


def _xla_cache_wanted() -> bool:
    if os.environ.get("PGMJAX_TEST_XLA_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return not (os.environ.get("PGMJAX_COMPILATION_CACHE") or os.environ.get("JAX_COMPILATION_CACHE_DIR")
                or jax.config.jax_compilation_cache_dir)


def _xla_cache_folder(config) -> str:
    """The run's cache folder: the controller's (or a lone process's) base temporary folder's ``xla-cache``."""
    folder = config._tmp_path_factory.getbasetemp() / "xla-cache"
    folder.mkdir(mode=0o700, exist_ok=True)
    return str(folder)


def _use_xla_cache(folder: str) -> None:
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # every program: most take 0.05-0.5 s
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # no size floor
    jax.config.update("jax_enable_compilation_cache", True)
    _atomic_cache_writes()


def _atomic_cache_writes() -> None:
    """JAX writes an entry in place, so a worker reading it while another writes it could load half a file (JAX
    then warns and compiles). Write to a private temporary name and rename it into place instead."""
    try:
        from jax._src import lru_cache
    except ImportError:  # another JAX: its own writes, a rare warning at worst
        return
    if not hasattr(lru_cache, "LRUCache") or not hasattr(lru_cache, "_CACHE_SUFFIX"):
        return
    plain_put = lru_cache.LRUCache.put

    def put(self, key, value):
        if getattr(self, "eviction_enabled", True) or not key:
            return plain_put(self, key, value)
        path = self.path / f"{key}{lru_cache._CACHE_SUFFIX}"
        if path.exists():
            return
        partial = self.path / f".{key}.{os.getpid()}.partial"
        partial.write_bytes(value)
        os.replace(partial, path)

    lru_cache.LRUCache.put = put


@pytest.hookimpl(trylast=True)  # after pytest's tmpdir plugin made config._tmp_path_factory
def pytest_configure(config):
    if not _xla_cache_wanted():
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: the controller's folder, shared by all workers
        folder = workerinput.get(XLA_CACHE_OPTION)
    else:
        folder = _xla_cache_folder(config)
        config.stash[_XLA_CACHE_KEY] = folder
    if folder:
        _use_xla_cache(folder)


_XLA_CACHE_KEY = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)  # an xdist hook: absent without xdist
def pytest_configure_node(node):
    """xdist's controller: hand its cache folder to each worker it starts."""
    folder = node.config.stash.get(_XLA_CACHE_KEY, None)
    if folder:
        node.workerinput[XLA_CACHE_OPTION] = folder

DATA_DIR = os.environ.get("PGMJAX_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


class CompileCounter:
    """Counts XLA compilations (JAX's backend-compile events) while active.

    A program JAX has to produce counts whether XLA compiles it or the suite's persistent cache (below) hands it
    back: JAX reports the event around both. ``cache_hits`` counts the latter among them."""

    def __init__(self):
        self.count = 0
        self.names = []  # the compiled functions' names, e.g. "jit(_chunk)", in order
        self.cache_hits = 0
        self.active = False

    def __call__(self, event, duration, **kwargs):
        if self.active and event == "/jax/core/compile/backend_compile_duration":
            self.count += 1
            self.names.append(kwargs.get("fun_name"))

    def event(self, event, **kwargs):
        if self.active and event == "/jax/compilation_cache/cache_hits":
            self.cache_hits += 1


_COUNTER = CompileCounter()
jax.monitoring.register_event_duration_secs_listener(_COUNTER)
jax.monitoring.register_event_listener(_COUNTER.event)


@contextlib.contextmanager
def count_compiles():
    """``with count_compiles() as c: ...``; then ``c.count`` is the number of XLA compilations."""
    _COUNTER.count = 0
    _COUNTER.names = []
    _COUNTER.cache_hits = 0
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
