"""How pgmjax compiles its programs: ``jit`` is ``jax.jit`` with the compiler options the engine needs.

This package is the one place that compiles. :mod:`pgmjax.compiler.options` holds the options each program is
compiled with, by platform (XLA:CPU's workarounds and the engine's own; ``XLA_FLAGS`` is read there once, at
import); this module makes the programs (:func:`jit`: a :class:`Program`, or a :class:`BySize` that picks its
emitters by the call's arguments), keeps the live ones and frees them (:func:`compiled_count`,
:func:`release_compiled`), and :mod:`pgmjax.compiler.cache` checks the persistent cache's folder. The options are
XLA:CPU's, so :func:`jit` gives a :class:`Program` that jits its function once per platform and asks
:func:`backend` at each call which one runs. The platform is never read at import, when JAX may not have started
its backends.

The engine's programs choose XLA:CPU's emitters by the model they fit (``jit(..., emitters=...)``,
:class:`BySize`): its loop emitters (``xla_cpu_use_fusion_emitters=false``) where the model's largest
potential block has at most :data:`LOOP_EMITTERS_CELLS` cells, XLA's default emitters for larger blocks and
where the measurements reduce tables into many marginals (:data:`LOOP_EMITTERS_MAX_REDUCTIONS`), and the fusion
emitters for the size-class programs, whose gathers the loop emitters write without vector code
(:attr:`Emitters.FUSION`). The loop emitters generate a fit's few hundred kernels in about half the time, and
most fits wait mostly for that; their reductions over a large table run slower. A chosen emitter is the
program's own option and wins over ``XLA_FLAGS``; a program given XLA's defaults follows the flags (those of
:func:`pgmjax.fast_compile` included).

Which program a call runs is a function of its arguments alone (their platform, the model's block sizes):
no context variable, environment read or hook decides it.

Every program made here is registered (:func:`compiled_count`, :func:`release_compiled`): the live programs
and their release are counted here, not by a list of other modules' functions.

Every pgmjax program is also traced with full-precision matrix products (``jax.default_matmul_precision
("highest")``): on recent NVIDIA GPUs a float32 product would otherwise run in TensorFloat-32, about three
significant digits, which a sum of a million exponentials or a query's answer cannot afford. CPUs compute
float32 products in full either way.
"""

from __future__ import annotations

import enum
import functools
import gc
import weakref

import jax
import numpy as np

from . import ahead
from .options import options_for


def backend() -> str:
    """The platform a pgmjax program called now compiles for: ``"cpu"``, ``"gpu"``, ``"tpu"``, ...

    JAX's default device where one is set (``jax.default_device``, ``jax_default_device``), else its default
    backend. Read at every call (a cheap lookup), never at import: asking starts JAX's backends, which
    :func:`pgmjax.programs.fast_compile` must come before. A call whose arguments are committed to a device
    of another platform than this compiles with this platform's options all the same (its options are then
    ignored or harmless there, as before they depended on the platform).

    Example:
        >>> backend() in ("cpu", "gpu", "tpu")
        True
    """
    device = getattr(jax.config, "jax_default_device", None)  # a JAX without the option: its default backend
    if device is None:
        return jax.default_backend()
    name = device if isinstance(device, str) else device.platform
    return "gpu" if name in ("cuda", "rocm") else name


#: Levels each trip of the marginal oracle's level loops runs (``lax.scan``'s ``unroll``), by platform
#: (:func:`scan_unroll`). On the CPU a trip costs next to nothing and unrolling only grows the program; on a GPU
#: every trip of a loop is a round of kernel launches and a loop-condition check, and a deep junction tree
#: (a chain) is hundreds of trips per oracle call. Four levels a trip halved a long chain's time per iteration on
#: a GPU, with the first call no slower (the changelog has the measurement); on the CPU the same unroll made the
#: program slower to compile and to run.
SCAN_UNROLL: dict[str, int] = {"cpu": 1, "gpu": 4}


def scan_unroll(platform: str | None = None) -> int:
    """How many levels of the marginal oracle's level loops one loop trip runs on ``platform``.

    Args:
        platform: a platform name (:func:`backend`); the one a program called now compiles for by default.

    Returns:
        :data:`SCAN_UNROLL`'s entry for the platform, 1 where it has none.

    Example:
        >>> scan_unroll("cpu"), scan_unroll("gpu")
        (1, 4)
    """
    return SCAN_UNROLL.get(platform or backend(), 1)


