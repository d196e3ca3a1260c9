"""AIM's per-round trace for ``bench.mst_aim``: mechanism time and workload error after every round, both engines.

A point per round: ``seconds`` since the mechanism started with the time spent evaluating the trace itself taken
out (:class:`Clock`), and ``error``, the workload error of the model fitted so far: the mean over the workload's
marginals of ``||mu_C(D) - mu_hat_C||_1 / N``, :func:`pgmjax.model.metrics.workload_error` at ``scale="script"``
(:class:`Scorer`), the same function on both sides (the mbi driver imports it; its estimates are mbi's model's
marginals). The last point, ``round == "final"``, is the model of the final fit.

Where each side evaluates, so that the trace neither pays for nor prepares work of the mechanism:

* pgmjax (:func:`traced_aim`, from outside the library): ``adaptive_iterative.estimate`` is wrapped to keep the
  latest model, and the progress callback (called at a round's end, after the mechanism answered its candidates on
  that model) scores it with the mechanism's own call (:func:`pgmjax.mechanisms.steps.candidate_marginals` on the
  same candidates, so the answers come from the model's cached tables and programs already compiled). The last
  round's model, which the mechanism does not answer, is scored after the run.
* mbi (``bench.mbi_mst_aim``): at a round's end, eagerly (``jax.disable_jit``), so nothing is compiled that mbi's
  candidate selection could reuse.

:func:`speed_rows` and :func:`summary_rows` compare like with like when mbi ran only its first ``K`` rounds
(``--mbi-max-rounds`` / ``--mbi-time-limit``): pgmjax's time and error at round ``K`` against mbi's there.
"""

from __future__ import annotations

import contextlib
import math
import time


class Clock:
    """Seconds since :meth:`start`, less the time spent inside :meth:`excluded` blocks."""

    def __init__(self):
        self.start()

    def start(self) -> None:
        self.t0, self.skipped = time.perf_counter(), 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0 - self.skipped

    @contextlib.contextmanager
    def excluded(self):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.skipped += time.perf_counter() - t


class Scorer:
    """The workload error of estimated marginals: :func:`pgmjax.model.metrics.workload_error` (``scale="script"``:
    ``||truth - estimate||_1 / ||truth||_1``, and ``||truth||_1 = N`` for a marginal), averaged over ``cliques``.

    Args:
        domain: ``{attribute: size}``.
        cliques: the workload's marginals.
        truth: their true counts (any shape per clique, the estimates' shapes).
    """

    def __init__(self, domain: dict, cliques, truth):
        import pgmjax as pj
        from pgmjax.model.metrics import workload_error

        self.cliques = [tuple(c) for c in cliques]
        self.workload = pj.Workload.marginals(pj.Domain(dict(domain)), self.cliques)
        self.truth = list(truth)
        self.error = workload_error
        if len(self.truth) != len(self.cliques):
            raise ValueError(f"Scorer: {len(self.cliques)} cliques but {len(self.truth)} true marginals")

    def __call__(self, estimate) -> float:
        return self.error(self.workload, self.truth, list(estimate), scale="script")


class Trace:
    """Points ``{"round", "seconds", "error", "eval_s"}``: ``marginals(model)`` gives the model's estimates of the
    scorer's cliques; the evaluation runs inside the clock's :meth:`Clock.excluded`."""

    def __init__(self, scorer: Scorer, marginals):
        self.scorer, self.marginals = scorer, marginals
        self.clock = Clock()
        self.points: list[dict] = []

    def point(self, rnd, model, seconds: float | None = None) -> None:
        seconds = self.clock.now() if seconds is None else seconds
        t = time.perf_counter()
        with self.clock.excluded():
            error = self.scorer(self.marginals(model))
        self.points.append({"round": rnd, "seconds": seconds, "error": error, "eval_s": time.perf_counter() - t})


