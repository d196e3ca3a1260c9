"""Controlled rounding (pgmjax.model.rounding): exact row totals, floor/ceiling cells and columns."""

import itertools

import numpy as np
import pytest

from pgmjax.model.rounding import controlled_round, round_to_total


def _table(rng, rows, cols, total):
    t = rng.dirichlet(np.full(rows * cols, 0.4)) * total
    return t.reshape(rows, cols)


def test_round_to_total():
    np.testing.assert_array_equal(round_to_total(np.array([0.5, 1.5, 1.0]), 3), [1, 1, 1])
    out = round_to_total(np.array([2.2, 3.3, 4.5]), 10)
    assert out.sum() == 10 and np.all(np.abs(out - [2.2, 3.3, 4.5]) < 1)
    np.testing.assert_array_equal(round_to_total(np.array([0.0, 0.0]), 3).sum(), 3)
    np.testing.assert_array_equal(round_to_total(np.array([1.0, 2.0]), 0), [0, 0])


@pytest.mark.parametrize("seed", range(8))
def test_one_family_is_exact(seed):
    """Rows and one column family: totally unimodular, so every bound holds (no slack)."""
    rng = np.random.default_rng(seed)
    r, k = rng.integers(2, 15), rng.integers(2, 25)
    t = _table(rng, r, k, rng.uniform(10, 3000))
    row_totals = round_to_total(t.sum(1), int(round(t.sum())))
    t = t * (row_totals.sum() / t.sum())
    fam = np.tile(rng.integers(0, max(2, k // 3), k), r)  # columns grouped into coarser classes
    counts, info = controlled_round(t.ravel(), np.repeat(np.arange(r), k), row_totals, [fam],
                                    rng=np.random.default_rng(seed))
    np.testing.assert_array_equal(counts.reshape(r, k).sum(1), row_totals)
    assert np.all(np.abs(counts - t.ravel()) < 1)
    assert info["slack"] == 0 and info["max_column_dev"] < 1 and info["fallback_rows"] == 0
    assert counts.min() >= 0


def _brute_force_feasible(t, rows, row_totals, families):
    """Is there a floor/ceiling rounding meeting every row exactly and every column within floor/ceil?"""
    base = np.floor(t)
    frac = np.flatnonzero(t - base > 1e-12)
    for bits in itertools.product((0, 1), repeat=frac.size):
        c = base.copy()
        c[frac] += bits
        if not np.array_equal(np.bincount(rows, weights=c), row_totals):
            continue
        ok = True
        for fam in families:
            got, want = np.bincount(fam, weights=c), np.bincount(fam, weights=t)
            ok &= bool(np.all((got >= np.floor(want + 1e-9)) & (got <= np.ceil(want - 1e-9))))
        if ok:
            return True
    return False


@pytest.mark.parametrize("seed", range(6))
def test_two_families_match_brute_force(seed):
    """Three-way constraints (rows and two column families): whenever a rounding exists, it is found."""
    rng = np.random.default_rng(100 + seed)
    r, a, b = 2, 2, 3  # cells (row, a, b): families a and b
    t = rng.dirichlet(np.full(r * a * b, 0.7)) * rng.uniform(5, 20)
    rows = np.repeat(np.arange(r), a * b)
    fam_a = np.tile(np.repeat(np.arange(a), b), r)
    fam_b = np.tile(np.arange(b), r * a)
    row_totals = round_to_total(np.bincount(rows, weights=t), int(round(t.sum())))
    t = t * (row_totals.sum() / t.sum())
    counts, info = controlled_round(t, rows, row_totals, [fam_a, fam_b], rng=np.random.default_rng(seed))
    np.testing.assert_array_equal(np.bincount(rows, weights=counts), row_totals)
    assert np.all(np.abs(counts - t) < 1)
    assert (info["slack"] == 0) == _brute_force_feasible(t, rows, row_totals, [fam_a, fam_b])


def test_inconsistent_rows_fall_back_but_keep_totals():
    t = np.array([0.2, 0.3, 2.5, 2.5])
    rows = np.array([0, 0, 1, 1])
    counts, info = controlled_round(t, rows, np.array([3, 5]), [], rng=np.random.default_rng(0))
    np.testing.assert_array_equal(np.bincount(rows, weights=counts), [3, 5])
    assert info["fallback_rows"] == 1  # row 0 cannot reach 3 with floor/ceiling cells


def test_random_tie_breaking_is_seeded():
    t = np.full(12, 0.5)
    rows = np.zeros(12, np.int64)
    a, _ = controlled_round(t, rows, np.array([6]), [], rng=np.random.default_rng(1))
    b, _ = controlled_round(t, rows, np.array([6]), [], rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    draws = {tuple(controlled_round(t, rows, np.array([6]), [], rng=np.random.default_rng(s))[0]) for s in range(10)}
    assert len(draws) > 1


def test_systematic_pick_inclusion_probabilities():
    """Within a group, cells are chosen with probability take * w / sum(w) (sure picks when >= 1)."""
    from pgmjax.model.rounding import _systematic_pick

    w = np.array([0.05, 0.1, 0.15, 0.2, 0.5, 0.9, 0.1, 0.3, 0.7])
    group = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1])
    take = np.array([1, 2])
    runs = 20000
    freq = np.zeros(w.size)
    for s in range(runs):
        x = _systematic_pick(group, take, w, np.random.default_rng(s))
        np.testing.assert_array_equal(np.bincount(group, weights=x), take)
        freq += x
    freq /= runs
    expect = np.r_[w[:5] / w[:5].sum(), np.minimum(2 * w[5:] / w[5:].sum(), 1)]
    # second group: 2 * 0.9 / 2.0 = 0.9 < 1, so no sure pick; binomial standard error <= 0.0036
    np.testing.assert_allclose(freq, expect, atol=0.015)


def _three_way(r, a, b):
    rows = np.repeat(np.arange(r), a * b)
    return rows, [np.tile(np.repeat(np.arange(a), b), r), np.tile(np.arange(b), r * a)]


def _milp_calls(monkeypatch):
    """Spy on the solver: the number of integer variables each programme handed to it had, and how many were free."""
    from scipy import optimize

    calls, solve = [], optimize.milp

    def spy(c, **kw):
        whole = kw["integrality"] > 0
        calls.append((int(whole.sum()), int((whole & (kw["bounds"].lb < kw["bounds"].ub)).sum())))
        return solve(c, **kw)

    monkeypatch.setattr(optimize, "milp", spy)
    return calls


@pytest.mark.parametrize("seed", range(4))
def test_relaxation_settles_most_cells(seed, monkeypatch):
    """A 12 x 10 x 11 table under two families: the relaxation fixes most cells, the solver completes the rest."""
    calls = _milp_calls(monkeypatch)
    rng = np.random.default_rng(200 + seed)
    rows, families = _three_way(12, 10, 11)
    t = rng.dirichlet(np.full(rows.size, 0.7)) * 3000
    row_totals = round_to_total(np.bincount(rows, weights=t), int(round(t.sum())))
    t = t * (row_totals.sum() / t.sum())
    counts, info = controlled_round(t, rows, row_totals, families, rng=np.random.default_rng(seed))
    np.testing.assert_array_equal(np.bincount(rows, weights=counts), row_totals)
    assert np.all(np.abs(counts - t) < 1) and info["slack"] == 0 and info["families_kept"] == 2
    assert calls[0][0] == 0  # the relaxation first
    assert all(free < rows.size // 4 for _, free in calls[1:])  # then only the cells it left fractional, if any
    again, _ = controlled_round(t, rows, row_totals, families, rng=np.random.default_rng(seed))
    np.testing.assert_array_equal(again, counts)


def test_fixing_that_costs_slack_searches_the_whole_programme(monkeypatch):
    """Fixing the relaxation's whole cells can rule out every rounding within the columns' bounds; one exists
    here, and the whole programme is searched to find it."""
    calls = _milp_calls(monkeypatch)
    rows, families = _three_way(2, 3, 4)
    t = np.array([0.1342, 0.6227, 1.6323, 1.1882, 2.2739, 3.0741, 3.8007, 0.0725, 1.264, 0.792, 0.0567, 0.1924,
                  0.162, 0.0173, 0.3791, 0.3584, 1.1633, 5.8374, 1.5671, 0.0685, 1.5184, 1.521, 1.2998, 0.004])
    counts, info = controlled_round(t, rows, np.array([15, 14]), families, rng=np.random.default_rng(574))
    assert len(calls) == 3 and calls[1][1] < 24 == calls[2][1]  # relaxation, completion, then the whole
    np.testing.assert_array_equal(np.bincount(rows, weights=counts), [15, 14])
    assert info["slack"] == 0
