"""Issue 41, "nothing leaked": every data-dependent choice of the raw path is declared, private and charged, or a rule.

Neighbouring raw tables (one record changed or added) go through the raw path the command line uses
(:func:`pgmjax.cli.preprocessing.load_private` with the run's key, and ``pgmjax run`` itself with a fixed
seed): the schema's format choices (column kind, integer, decimals rule, date vs datetime, category set)
and the output's format must not depend on the one record. Then the category threshold against the
discrete law's exact tail, and the ledger of the mechanisms with replace-one neighbours.

Tables are small (2,000 rows) and the fits short (MST, 20 engine iterations): the machine's CPU is shared.
"""

import argparse
import json
import math
import re

import jax
import numpy as np
import pandas as pd
import pytest

from pgmjax.cli import main
from pgmjax.cli import preprocessing as P
from pgmjax.mechanisms import budget_split as B
from pgmjax.data.schema_columns import CategoricalColumn, NumericColumn
from pgmjax.privacy import Accountant
from pgmjax.privacy import discrete_noise as dn

N = 2000
ISO_DATE = r"\d{4}-\d{2}-\d{2}"


def base_table(n: int = N, seed: int = 0) -> pd.DataFrame:
    """Integer incomes with blanks, ISO dates with blanks, a four-valued city, integer codes written as text."""
    rng = np.random.default_rng(seed)
    income = np.array([str(int(v)) for v in np.exp(np.log(40000) + 0.6 * rng.standard_normal(n))], dtype=object)
    income[rng.random(n) < 0.03] = ""
    joined = np.datetime_as_string(np.datetime64("2015-01-01") + rng.integers(0, 2000, n), unit="D").astype(object)
    joined[rng.random(n) < 0.02] = ""
    return pd.DataFrame({"income": income, "joined": joined, "city": rng.choice(["Lyon", "Nice", "Paris", "Rome"], n),
                         "code": rng.choice(["1", "2", "3"], n)})


def changed(frame: pd.DataFrame, column: str, value: str, row: int = 17) -> pd.DataFrame:
    """The neighbour with one record's field replaced (replace-one)."""
    out = frame.copy()
    out.loc[row, column] = value
    return out


def added(frame: pd.DataFrame, **fields) -> pd.DataFrame:
    """The neighbour with one record added (add/remove): the first record's fields with ``fields`` set."""
    record = frame.iloc[[0]].copy()
    for k, v in fields.items():
        record[k] = v
    return pd.concat([frame, record], ignore_index=True)


def private_raw(frame: pd.DataFrame, path, mechanism: str = "mst", seed: int = 0):
    """The raw path of ``pgmjax run --data path -m mechanism -e 1 --seed seed``: the split, then load_private
    with the run's key (``fold_in(key(seed), 7)``), as :func:`pgmjax.cli.run.load_inputs` calls it."""
    frame.to_csv(path, index=False)
    split = B.split_budget(mechanism, 1.0, None, 0.1, bounded=B.neighbouring(mechanism))
    args = argparse.Namespace(data=str(path), split=split, bins=10, discovery_delta=1e-9, ranges=None, kinds=None,
                              decimals=None, min_count=5, decode=None, show_private=False)
    data, schema, result = P.load_private(args, lambda msg: None, jax.random.fold_in(jax.random.key(seed), 7))
    return data, schema, split.accountant


def formats(schema) -> dict:
    """The schema's format choices: per column, (binned or not, kind, integer, categories); decimals are checked
    separately (a rule of the released edges)."""
    out = {}
    for name, col in schema.columns.items():
        if isinstance(col, NumericColumn):
            out[name] = ("binned", col.kind, col.integer)
        else:
            out[name] = ("categorical", tuple(col.categories), col.other)
    return out


def run_cli(frame: pd.DataFrame, d, mechanism: str = "mst", extra=()) -> tuple[int, pd.DataFrame | None, dict | None]:
    """``pgmjax run`` on the raw table, seed 0: exit code, the synthetic CSV as text, the report."""
    d.mkdir(exist_ok=True)
    frame.to_csv(d / "raw.csv", index=False)
    code = main(["run", "--seed", "0", "--data", str(d / "raw.csv"), "-m", mechanism, "-e", "1", "--seed", "0", "--engine-iters", "20",
                 "--out", str(d / "out.csv"), "--report", str(d / "report.json"), "-q", *extra])
    if code != 0:
        return code, None, None
    synth = pd.read_csv(d / "out.csv", dtype=str, keep_default_na=False)
    return code, synth, json.loads((d / "report.json").read_text())


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("base")
    frame = base_table()
    _, schema, _ = private_raw(frame, d / "raw.csv")
    code, synth, _ = run_cli(frame, d / "run")
    assert code == 0
    return frame, schema, synth


