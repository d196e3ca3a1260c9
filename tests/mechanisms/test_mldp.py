"""MLDP (Zhu, Xiong, Li, Zhou & Yu, IEEE BigData 2017, Algorithm 1) and MLDP+PGM: the paper's Table I/II and
subset-sum anchors, brute-force sensitivity, the training-set selector against a direct implementation of
its rule, exact recovery from noise-free answers by both arms, the ledger, reproducibility and bad input."""

import doctest
import importlib
import itertools
import math
import pkgutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj

ml = importlib.import_module("pgmjax.mechanisms.query_learning.sensitivity")  # where _VE_LIMIT is read
from pgmjax.mechanisms.query_learning import (
    QuerySet,
    RegressionModel,
    fit_pgm,
    fit_regression,
    laplace_baseline,
    mldp,
    pgm_measurements,
    select_training,
    training_sensitivity,
)

F64 = pj.FitOptions(dtype=jnp.float64)  # conftest enables x64; exact-recovery checks run the engine in float64

# ---------------------------------------------------------------------------------------------------
# The paper's worked example (Tables I and II)
# ---------------------------------------------------------------------------------------------------

GRADES = [12, 24, 6, 7]  # x1: 90-100, x2: 80-89, x3: 70-79, x4: 60-69


@pytest.fixture(scope="module")
def grades():
    dom = pj.Domain({"grade": 4})
    return pj.Dataset(np.repeat(np.arange(4), GRADES)[:, None], dom)


def paper_ranges(domain):
    """f1..f10: the 10 ranges over x1..x4, longest first, so that f7..f10 are the single bins."""
    spans = sorted(((lo, hi) for lo in range(4) for hi in range(lo, 4)), key=lambda s: (-(s[1] - s[0]), s[0]))
    rows = np.array([[1.0 if lo <= j <= hi else 0.0 for j in range(4)] for lo, hi in spans])
    return QuerySet(domain, [(("grade",), rows)])


