"""pgmjax.rr: companion estimators, bounds and cut queries against exact enumeration and closed forms
(Wang, Ying & Zhang, "A Minimax Distortion View of Differentially Private Query Release", arXiv 2014, [WYZ]: the
two-bit example at eps = ln 3 and the cut example worked by hand; the sampler's law, simulations and the
accountant are in test_rr_release.py)."""

import doctest
import importlib
import itertools
import math

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import queries as Q
from pgmjax import rr

LN3 = math.log(3.0)


def law(domain, epsilon, per_attribute):
    """P(r~ = s | r) of k-ary randomized response, written from its definition (not from pgmjax.rr)."""
    shape = domain.shape
    cells = list(itertools.product(*[range(n) for n in shape]))
    if per_attribute:
        eps = epsilon / len(shape)

        def p(s, r):
            return math.prod((math.exp(eps) if a == b else 1.0) / (math.exp(eps) + n - 1) for a, b, n in zip(s, r, shape))
    else:
        k = len(cells)

        def p(s, r):
            return (math.exp(epsilon) if s == r else 1.0) / (math.exp(epsilon) + k - 1)
    return cells, p


def enumerate_releases(data, epsilon, per_attribute):
    """Every released table with its probability (tiny tables only)."""
    cells, p = law(data.domain, epsilon, per_attribute)
    rows = [tuple(int(v) for v in r) for r in data.records]
    for out in itertools.product(cells, repeat=len(rows)):
        prob = math.prod(p(s, r) for s, r in zip(out, rows))
        yield prob, rr.Release.of(pj.Dataset(np.array(out), data.domain), epsilon, per_attribute)


def true_answer(data, query):
    if isinstance(query, dict):
        attrs, mats = Q.resolve(data.domain, query)
        return Q.kron_apply(data.marginal(attrs), mats)
    if isinstance(query, tuple):
        clique, f = query
        f = np.asarray(f, float)
        f = f.reshape(-1, *data.domain.shape_of(clique))
        return np.tensordot(f, data.marginal(clique), axes=f.ndim - 1)
    cols = [data.domain.index(a) for a in query.clique]
    f = query.functions.reshape(query.functions.shape[0], -1)
    idx = np.ravel_multi_index(tuple(data.records[:, c] for c in cols), data.domain.shape_of(query.clique))
    a = query.assignment if query.assignment is not None else None
    return np.array(f[a, idx].sum()) if a is not None else f[:, idx].sum(axis=1)


# ---------------------------------------------------------------------------------------------------
# Two bits, eps = ln 3: mechanism and estimator by exact enumeration
# ---------------------------------------------------------------------------------------------------


def w21_data():
    dom = pj.Domain({"b1": 2, "b2": 2})
    return pj.Dataset(np.array([[0, 0], [0, 1], [1, 1]]), dom)


def test_w21_released_table_values():
    data = w21_data()
    ch = rr.Channel.whole_row(data.domain, LN3)
    assert ch.keep[0] == pytest.approx(1 / 3, abs=1e-15)
    assert math.exp(LN3) + 4 - 1 == pytest.approx(6.0)  # kappa
    m = ch.matrix(("b1", "b2"))
    assert np.allclose(np.diag(m), 0.5) and np.allclose(m[~np.eye(4, dtype=bool)], 1 / 6)
    released = rr.Release.of(pj.Dataset(np.array([[0, 1], [0, 0], [1, 0]]), data.domain), LN3)
    query = {"b1": Q.Value(0)}
    assert float(rr.answer(released, query, normalize=True)[0]) == pytest.approx(1.0, abs=1e-12)
    assert float(rr.answer(released, query, normalize=True, proper="round")[0]) == pytest.approx(1.0, abs=1e-12)
    assert released.marginal(("b1", "b2")).reshape(-1) == pytest.approx([1.5, 1.5, 1.5, -1.5], abs=1e-12)
    assert rr.mse_bound(4, LN3, 3) == pytest.approx(0.75, abs=1e-12)


