"""The ``pgmjax`` command line.

``pgmjax demo`` draws a dataset from a random ground-truth graphical model,
measures noisy marginals, estimates a model from them and prints how much
closer the model is to the truth than the raw noisy answers.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np


def random_bayes_net_data(attributes: int, records: int, seed: int, max_parents: int = 2):
    """Sample records from a random Bayesian network (a graphical model with known structure).

    Attribute i has 2-8 values and up to ``max_parents`` parents among
    attributes 0..i-1; its conditional tables are Dirichlet(0.5) draws.

    Returns:
        ``(domain dict, records (n, d) int array, parents list)``.
    """
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 9, size=attributes)
    parents = []
    records_out = np.zeros((records, attributes), dtype=np.int64)
    for i in range(attributes):
        k = int(rng.integers(0, min(max_parents, i) + 1)) if i else 0
        pa = sorted(rng.choice(i, size=k, replace=False).tolist()) if k else []
        parents.append(pa)
        cond_shape = tuple(int(sizes[p]) for p in pa)
        table = rng.dirichlet(0.5 * np.ones(sizes[i]), size=cond_shape or None)  # (*parents, size_i)
        rows = table[tuple(records_out[:, p] for p in pa)] if pa else np.broadcast_to(table, (records, sizes[i]))
        u = rng.random(records)[:, None]
        records_out[:, i] = np.minimum((np.cumsum(rows, axis=1) < u).sum(axis=1), sizes[i] - 1)
    domain = {f"x{i}": int(s) for i, s in enumerate(sizes)}
    return domain, records_out, parents


def demo(args) -> int:
    import jax

    import pgmjax as pj

    t0 = time.perf_counter()
    domain_dict, records, _ = random_bayes_net_data(args.attributes, args.records, args.seed)
    domain = pj.Domain(domain_dict)
    data = pj.Dataset(records, domain)
    rng = np.random.default_rng(args.seed + 1)
    attrs = domain.attributes
    order = rng.permutation(len(attrs))
    tree_edges = [tuple(sorted((attrs[order[i]], attrs[order[rng.integers(i)]]), key=attrs.index)) for i in range(1, len(attrs))]
    triples = [tuple(attrs[j] for j in sorted(rng.choice(len(attrs), 3, replace=False))) for _ in range(args.triples)]
    cliques = tree_edges + triples
    measurements = pj.noisy_marginals(data, cliques, args.sigma, jax.random.key(args.seed))
    print(
        f"pgmjax demo: {len(data):,} records from a random graphical model over {len(attrs)} attributes "
        f"(domain size {domain.size():.2e}); measured {len(tree_edges)} tree pairs + {len(triples)} triples "
        f"with Gaussian noise sigma={args.sigma:g}; method={args.method}, {args.iters} iterations"
    )
    t1 = time.perf_counter()
    model = pj.estimate(domain, measurements, method=args.method, iters=args.iters, progress=not args.quiet)
    t2 = time.perf_counter()
    hist = model.history
    iters_run = hist[-1]["iteration"] if hist else 0
    first_chunk = hist[0] if hist else None
    steady = (
        (hist[-1]["seconds"] - first_chunk["seconds"]) / (iters_run - first_chunk["iteration"])
        if hist and iters_run > first_chunk["iteration"]
        else float("nan")
    )
    n = len(data)
    print(f"\n{'marginal':<22}{'noisy error':>14}{'model error':>14}   (L1 error / records = 2 x total variation)")
    model_errs, noisy_errs = [], []
    for m in measurements:
        truth = data.marginal(m.clique).ravel()
        e_noisy = np.abs(m.y - truth).sum() / n
        e_model = np.abs(model.marginal(m.clique).ravel() - truth).sum() / n
        noisy_errs.append(e_noisy)
        model_errs.append(e_model)
        print(f"{' x '.join(m.clique):<22}{e_noisy:>14.4f}{e_model:>14.4f}")
    unmeasured = [c for c in itertools.combinations(attrs, 2) if c not in set(tree_edges)]
    un_errs = [np.abs(model.marginal(c) - data.marginal(c)).sum() / n for c in unmeasured]
    print(f"{'mean (measured)':<22}{np.mean(noisy_errs):>14.4f}{np.mean(model_errs):>14.4f}")
    print(f"{'mean (unmeasured 2-way)':<22}{'-':>14}{np.mean(un_errs):>14.4f}   over {len(unmeasured)} pairs")
    print(
        f"\nmodel: {len(model.cliques)} cliques, treewidth {model.junction_tree.treewidth}, "
        f"estimated total {model.total:,.0f} (true {n:,})"
    )
    print(
        f"time: data {t1 - t0:.2f} s, estimate {t2 - t1:.2f} s (incl. compilation), "
        f"{steady * 1e3:.3f} ms per iteration after the first chunk"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgmjax",
        description="Graphical-model estimation for differentially private query answering, in JAX.",
        epilog="Example: pgmjax demo --records 50000 --attributes 12 --iters 1000",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser(
        "demo",
        help="estimate a model from noisy marginals of data drawn from a random graphical model (no data needed)",
        description=(
            "Draws records from a random ground-truth graphical model, measures all 2-way marginals of a random "
            "tree plus a few 3-way marginals with Gaussian noise, estimates a graphical model, and prints the "
            "per-marginal error of the model next to the error of the raw noisy answers."
        ),
    )
    d.add_argument("--records", type=int, default=50_000, help="number of records (default 50000)")
    d.add_argument("--attributes", type=int, default=12, help="number of attributes (default 12)")
    d.add_argument("--triples", type=int, default=3, help="number of random 3-way marginals measured (default 3)")
    d.add_argument("--sigma", type=float, default=50.0, help="Gaussian noise standard deviation (default 50)")
    d.add_argument("--iters", type=int, default=1000, help="estimation iterations (default 1000)")
    d.add_argument("--method", default="mirror_descent", choices=["mirror_descent", "dual_averaging", "lbfgs"])
    d.add_argument("--seed", type=int, default=0, help="random seed (data, structure and noise)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(func=demo)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("records", "attributes", "iters"):
        if getattr(args, name, 1) is not None and getattr(args, name, 1) < 1:
            parser.error(f"--{name} must be at least 1")
    if getattr(args, "attributes", 3) < 3:
        parser.error("--attributes must be at least 3")
    if getattr(args, "sigma", 1.0) <= 0:
        parser.error("--sigma must be positive")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
