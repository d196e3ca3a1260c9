"""Domain compression by runs (``compress_domain(..., merge="runs")``): consecutive rare values merged into groups
whose noisy count is measurable, the rest into one value; everything downstream (spreads, decompression) takes the
groups as it takes MST's one merged value."""

import math

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms.domain_compression import (
    MERGES,
    compress_data,
    compress_domain,
    decompress_data,
    measured_spread,
)


def _measure(y, s=10.0):
    return pj.Measurement(("a",), np.asarray(y, np.float64), stddev=s)


def test_a_run_of_rare_values_becomes_a_group_once_its_noisy_count_reaches_the_threshold():
    # values 1-3 are rare alone (20 < 3 * 10); together 60 >= 3 * 10 * sqrt(3); value 4 (5) joins the group before it
    y = [100.0, 20.0, 20.0, 20.0, 5.0, 100.0]
    cdom, mapping, (cm,) = compress_domain(pj.Domain({"a": 6}), [_measure(y)], merge="runs")
    assert cdom["a"] == 3 and mapping["a"].tolist() == [0, 1, 1, 1, 1, 2]
    assert cm.y.tolist() == pytest.approx([100.0, 65.0, 100.0])
    assert cm.row_stddev().tolist() == pytest.approx([10.0, 20.0, 10.0])  # sqrt(4) * 10 for the four merged values


def test_runs_that_never_reach_the_threshold_share_one_last_value_as_in_mst():
    y = [100.0, 3.0, 50.0, -4.0, 10.0, 80.0]
    m = _measure(y)
    runs = compress_domain(pj.Domain({"a": 6}), [m], merge="runs")
    one = compress_domain(pj.Domain({"a": 6}), [m], merge="one")
    assert runs[1]["a"].tolist() == one[1]["a"].tolist() == [0, 3, 1, 3, 3, 2]
    assert runs[2][0].y.tolist() == pytest.approx(one[2][0].y.tolist())


@pytest.mark.parametrize("seed", range(20))
def test_groups_follow_the_rule_kept_values_stay_whole_and_the_measurement_sums_them(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    truth = rng.gamma(0.5, 30.0, n) * (rng.random(n) < 0.7)
    s = float(rng.uniform(2.0, 15.0))
    y = truth + rng.normal(0.0, s, n)
    (cdom, mapping, (cm,)) = compress_domain(pj.Domain({"a": n}), [_measure(y, s)], merge="runs")
    one_dom, _, _ = compress_domain(pj.Domain({"a": n}), [_measure(y, s)], merge="one")
    if "a" not in mapping:  # nothing rare: nothing merged, by either rule
        assert (y >= 3.0 * s).all() and one_dom["a"] == n
        return
    cmap = mapping["a"]
    k = int(cmap.max()) + 1
    assert cdom["a"] == k and set(cmap.tolist()) == set(range(k))
    assert k >= one_dom["a"]  # never coarser than MST's compression
    kept = np.flatnonzero(y >= 3.0 * s)
    assert all(np.sum(cmap == cmap[v]) == 1 for v in kept)  # a value measured well alone stays alone
    counts = np.bincount(cmap)
    assert cmap.tolist() == _reference_runs(y, s)
    assert cm.y == pytest.approx(np.bincount(cmap, weights=y, minlength=k))
    assert cm.row_stddev() == pytest.approx(s * np.sqrt(counts))


def _reference_runs(y, s, threshold=3.0) -> list[int]:
    """The rule, written plainly: stretches of rare values between kept ones, each cut into runs closed once their sum
    reaches the threshold; a stretch's unclosed tail joins its last run, or, where it has none, the shared last
    value; numbered in the domain's order."""
    kept = [i for i in range(len(y)) if y[i] >= threshold * s]
    groups, other, stretch = [], [], []
    for i in list(range(len(y))) + [None]:
        if i is None or i in kept:
            runs, run = [], []
            for j in stretch:
                run.append(j)
                if sum(y[v] for v in run) >= threshold * s * math.sqrt(len(run)):
                    runs.append(run)
                    run = []
            if runs:
                runs[-1] += run
            else:
                other += run
            groups += runs + ([[i]] if i is not None else [])
            stretch = []
        else:
            stretch.append(i)
    out = [len(groups)] * len(y)
    for g, members in enumerate(groups):
        for i in members:
            out[i] = g
    return out


def test_spreads_and_decompression_take_groups_in_the_middle_of_the_domain():
    y = [100.0, 20.0, 20.0, 20.0, 5.0, 100.0, 1.0]
    m = _measure(y)
    dom = pj.Domain({"a": 7})
    cdom, mapping, _ = compress_domain(dom, [m], merge="runs")
    assert mapping["a"].tolist() == [0, 1, 1, 1, 1, 2, 3]  # the last, alone and rare, is the shared value
    spread = measured_spread(mapping, [m], {"a": np.array([100.0, 65.0, 100.0, 1.0])})["a"]
    assert spread[[0, 5, 6]].tolist() == [1.0, 1.0, 1.0]  # a group of one keeps its value
    group = [1, 2, 3, 4]
    assert spread[group].sum() == pytest.approx(1.0) and (spread[group] > 0).all()  # the group's shares
    data = pj.Dataset(np.repeat(np.arange(7), [100, 20, 20, 20, 5, 100, 1])[:, None], dom)
    cdata = compress_data(data, mapping, cdom)
    back = decompress_data(cdata, mapping, dom, jax.random.key(0), spread={"a": spread})
    assert np.array_equal(compress_data(back, mapping, cdom).records, cdata.records)
    assert set(np.unique(back.records[cdata.records[:, 0] == 1, 0]).tolist()) <= set(group)


def test_a_bad_merge_is_refused():
    assert MERGES == ("one", "runs")
    with pytest.raises(ValueError, match="unknown merge 'neighbours'; expected one of"):
        compress_domain(pj.Domain({"a": 2}), [_measure([1.0, 2.0])], merge="neighbours")


def test_the_group_threshold_is_the_sum_s_noise():
    # two rare values of std 10 and 30 (a merged measurement's): 3 * sqrt(10^2 + 30^2) = 94.9 > 90, so no group
    m = pj.Measurement(("a",), np.array([200.0, 29.0, 61.0]), stddev=np.array([10.0, 10.0, 30.0]))
    _, mapping, _ = compress_domain(pj.Domain({"a": 3}), [m], merge="runs")
    assert mapping["a"].tolist() == [0, 1, 1] and 3 * math.sqrt(10**2 + 30**2) > 90
