"""Raw tables on the Polars and Dask engines (issue 48): the private preprocessing reads only aggregates, so the
in-memory, Polars and Dask paths release the same schema, ledger and marginals for the same key (generated tables
with nulls, unreadable fields, dates, datetimes, rare categories and numbers to bin)."""

import json

import jax
import numpy as np
import pandas as pd
import pytest

from pgmjax.data.raw_fields import column_values
from pgmjax.data.schema import Schema, SchemaError, read_raw_csv
from pgmjax.preprocessing.preprocess import private_schema
from pgmjax.preprocessing.private_format import encode_raw, field_classes
from pgmjax.preprocessing.raw_aggregates import RawFrame
from pgmjax.privacy import Accountant

pytest.importorskip("polars")
pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from pgmjax.preprocessing.raw_engines import open_raw  # noqa: E402

#: Fields where parsers disagree easily: calendar and range limits of pandas' nanosecond stamps, fractions of a
#: second, signs of zero, Python's whitespace, numbers pandas and Polars spell differently.
TRICKY = ["2020-02-29", "2020-02-30", "2021-02-29", "2020-01-02 24:00", "2020-01-02 23:59:60", "2020-01-02 23:59:59",
          "2020-01-02T03:04", "2020-01-02T03:04:05.", "2020-01-02 03:04:05.5", "2020-01-02 03:04:05.123456789123",
          "1500-01-01", "1677-09-21", "1677-09-22", "1677-09-21 00:12:44", "2262-04-11", "2262-04-12", "2262-04-11 23:47:16", "2262-04-11 23:47:17",
          "2262-04-11 23:47:16.9", "0000-01-01", "2020-13-01", "2020-00-10", "2020-01-00", "1969-12-31 23:59:59.5",
          "1960-06-01 12:00:00.9", " 2020-01-01 ", "\x1c2020-01-01\xa0", "1900-02-29", "2000-02-29", "2100-02-28",
          "2020-1-01", "2020-01-02  10:00", "2020-01-02T10:00:00Z", "20200102", "1e5", "-0", "-0.0", "0.0",
          "\u3000 7\u2003", "nan", "Infinity", "-inf", "1e400", "0x10", "+5", ".5", "5.", "1_000", "\u0661\u0662", "",
          "  ", "x", "0001-01-01", "9999-12-31", "9007199254740993", "0.1", "12.5",
          # dates written year first or year last (day first, month first, either), and numbers by their decimals
          "29/02/2020", "30/02/2020", "02/29/2020", "13/01/2020", "01/13/2020", "01/02/2020", "1/2/2020", "2020/2/29",
          "2020.02.29", "2020/02/30", "29.02.2020", "29-02-2020", "21/09/1677", "22/09/1677", "09/22/1677", "11/04/2262",
          "12/04/2262", "04/12/2262", "00/01/2020", "2020/13/01", "12/31/1999", "1.5.2020", "0.5.2020", "10.25.2020",
          "2020-01-02/03", "01/02/20", "001/02/2020", "\u0661/\u0662/\u0662\u0660\u0662\u0660", "2020/1/2 10:00",
          "+1/2/2020", "0000/02/29", "1/1/0000", "1.25", "1.123456", "1.1234567", "-3.50", "2.00", "+.125", "1.5e2",
          "-0.000001"]


def write_raw(path, n=1500, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n).astype(str).astype(object)
    income = np.round(rng.lognormal(10, 1, n), 2).astype(str).astype(object)
    joined = (np.datetime64("1990-01-01") + rng.integers(0, 365 * 30, n)).astype(str).astype(object)
    day_first = pd.Series(joined).str.replace(r"^(\d{4})-(\d{2})-(\d{2})$", r"\3/\2/\1", regex=True).to_numpy(object)
    joined = np.where(rng.random(n) < 0.5, day_first, joined).astype(object)  # half written dd/mm/yyyy
    seen = (np.datetime64("2019-01-01T00:00:00") + rng.integers(0, 86400 * 400, n)).astype(str)
    seen = np.where(rng.random(n) < 0.5, np.char.replace(seen, "T", " "), seen).astype(object)
    city = rng.choice(["Paris", "Lyon", " Nice", "Lille ", "Brest"], n, p=[.4, .3, .1, .1, .1]).astype(object)
    mix = np.where(rng.random(n) < 0.6, rng.integers(0, 9, n).astype(str), rng.choice(["a", "b", "c,d"], n)).astype(object)
    for col in (age, income, joined, seen, city, mix):
        idx = rng.choice(n, 60, replace=False)
        col[idx[:20]] = ""  # nulls
        col[idx[20:]] = rng.choice(TRICKY, 40)  # unreadable or odd fields
    city[:5] = ["Rare1", "Rare2", "Rare1", "Zz", "Rare2"]  # rare categories
    with open(path, "w") as f:
        f.write("age,income,joined,seen,city,mix\n")
        for row in zip(age, income, joined, seen, city, mix):
            f.write(",".join('"' + v + '"' if "," in v else v for v in row) + "\n")


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    path = tmp_path_factory.mktemp("raw_engines") / "raw.csv"
    write_raw(path)
    cluster = distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield {"memory": read_raw_csv(path), "polars": open_raw(path, engine="polars"),
               "dask": open_raw(path, engine="dask", scheduler=client)}
    finally:
        client.close()
        cluster.close()


