"""AIM, MWEM and PrivBayes with the approximate oracle (``fit_options=pj.FitOptions(oracle=...)``), and ``pgmjax run --oracle``."""

import argparse

import jax
import numpy as np
import pytest

import pgmjax as pj
from pgmjax import cli
from pgmjax.cli.call import front_end_call
from pgmjax.mechanisms import aim, mwem, privbayes
from pgmjax.mechanisms.steps import hypothetical_model_size


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    dom = pj.Domain({f"x{i}": 3 for i in range(5)})
    return pj.Dataset(rng.integers(0, 3, (1000, 5)), dom)


def test_aim_runs_with_the_approximate_oracle_and_makes_records_of_its_pseudo_marginals(data):
    res = aim(data, 1.0, key=jax.random.key(0), rounds=8, max_model_mb=1.0, engine_iters=30,
              fit_options=pj.FitOptions(oracle="approximate"))
    assert res.model.approximate and res.info.oracle["oracle"] == "approximate"
    assert res.accountant.spent == pytest.approx(res.accountant.budget)
    assert len(res.synthetic) == round(res.model.total)
    for clique in res.model.cliques:  # the records keep each measured clique's pseudo-marginal
        pseudo = res.model.marginal(clique) / res.model.total
        made = res.synthetic.marginal(clique) / len(res.synthetic)
        assert 0.5 * np.abs(made - pseudo).sum() < 0.05, clique


def test_mwem_and_privbayes_with_the_approximate_oracle(data):
    res = mwem(data, 1.0, key=jax.random.key(1), rounds=2, engine_iters=30,
               fit_options=pj.FitOptions(oracle="approximate"))
    assert res.model.approximate and len(res.info.log) == 2 and len(res.synthetic) == round(res.model.total)
    res = privbayes(data, 1.0, key=jax.random.key(2), engine_iters=30, fit_options=pj.FitOptions(oracle="approximate"))
    assert res.model.approximate and len(res.synthetic) == round(res.model.total)  # sampled from the network


def test_model_size_counts_the_region_graph_with_the_approximate_oracle():
    dom = pj.Domain({f"x{i}": 10 for i in range(6)})
    cycle = [(f"x{i}", f"x{(i + 1) % 6}") for i in range(6)]
    exact = hypothetical_model_size(dom, cycle) * 2**20 / 8  # triangulated: triples
    approx = hypothetical_model_size(dom, cycle, "approximate") * 2**20 / 8
    assert round(approx) == 6 * 100 + 6 * 10 and exact > approx


def test_the_command_line_passes_the_oracle():
    ns = dict(epsilon=1.0, delta=None, engine_iters=None, max_model_mb=None, rounds=None, records=None)
    args = cli.build_parser().parse_args(["run", "--seed", "0", "--data", "x.csv", "-m", "privbayes", "-e", "1", "--oracle", "approximate"])
    assert args.oracle == "approximate"
    _, kw, _ = front_end_call(argparse.Namespace(mechanism="privbayes", oracle="approximate", **ns), {}, {})
    assert kw["fit_options"] == pj.FitOptions(oracle="approximate")
    _, kw, _ = front_end_call(argparse.Namespace(mechanism="aim", oracle="auto", **ns), {}, {"tol": 1e-6})
    assert kw["fit_options"] == pj.FitOptions(tol=1e-6, oracle="auto")
    _, kw, _ = front_end_call(argparse.Namespace(mechanism="aim", oracle="approximate", **ns), {}, {})
    assert kw["fit_options"] == pj.FitOptions(oracle="approximate")  # its records are made from the pseudo-marginals
    with pytest.raises(cli.UserError, match="give the oracle once"):
        front_end_call(argparse.Namespace(mechanism="privbayes", oracle="auto", **ns), {}, {"oracle": "exact"})


def test_pgmjax_run_with_the_approximate_oracle(tmp_path, capsys):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, (300, 4))
    x[:, 1] = np.where(rng.random(300) < 0.8, x[:, 0], x[:, 1])  # a dependence for the network to find
    csv, dom = tmp_path / "d.csv", tmp_path / "dom.json"
    np.savetxt(csv, x, fmt="%d", delimiter=",", header="a,b,c,d", comments="")
    dom.write_text('{"a": 3, "b": 3, "c": 3, "d": 3}')
    out = tmp_path / "s.csv"
    assert cli.main(["run", "--seed", "0", "--data", str(csv), "--domain", str(dom), "-m", "privbayes", "-e", "2", "--oracle", "approximate",
                     "--engine-iters", "20", "--out", str(out)]) == 0
    assert "approximate oracle" in capsys.readouterr().out and len(out.read_text().splitlines()) > 250


def test_an_approximate_run_keeps_no_automatic_checkpoint():
    from pgmjax.cli import checkpoints

    def args(**kw):
        return argparse.Namespace(**({"checkpoint": None, "out": "synth.csv", "oracle": None, "engine_option": None} | kw))

    assert checkpoints.option(args(), "aim").save == "interrupt"  # exact fits: kept on Ctrl-C
    assert checkpoints.option(args(oracle="approximate"), "aim") is None  # a checkpoint holds exact models only
    assert checkpoints.option(args(engine_option=["oracle=auto"]), "mwem") is None
    assert checkpoints.option(args(engine_option=['oracle="exact"', "tol=1e-6"]), "aim").save == "interrupt"
