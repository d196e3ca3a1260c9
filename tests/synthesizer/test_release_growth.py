"""A release that grows: ``Release.extend`` measures more of the same table under a composed ledger and refits;
a saved release keeps its whole history and grows after loading."""

import json

import jax
import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax.data.examples import raw_table
from pgmjax.privacy import cdp_eps, cdp_rho

FAST = dict(engine_iters=200, options={"select_iters": 100}, ranges={"joined": ("2000-01-01", "2023-12-31")})
NEW = [("age", "income", "sex")]


@pytest.fixture(scope="module")
def people():
    return raw_table(2_000, seed=5)


@pytest.fixture(scope="module")
def release(people):
    return pj.Synthesizer("mst", epsilon=1.0, **FAST).fit(people, key=jax.random.key(0))


@pytest.fixture(scope="module")
def grown(release, people):
    return release.extend(people, NEW, epsilon=0.5, key=jax.random.key(1), iters=300)


def test_extend_composes_the_ledger_exactly(release, grown):
    assert [s.name for s in grown.stages] == ["schema", "mechanism", "extension 1"]
    assert [s.name for s in release.stages] == ["schema", "mechanism"]  # the release extended is unchanged
    extension = grown.stages[-1].accountant
    assert extension.spent == pytest.approx(cdp_rho(0.5, 1e-9), rel=1e-12) and extension.bounded is False
    rho = sum(s.accountant.spent for s in grown.stages)
    assert rho == pytest.approx(cdp_rho(1.0, 1e-9) + cdp_rho(0.5, 1e-9), rel=1e-9)
    assert grown.guarantee == (cdp_eps(rho, 1e-9), 2e-9)  # rho adds: tighter than 1.0 + 0.5
    assert 1.0 < grown.guarantee[0] < 1.5
    ledger = grown.ledger
    new_rows = ledger[ledger["stage"] == "extension 1"]
    assert list(new_rows["target"]) == NEW and set(new_rows["mechanism"]) == {"gaussian"}


def test_the_refit_reads_the_new_measurement(release, grown):
    (new,) = grown.measurements[len(release.measurements):]
    assert new.clique == NEW[0] and grown.measurements[: len(release.measurements)] == release.measurements
    assert NEW[0] in grown.model.cliques or any(set(NEW[0]) <= set(c) for c in grown.model.cliques)
    before = np.linalg.norm(np.asarray(release.model.marginal(new.clique)).ravel() - new.y)
    after = np.linalg.norm(np.asarray(grown.model.marginal(new.clique)).ravel() - new.y)
    assert after < before  # moved towards the new answers (a noisy 3-way marginal among 13 measurements)


def test_a_pure_dp_release_grows_in_epsilon(people):
    release = pj.Synthesizer("privbayes", epsilon=1.0, engine_iters=50).fit(people, key=jax.random.key(0))
    grown = release.extend(people, [("sex", "city"), "age"], epsilon=0.3, key=jax.random.key(2), iters=100)
    assert set(grown.ledger.query("stage == 'extension 1'")["mechanism"]) == {"laplace"}
    assert grown.guarantee == pytest.approx((1.3, 1e-9), rel=1e-12)


def test_a_saved_release_keeps_its_history_and_grows_as_the_fitted_one(grown, people, tmp_path):
    grown.save(tmp_path / "release")
    doc = json.loads((tmp_path / "release" / "release.json").read_text())
    assert [s["name"] for s in doc["stages"]] == ["schema", "mechanism", "extension 1"]
    loaded = pj.Synthesizer.load(tmp_path / "release")
    assert loaded.guarantee == grown.guarantee and loaded.synthesizer == grown.synthesizer
    pd.testing.assert_frame_equal(loaded.ledger, grown.ledger)
    assert all(np.array_equal(a.y, b.y) and a.clique == b.clique for a, b in zip(loaded.measurements, grown.measurements))
    pd.testing.assert_frame_equal(loaded.sample(200, key=jax.random.key(3)), grown.sample(200, key=jax.random.key(3)))
    again = [r.extend(people, ["city"], epsilon=0.2, key=jax.random.key(4), iters=100) for r in (loaded, grown)]
    assert again[0].guarantee == again[1].guarantee and len(again[0].stages) == 4
    np.testing.assert_allclose(again[0].model.marginal(("city",)), again[1].model.marginal(("city",)), rtol=1e-5)


def test_a_tampered_archive_is_refused(grown, tmp_path):
    folder = tmp_path / "release"
    grown.save(folder)
    blob = bytearray((folder / "measurements.npz").read_bytes())
    blob[-30] ^= 1
    (folder / "measurements.npz").write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="measurements.npz does not match release.json"):
        pj.Synthesizer.load(folder)


def test_a_model_folder_samples_but_cannot_grow(grown, people, tmp_path):
    from pgmjax.model.model_files import save_model

    save_model(grown.model, tmp_path / "model", schema=grown.schema)  # `pgmjax run --save-model`'s folder
    loaded = pj.Synthesizer.load(tmp_path / "model")
    assert len(loaded.sample(10, key=jax.random.key(0))) == 10
    for what in (lambda r: r.ledger, lambda r: r.guarantee,
                 lambda r: r.extend(people, ["age"], epsilon=1.0, key=jax.random.key(0))):
        with pytest.raises(ValueError, match="carries no ledger"):
            what(loaded)


@pytest.mark.parametrize("marginals, kwargs, error, match", [
    ([("age", "height")], {}, ValueError, r"unknown column\(s\) \['height'\]; the release's columns are"),
    ([()], {}, ValueError, "an empty marginal"),
    ([("age", "age")], {}, ValueError, "a repeated column"),
    ("age", {}, TypeError, "marginals must be a list of column tuples"),
    (NEW, {"epsilon": 0.0}, ValueError, "epsilon must be a positive finite number"),
    (NEW, {"key": 3}, TypeError, "Release.extend: key must be one jax.random key"),
    (NEW, {"iters": 0}, ValueError, "iters must be a positive integer"),
])
def test_bad_extensions_fail_before_anything_is_measured(release, people, monkeypatch, marginals, kwargs, error, match):
    import pgmjax.synthesizer.release as module

    def refuse(*args, **kw):
        raise AssertionError("an accountant was made before the checks ran")

    monkeypatch.setattr(module, "Accountant", refuse)
    kwargs = {"epsilon": 0.5, "key": jax.random.key(0)} | kwargs
    with pytest.raises(error, match=match):
        release.extend(people, marginals, **kwargs)


def test_an_extension_past_the_size_cap_is_refused_before_measuring(people, monkeypatch):
    import pgmjax.synthesizer.release as module

    release = pj.Synthesizer("mst", epsilon=1.0, max_model_mb=0.1, **FAST).fit(people, key=jax.random.key(0))
    monkeypatch.setattr(module, "Accountant", lambda *a, **k: pytest.fail("measured past the cap"))
    with pytest.raises(ValueError, match="above the release's max_model_mb=0.1"):
        release.extend(people, [tuple(release.schema.domain.attributes)], epsilon=0.5, key=jax.random.key(0))
