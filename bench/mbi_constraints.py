"""The mbi 2.0 half of the constraints benchmark: fits under structural constraints; started by ``bench.constraints``.

Runs in an interpreter with ``mbi==2.0.0`` (``--mbi-python`` of ``bench.constraints``; pgmjax need not be installed
there: this module imports only the standard library, numpy, jax, mbi and the standard-library-only
:mod:`bench.schema`), in a fresh process per (arm, epsilon),
from the repository root as ``python -m bench.mbi_constraints``. It reads the problem that ``bench.constraints``
wrote: ``meta.json`` (the domain, the measured cliques, the constraints, the number of records, the iterations)
and one ``.npz`` per seed (the noisy answers and their standard deviation), and for each seed, in the order given:

* fits ``mbi.estimation.MirrorDescent().estimate(domain, measurements, known_total=N, constraints=..., iters=...)``
  (mbi's defaults: Armijo line search, float32, the marginal oracle ``default_oracle`` picks), with the constraints
  as ``mbi.Constraint(domain=..., invalid=...)`` (a forbid constraint) or ``valid=...`` (an allow constraint) in the
  arm ``with``, none in the arm ``without``; the wall time of the call, ``jax.block_until_ready`` on the model
  before the clock stops (the first seed of a process compiles, later seeds of the same structure reuse it);
* writes the model's log-potentials (``model.potentials``, one table per clique) and each constraint's log-space
  factor (``Constraint.potential``: 0 allowed, ``-inf`` forbidden), so the driver evaluates the distribution the
  model stands for with the same code as pgmjax's; and mbi's own answers to check that evaluation against: the
  marginals the fit returned (``model.marginals``) and, for each constraint's pair, ``variable_elimination`` with
  the model's constraints folded in (the distribution's marginal) and ``model.project`` (mbi's public call: for a
  clique outside ``model.marginals`` it runs variable elimination on the potentials alone);
* draws ``N`` synthetic records with ``mbi.extensions.synthetic_data(model, N, seed)`` (Gumbel rounding; folds the
  constraints into the potentials; timed) and, for comparison, with ``model.synthetic_data(N)``
  (``MarkovRandomField``'s own randomised rounding, ``numpy.random.seed(seed)`` first);
* records the model's size: the cells of its potentials (the measured cliques), and of the maximal cliques of the
  junction tree mbi builds over those cliques and the constraints' (``mbi.junction_tree``), which its oracle
  works on.

Per seed it writes ``<problem>_mbi_<arm>.npz`` beside the problem and prints one JSON line per seed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np

from bench import schema


def _setup():
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="JAX is running in float32")
        import mbi
    return jax, mbi


def versions() -> dict:
    import platform

    return {"python": platform.python_version(),
            **{name: schema.version(name) for name in ("mbi", "jax", "jaxlib", "numpy")}}


def constraints_of(mbi, domain, meta) -> list:
    """mbi's constraints for the problem's (a forbid constraint as ``invalid``, an allow one as ``valid``)."""
    out = []
    for c in meta["constraints"]:
        sub = domain.project(tuple(c["attributes"]))
        cells = np.asarray(c["cells"], np.int64)
        if c["kind"] == "forbid":
            out.append(mbi.Constraint(domain=sub, invalid=cells))
        elif c["kind"] == "allow":
            out.append(mbi.Constraint(domain=sub, valid=cells))
        else:
            out.append(mbi.Constraint(domain=sub, mapping=cells))
    return out


def _cells(domain, cliques) -> int:
    return int(sum(int(np.prod([domain[a] for a in c])) for c in cliques))


def _table(factor, attrs) -> np.ndarray:
    """A Factor's values as float64 with axes in the order ``attrs``."""
    values = np.asarray(factor.datavector(flatten=False), np.float64)
    own = list(factor.domain.attributes)
    return np.transpose(values, [own.index(a) for a in attrs])


def _records(dataset, attrs) -> np.ndarray:
    return np.stack([np.asarray(dataset.data[a]) for a in attrs], axis=1).astype(np.int64)


