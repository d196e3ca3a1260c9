"""How large a model may be: its junction tree's size, checked against a limit before any table is allocated.

A model holds one table per clique of its junction tree, and the triangulation can make those cliques far
larger than the measured ones (a 5x5 grid of pairwise measurements over attributes of 50 values has
cliques of six attributes: 4.8e10 cells in all). :func:`pgmjax.graph.oracle_plan.make_plan`, which every
fit goes through (``estimate``, ``estimate_batch``, warm starts, loaded models, the mechanisms' fits),
computes the tree's cells in Python integers first and raises :class:`ModelTooLarge` naming the cells,
the bytes and the largest clique when they break the limit, instead of NumPy's "Unable to allocate" or
XLA's ``RESOURCE_EXHAUSTED`` (or, on huge domains, an overflow) later.

Two kinds of check read the same limit, which bounds a run's **peak** working set (not one copy):

* :func:`check_cliques` / :func:`check_tree` / :func:`check_table` count ``bytes_per_cell`` bytes per cell
  (default :data:`BYTES_PER_CELL`, one float64 copy) for what holds about one copy (a loaded model, a
  mechanism's matrices);
* :func:`check_peak` takes a peak computed by the code that allocates it: a fit's
  (:func:`pgmjax.estimation.memory.fit_peak_bytes`: its method's copies of the junction tree's tables in its
  dtype), a sampler's (:func:`pgmjax.model.sampling.sampler_peak_bytes`).

Because the limit is on the peak, the default is :data:`DEFAULT_FRACTION` (half) of the memory the tables
live in: the other half for the system, the data and other programs.

The limit, first found of:

1. the ``max_bytes`` argument of the check (:func:`check_tree`, ``make_plan(..., max_bytes=)``);
2. :func:`set_max_model_bytes` (process-wide, until reset with None);
3. the environment variable ``PGMJAX_MAX_MODEL_BYTES`` (:data:`ENV`, bytes; ``inf``, ``none`` or ``0`` for no
   limit), read once, when pgmjax is imported (:data:`pgmjax.settings.PROCESS`): no check reads the environment;
4. :data:`DEFAULT_FRACTION` of the accelerator's memory where JAX's default backend is a GPU or TPU and
   reports it (``memory_stats()["bytes_limit"]``), else of the machine's physical memory
   (``os.sysconf``); no limit where neither is known.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable

from .. import settings
from ..checks import check_real
from ..data.domain import Clique, Domain

#: The environment variable holding the limit in bytes (read once, at import: :data:`pgmjax.settings.PROCESS`).
ENV = settings.MAX_MODEL_BYTES_ENV
#: Bytes counted per cell: one float64 copy of the tables.
BYTES_PER_CELL = 8
#: The default limit's share of the memory the tables live in: a limit on a run's peak working set (a fit
#: counts every copy its method makes, :mod:`pgmjax.estimation.memory`), leaving the rest to the system and the data.
DEFAULT_FRACTION = 0.5

_override: float | None = None
_device_memory: int | None = None


class ModelTooLarge(ValueError):
    """A model (or a table a mechanism would build) breaks the size limit; raised before anything is allocated.

    Attributes:
        cells: the cells of the whole model (or table), a Python int.
        bytes: ``cells * BYTES_PER_CELL``.
        limit: the limit in bytes it breaks.
        clique: the largest clique (or the attribute's one-tuple), or None.
        clique_cells: that clique's cells.
    """

    def __init__(self, message: str, *, cells: int, bytes: int, limit: float, clique: Clique | None = None,
                 clique_cells: int | None = None):
        super().__init__(message)
        self.cells, self.bytes, self.limit = cells, bytes, limit
        self.clique, self.clique_cells = clique, clique_cells


def set_max_model_bytes(limit: float | None) -> float | None:
    """Set the process-wide limit in bytes (None: back to ``PGMJAX_MAX_MODEL_BYTES`` or the default).

    Args:
        limit: bytes (``math.inf`` for no limit), or None.

    Returns:
        The previous setting (None where there was none), to restore it.

    Example:
        >>> previous = set_max_model_bytes(2**30)
        >>> max_model_bytes()
        1073741824.0
        >>> _ = set_max_model_bytes(previous)
    """
    global _override
    previous = _override
    _override = None if limit is None else _positive_limit(limit, "set_max_model_bytes")
    return previous


@contextlib.contextmanager
def limited(limit: float | None):
    """:func:`set_max_model_bytes` for a ``with`` block, restored after it (None: leave the limit as it is).

    The one place a front-end's ``max_model_mb`` (MST) or ``pgmjax run --max-model-mb`` sets the limit every
    check of the run reads (the mechanism's up-front checks, every fit's plan, the intervals' refits).

    Example:
        >>> with limited(2**20):
        ...     max_model_bytes()
        1048576.0
    """
    if limit is None:
        yield
        return
    previous = set_max_model_bytes(limit)
    try:
        yield
    finally:
        set_max_model_bytes(previous)


def max_model_bytes(max_bytes: float | None = None) -> float:
    """The limit in force, in bytes (``math.inf``: none); see the module docstring for the order.

    Args:
        max_bytes: an explicit limit, returned as it is (checked) where given.

    Returns:
        The limit as a float.
    """
    if max_bytes is not None:
        return _positive_limit(max_bytes, "max_bytes")
    if _override is not None:
        return _override
    env = settings.PROCESS.max_model_bytes
    if env:
        if env.lower() in ("inf", "none", "0"):
            return math.inf
        try:
            value = float(env)
        except ValueError:
            raise ValueError(f"{ENV}={env!r}: expected a number of bytes (e.g. 8e9), or 'inf' for no limit") from None
        return _positive_limit(value, ENV)
    return default_max_model_bytes()


def default_max_model_bytes() -> float:
    """:data:`DEFAULT_FRACTION` of the accelerator's memory (where JAX runs on one that reports it) or of
    the physical memory; ``math.inf`` where neither is known."""
    memory = _accelerator_memory() or physical_memory()
    return DEFAULT_FRACTION * memory if memory else math.inf


def physical_memory() -> int | None:
    """The machine's physical memory in bytes (``os.sysconf``), or None where the system does not say."""
    try:
        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return pages * page if pages > 0 and page > 0 else None


def _accelerator_memory() -> int | None:
    """The memory of JAX's default device when that is a GPU or TPU that reports it; None otherwise.

    Asking starts JAX's backends: the checks that get here (a fit's plan, a front-end's up-front checks) run
    just before the computation that would start them anyway. Found once per process.
    """
    global _device_memory
    if _device_memory is not None:
        return _device_memory
    try:
        import jax

        if jax.default_backend() == "cpu":
            return None
        stats = jax.devices()[0].memory_stats() or {}
        limit = int(stats.get("bytes_limit", 0))
    except Exception:  # an unusual backend: fall back on the host's memory
        return None
    if limit > 0:
        _device_memory = limit
        return limit
    return None


def _positive_limit(value, name: str) -> float:
    x = check_real(value, "the model-size limit (bytes)", name)
    if not x > 0:
        raise ValueError(f"{name}: the model-size limit must be positive bytes (math.inf for none), got {value!r}")
    return x


def _source(max_bytes) -> str:
    if max_bytes is not None:
        return "max_bytes"
    if _override is not None:
        return "set_max_model_bytes"
    if settings.PROCESS.max_model_bytes:
        return ENV
    acc = _accelerator_memory()
    if acc:
        return f"{DEFAULT_FRACTION:.0%} of the device's {_fmt_bytes(acc)}"
    return f"{DEFAULT_FRACTION:.0%} of this machine's {_fmt_bytes(physical_memory() or 0)} of RAM"


def _fmt_bytes(n: float) -> str:
    if n >= 10**300:  # beyond floats: a Python int of hundreds of digits
        return f"about 10^{len(str(int(n))) - 1} bytes"
    for unit, scale in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.0f} bytes"


def _fmt_cells(n: int) -> str:
    return f"{n:,}" if n < 10**15 else f"{float(n):.4g}" if n < 10**300 else f"about 10^{len(str(n)) - 1}"


def _hint() -> str:
    return ("; fit fewer or smaller cliques (or compress the domain), or raise the limit: "
            "PGMJAX_MAX_MODEL_BYTES=<bytes> or pgmjax.set_max_model_bytes(<bytes>)")


def clique_cells(domain: Domain, clique: Iterable[str]) -> int:
    """The cells of ``clique``'s table, a Python int (exact, never overflows)."""
    return math.prod(int(domain[a]) for a in clique)


def check_cliques(domain: Domain, cliques: Iterable[Clique], where: str | None = None, max_bytes: float | None = None,
                  what: str = "the model's junction tree", source: str | None = None, hint: str | None = None) -> int:
    """Raise :class:`ModelTooLarge` when tables over ``cliques`` (together) break the limit.

    Args:
        domain: the domain.
        cliques: the tables' cliques (the junction tree's, for a model).
        where: who asks, for the message (``"hdmm"``, ...; None: no prefix).
        max_bytes: an explicit limit (default :func:`max_model_bytes`).
        what: what the tables are, for the message.
        source: where an explicit limit comes from, for the message (default ``"max_bytes"``; a mechanism's
            model-size cap names itself, e.g. ``"max_model_mb=80"``).
        hint: what to do about it, for the message (default: fewer or smaller cliques, or a higher limit and how
            to set it).

    Returns:
        The total cells (a Python int).

    Raises:
        ModelTooLarge: naming the cells, the bytes, the limit and where it comes from, and the largest clique.

    Example:
        >>> dom = Domain({"a": 10**5, "b": 10**5, "c": 2})
        >>> check_cliques(dom, [("a", "b"), ("c",)], "demo", max_bytes=2**30)
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: demo: the model's junction tree: 10,000,000,002 cells (74.51 GB as float64 tables), above the limit of 1 GB (max_bytes); its largest clique ('a', 'b') has 10,000,000,000 cells (74.51 GB); fit fewer or smaller cliques (or compress the domain), or raise the limit: PGMJAX_MAX_MODEL_BYTES=<bytes> or pgmjax.set_max_model_bytes(<bytes>)
    """
    sizes = [(clique_cells(domain, c), tuple(c)) for c in cliques]
    cells = sum(n for n, _ in sizes)
    limit = max_model_bytes(max_bytes)
    nbytes = cells * BYTES_PER_CELL
    if nbytes > limit:
        big_cells, big = max(sizes, key=lambda s: s[0])
        raise ModelTooLarge(
            f"{where + ': ' if where else ''}{what}: {_fmt_cells(cells)} cells ({_fmt_bytes(nbytes)} as float64 tables), above the "
            f"limit of {_fmt_bytes(limit)} ({source or _source(max_bytes)}); its largest clique {big} has "
            f"{_fmt_cells(big_cells)} cells ({_fmt_bytes(big_cells * BYTES_PER_CELL)}){'; ' + hint if hint else _hint()}",
            cells=cells, bytes=nbytes, limit=limit, clique=big, clique_cells=big_cells,
        )
    return cells


def check_tree(tree, where: str | None = None, max_bytes: float | None = None) -> int:
    """:func:`check_cliques` over a :class:`~pgmjax.graph.junction.JunctionTree`'s cliques.

    Example:
        >>> from pgmjax.graph.junction import junction_tree
        >>> check_tree(junction_tree(Domain({"a": 2, "b": 3}), [("a", "b")]))
        6
    """
    return check_cliques(tree.domain, tree.cliques, where, max_bytes)


def check_table(domain: Domain, clique: Iterable[str], where: str, what: str, max_bytes: float | None = None,
                entries: int | None = None) -> int:
    """Raise :class:`ModelTooLarge` when one array a mechanism would build over ``clique`` breaks the limit.

    Args:
        domain: the domain.
        clique: the attributes (an attribute's one-tuple for a per-attribute array).
        where: who asks (``"mst"``, ``"hdmm"``, ...).
        what: what the array is, for the message (``"the one-way marginal"``, ``"the identity query"``).
        max_bytes: an explicit limit (default :func:`max_model_bytes`).
        entries: its entries when not the clique's cells (e.g. ``n * n`` for a matrix over an attribute).

    Returns:
        The entries (a Python int).

    Example:
        >>> check_table(Domain({"a": 10**200}), ("a",), "mst", "the one-way marginal")
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: mst: the one-way marginal of ('a',): 1e+200 cells (7.276e+188 TB as float64), above the limit ...
    """
    clique = tuple(clique)
    cells = clique_cells(domain, clique) if entries is None else int(entries)
    limit = max_model_bytes(max_bytes)
    nbytes = cells * BYTES_PER_CELL
    if nbytes > limit:
        size = " x ".join(str(domain[a]) for a in clique)
        raise ModelTooLarge(
            f"{where}: {what} of {clique}: {_fmt_cells(cells)} cells ({_fmt_bytes(nbytes)} as float64), above the "
            f"limit of {_fmt_bytes(limit)} ({_source(max_bytes)}); the attribute sizes are {size}{_hint()}",
            cells=cells, bytes=nbytes, limit=limit, clique=clique, clique_cells=cells,
        )
    return cells


def check_peak(nbytes: int, where: str | None, what: str, detail: str = "", max_bytes: float | None = None, *,
               cells: int = 0, clique: Clique | None = None, clique_cells: int | None = None,
               hint: str | None = None) -> int:
    """Raise :class:`ModelTooLarge` when a computed peak working set ``nbytes`` breaks the limit.

    Args:
        nbytes: the peak in bytes (a Python int), counted by the code that allocates it.
        where: who asks (``"estimate"``, ``"hdmm"``, ...; None: no prefix).
        what: what peaks, for the message (``"the mirror_descent fit's peak working set"``).
        detail: how it is counted, for the message (the copies, the largest clique).
        max_bytes: an explicit limit (default :func:`max_model_bytes`).
        cells, clique, clique_cells: carried on the error (the model's cells, its largest clique).
        hint: what to do instead (default: smaller cliques or a higher limit).

    Returns:
        ``nbytes``.

    Example:
        >>> check_peak(3 * 2**30, "demo", "the fit's peak working set", "8 float32 copies", max_bytes=2**30)
        Traceback (most recent call last):
        ...
        pgmjax.graph.size_limit.ModelTooLarge: demo: the fit's peak working set: 3 GB (8 float32 copies), above the limit of 1 GB (max_bytes); fit fewer or smaller cliques (or compress the domain), or raise the limit: PGMJAX_MAX_MODEL_BYTES=<bytes> or pgmjax.set_max_model_bytes(<bytes>)
    """
    limit = max_model_bytes(max_bytes)
    if nbytes > limit:
        raise ModelTooLarge(
            f"{where + ': ' if where else ''}{what}: {_fmt_bytes(nbytes)}{f' ({detail})' if detail else ''}, above the "
            f"limit of {_fmt_bytes(limit)} ({_source(max_bytes)}){_hint() if hint is None else hint}",
            cells=cells, bytes=nbytes, limit=limit, clique=clique, clique_cells=clique_cells,
        )
    return nbytes


def fmt_bytes(n: float) -> str:
    """``n`` bytes for a message (``"1.5 GB"``; huge Python ints as a power of ten)."""
    return _fmt_bytes(n)
