"""``pj.Synthesizer``: a raw DataFrame in, a private synthetic DataFrame out, under one ledger."""

import math

import jax
import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax.data.examples import RARE_CITIES, raw_table
from pgmjax.privacy import cdp_rho

#: Short fits; the dates' public range declared (no budget spent on it: at 2,000 records and epsilon 1 a private
#: range of the dates is too coarse to bound them).
FAST = dict(engine_iters=200, options={"select_iters": 100}, ranges={"joined": ("2000-01-01", "2023-12-31")})


@pytest.fixture(scope="module")
def people():
    return raw_table(2_000, seed=3)


@pytest.fixture(scope="module")
def release(people):
    return pj.Synthesizer("mst", epsilon=1.0, **FAST).fit(people, key=jax.random.key(0))


def test_a_raw_table_round_trips_on_the_raw_scale(people, release):
    synth = release.sample(1_500, key=jax.random.key(1))
    assert list(synth.columns) == list(people.columns) and len(synth) == 1_500
    assert set(synth["sex"].dropna()) <= {"F", "M", "other", ""}  # "": the blank category every text column has
    kept = set(release.schema.columns["city"].categories)
    assert set(synth["city"].dropna()) <= kept | {"other", ""} and not (set(synth["city"]) & set(RARE_CITIES))
    joined = pd.to_datetime(synth["joined"].replace("", np.nan).dropna(), format="%Y-%m-%d")  # dates, decoded as dates
    assert joined.min() >= pd.Timestamp("2000-01-01") and joined.max() <= pd.Timestamp("2024-01-01")  # the range
    edges = release.schema.columns["joined"].edges  # days since 1970: the declared range, no budget spent on it
    assert (edges[0], edges[-1]) == (10957, 19722)
    age = pd.to_numeric(synth["age"], errors="coerce").dropna()
    assert len(age) > 1_000 and 10 <= age.median() <= 80
    income = pd.to_numeric(synth["income"], errors="coerce")
    assert income.dropna().median() == pytest.approx(pd.to_numeric(people["income"], errors="coerce").median(), rel=0.5)


def test_the_ledger_spends_the_budget_once_schema_and_mechanism_together(release):
    rho = cdp_rho(1.0, 1e-9)
    schema, mechanism = (s.accountant for s in release.stages)
    spent = schema.spent + mechanism.spent
    assert spent == pytest.approx(rho, rel=1e-9) and spent <= rho * (1 + 1e-12)
    assert schema.spent == pytest.approx(0.1 * rho)
    epsilon, delta = release.guarantee  # composed from the ledger: the budget given, up to float round-off
    assert epsilon == pytest.approx(1.0, rel=1e-9) and delta == 2e-9  # the mechanism's delta and the discovery's
    ledger = release.ledger
    assert set(ledger["stage"]) == {"schema", "mechanism"}


def test_the_same_key_gives_the_same_release(people, release):
    again = pj.Synthesizer("mst", epsilon=1.0, **FAST).fit(people, key=jax.random.key(0))
    a, b = release.sample(200, key=jax.random.key(5)), again.sample(200, key=jax.random.key(5))
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(release.sample(200, key=jax.random.key(6)))


def test_a_saved_release_samples_as_the_fitted_one(release, tmp_path):
    release.save(tmp_path / "release")
    loaded = pj.Synthesizer.load(tmp_path / "release")
    a = release.sample(300, key=jax.random.key(2))
    b = loaded.sample(300, key=jax.random.key(2))
    pd.testing.assert_frame_equal(a, b[list(a.columns)])
    assert loaded.guarantee == release.guarantee and loaded.synthesizer == release.synthesizer
    pd.testing.assert_frame_equal(loaded.ledger, release.ledger)


