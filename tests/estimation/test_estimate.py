"""estimate(): API, input validation before compilation, no recompilation, warm start, custom losses."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_compiles

import pgmjax as pj
from pgmjax.estimation import losses


@pytest.fixture
def small(rng):
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 3})
    X = rng.integers(0, [3, 4, 2, 3], size=(400, 4))
    data = pj.Dataset(X, dom)
    cliques = [("a", "b"), ("b", "c"), ("c", "d")]
    return dom, data, cliques


def test_issue_example_api(small):
    dom, data, cliques = small
    y = data.marginal(("a", "b"))
    m1 = pj.Measurement(("a", "b"), y + 0.5, stddev=2.0)  # shaped y
    m2 = pj.Measurement(("b", "c"), data.marginal(("b", "c")).ravel(), stddev=2.0)  # flat y
    Q = np.random.default_rng(0).normal(size=(5, 6))
    m3 = pj.Measurement(("c", "d"), Q @ data.marginal(("c", "d")).ravel(), stddev=1.0, query=Q)
    kron = (np.ones((1, 2)), np.eye(3))
    m4 = pj.Measurement(("c", "d"), data.marginal("d"), stddev=1.0, query=kron)
    model = pj.estimate(dom, [m1, m2, m3, m4], method="mirror_descent", iters=200)
    out = model.marginal(("d", "a"))
    assert out.shape == (3, 3)
    assert out.sum() == pytest.approx(model.total, rel=1e-5)
    assert model.total == pytest.approx(400, rel=0.05)
    assert set(model.potentials) == set(model.cliques)
    for c in model.cliques:
        assert model.potentials[c].shape == dom.shape_of(c)
        # host arrays, read-only (a shared cache), equal to the device blocks sliced clique by clique
        assert isinstance(model.potentials[c], np.ndarray) and not model.potentials[c].flags.writeable
        np.testing.assert_array_equal(model.potentials[c], np.asarray(model.plan.table(model.theta, model.plan.cliques.index(c))))


def test_estimated_marginals_beat_noise(small):
    dom, data, cliques = small
    ms = pj.noisy_marginals(data, cliques, 10.0, jax.random.key(3))
    ms += pj.noisy_marginals(data, [("a",), ("b",), ("c",), ("d",)], 10.0, jax.random.key(4))
    model = pj.estimate(dom, ms, iters=300)
    err_model = sum(np.abs(model.marginal(m.clique).ravel() - data.marginal(m.clique).ravel()).sum() for m in ms)
    err_noisy = sum(np.abs(m.y - data.marginal(m.clique).ravel()).sum() for m in ms)
    assert err_model < 0.8 * err_noisy


@pytest.mark.parametrize("method", ["mirror_descent", "dual_averaging", "lbfgs"])
def test_no_recompilation_on_new_numbers(small, method):
    """New noisy values and new stddevs on the same structure reuse every compiled program.

    L-BFGS compiles its mirror-descent finish only when a fit first needs it (once it stalls): the first fit
    here runs long enough to use it.
    """
    from pgmjax import programs

    dom, data, cliques = small
    # Earlier tests' programs freed first: the engine frees all of them before a fit once more than
    # programs.MAX_LIVE_PROGRAMS are live (a bound, not a recompilation of the same structure).
    programs.release_compiled()
    first = pj.noisy_marginals(data, cliques, 5.0, jax.random.key(0))
    warm, report = pj.estimate(dom, first, method, iters=300 if method == "lbfgs" else 20, chunk=10, report=True)
    warm.marginal(("a", "b"))  # the query's program too (the test does not rely on earlier tests)
    if method == "lbfgs":
        assert report.history[-1].get("method") == "mirror_descent"  # it stalled and handed over
    second = [pj.Measurement(m.clique, m.y + 3.0, stddev=np.full(m.rows, 7.0)) for m in first]
    with count_compiles() as counter:
        model = pj.estimate(dom, second, method, iters=20, chunk=10)
        model.marginal(("a", "b"))
    assert counter.count == 0
    # an extra chunk length or iteration count does not recompile either
    with count_compiles() as counter:
        pj.estimate(dom, first, method, iters=35, chunk=10)
    assert counter.count == 0


def test_reproducible_from_key(small):
    dom, data, cliques = small
    a = pj.estimate(dom, pj.noisy_marginals(data, cliques, 5.0, jax.random.key(7)), iters=50)
    b = pj.estimate(dom, pj.noisy_marginals(data, cliques, 5.0, jax.random.key(7)), iters=50)
    c = pj.estimate(dom, pj.noisy_marginals(data, cliques, 5.0, jax.random.key(8)), iters=50)
    np.testing.assert_array_equal(a.marginal(("a", "b")), b.marginal(("a", "b")))
    assert not np.array_equal(a.marginal(("a", "b")), c.marginal(("a", "b")))


def test_float32_default_and_float64(small):
    dom, data, cliques = small
    ms = pj.noisy_marginals(data, cliques, 5.0, jax.random.key(0))
    m32 = pj.estimate(dom, ms, iters=300)
    m64 = pj.estimate(dom, ms, iters=300, dtype=jnp.float64)
    assert m32.dtype == jnp.float32 and m64.dtype == jnp.float64
    np.testing.assert_allclose(m32.marginal(("b", "c")), m64.marginal(("b", "c")), rtol=1e-2, atol=0.5)


def test_warm_start_from_smaller_model(small):
    dom, data, cliques = small
    ms = pj.noisy_marginals(data, cliques, 5.0, jax.random.key(0))
    first = pj.estimate(dom, ms[:2], iters=300, dtype=jnp.float64, report=True)  # a Fit: its step size carried on
    cold = pj.estimate(dom, ms, iters=5, dtype=jnp.float64, report=True)
    warm = pj.estimate(dom, ms, iters=5, warm_start=first, dtype=jnp.float64, report=True)
    assert set(first.model.cliques) <= {c for c in warm.model.cliques} | set(first.model.cliques)
    assert warm.report.loss < cold.report.loss
    # zero iterations from a warm start reproduce the warm model's marginals
    same = pj.estimate(dom, ms[:2], iters=0, warm_start=first, dtype=jnp.float64)
    np.testing.assert_allclose(same.marginal(("a", "b")), first.model.marginal(("a", "b")), rtol=1e-9)


def test_free_attributes_padded_through_warm_starts_and_saving(small, tmp_path):
    dom, data, _ = small
    wide = pj.Domain({**dict(zip(dom.attributes, dom.shape)), **{f"u{i}": n for i, n in enumerate([2, 5, 7, 3, 11])}})
    rng = np.random.default_rng(0)
    records = np.concatenate([data.records, rng.integers(0, [2, 5, 7, 3, 11], size=(len(data), 5))], axis=1)
    wdata = pj.Dataset(records, wide)
    m_ab, m_d = pj.noisy_marginals(wdata, [("a", "b"), ("d",)], 1.0, jax.random.key(0))
    first = pj.estimate(wide, [m_ab, m_d], iters=200, dtype=jnp.float64, program="dense")  # the dense plan pads
    free = [j for j, c in enumerate(first.plan.cliques) if c[0].startswith("u")]
    assert len(free) == 5 and all(first.plan.padded[j] is not None for j in free)
    for a in ("u1", "u4"):  # free attributes: uniform, counts summing to the total
        np.testing.assert_allclose(first.marginal(a), np.full(wide[a], first.total / wide[a]), rtol=1e-9)
    # d measured before, not now: it becomes a free (padded) singleton and keeps its warm-start potentials
    again = pj.estimate(wide, [m_ab], iters=0, warm_start=first, total=first.total, dtype=jnp.float64, program="dense")
    j = again.plan.cliques.index(("d",))
    assert again.plan.padded[j] == 3
    np.testing.assert_allclose(again.marginal("d"), first.marginal("d"), rtol=1e-9)
    np.testing.assert_allclose(again.marginal(("a", "b")), first.marginal(("a", "b")), rtol=1e-9)
    synth = again.synthetic_data(2000, jax.random.key(1))
    assert synth.records.shape == (2000, 9) and np.all(synth.records < np.array(wide.shape))
    again.save(tmp_path / "m")
    back = pj.load_model(tmp_path / "m")
    for c in [("d",), ("u4",), ("a", "b")]:
        np.testing.assert_array_equal(back.marginal(c), again.marginal(c))


def test_custom_loss_is_differentiated(small):
    dom, data, cliques = small
    target = data.marginal(("a", "b"))

    def loss(marginals):
        return jnp.sum((marginals[("b", "a")].T - target) ** 2)

    model = pj.estimate(dom, [], loss=loss, cliques=[("a", "b")], total=400.0, iters=500, dtype=jnp.float64)
    np.testing.assert_allclose(model.marginal(("a", "b")), target, atol=1e-2)


def test_callback_tol_and_history(small):
    dom, data, cliques = small
    ms = pj.noisy_marginals(data, cliques, 5.0, jax.random.key(0))
    seen = []
    _, report = pj.estimate(dom, ms, iters=1000, chunk=25, report=True,
                            callback=lambda info: seen.append(info["iteration"]) or len(seen) == 2)
    assert seen == [25, 50] and report.history[-1]["iteration"] == 50
    _, report = pj.estimate(dom, ms, iters=5000, chunk=50, tol=1e-3, dtype=jnp.float64, report=True)
    assert report.history[-1]["iteration"] < 5000


def test_l1_loss_runs(small):
    dom, data, cliques = small
    ms = pj.noisy_marginals(data, cliques, 5.0, jax.random.key(0), noise="laplace")
    model, report = pj.estimate(dom, ms, loss="l1", iters=300, report=True)
    assert np.isfinite(report.loss)
    assert model.marginal(("a",)).sum() == pytest.approx(model.total, rel=1e-4)


# ---------------------------------------------------------------------------- bad input
def _assert_error_without_compiling(exc, match, fn):
    with count_compiles() as counter:
        with pytest.raises(exc, match=match):
            fn()
    assert counter.count == 0


def test_bad_inputs_raise_before_compiling(small):
    dom, data, cliques = small
    good = pj.Measurement(("a", "b"), data.marginal(("a", "b")), stddev=1.0)
    cases = [
        (ValueError, r"measurement 1 on \('a', 'zz'\): attribute 'zz' is not in the domain",
         lambda: pj.estimate(dom, [good, pj.Measurement(("a", "zz"), np.zeros(6), 1.0)])),
        (ValueError, r"measurement 0 on \('a', 'b'\): y has 10 values but the marginal has 12 cells",
         lambda: pj.estimate(dom, [pj.Measurement(("a", "b"), np.zeros(10), 1.0)])),
        (ValueError, r"the query has 7 columns but the marginal has 12 cells",
         lambda: pj.estimate(dom, [pj.Measurement(("a", "b"), np.zeros(2), 1.0, query=np.ones((2, 7)))])),
        (ValueError, r"the query factor of 'b' has 3 columns but 'b' has 4 values",
         lambda: pj.estimate(dom, [pj.Measurement(("a", "b"), np.zeros(2), 1.0, query=(np.ones((1, 3)), np.ones((2, 3))))])),
        (ValueError, r"unknown method 'newton'", lambda: pj.estimate(dom, [good], method="newton")),
        (ValueError, r"loss must be 'l2', 'l1' or a callable", lambda: pj.estimate(dom, [good], loss="huber")),
        (ValueError, r"total must be positive", lambda: pj.estimate(dom, [good], total=-5)),
        (ValueError, r"iters must be a non-negative integer", lambda: pj.estimate(dom, [good], iters=-1)),
        (ValueError, r"dual_averaging needs the smooth 'l2' loss", lambda: pj.estimate(dom, [good], "dual_averaging", loss="l1")),
        (ValueError, r"nothing to fit", lambda: pj.estimate(dom, [])),
        (TypeError, r"measurement 0 is a tuple", lambda: pj.estimate(dom, [(("a",), np.zeros(3))])),
        (ValueError, r"clique \('q',\): attribute 'q' is not in the domain", lambda: pj.estimate(dom, [good], cliques=[("q",)])),
        (ValueError, r"cannot be estimated", lambda: pj.estimate(dom, [pj.Measurement(("a",), [1.0], 1.0, query=np.array([[1.0, -1.0, 0.0]]))])),
    ]
    for exc, match, fn in cases:
        _assert_error_without_compiling(exc, match, fn)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(clique=("a", "a"), y=np.zeros(9)), "appears more than once"),
        (dict(clique=("a",), y=[np.nan, 0, 0]), "y has non-finite values"),
        (dict(clique=("a",), y=np.zeros(3), stddev=0.0), "stddev must be positive"),
        # Issue 57: 1 / stddev**2 not a finite, nonzero float64 ended in a bare ZeroDivisionError in estimate.
        (dict(clique=("a",), y=np.zeros(3), stddev=1e-300), "1 / stddev\\*\\*2 is a finite, nonzero"),
        (dict(clique=("a",), y=np.zeros(3), stddev=[1.0, 1e-200, 1.0]), "1 / stddev\\*\\*2 is a finite, nonzero"),
        (dict(clique=("a",), y=np.zeros(3), stddev=1e200), "1 / stddev\\*\\*2 is a finite, nonzero"),
        (dict(clique=("a",), y=np.zeros(3), stddev=np.ones(2)), "stddev must be a scalar or one per row"),
        (dict(clique=("a",), y=np.zeros(2), query=np.ones((3, 3))), "the query has 3 rows but y has 2 values"),
        (dict(clique=("a", "b"), y=np.zeros(2), query=(np.ones((2, 3)),)), "needs one matrix per attribute"),
    ],
)
def test_bad_measurements(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pj.Measurement(**kwargs)


def test_float64_without_x64_is_a_clear_error(small, monkeypatch):
    dom, data, cliques = small
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(ValueError, match="float64 needs"):
            pj.estimate(dom, [pj.Measurement(("a",), data.marginal("a"), 1.0)], dtype=jnp.float64)
    finally:
        jax.config.update("jax_enable_x64", True)


def test_total_and_lipschitz():
    m1 = pj.Measurement(("a",), [10.0, 20.0], stddev=1.0)  # total 30, var 2
    m2 = pj.Measurement(("a",), [14.0, 20.0], stddev=2.0)  # total 34, var 8
    total, var = pj.estimate_total([m1, m2])
    assert total == pytest.approx((30 / 2 + 34 / 8) / (1 / 2 + 1 / 8))
    assert var == pytest.approx(1 / (1 / 2 + 1 / 8))
    prefix = np.tril(np.ones((4, 4)))  # the last row is the total
    m3 = pj.Measurement(("b",), prefix @ np.array([1.0, 2, 3, 4]), stddev=1.0, query=prefix)
    assert pj.estimate_total([m3])[0] == pytest.approx(10.0)
    assert m3.lipschitz() == pytest.approx(np.linalg.eigvalsh(prefix.T @ prefix)[-1])
    kron = pj.Measurement(("a", "b"), np.zeros(8), stddev=2.0, query=(np.eye(2) * 3, prefix))
    assert kron.lipschitz() == pytest.approx(9 * np.linalg.eigvalsh(prefix.T @ prefix)[-1] / 4)
    assert pj.Measurement(("a",), [1.0, 2.0], stddev=[1.0, 0.5]).lipschitz() == pytest.approx(4.0)


def _row_measurements(data, count):
    """``count`` one-row Kronecker measurements on ("a", "b") (MWEM's query mode), distinct rows."""
    out = []
    for i in range(count):
        qa, qb = np.zeros((1, 3)), np.zeros((1, 4))
        qa[0, : 1 + i % 3] = 1.0
        qb[0, : 1 + i % 4] = 1.0
        y = np.einsum("ra,ab,sb->rs", qa, data.marginal(("a", "b")), qb).ravel() + 0.3 * i
        out.append(pj.Measurement(("a", "b"), y, stddev=1.0 + i, query=(qa, qb)))
    return out


def test_measurement_counts_padded_to_a_power_of_two_reuse_programs(small):
    """MWEM adds one measurement per round: 3 -> 4 measurements of one clique shape keep every program."""
    from pgmjax import programs

    programs.release_compiled()  # see test_no_recompilation_on_new_numbers
    dom, data, _ = small
    rows = _row_measurements(data, 5)
    pj.estimate(dom, rows[:3], "mirror_descent", loss="l1", iters=20, chunk=10, total=400.0)
    with count_compiles() as counter:
        pj.estimate(dom, rows[:4], "mirror_descent", loss="l1", iters=20, chunk=10, total=400.0)
    assert counter.count == 0
    with count_compiles() as counter:  # 5 crosses a power of two: a new shape, compiled once
        pj.estimate(dom, rows[:5], "mirror_descent", loss="l1", iters=20, chunk=10, total=400.0)
    assert counter.count > 0


@pytest.mark.parametrize("kind", ["l1", "l2"])
def test_padding_adds_nothing_to_the_loss(small, kind, monkeypatch):
    """The zero-weight copies change neither the loss nor its gradient (padded vs unpadded stacks)."""
    from pgmjax.estimation import losses
    from pgmjax.graph import oracle

    dom, data, _ = small
    rows = _row_measurements(data, 3)
    plan = oracle.make_plan(dom, [("a", "b")])
    theta = {k: jnp.asarray(np.random.default_rng(1).normal(size=v.shape)) for k, v in plan.zeros(jnp.float64).items()}
    mu = oracle.marginals(plan, theta, 400.0)[0]
    padded = losses.stack_measurements(plan, rows, jnp.float64)
    monkeypatch.setattr(losses, "_MAX_PAD_CELLS", -1)
    plain = losses.stack_measurements(plan, rows, jnp.float64)
    assert [g.count for g in padded.groups] == [4] and [g.count for g in plain.groups] == [3]
    f = lambda m, meas: losses.residual_loss(m, meas, kind, smoothing=0.5 if kind == "l1" else None)  # noqa: E731
    va, ga = jax.value_and_grad(f)(mu, padded)
    vb, gb = jax.value_and_grad(f)(mu, plain)
    np.testing.assert_allclose(va, vb, rtol=1e-12)
    for k in ga:
        np.testing.assert_allclose(ga[k], gb[k], rtol=1e-12, atol=1e-12)


def test_warm_start_continues_from_the_last_step_size():
    """MWEM's refit: one new, far-off prefix-range measurement on a converged model of a 100 x 100 clique.
    From 1 / (L N) the line search spends its iterations growing the step; from the warm model's last
    step it fits at once."""
    n, N = 100, 2000.0
    dom = pj.Domain({"a": n, "b": n, "c": 3})
    rng = np.random.default_rng(0)
    data = pj.Dataset(np.stack([rng.integers(0, s, int(N)) for s in (n, n, 3)], axis=1), dom)
    prefix = np.tril(np.ones((n, n)))
    ms = []
    for i, (ra, rb) in enumerate([(n - 1, n - 2), (n // 2, n - 1), (n - 2, n // 3)]):
        qa, qb = prefix[ra][None], prefix[rb][None]
        y = np.einsum("ra,ab,sb->rs", qa, data.marginal(("a", "b")), qb).ravel() + (300.0 if i == 2 else 0.0)
        ms.append(pj.Measurement(("a", "b"), y, stddev=30.0, query=(qa, qb)))
    first = pj.estimate(dom, ms[:2], iters=200, total=N, dtype=jnp.float64, report=True)
    default = 1.0 / (losses.lipschitz_constant(ms) * N)
    assert first.report.step_size > 1000 * default  # the step the first fit's line search grew to
    _, carried = pj.estimate(dom, ms, iters=10, total=N, warm_start=first, dtype=jnp.float64, report=True)
    _, restarted = pj.estimate(dom, ms, iters=10, total=N, warm_start=first, dtype=jnp.float64, step_size=default,
                               report=True)
    assert restarted.loss > 10.0 and carried.loss < 0.01 * restarted.loss
    # a model alone carries no step: a warm start from it begins at 1 / (L N), as the restarted fit does
    _, bare = pj.estimate(dom, ms, iters=10, total=N, warm_start=first.model, dtype=jnp.float64, report=True)
    assert bare.loss == restarted.loss
    # recorded only where a warm start reuses it: mirror descent on a smooth loss
    assert pj.estimate(dom, ms, iters=5, total=N, loss="l1", report=True).report.step_size is None
    assert pj.estimate(dom, ms, "dual_averaging", iters=5, total=N, report=True).report.step_size is None


@pytest.mark.parametrize(
    "method, loss",
    [("mirror_descent", "l2"), ("mirror_descent", "l1"), ("dual_averaging", "l2"), ("lbfgs", "l2")],
)
def test_fitted_model_answers_from_its_potentials_alone(small, method, loss, tmp_path):
    """One source of truth: the fitted model's marginals are its own marginal program's on its potentials
    (bit for bit, as a loaded copy's), and its loss is the exact loss of those marginals."""
    from pgmjax.model import answer_programs

    dom, data, cliques = small
    ms = pj.noisy_marginals(data, cliques, 5.0, jax.random.key(5))
    model, report = pj.estimate(dom, ms, method, loss=loss, iters=30, dtype=jnp.float64, report=True)
    kept = model.clique_marginals()
    fresh, _ = answer_programs.marginals_and_log_partition(model.plan, model.theta, jnp.asarray(model.total, jnp.float64))
    for c, table in model.plan.tables(fresh).items():
        np.testing.assert_array_equal(kept[c], np.asarray(table, np.float64))
    loaded = pj.load_model(model.save(tmp_path / "m"))
    for c, table in loaded.clique_marginals().items():
        np.testing.assert_array_equal(kept[c], table)
    residuals = [(model.marginal(m.clique).ravel() - m.y) / np.asarray(m.stddev) for m in ms]
    exact = sum(np.abs(r).sum() if loss == "l1" else 0.5 * (r * r).sum() for r in residuals)
    assert exact > 0 and report.loss == pytest.approx(exact, rel=1e-9)


def test_first_fit_compiles_one_program(rng):
    """A first mirror-descent fit of a new structure compiles two XLA programs (its iteration chunk, and the
    model's marginals, which every model answers from): its inputs (plan arrays, measurements, zeros,
    scalars) and the fitted-model check stay on the host or are transferred, never built by small eager
    programs."""
    from conftest import count_compiles

    dom = pj.Domain({"p": 3, "q": 5, "r": 7, "s": 2})  # shapes no other test fits
    data = pj.Dataset(rng.integers(0, [3, 5, 7, 2], size=(500, 4)), dom)
    ms = pj.noisy_marginals(data, [("p", "q"), ("q", "r"), ("r", "s"), ("s",)], 5.0, jax.random.key(1))
    with count_compiles() as counter:
        model = pj.estimate(dom, ms, iters=20)
        model.clique_marginals()
    assert sorted(counter.names) == ["jit(_chunk)", "jit(marginals)"], counter.names


@pytest.mark.parametrize("method", ["dual_averaging", "lbfgs"])
def test_first_fit_compiles_each_program_once(rng, method):
    """A first fit with the other methods compiles its init, chunk, final-loss and marginals programs once each:
    the state a chunk returns has the types of the state it was given (L-BFGS's first state held optax's
    weakly typed line-search scalars, so its chunk compiled twice), and the returned potentials are formed
    inside the chunk, not by small eager programs."""
    from conftest import count_compiles

    dom = pj.Domain({"p": 4, "q": 6, "r": 3, "s": 2})  # shapes no other test fits
    data = pj.Dataset(rng.integers(0, [4, 6, 3, 2], size=(500, 4)), dom)
    ms = pj.noisy_marginals(data, [("p", "q"), ("q", "r"), ("r", "s")], 5.0, jax.random.key(2))
    with count_compiles() as counter:
        model, report = pj.estimate(dom, ms, method=method, iters=20, chunk=10, report=True)
    assert np.isfinite(report.loss)
    assert "jit(_chunk)" in counter.names
    assert len(counter.names) == len(set(counter.names)), counter.names
    assert set(counter.names) <= {"jit(_init)", "jit(_chunk)", "jit(model_loss)", "jit(marginals)"}, counter.names
