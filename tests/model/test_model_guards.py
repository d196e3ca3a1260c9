"""Model guards: a model that is not finite and consistent is never sampled, saved or loaded, and
``load_model`` refuses every corrupted field of ``model.json`` with a ``ValueError`` naming it."""

import ast
import doctest
import hashlib
import io
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgmjax as pj
from pgmjax.estimation import inputs
from pgmjax.graph import oracle
from pgmjax.model import graphical_model as model_mod
from pgmjax.model import serialization

DOMAIN = pj.Domain({"a": 3, "b": 4, "c": 2, "d": 5})
CLIQUES = [("a", "b"), ("b", "c"), ("c", "d")]


def random_model(rng, dtype=jnp.float64, total=321.0, **edit):
    """A model of random log-potentials; ``edit = {clique: (index, value)}`` sets one potential."""
    plan = oracle.make_plan(DOMAIN, CLIQUES)
    tables = {c: rng.normal(size=DOMAIN.shape_of(c)) for c in CLIQUES}
    tables[("a", "b")][0, 1] = -np.inf  # a structural zero: allowed
    for name, (index, value) in edit.items():
        tables[tuple(name.split("_"))][index] = value
    return pj.GraphicalModel(plan, plan.from_tables(tables, dtype), total)


def _re(clique) -> str:
    return re.escape(str(tuple(clique)))


# ---------------------------------------------------------------------------------------------------
# The check itself
# ---------------------------------------------------------------------------------------------------


def test_a_sound_model_passes_and_its_marginals_sum_to_the_total(rng):
    m = random_model(rng)
    m.check()
    for c in m.cliques:  # the reference the check compares with (float64 brute force over the table)
        assert m.marginal(c).sum() == pytest.approx(321.0, rel=1e-12)


@pytest.mark.parametrize("value, word", [(np.nan, "NaN"), (np.inf, r"\+inf")])
@pytest.mark.parametrize("method", ["exact", "low_variance"])
def test_nan_or_inf_potentials_are_not_sampled(rng, value, word, method):
    m = random_model(rng, b_c=((1, 0), value))
    # Before the guard: "exact" returned plausible-looking records, "low_variance" an obscure error.
    with pytest.raises(FloatingPointError, match=rf"synthetic_data: the potentials of clique \('b', 'c'\) hold {word}"):
        m.synthetic_data(50, jax.random.key(0), method=method)


@pytest.mark.parametrize("method", ["exact", "low_variance"])
def test_inconsistent_marginals_are_not_sampled(rng, method):
    sound = random_model(rng)
    # Marginals that do not sum to the total (the symptom of a broken fit or decompression).
    blocks = {k: v * 300.0 for k, v in sound.marginal_blocks().items()}
    broken = pj.GraphicalModel(sound.plan, sound.theta, sound.total)
    broken.cache.marginal_blocks = blocks  # a model whose marginal program went wrong (its cache says so)
    with pytest.raises(FloatingPointError, match=rf"the marginal of clique {_re(broken.cliques[0])} sums to 96300, not the total 321"):
        broken.synthetic_data(50, jax.random.key(0), method=method)


@pytest.mark.parametrize("total", [np.nan, 0.0, -5.0, np.inf])
def test_bad_totals_are_refused(rng, tmp_path, total):
    m = random_model(rng, total=total)
    with pytest.raises(FloatingPointError, match="total is .*expected a positive finite number"):
        m.synthetic_data(10, jax.random.key(0))
    with pytest.raises(FloatingPointError, match="save: the model's total"):
        m.save(tmp_path / "never-written")
    assert not os.path.exists(tmp_path / "never-written")


def test_a_clique_of_only_structural_zeros_is_refused(rng):
    plan = oracle.make_plan(DOMAIN, CLIQUES)
    tables = {c: rng.normal(size=DOMAIN.shape_of(c)) for c in CLIQUES}
    tables[("c", "d")][:] = -np.inf
    m = pj.GraphicalModel(plan, plan.from_tables(tables, jnp.float64), 100.0)
    with pytest.raises(FloatingPointError, match=r"marginal of clique \('c', 'd'\) sums to 0, not the total 100 \(all its potentials are -inf"):
        m.check("sample")


