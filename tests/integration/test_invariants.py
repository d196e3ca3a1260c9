"""Invariants every engine change must keep (issue 40), checked against float64 references on the full table.

Property-based (hypothesis, derandomised) over random loopy models (cycles, grids and random graphs of 4 to
10 attributes of sizes 2 to 6; full tables of at most :data:`MAX_CELLS` cells so that the references are exact
and cheap), random measurement sets (identity, prefix and Kronecker queries; L2 and L1 losses; scalar and
per-row noise) and all three methods, in float32 (the default):

1. **Maximum entropy.** The model's unmeasured marginals are within 1e-3 L1/N of the maximum-entropy
   distribution with the fit's own measured clique marginals (IPF on the full table, float64), at 20,000
   iterations for some cases of every method. This holds at any iteration count: it is what the paper's
   estimator returns (ICML 2019, Section 3), whether or not the loss has converged.
2. **Optimality.** After 20,000 iterations the loss of the model's potentials is within 1e-4 relative of
   its minimum over the marginal polytope (a float64 solve on the full table,
   :func:`maxent_reference.optimum`), or, for a method that converges more slowly than that in any
   precision, no more than 1e-4 further from it than the same fit in float64 (:data:`LOSS_REGIME`: where
   float32 can resolve 1e-4 of the loss, optimum inside the polytope).
3. **One source of truth.** Save then load answers every marginal bit for bit.
4. **Batches.** A member of :func:`pgmjax.estimate_batch` answers as its sequential :func:`pgmjax.estimate`
   to :data:`BATCH_TOL` (the reasons it is not bit for bit are there).
5. **Warm starts.** A warm start from a converged model moves no answer by more than :data:`WARM_TOL` and
   does not raise the loss (beyond float32's resolution of it, 1e-5).
6. **Constraints.** With random forbidden cells and functional dependencies (:class:`pgmjax.Constraint`),
   every method in float32 at 20,000 iterations keeps each forbidden cell at exactly zero, answers no NaN,
   and its unmeasured answers are the constrained maximum-entropy ones (IPF on the allowed cells).

Before the fix of issue 40 (d59866c) 12 of the 14 tests failed (all but dual averaging's maximum entropy and
save/load); the numbers are in the assertion messages and, with ``-s``, printed for every example. The two L1
cases of the loss check came later: float32 mirror descent ended 7.4e-4 and L-BFGS 2.8e-4 above the optimum
on their examples until the L1 smoothing stages restarted from log-conditional potentials and L-BFGS's
stalled last stage went to mirror descent (now 3.0e-5 and 1.1e-5).

Every example compiles its own programs (its queries' shapes differ), so ``max_examples`` stays small; the
iterations themselves cost microseconds on these tables. The long fits are shared: save/load (3) is checked on
the maximum-entropy test's fits, warm starts (5) on the loss test's converged L2 fits.
"""

import itertools
import weakref

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

import pgmjax as pj
from maxent_reference import distribution, ipf, l1_over_n, loss_value, optimum, project

#: Largest full table drawn (cells): IPF and the float64 optimum work on the full table.
MAX_CELLS = 2048
#: Iterations of the long runs (the issue's drift grew with them: 0.15 L1/N at 20,000 before the fix).
LONG = 20_000
#: Iterations per compiled call: the fits are microseconds per iteration, so few calls keep them cheap.
CHUNK = 1000
METHODS = ("mirror_descent", "lbfgs", "dual_averaging")

# No shrinking: every example is a fresh compile and a long fit, and the failing example's numbers are in the
# assertion message already.
SETTINGS = dict(derandomize=True, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])


