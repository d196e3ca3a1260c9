"""Save/load round trips exactly; damaged or foreign files give clear errors; summary()."""

import json
import os

import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.graph import oracle


@pytest.fixture
def fitted(rng):
    domain = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5})
    data = pj.Dataset(rng.integers(0, [3, 4, 2, 5], size=(500, 4)), domain)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    ms = [pj.Measurement(c, data.marginal(c) + rng.normal(size=domain.shape_of(c)), stddev=1.0) for c in cliques]
    return pj.estimate(domain, ms, iters=100, dtype=jnp.float64, report=True)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_round_trip_is_exact(tmp_path, rng, dtype):
    domain = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5})
    plan = oracle.make_plan(domain, [("a", "b"), ("b", "c"), ("c", "d")])
    tables = {c: rng.normal(size=domain.shape_of(c)) for c in [("a", "b"), ("b", "c"), ("c", "d")]}
    tables[("a", "b")][0, 1] = -np.inf
    model = pj.GraphicalModel(plan, plan.from_tables(tables, dtype), 321.0)
    model.save(tmp_path / "m")
    back = pj.load_model(tmp_path / "m")
    assert back.domain == model.domain and back.cliques == model.cliques and back.total == model.total
    assert back.dtype == model.dtype
    for c in model.cliques:
        np.testing.assert_array_equal(np.asarray(back.potentials[c]), np.asarray(model.potentials[c]))
    np.testing.assert_array_equal(back.marginal(("a", "d")), model.marginal(("a", "d")))


def test_round_trip_of_a_fitted_model(tmp_path, fitted):
    fitted, report = fitted
    fitted.save(tmp_path / "fit", report=report)
    back, loaded = pj.load_model(tmp_path / "fit", report=True)
    assert loaded.loss == report.loss
    assert [h["iteration"] for h in loaded.history] == [h["iteration"] for h in report.history]
    for c in fitted.cliques:
        # The potentials round-trip exactly (test_round_trip_is_exact); the fit's own marginals were taken
        # before its last re-centring (MirrorDescent.tidy, an exact no-op on the distribution), so the
        # reloaded model's recomputed marginals agree to float64 rounding.
        np.testing.assert_allclose(back.marginal(c), fitted.marginal(c), rtol=1e-12, atol=0)
    structure = json.load(open(tmp_path / "fit" / "model.json"))
    assert structure["format"] == "pgmjax-model" and structure["version"] == 1


def test_damaged_files_give_clear_errors(tmp_path, fitted):
    fitted = fitted.model
    path = tmp_path / "fit"
    fitted.save(path)
    with pytest.raises(FileNotFoundError, match="model.json"):
        pj.load_model(tmp_path / "nowhere")
    # wrong version
    s = json.load(open(path / "model.json"))
    json.dump(s | {"version": 99}, open(path / "model.json", "w"))
    with pytest.raises(ValueError, match="version 99"):
        pj.load_model(path)
    # not a model
    json.dump(s | {"format": "other"}, open(path / "model.json", "w"))
    with pytest.raises(ValueError, match="not a pgmjax model"):
        pj.load_model(path)
    # truncated JSON
    (path / "model.json").write_text(json.dumps(s)[:40])
    with pytest.raises(ValueError, match="not valid JSON"):
        pj.load_model(path)
    # corrupted arrays
    json.dump(s, open(path / "model.json", "w"))
    blob = bytearray((path / "potentials.npz").read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (path / "potentials.npz").write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="SHA-256"):
        pj.load_model(path)
    os.remove(path / "potentials.npz")
    with pytest.raises(FileNotFoundError, match="potentials.npz"):
        pj.load_model(path)


def test_summary_reports_structure(fitted):
    fitted = fitted.model
    text = fitted.summary()
    assert "4 attributes" in text and "treewidth" in text
    for c in fitted.cliques:
        assert ", ".join(c) in text
    total_cells = sum(fitted.domain.size(c) for c in fitted.cliques)
    assert f"{total_cells:,} cells" in text
