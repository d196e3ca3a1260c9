"""Domain and Dataset: construction, validation errors, marginal counting."""

import gzip
import json

import numpy as np
import pandas as pd
import pytest

import pgmjax as pj


def test_domain_basics():
    dom = pj.Domain({"age": 85, "sex": 2, "income": 2})
    assert dom.attributes == ("age", "sex", "income")
    assert dom.size(("age", "sex")) == 170
    assert dom.size() == 340
    assert dom.project(("sex", "age")).attributes == ("sex", "age")
    assert dom.canonical({"income", "age"}) == ("age", "income")
    assert pj.Domain(["a", "b"], [2, 3]) == pj.Domain({"a": 2, "b": 3})
    assert hash(pj.Domain({"a": 2})) == hash(pj.Domain({"a": 2}))
    assert pj.Domain({"a": 2}) != pj.Domain({"a": 3})


@pytest.mark.parametrize(
    "args, match",
    [
        ((["a", "a"], [2, 3]), "duplicate attribute name 'a'"),
        (({"a": 0},), "attribute 'a' must have at least 1 value"),
        (({"a": 2.5},), "size of attribute 'a' must be an integer"),
        ((["a"], [2, 3]), "1 attribute names but 2 sizes"),
    ],
)
def test_domain_errors(args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        pj.Domain(*args)


def test_unknown_attribute_in_clique():
    dom = pj.Domain({"a": 2, "b": 2})
    with pytest.raises(ValueError, match="attribute 'zz' is not in the domain"):
        dom.check_clique(("a", "zz"))
    with pytest.raises(ValueError, match="appears more than once"):
        dom.check_clique(("a", "a"))


def test_marginal_counts_match_bruteforce(rng):
    dom = pj.Domain({"a": 3, "b": 4, "c": 2})
    X = rng.integers(0, [3, 4, 2], size=(500, 3))
    data = pj.Dataset(X, dom)
    m = data.marginal(("c", "a"))
    ref = np.zeros((2, 3))
    for row in X:
        ref[row[2], row[0]] += 1
    np.testing.assert_array_equal(m, ref)
    assert m.sum() == 500
    many = data.marginals([("a",), ("a", "b", "c"), ("c", "a"), ("b",)])
    np.testing.assert_array_equal(many[2], ref)
    np.testing.assert_array_equal(many[0], np.bincount(X[:, 0], minlength=3))
    np.testing.assert_array_equal(many[3], np.bincount(X[:, 1], minlength=4))


@pytest.mark.parametrize("block", [1 << 23, 40, 7])
def test_many_marginals_in_blocks_of_rows_equal_brute_force(rng, monkeypatch, block):
    """``marginals`` counts its cliques together in blocks of rows (here also blocks of a few rows, and tables with
    more cells than a block has rows, counted alone): every table equals its brute-force count, whatever the
    order, duplicates, sub-cliques summed from larger ones and the empty clique."""
    from pgmjax.data import dataset

    monkeypatch.setattr(dataset, "COUNT_BLOCK", block)
    dom = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5})
    X = rng.integers(0, [3, 4, 2, 5], size=(301, 4))
    data = pj.Dataset(X, dom)
    cliques = [("d", "a"), ("a",), ("a", "b", "c", "d"), ("c", "a"), ("d", "a"), (), ("b", "d"), ("d",), ("c", "b")]
    for c, got in zip(cliques, data.marginals(cliques)):
        ref = np.zeros(dom.shape_of(c))
        for row in X:
            ref[tuple(row[dom.attributes.index(v)] for v in c)] += 1
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, ref, err_msg=str(c))


def test_dataframe_input_ignores_extra_columns():
    dom = pj.Domain({"a": 2, "b": 3})
    df = pd.DataFrame({"b": [0, 2, 1], "a": [1, 1, 0], "extra": ["x", "y", "z"]})
    data = pj.Dataset(df, dom)
    np.testing.assert_array_equal(data.records, [[1, 0], [1, 2], [0, 1]])
    assert list(data.df.columns) == ["a", "b"]