# ---------------------------------------------------------------------------------------------- problems
@st.composite
def loopy_structures(draw):
    """``(attrs, sizes, cliques)``: a cycle, a 2-row (or 3x3) grid or a random graph with a cycle."""
    kind = draw(st.sampled_from(["cycle", "grid", "random"]))
    n = draw(st.integers(4, 10))
    if kind == "grid":
        rows = 3 if n == 9 else 2
        n = n - n % rows
        cols = n // rows
        idx = lambda r, c: r * cols + c  # noqa: E731
        edges = [(idx(r, c), idx(r, c + 1)) for r in range(rows) for c in range(cols - 1)]
        edges += [(idx(r, c), idx(r + 1, c)) for r in range(rows - 1) for c in range(cols)]
    elif kind == "cycle":
        edges = [(i, (i + 1) % n) for i in range(n)]
    else:
        # A cycle through the first k attributes (the model is loopy) and random further edges, each new
        # attribute joined to an earlier one (connected), plus random chords.
        k = draw(st.integers(3, min(n, 5)))
        edges = [(i, (i + 1) % k) for i in range(k)]
        edges += [(draw(st.integers(0, i - 1)), i) for i in range(k, n)]
        chords = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3))
        edges += [tuple(sorted(c)) for c in chords if c[0] != c[1]]
    edges = sorted({tuple(sorted(e)) for e in edges})
    sizes = draw(st.lists(st.integers(2, 6), min_size=n, max_size=n))
    while np.prod(sizes) > MAX_CELLS:  # shrink the largest attribute until the full table is small
        sizes[int(np.argmax(sizes))] -= 1
    attrs = [f"x{i}" for i in range(n)]
    cliques = [(attrs[a], attrs[b]) for a, b in edges]
    return attrs, [int(s) for s in sizes], cliques


def _prefix(k):
    return np.tril(np.ones((k, k)))


def support_of(constraints, attrs, sizes) -> np.ndarray:
    """The full table's allowed cells under ``constraints``."""
    domain = pj.Domain(dict(zip(attrs, sizes)))
    ok = np.ones(sizes, bool)
    for con in constraints:
        axes = [attrs.index(a) for a in con.attributes]
        shape = [sizes[i] if i in axes else 1 for i in range(len(attrs))]
        ok &= np.transpose(con.allowed(domain), np.argsort(axes)).reshape(shape)
    return ok


@st.composite
def constraint_sets(draw, attrs, sizes):
    """One to three constraints: forbidden cells of a random pair (never a whole value of either attribute), and
    maybe a functional dependency between two other attributes (an onto map, so every target value stays)."""
    n = len(attrs)
    i, j = sorted(draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True)))
    cells = list(itertools.product(range(sizes[i]), range(sizes[j])))
    forbidden = draw(st.lists(st.sampled_from(cells), min_size=1, max_size=min(3, sizes[i] + sizes[j] - 3), unique=True))
    # keep every value of each attribute possible somewhere
    forbidden = [f for f in forbidden if sum(g[0] == f[0] for g in forbidden) < sizes[j]
                 and sum(g[1] == f[1] for g in forbidden) < sizes[i]]
    assume(forbidden)
    out = [pj.Constraint.forbid((attrs[i], attrs[j]), forbidden)]
    rest = [k for k in range(n) if k not in (i, j)]
    if draw(st.sampled_from([True, False])) and len(rest) >= 2:  # True first: the first example has a dependency
        pair = draw(st.lists(st.sampled_from(rest), min_size=2, max_size=2, unique=True))
        src, dst = sorted(pair, key=lambda k: -sizes[k])  # an onto map needs the source at least as large
        mapping = [v % sizes[dst] for v in range(sizes[src])]
        out.append(pj.Constraint.determines(attrs[src], attrs[dst], mapping))
    return out


