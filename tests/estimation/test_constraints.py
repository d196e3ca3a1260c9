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


@pytest.mark.parametrize("method,program", [("mirror_descent", "dense"), ("mirror_descent", "size_class"),
                                            ("dual_averaging", "dense"), ("lbfgs", "dense"), ("lbfgs", "size_class"),
                                            ("mirror_descent", "paths")])
def test_the_constrained_fit_is_the_maximum_entropy_optimum_on_the_allowed_cells(method, program):
    ms = measurements(CONSTRAINTS)
    model = pj.estimate(DOM, ms, method=method, iters=3000, constraints=CONSTRAINTS, program=program,
                        dtype=jnp.float64, total=600.0)
    table = joint(model)
    ok = support(CONSTRAINTS)
    assert (table[~ok] == 0).all(), f"{method}/{program}: forbidden cells hold {table[~ok].max()}"
    refs = [(m.clique, np.asarray(m.y), m.stddev, None) for m in ms]
    best, _ = optimum(ATTRS, SIZES, refs, 600.0, support=ok)
    unconstrained, _ = optimum(ATTRS, SIZES, refs, 600.0)
    assert best > unconstrained + 0.1  # the constraints bind: the reference is not the unconstrained one
    assert model.loss <= best * (1 + 1e-4) + 1e-6, f"{method}/{program}: loss {model.loss} against {best}"
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


def test_the_approximate_oracle_holds_the_zeros():
    ms = measurements(CONSTRAINTS)
    model = pj.estimate(DOM, ms, iters=300, constraints=CONSTRAINTS, oracle="approximate")
    for c in CONSTRAINTS:
        marg = np.asarray(model.marginal(c.attributes))
        assert (marg[~c.allowed(DOM)] < 1e-20).all() and np.isfinite(marg).all()


def test_records_and_rounding_never_show_a_forbidden_cell():
    model = pj.estimate(DOM, measurements(CONSTRAINTS), iters=500, constraints=CONSTRAINTS)
    for method in ("exact", "low_variance"):
        for seed in range(5):
            records = model.synthetic_data(2000, key=jax.random.key(seed), method=method).records
            for c in CONSTRAINTS:
                assert c.violations(records, DOM) == 0, (method, seed, c)


def test_answers_conditioning_warm_starts_and_files_keep_the_zeros(tmp_path):
    model = pj.estimate(DOM, measurements(CONSTRAINTS), iters=500, constraints=CONSTRAINTS)
    ok = support(CONSTRAINTS)
    # a warm start without the constraints keeps them: its -inf potentials are the starting point
    again = pj.estimate(DOM, measurements(CONSTRAINTS, seed=3), iters=200, warm_start=model)
    assert (joint(again)[~ok] == 0).all()
    loaded = pj.load_model(model.save(tmp_path / "m"))
    np.testing.assert_array_equal(joint(loaded), joint(model))
    assert np.asarray(model.marginal(("b", "c"), given={"a": 0}))[1].sum() == 0  # a = 0: b = 1 impossible


def test_mass_the_measurements_put_on_forbidden_cells_is_reported():
    rng = np.random.default_rng(0)
    y = np.array([[50.0, 40.0], [60.0, 70.0], [80.0, 90.0]]) + rng.normal(0, 1, (3, 2))
    m = pj.Measurement(("a", "b"), y, stddev=1.0)
    with pytest.warns(UserWarning, match=r"puts \d+\.\d+ records on cells that Constraint.forbid"):
        model = pj.estimate(DOM, [m], iters=200, constraints=[CONSTRAINTS[0]])
    [found] = model.info["forbidden_mass"]
    assert found.clique == ("a", "b") and found.mass == pytest.approx(y[0, 1]) and found.stddev == pytest.approx(1.0)
    assert found.contradicts
    y[0, 1] = 0.5  # within the noise: reported, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = pj.estimate(DOM, [pj.Measurement(("a", "b"), y, stddev=1.0)], iters=200, constraints=[CONSTRAINTS[0]])
    assert not model.info["forbidden_mass"][0].contradicts


@pytest.mark.parametrize("build,message", [
    (lambda: pj.Constraint.forbid(("a",), [(0,)]), "two or more distinct attributes"),
    (lambda: pj.Constraint.forbid(("a", "a"), [(0, 0)]), "two or more distinct attributes"),
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
