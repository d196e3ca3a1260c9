"""Engine benchmark: pgmjax vs mbi 2.0 (default mirror descent, float32) on the same noisy marginals.

Problems (see ``bench/problems.py``): chains of triples at d = 10, 100, 1000; the four ICML 2019 datasets
with their benchmark cliques; Adult with 1-way marginals + a Chow-Liu tree; NLTCS with all 2-way marginals;
generated irregular problems at d = 15, 50, 200. All Gaussian noise, sigma 10 (the chains: sigma 10 too).

The parent process builds each problem once (fixed seeds), writes it to an ``.npz`` file, and runs pgmjax and
then mbi, back to back, each in a FRESH child process (so compile times and peak memory are honest), under a
wall-clock cap per child. Each child measures, with ``time.perf_counter``, every call ending in
``jax.block_until_ready``:

* ``jt_build_s``: the junction tree (pgmjax: ``junction_tree`` + the oracle plan, caches cleared; mbi:
  ``junction_tree.make_junction_tree``; mbi builds it again inside the trace of its first call, so it is also
  inside mbi's compile);
* ``first_call_s``: the first ``estimate`` of ``--first-iters`` (50) iterations in the process;
* ``compile_s``: ``first_call_s`` minus the median warm identical call;
* ``ms_per_iter``: ``(warm estimate(50) - warm estimate(0)) / 50`` (medians of ``--repeats`` calls);
* the loss trajectory of one warm ``estimate(--iters)`` call (1000 by default): the loss after every
  50-iteration block against the wall time since the call began (pgmjax: ``callback``, ``chunk=50``; mbi:
  ``callback_fn``, which mbi calls after each 50-step ``lax.scan`` block, given the state's loss through a
  subclass of ``MirrorDescent`` that overrides only ``_callback_value``). Both engines' state loss is the exact
  L2 loss ``1/2 sum ((mu - y) / sigma)^2`` of the current potentials;
* ``final_loss``: recomputed in float64 numpy from the returned model's clique marginals with one common
  function (checks that both engines' reported losses are on the same scale);
* ``peak_mib``: ``VmHWM`` of the child (peak resident set, everything included: Python, JAX, the problem).

From these the parent derives, per problem: the speed ratios mbi / pgmjax (> 1: pgmjax faster), and the
iterations and warm seconds pgmjax needs to reach the loss mbi has after its last iteration (1000), read off
the 50-iteration blocks (so an upper bound, up to one block). A child that passes its cap is killed and its
row says so ("not run: exceeded cap"), keeping the stages it finished. A child whose trajectory would not fit
its cap runs fewer iterations (recorded as ``iters_run``). If mbi crashes or its losses are not finite (it is
not protected from the jaxlib 0.10.2 XLA:CPU YNNPACK miscompilation that ``pgmjax/compiler.py`` works
around), it is rerun with ``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`` and both runs are recorded;
the ratios then use the rerun (marked).

Usage::

    python -m bench engine --problems all                      # bench/results/engine/engine_cpu.json, .md, .png
    python -m bench engine --problems chain10 adult --out /tmp/engine.json
    python -m bench engine --quick --problems chain10 titanic --out /tmp/engine-quick.json
    python -m bench.engine --render bench/results/engine/engine_cpu.json     # .md and .png from the JSON only

Writes ``<out>.json`` (``bench.schema``; ``--out`` a name under ``bench/results/engine/`` or a path) after every
problem, and ``<out>.md`` plus ``<out>_loss.png`` at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

from bench import schema
from bench.benchutil import CompileEvents, median, proc_status
from bench.schema import ROOT, cpu_model

YNN_OFF = "--xla_cpu_experimental_ynn_fusion_type="
BLOCK = 50  # mbi's CALLBACK_EVERY; pgmjax's chunk in the trajectory
TARGETS = {"per_iter": 3.0, "to_mbi_loss": 5.0, "compile": 3.0}

# =====================================================================================================
# Child processes: one engine on one problem.
# =====================================================================================================


class _Status:
    """The child's result so far, rewritten (atomically) after every stage so a killed child leaves it."""

    def __init__(self, path: str, engine: str):
        self.path = path
        self.data = {"engine": engine, "stage": "start", "pid": os.getpid()}

    def update(self, stage: str, **kw):
        self.data.update(kw)
        self.data["stage"] = stage
        self.data["peak_mib"] = proc_status("VmHWM").get("VmHWM")
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)


def _source_sha(package_dir: str) -> str:
    """SHA-1 of a package's .py sources (which pgmjax the child ran: the tree is edited concurrently)."""
    import hashlib

    h = hashlib.sha1()
    for dirpath, _, files in sorted(os.walk(package_dir)):
        for name in sorted(files):
            if name.endswith(".py"):
                with open(os.path.join(dirpath, name), "rb") as f:
                    h.update(name.encode() + f.read())
    return h.hexdigest()[:12]


