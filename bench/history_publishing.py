"""Publishing a table under differential privacy: a maximum-entropy synthetic table from noisy 2-way marginals
against retention-replacement and bit-flipping randomized response.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 5.2 (Experiment 2: Fig. 6a, 6b and 7), reproduced in spirit on the shared NLTCS and
Adult tables. Three ways to publish a table at the same epsilon (default 1), each recorded by its own
``pgmjax.Accountant``:

* ``maxent``: every cell of every 2-way marginal over the table's ``d`` attributes, released with Laplace noise
  through ``Accountant.measure_many`` (add/remove neighbours: a record is in one cell of each of the ``P = d(d-1)/2``
  marginals, so ``b = P / epsilon``); the maximum-entropy model fitted to them by ``pgmjax.estimate`` (the
  engine's fit: the maximum-entropy distribution among those whose marginals minimise the L1 loss, the Laplace
  likelihood, like the paper's L1 soft constraints; the L2 loss reached the same pair error on NLTCS in a fifth of
  the iterations but on Adult, through the approximate oracle, had not finished 1000 iterations after six CPU
  minutes, against 95 s for L1) and sampled as a synthetic table of ``n`` records. The exact junction tree where it
  fits (NLTCS), the approximate oracle (generalized belief propagation on the pairs' region graph) where the
  full table does not (Adult). The model's own marginals and the raw noisy marginals are reported on pairs too.
* ``rrp``: retention-replacement perturbation (Agrawal, Srikant & Thomas, "Privacy Preserving OLAP", SIGMOD
  2005), a local randomizer per record: each attribute ``a`` keeps its value with probability ``p_a`` and is
  otherwise replaced by a uniform draw from its ``K_a`` values. Its amplification on one attribute is
  ``1 + p_a K_a / (1 - p_a)``; with ``p_a = (e^(eps/d) - 1) / (e^(eps/d) + K_a - 1)`` it is ``e^(eps/d)`` and the
  record's is ``gamma = e^eps`` (epsilon-LDP). This is ``pgmjax``'s per-attribute k-ary randomized response
  (``Accountant.randomized_response(per_attribute=True)``); a marginal is read by the standard inverse-channel
  estimator ``M_C^{-1} h~_C`` (``pgmjax.rr.Release.marginal``: unbiased, may be negative).
* ``bitflip``: bit-flipping perturbation (Mishra & Sandler, "Privacy via Pseudorandom Sketches", PODS 2006): the
  record one-hot encoded (``D = sum_a K_a`` bits, ``d`` of them set) and every bit flipped independently with
  probability ``q``. Two records differ in at most ``2d`` bits, so ``q = 1 / (1 + e^(eps/(2d)))`` gives ``gamma =
  e^eps``. The flips are ``Accountant.randomized_response(per_attribute=True)`` on the one-hot table (binary
  attributes); that ledger composes the ``D`` bits sequentially and so records ``D eps / (2d)``, an upper bound
  that cannot see that the bits are one-hot. A conjunction count is read by the standard unbiased estimator
  ``sum_records prod_j (b~_j - q) / (1 - 2q)`` (the per-bit debiasing, multiplied over independent bits).

Metrics, against the private table: ``Err(X, Y) = sum_{x,y} |p(x,y) - p~(x,y)|`` (the paper's eq. 42, ``p~`` the
published counts over ``n``), truncated at 1, for every attribute pair (Fig. 6a) and for 100 random triples (Fig.
6b; all of them where there are fewer); the RMSE, in records, of random k-D range queries (k random attributes, a
random interval on each) for k = 1..4 (Fig. 7). The RR arms are also shown with their debiased marginals clipped at
0 and rescaled to ``n`` (``+clip``: post-processing, not in the paper).

NLTCS: its first 9 attributes (the paper's 9 attributes, 36 pairs, ``b = 36`` as in the paper), 512 cells.
Adult: the 10 attributes with fewer than 99 values (its four 99/100-valued columns dropped; 45 pairs, 6.5e9
cells).

Usage:
    nice python -m bench.history_publishing            # -> bench/results/papers/history_publishing_cpu.{md,json,png}
    nice python -m bench.history_publishing --quick    # NLTCS only, one seed, fewer range queries (a smoke run)
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time

# The machine is shared: one BLAS thread per process.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import pgmjax as pj  # noqa: E402
from bench import schema  # noqa: E402
from pgmjax import rr  # noqa: E402

#: Arms of every metric, then arms shown on some only (the model itself and the raw noisy marginals: pairs only).
ARMS = ("maxent", "rrp", "bitflip")
EXTRA = ("maxent_model", "laplace_raw", "rrp_clip", "bitflip_clip")
NAMES = {"maxent": "max-ent synthetic", "rrp": "retention-replacement", "bitflip": "bit-flipping",
         "maxent_model": "max-ent model", "laplace_raw": "noisy marginals", "rrp_clip": "retention-repl. +clip",
         "bitflip_clip": "bit-flipping +clip"}
KS = (1, 2, 3, 4)
TRIPLES = 100


def tables(data_dir: str, quick: bool) -> dict:
    """``{name: Dataset}``: NLTCS's first 9 attributes; Adult without its 99/100-valued columns (not in quick mode)."""
    out = {}
    nltcs = pj.datasets.load("nltcs", data_dir)
    keep = nltcs.domain.attributes[:9]
    out["nltcs"] = pj.Dataset(nltcs.df[list(keep)].to_numpy(), {a: nltcs.domain[a] for a in keep})
    if not quick:
        adult = pj.datasets.load("adult", data_dir)
        keep = [a for a in adult.domain.attributes if adult.domain[a] < 99]
        out["adult"] = pj.Dataset(adult.df[keep].to_numpy(), {a: adult.domain[a] for a in keep})
    return out


