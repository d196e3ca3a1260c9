"""The measurements of ``bench/gpu.py`` that run in its own process: references, bandwidth, batch, largest model.

Every function takes what it may spend (``budget``: a :class:`Budget`) and returns a JSON-ready dict; what it
did not run is listed under ``"skipped"`` with the reason, never silently dropped.

* :func:`make_references` (``gpu.py --make-references OUT.json``): float64 fits on the CPU of the engine
  benchmark's problems (mirror descent, ``ITERS_REF`` iterations in 50-iteration chunks), written as JSON
  (losses, totals, settings) and ``.npz`` beside it (float32 copies of the measured cliques' marginals, the
  first cliques up to ``MAX_STORED_CELLS`` cells per problem), plus the CPU's own float32 fit's distance to
  them (what rounding alone gives, beside which a GPU's distance is read).
* :func:`compare` : a fitted model against a reference: final loss (the float64 L2 loss of its measured
  cliques' marginals, ``engine.common_loss``) relative to the reference's, and L1/N of every stored clique.
* :func:`bandwidth`: device-to-device copy bandwidth (``x + 1`` on a large float32 array: one read and one
  write of every byte), best of several.
* :func:`floor`: per iteration against the memory-bandwidth floor (see its docstring).
* :func:`batch`: ``estimate_batch`` of B noise draws against B sequential ``estimate`` fits.
* :func:`largest`: chains and generated tree models grown geometrically until an error (out of memory) or
  the budget, with per-iteration times.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time

import numpy as np


from bench import problems as ep

#: Iterations and chunk of the reference fits (and of the device's fits compared with them).
ITERS_REF = 2000
CHUNK = 50
#: Cells of measured-clique marginals stored per problem (the file stays small; chain1000 keeps its first 100).
MAX_STORED_CELLS = 100_000
#: A reference is computed only where its fit is projected to take at most this long on this machine.
MAX_REFERENCE_S = 60.0
#: Agreement required of a float32 fit on the device (the issue's acceptance numbers).
LOSS_RTOL = 1e-3
L1_TOL = 1e-3


@dataclasses.dataclass(frozen=True)
class Budget:
    """Seconds a section may spend, counted from ``start`` (``time.perf_counter``)."""

    seconds: float
    start: float = dataclasses.field(default_factory=time.perf_counter)

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)


def _domain_meas(p: dict):
    import pgmjax as pj

    return pj.Domain(p["domain"]), [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]


def _fit(p: dict, iters: int, dtype=None, report: bool = False):
    """The problem's mirror-descent fit (its potentials waited for): the model, or with ``report`` the ``pj.Fit``."""
    import jax

    import pgmjax as pj

    domain, meas = _domain_meas(p)
    fit = pj.estimate(domain, meas, "mirror_descent", iters=iters, chunk=CHUNK, dtype=dtype, report=True)
    jax.block_until_ready(fit.model.theta)
    return fit if report else fit.model


def _stored_count(p: dict) -> int:
    cells, n = 0, 0
    for y in p["noisy"]:
        if n and cells + y.size > MAX_STORED_CELLS:
            break
        cells, n = cells + y.size, n + 1
    return n


def compare(model, p: dict, ref: dict, tables_ref: list[np.ndarray]) -> dict:
    """A model's distance to a reference (:func:`make_references`): relative loss, L1/N per stored clique.

    Returns:
        ``{"loss", "ref_loss", "loss_rel", "l1_over_n_max", "l1_over_n_mean", "cliques", "ok"}``; ``ok``: both
        within :data:`LOSS_RTOL` and :data:`L1_TOL`.
    """
    from bench.engine import common_loss

    loss = common_loss(model.marginals(p["cliques"]), p["noisy"], p["sigma"])
    tables = model.marginals(p["cliques"][: len(tables_ref)])
    l1 = [float(np.abs(np.asarray(t, np.float64).reshape(r.shape) - r).sum() / ref["total"]) for t, r in zip(tables, tables_ref)]
    rel = abs(loss - ref["loss"]) / abs(ref["loss"])
    out = {"loss": loss, "ref_loss": ref["loss"], "loss_rel": rel, "l1_over_n_max": max(l1),
           "l1_over_n_mean": float(np.mean(l1)), "cliques": len(l1)}
    out["ok"] = bool(math.isfinite(loss) and rel <= LOSS_RTOL and out["l1_over_n_max"] <= L1_TOL)
    return out


