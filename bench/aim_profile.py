"""Where AIM's and MST's time goes, round by round: selection, measurement, each fit's compilation and iterations.

Each fit a mechanism makes (``pgmjax.estimate``, called by the front-end) is timed from outside: its wall time,
the seconds JAX spent compiling inside it (``jax.monitoring``'s compile-duration events: tracing, lowering and
the backend's compilation), its iterations, its loss after the first compiled chunk (``first_loss``) and at the
end (``loss``). The front-end's own timer gives the
totals of selection, the model's candidate answers ("marginals") and the fits; the progress callback gives
each round's end. Nothing here changes what the mechanism computes: the fits are wrapped, not replaced.

Tables: a shared dataset (``adult``, ``loans``, ...; ``PGMJAX_DATA`` or ``--data``) or a generated one
(``generated30``, ``generated50``: a random tree-structured table, :func:`bench.tables.generated_table`, with
30 or 50 columns of 2 to 40 values, 100,000 rows).

Run: ``python -m bench mechanisms aim_profile --dataset adult --mechanism aim --rounds 28`` (``--mechanism mwem``: the
+PGM arm of MWEM, its rounds' fits; ``--program dense``: the fits' compiled program).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import statistics
import time

from bench import schema
from bench.benchutil import CompileEvents
from bench.tables import load_table

SUITE = "mechanisms"


class FitRecorder:
    """Wraps the front-end's ``estimate``: one record per fit (wall, compile seconds, iterations, losses)."""

    def __init__(self, estimate, structures: bool = False):
        self.estimate = estimate
        self.structures = structures  # also record each fit's model cliques and measured cliques
        self.fits: list[dict] = []
        self.last_call: tuple | None = None  # the last fit's (args, kwargs): the final fit's once the run is over
        self.events = CompileEvents(active=True).install()  # its ``total``: every compile event's seconds

    @property
    def compiling(self) -> float:
        return self.events.total

    def __call__(self, *args, **kwargs):
        c0, t0 = self.compiling, time.perf_counter()
        self.last_call = (args, kwargs)
        fit = self.estimate(*args, **{**kwargs, "report": True})  # the fit's report: its loss and per-chunk log
        model, report = fit
        wall = time.perf_counter() - t0
        hist = report.history
        self.fits.append({
            "wall": wall, "compile": self.compiling - c0, "iterations": hist[-1]["iteration"] if hist else 0,
            "first_loss": hist[0]["loss"] if hist else None, "loss": float(report.loss),
            "warm": kwargs.get("warm_start") is not None, "cells": int(model.plan.cells),
            "oracle_calls": hist[-1].get("oracle_calls") if hist else None,
        })
        if self.structures:
            measurements = args[1] if len(args) > 1 else kwargs["measurements"]
            self.fits[-1].update(model=[list(c) for c in model.cliques], measured=[list(m.clique) for m in measurements])
        return fit if kwargs.get("report") else model  # what the caller asked for


@contextlib.contextmanager
def recording(module, structures: bool = False):
    """``module.estimate`` replaced by a :class:`FitRecorder` for the duration."""
    recorder = FitRecorder(module.estimate, structures)
    module.estimate = recorder
    try:
        yield recorder
    finally:
        module.estimate = recorder.estimate


