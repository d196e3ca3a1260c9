"""How merged values are spread back (pgmjax.mechanisms.domain_compression): the simplex projection against a
general solver, Stein's unbiased risk estimate against its definition and against the error it estimates, records
and model drawn alike, and TreeAIM's and MST's ``merged_values`` option (post-processing: the ledger and the
measurements are the same either way)."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

import pgmjax as pj
from pgmjax.mechanisms import domain_compression as dc
from pgmjax.mechanisms.spanning_tree_options import MSTOptions
from pgmjax.mechanisms.tree_aim_options import TreeAIMOptions


def _solver_projection(y, total):
    """The projection onto ``{x >= 0, sum x = total}`` by a general constrained solver."""
    res = minimize(lambda x: 0.5 * np.sum((x - y) ** 2), np.full(y.size, total / y.size), jac=lambda x: x - y,
                   bounds=[(0, None)] * y.size, constraints=[{"type": "eq", "fun": lambda x: x.sum() - total}],
                   method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    return res.x


@pytest.mark.parametrize("seed", range(6))
def test_the_simplex_projection_is_the_solver_s(seed):
    rng = np.random.default_rng(seed)
    y = rng.normal(3.0, 6.0, size=rng.integers(2, 12))
    total = float(rng.uniform(0.5, 40.0))
    p = dc._simplex_projection(y, total)
    assert p.min() >= 0 and p.sum() == pytest.approx(total, rel=1e-12)
    np.testing.assert_allclose(p, _solver_projection(y, total), atol=1e-6)


def _estimate(y, var, total, lam):
    """``u + lam (p - u)`` at a fixed ``lam``, in counts."""
    even = np.full(y.size, total / y.size)
    return even + lam * (dc._simplex_projection(y, total) - even)


def test_the_shrinkage_minimises_stein_s_risk_estimate_with_the_divergence_taken_numerically():
    rng = np.random.default_rng(0)
    truth = np.array([40.0, 25.0, 0, 0, 3, 0, 12, 0, 0, 1])
    var = np.full(truth.size, 36.0)
    y = truth + rng.normal(0.0, 6.0, truth.size)
    total = float(truth.sum())

    def sure(lam, h=1e-6):
        x = _estimate(y, var, total, lam)
        div = sum((_estimate(y + h * e, var, total, lam)[i] - _estimate(y - h * e, var, total, lam)[i]) / (2 * h)
                  for i, e in enumerate(np.eye(y.size)))
        return float((x - y) @ (x - y)) + 2.0 * var[0] * div

    grid = np.linspace(0.0, 1.0, 201)
    best = grid[int(np.argmin([sure(g) for g in grid]))]
    shares = dc._shrunk_shares(y, var, total)
    lam = float(((shares * total - total / y.size) @ (dc._simplex_projection(y, total) - total / y.size))
                / np.sum((dc._simplex_projection(y, total) - total / y.size) ** 2))
    assert lam == pytest.approx(best, abs=0.006)
    assert 0.0 < lam < 1.0


@pytest.mark.parametrize("truth, better", [
    (np.array([60.0, 30, 0, 0, 0, 5, 0, 0, 20, 0, 0, 0]), True),      # signal: sparse counts, well above the noise
    (np.full(12, 4.0), False),                                         # no signal: even counts
])
def test_the_measured_spread_beats_even_where_there_is_signal_and_stays_even_where_there_is_none(truth, better):
    """Over many noise draws, the squared error of the counts (what the estimate minimises in expectation)."""
    rng = np.random.default_rng(1)
    var = np.full(truth.size, 25.0)
    total = float(truth.sum())
    errs = {"measured": [], "even": []}
    lams = []
    for _ in range(400):
        y = truth + rng.normal(0.0, 5.0, truth.size)
        x = dc._shrunk_shares(y, var, total) * total
        errs["measured"].append(np.sum((x - truth) ** 2))
        errs["even"].append(np.sum((total / truth.size - truth) ** 2))
        lams.append(np.abs(x - total / truth.size).sum() / total)
    measured, even = np.mean(errs["measured"]), np.mean(errs["even"])
    if better:
        assert measured < 0.25 * even
    else:
        assert even == 0.0 and measured < 0.5 * 12 * 25.0  # under half the raw noise's squared error
        assert np.median(lams) < 0.1                       # mostly shrunk all the way to even


def test_measured_spread_keeps_kept_values_whole_and_each_merged_value_s_shares_sum_to_one():
    m = pj.Measurement(("a",), [50.0, 30.0, 40.0, -2.0, 1.0, 9.0], stddev=5.0)
    cmap = np.array([0, 2, 1, 2, 2, 3])
    spread = dc.measured_spread({"a": cmap}, [m], {"a": np.array([50.0, 40.0, 31.0, 9.0])})["a"]
    assert spread[0] == spread[2] == spread[5] == 1.0
    assert spread[[1, 3, 4]].sum() == pytest.approx(1.0) and spread[1] > 0.9 and spread.min() > 0
    # where the model puts nothing in a merged value, its spread is even
    flat = dc.measured_spread({"a": cmap}, [m], {"a": np.array([50.0, 40.0, 0.0, 9.0])})["a"]
    np.testing.assert_allclose(flat[[1, 3, 4]], 1 / 3)
    # a mass far below the counts (1e-20 against 30) is lost to rounding in the projection: even, not a crash
    tiny = dc.measured_spread({"a": cmap}, [m], {"a": np.array([50.0, 40.0, 1e-20, 9.0])})["a"]
    np.testing.assert_allclose(tiny[[1, 3, 4]], 1 / 3)
    np.testing.assert_allclose(dc._simplex_projection(np.array([30.0, -2.0, 1.0]), 1e-20), 0.0)  # no IndexError
    np.testing.assert_allclose(dc.uniform_spread({"a": cmap})["a"], [1, 1 / 3, 1, 1 / 3, 1 / 3, 1])


@pytest.mark.parametrize("bad, match", [
    (dict(one_way=[]), "no one-way measurement of the compressed attribute 'a'"),
    (dict(counts={"a": np.ones(3)}), r"counts\['a'\] must have 4 entries"),
    (dict(one_way=[pj.Measurement(("a",), np.ones(5), stddev=1.0)]), "has 5 values, the mapping 6"),
])
def test_measured_spread_bad_input(bad, match):
    args = dict(mapping={"a": np.array([0, 2, 1, 2, 2, 3])},
                one_way=[pj.Measurement(("a",), np.ones(6), stddev=1.0)], counts={"a": np.ones(4)})
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        dc.measured_spread(**args)


def test_records_and_model_spread_merged_values_alike():
    """decompress_data draws value x with probability spread[x]; decompress_model is the law of those records."""
    cdom, dom = pj.Domain({"a": 3, "b": 2}), pj.Domain({"a": 5, "b": 2})
    cmap = np.array([0, 2, 1, 2, 2])
    spread = {"a": np.array([1.0, 0.7, 1.0, 0.1, 0.2])}
    model_c = pj.estimate(cdom, [pj.Measurement(("a", "b"), [[100.0, 80], [60, 40], [120, 100]], stddev=1.0)],
                          iters=300, dtype=jnp.float64)
    lifted = dc.decompress_model(model_c, {"a": cmap}, dom, spread)
    joint_c = np.asarray(model_c.marginal(("a", "b")))
    np.testing.assert_allclose(np.asarray(lifted.marginal(("a", "b"))), joint_c[cmap] * spread["a"][:, None],
                               rtol=1e-9)
    records = np.repeat(np.array([[2, 0], [0, 1], [1, 0]]), [60_000, 10, 10], axis=0)
    back = dc.decompress_data(pj.Dataset(records, cdom), {"a": cmap}, dom, jax.random.key(0), spread).records
    assert np.array_equal(cmap[back[:, 0]], records[:, 0])                       # compress(decompress(x)) == x
    freq = np.bincount(back[:60_000, 0], minlength=5)[[1, 3, 4]] / 60_000
    np.testing.assert_allclose(freq, [0.7, 0.1, 0.2], atol=0.01)
    again = dc.decompress_data(pj.Dataset(records, cdom), {"a": cmap}, dom, jax.random.key(0), spread).records
    assert np.array_equal(back, again)


def test_the_option_is_checked_by_name():
    with pytest.raises(ValueError, match="tree_aim: unknown merged_values 'even'"):
        TreeAIMOptions(merged_values="even")
    with pytest.raises(ValueError, match="mst: unknown merged_values 'even'"):
        MSTOptions(merged_values="even")
    assert TreeAIMOptions().merged_values == "measured" and MSTOptions().merged_values == "uniform"


def _wide_table(n=4_000, seed=0):
    """A 60-value column: four common values, twenty rare ones (about 40 records each, which the compression merges)
    and 36 never seen, as a finely binned number's are."""
    rng = np.random.default_rng(seed)
    wide = np.where(rng.random(n) < 0.8, rng.choice([3, 11, 17, 40], n), rng.choice(np.arange(20, 40), n))
    b = np.where(rng.random(n) < 0.8, wide % 3, rng.integers(0, 3, n))
    c = np.where(rng.random(n) < 0.7, b % 2, rng.integers(0, 2, n))
    return pj.Dataset(np.stack([wide, b, c], 1), {"w": 60, "b": 3, "c": 2})


