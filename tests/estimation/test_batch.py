"""pgmjax.estimation.batch: batched fits agree with sequential fits, reuse compiled programs, and reject bad batches early."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles

import pgmjax as pj
from pgmjax.compiler import jit
from pgmjax.estimation import batch
from pgmjax.estimation.batch import BatchedMeasurement, estimate_batch

B = 3
ITERS = 30
CLIQUES = [("a", "b"), ("b", "c"), ("c", "d")]
F64 = dict(dtype=jnp.float64, chunk=10)


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(7)
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 3})
    data = pj.Dataset(rng.integers(0, [3, 4, 2, 3], size=(400, 4)), dom)
    truth = data.marginals(CLIQUES)
    return dom, data, truth


def noisy(truth, sigmas, seed):
    """B measurement lists: member b has noise sigmas[b] on every clique (plus a Kronecker query on ("c", "d"))."""
    rng = np.random.default_rng(seed)
    kron = (np.ones((1, 2)), np.eye(3))
    out = []
    for s in sigmas:
        ms = [pj.Measurement(c, t + rng.normal(0, s, t.shape), stddev=s) for c, t in zip(CLIQUES, truth)]
        ms.append(pj.Measurement(("c", "d"), truth[2].sum(0) + rng.normal(0, s, 3), stddev=s, query=kron))
        out.append(ms)
    return out


def assert_matches_sequential(dom, members, fitted, method, **kw):
    models, report = fitted
    assert len(models) == len(members)
    for b, ms in enumerate(members):
        ref, ref_report = pj.estimate(dom, ms, method, iters=ITERS, **F64, **kw, report=True)
        assert report.loss[b] == pytest.approx(ref_report.loss, rel=1e-6)
        assert models.total[b] == pytest.approx(ref.total, rel=1e-12)
        # the same trials: mirror descent's line search backtracks exactly as alone
        assert report.member(b).history[-1]["oracle_calls"] == ref_report.history[-1]["oracle_calls"]
        for c in [*CLIQUES, ("d", "a")]:
            np.testing.assert_allclose(models.marginal(c)[b], ref.marginal(c), rtol=1e-6, atol=1e-6 * ref.total)


@pytest.mark.parametrize("method", ["mirror_descent", "dual_averaging"])
def test_members_equal_sequential_fits(setup, method):
    dom, _, truth = setup
    members = noisy(truth, [2.0, 5.0, 9.0], seed=1)  # per-member stddev
    models, models_report = estimate_batch(dom, members, method, iters=ITERS, **F64, report=True)
    assert models_report.loss.shape == (B,)
    assert_matches_sequential(dom, members, (models, models_report), method)


def test_batched_measurements_scalar_and_per_member_stddev(setup):
    """BatchedMeasurement (answers with a batch axis) with a scalar or a per-member stddev, a shared plain
    Measurement and per-member totals: the same fits as B lists of Measurement and as sequential fits."""
    dom, _, truth = setup
    members = noisy(truth, [4.0, 4.0, 4.0], seed=2)
    kron = members[0][3]  # shared by every member (the same plain Measurement)
    ys = [np.stack([ms[i].y for ms in members]) for i in range(3)]
    scalar = [BatchedMeasurement(c, y.reshape(B, *t.shape), stddev=4.0) for c, y, t in zip(CLIQUES, ys, truth)]
    got, got_report = estimate_batch(dom, [*scalar, kron], iters=ITERS, **F64, report=True)
    want, want_report = estimate_batch(dom, [[*ms[:3], kron] for ms in members], iters=ITERS, **F64, report=True)
    np.testing.assert_allclose(got_report.loss, want_report.loss, rtol=1e-12)
    np.testing.assert_allclose(got.marginal(("a", "d")), want.marginal(("a", "d")), rtol=1e-12)

    sig = np.array([1.0, 4.0, 16.0])
    totals = [400.0, 410.0, 390.0]
    per, per_report = estimate_batch(dom, [*(BatchedMeasurement(c, y, stddev=sig) for c, y in zip(CLIQUES, ys)), kron],
                                     iters=ITERS, total=totals, **F64, report=True)
    np.testing.assert_allclose(per.total, totals)
    for b in range(B):
        ms = [pj.Measurement(c, y[b], stddev=sig[b]) for c, y in zip(CLIQUES, ys)] + [kron]
        ref, ref_report = pj.estimate(dom, ms, iters=ITERS, total=totals[b], **F64, report=True)
        assert per_report.loss[b] == pytest.approx(ref_report.loss, rel=1e-6)
        np.testing.assert_allclose(per.marginal(("a", "b"))[b], ref.marginal(("a", "b")), rtol=1e-6)


def test_new_numbers_compile_nothing(setup):
    dom, _, truth = setup
    first, first_report = estimate_batch(dom, noisy(truth, [2.0, 3.0, 4.0], seed=3), iters=20, **F64, report=True)
    first.marginal(("a", "d"))
    first.member(1).marginal("a")
    with count_compiles() as counter:
        second, second_report = estimate_batch(dom, noisy(truth, [7.0, 1.0, 2.5], seed=4), iters=20, **F64, report=True)
        second.marginal(("a", "d"))
        second.member(1).marginal("a")
    assert counter.count == 0
    assert not np.allclose(first_report.loss, second_report.loss)


def test_a_first_batched_fit_compiles_a_few_programs():
    # A structure no other test fits (float32, its own domain): building the problem, the zero potentials
    # and the step sizes compiles nothing of its own (host arrays, transferred); the fit's programs are its
    # start, its chunk and the counters' reset (it was 17 programs, 12 of them zeros of each block's shape).
    dom = pj.Domain({"p": 3, "q": 5, "r": 2, "s": 4, "t": 6})
    rng = np.random.default_rng(0)
    cliques = [("p", "q"), ("q", "r"), ("r", "s"), ("s", "t"), ("p",)]
    members = [[pj.Measurement(c, rng.uniform(0, 50, dom.shape_of(c)), stddev=2.0) for c in cliques] for _ in range(3)]
    with count_compiles() as counter:
        estimate_batch(dom, members, iters=5)
    assert counter.count <= 4, counter.names


def test_model_shapes_and_members(setup):
    dom, _, truth = setup
    members = noisy(truth, [2.0, 5.0, 9.0], seed=5)
    models, models_report = estimate_batch(dom, members, iters=ITERS, **F64, report=True)
    assert len(models) == B and "a batch of 3 models" in repr(models)
    assert models.marginal(("b", "d")).shape == (B, 4, 3)
    assert models.marginal("c", given={"a": 1}).shape == (B, 2)
    m1, m2 = models.marginals([("a",), ("c", "a")])
    assert m1.shape == (B, 3) and m2.shape == (B, 2, 3)
    np.testing.assert_allclose(m1.sum(1), models.total, rtol=1e-9)
    prefix = models.answer({"b": pj.queries.Prefix(), "c": pj.queries.Value(1)})
    assert prefix.shape[0] == B
    cm = models.clique_marginals()
    assert set(cm) == set(models.cliques)
    for i in (0, 2, -1):
        single = models.member(i)
        assert isinstance(single, pj.GraphicalModel)
        single_report = models_report.member(i)
        assert single_report.loss == models_report.loss[i] and single.total == models.total[i]
        np.testing.assert_allclose(single.marginal(("b", "d")), models.marginal(("b", "d"))[i], rtol=1e-9)
        np.testing.assert_allclose(single.answer({"b": pj.queries.Prefix(), "c": pj.queries.Value(1)}), prefix[i], rtol=1e-9)
        for c in models.cliques:
            np.testing.assert_allclose(single.marginal(c), cm[c][i], rtol=1e-9)
        assert [h["iteration"] for h in single_report.history] == [10, 20, 30]
    # a member's model computed from its potentials alone (no cached marginals) is the same model
    fresh = pj.GraphicalModel(models.plan, models.member(1).theta, models.total[1])
    np.testing.assert_allclose(fresh.marginal(("a", "c")), models.marginal(("a", "c"))[1], rtol=1e-9)
    with pytest.raises(IndexError, match="out of range"):
        models.member(B)


def test_pure_pieces_vmap_by_hand(setup):
    """The module docstring's recipe: make_problem + stack_problems + batch_axes + jax.vmap of init/step."""
    dom, _, truth = setup
    members = noisy(truth, [2.0, 5.0, 9.0], seed=6)
    problem = batch.stack_problems([batch.make_problem(dom, ms, dtype=jnp.float64) for ms in members])
    assert problem.total.shape == (B,)
    est = pj.MirrorDescent()

    @jit
    def fit(problem, theta):
        def one(p, th):
            s, info = est.advance(p, *est.init(p, th, 1.0 / (p.lipschitz * p.total)), ITERS)
            return info.loss

        return jax.vmap(one, in_axes=(batch.batch_axes(problem), 0))(problem, theta)

    losses = np.asarray(fit(problem, batch.zeros(problem)))
    models, models_report = estimate_batch(dom, members, iters=ITERS, **F64, report=True)
    np.testing.assert_allclose(losses, models_report.loss, rtol=1e-9)