def test_polars_parses_fields_as_memory_does():
    import polars as pl

    from pgmjax.preprocessing.polars_fields import parse

    frame = pd.DataFrame({"v": TRICKY})
    kinds = ("number", "date", "date dd/mm/yyyy", "date mm/dd/yyyy", "datetime")
    wants = {kind: ("v", kind) for kind in (*kinds, "class", "text")}
    out = parse(pl.LazyFrame({"v": TRICKY}), wants).collect()
    for kind in kinds:
        want = column_values(frame["v"], kind)
        got = out[kind].to_numpy().astype(float)
        same = (want == got) | (np.isnan(want) & np.isnan(got))
        assert same.all(), (kind, [TRICKY[i] for i in np.flatnonzero(~same)])
    assert (out["class"].to_numpy() == field_classes(frame["v"])).all()
    assert out["text"].to_list() == frame["v"].str.strip().tolist()


def test_engines_compute_the_same_aggregates(tables):
    mem = RawFrame(tables["memory"])
    thresholds = np.sort(np.concatenate([np.linspace(-10, 100, 37), [0.0, 18262.0, 18263.5], np.logspace(2, 6, 20)]))
    for other in (tables["polars"], tables["dask"]):
        assert other.names == mem.names and len(other) == len(mem) == 1500
        for name in mem.names:
            assert (other.class_counts(name) == mem.class_counts(name)).all(), name
            assert other.value_counts(name) == mem.value_counts(name), name
            for kind in ("number", "date", "date dd/mm/yyyy", "date mm/dd/yyyy", "datetime"):
                r = other.ranks(name, kind)
                assert (r.below(thresholds) == mem.ranks(name, kind).below(thresholds)).all(), (name, kind)
                assert r.n == mem.ranks(name, kind).n


@pytest.mark.parametrize("budget, options", [
    ({"epsilon": 2.0}, {}),
    ({"rho": 0.3, "bounded": True}, {"kinds": {"mix": "text", "age": "integer"}, "ranges": {"income": (0, 2e5)},
                                     "decimals": {"income": 1}}),
])
def test_same_schema_ledger_and_marginals(tables, budget, options):
    out = {}
    for engine, table in tables.items():
        acc = Accountant(**budget)
        result = private_schema(table, acc, jax.random.key(5), bins=5, **options)
        data = encode_raw(result.schema, table) if engine == "memory" else table.encode(result.schema)
        out[engine] = (json.dumps(result.schema.to_dict()), [dict(e) for e in acc.records()], result.notes, data)
    want = out["memory"]
    cats = want[0]
    assert '"Rare1"' not in cats and "city" in cats  # rare categories folded into other
    for engine in ("polars", "dask"):
        got = out[engine]
        assert got[0] == want[0] and got[1] == want[1] and got[2] == want[2], engine
        assert len(got[3]) == len(want[3])
        for clique in [("age", "city"), ("joined", "seen", "mix"), ("income",)]:
            assert np.array_equal(got[3].marginal(clique), want[3].marginal(clique)), (engine, clique)


def test_declared_schema_on_engines(tables):
    lenient = Schema.from_dict({"age": {"bins": [0, 30, 60, 120], "missing": True, "clip": True},
                                "city": {"categories": ["Paris", "Lyon"], "other": "other"},
                                "joined": {"bins": ["1990-01-01", "2005-01-01", "2020-12-31"], "type": "date",
                                           "missing": True, "clip": True}})
    want = lenient.encode(tables["memory"], unreadable="missing")
    strict = Schema.from_dict({"age": {"bins": [0, 30, 60, 120], "missing": True},
                               "city": {"categories": ["Paris", "Lyon"]}})
    with pytest.raises(SchemaError) as memory:
        strict.encode(tables["memory"], unreadable="missing")  # ages of 1e5 outside the bins, cities not listed
    for engine in ("polars", "dask"):
        got = tables[engine].encode(lenient)
        assert np.array_equal(got.marginal(("age", "city", "joined")), want.marginal(("age", "city", "joined")))
        with pytest.raises(SchemaError) as e:
            tables[engine].encode(strict)
        assert e.value.public == memory.value.public == ("column 'age': a value is outside the range of its bins "
                                                         "[0, 120]; widen the bins or add \"clip\": true")
        with pytest.raises(SchemaError) as e:
            tables[engine].encode(Schema.from_dict({"city": {"categories": ["Paris", "Lyon"]}}))
        assert e.value.public == ("column 'city': a value is not one of its 2 categories; add it to the schema's "
                                  "categories (or an \"other\" category)")
        assert "Nice" not in str(e.value)


def test_blank_lines_skipped_and_duplicate_names_refused_on_every_engine(tmp_path):
    (tmp_path / "blank.csv").write_text("a,b\n1,x\n\n2,y\n")  # pandas skips the blank line; so do Polars and Dask
    for engine in ("polars", "dask"):
        assert len(open_raw(tmp_path / "blank.csv", engine=engine)) == len(read_raw_csv(tmp_path / "blank.csv")) == 2
    (tmp_path / "dup.csv").write_text("a,a\n1,x\n")
    for engine in ("polars", "dask"):
        with pytest.raises(SchemaError, match="duplicate column names"):
            open_raw(tmp_path / "dup.csv", engine=engine)