def test_table_anchors(grades):
    f = paper_ranges(grades.domain)
    assert len(f) == 10
    rows = f.blocks[0][1]
    assert rows.sum(axis=0).tolist() == [4, 6, 6, 4]  # x2 and x3 lie in 6 ranges, x1 and x4 in 4
    assert training_sensitivity(f) == 6.0
    assert training_sensitivity(f.take(np.arange(6, 10))) == 1.0  # f7..f10, the single bins
    answers = f.answer(grades)
    assert answers[0] == 49.0  # f1, the full range
    assert answers[6:].tolist() == GRADES
    assert training_sensitivity(f, bounded=True) == 12.0
    # every other range is a sum of f7..f10: the linear model on them reproduces all ten exactly
    reg = fit_regression(f.take(np.arange(6, 10)), answers[6:])
    np.testing.assert_allclose(reg.predict(f), answers, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_selector_picks_the_single_bins(grades, seed):
    f = paper_ranges(grades.domain)
    picked = select_training(f, 4, key=jax.random.key(seed))
    assert sorted(picked.tolist()) == [6, 7, 8, 9]
    res = mldp(grades, 1.0, key=jax.random.key(seed), training=f, size=4, engine_iters=50)
    assert res.info.sensitivity == 1.0 and res.ledger[0].scale == 1.0
    assert sorted(res.info.training_index.tolist()) == [6, 7, 8, 9]


def test_subset_sum_anchors():
    dom = pj.Domain({"bin": 10})
    subsets = QuerySet.subset_sums(dom, "bin")
    assert len(subsets) == 1023
    rows = subsets.blocks[0][1]
    assert len({tuple(r) for r in rows}) == 1023 and rows.sum(axis=1).min() == 1
    assert rows.sum(axis=0).tolist() == [512] * 10
    assert training_sensitivity(subsets) == 512.0
    assert training_sensitivity(QuerySet.cells(dom, "bin")) == 1.0
    picked = select_training(subsets, 10, key=jax.random.key(3))
    np.testing.assert_array_equal(np.sort(rows[picked], axis=0)[::-1].sum(axis=0), np.ones(10))  # a partition
    assert training_sensitivity(subsets.take(picked)) == 1.0 and rows[picked].sum() == 10


# ---------------------------------------------------------------------------------------------------
# Sensitivity by brute force
# ---------------------------------------------------------------------------------------------------

TINY = pj.Domain({"a": 2, "b": 3})


def brute_force(queries, bounded, max_records=2):
    """max over neighbouring D, D' (at most `max_records` records) of sum_f |f(D) - f(D')|."""
    cells = list(itertools.product(range(2), range(3)))

    def answer(recs):  # a Dataset cannot be empty; no records answer 0 to every linear query
        return queries.answer(pj.Dataset(np.array(recs, dtype=np.int64), TINY)) if recs else np.zeros(len(queries))

    best = 0.0
    for n in range(max_records + 1):
        for recs in itertools.combinations_with_replacement(cells, n):
            base = answer(recs)
            if bounded:  # replace one record
                neighbours = [recs[:i] + (c,) + recs[i + 1 :] for i in range(n) for c in cells]
            else:  # add one record (removing is the same pair seen from the other side)
                neighbours = [recs + (c,) for c in cells]
            for nb in neighbours:
                other = answer(nb)
                best = max(best, float(np.abs(base - other).sum()))
    return best


def test_sensitivity_brute_force_one_clique(rng):
    q = QuerySet(TINY, [(("a", "b"), rng.integers(-2, 3, (5, 6)).astype(float))])
    s = training_sensitivity(q)
    assert s == brute_force(q, bounded=False) == np.abs(q.blocks[0][1]).sum(axis=0).max()
    assert brute_force(q, bounded=True) <= training_sensitivity(q, bounded=True) == 2 * s
    cells = QuerySet.cells(TINY, ("a", "b"))
    assert brute_force(cells, bounded=True) == training_sensitivity(cells, bounded=True) == 2.0


def test_sensitivity_brute_force_across_cliques():
    # Per clique the heaviest columns are a=0 on ("a",) (norm 5) and a=1 on ("a", "b") (norm 4 at
    # b=2); no record reaches both, so S = max(5 + 1, 1 + 4) = 6, not 5 + 4.
    q = QuerySet(
        TINY,
        [
            (("a",), [[3.0, 1.0], [2.0, 0.0]]),
            (("a", "b"), [[0, 0, 0, 1, 0, 2], [1, 0, 0, 0, 1, 2]]),
            (("b",), [[0.0, 0.0, 0.0]]),
        ],
    )
    assert training_sensitivity(q) == brute_force(q, bounded=False) == 6.0
    assert training_sensitivity(q, bounded=True) == 12.0 >= brute_force(q, bounded=True)
    rng = np.random.default_rng(5)
    for _ in range(3):
        q = QuerySet(TINY, [(("a",), rng.integers(0, 3, (2, 2))), (("b",), rng.integers(-1, 2, (3, 3))), (("a", "b"), rng.integers(0, 2, (2, 6)))])
        assert training_sensitivity(q) == brute_force(q, bounded=False, max_records=1)


def test_sensitivity_of_many_cliques(monkeypatch):
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 3})
    pairs = list(itertools.combinations(dom.attributes, 2))
    cells = QuerySet(dom, [(c, np.eye(dom.size(c))) for c in pairs])  # every cell of every 2-way marginal
    assert training_sensitivity(cells) == 6.0 and ml.sensitivity_is_exact(cells)
    ranges = QuerySet(dom, [(c, QuerySet.rectangles(dom, c).blocks[0][1]) for c in pairs])
    exact = training_sensitivity(ranges)
    records = np.array(list(itertools.product(*[range(n) for n in dom.shape])))
    by_record = sum(ranges.blocks[i][1][:, np.ravel_multi_index(records[:, [dom.index(a) for a in c]].T, dom.shape_of(c))].sum(axis=0) for i, c in enumerate(pairs))
    assert exact == by_record.max() and ml.sensitivity_is_exact(ranges)
    # above the elimination limit: the sum of the per-clique maxima, an upper bound, flagged
    monkeypatch.setattr(ml, "_VE_LIMIT", 10)
    upper = sum(np.abs(m).sum(axis=0).max() for _, m in ranges.blocks)
    assert training_sensitivity(ranges) == upper >= exact and not ml.sensitivity_is_exact(ranges)


# ---------------------------------------------------------------------------------------------------
# The selector
# ---------------------------------------------------------------------------------------------------


