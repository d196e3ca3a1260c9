"""``pj.FitOptions``: a mechanism's fit options as one frozen value, checked where it is made."""

import dataclasses

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms import spanning_tree


def test_nothing_given_is_the_mechanisms_choice():
    assert pj.FitOptions().given() == {}
    opts = pj.FitOptions(method="lbfgs", tol=0, chunk=10)
    assert opts.given() == {"method": "lbfgs", "tol": 0, "chunk": 10}
    assert opts == pj.FitOptions(chunk=10, tol=0, method="lbfgs") and hash(opts) == hash(pj.FitOptions(method="lbfgs", tol=0, chunk=10))
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.tol = 1e-3


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(method="newton"), ValueError, "FitOptions: unknown method 'newton'"),
    (dict(loss="huber"), ValueError, "FitOptions: loss must be 'l2', 'l1' or a callable"),
    (dict(method="dual_averaging", loss="l1"), ValueError, "dual_averaging needs the smooth 'l2' loss"),
    (dict(dtype=np.int32), ValueError, "FitOptions: dtype must be float32 or float64"),
    (dict(oracle="loopy"), ValueError, "FitOptions: oracle must be one of"),
    (dict(oracle="approximate", method="lbfgs"), ValueError, "needs method='mirror_descent'"),
    (dict(program="fast"), ValueError, "FitOptions: program must be one of"),
    (dict(tol=-1e-3), ValueError, "FitOptions: tol must be a non-negative number"),
    (dict(tol=float("nan")), ValueError, "FitOptions: tol must be a non-negative number"),
    (dict(step_size=0.0), ValueError, "FitOptions: step_size must be a positive number"),
    (dict(chunk=0), ValueError, "FitOptions: chunk must be a positive integer"),
    (dict(structures=True), ValueError, "FitOptions: structures must be a positive integer"),
    (dict(devices=0), ValueError, "FitOptions: devices must be at least 1"),
    (dict(callback="print"), TypeError, "FitOptions: callback must be callable"),
])
def test_a_bad_option_fails_where_it_is_made_naming_the_field(kwargs, error, match):
    with pytest.raises(error, match=match):
        pj.FitOptions(**kwargs)


def test_a_mechanism_passes_the_given_options_to_every_fit_and_keeps_its_own_otherwise(monkeypatch):
    calls = []
    real = spanning_tree.estimate

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(spanning_tree, "estimate", spy)
    data = pj.Dataset(np.random.default_rng(0).integers(0, 3, (300, 3)), pj.Domain({"a": 3, "b": 3, "c": 3}))
    seen = []
    opts = pj.FitOptions(tol=1e-9, chunk=10, callback=lambda info: seen.append(info["iteration"]))
    pj.mechanisms.mst(data, 1.0, key=jax.random.key(0), select_iters=20, engine_iters=20, synthetic=False, fit_options=opts)
    assert len(calls) == 2 and all(c["tol"] == 1e-9 and c["chunk"] == 10 for c in calls)
    assert all(c["method"] == spanning_tree.REFERENCE_MIRROR_DESCENT for c in calls)  # MST's own default method
    assert seen and seen[-1] == 20
    with pytest.raises(TypeError, match="fit_options must be a pgmjax.FitOptions"):
        pj.mechanisms.mst(data, 1.0, key=jax.random.key(0), fit_options={"tol": 1e-9})
