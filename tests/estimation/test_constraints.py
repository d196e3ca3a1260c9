"""Constraints (pgmjax.Constraint): forbidden cells at exactly zero, the constrained maximum-entropy model,
checked against float64 references on the full table (maxent_reference with a support), for every method and
compiled program; records, rounding, warm starts and files keep the zeros; bad constraints are refused early."""

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from maxent_reference import ipf, l1_over_n, optimum, project

ATTRS = ["a", "b", "c", "d"]
SIZES = [3, 2, 3, 2]
DOM = pj.Domain(dict(zip(ATTRS, SIZES)))
CONSTRAINTS = (
    pj.Constraint.forbid(("a", "b"), [(0, 1)]),                    # a = 0 never has b = 1
    pj.Constraint.allow(("c", "d"), [(0, 0), (1, 0), (1, 1), (2, 1)]),  # c = 0 only with d = 0, c = 2 only with d = 1
    pj.Constraint.determines("a", "c", [0, 1, 1]),                 # c is a function of a
)
MEASURED = [("a",), ("b", "c"), ("b", "d"), ("a", "d")]


def support(constraints) -> np.ndarray:
    """The full table's allowed cells."""
    ok = np.ones(SIZES, bool)
    for c in constraints:
        axes = [ATTRS.index(a) for a in c.attributes]
        table = c.allowed(DOM)
        order = np.argsort(axes)
        shape = [1] * len(ATTRS)
        for i, ax in enumerate(sorted(axes)):
            shape[ax] = SIZES[ax]
        ok &= np.transpose(table, order).reshape(shape)
    return ok


def measurements(constraints, seed=0, sd=2.0, n=600):
    """Noisy marginals of records drawn on the allowed cells."""
    rng = np.random.default_rng(seed)
    ok = support(constraints)
    p = rng.dirichlet(np.ones(ok.sum()))
    cells = np.argwhere(ok)[rng.choice(ok.sum(), size=n, p=p)]
    data = pj.Dataset(cells, DOM)
    return [pj.Measurement(c, data.marginal(c).ravel() + rng.normal(0, sd, DOM.size(c)), stddev=sd) for c in MEASURED]


def joint(model) -> np.ndarray:
    """The model's full table (its marginal on every attribute)."""
    return np.asarray(model.marginal(tuple(ATTRS)), np.float64)


@pytest.mark.parametrize("method,program", [
    ("mirror_descent", "dense"), ("mirror_descent", "size_class"), ("dual_averaging", "dense"), ("lbfgs", "dense"),
    pytest.param("lbfgs", "size_class", marks=pytest.mark.slow),
    pytest.param("mirror_descent", "paths", marks=pytest.mark.slow)])
def test_the_constrained_fit_is_the_maximum_entropy_optimum_on_the_allowed_cells(method, program):
    ms = measurements(CONSTRAINTS)
    model, report = pj.estimate(DOM, ms, method=method, iters=3000, constraints=CONSTRAINTS, program=program,
                                dtype=jnp.float64, total=600.0, report=True)
    table = joint(model)
    ok = support(CONSTRAINTS)
    assert (table[~ok] == 0).all(), f"{method}/{program}: forbidden cells hold {table[~ok].max()}"
    refs = [(m.clique, np.asarray(m.y), m.stddev, None) for m in ms]
    best, _ = optimum(ATTRS, SIZES, refs, 600.0, support=ok)
    unconstrained, _ = optimum(ATTRS, SIZES, refs, 600.0)
    assert best > unconstrained + 0.1  # the constraints bind: the reference is not the unconstrained one
    assert report.loss <= best * (1 + 1e-4) + 1e-6, f"{method}/{program}: loss {report.loss} against {best}"
    targets = {c: project(table, ATTRS, c) for c in MEASURED}
    maxent = 600.0 * ipf(ATTRS, SIZES, targets, support=ok)
    assert l1_over_n(table, maxent, 600.0) < 1e-4


def test_float32_long_runs_keep_the_zeros_and_the_maximum_entropy():
    ms = measurements(CONSTRAINTS, seed=1)
    ok = support(CONSTRAINTS)
    for method in ("mirror_descent", "lbfgs", "dual_averaging"):
        model = pj.estimate(DOM, ms, method=method, iters=20_000, chunk=2000, constraints=CONSTRAINTS, total=600.0)
        table = joint(model)
        assert (table[~ok] == 0).all() and np.isfinite(table).all(), method
        targets = {c: project(table, ATTRS, c) for c in MEASURED}
        maxent = 600.0 * ipf(ATTRS, SIZES, targets, support=ok)
        assert l1_over_n(table, maxent, 600.0) < 1e-3, method


