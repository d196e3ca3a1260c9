"""Hostile inputs cannot exhaust memory or crash the reader (issue 41): a crafted model folder for
``load_model`` / ``load_model_schema``, and a crafted integer-coded CSV for ``pgmjax run --domain``.

Every refusal is a ``ValueError`` naming the file, field, clique or column, raised before the allocation
the input declares; the memory-bound cases measure the peak of Python's and NumPy's allocations
(``tracemalloc``) while the crafted file is read. Also: a valid model still round-trips bit for bit
(stored, deflate-compressed and Fortran-ordered tables), a byte-order mark before the CSV header changes
nothing, and the run's report lists its times under ``not_private``.
"""

import hashlib
import io
import json
import re
import struct
import tracemalloc
import zlib

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax import cli
from pgmjax.data.dataset import DataValueError, check_field_counts
from pgmjax.data.schema import Schema
from pgmjax.graph import oracle
from pgmjax.graph.size_limit import ModelTooLarge, set_max_model_bytes
from pgmjax.model import safe_read
from pgmjax.model.serialization import load_model_schema, save_model

# ---------------------------------------------------------------------------------------------------
# Crafted model folders
# ---------------------------------------------------------------------------------------------------

BIG = pj.Domain({"a": 250, "b": 100})  # one clique of 25,000 cells: 200 kB as float64


def _model(domain, cliques, dtype=jnp.float64, seed=0):
    rng = np.random.default_rng(seed)
    plan = oracle.make_plan(domain, cliques)
    tables = {c: rng.normal(size=domain.shape_of(c)) for c in cliques}
    tables[cliques[0]].reshape(-1)[1] = -np.inf  # a structural zero: allowed
    return pj.GraphicalModel(plan, plan.from_tables(tables, dtype), 321.0)


def _npy_header(shape, dtype="<f8") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue()


def _zip(name: str, header: bytes, zero_bytes: int, *, declared: int | None = None, deflate: bool = True) -> bytes:
    """A one-member zip archive: ``header`` then ``zero_bytes`` zeros, compressed as it is written (a deflate
    bomb for large ``zero_bytes``); ``declared`` overrides the uncompressed size its headers state."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15) if deflate else None
    crc, size, parts = zlib.crc32(header), len(header), []
    parts.append(compressor.compress(header) if deflate else header)
    chunk = bytes(2**20)
    left = zero_bytes
    while left:
        piece = chunk[:min(left, len(chunk))]
        crc, size, left = zlib.crc32(piece, crc), size + len(piece), left - len(piece)
        parts.append(compressor.compress(piece) if deflate else piece)
    if deflate:
        parts.append(compressor.flush())
    data = b"".join(parts)
    file_size = size if declared is None else declared
    method, name_bytes = (8 if deflate else 0), name.encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, len(data), file_size, len(name_bytes), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc, len(data), file_size,
                          len(name_bytes), 0, 0, 0, 0, 0, 0)
    central_offset = len(local) + len(name_bytes) + len(data)
    central_size = len(central) + len(name_bytes)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, central_size, central_offset, 0)
    return local + name_bytes + data + central + name_bytes + end


def _replace_arrays(path, blob: bytes) -> None:
    """Write ``blob`` as the model's archive, its digest recomputed (as an attacker would)."""
    (path / "potentials.npz").write_bytes(blob)
    structure = json.loads((path / "model.json").read_text())
    structure["arrays"]["sha256"] = hashlib.sha256(blob).hexdigest()
    (path / "model.json").write_text(json.dumps(structure))


def _peak_bytes(fn) -> tuple[BaseException | None, int]:
    """What ``fn()`` raised, and the peak of traced allocations (NumPy's arrays included) while it ran."""
    tracemalloc.start()
    try:
        fn()
        raised = None
    except BaseException as e:  # MemoryError and RecursionError included: the old failures
        raised = e
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return raised, peak


@pytest.fixture
def big_model(tmp_path):
    model = _model(BIG, [("a", "b")])
    model.save(tmp_path / "m")
    pj.load_model(tmp_path / "m")  # warm: the junction tree and JAX are set up before anything is measured
    return tmp_path / "m"


def test_a_deflate_bomb_is_refused_unread_in_small_memory(big_model):
    # 1000x the clique's table: 200 MB of zeros in about 200 kB, every size field honest.
    blob = _zip("clique_0.npy", _npy_header((250_000, 100)), 250_000 * 100 * 8)
    assert len(blob) < 400_000
    _replace_arrays(big_model, blob)
    raised, peak = _peak_bytes(lambda: pj.load_model(big_model))
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.0f} MB while refusing a 200 MB bomb ({raised!r})"
    assert isinstance(raised, ValueError), repr(raised)
    assert re.search(r"table clique_0 of clique \('a', 'b'\) .*declares 200,000,128 bytes uncompressed.*200,000 bytes",
                     str(raised)), raised


