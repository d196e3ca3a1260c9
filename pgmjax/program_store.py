"""The engine's compiled programs kept on disk by model structure, so a new process skips tracing them.

JAX's persistent compilation cache (:func:`pgmjax.programs.enable_compilation_cache`) saves XLA's compile,
but a new process still traces the engine's program and lowers it to find its cache key: on the 2-core
CPU 0.2-0.9 s of a fit's first call for the engine benchmark's models of up to 50 cliques (a generated
50-attribute problem's first ``estimate(50)`` took 2.18 s from JAX's cache alone and 1.30 s from this store,
0.72 s of it the 50 iterations; ``bench/results/compilation_cache_cpu.md``). This store keys
the engine's own programs (a fit's chunk, the oracle's passes: the functions compiled by
:class:`pgmjax.compiler.BySize`) by what determines them, all known before tracing:

* the function and the compiler options of the program chosen;
* the arguments' structure, static data included (domain, junction tree, the oracle's plan, the
  measurements' layout, the estimator's settings), in a canonical form that is the same in every
  process, and the shape, dtype and weak type of every array;
* the pgmjax source (a digest of every module: an edited or upgraded package never loads an old
  program), the jax and jaxlib versions, the devices, ``XLA_FLAGS`` and JAX's tracing configuration.

A process that finds the key loads the compiled executable (JAX's executable serialization) and calls it
directly. Anything the canonical form does not know (any type or function defined outside Python, NumPy,
JAX and pgmjax, such as a custom loss: its code is not in the key), an argument under a JAX transformation,
a program JAX cannot serialize or a file that does not load falls back to the ordinary ``jax.jit`` path:
the store can only skip work, never change a result.

It is off by default; :func:`pgmjax.programs.enable_compilation_cache` turns it on (in a ``programs``
folder inside the cache folder, at most :data:`MAX_BYTES`).

Example (a script run twice: the second run's fit loads its program)::

    import pgmjax as pj
    pj.programs.enable_compilation_cache()           # ~/.cache/pgmjax/xla, programs/ inside it
    model = pj.estimate(domain, measurements)         # first run: compiled and written; later runs: loaded
    print(pj.program_store.stats)                     # {'loaded': 1, 'written': 0, ...} in a later run
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import jax
import numpy as np

#: The folder programs are kept in (None: the store is off).
_folder: Path | None = None

#: The most bytes the folder holds: after a write beyond it, the programs used longest ago are removed. An
#: adaptive mechanism fits a new structure every round (a few MB each for models of millions of cells).
MAX_BYTES = 2**30

#: What the store did in this process: programs ``loaded`` from disk, ``written`` to it, calls that fell
#: back to ``jax.jit`` (``bypassed``) and files that failed to load (``failed``).
stats = {"loaded": 0, "written": 0, "bypassed": 0, "failed": 0}


class Uncacheable(Exception):
    """An argument the canonical form cannot describe the same way in every process."""


def enable(folder: str | os.PathLike) -> Path:
    """Keep the engine's programs in ``folder`` (created if needed). Returns the folder."""
    global _folder
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    _folder = path
    return path


def disable() -> None:
    """Stop loading and writing programs (those already loaded stay in use)."""
    global _folder
    _folder = None


def folder() -> Path | None:
    """The store's folder, or None when it is off."""
    return _folder


#: Modules whose types the canonical form describes: their code is fixed by the versions and the source digest
#: in every key. A type of any other module (a user's loss, a user's pytree node) may change its behaviour
#: without changing its data, so a call that carries one is never stored.
_KNOWN_MODULES = ("builtins", "numpy", "pgmjax", "jax", "jaxlib")


def _known(t: type) -> bool:
    return t.__module__.split(".")[0] in _KNOWN_MODULES