@pytest.mark.slow
def test_the_approximate_oracle_holds_the_zeros_and_its_records_never_break_them():
    """The record updater's tree start and its steps (which change some attributes of a record) landed 4 to 8 of
    3,000 records on forbidden cells before it replaced such records (pgmjax.model.record_updating)."""
    ms = measurements(CONSTRAINTS)
    model = pj.estimate(DOM, ms, iters=300, constraints=CONSTRAINTS, oracle="approximate")
    for c in CONSTRAINTS:
        marg = np.asarray(model.marginal(c.attributes))
        assert (marg[~c.allowed(DOM)] < 1e-20).all() and np.isfinite(marg).all()
    for seed in range(3):
        records = model.synthetic_data(3000, key=jax.random.key(seed)).records
        assert [c.violations(records, DOM) for c in CONSTRAINTS] == [0, 0, 0]


def test_records_and_rounding_never_show_a_forbidden_cell():
    model = pj.estimate(DOM, measurements(CONSTRAINTS), iters=500, constraints=CONSTRAINTS)
    for method in ("exact", "low_variance"):
        for seed in range(5):
            records = model.synthetic_data(2000, key=jax.random.key(seed), method=method).records
            for c in CONSTRAINTS:
                assert c.violations(records, DOM) == 0, (method, seed, c)


def test_answers_conditioning_warm_starts_and_files_keep_the_zeros(tmp_path):
    fit = pj.estimate(DOM, measurements(CONSTRAINTS), iters=500, constraints=CONSTRAINTS, report=True)
    model = fit.model
    ok = support(CONSTRAINTS)
    # a warm start without the constraints keeps them: its -inf potentials are the starting point
    again = pj.estimate(DOM, measurements(CONSTRAINTS, seed=3), iters=200, warm_start=fit)
    assert (joint(again)[~ok] == 0).all()
    loaded = pj.load_model(model.save(tmp_path / "m"))
    np.testing.assert_array_equal(joint(loaded), joint(model))
    assert np.asarray(model.marginal(("b", "c"), given={"a": 0}))[1].sum() == 0  # a = 0: b = 1 impossible


def test_mass_the_measurements_put_on_forbidden_cells_is_reported():
    rng = np.random.default_rng(0)
    y = np.array([[50.0, 40.0], [60.0, 70.0], [80.0, 90.0]]) + rng.normal(0, 1, (3, 2))
    m = pj.Measurement(("a", "b"), y, stddev=1.0)
    with pytest.warns(UserWarning, match=r"puts \d+\.\d+ records on cells that Constraint.forbid"):
        _, report = pj.estimate(DOM, [m], iters=200, constraints=[CONSTRAINTS[0]], report=True)
    [found] = report.info["forbidden_mass"]
    assert found.clique == ("a", "b") and found.mass == pytest.approx(y[0, 1]) and found.stddev == pytest.approx(1.0)
    assert found.contradicts
    y[0, 1] = 0.5  # within the noise: reported, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, report = pj.estimate(DOM, [pj.Measurement(("a", "b"), y, stddev=1.0)], iters=200, constraints=[CONSTRAINTS[0]],
                                report=True)
    assert not report.info["forbidden_mass"][0].contradicts


