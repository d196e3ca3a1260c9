"""The :class:`Accountant`: every read of private data, calibrated, checked against the budget and recorded.

One accountant per run. Its methods are the only way a front-end adds noise or selects:
:meth:`~Accountant.measure` / :meth:`~Accountant.measure_many` (noisy marginals, or linear queries on
them), :meth:`~Accountant.laplace` and :meth:`~Accountant.gaussian` (raw values),
:meth:`~Accountant.exponential` (selection) and :meth:`~Accountant.randomized_response` (records). Each
one calibrates the noise to the sensitivity (:mod:`pgmjax.privacy.sensitivity`), refuses to overspend
before anything is drawn, draws floating-point-safe noise (:mod:`pgmjax.privacy.lattice`; Canonne,
Kamath & Steinke 2020, "The discrete Gaussian for differential privacy", NeurIPS) and records a
:class:`~pgmjax.privacy.ledger.LedgerEntry`. The bookkeeping (budget, composition, costs, reports) is
:class:`~pgmjax.privacy.budget.BudgetLedger`, which the Accountant extends.

Example:
    >>> acc = Accountant(epsilon=1.0)
    >>> i = acc.exponential(jax.random.key(0), [0.0, 9.0, 1.0], sensitivity=1.0, epsilon=0.5)
    >>> acc.remaining, acc.ledger[0].query
    (0.5, 'selection')
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import numpy as np

from ..data.dataset import Dataset
from ..data.domain import CliqueLike
from ..queries.measurement import Measurement
from . import discrete_noise as dn
from . import randomized_response as rr
from .budget import REST, BudgetLedger
from ..checks import (
    check_bool,
    check_count,
    check_key,
    check_positive,
    check_qualities,
    check_quality_rows,
    check_values,
    exactly_one,
)
from .lattice import lattice_release
from .ledger import describe_query
from .primitives import exponential_mechanism, exponential_mechanism_rows
from .public_inputs import PublicInputs
from .sensitivity import l1_sensitivity, l2_sensitivity, parse_query

__all__ = ["Accountant"]


class Accountant(BudgetLedger, PublicInputs):
    """Privacy budget of one run: calibrates, adds and records every noise addition.

    Construct it from the whole run's budget:

    * ``Accountant(epsilon=e)``: pure ``e``-DP; costs add in epsilon (Laplace ``Delta1/b``,
      exponential mechanism ``eps``). Gaussian noise is refused.
    * ``Accountant(rho=r)``: ``r``-zCDP; costs add in rho (Gaussian ``Delta2^2/(2 sigma^2)``,
      exponential mechanism ``eps^2/8``, Laplace ``eps^2/2``).
    * ``Accountant(epsilon=e, delta=d)``: ``(e, d)``-DP through zCDP, with budget
      ``rho = cdp_rho(e, d)`` (MST, AIM, MWEM with Gaussian noise).
    * ``Accountant(epsilon=e, delta=d, composition="advanced")``: pure-DP mechanisms (Laplace, EM)
      composed by advanced composition, ``spent = min(sum eps_i, eps_max sqrt(2 k ln(1/d)) + k
      eps_max (e^eps_max - 1))`` over the ``k`` draws (DualQuery's ``b2`` bound);
      ``"advanced_heterogeneous"`` uses :func:`advanced_composition_hetero` instead. Both bounds hold
      for a schedule of per-draw epsilons fixed in advance (as DualQuery's is), not for epsilons chosen
      adaptively from earlier outputs; use ``"pure"`` or ``"zcdp"`` for adaptive schedules.

    ``bounded`` fixes the neighbouring relation, hence every default sensitivity
    (:meth:`l1_sensitivity`, :meth:`l2_sensitivity`, :meth:`measure`).

    Each mechanism method takes exactly one calibration: a budget (``epsilon=`` or, under zCDP,
    ``rho=``; ``REST`` spends exactly what is left) or a noise scale (``scale=`` / ``sigma=``). It
    checks everything and the budget first (:class:`PrivacyBudgetExceeded` names the request and
    what is left; a relative slack of 1e-9 absorbs float round-off of equal splits), then draws the
    noise and records a :class:`LedgerEntry`. Spending ``REST`` makes ``spent == budget`` exactly
    (``spent`` is the correctly rounded sum of the costs; in the rare float ties where no cost can
    make that sum the budget itself, it ends one ulp below, never above).

    Args:
        epsilon: pure-DP budget, or the epsilon of an ``(epsilon, delta)`` target.
        delta: the delta of an ``(epsilon, delta)`` target; with ``rho``, only used to report epsilon.
        rho: zCDP budget.
        bounded: False (default) for add/remove-one-record neighbours, True for replace-one.
        composition: ``"pure"``, ``"zcdp"``, ``"advanced"`` or ``"advanced_heterogeneous"``; default
            ``"pure"`` for ``epsilon`` alone, ``"zcdp"`` otherwise.

    Example:
        >>> acc = Accountant(epsilon=1.0, delta=1e-9)                 # rho = 0.0149731
        >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
        >>> keys = jax.random.split(jax.random.key(0), 3)
        >>> m = acc.measure(keys[0], data, ("a",), rho=acc.budget / 2)  # Gaussian, sigma = 1 / sqrt(budget)
        >>> i = acc.exponential(keys[1], [3.0, 1.0], sensitivity=1.0, rho=acc.remaining / 10)
        >>> m2 = acc.measure(keys[2], data, ("a", "b"), rho=REST)
        >>> acc.spent == acc.budget, len(acc.ledger)
        (True, 3)
    """

    # Mechanisms --------------------------------------------------------------------------------
    def laplace(
        self, key, values, sensitivity: float, *, epsilon=None, rho=None, scale=None, target=None, integer: bool = False
    ) -> np.ndarray:
        """Laplace mechanism on private ``values``, recorded (Dwork et al. 2006).

        Args:
            key: a ``jax.random`` key.
            values: exact answers computed from the private data (any shape).
            sensitivity: their L1 sensitivity under this accountant's convention.
            epsilon: budget (``REST`` for what is left); or rho= (zCDP accountants: ``eps = sqrt(2 rho)``);
                or scale= the Laplace ``b``.
            target: a label for the ledger.
            integer: the values are integers for every dataset (counts): no lattice rounding. Otherwise
                they are rounded to a fine public lattice and the sensitivity grows by ``size * gamma``
                (see :func:`laplace_mechanism`).

        Returns:
            The values plus discrete Laplace noise, a float64 NumPy array.

        Example:
            >>> acc = Accountant(epsilon=1.0)
            >>> y = acc.laplace(jax.random.key(0), np.array([10.0, 3.0]), 1.0, epsilon=0.5, target="counts", integer=True)
            >>> acc.ledger[0].scale, acc.remaining
            (2.0, 0.5)
        """
        where = "Accountant.laplace"
        check_key(key, where)
        x = check_values(values, where)
        target = f"values{x.shape}" if target is None else target
        p = self._prepare(where, "laplace", target, sensitivity, 1, epsilon, rho, scale, x.size, integer)
        out = lattice_release(key, x, "laplace", p)
        self._record("laplace", target, "values", x.size, 1, p)
        return out

    def gaussian(self, key, values, sensitivity: float, *, rho=None, sigma=None, target=None, integer: bool = False) -> np.ndarray:
        """Gaussian mechanism on private ``values``, recorded (zCDP accountants only; Bun & Steinke 2016).

        Args:
            key: a ``jax.random`` key.
            values: exact answers from the private data (any shape).
            sensitivity: their L2 sensitivity under this accountant's convention.
            rho: budget (``REST`` for what is left); or sigma= the noise scale.
            target: a label for the ledger.
            integer: the values are integers for every dataset (see :meth:`laplace`).

        Returns:
            The values plus discrete Gaussian noise, a float64 NumPy array.

        Example:
            >>> acc = Accountant(rho=1.0)
            >>> y = acc.gaussian(jax.random.key(0), np.zeros(4), 1.0, sigma=5.0, integer=True)
            >>> acc.spent
            0.02
        """
        where = "Accountant.gaussian"
        check_key(key, where)
        x = check_values(values, where)
        target = f"values{x.shape}" if target is None else target
        p = self._prepare(where, "gaussian", target, sensitivity, 1, None, rho, sigma, x.size, integer)
        out = lattice_release(key, x, "gaussian", p)
        self._record("gaussian", target, "values", x.size, 1, p)
        return out

    def exponential(self, key, qualities, sensitivity: float, *, epsilon=None, rho=None, num=None, target=None, admit=None):
        """Exponential mechanism (sampled exactly) on private ``qualities``, recorded (McSherry & Talwar 2007).

        Selects ``r`` with probability ``∝ exp(eps q(r) / (2 Delta))`` (see
        :func:`exponential_probabilities`). Costs ``eps`` per draw (pure), ``eps^2/8`` (zCDP).

        Args:
            key: a ``jax.random`` key.
            qualities: 1-D scores computed from the private data; ``-inf`` excludes a candidate
                (only for data-independent reasons, e.g. a model-size cap).
            sensitivity: the scores' sensitivity under this accountant's convention.
            epsilon: per-draw budget (``REST``: what is left, split over the draws); or rho= per-draw
                zCDP budget (zCDP accountants: ``eps = sqrt(8 rho)``).
            num: None for one draw; an int for that many independent draws (e.g. DualQuery's ``s``).
            target: a label for the ledger.
            admit: a predicate on public values, asked about drawn indices only (:func:`exponential_mechanism`).

        Returns:
            The selected index (int), or an int64 array of ``num`` indices.

        Example:
            >>> acc = Accountant(rho=0.5)
            >>> acc.exponential(jax.random.key(1), [0.0, 50.0, 1.0], sensitivity=1.0, epsilon=2.0)
            1
            >>> acc.spent
            0.5
        """
        where = "Accountant.exponential"
        check_key(key, where)
        q = check_qualities(qualities, where)
        count = 1 if num is None else check_count(num, "num", where)
        target = f"selection among {q.size}" if target is None else target
        p = self._prepare(where, "exponential", target, sensitivity, count, epsilon, rho, None)
        choice = exponential_mechanism(key, q, p["sensitivity"], p["epsilon"], num=num, admit=admit)  # raises: no spend
        self._record("exponential", target, "selection", q.size, count, p)
        return choice

    def exponential_parallel(self, key, qualities, sensitivity: float, *, epsilon=None, rho=None, target=None,
                             fixed_parts: bool = False):
        """One exponential-mechanism draw per quality vector, the vectors computed from disjoint parts of the data.

        Parallel composition (McSherry, "Privacy integrated queries", SIGMOD 2009, Theorem 4): under add/remove
        neighbours one record changes one part, so the draws cost one draw's budget; under replace-one neighbours
        (``bounded``) a record may leave one part and join another: two draws (``count`` 2 in the ledger), unless
        ``fixed_parts`` declares the parts fixed by record position or identity (a replaced record stays in its
        part). The parts must be fixed by public or already released values; the caller guarantees it.

        Args:
            key: a ``jax.random`` key.
            qualities: a non-empty list of 1-D score vectors, one per part; or a ``(parts, candidates)`` array,
                drawn in one vectorised pass (tens of thousands of parts in milliseconds).
            sensitivity, epsilon, rho, target: as in :meth:`exponential` (the per-draw budget).
            fixed_parts: the parts are fixed by record position or identity.

        Returns:
            The selected index of every part: a list of ints (an int64 array for a 2-D ``qualities``).

        Example:
            >>> acc = Accountant(epsilon=1.0)
            >>> acc.exponential_parallel(jax.random.key(0), [[0.0, 90.0], [50.0, 0.0]], 1.0, epsilon=1.0), acc.spent
            ([1, 0], 1.0)
        """
        where = "Accountant.exponential_parallel"
        check_key(key, where)
        check_bool(fixed_parts, "fixed_parts", where)
        if isinstance(qualities, np.ndarray) and qualities.ndim == 2:
            qs = check_quality_rows(qualities, where)
        elif isinstance(qualities, np.ndarray) or not isinstance(qualities, Sequence) or not len(qualities):
            raise ValueError(f"{where}: qualities must be a list of at least one score vector, or a 2-D array (parts, "
                             f"candidates); got {type(qualities).__name__} of shape {np.shape(qualities)}")
        else:
            qs = [check_qualities(q, where) for q in qualities]
        count = 2 if self.bounded and len(qs) > 1 and not fixed_parts else 1
        target = f"selection in {len(qs)} disjoint parts" if target is None else target
        p = self._prepare(where, "exponential", target, sensitivity, count, epsilon, rho, None)
        picks = exponential_mechanism_rows(key, qs, p["sensitivity"], p["epsilon"]) if isinstance(qs, np.ndarray) else [
            int(exponential_mechanism(k, q, p["sensitivity"], p["epsilon"])) for k, q in zip(jax.random.split(key, len(qs)), qs)]
        self._record("exponential", target, "parallel selection", sum(np.size(q) for q in qs), count, p)
        return picks

    def randomized_response(
        self, key, data: Dataset, *, epsilon=None, rho=None, per_attribute: bool = False, public_count: bool = False, target=None
    ) -> Dataset:
        """Randomized response on every record of ``data``, recorded: a synthetic table of the same length.

        Each record is kept with probability ``e^eps / (e^eps + K - 1)`` and otherwise replaced by one of
        the other ``K - 1`` rows of the domain, uniformly (Wang, Ying & Zhang, "A Minimax Distortion View
        of Differentially Private Query Release", section III; sampled exactly, see
        :mod:`pgmjax.privacy.randomized_response`). ``per_attribute`` randomizes each attribute with ``eps / d``
        (``K`` = that attribute's size), which stays informative on real domains. The release is
        ``eps``-DP under replace-one neighbours; it reveals the record count, so under add/remove
        neighbours (``bounded=False``) it is refused unless ``public_count=True`` declares the count public.

        Args:
            key: a ``jax.random`` key.
            data: the private dataset.
            epsilon: the budget (``REST``: what is left); or rho= (zCDP accountants, ``eps = sqrt(2 rho)``).
            per_attribute: randomize attribute by attribute.
            public_count: the record count is public (needed under add/remove neighbours).
            target: a ledger label.

        Returns:
            A :class:`~pgmjax.Dataset` on the same domain with ``len(data)`` records.

        Example:
            >>> acc = Accountant(epsilon=1.0, bounded=True)
            >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
            >>> out = acc.randomized_response(jax.random.key(0), data, epsilon=1.0)
            >>> len(out), acc.spent
            (3, 1.0)
        """
        where = "Accountant.randomized_response"
        check_key(key, where)
        if not isinstance(data, Dataset):
            raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
        public_count = check_bool(public_count, "public_count", where)
        if not self._bounded and not public_count:
            raise ValueError(
                f"{where}: randomized response releases exactly one row per record, so it reveals the record "
                "count, which is private under add/remove neighbours (bounded=False). Use an Accountant with "
                "bounded=True, or pass public_count=True if the count is public"
            )
        per_attribute = check_bool(per_attribute, "per_attribute", where)
        target = ("randomized response per attribute" if per_attribute else "randomized response") if target is None else target
        p = self._prepare(where, "randomized_response", target, 1.0, 1, epsilon, rho, None)
        out = rr.randomize_records(dn.generator(key), data.records, data.domain.shape, p["epsilon"], per_attribute=per_attribute)
        self._record("randomized_response", target, "records", len(data), 1, p)
        return Dataset(out, data.domain)

    def _plan(self, where: str, data: Dataset, clique: CliqueLike, query, mechanism):
        """Validate one marginal measurement; return ``(clique, probe Measurement, query description, mechanism)``."""
        if not isinstance(data, Dataset):
            raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
        if mechanism is None:
            mechanism = "gaussian" if self._composition == "zcdp" else "laplace"
        if mechanism not in ("laplace", "gaussian"):
            raise ValueError(f"{where}: mechanism must be 'laplace' or 'gaussian', got {mechanism!r}")
        self._allowed(mechanism, where)
        clique = data.domain.check_clique(clique, what=f"{where}: clique")
        kind, q = parse_query(query, where)
        if kind == "identity":
            rows = data.domain.size(clique)
        elif kind == "dense":
            rows = q.shape[0]
        else:
            rows = math.prod(f.shape[0] for f in q)
        probe = Measurement(clique, np.zeros(rows), 1.0, q)
        probe.validate(data.domain)
        return clique, probe, describe_query(kind, q), mechanism

    @staticmethod
    def _integer_query(probe: Measurement) -> bool:
        """Whether the query's answers are integers for every dataset (counts times integer coefficients)."""
        if probe.kind == "identity":
            return True
        factors = probe.query if probe.kind == "kron" else (probe.query,)
        return all(np.array_equal(f, np.round(f)) for f in factors)

    def _release(self, key, probe: Measurement, marginal, mechanism: str, p: dict) -> Measurement:
        answers = probe.answer(marginal)
        rel = dn.lattice_noise(dn.generator(key), answers, family=mechanism, scale=p["scale"], gamma=p["lattice"], integer=p["integer"])
        return Measurement(probe.clique, rel.values, rel.stddev, probe.query, noise=mechanism)

    def measure(self, key, data: Dataset, clique: CliqueLike, *, query=None, mechanism: str | None = None, epsilon=None,
                rho=None, scale=None, sensitivity: float | None = None, target=None) -> Measurement:
        """Noisy answers ``Q mu_C(D) + noise`` to a marginal (or linear queries on it), recorded.

        The sensitivity follows from the convention and the query (:meth:`l1_sensitivity` for
        Laplace, :meth:`l2_sensitivity` for Gaussian) unless given. The returned
        :class:`~pgmjax.Measurement` carries the true noise std (``sqrt(2) b`` for Laplace) and the
        query, ready for :func:`pgmjax.estimate`. The noise is ``scale * standard_laplace(key, rows)``
        or ``scale * standard_normal(key, rows)``: reproducible from the key.

        Args:
            key: a ``jax.random`` key.
            data: the private :class:`~pgmjax.Dataset`.
            clique: the attributes of the marginal (its axes in this order).
            query: None (the marginal), a dense ``(rows, cells)`` matrix (1-D: one row), or a tuple of
                per-attribute matrices (Kronecker product).
            mechanism: ``"gaussian"`` or ``"laplace"``; default Gaussian under zCDP, else Laplace.
            epsilon: Laplace budget; rho: zCDP budget (either may be ``REST``); or scale: the noise
                scale (Laplace ``b`` or Gaussian ``sigma``).
            sensitivity: override the sensitivity (only with a proof that it holds).
            target: ledger label (default: the clique).

        Returns:
            A :class:`~pgmjax.Measurement`.

        Example:
            >>> acc = Accountant(epsilon=1.0, bounded=True)
            >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
            >>> m = acc.measure(jax.random.key(0), data, ("a", "b"), epsilon=0.5)   # Laplace b = 2 / 0.5
            >>> round(float(m.stddev), 4)                                          # sqrt(2) * 4
            5.6569
        """
        where = "Accountant.measure"
        check_key(key, where)
        clique, probe, qdesc, mechanism = self._plan(where, data, clique, query, mechanism)
        if sensitivity is None:
            sensitivity = (l1_sensitivity if mechanism == "laplace" else l2_sensitivity)(probe.query, bounded=self._bounded)
        target = clique if target is None else target
        p = self._prepare(where, mechanism, target, sensitivity, 1, epsilon, rho, scale, probe.rows, self._integer_query(probe))
        m = self._release(key, probe, data.marginal(clique), mechanism, p)
        self._record(mechanism, target, qdesc, probe.rows, 1, p)
        return m

    def measure_many(
        self,
        key,
        data: Dataset,
        cliques: Sequence[CliqueLike],
        *,
        queries: Sequence | None = None,
        mechanism: str | None = None,
        epsilon=None,
        rho=None,
        scale=None,
    ) -> list[Measurement]:
        """Measure several marginals, splitting a total budget equally (sequential composition).

        ``epsilon`` / ``rho`` is the total for the batch: each measurement gets ``1/k`` of it (with
        ``REST``, ``1/k`` of what is left, the last one exactly the remainder). ``scale`` is per
        measurement. Everything, the total budget included, is checked before anything is measured.
        Measurement ``i`` uses ``jax.random.split(key, k)[i]`` and equals ``measure`` with that key.

        Args:
            key: a ``jax.random`` key.
            data: the private dataset.
            cliques: the marginals to measure.
            queries: None, or one query per clique (None entries for plain marginals).
            mechanism, epsilon, rho, scale: as in :meth:`measure`.

        Returns:
            One :class:`~pgmjax.Measurement` per clique.

        Example:
            >>> acc = Accountant(rho=0.3)                        # MST's one-way step: rho/3 over d marginals
            >>> data = Dataset(np.array([[0, 1], [1, 2], [1, 0]]), {"a": 2, "b": 3})
            >>> ms = acc.measure_many(jax.random.key(0), data, [("a",), ("b",)], rho=0.1)
            >>> [round(float(m.stddev), 4) for m in ms]        # sigma = 1 / sqrt(2 * 0.05)
            [3.1623, 3.1623]
        """
        where = "Accountant.measure_many"
        check_key(key, where)
        cliques = list(cliques)
        k = len(cliques)
        if k == 0:
            raise ValueError(f"{where}: no cliques given")
        if queries is None:
            queries = [None] * k
        queries = list(queries)
        if len(queries) != k:
            raise ValueError(f"{where}: {len(queries)} queries for {k} cliques")
        plans = [self._plan(f"{where} (clique {i})", data, c, q, mechanism) for i, (c, q) in enumerate(zip(cliques, queries))]
        mechanism = plans[0][3]
        sens = [(l1_sensitivity if mechanism == "laplace" else l2_sensitivity)(pl[1].query, bounded=self._bounded) for pl in plans]
        shapes = [{"size": pl[1].rows, "integer": self._integer_query(pl[1])} for pl in plans]
        name, total = exactly_one(where, epsilon=epsilon, rho=rho, scale=scale)
        as_cost = "rho" if self._composition == "zcdp" else "epsilon"  # the parameter that is the cost itself
        if isinstance(total, str):
            if total != REST:
                raise ValueError(f"{where}: {name} must be a number or {REST!r}, got {total!r}")
            if name == "scale":
                raise ValueError(f"{where}: {REST!r} is a budget; give it as epsilon= or rho=")
            # Equal parts of what is left; the last part is resolved after the others are recorded,
            # as exactly the rest, so that the ledger sums to the budget.
            part = self._rest_cost(where, mechanism) / k
            self._resolve(mechanism, where, sens[-1], 1, **{name: part})  # is `name` valid here? (raises now, not midway)
            params = [self._resolve(mechanism, where, d, 1, **{as_cost: part}, **shape) for d, shape in zip(sens[:-1], shapes)] + [None]
        else:
            per = total if name == "scale" else check_positive(total, name, where) / k
            params = [self._resolve(mechanism, where, d, 1, **{name: per}, **shape) for d, shape in zip(sens, shapes)]
            self._check_budget(where, f"{k} {mechanism} measurements", params)
        tables = data.marginals([pl[0] for pl in plans])
        keys = jax.random.split(key, k)
        out = []
        for i, (pl, d, table) in enumerate(zip(plans, sens, tables)):
            if params[i] is None:
                p = self._resolve(mechanism, where, d, 1, **{as_cost: REST}, **shapes[i])
            else:
                p = self._within_budget(where, mechanism, d, params[i])
            out.append(self._release(keys[i], pl[1], table, mechanism, p))
            self._record(mechanism, pl[0], pl[2], pl[1].rows, 1, p)
        return out
