"""The mechanisms suite's tables: the shared datasets by name, and generated tree-structured tables.

``generated<d>`` (``generated30``, ``generated50``) is a table of ``d`` columns of 2 to 40 values drawn from a
random tree-structured model (:func:`generated_table`); ``generated`` alone is :data:`GENERATED`, a table with
a few wide columns. ``wide<d>`` (``wide15``, ``wide30``) is ``generated<d>``'s first ``d - 3`` columns and three
100-value "timestamp" columns, each a noisy copy of the one before (:func:`with_timestamps`): near-duplicate wide
columns, whose pairs are near-diagonal. Everything else is a shared dataset (``pgmjax.datasets.load``).
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


def with_timestamps(data, bins: int = 100, spread: int = 3, seed: int = 0):
    """``data`` with three ``bins``-value columns ``t0``, ``t1``, ``t2`` added: ``t0`` a smooth function of ``data``'s
    first column plus noise, and each later one the one before moved by a uniform step in ``[-spread, spread]``
    (clipped): near-duplicates, as successive timestamps of one record are."""
    import numpy as np

    import pgmjax as pj

    rng = np.random.default_rng(seed)
    first = data.records[:, 0]
    base = (first * (bins // max(1, data.domain.shape[0]))) + rng.integers(0, bins // 4, len(data))
    cols = [np.clip(base, 0, bins - 1)]
    for _ in range(2):
        cols.append(np.clip(cols[-1] + rng.integers(-spread, spread + 1, len(data)), 0, bins - 1))
    domain = pj.Domain({**data.domain.to_dict(), "t0": bins, "t1": bins, "t2": bins})
    return pj.Dataset(np.concatenate([data.records, np.stack(cols, 1)], 1), domain)


def is_generated(name: str) -> bool:
    """``generated<d>`` or ``wide<d>``: a table of :func:`load_table` (``generated`` alone is :data:`GENERATED`)."""
    for prefix in ("generated", "wide"):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return True
    return False


def load_table(name: str, data_folder=None, rows: int = 100_000, seed: int = 7):
    """A shared dataset by name, ``generated<d>`` (``d`` columns of 2 to 40 values, ``rows`` rows), or ``wide<d>``."""
    import numpy as np

    import pgmjax as pj

    if name.startswith("wide") and is_generated(name):
        d = int(name[len("wide"):])
        if d < 4:
            raise ValueError(f"{name}: a wide table needs at least 4 columns (3 are timestamps)")
        return with_timestamps(load_table(f"generated{d - 3}", rows=rows, seed=seed), seed=seed)
    if is_generated(name):
        d = int(name[len("generated"):])
        sizes = tuple(int(s) for s in np.random.default_rng([seed, d]).integers(2, 41, size=d))
        return generated_table(rows, sizes, alpha=0.3, seed=seed)
    return pj.datasets.load(name, data_folder)