def load_references(path: str) -> tuple[dict, dict]:
    """``(json, {problem: [tables]})`` of a references file written by :func:`make_references`."""
    with open(path) as f:
        refs = json.load(f)
    tables = {}
    with np.load(os.path.splitext(path)[0] + ".npz") as z:
        for name, r in refs["problems"].items():
            tables[name] = [z[f"{name}/{i}"].astype(np.float64) for i in range(r["stored_cliques"])]
    return refs, tables


def make_references(out: str, names, iters: int = ITERS_REF, max_s: float = MAX_REFERENCE_S) -> dict:
    """Float64 reference fits on the CPU (see the module docstring); writes ``out`` (JSON) and its ``.npz``.

    A problem is skipped when 50 warm iterations project its fit (float64, then float32) past ``max_s``.
    """
    import jax
    import jax.numpy as jnp

    import pgmjax as pj

    with jax.enable_x64(True):  # float64 here only: a caller's own fits keep its setting
        return _make_references(out, names, iters, max_s)


def _make_references(out: str, names, iters: int, max_s: float) -> dict:
    import jax
    import jax.numpy as jnp

    import pgmjax as pj

    refs = {"settings": {"method": "mirror_descent", "iters": iters, "chunk": CHUNK, "dtype": "float64",
                         "backend": jax.default_backend(), "max_reference_s": max_s, "max_stored_cells": MAX_STORED_CELLS,
                         "pgmjax": pj.__version__, "jax": jax.__version__},
            "problems": {}, "skipped": []}
    arrays = {}
    for name in names:
        try:
            p = ep.make(name)
        except Exception as e:  # the shared data is absent here
            refs["skipped"].append({"problem": name, "why": f"cannot build it: {type(e).__name__}: {e}"})
            continue
        t0 = time.perf_counter()
        _fit(p, CHUNK, jnp.float64)  # compiles
        t1 = time.perf_counter()
        _fit(p, CHUNK, jnp.float64)
        warm = time.perf_counter() - t1
        projected = warm * iters / CHUNK
        if projected > max_s:
            refs["skipped"].append({"problem": name, "why": f"projected {projected:.0f} s for {iters} float64 iterations "
                                    f"on this CPU (over {max_s:.0f} s); first call {t1 - t0:.1f} s"})
            print(f"[references] {name}: skipped (projected {projected:.0f} s)", flush=True)
            continue
        t2 = time.perf_counter()
        m64, r64 = _fit(p, iters, jnp.float64, report=True)
        fit_s = time.perf_counter() - t2
        from bench.engine import common_loss

        n = _stored_count(p)
        tables = m64.marginals(p["cliques"][:n])
        for i, t in enumerate(tables):
            arrays[f"{name}/{i}"] = np.asarray(t, np.float32)
        entry = {"loss": common_loss(m64.marginals(p["cliques"]), p["noisy"], p["sigma"]), "reported_loss": float(r64.loss),
                 "total": float(m64.total), "cliques": len(p["cliques"]), "stored_cliques": n,
                 "stored_cells": int(sum(t.size for t in tables)), "fit_s": fit_s, "description": p["description"]}
        # The CPU's float32 fit beside it: the distance rounding alone gives on the CPU.
        t3 = time.perf_counter()
        entry["cpu_float32"] = compare(_fit(p, iters, jnp.float32), p, entry, [np.asarray(t, np.float64) for t in tables])
        entry["cpu_float32"]["fit_s"] = time.perf_counter() - t3
        refs["problems"][name] = entry
        print(f"[references] {name}: loss {entry['loss']:.6g}, float64 {fit_s:.1f} s; CPU float32: "
              f"loss rel {entry['cpu_float32']['loss_rel']:.2e}, L1/N max {entry['cpu_float32']['l1_over_n_max']:.2e}", flush=True)
    with open(out, "w") as f:
        json.dump(refs, f, indent=1)
    np.savez_compressed(os.path.splitext(out)[0] + ".npz", **arrays)
    return refs


