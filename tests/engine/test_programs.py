"""Freeing the engine's compiled programs (pgmjax.programs), and the bound MWEM/AIM keep on them."""

import importlib

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import programs
from pgmjax.estimation.estimate import estimate as fit

mw = importlib.import_module("pgmjax.mechanisms.multiplicative_weights.rounds")  # where MWEM's rounds call the engine
aim_module = importlib.import_module("pgmjax.mechanisms.adaptive_iterative")

SIZES = {"a": 4, "b": 3, "c": 5, "d": 2, "e": 3, "f": 4}
CHAIN = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f"), ("a", "f")]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    cols = [rng.integers(0, s, 500) for s in SIZES.values()]
    return pj.Dataset(np.stack(cols, axis=1), pj.Domain(SIZES))


def test_release_frees_and_refits_identically(data):
    ms = pj.noisy_marginals(data, [("a", "b"), ("b", "c")], stddev=5.0, key=jax.random.key(0))
    first = pj.estimate(data.domain, ms, iters=30).marginal(("a", "b"))
    assert programs.compiled_count() > 0
    assert not programs.release_compiled(above=10**6)  # under the threshold: nothing freed
    held = programs.compiled_count()
    assert held > 0
    assert programs.release_compiled()
    assert programs.compiled_count() == 0
    again = pj.estimate(data.domain, ms, iters=30).marginal(("a", "b"))  # recompiled from scratch
    np.testing.assert_allclose(np.asarray(again), np.asarray(first), rtol=1e-6, atol=1e-6)
    assert programs.compiled_count() > 0


def _counts_per_round(monkeypatch, module, limit, run):
    """Run a mechanism with the program limit set to ``limit``; the engine's count after every fit."""
    counts = []

    def spy(*args, **kwargs):
        model = fit(*args, **kwargs)
        counts.append(programs.compiled_count())
        return model

    monkeypatch.setattr(module, "estimate", spy)
    monkeypatch.setattr(module, "MAX_LIVE_PROGRAMS", limit)
    programs.release_compiled()
    run()
    return counts


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_mwem_keeps_the_engine_programs_bounded(data, monkeypatch):
    wl = pj.Workload.benchmark(data.domain, CHAIN, numeric=[])

    def run():
        # dense programs (one per structure) are what the bound is for; size-class ones are shared by structures
        pj.mechanisms.mwem(data, 1.0, key=jax.random.key(0), workload=wl, rounds=4, engine_iters=20, mw_iters=5,
                           fit_options=pj.FitOptions(program="dense"))

    unbounded = _counts_per_round(monkeypatch, mw, 10**6, run)
    bounded = _counts_per_round(monkeypatch, mw, 2, run)
    # Every round fits a new structure: without the bound the programs pile up, past what the bound
    # allows (the check has teeth).
    per_fit = unbounded[0]
    assert all(a < b for a, b in zip(unbounded, unbounded[1:])) and unbounded[-1] > 2 + per_fit, unbounded
    # With it, at most the limit plus the one fit's own programs are alive after any round.
    assert len(bounded) == 4 and max(bounded) <= 2 + per_fit < unbounded[-1], (bounded, unbounded)


def test_aim_keeps_the_engine_programs_bounded(data, monkeypatch):
    def run():
        aim_module.aim(data, 1.0, key=jax.random.key(1), workload=CHAIN, engine_iters=20, final_iters=20, delta=1e-9,
                       fit_options=pj.FitOptions(program="dense"))

    bounded = _counts_per_round(monkeypatch, aim_module, 4, run)
    assert len(bounded) >= 3
    assert max(bounded) <= 4 + bounded[0]


def test_importing_pgmjax_leaves_the_slow_optional_modules_for_later():
    """scipy.stats, scipy.optimize and optax took about half a second of a fresh process's `import pgmjax`,
    the subpackages a fit does not need 0.3 s more, pandas 0.18 s (CHANGELOG.md; the import-time benchmark is retired, in git history); the
    functions that need them import them when called, the subpackages load on first use."""
    import subprocess
    import sys

    slow = ("scipy.stats", "scipy.optimize", "scipy.linalg", "optax", "pandas", "pgmjax.bayes", "pgmjax.history",
            "pgmjax.mechanisms", "pgmjax.rr", "pgmjax.uncertainty", "pgmjax.data.schema", "pgmjax.preprocessing.preprocess")
    code = f"import sys, pgmjax; print(sorted(m for m in {slow!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_lazy_subpackages_load_on_first_use():
    import subprocess
    import sys

    code = ("import pgmjax as pj; from pgmjax import bayes; from pgmjax import *; "
            "print(pj.mechanisms.__name__, bayes.__name__, history.__name__, rr.__name__, uncertainty.__name__, "
            "report_html.__name__, schema.__name__, preprocess.__name__, 'mechanisms' in dir(pj))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["pgmjax.mechanisms", "pgmjax.bayes", "pgmjax.history", "pgmjax.rr",
                                  "pgmjax.uncertainty", "pgmjax.cli.report_html", "pgmjax.data.schema",
                                  "pgmjax.preprocessing.preprocess", "True"]
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        pj.nonexistent  # noqa: B018