def common_loss(tables, noisy, sigma) -> float:
    """``1/2 sum_c ||(mu_c - y_c) / sigma||^2`` in float64 (the loss both engines minimise)."""
    import numpy as np

    total = 0.0
    for mu, y in zip(tables, noisy):
        r = (np.asarray(mu, dtype=np.float64).reshape(y.shape) - y) / sigma
        total += 0.5 * float(np.vdot(r, r))
    return total


def _l1_error(tables, true, records) -> float:
    import numpy as np

    return float(np.mean([np.abs(np.asarray(m, np.float64).reshape(t.shape) - t).sum() / records for m, t in zip(tables, true)]))


def child_pgmjax(args) -> None:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    from bench import problems as ep
    import numpy as np

    import pgmjax as pj
    from pgmjax.graph import junction as jt_mod
    from pgmjax.graph import oracle, oracle_plan

    events = CompileEvents().install()
    st = _Status(args.status_file, "pgmjax")
    st.data["pgmjax_source_sha"] = _source_sha(os.path.dirname(pj.__file__))
    t_start = time.perf_counter()
    p = ep.load(args.problem_file)
    domain = pj.Domain(p["domain"])
    sigma = p["sigma"]
    meas = [pj.Measurement(c, y, stddev=sigma) for c, y in zip(p["cliques"], p["noisy"])]
    st.update("loaded", baseline_mib=proc_status("VmHWM").get("VmHWM"))

    jt_mod._junction_tree_cached.cache_clear()
    oracle_plan._make_plan_cached.cache_clear()
    t0 = time.perf_counter()
    tree = pj.junction_tree(domain, p["cliques"])
    t1 = time.perf_counter()
    oracle.make_plan(domain, p["cliques"])
    t2 = time.perf_counter()
    st.update("jt", jt_build_s=t2 - t0, jt_tree_s=t1 - t0, jt_plan_s=t2 - t1,
              jt_cells=int(sum(domain.size(c) for c in tree.cliques)), jt_cliques=len(tree.cliques),
              jt_max_clique_cells=int(max(domain.size(c) for c in tree.cliques)))

    def timed(n, callback=None):  # (seconds, pj.Fit): the model and its report (loss, per-chunk log)
        t = time.perf_counter()
        fit = pj.estimate(domain, meas, "mirror_descent", iters=n, chunk=BLOCK, callback=callback, report=True)
        jax.block_until_ready(fit.model.theta)
        return time.perf_counter() - t, fit

    n1 = args.first_iters
    events.active = True
    first, m = timed(n1)
    events.active = False
    st.update("first_call", first_call_s=first, first_call_loss=m.report.loss, **events.summary())
    warm = [timed(n1)[0] for _ in range(args.repeats)]
    errors = []
    try:
        fixed_runs = [timed(0) for _ in range(args.repeats)]
        fixed = [t for t, _ in fixed_runs]
        loss0 = fixed_runs[-1][1].report.loss
        fixed_s = median(fixed)
    except Exception as e:  # the engine refused the 0-iteration model: keep going, say so
        errors.append(f"estimate(iters=0) raised {type(e).__name__}: {e}")
        fixed, fixed_s, loss0 = [], 0.0, None
    warm_s = median(warm)
    per_iter = (warm_s - fixed_s) / n1
    st.update("warm", warm_call_s=warm_s, warm_samples_s=warm, fixed_call_s=fixed_s if fixed else None,
              fixed_samples_s=fixed, compile_s=first - warm_s, ms_per_iter=1e3 * per_iter, initial_loss=loss0,
              ms_per_iter_includes_setup=not fixed, errors=errors)

    iters = _fit_iters(args, time.perf_counter() - t_start, fixed_s, per_iter)
    traj = [[0, float(loss0), 0.0]] if loss0 is not None else []
    tstart = [0.0]

    def cb(info):
        traj.append([int(info["iteration"]), float(info["loss"]), time.perf_counter() - tstart[0]])

    tstart[0] = time.perf_counter()
    try:
        model, report = pj.estimate(domain, meas, "mirror_descent", iters=iters, chunk=BLOCK, callback=cb, report=True)
        jax.block_until_ready(model.theta)
    except Exception as e:  # the callback saw every block: the trajectory stands, the returned model does not
        errors.append(f"estimate(iters={iters}) raised {type(e).__name__}: {e}")
        st.update("done", iters_run=iters, trajectory=traj, trajectory_call_s=time.perf_counter() - tstart[0],
                  reported_final_loss=traj[-1][1] if traj else None, final_loss=None, errors=errors,
                  finite=all(math.isfinite(x[1]) for x in traj), child_wall_s=time.perf_counter() - t_start)
        return
    traj_s = time.perf_counter() - tstart[0]
    tables = model.marginals(p["cliques"])
    final = common_loss(tables, p["noisy"], sigma)
    st.update("done", iters_run=iters, trajectory=traj, trajectory_call_s=traj_s,
              ms_per_iter_traj=1e3 * (traj_s - fixed_s) / iters,
              reported_final_loss=float(report.loss), final_loss=final, errors=errors,
              finite=bool(math.isfinite(final) and all(math.isfinite(x[1]) for x in traj)),
              oracle_calls_per_iter=(report.history[-1]["oracle_calls"] - 1) / iters if report.history else None,
              l1_error_per_record=_l1_error(tables, p["true"], p["records"]),
              noisy_l1_error_per_record=_l1_error(p["noisy"], p["true"], p["records"]),
              child_wall_s=time.perf_counter() - t_start)