def canonical(x):
    """A description of ``x`` made of tuples, strings and numbers that is equal in two processes exactly when
    ``x`` describes the same program input (a set's order, a hash seed or an address never enter it).

    Raises:
        Uncacheable: for an object it does not know (an arbitrary object's repr may hide its contents or
            hold its address) and for any type defined outside Python, NumPy, JAX and pgmjax (its code is
            not in the key).

    Example:
        >>> canonical(frozenset({("b", 2), ("a", 1)})) == canonical(frozenset({("a", 1), ("b", 2)}))
        True
    """
    if isinstance(x, type):
        if not _known(x):
            raise Uncacheable(f"the type {x.__module__}.{x.__qualname__} is defined outside pgmjax")
        return ("type", x.__module__, x.__qualname__)
    if not _known(type(x)):
        raise Uncacheable(f"a {type(x).__module__}.{type(x).__qualname__} is defined outside pgmjax")
    if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
        return (type(x).__name__, repr(x))
    if isinstance(x, enum.Enum):
        return ("enum", type(x).__module__, type(x).__qualname__, x.name)
    if isinstance(x, np.generic):
        return ("np", str(x.dtype), repr(x.item()))
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.shape, hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest())
    if isinstance(x, np.dtype):
        return ("dtype", str(x))
    if isinstance(x, jax.tree_util.PyTreeDef):
        return ("treedef", canonical(x.node_data()), tuple(canonical(c) for c in x.children()))
    if isinstance(x, (set, frozenset)):
        return ("set", tuple(sorted((canonical(i) for i in x), key=repr)))
    kind = (type(x).__module__, type(x).__qualname__)
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a NamedTuple
        return ("namedtuple", kind, tuple(canonical(i) for i in x))
    if isinstance(x, (tuple, list)):
        return ("seq", kind, tuple(canonical(i) for i in x))
    if isinstance(x, Mapping):
        # Insertion order kept: a Domain's attribute order is part of the model.
        return ("map", kind, tuple((canonical(k), canonical(v)) for k, v in x.items()))
    if dataclasses.is_dataclass(x):
        return ("dataclass", kind, tuple((f.name, canonical(getattr(x, f.name))) for f in dataclasses.fields(x)))
    slots = [s for c in type(x).__mro__ for s in getattr(c, "__slots__", ()) if s != "__weakref__"]
    if slots and not hasattr(x, "__dict__"):
        # A slotted value object (JAX's axis environment in its tracing configuration).
        return ("slots", kind, tuple((s, canonical(getattr(x, s, None))) for s in slots if not s.startswith("_hash")))
    raise Uncacheable(f"no canonical form for a {type(x).__module__}.{type(x).__qualname__}")


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """A digest of every pgmjax module (kernels included): a program is never loaded by other code."""
    from . import kernels  # installed beside the package (its own folder in an editable install)

    h = hashlib.sha256()
    for root in (Path(__file__).resolve().parent, Path(kernels.__file__).resolve().parent):
        for path in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
            h.update(f"{root.name}/{path.relative_to(root)}".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _trace_context_function():
    try:
        from jax._src.config import trace_context as context
    except ImportError:  # a JAX without it: its global configuration instead
        return lambda: tuple(sorted((k, repr(v)) for k, v in getattr(jax.config, "values", {}).items()))
    return context


def trace_context():
    """JAX's tracing configuration (x64, matmul precision, ...): it decides a program as much as its arguments.

    JAX's own jit cache keys on it; a JAX without that function gives its global configuration instead.
    """
    return _trace_context_function()()


def _environment():
    device = jax.devices()[0]
    return (
        jax.__version__,
        __import__("jaxlib").__version__,
        sys.version_info[:2],
        device.platform,
        device.device_kind,
        jax.device_count(),
        os.environ.get("XLA_FLAGS", ""),
        trace_context(),
        source_digest(),
    )


def key(name: str, options: dict, static: dict, dynamic) -> str | None:
    """The store's file name for a call of the program ``name`` compiled with ``options``, with static arguments
    ``static`` (``{name: value}``) and dynamic ones ``dynamic`` (a pytree of arrays and numbers), or None
    when it cannot be stored (a traced argument, or a value with no :func:`canonical` form).

    Example:
        >>> import numpy as np
        >>> a = key("f", {}, {"method": "md"}, (np.zeros(3, np.float32),))
        >>> a == key("f", {}, {"method": "md"}, (np.ones(3, np.float32),))  # other numbers, same program
        True
        >>> a == key("f", {}, {"method": "md"}, (np.zeros(4, np.float32),))  # another shape
        False
    """
    leaves, tree = jax.tree_util.tree_flatten(dynamic)
    avals = []
    for leaf in leaves:
        if isinstance(leaf, jax.core.Tracer):
            return None
        if isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
            avals.append((str(leaf.dtype), tuple(leaf.shape), bool(getattr(leaf, "weak_type", False))))
        elif isinstance(leaf, (bool, int, float, complex)):
            avals.append((type(leaf).__name__, "weak"))
        else:
            return None
    try:
        text = repr((name, canonical(sorted(options.items())), canonical(sorted(static.items())), canonical(tree),
                     tuple(avals), canonical(_environment())))
    except Uncacheable:
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def load(name: str, dynamic_tree) -> object | None:
    """The compiled program stored under ``name`` (a :func:`key`) for arguments of structure ``dynamic_tree``,
    or None (absent, or a file that does not load: it is then removed)."""
    if _folder is None:
        return None
    path = _folder / name
    if not path.exists():
        return None
    try:
        from jax.experimental import serialize_executable

        with open(path, "rb") as f:
            payload, out_tree = pickle.load(f)
        compiled = serialize_executable.deserialize_and_load(payload, dynamic_tree, out_tree)
    except Exception:  # a truncated, stale or foreign file: compile instead
        stats["failed"] += 1
        path.unlink(missing_ok=True)
        return None
    stats["loaded"] += 1
    try:
        os.utime(path)  # its modification time is its last use (see _evict)
    except OSError:
        pass
    return compiled


def save(name: str, compiled) -> bool:
    """Write ``compiled`` under ``name`` (atomically: a reader never sees half a file). Returns whether it was
    written (some programs cannot be serialized; they are simply not stored)."""
    if _folder is None:
        return False
    try:
        from jax.experimental import serialize_executable

        payload, _, out_tree = serialize_executable.serialize(compiled)
        data = pickle.dumps((payload, out_tree))
    except Exception:
        return False
    fd, tmp = tempfile.mkstemp(dir=_folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, _folder / name)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return False
    stats["written"] += 1
    _evict(_folder, MAX_BYTES)
    return True


def _evict(folder: Path, limit: int) -> None:
    """Remove the programs used longest ago until the folder holds at most ``limit`` bytes."""
    entries = []
    for p in folder.iterdir():
        try:
            st = p.stat()
        except OSError:  # removed by another process meanwhile
            continue
        if p.is_file() and not p.name.startswith(".tmp-"):
            entries.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        p.unlink(missing_ok=True)
        total -= size