def traced_aim(data, epsilon: float, delta: float, key, **options):
    """pgmjax's AIM with its trace: ``(result, points, wall)``, ``wall`` the run's seconds without the trace's.

    ``options`` go to :func:`pgmjax.mechanisms.adaptive_iterative.aim` (the default workload: the trace scores it).
    """
    from pgmjax.mechanisms import adaptive_iterative
    from pgmjax.mechanisms.steps import candidate_marginals

    domain = data.domain
    cliques = [c for c, _ in adaptive_iterative.default_aim_workload(domain)]
    cands = list(adaptive_iterative.aim_candidates(None, domain))  # the mechanism's candidates, in its order
    where = [cands.index(c) for c in cliques]

    def marginals(model):
        answers = candidate_marginals(model, cands)
        return [answers[j] for j in where]

    trace = Trace(Scorer(dict(domain), cliques, data.marginals(cliques)), marginals)
    inner, fits, last = adaptive_iterative.estimate, [], []

    def estimate(*args, **kwargs):
        model = inner(*args, **kwargs)
        fits.append((trace.clock.now(), model))
        return model

    def progress(entry):
        if entry["last"]:  # the mechanism never answers this model: scored after the run
            last.append((entry["round"], trace.clock.now(), fits[-1][1]))
        else:
            trace.point(entry["round"], fits[-1][1])

    adaptive_iterative.estimate = estimate
    trace.clock.start()
    try:
        result = adaptive_iterative.aim(data, epsilon, delta, key=key, progress=progress, **options)
        wall = trace.clock.now()
    finally:
        adaptive_iterative.estimate = inner
    for rnd, seconds, model in last:
        trace.point(rnd, model, seconds)
    trace.point("final", result.model, fits[-1][0])
    return result, trace.points, wall


# ----------------------------------------------------------------------------- like with like
def at_round(points, rnd):
    """The trace point of round ``rnd`` (None if the run had fewer rounds)."""
    return next((p for p in points or () if p["round"] == rnd), None)


def final(points):
    return at_round(points, "final")


def speed_rows(runs) -> list[dict]:
    """Per dataset, epsilon and seed with an AIM trace on both sides: ``K`` = mbi's last round; each side's seconds
    and error at round ``K``, ``ratio`` = mbi's seconds / pgmjax's; pgmjax's full run (wall, final error, rounds),
    and mbi's where it ran in full."""
    by = {}
    for r in runs:
        if r.get("mechanism") == "aim" and r.get("trace") and r["library"] in ("pgmjax", "mbi"):
            by.setdefault((r.get("dataset", "adult"), r["epsilon"], r["seed"]), {})[r["library"]] = r
    out = []
    for (dataset, eps, seed), libs in by.items():
        pg, mb = libs.get("pgmjax"), libs.get("mbi")
        row = {"dataset": dataset, "epsilon": eps, "seed": seed}
        if pg:
            row.update(pgmjax_rounds=pg["rounds_run"], pgmjax_wall=pg["wall_s"], pgmjax_error=final(pg["trace"])["error"])
        if mb:
            k = mb["rounds_run"]
            row.update(K=k, mbi_subset=bool(mb.get("subset")))
            if not mb.get("subset"):
                row.update(mbi_wall=mb["wall_s"], mbi_error=final(mb["trace"])["error"])
            p, m = at_round(pg["trace"], k) if pg else None, at_round(mb["trace"], k)
            row.update(pgmjax_s_at_K=p and p["seconds"], pgmjax_error_at_K=p and p["error"],
                       mbi_s_at_K=m and m["seconds"], mbi_error_at_K=m and m["error"],
                       ratio_at_K=(m["seconds"] / p["seconds"]) if p and m and p["seconds"] > 0 else None)
        out.append(row)
    return sorted(out, key=lambda r: (r["dataset"], r["epsilon"], r["seed"]))


def mean_sd(xs) -> tuple[float | None, float | None, int]:
    """``(mean, sample sd, n)`` of the values that are not None (sd None below two values)."""
    xs = [float(x) for x in xs if x is not None]
    if not xs:
        return None, None, 0
    m = math.fsum(xs) / len(xs)
    sd = math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return m, sd, len(xs)


SUMMARY_COLUMNS = ("pgmjax_s_at_K", "mbi_s_at_K", "ratio_at_K", "pgmjax_error_at_K", "mbi_error_at_K", "pgmjax_wall",
                   "pgmjax_error", "mbi_wall", "mbi_error")


def summary_rows(speed) -> list[dict]:
    """Mean ± sd over seeds of :func:`speed_rows`, per dataset and epsilon: ``{column: (mean, sd, n)}``."""
    groups = {}
    for r in speed:
        groups.setdefault((r["dataset"], r["epsilon"]), []).append(r)
    return [{"dataset": d, "epsilon": e, "seeds": len(rs), "K": sorted({r.get("K") for r in rs if r.get("K")}),
             **{c: mean_sd(r.get(c) for r in rs) for c in SUMMARY_COLUMNS}} for (d, e), rs in groups.items()]


