"""Every pair marginal of a model: the pair sweep (one sweep of the tree per carried attribute) against a plan per pair.

What a mechanism scoring its candidates, or ``marginal_tvd`` over all pairs, waits for. For each model, in one
process, ``model.marginals(all pairs)`` on a fresh copy of the model (no host tables or conditionals kept from the
other arm): first with the sweep (``pgmjax.model.pair_sweep``, the default), then with it turned off, each pair run
by its own plan (on the host where its tables are small, else compiled: a program per query structure, compiling
included). Records both wall times and the largest difference of the two arms' answers relative to each answer's
largest cell.

Models: each fit an AIM run recorded (``--profile PROFILE.json:FIT``, ``python -m bench.aim_profile --structures``),
with random potentials on its measured cliques; and a tree of pairs over Loans' domain (48 attributes, up to 1,001
values) with ``--triples`` triangles added (cliques of up to 1.5 million cells), whose tables are past the host's
cells (``HOST_MARGINAL_CELLS``), so that a plan per pair runs compiled.

Run: ``python -m bench engine pair_sweep``.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import pathlib
import time

import numpy as np

from bench import schema

SUITE = "engine"


def loans_model(data_folder, triples: int, seed: int = 0):
    import jax.numpy as jnp

    import pgmjax as pj
    from pgmjax.datasets import data_dir
    from pgmjax.graph import oracle

    folder = pathlib.Path(data_dir(data_folder)) / "loans"
    dom = pj.Domain(json.loads((folder / "loans-domain.json").read_text()))
    rng = np.random.default_rng(seed)
    names, order = dom.attributes, rng.permutation(len(dom.attributes))
    cliques = [(names[order[i]], names[order[int(rng.integers(0, i))]]) for i in range(1, len(names))]
    near = collections.defaultdict(set)
    for a, b in cliques:
        near[a].add(b)
        near[b].add(a)
    for b in sorted(near, key=lambda v: -len(near[v]))[:triples]:  # a triangle on a path a - b - c: no other fill-in
        a, c = sorted(near[b])[:2]
        cliques.append((a, b, c))
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) * 0.5 for c in cliques}
    return lambda: pj.GraphicalModel(plan, plan.from_tables(tables, jnp.float32), 42_535.0)


def profile_model(spec: str, seed: int = 0):
    import jax.numpy as jnp

    import pgmjax as pj
    from pgmjax.graph import oracle

    path, fit = spec.rsplit(":", 1)
    res = json.loads(pathlib.Path(path).read_text())
    dom = pj.Domain(res["domain"])
    cliques = list(dict.fromkeys(tuple(c) for c in res["per_fit"][int(fit)]["measured"]))
    rng = np.random.default_rng(seed)
    plan = oracle.make_plan(dom, cliques)
    tables = {c: rng.normal(size=dom.shape_of(c)) * 0.5 for c in cliques}
    return dom, lambda: pj.GraphicalModel(plan, plan.from_tables(tables, jnp.float32), 50_000.0)


def measure(name: str, make) -> dict:
    from pgmjax.model import pair_sweep

    model = make()
    model.clique_marginals()  # the oracle call, apart from both arms
    pairs = list(itertools.combinations(model.domain.attributes, 2))
    t = time.perf_counter()
    swept = make().marginals(pairs)
    sweep_s = time.perf_counter() - t
    real = pair_sweep.pair_marginals
    pair_sweep.pair_marginals = lambda tree, queries, table, cells: [None] * len(queries)  # every pair its own plan
    try:
        t = time.perf_counter()
        each = make().marginals(pairs)
        each_s = time.perf_counter() - t
    finally:
        pair_sweep.pair_marginals = real
    tree = model.junction_tree
    return {"model": name, "cliques": len(tree.cliques), "cells": tree.cells, "largest clique": max(tree.clique_cells),
            "pairs": len(pairs), "across cliques": sum(tree.containing(p) is None for p in pairs),
            "sweep s": round(sweep_s, 3), "a plan per pair s": round(each_s, 3), "ratio": round(each_s / sweep_s, 1),
            "largest relative difference": float(max(np.abs(a - b).max() / b.max() for a, b in zip(swept, each)))}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="the shared data folder (default PGMJAX_DATA or ../shared/data)")
    p.add_argument("--profile", nargs="*", default=["bench/results/engine/aim_generated30_structures.json:65"],
                   help="PROFILE.json:FIT, fits an AIM run recorded with --structures")
    p.add_argument("--triples", type=int, default=8, help="triangles added to the tree over Loans' domain")
    p.add_argument("--quick", action="store_true", help="the profile's model only")
    p.add_argument("--out", default="pair_sweep_cpu", help="result name under bench/results/engine/ (or a path)")
    args = p.parse_args(argv)
    rows = [measure(f"AIM fit {spec.rsplit('/', 1)[-1]}", profile_model(spec)[1]) for spec in args.profile]
    if not args.quick:
        rows.append(measure(f"Loans' domain, a tree of pairs with {args.triples} triangles",
                            loans_model(args.data, args.triples)))
    for r in rows:
        print(json.dumps(r), flush=True)
    meta = schema.run_meta("bench.pair_sweep", argv)
    page = [*schema.header_lines(meta), "", "Each row one model (float32), random potentials, every pair of its "
            "attributes asked in one `model.marginals` call on a fresh copy of the model: with the pair sweep and "
            "with a plan per pair (compiling included where the plans run compiled). The difference is relative to "
            "each answer's largest cell (the sweep runs in float64, compiled plans in the model's float32).", "",
            *schema.table(rows)]
    schema.write_result(SUITE, args.out, rows, meta, page=page, title="Pair marginals: one sweep per attribute "
                        "against a plan per pair")


if __name__ == "__main__":
    main()