def _aim_engine_compiles(data, monkeypatch, program: str, workload=CHAIN, rounds=None,
                         compile_ahead: bool = False) -> tuple[int, set, set]:
    """AIM's engine compiles (its fits' iteration chunks and marginals), and its fits' structures and classes;
    without compiling classes ahead (``compile_ahead``) unless asked, whose guesses would count too."""
    from conftest import count_compiles

    from pgmjax.estimation.routed_losses import stack_routed

    fitted = []

    def spy(*args, **kwargs):
        fitted_now = fit(*args, **kwargs)
        model = fitted_now.model if isinstance(fitted_now, pj.Fit) else fitted_now  # AIM may ask for the report
        # a size-class program's class: its plan's and its measurements' shapes (pgmjax.estimation.routed_losses)
        size = getattr(model.plan, "size", None)
        fitted.append((tuple(model.cliques), size and (size, stack_routed(model.plan, args[1], np.float32).shape)))
        return fitted_now

    monkeypatch.setattr(aim_module, "estimate", spy)
    programs.release_compiled()  # nothing compiled by an earlier test counts as reused
    with count_compiles() as counter:
        aim_module.aim(data, 1.0, key=jax.random.key(1), workload=workload, engine_iters=20, final_iters=20, delta=1e-9,
                       fit_options=pj.FitOptions(program=program, compile_ahead=compile_ahead),
                       **({} if rounds is None else {"rounds": rounds}))
    engine = [n for n in counter.names if n in ("jit(_chunk)", "jit(marginals)")]
    return len(engine), {s for s, _ in fitted}, {c for _, c in fitted}


def test_aim_compiles_per_size_class_not_per_structure(data, monkeypatch):
    routed, structures, classes = _aim_engine_compiles(data, monkeypatch, "size_class")
    dense, dense_structures, _ = _aim_engine_compiles(data, monkeypatch, "dense")
    assert structures == dense_structures and len(classes) < len(structures), (structures, classes)
    # two programs per class (the iteration chunk and the model's marginals), against two per structure
    assert routed <= 2 * len(classes) < dense == 2 * len(structures), (routed, classes, dense, structures)


def test_aim_compiling_ahead_compiles_at_most_one_more_program_per_class_and_releases_the_same(data, monkeypatch):
    """With its rounds compiling the next size class ahead (``FitOptions(compile_ahead=True)``), AIM compiles at most
    one guessed class's pair of programs more than the classes it meets, and releases the same model as without."""
    routed, structures, classes = _aim_engine_compiles(data, monkeypatch, "size_class", compile_ahead=True)
    assert routed <= 2 * len(classes) + 2, (routed, classes)
    runs = [aim_module.aim(data, 1.0, key=jax.random.key(1), workload=CHAIN, engine_iters=20, final_iters=20,
                           delta=1e-9, synthetic=False, fit_options=pj.FitOptions(compile_ahead=flag))
            for flag in (True, False)]
    for c in runs[0].model.cliques:
        np.testing.assert_array_equal(runs[0].model.marginal(c), runs[1].model.marginal(c))


def test_an_aim_run_on_a_generated_table_of_small_attributes_compiles_at_most_four_engine_programs(monkeypatch):
    """A generated table of 16 binary attributes (NLTCS's shape): every model AIM grows through is small and
    shallow, so all its size-class fits share the smallest class (:data:`pgmjax.graph.routed_steps.WINDOW_COSTS`):
    at most two classes (their measurements' vectors may double), two programs each (the iteration chunk and the
    model's marginals), however many structures its rounds fit."""
    rng = np.random.default_rng(5)
    hidden = rng.integers(0, 2, 800)
    cols = [np.where(rng.random(800) < 0.6, hidden, rng.integers(0, 2, 800)) for _ in range(16)]
    table = pj.Dataset(np.stack(cols, axis=1), pj.Domain({f"b{i}": 2 for i in range(16)}))
    routed, structures, classes = _aim_engine_compiles(table, monkeypatch, "size_class", workload=None, rounds=40)
    assert len(structures) >= 10 and len(classes) <= 2, (len(structures), classes)
    assert routed <= 4, (routed, classes)
