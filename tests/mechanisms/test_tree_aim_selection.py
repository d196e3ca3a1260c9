"""TreeAIM's tree and compression: with ``tree_penalty=True`` the tree's scores carry the noise its pairs'
measurements will add (AIM's penalty), and the compression merges rare values by runs unless told MST's way."""

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms.adaptive_iterative import HALF_NORMAL_MEAN
from pgmjax.mechanisms.progress import Progress
from pgmjax.mechanisms.spanning_tree import select_tree
from pgmjax.mechanisms.tree_adaptive import tree_aim
from pgmjax.privacy import Accountant

QUICK = dict(select_iters=20, round_iters=20, engine_iters=60)


def _wide_pair_table(n=4_000, seed=0):
    """x and y binary and tied; z and w of 30 values, equal (their pair holds the most error by far); x loosely
    tied to z."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 30, n)
    x = np.where(rng.random(n) < 0.6, z % 2, rng.integers(0, 2, n))
    y = np.where(rng.random(n) < 0.9, x, 1 - x)
    return pj.Dataset(np.stack([x, y, z, z], 1), pj.Domain({"x": 2, "y": 2, "z": 30, "w": 30}))


def _tree(data, noise_std, seed=0):
    one_way = [pj.Measurement((a,), np.asarray(data.marginals([(a,)])[0], np.float64).ravel(), stddev=1.0)
               for a in data.domain.attributes]
    base = pj.estimate(data.domain, one_way, iters=200)
    acc = Accountant(epsilon=1e6, delta=1e-9, composition="zcdp")  # a near-greedy draw: the scores decide
    bar = Progress(False, 10, "test", "test")
    return select_tree(acc, jax.random.key(seed), data, base, acc.budget / 10, bar, "test", noise_std=noise_std)


def test_without_the_penalty_the_tree_takes_the_pair_of_most_error_whatever_its_size():
    edges = _tree(_wide_pair_table(), None)
    assert ("z", "w") in edges


def test_the_penalty_joins_a_wide_attribute_by_a_small_pair_where_the_wide_one_s_noise_exceeds_its_error():
    data = _wide_pair_table()
    # the z-w pair: error about 2 n (far from independent), penalty sqrt(2/pi) sigma 900; x-z and x-w: 60 cells
    sigma = 2.0 * 4_000 / (HALF_NORMAL_MEAN * 900) * 1.5
    edges = _tree(data, sigma)
    assert ("z", "w") not in edges and len(edges) == 3
    assert ("x", "y") in edges


@pytest.mark.parametrize("tree_penalty", [False, True])
def test_tree_aim_passes_the_tree_s_noise_only_where_told(monkeypatch, tree_penalty):
    from pgmjax.mechanisms import tree_adaptive

    seen = []

    def spy(*args, noise_std=None, **kw):
        seen.append(noise_std)
        return select_tree(*args, noise_std=noise_std, **kw)

    monkeypatch.setattr(tree_adaptive, "select_tree", spy)
    res = tree_aim(_wide_pair_table(500), 1.0, key=jax.random.key(0), tree_penalty=tree_penalty, **QUICK)
    assert seen == [res.info.budget["tree_std"] if tree_penalty else None]


def test_a_zero_penalty_is_mst_s_tree():
    data = _wide_pair_table()
    assert _tree(data, 0.0, seed=3) == _tree(data, None, seed=3)


def _clustered_table(n=4_000, seed=0):
    """``age`` of 50 values: 15 to 34 common; 0 to 14 (children, who travel with parents: ``family`` 1) and 35 to
    49 (the elderly: ``family`` 0) about 30 records each, rare one by one at epsilon 1 (three noise stds: 66), not
    as runs."""
    rng = np.random.default_rng(seed)
    kind = rng.choice(3, n, p=[0.1125, 0.775, 0.1125])
    age = np.where(kind == 0, rng.integers(0, 15, n), np.where(kind == 1, rng.integers(15, 35, n), rng.integers(35, 50, n)))
    family = np.where(rng.random(n) < 0.9, (kind == 0).astype(int), rng.integers(0, 2, n))
    other = rng.integers(0, 3, n)
    return pj.Dataset(np.stack([age, family, other], 1), pj.Domain({"age": 50, "family": 2, "other": 3}))


@pytest.mark.parametrize("seed", [0, 1])
def test_tree_aim_merges_rare_values_by_runs_and_keeps_the_clusters_apart(seed):
    data = _clustered_table(seed=seed)
    res = tree_aim(data, 1.0, key=jax.random.key(seed), **QUICK)
    cmap = res.info.mapping["age"]
    shared = int(cmap.max()) if np.any(cmap[:15] == cmap.max()) and np.any(cmap[35:] == cmap.max()) else None
    children, elderly = set(cmap[:15].tolist()) - {shared}, set(cmap[35:].tolist()) - {shared}
    assert children and elderly and not children & elderly  # groups of each cluster, none across them
    assert all(np.sum(cmap == v) == 1 for v in cmap[15:35])  # the common ages stay whole
    one = tree_aim(data, 1.0, key=jax.random.key(seed), merge="one", **QUICK)
    cmap_one = one.info.mapping["age"]
    merged = np.flatnonzero(np.bincount(cmap_one) > 1)
    assert merged.tolist() == [int(cmap_one.max())]  # MST's: every rare value in one last value
    assert res.info.compressed_domain["age"] > one.info.compressed_domain["age"]
    assert res.accountant.spent == pytest.approx(res.accountant.budget)


def test_bad_merge_and_tree_penalty_are_refused_before_any_spending():
    with pytest.raises(ValueError, match="merge"):
        tree_aim(_clustered_table(200), 1.0, key=jax.random.key(0), merge="neighbours", **QUICK)
    with pytest.raises(TypeError, match="tree_penalty must be True or False"):
        tree_aim(_clustered_table(200), 1.0, key=jax.random.key(0), tree_penalty=1, **QUICK)
