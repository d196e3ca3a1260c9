"""The mbi 2.0 half of the inference benchmark (issue 3); started by ``bench/inference.py``.

Runs in an interpreter with ``mbi==2.0.0`` (e.g. ``/work/venv-mbi/bin/python``),
in its own fresh process. It reads the problem that ``bench/inference.py``
wrote (``<workdir>/problem.npz``: Adult's domain and records, the 27 model
cliques and their noisy answers, sigma), fits mbi to those same noisy
measurements and times what ``bench/inference.py`` times on pgmjax:

* the fit: ``mbi.estimation.MirrorDescent().estimate(domain, measurements,
  iters)`` (mbi's defaults: Armijo line search, float32), first call, and
  the final L2 loss ``marginal_loss.from_linear_measurements`` at the model;
* the 91 two-way marginals: a loop of ``model.project(pair)`` (mbi has no
  batch call; out-of-model pairs go through its variable elimination), first
  loop and warm median of ``repeats`` loops; every table is pulled to the
  host (``np.asarray``) before the clock stops;
* ``model.synthetic_data(n_synth, method)`` for ``"sample"`` (i.i.d.) and
  ``"round"`` (mbi's default, randomised rounding), first and warm median of
  ``synth_repeats`` (``np.random.seed(0)`` first, mbi draws from NumPy's
  global generator);
* count accuracy at ``n = int(total)`` (mbi's own rule) on each model clique.

It writes ``mbi_pairs.npz`` (the 91 tables), ``mbi_synth_<method>.npz`` (the
last 1M draw of each method, so the driver computes TVDs with the same code
as for pgmjax) and ``mbi_model.pkl`` (the fitted model, for the memory
run) into the work folder, and prints one JSON line.

``--memory``: a fresh process that unpickles the model and draws
``n_memory`` records with the default method, reporting ``VmHWM`` (peak
resident set) of ``/proc/self/status`` before and after.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import platform
import time
import warnings

from bench import schema
from bench.benchutil import median, proc_status, timed


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
        "versions": {p: schema.version(p) for p in ("mbi", "jax", "jaxlib", "numpy", "networkx")},
        "jax_backend": jax.default_backend(),
        "jax_enable_x64": bool(jax.config.jax_enable_x64),
    }


def load_problem(path: str) -> dict:
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        ys = [z[f"y_{i}"] for i in range(len(meta["cliques"]))]
        records = z["records"]
    return dict(meta, ys=ys, records=records)


def _key(clique, order) -> str:
    return "|".join(sorted(clique, key=order.get))


def _records(dataset, attrs):
    import numpy as np

    return np.stack([np.asarray(dataset.data[a]) for a in attrs], axis=1)


def _counts(records, cols, shape):
    import numpy as np

    flat = np.ravel_multi_index(tuple(records[:, c] for c in cols), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(np.float64)


def run(workdir: str, iters: int, repeats: int, synth_repeats: int, n_synth: int) -> dict:
    jax, mbi = _setup()
    import jax.numpy as jnp
    import numpy as np
    from mbi import estimation, marginal_loss

    p = load_problem(os.path.join(workdir, "problem.npz"))
    attrs = list(p["domain"])
    order = {a: i for i, a in enumerate(attrs)}
    domain = mbi.Domain(attrs, [p["domain"][a] for a in attrs])
    measurements = [
        mbi.LinearMeasurement(jnp.asarray(y.ravel()), tuple(c), stddev=p["sigma"]) for c, y in zip(p["cliques"], p["ys"])
    ]
    pairs = [tuple(q) for q in p["pairs"]]
    out: dict = {"engine": "mbi", "meta": environment(jax), "iters": iters}

    t = time.perf_counter()
    model = estimation.MirrorDescent().estimate(domain, measurements, iters=iters)
    jax.block_until_ready(model)
    out["fit_s"] = time.perf_counter() - t
    out["effective_iters"] = -(-iters // estimation.CALLBACK_EVERY) * estimation.CALLBACK_EVERY
    loss_fn = marginal_loss.from_linear_measurements(measurements, domain)
    out["final_loss"] = float(jax.jit(lambda f, m: f(m))(loss_fn, model.marginals))
    out["total"] = float(model.total)
    out["model_cliques"] = [list(c) for c in model.cliques]

    def project_all():
        return [np.asarray(model.project(q).datavector(flatten=False), np.float64) for q in pairs]

    first, answers = timed(project_all)
    warm = [timed(project_all)[0] for _ in range(repeats)]
    out["marginals"] = {
        "count": len(pairs),
        "loop_first_s": first,
        "loop_warm_s": median(warm),
        "loop_warm_samples_s": warm,
        "max_rel_dev_of_sum_from_total": float(max(abs(a.sum() / float(model.total) - 1) for a in answers)),
    }
    np.savez(os.path.join(workdir, "mbi_pairs.npz"), *answers)

    synth = {}
    np.random.seed(0)
    for method in ("sample", "round"):
        f, draw = timed(lambda: model.synthetic_data(n_synth, method=method))
        w = [timed(lambda: model.synthetic_data(n_synth, method=method))[0] for _ in range(synth_repeats)]
        np.savez(os.path.join(workdir, f"mbi_synth_{method}.npz"), records=_records(draw, attrs))
        synth[method] = {"n": n_synth, "first_s": f, "warm_s": median(w), "warm_samples_s": w}
    out["synthetic"] = synth

    n = max(1, int(model.total))  # mbi's own rule for rows=None
    acc = {"n": n}
    for method in ("round", "sample"):
        rec = _records(model.synthetic_data(n, method=method), attrs)
        dev = {}
        for c in model.cliques:
            c = tuple(sorted(c, key=order.get))
            mu = np.asarray(model.project(c).datavector(flatten=False), np.float64)
            counts = _counts(rec, [order[a] for a in c], mu.shape)
            dev[_key(c, order)] = float(np.abs(counts - mu * (n / float(model.total))).max())
        acc[method] = {"per_clique": dev, "max": max(dev.values())}
    out["low_variance_accuracy"] = acc

    with open(os.path.join(workdir, "mbi_model.pkl"), "wb") as f:
        pickle.dump(jax.device_get(model), f)
    out["peak_rss_mib_process"] = proc_status("VmHWM").get("VmHWM")
    return out


def run_memory(workdir: str, n: int) -> dict:
    jax, mbi = _setup()
    import numpy as np

    with open(os.path.join(workdir, "mbi_model.pkl"), "rb") as f:
        model = pickle.load(f)
    np.random.seed(3)
    before = proc_status("VmHWM", "VmRSS")
    t, draw = timed(lambda: model.synthetic_data(n))
    after = proc_status("VmHWM", "VmRSS")
    nbytes = sum(np.asarray(v).nbytes for v in draw.data.values()) + np.asarray(draw.weights).nbytes
    return {
        "engine": "mbi",
        "n": n,
        "method": "round",
        "seconds_first_call": t,
        "vmhwm_before_mib": before.get("VmHWM"),
        "vmrss_before_mib": before.get("VmRSS"),
        "vmhwm_after_mib": after.get("VmHWM"),
        "records_mib": nbytes / 2**20,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--synth-repeats", type=int, default=3)
    ap.add_argument("--n-synth", type=int, default=1_000_000)
    ap.add_argument("--n-memory", type=int, default=5_000_000)
    ap.add_argument("--memory", action="store_true")
    args = ap.parse_args(argv)
    if args.memory:
        row = run_memory(args.workdir, args.n_memory)
    else:
        row = run(args.workdir, args.iters, args.repeats, args.synth_repeats, args.n_synth)
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