def run(meta_path: str, problems: list[str], arm: str) -> list[dict]:
    jax, mbi = _setup()
    import jax.numpy as jnp
    from mbi import estimation, junction_tree, marginal_oracles
    from mbi.extensions import synthetic_data as ext_synthetic_data

    with open(meta_path) as f:
        meta = json.load(f)
    attrs = list(meta["domain"])
    domain = mbi.Domain(attrs, [meta["domain"][a] for a in attrs])
    cliques = [tuple(c) for c in meta["cliques"]]
    constraints = constraints_of(mbi, domain, meta) if arm == "with" else []
    n, iters = int(meta["records"]), int(meta["iters"])
    rows = []
    for i, problem in enumerate(problems):
        with np.load(problem) as z:
            ys = [z[f"y_{j}"] for j in range(len(cliques))]
            sigma, seed = float(z["sigma"]), int(z["seed"])
        measurements = [mbi.LinearMeasurement(jnp.asarray(y.ravel(), jnp.float32), c, stddev=sigma)
                        for c, y in zip(cliques, ys)]
        t = time.perf_counter()
        model = estimation.MirrorDescent().estimate(domain, measurements, known_total=float(n),
                                                    constraints=tuple(constraints), iters=iters)
        jax.block_until_ready(model)
        fit_s = time.perf_counter() - t

        arrays = {}
        pot_cliques = [tuple(c) for c in model.potentials.cliques]
        for j, c in enumerate(pot_cliques):
            arrays[f"pot_{j}"] = _table(model.potentials[c], c)
        own_cliques = [tuple(c) for c in model.marginals.cliques]
        for j, c in enumerate(own_cliques):
            arrays[f"own_{j}"] = _table(model.marginals[c], c)
        checks = {}
        for j, (spec, con) in enumerate(zip(meta["constraints"], constraints)):
            pair = tuple(spec["attributes"])
            arrays[f"factor_{j}"] = _table(con.potential, pair)
        for j, spec in enumerate(meta["constraints"]):
            pair = tuple(spec["attributes"])
            t0 = time.perf_counter()
            arrays[f"project_{j}"] = _table(model.project(pair), pair)
            checks[f"project_{j}_s"] = time.perf_counter() - t0
            if constraints:
                ve = marginal_oracles.variable_elimination(model.potentials, pair, float(model.total),
                                                           constraints=model.constraints)
                arrays[f"ve_{j}"] = _table(ve, pair)

        t0 = time.perf_counter()
        synth = ext_synthetic_data(model, n, seed=seed)
        arrays["records"] = _records(synth, attrs)
        synth_s = time.perf_counter() - t0
        np.random.seed(seed)
        t0 = time.perf_counter()
        arrays["records_round"] = _records(model.synthetic_data(n), attrs)
        round_s = time.perf_counter() - t0

        jtree_cliques = [tuple(c) for c in pot_cliques] + [tuple(domain.canonical(c.clique)) for c in constraints]
        jtree, _ = junction_tree.make_junction_tree(domain, jtree_cliques)
        maximal = junction_tree.maximal_cliques(jtree)
        out = os.path.splitext(problem)[0] + f"_mbi_{arm}.npz"
        np.savez(out, **arrays)
        rows.append({
            "library": "mbi", "arm": arm, "seed": seed, "problem": os.path.basename(problem), "arrays": out,
            "fit_s": fit_s, "fit_compiles": i == 0, "synthetic_s": synth_s, "synthetic_first": i == 0,
            "round_synthetic_s": round_s, "iters": iters,
            "effective_iters": -(-iters // estimation.CALLBACK_EVERY) * estimation.CALLBACK_EVERY,
            "total": float(model.total),
            "potential_cliques": [list(c) for c in pot_cliques], "own_cliques": [list(c) for c in own_cliques],
            "parameter_cells": _cells(domain, pot_cliques),
            "jtree_cliques": [list(c) for c in maximal], "jtree_cells": _cells(domain, maximal),
            "oracle": getattr(marginal_oracles.default_oracle(pot_cliques, domain, has_constraints=bool(constraints)),
                              "__name__", None),
            "versions": versions(), "backend": jax.default_backend(), **checks,
        })
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.mbi_constraints", description=__doc__.splitlines()[0])
    ap.add_argument("--meta", required=True, help="the problem's meta.json (written by bench.constraints)")
    ap.add_argument("--arm", choices=("without", "with"), required=True, help="fit without or with the constraints")
    ap.add_argument("--result", default=None, help="also write the rows to this JSON file")
    ap.add_argument("problems", nargs="+", help="one .npz per seed (noisy answers), fitted in this order")
    args = ap.parse_args(argv)
    rows = run(args.meta, args.problems, args.arm)
    if args.result:
        with open(args.result, "w") as f:
            json.dump(rows, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