def test_a_member_expanding_past_its_declared_size_is_read_no_further(big_model):
    # The headers declare exactly the table (right shape, right size); the stream expands to 200 MB.
    header = _npy_header((250, 100))
    blob = _zip("clique_0.npy", header, 250_000 * 100 * 8, declared=len(header) + 250 * 100 * 8)
    _replace_arrays(big_model, blob)
    raised, peak = _peak_bytes(lambda: pj.load_model(big_model))
    assert isinstance(raised, ValueError) and "clique_0" in str(raised), repr(raised)
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.0f} MB"


def test_an_npy_header_declaring_2_to_the_40_cells_is_refused(tmp_path):
    _model(pj.Domain({"a": 4, "b": 4}), [("a", "b")]).save(tmp_path / "m")
    _replace_arrays(tmp_path / "m", _zip("clique_0.npy", _npy_header((2**20, 2**20)), 64, deflate=False))
    raised, peak = _peak_bytes(lambda: pj.load_model(tmp_path / "m"))
    assert isinstance(raised, ValueError) and not isinstance(raised, MemoryError), repr(raised)
    assert re.search(r"clique_0 of clique \('a', 'b'\).*has shape \(1048576, 1048576\), expected \(4, 4\)", str(raised))
    assert peak < 20 * 2**20


def _bzip2_archive() -> bytes:
    import zipfile

    table, buffer = io.BytesIO(), io.BytesIO()
    np.save(table, np.zeros((4, 4)))
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_BZIP2) as archive:
        archive.writestr("clique_0.npy", table.getvalue())
    return buffer.getvalue()