@st.composite
def problems(draw, losses=("l2", "l1"), records=(500, 20_000), sigmas=(1.0, 3.0, 10.0), alpha=0.5, constrained=False):
    """A loopy model's data and noisy measurements; returns a dict (see the keys below).

    Args:
        losses: the losses to draw from.
        records: the range the record count is drawn from.
        sigmas: the noise scales drawn from (each measurement its own; per-row noise varies around it).
        alpha: the records come from a Dirichlet(alpha) full table (0.5: skewed, some cells nearly empty).
        constrained: draw constraints too (:func:`constraint_sets`, key ``"constraints"``): the records lie on
            the allowed cells only.
    """
    attrs, sizes, cliques = draw(loopy_structures())
    constraints = draw(constraint_sets(attrs, sizes)) if constrained else []
    seed = draw(st.integers(0, 2**16))
    loss = draw(st.sampled_from(losses))
    rng = np.random.default_rng(seed)
    records = int(rng.integers(*records))
    p = rng.dirichlet(alpha * np.ones(int(np.prod(sizes)))).reshape(sizes)
    if constraints:
        p = np.where(support_of(constraints, attrs, sizes), p, 0.0)
        p /= p.sum()
    counts = rng.multinomial(records, p.ravel()).reshape(sizes).astype(np.float64)
    measurements = []
    for c in cliques:
        shape = [sizes[attrs.index(a)] for a in c]
        kind = draw(st.sampled_from(["identity", "prefix", "kron"]))
        if kind == "identity":
            query = None
            q = np.eye(int(np.prod(shape)))
        elif kind == "prefix":  # a dense (rows, cells) matrix: the CDF over both attributes
            query = np.kron(_prefix(shape[0]), _prefix(shape[1]))
            q = query
        else:  # Kronecker factors: a prefix on one attribute, identity or total on the other
            other = draw(st.sampled_from(["identity", "total"]))
            second = np.eye(shape[1]) if other == "identity" else np.ones((1, shape[1]))
            query = (_prefix(shape[0]), second)
            q = np.kron(*query)
        rows = q.shape[0]
        sigma = float(draw(st.sampled_from(sigmas)))
        per_row = draw(st.booleans())
        stddev = sigma * rng.uniform(0.5, 2.0, rows) if per_row else sigma
        scale = np.asarray(stddev) if loss == "l2" else np.asarray(stddev) / np.sqrt(2)
        noise = rng.normal(0, 1, rows) * scale if loss == "l2" else rng.laplace(0, 1, rows) * scale
        y = q @ project(counts, attrs, c).ravel() + noise
        measurements.append((c, y, stddev, query))
    return {"attrs": attrs, "sizes": sizes, "cliques": cliques, "records": records, "loss": loss,
            "measurements": measurements, "domain": pj.Domain(dict(zip(attrs, sizes))), "constraints": constraints}


def _pj_measurements(problem):
    return [pj.Measurement(c, y, stddev=s, query=q) for c, y, s, q in problem["measurements"]]


#: Each model :func:`_fit` returned -> its fit's :class:`pgmjax.FitReport`, for the warm start of invariant 5
#: (:func:`_check_warm_start`), which continues from the fit's last step size. Kept beside the model, not returned
#: with it, so that the tests' own source stays as it was: hypothesis derives a derandomised test's seed from its
#: source, and a rewritten test body would draw other problems.
_REPORTS: "weakref.WeakKeyDictionary[pj.GraphicalModel, pj.FitReport]" = weakref.WeakKeyDictionary()


def _fit(problem, method, iters, dtype=jnp.float32, **kw):
    model, report = pj.estimate(problem["domain"], _pj_measurements(problem), method=method, iters=iters,
                                loss=problem["loss"], chunk=min(CHUNK, iters), dtype=dtype, report=True, **kw)
    _REPORTS[model] = report
    return model


def _unmeasured(problem):
    """The answers to check: every unmeasured pair, up to four triples, and the full table."""
    attrs, measured = problem["attrs"], {frozenset(c) for c in problem["cliques"]}
    pairs = [c for c in itertools.combinations(attrs, 2) if frozenset(c) not in measured]
    triples = list(itertools.combinations(attrs, 3))
    step = max(1, len(triples) // 4)
    return pairs + triples[::step][:4] + [tuple(attrs)]


def _maxent_distance(model, problem):
    """Worst L1/N distance of the model's unmeasured answers from the max-ent distribution with its own
    measured clique marginals (on the allowed cells where the problem has constraints), and the answer it was
    found on."""
    attrs, sizes = problem["attrs"], problem["sizes"]
    ok = support_of(problem["constraints"], attrs, sizes) if problem["constraints"] else None
    ref = ipf(attrs, sizes, {c: model.marginal(c) for c in problem["cliques"]}, support=ok)
    n = float(model.total)
    return max((l1_over_n(model.marginal(a), n * project(ref, attrs, a), n), a) for a in _unmeasured(problem))


# ---------------------------------------------------------------------------------------------- 1. max-ent
@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=5, **SETTINGS)
@given(data=st.data())
def test_unmeasured_answers_are_maximum_entropy_at_long_runs(method, data, tmp_path_factory):
    """Invariants 1 and 3 on one long fit: its unmeasured answers are the maximum-entropy ones, and the model saved
    and loaded answers every marginal bit for bit (:func:`_check_save_load`)."""
    problem = data.draw(problems(losses=("l2",) if method == "dual_averaging" else ("l2", "l1")))
    model = _fit(problem, method, LONG)
    dist, where = _maxent_distance(model, problem)
    print(f"maxent [{method}, {problem['loss']}, {len(problem['attrs'])} attrs, {np.prod(problem['sizes'])} cells]: "
          f"{dist:.3g} L1/N on {where}")
    assert dist < 1e-3, f"{method}, {problem['loss']}, {LONG} its: {where} is {dist:.3g} L1/N from maximum entropy"
    _check_save_load(model, problem, method, tmp_path_factory)


