"""Public data (pgmjax.queries.public.PublicData): checked at construction, scaled to the private total, added to
estimate's loss at no cost; AIM's joint selection against a hand-computed case, its ledger and its release."""

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.mechanisms import aim, mst
from pgmjax.mechanisms.public_selection import JointSelection
from pgmjax.queries.public import PublicData

DOM = pj.Domain({"a": 3, "b": 2, "c": 2})


def table(n, seed=0, strength=0.8):
    """Records where b follows a and c follows b with probability ``strength``."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < strength, a % 2, rng.integers(0, 2, n))
    c = np.where(rng.random(n) < strength, b, rng.integers(0, 2, n))
    return pj.Dataset(np.stack([a, b, c], 1), DOM)


@pytest.mark.parametrize("kwargs,message", [
    (dict(), "one of them"),
    (dict(data=table(10), marginals={("a",): [1, 2, 3]}), "one of them"),
    (dict(marginals={("a",): [1, 2, 3]}), "needs domain="),
    (dict(data=table(10), stddev="exact"), "'sampling' or a positive number"),
    (dict(data=table(10), stddev=0.0), "'sampling' or a positive number"),
    (dict(marginals={("a", "b"): np.ones((2, 3))}, domain=DOM), r"shape \(3, 2\)"),
    (dict(marginals={("a",): [1, 2, 3], ("b",): [1, 1]}, domain=DOM), "one positive number of records"),
    (dict(marginals={("a",): [1, 2, 3]}, domain=DOM, cliques=[("b",)]), r"no public marginal holds \('b',\)"),
    (dict(data=table(10), cliques=[("a", "z")]), "attribute 'z' is not in the domain"),
])
def test_bad_public_data_is_refused_naming_the_problem(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        PublicData(**kwargs)


def test_public_marginals_are_scaled_to_the_private_total_with_their_sampling_error():
    public = PublicData(marginals={("a", "b"): [[10, 30], [20, 20], [0, 20]]}, domain=DOM)
    m = public.measurement(("b", "a"), total=1000.0)  # read by summing and transposing the given marginal
    np.testing.assert_allclose(m.y, np.array([[10, 20, 0], [30, 20, 20]]).ravel() * 10)
    share = np.maximum(np.array([10, 20, 0, 30, 20, 20]) / 100, 1 / 100)
    np.testing.assert_allclose(m.row_stddev(), 1000 * np.sqrt(share * (1 - share) / 100))


def test_estimate_takes_public_marginals_at_the_private_total():
    rng = np.random.default_rng(1)
    private = table(20_000, seed=1)
    ms = [pj.Measurement(c, private.marginal(c).ravel() + rng.normal(0, 50, DOM.size(c)), 50.0)
          for c in [("a",), ("b",), ("c",)]]
    alone = pj.estimate(DOM, ms, iters=500)
    public = PublicData(table(5000, seed=2), cliques=[("a", "b"), ("b", "c")])
    both, both_report = pj.estimate(DOM, ms, iters=500, public=public, report=True)
    assert both_report.info["public"] == [("a", "b"), ("b", "c")]
    assert both.total == pytest.approx(alone.total)  # the total is the private measurements' alone
    truth = private.marginal(("a", "b"))
    err = lambda model: np.abs(model.marginal(("a", "b")) - truth).sum() / 20_000  # noqa: E731
    assert err(both) < err(alone) / 3  # the public pairs carry the dependence no private measurement saw
    with pytest.raises(ValueError, match="is not the model's"):
        pj.estimate(pj.Domain({"a": 3, "b": 2, "c": 3}), [pj.Measurement(("a",), np.ones(3))], iters=10,
                    public=public)


def test_joint_selection_scores_the_public_options_as_computed_by_hand():
    private, public = table(1000, seed=3), table(200, seed=4, strength=0.2)
    cands = [("a", "b"), ("b", "c"), ("a",)]
    joint = JointSelection(PublicData(public), cands, "test")
    truth = private.marginals(cands)
    est = [np.full(t.shape, 1000 / t.size) for t in truth]  # a uniform model
    errors = np.array([np.abs(t - e).sum() for t, e in zip(truth, est)])
    weight = np.array([1.0, 2.0, 0.5])
    by_hand = [w * (err - np.abs(t - public.marginal(c) * 1000 / 200).sum())
               for w, err, t, c in zip(weight, errors, truth, cands)]
    got = joint.qualities(truth, errors, 1000.0, weight, np.array([True, True, False]))
    np.testing.assert_allclose(got[:2], by_hand[:2])
    assert got[2] == -np.inf  # not allowed by the size limit
    joint.taken.append(("a", "b"))
    assert joint.offered(np.ones(3, bool)).tolist() == [False, True, True]  # taken once, not offered again


@pytest.mark.slow
def test_aim_takes_a_public_marginal_equal_to_the_private_one_and_records_it_at_no_cost():
    private = table(5000, seed=5)
    public = PublicData(private)  # the private table itself: every public score is the model's whole error
    run = lambda: aim(private, 20.0, key=jax.random.key(0), rounds=6, max_model_mb=1.0, engine_iters=100,  # noqa: E731
                      synthetic=False, public=public)
    res = run()
    first = res.info.log[0]
    assert first["source"] == "public"
    public_entries = [e for e in res.accountant.ledger if e.mechanism == "public"]
    assert [e.target for e in public_entries] == res.info.public and all(e.cost == 0 for e in public_entries)
    assert res.accountant.spent == pytest.approx(res.accountant.budget, rel=1e-12)
    assert res.info.log[-1]["source"] == "private"  # the last round spends the rest
    again = run()
    assert again.info.log == res.info.log
    with pytest.raises(ValueError, match="checkpoint= does not keep a run with public data"):
        aim(private, 1.0, key=jax.random.key(0), public=public, checkpoint="ckpt-never-made")


@pytest.mark.slow
def test_the_documentation_pages_example_runs_as_written():
    import pathlib
    import re

    page = (pathlib.Path(__file__).parents[2] / "docs" / "public-data.md").read_text()
    namespace: dict = {}
    exec(re.findall(r"```python\n(.*?)```", page, re.S)[0], namespace)  # noqa: S102 - the project's own page
    # the page's fit reports the public cliques it took (pj.estimate(..., report=True)), whatever it names the report
    [report] = [v for v in namespace.values() if isinstance(v, pj.FitReport)]
    assert report.info["public"] == [("a", "b"), ("b", "c")]
    result = namespace["result"]
    assert [e.target for e in result.ledger if e.mechanism == "public"] == result.info.public


@pytest.mark.slow
def test_mst_fits_with_public_marginals_on_its_compressed_domain_and_records_them():
    """Public marginals (a table, or only some marginals) recoded to MST's compressed domain join both fits."""
    rng = np.random.default_rng(0)
    dom = pj.Domain({"a": 6, "b": 3, "c": 4})

    def draw(n):
        a = rng.integers(0, 6, n)
        a[rng.random(n) < 0.5] = 0  # rare values of a: compressed
        b = np.where(rng.random(n) < 0.8, a % 3, rng.integers(0, 3, n))
        c = np.where(rng.random(n) < 0.7, b, rng.integers(0, 4, n))
        return pj.Dataset(np.stack([a, b, c], 1), dom)

    private, sample = draw(3000), draw(3000)
    pairs = [("a", "b"), ("b", "c"), ("a", "c")]
    err = lambda r: np.mean([np.abs(r.model.marginal(c) - private.marginal(c)).sum() / 3000 for c in pairs])  # noqa: E731
    run = lambda public: mst(private, 0.1, key=jax.random.key(1), engine_iters=500, select_iters=200,  # noqa: E731
                             public=public)
    alone = run(None)
    assert alone.info.mapping  # compressed: the public data is recoded to fit
    table = run(pj.PublicData(sample, cliques=pairs, stddev=20.0))
    marginals = run(pj.PublicData(marginals={c: sample.marginal(c) for c in pairs[:2]}, domain=dom, stddev=20.0))
    for res, taken in ((table, pairs), (marginals, pairs[:2])):
        assert [e.target for e in res.ledger if e.mechanism == "public"] == taken
        assert res.accountant.spent == pytest.approx(res.accountant.budget, rel=1e-12)
        assert err(res) < err(alone)


