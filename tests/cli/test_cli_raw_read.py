"""``pgmjax run`` on a raw CSV with faulty records (issue 57, item 1): the same exit code, words and release on the
in-memory, Polars and Dask engines; no byte, value or position of the private file in a message."""

import numpy as np
import pytest

from pgmjax import cli

pytest.importorskip("polars")
pytest.importorskip("dask.dataframe")

ENGINES = ("memory", "polars", "dask")


def _run(path, engine, out, *extra):
    return cli.main(["run", "--seed", "0", "--data", str(path), "-m", "mst", "-e", "2", "--records", "60", "--out", str(out),
                     "--overwrite", "--quiet", "--engine", engine, "--seed", "3", *extra])


@pytest.mark.parametrize("name, data, words", [
    ("notcsv.csv", bytes(range(256)) * 8, "could not be read as CSV: its header line is not UTF-8 text"),
    ("dup.csv", b"a,a\n1,2\n", "has duplicate column names: ['a']"),
    ("empty.csv", b"", "is empty (no header line)"),
])
def test_a_header_fault_has_one_exit_code_and_one_message(tmp_path, capsys, name, data, words):
    (tmp_path / name).write_bytes(data)
    seen = set()
    for engine in ENGINES:
        assert _run(tmp_path / name, engine, tmp_path / "o.csv") == 2, engine
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert words in err and "0x" not in err and "position" not in err, err
        seen.add(err)
    assert len(seen) == 1, seen  # the same words on every engine
    assert not (tmp_path / "o.csv").exists()


def test_faulty_records_release_the_same_table_on_every_engine(tmp_path, capsys):
    """An extra field on the first data row, a short line, a byte that is not UTF-8 and a field over the csv
    module's size limit: read as missing on every engine; the run succeeds with the input's columns in order."""
    rng = np.random.default_rng(0)
    rows = [f"{a},{c},{2000 + y}-0{m}-1{d}".encode() for a, c, y, m, d in zip(
        rng.integers(18, 80, 300), rng.choice(["Paris", "Lyon", "Nice"], 300), rng.integers(0, 20, 300),
        rng.integers(1, 10, 300), rng.integers(0, 10, 300))]
    rows[0] += b",EXTRA"
    rows[100] = b"45,Paris"
    rows[150] = rows[150].replace(b"Lyon", b"L\xffyon").replace(b"Nice", b"N\xffice").replace(b"Paris", b"P\xffaris")
    rows[200] = b"33," + b"x" * 200_000 + b",2010-01-01"
    (tmp_path / "raw.csv").write_bytes(b"age,city,joined\n" + b"\n".join(rows) + b"\n")
    outs = []
    for engine in ENGINES:
        out = tmp_path / f"out-{engine}.csv"
        assert _run(tmp_path / "raw.csv", engine, out) == 0, capsys.readouterr().err
        outs.append(out.read_text())
    assert outs[0].splitlines()[0] == "age,city,joined"
    assert outs[1] == outs[0] and outs[2] == outs[0]


def test_a_byte_that_is_not_utf8_in_a_table_of_codes_is_refused_without_the_byte(tmp_path, capsys):
    """The integer-coded path (``--domain``) still refuses such a file, on every engine, but Polars and Dask printed
    the decoder's text ("can't decode byte 0xff in position ...") when the byte lay past the header's block."""
    (tmp_path / "codes.csv").write_bytes(b"a,b\n" + b"0,1\n" * 3000 + b"1,\xff\n")
    (tmp_path / "domain.json").write_text('{"a": 2, "b": 2}')
    for engine in ENGINES:
        assert cli.main(["run", "--seed", "0", "--data", str(tmp_path / "codes.csv"), "--domain", str(tmp_path / "domain.json"), "-m",
                         "mst", "-e", "1", "--out", str(tmp_path / "o.csv"), "--quiet", "--engine", engine]) == 2
        err = capsys.readouterr().err
        assert "it is not UTF-8 text" in err and "0xff" not in err and "position" not in err, (engine, err)
