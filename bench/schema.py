"""The one result schema of the benchmark suites, and the one helper that writes it.

A result is two files under ``bench/results/<suite>/``: ``<name>.json`` and the Markdown page
``<name>.md`` beside it. The JSON is ::

    {"meta": {"machine": {"cpu", "gpu", "cores", "memory_gib", "backend", "load_average"},
              "commit": "abc1234" (+ " (+ uncommitted changes)" where the tree differs),
              "versions": {"python", "jax", "jaxlib", "numpy", "pgmjax", "mbi" where used, ...},
              "date": "YYYY-MM-DD HH:MM UTC",
              "command": "python -m bench.<script> ..."},
     "rows": [...],          # the measurements, one dict per row (null where a result is made of named sections)
     ...}                    # further top-level keys a script needs (settings, notes, ...)

and the page opens with the same facts (:func:`header_lines`). :func:`run_meta` builds ``meta``;
:func:`write_result` writes both files. Only the standard library is imported at module level (jax, numpy
and pgmjax are read lazily where installed), so the mbi drivers can import this module too.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
RESULTS = os.path.join(BENCH, "results")

#: Packages whose versions every result records (where installed).
PACKAGES = ("jax", "jaxlib", "numpy", "pgmjax")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("" where unavailable)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


def memory_gib() -> float | None:
    """The machine's physical memory in GiB (None where unknown)."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine(backend: bool = True) -> dict:
    """The machine a result was measured on: CPU model, cores, memory, and with ``backend`` JAX's backend and
    the accelerator's name (``gpu``: None on the CPU)."""
    out = {"cpu": cpu_model(), "gpu": None, "cores": os.cpu_count(), "memory_gib": memory_gib()}
    if backend:
        import jax

        out["backend"] = jax.default_backend()
        if out["backend"] != "cpu":
            out["gpu"] = jax.devices()[0].device_kind
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return out


def git(*args) -> str:
    """``git *args``' output in the repository root, stripped ("" where git fails or is missing)."""
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def commit() -> str:
    """The commit measured: ``$PGMJAX_COMMIT`` where set (a device machine's copy of the tree may have no git),
    else git's short hash, marked where the package or bench/ differ from it."""
    if os.environ.get("PGMJAX_COMMIT"):
        return os.environ["PGMJAX_COMMIT"]
    head = git("rev-parse", "--short", "HEAD")
    if head and git("status", "--porcelain", "--", "pgmjax", "bench"):
        head += " (+ uncommitted changes)"
    return head


def version(package: str) -> str | None:
    """An installed package's version (None where it is not installed)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(extra=(), **given) -> dict:
    """Python's and :data:`PACKAGES`' versions, those of the packages named in ``extra`` (e.g. ``("mbi",)``)
    and any ``given`` as ``name=version``; a package not installed is left out."""
    out = {"python": platform.python_version()}
    for name in (*PACKAGES, *extra):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    out.update(given)
    return out


def command(module: str, argv=None) -> str:
    """How the result was made: ``python -m <module> <args>`` (``argv`` default ``sys.argv[1:]``)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python -m", module, *map(str, args)])


def run_meta(module: str, argv=None, backend: bool = True, extra=(), also: dict | None = None, **given) -> dict:
    """The ``meta`` of a result: machine, commit, versions, date (UTC) and command.

    Args:
        module: the script's module, e.g. ``"bench.engine"``.
        argv: its arguments (default ``sys.argv[1:]``).
        backend: record JAX's backend and the accelerator (False where jax is not needed).
        extra: further packages whose versions to record, e.g. ``("mbi", "scipy")``.
        also: further facts about the run a script records beside these (e.g. the load average at its start);
            its ``versions`` are added to the versions, its other keys never replace the schema's own.
        given: versions given directly, ``name=version``.
    """
    meta = {
        "machine": machine(backend),
        "commit": commit(),
        "versions": versions(extra, **given),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command(module, argv),
    }
    for key, value in (also or {}).items():
        if key == "versions":
            meta["versions"].update({k: v for k, v in value.items() if v is not None and k not in meta["versions"]})
        elif key not in meta:
            meta[key] = value
    return meta