def profile(mechanism: str, data, epsilon: float, seed: int, on_step=None, structures: bool = False,
            refits: tuple = (), **options) -> dict:
    """One run of ``mechanism`` on ``data`` with every fit and round recorded; ``on_step(steps, fits)``, where
    given, is called after each reported step with the steps and fits so far (``bench/gpu.py`` keeps a killed
    run's progress this way). ``refits``: iteration counts the run's final fit is run again with, from the same
    warm start, each scored as the run is (``refits`` in the result: how far the final fit was from converged)."""
    import importlib
    import inspect

    import jax

    import pgmjax as pj
    from pgmjax.mechanisms import adaptive_iterative, spanning_tree

    mw_rounds = importlib.import_module("pgmjax.mechanisms.multiplicative_weights.rounds")  # where MWEM calls the engine
    module, run = {"aim": (adaptive_iterative, pj.mechanisms.aim), "mst": (spanning_tree, pj.mechanisms.mst),
                   "mwem": (mw_rounds, pj.mechanisms.mwem)}[mechanism]
    if "progress" not in inspect.signature(run).parameters:  # MWEM reports no steps: its fits are its rounds
        plain = run

        def run(*args, progress, **kwargs):
            return plain(*args, **kwargs)
    steps: list[dict] = []
    t0 = time.perf_counter()
    with recording(module, structures) as rec:
        def step(info):
            steps.append({"at": time.perf_counter() - t0, "fits": len(rec.fits), **{k: info[k] for k in
                          ("round", "stage", "expected", "candidates", "model_mb") if k in info}})
            if on_step is not None:
                on_step(steps, rec.fits)
        result = run(data, epsilon, key=jax.random.key(seed), progress=step, synthetic=False, **options)
    wall = time.perf_counter() - t0
    rounds, before = [], (0.0, 0)
    for s in steps:
        fits = rec.fits[before[1]:s["fits"]]
        rounds.append({**s, "seconds": s["at"] - before[0], "fit_wall": sum(f["wall"] for f in fits),
                       "fit_compile": sum(f["compile"] for f in fits), "iterations": sum(f["iterations"] for f in fits),
                       "first_loss": fits[0]["first_loss"] if fits else None, "loss": fits[-1]["loss"] if fits else None,
                       "cells": fits[-1]["cells"] if fits else None})
        before = (s["at"], s["fits"])
    if len(rec.fits) > before[1]:  # the fits after the last reported step (the final fit)
        fits = rec.fits[before[1]:]
        rounds.append({"stage": "after the last step", "seconds": wall - before[0], "fit_wall": sum(f["wall"] for f in fits),
                       "fit_compile": sum(f["compile"] for f in fits), "iterations": sum(f["iterations"] for f in fits),
                       "first_loss": fits[0]["first_loss"], "loss": fits[-1]["loss"], "cells": fits[-1]["cells"]})
    seconds = result.info.seconds
    fits = rec.fits
    final_args, final_kwargs = rec.last_call
    refitted, models = [], []
    for iters in refits:
        t1 = time.perf_counter()
        model, report = rec.estimate(*final_args, **{**final_kwargs, "iters": iters, "report": True})
        models.append(model)
        refitted.append({"iters": iters, "seconds": time.perf_counter() - t1, "loss": float(report.loss)})
    error, *refit_errors = _workload_errors(result, data, [result.model, *models])
    for r, e in zip(refitted, refit_errors):
        r["workload_error"] = e
    return {
        "mechanism": mechanism, "epsilon": epsilon, "seed": seed, "wall": wall, "rounds": len(steps),
        "fits": len(fits), "fit_wall": sum(f["wall"] for f in fits), "fit_compile": sum(f["compile"] for f in fits),
        "fit_iterations": sum(f["iterations"] for f in fits), "timer": seconds, "per_round": rounds, "per_fit": fits,
        "workload_error": error, "final_iters": final_kwargs.get("iters"),
        "final_loss": float(result.report.loss), "refits": refitted,
        # compiled ahead on a background thread (pgmjax.compiler.ahead), not waited for; the waits are in fit_compile
        "ahead_compile": rec.events.ahead, "ahead_compiles": len(rec.events.ahead_xla), "ahead_waited": rec.events.waited,
    }


def _workload_errors(result, data, models) -> list[float]:
    """Each of ``models``' mean over the run's workload marginals of ``||model - data||_1 / N`` (AIM's and MST's
    error measure), the data's marginals computed once."""
    import numpy as np

    cliques = getattr(result.info, "candidates", None) or [c for c in result.model.cliques]  # AIM's workload
    cliques = [c for c in cliques if len(c) >= 2] or list(cliques)
    truth = data.marginals(cliques)
    return [float(np.mean([np.abs(t - e).sum() for t, e in zip(truth, model.marginals(cliques))]) / len(data))
            for model in models]


def _page(res: dict, args) -> list[str]:
    lines = [f"{res['mechanism'].upper()} on {args.dataset}, epsilon {res['epsilon']}, seed {res['seed']}: "
             f"{res['wall']:.1f} s in all, {res['rounds']} rounds/steps, {res['fits']} fits "
             f"({res['fit_wall']:.1f} s, of which compiling {res['fit_compile']:.1f} s; {res['fit_iterations']} "
             f"iterations). Workload error (mean L1 / N over the workload's marginals): {res['workload_error']:.4f}.",
             *([f"Compiled ahead on a background thread: {res['ahead_compiles']} XLA programs, "
                f"{res['ahead_compile']:.1f} s; the fits waited {res['ahead_waited']:.1f} s for them (counted as "
                "compiling)."] if res.get("ahead_compiles") else []),
             "", "The front-end's timer (seconds): " + ", ".join(f"{k} {v:.1f}" for k, v in res["timer"].items()), ""]
    if res.get("refits"):
        lines += [f"The final fit ({res['final_iters']} iterations: loss {res['final_loss']:.1f}, workload error "
                  f"{res['workload_error']:.4f}) run again from the same warm start:", "",
                  *schema.table(res["refits"], ["iters", "seconds", "loss", "workload_error"]), ""]
    cols = [c for c in ("round", "stage", "seconds", "fit_wall", "fit_compile", "iterations", "first_loss", "loss",
                        "cells", "candidates", "model_mb", "expected") if any(c in r for r in res["per_round"])]
    lines += schema.table(res["per_round"], cols)
    return lines


