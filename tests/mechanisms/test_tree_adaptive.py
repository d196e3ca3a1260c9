"""TreeAIM (pgmjax.mechanisms.tree_adaptive): its ledger is its guarantee, a key fixes the release, the cap holds,
and the exponential mechanism's ``admit`` draws from the admitted candidates only, in the mechanism's own law."""

import math

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms import registry
from pgmjax.mechanisms.steps import model_mb
from pgmjax.mechanisms import adaptive_iterative, tree_adaptive
from pgmjax.mechanisms import tree_aim_shares as shares
from pgmjax.mechanisms.tree_adaptive import tree_aim, tree_aim_budget, tree_share_for
from pgmjax.privacy import Accountant, cdp_rho
from pgmjax.privacy.primitives import exponential_probabilities

DOM = {"a": 3, "b": 4, "c": 2, "d": 5, "e": 3}
QUICK = dict(select_iters=20, round_iters=20, engine_iters=60)


def _table(n=2_000, seed=0):
    """Correlated columns (a noisy chain a -> b -> c ..., e tied to a), so the batches have errors to find."""
    rng = np.random.default_rng(seed)
    sizes = list(DOM.values())
    cols = [rng.integers(0, sizes[0], n)]
    for k in sizes[1:-1]:
        prev = cols[-1]
        cols.append(np.where(rng.random(n) < 0.7, prev % k, rng.integers(0, k, n)))
    cols.append(np.where(rng.random(n) < 0.8, cols[0] % sizes[-1], rng.integers(0, sizes[-1], n)))
    return pj.Dataset(np.stack(cols, 1), DOM)


@pytest.fixture(scope="module")
def data():
    return _table()


@pytest.fixture(scope="module")
def release(data):
    return tree_aim(data, 1.0, key=jax.random.key(0), **QUICK)


def test_the_ledger_spends_exactly_the_printed_guarantee(release):
    acc = release.accountant
    assert acc.budget == pytest.approx(cdp_rho(1.0, 1e-9), rel=1e-12)
    assert math.fsum(e.cost for e in release.ledger) == pytest.approx(acc.budget, rel=1e-9)
    assert acc.spent == pytest.approx(acc.budget, rel=1e-9)
    eps, delta = acc.epsilon_delta()
    assert eps == pytest.approx(1.0, rel=1e-6) and delta == 1e-9
    assert release.plan.total == pytest.approx(acc.budget, rel=1e-12)
    d = len(DOM)
    # d one-way Gaussians, d - 1 tree draws and measurements, then a draw and a measurement per batch pick
    kinds = [e.mechanism for e in release.ledger]
    assert kinds[:d] == ["gaussian"] * d and kinds[d:2 * d - 1] == ["exponential"] * (d - 1)
    assert kinds[2 * d - 1:3 * d - 2] == ["gaussian"] * (d - 1)
    picks = release.info.selected
    assert len(picks) >= 1 and kinds[3 * d - 2:].count("exponential") == len(picks)


def test_the_noise_scales_are_the_budget_s(release):
    b = release.info.budget
    assert b["one_way_rho"] + b["tree_select_rho"] + b["tree_rho"] + b["batch_rho"] == pytest.approx(b["rho"], rel=1e-12)
    stds = [e.scale for e in release.ledger if e.mechanism == "gaussian"]
    assert stds[:len(DOM)] == pytest.approx([b["one_way_std"]] * len(DOM), rel=1e-9)
    assert stds[len(DOM):2 * len(DOM) - 1] == pytest.approx([b["tree_std"]] * (len(DOM) - 1), rel=1e-9)
    # every batch pick but the last (which takes exactly the rest) at the pick's scale
    assert stds[2 * len(DOM) - 1:-1] == pytest.approx([b["pick_std"]] * (len(stds) - 2 * len(DOM)), rel=1e-9)


def test_same_key_same_release(data, release):
    again = tree_aim(data, 1.0, key=jax.random.key(0), **QUICK)
    np.testing.assert_array_equal(np.asarray(again.synthetic.records), np.asarray(release.synthetic.records))
    assert again.info.edges == release.info.edges and again.info.selected == release.info.selected
    other = tree_aim(data, 1.0, key=jax.random.key(1), **QUICK)
    assert not np.array_equal(np.asarray(other.synthetic.records), np.asarray(release.synthetic.records))