def bandwidth(n_bytes: int, repeats: int = 10) -> dict:
    """Device memory bandwidth: ``x + 1`` on a float32 array of ``n_bytes`` (reads and writes each byte once),
    the best of ``repeats`` warm calls. Returns ``{"bytes", "best_s", "gb_per_s"}`` (GB: 1e9 bytes)."""
    import jax
    import jax.numpy as jnp

    n = max(1, n_bytes // 4)
    x = jax.block_until_ready(jnp.zeros(n, jnp.float32))
    f = jax.jit(lambda x: x + 1.0)
    jax.block_until_ready(f(x))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(x))
        times.append(time.perf_counter() - t)
    best = min(times)
    del x
    return {"bytes": 4 * n, "best_s": best, "gb_per_s": 2 * 4 * n / best / 1e9}


def floor(cells: int, calls_per_iter: float, ms_per_iter: float, gb_per_s: float, dtype_bytes: int = 4) -> dict:
    """One mirror-descent iteration against the memory-bandwidth floor.

    Counting, a lower bound that assumes perfect fusion: every oracle call (the log-space sum-product over
    the plan's potential blocks, ``plan.cells`` cells with padding) reads each cell twice (the upward pass
    reads the potentials for the messages, the downward pass reads them again for the beliefs) and writes it
    once (the marginals): 3 passes; messages (separator tables) are left out. The update reads the potentials
    and the gradient and writes the new potentials: 3 more passes. So
    ``bytes = cells * dtype_bytes * (3 * oracle_calls_per_iter + 3)`` and ``floor = bytes / bandwidth``;
    ``ratio = measured / floor`` (1: bandwidth-bound at the floor).
    """
    nbytes = cells * dtype_bytes * (3 * calls_per_iter + 3)
    floor_ms = 1e3 * nbytes / (gb_per_s * 1e9)
    return {"cells": cells, "oracle_calls_per_iter": calls_per_iter, "bytes_per_iter": nbytes, "floor_ms": floor_ms,
            "ms_per_iter": ms_per_iter, "ratio": ms_per_iter / floor_ms if floor_ms > 0 else None}


def _members(p: dict, b: int, seed: int = 0) -> list:
    """B noise draws of a problem's measurements: true marginals + N(0, sigma) (``bench/batch.py``'s draws)."""
    import pgmjax as pj

    out = []
    for i in range(b):
        rng = np.random.default_rng(seed + i)
        out.append([pj.Measurement(c, t + rng.normal(0.0, p["sigma"], t.shape), stddev=p["sigma"])
                    for c, t in zip(p["cliques"], p["true"])])
    return out


def batch(name: str, b: int, iters: int, budget: Budget) -> dict:
    """``estimate_batch`` of ``b`` draws (cold: with its compilation; warm) against ``b`` sequential fits (the
    first compiles; the others warm, as many as the budget allows: the total is then extrapolated)."""
    import jax

    import pgmjax as pj
    from bench.batch import batch_fitters, fit_agreement, fit_summary

    p = ep.make(name)
    domain = pj.Domain(p["domain"])
    members = _members(p, b)
    fit = batch_fitters(domain, members, iters, CHUNK)
    out = {"problem": name, "batch": b, "iters": iters, "skipped": []}
    t = time.perf_counter()
    batched = fit["batched"]()  # a pj.Fit: the batch of models and its report
    jax.block_until_ready(batched.model.theta)
    out["batched_cold_s"] = time.perf_counter() - t
    t = time.perf_counter()
    jax.block_until_ready(fit["batched"]().model.theta)
    out["batched_warm_s"] = time.perf_counter() - t
    t = time.perf_counter()
    seq = [pj.estimate(domain, members[0], iters=iters, chunk=CHUNK, report=True)]
    out["sequential_first_s"] = time.perf_counter() - t
    times = []
    for ms in members[1:]:
        if times and budget.left() < 2 * max(times) + 2:
            out["skipped"].append({"what": f"sequential fits {len(seq) + 1}..{b}", "why": "section time budget"})
            break
        t = time.perf_counter()
        m = pj.estimate(domain, ms, iters=iters, chunk=CHUNK, report=True)
        jax.block_until_ready(m.model.theta)
        times.append(time.perf_counter() - t)
        seq.append(m)
    per_fit = float(np.median(times)) if times else out["sequential_first_s"]
    out.update(sequential_fits=len(seq), sequential_warm_per_fit_s=per_fit, sequential_warm_s=per_fit * b,
               sequential_extrapolated=len(seq) < b)
    out["speedup_warm"] = out["sequential_warm_s"] / out["batched_warm_s"]
    bs = fit_summary(batched)
    k = len(seq)
    bs = {"marginals": [x[:k] for x in bs["marginals"]], "losses": bs["losses"][:k], "totals": np.asarray(bs["totals"])[:k],
          "calls": np.asarray(bs["calls"])[:k]}
    out["agreement"] = fit_agreement(bs, fit_summary(seq))
    return out