def test_bad_batches_fail_before_compiling(setup):
    dom, _, truth = setup
    t = truth[0]
    good = noisy(truth, [1.0, 2.0, 3.0], seed=0)
    with count_compiles() as counter:
        with pytest.raises(ValueError, match=r"measurement 1 on \('b', 'c'\) has 4 batch members but measurement 0 on \('a', 'b'\) has 3"):
            estimate_batch(dom, [BatchedMeasurement(CLIQUES[0], np.zeros((3, *t.shape))),
                                 BatchedMeasurement(CLIQUES[1], np.zeros((4, 4, 2)))])
        with pytest.raises(ValueError, match=r"stddev must be a scalar, one per batch member \(3,\)"):
            BatchedMeasurement(CLIQUES[0], np.zeros((3, *t.shape)), stddev=[1.0, 2.0])
        with pytest.raises(ValueError, match=r"batch member 1: .*stddev must be positive"):
            BatchedMeasurement(CLIQUES[0], np.zeros((3, *t.shape)), stddev=[1.0, -2.0, 1.0])
        with pytest.raises(ValueError, match="leading batch axis"):
            BatchedMeasurement("a", np.zeros(3))
        swapped = [good[0], good[1], [good[2][1], good[2][0], *good[2][2:]]]
        with pytest.raises(ValueError, match=r"measurement 0 of member 2 \(on \('b', 'c'\)\) is on another clique .* \(on \('a', 'b'\)\)"):
            estimate_batch(dom, swapped)
        with pytest.raises(ValueError, match="member 1 has 3 measurements but member 0 has 4"):
            estimate_batch(dom, [good[0], good[1][:3], good[2]])
        other_query = [good[0], good[1], good[2][:3] + [pj.Measurement(("c", "d"), good[2][3].y, query=(2 * np.ones((1, 2)), np.eye(3)))]]
        with pytest.raises(ValueError, match=r"measurement 3 of member 2 \(on \('c', 'd'\)\) has other query matrices"):
            estimate_batch(dom, other_query)
        with pytest.raises(ValueError, match=r"member 1: measurement 0 on \('a', 'b'\): y has 5 values"):
            estimate_batch(dom, [good[0], [pj.Measurement(CLIQUES[0], np.zeros(5))] + good[1][1:], good[2]])
        with pytest.raises(ValueError, match="no batch axis"):
            estimate_batch(dom, good[0])
        with pytest.raises(ValueError, match=r"total must be a scalar or one per batch member \(3,\)"):
            estimate_batch(dom, good, total=[400.0, 400.0])
        with pytest.raises(ValueError, match="member 1: total must be positive"):
            estimate_batch(dom, good, total=[400.0, -1.0, 400.0])
        with pytest.raises(ValueError, match="unknown method 'newton'"):
            estimate_batch(dom, good, "newton")
        with pytest.raises(ValueError, match="callable loss is not supported"):
            estimate_batch(dom, good, loss=lambda mu: 0.0)
        with pytest.raises(ValueError, match="dual_averaging needs the smooth 'l2' loss"):
            estimate_batch(dom, good, "dual_averaging", loss="l1")
        with pytest.raises(ValueError, match="iters must be a non-negative integer"):
            estimate_batch(dom, good, iters=-1)
        with pytest.raises(TypeError, match="got a mixture"):
            estimate_batch(dom, [good[0], good[1][0]])
    assert counter.count == 0


