"""The compiler options of pgmjax's programs: which XLA options each program is compiled with, by platform.

XLA:CPU in jaxlib 0.10.2 hands some fused multiply-then-reduce programs to its YNNPACK library path,
which returns wrong numbers (garbage or NaN, varying from run to run) for some shapes; upstream JAX
reports the same class of bug for a matrix-vector product followed by a reduction (jax issue 39103:
0.10.1 correct, 0.10.2 wrong). In the engine it hits the downward pass of the marginal oracle: with
the Adult benchmark cliques the float32 marginals of the *uniform* model held NaN, so every fit failed
at its first chunk. The smallest trigger found is ``sum(b * g, axis=-2)`` with ``b`` of shape
``(1, 9, 2, 3, 5, 10, 2)`` and ``g`` broadcast along axis 1 (see ``tests/engine/test_compiler.py``).
Every pgmjax program is compiled with the YNNPACK fusions turned off where the installed jaxlib has
them (:func:`compiler_options`): a per-program option, so only pgmjax's own programs are affected.

Every option here is XLA:CPU's (an ``xla_cpu_*`` option, or a level measured on XLA:CPU only), so each is
passed only to programs compiled for the CPU (:func:`options_for`); a GPU's program gets only the caller's own.

The engine's own programs (a fit's loop, the marginal oracle; ``jit(..., engine=True)``) also get
XLA:CPU's fast ``max``/``min`` lowering (``xla_cpu_enable_fast_min_max``), which does not propagate NaN
through a max. XLA's default lowering compares and selects element by element; the fast one is a vector
max, several times faster, and every log-sum-exp of the oracle starts with a max. A NaN cannot hide there:
the max is only the shift of a log-sum-exp, the NaN still reaches the sum of exponentials, hence log Z and
the loss, whose finiteness a fit checks at every trial; other programs keep NaN-propagating max and min. The
engine's programs are compiled at backend optimisation level 1 instead of 2 (``xla_backend_optimization_level``):
a fit's program has hundreds of small kernels, each its own LLVM module, and level 1 compiles them sooner with the
same iteration times (``bench/NOTES.md`` has the measurements); ``exp``, ``log`` and sums round as at level 2. A program that runs once per model rather than
once per iteration (a dense model's marginals, :data:`ONCE_PER_MODEL_LEVEL`) asks for level 0 (``jit(...,
level=0)``): it compiles in a third to a half of the time and runs a few times slower, a millisecond or two once
per model; its answers differ from level 1's in the last bits.

``XLA_FLAGS`` is XLA's own process setting, read once when pgmjax is imported (:data:`pgmjax.settings.PROCESS`):
a backend optimisation level named there holds for every program, the engine's included (the engine's level
option is then left out, since a per-program option would override the flag). Nothing here reads the environment; the emitters a program is compiled with are
its own option (:data:`LOOP_EMITTERS`, :data:`FUSION_EMITTERS`), chosen by the call's arguments
(:class:`pgmjax.compiler.BySize`), and win over the flags.
"""

from __future__ import annotations

import functools

import jaxlib

from .. import settings


def _jaxlib_version() -> tuple[int, ...]:
    parts = []
    for p in jaxlib.__version__.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)

@functools.lru_cache(maxsize=None)
def compiler_options(platform: str = "cpu") -> dict[str, str]:
    """The XLA compiler options of every pgmjax program compiled for ``platform`` (empty where none is needed).

    Args:
        platform: a JAX platform name (:func:`pgmjax.compiler.backend`); the options are XLA:CPU's, so ``"cpu"`` by default.

    Returns:
        On the CPU, ``{"xla_cpu_experimental_ynn_fusion_type": ""}`` (no YNNPACK fusions) on jaxlib 0.10.2
        and later 0.10 releases, whose XLA:CPU miscompiles some reductions; ``{}`` otherwise and on every
        other platform.

    Example:
        >>> isinstance(compiler_options(), dict), compiler_options("gpu")
        (True, {})
    """
    if platform == "cpu" and (0, 10, 2) <= _jaxlib_version() < (0, 11, 0):
        return {"xla_cpu_experimental_ynn_fusion_type": ""}
    return {}


#: The options :func:`jit` adds for ``engine=True`` on the CPU (see the module docstring); both are tuned for
#: XLA:CPU, so programs compiled for another platform get neither (:func:`engine_options`).
ENGINE_OPTIONS = {"xla_cpu_enable_fast_min_max": True, "xla_backend_optimization_level": 1}

