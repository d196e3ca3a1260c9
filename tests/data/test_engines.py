"""Tables counted by Polars and Dask (pgmjax.data.engines): the same marginals, checks and releases as in memory.

The Dask half runs on a ``distributed.LocalCluster`` in this process (``processes=False``, one worker of one
thread), as a cluster would: the workers read the file and return count tables.
"""

import importlib
import json
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax.data.dataset import DataValueError

pytest.importorskip("polars")
pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

from pgmjax.data.engines import FrameDataset, check_stats, need_engine, open_dataset  # noqa: E402

DOM = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5, "e": 6})


def _table(n=1500, seed=0):
    """A chain a -> b -> c -> d -> e (each half copied from the previous), with rare values in e."""
    rng = np.random.default_rng(seed)
    cols = [rng.integers(0, DOM["a"], n)]
    for name in DOM.attributes[1:]:
        fresh = rng.integers(0, DOM[name], n)
        cols.append(np.where(rng.random(n) < 0.5, (cols[-1] * 5 + 1) % DOM[name], fresh))
    cols[-1][rng.random(n) < 0.97] %= 4  # values 4 and 5 of e are rare
    return pd.DataFrame(np.stack(cols, 1), columns=list(DOM.attributes))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("engines")
    frame = _table()
    frame.to_csv(d / "t.csv", index=False)
    frame.to_parquet(d / "t.parquet")
    parts = d / "parts"
    parts.mkdir()
    for i, start in enumerate(range(0, len(frame), 500)):
        frame.iloc[start:start + 500].to_parquet(parts / f"p{i}.parquet")
    return {"frame": frame, "dir": d, "csv": str(d / "t.csv"), "parquet": str(d / "t.parquet"), "parts": str(parts)}


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def memory(files):
    return pj.Dataset(files["frame"], DOM)


def _open(path, engine, client):
    return open_dataset(path, DOM, engine=engine, scheduler=client if engine == "dask" else None)


CLIQUES = [("a",), ("e", "b"), ("b", "c", "d"), ("c", "d"), ("a", "e"), (), ("d", "b")]


@pytest.mark.parametrize("engine", ["polars", "dask"])
@pytest.mark.parametrize("source", ["csv", "parquet", "parts"])
def test_marginals_equal_in_memory(files, memory, client, engine, source):
    data = _open(files[source], engine, client)
    assert isinstance(data, pj.Dataset) and len(data) == len(memory) == 1500
    for got, want in zip(data.marginals(CLIQUES), memory.marginals(CLIQUES)):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    assert np.array_equal(data.marginal(("d", "a")), memory.marginal(("d", "a")))
    for got, want in zip(data.cell_counts(("e", "a", "b")), memory.cell_counts(("e", "a", "b"))):
        assert np.array_equal(got, want)
    mapping = {"e": np.array([0, 1, 2, 3, 4, 4]), "a": np.array([1, 0, 1])}
    small = pj.Domain({"a": 2, "b": 4, "c": 2, "d": 5, "e": 5})
    assert np.array_equal(data.recode(mapping, small).marginal(("a", "e")), memory.recode(mapping, small).marginal(("a", "e")))
    assert np.array_equal(data.project(("c", "b")).marginal(("b", "c")), memory.marginal(("b", "c")))


def _release(result):
    records = None if result.synthetic is None else result.synthetic.records
    return records, [dict(e) for e in result.accountant.records()], result.model.marginal(("a", "b"))


MECHANISMS = {
    "mst": lambda d, k: pj.mechanisms.mst(d, 1.0, key=k),
    "aim": lambda d, k: pj.mechanisms.aim(d, 2.0, key=k, rounds=8, engine_iters=20),
    "mwem": lambda d, k: pj.mechanisms.mwem(d, 1.0, key=k, workload=pj.Workload.all_kway(DOM, 2), rounds=3),
    "privbayes": lambda d, k: pj.mechanisms.privbayes(d, 1.0, key=k),
    "hdmm": lambda d, k: pj.mechanisms.hdmm(d, 1.0, key=k, workload=pj.Workload.all_kway(DOM, 2), engine_iters=50),
    "dualquery": lambda d, k: pj.mechanisms.dualquery(d, 1.0, 1e-3, key=k, workload=pj.Workload.all_kway(DOM, 2), rounds=3,
                                                      samples=10, engine_iters=20),
    "mldp": lambda d, k: pj.mechanisms.mldp(d, 1.0, key=k, workload=pj.Workload.all_kway(DOM, 2), engine_iters=20),
}


# AIM, the longest run, is a long check (python -m pytest -m slow); the others run by default
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "aim" else n for n in sorted(MECHANISMS)])
def test_releases_equal_in_memory(files, memory, client, name):
    """The same key and table give the same synthetic records, ledger and model on every engine."""
    key = jax.random.key(3)
    want_records, want_ledger, want_model = _release(MECHANISMS[name](memory, key))
    for engine in ("polars", "dask"):
        records, ledger, model = _release(MECHANISMS[name](_open(files["parquet"], engine, client), key))
        assert (records is None and want_records is None) or np.array_equal(records, want_records), (name, engine)
        assert ledger == want_ledger, (name, engine)
        assert np.array_equal(model, want_model), (name, engine)