def _fit_iters(args, elapsed, fixed_s, per_iter) -> int:
    """The trajectory's iterations: ``--iters``, or fewer (whole blocks) when that would not fit the cap."""
    left = args.cap - elapsed - 2 * fixed_s - 10.0  # room for the final marginals and the exit
    if per_iter <= 0 or per_iter * args.iters <= 0.85 * left:
        return args.iters
    return max(BLOCK, int(0.85 * left / per_iter) // BLOCK * BLOCK)


def child_mbi(args) -> None:
    import warnings

    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="JAX is running in float32")
        import mbi
    from bench import problems as ep
    import jax.numpy as jnp
    from mbi import estimation, junction_tree

    class _MD(estimation.MirrorDescent):
        """mbi's MirrorDescent; its callback gets the state's loss (that of the current potentials)."""

        def _callback_value(self, state, known_total, constraints=()):
            return state.loss

    events = CompileEvents().install()
    st = _Status(args.status_file, "mbi")
    st.data["XLA_FLAGS"] = os.environ.get("XLA_FLAGS")
    t_start = time.perf_counter()
    p = ep.load(args.problem_file)
    sigma = p["sigma"]
    names = list(p["domain"])
    domain = mbi.Domain(names, [p["domain"][a] for a in names])
    meas = [mbi.LinearMeasurement(jnp.asarray(y.ravel(), jnp.float32), tuple(c), stddev=sigma)
            for c, y in zip(p["cliques"], p["noisy"])]
    jax.block_until_ready([m.noisy_measurement for m in meas])
    st.update("loaded", baseline_mib=proc_status("VmHWM").get("VmHWM"))

    t0 = time.perf_counter()
    jtree, _ = junction_tree.make_junction_tree(domain, [tuple(c) for c in p["cliques"]])
    t1 = time.perf_counter()
    maxc = junction_tree.maximal_cliques(jtree)
    st.update("jt", jt_build_s=t1 - t0, jt_cells=int(sum(domain.size(c) for c in maxc)), jt_cliques=len(maxc),
              jt_max_clique_cells=int(max(domain.size(c) for c in maxc)))

    est = _MD()

    def timed(n, callback=None):
        t = time.perf_counter()
        model = est.estimate(domain, meas, iters=n, callback_fn=callback)
        jax.block_until_ready(model)
        return time.perf_counter() - t, model

    def loss_of(model):
        tables = [model.project(tuple(c)).datavector(flatten=False) for c in p["cliques"]]
        return common_loss(tables, p["noisy"], sigma), tables

    n1 = args.first_iters
    events.active = True
    first, m = timed(n1)
    events.active = False
    st.update("first_call", first_call_s=first, **events.summary())
    warm = [timed(n1)[0] for _ in range(args.repeats)]
    fixed_runs = [timed(0) for _ in range(args.repeats)]
    fixed = [t for t, _ in fixed_runs]
    warm_s, fixed_s = median(warm), median(fixed)
    per_iter = (warm_s - fixed_s) / n1
    loss0, _ = loss_of(fixed_runs[-1][1])
    st.update("warm", warm_call_s=warm_s, warm_samples_s=warm, fixed_call_s=fixed_s, fixed_samples_s=fixed,
              compile_s=first - warm_s, ms_per_iter=1e3 * per_iter, initial_loss=loss0,
              first_call_loss=loss_of(m)[0])

    iters = _fit_iters(args, time.perf_counter() - t_start, fixed_s, per_iter)
    traj = [[0, float(loss0), 0.0]]
    tstart = [0.0]

    def cb(loss):
        traj.append([len(traj) * BLOCK, float(loss), time.perf_counter() - tstart[0]])

    tstart[0] = time.perf_counter()
    model = est.estimate(domain, meas, iters=iters, callback_fn=cb)
    jax.block_until_ready(model)
    traj_s = time.perf_counter() - tstart[0]
    final, tables = loss_of(model)
    st.update("done", iters_run=iters, trajectory=traj, trajectory_call_s=traj_s,
              ms_per_iter_traj=1e3 * (traj_s - fixed_s) / iters,
              reported_final_loss=traj[-1][1], final_loss=final,
              finite=bool(math.isfinite(final) and all(math.isfinite(x[1]) for x in traj)),
              l1_error_per_record=_l1_error(tables, p["true"], p["records"]),
              noisy_l1_error_per_record=_l1_error(p["noisy"], p["true"], p["records"]),
              child_wall_s=time.perf_counter() - t_start)


