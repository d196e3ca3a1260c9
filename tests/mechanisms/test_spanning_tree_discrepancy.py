"""MST's final fit and the noise level (issue 42, last item: the Adult gap to mbi).

Given the same measurements, mbi's fit of Adult is 1% better (2-way TVD) than pgmjax's because mbi's float32 line
search stalls short of the L2 optimum: an early stop, and Adult's optimum follows the noise in small cells. Stopping
pgmjax's fit where the standardised residual sum of squares ``2 L`` reaches the number of measured rows (what the true
marginals score in expectation; Morozov's discrepancy principle) is better still on Adult, but worse where the
dependencies are strong (bench/results/mechanisms/mst_accuracy_after_cpu.md): ``spanning_tree.DISCREPANCY`` is an opt-in, off
by default. These tests pin the default (full ``engine_iters``), the opt-in stop, and the counter-example that
keeps it off.
"""

import itertools

import jax
import numpy as np

import pgmjax as pj
from pgmjax.mechanisms import spanning_tree
from pgmjax.model.metrics import marginal_tvd


def _skewed(seed=11, rows=20000, sizes=(12, 30, 8, 40, 6)):
    """A tree-structured table with skewed, strong conditionals (like bench/mst_aim.py's generated table)."""
    rng = np.random.default_rng(seed)
    cols = [rng.choice(sizes[0], rows, p=rng.dirichlet(np.full(sizes[0], 0.3)))]
    for j in range(1, len(sizes)):
        parent = cols[rng.integers(0, j)]
        cpt = rng.dirichlet(np.full(sizes[j], 0.2), size=int(parent.max()) + 1)
        u = rng.random(rows)[:, None]
        cols.append((u > np.cumsum(cpt[parent], axis=1)).sum(1).clip(0, sizes[j] - 1))
    return pj.Dataset(np.stack(cols, 1), pj.Domain({f"c{j}": s for j, s in enumerate(sizes)}))


def _run(data, seed, iters=3000, **kw):
    return pj.mechanisms.mst(data, 1.0, key=jax.random.key(seed), select_iters=500, engine_iters=iters, synthetic=False,
                             **kw)


def test_by_default_the_final_fit_runs_all_its_iterations():
    assert spanning_tree.DISCREPANCY is None
    res = _run(_skewed(), 0)
    two_l, rows = res.info.residual_rows
    assert res.info.fit_iterations == res.info.engine_iters == 3000
    assert rows == sum(m.rows for m in res.measurements)
    assert two_l < 0.7 * rows  # past the noise level: the L2 optimum fits part of the noise
    assert two_l == 2.0 * res.report.loss


def test_the_opt_in_stop_ends_the_fit_at_the_noise_level(monkeypatch):
    data = _skewed()
    full = _run(data, 0)
    monkeypatch.setattr(spanning_tree, "DISCREPANCY", 1.0)
    res = _run(data, 0)
    two_l, rows = res.info.residual_rows
    assert two_l <= rows and res.info.fit_iterations < 3000 and res.info.fit_iterations % 50 == 0
    assert res.info.edges == full.info.edges  # the same releases: only the fit (post-processing) differs
    for m, n in zip(res.measurements, full.measurements):
        np.testing.assert_array_equal(m.y, n.y)
    assert res.accountant.spent == res.accountant.budget and len(res.ledger) == len(full.ledger)


def test_the_stop_is_off_because_it_costs_accuracy_on_strong_dependencies(monkeypatch):
    """The counter-example behind the default: 3 seeds, the stopped fit's 2-way error is higher (here by ~30%)."""
    data = _skewed()
    pairs = list(itertools.combinations(data.domain.attributes, 2))
    full = np.mean([marginal_tvd(data, _run(data, s).model, pairs) for s in range(3)])
    monkeypatch.setattr(spanning_tree, "DISCREPANCY", 1.0)
    stopped = np.mean([marginal_tvd(data, _run(data, s).model, pairs) for s in range(3)])
    assert full < stopped


def test_a_user_callback_is_still_called_and_may_stop_the_fit(monkeypatch):
    monkeypatch.setattr(spanning_tree, "DISCREPANCY", 1.0)
    seen = []

    def callback(info):
        seen.append(info["iteration"])
        return info["iteration"] >= 100

    res = _run(_skewed(), 0, fit_options=pj.FitOptions(callback=callback, chunk=50))
    assert seen and res.info.fit_iterations <= 100


def test_no_stop_for_the_l1_loss(monkeypatch):
    monkeypatch.setattr(spanning_tree, "DISCREPANCY", 1.0)
    data = _skewed(rows=3000, sizes=(4, 5, 3))
    res = _run(data, 0, iters=200, fit_options=pj.FitOptions(loss="l1"))
    assert res.info.fit_iterations == 200
