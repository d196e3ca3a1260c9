"""PrivBayes at a huge budget: the model is bounded before it is allocated (issue 15).

At epsilon = 1e6 the usefulness rule allows tables of ``max_cells`` (1e7) cells; on a 2,000-row table
with a 501-value attribute GreedyBayes then picks a network whose tables are each under 1e7 cells but
whose junction tree (what the engine allocates) has billions of cells: the old code grew to 24 GB
and was killed. ``max_model_mb`` now bounds the junction tree of the network as it is built.

The memory test runs PrivBayes in a fresh process and reads its peak RSS (``resource.getrusage``).
"""

import importlib
import json
import math
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.graph.junction import junction_tree, maximal_cliques
from pgmjax.privacy import Accountant

PB = importlib.import_module("pgmjax.mechanisms.bayesian_network")  # pgmjax.mechanisms.privbayes is the function
from pgmjax.mechanisms.bayesian_network.network_search import model_cells  # noqa: E402
from pgmjax.mechanisms.bayesian_network.scores import sparse_quality  # noqa: E402


def _wide(sizes, n=2000, seed=0):
    """``n`` records of integer-coded attributes (payroll-like: one 501-value name), each half copied from the previous."""
    rng = np.random.default_rng(seed)
    cols = [rng.integers(0, s, n) for s in sizes]
    for i in range(1, len(sizes)):
        cols[i] = np.where(rng.random(n) < 0.5, (cols[i - 1] * 3) % sizes[i], cols[i])
    return pj.Dataset(np.stack(cols, 1), {f"c{i}": s for i, s in enumerate(sizes)})


WIDE = [501, 120, 60, 50, 30, 20, 12, 7, 5, 3, 2, 2]  # 12 attributes, domain sizes up to 501


def _tree_cells(domain, network):
    tree = junction_tree(domain, maximal_cliques(domain, [(x, *p) for x, p in network]))
    return sum(domain.size(c) for c in tree.cliques)


@pytest.fixture(scope="module")
def wide():
    return _wide(WIDE)


def test_sparse_scores_equal_the_dense_ones():
    # Tables far larger than 4 N take the sparse path; it must give the dense score to rounding.
    data = _wide([40, 30, 20, 6, 2], n=300, seed=3)
    for child, parents in [("c0", ("c1", "c2")), ("c3", ("c0", "c1")), ("c4", ("c0", "c1", "c2")), ("c1", ())]:
        joint = data.marginal((child, *parents))
        for score, bounded in [("R", True), ("R", False), ("I", True)]:
            dense = PB.score_quality(joint, score, bounded)
            sparse = sparse_quality(data, child, parents, score, bounded)
            assert sparse == pytest.approx(dense, rel=1e-10, abs=1e-13), (child, parents, score, bounded)


def test_unbounded_network_triangulates_into_billions_of_cells(wide):
    # The regression's cause: every table is under the cell cap, the junction tree is not.
    net, _ = PB.greedy_bayes(wide, Accountant(epsilon=1e6), jax.random.key(0), 3e5, cap=10**7, max_model_cells=None)
    assert max(wide.domain.size((x, *p)) for x, p in net) <= 10**7
    assert _tree_cells(wide.domain, net) > 10**9


@pytest.mark.parametrize("budget", [200_000, 3_000_000])
def test_network_stays_within_the_model_budget(wide, budget):
    acc = Accountant(epsilon=1e6)
    net, steps = PB.greedy_bayes(wide, acc, jax.random.key(0), 3e5, cap=10**7, max_model_cells=budget)
    assert sorted(x for x, _ in net) == sorted(wide.domain.attributes)
    assert _tree_cells(wide.domain, net) <= budget
    assert model_cells(wide.domain, net) <= budget
    assert len(acc.ledger) == len(WIDE) - 1  # one selection per step, whatever was filtered
    # the budget binds: some step had to halve its cap or drop candidates, and edges remain
    assert any(len(p) >= 2 for _, p in net)


def test_refused_with_a_message_when_nothing_fits(wide):
    with pytest.raises(ValueError, match="max_model_mb"):
        PB.privbayes(wide, 1e6, key=jax.random.key(0), max_model_mb=0.0008, engine_iters=0)


def test_bad_memory_limit_refused(wide):
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="max_model_mb"):
            PB.privbayes(wide, 1.0, key=jax.random.key(0), max_model_mb=bad)


_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np, jax
    import importlib, importlib.util
    spec = importlib.util.spec_from_file_location("privbayes_extremes", {here!r})
    extremes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extremes)  # this file, for its table maker (no sys.path edit)
    _wide = extremes._wide
    PB = importlib.import_module("pgmjax.mechanisms.bayesian_network")
    data = _wide({sizes!r})
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {{}}
    for eps in (1e6, 100.0):
        res = PB.privbayes(data, eps, key=jax.random.key(1), max_model_mb={mb!r}, engine_iters=5)
        sums = [float(res.model.marginal((a,)).sum()) for a in data.domain.attributes]
        out[str(eps)] = {{"model_cells": res.info.model_cells, "max_model_cells": res.info.max_model_cells,
                          "total": float(res.model.total), "sums": sums, "rows": len(res.original)}}
    out["base_mb"] = base / 1024
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT" + json.dumps(out))
    """
)

MODEL_MB = 1.28  # the model-size cap given to the run (8 bytes per cell): a fit of about 16 MB at ~100 bytes per cell
GROWTH_BOUND_MB = 768  # stated bound on the peak RSS growth after import (compilation included)


@pytest.mark.slow  # a long check: python -m pytest -m slow (tests/README.md)
def test_huge_epsilon_runs_within_a_memory_bound():
    # 8 attributes: unbounded, the network's tree has 3.7e7 cells (about 3.6 GB at the engine's
    # ~100 bytes per cell); with max_model_mb=1.28 it is held to 1.7e5 cells.
    sizes = [501, 100, 50, 30, 20, 10, 5, 2]
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, XLA_FLAGS=os.environ.get("XLA_FLAGS", "--xla_backend_optimization_level=0"))
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(here=os.path.abspath(__file__), sizes=sizes, mb=MODEL_MB)],
        capture_output=True, text=True, timeout=600, env=env, cwd=os.path.dirname(os.path.dirname(tests)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT")[-1])
    for eps in ("1000000.0", "100.0"):
        r = out[eps]
        assert r["model_cells"] <= r["max_model_cells"] == int(MODEL_MB * 2**20 / 8)
        assert r["rows"] >= 1
        # a consistent model: every one-way marginal sums to the total
        assert np.allclose(r["sums"], r["total"], rtol=1e-4), r
    assert out["peak_mb"] - out["base_mb"] <= GROWTH_BOUND_MB, out
