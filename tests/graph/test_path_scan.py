"""The path scan (pgmjax.graph.path_scan): the dense oracle with long paths passed by a scan gives the level loop's
marginals and log Z (float64 to rounding, float32 to float32's precision against a float64 reference, structural zeros
and extreme potentials included), its gradient, and a program whose size does not grow with the tree's depth."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.data.domain import Domain
from pgmjax.estimation import oracles
from pgmjax.graph import oracle, path_scan


def chain(d, k=3, width=3):
    dom = Domain({f"a{i:03d}": k for i in range(d)})
    return dom, [tuple(f"a{j:03d}" for j in range(i, i + width)) for i in range(d - width + 1)]


def spider(lengths, k=3):
    """Legs of pairs from one centre: paths of different lengths in one run (padding slots where legs end)."""
    attrs, cliques = {"c": k}, []
    for i, n in enumerate(lengths):
        prev = "c"
        for j in range(n):
            a = f"l{i}_{j:03d}"
            attrs[a] = k
            cliques.append((prev, a))
            prev = a
    return Domain(attrs), cliques


def potentials(plan, seed, scale=3.0, zeros=0.0):
    rng = np.random.default_rng(seed)
    out = {}
    for key, shape in plan.units:
        t = rng.normal(size=shape) * scale
        out[key] = np.where(rng.random(size=shape) < zeros, -np.inf, t)
    return out


def both(dom, cliques):
    dense, paths = oracle.make_plan(dom, cliques), oracle.make_plan(dom, cliques, paths=True)
    assert path_scan.scanned_runs(dense), "the structure should have a run the scan passes"
    return dense, paths


CASES = [
    ("chain of triples, two arms", lambda: chain(41)),
    ("chain of pairs, uneven arms", lambda: chain(40, k=4, width=2)),
    ("spider with legs of 20, 25 and 30", lambda: spider([20, 25, 30])),
    ("spider with four uneven legs", lambda: spider([30, 31, 17, 40], k=2)),
]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_paths_give_the_level_loops_marginals_in_float64(name, make):
    dense, paths = both(*make())
    th = {k: jnp.asarray(v, jnp.float64) for k, v in potentials(dense, 0, zeros=0.2).items()}
    m0, z0 = jax.jit(oracle.marginals)(dense, th, 1000.0)
    m1, z1 = jax.jit(oracle.marginals)(paths, th, 1000.0)
    assert float(z1) == pytest.approx(float(z0), rel=1e-12)
    for k in m0:
        np.testing.assert_allclose(np.asarray(m1[k]), np.asarray(m0[k]), rtol=1e-9, atol=1e-9)
        assert np.array_equal(np.asarray(m1[k]) == 0, np.asarray(m0[k]) == 0), "structural zeros must be the same"


@pytest.mark.parametrize("scale", [pytest.param(3.0, marks=pytest.mark.slow), 30.0])  # 3.0: a second parametrisation
def test_paths_in_float32_match_a_float64_reference_with_extreme_potentials_and_zeros(scale):
    """Potentials of +-90 nats beside structural zeros: the fast product's terms underflow in float32 and the product
    is taken term by term (the level loop's float32 error is the yardstick)."""
    dense, paths = both(*spider([30, 31, 17, 40]))
    th = potentials(dense, 1, scale=scale, zeros=0.3)
    ref, zr = jax.jit(oracle.marginals)(dense, {k: jnp.asarray(v, jnp.float64) for k, v in th.items()}, 1000.0)
    th32 = {k: jnp.asarray(v, jnp.float32) for k, v in th.items()}
    loop, zl = jax.jit(oracle.marginals)(dense, th32, 1000.0)
    scan, zs = jax.jit(oracle.marginals)(paths, th32, 1000.0)
    loop_err = max(float(np.max(np.abs(np.asarray(loop[k], np.float64) - np.asarray(ref[k])))) for k in ref)
    scan_err = max(float(np.max(np.abs(np.asarray(scan[k], np.float64) - np.asarray(ref[k])))) for k in ref)
    assert scan_err < max(3 * loop_err, 1e-3), (scan_err, loop_err)
    assert abs(float(zs) - float(zr)) < max(3 * abs(float(zl) - float(zr)), 1e-3)
    assert all(np.isfinite(np.asarray(scan[k])).all() for k in scan)


def test_log_matmul_matches_brute_force_with_zeros_and_underflow():
    rng = np.random.default_rng(2)
    b = rng.normal(size=(4, 6, 5)) * 60
    a = rng.normal(size=(4, 5, 7)) * 60
    b[rng.random(b.shape) < 0.3] = -np.inf
    a[rng.random(a.shape) < 0.3] = -np.inf
    with np.errstate(invalid="ignore", divide="ignore"):
        x = b[..., :, :, None] + a[..., None, :, :]
        top = np.max(x, axis=-2, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        want = np.squeeze(top, -2) + np.log(np.sum(np.exp(x - top), axis=-2))
    want = want - np.max(np.where(np.isfinite(want), want, -np.inf), axis=(-2, -1), keepdims=True)
    for dtype in (jnp.float32, jnp.float64):
        got = np.asarray(path_scan.log_matmul(jnp.asarray(b, dtype), jnp.asarray(a, dtype)), np.float64)
        assert np.array_equal(np.isfinite(got), np.isfinite(want)), "the zero pattern must be exact"
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], atol=1e-3 if dtype == jnp.float32 else 1e-9)


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_the_gradient_through_the_path_scan_is_the_level_loops():
    dense, paths = both(*chain(40, k=2, width=2))
    th = {k: jnp.asarray(v, jnp.float64) for k, v in potentials(dense, 3).items()}
    w = {k: jnp.asarray(np.random.default_rng(4).normal(size=v.shape)) for k, v in th.items()}

    def f(plan):
        return jax.grad(lambda t: sum(jnp.sum(w[k] * m) for k, m in oracle.marginals(plan, t, 1.0)[0].items()))(th)

    g0, g1 = f(dense), f(paths)
    for k in g0:
        np.testing.assert_allclose(np.asarray(g1[k]), np.asarray(g0[k]), rtol=1e-8, atol=1e-10)


