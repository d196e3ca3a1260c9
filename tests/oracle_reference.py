"""Brute-force references for the marginal oracle: the full joint's log table and random small problems.

Used by ``tests/graph/test_oracle.py`` and ``tests/model/test_inference.py``.
"""

import numpy as np

import pgmjax as pj


def _brute_log_joint(domain, tables):
    logp = np.zeros(domain.shape)
    for c, t in tables.items():
        canon = [a for a in domain.attributes if a in c]
        shape = [domain[a] if a in c else 1 for a in domain.attributes]
        logp = logp + np.transpose(t, [c.index(a) for a in canon]).reshape(shape)
    return logp


def _random_problem(rng, kind):
    if kind == "chain":
        d = int(rng.integers(2, 6))
        dom = pj.Domain({f"x{i}": int(rng.integers(1, 7)) for i in range(d)})
        cliques = [(f"x{i}", f"x{i+1}") for i in range(d - 1)]
    elif kind == "loopy":
        dom = pj.Domain({f"x{i}": int(rng.integers(1, 5)) for i in range(4)})
        cliques = [("x0", "x1"), ("x1", "x2"), ("x2", "x3"), ("x3", "x0"), ("x0", "x2")]
    elif kind == "disconnected":
        dom = pj.Domain({f"x{i}": int(rng.integers(1, 6)) for i in range(5)})
        cliques = [("x0", "x1"), ("x3", "x2"), ("x4",)]
    else:  # random
        d = int(rng.integers(1, 7))
        dom = pj.Domain({f"x{i}": int(rng.integers(1, 7)) for i in range(d)})
        cliques = [
            tuple(dom.attributes[i] for i in rng.choice(d, int(rng.integers(1, min(3, d) + 1)), replace=False))
            for _ in range(int(rng.integers(1, 6)))
        ]
    return dom, cliques
