"""One model split over several devices (``estimate(..., devices=4)``; forced host devices).

Run in a fresh interpreter, since the device count is fixed when JAX starts. In float64 (where the two runs'
arithmetic differs only by the order of a few sums) the model split over 4 devices answers as the one on one
device; its potentials stay split along the slot axis; the compiled chunk program gathers nothing (no
all-gather) and its other collectives carry messages and scalars, never a table; each device holds less than
half of what one device needs.
"""

import textwrap

import numpy as np
import pytest

import pgmjax as pj
from conftest import run_script


SCRIPT = textwrap.dedent('''
    import importlib, json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np, pgmjax as pj
    from pgmjax.estimation import driver, inputs
    from pgmjax.graph import oracle
    sharding = importlib.import_module("pgmjax.estimation.sharding")

    # A broom: five chains of three cliques hanging off a hub clique (several levels, 5 slots a level, padded
    # to 8), a clique measured twice and a sub-marginal measured.
    rng = np.random.default_rng(0)
    attrs, cliques = {"h": 4, "g": 4}, [("h", "g")]
    for b in range(5):
        prev = "h"
        for j in range(3):
            attrs[f"a{b}{j}"], attrs[f"c{b}{j}"] = 6, 5
            cliques.append((prev, f"a{b}{j}", f"c{b}{j}"))
            prev = f"c{b}{j}"
    dom = pj.Domain(attrs)
    ms = [pj.Measurement(c, rng.uniform(5, 40, size=dom.shape_of(c)), stddev=2.0) for c in cliques]
    ms += [pj.Measurement(cliques[1], rng.uniform(5, 40, size=dom.shape_of(cliques[1])), stddev=3.0),
           pj.Measurement(cliques[2][:2], rng.uniform(5, 40, size=dom.shape_of(cliques[2][:2])), stddev=3.0)]
    kw = dict(iters=300, dtype=jnp.float64)
    one, one_report = pj.estimate(dom, ms, report=True, **kw)
    four, four_report = pj.estimate(dom, ms, devices=4, report=True, **kw)
    queries = [cliques[1], cliques[-1], ("h", "c42"), ("a00", "a40")]
    diff = max(float(np.abs(one.marginal(q) - four.marginal(q)).max()) for q in queries)

    # The chunk program of the split model, compiled as estimate runs it.
    measurements, model_cliques = inputs.check_structure(dom, ms, "l2", (), None, caller="t")
    plan = oracle.make_plan(dom, model_cliques, shards=4)
    problem, total, lipschitz = inputs.build_problem(dom, measurements, model_cliques, "l2", None, jnp.float64, caller="t", plan=plan)
    mesh = sharding.make_mesh(4)
    p4, t4 = sharding.place(problem, plan.zeros(jnp.float64), mesh)
    est = pj.MirrorDescent()
    with jax.set_mesh(mesh):
        c4 = driver._chunk.lower(est, p4, *est.init(p4, t4, 1e-3), np.int32(10)).compile()
    p1, _, _ = inputs.build_problem(dom, measurements, model_cliques, "l2", None, jnp.float64, caller="t")
    c1 = driver._chunk.lower(est, p1, *est.init(p1, p1.plan.zeros(jnp.float64), 1e-3), np.int32(10)).compile()
    text = c4.as_text()
    collectives = [l.split("=")[1].split()[0] for l in text.splitlines()
                   if "=" in l and any(op in l for op in ("all-reduce(", "all-to-all(", "collective-permute("))]
    sizes = [int(np.prod([int(d) for d in s.split("[")[1].split("]")[0].split(",") if d])) if "[" in s else 1
             for s in collectives]
    table = min(int(np.prod(dom.shape_of(c))) for c in cliques[1:])
    json.dump({
        "devices": jax.local_device_count(), "diff": diff, "loss": [one_report.loss, four_report.loss],
        "specs": {k: [a for a in v.sharding.spec] for k, v in four.theta.items()},
        "slots": {k: s[1] for k, s in four.plan.units},
        "all_gather": text.count("all-gather("), "largest_collective": max(sizes, default=0), "smallest_table": table,
        "temp": [c1.memory_analysis().temp_size_in_bytes, c4.memory_analysis().temp_size_in_bytes],
        "args": [c1.memory_analysis().argument_size_in_bytes, c4.memory_analysis().argument_size_in_bytes],
    }, open(sys.argv[1], "w"))
''')


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_a_model_split_over_four_devices_answers_as_on_one(tmp_path):
    r = run_script(SCRIPT, tmp_path)
    assert r["devices"] == 4
    assert r["diff"] <= 1e-8 and abs(r["loss"][0] - r["loss"][1]) <= 1e-9 * abs(r["loss"][0])
    # every block of more than one clique is split along its slots (padded to a multiple of 4); the root is whole
    for key, slots in r["slots"].items():
        assert r["specs"][key] == ([None, "cliques"] if slots > 1 else []), (key, slots, r["specs"][key])
        assert slots == 1 or slots % 4 == 0
    assert r["all_gather"] == 0
    assert 0 < r["largest_collective"] < r["smallest_table"]  # messages and scalars cross devices, never a table
    assert r["args"][1] < 0.5 * r["args"][0] and r["temp"][1] < 0.5 * r["temp"][0]


def test_devices_are_checked_before_any_work():
    dom = pj.Domain({"a": 2})
    ms = [pj.Measurement(("a",), np.ones(2), stddev=1.0)]
    with pytest.raises(ValueError, match="estimate: devices must be at least 1, got 0"):
        pj.estimate(dom, ms, iters=5, devices=0)
    with pytest.raises(ValueError, match=r"estimate: devices=64, but this process has \d+ local device"):
        pj.estimate(dom, ms, iters=5, devices=64)
    with pytest.raises(TypeError, match="estimate: devices must be an integer"):
        pj.estimate(dom, ms, iters=5, devices=2.0)


def test_a_plan_laid_out_for_shards():
    """make_plan(shards=4): one level per block, slots padded to a multiple of 4 (a one-clique block whole)."""
    from pgmjax.graph import oracle

    dom = pj.Domain({"h": 2, **{f"x{i}": 3 for i in range(5)}, "y": 2, "z": 2})
    cliques = [("h", f"x{i}") for i in range(5)] + [("x0", "y"), ("y", "z")]
    plan = oracle.make_plan(dom, cliques, shards=4)
    assert plan.shards == 4 and oracle.make_plan(dom, cliques).shards == 1
    assert all(s[0] == 1 and (s[1] == 1 or s[1] % 4 == 0) for _, s in plan.units)
    # the same distribution either way: answers from the same tables
    rng = np.random.default_rng(1)
    tables = {c: rng.normal(size=dom.shape_of(c)) for c in plan.cliques}
    a = pj.GraphicalModel(plan, plan.from_tables(tables), 100.0)
    plain = oracle.make_plan(dom, cliques)
    b = pj.GraphicalModel(plain, plain.from_tables(tables), 100.0)
    for q in [("h", "z"), ("x3", "y")]:
        np.testing.assert_allclose(a.marginal(q), b.marginal(q), rtol=1e-5, atol=1e-4)