def assert_integers(values: pd.Series):
    filled = values[values != ""]
    assert len(filled) and filled.str.fullmatch(r"-?\d+").all(), filled[~filled.str.fullmatch(r"-?\d+")].head().tolist()


# ---------------------------------------------------------------------------------------------------
# One record must not change the format
# ---------------------------------------------------------------------------------------------------


def test_one_long_decimal_does_not_change_an_integer_column(base, tmp_path):
    frame, schema, synth = base
    other = changed(frame, "income", "41234.56789")
    _, schema2, _ = private_raw(other, tmp_path / "raw.csv")
    assert formats(schema2) == formats(schema)
    assert schema2.columns["income"].integer and schema2.columns["income"].decimals is None
    code, synth2, _ = run_cli(other, tmp_path / "run")
    assert code == 0
    assert_integers(synth["income"])
    assert_integers(synth2["income"])  # not every income with 5 decimals


def test_one_na_in_a_number_column_is_missing_not_a_text_column(base, tmp_path):
    frame, schema, synth = base
    other = changed(frame, "income", "n/a")
    data2, schema2, _ = private_raw(other, tmp_path / "raw.csv")
    assert formats(schema2) == formats(schema) and isinstance(schema2.columns["income"], NumericColumn)
    col = schema2.columns["income"]
    assert data2.records[17, 0] == col.bins  # the missing code
    code, synth2, _ = run_cli(other, tmp_path / "run")
    assert code == 0 and "other" not in set(synth2["income"])
    assert_integers(synth2["income"])


def test_one_datetime_does_not_turn_a_date_column_into_datetimes(base, tmp_path):
    frame, schema, synth = base
    other = added(frame, joined="2020-02-03 04:05")
    _, schema2, _ = private_raw(other, tmp_path / "raw.csv")
    assert formats(schema2) == formats(schema) and schema2.columns["joined"].kind == "date"
    code, synth2, _ = run_cli(other, tmp_path / "run")
    assert code == 0
    for s in (synth, synth2):
        filled = s["joined"][s["joined"] != ""]
        assert len(filled) and filled.str.fullmatch(ISO_DATE).all()


def test_an_invalid_date_is_missing_and_the_run_succeeds(base, tmp_path):
    frame, schema, _ = base
    other = changed(frame, "joined", "2020-02-30")
    data2, schema2, _ = private_raw(other, tmp_path / "raw.csv")
    assert formats(schema2) == formats(schema) and schema2.columns["joined"].kind == "date"
    assert data2.records[17, 1] == schema2.columns["joined"].bins  # the missing code, not an error
    code, synth2, report = run_cli(other, tmp_path / "run")
    assert code == 0  # not exit 2 naming (or hinting at) the one record
    filled = synth2["joined"][synth2["joined"] != ""]
    assert filled.str.fullmatch(ISO_DATE).all()


def test_a_rare_category_changes_neither_the_kind_nor_the_categories(base, tmp_path):
    frame, schema, synth = base
    # One record with a value that is not a code: the code column stays numeric; one rare city is not released.
    other = added(frame, code="unknown-xyz", city="Smallville")
    _, schema2, _ = private_raw(other, tmp_path / "raw.csv")
    assert formats(schema2) == formats(schema)
    assert isinstance(schema2.columns["code"], NumericColumn) and schema2.columns["code"].integer
    cities = schema2.columns["city"]
    assert isinstance(cities, CategoricalColumn) and "Smallville" not in cities.categories
    code, synth2, _ = run_cli(other, tmp_path / "run")
    assert code == 0
    assert_integers(synth2["code"])
    assert set(synth2["city"]) <= set(cities.categories) | {cities.other} and "Smallville" not in set(synth2["city"])


def test_unreadable_values_of_a_declared_kind_are_missing_and_the_vote_is_charged(tmp_path):
    frame = changed(base_table(), "income", "inf")
    frame.to_csv(tmp_path / "raw.csv", index=False)
    split = B.split_budget("mst", 1.0, None, 0.1)
    args = argparse.Namespace(data=str(tmp_path / "raw.csv"), split=split, bins=10, discovery_delta=1e-9, ranges=None,
                              kinds=[("income", "integer")], decimals=None, min_count=5, decode=None, show_private=False)
    data, schema, _ = P.load_private(args, lambda msg: None, jax.random.key(0))
    assert schema.columns["income"].integer and data.records[17, 0] == schema.columns["income"].bins
    targets = [e.target for e in split.accountant.ledger]
    # The declared column has no kind vote; every other column has one, charged to the same accountant.
    assert "preprocess income: kind" not in targets
    assert {"preprocess joined: kind", "preprocess city: kind", "preprocess code: kind"} <= set(targets)
    assert split.accountant.spent == pytest.approx(split.accountant.budget, rel=1e-9)