def reference_select(candidates, size, key):
    """The documented rule, recomputed from scratch at every step."""
    w = np.abs(candidates.dense()[0])
    sup = w > 0
    k = w.shape[0]
    order = np.empty(k, np.int64)
    order[np.asarray(jax.random.permutation(key, k))] = np.arange(k)
    load = np.zeros(w.shape[1])
    picks = []
    for step in range(size):
        open_cells = load == load.min()
        t = open_cells.sum() / (size - step)
        best = None
        for i in range(k):
            if i in picks:
                continue
            n = sup[i, open_cells].sum()
            rise = max(np.max(load[sup[i]] + w[i, sup[i]]) - load.max(), 0.0)
            overlap = w[i, ~open_cells].sum()
            first = min((j for j in np.flatnonzero(open_cells) if sup[i, j]), default=w.shape[1])
            score = (-min(n, math.ceil(t)), rise, overlap, abs(n - t), first, order[i])
            if best is None or score < best[0]:
                best = (score, i)
        picks.append(best[1])
        load += w[best[1]]
    return np.array(picks)


@pytest.mark.parametrize("seed", range(3))
def test_selector_matches_its_rule(seed):
    rng = np.random.default_rng(seed)
    dom = pj.Domain({"a": 5, "b": 3})
    cands = QuerySet(dom, [(("a", "b"), rng.choice([0, 0, 1, 2, -1], size=(25, 15))), (("a",), rng.integers(0, 2, (8, 5)))])
    cands = QuerySet(dom, [(c, m[np.abs(m).sum(axis=1) > 0]) for c, m in cands.blocks])
    for size in (1, 4, 12, len(cands) - 1):
        key = jax.random.key(seed + 10 * size)
        np.testing.assert_array_equal(select_training(cands, size, key=key), reference_select(cands, size, key))
    assert select_training(cands, len(cands), key=jax.random.key(0)).tolist() == list(range(len(cands)))


@pytest.mark.parametrize("m", [1, 3, 7, 12, 20])
def test_selector_partitions_ranges(m):
    """With every 1-D range available and m <= n the selector finds a partition: coverage 1, S = 1."""
    dom = pj.Domain({"x": 20})
    ranges = QuerySet.ranges(dom, "x")
    rows = ranges.blocks[0][1][select_training(ranges, m, key=jax.random.key(m))]
    assert rows.sum(axis=0).tolist() == [1.0] * 20
    sizes = rows.sum(axis=1)
    assert sizes.max() - sizes.min() <= 1  # near-equal parts


# ---------------------------------------------------------------------------------------------------
# Exact recovery from noise-free answers
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    """Three attributes, every cell of the queried cliques non-empty."""
    rng = np.random.default_rng(3)
    dom = pj.Domain({"a": 6, "b": 3, "c": 4})
    return pj.Dataset(rng.integers(0, [6, 3, 4], (600, 3)), dom)


def covering_sets(domain):
    return {
        "cells": QuerySet.cells(domain, "a"),
        "ranges": QuerySet.ranges(domain, "a"),
        "subset sums": QuerySet.subset_sums(domain, "a"),
        "two cliques": QuerySet.ranges(domain, "a") + QuerySet.rectangles(domain, ("b", "c")),
    }


@pytest.mark.parametrize("name", ["cells", "ranges", "subset sums", "two cliques"])
def test_noise_free_answers_recover_the_histogram(small, name):
    train = covering_sets(small.domain)[name]
    exact = train.answer(small)
    reg = fit_regression(train, exact)
    pgm, measurements, source = fit_pgm(small.domain, train, exact, 1.0, iters=300, **F64.given())
    assert source == "estimate_total" and len(measurements) == len(train.cliques)
    for clique in train.cliques:
        truth = small.marginal(clique)
        np.testing.assert_allclose(reg.marginal(clique), truth, atol=1e-9)
        np.testing.assert_allclose(pgm.marginal(clique), truth, atol=1e-6)
    fresh = QuerySet.rectangles(small.domain, ("a",)) + QuerySet.subset_sums(small.domain, "a")
    np.testing.assert_allclose(reg.predict(fresh), fresh.answer(small), atol=1e-8)
    np.testing.assert_allclose(fresh.answer(pgm), fresh.answer(small), atol=1e-5)


