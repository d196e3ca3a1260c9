"""The problems the benchmark suites fit: one module of problem definitions (``python -m bench``).

**The engine problems** (``bench/engine.py`` and most suites): pgmjax vs mbi 2.0 on the same noisy marginals.

Every problem is a dict with

* ``domain``: ``{name: size}`` in attribute order;
* ``cliques``: the measured cliques (tuples of names; a table's axes follow the clique's order);
* ``noisy``: one float64 array per clique, ``y = true marginal + N(0, sigma^2)`` cell-wise;
* ``true``: the exact marginals (for the L1-error sanity check);
* ``sigma``, ``records``, ``description``.

The noise is drawn here once (fixed numpy seeds), and both engines read the same arrays from one ``.npz``
file (:func:`save` / :func:`load`), so they fit exactly the same measurements.

Problems (``PROBLEMS``):

* ``chain10``, ``chain100``, ``chain1000``: the scalability problem (:func:`markov_chain_problem`) (d attributes
  of 10 values, 10,000 records from a random Markov chain, every consecutive triple measured, sigma 10).
* ``titanic``, ``adult``, ``loans``, ``stroke``: the ICML 2019 benchmark cliques of the dataset
  (``pgmjax.datasets.benchmark_cliques``; Adult's published 15), identity measurements, sigma 10.
* ``adult_mst``: Adult, all 14 one-way marginals plus the 13 two-way marginals of the maximum spanning tree of
  the data's pairwise mutual information (Chow-Liu tree), sigma 10.
* ``nltcs_2way``: NLTCS (16 binary attributes), all 120 two-way marginals (a loopy model: its junction tree is
  one 65,536-cell clique), sigma 10.
* the generated loopy problems of :data:`LOOPY` (the agreement suite's cycles and grids, :func:`loopy`);
  and, with random answers for size and speed tests, :func:`chain_structure` and :func:`tree_structure`.
* ``gen15``, ``gen50``, ``gen200``: generated irregular problems (:func:`generated`): sizes in 2..100 with a
  few attributes of 200..1000 values, 50,000 records sampled from a random Bayesian tree (Dirichlet(0.5)
  conditional tables), every tree edge measured plus up to d // 5 three-way cliques of nearby attributes (a node and two
  attributes within tree distance 2; at most 250,000 cells each), a draw being skipped when it would give the
  junction tree a clique of more than 1e6 cells or more than 4e6 cells in all.

**The scalability problem** (McKenna et al., ICML 2019, Fig. 2b; :func:`markov_chain_problem`), defined with numpy only: the problem that both the incumbent
(``mbi``) and our engine (``pgmjax``) are timed on, so that the two benchmarks
see bit-identical inputs:

* ``d`` attributes named ``"a0" ... "a{d-1}"``, each with 10 values;
* ``records`` (default 10,000) records drawn from a random first-order Markov
  chain: ``a0`` is uniform and ``a{i+1} | a{i}`` follows a random 10x10
  transition matrix whose rows are ``Dirichlet(0.5 * ones(10))``, so the
  marginals are far from uniform;
* measurements: the full 10x10x10 count table (identity query) of every
  consecutive triple ``(a{i}, a{i+1}, a{i+2})``, ``i = 0 .. d-3``, with i.i.d.
  Gaussian noise of standard deviation ``sigma`` (default 10) on every cell.

Randomness is fully determined by ``seed``: one ``numpy.random.SeedSequence``
is split into three independent streams (transition matrices, records,
noise), so e.g. changing ``sigma`` does not change the records. The problems
are nested: for ``d1 < d2`` (same seed, records and sigma), the data,
cliques and noisy counts of ``markov_chain_problem(d1)`` are a prefix of those of
``markov_chain_problem(d2)``.

Only numpy and the standard library are imported at module level (pgmjax lazily, by the engine problems'
builders), so the module can be used from any environment, the mbi drivers' included.
"""

from __future__ import annotations

import json
import os

import numpy as np

#: Number of values of every attribute.
CARDINALITY = 10
#: Number of attributes in every measured clique.
CLIQUE_SIZE = 3


def attribute_names(d: int) -> list[str]:
    """Return the attribute names ``["a0", ..., "a{d-1}"]``."""
    return [f"a{i}" for i in range(d)]


