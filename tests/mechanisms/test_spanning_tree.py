"""MST (McKenna, Miklau & Sheldon, JPC 2021, Section 4) and AIM (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022,
Algorithm 1): budget anchors, exact ledgers, compression, end to end.

Small generated data (a Markov chain over 4 attributes, one with many rare values so that MST's
compression merges some) and few engine iterations; runs are cached per argument set so the
compiled programs are shared.
"""

import importlib
import itertools
import math

import jax
import networkx as nx
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms.multiplicative_weights import hypothetical_model_size
from pgmjax.privacy import cdp_rho

mst_mod = importlib.import_module("pgmjax.mechanisms.spanning_tree")
aim_mod = importlib.import_module("pgmjax.mechanisms.adaptive_iterative")
from pgmjax.mechanisms.adaptive_iterative import (  # noqa: E402
    aim,
    aim_budget,
    aim_candidates,
    default_aim_workload,
)
from pgmjax.mechanisms.domain_compression import (  # noqa: E402
    compress_data,
    compress_domain,
    decompress_data,
    decompress_model,
)
from pgmjax.mechanisms.spanning_tree import mst, mst_budget  # noqa: E402

SIZES = {"a": 3, "b": 4, "c": 12, "d": 2}
N = 20_000


@pytest.fixture(scope="module")
def data():
    """A Markov chain a -> b -> c -> d; c puts ~99% of its mass on 3 of its 12 values."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, N)
    b = np.where(rng.random(N) < 0.8, a, rng.integers(0, 4, N))
    c = np.where(rng.random(N) < 0.99, b % 3, rng.integers(3, 12, N))
    d = np.where(rng.random(N) < 0.85, (c == 0).astype(int), rng.integers(0, 2, N))
    return pj.Dataset(np.stack([a, b, c, d], axis=1), pj.Domain(SIZES))


PAIRS = list(itertools.combinations(SIZES, 2))
_RUNS = {}


def run_mst(data, eps=1.0, seed=0, **kw):
    key = ("mst", eps, seed, tuple(sorted(kw.items())))
    if key not in _RUNS:
        _RUNS[key] = mst(data, eps, key=jax.random.key(seed), **({"select_iters": 100, "engine_iters": 300} | kw))
    return _RUNS[key]


def run_aim(data, eps=1.0, seed=0, **kw):
    key = ("aim", eps, seed, tuple(sorted(kw.items())))
    if key not in _RUNS:
        _RUNS[key] = aim(data, eps, key=jax.random.key(seed), **({"rounds": 8, "engine_iters": 60, "max_model_mb": 1.0} | kw))
    return _RUNS[key]


# --------------------------------------------------------------------------------------------------
# Budget anchors, computed by hand from the papers' formulas (Adult: d = 14, eps = 1, delta = 1e-9; no data needed)
# --------------------------------------------------------------------------------------------------


def test_mst_budget_anchors_adult():
    b = mst_budget(1.0, 1e-9, 14)
    assert b["rho"] == pytest.approx(0.0149731, rel=1e-5)
    assert round(b["sigma"], 3) == 10.009
    assert round(b["one_way_std"], 2) == 37.45 and round(b["two_way_std"], 2) == 36.09
    assert round(b["em_epsilon"], 5) == 0.05542
    # The thirds: d one-way marginals at sigma sqrt(d), d-1 EM draws, d-1 two-way marginals at sigma sqrt(d-1).
    assert 14 / (2 * b["one_way_std"] ** 2) == pytest.approx(b["rho"] / 3, rel=1e-12)
    assert 13 * b["em_epsilon"] ** 2 / 8 == pytest.approx(b["rho"] / 3, rel=1e-12)
    assert 13 / (2 * b["two_way_std"] ** 2) == pytest.approx(b["rho"] / 3, rel=1e-12)


def test_aim_budget_anchors_adult():
    b = aim_budget(1.0, 1e-9, attributes=14)
    assert b["rounds"] == 224
    assert round(b["sigma"], 2) == 91.17 and round(b["em_epsilon"], 6) == 0.007313
    # 90% of a round's rho measures, 10% selects; T rounds make rho.
    assert 1 / (2 * b["sigma"] ** 2) == pytest.approx(0.9 * b["rho"] / 224, rel=1e-12)
    assert b["em_epsilon"] ** 2 / 8 == pytest.approx(0.1 * b["rho"] / 224, rel=1e-12)
    assert aim_budget(1.0, 1e-9, rounds=100)["rounds"] == 100


def test_aim_candidates_downward_closure_and_weights():
    dom = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 2})
    wl = [(("b", "a"), 2.0), (("b", "c", "d"), 0.5)]
    cands = aim_candidates(wl, dom)
    closure = {tuple(sorted(s, key=dom.index)) for c, _ in wl for k in (1, 2, 3) for s in itertools.combinations(c, k)}
    assert set(cands) == closure and len(cands) == 4 + 1 + 3 + 1  # a,b,c,d; ab; bc,bd,cd; bcd
    for r, w in cands.items():  # brute force: sum_s c_s |r ∩ s|
        assert w == pytest.approx(sum(cs * len(set(r) & set(s)) for s, cs in wl))
    assert cands[("b",)] == 2.5 and cands[("a", "b")] == 4.5 and cands[("b", "c", "d")] == 3.5
    # Default: 2-way cliques with <= 10,000 cells, weight 1.
    assert default_aim_workload(pj.Domain({"x": 2, "y": 100, "z": 101})) == [(("x", "y"), 1.0), (("x", "z"), 1.0)]
    assert aim_candidates([("a", "b")], dom) == {("a",): 1.0, ("b",): 1.0, ("a", "b"): 2.0}


def test_aim_candidate_weights_are_the_exactly_rounded_sums(rng):
    """Weights of awkward size (0.1, thirds) over a workload of pairs and triples, repeats included (their weights
    added): each candidate's weight is exactly ``fsum(c_s |r ∩ s|)`` over the whole workload, bit for bit (AIM's
    qualities read them)."""
    import math

    dom = pj.Domain({f"x{i}": 2 for i in range(9)})
    names = dom.attributes
    wl = [(tuple(sorted(rng.choice(names, size=int(rng.integers(2, 4)), replace=False), key=dom.index)),
           float(rng.choice([0.1, 1 / 3, 0.7, 2.0 / 3.0, 1e-3]))) for _ in range(40)]
    wl += wl[:5]  # a clique listed again adds its weight
    merged = {}
    for c, w in wl:
        merged[c] = merged.get(c, 0.0) + w
    cands = aim_candidates(wl, dom)
    for r, w in cands.items():
        assert w == math.fsum(cs * len(set(r) & set(s)) for s, cs in merged.items()), r


# --------------------------------------------------------------------------------------------------
# MST
# --------------------------------------------------------------------------------------------------


def test_mst_ledger_spends_exactly_rho(data):
    res = run_mst(data)
    acc, d = res.accountant, len(SIZES)
    b = mst_budget(1.0, 1e-9, d)
    assert acc.composition == "zcdp" and acc.budget == cdp_rho(1.0, 1e-9)
    assert acc.spent == acc.budget  # exactly
    kinds = [e.mechanism for e in acc.ledger]
    assert kinds == ["gaussian"] * d + ["exponential"] * (d - 1) + ["gaussian"] * (d - 1)
    for e in acc.ledger[:d]:
        assert e.scale == pytest.approx(b["one_way_std"], rel=1e-12) and e.sensitivity == 1.0
    for e in acc.ledger[d : 2 * d - 1]:
        assert e.epsilon == pytest.approx(b["em_epsilon"], rel=1e-12) and e.sensitivity == 1.0
    for e in acc.ledger[2 * d - 1 :]:
        assert e.scale == pytest.approx(b["two_way_std"], rel=1e-9)
    assert math.fsum(e.cost for e in acc.ledger) == pytest.approx(acc.budget, rel=1e-15)
    # Measurements carry their true std; edges form a spanning tree; result.original is None.
    assert [float(m.stddev) for m in res.measurements[d:]] == pytest.approx([b["two_way_std"]] * (d - 1))
    assert nx.is_tree(nx.Graph(res.info.edges)) and set(nx.Graph(res.info.edges).nodes) == set(SIZES)
    assert res.original is None and res.mechanism == "mst"
    assert res.accountant.epsilon_delta()[0] == pytest.approx(1.0, rel=1e-6)


def test_mst_huge_epsilon_picks_the_maximum_spanning_tree(data):
    # With eps = 1e4 the one-way model is the data's independence model (nothing is compressed) and
    # the EM is an argmax: the edges are the maximum spanning tree of w(a, b) = ||mu_ab - mu_a mu_b / N||_1.
    res = run_mst(data, eps=1e4)
    assert res.info.mapping == {}
    g = nx.Graph()
    for a, b in PAIRS:
        joint = data.marginal((a, b))
        w = np.abs(joint - np.outer(joint.sum(1), joint.sum(0)) / N).sum()
        g.add_edge(a, b, weight=w)
    best = {frozenset(e) for e in nx.maximum_spanning_tree(g).edges}
    assert {frozenset(e) for e in res.info.edges} == best
    assert best == {frozenset(p) for p in [("a", "b"), ("b", "c"), ("c", "d")]}  # the chain


def test_mst_end_to_end_large_epsilon_close_to_truth(data):
    res = run_mst(data, eps=1e4)
    synth = res.synthetic
    assert synth.domain == data.domain and abs(len(synth) - N) < 0.01 * N
    tvd = pj.metrics.marginal_tvd(data, synth, PAIRS)
    indep = pj.metrics.marginal_tvd(data, _independent(data), PAIRS)
    assert tvd < 0.03 and tvd < 0.2 * indep
    # The model over the original domain agrees with the data as well (no sampling noise).
    assert pj.metrics.marginal_tvd(data, res.model, PAIRS) < 0.02
    assert res.model.domain == data.domain


def _independent(data):
    """Records whose columns are independently shuffled: the independence baseline."""
    rng = np.random.default_rng(0)
    cols = [rng.permutation(data.records[:, j]) for j in range(data.records.shape[1])]
    return pj.Dataset(np.stack(cols, axis=1), data.domain)


def test_mst_compresses_rare_values(data):
    res = run_mst(data)
    cdom, mapping = res.info.compressed_domain, res.info.mapping
    # c's 9 rare values (about 200 records over 9 values, ~22 each) are mostly below 3 * 20.02 = 60.
    std = mst_budget(1.0, 1e-9, 4)["one_way_std"]
    assert round(3 * std, 2) == 60.05 and "c" in mapping and cdom["c"] < SIZES["c"]
    assert dict(cdom) == {a: (cdom[a] if a == "c" else SIZES[a]) for a in SIZES}  # the others keep every value
    y = res.measurements[2]
    k = SIZES["c"] - cdom["c"] + 1  # merged values: the last row is their sum, with std * sqrt(k)
    assert y.clique == ("c",) and y.kind == "identity"
    assert y.row_stddev().tolist() == pytest.approx([std] * (cdom["c"] - 1) + [std * math.sqrt(k)])
    # The synthetic data are over the original values, and compress back into the compressed domain.
    assert res.synthetic.domain == data.domain
    back = compress_data(res.synthetic, mapping, cdom)
    assert back.domain == cdom


def test_compress_domain_formulas():
    dom = pj.Domain({"a": 6, "b": 2})
    y = np.array([100.0, 3.0, 50.0, -4.0, 10.0, 80.0])
    ma = pj.Measurement(("a",), y, stddev=10.0)
    mb = pj.Measurement(("b",), [500.0, 400.0], stddev=10.0)
    cdom, mapping, (ca, cb) = compress_domain(dom, [ma, mb])
    assert dict(cdom) == {"a": 4, "b": 2} and list(mapping) == ["a"]
    assert mapping["a"].tolist() == [0, 3, 1, 3, 3, 2]  # kept in order, merged -> last
    k = 3
    # The merged row: the sum with std s sqrt(k) (the reference code's row, sum / sqrt(k) with coefficient
    # 1 / sqrt(k) and std s, scaled by sqrt(k): the same least-squares term), as an O(cells) identity query.
    assert ca.y.tolist() == pytest.approx([100.0, 50.0, 80.0, 3.0 - 4.0 + 10.0])
    assert ca.kind == "identity" and ca.row_stddev().tolist() == pytest.approx([10, 10, 10, 10 * math.sqrt(k)])
    assert cb is mb
    # The total estimated from the compressed measurement equals the raw sum (weights (1, 1, 1, sqrt k)).
    total, var = pj.queries.measurement.estimate_total([ca])
    assert total == pytest.approx(y.sum()) and var == pytest.approx(6 * 100.0)
    # The compressed measurement is the compressed marginal plus noise of the same std.
    x = np.array([7.0, 1.0, 2.0, 0.0, 5.0, 3.0])
    cx = np.bincount(mapping["a"], weights=x)
    assert ca.answer(cx)[-1] == pytest.approx(1 + 0 + 5)


def test_compression_round_trip(data):
    res = run_mst(data)
    cdom, mapping = res.info.compressed_domain, res.info.mapping
    cdata = compress_data(data, mapping, cdom)
    back = decompress_data(cdata, mapping, data.domain, jax.random.key(5))
    # compress(decompress(x)) == x exactly; kept values come back unchanged.
    assert np.array_equal(compress_data(back, mapping, cdom).records, cdata.records)
    cmap = mapping["c"]
    kept = np.bincount(cmap)[cmap] == 1
    rows = kept[data.records[:, 2]]
    assert np.array_equal(back.records[rows], data.records[rows])
    # Merged values are spread uniformly over their preimage (20,000 "other" records: freq std < 0.007).
    other = int(cmap.max())
    members = np.flatnonzero(cmap == other)
    assert members.size > 1
    all_other = np.array(cdata.records)
    all_other[:, 2] = other
    drawn = decompress_data(pj.Dataset(all_other, cdom), mapping, data.domain, jax.random.key(7)).records[:, 2]
    freq = np.bincount(drawn, minlength=SIZES["c"])[members] / drawn.size
    assert set(np.unique(drawn)) == set(members.tolist()) and np.abs(freq - 1 / members.size).max() < 0.025
    # Same key, same draw; another key, another draw.
    again = decompress_data(cdata, mapping, data.domain, jax.random.key(5))
    other_key = decompress_data(cdata, mapping, data.domain, jax.random.key(6))
    assert np.array_equal(again.records, back.records) and not np.array_equal(other_key.records, back.records)


def test_decompressed_model_matches_the_compressed_one(data):
    res = run_mst(data)
    model, cmodel, mapping = res.model, res.info.compressed_model, res.info.mapping
    cmap = mapping["c"]
    k = np.bincount(cmap)
    for pair in [("b", "c"), ("c", "d"), ("a", "c")]:
        full = model.marginal(pair)
        axis = pair.index("c")
        summed = np.moveaxis(np.stack([np.take(full, np.flatnonzero(cmap == v), axis=axis).sum(axis=axis) for v in range(k.size)]), 0, axis)
        np.testing.assert_allclose(summed, cmodel.marginal(pair), rtol=1e-4, atol=1e-6 * N)
        # Uniform within a merged value: each original value gets 1/k of it.
        spread = np.take(cmodel.marginal(pair), cmap, axis=axis) / np.expand_dims(k[cmap], 1 - axis)
        np.testing.assert_allclose(full, spread, rtol=1e-4, atol=1e-6 * N)
    assert model.total == cmodel.total
    np.testing.assert_allclose(model.marginal(("a", "b")), cmodel.marginal(("a", "b")), rtol=1e-4, atol=1e-6 * N)


def test_mst_reproducible_from_the_key(data):
    r1, r2 = run_mst(data, seed=0), mst(data, 1.0, key=jax.random.key(0), select_iters=100, engine_iters=300)
    assert np.array_equal(r1.synthetic.records, r2.synthetic.records)
    assert r1.info.edges == r2.info.edges
    assert all(np.array_equal(a.y, b.y) for a, b in zip(r1.measurements, r2.measurements))
    # Another key: other noise (same structure, so only the first measurement is redrawn here).
    acc = pj.privacy.Accountant(epsilon=1.0, delta=1e-9)
    other = acc.measure_many(jax.random.split(jax.random.key(1), 5)[0], data, [(a,) for a in SIZES], rho=acc.budget / 3)
    same = acc.measure_many(jax.random.split(jax.random.key(0), 5)[0], data, [(a,) for a in SIZES], rho=acc.budget / 3)
    assert np.array_equal(same[0].y, r1.measurements[0].y) and not np.array_equal(other[0].y, r1.measurements[0].y)


def test_mst_progress_callback(data):
    seen = []
    res = mst(data, 1.0, key=jax.random.key(0), select_iters=100, engine_iters=300, synthetic=False, progress=seen.append)
    assert res.synthetic is None and res.info.edges == run_mst(data).info.edges
    assert [s["stage"] for s in seen][:2] == ["one-way marginals", "one-way fit"]
    assert sum(s["stage"] == "selection" for s in seen) == len(SIZES) - 1 and seen[-1]["step"] == seen[-1]["steps"]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(epsilon=0.0), ValueError, "epsilon"),
        (dict(epsilon=-1.0), ValueError, "epsilon"),
        (dict(delta=0.0), ValueError, "delta"),
        (dict(delta=1.0), ValueError, "delta"),
        (dict(key=0), TypeError, "key"),
        (dict(select_iters=0), ValueError, "select_iters"),
        (dict(engine_iters=1.5), TypeError, "engine_iters"),
        (dict(progress="yes"), TypeError, "progress"),
        (dict(fit_options={"iters": 5}), TypeError, "fit_options must be a pgmjax.FitOptions"),
        (dict(rows=0), ValueError, "rows"),
    ],
)
def test_mst_bad_input(data, kwargs, error, match):
    kw = dict(epsilon=1.0, key=jax.random.key(0)) | kwargs
    with pytest.raises(error, match=match):
        mst(data, kw.pop("epsilon"), **kw)


def test_mst_needs_a_dataset_with_two_attributes(data):
    with pytest.raises(TypeError, match="Dataset"):
        mst(data.records, 1.0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="at least 2 attributes"):
        mst(data.project(("a",)), 1.0, key=jax.random.key(0))


# --------------------------------------------------------------------------------------------------
# AIM
# --------------------------------------------------------------------------------------------------


def test_aim_ledger_spends_exactly_rho(data):
    res = run_aim(data)
    acc = res.accountant
    b = aim_budget(1.0, 1e-9, rounds=8)
    assert acc.composition == "zcdp" and acc.spent == acc.budget  # exactly
    one_way = [c for c in res.info.candidates if len(c) == 1]
    ledger = acc.ledger
    k = len(one_way)
    assert [e.mechanism for e in ledger[:k]] == ["gaussian"] * k
    assert all(e.scale == pytest.approx(b["sigma"], rel=1e-12) for e in ledger[:k])
    rounds = ledger[k:]
    assert len(rounds) == 2 * res.info.rounds_run
    assert [e.mechanism for e in rounds] == ["exponential", "gaussian"] * res.info.rounds_run
    log = res.info.log
    assert [e["last"] for e in log] == [False] * (len(log) - 1) + [True]
    for t, entry in enumerate(log):
        em, g = rounds[2 * t], rounds[2 * t + 1]
        assert g.scale == pytest.approx(entry["sigma"], rel=1e-9) and g.target == entry["clique"]
        assert em.epsilon == pytest.approx(entry["em_epsilon"], rel=1e-9)
        # EM sensitivity: the largest weight among the candidates.
        assert em.sensitivity == max(res.info.candidates.values())
    # The last round: 10% / 90% of what was left before it.
    before = math.fsum(e.cost for e in ledger[:-2])
    left = acc.budget - before
    assert rounds[-2].rho == pytest.approx(0.1 * left, rel=1e-9) and rounds[-1].rho == pytest.approx(0.9 * left, rel=1e-6)
    # Every non-last round is cheap enough: at least twice its cost was left.
    spent = math.fsum(e.cost for e in ledger[:k])
    for t in range(len(log) - 1):
        cost = rounds[2 * t].cost + rounds[2 * t + 1].cost
        assert acc.budget - spent >= 2 * cost * (1 - 1e-12)
        spent += cost
    # Annealing halves sigma and doubles eps_EM.
    for prev, nxt in zip(log[:-2], log[1:-1]):
        ratio = prev["sigma"] / nxt["sigma"]
        assert ratio == pytest.approx(2.0 if prev["annealed"] else 1.0)
        assert nxt["em_epsilon"] / prev["em_epsilon"] == pytest.approx(ratio)
    assert res.original is None and res.mechanism == "aim"


def test_aim_size_limit_never_exceeded(data):
    # 60 cells; round 1 (limit = cap * spent / rho, about 46 cells after the one-way measurements'
    # 60% and the round's 1/6) cannot afford (b, c): 48 + 3 + 2 = 53 cells with the one-way cliques.
    cap = 60 * 8 / 2**20
    res = run_aim(data, eps=5.0, rounds=6, max_model_mb=cap)
    rho = res.accountant.budget
    for e in res.info.log:
        assert e["limit_mb"] <= cap * (1 + 1e-12)
        assert e["model_mb"] <= e["limit_mb"] * (1 + 1e-12)
    first = res.info.log[0]
    assert first["limit_mb"] == pytest.approx(cap * first["spent"] / rho)
    assert res.info.log[-1]["limit_mb"] == cap
    assert first["candidates"] < len(res.info.candidates)  # it binds
    assert hypothetical_model_size(data.domain, [("a",), ("d",), ("b", "c")]) > first["limit_mb"]
    # The model size is what hypothetical_model_size predicts for the fitted cliques.
    assert res.info.model_mb == pytest.approx(hypothetical_model_size(data.domain, res.model.cliques))


def test_aim_end_to_end_large_epsilon_close_to_truth(data):
    res = run_aim(data, eps=50.0, rounds=12, engine_iters=100)
    synth = res.synthetic
    assert synth.domain == data.domain and abs(len(synth) - N) < 0.01 * N
    tvd = pj.metrics.marginal_tvd(data, synth, PAIRS)
    indep = pj.metrics.marginal_tvd(data, _independent(data), PAIRS)
    assert tvd < 0.01 and tvd < 0.05 * indep
    assert pj.metrics.marginal_tvd(data, res.model, PAIRS) < 0.01
    # With this much budget AIM's first three rounds measure the chain's pairs, the ones the model needs.
    # Later rounds may measure other pairs: once the chain is fitted (sigma 0.66 on 20,000 records), the
    # sample's own departures from a Markov chain (e.g. (a, c): about 50 records in L1) exceed the noise
    # penalty of the selection score, so measuring them is what AIM should do.
    chain = {frozenset(p) for p in [("a", "b"), ("b", "c"), ("c", "d")]}
    assert {frozenset(c) for c in res.info.selected[:3]} == chain


def test_aim_reproducible_from_the_key(data):
    r1 = run_aim(data)
    r2 = aim(data, 1.0, key=jax.random.key(0), rounds=8, engine_iters=60, max_model_mb=1.0)
    assert r1.info.selected == r2.info.selected
    assert np.array_equal(r1.synthetic.records, r2.synthetic.records)
    assert [e.rho for e in r1.ledger] == [e.rho for e in r2.ledger]


def test_aim_progress_callback(data):
    seen = []
    res = aim(data, 1.0, key=jax.random.key(0), rounds=8, engine_iters=60, max_model_mb=1.0, synthetic=False,
              progress=seen.append)
    assert res.info.selected == run_aim(data).info.selected
    assert [s["round"] for s in seen] == list(range(1, res.info.rounds_run + 1)) and seen[-1]["last"]
    assert res.synthetic is None


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(epsilon=0.0), ValueError, "epsilon"),
        (dict(delta=2.0), ValueError, "delta"),
        (dict(key="k"), TypeError, "key"),
        (dict(workload=[(("a", "b"), -1.0)]), ValueError, "weights must be positive"),
        (dict(workload=[("a", "zz")]), ValueError, "zz"),
        (dict(workload=[]), ValueError, "empty"),
        (dict(workload="ab"), TypeError, "workload"),
        (dict(rounds=3), ValueError, "rounds"),
        (dict(rounds=0), ValueError, "rounds"),
        (dict(max_model_mb=0.0), ValueError, "max_model_mb"),
        (dict(engine_iters=0), ValueError, "engine_iters"),
        (dict(progress=3), TypeError, "progress"),
        (dict(fit_options={"warm_start": None}), TypeError, "fit_options must be a pgmjax.FitOptions"),
    ],
)
def test_aim_bad_input(data, kwargs, error, match):
    kw = dict(epsilon=1.0, key=jax.random.key(0)) | kwargs
    with pytest.raises(error, match=match):
        aim(data, kw.pop("epsilon"), **kw)


def test_aim_default_workload_needs_two_attributes(data):
    with pytest.raises(ValueError, match="at least 2 attributes"):
        aim(data.project(("a",)), 1.0, key=jax.random.key(0))
    with pytest.raises(TypeError, match="Dataset"):
        aim(data.records, 1.0, key=jax.random.key(0))



def test_aim_rounds_stop_when_converged_and_never_end_worse_than_they_start(data, monkeypatch):
    """Each round's fit (warm-started) stops once converged (ROUND_TOL), well before engine_iters, and returns a
    model whose loss on the round's measurements is at most that of the model it started from."""
    import jax.numpy as jnp

    from pgmjax.estimation import driver, inputs

    fits = []
    real = aim_mod.estimate

    def recorded(domain, measurements, iters, warm_start=None, **kw):
        fitted = real(domain, measurements, iters=iters, warm_start=warm_start, **kw)
        start = None
        if warm_start is not None:
            warm, _ = inputs.check_warm_start(warm_start, domain, "test")
            ms, cliques = inputs.check_structure(domain, measurements, "l2", (), warm, caller="test")
            problem, _, _ = inputs.build_problem(domain, ms, cliques, "l2", None, jnp.float32, caller="test")
            start = float(driver.model_loss(problem, problem.plan.from_tables(warm.potentials, jnp.float32)))
        fits.append({"iters": iters, "ran": fitted.report.iterations, "tol": kw.get("tol"), "start": start,
                     "loss": float(fitted.report.loss)})
        return fitted

    monkeypatch.setattr(aim_mod, "estimate", recorded)
    aim(data, 1.0, key=jax.random.key(3), rounds=8, engine_iters=2000, max_model_mb=1.0, synthetic=False)
    rounds, final = fits[:-1], fits[-1]
    assert all(f["tol"] == aim_mod.ROUND_TOL for f in rounds) and final["tol"] is None
    assert final["ran"] == final["iters"]  # the final fit runs all its iterations
    assert any(f["ran"] < f["iters"] for f in rounds)  # converged rounds stop early
    for f in rounds[1:]:
        assert f["loss"] <= f["start"] * (1 + 1e-6) + 1e-6, f