def test_mldp_recovers_with_negligible_noise(small):
    """Through the front-end: eps = 1e9 makes the Laplace noise ~1e-9; both arms give the histogram."""
    dom = small.domain
    train = QuerySet.subset_sums(dom, "a")
    fresh = QuerySet.ranges(dom, "a")
    res = mldp(small, 1e9, key=jax.random.key(0), training=train, size=6, fresh=fresh, engine_iters=300, fit_options=F64)
    assert res.info.sensitivity == 1.0 and res.info.coverage == 1.0
    truth = small.marginal("a")
    np.testing.assert_allclose(res.original.marginal("a"), truth, atol=1e-6)
    np.testing.assert_allclose(res.model.marginal("a"), truth, atol=1e-5)
    for part, qs in (("published", train), ("fresh", fresh)):
        for arm in ("original", "pgm"):
            np.testing.assert_allclose(res.info.answers[part][arm], qs.answer(small), atol=1e-4)


# ---------------------------------------------------------------------------------------------------
# The front-end: ledger, arms, reproducibility
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bounded", [False, True])
def test_ledger_sums_exactly_to_the_budget(small, bounded):
    train = QuerySet.ranges(small.domain, "a")
    eps = 0.7
    res = mldp(small, eps, key=jax.random.key(1), training=train, bounded=bounded, engine_iters=50, fit_options=F64)
    (entry,) = res.ledger
    s = training_sensitivity(train, bounded=bounded)
    assert s == (24.0 if bounded else 12.0)  # cell i of 6 lies in (i + 1)(6 - i) of the 21 ranges: 12 at i = 2, 3
    assert entry.mechanism == "laplace" and entry.size == 21 and entry.sensitivity == s
    assert entry.scale == pytest.approx(s / eps) and entry.epsilon == pytest.approx(eps)
    assert res.accountant.spent == eps and res.accountant.budget == eps
    assert res.info.stddev == pytest.approx(math.sqrt(2) * s / eps)
    assert all(m.stddev == pytest.approx(math.sqrt(2) * s / eps) for m in res.measurements)
    if bounded:
        assert res.info.total_source == "bounded: N" and res.model.total == len(small)
    y, acc = laplace_baseline(small, eps, train, key=jax.random.key(1), bounded=bounded)
    assert acc.spent == eps and acc.ledger[0].sensitivity == s and y.shape == (21,)


def test_result_contents_and_fresh_queries(small):
    dom = small.domain
    published = QuerySet.rectangles(dom, ("a", "b"), 60, key=jax.random.key(9))
    fresh = QuerySet.rectangles(dom, ("a", "b"), 20, key=jax.random.key(10)) + QuerySet.ranges(dom, "c")
    res = mldp(small, 1.0, key=jax.random.key(2), training=published, size=15, fresh=fresh, engine_iters=100)
    info = res.info
    assert res.mechanism == "mldp" and isinstance(res.original, RegressionModel) and res.synthetic is None
    assert len(info.training) == 15 == info.size and info.published is published
    np.testing.assert_array_equal(info.training.blocks[0][1], published.blocks[0][1][info.training_index])
    assert info.sensitivity == training_sensitivity(info.training)
    # both arms answer the published queries; ("c",) has no training query: only the +PGM arm answers it
    assert info.answers["published"]["original"].shape == (60,) == info.answers["published"]["pgm"].shape
    assert info.answers["fresh"]["pgm"].shape == (20 + 10,)
    assert info.answers["fresh"]["original"] is None and "('c',)" in info.answers["fresh"]["original_error"]
    np.testing.assert_allclose(info.answers["fresh"]["pgm"], fresh.answer(res.model))
    with pytest.raises(ValueError, match="no training query on"):
        res.original.predict(fresh)
    # the linear model is a table: it answers fresh queries on its clique and works with Workload
    inside = fresh.take(np.arange(20))
    np.testing.assert_allclose(res.original.predict(inside), inside.answer(res.original))
    w = pj.Workload.marginals(dom, [("a", "b"), ("a",)])
    table = res.original.marginal(("a", "b"))
    np.testing.assert_allclose(w.answer(res.original)[1], table.sum(axis=1))
    np.testing.assert_allclose(info.weights[("a", "b")]["weights"], table)
    # noisy answers are what both arms were fitted to
    np.testing.assert_allclose(np.concatenate([m.y for m in res.measurements]), info.noisy_answers)
    syn = mldp(small, 1.0, key=jax.random.key(2), training=published, size=15, engine_iters=100, synthetic=True).synthetic
    assert isinstance(syn, pj.Dataset) and len(syn) == round(res.model.total)