def jit(fun=None, /, *, engine: bool = False, emitters=None, level: int | None = None, **kwargs):
    """``jax.jit`` with the compiler options of the platform each call compiles for; ``@jit``,
    ``@jit(static_argnames=...)`` or ``jit(f)``.

    The options are chosen at each call by :func:`backend` (:class:`Program`): XLA:CPU's (:func:`~pgmjax.compiler.options.compiler_options`,
    :func:`~pgmjax.compiler.options.engine_options`, the emitters) only where the program compiles for the CPU.

    Args:
        fun: the function to compile (omit to get a decorator).
        engine: also compile with :func:`~pgmjax.compiler.options.engine_options` (fast max and min, backend optimisation level 1
            unless ``XLA_FLAGS`` named a level at import: for the engine's own programs, whose NaN checks do not read
            a max; see the module docstring).
        emitters: a predicate of a call's arguments: which XLA:CPU emitters its program is compiled
            with, an :class:`Emitters` (or a bool: the loop emitters or not; :class:`BySize`; e.g.
            :func:`pgmjax.graph.program_choice.emitters_for`).
        level: an engine program's backend optimisation level on the CPU (default 1; :data:`~pgmjax.compiler.options.ONCE_PER_MODEL_LEVEL`
            for a program run once per model), unless ``XLA_FLAGS`` named one at import.
        **kwargs: any ``jax.jit`` keyword argument; ``compiler_options`` given here are merged over
            pgmjax's own, on every platform.

    Returns:
        The jitted function (a :class:`Program`), or a decorator.

    Example:
        >>> f = jit(lambda x: x + 1)
        >>> float(f(1.0))
        2.0
    """

    def wrap(f):
        if level is not None and not engine:
            raise ValueError("jit: level= sets an engine program's optimisation level; pass engine=True with it")
        return Program(f, kwargs, engine, level) if emitters is None else BySize(f, emitters, kwargs, engine, level)

    return wrap if fun is None else wrap(fun)


#: An engine program (:func:`jit` with ``emitters``) whose largest potential block (one clique class's
#: stacked tables; every member of a batch counted) has at most this many cells is compiled with XLA:CPU's
#: loop emitters (:data:`~pgmjax.compiler.options.LOOP_EMITTERS`). They generate code in about half the time of the default MLIR
#: fusion emitters, and most fits wait mostly for their compilation (the first ``estimate`` is the sooner
#: with them, iterations about as fast; the changelog has the measurements). What the loop emitters do slowly
#: is a reduction over a large table (a block of millions of cells iterates markedly slower with them), hence
#: the block-size rule.
LOOP_EMITTERS_CELLS = 2**20

#: ... unless its measurements reduce the junction tree's tables into more than this many marginals per
#: clique: the loop emitters' reductions are the slower ones there (NLTCS, 120 two-way marginals of one
#: 16-axis clique, iterates and compiles more slowly with them; the benchmark's other problems have at most 3.75).
LOOP_EMITTERS_MAX_REDUCTIONS = 8


class Emitters(enum.Enum):
    """Which XLA:CPU emitters a call's program compiles with (:class:`BySize`).

    Attributes:
        DEFAULT: XLA's own, or those ``XLA_FLAGS`` name.
        LOOP: the loop emitters (:data:`~pgmjax.compiler.options.LOOP_EMITTERS`), whatever ``XLA_FLAGS`` name.
        FUSION: the fusion emitters, whatever ``XLA_FLAGS`` name (:data:`~pgmjax.compiler.options.FUSION_EMITTERS`): for programs whose
            fused kernels read through gathers, which the loop emitters write element by element.
    """

    DEFAULT = "default"
    LOOP = "loop"
    FUSION = "fusion"

