"""A run of new structures: the dense program (one per structure) against the size-class program (one per class).

What a loop over models waits for (an AIM or MWEM run, a sweep, a test suite): for each attribute count ``d`` in
``--dims``, a fresh process per program fits ``--models`` different random trees of pairs over one generated
domain (each attribute 2 to ``--max-size`` values; noisy pair marginals, sigma 10, 10,000 records), each
``estimate(iters)`` from scratch, and records every fit's wall time, the XLA compile seconds inside it
(``jax.monitoring``'s backend-compile events), its compiles and its loss. Both programs fit the same
measurements, so their losses are compared too.

Run: ``python -m bench engine size_class --dims 10 20 40 --models 8 --iters 500``.

``--iteration D:S ...`` measures instead, in this process, one model per ``D`` attributes of up to ``S`` values (or
per engine benchmark problem named, ``bench/problems.py``, or per ``PROFILE.json:FIT``, a fit an AIM profile recorded
with ``--structures``):
each program's first ``estimate(10)`` (with its compile), its milliseconds per iteration (``estimate(510)`` less
``estimate(10)``, both run once before, over 500) and the routed work per pass (:func:`pgmjax.graph.routed_steps.windows_work`):
what ``program="auto"``'s cost model (``pgmjax.estimation.oracles.ROUTED_COSTS``) is calibrated on.

``--replay PROFILE.json ...`` runs instead, in this process, every fit an AIM profile recorded with ``--structures``
(its domain, its measured and model cliques, random counts), in order, through ``program="size_class"`` for
``--iters`` iterations each: the size-class programs a run's sequence of structures compiles, free of the path noise
of a whole mechanism run (a changed plan changes a run's rounds). Each profile starts from no compiled program
(``pgmjax.release_compiled``). Reports each fit that compiled, with its class.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from bench import schema
from bench.benchutil import CompileEvents

SUITE = "engine"


def problems(d: int, models: int, max_size: int, seed: int = 0):
    """``models`` random trees of pairs over one domain of ``d`` attributes, with noisy marginals of each."""
    import numpy as np

    import pgmjax as pj

    rng = np.random.default_rng([seed, d])
    dom = pj.Domain({f"x{i}": int(s) for i, s in enumerate(rng.integers(2, max_size + 1, size=d))})
    names = dom.attributes
    out = []
    for _ in range(models):
        order = rng.permutation(d)
        pairs = [tuple(sorted((names[order[i]], names[order[int(rng.integers(0, i))]]), key=names.index))
                 for i in range(1, d)]
        ms = []
        for c in pairs:
            p = rng.dirichlet(np.ones(dom.size(c)))
            ms.append(pj.Measurement(c, 10_000 * p + rng.normal(0, 10.0, p.size), stddev=10.0))
        out.append((dom, ms))
    return out


def child(program: str, d: int, models: int, max_size: int, iters: int, out: str) -> None:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    import pgmjax as pj

    compile_s = CompileEvents(active=True).install().xla
    rows = []
    for k, (dom, ms) in enumerate(problems(d, models, max_size)):
        before = len(compile_s)
        t = time.perf_counter()
        model, report = pj.estimate(dom, ms, iters=iters, program=program, report=True)
        model.marginal(ms[0].clique)  # what a mechanism reads next
        wall = time.perf_counter() - t
        plan = model.plan
        rows.append({"program": program, "d": d, "model": k, "wall": wall, "compiles": len(compile_s) - before,
                     "compile_s": sum(compile_s[before:]), "loss": report.loss, "cells": plan.tree.cells,
                     "levels": plan.tree.num_levels, "class": list(getattr(plan, "size", ()))})
        print(json.dumps(rows[-1]), flush=True)  # a run cut by a device lease still shows its fits
        with open(out, "w") as f:
            json.dump(rows, f)


def run(dims, models: int, max_size: int, iters: int, written=lambda rows: None) -> list[dict]:
    """Every (d, program) child in turn; ``written(rows)`` after each, so a cut run keeps what it measured."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dims:
            for program in ("dense", "size_class"):
                out = os.path.join(tmp, f"{program}_{d}.json")
                subprocess.run([sys.executable, "-m", "bench.size_class", "--child", program, str(d), str(models),
                                str(max_size), str(iters), out], check=True)
                with open(out) as f:
                    rows.extend(json.load(f))
                written(rows)
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """One row per attribute count both programs have run."""
    out = []
    for d in sorted({r["d"] for r in rows}):
        by = {p: [r for r in rows if r["d"] == d and r["program"] == p] for p in ("dense", "size_class")}
        dense, routed = by["dense"], by["size_class"]
        if not dense or not routed:
            continue
        out.append({
            "d": d, "models": len(dense), "cells": f"{min(r['cells'] for r in dense)}-{max(r['cells'] for r in dense)}",
            "dense total s": sum(r["wall"] for r in dense), "size-class total s": sum(r["wall"] for r in routed),
            "dense compiles": sum(r["compiles"] for r in dense), "size-class compiles": sum(r["compiles"] for r in routed),
            "dense later fit s": sorted(r["wall"] for r in dense[1:])[len(dense[1:]) // 2] if len(dense) > 1 else None,
            "size-class later fit s": sorted(r["wall"] for r in routed[1:])[len(routed[1:]) // 2] if len(routed) > 1 else None,
            "classes": len({tuple(r["class"]) for r in routed}),
            "loss rel diff max": max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(dense, routed)),
        })
    return out


def profiled_fit(path: str, index: str):
    """Fit ``index`` of an AIM profile recorded with ``--structures`` (``python -m bench.aim_profile``): its domain, its
    measured cliques with random counts (sigma 10; the counts change no shape, hence no cost) and its model's
    cliques."""
    import numpy as np

    import pgmjax as pj

    res = json.loads(pathlib.Path(path).read_text())
    fit = res["per_fit"][int(index)]
    dom = pj.Domain(res["domain"])
    rng = np.random.default_rng(int(index))
    ms = [pj.Measurement(tuple(c), rng.random(dom.shape_of(tuple(c))) * 100 + 1, stddev=10.0) for c in fit["measured"]]
    return dom, ms, [tuple(c) for c in fit["model"]]


def iteration(specs, method: str = "mirror_descent") -> list[dict]:
    """Per-iteration cost of both programs (fitting with ``method``), and the routed work per pass, on one model per
    ``(d, max_size)``."""
    import pgmjax as pj
    from pgmjax.graph.junction import junction_tree, maximal_cliques
    from pgmjax.graph.routed_steps import windows_work

    rows = []
    for spec in specs:
        model = []  # cliques the model holds beyond the measured ones
        if isinstance(spec, str) and ".json:" in spec:  # a fit an AIM profile recorded (aim_profile --structures)
            path, index = spec.rsplit(":", 1)
            dom, ms, model = profiled_fit(path, index)
            label = {"problem": f"{pathlib.Path(path).stem} fit {index}"}
        elif isinstance(spec, str):  # an engine benchmark problem (bench/problems.py)
            from bench import problems as ep

            p = ep.make(spec)
            dom = pj.Domain(p["domain"])
            ms = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]
            label = {"problem": spec}
        else:
            d, max_size = spec
            dom, ms = problems(d, 1, max_size)[0]
            label = {"problem": f"tree of pairs d={d}", "d": d, "max size": max_size}
        cliques = [m.clique for m in ms] + model
        row = {**label, "method": method, "cells": junction_tree(dom, maximal_cliques(dom, cliques)).cells,
               "routed work per pass": windows_work(dom, cliques)}
        for program in ("dense", "size_class"):
            t = time.perf_counter()
            pj.estimate(dom, ms, iters=10, program=program, method=method, cliques=model)
            row[f"{program} first s"] = time.perf_counter() - t
            pj.estimate(dom, ms, iters=510, program=program, method=method, cliques=model)  # its chunks' programs too
            t = time.perf_counter()
            _, short = pj.estimate(dom, ms, iters=10, program=program, method=method, cliques=model, report=True)
            t10 = time.perf_counter() - t
            t = time.perf_counter()
            _, long = pj.estimate(dom, ms, iters=510, program=program, method=method, cliques=model, report=True)
            row[f"{program} ms/it"] = (time.perf_counter() - t - t10) / 500 * 1e3
            calls = long.history[-1]["oracle_calls"] - short.history[-1]["oracle_calls"]
            row[f"{program} calls/it"] = calls / 500
        row["routed ns per cell read"] = row["size_class ms/it"] * 1e6 / (row["routed work per pass"] * row["size_class calls/it"])
        rows.append(row)
        print(row, flush=True)
    return rows