def sample_markov_chain(
    d: int, records: int, rng_transitions: np.random.Generator,
    rng_records: np.random.Generator,
) -> np.ndarray:
    """Sample records from a random first-order Markov chain.

    Args:
        d: Number of attributes (chain length).
        records: Number of records (rows).
        rng_transitions: Generator for the ``d - 1`` transition matrices.
        rng_records: Generator for the records themselves.

    Returns:
        An ``int64`` array of shape ``(records, d)`` with values in
        ``[0, CARDINALITY)`` (Fortran-ordered, i.e. columns are contiguous).
    """
    k = CARDINALITY
    # transitions[i, u, v] = P(a_{i+1} = v | a_i = u).
    transitions = rng_transitions.dirichlet(0.5 * np.ones(k), size=(d - 1, k))
    # thresholds[i, v, u] = P(a_{i+1} <= v | a_i = u) for v < k - 1; the
    # last CDF value (1 up to round-off) is never needed.
    thresholds = np.ascontiguousarray(
        np.cumsum(transitions, axis=-1)[:, :, : k - 1].transpose(0, 2, 1)
    )

    data = np.empty((d, records), dtype=np.int64)
    first = (rng_records.random(records) * k).astype(np.int64)
    data[0] = np.minimum(first, k - 1)  # a0 is uniform
    # The chain dependency forces a loop over attributes; each step is
    # vectorised over records. Inverse-CDF sampling: the next value is the
    # number of CDF thresholds that the uniform draw reaches. Uniforms are
    # drawn attribute by attribute, so column j only depends on the first
    # (j + 1) * records draws and the problems are nested across d.
    for i in range(d - 1):
        uniform = rng_records.random(records)
        current = data[i]
        nxt = np.zeros(records, dtype=np.int64)
        for v in range(k - 1):
            nxt += uniform >= thresholds[i, v].take(current)
        data[i + 1] = nxt
    return data.T  # (records, d) view, Fortran-ordered: columns contiguous


def triple_counts(data: np.ndarray) -> np.ndarray:
    """Exact count tables of all consecutive triples of columns.

    Args:
        data: ``int`` array of shape ``(records, d)``, values in
            ``[0, CARDINALITY)``.

    Returns:
        ``int64`` array of shape ``(d - 2, 10, 10, 10)`` whose entry
        ``[i, u, v, w]`` counts the records with ``a{i}=u, a{i+1}=v,
        a{i+2}=w``.
    """
    k = CARDINALITY
    columns = np.asarray(data, dtype=np.int64).T  # (d, records)
    m = columns.shape[0] - CLIQUE_SIZE + 1
    cells = k**CLIQUE_SIZE
    # Flat cell index of every (record, clique), offset by clique * cells.
    flat = columns[:-2] * (k * k) + columns[1:-1] * k + columns[2:]
    flat += (np.arange(m, dtype=np.int64) * cells)[:, None]
    counts = np.bincount(flat.ravel(), minlength=m * cells)
    return counts.reshape(m, k, k, k)


def markov_chain_problem(
    d: int, records: int = 10_000, sigma: float = 10.0, seed: int = 0
) -> dict:
    """Build the scalability benchmark problem.

    Args:
        d: Number of attributes (at least 3).
        records: Number of records.
        sigma: Standard deviation of the Gaussian noise added to every cell.
        seed: Seed of the numpy random streams.

    Returns:
        A dict with keys

        * ``domain``: ``{"a0": 10, "a1": 10, ...}`` in attribute order;
        * ``cliques``: list of ``d - 2`` name triples ``("a{i}", "a{i+1}",
          "a{i+2}")``;
        * ``noisy``: list of ``float64`` arrays of shape ``(10, 10, 10)``, the
          noisy counts of each clique (axes in clique order);
        * ``true``: list of ``int64`` arrays of shape ``(10, 10, 10)``, the
          exact counts of each clique;
        * ``sigma``: the noise standard deviation (float);
        * ``records``: the number of records (int);
        * ``data``: the ``(records, d)`` ``int64`` record array (for
          validation; not needed by estimators).
    """
    if d < CLIQUE_SIZE:
        raise ValueError(f"d must be at least {CLIQUE_SIZE}, got {d}")
    names = attribute_names(d)
    ss_transitions, ss_records, ss_noise = np.random.SeedSequence(seed).spawn(3)
    data = sample_markov_chain(
        d, records, np.random.default_rng(ss_transitions),
        np.random.default_rng(ss_records),
    )
    true = triple_counts(data)
    noise = np.random.default_rng(ss_noise).normal(0.0, sigma, size=true.shape)
    noisy = true + noise
    return {
        "domain": {name: CARDINALITY for name in names},
        "cliques": [tuple(names[i:i + CLIQUE_SIZE]) for i in range(len(true))],
        "noisy": list(noisy),
        "true": list(true),
        "sigma": float(sigma),
        "records": int(records),
        "data": data,
    }