def header_lines(meta: dict) -> list[str]:
    """The lines a results page opens with: machine, date, commit, versions and the command."""
    m, v = meta["machine"], meta["versions"]
    where = f"{m['cpu']}, {m['cores']} cores"
    if m.get("memory_gib"):
        where += f", {m['memory_gib']:g} GiB"
    if m.get("gpu"):
        where += f", {m['gpu']}"
    if m.get("backend"):
        where += f", backend {m['backend']}"
    names = ", ".join(f"Python {val}" if k == "python" else f"{k} {val}" for k, val in v.items())
    lines = [f"Machine: {where}. Date: {meta['date']}. Commit: {meta.get('commit') or 'not recorded'}. "
             f"Versions: {names}.", ""]
    return lines + ([f"Command: `{meta['command']}`.", ""] if meta.get("command") else [])


def result_path(suite: str, name: str) -> str:
    """``bench/results/<suite>/<name>`` (no suffix); ``name`` may also be a path, used as it is (tests, scratch
    runs)."""
    if os.sep in name or "/" in name:
        return os.path.splitext(name)[0] if name.endswith((".json", ".md")) else name
    return os.path.join(RESULTS, suite, name)


def table(rows: list[dict], columns=None) -> list[str]:
    """A Markdown table of ``rows`` (dicts) over ``columns`` (default: every key, first-seen order)."""
    if not rows:
        return ["(no rows)"]
    if columns is None:
        columns = list(dict.fromkeys(k for r in rows for k in r))

    def cell(x):
        if isinstance(x, float):
            return f"{x:.4g}"
        return "" if x is None else str(x).replace("|", "\\|")

    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows)]


def write_result(suite: str, name: str, rows, meta: dict, page=None, title: str | None = None, quiet=False,
                 **extra) -> str:
    """Write a result: ``<name>.json`` (``{"meta": meta, "rows": rows, **extra}``) and the page ``<name>.md``.

    Args:
        suite: the suite's name (its folder under ``bench/results/``).
        name: the file name without suffix (or a path, see :func:`result_path`).
        rows: the measurements (JSON-serialisable; one dict per row), or None where the result is made of named
            sections (given as ``extra``).
        meta: :func:`run_meta`'s record.
        page: the page's lines (Markdown) after the title; default :func:`header_lines` and :func:`table`.
        title: the page's title (default ``name``); ignored where ``page`` starts with a ``#`` title.
        quiet: do not print the page.
        extra: further top-level JSON keys.

    Returns:
        The path written, without suffix.
    """
    missing = {"machine", "commit", "versions", "date", "command"} - set(meta)
    if missing:
        raise ValueError(f"write_result({suite!r}, {name!r}): meta lacks {sorted(missing)}; build it with run_meta")
    path = result_path(suite, name)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if page is None:
        page = [*header_lines(meta), *(table(rows) if isinstance(rows, list) and all(isinstance(r, dict)
                                                                                    for r in rows) else [])]
    page = list(page)
    if not page or not page[0].startswith("#"):
        page = [f"# {title or os.path.basename(path)}", "", *page]
    with open(path + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows, **extra}, f, indent=1, default=_plain)
    with open(path + ".md", "w") as f:
        f.write("\n".join(page).rstrip("\n") + "\n")
    if not quiet:
        print("\n".join(page))
        shown = os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT + os.sep) else path
        print(f"wrote {shown}.json and .md")
    return path


def write_page(path: str, lines) -> str:
    """Write only the Markdown page ``<path>.md`` (re-rendering a committed result from its JSON)."""
    path = os.path.splitext(path)[0]
    with open(path + ".md", "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")
    return path


def meta_of(doc: dict) -> dict:
    """A result's ``meta``; in a result written before this schema, its ``run`` record or its own top-level
    machine, versions, date, commit and command (the same facts)."""
    return doc["meta"] if "meta" in doc else doc.get("run", doc)


def rows_of(doc: dict, legacy: str = "results") -> list:
    """A result's rows: ``doc["rows"]``, or in a result written before this schema ``doc[legacy]``."""
    return doc["rows"] if "rows" in doc else doc[legacy]


def _plain(x):
    """numpy scalars and arrays as plain JSON."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"not JSON-serialisable: {type(x).__name__}")