def test_a_pure_dp_mechanism_adds_only_the_discovery_delta(people):
    s = pj.Synthesizer("privbayes", epsilon=1.0, engine_iters=50)
    assert s.delta is None
    release = s.fit(people, key=jax.random.key(0))
    assert release.guarantee == pytest.approx((1.0, 1e-9), rel=1e-12)
    assert math.isclose(sum(s.accountant.spent for s in release.stages), 1.0, rel_tol=1e-9)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(mechanism="gan"), ValueError, "unknown mechanism 'gan'"),
    (dict(epsilon=0.0), ValueError, "epsilon must be a positive finite number"),
    (dict(epsilon=True), ValueError, "epsilon must be a positive finite number"),
    (dict(preprocess_fraction=1.0), ValueError, "preprocess_fraction must lie in"),
    (dict(mechanism="mst", delta=None), ValueError, "mst needs a delta in"),
    (dict(mechanism="mst", options={"rounds": 3}), ValueError, r"mst has no option\(s\) \['rounds'\]"),
    (dict(options={"epsilon": 3}), ValueError, r"has no option\(s\) \['epsilon'\]"),
    (dict(fit_options={"tol": 1e-6}), TypeError, "fit_options must be a pgmjax.FitOptions"),
    (dict(kinds=["age"]), TypeError, "kinds must be a mapping"),
])
def test_bad_settings_fail_where_they_are_made(kwargs, error, match):
    with pytest.raises(error, match=match):
        pj.Synthesizer(**kwargs)


def test_bad_inputs_fail_before_any_budget_is_spent(people):
    s = pj.Synthesizer("mst")
    with pytest.raises(TypeError, match="expected a pandas or Polars DataFrame"):
        s.fit(people.to_numpy(), key=jax.random.key(0))
    with pytest.raises(TypeError, match="Synthesizer.fit: key must be one jax.random key"):
        s.fit(people, key=0)


def test_a_polars_frame_is_read_as_the_pandas_one(people, release):
    pl = pytest.importorskip("polars")
    from_polars = pj.Synthesizer("mst", epsilon=1.0, **FAST).fit(pl.from_pandas(people), key=jax.random.key(0))
    pd.testing.assert_frame_equal(from_polars.sample(100, key=jax.random.key(1)), release.sample(100, key=jax.random.key(1)))


def test_conditional_samples_keep_only_the_given_values(release):
    edges = release.schema.columns["age"].edges
    inside = [(edges[2] + edges[3]) / 2, (edges[3] + edges[4]) / 2]  # ages in the third and fourth bins
    synth = release.sample(300, key=jax.random.key(4), given={"sex": "F", "age": inside})
    assert len(synth) == 300 and set(synth["sex"]) == {"F"}
    age = pd.to_numeric(synth["age"])
    assert age.between(edges[2], edges[4]).all() and age.lt(edges[3]).any()  # decoded within those bins
    default = release.sample(key=jax.random.key(4), given={"sex": "F"})
    sex = release.schema.columns["sex"]
    share = release.model.marginal(("sex",))[sex.categories.index("F")]  # the records the model gives "F"
    assert len(default) == round(share)
    with pytest.raises(ValueError, match=r"given sex=\['X'\]: not among the column's released categories"):
        release.sample(5, key=jax.random.key(4), given={"sex": "X"})
    with pytest.raises(ValueError, match="given names 'height', not a column"):
        release.sample(5, key=jax.random.key(4), given={"height": 170})