def test_the_batches_add_pairs_the_tree_lacks_and_the_model_holds_them(release):
    """Accuracy against MST and AIM is measured in bench/ (seeds, tables); here: the picks are pairs or one-ways of
    the workload, some beyond the tree, each inside a clique of the fitted model."""
    picks, edges = release.info.selected, release.info.edges
    assert set(picks) - set(edges)
    assert all(len(c) <= 2 for c in picks)
    cliques = [set(c) for c in release.info.compressed_model.cliques]
    assert all(any(set(c) <= k for k in cliques) for c in picks + edges)


def test_the_final_fit_is_accelerated_and_stops_once_converged_unless_told(data, monkeypatch):
    """The final fit (the last ``estimate``) runs pgmjax's mirror descent with FINAL_TOL from the last batch's model;
    a method given in ``fit_options`` is every fit's, with the tol given there (none here)."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return pj.estimate(*args, **kwargs)

    monkeypatch.setattr(tree_adaptive, "estimate", spy)
    tree_aim(data, 1.0, key=jax.random.key(0), synthetic=False, **QUICK)
    first, final = calls[0], calls[-1]
    assert final["method"] == "mirror_descent" and final["tol"] == tree_adaptive.FINAL_TOL
    assert final["iters"] == QUICK["engine_iters"] and final["warm_start"] is not None
    assert first["method"] is tree_adaptive.REFERENCE_MIRROR_DESCENT and "tol" not in first  # the tree's one-way fit
    batch_tols = [c["tol"] for c in calls[1:-1] if "tol" in c]  # the batches' fits: their own tolerance, not AIM's
    assert batch_tols and set(batch_tols) == {tree_adaptive.BATCH_TOL} != {adaptive_iterative.ROUND_TOL}
    calls.clear()
    tree_aim(data, 1.0, key=jax.random.key(0), synthetic=False, fit_options=pj.FitOptions(method="dual_averaging"),
             **QUICK)
    assert {c["method"] for c in calls} == {"dual_averaging"} and "tol" not in calls[-1]


def test_the_model_stays_within_the_cap(data):
    """A cap that holds the tree but little more: every pick is one that fits (or lies inside a clique)."""
    cap = 8.0 * 150 / 2**20  # 150 float64 cells: the widest tree and some triangles, not the whole domain's pairs
    res = tree_aim(data, 3.0, key=jax.random.key(2), max_model_mb=cap, compress=False, synthetic=False, **QUICK)
    assert model_mb(res.info.compressed_model) <= cap
    assert res.accountant.spent == pytest.approx(res.accountant.budget, rel=1e-9)


def test_the_cap_holds_over_the_declared_domain_the_model_is_released_on():
    """Compression merges 37 of each column's 40 declared values: a triangle of 64 compressed cells is 64,000 declared
    ones. The picks are checked over the declared domain, so the released model keeps within the cap (checked over the
    compressed one, this run's picks made a 4-attribute clique of 19.5 MB, refused at the release with the budget
    spent; on Loans, 1.2 GB)."""
    rng = np.random.default_rng(3)
    n = 3_000
    u = rng.integers(0, 3, n)  # four noisy copies of one hidden value: no tree holds their pairs, the picks want more
    cols = [np.where(rng.random(n) < 0.7, u, rng.integers(0, 3, n)) for _ in range(4)]
    data = pj.Dataset(np.stack(cols, 1), {"a": 40, "b": 40, "c": 40, "d": 40})
    cap = 8.0 * 10_000 / 2**20  # the widest tree (4,800 cells and 160 one-way) fits; a triangle (64,000) does not
    res = tree_aim(data, 3.0, key=jax.random.key(1), max_model_mb=cap, synthetic=False, **QUICK)
    assert dict(res.info.compressed_domain) != dict(data.domain)  # compressed
    assert model_mb(res.model) <= cap and res.info.model_mb == model_mb(res.model)
    assert res.accountant.spent == pytest.approx(res.accountant.budget, rel=1e-9)


def test_the_default_cap_is_twice_the_largest_tree_within_its_bounds(monkeypatch):
    """Without ``max_model_mb`` the cap is twice the largest model MST may select (one-way tables and the widest
    spanning tree, over the declared domain), 4 MB at least and AIM's 80 at most; the run holds it."""
    from pgmjax.mechanisms.spanning_tree import largest_tree

    for sizes, expected in [((2, 3, 4), 4.0), ((1000, 1000, 2), None), ((4000, 4000, 4000), 80.0)]:
        dom = pj.Domain({f"x{i}": k for i, k in enumerate(sizes)})
        cells = sum(dom.size(c) for c in [(a,) for a in dom.attributes] + largest_tree(dom))
        twice = 2 * 8.0 * cells / 2**20
        if expected is None:  # between the bounds: twice the tree itself
            assert 4.0 < twice < 80.0
        assert shares.default_model_cap(dom) == pytest.approx(twice if expected is None else expected)
    caps = []
    real = tree_adaptive.default_model_cap
    monkeypatch.setattr(tree_adaptive, "default_model_cap", lambda dom: caps.append(real(dom)) or caps[-1])
    res = tree_aim(_table(), 3.0, key=jax.random.key(1), synthetic=False, **QUICK)
    assert caps == [4.0] and res.info.model_mb <= 4.0


