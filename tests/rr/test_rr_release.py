"""pgmjax.rr through the privacy layer: the sampler's law (W2-2), unbiasedness and variance by simulation (W2-4),
the ledger (pure epsilon), add/remove refused without a public count, the rr_synthetic front-end and registry."""

import importlib
import math
import warnings

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import queries as Q
from pgmjax import rr
from pgmjax.mechanisms import registry
from pgmjax.privacy import Accountant

LN3 = math.log(3.0)


def rr_release(key, data, epsilon, per_attribute=False):
    return rr.release(key, data, epsilon, per_attribute=per_attribute)


# ---------------------------------------------------------------------------------------------------
# W2-2: the sampler's law
# ---------------------------------------------------------------------------------------------------


def test_w22_sampler_law_k4():
    data = pj.Dataset(np.zeros((10**6, 1), dtype=int), {"v": 4})
    rel = rr_release(jax.random.key(0), data, LN3)
    freq = np.bincount(rel.data.records[:, 0], minlength=4) / 10**6
    assert abs(freq[0] - 0.5) < 0.002
    assert np.all(np.abs(freq[1:] - 1 / 6) < 0.002)


def test_w22_sampler_law_product_domain():
    """(2, 3, 5): K = 30, whole-row keep frequency e^eps / (e^eps + 29), each other row 1 / (e^eps + 29)."""
    dom = pj.Domain({"a": 2, "b": 3, "c": 5})
    data = pj.Dataset(np.zeros((10**6, 3), dtype=int), dom)
    rel = rr_release(jax.random.key(1), data, LN3)
    flat = np.ravel_multi_index(tuple(rel.data.records.T), (2, 3, 5))
    freq = np.bincount(flat, minlength=30) / 10**6
    assert abs(freq[0] - 3 / 32) < 0.002
    assert np.all(np.abs(freq[1:] - 1 / 32) < 0.002)
    # per attribute: eps / 3 each, independent coordinates
    rel = rr_release(jax.random.key(2), data, 3 * LN3, per_attribute=True)
    for j, k in enumerate((2, 3, 5)):
        f = np.bincount(rel.data.records[:, j], minlength=k) / 10**6
        assert abs(f[0] - 3 / (3 + k - 1)) < 0.002 and np.all(np.abs(f[1:] - 1 / (3 + k - 1)) < 0.002)
    joint = np.mean((rel.data.records[:, 0] == 0) & (rel.data.records[:, 2] == 0))
    assert abs(joint - (3 / 4) * (3 / 7)) < 0.002


# ---------------------------------------------------------------------------------------------------
# W2-4: unbiasedness and variance by simulation (10^4 releases in one stacked release: rows are independent)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("per_attribute", [False, True])
def test_w24_unbiased_and_variance(per_attribute):
    dom = pj.Domain({"a": 2, "b": 3, "c": 5})
    rng = np.random.default_rng(11)
    n, reps = 40, 10**4
    data = pj.Dataset(rng.integers(0, [2, 3, 5], size=(n, 3)), dom)
    query = {"a": Q.Value(1), "c": rng.uniform(-1, 2, size=(1, 5))}
    eps = 2.0
    stacked = pj.Dataset(np.tile(data.records, (reps, 1)), dom)
    big = rr_release(jax.random.key(3), stacked, eps, per_attribute)
    truth = float(Q.kron_apply(data.marginal(("a", "c")), Q.resolve(dom, query)[1]).reshape(-1)[0])
    # The estimate and its variance estimate are sums over records: tabulate one record's contribution per
    # released row with answer() itself, sum per replica, and check the sums against answer() on some replicas.
    cells = np.array(np.unravel_index(np.arange(30), (2, 3, 5))).T
    per_row = [rr.answer(rr.Release.of(pj.Dataset(c[None], dom), eps, per_attribute), query, return_variance=True) for c in cells]
    g, v = np.array([a.value.item() for a in per_row]), np.array([a.variance.item() for a in per_row])
    idx = np.ravel_multi_index(tuple(big.data.records.T), (2, 3, 5)).reshape(reps, n)
    values, est_var = g[idx].sum(axis=1), v[idx].sum(axis=1)
    for r in range(0, reps, 2000):
        a = rr.answer(rr.Release(pj.Dataset._trusted(big.data.records[r * n:(r + 1) * n], dom), big.channel), query, return_variance=True)
        assert a.value.item() == pytest.approx(values[r], abs=1e-9) and a.variance.item() == pytest.approx(est_var[r], abs=1e-9)
    exact = rr.exact_variance(data, rr.Release.of(data, eps, per_attribute), query).item()
    se = math.sqrt(exact / reps)
    assert abs(values.mean() - truth) < 3 * se
    assert values.var(ddof=1) == pytest.approx(exact, rel=0.05)
    assert abs(est_var.mean() - exact) < 4 * est_var.std(ddof=1) / math.sqrt(reps)  # the variance estimate is unbiased too


