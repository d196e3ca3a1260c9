"""The engine's programs kept on disk by structure (pgmjax.program_store): same results, loaded in a later
process, never a program of another structure, settings or source; and pickled domains and plans that keep
their hash in another process."""

import json
import pickle
import subprocess
import sys
from dataclasses import dataclass

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import program_store, programs
from pgmjax.fit.estimation import MirrorDescent
from pgmjax.graph.oracle_plan import make_plan
from pgmjax.model import graphical_model

# A fit in a fresh process: its stats, loss and potentials (as lists) printed as JSON.
FIT = """
import json, sys
import numpy as np
import pgmjax as pj
from pgmjax import program_store, programs
if sys.argv[1] != "-":
    programs.enable_compilation_cache(sys.argv[1])
dom = pj.Domain({"a": 3, "b": 4, "c": 5})
rng = np.random.default_rng(7)
ms = [pj.Measurement(("a", "b"), rng.uniform(0, 40, (3, 4)), stddev=2.0),
      pj.Measurement(("b", "c"), rng.uniform(0, 30, (4, 5)), stddev=2.0)]
model = pj.estimate(dom, ms, iters=30, chunk=10)
others = {
    "dual_averaging": pj.estimate(dom, ms, method="dual_averaging", iters=20, chunk=10),
    "lbfgs": pj.estimate(dom, ms, method="lbfgs", iters=20, chunk=10),
    "l1": pj.estimate(dom, ms, loss="l1", iters=40, chunk=10),
}
batch = pj.estimate_batch(dom, [ms, [pj.Measurement(m.clique, np.asarray(m.y) * 1.1, stddev=2.0) for m in ms]],
                          iters=20, chunk=10)
answers = {k: np.asarray(m.marginal(("a", "c"))).tolist() for k, m in others.items()}
answers["batch"] = np.asarray(batch.marginal(("a", "c"))).tolist()
print(json.dumps({"stats": program_store.stats, "loss": float(model.loss), "answers": answers,
                  "theta": {k: np.asarray(v).tolist() for k, v in model.theta.items()}}))
"""