# =====================================================================================================
# Parent: problems, children, derived numbers.
# =====================================================================================================


def run_child(engine: str, problem_file: str, args, env_extra: dict | None = None, module: str | None = None,
              extra_args: tuple = (), env: dict | None = None) -> dict:
    """One engine on one problem in a fresh ``python -m <module> --child`` process (``bench.engine`` by default;
    ``bench.gpu`` runs its own), killed past ``args.cap`` seconds; its status file's result with the outcome."""
    status_file = problem_file.replace(".npz", f".{engine}{'-ynnoff' if env_extra else ''}.json")
    if os.path.exists(status_file):
        os.remove(status_file)
    cmd = [sys.executable, "-m", module or "bench.engine", "--child", engine, "--problem-file", problem_file,
           "--status-file", status_file, "--first-iters", str(args.first_iters), "--iters", str(args.iters),
           "--repeats", str(args.repeats), "--cap", str(args.cap), *extra_args]
    env = dict(os.environ if env is None else env)
    if env_extra:
        env.update(env_extra)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        out, err = proc.communicate(timeout=args.cap)
        outcome = "ok" if proc.returncode == 0 else f"crashed (exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        proc.kill()  # only the child this function started
        out, err = proc.communicate()
        outcome = f"not run: exceeded cap ({args.cap:.0f} s)"
    res = {"engine": engine, "stage": "start"}
    if os.path.exists(status_file):
        with open(status_file) as f:
            res = json.load(f)
    res["outcome"] = outcome
    res["wall_s"] = time.perf_counter() - t
    if outcome != "ok":
        res["stderr_tail"] = err[-3000:]
    if env_extra:
        res["env"] = env_extra
    return res


def _failed(r: dict) -> bool:
    """A crash or a non-finite loss (a timeout is not a failure: the row says "exceeded cap")."""
    if r.get("outcome", "").startswith("crashed"):
        return True
    return not _finite_loss(r) or (r.get("stage") == "done" and not r.get("finite", True))


def _finite_loss(r: dict) -> bool:
    vals = [r.get("first_call_loss"), r.get("initial_loss"), r.get("final_loss")]
    return all(v is None or math.isfinite(v) for v in vals)


def derive(row: dict) -> None:
    """Speed ratios and time to mbi's final loss (in place)."""
    pg = row.get("pgmjax") or {}
    mb = row.get("mbi_ref") or {}
    ratios = {}
    for key in ("jt_build_s", "compile_s", "first_call_s", "ms_per_iter", "ms_per_iter_traj", "peak_mib"):
        a, b = pg.get(key), mb.get(key)
        if a and b and a > 0:
            ratios[key] = b / a
    row["ratios_mbi_over_pgmjax"] = ratios
    tt = {}
    if pg.get("stage") == "done" and mb.get("stage") == "done" and mb.get("finite"):
        target = mb["trajectory"][-1][1]
        mbi_s = mb["trajectory"][-1][2]
        tt = {"target_loss": target, "mbi_iters": mb["trajectory"][-1][0], "mbi_s": mbi_s}
        hit = next((x for x in pg["trajectory"] if x[0] > 0 and x[1] <= target), None)
        if hit is None:
            tt.update(reached=False, pgmjax_iters=None, pgmjax_s=None, speedup=None,
                      speedup_bound=mbi_s / pg["trajectory"][-1][2])
        else:
            tt.update(reached=True, pgmjax_iters=hit[0], pgmjax_s=hit[2], speedup=mbi_s / hit[2])
            # Including what only a first call pays (compile) and the junction tree:
            cold_pg = hit[2] + pg.get("compile_s", 0) + pg.get("jt_build_s", 0)
            cold_mb = mbi_s + mb.get("compile_s", 0)  # mbi's compile already contains its junction tree
            tt.update(pgmjax_cold_s=cold_pg, mbi_cold_s=cold_mb, speedup_cold=cold_mb / cold_pg)
    row["to_mbi_loss"] = tt
    met = {}
    if "ms_per_iter" in ratios:
        met["per_iter"] = ratios["ms_per_iter"] >= TARGETS["per_iter"]
    if "compile_s" in ratios:
        met["compile"] = ratios["compile_s"] >= TARGETS["compile"]
    if tt:
        met["to_mbi_loss"] = bool(tt.get("speedup") and tt["speedup"] >= TARGETS["to_mbi_loss"])
    row["targets_met"] = met