# ---------------------------------------------------------------------------------------------------
# Category discovery's threshold against the discrete law's exact tail
# ---------------------------------------------------------------------------------------------------


def _gaussian_pmf_tail(sigma: float, k: int) -> float:
    """P[Z >= k] of the discrete Gaussian, summed from its pmf (independently of the library)."""
    z = range(-int(60 * sigma) - 60, int(60 * sigma) + 61)
    w = {v: math.exp(-v * v / (2 * sigma * sigma)) for v in z}
    return math.fsum(w[v] for v in z if v >= k) / math.fsum(w.values())


def _laplace_pmf_tail(b: float, k: int) -> float:
    """P[Z >= k] of the discrete Laplace law of scale ``b``, summed from its pmf."""
    p = math.exp(-1.0 / b)
    return math.fsum((1 - p) / (1 + p) * p ** abs(v) for v in range(k, k + int(200 * b) + 200))


def _realised_laplace_scale(scale: float) -> float:
    """The scale the discrete Laplace sampler actually uses for a requested ``scale`` (rounded up to a rational)."""
    return dn.discrete_laplace(dn.generator(jax.random.key(0)), (1,), scale)[1]


@pytest.mark.parametrize("family, budget, delta", [
    ("gaussian", 0.5, 1e-9),             # sigma = 1: the continuous quantile understates the tail about 6x
    ("gaussian", 0.02, 1e-9),            # sigma = 5
    ("gaussian", 5e-5, 2.5e-10),         # sigma = 100
    ("laplace", 1.0, 0.5 * math.exp(-13.99)),  # b = 1, the continuous threshold just below an integer
    ("laplace", 0.1, 1e-9),              # b = 10
])
def test_category_threshold_bounds_a_single_records_release_by_delta_exactly(family, budget, delta):
    from pgmjax.preprocessing.preprocess import private_categories

    acc = Accountant(rho=1.0) if family == "gaussian" else Accountant(epsilon=1.0)
    values = ["common"] * 500 + ["single"]
    kw = {"budget": budget, "delta": delta, "min_count": 1}
    _, tau = private_categories(acc, jax.random.key(0), values, **kw)
    scale = acc.ledger[-1].scale
    if family == "gaussian":
        tail = lambda k: _gaussian_pmf_tail(scale, k)  # noqa: E731
    else:
        b = _realised_laplace_scale(scale)
        tail = lambda k: _laplace_pmf_tail(b, k)  # noqa: E731
    # Released when 1 + noise >= tau (integer counts and noise): P[Z >= ceil(tau) - 1].
    released = tail(math.ceil(tau) - 1)
    assert released <= delta, (tau, released / delta)
    assert float(tau).is_integer() and tail(int(tau) - 2) > delta  # the smallest such integer
    # Today's rule (before issue 41): tau = 1 + the continuous law's upper-delta quantile, released when
    # 1 + noise > tau. It overshoots delta for these laws (up to 6.1x for the discrete Gaussian at sigma = 1).
    if family == "gaussian":
        from scipy.stats import norm

        old = 1 + scale * norm.isf(delta)
    else:
        old = 1 + scale * math.log(1 / (2 * delta))
    old_released = tail(math.floor(old - 1) + 1)
    if budget in (0.5, 1.0):
        assert old_released > delta, old_released / delta


def test_discrete_tail_matches_the_pmf_sums():
    from pgmjax.privacy import discrete_tails as tails

    for sigma in (0.5, 1.0, 3.0, 41.0):
        for k in (1, 3, int(6 * sigma) + 1):
            assert tails.discrete_tail("gaussian", sigma, k) == pytest.approx(_gaussian_pmf_tail(sigma, k), rel=1e-9)
    for scale in (0.3, 1.0, 7.5):
        b = _realised_laplace_scale(scale)
        for k in (1, 4, 30):
            assert tails.discrete_tail("laplace", scale, k) == pytest.approx(_laplace_pmf_tail(b, k), rel=1e-9)
    # Beyond the exact range (sigma > 1e5) an upper bound, tight to a relative 1e-4.
    k = tails.tail_threshold("gaussian", 2e5, 1e-9)
    assert tails.discrete_tail("gaussian", 2e5, k) <= 1e-9 < tails.discrete_tail("gaussian", 2e5, k - 1)