#: The backend optimisation level of an engine program that runs once per model, not once per iteration
#: (``jit(..., engine=True, level=ONCE_PER_MODEL_LEVEL)``: a dense model's marginals and log Z). A fit waits for
#: its compile at every new structure, while the extra run time at level 0 is paid once per model
#: (``bench/NOTES.md`` has the measurements). The size-class answering programs keep level 1: shared by a whole
#: class, they compile once per run and run many times slower at level 0.
ONCE_PER_MODEL_LEVEL = 0


def engine_options(platform: str = "cpu", level: int | None = None) -> dict:
    """:data:`ENGINE_OPTIONS` on the CPU (its level replaced by ``level`` where given), less the level where
    ``XLA_FLAGS`` names one (:attr:`pgmjax.settings.Settings.xla_level_named`); ``{}`` elsewhere.

    A per-program compiler option overrides ``XLA_FLAGS``; a user (or a test suite) who sets
    ``--xla_backend_optimization_level`` there means it for every program, the engine's included. The level
    was measured on XLA:CPU only (on XLA:GPU it is the LLVM level of the device code), and the fast max is
    an ``xla_cpu_*`` option: neither is passed for another platform.

    Args:
        platform: the platform the program compiles for (:func:`pgmjax.compiler.backend`).
        level: the backend optimisation level (default: :data:`ENGINE_OPTIONS`'s, 1).

    Example:
        >>> engine_options()["xla_cpu_enable_fast_min_max"], engine_options("gpu")
        (True, {})
    """
    if level is not None and level not in (0, 1, 2, 3):  # refused on every platform, whatever XLA_FLAGS say
        raise ValueError(f"engine_options: level must be an XLA backend optimisation level 0 to 3, got {level!r}")
    if platform != "cpu":
        return {}
    if settings.PROCESS.xla_level_named:
        return {k: v for k, v in ENGINE_OPTIONS.items() if k != "xla_backend_optimization_level"}
    return {**ENGINE_OPTIONS, **({} if level is None else {"xla_backend_optimization_level": level})}

def options_for(platform: str, engine: bool = False, loop_emitters: bool = False, user: dict | None = None,
                fusion_emitters: bool = False, level: int | None = None) -> dict:
    """Every compiler option of a pgmjax program compiled for ``platform``.

    Args:
        platform: the platform (:func:`pgmjax.compiler.backend`).
        engine: an engine program (:func:`engine_options`).
        loop_emitters: compiled with XLA:CPU's loop emitters (:data:`LOOP_EMITTERS`; CPU only).
        user: the caller's own options (``jit(..., compiler_options=...)``), merged last on every platform.
        fusion_emitters: compiled with XLA:CPU's fusion emitters whatever ``XLA_FLAGS`` say
            (:data:`FUSION_EMITTERS`; CPU only; ``loop_emitters`` wins over it).
        level: an engine program's backend optimisation level (:func:`engine_options`; default 1).

    Returns:
        The options, a new dict.

    Example:
        >>> options_for("gpu", engine=True, loop_emitters=True, user={"a": 1})
        {'a': 1}
    """
    cpu = platform == "cpu"
    engine_part = engine_options(platform, level) if engine else {}
    return {
        **compiler_options(platform), **engine_part,
        **(FUSION_EMITTERS if fusion_emitters and cpu and has_loop_emitters() else {}),
        **(LOOP_EMITTERS if loop_emitters and cpu and has_loop_emitters() else {}), **(user or {}),
    }


#: The per-program option that selects XLA:CPU's loop emitters (passed only for the CPU: :func:`options_for`).
LOOP_EMITTERS = {"xla_cpu_use_fusion_emitters": False}

#: The per-program option that selects XLA:CPU's fusion emitters, also where ``XLA_FLAGS`` (or
#: :func:`pgmjax.fast_compile`) name the loop emitters: a per-program option wins over the flag.
FUSION_EMITTERS = {"xla_cpu_use_fusion_emitters": True}


def has_loop_emitters() -> bool:
    """Whether the installed jaxlib's XLA:CPU has the emitter switch (``xla_cpu_use_fusion_emitters``).

    jaxlib 0.10 has it; jaxlib 0.11's XLA knows no such flag, and an unknown flag in ``XLA_FLAGS`` aborts
    the process at JAX's start ("Unknown flag in XLA_FLAGS"). Later
    releases get XLA's default emitters: the choice was measured on 0.10 only.

    Example:
        >>> has_loop_emitters() in (True, False)
        True
    """
    return _jaxlib_version() < (0, 11, 0)
