"""Every mechanism behind ``pj.Synthesizer``: a release of a raw table that samples, saves, loads and grows, its
guarantee the budget given. A long check (``python -m pytest -m slow``): one fit per mechanism."""

import jax
import pytest

import pgmjax as pj
from pgmjax.data.examples import raw_table
from pgmjax.mechanisms import registry


@pytest.fixture(scope="module")
def people():
    return raw_table(1_000, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(registry.MECHANISMS))
def test_the_mechanism_releases_samples_saves_and_grows(name, people, tmp_path):
    synth = pj.Synthesizer(name, epsilon=1.0, engine_iters=50, ranges={"joined": ("2000-01-01", "2023-12-31")})
    release = synth.fit(people, key=jax.random.key(0))
    epsilon, delta = release.guarantee
    assert epsilon == pytest.approx(1.0, rel=1e-9) and delta > 0  # the schema's category discovery adds its delta
    assert list(release.sample(50, key=jax.random.key(1)).columns) == list(people.columns)
    grown = release.extend(people, [("age", "sex")], epsilon=0.2, key=jax.random.key(2), iters=50)
    assert grown.guarantee[0] > epsilon and len(grown.measurements) == len(release.measurements) + 1
    grown.save(tmp_path / name)
    assert pj.Synthesizer.load(tmp_path / name).guarantee == grown.guarantee
