"""The mechanisms suite's tables: the shared datasets by name, and generated tree-structured tables.

``generated<d>`` (``generated30``, ``generated50``) is a table of ``d`` columns of 2 to 40 values drawn from a
random tree-structured model (:func:`generated_table`); ``generated`` alone is :data:`GENERATED`, a table with
a few wide columns. Everything else is a shared dataset (``pgmjax.datasets.load``).
"""

from __future__ import annotations


GENERATED = {"rows": 136_000, "sizes": (2, 4, 7, 12, 25, 50, 100, 250, 600), "alpha": 0.15, "seed": 1007}


def generated_table(rows: int, sizes, alpha: float, seed: int):
    """A table drawn from a random tree-structured model: each column (in a random order) depends on one
    earlier column through Dirichlet(``0.6 alpha``) conditionals; the first has a Dirichlet(``alpha``) marginal.
    Small ``alpha`` gives skewed columns: many values below MST's compression threshold, many small cells."""
    import numpy as np

    import pgmjax as pj

    rng = np.random.default_rng(seed)
    d = len(sizes)
    order = rng.permutation(d)
    cols = [None] * d
    for k, j in enumerate(order):
        if k == 0:
            cols[j] = rng.choice(sizes[j], rows, p=rng.dirichlet(np.full(sizes[j], alpha)))
            continue
        parent = order[rng.integers(0, k)]
        cpt = rng.dirichlet(np.full(sizes[j], 0.6 * alpha), size=sizes[parent])
        u = rng.random(rows)[:, None]
        cols[j] = (u > np.cumsum(cpt[cols[parent]], axis=1)).sum(1).clip(0, sizes[j] - 1)
    return pj.Dataset(np.stack(cols, 1), pj.Domain({f"c{j}": s for j, s in enumerate(sizes)}))


def is_generated(name: str) -> bool:
    """``generated<d>``: a table of :func:`load_table` (``generated`` alone is :data:`GENERATED`)."""
    return name.startswith("generated") and name[len("generated"):].isdigit()


def load_table(name: str, data_folder=None, rows: int = 100_000, seed: int = 7):
    """A shared dataset by name, or ``generated<d>``: ``d`` columns of 2 to 40 values, ``rows`` rows."""
    import numpy as np

    import pgmjax as pj

    if is_generated(name):
        d = int(name[len("generated"):])
        sizes = tuple(int(s) for s in np.random.default_rng([seed, d]).integers(2, 41, size=d))
        return generated_table(rows, sizes, alpha=0.3, seed=seed)
    return pj.datasets.load(name, data_folder)
