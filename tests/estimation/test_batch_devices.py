"""``estimate_batch`` spread over several devices (forced host devices: ``--xla_force_host_platform_device_count``).

Run in a fresh interpreter, since the device count is fixed when JAX starts: the batch on 4 devices equals the
batch on one (marginals and losses), its potentials stay split along the batch axis, and the compiled chunk
program moves no table between devices (no all-gather; its only collectives are the loops' scalar predicates).
"""

import textwrap

import pytest
from conftest import run_script

SCRIPT = textwrap.dedent('''
    import json, os, re, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, numpy as np, pgmjax as pj
    from pgmjax.estimation import batch, driver

    rng = np.random.default_rng(0)
    dom = pj.Domain({"a": 3, "b": 4, "c": 5})
    B = 8
    ms = [pj.BatchedMeasurement(("a", "b"), rng.uniform(5, 40, size=(B, 3, 4)), stddev=2.0),
          pj.BatchedMeasurement(("b", "c"), rng.uniform(5, 40, size=(B, 4, 5)), stddev=3.0)]
    one, one_report = pj.estimate_batch(dom, ms, iters=200, devices=1, report=True)
    four, four_report = pj.estimate_batch(dom, ms, iters=200, report=True)
    k = next(iter(four.theta))
    problem = batch.make_batch_problem(dom, ms)
    p, th, shards = batch.spread(problem, batch.zeros(problem))
    est = batch.Batched(pj.MirrorDescent(), None)
    text = driver._chunk.lower(est, p, *est.init(p, th, 1e-3), np.int32(10)).compile().as_text()
    reduces = [l for l in text.splitlines() if "all-reduce(" in l and "=" in l]
    json.dump({
        "devices": jax.local_device_count(), "shards": shards,
        "spec": list(four.theta[k].sharding.spec), "mesh_devices": len(four.theta[k].sharding.device_set),
        "marginal_diff": float(np.abs(four.marginal(("a", "c")) - one.marginal(("a", "c"))).max()),
        "loss_diff": float(np.abs(np.asarray(four_report.loss) - np.asarray(one_report.loss)).max()),
        "all_gather": text.count("all-gather("), "reduce_shapes": [l.split("=")[1].split()[0] for l in reduces],
    }, open(sys.argv[1], "w"))
''')


@pytest.mark.slow  # a long check (a fresh interpreter with four forced devices): python -m pytest -m slow
def test_a_batch_spread_over_four_devices_equals_one_device(tmp_path):
    r = run_script(SCRIPT, tmp_path)
    assert r["devices"] == 4 and r["shards"] == 4
    assert r["spec"] == ["batch"] and r["mesh_devices"] == 4  # the fitted potentials stay split
    assert r["marginal_diff"] <= 1e-6 and r["loss_diff"] <= 1e-4
    assert r["all_gather"] == 0
    assert r["reduce_shapes"] and all(s.endswith("[]") for s in r["reduce_shapes"])  # scalar predicates only


def test_devices_must_be_a_positive_integer():
    import numpy as np
    import pytest

    import pgmjax as pj

    dom = pj.Domain({"a": 2})
    ms = [pj.BatchedMeasurement(("a",), np.ones((2, 2)), stddev=1.0)]
    with pytest.raises(ValueError, match="estimate_batch: devices must be a positive integer or None, got 0"):
        pj.estimate_batch(dom, ms, iters=5, devices=0)
