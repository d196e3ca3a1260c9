"""Time the incumbent ``mbi`` (PyPI ``mbi==2.0.0``) on the scalability problem.

This is the incumbent half of the Figure 2b experiment of McKenna et al.,
"Graphical-model based estimation and inference for differential privacy"
(ICML 2019): ``d`` attributes of size 10, 10,000 records, noisy identity
marginals on every consecutive triple (see :func:`bench.problems.markov_chain_problem`, which
builds the exact same problem that our engine is timed on). ``mbi`` is only
*called* here; it must be installed in the running interpreter (we use a
separate venv, e.g. ``/work/venv-mbi/bin/python -m bench.mbi_scalability``).

What is measured, per ``d`` (all wall-clock, ``time.perf_counter``, every
timed call ends with ``jax.block_until_ready`` on the returned model):

(a) ``jt_build_s``: ``mbi.junction_tree.make_junction_tree(domain, cliques)``,
    the function mbi's marginal oracles call to obtain the junction tree
    (greedy elimination order, triangulation, maximal cliques, spanning
    tree). ``jt_message_order_s`` times ``junction_tree.message_passing_order``
    on the result, which the oracles also call when they are traced.
    Measured once (it is pure Python and deterministic).

(b) ``compile_s``: ``first_call_s - warm_call_s``, where ``first_call_s`` is
    the first ``MirrorDescent().estimate(domain, measurements, iters=iters)``
    call in the process for this ``d`` and ``warm_call_s`` is the median of
    ``repeats`` identical later calls (which hit all of JAX's jit caches: the
    number of XLA compilations during them is recorded as
    ``warm_compilations`` and is 0). Both calls do exactly the same
    numerical work, so the difference is everything that only the first call
    pays: Python tracing of mbi's jitted functions (including the junction
    tree that mbi builds *inside* the trace of its oracle, since the default
    oracle is called with ``jtree=None``; profiling shows exactly one
    ``make_junction_tree`` and one ``message_passing_order`` call per first
    call, so ``compile_excl_jt_s = compile_s - jt_build_s -
    jt_message_order_s``), lowering to MLIR, XLA compilation,
    and compilation of the small eager ops in ``estimate``'s set-up and
    finalisation. This is what a user pays on the first call, and it is the
    honest "time to first result minus time of the same work when warm"
    figure; we prefer it to timing only mbi's jitted ``_multi_step`` through
    ``.lower().compile()`` because that is a private method and would miss
    the compilation of the oracle call in set-up/finalisation. The JAX
    persistent compilation cache is disabled so the first call is genuinely
    cold. For a breakdown, a ``jax.monitoring`` listener sums JAX's own
    compilation events during the first call: ``xla_compile_s``
    (``backend_compile_duration``, XLA only), ``mlir_lowering_s``
    (``jaxpr_to_mlir_module_duration``) and ``n_compilations``; the rest of
    ``compile_s`` is Python tracing and bookkeeping
    (``jaxpr_trace_s_nested`` sums JAX's tracing events, which nest, so it
    double-counts and is only indicative).

(c) ``sec_per_iter``: ``(warm_call_s - warm_fixed_s) / effective_iters``,
    where ``warm_fixed_s`` is the median warm time of ``estimate(...,
    iters=0)``, which performs the same set-up (loss construction, total
    estimation, initial oracle call) and finalisation (final oracle call) but
    no mirror-descent step. This isolates the steady-state cost of one
    iteration (two oracle calls and one loss gradient, with mbi's default
    Armijo step-size rule). Note mbi runs iterations in fused
    ``lax.scan`` blocks of ``mbi.estimation.CALLBACK_EVERY`` (= 50) steps and
    rounds ``iters`` *up* to a multiple of it; ``effective_iters`` is the
    number of steps really run.

(d) ``final_loss``: mbi's own L2 loss
    (``mbi.marginal_loss.from_linear_measurements(measurements, domain)``,
    i.e. ``sum 0.5 * ||(mu_c - y_c) / sigma||^2``) at the returned model's
    marginals; ``initial_loss`` is the same at the ``iters=0`` model (uniform
    marginals). As a sanity check we also report the mean (over cliques)
    L1 error ``||x_c - true_c||_1 / records`` of the estimated marginals and of
    the raw noisy answers.

mbi's defaults are used throughout: ``MirrorDescent()`` (Armijo line search,
``marginal_oracles.default_oracle``, which on CPU is
``message_passing_hugin``), total estimated by
``estimation.minimum_variance_unbiased_total``. JAX runs in its default
float32 mode unless ``--x64`` is given.

Usage::

    /work/venv-mbi/bin/python -m bench.mbi_scalability --d 10 100 --iters 50 \\
        --out mbi_scalability.json

Each ``d`` runs in a fresh child process (unless ``--in-process``), so that
its first call is cold even after other sizes were run. One JSON line is
printed per ``d``; ``--out`` writes ``{"meta": ..., "results": [...]}``
(rewritten after every ``d``), where ``meta`` records package versions, CPU
model, core count, JAX settings and the date.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import resource
import time
import warnings

from bench import schema
from bench.benchutil import CompileEvents, median
from bench.children import child_command, json_line
from bench.problems import markov_chain_problem

_EVENTS = CompileEvents()
_JAX_CONFIGURED: bool | None = None  # the x64 flag JAX was configured with


def _setup_jax(x64: bool):
    """Configure JAX (before mbi is imported) and import mbi.

    Returns the ``(jax, mbi)`` modules. Disables the persistent compilation
    cache so that first calls really compile, and registers the compilation
    event listener. Can only be configured once per process.
    """
    global _JAX_CONFIGURED
    import jax
    import jax.monitoring

    if _JAX_CONFIGURED is None:
        jax.config.update("jax_enable_x64", x64)
        jax.config.update("jax_enable_compilation_cache", False)
        jax.monitoring.register_event_duration_secs_listener(_EVENTS)
        _JAX_CONFIGURED = x64
    elif _JAX_CONFIGURED != x64:
        raise RuntimeError("x64 mode cannot be changed within one process")
    with warnings.catch_warnings():
        # mbi warns at import time when JAX runs in float32; float32 is the
        # deliberate default here (N = 10,000 is far below the N > 100K that
        # the warning is about), and the mode is recorded in the output.
        warnings.filterwarnings("ignore", message="JAX is running in float32")
        import mbi
    return jax, mbi


def environment(x64: bool = False) -> dict:
    """Versions, hardware and JAX settings to store next to the timings."""
    jax, _ = _setup_jax(x64)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "python": platform.python_version(),
        "versions": {pkg: schema.version(pkg) for pkg in
                     ("jax", "jaxlib", "mbi", "numpy", "networkx", "optax")},
        "cpu_model": schema.cpu_model() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(dev) for dev in jax.devices()],
        "jax_enable_x64": bool(jax.config.jax_enable_x64),
        "jax_persistent_compilation_cache": bool(
            jax.config.jax_enable_compilation_cache),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
    }


def build_mbi_inputs(problem: dict, mbi, jnp) -> tuple:
    """Convert a :func:`make_problem` dict to mbi's ``(Domain, measurements)``.

    Each measurement is an identity query (mbi's default
    ``DatavectorQuery``) on its clique, with the flattened (C-order, axes in
    clique order) noisy table as a device array and ``stddev = sigma``.
    """
    domain = mbi.Domain(list(problem["domain"]), list(problem["domain"].values()))
    measurements = [
        mbi.LinearMeasurement(jnp.asarray(y.ravel()), tuple(cl),
                              stddev=problem["sigma"])
        for y, cl in zip(problem["noisy"], problem["cliques"])
    ]
    return domain, measurements


def _mean_l1_error(tables, true, records: int) -> float:
    """Mean over cliques of ``||table - true||_1 / records``."""
    import numpy as np

    errors = [np.abs(np.asarray(x, dtype=np.float64) - t).sum() / records
              for x, t in zip(tables, true)]
    return float(np.mean(errors))


def run_mbi(d: int, iters: int = 50, seed: int = 0, repeats: int = 3,
            x64: bool = False) -> dict:
    """Benchmark mbi's default mirror descent on the ``d``-attribute problem.

    Must be the first mbi estimation for this ``d`` in the process, otherwise
    ``compile_s`` is not a cold measurement. Earlier runs for other ``d`` in
    the same process make it slightly optimistic (small eager ops with the
    same shapes are already compiled); the CLI therefore uses one process per
    ``d``.

    Args:
        d: Number of attributes.
        iters: Iterations per ``estimate`` call (mbi rounds up to a multiple of
            ``mbi.estimation.CALLBACK_EVERY``).
        seed: Seed of :func:`make_problem`.
        repeats: Number of warm repetitions the medians are taken over.
        x64: Run JAX in float64 (must be the same for all calls in a process).

    Returns:
        A JSON-serialisable dict of timings (seconds), losses and errors; see
        the module docstring for the definitions.
    """
    jax, mbi = _setup_jax(x64)
    import jax.numpy as jnp
    from mbi import estimation, junction_tree, marginal_loss

    t0 = time.perf_counter()
    problem = markov_chain_problem(d, seed=seed)
    problem_s = time.perf_counter() - t0
    domain, measurements = build_mbi_inputs(problem, mbi, jnp)
    jax.block_until_ready([m.noisy_measurement for m in measurements])
    cliques = [tuple(cl) for cl in problem["cliques"]]

    # (a) Junction tree, with mbi's own function.
    t0 = time.perf_counter()
    jtree, elimination_order = junction_tree.make_junction_tree(domain, cliques)
    jt_build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    junction_tree.message_passing_order(jtree)
    jt_message_order_s = time.perf_counter() - t0
    max_cliques = junction_tree.maximal_cliques(jtree)

    estimator = estimation.MirrorDescent()  # mbi's defaults

    def timed_estimate(n: int):
        start = time.perf_counter()
        model = estimator.estimate(domain, measurements, iters=n)
        jax.block_until_ready(model)
        return time.perf_counter() - start, model

    # (b) First (cold) call, with JAX's compilation events recorded.
    _EVENTS.reset()
    _EVENTS.active = True
    try:
        first_call_s, model = timed_estimate(iters)
    finally:
        _EVENTS.active = False
    cold_events = (dict(_EVENTS.seconds), dict(_EVENTS.counts))

    # (c) Warm calls: same work with all jit caches hot, then set-up and
    # finalisation alone (iters=0).
    _EVENTS.reset()
    _EVENTS.active = True
    try:
        warm = [timed_estimate(iters)[0] for _ in range(repeats)]
        fixed = []
        for _ in range(repeats):
            seconds, model0 = timed_estimate(0)
            fixed.append(seconds)
    finally:
        _EVENTS.active = False
    warm_compilations = sum(_EVENTS.counts.values())

    warm_call_s, warm_fixed_s = median(warm), median(fixed)
    effective_iters = (math.ceil(iters / estimation.CALLBACK_EVERY)
                       * estimation.CALLBACK_EVERY)

    # (d) Losses and errors.
    loss_fn = marginal_loss.from_linear_measurements(measurements, domain)
    evaluate = jax.jit(lambda fn, marginals: fn(marginals))
    final_loss = float(evaluate(loss_fn, model.marginals))
    initial_loss = float(evaluate(loss_fn, model0.marginals))
    records = problem["records"]
    estimated = [model.project(cl).datavector(flatten=False) for cl in cliques]

    return {
        "d": d,
        "iters": iters,
        "effective_iters": effective_iters,
        "seed": seed,
        "records": records,
        "sigma": problem["sigma"],
        "num_measurements": len(measurements),
        "repeats": repeats,
        "x64": bool(jax.config.jax_enable_x64),
        "oracle": getattr(
            mbi.marginal_oracles.default_oracle(cliques, domain,
                                                has_constraints=False),
            "__name__", "unknown"),
        "problem_s": problem_s,
        "jt_build_s": jt_build_s,
        "jt_message_order_s": jt_message_order_s,
        "jt_num_cliques": len(max_cliques),
        "jt_max_clique_size": max(len(cl) for cl in max_cliques),
        "jt_total_cells": int(sum(domain.size(cl) for cl in max_cliques)),
        "elimination_order_head": [str(a) for a in elimination_order[:5]],
        "first_call_s": first_call_s,
        "warm_call_s": warm_call_s,
        "warm_call_samples_s": warm,
        "compile_s": first_call_s - warm_call_s,
        "compile_excl_jt_s": (first_call_s - warm_call_s - jt_build_s
                              - jt_message_order_s),
        "xla_compile_s": cold_events[0].get(CompileEvents.XLA, 0.0),
        "mlir_lowering_s": cold_events[0].get(CompileEvents.LOWER, 0.0),
        "jaxpr_trace_s_nested": cold_events[0].get(CompileEvents.TRACE, 0.0),
        "n_compilations": cold_events[1].get(CompileEvents.XLA, 0),
        "warm_compilations": warm_compilations,
        "warm_fixed_s": warm_fixed_s,
        "warm_fixed_samples_s": fixed,
        "sec_per_iter": (warm_call_s - warm_fixed_s) / effective_iters,
        "initial_loss": initial_loss,
        "final_loss": final_loss,
        "estimated_total": float(model.total),
        "mean_l1_error_estimate": _mean_l1_error(estimated, problem["true"],
                                                 records),
        "mean_l1_error_noisy": _mean_l1_error(problem["noisy"],
                                              problem["true"], records),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _run_in_fresh_process(args: argparse.Namespace, d: int) -> dict:
    """Run :func:`run_mbi` for one ``d`` in a child interpreter.

    A fresh process guarantees that ``compile_s`` for this ``d`` does not
    benefit from compilations (e.g. of small eager ops shared between sizes)
    done for an earlier ``d``.
    """
    command = [*child_command("bench.mbi_scalability"), "--child",
               "--d", str(d), "--iters", str(args.iters),
               "--seed", str(args.seed), "--repeats", str(args.repeats)]
    if args.x64:
        command.append("--x64")
    return json_line(command, f"mbi d={d}", capture_stderr=False)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--d", type=int, nargs="+", default=[10, 100, 1000],
                        help="numbers of attributes (default: 10 100 1000)")
    parser.add_argument("--iters", type=int, default=50,
                        help="iterations per estimate call (default: 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3,
                        help="warm repetitions for the medians (default: 3)")
    parser.add_argument("--x64", action="store_true",
                        help="run JAX in float64 (default: float32)")
    parser.add_argument("--in-process", action="store_true",
                        help="run all d in this process instead of one fresh "
                             "process per d (compile_s of later d may then "
                             "be slightly underestimated)")
    parser.add_argument("--out", help="write meta + results JSON here (for bench.scalability, which records them "
                        "in its result)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:  # one d, result on stdout, no meta
        result = run_mbi(args.d[0], iters=args.iters, seed=args.seed,
                         repeats=args.repeats, x64=args.x64)
        print(json.dumps(result), flush=True)
        return

    meta = environment(args.x64)
    meta["args"] = {k: v for k, v in vars(args).items() if k != "child"}
    results = []
    for d in args.d:
        if args.in_process:
            result = run_mbi(d, iters=args.iters, seed=args.seed,
                             repeats=args.repeats, x64=args.x64)
        else:
            result = _run_in_fresh_process(args, d)
        results.append(result)
        print(json.dumps(result), flush=True)
        if args.out:
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump({"meta": meta, "results": results}, f, indent=1)
                f.write("\n")


if __name__ == "__main__":
    main()