def replay(paths, iters: int) -> list[dict]:
    """Each profile's fits through ``program="size_class"``, in order: XLA compiles, their seconds, wall, classes."""
    import pgmjax as pj

    events = CompileEvents(active=True).install()
    rows = []
    for path in paths:
        pj.release_compiled()  # each profile from no compiled program, as a fresh process
        events.reset()
        fits = json.loads(pathlib.Path(path).read_text())["per_fit"]
        compiled, t0, sizes = [], time.perf_counter(), set()
        for i in range(len(fits)):
            dom, ms, model = profiled_fit(path, i)
            before = len(events.xla)
            fitted, report = pj.estimate(dom, ms, cliques=model, iters=iters, program="size_class", report=True)
            float(report.loss)
            sizes.add(fitted.plan.size)
            if len(events.xla) > before:
                compiled.append(f"{i}: {fitted.plan.size.cells}/{fitted.plan.size.width} ({len(events.xla) - before})")
        rows.append({"profile": pathlib.Path(path).name, "fits": len(fits), "wall_s": time.perf_counter() - t0,
                     "xla_compiles": len(events.xla), "xla_s": sum(events.xla), "plan_classes": len(sizes),
                     "compiled_at (fit: cells/width (compiles))": "; ".join(compiled)})
        print(rows[-1], flush=True)
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", type=int, nargs="+", default=[10, 20, 40])
    p.add_argument("--models", type=int, default=8)
    p.add_argument("--max-size", type=int, default=10)
    p.add_argument("--iters", type=int, default=500)
    p.add_argument("--out", default=None, help="result name (default size_class_cpu, or size_class_iteration_cpu)")
    p.add_argument("--iteration", nargs="+", metavar="D:S", help="per-iteration costs of models of D attributes of "
                   "up to S values (or of engine benchmark problems by name: adult_mst, nltcs_2way, ...; or PROFILE.json:FIT, "
                   "a fit an AIM profile recorded with --structures) instead")
    p.add_argument("--method", default="mirror_descent", help="the fits' method in --iteration mode")
    p.add_argument("--replay", nargs="+", metavar="PROFILE.json", help="replay the fits of AIM profiles recorded with "
                   "--structures through the size-class program (--iters each) instead")
    p.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.replay:
        rows = replay(args.replay, args.iters)
        schema.write_result(SUITE, args.out or "size_class_replay_cpu", rows, schema.run_meta("bench.size_class", argv),
                            title="A run's structures replayed through the size-class program")
        return
    if args.iteration:
        rows = iteration([tuple(int(x) for x in spec.split(":")) if ":" in spec and ".json:" not in spec else spec
                          for spec in args.iteration],
                         args.method)
        meta = schema.run_meta("bench.size_class", argv)
        schema.write_result(SUITE, args.out or "size_class_iteration_cpu", rows, meta,
                            title="Per iteration: dense against size-class programs")
        return
    if args.child:
        program, d, models, max_size, iters, out = args.child
        child(program, int(d), int(models), int(max_size), int(iters), out)
        return
    meta = schema.run_meta("bench.size_class", argv)

    def write(rows: list[dict]) -> None:  # after every child: a run cut at its time limit keeps what it finished
        table = summary(rows)
        page = [*schema.header_lines(meta), "", f"Each program in a fresh process fits {args.models} new random trees of "
                f"pairs per attribute count, estimate({args.iters}) each, then one marginal; 'later fit': the median wall "
                "of fits 2 onwards (a structure new to the process).", "", *schema.table(table), "", "Per fit:", "",
                *schema.table(rows, ["program", "d", "model", "wall", "compiles", "compile_s", "loss", "cells", "levels"])]
        schema.write_result(SUITE, args.out or "size_class_cpu", rows, meta, page=page,
                            title="Dense against size-class programs", summary=table)

    run(args.dims, args.models, args.max_size, args.iters, write)


if __name__ == "__main__":
    main()