def environment() -> dict:
    """What the result's ``meta`` (:func:`bench.schema.run_meta`, with the date and versions) records beside."""
    return {
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "git_commit": schema.git("rev-parse", "HEAD") or None,
        "pgmjax_tree_dirty": bool(schema.git("status", "--porcelain", "--", "pgmjax")),
        "loadavg_start": os.getloadavg(),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", nargs="+", default=["all"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="smoke run: 100-iteration trajectories, 1 repeat, 240 s caps")
    ap.add_argument("--iters", type=int, default=None, help="trajectory iterations (default 1000; --quick 100)")
    ap.add_argument("--first-iters", type=int, default=BLOCK)
    ap.add_argument("--repeats", type=int, default=None, help="warm repeats (default 2; --quick 1)")
    ap.add_argument("--cap", type=float, default=None, help="wall-clock cap per child, seconds (default 600; --quick 240)")
    ap.add_argument("--mbi-workaround", choices=("on-failure", "always", "never"), default="on-failure",
                    help="when to (also) run mbi with XLA_FLAGS=" + YNN_OFF)
    ap.add_argument("--merge", action="store_true",
                    help="replace (or add) the rows of these problems in an existing --out JSON, keeping the others")
    ap.add_argument("--render", default=None, help="only write the .md and .png of this JSON")
    ap.add_argument("--child", choices=("pgmjax", "mbi"), help=argparse.SUPPRESS)
    ap.add_argument("--problem-file", help=argparse.SUPPRESS)
    ap.add_argument("--status-file", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    fixed_iters = args.iters is not None
    if args.iters is None:
        args.iters = 100 if args.quick else 1000
    if args.repeats is None:
        args.repeats = 1 if args.quick else 2
    if args.cap is None:
        args.cap = 240.0 if args.quick else 600.0

    if args.child:
        (child_pgmjax if args.child == "pgmjax" else child_mbi)(args)
        return
    if args.render:
        with open(args.render) as f:
            out = json.load(f)
        render(out, os.path.splitext(args.render)[0])
        return

    from bench import problems as ep

    names = list(ep.PROBLEMS) if args.problems == ["all"] else args.problems
    for n in names:
        if n not in ep.PROBLEMS:
            ap.error(f"unknown problem {n!r}; expected 'all' or some of {', '.join(ep.PROBLEMS)}")
    base = schema.result_path("engine", args.out or ("engine_cpu-quick" if args.quick else "engine_cpu"))
    out_path = base + ".json"
    out = {"meta": schema.run_meta("bench.engine", argv, extra=("mbi", "optax", "networkx"), also=environment()),
           "settings": {k: getattr(args, k) for k in ("iters", "first_iters", "repeats", "cap", "quick", "mbi_workaround")},
           "rows": []}
    out["settings"]["block"] = BLOCK
    out["settings"]["targets"] = TARGETS
    if args.merge and os.path.exists(out_path):
        with open(out_path) as f:
            old = json.load(f)
        if "results" in old:  # written before bench.schema
            old["rows"] = old.pop("results")
        rerun = {k: out["meta"][k] for k in ("date", "git_commit", "pgmjax_tree_dirty", "loadavg_start")}
        rerun["problems"] = names
        out = old
        out["meta"].setdefault("reruns", []).append(rerun)
    t_suite = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="engine_bench_")
    for name in names:
        t = time.perf_counter()
        problem = ep.make(name)
        build_s = time.perf_counter() - t
        path = os.path.join(tmp, f"{name}.npz")
        ep.save(problem, path)
        row = {"problem": name, "description": problem["description"], "records": problem["records"],
               "sigma": problem["sigma"], "attributes": len(problem["domain"]), "measurements": len(problem["cliques"]),
               "measured_cells": int(sum(y.size for y in problem["noisy"])), "problem_build_s": build_s,
               "loadavg_before": os.getloadavg()}
        del problem
        row["iters"] = args.iters if fixed_iters or args.quick else ep.ITERS.get(name, args.iters)
        print(f"[{name}] {row['description']} ({row['iters']} iterations)", flush=True)
        cargs = argparse.Namespace(**{**vars(args), "iters": row["iters"]})
        row["pgmjax"] = run_child("pgmjax", path, cargs)
        _say(name, row["pgmjax"])
        if args.mbi_workaround != "always":
            row["mbi"] = run_child("mbi", path, cargs)
            _say(name, row["mbi"])
        if args.mbi_workaround == "always" or (args.mbi_workaround == "on-failure" and _failed(row["mbi"])):
            row["mbi_ynnoff"] = run_child("mbi", path, cargs, {"XLA_FLAGS": YNN_OFF})
            _say(name + " (mbi, XLA_FLAGS=" + YNN_OFF + ")", row["mbi_ynnoff"])
        if "mbi" in row and not _failed(row["mbi"]):
            row["mbi_ref"], row["mbi_ref_is"] = row["mbi"], "mbi"
        elif "mbi_ynnoff" in row:
            row["mbi_ref"], row["mbi_ref_is"] = row["mbi_ynnoff"], "mbi_ynnoff"
        else:
            row["mbi_ref"], row["mbi_ref_is"] = row.get("mbi", {}), "mbi"
        row["loadavg_after"] = os.getloadavg()
        derive(row)
        del row["mbi_ref"]
        if args.merge:
            row["rerun"] = True
            order = {n: i for i, n in enumerate(ep.PROBLEMS)}
            out["rows"] = sorted([r for r in out["rows"] if r["problem"] != name] + [row],
                                    key=lambda r: order.get(r["problem"], 99))
        else:
            out["rows"].append(row)
            out["meta"]["suite_wall_s"] = time.perf_counter() - t_suite
            out["meta"]["loadavg_end"] = os.getloadavg()
        _write(out, base, quiet=True)
        os.remove(path)
    _write(out, base)
    plot(out, base + "_loss.png")
    print(f"wrote {out_path}, {base}.md, {base}_loss.png ({time.perf_counter() - t_suite:.0f} s)", flush=True)


def _write(out: dict, base: str, quiet: bool = False) -> None:
    rest = {k: v for k, v in out.items() if k not in ("meta", "rows")}
    schema.write_result("engine", base, out["rows"], out["meta"], page=render_lines(out, base), quiet=quiet, **rest)


def _say(name, r):
    print(f"  {name} {r['engine']}{' (ynn off)' if r.get('env') else ''}: {r['outcome']}, stage {r['stage']}, "
          f"jt {_f(r.get('jt_build_s'))} s, first {_f(r.get('first_call_s'))} s, compile {_f(r.get('compile_s'))} s, "
          f"{_f(r.get('ms_per_iter'))} ms/it, final loss {_f(r.get('final_loss'))} "
          f"(reported {_f(r.get('reported_final_loss'))}), {r.get('iters_run')} it, peak {_f(r.get('peak_mib'))} MiB, "
          f"wall {r['wall_s']:.0f} s", flush=True)


def _f(x, digits=4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


# =====================================================================================================
# Rendering.
# =====================================================================================================


def _num(x, fmt="{:.3g}") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return "**NaN**" if math.isnan(x) else str(x)
    return fmt.format(x)


def _ratio(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _eng_cell(r: dict, key: str, fmt="{:.3g}") -> str:
    if not r:
        return "-"
    return _num(r.get(key), fmt)


def _status(r: dict) -> str:
    if not r:
        return "not run"
    s = r.get("outcome", "?")
    if s == "ok" and not r.get("finite", True):
        s = "non-finite loss"
    elif s == "ok" and not _finite_loss(r):
        s = "non-finite loss"
    if s != "ok" and r.get("stage") not in (None, "done"):
        s += f" (finished: {r.get('stage')})"
    if r.get("errors"):
        s += " **with errors** (notes)"
    return s


def render(out: dict, base: str) -> None:
    """Re-render a result's page and plot from its JSON."""
    schema.write_page(base, render_lines(out, base))
    plot(out, base + "_loss.png")


def render_lines(out: dict, base: str) -> list[str]:
    """The result's Markdown page."""
    meta, st = out["meta"], out["settings"]
    v = meta["versions"]
    L = []
    L.append("# Engine benchmark: pgmjax vs mbi 2.0 (mirror descent, float32, CPU)\n")
    L.append(f"Machine: {meta['cpu']}, {meta['cores']} cores, CPU backend. Date: {meta['date']}. "
             f"Load average at start {', '.join(f'{x:.2f}' for x in meta['loadavg_start'])}, at end "
             f"{', '.join(f'{x:.2f}' for x in meta.get('loadavg_end', []))} (the machine is shared: timings are noisy).")
    L.append(f"Versions: Python {meta['python']}, jax {v['jax']}, jaxlib {v['jaxlib']}, mbi {v.get('mbi', 'not installed')}, "
             f"numpy {v['numpy']}, optax {v.get('optax', 'not installed')}. pgmjax commit {str(meta['git_commit'])[:12]}"
             f"{' (pgmjax/ had uncommitted changes)' if meta.get('pgmjax_tree_dirty') else ''}. "
             f"Whole suite: {meta.get('suite_wall_s', 0) / 60:.1f} min.")
    for rr in meta.get("reruns", []):
        L.append(f"Rerun of {', '.join(rr['problems'])} on {rr['date']} (pgmjax commit {str(rr['git_commit'])[:12]}"
                 f"{', pgmjax/ with uncommitted changes' if rr.get('pgmjax_tree_dirty') else ''}; load at start "
                 f"{', '.join(f'{x:.2f}' for x in rr['loadavg_start'])}); those rows are marked (rerun)."
                 + (f" {rr['note']}" if rr.get("note") else ""))
    L.append("")
    L.append(f"Method: default mirror descent in both engines (Armijo line search), float32, Gaussian-noise identity "
             f"measurements, the same noisy tables for both. Each engine runs each problem in a fresh process, pgmjax then "
             f"mbi, cap {st['cap']:.0f} s per process. first call = first `estimate({st['first_iters']})` in the process; "
             f"compile = first call - median warm call; ms/iter = (warm estimate({st['first_iters']}) - warm estimate(0)) / "
             f"{st['first_iters']} (medians of {st['repeats']}); ms/iter (long call) = (the warm trajectory call of "
             f"{st['iters']} iterations - warm estimate(0)) / {st['iters']}; final loss = 1/2 sum ((mu - y) / sigma)^2 after "
             f"{st['iters']} iterations (fewer where noted), recomputed in float64 from each model's marginals; peak = VmHWM "
             f"of the process. Ratios are mbi / pgmjax (> 1: pgmjax faster or smaller). "
             f"\"to mbi's loss\" = iterations and warm seconds pgmjax needs to reach the loss mbi has after its last "
             f"iteration, read at {st['block']}-iteration blocks (an upper bound), vs mbi's warm seconds for its iterations; "
             f"cold adds compile and junction tree to both. Targets: per iteration >= {TARGETS['per_iter']:g}x, "
             f"to mbi's loss >= {TARGETS['to_mbi_loss']:g}x, compile >= {TARGETS['compile']:g}x.\n")

    L.append("## Problems\n")
    L.append("| problem | description | measured cells | junction tree cells (max clique) |")
    L.append("|---|---|---|---|")
    for row in schema.rows_of(out):
        pg = row.get("pgmjax") or {}
        L.append(f"| {row['problem']} | {row['description']} | {row['measured_cells']:,} | "
                 f"{pg.get('jt_cells', 0):,} ({pg.get('jt_max_clique_cells', 0):,}) |")
    L.append("")

    L.append("## Timings and losses\n")
    L.append("| problem | engine | status | jt build (s) | first call (s) | compile (s) | of which XLA (s) / programs | ms / iter | ms / iter (long call) | iters | final loss | peak MiB |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in schema.rows_of(out):
        engines = [("pgmjax", row.get("pgmjax")), ("mbi", row.get("mbi"))]
        if row.get("mbi_ynnoff"):
            engines.append(("mbi, XLA_FLAGS ynn off", row["mbi_ynnoff"]))
        for label, r in engines:
            if r is None:
                continue
            L.append(f"| {row['problem']}{' (rerun)' if row.get('rerun') else ''} | {label} | {_status(r)} | {_eng_cell(r, 'jt_build_s')} | "
                     f"{_eng_cell(r, 'first_call_s')} | {_eng_cell(r, 'compile_s')} | "
                     f"{_eng_cell(r, 'xla_compile_s')} / {r.get('xla_compilations', '-')} | {_eng_cell(r, 'ms_per_iter')} | "
                     f"{_eng_cell(r, 'ms_per_iter_traj')} | {r.get('iters_run', '-')} | {_eng_cell(r, 'final_loss', '{:,.1f}')} | {_eng_cell(r, 'peak_mib', '{:,.0f}')} |")
    L.append("")

    L.append("## Ratios (mbi / pgmjax) and targets\n")
    L.append("| problem | vs | jt build | first call | compile | per iter (long call) | peak mem | pgmjax to mbi's loss: iters / s (mbi: iters / s) | speedup to mbi's loss (cold) | per-iter >= 3x | to-loss >= 5x | compile >= 3x |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in schema.rows_of(out):
        r = row.get("ratios_mbi_over_pgmjax", {})
        tt = row.get("to_mbi_loss", {})
        met = row.get("targets_met", {})
        if tt:
            if tt.get("reached"):
                to = (f"{tt['pgmjax_iters']} / {tt['pgmjax_s']:.3g} ({tt['mbi_iters']} / {tt['mbi_s']:.3g})")
                sp = f"{tt['speedup']:.2f}x ({tt['speedup_cold']:.2f}x)"
            else:
                to = f"not reached in {(row['pgmjax'] or {}).get('iters_run')} it ({tt['mbi_iters']} / {tt['mbi_s']:.3g})"
                sp = f"< {tt['speedup_bound']:.2f}x"
        else:
            to, sp = "-", "-"

        def m(k):
            return "-" if k not in met else ("met" if met[k] else "**missed**")

        vs = "mbi" if row.get("mbi_ref_is") == "mbi" else "mbi (ynn off)"
        L.append(f"| {row['problem']} | {vs} | {_ratio(r.get('jt_build_s'))} | {_ratio(r.get('first_call_s'))} | "
                 f"{_ratio(r.get('compile_s'))} | {_ratio(r.get('ms_per_iter'))} ({_ratio(r.get('ms_per_iter_traj'))}) | {_ratio(r.get('peak_mib'))} | {to} | {sp} | "
                 f"{m('per_iter')} | {m('to_mbi_loss')} | {m('compile')} |")
    L.append("")
    notes = _notes(out) + list(out.get("extra_notes", []))
    short = [f"{row['problem']} ({row['iters']})" for row in schema.rows_of(out) if row.get("iters", st["iters"]) != st["iters"]]
    if short:
        notes.insert(0, f"Fewer iterations, to keep the suite near an hour: {', '.join(short)}; their \"final loss\" and "
                        f"\"to mbi's loss\" use that many iterations instead of {st['iters']}.")
    if notes:
        L.append("## Notes\n")
        L.extend(f"* {n}" for n in notes)
        L.append("")
    L.append(f"Loss against warm wall time: `{os.path.basename(base)}_loss.png`. Raw numbers, trajectories and "
             f"per-call samples: `{os.path.basename(base)}.json`. Rerun: `python -m bench engine --problems all` (or "
             f"`python -m bench.engine --render` the JSON).")
    return L


def _notes(out: dict) -> list[str]:
    notes = []
    shas: dict = {}
    for row in schema.rows_of(out):
        sha = (row.get("pgmjax") or {}).get("pgmjax_source_sha")
        if sha:
            shas.setdefault(sha, []).append(row["problem"])
    if len(shas) > 1:
        notes.append("pgmjax/ was edited (by others) during the run; its sources' SHA-1 per problem: "
                     + "; ".join(f"`{k}`: {', '.join(v)}" for k, v in shas.items()))
    for row in schema.rows_of(out):
        for key in ("pgmjax", "mbi", "mbi_ynnoff"):
            r = row.get(key)
            if not r:
                continue
            label = {"mbi_ynnoff": "mbi with XLA_FLAGS=" + YNN_OFF}.get(key, key)
            s = _status(r)
            for e in r.get("errors") or []:
                notes.append(f"{row['problem']}, {label}: {e}")
            if r.get("ms_per_iter_includes_setup"):
                notes.append(f"{row['problem']}, {label}: no 0-iteration call, so ms / iter = warm call / iterations "
                             "(includes set-up: an upper bound)")
            if s != "ok" and not s.startswith("ok"):
                tail = [x for x in (r.get("stderr_tail") or "").splitlines() if x.strip().strip("*")]
                last = tail[-1][:200] if tail else ""
                notes.append(f"{row['problem']}, {label}: {s}" + (f" - `{last}`" if last else ""))
            want = row.get("iters", out["settings"]["iters"])
            if r.get("iters_run") and r["iters_run"] < want:
                notes.append(f"{row['problem']}, {label}: {r['iters_run']} iterations (the cap left no room for {want})")
            rep, fin = r.get("reported_final_loss"), r.get("final_loss")
            if rep is not None and fin is not None and math.isfinite(rep) and math.isfinite(fin) and abs(rep - fin) > 1e-3 * max(1, abs(fin)):
                notes.append(f"{row['problem']}, {label}: reported loss {rep:,.1f} vs recomputed {fin:,.1f}")
    return notes


def plot(out: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in schema.rows_of(out) if (r.get("pgmjax") or {}).get("trajectory") or (r.get("mbi") or {}).get("trajectory")]
    if not rows:
        return
    ncol = min(4, len(rows))
    nrow = math.ceil(len(rows) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.3 * nrow), squeeze=False)
    for ax, row in zip(axes.flat, rows):
        series = [("pgmjax", row.get("pgmjax"), "C0", "-"), ("mbi", row.get("mbi"), "C3", "-")]
        if row.get("mbi_ynnoff"):
            series.append(("mbi (ynn off)", row["mbi_ynnoff"], "C1", "--"))
        for label, r, color, ls in series:
            if not r or not r.get("trajectory"):
                continue
            tr = [x for x in r["trajectory"] if math.isfinite(x[1])]
            if not tr:
                continue
            lab = f"{label} (compile {r.get('compile_s', float('nan')):.1f} s)"
            ax.plot([x[2] for x in tr], [x[1] for x in tr], ls, color=color, marker=".", ms=3, label=lab)
        tt = row.get("to_mbi_loss") or {}
        if tt.get("target_loss"):
            ax.axhline(tt["target_loss"], color="gray", lw=0.7, ls=":")
        ax.set_yscale("log")
        ax.set_title(f"{row['problem']} ({(row.get('pgmjax') or {}).get('jt_cells', 0):,} cells)", fontsize=9)
        ax.set_xlabel("warm wall time (s)", fontsize=8)
        ax.set_ylabel("L2 loss", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    meta = out["meta"]
    fig.suptitle(f"pgmjax vs mbi {meta['versions'].get('mbi', '(not installed)')}: loss after every 50 iterations vs wall time of a warm "
                 f"call ({meta['cpu']}, {meta['cores']} cores); dotted: mbi's final loss", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
