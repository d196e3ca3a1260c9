"""The raw CSV read one way on every engine (issue 57, item 1; :mod:`pgmjax.data.raw_csv`).

One faulty record (an extra field on the first data row, a ragged line, a byte that is not UTF-8, a field over
the size limit) is read as missing on pandas, Polars and Dask alike: it neither shifts the columns, nor refuses
the table, nor reads differently on another engine. A property-based test draws small raw tables and one faulty
record, and checks that the read table changes in that record only, that every aggregate the private
preprocessing reads moves by at most one record's contribution (what the budget pays for), and that the derived
schema's columns (names, order) never change and its kinds do not change at a large epsilon.
"""

import csv
import gzip

import jax
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgmjax.data.schema import read_raw_csv
from pgmjax.data.schema_columns import NumericColumn
from pgmjax.preprocessing.preprocess import private_schema
from pgmjax.preprocessing.raw_aggregates import RawFrame
from pgmjax.privacy import Accountant

HEADER = b"age,city,joined\n"
ROWS = [b"34,Paris,2001-02-03", b"51,Lyon,1999-12-31", b"27,Nice,2010-06-15", b"45,Paris,2005-01-01",
        b"62,Lyon,2015-07-04"]
CLEAN = [["34", "Paris", "2001-02-03"], ["51", "Lyon", "1999-12-31"], ["27", "Nice", "2010-06-15"],
         ["45", "Paris", "2005-01-01"], ["62", "Lyon", "2015-07-04"]]
MISSING = ["", "", ""]


def _engines():
    out = ["memory"]
    try:
        import polars  # noqa: F401
        out.append("polars")
    except ImportError:
        pass
    try:
        import dask.dataframe  # noqa: F401
        out.append("dask")
    except ImportError:
        pass
    return out


ENGINES = _engines()


def read(path, engine) -> list[list[str]]:
    """The table as every engine reads it: a list of records of text fields."""
    if engine == "memory":
        frame = read_raw_csv(path)
    else:
        from pgmjax.preprocessing.raw_engines import open_raw

        table = open_raw(path, engine=engine)
        frame = table.frame.collect().to_pandas() if engine == "polars" else table.frame.compute()
        assert len(table) == len(frame)
        assert list(table.names) == list(frame.columns)
    assert list(frame.columns) == ["age", "city", "joined"]
    return [list(map(str, r)) for r in frame.to_numpy(dtype=object)]


def write(tmp_path, lines, name="t.csv"):
    path = tmp_path / name
    data = HEADER + b"\n".join(lines) + b"\n"
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("engine", ENGINES)
def test_extra_field_on_the_first_row_shifts_no_column(tmp_path, engine):
    # pandas took the first column as the index: every column shifted one place and the run exited 0.
    path = write(tmp_path, [ROWS[0] + b",EXTRA"] + ROWS[1:])
    assert read(path, engine) == [MISSING] + CLEAN[1:]


@pytest.mark.parametrize("engine", ENGINES)
def test_ragged_lines_are_records_of_missing_fields(tmp_path, engine):
    rows = list(ROWS)
    rows[1] += b",x,,"  # too many fields (empty extras too)
    rows[3] = b"45,Paris"  # too few
    assert read(write(tmp_path, rows), engine) == [CLEAN[0], MISSING, CLEAN[2], MISSING, CLEAN[4]]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_field_that_is_not_utf8_is_missing(tmp_path, engine):
    rows = list(ROWS)
    rows[2] = b"27,N\xffice,2010-06-15"
    rows[4] = b"62,Ly\xc3on,2015-07-04"  # a truncated two-byte sequence
    want = [r[:] for r in CLEAN]
    want[2][1] = want[4][1] = ""
    assert read(write(tmp_path, rows), engine) == want


@pytest.mark.parametrize("engine", ENGINES)
def test_a_field_over_the_size_limit_makes_its_record_missing(tmp_path, engine):
    limit = csv.field_size_limit()
    rows = list(ROWS)
    rows[1] = b"51," + b"y" * (limit + 1) + b",1999-12-31"  # one character over: the csv reader gives up the record
    rows[3] = b"45," + b"z" * limit + b",2005-01-01"  # at the limit: read
    want = [CLEAN[0], MISSING, CLEAN[2], ["45", "z" * limit, "2005-01-01"], CLEAN[4]]
    assert read(write(tmp_path, rows), engine) == want


def test_every_engine_reads_the_same_table(tmp_path):
    """Blank lines (skipped), a byte-order mark, quoted commas and line breaks, CRLF endings, a gzipped copy."""
    lines = [b"\xef\xbb\xbf" + HEADER[:-1], ROWS[0] + b",EXTRA", b"", b'33,"Saint-Denis, Paris",2000-01-01',
             b'34,"two\nlines",2000-01-02\r', b"\r", ROWS[1], b"   ", b"41,\xff\xfe,2002-02-02", b'"",,', ROWS[2], b"", b""]
    data = b"\n".join(lines) + b"\n"
    (tmp_path / "t.csv").write_bytes(data)
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress(data))
    want = [MISSING, ["33", "Saint-Denis, Paris", "2000-01-01"], ["34", "two\nlines", "2000-01-02"], CLEAN[1],
            MISSING, ["41", "", "2002-02-02"], MISSING, CLEAN[2]]
    for engine in ENGINES:
        for name in ("t.csv", "t.csv.gz"):
            assert read(tmp_path / name, engine) == want, (engine, name)


