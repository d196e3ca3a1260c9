"""Records updated to given marginals (PrivSyn's Gradually Update Method): records from approximate models."""

import itertools

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.graph.size_limit import ModelTooLarge, limited
from pgmjax.model.record_updating import marginal_gaps, update_records


def _chain(rng, n, sizes):
    """A table where each attribute copies the previous one (mod its size) with probability 0.7."""
    cols = [rng.integers(0, sizes[0], n)]
    for k in sizes[1:]:
        cols.append(np.where(rng.random(n) < 0.7, cols[-1] % k, rng.integers(0, k, n)))
    return np.stack(cols, 1)


def test_consistent_targets_are_met_to_sampling_precision():
    # Targets that are one distribution's marginals (a brute-force joint on a tiny domain): the records meet each
    # to well under the TVD a sample of n records from the joint would show.
    rng = np.random.default_rng(0)
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 3})
    joint = rng.dirichlet(np.full(dom.size(tuple(dom.attributes)), 0.5)).reshape(dom.shape_of(tuple(dom.attributes)))
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    axes = {a: i for i, a in enumerate(dom.attributes)}
    targets = {c: joint.sum(axis=tuple(axes[a] for a in dom.attributes if a not in c)) for c in cliques}
    records = update_records(dom, targets, 20_000, jax.random.key(0))
    assert records.shape == (20_000, 4) and records.dtype == np.int32
    gaps = marginal_gaps(dom, records, targets)
    assert max(gaps.values()) < 0.01, gaps
    one_way = {(a,): joint.sum(axis=tuple(i for b, i in axes.items() if b != a)) for a in dom.attributes}
    assert max(marginal_gaps(dom, records, one_way).values()) < 0.01


def test_the_records_follow_from_the_key():
    dom = pj.Domain({"a": 3, "b": 2})
    targets = {("a", "b"): np.array([[5.0, 1.0], [2.0, 2.0], [0.0, 4.0]])}
    one, again = (update_records(dom, targets, 500, jax.random.key(1)) for _ in range(2))
    assert np.array_equal(one, again)
    assert not np.array_equal(one, update_records(dom, targets, 500, jax.random.key(2)))
    assert not np.any((one[:, 0] == 2) & (one[:, 1] == 0))  # a zero target cell gets no record


@pytest.mark.parametrize("targets, kwargs, match", [
    ({("a", "b"): np.ones((3, 3))}, {}, r"the target on \('a', 'b'\) has shape \(3, 3\), not \(3, 2\)"),
    ({("a",): np.array([1.0, -1.0, 2.0])}, {}, "must be finite, non-negative and not all zero"),
    ({("a",): np.zeros(3)}, {}, "must be finite, non-negative and not all zero"),
    ({("a", "z"): np.ones((3, 2))}, {}, "z"),
    ({("a",): np.ones(3)}, {"n": 0}, "n must be a positive integer"),
    ({("a",): np.ones(3)}, {"alpha": 0.0}, r"alpha must lie in \(0, 1\]"),
    ({("a",): np.ones(3)}, {"replace": 1.5}, r"replace must lie in \[0, 1\]"),
])
def test_bad_targets_and_arguments_are_named(targets, kwargs, match):
    dom = pj.Domain({"a": 3, "b": 2})
    kwargs = {"n": 10} | kwargs
    with pytest.raises(ValueError, match=match):
        update_records(dom, targets, kwargs.pop("n"), jax.random.key(0), **kwargs)


def test_an_approximate_model_past_the_junction_trees_limit_gives_records_of_its_pseudo_marginals():
    # A 7x7 grid of pairwise measurements: its junction tree (treewidth 7, cliques of 8 attributes of 4 values)
    # is refused under a 16 MB limit; the approximate oracle fits it, and its records keep every measured
    # clique's pseudo-marginal.
    rng = np.random.default_rng(1)
    side, n = 7, 5_000
    names = [f"g{i}_{j}" for i in range(side) for j in range(side)]
    dom = pj.Domain({a: 4 for a in names})
    x = _chain(rng, n, [4] * len(names))
    edges = [(f"g{i}_{j}", f"g{i}_{j + 1}") for i in range(side) for j in range(side - 1)]
    edges += [(f"g{i}_{j}", f"g{i + 1}_{j}") for i in range(side - 1) for j in range(side)]
    data = pj.Dataset(x, dom)
    ms = [pj.Measurement(e, data.marginal(e) + rng.normal(0, 5.0, (4, 4)), stddev=5.0) for e in edges]
    with limited(16 * 2**20):
        with pytest.raises(ModelTooLarge):
            pj.estimate(dom, ms, iters=5)
        with pytest.warns(UserWarning, match="junction tree is over the size limit; fitting with the approximate"):
            model = pj.estimate(dom, ms, iters=150, oracle="auto")
    assert model.approximate
    synth = model.synthetic_data(key=jax.random.key(0))
    assert len(synth) == round(model.total) and synth.domain == dom
    pseudo = {e: model.marginal(e) for e in edges}
    gaps = marginal_gaps(dom, np.asarray(synth.records), pseudo)
    # On average as close as a sample of as many records from one distribution with these marginals would be (the
    # TVD of a multinomial draw from each pseudo-marginal, about 0.02 here); the pairs the start's tree leaves out
    # (weak dependences here) are the furthest, none far off.
    draws = [0.5 * np.abs(rng.multinomial(len(synth), p) / len(synth) - p).sum()
             for p in (m.reshape(-1) / m.sum() for m in pseudo.values())]
    assert np.mean(list(gaps.values())) < 1.25 * np.mean(draws) and max(gaps.values()) < 0.1
    # Beyond the measured cliques the records keep the chain's dependence (better than independent columns).
    pairs = [(names[k], names[k + 2]) for k in range(0, len(names) - 2, 5)]
    truth = {c: data.marginal(c) for c in pairs}
    shuffled = np.stack([rng.permutation(col) for col in x.T], 1)
    made = np.mean(list(marginal_gaps(dom, np.asarray(synth.records), truth).values()))
    assert made < np.mean(list(marginal_gaps(dom, shuffled, truth).values()))


def test_an_attribute_in_no_clique_is_uniform():
    dom = pj.Domain({"a": 2, "b": 2, "c": 2, "free": 5})
    ms = [pj.Measurement(c, np.full((2, 2), 250.0), stddev=1.0) for c in itertools.combinations("abc", 2)]
    model = pj.estimate(dom, ms, iters=30, oracle="approximate")
    records = np.asarray(model.synthetic_data(5_000, jax.random.key(3)).records)
    counts = np.bincount(records[:, 3], minlength=5)
    assert counts.sum() == 5_000 and np.all(np.abs(counts - 1_000) <= 20)  # drawn uniformly (duplicates move a few)