def test_w21_enumeration_moments():
    data = w21_data()
    query = {"b1": Q.Value(0)}
    q = 2 / 3
    mean = mse = mse_round = total = 0.0
    for prob, rel in enumerate_releases(data, LN3, False):
        g = float(rr.answer(rel, query, normalize=True)[0])
        g_round = float(rr.answer(rel, query, normalize=True, proper="round")[0])
        assert g_round in (0.0, 1 / 3, 2 / 3, 1.0) or min(abs(g_round - v) for v in (0, 1 / 3, 2 / 3, 1)) < 1e-12
        total += prob
        mean += prob * g
        mse += prob * (g - q) ** 2
        mse_round += prob * (g_round - q) ** 2
    assert total == pytest.approx(1.0, abs=1e-12)
    assert mean == pytest.approx(2 / 3, abs=1e-12)
    assert mse == pytest.approx(2 / 3, abs=1e-12)
    assert mse_round == pytest.approx(20 / 81, abs=1e-12)
    assert 20 / 81 == pytest.approx(0.24691358, abs=1e-8)
    rel = rr.Release.of(data, LN3)
    assert float(rr.exact_variance(data, rel, query, normalize=True)[0]) == pytest.approx(2 / 3, abs=1e-12)
    assert mse <= rr.mse_bound(4, LN3, 3) and mse_round <= rr.mse_bound(4, LN3, 3, proper=True)


# ---------------------------------------------------------------------------------------------------
# Unbiasedness, exact variance, unbiased variance estimate: brute force on a (2, 3) domain
# ---------------------------------------------------------------------------------------------------


def small_queries(rng):
    return [
        {"a": Q.Value(1)},
        {"a": Q.Identity(), "b": Q.Identity()},
        {"b": Q.Prefix()},
        {"a": Q.Value(0), "b": rng.normal(size=(2, 3))},
        (("a", "b"), rng.normal(size=(2, 3))),
        (("b",), rng.normal(size=(2, 3))),
        rr.StatisticalQuery(("a", "b"), rng.uniform(size=(2, 2, 3)), assignment=np.array([0, 1, 1])),
    ]


@pytest.mark.parametrize("per_attribute", [False, True])
def test_unbiased_and_exact_variance_by_enumeration(per_attribute, rng):
    dom = pj.Domain({"a": 2, "b": 3})
    data = pj.Dataset(np.array([[0, 2], [1, 0], [1, 2]]), dom)
    eps = 1.3
    queries = small_queries(rng)
    truth = [true_answer(data, q) for q in queries]
    first = [0.0] * len(queries)
    second = [0.0] * len(queries)
    var_est = [0.0] * len(queries)
    clip_mse = [0.0] * len(queries)
    total = 0.0
    for prob, rel in enumerate_releases(data, eps, per_attribute):
        total += prob
        for j, q in enumerate(queries):
            a = rr.answer(rel, q, return_variance=True)
            v = np.asarray(a.value).reshape(-1)
            first[j] = first[j] + prob * v
            second[j] = second[j] + prob * (v - truth[j].reshape(-1)) ** 2
            var_est[j] = var_est[j] + prob * np.asarray(a.variance).reshape(-1)
            c = np.asarray(rr.answer(rel, q, proper="clip")).reshape(-1)
            clip_mse[j] = clip_mse[j] + prob * (c - truth[j].reshape(-1)) ** 2
    assert total == pytest.approx(1.0, abs=1e-12)
    rel = rr.Release.of(data, eps, per_attribute)
    for j, q in enumerate(queries):
        exact = np.asarray(rr.exact_variance(data, rel, q)).reshape(-1)
        assert first[j] == pytest.approx(truth[j].reshape(-1), abs=1e-10), q
        assert second[j] == pytest.approx(exact, rel=1e-10, abs=1e-10), q
        assert var_est[j] == pytest.approx(exact, rel=1e-10, abs=1e-10), q
        assert np.all(clip_mse[j] <= second[j] + 1e-12)


