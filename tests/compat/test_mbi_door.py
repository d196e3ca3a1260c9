"""``pgmjax.compat.mbi``: mbi's interface as smartnoise-synth and OpenDP call it, backed by pgmjax; their own
synthesizers run end to end on it where they are installed."""

import itertools
import sys

import jax
import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
import pgmjax.compat.mbi as door


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 2_000
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n))
    c = rng.integers(0, 4, n)
    d = np.where(rng.random(n) < 0.7, c % 2, rng.integers(0, 2, n))
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})


def _tvd(real: pd.DataFrame, fake: pd.DataFrame) -> float:
    def one(cols):
        p, q = real.groupby(cols).size() / len(real), fake.groupby(cols).size() / len(fake)
        return 0.5 * p.sub(q, fill_value=0).abs().sum()

    return float(np.mean([one(list(c)) for c in itertools.combinations(real.columns, 2)]))


def test_values_behave_as_mbi_describes_them(table):
    dom = door.Domain(list(table.columns), [3, 3, 4, 2])
    assert dom.attrs == ("a", "b", "c", "d") and dom.size(["a", "c"]) == 12 and door.Domain.fromdict(dom.config) == dom
    data = door.Dataset(table.to_numpy(), dom)
    assert data.records == 2_000 and list(data.df.columns) == list(dom.attrs)
    ba = data.project(["b", "a"])  # axes in the order asked
    assert ba.domain.attrs == ("b", "a") and ba.values.shape == (3, 3)
    np.testing.assert_array_equal(ba.values, pd.crosstab(table["b"], table["a"]).to_numpy())
    np.testing.assert_array_equal(ba.project("a").datavector(), np.bincount(table["a"], minlength=3))
    assert door.Dataset(table, dom).project("c").datavector().tolist() == data.project("c").datavector().tolist()
    with pytest.raises(ValueError, match="column 'c' holds values outside"):
        door.Dataset(table.to_numpy(), door.Domain(list(table.columns), [3, 3, 3, 2]))


def test_mirror_descent_is_pgmjaxs_estimate_on_the_same_measurements(table):
    dom = door.Domain(list(table.columns), [3, 3, 4, 2])
    data = door.Dataset(table.to_numpy(), dom)
    rng = np.random.default_rng(1)
    cliques = [("a", "b"), ("b", "c"), ("c", "d")]
    ys = {c: data.project(c).datavector() + rng.normal(0, 10, dom.size(c)) for c in cliques}
    ms = [door.LinearMeasurement(ys[c], c, 10.0) for c in cliques]
    model = door.estimation.mirror_descent(dom, ms, known_total=2_000.0, iters=300,
                                           marginal_oracle=door.marginal_oracles.message_passing_stable)
    direct = pj.estimate(pj.Domain(dom.config), [pj.Measurement(c, ys[c], 10.0) for c in cliques], iters=300,
                         total=2_000.0)
    for c in cliques:
        np.testing.assert_allclose(model.project(c).values, direct.marginal(c), rtol=1e-6)
    assert model.cliques == cliques and model.total == pytest.approx(2_000.0)
    assert door.junction_tree.hypothetical_model_size(dom, model.cliques + [("a", "d")]) > \
        door.junction_tree.hypothetical_model_size(dom, model.cliques)
    warm = door.estimation.mirror_descent(dom, ms + [door.LinearMeasurement(data.project(["a", "d"]).datavector(), ("a", "d"), 5.0)],
                                          potentials=model.potentials, iters=100)
    assert ("a", "d") in warm.cliques and warm.project(["a", "d"]).values.sum() == pytest.approx(2_000.0, rel=1e-2)
    synth = model.synthetic_data(rows=500)
    assert synth.records == 500 and synth.domain == dom
    # No global generator: the records follow from the call's arguments (and the key, where given).
    assert synth.df.equals(model.synthetic_data(rows=500).df)
    assert not synth.df.equals(model.synthetic_data(rows=500, key=jax.random.key(1)).df)


def test_what_the_door_does_not_cover_is_refused_by_name(table):
    dom = door.Domain(["a"], [3])
    m = door.LinearMeasurement(np.ones(3), ("a",), 1.0)
    with pytest.raises(NotImplementedError, match="callback_fn is not covered"):
        door.estimation.mirror_descent(dom, [m], callback_fn=print)
    with pytest.raises(NotImplementedError, match="takes a list of LinearMeasurement"):
        door.estimation.mirror_descent(dom, lambda mu: 0.0)
    with pytest.raises(NotImplementedError, match="other queries"):
        door.estimation.mirror_descent(dom, [door.LinearMeasurement(np.ones(1), ("a",), 1.0, query=np.sum)])
    with pytest.raises(NotImplementedError, match="accepted by mirror_descent"):
        door.marginal_oracles.message_passing_stable(None)


def test_installing_puts_the_door_in_sys_modules_and_takes_it_out():
    before = sys.modules.get("mbi")
    with door.installed():
        import mbi
        from mbi.estimation import mirror_descent

        assert mbi is door and mirror_descent is door.estimation.mirror_descent
    assert sys.modules.get("mbi") is before


def test_smartnoise_synths_mst_and_aim_run_on_the_door(table):
    pytest.importorskip("snsynth", reason="smartnoise-synth is not installed (pip install smartnoise-synth)")
    from snsynth import Synthesizer

    for name in ("mst", "aim"):
        with door.installed():
            np.random.seed(0)
            synth = Synthesizer.create(name, epsilon=1.0, delta=1e-9)
            synth.fit(table, categorical_columns=list(table.columns), preprocessor_eps=0.0)
            fake = synth.sample(2_000)
            assert type(synth.synthesizer).__module__.startswith("pgmjax.compat.mbi")
        assert len(fake) == 2_000 and _tvd(table, fake.astype(int)) < 0.05, name


def test_opendps_contingency_tables_run_on_the_door(table):
    dp = pytest.importorskip("opendp.prelude", reason="OpenDP is not installed (pip install opendp)")
    pl = pytest.importorskip("polars", reason="polars is not installed")
    dp.enable_features("contrib")
    with door.installed():
        context = dp.Context.compositor(data=pl.LazyFrame(table), privacy_unit=dp.unit_of(contributions=1),
                                        privacy_loss=dp.loss_of(rho=0.5))
        release = (context.query(rho=0.5).select(*table.columns)
                   .contingency_table(keys={c: list(range(k)) for c, k in zip(table.columns, (3, 3, 4, 2))},
                                      algorithm=dp.mbi.MST()).release())
        fake = release.synthesize(2_000)
        assert isinstance(release.model, door.MarkovRandomField)
    fake = fake.to_pandas() if hasattr(fake, "to_pandas") else fake
    assert len(fake) == 2_000 and _tvd(table, fake[list(table.columns)]) < 0.05