@pytest.mark.parametrize("blob, match", [
    # format 2.0 declares its header's length in 4 bytes: 2 GiB here, never read
    (lambda: _zip("clique_0.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**31), 100, deflate=False),
     "declares an .npy header of 2,147,483,648 bytes, at most 4,096"),
    (lambda: _zip("clique_0.npy", b"GIF89a", 200, deflate=False), "is not an .npy array"),
    (_bzip2_archive, "is compressed with zip method 12; expected stored or deflate"),
])
def test_odd_members_are_refused_with_their_reason(tmp_path, blob, match):
    _model(pj.Domain({"a": 4, "b": 4}), [("a", "b")]).save(tmp_path / "m")
    _replace_arrays(tmp_path / "m", blob())
    with pytest.raises(ValueError, match=rf"table clique_0 of clique \('a', 'b'\) \(.*member clique_0.npy\) {match}"):
        pj.load_model(tmp_path / "m")


def test_an_archive_larger_than_its_tables_is_refused_unread(tmp_path):
    _model(pj.Domain({"a": 4, "b": 4}), [("a", "b")]).save(tmp_path / "m")
    _replace_arrays(tmp_path / "m", _zip("clique_0.npy", _npy_header((4, 4)), 4 * 4 * 8 + 2**20, deflate=False))
    with pytest.raises(ValueError, match=r"potentials.npz is over [0-9,]+ bytes, the most that the 1 tables"):
        pj.load_model(tmp_path / "m")


@pytest.mark.parametrize("reader", [pj.load_model, load_model_schema])
def test_model_json_nested_200000_deep_is_refused(tmp_path, reader):
    (tmp_path / "model.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match=r"model.json is corrupted: its JSON nests 200,000 levels deep, at most 32"):
        reader(tmp_path)
    # Deep inside an otherwise valid structure, brackets in strings not counted.
    _model(pj.Domain({"a": 2, "b": 3}), [("a", "b")]).save(tmp_path / "m")
    structure = json.loads((tmp_path / "m" / "model.json").read_text())
    structure["history"] = [{"note": "[[[[" * 100}]
    (tmp_path / "m" / "model.json").write_text(json.dumps(structure)[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(ValueError, match="nests 5,001 levels deep"):
        reader(tmp_path / "m")


def test_an_oversized_model_json_is_refused_unread(tmp_path):
    _model(pj.Domain({"a": 2, "b": 3}), [("a", "b")]).save(tmp_path / "m")
    text = (tmp_path / "m" / "model.json").read_text()
    (tmp_path / "m" / "model.json").write_text(text + " " * safe_read.MAX_STRUCTURE_BYTES)
    with pytest.raises(ValueError, match=r"model.json is over 16,777,216 bytes"):
        pj.load_model(tmp_path / "m")


def test_json_depth_counts_without_recursion():
    assert safe_read.json_depth('{"a": [1, "]]]["], "b": {"c": "\\"["}}') == 2
    assert safe_read.json_depth("3") == 0
    assert safe_read.json_depth("[" * 10**6) == 10**6


@pytest.mark.parametrize("bins, match", [(10**10, r'field "bins" asks for 10,000,000,000 bins, at most 1,000,000'),
                                         (1e10, "integer number of bins, got 10000000000.0")])
def test_a_schema_asking_for_1e10_bins_is_refused(tmp_path, bins, match):
    schema = Schema.from_dict({"x": {"bins": [0, 1, 2]}, "c": {"categories": ["u", "v"]}})
    save_model(_model(schema.domain, [("x", "c")]), tmp_path / "m", schema=schema)
    structure = json.loads((tmp_path / "m" / "model.json").read_text())
    structure["schema"]["x"] = {"bins": bins, "range": [0, 1]}
    (tmp_path / "m" / "model.json").write_text(json.dumps(structure))
    raised, peak = _peak_bytes(lambda: load_model_schema(tmp_path / "m"))
    assert isinstance(raised, ValueError) and not isinstance(raised, MemoryError), repr(raised)
    assert "column 'x'" in str(raised) and re.search(match, str(raised)), raised
    assert peak < 20 * 2**20


def test_a_model_whose_cliques_break_the_size_limit_is_refused_before_its_tables_are_read(tmp_path):
    _model(pj.Domain({"a": 4, "b": 4}), [("a", "b")]).save(tmp_path / "m")
    structure = json.loads((tmp_path / "m" / "model.json").read_text())
    structure["domain"] = {"a": 10**6, "b": 10**6}
    (tmp_path / "m" / "model.json").write_text(json.dumps(structure))
    (tmp_path / "m" / "potentials.npz").unlink()  # never reached
    previous = set_max_model_bytes(2**30)
    try:
        with pytest.raises(ModelTooLarge, match=r"load_model: the model of .*model.json \(fields 'domain' and 'cliques'\): "
                                                r"1,000,000,000,000 cells \(7.276 TB as float64 tables\), above the limit of 1 GB"):
            pj.load_model(tmp_path / "m")
    finally:
        set_max_model_bytes(previous)
    assert issubclass(ModelTooLarge, ValueError)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_a_valid_model_still_round_trips_bit_for_bit(tmp_path, dtype):
    domain = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5})
    cliques = [("a", "b"), ("b", "c"), ("c", "d")]
    model = _model(domain, cliques, dtype)
    schema = Schema.from_dict({"a": {"categories": ["p", "q", "r"]}, "b": {"bins": 4, "range": [0, 8]},
                               "c": {"categories": ["u", "v"]}, "d": {"bins": [0, 1, 2, 3, 4, 5]}})
    save_model(model, tmp_path / "m", schema=schema)
    back = pj.load_model(tmp_path / "m")
    assert back.domain == model.domain and back.cliques == model.cliques and back.dtype == model.dtype
    for c in cliques:
        saved, loaded = np.asarray(model.potentials[c]), np.asarray(back.potentials[c])
        assert saved.tobytes() == loaded.tobytes()
    assert load_model_schema(tmp_path / "m").to_dict() == schema.to_dict()
    # The same tables compressed (numpy's savez_compressed) and one of them in Fortran order still load, exactly.
    with np.load(tmp_path / "m" / "potentials.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["clique_0"] = np.asfortranarray(arrays["clique_0"])
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    _replace_arrays(tmp_path / "m", buffer.getvalue())
    again = pj.load_model(tmp_path / "m")
    for c in cliques:
        assert np.asarray(again.potentials[c]).tobytes() == np.asarray(model.potentials[c]).tobytes()


def test_a_stored_schema_over_another_domain_is_refused(tmp_path):
    schema = Schema.from_dict({"x": {"bins": [0, 1, 2]}, "c": {"categories": ["u", "v"]}})
    save_model(_model(schema.domain, [("x", "c")]), tmp_path / "m", schema=schema)
    structure = json.loads((tmp_path / "m" / "model.json").read_text())
    structure["schema"]["c"]["categories"].append("w")
    (tmp_path / "m" / "model.json").write_text(json.dumps(structure))
    with pytest.raises(ValueError, match="field 'schema' has the domain .*'c': 3.*field 'domain' is"):
        load_model_schema(tmp_path / "m")


# ---------------------------------------------------------------------------------------------------
# Integer-coded CSV input (pgmjax run --data x.csv --domain x-domain.json)
# ---------------------------------------------------------------------------------------------------

DOMAIN = {"a": 2, "b": 3}
RUN = ["run", "--seed", "0", "--domain", "dom.json", "-m", "mwem", "-e", "1", "--quiet", "--seed", "5"]


@pytest.fixture
def coded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    lines = ["a,b"] + [f"{x},{y}" for x, y in zip(rng.integers(0, 2, 300), rng.integers(0, 3, 300))]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "dom.json").write_text(json.dumps(DOMAIN))
    return lines


def _write(lines, name):
    with open(name, "w", newline="") as f:
        f.write("\n".join(lines) + "\n")


def _main(args, capsys):
    code = cli.main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("line, count, word", [("1,2,0", 3, "more"), ("1", 1, "fewer")])
def test_ragged_lines_are_refused_naming_the_line(coded, capsys, line, count, word):
    _write(coded[:10] + [line] + coded[10:], "ragged.csv")
    code, _, err = _main([*RUN, "--data", "ragged.csv"], capsys)
    assert code == 2 and f"a line has {word} fields than the header's 2" in err and "line 11" not in err, err
    code, _, err = _main([*RUN, "--data", "ragged.csv", "--show-private"], capsys)
    assert code == 2 and f"line 11 has {count} field" in err and "the header has 2" in err, err
    with pytest.raises(DataValueError, match="line 11") as info:  # pandas' own error for a longer line, or ours
        pj.Dataset.from_csv("ragged.csv", "dom.json")
    assert "11" not in info.value.public


def test_field_counts_skip_blank_lines_and_read_gzip(tmp_path):
    import gzip

    with gzip.open(tmp_path / "t.csv.gz", "wt") as f:
        f.write("\ufeffa,b\n0,1\n\n1,2\n")
    assert check_field_counts(tmp_path / "t.csv.gz") == 2


@pytest.mark.parametrize("value, shown", [
    ("12345678901234567890123", "an integer of 23 digits"),  # was a RecursionError
    ("18446744073709551615", "18446744073709551615"),  # read as uint64: was wrapped to -1
    ("1e30", "1000000000000000019884624838656"),  # a float: was wrapped to -2**63
    ("-1", "-1"),
    ("3", "3"),
])
def test_codes_out_of_range_name_the_column_and_the_range(coded, capsys, value, shown):
    _write(coded[:20] + [f"1,{value}"] + coded[20:], "bad.csv")
    code, _, err = _main([*RUN, "--data", "bad.csv"], capsys)
    assert code == 2 and "column 'b' has a value outside [0, 3)" in err and "line 21" not in err and f"value {shown}" not in err, err
    code, _, err = _main([*RUN, "--data", "bad.csv", "--show-private"], capsys)
    assert code == 2 and f"column 'b' line 21 has value {shown}, outside [0, 3)" in err, err


def test_a_huge_or_non_integer_code_in_a_dataframe_is_refused_without_recursion():
    domain = pj.Domain(DOMAIN)
    for column, match in [([0, 10**5000], "an integer of thousands of digits, outside"),
                          (["0", "1" * 40], "an integer of 40 digits, outside"),
                          (["0", "1_0"], "must hold integer codes; row 1 has '1_0'"),
                          (["0", "2.5"], "must hold integer codes; row 1 has '2.5'")]:
        with pytest.raises(DataValueError, match=match):
            pj.Dataset(pd.DataFrame({"a": [0, 1], "b": pd.Series(column, dtype=object)}), domain)
    assert pj.Dataset(pd.DataFrame({"a": [0, 1], "b": pd.Series(["2", " 1.0"], dtype=object)}), domain).records.tolist() == [[0, 2], [1, 1]]


def test_a_byte_order_mark_changes_nothing_and_the_report_lists_times_as_not_private(coded, capsys, tmp_path):
    with open("bom.csv", "w", encoding="utf-8-sig", newline="") as f:
        f.write("\n".join(coded) + "\n")
    assert open("bom.csv", "rb").read(3) == b"\xef\xbb\xbf"
    results = []
    for name in ("t.csv", "bom.csv"):
        code, out, err = _main([*RUN, "--data", name, "--out", f"out-{name}", "--report", f"r-{name}.json"], capsys)
        assert code == 0, err
        results.append((open(f"out-{name}").read(), json.loads(open(f"r-{name}.json").read()), out))
    (plain, report, out), (with_bom, bom_report, _) = results
    assert plain == with_bom and report["model"] == bom_report["model"] and report["ledger"] == bom_report["ledger"]
    assert np.array_equal(pj.Dataset.from_csv("bom.csv", "dom.json").records, pj.Dataset.from_csv("t.csv", "dom.json").records)
    # The run's times grow with the record count: listed as not private, and said so where printed.
    assert "seconds" in report and "seconds" in report["not_private"]
    assert ("info.seconds" in report["not_private"]) == ("seconds" in report["info"])
    time_line = next(line for line in out.splitlines() if line.strip().startswith("time"))
    assert "NOT private" in time_line, time_line
