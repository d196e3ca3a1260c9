"""Repeated runs of a mechanism compile nothing new once its structure has been seen (issue 15).

Before, every ``dualquery()`` call compiled its likelihood afresh (the transcript's numbers were
constants of the program) and JAX kept every program: about 3 MB and 48 memory maps per call, until
XLA:CPU ran out of mappings after ~1,300 calls. The long run (2,000 calls, memory recorded) is
``bench/repeated_runs.py``; here the property itself: a second and third call with the same structure
and a different budget and key compile no program.

Mechanisms whose structure depends on their private selections (MWEM, AIM, MST, PrivBayes) compile
what a new structure needs; for them a repeated call with the same selections compiles nothing, and
the engine's live programs stay bounded (``pgmjax.programs.release_compiled``).
"""

import importlib

import jax
import numpy as np
import pytest
from conftest import count_compiles

import pgmjax as pj
from pgmjax.mechanisms import QuerySet, dualquery, dualquery_plan, hdmm, mldp, privbayes
from pgmjax.programs import compiled_count, release_compiled

PB = importlib.import_module("pgmjax.mechanisms.bayesian_network.front_end")  # where privbayes reads MAX_LIVE_PROGRAMS


def _tiny(n=300, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = (a + (rng.random(n) < 0.3)) % 3
    c = (b + rng.integers(0, 2, n)) % 2
    return pj.Dataset(np.stack([a, b, c], 1), {"a": 4, "b": 3, "c": 2})


@pytest.fixture(scope="module")
def tiny():
    return _tiny()


def _compiles(fn):
    with count_compiles() as c:
        out = fn()
    return c.count, out


def test_dualquery_second_and_third_calls_compile_nothing(tiny):
    w = pj.Workload.benchmark(tiny.domain, [("a", "b"), ("b", "c")], numeric=["a"])

    def run(eps, seed):
        return dualquery(tiny, eps, 1e-3, key=jax.random.key(seed), workload=w, samples=20, engine_iters=30)

    rounds = [dualquery_plan(e, 1e-3, records=len(tiny), eta=2.0, samples=20)["rounds"] for e in (1.0, 2.0, 3.0)]
    assert len(set(rounds)) == 3  # different numbers of rounds: the padding is what makes them share programs
    # Start with no live programs: programs left by the worker's earlier test files could push the warm-up's past
    # MAX_LIVE_PROGRAMS, and the next fit's bound_compiled would then free them (a recompile, not a leak).
    release_compiled()
    run(1.0, 0)
    for eps, seed in [(2.0, 1), (3.0, 2)]:
        n, res = _compiles(lambda: run(eps, seed))
        assert n == 0, f"epsilon {eps}: {n} programs compiled"
        assert res.info.rounds == rounds[int(eps) - 1]
        assert np.isfinite(res.report.loss)  # the final fit's report (MechanismResult.report)
    # a structurally equal workload built again is the same structure
    w2 = pj.Workload.benchmark(tiny.domain, [("a", "b"), ("b", "c")], numeric=["a"])
    n, _ = _compiles(lambda: dualquery(tiny, 1.5, 1e-3, key=jax.random.key(4), workload=w2, samples=20, engine_iters=30))
    assert n == 0


def test_dualquery_padded_loss_equals_the_unpadded_likelihood(tiny):
    # The padded rounds must add nothing: the loss equals nll(answers(mu)) at any marginals.
    w = pj.Workload.benchmark(tiny.domain, [("a", "b"), ("b", "c")], numeric=["a"])
    res = dualquery(tiny, 3.0, 1e-3, key=jax.random.key(0), workload=w, samples=20, engine_iters=0)
    tr = res.info.transcript
    loss = tr.loss()
    assert loss.numbers[2].shape[0] == 16 > tr.rounds  # records padded to the bucket
    rng = np.random.default_rng(0)
    for _ in range(3):
        mu = {c: jax.numpy.asarray(rng.random(tiny.domain.shape_of(c)) * 50) for c in [("a", "b"), ("b", "c")]}
        assert float(loss(mu)) == pytest.approx(float(tr.nll(tr.answers(mu))), rel=1e-10)
        g = jax.grad(lambda m: loss(m))(mu)
        assert all(np.all(np.isfinite(np.asarray(v))) for v in g.values())


def test_mldp_and_hdmm_second_and_third_calls_compile_nothing(tiny):
    training = QuerySet.cells(tiny.domain, ("a", "b")) + QuerySet.cells(tiny.domain, ("b", "c"))
    w = pj.Workload.benchmark(tiny.domain, [("a", "b"), ("b", "c")], numeric=["a"])
    runs = {
        "mldp": lambda eps, seed: mldp(tiny, eps, key=jax.random.key(seed), training=training, engine_iters=30),
        "hdmm": lambda eps, seed: hdmm(tiny, eps, key=jax.random.key(seed), workload=w, engine_iters=30, restarts=2, synthetic=False),
    }
    for name, run in runs.items():
        run(1.0, 0)
        for eps, seed in [(2.0, 1), (0.5, 2)]:
            n, _ = _compiles(lambda: run(eps, seed))
            assert n == 0, f"{name} at epsilon {eps}: {n} programs compiled"


def test_privbayes_same_structure_compiles_nothing_and_dead_programs_are_freed(tiny, monkeypatch):
    # The network is a private selection: the same key and budget give the same structure.
    run = lambda seed: privbayes(tiny, 1.0, key=jax.random.key(seed), engine_iters=20)  # noqa: E731
    # Start from no engine programs: earlier tests in this worker may hold up to the threshold, and a run
    # that crosses it frees them (the second run would then recompile for a reason that is not this test's).
    release_compiled()
    first = run(0)
    n, again = _compiles(lambda: run(0))
    assert n == 0 and again.info.network == first.info.network
    # With the threshold at 0 every fit starts by freeing the engine's programs: what is held after a run
    # is that run's own, not the sum over the networks seen (4 networks, ~3-6 engine programs each).
    monkeypatch.setattr(PB, "MAX_LIVE_PROGRAMS", 0)
    held = []
    for seed in range(1, 5):
        run(seed)
        held.append(compiled_count())
    assert max(held) <= 8, held
