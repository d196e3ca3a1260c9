"""The shared benchmark datasets: where they live, and their ICML 2019 benchmark workloads.

The data folder is an argument everywhere; by default it is found by
:func:`data_dir`: ``$PGMJAX_DATA``, else ``shared/data`` beside the repository
that holds the package (``<repo>/../shared/data``, found from ``pgmjax.__file__``,
so a notebook opened in ``notebooks/`` finds it), else ``../shared/data``
relative to the working directory. Each dataset ``<name>`` is ``<folder>/<name>/<name>.csv``
(or ``.csv.gz``) plus ``<name>-domain.json``.

Which attributes are numeric (Prefix queries) and which 3-way cliques form
each benchmark workload are fixed here and recorded with every result:

* Adult: the 15 cliques and five numeric attributes of the ICML 2019
  benchmark (McKenna, Sheldon & Miklau, arXiv 1901.09136, Section 5.1).
* Titanic: Age and Fare (the two binned numeric columns).
* Loans, Stroke: the attributes with 100 or 101 values (binned numeric
  columns, a 101st value for missing), the rule of the 2021 benchmark scripts.
* Titanic, Loans, Stroke, NLTCS: 15 random 3-way cliques drawn once with
  ``numpy.random.default_rng(0)`` by :func:`benchmark_cliques` (deterministic),
  skipping any draw that would make the model's junction tree larger than
  :data:`MAX_BENCHMARK_MODEL_CELLS` (the size of Adult's published benchmark
  model). Unconstrained, the seed-0 draws give Titanic a 46M-cell and Loans a
  377M-cell clique (1.5 GB per float32 table), which only a large GPU holds;
  with the cap, Titanic skips 1 draw (680,400 cells), Loans 5 (4.0M cells),
  Stroke none.
* NLTCS: binary attributes only, none numeric.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .data.dataset import Dataset
from .data.domain import Clique, Domain
from .graph.junction import junction_tree

NAMES = ("titanic", "adult", "loans", "stroke", "nltcs")

NUMERIC: dict[str, tuple[str, ...]] = {
    "adult": ("age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week"),
    "titanic": ("Age", "Fare"),
    "loans": (
        "loan_amnt", "funded_amnt", "funded_amnt_inv", "int_rate", "installment", "annual_inc", "dti",
        "revol_bal", "total_acc", "total_pymnt", "total_pymnt_inv", "total_rec_prncp", "total_rec_int",
        "total_rec_late_fee", "recoveries", "collection_recovery_fee", "last_pymnt_amnt", "delinq_amnt",
        "settlement_amount", "settlement_percentage",
    ),
    "stroke": (
        "DALIVED", "DDEADC", "DDEADD", "DMAJNCHD", "DPED", "DRSHD", "DRSISCD", "DRSUNKD", "DSIDED", "EXPD14",
        "EXPD6", "EXPDD", "FDEADC", "FDEADD", "FLASTD", "FU1_COMP", "HOSPNUM", "HOURLOCAL", "MINLOCAL",
        "ONDRUG", "RSBP", "TD",
    ),
    "nltcs": (),
}

ADULT_CLIQUES: tuple[Clique, ...] = (
    ("occupation", "race", "capital-loss"),
    ("occupation", "sex", "native-country"),
    ("marital-status", "relationship", "income>50K"),
    ("age", "education-num", "sex"),
    ("workclass", "education-num", "occupation"),
    ("marital-status", "occupation", "income>50K"),
    ("race", "native-country", "income>50K"),
    ("occupation", "capital-gain", "income>50K"),
    ("marital-status", "hours-per-week", "income>50K"),
    ("workclass", "race", "capital-gain"),
    ("marital-status", "relationship", "capital-gain"),
    ("workclass", "education-num", "capital-gain"),
    ("education-num", "relationship", "race"),
    ("fnlwgt", "hours-per-week", "income>50K"),
    ("workclass", "sex", "native-country"),
)


def data_dir(path: str | os.PathLike | None = None) -> str:
    """The data folder, searched in this order.

    1. ``path``, if given;
    2. ``$PGMJAX_DATA``, if set and not empty;
    3. ``shared/data`` beside the repository holding the package: ``<repo>/../shared/data``, where
       ``<repo>`` is the folder above ``pgmjax/`` (found from ``pgmjax.__file__``, so it does not depend
       on the working directory: a notebook in ``notebooks/`` finds it), if that folder exists;
    4. ``../shared/data`` relative to the working directory, if it exists;
    5. otherwise the folder of step 3 (the error of :func:`files` then names it).

    Args:
        path: an explicit folder, or None for the search above.

    Returns:
        The folder's path (normalised; it may not exist only in case 5 or when given).
    """
    if path is not None:
        return os.fspath(path)
    if os.environ.get("PGMJAX_DATA"):
        return os.environ["PGMJAX_DATA"]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pgmjax/datasets.py
    beside = os.path.normpath(os.path.join(repo, "..", "shared", "data"))
    if os.path.isdir(beside):
        return beside
    here = os.path.join(os.getcwd(), "..", "shared", "data")
    if os.path.isdir(here):
        return os.path.normpath(here)
    return beside


def files(name: str, path: str | os.PathLike | None = None) -> tuple[str, str]:
    """``(csv, domain json)`` paths of dataset ``name``; FileNotFoundError with the folder looked in."""
    folder = os.path.join(data_dir(path), name)
    domain = os.path.join(folder, f"{name}-domain.json")
    for csv in (os.path.join(folder, f"{name}.csv"), os.path.join(folder, f"{name}.csv.gz")):
        if os.path.isfile(csv) and os.path.isfile(domain):
            return csv, domain
    raise FileNotFoundError(
        f"dataset {name!r}: no {name}.csv(.gz) and {name}-domain.json in {folder} "
        "(pass the data folder or set PGMJAX_DATA; the guide's Getting started page says where to get the tables)"
    )


def load(name: str, path: str | os.PathLike | None = None) -> Dataset:
    """Load a shared benchmark dataset by name (``"adult"``, ``"titanic"``, ...)."""
    csv, domain = files(name, path)
    return Dataset.from_csv(csv, domain)


#: Junction-tree size cap (cells) of the random benchmark workloads: 2^22, just above the 3,914,006 cells
#: of Adult's published 15 cliques, so every dataset's benchmark model is of Adult's scale.
MAX_BENCHMARK_MODEL_CELLS = 2**22


def benchmark_cliques(
    name: str, domain: Domain, count: int = 15, size: int = 3, max_model_cells: int | None = MAX_BENCHMARK_MODEL_CELLS,
    seed: int = 0,
) -> tuple[Clique, ...]:
    """The benchmark workload's cliques: Adult's published 15, else ``count`` random ``size``-way cliques.

    Args:
        name: the dataset's name (``"adult"`` returns the published cliques).
        domain: its domain.
        count: number of cliques.
        size: attributes per clique.
        max_model_cells: a drawn clique that would make the junction tree of the cliques so far hold more
            cells than this is skipped (the draw goes on); None draws without the cap.
        seed: the draw's seed (the benchmark's workload is seed 0; other seeds give other workloads of the
            same kind, e.g. to see how a result varies with the draw).

    Returns:
        The cliques, each in domain order, in the order drawn (``numpy.random.default_rng(seed)``).

    Example:
        >>> benchmark_cliques("toy", Domain({"a": 2, "b": 3, "c": 4, "d": 5}), count=2)
        (('b', 'c', 'd'), ('a', 'c', 'd'))
    """
    if name == "adult":
        return ADULT_CLIQUES
    if count > math.comb(len(domain), size):
        raise ValueError(f"benchmark_cliques: {name!r} has {len(domain)} attributes: fewer than {count} distinct {size}-way cliques")
    rng = np.random.default_rng(seed)
    attrs = domain.attributes
    chosen: list[Clique] = []
    skipped: set[Clique] = set()
    while len(chosen) < count:
        c = tuple(attrs[i] for i in sorted(rng.choice(len(attrs), size, replace=False)))
        if c in chosen or c in skipped:
            continue
        if max_model_cells is not None and sum(domain.size(q) for q in junction_tree(domain, [*chosen, c]).cliques) > max_model_cells:
            skipped.add(c)
            if len(skipped) + len(chosen) >= math.comb(len(domain), size):
                raise ValueError(f"benchmark_cliques: no {count} {size}-way cliques of {name!r} keep the model within {max_model_cells} cells")
            continue
        chosen.append(c)
    return tuple(chosen)