def test_aim_fits_pool_a_marginal_measured_again(data, monkeypatch):
    """A marginal selected again is released as its own measurement, and the fits see it pooled with the earlier
    ones (pgmjax.queries.measurement.pool_repeats): one measurement per clique, so the round's structure is the
    previous round's."""
    seen = []
    real = aim_mod.estimate

    def recorded(domain, measurements, iters, **kw):
        seen.append([m.clique for m in measurements])
        return real(domain, measurements, iters=iters, **kw)

    monkeypatch.setattr(aim_mod, "estimate", recorded)
    res = aim(data, 1.0, key=jax.random.key(0), rounds=12, engine_iters=200, max_model_mb=0.001, synthetic=False)
    released = [m.clique for m in res.measurements]
    assert len(set(released)) < len(released)  # this run measures some marginal twice
    assert all(len(set(cliques)) == len(cliques) for cliques in seen)
    assert set(seen[-1]) == set(released)


def test_aim_release_is_unchanged_by_pooling_until_a_marginal_is_measured_again(data, monkeypatch):
    """The same key gives the same selections and answers as AIM without pooling (the fits on the plain list of
    measurements) for every round before the first repeat: until then pooling returns the list as it is, so the
    fits, hence the selections, are the same bit for bit; from the repeat on the fits differ by rounding only."""
    kwargs = dict(key=jax.random.key(0), rounds=12, engine_iters=200, max_model_mb=0.001, synthetic=False)
    pooled = aim(data, 1.0, **kwargs)
    monkeypatch.setattr(aim_mod, "pool_repeats", list)
    plain = aim(data, 1.0, **kwargs)
    cliques = [m.clique for m in pooled.measurements]
    first_repeat = next(i for i, c in enumerate(cliques) if c in cliques[:i])
    for a, b in zip(pooled.measurements[:first_repeat + 1], plain.measurements[:first_repeat + 1]):
        assert a.clique == b.clique and np.array_equal(a.y, b.y) and np.array_equal(a.stddev, b.stddev)
    assert pooled.accountant.spent == plain.accountant.spent == pooled.accountant.budget