def test_statistical_query_by_simulation():
    """Row-specific functions ([WYZ] Definition 3) on a 5-valued column: unbiased, variance as computed."""
    dom = pj.Domain({"rating": 5})
    rng = np.random.default_rng(12)
    n, reps, h = 60, 4000, 3
    data = pj.Dataset(rng.integers(0, 5, size=(n, 1)), dom)
    query = rr.StatisticalQuery(("rating",), rng.uniform(size=(h, 5)), assignment=rng.integers(0, h, n))
    truth = query.functions[query.assignment, data.records[:, 0]].sum()
    big = rr_release(jax.random.key(4), pj.Dataset(np.tile(data.records, (reps, 1)), dom), 1.0)
    values = np.array([float(rr.answer(rr.Release(pj.Dataset._trusted(big.data.records[r * n:(r + 1) * n], dom), big.channel), query))
                       for r in range(reps)])
    exact = float(rr.exact_variance(data, rr.Release.of(data, 1.0), query))
    assert abs(values.mean() - truth) < 3 * math.sqrt(exact / reps)
    assert values.var(ddof=1) == pytest.approx(exact, rel=0.08)
    assert exact <= n * rr.bound_constant(5, 1.0) * 4 * 1.0  # per-row variance <= c(K, eps) * 4 * w^2 / 4 (w = 1)


# ---------------------------------------------------------------------------------------------------
# Accounting
# ---------------------------------------------------------------------------------------------------


def test_ledger_records_pure_epsilon():
    data = pj.Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
    acc = Accountant(epsilon=1.5, bounded=True)
    rel = rr.release(jax.random.key(0), data, 1.0, accountant=acc, per_attribute=True)
    assert len(acc.ledger) == 1 and acc.ledger[0].epsilon == pytest.approx(1.0)
    assert acc.spent == pytest.approx(1.0) and acc.remaining == pytest.approx(0.5)
    assert len(rel.data) == 3 and rel.data.domain == data.domain
    z = Accountant(rho=1.0, bounded=True)
    rr.release(jax.random.key(1), data, 0.5, accountant=z)
    assert z.ledger[0].epsilon == pytest.approx(0.5) and z.spent == pytest.approx(0.5**2 / 2)
    with pytest.raises(pj.PrivacyBudgetExceeded):
        rr.release(jax.random.key(2), data, 1.0, accountant=acc)


def test_add_remove_refused_without_public_count():
    data = pj.Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
    acc = Accountant(epsilon=1.0)  # add/remove neighbours
    with pytest.raises(ValueError, match="public"):
        rr.release(jax.random.key(0), data, 1.0, accountant=acc)
    assert len(acc.ledger) == 0
    rr.release(jax.random.key(0), data, 1.0, accountant=acc, public_count=True)
    assert acc.spent == pytest.approx(1.0)
    with pytest.raises(ValueError, match="public_count=True"):
        pj.mechanisms.rr_synthetic(data, 1.0, key=jax.random.key(0), bounded=False)
    # graphs: the number of pairs follows from the public vertex count, so release_pairs declares it
    acc2 = Accountant(epsilon=1.0)
    rr.release_pairs(jax.random.key(0), [[0, 1]], 3, 1.0, accountant=acc2)
    assert acc2.spent == pytest.approx(1.0)


def test_release_pairs_flips_bits():
    edges = np.array([[0, 1], [1, 2]])
    acc = Accountant(epsilon=5.0, bounded=True)
    rel = rr.release_pairs(jax.random.key(0), edges, 200, 5.0, accountant=acc)
    assert acc.spent == pytest.approx(5.0) and rel.adjacency.shape == (200, 200)
    flips = rel.adjacency.sum() / 2 - 2
    pairs = 200 * 199 / 2
    assert abs(flips / pairs - 1 / (1 + math.exp(5.0))) < 5 * math.sqrt(1 / (1 + math.exp(5.0)) / pairs)


# ---------------------------------------------------------------------------------------------------
# The front-end and the registry
# ---------------------------------------------------------------------------------------------------


def test_rr_synthetic_result():
    rng = np.random.default_rng(0)
    dom = pj.Domain({"a": 3, "b": 2, "c": 4})
    a = rng.integers(0, 3, 3000)
    data = pj.Dataset(np.stack([a, (a > 0).astype(int), rng.integers(0, 4, 3000)], 1), dom)
    res = pj.mechanisms.rr_synthetic(data, 4.0, key=jax.random.key(1), per_attribute=True, engine_iters=200)
    assert res.mechanism == "rr_synthetic" and isinstance(res.original, rr.Release)
    assert len(res.ledger) == 1 and res.ledger[0].epsilon == pytest.approx(4.0) and res.accountant.spent == pytest.approx(4.0)
    assert res.info.epsilons == pytest.approx([4 / 3] * 3) and res.info.per_attribute and res.info.bounded
    assert ("a", "b") in res.info.cliques  # the strongest dependence is found in the release
    assert len(res.synthetic) == 3000 and res.model.total == 3000.0
    assert len(res.info.release) == 3000 and res.info.release.domain == dom
    # the fitted model is closer to the truth than the released table read as if it were real
    true = data.marginal(("a", "b"))
    assert np.abs(res.model.marginal(("a", "b")) - true).sum() < np.abs(res.info.release.marginal(("a", "b")) - true).sum()


