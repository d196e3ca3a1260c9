"""PrivBayes (Zhang, Cormode, Procopiuc, Srivastava & Xiao, ACM TODS 2017) and PrivBayes+PGM (McKenna, Sheldon &
Miklau, ICML 2019): pgmjax.mechanisms.privbayes.

Reference scores are recomputed here from record counts with plain Python (no shared code with the
module); sensitivities are checked by brute force over every neighbouring dataset of small tables.
The two full runs (add/remove with the tau rule at eps = 1; replace-one, fixed degree, huge eps) are
module fixtures: the engine compiles once per clique structure, which dominates the run time.
"""

import importlib
import itertools
import math
from collections import Counter

import jax
import numpy as np
import pytest

import pgmjax as pj
PB = importlib.import_module("pgmjax.mechanisms.bayesian_network")  # pgmjax.mechanisms.privbayes is the function
from pgmjax.mechanisms.original_estimates import FactoredTable
from pgmjax.mechanisms.result import MechanismResult
from pgmjax.privacy import Accountant

SIZES = {"a": 3, "b": 3, "c": 4, "d": 2, "e": 2, "f": 5}


def _six(n=2000, seed=0):
    """6 attributes with a chain/tree of dependencies (so the network and the scores matter)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 3
    c = (2 * b + rng.integers(0, 2, n)) % 4
    d = rng.integers(0, 2, n)
    e = (c + d) % 2
    e = np.where(rng.random(n) < 0.1, 1 - e, e)
    f = (a + e + rng.integers(0, 2, n)) % 5
    return pj.Dataset(np.stack([a, b, c, d, e, f], 1), SIZES)


# ----------------------------------------------------------------------------------------------------------
# independent reference scores (from record counts, plain Python)
# ----------------------------------------------------------------------------------------------------------


def _counts(records, child, parents):
    joint = Counter((r[child], tuple(r[p] for p in parents)) for r in records)
    cx = Counter(r[child] for r in records)
    cp = Counter(tuple(r[p] for p in parents) for r in records)
    return joint, cx, cp, len(records)


def ref_mi(records, child, parents):
    joint, cx, cp, n = _counts(records, child, parents)
    return sum(c / n * math.log2(c * n / (cx[x] * cp[p])) for (x, p), c in joint.items())


def ref_r(records, child, parents, child_size, parent_configs):
    joint, cx, cp, n = _counts(records, child, parents)
    return 0.5 * sum(
        abs(joint.get((x, p), 0) / n - cx.get(x, 0) / n * cp.get(p, 0) / n) for x in range(child_size) for p in parent_configs
    )


def ref_f(records, child, parents, parent_configs):
    """F by enumerating every map from parent configurations to the binary child (TODS paper, Section 4.2)."""
    joint, _, _, n = _counts(records, child, parents)
    cap = (n + 1) // 2
    best = -math.inf
    for f in itertools.product((0, 1), repeat=len(parent_configs)):
        a = sum(joint.get((0, p), 0) for p, v in zip(parent_configs, f) if v == 0)
        b = sum(joint.get((1, p), 0) for p, v in zip(parent_configs, f) if v == 1)
        best = max(best, min(a, cap) + min(b, cap))
    return (best - n) / n


def _configs(sizes, parents):
    return list(itertools.product(*[range(sizes[p]) for p in parents]))


# ----------------------------------------------------------------------------------------------------------
# scores and sensitivities
# ----------------------------------------------------------------------------------------------------------


def test_scores_match_reference_and_anchor_values():
    data = _six(300, seed=3)
    recs = [dict(zip(SIZES, r)) for r in data.records.tolist()]
    for child, parents in [("b", ("a",)), ("f", ("a", "e")), ("e", ("c", "d")), ("d", ())]:
        joint = data.marginal((child, *parents))
        assert PB.mutual_information(joint) == pytest.approx(ref_mi(recs, child, parents), abs=1e-12)
        r = ref_r(recs, child, parents, SIZES[child], _configs(SIZES, parents))
        assert PB.r_score(joint) == pytest.approx(r, abs=1e-12)
        assert PB.score_quality(joint, "R", bounded=False) == pytest.approx(300 * r, abs=1e-9)
    # TODS Lemma 4.1 on Adult (N = 48842), and R's 3/N (TODS Section 4.3)
    assert PB.mutual_information_sensitivity(48842, binary=True) == pytest.approx(3.48e-4, rel=2e-3)
    assert PB.mutual_information_sensitivity(48842, binary=False) == pytest.approx(6.56e-4, rel=2e-3)
    assert PB.score_sensitivity("R", 48842, bounded=True) == 3 / 48842
    assert PB.score_sensitivity("R", None, bounded=False) == 2.0
    # tau (TODS, general domains; Adult, eps2 = 0.7, theta = 4) and the binary fixed-k rule, by hand:
    # k = 8: 48842 * 0.7 / (6 * 2^10) = 5.56 >= 4; k = 9: 34189.4 / (5 * 2^11) = 3.34 < 4
    assert PB.usefulness_tau(48842, 0.7, 14, 4.0) == pytest.approx(305.2625)
    assert PB.binary_degree(48842, 14, 0.7, 4.0) == 8


def _neighbours_replace(records, sizes):
    values = list(itertools.product(*[range(s) for s in sizes]))
    for i in range(len(records)):
        for v in values:
            if v != records[i]:
                yield records[:i] + [v] + records[i + 1 :]


def _neighbours_add_remove(records, sizes):
    for v in itertools.product(*[range(s) for s in sizes]):
        yield records + [v]
    for i in range(len(records)):
        yield records[:i] + records[i + 1 :]


@pytest.mark.parametrize("seed", range(4))
def test_score_sensitivities_brute_force(seed):
    """|score(D) - score(D')| <= Delta over every neighbour D' of small random tables."""
    rng = np.random.default_rng(seed)
    sizes = (3, 2, 3)  # x, p (binary), q
    n = 9
    # skewed tables reach the large changes; uniform ones do not
    records = [tuple(int(v) for v in row) for row in rng.integers(0, 2, (n, 3))]
    cases = [(0, (1,), True), (0, (2,), False), (0, (1, 2), False), (1, (0,), True)]  # (child, parents, binary)

    def scores(recs, bounded):
        out = []
        for child, parents, _ in cases:
            t = np.zeros([sizes[child], *[sizes[p] for p in parents]])
            for r in recs:
                t[(r[child], *[r[p] for p in parents])] += 1
            out.append((PB.score_quality(t, "R", bounded), PB.mutual_information(t) if bounded else None))
        return out

    base = scores(records, True)
    worst_r, worst_i = 0.0, 0.0
    for nb in _neighbours_replace(records, sizes):
        for (child, parents, binary), (r0, i0), (r1, i1) in zip(cases, base, scores(nb, True)):
            dr, di = abs(r1 - r0), abs(i1 - i0)
            assert dr <= PB.score_sensitivity("R", n, bounded=True) + 1e-12
            assert di <= PB.score_sensitivity("I", n, bounded=True, binary=binary) + 1e-12
            worst_r, worst_i = max(worst_r, dr * n / 3), max(worst_i, di / PB.mutual_information_sensitivity(n, binary))
    assert worst_r > 0.3 and worst_i > 0.3  # the neighbours do move the scores

    base = scores(records, False)
    worst = 0.0
    for nb in _neighbours_add_remove(records, sizes):
        for (r0, _), (r1, _) in zip(base, scores(nb, False)):
            assert abs(r1 - r0) <= 2.0 + 1e-12  # N R under add/remove
            worst = max(worst, abs(r1 - r0))
    assert worst > 0.5


@pytest.mark.parametrize("seed", range(3))
def test_f_score_reference_and_sensitivity(seed):
    """F against exhaustive enumeration; |Delta F| <= 1/N (replace-one) and |Delta N F| <= 1 (add/remove)."""
    rng = np.random.default_rng(100 + seed)
    sizes = (2, 2, 2, 2)
    n = 7
    records = [tuple(int(v) for v in row) for row in (rng.random((n, 4)) < rng.random(4)).astype(int)]
    cases = [(0, (1,)), (0, (1, 2)), (3, (0, 1, 2)), (2, ())]

    def table(recs, child, parents):
        t = np.zeros([2] * (1 + len(parents)))
        for r in recs:
            t[(r[child], *[r[p] for p in parents])] += 1
        return t

    for child, parents in cases:
        ref = ref_f([dict(enumerate(r)) for r in records], child, parents, _configs(dict(enumerate(sizes)), parents))
        assert PB.f_score(table(records, child, parents)) == pytest.approx(ref, abs=1e-12)
    worst = [0.0, 0.0]
    for bounded, neighbours in [(True, _neighbours_replace), (False, _neighbours_add_remove)]:
        delta = PB.score_sensitivity("F", n, bounded=bounded)
        assert delta == (1 / n if bounded else 1.0)
        base = [PB.score_quality(table(records, c, p), "F", bounded) for c, p in cases]
        for nb in neighbours(records, sizes):
            for (c, p), q0 in zip(cases, base):
                change = abs(PB.score_quality(table(nb, c, p), "F", bounded) - q0)
                assert change <= delta + 1e-12
                worst[bounded] = max(worst[bounded], change / delta)
    assert min(worst) == pytest.approx(1.0)  # both bounds are attained on these tables


def test_f_score_needs_binary_attributes():
    with pytest.raises(ValueError, match="score='F' is defined for binary attributes only"):
        PB.privbayes(_six(50), 1.0, key=jax.random.key(0), score="F")
    with pytest.raises(ValueError, match="the child must be binary"):
        PB.f_score(np.ones((3, 2)))


def test_mutual_information_needs_replace_one():
    with pytest.raises(ValueError, match="score='I' needs bounded=True"):
        PB.score_sensitivity("I", 100, bounded=False)
    with pytest.raises(ValueError, match="score='I' needs bounded=True"):
        PB.privbayes(_six(50), 1.0, key=jax.random.key(0), score="I")


# ----------------------------------------------------------------------------------------------------------
# candidate parent sets
# ----------------------------------------------------------------------------------------------------------


def test_maximal_parent_sets_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(60):
        sizes = [int(s) for s in rng.integers(1, 6, rng.integers(0, 7))]
        cap = int(rng.integers(0, 80))
        k = None if rng.random() < 0.5 else int(rng.integers(0, 4))
        idx = range(len(sizes))
        allowed = [
            s
            for r in range(len(sizes) + 1)
            for s in itertools.combinations(idx, r)
            if math.prod(sizes[i] for i in s) <= cap and (k is None or len(s) <= k)
        ]
        want = {frozenset(s) for s in allowed if not any(set(s) < set(t) for t in allowed)}
        got = PB.maximal_parent_sets(sizes, cap, k)
        assert len(got) == len(set(map(frozenset, got)))  # no repeats
        assert set(map(frozenset, got)) == want, (sizes, cap, k)
    assert PB.maximal_parent_sets([2, 3], 0) == []  # below 1 nothing, not even the empty set


def test_candidate_explosion_guard_halves_the_cap():
    rng = np.random.default_rng(1)
    data = pj.Dataset(rng.integers(0, 2, (200, 9)), {f"x{i}": 2 for i in range(9)})
    acc = Accountant(epsilon=1.0, bounded=True)
    # cap 64: a child may take 5 binary parents -> C(|V|, 5) maximal sets per child without the guard
    net, steps = PB.greedy_bayes(data, acc, jax.random.key(0), 0.5, cap=64, max_candidates=12)
    assert all(s["candidates"] <= 12 for s in steps)
    assert any(s["cap"] < 64 for s in steps)
    for (x, parents), s in zip(net[1:], steps):
        assert 2 * 2 ** len(parents) <= s["cap"]


# ----------------------------------------------------------------------------------------------------------
# the exponential mechanism of GreedyBayes
# ----------------------------------------------------------------------------------------------------------


def test_em_probabilities_exact_and_by_frequency():
    data = _six(300, seed=5).project(("a", "b", "f"))
    recs = [dict(zip(("a", "b", "f"), r)) for r in data.records.tolist()]
    eps1 = 0.4
    outcomes, ref = [], {}
    for seed in range(300):
        acc = Accountant(epsilon=1.0, bounded=True)
        net, steps = PB.greedy_bayes(data, acc, jax.random.key(seed), eps1, cap=10**6, degree=1, keep_scores=True)
        for (x, parents), st, entry in zip(net[1:], steps, acc.ledger):
            assert entry.mechanism == "exponential" and entry.epsilon == pytest.approx(eps1 / 2)
            assert entry.sensitivity == pytest.approx(3 / 300)
            cands = st["candidates_list"]
            for c, p in cands:
                if (c, p) not in ref:
                    ref[c, p] = ref_r(recs, c, p, data.domain[c], _configs(data.domain, p))
            r = np.array([ref[c, p] for c, p in cands])
            w = np.exp((eps1 / 2) * (r - r.max()) / (2 * 3 / 300))
            np.testing.assert_allclose(st["probabilities"], w / w.sum(), rtol=1e-9)
            outcomes.append((cands.index((x, parents)), np.asarray(st["probabilities"])))
    # frequency check: the chosen candidate's indicator minus its probability, pooled (a z-score)
    z_num = sum(1.0 * (chosen == 0) - p[0] for chosen, p in outcomes)
    z_var = sum(p[0] * (1 - p[0]) for _, p in outcomes)
    assert z_var > 20  # the probabilities are far from 0/1: the check has power
    assert abs(z_num / math.sqrt(z_var)) < 4


def _assert_greedy_argmax(data, network, score, degree):
    """Each step of ``network`` takes a best-scoring candidate (reference scores; TODS Algorithm 4, eps -> inf).

    Ties (F is a multiple of 1/N) may go either way, so the chosen score is compared with the best.
    """
    attrs = data.domain.attributes
    recs = [dict(zip(attrs, r)) for r in data.records.tolist()]

    def ref(x, p):
        if score == "I":
            return ref_mi(recs, x, p)
        if score == "F":
            return ref_f(recs, x, p, _configs(data.domain, p))
        return ref_r(recs, x, p, data.domain[x], _configs(data.domain, p))

    placed = [network[0][0]]
    assert network[0][1] == ()
    for x, parents in network[1:]:
        k = min(degree, len(placed))
        assert len(parents) == k and set(parents) <= set(placed) and x not in placed
        best = max(ref(y, p) for y in attrs if y not in placed for p in itertools.combinations(placed, k))
        assert ref(x, parents) == pytest.approx(best, abs=1e-12), (x, parents)
        placed.append(x)


def _binary(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 5), int)
    x[:, 0] = rng.random(n) < 0.4
    x[:, 1] = np.where(rng.random(n) < 0.8, x[:, 0], rng.random(n) < 0.5)
    x[:, 2] = np.where(rng.random(n) < 0.7, x[:, 0] ^ x[:, 1], rng.random(n) < 0.3)
    x[:, 3] = rng.random(n) < 0.5
    x[:, 4] = np.where(rng.random(n) < 0.6, x[:, 3] | x[:, 2], rng.random(n) < 0.5)
    return pj.Dataset(x, {f"x{i}": 2 for i in range(5)})


@pytest.mark.parametrize("score,bounded", [("R", True), ("R", False), ("I", True), ("F", True), ("F", False)])
def test_huge_epsilon_greedy_picks_the_argmax_network(score, bounded):
    data = _six(400, seed=11) if score != "F" else _binary()
    acc = Accountant(epsilon=1e9, bounded=bounded)
    net, _ = PB.greedy_bayes(data, acc, jax.random.key(4), 1e8, score=score, cap=10**7, degree=2)
    _assert_greedy_argmax(data, net, score, 2)


# ----------------------------------------------------------------------------------------------------------
# the original estimator: noisy conditionals and the sampler
# ----------------------------------------------------------------------------------------------------------


def test_noisy_conditionals_clip_normalise_and_uniform_rows():
    dom = pj.Domain({"a": 2, "b": 3})
    y = np.array([[4.0, -2.0, 0.0], [1.0, 3.0, -1.0]])  # axes (a, b); b = 2 has no mass after clipping
    m = pj.Measurement(("a", "b"), y, stddev=1.0)
    net = [("a", ()), ("b", ("a",))]
    ca, cb = PB.noisy_conditionals(dom, net, [m])
    np.testing.assert_allclose(ca, [4 / 8, 4 / 8])
    np.testing.assert_allclose(cb, [[1.0, 0.0, 0.0], [0.25, 0.75, 0.0]])
    # a child whose parent configuration has no mass gets the uniform conditional
    (_, ca_given_b) = PB.noisy_conditionals(dom, [("b", ()), ("a", ("b",))], [m])
    np.testing.assert_allclose(ca_given_b, [[0.8, 0.2], [0.0, 1.0], [0.5, 0.5]])


def test_sampler_reproduces_the_conditionals():
    rng = np.random.default_rng(2)
    dom = pj.Domain({"a": 3, "b": 2, "c": 4})
    net = [("b", ()), ("a", ("b",)), ("c", ("b", "a"))]
    conds = [rng.dirichlet(np.ones(2)), rng.dirichlet(np.ones(3), size=2), rng.dirichlet(np.ones(4), size=(2, 3))]
    conds[2][1, 2] = [0.0, 0.5, 0.0, 0.5]  # zeros must never be drawn
    n = 200_000
    synth = PB.sample_network(dom, net, conds, n, jax.random.key(0))
    assert isinstance(synth, pj.Dataset) and len(synth) == n
    emp_b = synth.marginal("b") / n
    emp_ab = synth.marginal(("b", "a"))
    emp_bac = synth.marginal(("b", "a", "c"))
    np.testing.assert_allclose(emp_b, conds[0], atol=0.006)
    np.testing.assert_allclose(emp_ab / emp_ab.sum(1, keepdims=True), conds[1], atol=0.01)
    np.testing.assert_allclose(emp_bac / emp_bac.sum(2, keepdims=True), conds[2], atol=0.02)
    assert emp_bac[1, 2, 0] == 0 and emp_bac[1, 2, 2] == 0
    # reproducible from the key
    again = PB.sample_network(dom, net, conds, n, jax.random.key(0))
    np.testing.assert_array_equal(again.records, synth.records)
    with pytest.raises(ValueError, match="placed after it"):
        PB.sample_network(dom, [("a", ("b",)), ("b", ()), ("c", ())], [conds[1].T, conds[0], np.full(4, 0.25)], 10, jax.random.key(0))


# ----------------------------------------------------------------------------------------------------------
# the front-end, end to end
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data6():
    return _six()


@pytest.fixture(scope="module")
def run_unbounded(data6):
    return PB.privbayes(data6, 1.0, key=jax.random.key(0), engine_iters=300)


@pytest.fixture(scope="module")
def run_huge(data6):
    return PB.privbayes(data6, 1e6, key=jax.random.key(3), bounded=True, score="I", degree=2, engine_iters=1000)


def _check_ledger(res, data, bounded, count):
    acc, info = res.accountant, res.info
    d = len(data.domain)
    assert acc.spent == acc.budget == info.epsilon  # exactly the budget
    led = list(acc.ledger)
    if count:
        e = led.pop(0)
        assert e.mechanism == "laplace" and e.target == "record count" and e.epsilon == pytest.approx(info.epsilon_count)
    em, tables = led[: d - 1], led[d - 1 :]
    assert [e.mechanism for e in em] == ["exponential"] * (d - 1)
    assert all(e.epsilon == pytest.approx(info.epsilon_structure / (d - 1), rel=1e-12) for e in em)
    assert info.epsilon_structure == pytest.approx(info.beta * (info.epsilon - info.epsilon_count))
    m = len(info.cliques)
    assert [e.mechanism for e in tables] == ["laplace"] * m and m == len(res.measurements)
    delta1 = 2.0 if bounded else 1.0
    b = delta1 * m / info.epsilon_tables
    for e, meas in zip(tables, res.measurements):
        assert e.sensitivity == delta1 and e.scale == pytest.approx(b, rel=1e-9)
        # the realised discrete-Laplace scale is b rounded up to a rational, within 2^-20
        assert math.sqrt(2) * b * (1 - 1e-12) <= float(meas.stddev) <= math.sqrt(2) * b * (1 + 2**-20)
    assert math.fsum(e.cost for e in acc.ledger) == pytest.approx(info.epsilon, rel=1e-15)


def _check_cliques(res, domain):
    net, cliques = res.info.network, [set(c) for c in res.info.cliques]
    assert sorted(x for x, _ in net) == sorted(domain.attributes)
    placed = []
    for x, parents in net:
        assert set(parents) <= set(placed)
        assert any({x, *parents} <= c for c in cliques)  # every family is inside a measured table
        placed.append(x)
    assert not any(c < t for c in cliques for t in cliques)  # only maximal cliques are measured
    assert all(any({x, *p} == c for x, p in net) for c in cliques)


def test_end_to_end_add_remove(run_unbounded, data6):
    res, dom = run_unbounded, data6.domain
    assert isinstance(res, MechanismResult) and res.mechanism == "privbayes"
    _check_ledger(res, data6, bounded=False, count=True)
    _check_cliques(res, dom)
    info = res.info
    # tau rule: every family fits the step's cap, and no placed attribute could be added
    assert info.tau == pytest.approx(PB.usefulness_tau(max(info.noisy_count, 1.0), info.epsilon_tables, 6, 4.0))
    assert info.cap == math.floor(info.tau)
    placed = [info.network[0][0]]
    for (x, parents), step in zip(info.network[1:], info.steps):
        size = dom.size((x, *parents))
        assert size <= step["cap"]
        assert all(size * dom[y] > step["cap"] for y in placed if y not in parents)
        placed.append(x)
    # both arms: records, totals, and better 2-way marginals than independent attributes
    size = round(info.total)
    assert abs(info.total - len(data6)) < 100
    assert len(res.original) == size and len(res.synthetic) == size
    assert res.original.domain == dom and res.synthetic.domain == dom
    assert res.model.total == pytest.approx(info.total)
    w = pj.Workload.all_kway(dom, 2)
    independent = FactoredTable(dom, {(a,): data6.marginal(a) for a in dom}, len(data6))
    err = {k: pj.metrics.workload_error(w, data6, v) for k, v in [("pgm", res.model), ("original", res.original), ("independent", independent)]}
    assert err["pgm"] < 0.8 * err["independent"] and err["original"] < 0.8 * err["independent"], err
    assert res.arms().keys() == {"pgm", "original"}


def test_same_key_same_run(run_unbounded, data6):
    again = PB.privbayes(data6, 1.0, key=jax.random.key(0), engine_iters=300)
    assert again.info.network == run_unbounded.info.network
    for m1, m2 in zip(again.measurements, run_unbounded.measurements):
        np.testing.assert_array_equal(m1.y, m2.y)
    np.testing.assert_array_equal(again.original.records, run_unbounded.original.records)


def test_huge_epsilon_network_tables_and_pgm(run_huge, data6):
    res = run_huge
    _check_ledger(res, data6, bounded=True, count=False)
    _check_cliques(res, data6.domain)
    _assert_greedy_argmax(data6, res.info.network, "I", 2)
    assert res.info.total == len(data6) and len(res.original) == len(data6)
    for c in res.info.cliques:  # the engine recovers the (almost noiseless) measured marginals
        np.testing.assert_allclose(res.model.marginal(c), data6.marginal(c), atol=1e-3 * len(data6))
    for (x, parents), cond in zip(res.info.network, res.info.conditionals):
        joint = data6.marginal((*parents, x))
        mass = joint.sum(-1, keepdims=True)
        seen = np.broadcast_to(mass > 0, cond.shape)  # parent configurations absent from the data
        np.testing.assert_allclose(cond[seen], (joint / np.maximum(mass, 1))[seen], atol=1e-4)
        # where the data has no record the conditional is whatever the clipped noise says (or uniform)
        assert np.all(cond >= 0)
        np.testing.assert_allclose(cond.sum(-1), 1.0, rtol=1e-12)


# ----------------------------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"epsilon": 0.0}, ValueError, "epsilon must be positive"),
        ({"epsilon": float("inf")}, ValueError, "epsilon must be positive"),
        ({"beta": 1.0}, ValueError, "beta must be in"),
        ({"theta": -1}, ValueError, "theta must be positive"),
        ({"score": "G"}, ValueError, "score must be one of"),
        ({"degree": -1}, ValueError, "degree must be at least 0"),
        ({"degree": 1.5}, TypeError, "degree must be an integer"),
        ({"bounded": "yes"}, TypeError, "bounded must be True or False"),
        ({"key": 0}, TypeError, "key must be one jax.random key"),
        ({"engine_iters": -5}, ValueError, "engine_iters must be at least 0"),
        ({"fit_options": {"iters": 5}}, TypeError, "fit_options must be a pgmjax.FitOptions"),
        ({"max_cells": 2}, ValueError, "more than max_cells"),
        ({"count_fraction": 0}, ValueError, "count_fraction must be in"),
    ],
)
def test_bad_inputs(kwargs, error, match):
    args = {"epsilon": 1.0, "key": jax.random.key(0)}
    args.update(kwargs)
    eps = args.pop("epsilon")
    with pytest.raises(error, match=match):
        PB.privbayes(_six(50), eps, **args)


def test_bad_data():
    with pytest.raises(TypeError, match="data must be a pgmjax.Dataset"):
        PB.privbayes(np.zeros((10, 2), int), 1.0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="at least 2 records"):
        PB.privbayes(pj.Dataset(np.zeros((1, 2), int), {"a": 2, "b": 2}), 1.0, key=jax.random.key(0))
