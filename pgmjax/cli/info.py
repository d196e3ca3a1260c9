"""``pgmjax info``: the versions, JAX's backend, its devices and their memory, and whether a CUDA plugin is there.

The first thing to run on a new machine (``pip install -e ".[cuda]"`` on a GPU one): pgmjax uses whatever
JAX's default backend is, so this says where a fit will run and with which compiler options
(:func:`pgmjax.compiler.options.options_for`). :func:`device_info` gives the same as a dict.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json

#: Distributions of JAX's CUDA support (``jax[cuda12]`` installs the first two).
CUDA_DISTRIBUTIONS = ("jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt")


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _memory(device) -> dict | None:
    """The device's memory in bytes as JAX reports it (``limit``, ``in_use``, ``peak``), or None where it
    reports none (XLA:CPU gives None, or lacks the method, or fills only some keys)."""
    try:
        stats = device.memory_stats()
    except Exception:  # not implemented for this device: no memory figures, not a failure
        return None
    if not stats:
        return None
    names = {"bytes_limit": "limit", "bytes_in_use": "in_use", "peak_bytes_in_use": "peak"}
    out = {short: int(stats[k]) for k, short in names.items() if stats.get(k) is not None}
    return out or None


def device_info() -> dict:
    """What ``pgmjax info`` prints, as a dict (JSON-serialisable).

    Returns:
        ``{"pgmjax", "jax", "jaxlib": versions, "backend": JAX's default backend, "platform": the one pgmjax's
        programs compile for (:func:`pgmjax.compiler.backend`), "devices": [{"id", "kind", "platform",
        "memory": {"limit", "in_use", "peak"} in bytes or None}], "cuda_plugin": {distribution: version} of
        the CUDA distributions installed ({} if none), "cuda_plugin_loaded": whether JAX started a CUDA
        backend, "compiler_options": an engine program's options there}``.

    Example:
        >>> info = device_info()
        >>> info["backend"] in ("cpu", "gpu", "tpu") and len(info["devices"]) >= 1
        True
    """
    import jax
    import jaxlib

    from .. import __version__, compiler

    platform = compiler.backend()
    devices = [
        {"id": d.id, "kind": d.device_kind, "platform": d.platform, "memory": _memory(d)} for d in jax.devices()
    ]
    plugins = {name: v for name in CUDA_DISTRIBUTIONS if (v := _version(name)) is not None}
    try:
        cuda_loaded = bool(jax.devices("cuda"))
    except RuntimeError:  # no CUDA backend started (absent, or its plugin failed to load)
        cuda_loaded = False
    return {
        "pgmjax": __version__,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "backend": jax.default_backend(),
        "platform": platform,
        "devices": devices,
        "cuda_plugin": plugins,
        "cuda_plugin_loaded": cuda_loaded,
        "compiler_options": compiler.options.options_for(platform, engine=True),
    }


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def format_info(info: dict) -> list[str]:
    """The lines ``pgmjax info`` prints for a :func:`device_info` dict."""
    lines = [
        f"pgmjax {info['pgmjax']}, jax {info['jax']}, jaxlib {info['jaxlib']}",
        f"default backend: {info['backend']} (pgmjax's programs compile for {info['platform']})",
    ]
    for d in info["devices"]:
        mem = d["memory"]
        if mem is None:
            text = "memory not reported"
        else:
            text = ", ".join(f"{k} {_gib(v)}" for k, v in mem.items())
        lines.append(f"device {d['id']}: {d['kind']} ({d['platform']}), {text}")
    if info["cuda_plugin"]:
        found = ", ".join(f"{k} {v}" for k, v in info["cuda_plugin"].items())
        state = "loaded" if info["cuda_plugin_loaded"] else "NOT loaded (no GPU visible, or a driver/CUDA mismatch)"
        lines.append(f"CUDA plugin: {found}; {state}")
    else:
        lines.append('CUDA plugin: not installed (pip install -e ".[cuda]" on a machine with an NVIDIA GPU)')
    opts = info["compiler_options"]
    lines.append("engine compiler options: " + (", ".join(f"{k}={v!r}" for k, v in opts.items()) or "none"))
    return lines


def info_cmd(args) -> int:
    info = device_info()
    print(json.dumps(info, indent=1) if args.json else "\n".join(format_info(info)))
    return 0


def add_info_parser(sub) -> None:
    """Register ``pgmjax info`` on the command line's subparsers."""
    p = sub.add_parser("info", help="versions, JAX's backend, devices and their memory, the CUDA plugin",
                       description="Prints the pgmjax, jax and jaxlib versions, JAX's default backend, every device "
                                   "(kind, platform, memory where JAX reports it), whether JAX's CUDA plugin is "
                                   "installed and loaded, and the compiler options of the engine's programs there.")
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(func=info_cmd, debug=False)
