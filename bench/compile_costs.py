"""What a fresh process waits for at its first fit, by program and by the size of the dense plan.

``program="auto"`` (:func:`pgmjax.estimation.oracles.uses_size_class`) weighs the dense program's compile, which grows with
the dense plan's blocks and their axes (:func:`pgmjax.estimation.oracles.dense_axes`: cliques of one shape stack into one
block, and every axis of every block is code), against the size-class program's, which does not (the routing is
data), plus the size-class passes' own time. This measures both compiles, each point in a fresh process (nothing
compiled before it), on two families of structures (:func:`structure`) and on the models of an AIM and an MWEM run
(``--profiles``: fits recorded by ``python -m bench.aim_profile --structures``), noisy marginals,
``estimate(iters=20)`` twice; the first call's seconds less the second's is the wait for compiling (tracing,
lowering and XLA). The dense compile is fitted to the dense plan's block axes and its groups of measurements.

Run (about 14 minutes on a 2-core CPU): ``python -m bench engine compile_costs --profiles
bench/results/engine/aim_generated30_structures.json:5,15,25,34,43
bench/results/engine/mwem_generated30_structures.json:10,20,23,26,29``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

from bench import schema
from bench.children import child_command, json_line

SUITE = "engine"
METHODS = ("mirror_descent", "dual_averaging", "lbfgs")


def structure(family: str, n: int, seed: int):
    """``(domain, cliques)``: ``"pairs"``, a random tree of ``n`` pairs over ``n + 1`` attributes of 2 to 6 values;
    ``"aim"``, an AIM-style model: the one-way marginals of 30 attributes of 2 to 10 values and ``n`` random
    marginals of 2 or 3 of them (triangulated into cliques of up to 6 attributes)."""
    import pgmjax as pj

    rng = np.random.default_rng(seed)
    if family == "pairs":
        dom = pj.Domain({f"a{i}": int(rng.integers(2, 7)) for i in range(n + 1)})
        return dom, [(f"a{i}", f"a{int(rng.integers(0, i))}") for i in range(1, n + 1)]
    dom = pj.Domain({f"a{i}": int(rng.integers(2, 11)) for i in range(30)})
    cliques = [(f"a{i}",) for i in range(30)]
    for _ in range(n):
        picked = sorted(rng.choice(30, size=int(rng.integers(2, 4)), replace=False))
        cliques.append(tuple(f"a{i}" for i in picked))
    return dom, cliques


def child(method: str, program: str, family: str, n: int, seed: int) -> dict:
    import pgmjax as pj
    from pgmjax.estimation.losses import reduction_groups
    from pgmjax.estimation.oracles import dense_axes
    from pgmjax.graph.oracle_plan import make_plan

    model: list = []  # cliques the model holds beyond the measured ones (a profiled fit's)
    if family.endswith(".json"):  # fit n of an AIM profile recorded with --structures
        from bench.size_class import profiled_fit

        dom, ms, model = profiled_fit(family, n)
        cliques = [m.clique for m in ms] + model
    else:
        dom, cliques = structure(family, n, seed)
        rng = np.random.default_rng(seed + 1)
        ms = [pj.Measurement(c, rng.random(dom.size(c)).reshape(dom.project(c).shape) * 100, stddev=1.0) for c in cliques]
    plan = make_plan(dom, cliques)
    units, axes = len(plan.units), dense_axes(plan)  # what the dense program's size follows
    t = time.perf_counter()
    pj.estimate(dom, ms, iters=20, method=method, program=program, cliques=model)
    first = time.perf_counter() - t
    t = time.perf_counter()
    pj.estimate(dom, ms, iters=20, method=method, program=program, cliques=model)
    warm = time.perf_counter() - t
    return {"method": method, "program": program, "family": pathlib.Path(family).stem, "n": n, "dense_units": units,
            "dense_axes": axes, "measured": len({m.clique for m in ms}), "groups": reduction_groups(plan, ms),
            "first_s": round(first, 3), "warm_s": round(warm, 4),
            "compile_s": round(first - warm, 3)}


#: The lines are fitted where ``program="auto"``'s choice falls (the two programs' compiles cross at about 30 axes);
#: past it the dense compile grows faster than linearly (dual averaging's most), which only widens the gap.
FIT_AXES = 110


def fit_line(rows: list[dict], method: str, program: str) -> tuple[float, float, float]:
    """Least-squares ``compile_s = base + per_axis * dense_axes + per_group * groups`` over one method's and
    program's points of at most :data:`FIT_AXES` block axes (``groups``: the dense program's groups of
    measurements, :func:`pgmjax.estimation.losses.reduction_groups`, each a reduction written into the program)."""
    pts = [(r["dense_axes"], r["groups"], r["compile_s"]) for r in rows
           if r["method"] == method and r["program"] == program and r["dense_axes"] <= FIT_AXES]
    x = np.array([[1.0, p[0], p[1]] for p in pts])
    (base, per_axis, per_group), *_ = np.linalg.lstsq(x, np.array([p[2] for p in pts]), rcond=None)
    return float(base), float(per_axis), float(per_group)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", default="2,8,32,64", help="comma-separated numbers of pairs (the 'pairs' family)")
    p.add_argument("--aim", default="5,20,30", help="comma-separated numbers of 2- and 3-way marginals ('aim')")
    p.add_argument("--profiles", nargs="*", default=[], metavar="PROFILE.json:I,J",
                   help="fits of AIM profiles recorded with --structures (python -m bench.aim_profile)")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--out", default="compile_costs_cpu")
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        method, program, family, n, seed = args.child
        print(json.dumps(child(method, program, family, int(n), int(seed))))
        return
    rows = []
    points = [("pairs", int(n)) for n in args.pairs.split(",") if n] + [("aim", int(n)) for n in args.aim.split(",") if n]
    for spec in args.profiles:
        path, fits = spec.rsplit(":", 1)
        points += [(path, int(i)) for i in fits.split(",")]
    for method in args.methods.split(","):
        for program in ("dense", "size_class"):
            for family, n in points:
                rows.append(json_line(child_command("bench.compile_costs", "--child", method, program, family, n, 0),
                                      f"{method} {program} {family} {n}"))
                print(rows[-1], flush=True)
    fits = []
    for method in args.methods.split(","):
        for program in ("dense", "size_class"):
            base, per_axis, per_group = fit_line(rows, method, program)
            median = float(np.median([r["compile_s"] for r in rows if r["method"] == method and r["program"] == program]))
            fits.append({"method": method, "program": program, "base_s": round(base, 3),
                         "per_axis_s": round(per_axis, 4), "per_group_s": round(per_group, 4),
                         "median_s": round(median, 3)})
    meta = schema.run_meta("bench.compile_costs", argv)
    page = [*schema.header_lines(meta), "",
            "Each point a fresh process (structure() in the script: random trees of n pairs; AIM-style models of "
            "30 one-way and n 2- or 3-way marginals), estimate(iters=20) twice; compile_s is the first call's "
            "seconds less the second's; dense_axes is pgmjax.estimation.oracles.dense_axes of the dense plan.", "",
            *schema.table(rows), "",
            f"Least-squares planes over the points of at most {FIT_AXES} axes, compile_s = base + per_axis * "
            "dense_axes + per_group * groups, and each program's median (pgmjax.estimation.oracles.COMPILE_COSTS holds the dense lines and the "
            "size class's medians):", "", *schema.table(fits)]
    schema.write_result(SUITE, args.out, rows, meta, page=page, title="Compile seconds by program and plan size", fits=fits)


if __name__ == "__main__":
    main()
