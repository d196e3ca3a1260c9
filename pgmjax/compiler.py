"""How pgmjax compiles its programs: ``jit`` is ``jax.jit`` with the compiler options the engine needs.

XLA:CPU in jaxlib 0.10.2 hands some fused multiply-then-reduce programs to its YNNPACK library path,
which returns wrong numbers (garbage or NaN, varying from run to run) for some shapes; upstream JAX
reports the same class of bug for a matrix-vector product followed by a reduction (jax issue 39103:
0.10.1 correct, 0.10.2 wrong). In the engine it hits the downward pass of the marginal oracle: with
the Adult benchmark cliques the float32 marginals of the *uniform* model held NaN, so every fit failed
at its first chunk. The smallest trigger found is ``sum(b * g, axis=-2)`` with ``b`` of shape
``(1, 9, 2, 3, 5, 10, 2)`` and ``g`` broadcast along axis 1 (see ``tests/test_compiler.py``).

Every pgmjax program is compiled with the YNNPACK fusions turned off where the installed jaxlib has
them. Only pgmjax's own programs are affected (a per-program compiler option, not ``XLA_FLAGS``); the
same arithmetic then runs through XLA's own emitters. GPU compilers ignore ``xla_cpu_*`` options.

The engine's own programs (a fit's loop, the marginal oracle) ask for more with ``jit(..., engine=True)``:
XLA:CPU's fast ``max``/``min`` lowering (``xla_cpu_enable_fast_min_max``), which does not propagate NaN
through a max. XLA's default lowering compares and selects element by element; the fast one is a vector
max, about 2.4 times faster (a row maximum of a 265,226-cell table: 70 us against 170 us), and every
log-sum-exp of the oracle starts with a max. A NaN cannot hide there: the max is only the shift of a
log-sum-exp, the NaN still reaches the sum of exponentials, hence log Z and the loss, whose finiteness a
fit checks at every trial. Other programs keep NaN-propagating max and min. The engine's programs are also
compiled at backend optimisation level 1 instead of 2 (``xla_backend_optimization_level``): a fit's program has
hundreds of small kernels, each its own LLVM module, and at level 1 XLA:CPU compiled them 8-38% faster
(Titanic 1.9 s to 1.5 s, Stroke 4.0 to 3.4, a generated 15-attribute problem 6.0 to 3.7) with the same
iteration times within the noise; ``exp``, ``log`` and sums round as at level 2. A level named in the
``XLA_FLAGS`` environment variable (``--xla_backend_optimization_level=N``) wins over that default: the
option is then left out, so the flag applies to the engine's programs as to every other.

The engine's programs choose XLA:CPU's emitters by the model they fit (``jit(..., loop_emitters=...)``,
:class:`BySize`): its loop emitters (``xla_cpu_use_fusion_emitters=false``) where the model's largest
potential block has at most :data:`LOOP_EMITTERS_CELLS` cells, XLA's default MLIR fusion emitters for
larger blocks and where the measurements reduce tables into many marginals
(:data:`LOOP_EMITTERS_MAX_REDUCTIONS`). The loop emitters generate a fit's few hundred kernels in about
half the time, and most fits wait mostly for that; their reductions over a large table run slower.
``XLA_FLAGS`` naming the emitters wins over this choice.

Every pgmjax program is also traced with full-precision matrix products (``jax.default_matmul_precision
("highest")``): on recent NVIDIA GPUs a float32 product would otherwise run in TensorFloat-32, about three
significant digits, which a sum of a million exponentials or a query's answer cannot afford. CPUs compute
float32 products in full either way.
"""

from __future__ import annotations

import functools
import inspect
import os

import jax
import jaxlib
import numpy as np

from . import program_store


def _jaxlib_version() -> tuple[int, ...]:
    parts = []
    for p in jaxlib.__version__.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


@functools.lru_cache(maxsize=1)
def compiler_options() -> dict[str, str]:
    """The XLA compiler options of every pgmjax program (empty where none is needed).

    Returns:
        ``{"xla_cpu_experimental_ynn_fusion_type": ""}`` (no YNNPACK fusions) on jaxlib 0.10.2 and
        later 0.10 releases, whose XLA:CPU miscompiles some reductions; ``{}`` otherwise.

    Example:
        >>> isinstance(compiler_options(), dict)
        True
    """
    if (0, 10, 2) <= _jaxlib_version() < (0, 11, 0):
        return {"xla_cpu_experimental_ynn_fusion_type": ""}
    return {}


#: The options :func:`jit` adds for ``engine=True`` (see the module docstring); GPU compilers ignore them.
ENGINE_OPTIONS = {"xla_cpu_enable_fast_min_max": True, "xla_backend_optimization_level": 1}