def test_save_refuses_a_nan_model_and_writes_nothing(rng, tmp_path):
    m = random_model(rng, c_d=((0, 0), np.nan))
    with pytest.raises(FloatingPointError, match=r"save: the potentials of clique \('c', 'd'\) hold NaN"):
        m.save(tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_estimate_uses_the_same_check(rng):
    m = random_model(rng)
    mu = {k: v * 2.0 for k, v in m.marginal_blocks().items()}
    with pytest.raises(FloatingPointError, match=rf"estimate: the fitted model: the marginal of clique {_re(m.cliques[0])} sums to 642"):
        inputs.check_fitted(m.plan, m.theta, mu, m.total, 1.0)
    with pytest.raises(FloatingPointError, match="loss is nan"):
        inputs.check_fitted(m.plan, m.theta, m.marginal_blocks(), m.total, float("nan"))
    # a fitted model passes, and is sampled
    data = pj.Dataset(rng.integers(0, [3, 4, 2, 5], size=(200, 4)), DOMAIN)
    fit = pj.estimate(DOMAIN, [pj.Measurement(c, data.marginal(c), stddev=1.0) for c in CLIQUES], iters=20)
    assert len(fit.synthetic_data(30, jax.random.key(1))) == 30


def test_check_is_cached_and_follows_new_potentials(rng):
    m = random_model(rng)
    m.check()
    m = m.replace(theta={k: v.at[(0,) * v.ndim].set(jnp.nan) for k, v in m.theta.items()})  # a new model: checked again
    with pytest.raises(FloatingPointError, match="hold NaN"):
        m.check()


def test_docstring_examples_run():
    globs = {"pj": pj, "np": np, "check_consistent": model_mod.check_consistent}
    for obj in (model_mod.check_consistent, model_mod.GraphicalModel.check):
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        for test in doctest.DocTestFinder().find(obj, globs=globs):
            runner.run(test)
        assert runner.failures == 0 and runner.tries >= 2


def test_model_module_does_not_import_serialization_at_import_time():
    tree = ast.parse(open(model_mod.__file__).read())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name for n in top for a in n.names} | {n.module or "" for n in top if isinstance(n, ast.ImportFrom)}
    assert not any("serialization" in n for n in names)


# ---------------------------------------------------------------------------------------------------
# load_model: every field validated
# ---------------------------------------------------------------------------------------------------


@pytest.fixture
def saved(rng, tmp_path):
    path = tmp_path / "m"
    random_model(rng).save(path)
    return path


def _edit(path, **fields):
    s = json.load(open(path / "model.json"))
    for k, v in fields.items():
        if v is KeyError:
            del s[k]
        else:
            s[k] = v
    with open(path / "model.json", "w") as f:
        json.dump(s, f)  # NaN/Infinity are written as JSON's extension, as a damaged or hand-edited file may hold


def _write_arrays(path, blob: bytes):
    (path / "potentials.npz").write_bytes(blob)
    _edit(path, arrays={"file": "potentials.npz", "sha256": hashlib.sha256(blob).hexdigest()})


BAD_FIELDS = [
    ("total", float("nan"), "positive finite"),
    ("total", 0, "positive finite"),
    ("total", -5, "positive finite"),
    ("total", float("inf"), "positive finite"),
    ("total", "321", "must be a number"),
    ("total", True, "must be a number"),
    ("total", KeyError, "is missing"),
    ("dtype", "int32", "expected one of"),
    ("dtype", "float16", "expected one of"),
    ("dtype", ["float32"], "expected one of"),
    ("domain", {"a": 3, "b": 0, "c": 2, "d": 5}, "size 0"),
    ("domain", {"a": 3, "b": 4.5, "c": 2, "d": 5}, "size 4.5"),
    ("domain", [3, 4], "non-empty object"),
    ("cliques", [["a", "b"], ["b", "zz"], ["c", "d"]], "'zz' is not in the domain"),
    ("cliques", [["a", "b"], ["a", "b"], ["c", "d"]], "more than once"),
    ("cliques", "ab", "non-empty list"),
    ("free", ["zz"], "not in the domain"),
    ("free", ["a"], "not a one-attribute clique"),
    ("loss", "low", "must be a number"),
    ("loss", float("nan"), "finite or null"),
    ("history", "junk", "list of objects"),
    ("history", [{"iteration": [1]}], "expected a number or text"),
    ("arrays", {"file": "potentials.npz"}, "sha256"),
    ("arrays", {"file": "../potentials.npz", "sha256": "0" * 64}, "file name in the model's folder"),
    ("arrays", {"file": "potentials.npz", "sha256": 5}, "64 lower-case hex"),
    ("arrays", "potentials.npz", "expected"),
]