def test_whole_row_companion_is_the_papers_formula(rng):
    """[WYZ] eq. 17: g^ = sum_i (kappa f(r~_i) - F) / (e^eps - 1), F summed over the WHOLE domain (not the released values)."""
    dom = pj.Domain({"a": 2, "b": 3, "c": 5})
    released = pj.Dataset(rng.integers(0, [2, 3, 5], size=(40, 3)), dom)
    eps = 0.8
    rel = rr.Release.of(released, eps)
    f_b = rng.normal(size=3)
    kappa = math.exp(eps) + 30 - 1
    F = f_b.sum() * 2 * 5  # a and c are not queried: they multiply F by their sizes
    paper = sum((kappa * f_b[r[1]] - F) / (math.exp(eps) - 1) for r in released.records)
    assert float(rr.answer(rel, {"b": f_b[None]})[0]) == pytest.approx(paper, rel=1e-12)
    # the debiased full histogram: (kappa h~ - n) / (e^eps - 1)
    h = released.marginal(("a", "b", "c"))
    assert rel.marginal(("a", "b", "c")) == pytest.approx((kappa * h - 40) / (math.exp(eps) - 1), abs=1e-9)


def test_marginal_variance_formula_lemma_2():
    """[WYZ] Section IV, eq. 17-20 and Lemma 2 (histogram form):
    Var x^_C[c] = [x_c pi1 (1 - pi1) + (n - x_c) pi0 (1 - pi0)] / lam^2 with the true counts."""
    dom = pj.Domain({"a": 3, "b": 4})
    data = pj.Dataset(np.random.default_rng(5).integers(0, [3, 4], size=(50, 2)), dom)
    eps = 2.0
    rel = rr.Release.of(data, eps)
    lam = math.expm1(eps) / (math.expm1(eps) + 12)
    for clique, cells in [(("a",), 3), (("a", "b"), 12)]:
        x = data.marginal(clique)
        pi0 = (1 - lam) / cells
        pi1 = lam + pi0
        spec = (x * pi1 * (1 - pi1) + (50 - x) * pi0 * (1 - pi0)) / lam**2
        ident = {a: Q.Identity() for a in clique}
        assert rr.exact_variance(data, rel, ident) == pytest.approx(spec, rel=1e-12)


def test_per_attribute_channel_is_the_kronecker_product():
    dom = pj.Domain({"a": 2, "b": 3})
    ch = rr.Channel.per_attribute(dom, 1.0)
    ma, mb = ch.matrix(("a",)), ch.matrix(("b",))
    assert ch.matrix(("a", "b")) == pytest.approx(np.kron(ma, mb), abs=1e-15)
    cells, p = law(dom, 1.0, True)
    brute = np.array([[p(s, r) for r in cells] for s in cells])
    assert ch.matrix(("a", "b")) == pytest.approx(brute, abs=1e-15)
    t = np.random.default_rng(0).normal(size=(4, 2, 3))
    assert ch.inverse(ch.forward(t, ("a", "b")), ("a", "b")) == pytest.approx(t, abs=1e-12)
    assert ch.epsilons == (0.5, 0.5) and ch.epsilon == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------------
# Cut queries ([WYZ] Section VI-B, eq. 34-36), worked by hand at eps = ln 3
# ---------------------------------------------------------------------------------------------------


def test_w23_cut_values():
    e = math.exp(LN3)
    assert ((e + 1) * 1 - 1) / (e - 1) == pytest.approx(1.5) and ((e + 1) * 0 - 1) / (e - 1) == pytest.approx(-0.5)
    bits = np.zeros(6, dtype=int)  # pairs 01 02 03 12 13 23
    bits[[1, 2, 3, 4]] = [1, 0, 1, 1]
    rel = rr.PairRelease(rr.adjacency(bits, 4), LN3)
    est = rr.cut(rel, [0, 1], [2, 3])
    assert float(est.value[0]) == pytest.approx(4.0, abs=1e-12)
    assert float(est.variance[0]) == pytest.approx(4 * 0.75, abs=1e-12)
    assert float(est.bound[0]) == pytest.approx(1.7320508, abs=1e-7)
    assert rr.cut_bound(2, 2, LN3) == pytest.approx(1.7320508, abs=1e-7)