def test_a_configuration_file_makes_the_same_synthesizer(tmp_path):
    want = pj.Synthesizer("mst", epsilon=0.5, bins=8, ranges={"age": (0, 120)}, options={"select_iters": 50},
                          fit_options=pj.FitOptions(tol=1e-6))
    (tmp_path / "s.yaml").write_text("mechanism: mst\nepsilon: 0.5\nbins: 8\nranges:\n  age: [0, 120]\n"
                                     "options:\n  select_iters: 50\nfit_options:\n  tol: 1.0e-6\n")
    (tmp_path / "s.json").write_text('{"mechanism": "mst", "epsilon": 0.5, "bins": 8, "ranges": {"age": [0, 120]}, '
                                     '"options": {"select_iters": 50}, "fit_options": {"tol": 1e-6}}')
    for name in ("s.yaml", "s.json"):
        assert pj.Synthesizer.from_config(tmp_path / name) == want, name
    (tmp_path / "bad.yaml").write_text("mechanism: mst\nepsilonn: 1\n")
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['epsilonn'\]; the settings are mechanism, epsilon"):
        pj.Synthesizer.from_config(tmp_path / "bad.yaml")
    (tmp_path / "bad.json").write_text('{"mechanism": "mst",')
    with pytest.raises(ValueError, match="is not valid JSON"):
        pj.Synthesizer.from_config(tmp_path / "bad.json")
    with pytest.raises(ValueError, match=r"fit_options has unknown field\(s\) \['iters'\]"):
        pj.Synthesizer.from_config({"fit_options": {"iters": 3}})
    with pytest.raises(ValueError, match="epsilon must be a positive finite number"):
        pj.Synthesizer.from_config({"epsilon": -1})
    with pytest.raises(ValueError, match="not a .json, .yaml or .yml file"):
        pj.Synthesizer.from_config(tmp_path / "s.toml")


def test_the_report_compares_the_model_with_a_table(people, release):
    report = release.report(people)
    assert list(report.columns) == ["marginal", "ways", "tvd"] and len(report) == 5 + 10
    assert report["tvd"].between(0, 1).all() and report["tvd"].is_monotonic_decreasing
    assert report.loc[report["ways"] == 1, "tvd"].mean() < 0.1  # one-way marginals close at epsilon 1
    same = release.report(release.sample(30_000, key=jax.random.key(9)), cliques=[("sex",), ("age", "sex")])
    assert (same["tvd"] < 0.02).all()  # the model against its own samples


def test_an_integer_coded_table_with_its_domain_skips_the_schema(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 2_000)
    codes = pd.DataFrame({"b": np.where(rng.random(2_000) < 0.8, a % 2, 1 - a % 2), "a": a, "c": rng.integers(0, 4, 2_000)})
    domain = {"a": 3, "b": 2, "c": 4}
    release = pj.Synthesizer("mst", epsilon=1.0, engine_iters=200, options={"select_iters": 100}).fit(
        codes, key=jax.random.key(0), domain=domain)
    assert release.schema is None and [s.name for s in release.stages] == ["mechanism"]
    assert release.guarantee == pytest.approx((1.0, 1e-9), rel=1e-9)  # the whole budget to the mechanism
    synth = release.sample(1_000, key=jax.random.key(1))
    assert list(synth.columns) == ["a", "b", "c"] and synth["c"].between(0, 3).all()
    assert len(release.sample(key=jax.random.key(1), given={"a": [0, 1]}).query("a == 2")) == 0
    assert release.report(codes)["tvd"].max() < 0.1
    grown = release.extend(codes, [("a", "b", "c")], epsilon=0.5, key=jax.random.key(2), iters=100)
    grown.save(tmp_path / "coded")
    loaded = pj.Synthesizer.load(tmp_path / "coded")
    assert loaded.schema is None and loaded.guarantee == grown.guarantee
    pd.testing.assert_frame_equal(loaded.sample(50, key=jax.random.key(3)), grown.sample(50, key=jax.random.key(3)))
    with pytest.raises(ValueError, match=r"Synthesizer.fit: the table has no column\(s\) \['d'\]"):
        pj.Synthesizer("mst").fit(codes, key=jax.random.key(0), domain={**domain, "d": 2})
    with pytest.raises(ValueError, match="Synthesizer.fit: the table is not integer codes of the domain"):
        pj.Synthesizer("mst").fit(codes, key=jax.random.key(0), domain={"a": 3, "b": 2, "c": 3})
