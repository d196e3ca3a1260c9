"""The domain of a table: an ordered mapping from attribute name to its number of values.

A :class:`Domain` is immutable and hashed by value, so it can key caches of
compiled programs and junction trees.
"""

from __future__ import annotations

import math

from collections.abc import Iterable, Mapping, Sequence
from typing import Union

import numpy as np

Clique = tuple[str, ...]
CliqueLike = Union[str, Sequence[str]]


class Domain(Mapping):
    """Ordered attributes and their sizes (number of distinct values).

    Attribute ``a`` takes the integer values ``0 .. size(a) - 1``.

    Args:
        attributes: a mapping ``name -> size`` (its order is kept), or a
            sequence of names when ``sizes`` is given.
        sizes: the sizes, when ``attributes`` is a sequence of names.

    Example:
        >>> dom = Domain({"age": 85, "sex": 2})
        >>> dom.size(("age", "sex"))
        170
        >>> dom.project(("sex",))
        Domain({'sex': 2})
    """

    __slots__ = ("_attrs", "_sizes", "_index", "_hash")

    def __init__(self, attributes: Mapping[str, int] | Sequence[str], sizes: Sequence[int] | None = None):
        if isinstance(attributes, Mapping):
            if sizes is not None:
                raise TypeError("Domain: give either a mapping name -> size, or names and sizes, not both")
            names = list(attributes.keys())
            sizes = list(attributes.values())
        else:
            if sizes is None:
                raise TypeError("Domain: a sequence of attribute names needs `sizes`")
            names = list(attributes)
            sizes = list(sizes)
            if len(names) != len(sizes):
                raise ValueError(f"Domain: {len(names)} attribute names but {len(sizes)} sizes")
        seen = set()
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"Domain: attribute names must be strings, got {name!r} ({type(name).__name__})")
            if name in seen:
                raise ValueError(f"Domain: duplicate attribute name {name!r}")
            seen.add(name)
        clean = []
        for name, size in zip(names, sizes):
            if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)):
                raise TypeError(f"Domain: size of attribute {name!r} must be an integer, got {size!r}")
            if size < 1:
                raise ValueError(f"Domain: attribute {name!r} must have at least 1 value, got size {size}")
            clean.append(int(size))
        self._attrs: tuple[str, ...] = tuple(names)
        self._sizes: tuple[int, ...] = tuple(clean)
        self._index = {a: i for i, a in enumerate(self._attrs)}
        self._hash = hash((self._attrs, self._sizes))

    # Mapping interface -------------------------------------------------
    def __getitem__(self, attr: str) -> int:
        try:
            return self._sizes[self._index[attr]]
        except KeyError:
            raise KeyError(f"attribute {attr!r} is not in the domain; known attributes: {list(self._attrs)}") from None

    def __iter__(self):
        return iter(self._attrs)

    def __len__(self) -> int:
        return len(self._attrs)

    def __contains__(self, attr) -> bool:
        return attr in self._index

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        # Rebuilt from its contents: a pickled hash would be another process's (string hashes are salted
        # per process), and an equal Domain there would then miss every dict and jit cache it keys.
        return (Domain, (self._attrs, self._sizes))

    def __eq__(self, other) -> bool:
        return isinstance(other, Domain) and self._attrs == other._attrs and self._sizes == other._sizes

    def __repr__(self) -> str:
        return f"Domain({dict(zip(self._attrs, self._sizes))})"

    # Queries -----------------------------------------------------------
    @property
    def attributes(self) -> tuple[str, ...]:
        return self._attrs

    @property
    def shape(self) -> tuple[int, ...]:
        return self._sizes

    def index(self, attr: str) -> int:
        """Position of ``attr`` in the domain order."""
        self.check_clique((attr,))
        return self._index[attr]

    def check_clique(self, clique: CliqueLike, what: str = "clique") -> Clique:
        """Validate a clique (a tuple of distinct known attributes) and return it as a tuple.

        Raises:
            ValueError: naming the unknown or repeated attribute.
        """
        clique = as_clique(clique)
        seen = set()
        for a in clique:
            if a not in self._index:
                raise ValueError(
                    f"{what} {clique}: attribute {a!r} is not in the domain; known attributes: {list(self._attrs)}"
                )
            if a in seen:
                raise ValueError(f"{what} {clique}: attribute {a!r} appears more than once")
            seen.add(a)
        return clique

    def shape_of(self, clique: CliqueLike) -> tuple[int, ...]:
        """Table shape of a clique, axes in the clique's order."""
        return tuple(self[a] for a in as_clique(clique))

    def size(self, clique: CliqueLike | None = None) -> int:
        """Number of cells of the table over ``clique`` (the whole domain when None).

        An exact Python integer for any domain (a wide table has far more cells than int64 holds).

        Example:
            >>> Domain({f"a{i}": 1000 for i in range(16)}).size() == 10**48
            True
        """
        shape = self._sizes if clique is None else self.shape_of(clique)
        return math.prod(int(n) for n in shape)

    def project(self, clique: CliqueLike) -> "Domain":
        """The sub-domain over ``clique``, in the clique's order."""
        clique = self.check_clique(clique)
        return Domain({a: self[a] for a in clique})

    def canonical(self, attrs: Iterable[str]) -> Clique:
        """``attrs`` sorted into domain order (duplicates removed)."""
        attrs = set(attrs)
        for a in attrs:
            if a not in self._index:
                raise ValueError(f"attribute {a!r} is not in the domain; known attributes: {list(self._attrs)}")
        return tuple(a for a in self._attrs if a in attrs)

    def merge(self, other: "Domain") -> "Domain":
        """Union of two domains; shared attributes must agree in size."""
        out = dict(zip(self._attrs, self._sizes))
        for a, n in other.items():
            if a in out and out[a] != n:
                raise ValueError(f"cannot merge domains: attribute {a!r} has size {out[a]} and {n}")
            out[a] = n
        return Domain(out)

    def to_dict(self) -> dict[str, int]:
        return dict(zip(self._attrs, self._sizes))


def as_clique(clique: CliqueLike) -> Clique:
    """Normalise a clique given as one name or a sequence of names into a tuple."""
    if isinstance(clique, str):
        return (clique,)
    try:
        return tuple(clique)
    except TypeError:
        raise TypeError(f"a clique must be an attribute name or a sequence of names, got {clique!r}") from None


def cells_text(n: int) -> str:
    """A cell count for people: ``1,234,567`` below 1e12, else ``6.41e+17`` (exact for any integer size).

    Example:
        >>> cells_text(10**400)
        '1.00e+400'
    """
    n = int(n)
    if n < 10**12:
        return f"{n:,}"
    digits = str(n)
    exponent = len(digits) - 1
    mantissa = round(int(digits[:4]) / 1000, 2)  # 3 significant digits, rounded
    if mantissa >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.2f}e+{exponent:02d}"

