"""``pgmjax demo``: estimation on data drawn from a random graphical model (no data needed)."""

from __future__ import annotations

import itertools
import time

import numpy as np

from ..data.domain import cells_text


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
        f"(domain size {cells_text(domain.size())}); measured {len(tree_edges)} tree pairs + {len(triples)} triples "
        f"with Gaussian noise sigma={args.sigma:g}; method={args.method}, {args.iters} iterations"
    )
    t1 = time.perf_counter()
    model, report = pj.estimate(domain, measurements, method=args.method, iters=args.iters, progress=not args.quiet,
                                report=True)
    t2 = time.perf_counter()
    hist = report.history
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