def engine_options() -> dict:
    """:data:`ENGINE_OPTIONS`, less the optimisation level when ``XLA_FLAGS`` names one (read at each ``jit``).

    A per-program compiler option overrides ``XLA_FLAGS``; a user (or a test suite) who sets
    ``--xla_backend_optimization_level`` there means it for every program, the engine's included.

    Example:
        >>> engine_options()["xla_cpu_enable_fast_min_max"]
        True
    """
    if "xla_backend_optimization_level" in os.environ.get("XLA_FLAGS", ""):
        return {k: v for k, v in ENGINE_OPTIONS.items() if k != "xla_backend_optimization_level"}
    return dict(ENGINE_OPTIONS)


def jit(fun=None, /, *, engine: bool = False, loop_emitters=None, **kwargs):
    """``jax.jit`` with :func:`compiler_options`; usable as ``@jit``, ``@jit(static_argnames=...)`` or ``jit(f)``.

    Args:
        fun: the function to compile (omit to get a decorator).
        engine: also compile with :func:`engine_options` (fast max and min, backend optimisation level 1
            unless ``XLA_FLAGS`` names a level: for the engine's own programs, whose NaN checks do not read
            a max; see the module docstring).
        loop_emitters: a predicate of a call's arguments: whether its program is compiled with XLA:CPU's
            loop emitters (:class:`BySize`; e.g. :func:`pgmjax.graph.oracle_plan.suits_loop_emitters`).
        **kwargs: any ``jax.jit`` keyword argument; ``compiler_options`` given here are merged over
            pgmjax's own.

    Returns:
        The jitted function (or a decorator).

    Example:
        >>> f = jit(lambda x: x + 1)
        >>> float(f(1.0))
        2.0
    """
    kwargs["compiler_options"] = {
        **compiler_options(), **(engine_options() if engine else {}), **(kwargs.get("compiler_options") or {})
    }

    def wrap(f):
        return jax.jit(_full_precision(f), **kwargs) if loop_emitters is None else BySize(f, loop_emitters, kwargs)

    return wrap if fun is None else wrap(fun)


#: An engine program (:func:`jit` with ``loop_emitters``) whose largest potential block (one clique class's
#: stacked tables; every member of a batch counted) has at most this many cells is compiled with XLA:CPU's
#: loop emitters (:data:`LOOP_EMITTERS`). They generate code in about half the time of the default MLIR
#: fusion emitters, and most fits wait mostly for their compilation. Measured on the 2-core CPU (2026-11-25,
#: ``bench/results/fast_compile_cpu.md`` and ``fast_compile_block_cpu.md``, first ``estimate(50)`` in fresh
#: processes): Adult with MST-style measurements 2.38 -> 1.33 s, Stroke 2.88 -> 1.74 s, Titanic 1.81 -> 1.27 s,
#: Loans' benchmark cliques (4.0M cells, largest block 1.03M) 7.5 -> 6.0 s, generated problems of 50 and 200
#: attributes (2.3M and 4.0M cells, blocks of at most 646k) 18.2 -> 11.1 s and 72 -> 57 s; iterations -22% to
#: +13% over 500 (chain d=10's, 0.1 ms, +48%). What the loop emitters do slowly is a reduction over a large
#: table: Adult's benchmark cliques (a 2.16M-cell block) iterate 32-55% slower with them. (The rule was the whole model's size before, which kept Loans and the generated problems on the
#: slower-compiling emitters for no gain in their iterations.)
LOOP_EMITTERS_CELLS = 2**20

#: ... unless its measurements reduce the junction tree's tables into more than this many marginals per
#: clique: the loop emitters' reductions are the slower ones (NLTCS, 120 two-way marginals of one 16-axis
#: clique: iterations 27% slower, compile 7% longer; the benchmark's other problems have at most 3.75).
LOOP_EMITTERS_MAX_REDUCTIONS = 8

#: The per-program option that selects XLA:CPU's loop emitters (GPU compilers ignore ``xla_cpu_*`` options).
LOOP_EMITTERS = {"xla_cpu_use_fusion_emitters": False}


def emitters_chosen_by_flags() -> bool:
    """Whether ``XLA_FLAGS`` names the emitters (``--xla_cpu_use_fusion_emitters``): the user's or
    :func:`pgmjax.fast_compile`'s choice then holds for every program, and :class:`BySize` picks none."""
    return "--xla_cpu_use_fusion_emitters" in os.environ.get("XLA_FLAGS", "")


#: Marks a call signature the program store cannot key (:func:`pgmjax.program_store.key`): jitted as usual.
_UNSTORABLE = object()


