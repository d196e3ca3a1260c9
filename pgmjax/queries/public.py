"""Public data beside the private measurements: marginals that cost no budget, entered with a stated weight.

A :class:`PublicData` holds a public table (an earlier census, a public sample, a synthetic prior) or only some
of its marginals, over the private table's domain. Its marginals are counts over its own number of records;
as measurements of the private table (:meth:`PublicData.measurement`) they are scaled to the private total
and carry a standard deviation that says how far the public marginal is trusted to be from the private one:

* ``stddev="sampling"`` (the default): the sampling error of a public *sample* of ``m`` records drawn from the
  private table's population, ``N sqrt(p (1 - p) / m)`` per cell (``N`` the private total, ``p`` the cell's
  public share, floored at one public record's share). It assumes no shift between the two: a biased public
  table then pulls the model towards its bias with that weight;
* a number: the standard deviation in records, one for every cell.

:func:`pgmjax.estimate` adds them to the loss (``public=``); AIM chooses, round by round, between measuring a
marginal privately and taking it from the public table, paying only for the choice (``aim(public=...)``,
Fuentes, Mullins, McKenna, Miklau & Sheldon, "Joint selection: adaptively incorporating public information for
private synthetic data", AISTATS 2024), so that a biased public marginal is taken only where it helps.

Example:
    >>> import numpy as np, pgmjax as pj
    >>> dom = pj.Domain({"a": 2, "b": 2})
    >>> public = PublicData(pj.Dataset(np.array([[0, 0], [0, 1], [1, 1], [1, 1]]), dom), stddev=5.0)
    >>> m = public.measurement(("b",), total=400.0)
    >>> m.y.tolist(), float(m.stddev)
    ([100.0, 300.0], 5.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..data.dataset import Dataset
from ..data.domain import Clique, Domain, as_clique
from .measurement import Measurement


class PublicData:
    """A public table, or some of its marginals, over the private table's domain.

    Args:
        data: the public :class:`~pgmjax.Dataset` (any of its marginals can be read); or None with ``marginals``.
        marginals: ``{clique: counts}`` of the public table (axes in the clique's order), where only marginals
            are public; a clique inside a given one is read by summing.
        domain: the domain (needed with ``marginals``; ``data``'s otherwise).
        stddev: ``"sampling"`` or a positive number of records (see the module docstring).
        cliques: the cliques :func:`pgmjax.estimate` takes from it (default: those of ``marginals``, or, for a
            table, the cliques the private measurements measure).

    Raises:
        ValueError: naming the clique, the attribute or the option that is wrong.
    """

    def __init__(self, data: Dataset | None = None, *, marginals: Mapping | None = None, domain: Domain | None = None,
                 stddev: float | str = "sampling", cliques=None):
        where = "PublicData"
        if (data is None) == (marginals is None):
            raise ValueError(f"{where}: give the public table (data=) or its marginals (marginals=), one of them")
        if data is not None and not isinstance(data, Dataset):
            raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
        self.domain = data.domain if data is not None else domain
        if not isinstance(self.domain, Domain):
            raise ValueError(f"{where}: marginals= needs domain= (the private table's pgmjax.Domain)")
        if isinstance(stddev, str):
            if stddev != "sampling":
                raise ValueError(f"{where}: stddev must be 'sampling' or a positive number, got {stddev!r}")
        elif isinstance(stddev, bool) or not (isinstance(stddev, (int, float)) and math.isfinite(stddev) and stddev > 0):
            raise ValueError(f"{where}: stddev must be 'sampling' or a positive number, got {stddev!r}")
        self.stddev = stddev
        self._data = data
        self._marginals: dict[Clique, np.ndarray] = {}
        for c, t in (marginals or {}).items():
            c = self.domain.check_clique(c, what="PublicData: marginal")
            t = np.asarray(t, np.float64)
            if t.ndim == 1 and t.size == self.domain.size(c):  # flat, in the clique's row-major order
                t = t.reshape(self.domain.shape_of(c))
            if t.shape != self.domain.shape_of(c) or not np.all(np.isfinite(t)) or (t < 0).any():
                raise ValueError(f"{where}: the marginal on {c} must be non-negative finite counts of shape "
                                 f"{self.domain.shape_of(c)}, got shape {t.shape}")
            self._marginals[c] = t
        totals = [t.sum() for t in self._marginals.values()] if marginals else [float(len(data))]
        if min(totals) <= 0 or max(totals) > min(totals) * (1 + 1e-9):
            raise ValueError(f"{where}: the public marginals must sum to one positive number of records, got {totals}")
        #: the public table's number of records.
        self.total = float(totals[0])
        self.cliques = None if cliques is None else [self.domain.check_clique(c, what="PublicData: clique")
                                                     for c in cliques]
        if self.cliques is None and marginals is not None:
            self.cliques = list(self._marginals)
        for c in self.cliques or ():
            self.counts(c)  # readable

    def counts(self, clique) -> np.ndarray:
        """The public table's counts on ``clique`` (axes in its order).

        Raises:
            ValueError: only marginals are public, and none holds ``clique``.
        """
        clique = as_clique(clique)
        if self._data is not None:
            return np.asarray(self._data.marginal(clique), np.float64)
        for c, t in self._marginals.items():
            if set(clique) <= set(c):
                drop = tuple(i for i, a in enumerate(c) if a not in clique)
                kept = [a for a in c if a in clique]
                return np.transpose(t.sum(axis=drop), [kept.index(a) for a in clique])
        raise ValueError(f"PublicData: no public marginal holds {clique}; the public marginals are on "
                         f"{list(self._marginals)}")

    def measurement(self, clique, total: float) -> Measurement:
        """The public marginal on ``clique`` as a measurement of a private table of ``total`` records: its counts
        scaled by ``total / public total``, with :attr:`stddev` (per cell for ``"sampling"``)."""
        counts = self.counts(clique).reshape(-1)
        share = counts / self.total
        if self.stddev == "sampling":
            share_floor = np.maximum(share, 1.0 / self.total)  # an empty public cell: as uncertain as one record
            sd = total * np.sqrt(share_floor * (1.0 - np.minimum(share_floor, 1.0 - 1e-12)) / self.total)
        else:
            sd = float(self.stddev)
        return Measurement(as_clique(clique), share * total, sd)

    def recoded(self, mapping: Mapping, domain: Domain) -> "PublicData":
        """The same public data over a coarser ``domain``: each attribute ``a`` in ``mapping`` through
        ``mapping[a]`` (old code -> new code; MST's domain compression), the marginals summed over merged values."""
        if self._data is not None:
            return PublicData(self._data.recode(mapping, domain), stddev=self.stddev, cliques=self.cliques)
        out = {}
        for c, t in self._marginals.items():
            for i, a in enumerate(c):
                if a in mapping:
                    moved = np.zeros(t.shape[:i] + (domain[a],) + t.shape[i + 1:])
                    np.add.at(moved, (slice(None),) * i + (np.asarray(mapping[a]),), t)
                    t = moved
            out[c] = t
        return PublicData(marginals=out, domain=domain, stddev=self.stddev, cliques=self.cliques)

    def __repr__(self):
        what = f"a table of {self.total:g} records" if self._data is not None else f"{len(self._marginals)} marginals"
        return f"PublicData({what}, stddev={self.stddev!r})"
