"""A memory model that is true (issue 57, item 2): every fit, mechanism and sampler counts its peak working set.

The size limit bounds a run's peak (:mod:`pgmjax.graph.size_limit`); a fit counts every copy its method
makes in its dtype (:mod:`pgmjax.estimation.memory`), HDMM and DualQuery count their fit before any budget is spent,
and the sampler streams its records in chunks (:func:`pgmjax.model.sampling.sample_chunks`). Nothing here
allocates more than a few hundred MB: the Titanic cases test the refusal, which comes before any table.
"""

import json
import os
import textwrap

import jax
import numpy as np
import pandas as pd
import pytest
from conftest import data_dir_or_skip, run_script

import pgmjax as pj
from pgmjax import cli
from pgmjax.graph import size_limit
from pgmjax.model import sampling
from pgmjax.model.serialization import save_model
from pgmjax.privacy import Accountant

#: The default limit on the 24 GB machine of the issue's finding (50% of its RAM), set explicitly so the
#: Titanic tests do not depend on this machine's memory.
LIMIT_24GB = 0.5 * 23.54 * 2**30


@pytest.fixture
def no_budget_spent(monkeypatch):
    """Any measurement fails the test: a refusal must come before the budget is spent (and before the fit)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the budget was spent before the size check")

    for name in ("measure", "measure_many", "laplace", "gaussian", "exponential", "exponential_parallel",
                 "randomized_response"):
        monkeypatch.setattr(Accountant, name, refuse)


@pytest.fixture
def limit_24gb():
    previous = size_limit.set_max_model_bytes(LIMIT_24GB)
    yield
    size_limit.set_max_model_bytes(previous)


def _titanic():
    path = data_dir_or_skip("titanic")
    return os.path.join(path, "titanic.csv"), os.path.join(path, "titanic-domain.json")


@pytest.mark.parametrize("mechanism", ["hdmm", "dualquery"])
def test_titanic_all_pairs_is_refused_before_the_budget(mechanism, limit_24gb, no_budget_spent, capsys, tmp_path):
    # The finding: one float64 copy of the 2.8e8-cell model (2.2 GB) passed the check, the fit then
    # reached 16 GB (hdmm) and 13.6 GB (dualquery) and was killed. Its peak is refused up front, exit 2.
    csv, dom = _titanic()
    out = tmp_path / "o.csv"
    code = cli.main(["run", "--seed", "0", "--data", csv, "--domain", dom, "-m", mechanism, "-e", "1", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "peak working set" in err and "above the limit" in err and "mirror_descent" in err, err
    assert "278,623,800 cells" in err  # the junction tree's cells, and its largest clique named
    assert not out.exists()


def test_titanic_peaks_count_the_copies():
    from pgmjax.estimation import memory

    _, dom = _titanic()
    domain = pj.Domain(json.load(open(dom)))
    pairs = [(a, b) for i, a in enumerate(domain.attributes) for b in domain.attributes[i + 1:]]
    one_copy = 8 * domain.size()
    assert one_copy < LIMIT_24GB  # what the old check counted, and passed
    hdmm = memory.fit_peak_bytes(domain, pairs, "mirror_descent", np.float32,
                                 gathered=memory.host_cells(domain, pairs, pairs))
    dualquery = memory.fit_peak_bytes(domain, pairs, "mirror_descent", np.float32, callable_loss=True)
    assert hdmm > 16 * 2**30 and dualquery > 13.6 * 2**30  # at least what the killed runs reached


def test_estimate_counts_its_method_copies_not_one_float64_copy():
    from pgmjax.estimation import memory

    dom = pj.Domain({"a": 100, "b": 100, "c": 100})  # one clique of 1e6 cells: 8 MB as float64
    ms = [pj.Measurement(("a", "b"), np.ones(10**4)), pj.Measurement(("b", "c"), np.ones(10**4))]
    limit = 16 * 2**20  # two float64 copies: the old check passed, the fit's 8 float32 copies (32 MB) do not
    with size_limit.limited(limit):
        with pytest.raises(pj.ModelTooLarge, match=r"estimate: the mirror_descent fit's peak working set: .*8 float32 "
                                                   r"copies of the junction tree's 1,000,000 cells"):
            pj.estimate(dom, ms, cliques=[("a", "b", "c")], iters=1)
        with pytest.raises(pj.ModelTooLarge, match="dual_averaging fit"):
            pj.estimate(dom, ms, cliques=[("a", "b", "c")], iters=1, method="dual_averaging")
    assert memory.model_copies("mirror_descent") < memory.model_copies("lbfgs") < memory.model_copies("dual_averaging")


_PEAK = textwrap.dedent("""
    import json, resource, sys, numpy as np, pgmjax as pj
    from pgmjax.estimation import memory
    warm = pj.Domain({"a": 4, "b": 4, "c": 4})
    pj.estimate(warm, [pj.Measurement(("a", "b"), np.ones(16)), pj.Measurement(("b", "c"), np.ones(16))],
                cliques=[("a", "b", "c")], iters=2)
    base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
    dom = pj.Domain({"a": 128, "b": 128, "c": 512})
    rng = np.random.default_rng(0)
    ms = [pj.Measurement(("a", "b"), rng.random(128 * 128) + 1), pj.Measurement(("b", "c"), rng.random(128 * 512) + 1)]
    pj.estimate(dom, ms, cliques=[("a", "b", "c")], iters=3)
    # VmHWM, the high-water mark of this process's own memory: ru_maxrss would carry the forking parent's
    # (a large pytest worker's) resident set across the exec.
    peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    estimate = memory.fit_peak_bytes(dom, [("a", "b", "c")], "mirror_descent", np.float32, param_cells=128 * 128 + 128 * 512)
    json.dump({"measured": peak - base, "estimate": estimate}, open(sys.argv[1], "w"))