def test_decompressed_measurements_ask_the_original_marginals_what_the_compressed_ones_asked(data):
    from pgmjax.mechanisms.domain_compression import decompress_measurements

    res = run_mst(data)
    mapping, model_c = res.info.mapping, res.info.compressed_model
    assert mapping and any(len(m.clique) == 2 and set(m.clique) & set(mapping) for m in res.measurements)
    lifted = decompress_measurements(res.measurements, mapping, data.domain)
    for before, after in zip(res.measurements, lifted):
        after.validate(data.domain)
        assert after.clique == before.clique and np.array_equal(after.y, before.y)
        assert np.array_equal(after.row_stddev(), before.row_stddev())
        # Q_lifted mu(original model) == mu(compressed model): the loss of res.model on the lifted measurements is
        # the compressed model's loss on the measurements it was fitted to.
        asked = after.linear.apply(np.asarray(res.model.marginal(after.clique), np.float64))
        np.testing.assert_allclose(np.asarray(asked).ravel(), np.asarray(model_c.marginal(before.clique)).ravel(),
                                   rtol=1e-4, atol=1e-3)
    untouched = [m for m in res.measurements if not set(m.clique) & set(mapping)]
    assert untouched and all(any(u is v for v in lifted) for u in untouched)


def test_aim_tells_each_refit_how_often_its_structure_was_fitted_and_how_long_the_last_fit_ran(data, monkeypatch):
    """Each round's refit passes ``estimate`` its ``repeats`` (a clique measured again pools: the previous fit's
    structure once more) and ``expected_iters`` (the previous fit's iterations), so that ``program="auto"`` weighs a
    structure fitted again and again (dense) against new ones of short fits (the size class); the final fit counts one
    repeat more. The hints come from the run's own history only, so a rerun takes the same programs and releases the
    same."""
    from pgmjax.mechanisms import adaptive_iterative

    calls, real = [], adaptive_iterative.estimate

    def recording(domain, measurements, **kw):
        fitted = real(domain, measurements, **kw)
        calls.append((kw.get("repeats"), kw.get("expected_iters"), sorted({m.clique for m in measurements}),
                      fitted.report.iterations))
        return fitted

    monkeypatch.setattr(adaptive_iterative, "estimate", recording)
    res = aim(data, 1.0, key=jax.random.key(0), rounds=30, engine_iters=60, max_model_mb=0.001)
    assert calls[0][:2] == (None, None) and len(calls) == res.info.rounds_run + 2
    repeats = 1
    for (_, _, before, iters_before), (given, expected, after, _), entry in zip(calls, calls[1:], res.info.log):
        repeats = repeats + 1 if after == before and entry["clique"] in before else 1
        assert (given, expected) == (repeats, iters_before), entry
    assert any(r > 1 for r, *_ in calls[1:-1]), "the cap should make AIM measure a clique again"
    assert calls[-1][0] == repeats + 1 and calls[-1][1] is None
    monkeypatch.undo()
    again = aim(data, 1.0, key=jax.random.key(0), rounds=30, engine_iters=60, max_model_mb=0.001)
    assert again.info.log == res.info.log