def test_laplace_sum_threshold_is_finite_at_any_scale():
    """At a tiny scale (epsilon 1e4) p = exp(-1/b) underflowed to 0 while e^l overflowed: 0 * inf made the Chernoff
    bound NaN, and every `count >= threshold` test silently False. The bound still holds where it is computed: a
    sum of m draws of the discrete Laplace exceeds it with probability at most alpha (checked by the exact tail of
    one draw, m = 1, which it must not undercut)."""
    import warnings

    from pgmjax.privacy import discrete_tails as tails

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow on the way
        for scale in (1e-6, 1e-4, 0.01, 0.3, 1.0, 7.5, 1e3):
            for m in (1, 4, 100):
                t = tails.sum_threshold("laplace", scale, m, 1e-6)
                assert np.isfinite(t) and t > 0, (scale, m, t)
            # One draw: P[Z >= t] <= alpha, so t is at least the exact one-sided tail threshold's lower neighbour.
            t1 = tails.sum_threshold("laplace", scale, 1, 1e-6)
            assert tails.discrete_tail("laplace", scale, int(np.ceil(t1))) <= 1e-6


# ---------------------------------------------------------------------------------------------------
# The ledger of replace-one mechanisms: the printed guarantee is the sum of correctly charged entries
# ---------------------------------------------------------------------------------------------------


def _parts(target: str) -> int:
    m = re.search(r"\((\d+) parts\)", str(target))
    return int(m.group(1)) if m else (2 if "clipping bounds" in str(target) else 1)


@pytest.mark.parametrize("mechanism, extra", [
    ("rr_synthetic", []),
    ("dualquery", []),
    ("privbayes", ["--option", "bounded=true"]),
])
def test_replace_one_mechanisms_charge_the_preprocessing_for_replace_one(tmp_path, capsys, mechanism, extra):
    frame = base_table()
    code, _, report = run_cli(frame, tmp_path / "run", mechanism, extra)
    stdout = capsys.readouterr().out
    assert code == 0
    pre = report["preprocessing"]
    assert pre.get("bounded") is True and "replace-one neighbours" in pre["split"]
    total = 0.0
    for e in pre["ledger"]:
        if e["mechanism"] == "laplace":
            # A histogram: one replaced record moves two counts by one (L1 sensitivity 2).
            assert e["sensitivity"] == 2.0 and e["cost"] == pytest.approx(2.0 / e["scale"], rel=1e-12)
        else:
            assert e["mechanism"] == "exponential" and e["sensitivity"] == 1.0  # rank quality: 1 under replace-one
            # A parallel round over several parts: a replaced record may leave one part and join another.
            assert e["count"] == (2 if _parts(e["target"]) > 1 else 1), e["target"]
            assert e["cost"] == pytest.approx(e["count"] * e["epsilon"], rel=1e-12)
        total += e["cost"]
    assert total == pytest.approx(pre["spent"], rel=1e-12) and pre["spent"] == pytest.approx(0.1, rel=1e-9)
    mech = report["privacy"]
    assert mech["bounded"] is True  # the mechanism's own accountant: the same neighbours
    assert pre["spent"] + mech["epsilon_spent"] == pytest.approx(1.0, rel=1e-9)  # both shares, all spent
    # The printed guarantee is that sum, with the mechanism's delta (DualQuery's default 1e-9 too) and the discovery's.
    line = re.search(r"whole release \(eps=([\d.e+-]+), delta=([\d.e+-]+)\)-DP", stdout)
    assert line and float(line.group(1)) == pytest.approx(pre["spent"] + mech["epsilon_spent"], rel=1e-6)
    assert float(line.group(2)) == pytest.approx((mech.get("delta") or 0.0) + pre["discovery_delta"], rel=1e-6)


def test_the_neighbouring_relation_follows_the_mechanism_and_its_options():
    assert B.neighbouring("rr_synthetic") and B.neighbouring("dualquery") and B.neighbouring("privbayes", {"bounded": True})
    assert not B.neighbouring("mst") and not B.neighbouring("aim") and not B.neighbouring("privbayes")
    assert not B.neighbouring("rr_synthetic", {"bounded": False}) and not B.neighbouring("mwem")
    split = B.split_budget("rr_synthetic", 1.0, None, 0.5, bounded=True)
    assert split.accountant.bounded and split.accountant.budget == 0.5

    class Result:
        accountant = Accountant(epsilon=1.0)  # add/remove

    from pgmjax.cli.errors import RunFailure

    with pytest.raises(RunFailure, match="internal accounting error"):
        P.check_neighbours(argparse.Namespace(split=split, mechanism="rr_synthetic"), Result())