SIGMA = 10.0
#: The generated problems' junction-tree limits (cells).
GEN_MAX_CLIQUE_CELLS = 1_000_000
GEN_MAX_MODEL_CELLS = 4_000_000

#: Trajectory iterations of the largest problems (junction trees of 2.3M-4M cells), to keep the suite near an
#: hour on 2 cores; every other problem runs 1000.
ITERS = {"adult": 500, "loans": 500, "gen50": 500, "gen200": 500}

PROBLEMS = (
    "chain10", "chain100", "chain1000",
    "titanic", "adult", "loans", "stroke",
    "adult_mst", "nltcs_2way",
    "gen15", "gen50", "gen200",
)


def _noisy(true: list[np.ndarray], sigma: float, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [t + rng.normal(0.0, sigma, size=t.shape) for t in true]


def chain(d: int, seed: int = 0) -> dict:
    p = markov_chain_problem(d, seed=seed)
    return {
        "domain": p["domain"],
        "cliques": [tuple(c) for c in p["cliques"]],
        "noisy": [np.asarray(y, dtype=np.float64) for y in p["noisy"]],
        "true": [np.asarray(t, dtype=np.float64) for t in p["true"]],
        "sigma": p["sigma"],
        "records": p["records"],
        "description": f"chain of triples: {d} attributes of 10 values, {d - 2} consecutive triples, "
        f"{p['records']:,} records (random Markov chain), sigma {p['sigma']:g}",
    }


def dataset_problem(name: str, seed: int = 0) -> dict:
    import pgmjax as pj

    data = pj.datasets.load(name)
    dom = data.domain
    cliques = list(pj.datasets.benchmark_cliques(name, dom))
    true = [data.marginal(c) for c in cliques]
    which = "the published 15 three-way cliques" if name == "adult" else "benchmark_cliques (15 random 3-way, seed 0)"
    return {
        "domain": {a: int(dom[a]) for a in dom.attributes},
        "cliques": [tuple(c) for c in cliques],
        "noisy": _noisy(true, SIGMA, seed),
        "true": true,
        "sigma": SIGMA,
        "records": len(data),
        "description": f"{name}: {len(dom)} attributes, {len(data):,} records, {which}, sigma {SIGMA:g}",
    }


def mutual_information(joint: np.ndarray) -> float:
    """The mutual information (nats) of a two-way table's two attributes."""
    p = joint / joint.sum()
    pa = p.sum(1, keepdims=True)
    pb = p.sum(0, keepdims=True)
    nz = p > 0
    return float((p[nz] * np.log(p[nz] / (pa @ pb)[nz])).sum())


def chow_liu(data, sort: bool = True) -> tuple[list[tuple[str, str]], dict]:
    """The Chow-Liu tree of a dataset: the maximum spanning tree of its attributes' pairwise mutual information
    (Kruskal's algorithm, networkx), the MST-style measurement set of the engine, mechanism and coverage
    benchmarks.

    Returns:
        ``(edges, mi)``: the tree's edges, each in attribute order, sorted by attribute index (``sort``) or in
        networkx's order; ``mi["a|b"]``, each edge's mutual information in nats.
    """
    import itertools

    import networkx as nx

    attrs = list(data.domain.attributes)
    pairs = list(itertools.combinations(attrs, 2))
    graph = nx.Graph()
    graph.add_nodes_from(attrs)
    mi = {}
    for pair, table in zip(pairs, data.marginals(pairs)):
        mi[pair] = mutual_information(table)
        graph.add_edge(*pair, weight=mi[pair])
    index = {a: i for i, a in enumerate(attrs)}
    edges = [tuple(sorted(e, key=index.get)) for e in nx.maximum_spanning_tree(graph, algorithm="kruskal").edges()]
    if sort:
        edges.sort(key=lambda e: (index[e[0]], index[e[1]]))
    return edges, {f"{a}|{b}": mi[(a, b)] for a, b in edges}


def adult_mst(seed: int = 0) -> dict:
    import pgmjax as pj

    data = pj.datasets.load("adult")
    dom = data.domain
    attrs = list(dom.attributes)
    edges = sorted(chow_liu(data)[0])
    cliques = [(a,) for a in attrs] + edges
    return _measured(data, cliques, seed, f"adult: all {len(attrs)} one-way marginals + the {len(edges)} two-way "
                     f"marginals of the maximum spanning tree of pairwise mutual information, sigma {SIGMA:g}")


def nltcs_2way(seed: int = 0) -> dict:
    import itertools

    import pgmjax as pj

    data = pj.datasets.load("nltcs")
    dom = data.domain
    attrs = list(dom.attributes)
    cliques = list(itertools.combinations(attrs, 2))
    return _measured(data, cliques, seed, f"nltcs: {len(attrs)} binary attributes, {len(data):,} records, all "
                     f"{len(cliques)} two-way marginals (loopy), sigma {SIGMA:g}")


def _measured(data, cliques: list, seed: int, description: str) -> dict:
    """A problem of a shared dataset: its true marginals on ``cliques`` and their answers with noise ``SIGMA``."""
    true = [data.marginal(c) for c in cliques]
    return {"domain": {a: int(data.domain[a]) for a in data.domain.attributes}, "cliques": cliques,
            "noisy": _noisy(true, SIGMA, seed), "true": true, "sigma": SIGMA, "records": len(data),
            "description": description}


def generated(d: int, seed: int = 0, records: int = 50_000) -> dict:
    """An irregular random problem with correlated data (see the module docstring)."""
    import pgmjax as pj

    rng = np.random.default_rng([seed, d])
    sizes = rng.integers(2, 101, size=d)
    big = rng.choice(d, size=max(1, d // 15), replace=False)
    sizes[big] = rng.integers(200, 1001, size=len(big))
    names = [f"x{i}" for i in range(d)]
    # Random tree: attribute order[i] hangs under a uniformly drawn earlier one (a random recursive tree).
    order = rng.permutation(d)
    parent = {int(order[0]): -1}
    for i in range(1, d):
        parent[int(order[i])] = int(order[rng.integers(0, i)])
    # Data: ancestral sampling along the tree, Dirichlet(0.5) conditional tables.
    data = np.empty((records, d), dtype=np.int64)
    for v in order:
        v = int(v)
        k = int(sizes[v])
        if parent[v] < 0:
            p = rng.dirichlet(0.5 * np.ones(k))
            data[:, v] = rng.choice(k, size=records, p=p)
            continue
        u = parent[v]
        cpt = rng.dirichlet(0.5 * np.ones(k), size=int(sizes[u]))
        cdf = np.cumsum(cpt, axis=1)
        cdf[:, -1] = 1.0
        draws = rng.random(records)
        col = np.empty(records, dtype=np.int64)
        pv = data[:, u]
        for start in range(0, records, 5000):  # bounded memory: 5000 x k comparisons at a time
            sl = slice(start, start + 5000)
            col[sl] = (draws[sl, None] >= cdf[pv[sl]]).sum(axis=1)
        data[:, v] = np.minimum(col, k - 1)
    dom = pj.Domain(dict(zip(names, (int(s) for s in sizes))))
    dataset = pj.Dataset(data, dom)
    edges = [tuple(sorted((v, parent[v]))) for v in range(d) if parent[v] >= 0]
    cliques = [(names[a], names[b]) for a, b in edges]
    # Three-way cliques of nearby attributes (a node and two attributes within tree distance 2), re-drawn
    # while the junction tree would get too large.
    adj: dict[int, set] = {v: set() for v in range(d)}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    triples: list[tuple] = []
    tries = 0
    while len(triples) < d // 5 and tries < 20 * d:
        tries += 1
        v = int(rng.integers(0, d))
        near = set(adj[v])
        for w in list(adj[v]):
            near |= adj[w]
        near.discard(v)
        if len(near) < 2:
            continue
        a, b = rng.choice(sorted(near), size=2, replace=False)
        t = tuple(names[i] for i in sorted((v, int(a), int(b))))
        if t in triples or dom.size(t) > GEN_MAX_CLIQUE_CELLS // 4:
            continue
        tree = pj.junction_tree(dom, cliques + triples + [t])
        cells = [dom.size(c) for c in tree.cliques]
        if max(cells) > GEN_MAX_CLIQUE_CELLS or sum(cells) > GEN_MAX_MODEL_CELLS:
            continue
        triples.append(t)
    cliques = cliques + triples
    true = [dataset.marginal(c) for c in cliques]
    return {
        "domain": dict(zip(names, (int(s) for s in sizes))),
        "cliques": cliques,
        "noisy": _noisy(true, SIGMA, seed + 1),
        "true": true,
        "sigma": SIGMA,
        "records": records,
        "description": f"generated: {d} attributes (sizes {int(sizes.min())}..{int(sizes.max())}, "
        f"{len(big)} of 200..1000), {records:,} records from a random Bayesian tree, {len(edges)} tree edges "
        f"+ {len(triples)} three-way cliques, sigma {SIGMA:g}",
    }


#: Generated loopy problems: name -> (shape, attribute sizes range, records).
LOOPY = {
    "cycle5_tiny": ("cycle", 5, (2, 4), 2_000),
    "grid2x3_tiny": ("grid", (2, 3), (2, 4), 2_000),
    "cycle8": ("cycle", 8, (3, 8), 20_000),
    "grid3x3": ("grid", (3, 3), (3, 6), 20_000),
    "grid3x4": ("grid", (3, 4), (2, 5), 50_000),
}
def loopy(name: str, seed: int = 0) -> dict:
    """A generated loopy problem (``LOOPY[name]``) in the engine problems' format.

    Records come from a random pairwise model on the same graph (Gaussian log-potentials of scale 1 on every
    edge, sampled exactly from its full table, which is small), so the measured marginals are correlated;
    every edge is measured with identity queries and Gaussian noise of scale :data:`SIGMA`.
    """
    shape, dims, (lo, hi), records = LOOPY[name]
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    if shape == "cycle":
        n = dims
        edges = [(i, (i + 1) % n) for i in range(n)]
    else:
        r, c = dims
        n = r * c
        edges = [(i * c + j, i * c + j + 1) for i in range(r) for j in range(c - 1)]
        edges += [(i * c + j, (i + 1) * c + j) for i in range(r - 1) for j in range(c)]
    sizes = [int(s) for s in rng.integers(lo, hi + 1, size=n)]
    names = [f"v{i}" for i in range(n)]
    logp = np.zeros(sizes)
    for a, b in edges:
        shape_ab = [1] * n
        shape_ab[a], shape_ab[b] = sizes[a], sizes[b]
        logp = logp + rng.normal(0, 1, (sizes[a], sizes[b])).reshape(shape_ab)
    p = np.exp(logp - logp.max())
    counts = rng.multinomial(records, (p / p.sum()).ravel()).reshape(sizes).astype(np.float64)
    cliques = [(names[a], names[b]) for a, b in sorted(tuple(sorted(e)) for e in edges)]

    def marg(cl):
        keep = [names.index(x) for x in cl]
        return counts.sum(axis=tuple(i for i in range(n) if i not in keep))

    true = [marg(cl) for cl in cliques]
    noisy = [t + rng.normal(0, SIGMA, t.shape) for t in true]
    return {"domain": dict(zip(names, sizes)), "cliques": cliques, "noisy": noisy, "true": true, "sigma": SIGMA,
            "records": records, "description": f"generated loopy {shape} {dims}: {n} attributes of sizes "
            f"{min(sizes)}..{max(sizes)}, {records:,} records from a random pairwise model, {len(cliques)} edges "
            f"measured, sigma {SIGMA:g}"}


def chain_structure(d: int, seed: int = 0, **_) -> dict:
    """A chain of ``d`` attributes of 10 values, every consecutive triple measured; random answers (a size
    test: the values do not change the work, and drawing records would cost more than the fit)."""
    rng = np.random.default_rng(seed)
    names = [f"a{i}" for i in range(d)]
    cliques = [tuple(names[i:i + 3]) for i in range(d - 2)]
    noisy = [rng.random((10, 10, 10)) * 20 for _ in cliques]
    return {"domain": dict.fromkeys(names, 10), "cliques": cliques, "noisy": noisy, "sigma": 10.0}


def tree_structure(d: int, seed: int = 0, small: int = 100, big: int = 1000) -> dict:
    """A generated model like :func:`generated` (sizes 2..``small``, one attribute in 15 of
    ``big // 5``..``big``, a random recursive tree), its edges measured, random answers."""
    rng = np.random.default_rng([seed, d])
    sizes = rng.integers(2, small + 1, size=d)
    which = rng.choice(d, size=max(1, d // 15), replace=False)
    sizes[which] = rng.integers(big // 5, big + 1, size=len(which))
    names = [f"x{i}" for i in range(d)]
    order = rng.permutation(d)
    cliques = []
    for i in range(1, d):
        a, b = int(order[i]), int(order[rng.integers(0, i)])
        cliques.append((names[min(a, b)], names[max(a, b)]))
    noisy = [rng.random((int(sizes[int(a[1:])]), int(sizes[int(b[1:])]))) * 20 for a, b in cliques]
    return {"domain": dict(zip(names, (int(s) for s in sizes))), "cliques": cliques, "noisy": noisy, "sigma": 10.0}


def make(name: str, seed: int = 0) -> dict:
    """The problem called ``name``: one of :data:`PROBLEMS` or a generated loopy one (:data:`LOOPY`)."""
    if name.startswith("chain"):
        return chain(int(name[5:]), seed)
    if name in ("titanic", "adult", "loans", "stroke"):
        return dataset_problem(name, seed)
    if name == "adult_mst":
        return adult_mst(seed)
    if name == "nltcs_2way":
        return nltcs_2way(seed)
    if name.startswith("gen"):
        return generated(int(name[3:]), seed)
    if name in LOOPY:
        return loopy(name, seed)
    raise ValueError(f"unknown problem {name!r}; expected one of {PROBLEMS} or {tuple(LOOPY)}")


def save(problem: dict, path: str) -> None:
    """Write a problem to ``path`` (``.npz``) for the engines' child processes (numpy only to read back)."""
    arrays = {f"noisy{i}": y for i, y in enumerate(problem["noisy"])}
    arrays.update({f"true{i}": t for i, t in enumerate(problem["true"])})
    meta = {k: problem[k] for k in ("domain", "sigma", "records", "description")}
    meta["cliques"] = [list(c) for c in problem["cliques"]]
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)


def load(path: str) -> dict:
    """Read a problem written by :func:`save`."""
    with np.load(path) as f:
        meta = json.loads(str(f["meta"]))
        n = len(meta["cliques"])
        noisy = [f[f"noisy{i}"] for i in range(n)]
        true = [f[f"true{i}"] for i in range(n)]
    meta["cliques"] = [tuple(c) for c in meta["cliques"]]
    meta["noisy"], meta["true"] = noisy, true
    return meta


def timed_fits(path: str):
    """pgmjax's fit of a saved problem, timed: ``timed(n) -> (seconds, fit)`` runs ``estimate(n, report=True)``
    (mirror descent, 50-iteration chunks) and waits for its potentials; ``fit`` is the ``pj.Fit`` ``(model,
    report)``. For the benchmarks' child processes."""
    import time

    import jax

    import pgmjax as pj

    p = load(path)
    domain = pj.Domain(p["domain"])
    meas = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]

    def timed(n: int):
        t = time.perf_counter()
        fit = pj.estimate(domain, meas, "mirror_descent", iters=n, chunk=50, report=True)
        jax.block_until_ready(fit.model.theta)
        return time.perf_counter() - t, fit

    return timed


def saved(names, folder: str):
    """``(name, path)`` of each problem, written once into ``folder`` (:func:`save`), for child processes."""
    for name in names:
        path = os.path.join(folder, f"{name}.npz")
        save(make(name), path)
        yield name, path
