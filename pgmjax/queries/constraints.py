"""What the user already knows about the data: combinations of values no record can hold.

A :class:`Constraint` declares, over a few attributes, which combinations of their values are possible:

* ``Constraint.forbid(attrs, cells)``: the listed combinations are impossible (a 10-year-old is never married);
* ``Constraint.allow(attrs, cells)``: only the listed combinations are possible;
* ``Constraint.determines(source, target, mapping)``: a functional dependency, ``target = mapping[source]``
  (a ZIP code fixes its state).

A model fitted under constraints gives their forbidden cells probability exactly zero: the model's
log-potentials are ``-inf`` there, a structural zero that message passing keeps exact (beliefs are never
divided), so the model is the maximum-entropy distribution *on the allowed cells* whose marginals best explain
the measurements (the constrained form of McKenna, Sheldon & Miklau, "Graphical-model based estimation and
inference for differential privacy", ICML 2019, Section 3: the entropy is maximised over distributions
supported on the allowed cells). Its answers, records and roundings never show a forbidden cell.

The measurements are noisy and may put mass on forbidden cells. :func:`forbidden_mass` says how much, against
what the noise alone would put there, so that a constraint the data contradict is reported, not silently
absorbed.

Example:
    >>> import numpy as np
    >>> import pgmjax as pj
    >>> dom = pj.Domain({"age": 3, "married": 2})
    >>> child_unmarried = pj.Constraint.forbid(("age", "married"), [(0, 1)])
    >>> child_unmarried.allowed(dom).tolist()
    [[True, False], [True, True], [True, True]]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..data.domain import Clique, Domain, as_clique

#: The kinds of constraint.
KINDS = ("forbid", "allow", "determines")


@dataclasses.dataclass(frozen=True, eq=False)
class Constraint:
    """Combinations of values of ``attributes`` that no record holds.

    Build one with :meth:`forbid`, :meth:`allow` or :meth:`determines`; check it against a domain with
    :meth:`allowed` (a boolean table, True where a record may lie).

    Attributes:
        attributes: the attributes the constraint is over (distinct; one attribute: values no record takes).
        kind: ``"forbid"``, ``"allow"`` or ``"determines"``.
        cells: for ``"forbid"``/``"allow"``, an integer array ``(k, len(attributes))`` of value codes, one
            combination per row; for ``"determines"``, the mapping, an integer array over the source's codes
            giving the target's code.
    """

    attributes: Clique
    kind: str
    cells: np.ndarray

    def __post_init__(self):
        attrs = as_clique(self.attributes)
        if not attrs or len(set(attrs)) != len(attrs):
            raise ValueError(f"Constraint: attributes must be one or more distinct attributes, got {attrs}")
        if self.kind not in KINDS:
            raise ValueError(f"Constraint: kind must be one of {KINDS}, got {self.kind!r}")
        cells = np.asarray(self.cells)
        if cells.size and not np.issubdtype(cells.dtype, np.integer):
            if not np.all(np.isfinite(cells)) or not np.all(cells == np.round(cells)):
                raise ValueError(f"Constraint over {attrs}: value codes must be integers")
        cells = cells.astype(np.int64)
        if self.kind == "determines":
            if len(attrs) != 2:
                raise ValueError(f"Constraint.determines: a functional dependency is over (source, target), got {attrs}")
            if cells.ndim != 1 or cells.size == 0:
                raise ValueError(f"Constraint.determines({attrs[0]!r} -> {attrs[1]!r}): mapping must be a non-empty "
                                 f"1-d array of target codes, one per source value; got shape {cells.shape}")
        elif cells.ndim != 2 or cells.shape[1] != len(attrs) or cells.shape[0] == 0:
            raise ValueError(f"Constraint.{self.kind} over {attrs}: cells must be a non-empty list of "
                             f"{len(attrs)}-tuples of value codes; got shape {cells.shape}")
        if (cells < 0).any():
            raise ValueError(f"Constraint.{self.kind} over {attrs}: value codes must be non-negative")
        cells.setflags(write=False)
        object.__setattr__(self, "attributes", attrs)
        object.__setattr__(self, "cells", cells)

    @classmethod
    def forbid(cls, attributes, cells) -> "Constraint":
        """The listed combinations of values are impossible.

        Args:
            attributes: the attributes.
            cells: combinations of value codes, one tuple per forbidden combination.

        Example:
            >>> Constraint.forbid(("age", "married"), [(0, 1)]).kind
            'forbid'
        """
        return cls(as_clique(attributes), "forbid", _rows(cells, attributes))

    @classmethod
    def allow(cls, attributes, cells) -> "Constraint":
        """Only the listed combinations of values are possible.

        Args:
            attributes: the attributes.
            cells: combinations of value codes, one tuple per allowed combination.
        """
        return cls(as_clique(attributes), "allow", _rows(cells, attributes))

    @classmethod
    def determines(cls, source: str, target: str, mapping) -> "Constraint":
        """A functional dependency: a record with ``source`` value ``v`` has ``target`` value ``mapping[v]``.

        Args:
            source: the finer attribute (e.g. a ZIP code).
            target: the attribute it determines (e.g. the state).
            mapping: the target's code for each of the source's codes.
        """
        return cls((source, target), "determines", np.asarray(mapping))

    def __eq__(self, other):
        return (isinstance(other, Constraint) and (self.attributes, self.kind) == (other.attributes, other.kind)
                and np.array_equal(self.cells, other.cells))

    def __hash__(self):
        return hash((self.attributes, self.kind, self.cells.tobytes()))

    def __repr__(self):
        n = len(self.cells)
        what = f"{n} cell{'s' * (n != 1)}" if self.kind != "determines" else f"mapping of {n} values"
        return f"Constraint.{self.kind}({self.attributes}, {what})"

    def check(self, domain: Domain, what: str = "constraint") -> "Constraint":
        """This constraint, checked against ``domain``: its attributes known, its codes in range, some cell allowed.

        Raises:
            ValueError: naming the attribute and the code out of range, or the constraint that forbids every cell.
        """
        domain.check_clique(self.attributes, what=what)
        if self.kind == "determines":
            source, target = self.attributes
            if len(self.cells) != domain[source]:
                raise ValueError(f"{what} {source!r} -> {target!r}: the mapping has {len(self.cells)} entries, "
                                 f"expected one per value of {source!r} ({domain[source]})")
            bad = np.flatnonzero(self.cells >= domain[target])
            if bad.size:
                raise ValueError(f"{what} {source!r} -> {target!r}: mapping[{int(bad[0])}] = {int(self.cells[bad[0]])} "
                                 f"is not a code of {target!r} (size {domain[target]})")
            return self
        for i, a in enumerate(self.attributes):
            bad = np.flatnonzero(self.cells[:, i] >= domain[a])
            if bad.size:
                raise ValueError(f"{what} over {self.attributes}: cell {tuple(int(v) for v in self.cells[bad[0]])} has "
                                 f"code {int(self.cells[bad[0], i])} for {a!r}, whose size is {domain[a]}")
        if not self.allowed(domain, checked=True).any():
            raise ValueError(f"{what} over {self.attributes} forbids every combination: no record could exist")
        return self

    def allowed(self, domain: Domain, *, checked: bool = False) -> np.ndarray:
        """The boolean table over :attr:`attributes` (axes in their order): True where a record may lie.

        Args:
            domain: the domain (checked with :meth:`check` unless ``checked``).
            checked: the constraint was checked against ``domain`` already.
        """
        if not checked:
            self.check(domain)
        shape = domain.shape_of(self.attributes)
        if self.kind == "determines":
            table = np.zeros(shape, bool)
            table[np.arange(shape[0]), self.cells] = True
            return table
        table = np.full(shape, self.kind == "forbid")
        table[tuple(self.cells.T)] = self.kind == "allow"
        return table

    def log_mask(self, domain: Domain) -> np.ndarray:
        """:meth:`allowed` as log-potentials: 0 where allowed, ``-inf`` where forbidden."""
        return np.where(self.allowed(domain), 0.0, -np.inf)

    def violations(self, records: np.ndarray, domain: Domain) -> int:
        """How many of ``records`` (integer codes, columns in the domain's order) lie on a forbidden cell."""
        records = np.asarray(records)
        cols = [domain.attributes.index(a) for a in self.attributes]
        return int((~self.allowed(domain)[tuple(records[:, c] for c in cols)]).sum())


def _rows(cells, attributes) -> np.ndarray:
    """``cells`` as one row per combination (a single combination may be given flat)."""
    cells, n = np.asarray(cells), len(as_clique(attributes))
    return cells.reshape(-1, n) if n and cells.size % n == 0 else cells


def check_constraints(domain: Domain, constraints: Sequence[Constraint], caller: str) -> tuple[Constraint, ...]:
    """``constraints`` as a tuple, each a :class:`Constraint` checked against ``domain``.

    Raises:
        TypeError: an entry that is not a :class:`Constraint`.
        ValueError: from :meth:`Constraint.check`, naming the caller and the constraint's index.
    """
    return tuple(c.check(domain, what=f"{caller}: constraints[{i}]")
                 for i, c in enumerate(constraint_tuple(constraints, caller)))


def constraint_tuple(constraints, caller: str) -> tuple[Constraint, ...]:
    """``constraints`` (one :class:`Constraint` or a sequence of them) as a tuple, each entry's type checked; their
    domain is checked by :func:`check_constraints`, where the data's is known.

    Raises:
        TypeError: an entry that is not a :class:`Constraint`.
    """
    if isinstance(constraints, Constraint):
        return (constraints,)
    out = tuple(constraints)
    for i, c in enumerate(out):
        if not isinstance(c, Constraint):
            raise TypeError(f"{caller}: constraints[{i}] must be a pgmjax.Constraint, got {type(c).__name__}")
    return out


def constraint_masks(domain: Domain, constraints: Sequence[Constraint]) -> dict:
    """``{clique: log-mask}`` of checked constraints, the masks of constraints over one clique summed."""
    masks: dict = {}
    for c in constraints:
        mask = c.log_mask(domain)
        masks[c.attributes] = masks[c.attributes] + mask if c.attributes in masks else mask
    return masks


@dataclasses.dataclass(frozen=True)
class ForbiddenMass:
    """What the measurements put on one constraint's forbidden cells.

    Attributes:
        constraint: the constraint.
        clique: the measured clique (holds the constraint's attributes).
        mass: the noisy count summed over the forbidden cells (the true data's is 0 if the constraint holds).
        stddev: the standard deviation of that sum under the measurement's noise alone.
    """

    constraint: Constraint
    clique: Clique
    mass: float
    stddev: float

    @property
    def contradicts(self) -> bool:
        """The mass is more than four standard deviations of the noise: the data likely break the constraint."""
        return self.mass > 4.0 * self.stddev


def forbidden_mass(domain: Domain, measurements, constraints: Sequence[Constraint]) -> list[ForbiddenMass]:
    """The noisy mass each measurement puts on each constraint's forbidden cells.

    Only measurements of identity queries on a clique holding all the constraint's attributes can say: their
    noisy table, summed onto the constraint's attributes, is read on the forbidden cells. Under the
    constraint the true sum is zero and the noise's sum has standard deviation ``sqrt(sum of variances)``;
    a sum far above it (:attr:`ForbiddenMass.contradicts`) says the data break the constraint.

    Args:
        domain: the domain.
        measurements: :class:`pgmjax.Measurement` objects.
        constraints: checked constraints.

    Returns:
        One :class:`ForbiddenMass` per (measurement, constraint) pair that can be read.
    """
    out = []
    for c in constraints:
        forbidden = ~c.allowed(domain, checked=True)
        for m in measurements:
            if m.linear.kind != "identity" or not set(c.attributes) <= set(m.clique):
                continue
            shape = domain.shape_of(m.clique)
            y = np.asarray(m.y, np.float64).reshape(shape)
            var = np.broadcast_to(np.asarray(m.stddev, np.float64) ** 2, np.size(y)).reshape(shape)
            drop = tuple(i for i, a in enumerate(m.clique) if a not in c.attributes)
            kept = [a for a in m.clique if a in c.attributes]
            order = [kept.index(a) for a in c.attributes]
            y_c = np.transpose(y.sum(axis=drop), order)
            var_c = np.transpose(var.sum(axis=drop), order)
            out.append(ForbiddenMass(c, m.clique, float(y_c[forbidden].sum()), float(np.sqrt(var_c[forbidden].sum()))))
    return out


def possible_cells(domain: Domain, clique, constraints: Sequence[Constraint]) -> np.ndarray:
    """The cells of ``clique``'s marginal that no single constraint rules out (a boolean table, axes in the clique's
    order): a cell is ruled out where a constraint forbids every combination of its other attributes with the
    cell's values on the attributes the two share.

    What a measurement of ``clique`` can tell about: its noise on the other cells falls where the model holds
    zero. An upper bound on the cells possible under all constraints together (their joint effect is not
    counted).

    Example:
        >>> dom = Domain({"a": 2, "b": 2, "c": 3})
        >>> possible_cells(dom, ("a", "c"), [Constraint.determines("c", "a", [0, 1, 1])]).tolist()
        [[True, False, False], [False, True, True]]
    """
    clique = as_clique(clique)
    table = np.ones(domain.shape_of(clique), bool)
    for c in constraints:
        shared = [a for a in c.attributes if a in clique]
        if not shared:
            continue
        allowed = c.allowed(domain, checked=True)
        drop = tuple(i for i, a in enumerate(c.attributes) if a not in clique)
        some = allowed.any(axis=drop) if drop else allowed  # axes: shared, in the constraint's order
        shape = [domain[a] if a in shared else 1 for a in clique]
        order = sorted(range(len(shared)), key=lambda i: clique.index(shared[i]))
        table &= np.transpose(some, order).reshape(shape)
    return table