def test_cut_unbiased_by_enumeration():
    """All 2^6 released graphs on 4 vertices: E C^ = C and Var C^ = |S||T| e^eps / (e^eps - 1)^2."""
    eps = 0.7
    true_bits = np.array([1, 0, 1, 1, 0, 1])
    adj_true = rr.adjacency(true_bits, 4)
    S, T = [0, 3], [1, 2]
    C = float(rr.cut_count(adj_true, S, T)[0])
    p_keep = math.exp(eps) / (1 + math.exp(eps))
    mean = second = 0.0
    for out in itertools.product([0, 1], repeat=6):
        prob = math.prod(p_keep if o == t else 1 - p_keep for o, t in zip(out, true_bits))
        v = float(rr.cut(rr.PairRelease(rr.adjacency(np.array(out), 4), eps), S, T).value[0])
        mean += prob * v
        second += prob * (v - C) ** 2
    assert mean == pytest.approx(C, abs=1e-12)
    assert second == pytest.approx(4 * math.exp(eps) / math.expm1(eps) ** 2, rel=1e-12)


def test_pair_table_and_many_cuts():
    rng = np.random.default_rng(3)
    v = 30
    edges = np.array([(u, w) for u in range(v) for w in range(u + 1, v) if rng.random() < 0.2])
    table = pj.rr.pair_table(edges[:, ::-1], v)  # orientation does not matter
    adj = rr.adjacency(table.records[:, 0], v)
    assert adj.sum() == 2 * len(edges) and all(adj[u, w] for u, w in edges)
    masks = rng.random((5, v)) < 0.5
    counts = rr.cut_count(adj, masks, ~masks)
    brute = [sum(adj[u, w] for u in range(v) for w in range(v) if m[u] and not m[w]) for m in masks]
    assert counts.tolist() == brute


# ---------------------------------------------------------------------------------------------------
# Bounds and the informative domain sizes (the constant ((e^eps + K - 1) / (e^eps - 1))^2 / 4 of [WYZ] eq. 20, by hand)
# ---------------------------------------------------------------------------------------------------


def test_bound_constant_table():
    table = {0.5: [4.168, 12.84, 164.7, 3.913e4, 2.551e9], 1: [1.171, 2.769, 26.58, 5624, 3.637e8],
             2: [0.431, 0.661, 3.07, 421.7, 2.631e7], 4: [0.269, 0.2887, 0.4215, 8.341, 3.744e5]}
    for eps, row in table.items():
        for d, value in zip([1, 2, 4, 8, 16], row):
            assert rr.bound_constant(2**d, eps) == pytest.approx(value, rel=2e-3), (eps, d)


def test_max_informative_size():
    assert rr.max_informative_size(1.0, 10**6, 0.01) == 32
    assert rr.max_informative_size(1.0, 48842, 0.01) == 5
    assert rr.max_informative_size(1.0, 48842, 0.05) == 36
    # NLTCS: 2^16 rows, 21,574 records: an RMSE of about 130 on [0, 1]
    assert math.sqrt(rr.mse_bound(2**16, 1.0, 21574)) == pytest.approx(130, rel=0.01)
    k = rr.max_informative_size(1.0, 48842, 0.01)
    assert math.sqrt(rr.mse_bound(k, 1.0, 48842)) <= 0.01 < math.sqrt(rr.mse_bound(k + 1, 1.0, 48842))


def test_quantized_bound_rate():
    """Proposition 1: with 2^k ~ n^(1/4) the bound falls like n^(-1/2)."""
    b = [rr.quantized_mse_bound(n, 1.0, rr.quantization_bits(n)) for n in (10**8, 10**12)]
    assert b[1] / b[0] == pytest.approx(1e-2, rel=0.6)


# ---------------------------------------------------------------------------------------------------
# RR+PGM measurements, input errors, doctests
# ---------------------------------------------------------------------------------------------------


def test_measurements_feed_the_engine():
    rng = np.random.default_rng(7)
    dom = pj.Domain({"a": 2, "b": 3, "c": 2})
    released = pj.Dataset(rng.integers(0, [2, 3, 2], size=(400, 3)), dom)
    rel = rr.Release.of(released, 3.0, per_attribute=True)
    ms = rr.measurements(rel, [("a", "b"), ("b", "c"), ("a", "b")])
    assert len(ms) == 2 and all(m.noise == "gaussian" for m in ms)
    x, v = rr.debiased_marginal(rel, ("a", "b"))
    assert ms[0].y == pytest.approx(x.reshape(-1)) and ms[0].row_stddev() == pytest.approx(np.sqrt(v.reshape(-1)))
    model = rr.fit(rel, [("a", "b"), ("b", "c")], iters=300)
    assert model.total == 400.0
    assert np.all(model.marginal(("a", "b")) >= 0)
    assert model.marginal(("a", "b")).sum() == pytest.approx(400.0, rel=1e-4)