class BitFlip:
    """A bit-flipped one-hot table and its unbiased conjunction counts."""

    def __init__(self, key, data: pj.Dataset, epsilon: float):
        dom = data.domain
        d = len(dom.attributes)
        sizes = [dom[a] for a in dom.attributes]
        onehot = np.concatenate([np.eye(k, dtype=np.int64)[data.records[:, j]] for j, k in enumerate(sizes)], axis=1)
        bits = sum(sizes)
        self.flip = 1.0 / (1.0 + math.exp(epsilon / (2 * d)))
        # Each bit at eps / (2d); the ledger composes the D bits, a bound of D eps / (2d) (see the module docstring).
        per_bit_total = bits * epsilon / (2 * d)
        self.accountant = pj.Accountant(epsilon=per_bit_total)
        table = pj.Dataset(onehot, {f"bit{i}": 2 for i in range(bits)})
        flipped = self.accountant.randomized_response(key, table, epsilon=per_bit_total, per_attribute=True,
                                                      public_count=True, target="bit flipping (one-hot bits)")
        z = (flipped.records.astype(np.float64) - self.flip) / (1.0 - 2.0 * self.flip)
        edges = np.cumsum([0, *sizes])
        self.z = {a: z[:, edges[j]:edges[j + 1]] for j, a in enumerate(dom.attributes)}
        self.domain, self.n = dom, len(data)

    def marginal(self, clique, chunk: int = 4096) -> np.ndarray:
        """The unbiased count of every cell of ``clique`` (up to 3 attributes), records in chunks."""
        zs = [self.z[a] for a in clique]
        out = np.zeros([z.shape[1] for z in zs])
        letters = "ijk"[: len(zs)]
        for s in range(0, self.n, chunk):
            out += np.einsum(",".join("n" + c for c in letters) + "->" + letters, *[z[s:s + chunk] for z in zs],
                             optimize=True)
        return out

    def range_count(self, attrs, intervals) -> float:
        """The unbiased count of a range query: the per-record debiased interval indicators, multiplied."""
        prod = np.ones(self.n)
        for a, (lo, hi) in zip(attrs, intervals):
            prod *= self.z[a][:, lo:hi + 1].sum(axis=1)
        return float(prod.sum())