# ---------------------------------------------------------------------------------------------- 2. optimality
#: The loss check's regime (also the batch and warm-start checks', which need converged fits): records,
#: noise scales and data for which the optimum is well inside the marginal polytope and float32 can resolve
#: 1e-4 of the loss. A float32 marginal cell of c counts is rounded by about c * 6e-8, which moves an L2
#: loss of about one half per row by up to 6e-8 * N * |r| / sigma: 1e-4 relative needs N / sigma below a
#: few hundred. Past that the fit's own float32 loss is noise at the 1e-4 level: in a 4-cycle with
#: N = 17,088 and sigma = 1 (an example this file once drew), a fit's float32 loss read 1.96166 where its
#: exact value was 1.96505 and the optimum 1.96265, and 50,000 iterations ended where 5,000 had. An optimum
#: on the boundary (a zero cell) has infinite potentials, and every method, float64 too, approaches it
#: slowly (float64 dual averaging 1.5e-3 above it at 20,000 iterations): such draws are rejected.
LOSS_REGIME = dict(records=(2000, 3000), sigmas=(10.0, 20.0), alpha=3.0)


@pytest.mark.parametrize("method, loss", [
    ("mirror_descent", "l2"), ("lbfgs", "l2"),
    ("mirror_descent", "l1"), ("lbfgs", "l1"),
    ("dual_averaging", "l2"),
])
@settings(max_examples=3, **SETTINGS)
@given(data=st.data())
def test_loss_within_1e_4_of_the_float64_optimum(method, loss, data):
    problem = data.draw(problems(losses=(loss,), **LOSS_REGIME))
    # The float64 minimum over the polytope scaled by the record count (given to the fit too).
    n = float(problem["records"])
    best, at = optimum(problem["attrs"], problem["sizes"], problem["measurements"], n, problem["loss"])
    assume(min(float(m.min()) for m in at.values()) > 1.0)
    model = _fit(problem, method, LONG, total=n)
    # The loss of the model's potentials evaluated exactly (float64 on the full table): what the fit found,
    # apart from the rounding of the float32 answers (printed beside it).
    p = distribution(model.potentials, problem["attrs"], problem["sizes"])
    got = loss_value({c: n * project(p, problem["attrs"], c) for c in problem["cliques"]}, problem["measurements"],
                     problem["loss"])
    answered = loss_value({c: model.marginal(c) for c in problem["cliques"]}, problem["measurements"], problem["loss"])
    rel = (got - best) / best
    assert rel > -1e-6, f"the reference optimum {best:.8g} is above the fit's loss {got:.8g}: reference not converged"
    # A method that converges slowly (dual averaging; the L1 loss's smoothing stages) may be short of 1e-4 after
    # LONG iterations in any precision: then float32 must be no further from the optimum than the same fit in
    # float64 (plus 1e-4), that is, precision costs nothing. Fitted only when needed (a compile and a fit).
    rel64 = None
    if rel >= 1e-4:
        m64 = _fit(problem, method, LONG, total=n, dtype=jnp.float64)
        p64 = distribution(m64.potentials, problem["attrs"], problem["sizes"])
        rel64 = (loss_value({c: n * project(p64, problem["attrs"], c) for c in problem["cliques"]},
                            problem["measurements"], problem["loss"]) - best) / best
    print(f"loss [{method}, {problem['loss']}, {len(problem['attrs'])} attrs, N {n:.0f}]: {got:.8g} / optimum {best:.8g} "
          f"= 1 + {rel:.3g} (answers' own: 1 + {(answered - best) / best:.3g})"
          + ("" if rel64 is None else f"; float64, same iterations: 1 + {rel64:.3g}"))
    assert rel < 1e-4 or rel < rel64 + 1e-4, (
        f"{method}, {problem['loss']}, {LONG} its: loss {got:.8g} against the optimum {best:.8g} ({rel:.3g} "
        f"relative; the same fit in float64: {rel64:.3g})")
    # Invariant 5 on the same fit where it is converged (a fit of its own would double the cost); a draw the method
    # has not converged on in any precision (rel64 above) has something left to improve.
    if problem["loss"] == "l2" and rel < 1e-4:
        _check_warm_start(model, problem, method, total=n)