BAD = {
    "range": "a,b,c,d,e\n0,1,1,0,0\n1,9,0,0,0\n",
    "negative": "a,b,c,d,e\n0,1,1,0,0\n-1,0,0,0,0\n",
    "empty field": "a,b,c,d,e\n0,1,1,0,0\n1,,0,0,0\n",
    "fraction": "a,b,c,d,e\n0,1,1,0,0\n1,2.5,0,0,0\n",
    "word": "a,b,c,d,e\n0,1,1,0,0\n1,two,0,0,0\n",
    "late word": "a,b,c,d,e\n" + "0,1,1,0,0\n" * 20_000 + "1,two,0,0,0\n",  # after any type-inference window
    "long digits": "a,b,c,d,e\n0,1,1,0,0\n1,123456789012345678901234,0,0,0\n",
    "ragged": "a,b,c,d,e\n0,1,1,0,0\n1,0,0,0\n",
    "missing column": "a,b,c,d\n0,1,1,0\n",
    "no records": "a,b,c,d,e\n",
}


def _memory_error(path):
    try:
        pj.Dataset.from_csv(path, DOM)
    except ValueError as e:
        return getattr(e, "public", str(e))
    raise AssertionError("the in-memory path accepted a bad table")


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("engine", ["polars", "dask"])
def test_bad_tables_refused_with_the_in_memory_message(tmp_path, client, case, engine):
    path = tmp_path / "bad.csv"
    path.write_text(BAD[case])
    want = _memory_error(str(path))
    with pytest.raises(ValueError) as info:
        _open(str(path), engine, client)
    got = getattr(info.value, "public", str(info.value))
    if case == "missing column":  # the columns found are listed in the engine's order; the message is the same
        assert got.startswith("Dataset: columns ['e'] of the domain are missing from the data")
    elif case == "no records":
        assert got == "Dataset: the data has no records" and "no records" in want
    else:
        assert got == want
        assert isinstance(info.value, DataValueError)
        shown = got.replace(str(path), "")
        assert "9" not in shown and "two" not in shown and "2.5" not in shown  # no record-level value in the public text


def test_parquet_bad_codes(tmp_path, client):
    frame = _table(50)
    frame.loc[7, "d"] = 5
    frame.to_parquet(tmp_path / "bad.parquet")
    for engine in ("polars", "dask"):
        with pytest.raises(DataValueError) as info:
            _open(str(tmp_path / "bad.parquet"), engine, client)
        assert info.value.public == "Dataset: column 'd' has a value outside [0, 5)"
        assert "from 0 to 5" in str(info.value)  # the private detail: for the data holder only


@pytest.mark.filterwarnings("ignore:rr_synthetic")
def test_records_stay_with_the_engine(files):
    data = _open(files["parquet"], "polars", None)
    assert isinstance(data, FrameDataset) and "polars" in repr(data)
    with pytest.raises(TypeError, match="stay with the engine"):
        data.records
    with pytest.raises(TypeError, match="stay with the engine"):
        pj.mechanisms.rr_synthetic(data, 1.0, key=jax.random.key(0))


def test_check_stats_order():
    base = {"nulls": 0, "unparsable": 0, "nonfinite": 0, "fractional": 0, "min": 0.0, "max": 1.0}
    check_stats("x", 2, base)  # fine
    for change, public in [({"unparsable": 1, "nulls": 1}, "not a number"), ({"nulls": 1, "fractional": 2}, "missing"),
                           ({"fractional": 1, "max": 9.0}, "fractional part"), ({"max": 2.0}, "outside [0, 2)")]:
        with pytest.raises(DataValueError) as info:
            check_stats("x", 2, {**base, **change})
        assert public in info.value.public


def test_engines_load_lazily_and_name_the_extra(monkeypatch):
    code = "import sys, pgmjax, pgmjax.data.engines; print(sorted(m for m in ('polars', 'dask', 'distributed', 'pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
    real = importlib.import_module

    def no_polars(name, *a, **k):
        if name.startswith("polars"):
            raise ImportError("No module named 'polars'")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", no_polars)
    with pytest.raises(ImportError, match=r"pip install 'pgmjax\[large\]'"):
        need_engine("polars")
    with pytest.raises(ValueError, match="engine must be one of"):
        need_engine("spark")


def test_scheduler_only_with_dask(files):
    with pytest.raises(ValueError, match="scheduler applies to engine='dask'"):
        open_dataset(files["csv"], DOM, engine="polars", scheduler="tcp://127.0.0.1:1")


def test_domain_json_round_trip(files, tmp_path):
    (tmp_path / "d.json").write_text(json.dumps(DOM.to_dict()))
    data = open_dataset(files["csv"], tmp_path / "d.json", engine="polars")
    assert data.domain == DOM and len(data) == 1500