def _one_size(p: dict, iters: int) -> dict:
    import jax

    import pgmjax as pj
    from pgmjax.graph import oracle

    domain, meas = _domain_meas(p)
    t = time.perf_counter()
    plan = oracle.make_plan(domain, p["cliques"])
    row = {"attributes": len(domain), "cells": plan.cells, "plan_s": time.perf_counter() - t}

    def run(n):
        t = time.perf_counter()
        fit = pj.estimate(domain, meas, "mirror_descent", iters=n, chunk=CHUNK, report=True)
        jax.block_until_ready(fit.model.theta)
        return time.perf_counter() - t, fit

    row["first_call_s"] = run(CHUNK)[0]
    # medians of three: one call's fixed cost varies by more than 50 iterations take on a GPU
    short = sorted(run(CHUNK)[0] for _ in range(3))[1]
    longs = [run(CHUNK + iters) for _ in range(3)]
    long, fit = sorted(longs, key=lambda r: r[0])[1]
    row.update(ms_per_iter=1e3 * (long - short) / iters, iters=iters, loss_finite=bool(math.isfinite(fit.report.loss)))
    mem = [d.memory_stats() for d in jax.devices()[:1] if hasattr(d, "memory_stats")]
    if mem and mem[0] and "peak_bytes_in_use" in mem[0]:
        row["device_peak_bytes"] = int(mem[0]["peak_bytes_in_use"])
    return row


def largest(kind: str, sizes, iters: int, budget: Budget, max_cells: int, **structure) -> dict:
    """Grow a ``kind`` (``"chain"`` or ``"generated"``) model over ``sizes`` (attributes, increasing) until an
    error (out of device memory: caught), ``max_cells`` cells, or a step projected past the budget (each step
    is projected at 2.5 times the previous one's seconds: the model doubles and compiles longer). ``structure``:
    keyword arguments of ``bench.problems.chain_structure`` or ``tree_structure``."""
    make = ep.chain_structure if kind == "chain" else ep.tree_structure
    out = {"kind": kind, "rows": [], "skipped": [], "stopped_by": None}
    last = 0.0
    for d in sizes:
        if budget.left() < 2.5 * last + 1:
            out["stopped_by"] = f"time budget (next d = {d} projected {2.5 * last:.0f} s, {budget.left():.0f} s left)"
            break
        t = time.perf_counter()
        p = make(d, **structure)
        cells = sum(y.size for y in p["noisy"])
        if cells > max_cells:
            out["stopped_by"] = f"size cap ({cells:,} measured cells at d = {d} > {max_cells:,})"
            break
        try:
            row = _one_size(p, iters)
        except Exception as e:  # out of device memory, or anything the device refuses: the previous size stands
            out["stopped_by"] = f"d = {d}: {type(e).__name__}: {str(e)[:300]}"
            break
        row["step_s"] = last = time.perf_counter() - t
        out["rows"].append(row)
        print(f"[largest] {kind} d={d}: {row['cells']:,} cells, first {row['first_call_s']:.1f} s, "
              f"{row['ms_per_iter']:.3f} ms/it", flush=True)
    else:
        out["stopped_by"] = "end of the size list"
    out["largest"] = out["rows"][-1] if out["rows"] else None
    return out