def test_rr_synthetic_whole_row_warns_when_uninformative():
    data = pj.Dataset(np.random.default_rng(1).integers(0, 10, size=(500, 3)), {"a": 10, "b": 10, "c": 10})
    with pytest.warns(UserWarning, match="informative only up to"):
        res = pj.mechanisms.rr_synthetic(data, 1.0, key=jax.random.key(0), engine_iters=20, synthetic=False)
    assert res.info.rmse_bound == pytest.approx(math.sqrt(rr.mse_bound(1000, 1.0, 500)))
    small = pj.Dataset(np.random.default_rng(1).integers(0, 2, size=(20000, 2)), {"a": 2, "b": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pj.mechanisms.rr_synthetic(small, 2.0, key=jax.random.key(0), engine_iters=20, synthetic=False)


def test_rr_synthetic_bad_input():
    data = pj.Dataset(np.array([[0, 1], [1, 0]]), {"a": 2, "b": 2})
    with pytest.raises(ValueError, match="epsilon must be positive"):
        pj.mechanisms.rr_synthetic(data, -1.0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="cliques is empty"):
        pj.mechanisms.rr_synthetic(data, 1.0, key=jax.random.key(0), cliques=[])
    with pytest.raises(TypeError, match="fit_options must be a pgmjax.FitOptions"):
        pj.mechanisms.rr_synthetic(data, 1.0, key=jax.random.key(0), fit_options={"total": 3})
    with pytest.raises(TypeError, match="Dataset"):
        pj.mechanisms.rr_synthetic(data.records, 1.0, key=jax.random.key(0))
    big = pj.Dataset(np.zeros((2, 200), dtype=int), {f"x{i}": 100 for i in range(200)})
    with pytest.raises(ValueError, match="per_attribute=True"):
        pj.mechanisms.rr_synthetic(big, 1.0, key=jax.random.key(0))


def test_registry_runs_rr_per_attribute():
    data = pj.Dataset(np.random.default_rng(2).integers(0, [3, 2], size=(1000, 2)), {"a": 3, "b": 2})
    entry = registry.MECHANISMS["rr_synthetic"]
    assert entry.privacy == "pure" and entry.cli_defaults["per_attribute"] is True  # the command line's variant
    res = registry.run("rr_synthetic", data, 2.0, key=jax.random.key(0), engine_iters=30, rows=77, **entry.cli_defaults)
    assert res.info.per_attribute and res.info.engine_iters == 30 and len(res.synthetic) == 77
    with pytest.raises(ValueError, match="pure epsilon-DP"):  # a delta is refused, not dropped
        registry.run("rr_synthetic", data, 1.0, 1e-6, key=jax.random.key(0))


def test_module_docstring_examples():
    import doctest

    mod = importlib.import_module("pgmjax.mechanisms.randomized_response_synthetic")
    globs = dict(vars(mod), np=np, jax=jax, pj=pj, math=math, Dataset=pj.Dataset, Domain=pj.Domain)
    result = doctest.testmod(mod, extraglobs=globs, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0


def test_channel_law_matches_the_privacy_layer_sampler():
    """The estimators' law (keep by design with lam, else uniform) is the sampler's k-ary randomized response."""
    from pgmjax.privacy.randomized_response import keep_probability

    for eps, k in [(0.1, 2), (1.0, 5), (LN3, 4), (3.0, 10**6), (0.5, 2**40)]:
        lam = rr.mixing_weight(eps, k)
        assert keep_probability(eps, k) == pytest.approx(lam + (1 - lam) / k, rel=1e-12)
    dom = pj.Domain({"a": 2, "b": 7})
    ch = rr.Channel.per_attribute(dom, 1.0)
    assert [keep_probability(0.5, n) for n in (2, 7)] == pytest.approx([l + (1 - l) / n for l, n in zip(ch.keep, (2, 7))])


def test_rr_synthetic_releases_through_rr_release():
    """issue 45: the mechanism calls rr.release (no copy of its logic): the same key gives the same table,
    channel and ledger entry (labelled by the mechanism's target)."""
    rng = np.random.default_rng(2)
    dom = pj.Domain({"a": 3, "b": 2})
    data = pj.Dataset(rng.integers(0, [3, 2], (500, 2)), dom)
    key = jax.random.key(4)
    res = pj.mechanisms.rr_synthetic(data, 2.0, key=key, per_attribute=True, engine_iters=20, synthetic=False)
    acc = Accountant(epsilon=2.0, bounded=True)
    rel = rr.release(jax.random.split(key)[0], data, 2.0, per_attribute=True, accountant=acc, target="records")
    np.testing.assert_array_equal(res.original.data.records, rel.data.records)
    assert res.original.channel == rel.channel and list(res.original.channel.keep) == res.info.keep
    assert res.ledger[0].target == acc.ledger[0].target == "records"