def test_bad_input():
    dom = pj.Domain({"a": 2, "b": 3})
    data = pj.Dataset(np.array([[0, 1], [1, 2]]), dom)
    rel = rr.Release.of(data, 1.0)
    with pytest.raises(ValueError, match="epsilon must be positive"):
        rr.Release.of(data, 0.0)
    with pytest.raises(TypeError, match="pgmjax.rr.Release"):
        rr.answer(data, {"a": Q.Value(0)})
    with pytest.raises(ValueError, match="proper must be"):
        rr.answer(rel, {"a": Q.Value(0)}, proper="nearest")
    with pytest.raises(ValueError, match="counting queries"):
        rr.answer(rel, (("b",), [0.5, 1.0, 2.0]), proper="round")
    with pytest.raises(ValueError, match="functions must have shape"):
        rr.answer(rel, rr.StatisticalQuery(("b",), np.ones((1, 4))))
    with pytest.raises(ValueError, match="assignment has 3 entries for 2 records"):
        rr.answer(rel, rr.StatisticalQuery(("b",), np.ones((1, 3)), assignment=np.zeros(3, dtype=int)))
    with pytest.raises(ValueError, match="assignment must lie"):
        rr.StatisticalQuery(("b",), np.ones((1, 3)), assignment=np.array([0, 1]))
    with pytest.raises(TypeError, match="a query is"):
        rr.answer(rel, 3)
    with pytest.raises(ValueError, match="S and T must be disjoint"):
        rr.cut_count(np.zeros((3, 3)), [0, 1], [1, 2])
    with pytest.raises(ValueError, match="edge endpoints"):
        rr.pair_table([[0, 5]], 4)
    with pytest.raises(ValueError, match="private Dataset of the release"):
        rr.exact_variance(pj.Dataset(np.array([[0, 1]]), dom), rel, {"a": Q.Value(0)})
    with pytest.raises(ValueError, match="no cliques"):
        rr.measurements(rel, [])
    with pytest.raises(ValueError, match="total is the release"):
        rr.fit(rel, [("a",)], total=5)


@pytest.mark.parametrize("name", ["", ".channel", ".releases", ".estimators", ".bounds", ".graphs", ".engine"])
def test_module_docstring_examples(name):
    mod = importlib.import_module("pgmjax.rr" + name)
    globs = dict(vars(mod), np=np, jax=jax, pj=pj, math=math, Dataset=pj.Dataset, Domain=pj.Domain, Q=Q)
    result = doctest.testmod(mod, extraglobs=globs, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0


def test_huge_domain_is_never_enumerated():
    """10^40 rows: answers and variances touch only the queried clique. Per attribute they are accurate; over
    the whole row domain (mixing weight 2e-23) they are finite but meaningless, as the bound says."""
    dom = pj.Domain({f"x{i}": 10 for i in range(40)})
    released = pj.Dataset(np.random.default_rng(0).integers(0, 10, size=(500, 40)), dom)
    query = {"x3": Q.Identity(), "x17": Q.Prefix()}
    a = rr.answer(rr.Release.of(released, 40.0, True), query, return_variance=True)
    assert a.value.shape == (10, 10) and np.all(a.variance > 0)
    assert a.value.sum(axis=0)[-1] == pytest.approx(500.0, rel=1e-9)  # the prefix over all 10 values of x17: n
    whole = rr.Release.of(released, 40.0)
    assert whole.channel.keep[0] < 1e-22 and whole.channel.ratios[0] == pytest.approx(1e40 / math.expm1(40.0))
    b = rr.answer(whole, query, return_variance=True)
    assert np.all(np.isfinite(b.value)) and np.all(np.isfinite(b.variance))
    assert math.sqrt(rr.mse_bound(dom.size(), 40.0, 500)) > 1e10