def compare(pairs: list[tuple[str, str]], out: str, argv) -> None:
    """One table of profiles before and after a change: ``pairs`` of result JSONs (before, after), one row each."""
    rows, runs = [], []
    for before, after in pairs:
        b, a = (json.loads(pathlib.Path(x).read_text()) for x in (before, after))
        runs.append((b, a))
        row = {"mechanism": a["mechanism"].upper(), "dataset": a["dataset"], "epsilon": a["epsilon"], "seed": a["seed"],
               "rounds": f"{b['rounds']} / {a['rounds']}"}
        for key, name in (("wall", "wall s"), ("fit_compile", "compiling s"), ("fit_wall", "fits s")):
            row[name] = f"{b[key]:.1f} / {a[key]:.1f} ({b[key] / a[key]:.2f}x)"
        if all("marginals" in r["timer"] for r in (b, a)):  # the front-end's own timer: scoring candidates
            tb, ta = b["timer"]["marginals"], a["timer"]["marginals"]
            row["candidate marginals s"] = f"{tb:.1f} / {ta:.1f} ({tb / ta:.2f}x)"
        compiles = [sum(f["compile"] > 0.3 for f in r["per_fit"]) for r in (b, a)]
        row["fits compiling / all"] = f"{compiles[0]}/{b['fits']} / {compiles[1]}/{a['fits']}"
        row["iterations"] = f"{b['fit_iterations']} / {a['fit_iterations']}"
        row["workload error"] = f"{b['workload_error']:.4f} / {a['workload_error']:.4f}"
        row["before"], row["after"] = before, after
        rows.append(row)
    meta = schema.run_meta("bench.aim_profile", argv)
    cols = ["mechanism", "dataset", "epsilon", "seed", "rounds", "wall s", "fits s", "compiling s", "fits compiling / all",
            "candidate marginals s", "iterations", "workload error"]
    cols = [c for c in cols if any(c in r for r in rows)]
    page = [*schema.header_lines(meta), "", "Each cell: before / after (the ratio before / after). One run each per "
            "seed, the published defaults; a different engine selects different marginals, so the rounds differ. "
            + _pairing(runs) +
            "One seed's path of selections, once it differs, differs in size and time, so compare over the seeds. Each profile, round by round, with its commit, is in the files the "
            "JSON's rows name. "
            "A fit counts as compiling (a new program) where JAX's compile events took over 0.3 s in it (a reused program's fit compiles a few small helpers, under 0.15 s).", "", *schema.table(rows, cols)]
    summary = _summary(runs)
    if summary:
        page += ["", "Over the seeds (before / after): wall and compiling means and medians; workload error mean ± sample "
                 "sd, and the after-minus-before difference within each seed (mean ± sd).", "",
                 *schema.table(summary, list(summary[0]))]
    schema.write_result(SUITE, out, rows, meta, page=page, title="AIM and MST per round: before and after",
                        summary=summary)


def _pairing(runs: list[tuple[dict, dict]]) -> str:
    """How the pairs ran, from their files' own records: back to back (every pair on one day, on one kind of
    machine), or apart (each arm's dates, commits and machines named)."""
    def day(r):
        return r["meta"]["date"][:10]

    def machine(r):
        m = r["meta"]["machine"]
        return f"{m['cpu']}, {m['cores']} cores"

    if all(day(b) == day(a) and machine(b) == machine(a) for b, a in runs):
        return f"Each pair ran back to back (before, then after) on one machine ({machine(runs[0][0])}): compare within a row. "

    def arm(rs):
        return "; ".join(sorted({f"{day(r)}, {r['meta']['commit']}, {machine(r)}" for r in rs}))

    return (f"The two arms ran apart (before: {arm([b for b, _ in runs])}; after: {arm([a for _, a in runs])}), "
            "each under its own day's load: compare the means over the seeds, not single rows. ")