def test_dask_blocks_read_as_memory_reads(tmp_path):
    pytest.importorskip("dask.dataframe")
    from pgmjax.preprocessing.raw_engines import DaskRaw

    rows = [ROWS[i % 5] for i in range(60)]
    rows[0] += b",EXTRA"
    rows[17] = b"45,Paris"
    rows[30] = b"27,N\xffice,2010-06-15"
    rows[41] = b""
    path = write(tmp_path, rows)
    table = DaskRaw(str(path), blocksize=200)  # about 8 blocks of whole lines, the first holding the header
    assert table.frame.npartitions > 4
    got = table.frame.compute()
    assert [list(r) for r in got.to_numpy(dtype=object)] == read(path, "memory") and len(table) == 59


# The property: one record changes the read in that record only, and the schema only through the budget ----------

#: One faulty record each: extra field, missing field, bad byte, huge numbers, odd dates, a field over the limit.
FAULTS = [b"1,2,3,4", b"5", b"", b"4\xff,x\xfe,2001-01-\xff01", b"1e308,1e308,1e308", b"9" * 400 + b",x," + b"9" * 400,
          b"2020-02-30,0000-01-01,9999-99-99", b"-1e308,,2020-13-01", b"x" * (csv.field_size_limit() + 1) + b",a,b",
          b"nan,inf,-0"]


def _column(kind, n, rng):
    if kind == "integer":
        return [str(v) for v in rng.integers(0, 100, n)]
    if kind == "number":
        return [f"{v:.2f}" for v in rng.normal(50, 10, n)]
    if kind == "date":
        return [str(np.datetime64("2000-01-01") + int(d)) for d in rng.integers(0, 5000, n)]
    return list(rng.choice(["red", "green", "blue"], n))


def _kinds(schema):
    return {n: (c.kind if isinstance(c, NumericColumn) else "text") for n, c in schema.columns.items()}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(["integer", "number", "date", "text"]), min_size=1, max_size=3),
       n=st.integers(30, 80), seed=st.integers(0, 2**16), fault=st.sampled_from(FAULTS), where=st.floats(0, 1))
def test_one_record_changes_the_schema_only_through_the_noise(tmp_path, kinds, n, seed, fault, where):
    rng = np.random.default_rng(seed)
    names = [f"c{i}" for i in range(len(kinds))]
    cols = [_column(k, n, rng) for k in kinds]
    lines = [",".join(r).encode() for r in zip(*cols)]
    at = int(where * n)
    header = ",".join(names).encode()
    # The fault's fields, cut or padded to this table's width unless the fault is a ragged line by design.
    (tmp_path / "a.csv").write_bytes(b"\n".join([header] + lines) + b"\n")
    (tmp_path / "b.csv").write_bytes(b"\n".join([header] + lines[:at] + [fault] + lines[at:]) + b"\n")
    a, b = read_raw_csv(tmp_path / "a.csv"), read_raw_csv(tmp_path / "b.csv")
    if "polars" in ENGINES:  # the same read by the engine that parses the file itself
        from pgmjax.preprocessing.raw_engines import open_raw

        got = open_raw(tmp_path / "b.csv", engine="polars").frame.collect().to_pandas()
        assert [list(r) for r in got.to_numpy(dtype=object)] == [list(r) for r in b.to_numpy(dtype=object)]

    # The read: the same columns in the same order; every other record as before; at most one record more.
    assert list(a.columns) == list(b.columns) == names
    assert len(b) - len(a) in (0, 1)  # 0: a blank line, skipped
    if len(b) == len(a):
        assert b.equals(a)
    else:
        assert b.drop(index=at).reset_index(drop=True).equals(a)

    # Every aggregate the preprocessing reads moves by at most one record's contribution (the sensitivity the
    # budget pays for), so any change of the release is one the noise covers.
    fa, fb = RawFrame(a), RawFrame(b)
    for name in names:
        assert np.abs(fa.class_counts(name) - fb.class_counts(name)).sum() <= 1
        va, vb = (dict(zip(*f.value_counts(name))) for f in (fa, fb))
        assert sum(abs(va.get(v, 0) - vb.get(v, 0)) for v in set(va) | set(vb)) <= 1

    # The schema: names and order always; at a large epsilon (the vote nearly exact) the same kinds.
    key = jax.random.key(seed)
    for eps in (1.0, 1e4):
        sa = private_schema(a, Accountant(epsilon=eps), key, bins=3).schema
        sb = private_schema(b, Accountant(epsilon=eps), key, bins=3).schema
        assert list(sa.columns) == list(sb.columns) == names
        if eps > 1:
            assert _kinds(sa) == _kinds(sb)
            want = {"integer": ("integer", "number"), "number": ("number",), "date": ("date",), "text": ("text",)}
            assert all(_kinds(sa)[c] in want[k] for c, k in zip(names, kinds))
        decoded = sb.decode(sb.encode(b, unreadable="missing"), key, columns=names)
        assert list(decoded.columns) == names and len(decoded) == len(b)


def test_a_datetime_column_with_every_value_missing_decodes():
    # Found by the property test: a column voted datetime whose values were all missing (a ragged record's
    # fields) crashed the decoding (numpy's char.replace on an empty array), after the budget was spent.
    from pgmjax.data.schema_columns import days_to_datetimes

    assert list(days_to_datetimes([np.nan, np.nan])) == ["", ""]
    assert list(days_to_datetimes([np.nan, 0.5])) == ["", "1970-01-01 12:00:00"]