# ---------------------------------------------------------------------------------------------- 3. save/load
def _check_save_load(model, problem, method, tmp_path_factory):
    """Save then load answers every marginal bit for bit: every measured clique, model clique and unmeasured answer.
    Checked on the maximum-entropy test's long fits (a fit of its own per example would double their cost)."""
    loaded = pj.load_model(model.save(str(tmp_path_factory.mktemp("model") / "m")))
    assert loaded.total == model.total
    diffs = {attrs: float(np.abs(model.marginal(attrs) - loaded.marginal(attrs)).max())
             for attrs in [*problem["cliques"], *model.cliques, *_unmeasured(problem)]}
    print(f"save/load [{method}, {len(problem['attrs'])} attrs]: largest cell difference {max(diffs.values()):.3g} "
          f"counts of {float(model.total):.0f}")
    for attrs in diffs:
        a, b = model.marginal(attrs), loaded.marginal(attrs)
        assert np.array_equal(a, b), f"{method}: {attrs} differs by up to {np.abs(a - b).max():.3g} after load"


# ---------------------------------------------------------------------------------------------- 4. batches
#: Tolerance of a batch member against its sequential fit, L1/N over every model clique and the unmeasured
#: answers. Bit for bit is not achievable in general: the member runs the same float32 steps vectorised, and
#: XLA orders some vectorised reductions differently, so the two differ by rounding from the first step;
#: mirror descent's line search then takes different steps, and dual averaging returns the best of its
#: iterates within a relative loss tie of 1e-5 (a choice rounding can flip, along directions the loss
#: barely sees). Both stay at the optimum, so what they answer agrees to the suite's accuracy, 1e-3; where
#: nothing flips they agree to float64 rounding (1e-16, seen here on the smallest draws).
BATCH_TOL = 1e-3
BATCH_ITERS = 5000


@pytest.mark.parametrize("method", ["mirror_descent", "dual_averaging"])
@settings(max_examples=2, **SETTINGS)
@given(data=st.data())
def test_batch_member_equals_its_sequential_fit(method, data):
    """Each member of a batch follows its own sequential trajectory (the estimators' pure ``step`` mapped with
    ``jax.vmap``), but XLA may order a vectorised reduction differently, so float32 results agree to rounding
    that the trajectory then carries; at a converged, maximum-entropy fit that rounding no longer grows."""
    problem = data.draw(problems(losses=("l2",), **LOSS_REGIME))
    rng = np.random.default_rng(len(problem["attrs"]))
    members = [problem] + [
        {**problem, "measurements": [(c, y + rng.normal(0, 1, np.shape(y)), s, q) for c, y, s, q in problem["measurements"]]}
        for _ in range(2)]
    batch = pj.estimate_batch(problem["domain"], [_pj_measurements(m) for m in members], method=method, iters=BATCH_ITERS,
                              chunk=CHUNK, dtype=jnp.float32)
    for i, m in enumerate(members):
        seq, mem = _fit(m, method, BATCH_ITERS), batch.member(i)
        n = float(seq.total)
        worst = max(l1_over_n(mem.marginal(a), seq.marginal(a), n) for a in [*seq.cliques, *_unmeasured(problem)])
        print(f"batch [{method}, {len(problem['attrs'])} attrs]: member {i} vs sequential {worst:.3g} L1/N")
        assert worst < BATCH_TOL, f"{method}: member {i} differs from its sequential fit by {worst:.3g} L1/N"


