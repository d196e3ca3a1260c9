"""The original arms' estimates answer queries like a model does (checked against the full table)."""

import numpy as np
import pytest

import pgmjax as pj
from pgmjax import queries as Q
from pgmjax.mechanisms.original_estimates import CliqueTables, FactoredTable


def test_factored_table_equals_its_full_table(rng):
    dom = pj.Domain({"a": 2, "b": 3, "c": 2, "d": 4})
    t1, t2 = rng.random((2, 3)), rng.random((4, 2))
    est = FactoredTable(dom, {("a", "b"): t1, ("d", "c"): t2}, 10.0)
    full = 10.0 * np.einsum("ab,dc->abcd", t1 / t1.sum(), t2 / t2.sum())
    for attrs in [("c", "a"), ("b",), ("d", "b", "a"), ()]:
        want = full.sum(axis=tuple(i for i, a in enumerate("abcd") if a not in attrs))
        kept = [a for a in "abcd" if a in attrs]
        want = np.transpose(want, [kept.index(a) for a in attrs]) if attrs else want
        np.testing.assert_allclose(est.marginal(attrs), want, rtol=1e-12)
    w = pj.Workload.benchmark(dom, [("a", "b", "d")], numeric=["b", "d"])
    want = Q.kron_apply(full.sum(axis=2), [None, Q.Prefix().matrix(3), Q.Prefix().matrix(4)])
    np.testing.assert_allclose(w.answer(est)[0], want, rtol=1e-12)


def test_factored_table_unmeasured_attributes_are_uniform():
    dom = pj.Domain({"a": 2, "b": 4})
    est = FactoredTable(dom, {("a",): np.array([1.0, 3.0])}, 8.0)
    np.testing.assert_allclose(est.marginal("b"), [2.0, 2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="overlap"):
        FactoredTable(dom, {("a",): np.ones(2), ("a", "b"): np.ones((2, 4))}, 1.0)


def test_clique_tables_answer_from_a_covering_clique(rng):
    dom = pj.Domain({"a": 2, "b": 3, "c": 2})
    t = rng.normal(size=(3, 2))  # least-squares estimates may be negative
    est = CliqueTables(dom, {("b", "a"): t}, 5.0)
    np.testing.assert_allclose(est.marginal(("a", "b")), t.T)
    np.testing.assert_allclose(est.answers([{"b": Q.Prefix()}])[0], np.cumsum(t.sum(1)))
    with pytest.raises(ValueError, match="no estimated clique covers"):
        est.marginal(("a", "c"))