def test_reproducible_from_the_key(small):
    train = QuerySet.rectangles(small.domain, ("a",), 15, key=jax.random.key(4))  # 15 of the 21 ranges
    run = lambda seed: mldp(small, 1.0, key=jax.random.key(seed), training=train, size=6, engine_iters=50, fit_options=F64)
    a, b, c = run(5), run(5), run(6)
    np.testing.assert_array_equal(a.info.training_index, b.info.training_index)
    np.testing.assert_array_equal(a.info.noisy_answers, b.info.noisy_answers)
    np.testing.assert_array_equal(a.info.answers["published"]["pgm"], b.info.answers["published"]["pgm"])
    np.testing.assert_array_equal(a.info.answers["published"]["original"], b.info.answers["published"]["original"])
    assert not np.array_equal(a.info.noisy_answers, c.info.noisy_answers)
    np.testing.assert_array_equal(
        QuerySet.rectangles(small.domain, ("a",), 15, key=jax.random.key(4)).blocks[0][1], train.blocks[0][1]
    )


def test_mldp_beats_the_laplace_baseline_on_subset_sums(small):
    """The paper's simulated subset-sum experiment, in small: the 63 subset sums of 6 bins; Laplace needs S = 32,
    MLDP on the singletons S = 1."""
    subsets = QuerySet.subset_sums(small.domain, "a")
    assert training_sensitivity(subsets) == 32.0
    truth = subsets.answer(small)
    errors = {"mldp": [], "pgm": [], "laplace": []}
    for seed in range(3):
        res = mldp(small, 1.0, key=jax.random.key(seed), training=subsets, size=6, engine_iters=300, fit_options=F64)
        assert res.info.sensitivity == 1.0
        errors["mldp"].append(np.abs(res.info.answers["published"]["original"] - truth).mean())
        errors["pgm"].append(np.abs(res.info.answers["published"]["pgm"] - truth).mean())
        y, _ = laplace_baseline(small, 1.0, subsets, key=jax.random.key(seed))
        errors["laplace"].append(np.abs(y - truth).mean())
    # Laplace: E|Lap(32)| = 32; MLDP: sums of at most 6 Lap(1) values, mean |error| about 2
    assert 20 < np.median(errors["laplace"]) < 45
    assert np.median(errors["mldp"]) < 4 and np.median(errors["pgm"]) < 4


# ---------------------------------------------------------------------------------------------------
# The Gaussian-basis model
# ---------------------------------------------------------------------------------------------------


def test_gaussian_basis_model():
    dom = pj.Domain({"x": 8})
    ranges = QuerySet.ranges(dom, "x")
    rng = np.random.default_rng(2)
    y = rng.normal(50, 10, len(ranges))
    reg = fit_regression(ranges, y, model="gaussian")  # every training query a centre, ridge 0
    p = reg.params[("x",)]
    x = ranges.blocks[0][1]
    dist = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))[np.triu_indices(len(x), 1)]
    assert p["width"] == pytest.approx(np.median(dist[dist > 0]))
    assert p["centers"].shape == (36, 8) and p["weights"].shape == (36,)
    np.testing.assert_allclose(reg.predict(ranges), y, atol=1e-6)  # m centres + intercept interpolate
    manual = p["intercept"] + np.exp(-(dist_matrix(x[:3], p["centers"]) ** 2) / (2 * p["width"] ** 2)) @ p["weights"]
    np.testing.assert_allclose(reg.predict(ranges.take([0, 1, 2])), manual)
    smooth = fit_regression(ranges, y, model="gaussian", ridge=10.0, width=2.0, centers=5)
    assert smooth.params[("x",)]["centers"].shape == (5, 8) and smooth.params[("x",)]["width"] == 2.0
    with pytest.raises(TypeError, match="non-linear"):
        smooth.marginal("x")
    # the answers are the only thing read: the same answers give the same model
    again = fit_regression(ranges, y.copy(), model="gaussian", ridge=10.0, width=2.0, centers=5)
    np.testing.assert_array_equal(again.params[("x",)]["weights"], smooth.params[("x",)]["weights"])


