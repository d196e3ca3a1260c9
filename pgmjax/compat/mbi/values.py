"""``mbi``'s value types, as the libraries built on it use them: a domain, a table of records, a factor (a table of
numbers over some attributes), a noisy measurement, and a vector of factors over cliques."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...data.domain import Domain as PgmDomain

__all__ = ["Domain", "Dataset", "Factor", "LinearMeasurement", "CliqueVector", "names_of", "as_cliques"]


def names_of(attributes) -> tuple[str, ...]:
    """Attribute names as a tuple (one name alone as a tuple of one)."""
    return (attributes,) if isinstance(attributes, str) else tuple(attributes)


@dataclass(frozen=True)
class Domain:
    """Named attributes and their sizes, in order (``mbi.Domain``).

    Example:
        >>> d = Domain(["a", "b"], [2, 3])
        >>> d.size(), d.project(["b"]).config, Domain.fromdict({"a": 2}).attrs
        (6, {'b': 3}, ('a',))
    """

    attributes: tuple
    shape: tuple

    def __init__(self, attributes, shape, labels=None):
        attributes, shape = tuple(attributes), tuple(int(n) for n in shape)
        if len(attributes) != len(shape) or len(set(attributes)) != len(attributes):
            raise ValueError(f"Domain: {len(attributes)} distinct attributes and {len(shape)} sizes expected to match")
        object.__setattr__(self, "attributes", attributes)
        object.__setattr__(self, "shape", shape)

    @staticmethod
    def fromdict(config: Mapping[str, int]) -> "Domain":
        return Domain(list(config), list(config.values()))

    @property
    def attrs(self) -> tuple:
        return self.attributes

    @property
    def config(self) -> dict:
        return dict(zip(self.attributes, self.shape))

    def project(self, attributes) -> "Domain":
        names = names_of(attributes)
        unknown = [a for a in names if a not in self.attributes]
        if unknown:
            raise ValueError(f"Domain.project: {unknown} are not attributes of {self.attributes}")
        return Domain(names, [self.config[a] for a in names])

    def marginalize(self, attributes) -> "Domain":
        names = set(names_of(attributes))
        return self.project([a for a in self.attributes if a not in names])

    def axes(self, attributes) -> tuple:
        return tuple(self.attributes.index(a) for a in names_of(attributes))

    def size(self, attributes=None) -> int:
        names = self.attributes if attributes is None else names_of(attributes)
        return math.prod(self.config[a] for a in names)

    def supports(self, attributes) -> bool:
        return set(names_of(attributes)) <= set(self.attributes)

    def to_pgmjax(self) -> PgmDomain:
        """The same domain as a :class:`pgmjax.Domain`."""
        return PgmDomain(self.config)

    def __contains__(self, name) -> bool:
        return name in self.attributes

    def __getitem__(self, name) -> int:
        return self.config[name]

    def __iter__(self):
        return iter(self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)


@dataclass(frozen=True)
class Factor:
    """A table of numbers over some attributes, axes in the domain's order (``mbi.Factor``).

    Example:
        >>> f = Factor(Domain(["a", "b"], [2, 2]), np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> f.project("b").datavector().tolist(), f.datavector().tolist()
        ([4.0, 6.0], [1.0, 2.0, 3.0, 4.0])
    """

    domain: Domain
    values: np.ndarray

    def datavector(self, flatten: bool = True) -> np.ndarray:
        return np.asarray(self.values).reshape(-1) if flatten else np.asarray(self.values)

    def project(self, attributes) -> "Factor":
        names = names_of(attributes)
        summed = np.asarray(self.values).sum(
            axis=tuple(i for i, a in enumerate(self.domain.attributes) if a not in names))
        kept = [a for a in self.domain.attributes if a in names]
        return Factor(self.domain.project(names), np.transpose(summed, [kept.index(a) for a in names]))

    def sum(self) -> float:
        return float(np.sum(self.values))


@dataclass(frozen=True)
class Dataset:
    """Records over a domain (``mbi.Dataset``): from an ``(n, d)`` array, a dict of columns or a DataFrame.

    Example:
        >>> data = Dataset(np.array([[0, 1], [1, 1]]), Domain(["a", "b"], [2, 2]))
        >>> data.project("b").datavector().tolist(), data.records
        ([0.0, 2.0], 2)
    """

    columns: dict
    domain: Domain
    weights: np.ndarray | None = field(default=None)

    def __init__(self, data, domain: Domain, weights=None):
        if isinstance(data, pd.DataFrame):
            columns = {a: data[a].to_numpy() for a in domain.attributes}
        elif isinstance(data, Mapping):
            columns = {a: np.asarray(data[a]) for a in domain.attributes}
        else:
            data = np.asarray(data)
            if data.ndim != 2 or data.shape[1] != len(domain):
                raise ValueError(f"Dataset: expected an array of shape (n, {len(domain)}), got {data.shape}")
            columns = {a: data[:, i] for i, a in enumerate(domain.attributes)}
        for a, column in columns.items():
            if column.size and (column.min() < 0 or column.max() >= domain[a]):
                raise ValueError(f"Dataset: column {a!r} holds values outside [0, {domain[a]})")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "weights", None if weights is None else np.asarray(weights, np.float64))

    @property
    def records(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @property
    def df(self) -> pd.DataFrame:
        return pd.DataFrame(self.columns, columns=list(self.domain.attributes))

    def to_dict(self) -> dict:
        return dict(self.columns)

    def datavector(self, flatten: bool = True) -> np.ndarray:
        cells = np.ravel_multi_index(tuple(self.columns[a] for a in self.domain.attributes), self.domain.shape)
        counts = np.bincount(cells, weights=self.weights, minlength=self.domain.size()).astype(np.float64)
        return counts if flatten else counts.reshape(self.domain.shape)

    def project(self, cols) -> Factor:
        names = names_of(cols)
        sub = self.domain.project(names)
        return Factor(sub, Dataset({a: self.columns[a] for a in names}, sub, self.weights).datavector(flatten=False))

    def supports(self, cols) -> bool:
        return self.domain.supports(cols)


@dataclass(frozen=True)
class LinearMeasurement:
    """Noisy answers ``y`` to a query of one clique's marginal with noise ``stddev`` (``mbi.LinearMeasurement``);
    the query is the marginal itself (:meth:`Factor.datavector`), the one form this door accepts."""

    noisy_measurement: np.ndarray
    clique: tuple
    stddev: float = 1.0
    query: object = Factor.datavector

    def __post_init__(self):
        object.__setattr__(self, "clique", names_of(self.clique))


@dataclass(frozen=True)
class CliqueVector:
    """Factors over cliques (``mbi.CliqueVector``): a fitted model's potentials or marginals, which
    :func:`pgmjax.compat.mbi.estimation.mirror_descent` takes back as a warm start (``potentials=``; ``model``: the
    fit they came from, a :class:`pgmjax.GraphicalModel` or :class:`pgmjax.Fit`)."""

    domain: Domain
    cliques: list
    arrays: dict
    model: object = None

    def __getitem__(self, clique) -> Factor:
        clique = names_of(clique)
        return Factor(self.domain.project(clique), self.arrays[clique])

    def project(self, clique) -> Factor:
        clique = names_of(clique)
        host = next((c for c in self.cliques if set(clique) <= set(c)), None)
        if host is None:
            raise ValueError(f"CliqueVector.project: no clique holds {clique}")
        return self[host].project(clique)

    def supports(self, clique) -> bool:
        return any(set(names_of(clique)) <= set(c) for c in self.cliques)


def as_cliques(cliques: Sequence) -> list[tuple]:
    """Cliques given as tuples, lists or sets, as tuples (a set in sorted order)."""
    return [tuple(sorted(c)) if isinstance(c, (set, frozenset)) else names_of(c) for c in cliques]