def test_l1_matches_sequential(setup):
    dom, _, truth = setup
    members = noisy(truth, [2.0, 5.0, 9.0], seed=8)
    l1 = estimate_batch(dom, members, loss="l1", iters=ITERS, **F64, report=True)
    assert_matches_sequential(dom, members, l1, "mirror_descent", loss="l1")


def test_groups_give_the_same_fits(setup):
    """Members vectorised in groups (the last one padded) follow exactly the all-at-once trajectories."""
    dom, _, truth = setup
    members = noisy(truth, [2.0, 5.0, 9.0], seed=9)
    whole, whole_report = estimate_batch(dom, members, iters=ITERS, group=None, **F64, report=True)
    grouped, grouped_report = estimate_batch(dom, members, iters=ITERS, group=2, **F64, report=True)
    np.testing.assert_allclose(grouped_report.loss, whole_report.loss, rtol=1e-12)
    np.testing.assert_allclose(grouped.marginal(("a", "d")), whole.marginal(("a", "d")), rtol=1e-10)
    np.testing.assert_array_equal(grouped_report.history[-1]["oracle_calls"], whole_report.history[-1]["oracle_calls"])
    with pytest.raises(ValueError, match="group must be a positive integer"):
        estimate_batch(dom, members, group=0)


def test_auto_group_aims_at_a_million_cells_per_group_on_cpu():
    from pgmjax.estimation.batch import CPU_GROUP_CELLS, auto_group
    from pgmjax.estimation.batch_problem import make_batch_problem

    if jax.default_backend() != "cpu":
        pytest.skip("auto_group groups members only on a CPU")
    dom = pj.Domain({"a": 100, "b": 100})  # one 10,000-cell table
    y = np.ones((100, 100))

    def group(batch):
        members = [[pj.Measurement(("a", "b"), y * (b + 1))] for b in range(batch)]
        return auto_group(make_batch_problem(dom, members))

    assert CPU_GROUP_CELLS == 2**20
    assert group(50) is None  # 50 members (500k cells): one group
    assert group(200) == 100  # 104 fit in 2**20 cells: two groups of 100, not 104 and 96