# ---------------------------------------------------------------------------------------------- 5. warm starts
#: Iterations of the warm-started fit, and how far its answers may move from the converged model's (L1/N).
#: 1e-3, the suite's accuracy (as BATCH_TOL and the maximum-entropy check), not 1e-4: where the loss is
#: nearly flat along some direction (prefix and "total" queries at sigma 10 to 20), answers that move by
#: 1e-4 change the loss by less than float32 resolves of it (1e-5, LOSS_REGIME). Measured on a 9-attribute
#: draw: float32 mirror descent at 20,000 iterations was 2.9e-6 (relative) above the optimum, and 2,000 warm
#: iterations lowered that to 2.7e-7 (float64 loss of both models) while its full table moved 1.5e-4 L1/N:
#: genuine progress, not wandering (float64, same method: moved 9e-11). The drift of issue 40 moved
#: answers by 0.17 L1/N.
WARM_ITERS = 2000
WARM_TOL = 1e-3


def _check_warm_start(model, problem, method, **kw):
    """From a model at the optimum (LONG iterations, an interior optimum: :data:`LOSS_REGIME`), more
    iterations have nothing to improve: the answers stay (the drift of issue 40 moved them by 0.17 L1/N) and
    the loss does not rise. Checked on the loss test's converged L2 fits (every method), warm-started from the
    model's :class:`pgmjax.Fit` (its potentials and the step size its report ends at, see :func:`_fit`)."""
    again = _fit(problem, method, WARM_ITERS, warm_start=pj.Fit(model, _REPORTS[model]), **kw)
    n = float(model.total)
    attrs, sizes = problem["attrs"], problem["sizes"]
    before, after = (loss_value({c: n * project(distribution(m.potentials, attrs, sizes), attrs, c)
                                 for c in problem["cliques"]}, problem["measurements"]) for m in (model, again))
    worst = max((l1_over_n(again.marginal(a), model.marginal(a), n), a)
                for a in [*problem["cliques"], *_unmeasured(problem)])
    print(f"warm start [{method}, {len(attrs)} attrs]: moved {worst[1]} by {worst[0]:.3g} L1/N; "
          f"loss {before:.8g} -> {after:.8g}")
    # 1e-5: the float32 loss's own resolution in this regime (see LOSS_REGIME), at which fits choose iterates.
    assert after <= before * (1 + 1e-5), f"{method}: a warm start raised the loss from {before:.8g} to {after:.8g}"
    assert worst[0] < WARM_TOL, f"{method}: a warm start moved {worst[1]} by {worst[0]:.3g} L1/N"


# ---------------------------------------------------------------------------------------------- 6. constraints
@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=2, **SETTINGS)
@given(data=st.data())
def test_constrained_fits_keep_forbidden_cells_at_zero_and_maximum_entropy_at_long_runs(method, data):
    problem = data.draw(problems(losses=("l2",) if method == "dual_averaging" else ("l2", "l1"), constrained=True))
    model = _fit(problem, method, LONG, constraints=problem["constraints"])
    attrs, sizes = problem["attrs"], problem["sizes"]
    table = np.asarray(model.marginal(tuple(attrs)), np.float64)
    ok = support_of(problem["constraints"], attrs, sizes)
    assert np.isfinite(table).all(), f"{method}: the constrained fit answers a non-finite cell"
    assert (table[~ok] == 0).all(), f"{method}: a forbidden cell holds {table[~ok].max():.3g} records"
    for con in problem["constraints"]:  # the constraint's own marginal, as a user asks it
        answer = np.asarray(model.marginal(con.attributes))
        assert (answer[~con.allowed(problem["domain"])] == 0).all(), f"{method}: {con} broken in its marginal"
    dist, where = _maxent_distance(model, problem)
    print(f"constrained maxent [{method}, {problem['loss']}, {len(attrs)} attrs, {(~ok).sum()} of {ok.size} cells "
          f"forbidden, {[c.kind for c in problem['constraints']]}]: {dist:.3g} L1/N on {where}")
    assert dist < 1e-3, f"{method}, {problem['loss']}, {LONG} its: {where} is {dist:.3g} L1/N from constrained max-ent"