def test_mwem_fits_with_public_marginals_records_them_and_scores_round_one_against_them():
    """MWEM's +PGM fits hold the public marginals (free, in the ledger); with N public, round 1 scores the candidates
    against the public marginals scaled to N, so a public table equal to the private one leaves nothing to choose
    by error: every quality is ``-n_C``; the MW arm replays the private measurements only."""
    from pgmjax.mechanisms import mwem
    from pgmjax.mechanisms.multiplicative_weights.rounds import _estimates

    private = table(2000, seed=3)
    public = PublicData(private, stddev=10.0)
    pairs = [("a", "b"), ("b", "c"), ("a", "c")]
    est = _estimates(DOM, None, pairs, 2000.0, public)
    for c in pairs:  # the public table is the private one: round 1's estimate is exact
        np.testing.assert_allclose(est[c], private.marginal(c))
    assert _estimates(DOM, None, pairs, None, public)[pairs[0]].sum() == 0  # N private: no scale for them

    res = mwem(private, 1.0, key=jax.random.key(0), workload=pairs, rounds=3, engine_iters=100, mw_iters=20,
               bounded=True, synthetic=False, public=public)
    assert res.info.public and set(res.info.public) <= set(pairs)
    public_entries = [e for e in res.accountant.ledger if e.mechanism == "public"]
    assert [e.target for e in public_entries] == res.info.public and all(e.cost == 0 for e in public_entries)
    assert res.accountant.spent == pytest.approx(res.accountant.budget, rel=1e-12)
    assert len(res.measurements) == 3 + len(res.info.public)  # the private transcript, then the public marginals
    assert all(any(set(c) <= set(m) for m in res.model.cliques) for c in res.info.public)
    with pytest.raises(ValueError, match="checkpoint= does not keep a run with public data"):
        mwem(private, 1.0, key=jax.random.key(0), public=public, checkpoint="ckpt-never-made")
    with pytest.raises(ValueError, match="the public data's domain"):
        mwem(private, 1.0, key=jax.random.key(0), public=PublicData(table(10).project(["a", "b"])))
