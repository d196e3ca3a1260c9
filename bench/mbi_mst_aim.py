"""MST and AIM written on mbi 2.0's public API: the incumbent side of ``bench.mst_aim``.

mbi 2.0 on PyPI ships the estimation engine but no mechanism scripts, so this driver implements
MST (McKenna, Miklau & Sheldon, JPC 2021, Section 4) and AIM (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022,
Algorithm 1) as private-pgm's ``mechanisms/mst.py`` and ``mechanisms/aim.py`` @4d2b3c5 run them, the same
algorithm :mod:`pgmjax.mechanisms.spanning_tree` and :mod:`pgmjax.mechanisms.adaptive_iterative` implement, using only
mbi's public pieces: ``mbi.Domain``, ``mbi.Dataset`` (``project``, ``compress``, ``decompress``),
``mbi.LinearMeasurement`` (and its ``compress``, which re-expresses a measurement on a compressed
domain with ``1/sqrt(k)`` weights), ``mbi.estimation.MirrorDescent`` (warm starts, the total
estimated by ``minimum_variance_unbiased_total``), ``MarkovRandomField.project`` /
``synthetic_data``, ``mbi.marginal_oracles.bulk_variable_elimination`` (AIM's out-of-model
candidate marginals, mbi's batch routine: one compiled variable elimination per query, compiled in
background threads) and ``mbi.junction_tree.hypothetical_model_size``. It runs in an interpreter
with ``mbi==2.0.0`` (e.g. ``/work/venv-mbi/bin/python``), in a fresh process per run.

The privacy budget ``rho`` (``cdp_rho(epsilon, delta)``) is computed by the caller (pgmjax) and
passed in, so both sides spend the identical budget; the noise comes from
``numpy.random.default_rng(seed)`` and the exponential mechanism samples
``P(r) ∝ exp(eps q_r / (2 Delta))`` with a max shift. mbi's ``synthetic_data`` draws from NumPy's
global generator, seeded with ``seed`` first.

Differences from the pgmjax implementation that come from the engines, not the algorithm:

* AIM's "free" candidates are the subsets of ``model.cliques`` (mbi: the maximal *measured*
  cliques; pgmjax: the junction-tree cliques, a superset), and the size of a candidate is
  ``hypothetical_model_size(domain, model.cliques + [candidate])`` with each library's own
  junction tree (mbi: min-fill greedy order, or a DFS order when the graph is a tree).
* mbi estimates the total only from identity measurements (MST's compressed one-way
  measurements of merged attributes are left out); pgmjax also uses the re-weighted ones.
* AIM: whenever the model's structure changes, ``jax.clear_caches()`` frees the programs compiled
  for the old structure (mbi compiles one variable elimination per out-of-model candidate and
  structure; kept alive, they exhausted the process's memory maps on Adult after about 15 rounds:
  "LLVM ERROR: Unable to allocate section memory").

AIM's per-round trace (``--trace``, :mod:`bench.aim_trace`): at every round's end, the seconds since ``run_aim``
started (the trace's own evaluation taken out) and the workload error of the model so far, scored by
``pgmjax.model.metrics.workload_error`` (so the trace needs pgmjax importable in this interpreter, as in the
project's ``.venv``). The model's marginals of the workload are taken eagerly (``jax.disable_jit``) from
``model.marginals`` and ``mbi.marginal_oracles.variable_elimination``, not through ``MarkovRandomField.project``:
nothing compiled that the candidate selection could reuse, and ``bench.mbi_lowmaps`` (which clears JAX's caches
every 64 projections) does not count them. ``--max-rounds K`` / ``--time-limit S`` stop AIM after round ``K``, or at
the end of the first round after ``S`` seconds (the same clock); the run then has no final fit and no synthetic
data, and its JSON says ``subset`` (how many rounds, and why it stopped).

Usage (by ``bench.mst_aim``, from the repository root)::

    python -m bench.mbi_mst_aim --problem problem.npz --mechanism aim --rho 0.0149731 --seed 0 \\
        --out synth.npz [--rounds 224 --max-model-size 80 --max-iters 1000] [--select-iters 2500 --fit-iters 10000] \\
        [--trace] [--max-rounds 3] [--time-limit 3600]

It writes the synthetic records (original domain, domain order) to ``--out`` (not for a subset run) and prints
one JSON line (timings, selected cliques, per-round log, trace).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import platform
import time
import warnings

import numpy as np

from bench import schema
from bench.aim_trace import Clock, Scorer, Trace


def _setup():
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="JAX is running in float32")
        import mbi
    return jax, mbi


def environment(jax) -> dict:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "versions": {p: schema.version(p) for p in ("mbi", "jax", "jaxlib", "numpy")},
        "jax_backend": jax.default_backend(),
        "jax_enable_x64": bool(jax.config.jax_enable_x64),
    }


def load_problem(path: str, mbi):
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        records = z["records"]
    attrs = list(meta["domain"])
    domain = mbi.Domain(attrs, [meta["domain"][a] for a in attrs])
    data = mbi.Dataset({a: records[:, j] for j, a in enumerate(attrs)}, domain)
    return meta, data


def exponential_mechanism(rng, q, epsilon: float, sensitivity: float) -> int:
    """Index ``r`` with probability ``∝ exp(epsilon q_r / (2 sensitivity))`` (``-inf`` excluded)."""
    q = np.asarray(q, np.float64)
    finite = np.isfinite(q)
    logits = np.full(q.shape, -np.inf)
    logits[finite] = 0.5 * epsilon / sensitivity * (q[finite] - q[finite].max())
    p = np.exp(logits)
    return int(rng.choice(q.size, p=p / p.sum()))


def _records(dataset, attrs) -> np.ndarray:
    return np.stack([np.asarray(dataset.data[a]) for a in attrs], axis=1).astype(np.int32)


# ----------------------------------------------------------------------------- MST
def run_mst(mbi, data, rho: float, seed: int, select_iters: int, fit_iters: int, return_model: bool = False):
    """MST on mbi's engine: ``(info, records)``, or ``(info, records, model, compressed data)`` with ``return_model``."""
    from mbi import LinearMeasurement
    from mbi.estimation import MirrorDescent

    rng = np.random.default_rng(seed)
    domain = data.domain
    attrs = list(domain.attributes)
    d = len(attrs)
    sigma = math.sqrt(3.0 / (2.0 * rho))
    seconds = {}
    start = time.perf_counter()

    # 1. one-way marginals, unit-L2 weights: std sigma sqrt(d) each (rho/3 in all)
    std1 = sigma * math.sqrt(d)
    one_way = []
    for a in attrs:
        x = np.asarray(data.project((a,)).datavector(), np.float64)
        one_way.append(LinearMeasurement(x + rng.normal(0.0, std1, x.size), (a,), stddev=std1))

    # 2. compression: values with noisy count < 3 std merged into one last value
    mapping = {}
    for m in one_way:
        y = np.asarray(m.noisy_measurement)
        keep = y >= 3.0 * std1
        if keep.all():
            continue
        cmap = np.full(y.size, int(keep.sum()), dtype=np.int64)
        cmap[keep] = np.arange(int(keep.sum()))
        mapping[m.clique[0]] = cmap
    cdata = data.compress(mapping)
    cdom = cdata.domain
    one_way_c = [m.compress(mapping, domain) for m in one_way]

    # 3. selection: one-way model, pair weights, Kruskal with the EM (rho/3 over d-1 draws)
    t0 = time.perf_counter()
    base = MirrorDescent().estimate(cdom, one_way_c, iters=select_iters)
    seconds["select_fit"] = time.perf_counter() - t0
    pairs = list(itertools.combinations(attrs, 2))
    weights = np.array([
        float(np.abs(np.asarray(cdata.project(p).datavector()) - np.asarray(base.project(p).datavector())).sum())
        for p in pairs
    ])
    parent = {a: a for a in attrs}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    eps_em = math.sqrt(8.0 * (rho / 3.0) / (d - 1))
    edges = []
    for _ in range(d - 1):
        q = [w if find(a) != find(b) else -np.inf for (a, b), w in zip(pairs, weights)]
        i = exponential_mechanism(rng, q, eps_em, 1.0)
        a, b = pairs[i]
        parent[find(b)] = find(a)
        edges.append(pairs[i])

    # 4. two-way marginals of the tree: std sigma sqrt(d-1) each (rho/3 in all)
    std2 = sigma * math.sqrt(d - 1)
    two_way = []
    for e in edges:
        x = np.asarray(cdata.project(e).datavector(), np.float64)
        two_way.append(LinearMeasurement(x + rng.normal(0.0, std2, x.size), e, stddev=std2))

    # 5. final fit (warm-started from the one-way model), synthetic data, decompression
    t0 = time.perf_counter()
    model = MirrorDescent().estimate(cdom, one_way_c + two_way, iters=fit_iters, warm_start=base)
    seconds["fit"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    np.random.seed(seed)
    synth = model.synthetic_data().decompress(mapping)
    seconds["synthetic"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - start
    info = {
        "edges": [list(e) for e in edges],
        "compressed_domain": dict(zip(cdom.attributes, cdom.shape)),
        "total": float(model.total),
        "rho_spent": d / (2 * std1**2) + (d - 1) * eps_em**2 / 8 + (d - 1) / (2 * std2**2),
        "seconds": seconds,
    }
    info["tvd_model"] = model_tvd(data, model, mapping)
    if return_model:
        return info, _records(synth, attrs), model, cdata
    return info, _records(synth, attrs)


def model_tvd(data, model, mapping) -> float:
    """Mean 2-way TVD of the model's marginals against the data's, over the original domain: a merged value's
    mass spread uniformly over its original values (as ``decompress`` does, and pgmjax's ``decompress_model``)."""
    attrs = list(data.domain.attributes)
    out = []
    for pair in itertools.combinations(attrs, 2):
        m = np.asarray(model.project(pair).datavector(flatten=False), np.float64)
        for axis, a in enumerate(pair):
            if a in mapping:
                cmap = np.asarray(mapping[a])
                m = np.take(m, cmap, axis=axis) / np.expand_dims(np.bincount(cmap)[cmap], [i for i in range(2) if i != axis])
        t = np.asarray(data.project(pair).datavector(flatten=False), np.float64)
        out.append(0.5 * np.abs(t / t.sum() - m / m.sum()).sum())
    return float(np.mean(out))


# ----------------------------------------------------------------------------- AIM
def candidates_of(workload: list[tuple[tuple[str, ...], float]], order: dict) -> dict:
    closure = set()
    for c, _ in workload:
        for k in range(1, len(c) + 1):
            closure.update(itertools.combinations(c, k))
    ranked = sorted(closure, key=lambda c: (len(c), [order[a] for a in c]))
    return {r: math.fsum(w * len(set(r) & set(s)) for s, w in workload) for r in ranked}


def _closure(cliques) -> set:
    out = set()
    for c in cliques:
        c = tuple(c)
        for k in range(1, len(c) + 1):
            out.update(itertools.combinations(c, k))
    return out


def _candidate_marginals(model, names, indices) -> dict:
    """Model marginals of the candidates: in-model ones from the model's marginals, the others by
    mbi's ``bulk_variable_elimination`` (compiles the queries in background threads)."""
    from mbi.marginal_oracles import bulk_variable_elimination

    out, outside = {}, []
    for j in indices:
        if model.supports(names[j]):
            out[j] = np.asarray(model.project(names[j]).datavector(), np.float64)
        else:
            outside.append(j)
    if outside:
        vec = bulk_variable_elimination(model.potentials, [names[j] for j in outside], total=float(model.total))
        for j in outside:
            out[j] = np.asarray(vec[names[j]].datavector(), np.float64)
    return out


def aim_workload(domain, max_cells: int = 10_000) -> list[tuple[tuple[str, ...], float]]:
    """AIM's default workload: every 2-way clique with at most ``max_cells`` cells, weight 1."""
    return [(c, 1.0) for c in itertools.combinations(domain.attributes, 2) if domain.size(c) <= max_cells]


def model_marginals(model, cliques) -> list[np.ndarray]:
    """``model``'s marginals of ``cliques`` (flat, float64), eagerly: from its clique marginals where a model clique
    holds the query, else by ``variable_elimination`` on its potentials (what ``MarkovRandomField.project`` does),
    under ``jax.disable_jit`` so that no program is compiled or traced that the mechanism could reuse."""
    import jax
    from mbi.marginal_oracles import variable_elimination

    out = []
    with jax.disable_jit():
        for c in cliques:
            c = tuple(c)
            f = model.marginals.project(c) if model.marginals.supports(c) else variable_elimination(model.potentials, c,
                                                                                          float(model.total))
            out.append(np.asarray(f.datavector(), np.float64))
    return out


def aim_trace(data, max_cells: int = 10_000) -> Trace:
    """The trace of :func:`run_aim` on ``data``: its workload's true marginals and the scorer (computed here, before
    the run's clock starts)."""
    cliques = [c for c, _ in aim_workload(data.domain, max_cells)]
    truth = [np.asarray(data.project(c).datavector(), np.float64) for c in cliques]
    domain = dict(zip(data.domain.attributes, data.domain.shape))
    return Trace(Scorer(domain, cliques, truth), lambda model: model_marginals(model, cliques))


def run_aim(mbi, data, rho: float, seed: int, rounds: int, max_model_size: float, max_iters: int,
            max_cells: int = 10_000, trace: Trace | None = None, max_rounds: int | None = None,
            time_limit: float | None = None) -> tuple[dict, np.ndarray | None]:
    """AIM on mbi's engine: ``(info, records)``. With ``trace`` a point per round and one for the final model
    (``trace.points``). ``max_rounds`` / ``time_limit`` (seconds on the trace's clock) stop the run at a round's end:
    then ``info["subset"]`` says so, and there is no final fit and no synthetic data (``records`` None)."""
    import jax
    from mbi import LinearMeasurement
    from mbi.estimation import MirrorDescent
    from mbi.junction_tree import hypothetical_model_size

    clock = trace.clock if trace is not None else Clock()
    clock.start()
    rng = np.random.default_rng(seed)
    domain = data.domain
    attrs = list(domain.attributes)
    order = {a: i for i, a in enumerate(attrs)}
    workload = aim_workload(domain, max_cells)
    cands = candidates_of(workload, order)
    names = list(cands)
    weight = np.array([cands[c] for c in names])
    sizes = np.array([domain.size(c) for c in names], np.float64)
    answers = [np.asarray(data.project(c).datavector(), np.float64) for c in names]
    one_way = [c for c in names if len(c) == 1]
    T = rounds
    sigma = math.sqrt(T / (2 * 0.9 * rho))
    eps_em = math.sqrt(8 * 0.1 * rho / T)
    half_normal = math.sqrt(2 / math.pi)
    seconds = {"engine": 0.0, "selection": 0.0}
    start = time.perf_counter()

    measurements = []
    used = 0.0
    for c in one_way:
        x = answers[names.index(c)]
        measurements.append(LinearMeasurement(x + rng.normal(0.0, sigma, x.size), c, stddev=sigma))
        used += 1 / (2 * sigma**2)
    est = MirrorDescent()
    t0 = time.perf_counter()
    model = est.estimate(domain, measurements, iters=max_iters)
    seconds["engine"] += time.perf_counter() - t0
    log = []
    size_cache = {}
    cache_clears = 0
    t, last = 0, False
    while not last:
        t += 1
        t_sel = time.perf_counter()
        remaining = rho - used
        if remaining < 2 * (1 / (2 * sigma**2) + eps_em**2 / 8):
            sigma = math.sqrt(1 / (2 * 0.9 * remaining))
            eps_em = math.sqrt(8 * 0.1 * remaining)
            last = True
        used += 1 / (2 * sigma**2) + eps_em**2 / 8
        limit = max_model_size * used / rho
        base = tuple(tuple(c) for c in model.cliques)
        free = _closure(base)
        allowed = np.zeros(len(names), bool)
        for j, c in enumerate(names):
            if c in free:
                allowed[j] = True
                continue
            key = (base, c)
            if key not in size_cache:
                size_cache[key] = hypothetical_model_size(domain, list(base) + [c])
            allowed[j] = size_cache[key] <= limit
        est_marg = _candidate_marginals(model, names, np.flatnonzero(allowed))
        q = np.full(len(names), -np.inf)
        for j, e in est_marg.items():
            q[j] = weight[j] * (np.abs(answers[j] - e).sum() - half_normal * sigma * sizes[j])
        j = exponential_mechanism(rng, q, eps_em, float(weight[allowed].max()))
        c = names[j]
        y = answers[j] + rng.normal(0.0, sigma, answers[j].size)
        measurements.append(LinearMeasurement(y, c, stddev=sigma))
        seconds["selection"] += time.perf_counter() - t_sel
        t0 = time.perf_counter()
        model = est.estimate(domain, measurements, iters=max_iters, warm_start=model)
        seconds["engine"] += time.perf_counter() - t0
        if tuple(tuple(c) for c in model.cliques) != base:
            # The model's structure changed: every program compiled for the old one (one variable
            # elimination per out-of-model candidate) is dead. Free them, or a long run exhausts the
            # process's memory maps ("LLVM ERROR: Unable to allocate section memory").
            jax.clear_caches()
            cache_clears += 1
        moved = float(np.abs(np.asarray(model.project(c).datavector()) - est_marg[j]).sum())
        annealed = (not last) and moved <= half_normal * sigma * sizes[j]
        log.append({"round": t, "clique": list(c), "sigma": sigma, "em_epsilon": eps_em, "limit_mb": limit,
                    "candidates": int(allowed.sum()), "annealed": bool(annealed), "last": last})
        if annealed:
            sigma /= 2
            eps_em *= 2
        if trace is not None:
            trace.point(t, model)
        if not last and (max_rounds is not None and t >= max_rounds or time_limit is not None and clock.now() >= time_limit):
            stopped = "max_rounds" if max_rounds is not None and t >= max_rounds else "time_limit"
            subset = {"rounds_run": t, "stopped_by": stopped, "max_rounds": max_rounds, "time_limit_s": time_limit,
                      "seconds": clock.now()}
            break
    else:
        subset = None
    synth = None
    if subset is None:
        t0 = time.perf_counter()
        model = est.estimate(domain, measurements, iters=max_iters, warm_start=model)
        seconds["engine"] += time.perf_counter() - t0
        if trace is not None:
            trace.point("final", model)
        t0 = time.perf_counter()
        np.random.seed(seed)
        synth = model.synthetic_data()
        seconds["synthetic"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - start - (trace.clock.skipped if trace is not None else 0.0)
    info = {
        "rounds_run": t,
        "annealed": sum(e["annealed"] for e in log),
        "selected": [e["clique"] for e in log],
        "log": log,
        "model_mb": hypothetical_model_size(domain, list(model.cliques)),
        "total": float(model.total),
        "rho_spent": used,
        "jax_cache_clears": cache_clears,
        "seconds": seconds,
        "subset": subset,
    }
    if trace is not None:
        info["trace"] = trace.points
        info["trace_eval_s"] = trace.clock.skipped
    return info, None if synth is None else _records(synth, attrs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--problem", required=True, help="npz with the records and the domain (written by bench/mst_aim.py)")
    p.add_argument("--mechanism", choices=("mst", "aim"), required=True)
    p.add_argument("--rho", type=float, required=True, help="zCDP budget (cdp_rho(epsilon, delta), from the caller)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="npz for the synthetic records")
    p.add_argument("--select-iters", type=int, default=2500)
    p.add_argument("--fit-iters", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=None, help="AIM's T (default 16 d)")
    p.add_argument("--max-model-size", type=float, default=80.0)
    p.add_argument("--max-iters", type=int, default=1000)
    p.add_argument("--trace", action="store_true", help="AIM: a point per round (seconds, workload error)")
    p.add_argument("--max-rounds", type=int, default=None, help="AIM: stop after this many rounds (a subset run)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="AIM: stop at the end of the first round after this many seconds (a subset run)")
    args = p.parse_args(argv)
    for name in ("max_rounds", "time_limit"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {value}")

    jax, mbi = _setup()
    meta, data = load_problem(args.problem, mbi)
    trace = aim_trace(data) if args.trace and args.mechanism == "aim" else None
    jax.config.update("jax_enable_compilation_cache", False)  # again: importing pgmjax may have turned it on
    t0 = time.perf_counter()
    if args.mechanism == "mst":
        info, records = run_mst(mbi, data, args.rho, args.seed, args.select_iters, args.fit_iters)
    else:
        rounds = args.rounds or 16 * len(data.domain.attributes)
        info, records = run_aim(mbi, data, args.rho, args.seed, rounds, args.max_model_size, args.max_iters,
                                trace=trace, max_rounds=args.max_rounds, time_limit=args.time_limit)
        info["rounds"] = rounds
    info["wall_s"] = time.perf_counter() - t0 - (trace.clock.skipped if trace is not None else 0.0)
    if records is not None:
        np.savez(args.out, records=records)
    info["meta"] = environment(jax)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