def _fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def _pm(stat, spec):
    m, sd, n = stat
    return "n/a" if m is None else _fmt(m, spec) + (f" ± {_fmt(sd, spec)}" if sd is not None else "")


def render(res: dict, png=None) -> list[str]:
    """The Markdown section of the traces: what mbi ran, per seed, mean ± sd, the plots (``png(dataset, eps)``:
    a file name beside the page)."""
    runs = res.get("rows", res.get("runs", []))
    speed = speed_rows(runs)
    if not speed:
        return []
    lines = ["", "## AIM per round: workload error against time", "",
             "Per-round traces (JSON: `trace` of each AIM run): after every round, the seconds since the mechanism "
             "started (the trace's own evaluation taken out) and the workload error of the model fitted so far, "
             "mean over the workload's marginals of L1 / N (`pgmjax.model.metrics.workload_error`, scale \"script\", "
             "the same function for both sides). `K` is mbi's last round; `at K`: each side at its own round K "
             "(the two runs select different cliques: different noise). `ratio` = mbi's seconds / pgmjax's at K. "
             "`pgmjax wall` and `pgmjax error`: pgmjax's whole run (final fit and synthetic data included) and its "
             "final model's error."]
    subset = [r for r in runs if r.get("library") == "mbi" and r.get("mechanism") == "aim" and r.get("subset")]
    if subset:
        s = subset[0]["subset"]
        how = ", ".join(f"{k} {v}" for k, v in (("--mbi-max-rounds", s.get("max_rounds")),
                                                 ("--mbi-time-limit", s.get("time_limit_s"))) if v is not None)
        lines += ["", f"**mbi ran a subset of its rounds** ({how}): " + "; ".join(
            f"{r.get('dataset', 'adult')} eps {r['epsilon']:g} seed {r['seed']}: its first {r['rounds_run']} "
            f"round{'s' * (r['rounds_run'] > 1)} (nominal T = {r['rounds']}; stopped by {r['subset']['stopped_by']})"
            for r in subset)
            + ". A subset run has no final fit and no synthetic data, so mbi's TVD columns above are n/a and only the "
            "comparison at round K is like with like."]
    lines += ["", "| dataset | eps | seed | K | pgmjax s at K | mbi s at K | ratio | pgmjax error at K | mbi error at K | "
              "pgmjax rounds | pgmjax wall (s) | pgmjax error | mbi wall (s) | mbi error |", "|" + "---|" * 14]
    for r in speed:
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['seed']} | {r.get('K', 'n/a')} | "
                     f"{_fmt(r.get('pgmjax_s_at_K'), ',.1f')} | {_fmt(r.get('mbi_s_at_K'), ',.1f')} | "
                     f"{_fmt(r.get('ratio_at_K'), '.1f')} | {_fmt(r.get('pgmjax_error_at_K'), '.4f')} | "
                     f"{_fmt(r.get('mbi_error_at_K'), '.4f')} | {r.get('pgmjax_rounds', 'n/a')} | "
                     f"{_fmt(r.get('pgmjax_wall'), ',.1f')} | {_fmt(r.get('pgmjax_error'), '.4f')} | "
                     f"{_fmt(r.get('mbi_wall'), ',.1f')} | {_fmt(r.get('mbi_error'), '.4f')} |")
    lines += ["", "Mean ± sample standard deviation over seeds:", "",
              "| dataset | eps | seeds | K | pgmjax s at K | mbi s at K | ratio | pgmjax error at K | mbi error at K | "
              "pgmjax wall (s) | pgmjax error | mbi wall (s) | mbi error |", "|" + "---|" * 13]
    specs = dict(zip(SUMMARY_COLUMNS, (",.1f", ",.1f", ".1f", ".4f", ".4f", ",.1f", ".4f", ",.1f", ".4f")))
    for r in summary_rows(speed):
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['seeds']} | {', '.join(map(str, r['K'])) or 'n/a'} | "
                     + " | ".join(_pm(r[c], specs[c]) for c in SUMMARY_COLUMNS) + " |")
    for d, e in dict.fromkeys((r["dataset"], r["epsilon"]) for r in speed):
        name = png(d, e) if png else None
        if name:
            lines += ["", f"![AIM on {d}, eps {e:g}: workload error against time]({name})"]
    return lines