def test_default_batches_hold_about_d_over_2_picks_and_at_most_256_attributes_of_refits():
    """2 to 8 batches; a batch at most about ``d / 2`` picks where the refits allow, and the batches' refits at most
    256 attributes' worth (each compiles a program of about ``d`` cliques) where that allows more than 2."""
    for d in range(2, 300):
        for picks in sorted({1, d // 2 + 1, d, 2 * d, 4 * d}):
            b = shares.default_batches(picks, d)
            assert shares.BATCHES <= b <= shares.MAX_BATCHES
            assert b * d <= max(shares.REFIT_ATTRIBUTES, shares.BATCHES * d)
            if b < min(shares.MAX_BATCHES, max(shares.BATCHES, shares.REFIT_ATTRIBUTES // d)):  # no cap binds
                assert math.ceil(picks / b) <= math.ceil(d / 2)
    assert shares.default_batches(64, 16) == 8 and shares.default_batches(225, 110) == 2  # NLTCS's and Stroke's


def test_a_cap_below_the_widest_tree_is_refused_before_any_spending(data, monkeypatch):
    """Refused in the cap's own unit (the widest tree's float64 tables against ``max_model_mb``), not only by the peak
    of its fit: the limit a cap stands for also holds the size-class programs' smallest vectors."""
    monkeypatch.setattr(pj.Accountant, "measure_many", lambda *a, **k: pytest.fail("measured"))
    with pytest.raises(pj.ModelTooLarge, match=r"tree_aim: .*largest model MST may select.*\(max_model_mb="):
        tree_aim(data, 1.0, key=jax.random.key(0), max_model_mb=8.0 * 20 / 2**20, **QUICK)


@pytest.mark.parametrize("mechanism", ["tree_aim", "mst"])
def test_a_small_cap_bounds_the_model_not_the_synthetic_records(mechanism):
    """The cap is in force for the fits (``size_limit.limited``); the records are drawn under the limit outside it.
    8,000 records of 5 attributes hold about 960 KB at once, above what a 0.01 MB cap stands for (about 630 KB):
    drawn under the cap they were refused after the whole budget was spent."""
    data = _table(n=8_000)
    assert 8_000 * 5 * 24 > pj.estimation.memory.capped_fit_bytes(0.01)
    run = tree_aim if mechanism == "tree_aim" else pj.mechanisms.mst
    res = run(data, 1.0, key=jax.random.key(0), max_model_mb=0.01, select_iters=20, engine_iters=60,
              **({"round_iters": 20} if mechanism == "tree_aim" else {}))
    assert len(res.synthetic) == round(res.model.total) and model_mb(res.model) <= 0.01
    with pj.graph.size_limit.limited(500_000):  # a limit the user set still holds for the records
        with pytest.raises(pj.graph.size_limit.ModelTooLarge, match="synthetic_data"):
            run(data, 1.0, key=jax.random.key(0), max_model_mb=0.01, select_iters=20, engine_iters=60,
                **({"round_iters": 20} if mechanism == "tree_aim" else {}))


def test_a_quick_run_through_the_registry_and_its_report_keys(data):
    res = registry.run("tree_aim", data, 0.5, key=jax.random.key(4), **QUICK, batches=1, picks=2)
    assert res.mechanism == "tree_aim" and len(res.info.log) == 1 and len(res.info.selected) <= 2
    assert isinstance(res.info, registry.get("tree_aim").info) and res.info.budget["batches"] == 1


@pytest.mark.parametrize("bad, match", [
    (dict(batches=0), "batches"), (dict(picks=0), "picks"), (dict(round_iters=0), "round_iters"),
    (dict(max_model_mb=0.0), "max_model_mb"), (dict(workload=[("a", "zz")]), "zz"),
    (dict(tree_share=0.5), "tree_share"), (dict(tree_share=0.0), "tree_share"),
    (dict(one_way_share=0.5), "one_way_share"), (dict(one_way_share=-1), "one_way_share"),
])
def test_bad_options_are_refused_before_any_spending(data, bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        tree_aim(data, 1.0, key=jax.random.key(0), **{**QUICK, **bad})


def test_one_attribute_is_refused(data):
    with pytest.raises(ValueError, match="at least 2 attributes"):
        tree_aim(data.project(("a",)), 1.0, key=jax.random.key(0))


# ------------------------------------------------------------------ Accountant.exponential(admit=)
def test_admit_draws_in_the_mechanism_s_law_on_the_admitted_set():
    q = np.array([5.0, 3.0, 0.0, 4.0, 1.0])
    admitted = {1, 2, 4}  # the best candidate (0) and the second best (3) refused
    want = exponential_probabilities(np.where([i in admitted for i in range(5)], q, -np.inf), 1.0, 1.0)
    acc = Accountant(epsilon=1e9)
    n = 4_000
    draws = [acc.exponential(jax.random.key(i), q, 1.0, epsilon=1.0, admit=lambda j: j in admitted) for i in range(n)]
    counts = np.bincount(draws, minlength=5) / n
    assert counts[0] == counts[3] == 0
    assert np.all(np.abs(counts - want) <= 4 * np.sqrt(want * (1 - want) / n) + 1e-12), (counts, want)
    assert acc.spent == pytest.approx(n * 1.0)  # one draw's cost each, whatever was refused


def test_admit_refusing_most_candidates_keeps_the_law_on_the_rest():
    """Thirty of forty candidates refused, the best among them: the draws run over several rounds of the rejection,
    and their law is still the mechanism's on the ten admitted."""
    q = np.linspace(0.0, 6.0, 40)
    admitted = set(range(0, 40, 4))
    want = exponential_probabilities(np.where([i in admitted for i in range(40)], q, -np.inf), 1.0, 1.0)
    acc = Accountant(epsilon=1e9)
    n = 3_000
    draws = [acc.exponential(jax.random.key(i), q, 1.0, epsilon=1.0, admit=lambda j: j in admitted) for i in range(n)]
    counts = np.bincount(draws, minlength=40) / n
    assert set(np.flatnonzero(counts)) <= admitted
    assert np.all(np.abs(counts - want) <= 4 * np.sqrt(want * (1 - want) / n) + 1e-12), (counts, want)


def test_admit_samples_a_few_times_for_hundreds_of_refusals(monkeypatch):
    """500 equally good candidates refused before one of the rest is admitted: the sampler runs in rounds that grow
    with what the last one refused (a dozen calls, not 500), and no candidate is asked about twice."""
    from pgmjax.privacy import discrete_noise

    calls = []
    sampler = discrete_noise.exponential_choice
    monkeypatch.setattr(discrete_noise, "exponential_choice", lambda *a: calls.append(a[2]) or sampler(*a))
    q = np.r_[np.full(500, 30.0), np.zeros(500)]
    asked = []
    j = Accountant(epsilon=1e9).exponential(jax.random.key(0), q, 1.0, epsilon=1.0,
                                            admit=lambda i: asked.append(i) or i >= 500)
    assert j >= 500 and len(asked) == len(set(asked)) and len([i for i in asked if i < 500]) >= 400
    assert len(calls) <= 20 and calls[0] == 1, calls


def test_admit_asks_only_about_the_drawn_candidates():
    asked = []
    acc = Accountant(epsilon=10.0)
    j = acc.exponential(jax.random.key(0), np.array([0.0, 0.0, 1e6, 0.0]), 1.0, epsilon=1.0,
                        admit=lambda i: asked.append(i) or True)
    assert j == 2 and asked == [2]


def test_admit_after_refusing_a_dominant_candidate_draws_among_the_rest():
    """The rest lie 500 nats below the refused best: their draw starts from the best one left (before, it proposed
    forever, accepting each with probability exp(-500))."""
    acc = Accountant(epsilon=1e9)
    q = np.array([1000.0, 0.0, 2.0, 1.0])
    draws = [acc.exponential(jax.random.key(i), q, 1.0, epsilon=1.0, admit=lambda j: j != 0) for i in range(200)]
    counts = np.bincount(draws, minlength=4)
    assert counts[0] == 0 and counts[2] > counts[3] > counts[1] > 0  # exp(1) : exp(0.5) : exp(0)


def test_admit_refusing_all_spends_nothing_and_says_so():
    acc = Accountant(epsilon=1.0)
    with pytest.raises(ValueError, match="admit refused every candidate"):
        acc.exponential(jax.random.key(0), [1.0, 2.0], 1.0, epsilon=0.5, admit=lambda j: False)
    assert acc.spent == 0 and not acc.ledger
    with pytest.raises(ValueError, match="num="):
        acc.exponential(jax.random.key(0), [1.0, 2.0], 1.0, epsilon=0.5, num=2, admit=lambda j: True)


def test_the_size_check_is_the_released_model_s_after_compression():
    """A 4-cycle over two wide attributes that compress to 2 values: the fit over the compressed domain adds the
    chord between them, and the release keeps that junction tree over the original sizes (20x the cells a
    triangulation for the original sizes would take). The picks' check must count the release (once, on Stroke,
    a model of 2.6 GB passed a check of 80 MB and was refused only after the whole budget was spent)."""
    from pgmjax.mechanisms.domain_compression import decompress_model
    from pgmjax.mechanisms.steps import hypothetical_model_size, released_model_size

    dom, cdom = pj.Domain({"a": 200, "b": 10, "c": 200, "d": 10}), pj.Domain({"a": 2, "b": 10, "c": 2, "d": 10})
    mapping = {"a": np.arange(200) % 2, "c": np.arange(200) // 100}
    cycle = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    rng = np.random.default_rng(0)
    ms = [pj.Measurement(c, rng.uniform(1, 5, cdom.size(c)).reshape(cdom.project(c).shape)) for c in cycle]
    released = decompress_model(pj.estimate(cdom, ms, iters=5), mapping, dom)
    assert model_mb(released) == pytest.approx(released_model_size(cdom, dom, cycle))
    assert released_model_size(cdom, dom, cycle) >= 20 * hypothetical_model_size(dom, cycle)


@pytest.mark.parametrize("seed", range(8))
def test_the_grown_size_check_is_the_whole_triangulation_s(seed):
    """The picks' size check grows the model's junction tree by the drawn candidate (only the part between its
    attributes is triangulated again, over the compressed sizes) and counts it over the declared sizes: the same
    number, for every candidate, as triangulating the model and the candidate whole (released_model_size)."""
    from pgmjax.graph.growth import Growth
    from pgmjax.graph.junction import triangulated_cliques
    from pgmjax.mechanisms.steps import grown_released_size, released_model_size

    rng = np.random.default_rng(seed)
    names = [f"x{i}" for i in range(9)]
    sizes = rng.integers(2, 40, 9)
    dom = pj.Domain(dict(zip(names, (int(k) for k in sizes))))
    cdom = pj.Domain(dict(zip(names, (int(k) if rng.random() < 0.5 else 2 for k in sizes))))  # some compressed
    pairs = [tuple(sorted(rng.choice(9, 2, replace=False))) for _ in range(8)]
    base = triangulated_cliques(cdom, [(names[i], names[j]) for i, j in pairs])  # a fitted model's: chordal
    growth = Growth(cdom, base)
    for i, j in {tuple(sorted(rng.choice(9, 2, replace=False))) for _ in range(15)}:
        c = (names[i], names[j])
        assert grown_released_size(growth, dom, c) == pytest.approx(released_model_size(cdom, dom, list(base) + [c]),
                                                                    rel=1e-12), c


def test_the_final_fit_expects_as_many_iterations_as_the_last_batch_took_where_it_converged(data, monkeypatch):
    """``program="auto"`` weighs the iterations a fit is expected to run: the final fit is told the last batch's count
    where that fit stopped by its tolerance, and nothing (its whole ``iters``) where it ran out of ``round_iters``."""
    calls = []

    def spy(*args, **kwargs):
        fitted = pj.estimate(*args, **kwargs)
        calls.append((kwargs, fitted.report.iterations))
        return fitted

    monkeypatch.setattr(tree_adaptive, "estimate", spy)
    tree_aim(data, 1.0, key=jax.random.key(0), synthetic=False, select_iters=20, round_iters=5000, engine_iters=60)
    (_, done), (final, _) = calls[-2], calls[-1]
    assert 0 < done < 5000 and final["expected_iters"] == done
    calls.clear()
    tree_aim(data, 1.0, key=jax.random.key(0), synthetic=False, select_iters=20, round_iters=3, engine_iters=60)
    (_, done), (final, _) = calls[-2], calls[-1]
    assert done == 3 and "expected_iters" not in final


def test_the_fits_take_the_cliques_the_size_checks_grew_and_let_the_program_be_chosen(data, monkeypatch):
    """Each fit after the first batch is given the structure the batch's size checks grew (so the model fitted is
    the one checked, its released size within the cap), and the batches' fits leave the program to
    ``program="auto"`` unless the caller names one."""
    calls = []
    real = tree_adaptive.estimate
    monkeypatch.setattr(tree_adaptive, "estimate", lambda *a, **k: calls.append(k) or real(*a, **k))
    cap = 8.0 * 400 / 2**20
    res = tree_aim(data, 3.0, key=jax.random.key(2), max_model_mb=cap, synthetic=False, batches=2, picks=3, **QUICK)
    batch_fits, final_fit = calls[1:3], calls[3]
    assert all("program" not in k for k in batch_fits) and batch_fits[0]["cliques"] == ()
    assert set(res.info.compressed_model.cliques) == set(final_fit["cliques"])  # fitted as grown: nothing more
    assert res.info.model_mb <= cap
    calls.clear()
    tree_aim(data, 3.0, key=jax.random.key(2), synthetic=False, batches=2, picks=3,
             fit_options=pj.FitOptions(program="size_class"), **QUICK)
    assert [k["program"] for k in calls[1:3]] == ["size_class", "size_class"]


def test_the_tree_share_gives_a_median_pair_the_target_noise_within_its_bounds():
    """Brute force on the formula: at the returned share a median pair's expected TVD noise is TREE_TVD, unless a
    bound holds it; more records (or smaller pairs) never take more."""
    rho, d = cdp_rho(1.0, 1e-9), 16

    def noise(share, total, cells):
        sigma = math.sqrt((d - 1) / (2.0 * share * rho))
        return math.sqrt(2.0 / math.pi) * sigma * cells / (2.0 * total)

    got = [tree_share_for(rho, d, total, 4) for total in (500, 2_000, 3_500, 4_000, 200_000)]
    assert got == sorted(got, reverse=True)
    assert got[0] == shares.TREE_SHARE and got[-1] == shares.TREE_SHARE_MIN
    inner = [(t, s) for t, s in zip((500, 2_000, 3_500, 4_000, 200_000), got)
             if shares.TREE_SHARE_MIN < s < shares.TREE_SHARE]
    assert inner and all(noise(s, t, 4) == pytest.approx(shares.TREE_TVD, rel=1e-12) for t, s in inner)


def _binary_table(n=20_000, seed=5):
    """Six binary copies of one hidden bit (80% each): many records, pairs of 4 cells, every pair informative."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 2, n)
    cols = [np.where(rng.random(n) < 0.8, u, rng.integers(0, 2, n)) for _ in range(6)]
    return pj.Dataset(np.stack(cols, 1), {k: 2 for k in "abcdef"})


def test_a_table_of_many_records_and_small_pairs_gives_the_tree_less_and_the_batches_more():
    """20,000 records of binary columns: the tree's pairs are measured well at the least share; the ledger's tree
    stds are that share's and the batches get the rest (the whole budget is still spent), in more batches. A share
    and a batch count given by name are kept."""
    data = _binary_table()
    res = tree_aim(data, 3.0, key=jax.random.key(0), synthetic=False, **QUICK)
    b = res.info.budget
    assert b["tree_share"] < shares.TREE_SHARE and b["tree_rho"] == pytest.approx(b["tree_share"] * b["rho"])
    assert b["batch_rho"] > tree_aim_budget(3.0, 1e-9, attributes=6)["batch_rho"]
    stds = [e.scale for e in res.ledger if e.mechanism == "gaussian"]
    assert stds[6:11] == pytest.approx([b["tree_std"]] * 5, rel=1e-9)
    assert res.accountant.spent == pytest.approx(res.accountant.budget, rel=1e-9)
    # many cheap picks: more batches (refits), each of at most d / 2 picks
    assert b["batches"] == len(res.info.log) > shares.BATCHES and b["picks"] <= 3
    given = tree_aim(data, 3.0, key=jax.random.key(0), synthetic=False, tree_share=0.35, batches=2, **QUICK)
    assert given.info.budget["tree_share"] == 0.35 and len(given.info.log) == 2


def test_the_tree_keeps_its_share_where_the_batches_measure_no_more_than_d_marginals(monkeypatch):
    """The same binary table, but the batches' budget measuring only ``d`` marginals well: the tree's share stays
    TREE_SHARE (a smaller one would only make the tree noisier and the same picks sharper)."""
    data = _binary_table()
    monkeypatch.setattr(tree_adaptive, "default_pick_count", lambda batch_rho, total, sizes, attributes: attributes)
    res = tree_aim(data, 3.0, key=jax.random.key(0), synthetic=False, **QUICK)
    assert res.info.budget["tree_share"] == shares.TREE_SHARE and res.info.budget["batches"] == 2


def test_the_one_way_share_grows_with_the_cells_in_many_valued_attributes():
    """From the declared domain alone: a fifth where no attribute has over MANY_VALUES values, a third where all
    cells lie in such attributes, in proportion between; the ledger's one-way stds are the share's."""
    few = pj.Domain({"a": 2, "b": 3, "c": shares.MANY_VALUES})
    many = pj.Domain({"a": 60, "b": 80})
    mixed = pj.Domain({"a": 2, "b": 3, "c": 95})
    assert shares.one_way_share_for(few) == shares.ONE_WAY_SHARE
    assert shares.one_way_share_for(many) == pytest.approx(shares.ONE_WAY_SHARE_MAX)
    assert shares.one_way_share_for(mixed) == pytest.approx(
        shares.ONE_WAY_SHARE + (shares.ONE_WAY_SHARE_MAX - shares.ONE_WAY_SHARE) * 95 / 100)
    rng = np.random.default_rng(2)
    data = pj.Dataset(rng.integers(0, [2, 3, 95], (3_000, 3)), mixed)
    res = tree_aim(data, 1.0, key=jax.random.key(0), synthetic=False, **QUICK)
    b = res.info.budget
    assert b["one_way_share"] == pytest.approx(shares.one_way_share_for(mixed))
    assert b["one_way_std"] == pytest.approx(math.sqrt(3 / (2.0 * b["one_way_share"] * b["rho"])))
    stds = [e.scale for e in res.ledger if e.mechanism == "gaussian"]
    assert stds[:3] == pytest.approx([b["one_way_std"]] * 3, rel=1e-9)
    assert res.plan.steps[0].cost == pytest.approx(b["one_way_rho"], rel=1e-12)
    assert res.accountant.spent == pytest.approx(res.accountant.budget, rel=1e-9)