def _summary(runs: list[tuple[dict, dict]]) -> list[dict]:
    """Per mechanism, dataset and epsilon with at least two seeds: the before and after arms over their seeds."""
    groups: dict[tuple, list[tuple[dict, dict]]] = {}
    for b, a in runs:
        groups.setdefault((a["mechanism"].upper(), a["dataset"], a["epsilon"]), []).append((b, a))
    out = []
    for (mechanism, dataset, epsilon), pairs in groups.items():
        if len(pairs) < 2:
            continue
        arms = list(zip(*pairs))  # (befores, afters)

        def two(key, f, digits=1):
            return " / ".join(f"{f([r[key] for r in arm]):.{digits}f}" for arm in arms)

        errors = [[r["workload_error"] for r in arm] for arm in arms]
        diff = [x - y for x, y in zip(errors[1], errors[0])]
        out.append({"mechanism": mechanism, "dataset": dataset, "epsilon": epsilon, "seeds": len(pairs),
                    "wall s, mean": two("wall", statistics.mean), "wall s, median": two("wall", statistics.median),
                    "compiling s, mean": two("fit_compile", statistics.mean),
                    "compiling share": " / ".join(f"{sum(r['fit_compile'] for r in arm) / sum(r['wall'] for r in arm):.0%}"
                                                  for arm in arms),
                    "iterations, mean": two("fit_iterations", statistics.mean, 0),
                    "workload error": " / ".join(f"{statistics.mean(e):.4f} ± {statistics.stdev(e):.4f}" for e in errors),
                    "after - before": f"{statistics.mean(diff):+.4f} ± {statistics.stdev(diff):.4f}"})
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="adult", help="a shared dataset, or generated30 / generated50")
    p.add_argument("--data", default=None, help="the shared data folder (default PGMJAX_DATA or ../shared/data)")
    p.add_argument("--mechanism", choices=("aim", "mst", "mwem"), default="aim")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=None,
                   help="AIM's or MWEM's T (default: the mechanism's; AIM's 16 d is the published one)")
    p.add_argument("--max-model-mb", type=float, default=80.0, help="AIM's model-size cap (published: 80)")
    p.add_argument("--engine-iters", type=int, default=None, help="iterations per fit (default: the front-end's)")
    p.add_argument("--tol", type=float, default=None, help="FitOptions tol: a fit stops when a chunk of 50 "
                   "iterations changes its loss by less than this (relative)")
    p.add_argument("--program", choices=("auto", "dense", "size_class"), default=None,
                   help="FitOptions program: the fits' compiled program (default: estimate's, 'auto')")
    p.add_argument("--compile-ahead", action="store_true",
                   help="FitOptions compile_ahead=True: each round's fit compiles the next size class's programs on a "
                        "background thread")
    p.add_argument("--out", default=None, help="result name under bench/results/mechanisms/ (or a path)")
    p.add_argument("--structures", action="store_true", help="record each fit's model cliques and measured cliques "
                   "(what `python -m bench.size_class --iteration PROFILE.json:FIT` times)")
    p.add_argument("--refit", nargs="+", type=int, default=(), metavar="ITERS",
                   help="after the run, fit its final fit's measurements again from the same warm start with each of "
                        "these iteration counts, and score each as the run (how far the final fit was from converged)")
    p.add_argument("--compare", nargs="+", default=None, metavar="JSON",
                   help="render a before/after table from pairs of result files (before1 after1 before2 after2 ...) "
                        "into --out instead of running")
    args = p.parse_args(argv)
    if args.compare:
        if len(args.compare) % 2:
            p.error("--compare takes pairs of result files: before after [before after ...]")
        compare(list(zip(args.compare[::2], args.compare[1::2])), args.out or "aim_profile_before_after_cpu", argv)
        return
    import jax

    import pgmjax as pj

    jax.config.update("jax_enable_compilation_cache", False)  # first-call compilation is part of what users wait for
    data = load_table(args.dataset, args.data)
    options = {}
    if args.mechanism == "aim":
        options.update(max_model_mb=args.max_model_mb)
    if args.mechanism == "mwem":
        options.update(original=False)  # the +PGM arm only: the full table of a wide domain is past MW's limit
    if args.mechanism in ("aim", "mwem") and args.rounds is not None:
        options["rounds"] = args.rounds
    if args.engine_iters is not None:
        options["engine_iters"] = args.engine_iters
    fit = {k: v for k, v in (("tol", args.tol), ("program", args.program),
                             ("compile_ahead", True if args.compile_ahead else None)) if v is not None}
    call = {**options, "fit_options": pj.FitOptions(**fit)} if fit else options
    res = profile(args.mechanism, data, args.epsilon, args.seed, structures=args.structures, refits=args.refit, **call)
    if args.structures:
        res["domain"] = {a: int(data.domain[a]) for a in data.domain.attributes}
    res.update(dataset=args.dataset, records=len(data), attributes=len(data.domain),
               options={**options, "fit_options": fit} if fit else options)
    name = args.out or f"{args.mechanism}_profile_{args.dataset}_cpu"
    meta = schema.run_meta("bench.aim_profile", argv)
    schema.write_result(SUITE, name, res["per_round"], meta, page=[*schema.header_lines(meta), "", *_page(res, args)], title=f"{args.mechanism.upper()} per round on {args.dataset}",
                        **{k: v for k, v in res.items() if k != "per_round"})


if __name__ == "__main__":
    main()
