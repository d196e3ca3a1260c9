"""MST when compression collapses attributes to one value: the model stays consistent (sums to its total)."""

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.queries.measurement import Measurement


def test_one_cell_domain_keeps_a_model():
    """A domain of one cell: no step changes the loss, every step passes the line search, and the step size
    used to grow until the potentials overflowed to -inf (marginals exactly 0, total 1)."""
    dom = pj.Domain({"a": 1, "b": 1, "c": 1})
    ms = [Measurement((a,), [-8e4], 1.7e5, np.array([[0.045]])) for a in "abc"]
    model = pj.estimate(dom, ms, iters=600)
    for c in model.cliques:
        assert float(np.asarray(model.marginal(c)).sum()) == pytest.approx(model.total, rel=1e-6)
        assert np.all(np.isfinite(np.asarray(model.potentials[c])))


def test_mst_with_every_attribute_collapsed():
    rng = np.random.default_rng(0)
    sizes = {"first-name": 501, "dept": 30, "title": 120, "gender": 2}
    data = pj.Dataset(np.stack([rng.integers(0, s, 600) for s in sizes.values()], 1), pj.Domain(sizes))
    res = pj.mechanisms.mst(data, 1e-4, key=jax.random.key(0), engine_iters=600, select_iters=600)
    model = res.model
    assert model.domain == data.domain
    for a in sizes:
        table = np.asarray(model.marginal((a,)))
        assert table.shape == (sizes[a],)
        assert table.sum() == pytest.approx(model.total, rel=1e-6)
        assert np.allclose(table, table.mean(), rtol=1e-4)  # collapsed: uniform over the original values