def _sliced(table: np.ndarray, intervals) -> float:
    return float(table[tuple(slice(lo, hi + 1) for lo, hi in intervals)].sum())


def _clipped(counts: np.ndarray, n: float) -> np.ndarray:
    pos = np.clip(counts, 0.0, None)
    return pos * (n / pos.sum()) if pos.sum() > 0 else np.full(counts.shape, n / counts.size)


def _err(est: np.ndarray, truth: np.ndarray, n: float) -> float:
    """The paper's eq. 42 on counts, truncated at 1."""
    return min(1.0, float(np.abs(est - truth).sum() / n))


def range_queries(rng, domain, attrs, k: int, count: int) -> list:
    """``count`` random k-D range queries: k distinct attributes (sorted), a random interval on each."""
    out = []
    for _ in range(count):
        chosen = tuple(sorted(rng.choice(len(attrs), size=k, replace=False)))
        qa = tuple(attrs[i] for i in chosen)
        out.append((qa, [tuple(sorted(rng.integers(domain[a], size=2))) for a in qa]))
    return out


def run(name: str, data: pj.Dataset, epsilon: float, seed: int, ranges: int, iters: int, loss: str = "l1") -> dict:
    """One dataset, one seed: the three publications and their errors."""
    dom, n = data.domain, float(len(data))
    attrs = list(dom.attributes)
    pairs = list(itertools.combinations(attrs, 2))
    rng = np.random.default_rng(seed)
    triples = list(itertools.combinations(attrs, 3))
    if len(triples) > TRIPLES:  # one set of triples for every seed (as the paper's one set), so seeds average per triple
        pick = np.random.default_rng(0).choice(len(triples), size=TRIPLES, replace=False)
        triples = [triples[i] for i in sorted(pick)]
    queries = {k: range_queries(rng, dom, attrs, k, ranges) for k in KS}
    k_noise, k_sample, k_rrp, k_bf = jax.random.split(jax.random.key(seed), 4)
    res = {"dataset": name, "seed": seed, "eps": epsilon, "n": n, "attributes": len(attrs), "pairs": len(pairs),
           "cells": float(math.prod(dom[a] for a in attrs)), "triples": [list(t) for t in triples], "seconds": {}}

    # max-ent: Laplace on every 2-way marginal, the fit, a synthetic table.
    t = time.process_time()
    acc = pj.Accountant(epsilon=epsilon)
    ms = acc.measure_many(k_noise, data, pairs, epsilon=epsilon)
    oracle = "exact" if res["cells"] <= 1e6 else "approximate"
    model, report = pj.estimate(dom, ms, total=n, iters=iters, loss=loss, oracle=oracle, report=True)
    synthetic = model.synthetic_data(key=k_sample)
    res["maxent"] = {"b": float(ms[0].stddev / math.sqrt(2)), "ledger": acc.spent, "oracle": oracle, "iters": iters,
                     "loss": loss}
    res["seconds"]["maxent"] = time.process_time() - t

    t = time.process_time()
    acc_rrp = pj.Accountant(epsilon=epsilon)
    released = acc_rrp.randomized_response(k_rrp, data, epsilon=epsilon, per_attribute=True, public_count=True,
                                           target="retention-replacement perturbation")
    rel = rr.Release.of(released, epsilon, per_attribute=True)
    res["rrp"] = {"ledger": acc_rrp.spent, "retain": {a: lam for (a,), lam in zip(rel.channel.groups, rel.channel.keep)}}
    res["seconds"]["rrp"] = time.process_time() - t

    t = time.process_time()
    bf = BitFlip(k_bf, data, epsilon)
    res["bitflip"] = {"ledger": bf.accountant.spent, "flip": bf.flip, "bits": int(sum(dom[a] for a in attrs))}
    res["seconds"]["bitflip"] = time.process_time() - t

    t = time.process_time()
    marg = {"maxent": synthetic.marginal, "rrp": rel.marginal, "bitflip": bf.marginal}
    noisy = {m.clique: m.y.reshape(dom.shape_of(m.clique)) for m in ms}
    res["err_pairs"] = {a: [] for a in (*ARMS, *EXTRA)}
    for c in pairs:
        truth = data.marginal(c)
        est = {a: np.asarray(f(c)) for a, f in marg.items()}
        est["maxent_model"] = np.asarray(model.marginal(c))
        est["laplace_raw"] = noisy[c]
        est["rrp_clip"], est["bitflip_clip"] = _clipped(est["rrp"], n), _clipped(est["bitflip"], n)
        for a, e in est.items():
            res["err_pairs"][a].append(_err(e, truth, n))
    res["err_triples"] = {a: [] for a in (*ARMS, "rrp_clip", "bitflip_clip")}
    for c in triples:
        truth = data.marginal(c)
        est = {a: np.asarray(f(c)) for a, f in marg.items()}
        est["rrp_clip"], est["bitflip_clip"] = _clipped(est["rrp"], n), _clipped(est["bitflip"], n)
        for a, e in est.items():
            res["err_triples"][a].append(_err(e, truth, n))
    res["rmse_range"] = {a: {} for a in ARMS}
    for k, qs in queries.items():
        cache = {}

        def table(arm, qa):
            if (arm, qa) not in cache:
                cache[arm, qa] = np.asarray(data.marginal(qa) if arm == "truth" else marg[arm](qa))
            return cache[arm, qa]

        truth = np.array([_sliced(table("truth", qa), iv) for qa, iv in qs])
        for arm in ARMS:
            if arm == "bitflip":  # per record: a 4-way marginal of Adult would be records x 856,800 cells
                ans = np.array([bf.range_count(qa, iv) for qa, iv in qs])
            else:
                ans = np.array([_sliced(table(arm, qa), iv) for qa, iv in qs])
            res["rmse_range"][arm][str(k)] = float(np.sqrt(np.mean((ans - truth) ** 2)))
        res.setdefault("mean_range_truth", {})[str(k)] = float(np.mean(truth))
    res["seconds"]["metrics"] = time.process_time() - t
    res["model_info"] = {k: v for k, v in report.info.items() if isinstance(v, (int, float, str, bool))}
    return res