class Program:
    """One function jitted once per platform, each with that platform's compiler options (:func:`~pgmjax.compiler.options.options_for`).

    The CPU's program is made at once; another platform's on its first call there. Each call asks :func:`backend`
    which one runs: nothing is decided at import, when JAX may not know its devices yet.

    Args:
        fun: the function.
        kwargs: ``jax.jit`` keyword arguments; their ``compiler_options`` are the caller's own, kept on every
            platform.
        engine: an engine program (:func:`~pgmjax.compiler.options.engine_options` on the CPU).
        level: the engine program's backend optimisation level on the CPU (default: :func:`~pgmjax.compiler.options.engine_options`').

    Example:
        >>> f = Program(lambda x: x * 2, {}, engine=True)
        >>> float(f(jax.numpy.ones(3))[0]), f.options("gpu")
        (2.0, {})
    """

    def __init__(self, fun, kwargs, engine: bool = False, level: int | None = None):
        self._fun = _full_precision(fun)
        self._user = dict(kwargs.get("compiler_options") or {})
        self._engine = engine
        self._level = level
        self._jit_kwargs = {k: v for k, v in kwargs.items() if k != "compiler_options"}
        self._cpu_options = {False: options_for("cpu", engine, False, self._user, level=level)}
        self.cpu = self._compile(self._cpu_options[False])
        self._elsewhere: dict = {}  # platform -> jitted function, made on its first call there
        self._nested = None  # the plain jitted function, for calls inside another transformation
        functools.update_wrapper(self, fun)
        _LIVE.add(self)

    def _compile(self, options: dict):
        return jax.jit(self._fun, **self._jit_kwargs, compiler_options=options)

    @property
    def level(self) -> int | None:
        """The backend optimisation level this engine program asked for (None: :func:`~pgmjax.compiler.options.engine_options`' default)."""
        return self._level

    def options(self, platform: str, small=False) -> dict:
        """The compiler options of the program a call compiled for ``platform`` runs (``small``: True for the loop
        emitters', :attr:`Emitters.FUSION` for the fusion emitters' of a :class:`BySize`)."""
        if platform == "cpu":
            return dict(self._cpu_options[small])
        return options_for(platform, self._engine, False, self._user, level=self._level)

    def on(self, platform: str):
        """The jitted function for ``platform``."""
        if platform == "cpu":
            return self.cpu
        program = self._elsewhere.get(platform)
        if program is None:
            program = self._elsewhere[platform] = self._compile(self.options(platform))
        return program

    def program(self, *args, **kwargs):
        """The jitted function a call with these arguments runs (that of :func:`backend`)."""
        return self.on(backend())

    def __call__(self, *args, **kwargs):
        if _traced(args, kwargs):
            # Called inside another transformation (a model's answers under a user's jit, vmap or grad): XLA
            # takes compiler options on the outermost program only, so this one is a plain nested jit.
            if self._nested is None:
                self._nested = jax.jit(self._fun, **self._jit_kwargs)
            return self._nested(*args, **kwargs)
        return self.program(*args, **kwargs)(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        # Decorating a method: bind like a function (jax.jit's objects do the same).
        return self if obj is None else functools.partial(self, obj)

    def lower(self, *args, **kwargs):
        return self.program(*args, **kwargs).lower(*args, **kwargs)

    def trace(self, *args, **kwargs):
        return self.program(*args, **kwargs).trace(*args, **kwargs)

    def eval_shape(self, *args, **kwargs):
        return self.program(*args, **kwargs).eval_shape(*args, **kwargs)

    def _programs(self) -> list:
        return [self.cpu, *self._elsewhere.values(), *([self._nested] if self._nested is not None else [])]

    def _cache_size(self) -> int:
        return sum(p._cache_size() for p in self._programs())

    def clear_cache(self) -> None:
        for p in self._programs():
            p.clear_cache()


class BySize(Program):
    """One function jitted by platform and, on the CPU, three times: with XLA:CPU's loop emitters for small
    models, with its fusion emitters for the size-class programs, its defaults otherwise.

    Each call asks ``emitters(*args, **kwargs)`` (e.g. :func:`pgmjax.graph.program_choice.emitters_for`)
    on the host, before tracing, where the call compiles for the CPU; elsewhere there is one program (no
    emitters to choose). The choice is a function of the call's arguments (their static structure) alone, so
    one model structure always gets the same program: a sweep over noise or step sizes still compiles once.
    The loop and fusion emitters are the programs' own options, which win over ``XLA_FLAGS``; the default
    program follows the flags (:func:`pgmjax.fast_compile`'s loop emitters included).

    Args:
        fun: the function.
        emitters: a predicate of a call's arguments: the :class:`Emitters` of its program (or a bool:
            True for the loop emitters, False for the defaults).
        kwargs: ``jax.jit`` keyword arguments (``compiler_options``: the caller's own).
        engine: an engine program (:func:`~pgmjax.compiler.options.engine_options` on the CPU).
        level: the engine program's backend optimisation level on the CPU (default: :func:`~pgmjax.compiler.options.engine_options`').

    Example:
        >>> f = BySize(lambda x: x * 2, lambda x: x.size <= 4, {})
        >>> float(f(jax.numpy.ones(3))[0])
        2.0
    """

    def __init__(self, fun, emitters, kwargs, engine: bool = False, level: int | None = None):
        super().__init__(fun, kwargs, engine, level)
        self._emitters = emitters
        self._cpu_options[True] = options_for("cpu", engine, True, self._user, level=level)
        self._cpu_options[Emitters.FUSION] = options_for("cpu", engine, False, self._user, fusion_emitters=True,
                                                         level=level)
        self.large = self.cpu
        self.small = self._compile(self._cpu_options[True])
        self.vector = self._compile(self._cpu_options[Emitters.FUSION])

    def program(self, *args, **kwargs):
        """The jitted function a call with these arguments runs."""
        platform = backend()
        if platform != "cpu":
            return self.on(platform)
        choice = self._emitters(*args, **kwargs)
        if choice is Emitters.FUSION:
            return self.vector
        if choice in (False, Emitters.DEFAULT):
            return self.large
        return self.small

    def _programs(self) -> list:
        return [self.small, self.vector, *super()._programs()]


#: Every :class:`Program` made (weakly held: one that nobody holds any more is gone from it).
_LIVE: "weakref.WeakSet[Program]" = weakref.WeakSet()

#: What a fit lets pgmjax hold before freeing (:func:`bound_compiled`): a few rounds' worth of an adaptive
#: mechanism (each fit compiles about three programs), far below where XLA:CPU runs out of memory mappings
#: (hundreds of large programs).
MAX_LIVE_PROGRAMS = 32


def compiled_count(engine: bool = False) -> int:
    """How many compiled programs pgmjax's jitted functions (every :class:`Program`) hold now.

    Args:
        engine: count only the engine's (``jit(..., engine=True)``: a fit's loop, the marginal oracle), whose
            programs are a model's size and number one per structure (or size class).

    Example:
        >>> compiled_count() >= compiled_count(engine=True) >= 0
        True
    """
    return sum(p._cache_size() for p in list(_LIVE) if p._engine or not engine)


def release_compiled(above: int = 0) -> bool:
    """Free every compiled program pgmjax's jitted functions hold, if they hold more than ``above``.

    Programs of JAX functions outside pgmjax are untouched (unlike ``jax.clear_caches()``). The next call for a
    structure recompiles it. JAX's caches cannot drop single programs, so all are freed at once.

    Args:
        above: free only if :func:`compiled_count` exceeds this (0: free whatever is held).

    Returns:
        Whether programs were freed.

    Example:
        >>> _ = release_compiled()        # whatever was held is freed
        >>> compiled_count(), release_compiled()
        (0, False)
    """
    if compiled_count() <= above:
        return False
    ahead.forget()  # a compile in flight finishes first; what it compiled is freed with the rest
    for p in list(_LIVE):
        p.clear_cache()
    # The executables (and their memory maps) go when their Python owners do, and some owners sit in reference
    # cycles: collect them now rather than at the collector's next full pass (the maps of a loop over new
    # structures kept growing by about 30 per fit without this).
    gc.collect()
    return True


def bound_compiled(limit: int | float = MAX_LIVE_PROGRAMS) -> bool:
    """Free pgmjax's compiled programs once more than ``limit`` of the engine's are live. :func:`pgmjax.estimate` and
    :func:`pgmjax.estimate_batch` call it before they plan a fit, so a loop that fits thousands of new structures
    holds at most ``limit`` (plus one fit's worth of) programs: without it each new structure left about 4.4 MB
    and 130 memory maps behind. A process that reuses at most ``limit / 3`` structures never recompiles.

    Args:
        limit: the most live programs kept; 0 or ``math.inf`` never frees.

    Returns:
        Whether programs were freed.

    Example:
        >>> bound_compiled(10**6)
        False
    """
    if not limit or limit == float("inf") or compiled_count(engine=True) <= limit:
        return False
    return release_compiled()


def _traced(args, kwargs) -> bool:
    """Whether any argument is abstract: the call is inside another JAX transformation."""
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves((args, kwargs)))


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
    fifty of them. ``jax.device_put`` of a NumPy array compiles nothing.

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