@pytest.mark.parametrize("mechanism", ["tree_aim", "mst"])
def test_merged_values_changes_only_what_is_released_after_the_fit(mechanism):
    data = _wide_table()
    fn = getattr(pj.mechanisms, mechanism)
    quick = dict(select_iters=20, engine_iters=60, **({"round_iters": 20} if mechanism == "tree_aim" else {}))
    runs = {mv: fn(data, 1.0, key=jax.random.key(2), merged_values=mv, **quick) for mv in ("uniform", "measured")}
    even, measured = runs["uniform"], runs["measured"]
    assert "w" in measured.info.mapping
    assert [e.cost for e in even.ledger] == [e.cost for e in measured.ledger]
    for a, b in zip(even.measurements, measured.measurements):
        np.testing.assert_array_equal(a.y, b.y)
    assert even.info.spread is None
    cmap, shares = measured.info.mapping["w"], measured.info.spread["w"]
    np.testing.assert_allclose(np.bincount(cmap, weights=shares), 1.0)
    # the released model is the compressed one with each merged value spread by the shares the info reports
    counts_c = np.asarray(measured.info.compressed_model.marginal(("w",)))
    np.testing.assert_allclose(np.asarray(measured.model.marginal(("w",))), counts_c[cmap] * shares, rtol=1e-4)
    # and here, where the merged values' counts are far from even, it is closer to the data's one-way counts
    truth = np.bincount(np.asarray(data.records)[:, 0], minlength=60)
    err = {mv: np.abs(np.asarray(r.model.marginal(("w",))) - truth).sum() for mv, r in runs.items()}
    assert err["measured"] < err["uniform"]