@pytest.mark.parametrize("field, value, match", BAD_FIELDS, ids=[f"{f}={v!r}" for f, v, _ in BAD_FIELDS])
def test_a_corrupted_field_raises_value_error_naming_it(saved, field, value, match):
    _edit(saved, **{field: value})
    with pytest.raises(ValueError, match=rf"field '{field}'.*{match}") as info:
        pj.load_model(saved)
    assert info.value.__cause__ is not None or value is KeyError  # the original exception is chained


def test_nan_tables_with_a_recomputed_digest_are_refused(saved):
    with np.load(saved / "potentials.npz") as npz:
        arrays = dict(npz)
    arrays["clique_1"][0, 0] = np.nan
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    _write_arrays(saved, buffer.getvalue())
    with pytest.raises(ValueError, match=r"table clique_1 of clique \('b', 'c'\) holds NaN"):
        pj.load_model(saved)


def test_tables_of_another_dtype_are_refused(saved):
    with np.load(saved / "potentials.npz") as npz:
        arrays = {k: v.astype(np.float16) for k, v in npz.items()}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    _write_arrays(saved, buffer.getvalue())
    with pytest.raises(ValueError, match="has dtype float16, field 'dtype' says float64"):
        pj.load_model(saved)


@pytest.mark.parametrize("blob, old_error", [(b"", "EOFError"), (b"not a zip archive at all" * 10, "BadZipFile"),
                                             (b"PK\x03\x04" + b"\x00" * 40, "BadZipFile")])
def test_unreadable_array_files_raise_value_error(saved, blob, old_error):
    _write_arrays(saved, blob)  # digest recomputed: only the archive itself is damaged
    with pytest.raises(ValueError, match="not a readable NPZ archive") as info:
        pj.load_model(saved)
    assert info.value.__cause__ is not None


def test_a_missing_table_is_named(saved):
    with np.load(saved / "potentials.npz") as npz:
        arrays = {k: v for k, v in npz.items() if k != "clique_2"}
    third = json.load(open(saved / "model.json"))["cliques"][2]
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    _write_arrays(saved, buffer.getvalue())
    with pytest.raises(ValueError, match=rf"lacks the table clique_2 of clique {_re(tuple(third))}"):
        pj.load_model(saved)


def test_an_all_minus_inf_table_is_refused_on_load(saved):
    with np.load(saved / "potentials.npz") as npz:
        arrays = dict(npz)
    arrays["clique_0"][:] = -np.inf
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    _write_arrays(saved, buffer.getvalue())
    with pytest.raises(ValueError, match="not consistent.*sums to 0, not the total 321 \\(all its potentials are -inf") as info:
        pj.load_model(saved)
    assert isinstance(info.value.__cause__, FloatingPointError)


def test_a_sound_file_still_round_trips(saved, rng):
    back, report = pj.load_model(saved, report=True)
    again = random_model(np.random.default_rng(1234))  # the same draws as the fixture's model
    for c in CLIQUES:
        np.testing.assert_array_equal(np.asarray(back.potentials[c]), np.asarray(again.potentials[c]))
    assert back.total == 321.0 and report.loss is None and report.history == ()
    assert isinstance(back, pj.GraphicalModel) and pj.load_model(saved).total == 321.0
    assert serialization.load_model is pj.load_model
