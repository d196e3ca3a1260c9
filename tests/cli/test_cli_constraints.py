"""The schema's "_constraints" through ``pgmjax run``: parsed in raw values, checked before anything is read, taken
by MST and AIM, honoured by the decoded synthetic CSV, counted in the report; refused where they cannot apply."""

import json

import numpy as np
import pandas as pd
import pytest

import pgmjax as pj
from pgmjax import cli
from pgmjax.data.schema import Schema
from pgmjax.data.schema_columns import SchemaError
from pgmjax.queries.schema_constraints import schema_constraints

ZIP_STATE = {"a": "X", "b": "X", "c": "Y", "d": "Z"}
SCHEMA = {
    "age": {"bins": [0, 16, 30, 50, 70, 90], "integer": True},
    "married": {"categories": ["no", "yes"]},
    "zip": {"categories": ["a", "b", "c", "d"]},
    "state": {"categories": ["X", "Y", "Z"]},
    "_constraints": [{"forbid": {"age": {"range": [0, 16]}, "married": "yes"}},
                     {"determines": {"source": "zip", "target": "state", "mapping": ZIP_STATE}}],
}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    d = tmp_path_factory.mktemp("constraints")
    rng = np.random.default_rng(0)
    n = 3000
    age = rng.integers(0, 90, n)
    zips = rng.choice(list(ZIP_STATE), n)
    pd.DataFrame({"age": age, "married": np.where(age < 16, "no", rng.choice(["no", "yes"], n)), "zip": zips,
                  "state": [ZIP_STATE[z] for z in zips]}).to_csv(d / "t.csv", index=False)
    (d / "s.json").write_text(json.dumps(SCHEMA))
    return d


@pytest.mark.parametrize("mechanism,extra", [
    ("mst", []), pytest.param("aim", ["--rounds", "8", "--max-model-mb", "1"], marks=pytest.mark.slow)])
def test_mst_and_aim_release_records_that_keep_the_schemas_constraints(table, tmp_path, capsys, mechanism, extra):
    out, report = tmp_path / "o.csv", tmp_path / "r.json"
    code = cli.main(["run", "--seed", "0", "--data", str(table / "t.csv"), "--schema", str(table / "s.json"),
                     "-m", mechanism, "-e", "1", "--engine-iters", "200", "--out", str(out), "--report", str(report),
                     "--quiet", *extra])
    assert code == 0, capsys.readouterr().err
    synth = pd.read_csv(out, dtype={"married": str, "zip": str, "state": str})
    assert not ((synth.age < 16) & (synth.married == "yes")).any()
    assert (synth.state == synth.zip.map(ZIP_STATE)).all()
    entry = json.loads(report.read_text())
    assert entry["constraints"]["synthetic_violations"] == [0, 0]
    assert entry["constraints"]["input_violations"] == [0, 0]
    assert "constraints.input_violations" in entry["not_private"]
    summary = capsys.readouterr().out
    assert "2 constraints from the schema; the synthetic records break none" in summary
    assert "the input breaks" not in summary  # an exact count of private records: only with --show-private


@pytest.mark.parametrize("constraints,args,expected", [
    (SCHEMA["_constraints"], ["-m", "mwem"], "mwem does not take the schema's \"_constraints\"; mst, aim, tree_aim do"),
    ([{"forbid": {"married": "maybe"}}], ["-m", "mst"], "_constraints[0]: column 'married'"),
    ([{"determines": {"source": "zip", "target": "state", "mapping": {"a": "X"}}}], ["-m", "mst"],
     "mapping gives no 'state' value for 3 'zip' value(s)"),
    ([{"forbid": {"married": ["no", "yes"]}}], ["-m", "aim"], "forbids every combination"),
    ([], ["-m", "mst", "--option", "constraints=x"], "constraints come from the schema file"),
])
def test_constraints_that_cannot_apply_are_refused_before_anything_is_read(table, tmp_path, capsys, constraints, args,
                                                                           expected):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({**SCHEMA, "_constraints": constraints}))
    out = tmp_path / "o.csv"
    assert cli.main(["run", "--seed", "0", "--data", str(table / "t.csv"), "--schema", str(schema), "-e", "1",
                     "--out", str(out), *args]) == 2
    assert expected in capsys.readouterr().err and not out.exists()


def test_schema_constraints_in_raw_values_round_trip():
    schema = Schema.from_dict({
        "age": {"bins": [0, 16, 65, 100], "missing": True}, "married": {"categories": ["no", "yes"]},
        "_constraints": [{"allow": [{"age": None, "married": "no"}, {"age": [20, 70]}]}]})
    [allow] = schema_constraints(schema)
    # bins 16-65 and 65-100 any; the missing code only with "no"; ages under 16 never
    assert allow.allowed(schema.domain).tolist() == [[False, False], [True, True], [True, True], [True, False]]
    assert Schema.from_dict(schema.to_dict()).constraint_specs == schema.constraint_specs
    with pytest.raises(SchemaError, match=r"_constraints must be a list of objects"):
        Schema.from_dict({"married": {"categories": ["no", "yes"]}, "_constraints": {"forbid": {}}})
    with pytest.raises(SchemaError, match=r"no bin lies inside the range \[1, 2\]"):
        schema_constraints(Schema.from_dict({"age": {"bins": [0, 16, 65]}, "_constraints": [
            {"forbid": {"age": {"range": [1, 2]}}}]}))
    assert isinstance(schema_constraints(Schema.from_dict({"age": {"bins": [0, 16, 65]}, "_constraints": [
        {"forbid": {"age": 3}}]}))[0], pj.Constraint)  # one column: a value no record takes