@pytest.mark.parametrize("build,message", [
    (lambda: pj.Constraint.forbid((), [()]), "one or more distinct attributes"),
    (lambda: pj.Constraint.forbid(("a", "a"), [(0, 0)]), "one or more distinct attributes"),
    (lambda: pj.Constraint.determines("a", "a", [0, 1, 2]), "one or more distinct attributes"),
    (lambda: pj.Constraint("a b".split(), "exclude", [(0, 0)]), "kind must be one of"),
    (lambda: pj.Constraint.forbid(("a", "b"), [(0.5, 1)]), "must be integers"),
    (lambda: pj.Constraint.forbid(("a", "b"), [(-1, 1)]), "non-negative"),
    (lambda: pj.Constraint.allow(("a", "b"), []), "non-empty"),
])
def test_a_malformed_constraint_is_refused_at_construction(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("constraint,message", [
    (pj.Constraint.forbid(("a", "z"), [(0, 0)]), "attribute 'z' is not in the domain"),
    (pj.Constraint.forbid(("a", "b"), [(3, 0)]), "code 3 for 'a', whose size is 3"),
    (pj.Constraint.determines("a", "c", [0, 1]), "one per value of 'a' \\(3\\)"),
    (pj.Constraint.determines("a", "b", [0, 1, 2]), "mapping\\[2\\] = 2 is not a code of 'b'"),
    (pj.Constraint.allow(("a", "b"), [(0, 0)]).__class__.forbid(("b", "d"), list(itertools.product(range(2), range(2)))),
     "forbids every combination"),
    ("a != b", "constraints\\[0\\] must be a pgmjax.Constraint"),
])
def test_a_constraint_that_does_not_fit_the_domain_is_refused_before_fitting(constraint, message):
    m = pj.Measurement(("a",), np.ones(3), stddev=1.0)
    with pytest.raises((ValueError, TypeError), match=message):
        pj.estimate(DOM, [m], iters=10, constraints=[constraint])


# ------------------------------------------------------------------------------------ functional dependencies
FD_ATTRS, FD_SIZES = ["s", "t", "u"], [4, 3, 2]
FD_DOM = pj.Domain(dict(zip(FD_ATTRS, FD_SIZES)))
FD = pj.Constraint.determines("s", "t", [0, 2, 2, 1])


def fd_support() -> np.ndarray:
    ok = np.zeros(FD_SIZES, bool)
    ok[np.arange(4), FD.cells, :] = True
    return ok


def test_a_functional_dependency_is_fitted_without_its_target_whatever_the_queries():
    """Queries on the target alone (identity, Prefix), with its source (identity in reversed order, per-row noise)
    and dense: the fit without the target reaches the constrained optimum, and is its maximum-entropy member."""
    rng = np.random.default_rng(4)
    ok = fd_support()
    cells = np.argwhere(ok)[rng.choice(ok.sum(), size=500, p=rng.dirichlet(np.ones(ok.sum())))]
    data = pj.Dataset(cells, FD_DOM)
    prefix = np.tril(np.ones((3, 3)))
    dense = rng.normal(size=(5, 12))
    sd_rows = rng.uniform(1, 3, 24)
    specs = [(("t", "u"), (prefix, None), 2.0), (("u", "t", "s"), None, sd_rows), (("t", "s"), dense, 2.0), (("t",), None, 1.0)]
    ms, refs = [], []
    for clique, q, sd in specs:
        marg = data.marginal(clique)
        if q is None:
            y = marg.ravel()
        elif isinstance(q, tuple):
            y = np.kron(q[0], np.eye(2)) @ marg.ravel()
        else:
            y = q @ marg.ravel()
        y = y + rng.normal(0, 1, y.shape) * sd
        ms.append(pj.Measurement(clique, y, sd, query=None if q is None else (q if not isinstance(q, tuple) else (q[0], np.eye(2)))))
        refs.append((clique, y, sd, ms[-1].query))
    for method in ("mirror_descent", "lbfgs", "dual_averaging"):
        model, report = pj.estimate(FD_DOM, ms, method=method, iters=4000, constraints=[FD], dtype=jnp.float64,
                                    total=500.0, report=True)
        assert all("t" not in c for c in report.info["fit_cliques"]) and report.info["eliminated"] == [FD]
        table = np.asarray(model.marginal(tuple(FD_ATTRS)), np.float64)
        assert (table[~ok] == 0).all()
        best, _ = optimum(FD_ATTRS, FD_SIZES, refs, 500.0, support=ok)
        assert report.loss <= best * (1 + 1e-4) + 1e-6, (method, report.loss, best)
        targets = {c: project(table, FD_ATTRS, c) for c, _, _ in specs}
        assert l1_over_n(table, 500.0 * ipf(FD_ATTRS, FD_SIZES, targets, support=ok), 500.0) < 1e-5, method


def _zip_state_fit():
    """A 300-value source determining a 50-value target, measured beside a third attribute, fitted."""
    dom = pj.Domain({"zip": 300, "state": 50, "age": 4})
    mapping = np.arange(300) % 50
    dep = pj.Constraint.determines("zip", "state", mapping)
    rng = np.random.default_rng(0)
    z = rng.integers(0, 300, 2000)
    data = pj.Dataset(np.stack([z, mapping[z], rng.integers(0, 4, 2000)], 1), dom)
    ms = [pj.Measurement(c, data.marginal(c).ravel() + rng.normal(0, 1, dom.size(c)), 1.0)
          for c in [("state", "age"), ("zip",)]]
    return dom, ms, dep, pj.estimate(dom, ms, iters=300, constraints=[dep], report=True)


def test_a_functional_dependency_costs_the_source_tables_not_the_product():
    """The fit's tables hold 300 x 4 cells, where masking the (source, target) clique fits a 300 x 50 table besides."""
    dom, _, dep, (model, report) = _zip_state_fit()
    fitted = report.info["fit_cliques"]
    assert sum(dom.size(c) for c in fitted) == 300 * 4, fitted
    assert set(model.cliques) == {("zip", "age"), ("zip", "state")}  # the target back as a leaf
    assert dep.violations(model.synthetic_data(5000, key=jax.random.key(0)).records, dom) == 0


@pytest.mark.slow
def test_the_eliminated_dependency_fits_what_the_masked_clique_fits():
    dom, ms, dep, (model, _) = _zip_state_fit()
    masked = pj.estimate(dom, ms, iters=300, constraints=[dep], program="size_class")  # the masked clique
    assert max(dom.size(c) for c in masked.cliques) == 300 * 50
    np.testing.assert_allclose(model.marginal(("state", "age")), masked.marginal(("state", "age")), atol=0.05)


@pytest.mark.slow
def test_chained_and_shared_dependencies_and_warm_starts():
    dom = pj.Domain({"a": 6, "b": 3, "c": 2, "d": 2})
    ab = pj.Constraint.determines("a", "b", [0, 0, 1, 1, 2, 2])
    bc = pj.Constraint.determines("b", "c", [0, 1, 1])
    dc = pj.Constraint.determines("d", "c", [0, 1])  # c is determined twice: a's and d's must agree
    rng = np.random.default_rng(1)
    a = rng.integers(0, 6, 400)
    b = ab.cells[a]
    c = bc.cells[b]
    data = pj.Dataset(np.stack([a, b, c, c], 1), dom)
    ms = [pj.Measurement(k, data.marginal(k).ravel() + rng.normal(0, 1, dom.size(k)), 1.0)
          for k in [("a",), ("b", "d"), ("c",)]]
    fit = pj.estimate(dom, ms, iters=500, constraints=[ab, bc, dc], report=True)
    model, report = fit
    # b, then c (a's dependency composed through b); d's dependency on c becomes "d agrees with a"
    assert [k.attributes for k in report.info["eliminated"]] == [("a", "b"), ("a", "c")]
    assert all("b" not in k and "c" not in k for k in report.info["fit_cliques"])
    records = model.synthetic_data(3000, key=jax.random.key(2)).records
    assert all(k.violations(records, dom) == 0 for k in (ab, bc, dc))
    _, warm = pj.estimate(dom, ms, iters=100, constraints=[ab, bc, dc], warm_start=fit, report=True)
    assert warm.loss <= report.loss * (1 + 1e-5) + 1e-6
    other = pj.estimate(dom, ms, iters=50)  # holds b beside d: not a model of the dependency
    with pytest.raises(ValueError, match="only a model fitted under it"):
        pj.estimate(dom, ms, iters=50, constraints=[ab], warm_start=other)


def test_mass_off_a_dependency_is_reported():
    y = np.zeros((4, 3))
    y[np.arange(4), FD.cells] = 50.0
    y[0, 1] = 30.0  # 30 records where s = 0 but t = 1
    with pytest.warns(UserWarning, match="puts 30 records"):
        _, report = pj.estimate(FD_DOM, [pj.Measurement(("s", "t"), y, 1.0)], iters=100, constraints=[FD], report=True)
    assert [f.mass for f in report.info["forbidden_mass"]] == [pytest.approx(30.0)]


def test_the_documentation_pages_example_runs_as_written():
    import pathlib
    import re

    page = (pathlib.Path(__file__).parents[2] / "docs" / "constraints.md").read_text()
    namespace: dict = {}
    exec(re.findall(r"```python\n(.*?)```", page, re.S)[0], namespace)  # noqa: S102 - the project's own page
    model, records = namespace["model"], namespace["records"]
    assert model.marginal(("age", "married"))[0, 1] == 0.0
    assert [c.violations(records, namespace["dom"]) for c in namespace["constraints"]] == [0, 0]


@pytest.mark.parametrize("method", ["mirror_descent", "dual_averaging"])
def test_a_batch_member_and_the_pure_fit_keep_the_zeros_and_fit_what_estimate_fits(method):
    """estimate_batch and pj.fit take the constraints as estimate does (the dependency kept as a masked clique):
    forbidden cells exactly zero in every member, and each member's answers those of its own estimate."""
    ok = support(CONSTRAINTS)
    members = [measurements(CONSTRAINTS, seed=s) for s in (2, 3)]
    batch = pj.estimate_batch(DOM, members, method=method, iters=2000, constraints=CONSTRAINTS, total=600.0,
                              dtype=jnp.float64)
    for i, ms in enumerate(members):
        table = joint(batch.member(i))
        assert (table[~ok] == 0).all() and np.isfinite(table).all(), (method, i)
        alone = joint(pj.estimate(DOM, ms, method=method, iters=2000, constraints=CONSTRAINTS, total=600.0,
                                  dtype=jnp.float64, program="dense"))
        assert l1_over_n(table, alone, 600.0) < 1e-3, (method, i)
    pure = jax.jit(lambda ys: pj.fit(DOM, [pj.Measurement(m.clique, y, m.stddev) for m, y in zip(members[0], ys)],
                                     method=method, iters=2000, constraints=CONSTRAINTS, total=600.0,
                                     dtype=jnp.float64).marginal(tuple(ATTRS)))
    table = np.asarray(pure([m.y for m in members[0]]), np.float64)
    assert (table[~ok] == 0).all() and np.isfinite(table).all()
    assert l1_over_n(table, joint(batch.member(0)), 600.0) < 1e-3


def test_the_gradient_through_a_constrained_dual_averaging_fit_is_finite_and_matches_finite_differences():
    ms = measurements(CONSTRAINTS, seed=4)

    def answer(y0):
        fitted = pj.fit(DOM, [pj.Measurement(ms[0].clique, y0, ms[0].stddev), *ms[1:]], method="dual_averaging",
                        iters=200, constraints=CONSTRAINTS, total=600.0, dtype=jnp.float64)
        return fitted.marginal(("a", "c"))[1, 1]

    y0 = jnp.asarray(ms[0].y, jnp.float64)
    grad = np.asarray(jax.jit(jax.grad(answer))(y0))
    answer = jax.jit(answer)  # one compile for both finite-difference points
    assert np.isfinite(grad).all()
    e = np.zeros_like(grad)
    e[1] = 1e-3
    fd = (answer(y0 + e) - answer(y0 - e)) / 2e-3
    assert grad[1] == pytest.approx(float(fd), rel=1e-4, abs=1e-8)


def test_intervals_of_a_constrained_model_are_zero_on_forbidden_cells():
    """The bootstrap refits a dependency-eliminated model on a plan holding every measured clique, with mirror
    descent (the exact QP and L-BFGS would not keep the -inf cells): forbidden cells get [0, 0]; the linear method
    and the other solvers are refused by name."""
    ms = measurements(CONSTRAINTS, seed=0)
    fit = pj.estimate(DOM, ms, iters=1000, constraints=CONSTRAINTS, total=600.0, report=True)
    assert fit.report.info["eliminated"]  # the dependency's target left the fit: ("b", "c") lies in no clique of it
    targets = [c.attributes for c in CONSTRAINTS]
    ivs = pj.uncertainty.intervals(fit, ms, targets, B=30, key=jax.random.key(0), iters=200, total=600.0)
    ok = support(CONSTRAINTS)
    for con, iv in zip(CONSTRAINTS, ivs):
        banned = project(ok.astype(float), ATTRS, con.attributes) == 0  # no allowed record lands there
        assert (~con.allowed(DOM) <= banned).all()
        assert (iv.lo[banned] == 0).all() and (iv.hi[banned] == 0).all(), con
        assert (iv.hi[~banned] > iv.lo[~banned]).all(), con
        assert iv.diagnostics["fit_method"] == "mirror_descent"
    for kwargs in (dict(method="linear"), dict(fit_method="lbfgs"), dict(fit_method="qp")):
        with pytest.raises(ValueError, match="does not hold a constrained model's structural zeros"):
            pj.uncertainty.intervals(fit, ms, targets, B=10, key=jax.random.key(0), **kwargs)