def _fit(folder) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if k != programs.CACHE_ENV}  # "-": no cache, whatever the caller set
    out = subprocess.run([sys.executable, "-c", FIT, str(folder)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_later_process_loads_the_program_and_gets_the_same_model(tmp_path):
    first = _fit(tmp_path)
    assert first["stats"]["written"] >= 1 and first["stats"]["loaded"] == 0, first["stats"]
    files = list((tmp_path / "programs").iterdir())
    assert len(files) == first["stats"]["written"]
    later = _fit(tmp_path)
    assert later["stats"]["loaded"] == first["stats"]["written"] and later["stats"]["written"] == 0, later["stats"]
    assert later["loss"] == first["loss"]
    assert later["theta"] == first["theta"]  # the same executable: bit for bit
    assert later["answers"] == first["answers"]  # other methods, the L1 loss, a batch, and the models' answers
    plain = _fit("-")  # no store, ordinary jit
    assert plain["stats"] == {"loaded": 0, "written": 0, "bypassed": 0, "failed": 0}
    assert plain["loss"] == pytest.approx(first["loss"], rel=1e-6)
    for k in plain["theta"]:
        np.testing.assert_allclose(plain["theta"][k], first["theta"][k], rtol=1e-5, atol=1e-5)
    for k in plain["answers"]:
        np.testing.assert_allclose(plain["answers"][k], first["answers"][k], rtol=1e-4, atol=1e-3)


def test_a_damaged_file_is_compiled_again(tmp_path):
    first = _fit(tmp_path)
    for f in (tmp_path / "programs").iterdir():
        f.write_bytes(b"not a program")
    again = _fit(tmp_path)
    assert again["stats"]["failed"] == first["stats"]["written"], again["stats"]
    assert again["stats"]["written"] == first["stats"]["written"]
    assert again["theta"] == first["theta"]


def test_canonical_form_is_order_and_salt_free():
    c = program_store.canonical
    assert c(frozenset({"r000x00", "r001x02", "r002x01"})) == c(frozenset({"r002x01", "r000x00", "r001x02"}))
    assert c(pj.Domain({"a": 2, "b": 3})) != c(pj.Domain({"b": 3, "a": 2}))  # attribute order is the model's
    assert c(pj.Domain({"a": 2, "b": 3})) != c(pj.Domain({"a": 2, "b": 4}))
    assert c(np.arange(2000)) != c(np.arange(2000) + (np.arange(2000) == 1000))  # content, not a shortened repr
    assert c((1, 2)) != c([1, 2]) and c(1) != c(1.0) and c(True) != c(1)

    class Opaque:
        pass

    with pytest.raises(program_store.Uncacheable, match="Opaque"):
        c(Opaque())
    with pytest.raises(program_store.Uncacheable):
        c(lambda x: x)  # a function's behaviour is not in its name


def _key(domain, estimator=None, y=1.0, options=None):
    plan = make_plan(domain, [("a", "b")])
    static = {"estimator": estimator or MirrorDescent()}
    return program_store.key("f", options or {"opt": True}, static, ((plan, plan.zeros(), jax.numpy.asarray(y)), {}))


def test_key_follows_structure_settings_and_source(monkeypatch):
    dom = pj.Domain({"a": 2, "b": 3})
    base = _key(dom)
    assert base is not None and base == _key(dom, y=5.0)  # numbers are arguments, not structure
    assert _key(pj.Domain({"a": 2, "b": 4})) != base
    assert _key(dom, MirrorDescent(momentum=0.5)) != base
    assert _key(dom, y=np.ones(2, np.float32)) != base  # another shape
    assert _key(dom, y=np.int32(1)) != base  # another dtype
    assert _key(dom, options={"opt": False}) != base  # other compiler options
    digest = program_store.source_digest()
    monkeypatch.setattr(program_store, "source_digest", lambda: digest[::-1])
    assert _key(dom) != base  # edited pgmjax source: never the old program


def test_key_refuses_traced_and_unknown_arguments():
    dom = pj.Domain({"a": 2, "b": 3})
    plan = make_plan(dom, [("a", "b")])

    @dataclass(frozen=True)
    class Settings:
        fn: object

    assert program_store.key("f", {}, {"s": Settings(print)}, ((plan,), {})) is None

    seen = []

    @jax.jit
    def traced(x):
        seen.append(program_store.key("f", {}, {}, ((x,), {})))
        return x

    traced(jax.numpy.ones(3))
    assert seen == [None]


def test_stored_programs_in_process_are_counted_and_released(tmp_path):
    dom = pj.Domain({"a": 2, "b": 3, "c": 4})
    plan = make_plan(dom, [("a", "b"), ("b", "c")])
    theta = plan.zeros()
    programs.release_compiled()
    before = dict(program_store.stats)
    program_store.enable(tmp_path)
    try:
        mu, log_z = graphical_model._marginals_jit(plan, theta, 24.0)
        assert program_store.stats["written"] == before["written"] + 1
        assert programs.compiled_count() >= 1
        mu2, _ = graphical_model._marginals_jit(plan, theta, 24.0)  # in memory now: nothing written or loaded
        assert program_store.stats["written"] == before["written"] + 1
        assert program_store.stats["loaded"] == before["loaded"]
        np.testing.assert_allclose(float(log_z), np.log(24), rtol=1e-6)
        for k in mu:
            np.testing.assert_array_equal(np.asarray(mu[k]), np.asarray(mu2[k]))
        assert programs.release_compiled()
        assert programs.compiled_count() == 0
        graphical_model._marginals_jit(plan, theta, 24.0)  # released: loaded back from the folder
        assert program_store.stats["loaded"] == before["loaded"] + 1
    finally:
        program_store.disable()
        programs.release_compiled()


PICKLED = """
import pickle, sys
import pgmjax as pj
from pgmjax.graph.oracle_plan import make_plan
plan = make_plan(pj.Domain({"name": 3, "other": 4}), [("name", "other")])
sys.stdout.buffer.write(pickle.dumps((plan.domain, plan.static)))
"""


def test_pickled_domain_and_plan_keep_their_hash_in_another_process():
    """String hashes are salted per process: a hash pickled with the object would make an equal object of
    this process a different dict and jit key."""
    out = subprocess.run([sys.executable, "-c", PICKLED], capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    domain, static = pickle.loads(out.stdout)
    plan = make_plan(pj.Domain({"name": 3, "other": 4}), [("name", "other")])
    assert domain == plan.domain and hash(domain) == hash(plan.domain)
    assert static == plan.static and hash(static) == hash(plan.static)
    assert {plan.domain: 1}[domain] == 1


def test_a_call_the_store_cannot_key_runs_the_ordinary_program(tmp_path):
    from pgmjax.compiler import jit

    class Opaque:  # hashable (jit's static rule) but with no canonical form
        factor = 3.0

    def scaled(how, x):
        return x * how.factor

    def doubled(x):
        return x * 2.0

    doubled_here = jit(doubled, engine=True, loop_emitters=lambda x: True)  # a user's function: never stored
    scaled.__module__ = "pgmjax.example"  # as if pgmjax's own, so only its argument keeps it out
    scaled = jit(scaled, static_argnames=("how",), engine=True, loop_emitters=lambda how, x: True)
    before = dict(program_store.stats)
    program_store.enable(tmp_path)
    try:
        how = Opaque()
        for _ in range(2):
            np.testing.assert_array_equal(np.asarray(scaled(how, jax.numpy.arange(3.0))), [0.0, 3.0, 6.0])
            np.testing.assert_array_equal(np.asarray(doubled_here(jax.numpy.arange(3.0))), [0.0, 2.0, 4.0])
        assert program_store.stats["bypassed"] == before["bypassed"] + 2
        assert program_store.stats["written"] == before["written"]
        assert not any(tmp_path.iterdir())
        assert scaled._cache_size() == 1 and doubled_here._cache_size() == 1  # the ordinary jitted programs, once
    finally:
        program_store.disable()


def test_types_from_outside_pgmjax_are_never_keyed():
    """A user's class can change its code without changing its data: no key can tell two versions apart."""

    @dataclass(frozen=True)
    class UserLoss:
        weight: float = 1.0

    with pytest.raises(program_store.Uncacheable, match="outside pgmjax"):
        program_store.canonical(UserLoss())
    with pytest.raises(program_store.Uncacheable, match="outside pgmjax"):
        program_store.canonical(UserLoss)
    assert program_store.canonical(MirrorDescent()) == program_store.canonical(MirrorDescent())


def test_the_folder_keeps_the_programs_used_last_within_its_bound(tmp_path, monkeypatch):
    import os
    import time

    for i, name in enumerate(["old", "used", "new"]):
        (tmp_path / name).write_bytes(b"x" * 100)
        os.utime(tmp_path / name, (time.time() - 100 + i, time.time() - 100 + i))
    os.utime(tmp_path / "used")  # loaded just now
    program_store._evict(tmp_path, 250)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "used"]
    program_store._evict(tmp_path, 100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["used"]