def test_ridge_is_the_closed_form():
    dom = pj.Domain({"x": 8})
    ranges = QuerySet.ranges(dom, "x")
    q = ranges.blocks[0][1]
    y = np.random.default_rng(4).normal(30, 5, len(ranges))
    lin = fit_regression(ranges, y, ridge=0.5)
    np.testing.assert_allclose(lin.marginal("x"), np.linalg.solve(q.T @ q + 0.5 * np.eye(8), q.T @ y), rtol=1e-10)
    g = fit_regression(ranges, y, model="gaussian", ridge=0.5, width=1.5, centers=10).params[("x",)]
    design = np.hstack([np.ones((36, 1)), np.exp(-dist_matrix(q, q[:10]) ** 2 / (2 * 1.5**2))])
    pen = np.hstack([np.zeros((10, 1)), np.sqrt(0.5) * np.eye(10)])  # the intercept is not penalised
    w = np.linalg.lstsq(np.vstack([design, pen]), np.concatenate([y, np.zeros(10)]), rcond=None)[0]
    np.testing.assert_allclose(np.r_[g["intercept"], g["weights"]], w, rtol=1e-8, atol=1e-10)


def dist_matrix(a, b):
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def test_mldp_with_the_gaussian_model(grades):
    f = paper_ranges(grades.domain)
    res = mldp(grades, 1.0, key=jax.random.key(0), training=f, size=4, model="gaussian", ridge=1.0, centers=3, engine_iters=50)
    assert res.original.kind == "gaussian" and res.info.answers["published"]["original"].shape == (10,)
    assert res.original.params[("grade",)]["centers"].shape == (3, 4)
    assert res.accountant.spent == 1.0


def test_total_fallback_when_not_identified():
    dom = pj.Domain({"a": 4})
    data = pj.Dataset(np.repeat(np.arange(4), [5, 6, 7, 8])[:, None], dom)
    train = QuerySet(dom, [(("a",), [[1.0, 1.0, 0.0, 0.0]])])  # the total is not in the row space
    res = mldp(data, 1e9, key=jax.random.key(0), training=train, engine_iters=50)
    assert res.info.total_source == "least_squares" and res.model.total == pytest.approx(11.0)
    assert res.info.coverage == 0.5


# ---------------------------------------------------------------------------------------------------
# Query sets and bad input
# ---------------------------------------------------------------------------------------------------


def test_query_set_builders():
    dom = pj.Domain({"a": 3, "b": 4})
    rect = QuerySet.rectangles(dom, ("a", "b"))
    assert len(rect) == 6 * 10
    assert len({tuple(r) for r in rect.blocks[0][1]}) == 60
    drawn = QuerySet.rectangles(dom, ("a", "b"), 60, key=jax.random.key(0))
    assert {tuple(r) for r in drawn.blocks[0][1]} == {tuple(r) for r in rect.blocks[0][1]}  # all, distinct
    assert len(QuerySet.ranges(dom, "b")) == 10 and len(QuerySet.cells(dom, ("a", "b"))) == 12
    both = QuerySet.ranges(dom, "a") + QuerySet.ranges(dom, "b") + QuerySet.ranges(dom, "a")
    assert both.cliques == (("a",), ("b",)) and len(both) == 22
    groups = both.by_clique()
    assert groups[("a",)][1].tolist() == list(range(6)) + list(range(16, 22))
    taken = both.take([7, 0, 1, 17])
    assert [c for c, _ in taken.blocks] == [("b",), ("a",)] and len(taken) == 4
    dense, cells = both.dense()
    assert dense.shape == (22, 7) and cells == [(("a",), 3), (("b",), 4)]
    rng = np.random.default_rng(0)
    data = pj.Dataset(rng.integers(0, [3, 4], (50, 2)), dom)
    np.testing.assert_allclose(both.answer(data)[6:16], QuerySet.ranges(dom, "b").blocks[0][1] @ data.marginal("b"))