def test_value_out_of_range_names_column_and_row():
    dom = pj.Domain({"a": 2, "b": 3})
    with pytest.raises(ValueError, match=r"column 'b' row 2 has value 3, outside \[0, 3\)"):
        pj.Dataset(np.array([[0, 0], [1, 2], [0, 3]]), dom)
    with pytest.raises(ValueError, match=r"column 'a' row 0 has value -1"):
        pj.Dataset(np.array([[-1, 0]]), dom)


def test_non_integer_column():
    dom = pj.Domain({"a": 2, "b": 3})
    with pytest.raises(ValueError, match=r"column 'b' must hold integer codes; row 1 has 1.5"):
        pj.Dataset(pd.DataFrame({"a": [0, 1], "b": [0.0, 1.5]}), dom)
    with pytest.raises(ValueError, match=r"column 'a' must hold integer codes; row 1 has 'x'"):
        pj.Dataset(pd.DataFrame({"a": ["0", "x"], "b": [0, 1]}), dom)
    with pytest.raises(ValueError, match=r"column 'a' row 1 is missing"):
        pj.Dataset(pd.DataFrame({"a": [0, None], "b": [0, 1]}), dom)


def test_missing_column_and_empty_data():
    dom = pj.Domain({"a": 2, "b": 3})
    with pytest.raises(ValueError, match=r"columns \['b'\] of the domain are missing"):
        pj.Dataset(pd.DataFrame({"a": [0, 1]}), dom)
    with pytest.raises(ValueError, match="no records"):
        pj.Dataset(pd.DataFrame({"a": [], "b": []}), dom)
    with pytest.raises(ValueError, match="no records"):
        pj.Dataset(np.zeros((0, 2), int), dom)
    with pytest.raises(ValueError, match="array has 3 columns but the domain has 2"):
        pj.Dataset(np.zeros((4, 3), int), dom)


def test_duplicate_columns_rejected():
    dom = pj.Domain({"a": 2, "b": 3})
    df = pd.DataFrame([[0, 1, 1]], columns=["a", "b", "a"])
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        pj.Dataset(df, dom)


def test_from_csv_roundtrip_gzip_and_errors(tmp_path, rng):
    X = rng.integers(0, [3, 2], size=(50, 2))
    csv = tmp_path / "t.csv.gz"
    with gzip.open(csv, "wt") as f:
        pd.DataFrame(X, columns=["x", "y"]).to_csv(f, index=False)
    dom_path = tmp_path / "t-domain.json"
    dom_path.write_text(json.dumps({"x": 3, "y": 2}))
    data = pj.Dataset.from_csv(csv, dom_path)
    np.testing.assert_array_equal(data.records, X)
    with pytest.raises(FileNotFoundError, match="data file not found"):
        pj.Dataset.from_csv(tmp_path / "nope.csv", dom_path)
    bad = tmp_path / "bad-domain.json"
    bad.write_text('{"x": 3, "x": 2}')
    with pytest.raises(ValueError, match=r"duplicate attribute names in domain file .*: \['x'\]"):
        pj.Dataset.from_csv(csv, bad)
    dup = tmp_path / "dup.csv"
    dup.write_text("x,y,x\n0,1,0\n")
    with pytest.raises(ValueError, match=r"duplicate column names: \['x'\]"):
        pj.Dataset.from_csv(dup, dom_path)


def test_shared_adult_loads():
    from conftest import data_dir_or_skip

    path = data_dir_or_skip("adult")
    data = pj.Dataset.from_csv(f"{path}/adult.csv", f"{path}/adult-domain.json")
    assert len(data) == 48842 and len(data.domain) == 14
    assert data.marginal(data.domain.attributes[:2]).sum() == 48842