def _summary(results: list, key: str, arms) -> list[dict]:
    """Per dataset: mean and max over the pairs/triples of each arm's Err, averaged over seeds."""
    rows = []
    for d in dict.fromkeys(r["dataset"] for r in results):
        rs = [r for r in results if r["dataset"] == d]
        for stat, f in (("mean", np.mean), ("max", np.max)):
            row = {"dataset": d, "statistic": stat}
            for a in arms:
                row[a] = float(np.mean([f(r[key][a]) for r in rs]))
            rows.append(row)
    return rows


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def page(meta: dict, results: list) -> list[str]:
    first = {d: next(r for r in results if r["dataset"] == d) for d in dict.fromkeys(r["dataset"] for r in results)}
    seeds = sorted({r["seed"] for r in results})
    lines = [
        "# Publishing a table (Chen, Zhou & Bhowmick, EDBT 2012, section 5.2), in spirit",
        "",
        *schema.header_lines(meta),
        "",
        f"Setup (`bench/history_publishing.py`; seeds {', '.join(map(str, seeds))}; ε = {results[0]['eps']:g} for every "
        "arm, each recorded by its own `pgmjax.Accountant`):",
        "",
        "| dataset | records | attributes | cells | pairs (Laplace b) | max-ent fit | retention p per attribute | "
        "bit-flip q (bits) | ledgers: max-ent, retention, bit-flip |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d, r in first.items():
        retain = sorted(r["rrp"]["retain"].values())
        lines.append(
            f"| {d} | {r['n']:.0f} | {r['attributes']} | {r['cells']:.3g} | {r['pairs']} (b = {r['maxent']['b']:.4g}) | "
            f"`pj.estimate`, {r['maxent']['loss'].upper()} loss, {r['maxent']['iters']} iterations, {r['maxent']['oracle']} oracle | "
            f"{_fmt(retain[0])}-{_fmt(retain[-1])} | {r['bitflip']['flip']:.4f} ({r['bitflip']['bits']}) | "
            f"{r['maxent']['ledger']:.3g}, {r['rrp']['ledger']:.3g}, {r['bitflip']['ledger']:.3g} |")
    lines += [
        "",
        "Max-ent: Laplace noise on every cell of every 2-way marginal, `pgmjax.estimate` (the loss in the table: L1 "
        "is the Laplace likelihood) and a synthetic table of n records sampled from the model. Retention-replacement: each "
        "attribute kept with probability p_a = (e^(ε/d) − 1)/(e^(ε/d) + K_a − 1), else a uniform draw (amplification "
        "e^(ε/d) per attribute, γ = e^ε per record); marginals by the inverse channel M⁻¹h~ (unbiased). Bit-flipping: "
        "one-hot bits each flipped with q = 1/(1 + e^(ε/2d)) (records differ in ≤ 2d bits: γ = e^ε); conjunction "
        "counts by Σ_records Π (b~ − q)/(1 − 2q) (unbiased). The bit-flip ledger composes every bit sequentially "
        "and so records Dε/2d, a bound the one-hot structure makes loose; the release is ε-LDP. `+clip`: the "
        "debiased marginal clipped at 0 and rescaled to n (post-processing).",
        "",
        "## Fig. 6a: Err (eq. 42, truncated at 1) over every attribute pair",
        "",
        "| dataset | over pairs | " + " | ".join(NAMES[a] for a in (*ARMS, *EXTRA)) + " |",
        "|---|---|" + "---|" * (len(ARMS) + len(EXTRA)),
    ]
    for row in _summary(results, "err_pairs", (*ARMS, *EXTRA)):
        lines.append(f"| {row['dataset']} | {row['statistic']} | " + " | ".join(_fmt(row[a]) for a in (*ARMS, *EXTRA)) + " |")
    tri = (*ARMS, "rrp_clip", "bitflip_clip")
    lines += ["", f"## Fig. 6b: Err over {TRIPLES} random attribute triples (all of them where there are fewer)", "",
              "| dataset | triples | over triples | " + " | ".join(NAMES[a] for a in tri) + " |",
              "|---|---|---|" + "---|" * len(tri)]
    for row in _summary(results, "err_triples", tri):
        lines.append(f"| {row['dataset']} | {len(first[row['dataset']]['triples'])} | {row['statistic']} | "
                     + " | ".join(_fmt(row[a]) for a in tri) + " |")
    lines += ["", "## Fig. 7: RMSE (records) of random k-D range queries", "",
              "| dataset | k | mean true answer | " + " | ".join(NAMES[a] for a in ARMS) + " |",
              "|---|---|---|" + "---|" * len(ARMS)]
    for d in first:
        rs = [r for r in results if r["dataset"] == d]
        for k in KS:
            vals = [float(np.mean([r["rmse_range"][a][str(k)] for r in rs])) for a in ARMS]
            best = min(vals)
            cells = [f"**{_fmt(v)}**" if v == best else _fmt(v) for v in vals]
            lines.append(f"| {d} | {k} | {np.mean([r['mean_range_truth'][str(k)] for r in rs]):.4g} | " + " | ".join(cells) + " |")
    lines += ["", "## CPU seconds per arm (mean over seeds)", "", "| dataset | max-ent (measure, fit, sample) | "
              "retention-replacement | bit-flipping | metrics |", "|---|---|---|---|---|"]
    for d in first:
        rs = [r for r in results if r["dataset"] == d]
        lines.append(f"| {d} | " + " | ".join(f"{np.mean([r['seconds'][a] for r in rs]):.1f}"
                                             for a in ("maxent", "rrp", "bitflip", "metrics")) + " |")
    lines += ["", "Figure: `history_publishing_cpu.png` next to this page (per pair, per triple, RMSE against k)."]
    return lines


def plot(path: str, results: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in results))
    fig, axes = plt.subplots(len(datasets), 3, figsize=(15, 4.2 * len(datasets)), squeeze=False)
    style = {"maxent": "C2-o", "rrp": "C0-s", "bitflip": "C3-^", "maxent_model": "C2:", "laplace_raw": "k:",
             "rrp_clip": "C0--", "bitflip_clip": "C3--"}
    for i, d in enumerate(datasets):
        rs = [r for r in results if r["dataset"] == d]
        for j, (key, arms, what) in enumerate((("err_pairs", (*ARMS, "maxent_model", "laplace_raw", "rrp_clip", "bitflip_clip"), "pair"),
                                              ("err_triples", (*ARMS, "rrp_clip", "bitflip_clip"), "triple"))):
            ax = axes[i, j]
            for a in arms:
                vals = np.mean([r[key][a] for r in rs], axis=0)
                ax.plot(np.arange(1, len(vals) + 1), vals, style[a], ms=3, lw=1, label=NAMES[a])
            ax.set(yscale="log", xlabel=f"attribute {what} (index)", ylabel="Err(X,Y) (eq. 42, ≤ 1)",
                   title=f"{d}: Fig. 6{'ab'[j]}, every {what}" if j == 0 else f"{d}: Fig. 6b, {len(rs[0]['triples'])} triples")
            ax.legend(fontsize=7)
        ax = axes[i, 2]
        for a in ARMS:
            ax.plot(KS, [np.mean([r["rmse_range"][a][str(k)] for r in rs]) for k in KS], style[a], label=NAMES[a])
        ax.set(yscale="log", xlabel="k (dimensions of the range query)", ylabel="RMSE (records)", xticks=KS,
               title=f"{d}: Fig. 7, random k-D range queries")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("PGMJAX_DATA", os.path.join(schema.ROOT, "..", "shared", "data")))
    ap.add_argument("--quick", action="store_true", help="NLTCS only, one seed, 50 range queries per k")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per dataset (default 2; quick: 1)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--loss", choices=("l1", "l2"), default="l1", help="the max-ent fit's loss (l1: the Laplace likelihood)")
    ap.add_argument("--out", default="history_publishing_cpu", help="result name under bench/results/papers/ (or a path)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.data):
        sys.exit(f"data folder {args.data} is absent (set PGMJAX_DATA)")
    out = schema.result_path("papers", args.out)
    seeds = args.seeds or (1 if args.quick else 2)
    ranges, iters = (50 if args.quick else 200), 1000  # the L1 fit of NLTCS is still far off at 300 iterations
    start = time.time()
    results = []
    for name, data in tables(args.data, args.quick).items():
        for seed in range(seeds):
            r = run(name, data, args.epsilon, seed, ranges, iters, args.loss)
            print(f"{name} seed {seed}: mean pair Err " + ", ".join(f"{a} {np.mean(r['err_pairs'][a]):.3g}" for a in ARMS)
                  + f" ({sum(r['seconds'].values()):.0f} CPU s)", flush=True)
            results.append(r)
    meta = schema.run_meta("bench.history_publishing", argv, also={"seconds": time.time() - start, "quick": args.quick})
    schema.write_result("papers", out, results, meta, page=page(meta, results), quiet=True)
    plot(out + ".png", results)
    print(f"wrote {out}.{{json,md,png}} in {time.time() - start:.0f}s")


if __name__ == "__main__":
    main()