""")


def test_the_estimate_is_within_2x_of_the_measured_peak(tmp_path):
    # A mirror-descent fit of 8.4M cells (32 MB a float32 copy) in a fresh process, with XLA's default
    # optimisation (not the suite's level 0, whose unfused temporaries double the peak); the runtime's own
    # memory is measured after a warm-up fit and taken off. bench/memory_peak.py measures the other methods,
    # dtypes and the mechanisms.
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc to read the resident memory")
    got = run_script(_PEAK, tmp_path)
    assert 0.5 < got["estimate"] / got["measured"] < 2.0, got


# ------------------------------------------------------------------------------------------------ sampling


@pytest.fixture(scope="module")
def model():
    dom = pj.Domain({"a": 5, "b": 7, "c": 3})
    rng = np.random.default_rng(0)
    return pj.estimate(dom, [pj.Measurement(("a", "b"), rng.random(35) * 10),
                             pj.Measurement(("b", "c"), rng.random(21) * 10)], iters=20)


def test_sample_chunks_gives_the_records_of_synthetic_data_one_chunk_at_a_time(model):
    key = jax.random.key(3)
    blocks = list(sampling.sample_chunks(model, 2500, key, chunk=1000))
    assert [len(b) for b in blocks] == [1000, 1000, 500]
    whole = model.synthetic_data(2500, key, chunk=1000).df.to_numpy()
    np.testing.assert_array_equal(np.concatenate(blocks), whole)
    # the sampler's peak does not grow with the records
    assert sampling.sampler_peak_bytes(model, 1000) == sampling.sampler_peak_bytes(model, 1000)
    assert sampling.sampler_peak_bytes(model, 10**6) < 10**6 * 3 * 64


def test_a_table_too_large_to_hold_is_refused_not_left_to_numpy(model):
    with pytest.raises(pj.ModelTooLarge, match=r"synthetic_data: 1,000,000,000,000 records of 3 attributes \(exact\)"):
        model.synthetic_data(10**12, jax.random.key(0))
    with pytest.raises(pj.ModelTooLarge, match=r"records of 3 attributes \(low_variance\): .* \(24 bytes a value"):
        model.synthetic_data(10**12, jax.random.key(0), method="low_variance")


def test_record_bytes_bounds_a_csv_line(model):
    block = next(sampling.sample_chunks(model, 100, jax.random.key(0)))
    text = pd.DataFrame(block).to_csv(index=False, header=False)
    assert max(len(line) + 1 for line in text.splitlines()) <= sampling.record_bytes(model.domain)


def test_cli_sample_streams_chunks_same_seed_same_file(model, tmp_path, monkeypatch, capsys):
    from pgmjax.cli import sample as cli_sample

    folder = tmp_path / "model"
    save_model(model, str(folder))
    monkeypatch.setattr(cli_sample, "SAMPLE_CHUNK", 64)
    drawn = []
    real = sampling.sample_chunks

    def spy(*args, **kwargs):
        for block in real(*args, **kwargs):
            drawn.append(len(block))
            yield block

    monkeypatch.setattr(sampling, "sample_chunks", spy)
    outs = []
    for name in ("a.csv", "b.csv"):
        assert cli.main(["sample", "--model", str(folder), "--records", "300", "--seed", "5",
                         "--out", str(tmp_path / name)]) == 0
        outs.append((tmp_path / name).read_text())
    assert drawn == [64, 64, 64, 64, 44] * 2  # written chunk by chunk, never the whole table
    assert outs[0] == outs[1] and len(outs[0].splitlines()) == 301
    expected = model.synthetic_data(300, jax.random.split(jax.random.key(5))[0], chunk=64).df
    assert outs[0] == expected.to_csv(index=False)


def test_run_records_beyond_memory_is_refused_before_the_budget(tmp_path, no_budget_spent, capsys):
    dom = {"x": 3, "y": 4}
    pd.DataFrame({"x": np.arange(200) % 3, "y": np.arange(200) % 4}).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "d.json").write_text(json.dumps(dom))
    code = cli.main(["run", "--seed", "0", "--data", str(tmp_path / "t.csv"), "--domain", str(tmp_path / "d.json"), "-m", "mst",
                     "-e", "1", "--quiet", "--records", str(5 * 10**9)])  # under the count cap, no --out: no disk check
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--records: 5,000,000,000 records of 2 attributes held at once" in err and "nothing was run" in err
    assert "Unable to allocate" not in err


def test_estimate_batch_counts_every_member():
    from pgmjax.estimation.batch import BatchedMeasurement, estimate_batch

    dom = pj.Domain({"a": 100, "b": 100, "c": 100})
    batched = [BatchedMeasurement(("a", "b"), np.ones((4, 10**4))), BatchedMeasurement(("b", "c"), np.ones((4, 10**4)))]
    single = [pj.Measurement(("a", "b"), np.ones(10**4)), pj.Measurement(("b", "c"), np.ones(10**4))]
    with size_limit.limited(64 * 2**20):  # one member's fit (32 MB) fits; four members' (126 MB) do not
        pj.estimate(dom, single, cliques=[("a", "b", "c")], iters=1)
        with pytest.raises(pj.ModelTooLarge, match=r"estimate_batch: .*4 members x 8 float32 copies"):
            estimate_batch(dom, batched, cliques=[("a", "b", "c")], iters=1)


@pytest.mark.parametrize("mechanism", ["aim", "mwem", "privbayes"])
def test_a_model_cap_over_the_limit_is_refused_before_the_budget(mechanism, no_budget_spent):
    """AIM and MWEM fit models they choose round by round under max_model_mb: a cap whose largest fit cannot be
    held (mirror descent's 8 float32 copies and 12 of the parameters) was found by a late round's fit, after
    most of the budget was spent; it is refused before any measurement, naming the cap."""
    import pgmjax as pj

    rng = np.random.default_rng(0)
    domain = pj.Domain({"a": 4, "b": 5, "c": 3})
    data = pj.Dataset(rng.integers(0, domain.shape, size=(500, 3)), domain)
    front_end = getattr(pj.mechanisms, mechanism)
    from pgmjax.estimation.memory import check_capped_fit

    from pgmjax.estimation.memory import ROUTED_FLOOR_CELLS

    # 1 GiB: a cap of 40 MB needs 20 copies x 4 bytes x 5.2M cells = 400 MiB (and a size class's smallest gathered
    # vector), one of 120 MB 1,200 MiB.
    assert check_capped_fit(40.0, max_bytes=2**30) == 4 * (20 * (40 * 2**20 // 8) + ROUTED_FLOOR_CELLS)
    extra = {} if mechanism == "privbayes" else {"rounds": 3}
    with size_limit.limited(2**30), pytest.raises(size_limit.ModelTooLarge, match="max_model_mb=120"):
        front_end(data, 1.0, key=jax.random.key(0), max_model_mb=120.0, engine_iters=5, **extra)


def test_mldp_counts_its_training_model_before_the_budget(no_budget_spent):
    """MLDP's model is known up front (the training queries' cliques): its fit's peak is checked before any
    measurement (the estimate's own check came after the budget was spent)."""
    import pgmjax as pj

    rng = np.random.default_rng(0)
    domain = pj.Domain({"a": 30, "b": 30, "c": 30})  # a 1,800-cell model: its fit's peak is 144,000 bytes
    data = pj.Dataset(rng.integers(0, domain.shape, size=(300, 3)), domain)
    with size_limit.limited(2**16), pytest.raises(size_limit.ModelTooLarge, match="training queries' model"):
        pj.mechanisms.mldp(data, 1.0, key=jax.random.key(0), workload=[("a", "b"), ("b", "c")], engine_iters=5)


def test_auto_oracle_falls_back_where_the_exact_fit_would_not_fit():
    """oracle="auto" took the exact oracle where one copy of the junction tree fitted the limit, and the fit's
    own check (its 8 copies) then refused it: it now takes the approximate oracle there, and says why."""
    import warnings

    import pgmjax as pj
    from pgmjax.mechanisms.steps import hypothetical_model_size

    domain = pj.Domain({"a": 30, "b": 30, "c": 30, "d": 30})
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]  # a loop: the tree holds two 27,000-cell triples
    ms = [pj.Measurement(c, np.full(900, 10.0), stddev=1.0) for c in cliques]
    tree_bytes = 8 * 2 * 27_000  # one float64 copy of the junction tree
    with size_limit.limited(4 * tree_bytes):  # one copy fits, the fit's peak (8 float32 copies + params) does not
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = pj.estimate(domain, ms, iters=5, oracle="auto")
        assert model.info["oracle"] == "approximate" and "size limit" in model.info["reason"]
        assert hypothetical_model_size(domain, cliques, "auto") == hypothetical_model_size(domain, cliques, "approximate")
    assert hypothetical_model_size(domain, cliques, "auto") == hypothetical_model_size(domain, cliques, "exact")
