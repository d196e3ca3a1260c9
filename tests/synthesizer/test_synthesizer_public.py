"""A public table through ``pj.Synthesizer.fit(public=...)``: coded by the schema derived from the private table
(or taken as codes with ``domain=``), its marginals in the mechanism's fits at no cost, in the ledger and among the
release's measurements, so that an extension refits with them; refused before any budget where it cannot apply."""

import jax
import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax.data.examples import raw_table

FAST = dict(engine_iters=200, options={"select_iters": 100}, ranges={"joined": ("2000-01-01", "2023-12-31")})


def public_entries(release):
    return [e for s in release.stages for e in s.accountant.ledger if e.mechanism == "public"]


def test_raw_public_table_goes_through_the_private_schema_and_stays_in_the_release():
    people, sample = raw_table(2_000, seed=5), raw_table(1_000, seed=6)
    release = pj.Synthesizer("mst", epsilon=1.0, public_stddev=30.0, **FAST).fit(
        people, key=jax.random.key(0), public=sample)
    taken = public_entries(release)
    assert taken and all(e.cost == 0 for e in taken)
    eps, _ = release.guarantee
    alone = pj.Synthesizer("mst", epsilon=1.0, **FAST).fit(people, key=jax.random.key(0))
    assert eps == pytest.approx(alone.guarantee[0], rel=1e-12)  # the public data cost nothing
    # the release keeps the public marginals it was fitted to: an extension refits with them
    assert len(release.measurements) == len(alone.measurements) + len(taken)
    grown = release.extend(people, [("age", "sex")], epsilon=0.5, key=jax.random.key(1), iters=100)
    assert len(grown.measurements) == len(release.measurements) + 1
    assert list(release.sample(50, key=jax.random.key(2)).columns) == list(people.columns)


def test_coded_public_table_with_a_domain():
    rng = np.random.default_rng(0)
    domain = {"a": 3, "b": 2}
    frame = lambda n: pd.DataFrame({"a": rng.integers(0, 3, n), "b": rng.integers(0, 2, n)})  # noqa: E731
    release = pj.Synthesizer("aim", epsilon=2.0, engine_iters=100, options={"rounds": 3}).fit(
        frame(1000), key=jax.random.key(0), domain=domain, public=frame(500))
    assert release.stages[-1].accountant.spent == pytest.approx(release.stages[-1].accountant.budget, rel=1e-12)


@pytest.mark.parametrize("settings,public,message", [
    (dict(mechanism="privbayes"), "same", "privbayes takes no public data; mwem, mst, aim, tree_aim do"),
    (dict(mechanism="mst"), "no_age", r"the public table has no column\(s\) \['age'\]"),
    (dict(mechanism="mst"), "empty", "the public table has no records"),
])
def test_public_data_that_cannot_apply_is_refused_before_any_budget(settings, public, message):
    people = raw_table(200, seed=1)
    table = {"same": people, "no_age": people.drop(columns="age"), "empty": people.iloc[:0]}[public]
    with pytest.raises(ValueError, match=message):
        pj.Synthesizer(**settings).fit(people, key=jax.random.key(0), public=table)


def test_public_stddev_is_checked_and_kept_in_the_configuration():
    with pytest.raises(ValueError, match="public_stddev must be 'sampling' or a positive number"):
        pj.Synthesizer("mst", public_stddev=0)
    s = pj.Synthesizer("mst", public_stddev=12.5)
    assert pj.Synthesizer.from_config(s.to_config()) == s