def test_bad_input(small):
    dom = small.domain
    train = QuerySet.ranges(dom, "a")
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="epsilon must be positive"):
        mldp(small, 0.0, key=key, training=train)
    with pytest.raises(TypeError, match="key must be one jax.random key"):
        mldp(small, 1.0, key=0, training=train)
    with pytest.raises(TypeError, match="training must be a QuerySet"):
        mldp(small, 1.0, key=key, training=[("a",)])
    with pytest.raises(TypeError, match="fresh must be a QuerySet"):
        mldp(small, 1.0, key=key, training=train, fresh=np.ones(6))
    with pytest.raises(TypeError, match="data must be a pgmjax.Dataset"):
        mldp(small.records, 1.0, key=key, training=train)
    with pytest.raises(ValueError, match="size=22 exceeds the 21 queries"):
        mldp(small, 1.0, key=key, training=train, size=22)
    with pytest.raises(ValueError, match="size must be at least 1"):
        mldp(small, 1.0, key=key, training=train, size=0)
    with pytest.raises(ValueError, match="model must be one of"):
        mldp(small, 1.0, key=key, training=train, model="svm")
    with pytest.raises(ValueError, match="belong to model='gaussian'"):
        mldp(small, 1.0, key=key, training=train, width=2.0)
    with pytest.raises(ValueError, match="ridge must be non-negative"):
        mldp(small, 1.0, key=key, training=train, ridge=-1.0)
    with pytest.raises(TypeError, match="fit_options must be a pgmjax.FitOptions"):
        mldp(small, 1.0, key=key, training=train, fit_options={"total": 5})
    other = QuerySet.ranges(pj.Domain({"a": 7}), "a")
    with pytest.raises(ValueError, match="sized differently"):
        mldp(small, 1.0, key=key, training=other)
    zero = QuerySet(dom, [(("a",), np.zeros((2, 6)))])
    with pytest.raises(ValueError, match="identically zero"):
        mldp(small, 1.0, key=key, training=zero)
    with pytest.raises(ValueError, match="identically zero"):
        select_training(QuerySet(dom, [(("a",), [[1.0, 0, 0, 0, 0, 0], [0.0] * 6])]), 1, key=key)
    with pytest.raises(ValueError, match=r"expected a \(rows >= 1, 6\) matrix"):
        QuerySet(dom, [(("a",), np.ones((2, 5)))])
    with pytest.raises(ValueError, match="not in the domain"):
        QuerySet(dom, [(("z",), np.ones(3))])
    with pytest.raises(ValueError, match="non-finite"):
        QuerySet(dom, [(("a",), [np.nan] * 6)])
    with pytest.raises(ValueError, match="no blocks"):
        QuerySet(dom, [])
    with pytest.raises(ValueError, match="needs key="):
        QuerySet.rectangles(dom, ("a", "b"), 5)
    with pytest.raises(ValueError, match="exceeds the 126 distinct"):
        QuerySet.rectangles(dom, ("a", "b"), 127, key=key)
    with pytest.raises(ValueError, match="at most 20 values"):
        QuerySet.subset_sums(pj.Domain({"x": 21}), "x")
    with pytest.raises(ValueError, match="out of range"):
        train.take([21])
    with pytest.raises(ValueError, match="7 answers for 21 queries"):
        fit_regression(train, np.ones(7))
    with pytest.raises(ValueError, match="stddev must be positive"):
        pgm_measurements(train, np.ones(21), 0.0)
    with pytest.raises(ValueError, match="size=22 exceeds the 21 candidate"):
        select_training(train, 22, key=key)


def test_module_docstring_examples():
    """The examples of every module of pgmjax.mechanisms.query_learning, each in its own namespace."""
    package = importlib.import_module("pgmjax.mechanisms.query_learning")
    names = [package.__name__] + [m.name for m in pkgutil.iter_modules(package.__path__, package.__name__ + ".")]
    attempted = 0
    for name in names:
        module = importlib.import_module(name)
        globs = dict(vars(module), np=np, jax=jax, pj=pj, Dataset=pj.Dataset, Domain=pj.Domain)
        result = doctest.testmod(module, extraglobs=globs, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, name
        attempted += result.attempted
    assert len(names) == 8 and attempted > 25
