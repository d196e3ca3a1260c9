"""Problems of the engine benchmark (``bench/engine.py``): pgmjax vs mbi 2.0 on the same noisy marginals.

Every problem is a dict with

* ``domain``: ``{name: size}`` in attribute order;
* ``cliques``: the measured cliques (tuples of names; a table's axes follow the clique's order);
* ``noisy``: one float64 array per clique, ``y = true marginal + N(0, sigma^2)`` cell-wise;
* ``true``: the exact marginals (for the L1-error sanity check);
* ``sigma``, ``records``, ``description``.

The noise is drawn here once (fixed numpy seeds), and both engines read the same arrays from one ``.npz``
file (:func:`save` / :func:`load`), so they fit exactly the same measurements.

Problems (``PROBLEMS``):

* ``chain10``, ``chain100``, ``chain1000``: the scalability problem of ``scalability_problem.py`` (d attributes
  of 10 values, 10,000 records from a random Markov chain, every consecutive triple measured, sigma 10).
* ``titanic``, ``adult``, ``loans``, ``stroke``: the ICML 2019 benchmark cliques of the dataset
  (``pgmjax.data.datasets.benchmark_cliques``; Adult's published 15), identity measurements, sigma 10.
* ``adult_mst``: Adult, all 14 one-way marginals plus the 13 two-way marginals of the maximum spanning tree of
  the data's pairwise mutual information (Chow-Liu tree), sigma 10.
* ``nltcs_2way``: NLTCS (16 binary attributes), all 120 two-way marginals (a loopy model: its junction tree is
  one 65,536-cell clique), sigma 10.
* ``gen15``, ``gen50``, ``gen200``: generated irregular problems (:func:`generated`): sizes in 2..100 with a
  few attributes of 200..1000 values, 50,000 records sampled from a random Bayesian tree (Dirichlet(0.5)
  conditional tables), every tree edge measured plus up to d // 5 three-way cliques of nearby attributes (a node and two
  attributes within tree distance 2; at most 250,000 cells each), a draw being skipped when it would give the
  junction tree a clique of more than 1e6 cells or more than 4e6 cells in all.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

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
    from scalability_problem import make_problem

    p = make_problem(d, seed=seed)
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


def _mutual_information(joint: np.ndarray) -> float:
    p = joint / joint.sum()
    pa = p.sum(1, keepdims=True)
    pb = p.sum(0, keepdims=True)
    nz = p > 0
    return float((p[nz] * np.log(p[nz] / (pa @ pb)[nz])).sum())


def adult_mst(seed: int = 0) -> dict:
    import itertools

    import networkx as nx

    import pgmjax as pj

    data = pj.datasets.load("adult")
    dom = data.domain
    attrs = list(dom.attributes)
    g = nx.Graph()
    for a, b in itertools.combinations(attrs, 2):
        g.add_edge(a, b, weight=_mutual_information(data.marginal((a, b))))
    tree = nx.maximum_spanning_tree(g)
    edges = sorted(tuple(sorted(e, key=attrs.index)) for e in tree.edges())
    cliques = [(a,) for a in attrs] + edges
    true = [data.marginal(c) for c in cliques]
    return {
        "domain": {a: int(dom[a]) for a in attrs},
        "cliques": cliques,
        "noisy": _noisy(true, SIGMA, seed),
        "true": true,
        "sigma": SIGMA,
        "records": len(data),
        "description": f"adult: all {len(attrs)} one-way marginals + the {len(edges)} two-way marginals of the "
        f"maximum spanning tree of pairwise mutual information, sigma {SIGMA:g}",
    }


def nltcs_2way(seed: int = 0) -> dict:
    import itertools

    import pgmjax as pj

    data = pj.datasets.load("nltcs")
    dom = data.domain
    attrs = list(dom.attributes)
    cliques = list(itertools.combinations(attrs, 2))
    true = [data.marginal(c) for c in cliques]
    return {
        "domain": {a: int(dom[a]) for a in attrs},
        "cliques": cliques,
        "noisy": _noisy(true, SIGMA, seed),
        "true": true,
        "sigma": SIGMA,
        "records": len(data),
        "description": f"nltcs: {len(attrs)} binary attributes, {len(data):,} records, all {len(cliques)} "
        f"two-way marginals (loopy), sigma {SIGMA:g}",
    }


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


def make(name: str, seed: int = 0) -> dict:
    """The problem called ``name`` (one of :data:`PROBLEMS`)."""
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
    raise ValueError(f"unknown problem {name!r}; expected one of {PROBLEMS}")


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
    """pgmjax's fit of a saved problem, timed: ``timed(n) -> (seconds, model)`` runs ``estimate(n)`` (mirror
    descent, 50-iteration chunks) and waits for its potentials. For the benchmarks' child processes."""
    import time

    import jax

    import pgmjax as pj

    p = load(path)
    domain = pj.Domain(p["domain"])
    meas = [pj.Measurement(c, y, stddev=p["sigma"]) for c, y in zip(p["cliques"], p["noisy"])]

    def timed(n: int):
        t = time.perf_counter()
        model = pj.estimate(domain, meas, "mirror_descent", iters=n, chunk=50)
        jax.block_until_ready(model.theta)
        return time.perf_counter() - t, model

    return timed


def saved(names, folder: str):
    """``(name, path)`` of each problem, written once into ``folder`` (:func:`save`), for child processes."""
    for name in names:
        path = os.path.join(folder, f"{name}.npz")
        save(make(name), path)
        yield name, path


def alternating(script: str, names, rounds: int, arms, child_args, arm_key: str = "arm", drop_env=("XLA_FLAGS",)):
    """Rows of child results, the arms of a comparison alternating so drift of a shared machine hits all alike.

    For each problem (saved once, :func:`saved`) and each of ``rounds`` rounds, every arm runs once in a fresh
    interpreter (:func:`child_result`) with the parent's environment less ``drop_env``; a child that fails is
    reported and skipped. ``child_args(path, arm, round, folder)`` gives a child's arguments (``folder``: a
    scratch folder that lives for the whole comparison).

    Yields:
        ``{"problem": name, arm_key: arm, "round": round, **result}`` for each child that succeeded.
    """
    import tempfile

    env = {k: v for k, v in os.environ.items() if k not in drop_env}
    with tempfile.TemporaryDirectory() as folder:
        for name, path in saved(names, folder):
            for rnd in range(rounds):
                for arm in arms:
                    result = child_result(script, child_args(path, arm, rnd, folder), env, f"{name} {arm}")
                    if result is not None:
                        yield {"problem": name, arm_key: arm, "round": rnd, **result}


def child_result(script: str, args: list[str], env: dict, label: str, timeout: float | None = None) -> dict | None:
    """Run ``script --child *args RESULT`` in a fresh interpreter with ``env`` and return the JSON it wrote to
    RESULT (its last argument); None, with its error printed under ``label``, when it failed or ran past
    ``timeout`` seconds (then killed)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.json")
        try:
            proc = subprocess.run([sys.executable, script, "--child", *args, result], env=env, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(label, f"killed after {timeout:.0f} s", flush=True)
            return None
        if proc.returncode:
            print(label, "failed:", proc.stderr[-1500:], flush=True)
            return None
        with open(result) as f:
            return json.load(f)