def test_a_batch_is_one_graphical_model_with_a_batch_axis():
    """estimate_batch returns a GraphicalModel whose numbers have a leading axis; host operations of one model
    refuse it with a message that says how to take a member; the former names (``pj.BatchedModel``, ``losses``,
    ``step_sizes``) are gone."""
    dom = pj.Domain({"a": 2, "b": 3})
    ys = np.array([[[10.0, 20, 30], [5, 5, 30]], [[12.0, 18, 30], [5, 5, 30]], [[9.0, 21, 30], [6, 4, 30]]])
    models, models_report = pj.estimate_batch(dom, [pj.BatchedMeasurement(("a", "b"), ys, stddev=1.0)], iters=100,
                                              report=True)
    assert isinstance(models, pj.GraphicalModel) and models.batch == len(models) == 3
    assert np.shape(models_report.loss) == (3,) and models_report.member(-1).loss == models_report.loss[2]
    assert models.clique_marginals()[("a", "b")].shape == (3, 2, 3)
    for call in (lambda: models.synthetic_data(5, jax.random.key(0)), models.summary, lambda: models.potentials):
        with pytest.raises(TypeError, match="a batch of 3 models; take one with model.member"):
            call()
    with pytest.raises(TypeError, match="only a batch of models"):
        len(models.member(0))
    assert not hasattr(pj, "BatchedModel") and not hasattr(models, "losses") and not hasattr(models, "step_sizes")