class BySize:
    """One function jitted twice: with XLA:CPU's loop emitters for small models, its defaults otherwise.

    Each call asks ``loop_emitters(*args, **kwargs)`` (e.g.
    :func:`pgmjax.graph.oracle_plan.suits_loop_emitters`) on the host, before tracing. Structures are
    static, so one model structure always gets the same program: a sweep over noise or step sizes still
    compiles once.

    Args:
        fun: the function.
        loop_emitters: a predicate of a call's arguments: whether to run the loop emitters' program.
        kwargs: ``jax.jit`` keyword arguments (``compiler_options`` included).

    Example:
        >>> f = BySize(lambda x: x * 2, lambda x: x.size <= 4, {"compiler_options": {}})
        >>> float(f(jax.numpy.ones(3))[0])
        2.0
    """

    def __init__(self, fun, loop_emitters, kwargs):
        self._loop_emitters = loop_emitters
        self._options = {False: kwargs["compiler_options"], True: {**kwargs["compiler_options"], **LOOP_EMITTERS}}
        self.large = jax.jit(_full_precision(fun), **kwargs)
        self.small = jax.jit(_full_precision(fun), **{**kwargs, "compiler_options": self._options[True]})
        self._params = tuple(inspect.signature(fun).parameters)
        static = set(kwargs.get("static_argnames") or ())
        static |= {self._params[i] for i in kwargs.get("static_argnums") or ()}
        self._static = tuple(i for i, n in enumerate(self._params) if n in static), frozenset(static)
        self._stored: dict = {}  # programs compiled or loaded through pgmjax.program_store, by call signature
        # Only pgmjax's own functions: the store's key holds a digest of pgmjax's source, not of anyone else's.
        self._storable = getattr(fun, "__module__", "").split(".")[0] == "pgmjax"
        self._jit_kwargs = {k: v for k, v in kwargs.items() if k != "compiler_options"}
        functools.update_wrapper(self, fun)

    def program(self, *args, **kwargs):
        """The jitted function a call with these arguments runs."""
        if emitters_chosen_by_flags() or not self._loop_emitters(*args, **kwargs):
            return self.large
        return self.small

    def __call__(self, *args, **kwargs):
        program = self.program(*args, **kwargs)
        if (program_store.folder() is None and not self._stored) or not self._storable:
            return program(*args, **kwargs)
        return self._call_stored(program, args, kwargs)

    def _call_stored(self, program, args, kwargs):
        """Call through a program kept by :mod:`pgmjax.program_store` (loaded from disk, or compiled ahead of
        time and written there); the ordinary jitted call where the call cannot be stored."""
        positions, names = self._static
        static = {self._params[i]: a for i, a in enumerate(args) if i in positions}
        static.update({k: v for k, v in kwargs.items() if k in names})
        dyn_args = tuple(a for i, a in enumerate(args) if i not in positions)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in names}
        leaves, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
        avals = []
        for x in leaves:
            if isinstance(x, jax.core.Tracer):
                program_store.stats["bypassed"] += 1
                return program(*args, **kwargs)
            avals.append((x.shape, x.dtype, getattr(x, "weak_type", False)) if hasattr(x, "shape") else type(x))
        small = program is self.small
        # JAX's tracing configuration (x64, for one) decides the program as much as the arguments do
        signature = (small, tree, tuple(avals), tuple(sorted(static.items())), program_store.trace_context())
        compiled = self._stored.get(signature)
        if compiled is None:
            if program_store.folder() is None:
                return program(*args, **kwargs)
            options = {**self._jit_kwargs, **self._options[small]}
            name = program_store.key(f"{self.__module__}.{self.__qualname__}", options, static, (dyn_args, dyn_kwargs))
            compiled = _UNSTORABLE
            if name is not None:
                compiled = program_store.load(name, tree)
                if compiled is None:
                    compiled = program.lower(*args, **kwargs).compile()
                    program_store.save(name, compiled)
            self._stored[signature] = compiled
        if compiled is _UNSTORABLE:
            program_store.stats["bypassed"] += 1
            return program(*args, **kwargs)
        return compiled(*dyn_args, **dyn_kwargs)

    def lower(self, *args, **kwargs):
        return self.program(*args, **kwargs).lower(*args, **kwargs)

    def _cache_size(self) -> int:
        stored = sum(c is not _UNSTORABLE for c in self._stored.values())
        return self.small._cache_size() + self.large._cache_size() + stored

    def clear_cache(self) -> None:
        self.small.clear_cache()
        self.large.clear_cache()
        self._stored.clear()


def _full_precision(fun):
    """``fun`` traced with full-precision float32 matrix products (see the module docstring)."""

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fun(*args, **kwargs)

    return traced


def to_device(x, dtype=None) -> jax.Array:
    """``x`` as a device array of ``dtype``, converted on the host and transferred.

    ``jnp.asarray`` of a host array compiles (and caches) a small XLA program per shape and dtype on
    jaxlib 0.10 (``jit(stage)``, ``jit(convert_element_type)``): a first fit built its inputs with about
    fifty of them (10-20 ms each). ``jax.device_put`` of a NumPy array compiles nothing.

    Example:
        >>> to_device([1, 2], np.float32).dtype
        dtype('float32')
    """
    if isinstance(x, jax.core.Tracer):
        return x if dtype is None else x.astype(dtype)
    return jax.device_put(np.asarray(x, dtype))


def zeros_like(tree):
    """Zeros shaped like every leaf of ``tree``: built on the host outside a trace (no program compiled)."""
    return jax.tree_util.tree_map(
        lambda t: jax.numpy.zeros_like(t) if isinstance(t, jax.core.Tracer) else to_device(np.zeros(t.shape, t.dtype)), tree
    )