def test_the_programs_size_does_not_grow_with_the_depth():
    """The scan is one loop of ``log2(depth)`` trips around one product: the lowered program of a chain of 512 is the
    size of a chain of 64's, and its levels are not a loop of their own."""

    def lowered(d):
        plan = oracle.make_plan(*chain(d, k=3, width=2), paths=True)
        return jax.jit(oracle.marginals).lower(plan, plan.zeros(), 1.0).as_text()

    short, deep = lowered(64), lowered(512)
    assert len(deep.splitlines()) == len(short.splitlines())
    dense = oracle.make_plan(*chain(512, k=3, width=2))
    assert "stablehlo.while" in jax.jit(oracle.marginals).lower(dense, dense.zeros(), 1.0).as_text()


def test_estimate_with_paths_fits_the_same_model_and_auto_takes_it_only_on_a_gpu():
    dom, cliques = chain(40, k=3, width=2)
    rng = np.random.default_rng(5)
    ms = [pj.Measurement(c, rng.poisson(30, size=(3, 3)).astype(float), stddev=1.0) for c in cliques]
    dense, dense_report = pj.estimate(dom, ms, iters=200, program="dense", report=True)
    paths, paths_report = pj.estimate(dom, ms, iters=200, program="paths", report=True)
    assert paths.plan.paths and not dense.plan.paths
    assert paths_report.loss == pytest.approx(dense_report.loss, rel=1e-5)
    np.testing.assert_allclose(paths.marginal(("a000", "a039")), dense.marginal(("a000", "a039")), rtol=1e-4, atol=1e-3)
    assert oracles.uses_paths("auto", dom, cliques, platform="gpu")
    assert not oracles.uses_paths("auto", dom, cliques, platform="cpu")
    assert not oracles.uses_paths("auto", dom, cliques[:5], platform="gpu"), "a short chain has no run to scan"
    assert not oracles.uses_paths("auto", *chain(40, k=10), platform="gpu"), "100-cell separators: the loop is faster"
    with pytest.raises(ValueError, match="program='paths' needs the exact oracle"):
        pj.estimate(dom, ms, iters=10, program="paths", oracle="approximate")
