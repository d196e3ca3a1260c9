"""``estimate`` in a loop over new structures keeps the engine's compiled programs bounded (issue 40, item 6).

``estimate`` and ``estimate_batch`` call ``pgmjax.compiler.bound_compiled(MAX_LIVE_PROGRAMS)`` before they plan
a fit: once more than ``MAX_LIVE_PROGRAMS`` programs are live, pgmjax's are freed.
Before, each new structure left its programs (about 4.4 MB and 130 memory maps) for the life of the process
unless the user called ``pgmjax.release_compiled``; 2,000 structures were measured by ``bench/memory_loop.py``
(retired at commit 8f1d3f4; its results stay in ``bench/results/memory/memory_loop_cpu.md``).
"""

import numpy as np
import pytest

import pgmjax as pj
from pgmjax import compiler, programs

LIMIT = 6


@pytest.fixture
def bounded(monkeypatch):
    pj.release_compiled()
    monkeypatch.setattr(compiler, "MAX_LIVE_PROGRAMS", LIMIT)
    yield
    pj.release_compiled()


def _fit(i: int, rng) -> None:
    dom = pj.Domain({"a": 2 + i % 5, "b": 2 + i // 5})  # a new structure for every i < 25
    # dense programs, one per structure: what the bound is for (size-class programs are shared by structures)
    pj.estimate(dom, [pj.Measurement(("a", "b"), rng.random(dom.size()) + 1)], iters=2, program="dense")


def test_a_loop_over_new_structures_holds_a_bounded_number_of_programs(bounded):
    rng = np.random.default_rng(0)
    counts = []
    # 12 new structures: a fit compiles 2 programs, so the live count cycles 2, 4, 6, 8 and is freed every
    # fourth fit, three times in this loop (twice after the first LIMIT fits); unbounded it would reach 24.
    for i in range(12):
        _fit(i, rng)
        counts.append(programs.compiled_count())
    per_fit = max(counts[0], 1)  # the programs one fit compiles
    # at most LIMIT before a fit, plus that fit's own
    assert max(counts) <= LIMIT + per_fit, counts
    assert min(counts[LIMIT:]) < max(counts), counts  # freed along the way, not only held low
    # a structure fitted again and again under the limit is never freed (nor recompiled)
    pj.release_compiled()
    _fit(23, rng)
    held = programs.compiled_count()
    for _ in range(4):
        _fit(23, rng)
        assert programs.compiled_count() == held


def test_bound_compiled_frees_only_above_its_limit():
    pj.release_compiled()
    _fit(3, np.random.default_rng(0))
    n = programs.compiled_count()
    assert n > 0
    assert not programs.bound_compiled(n) and programs.compiled_count() == n
    assert not programs.bound_compiled(0) and programs.compiled_count() == n  # 0: never free
    assert not programs.bound_compiled(float("inf")) and programs.compiled_count() == n
    assert programs.bound_compiled(n - 1) and programs.compiled_count() == 0


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_a_loop_of_batched_fits_over_new_structures_is_bounded_too(bounded):
    rng = np.random.default_rng(1)
    counts = []
    for i in range(10):
        dom = pj.Domain({"a": 2 + i % 5, "b": 2 + i // 5})
        batch = pj.BatchedMeasurement(("a", "b"), rng.random((2, dom.size())) + 1)
        pj.estimate_batch(dom, [batch], iters=2)
        counts.append(_batched_programs())
    per_fit = max(counts[0], 1)
    assert max(counts) <= LIMIT + per_fit, counts


def _batched_programs() -> int:
    """The programs estimate_batch's own jitted functions hold (counted here, not by compiled_count)."""
    from pgmjax.estimation import batch

    fns = (getattr(batch, n, None) for n in ("_vmapped_start", "_advance", "_vmapped_started", "_loss"))
    return sum(f._cache_size() for f in fns if hasattr(f, "_cache_size"))