def test_declared_kinds_and_decimals_from_the_command_line(tmp_path, capsys):
    frame = changed(base_table(), "income", "41234.56789")
    frame.to_csv(tmp_path / "raw.csv", index=False)
    out = tmp_path / "s.json"
    assert main(["schema", "--seed", "0", "--data", str(tmp_path / "raw.csv"), "--epsilon", "1", "--kind", "income=number",
                 "--decimals", "income=2", "--kind", "code=text", "--out", str(out)]) == 0
    spec = json.loads(out.read_text())
    assert spec["income"]["decimals"] == 2 and not spec["income"].get("integer", False)
    assert spec["code"]["categories"] == ["", "1", "2", "3"]
    assert "income, code" not in spec["_pgmjax"]["public"] and "kinds of code, income" in spec["_pgmjax"]["public"]
    capsys.readouterr()
    for bad, expected in ((["--kind", "income=integer", "--decimals", "income=2"], "decimals apply to non-integer"),
                          (["--kind", "nope=text"], "must name a column"),
                          (["--kind", "city=number", "--kind", "city=text"], "--kind city is given twice")):
        assert main(["schema", "--seed", "0", "--data", str(tmp_path / "raw.csv"), "--epsilon", "1", *bad]) == 2
        assert expected in capsys.readouterr().err
    assert main(["run", "--seed", "0", "--data", str(tmp_path / "raw.csv"), "-m", "privbayes", "-e", "1", "--option", "bounded=yes"]) == 2
    assert "bounded must be true or false" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------
# A declared schema (--schema): unreadable fields of a column with a missing code are missing, not an error
def _declared_schema(d):
    spec = {"income": {"bins": 4, "range": [0, 100000], "missing": True, "clip": True},
            "hired": {"type": "date", "bins": 4, "range": ["2000-01-01", "2020-12-31"], "missing": True, "clip": True},
            "city": {"categories": ["Lyon", "Nice"], "other": "other"}}
    (d / "schema.json").write_text(json.dumps(spec))
    return d / "schema.json"


def test_declared_schema_reads_unreadable_fields_as_missing(tmp_path):
    from pgmjax.data import schema as S

    schema = S.load_schema(str(_declared_schema(tmp_path)))
    frame = pd.DataFrame({"income": ["100", "n/a", "2500.5", "inf"], "hired": ["2001-02-03", "2020-02-30", "", "x"],
                          "city": ["Lyon", " Nice ", "Paris", ""]})
    with pytest.raises(S.SchemaError):  # the strict default names the field's column
        schema.encode(frame)
    data = schema.encode(frame, unreadable="missing")
    inc, hired = schema.columns["income"], schema.columns["hired"]
    codes = np.asarray(data.records)
    missing_income, missing_hired = inc.size - 1, hired.size - 1  # the missing code is each column's last
    assert codes[1, 0] == codes[3, 0] == missing_income
    assert codes[1, 1] == codes[2, 1] == codes[3, 1] == missing_hired
    assert codes[0, 1] != missing_hired and codes[0, 0] != missing_income


def test_cli_run_with_a_declared_schema_never_stops_on_one_field(tmp_path):
    """One record with `n/a` or `2020-02-30` in a missing-coded column no longer stops `pgmjax run --schema`
    (exit 2 depended on that one record)."""
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame({"income": rng.integers(0, 90000, n).astype(str),
                          "hired": pd.to_datetime("2005-01-01") + pd.to_timedelta(rng.integers(0, 4000, n), "D"),
                          "city": rng.choice(["Lyon", "Nice", "Paris"], n)})
    frame["hired"] = frame["hired"].dt.strftime("%Y-%m-%d")
    frame.loc[0, "income"] = "n/a"
    frame.loc[1, "hired"] = "2020-02-30"
    frame.to_csv(tmp_path / "raw.csv", index=False)
    code = main(["run", "--seed", "0", "--data", str(tmp_path / "raw.csv"), "--schema", str(_declared_schema(tmp_path)), "-m", "mst",
                 "-e", "1", "--seed", "0", "--engine-iters", "20", "--out", str(tmp_path / "out.csv"), "-q"])
    assert code == 0
    assert len(pd.read_csv(tmp_path / "out.csv")) > 0
