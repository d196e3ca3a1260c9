"""The ledger's row: one :class:`LedgerEntry` per noise addition, the labels it records, and the budget plan.

An :class:`~pgmjax.privacy.Accountant` appends one immutable entry for every release it makes (a
measured marginal, raw Laplace or Gaussian values, exponential-mechanism draws, randomized response),
with the sensitivity, noise scale and privacy cost that the release used; the ledger is what a report
shows and what a reader checks the privacy claim against. :func:`describe_query` and
:func:`freeze_target` produce the entry's ``query`` and ``target`` fields.

A :class:`BudgetPlan` is what a front-end says it will spend before it spends it: its steps
(:class:`BudgetStep`: one-way marginals, a selection, the rounds, ...) with their cost in the
accountant's currency, summing to the budget. The front-ends record it with
:meth:`~pgmjax.privacy.Accountant.record_plan` next to the entries that carry it out.

Example:
    >>> describe_query("kron", (np.ones((2, 3)), np.eye(4)))
    'kron 2x3 ⊗ 4x4'
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LedgerEntry", "BudgetStep", "BudgetPlan", "checked_entries", "describe_query", "freeze_target"]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One noise addition, as recorded by an :class:`Accountant` (immutable).

    Attributes:
        index: position in the ledger (0, 1, ...).
        mechanism: ``"laplace"``, ``"gaussian"``, ``"exponential"``, ``"randomized_response"``, or ``"public"``
            (a marginal taken from public data, at no cost: :mod:`pgmjax.privacy.public_inputs`).
        target: what was released: a clique (tuple of attributes) or a label.
        query: ``"identity"``, ``"dense RxC"``, ``"kron r1xc1 ⊗ r2xc2"`` for a measured marginal;
            ``"values"`` for raw Laplace/Gaussian, ``"selection"`` for the exponential mechanism.
        size: number of noisy values, or of candidates for the exponential mechanism.
        count: independent draws (``num`` of :meth:`Accountant.exponential`), else 1.
        sensitivity: the sensitivity used (L1 for Laplace / EM, L2 for Gaussian).
        scale: the noise scale: Laplace ``b``, Gaussian ``sigma``, or the Gumbel scale ``2 Delta / eps``
            on the qualities for the exponential mechanism.
        epsilon: pure-DP epsilon of one draw (None for Gaussian noise).
        rho: zCDP rho of one draw.
        cost: privacy cost of the entry (all draws) in the accountant's currency (``epsilon`` or
            ``rho``); under advanced composition the basic-composition cost ``count * epsilon``.
    """

    index: int
    mechanism: str
    target: Any
    query: str
    size: int
    count: int
    sensitivity: float
    scale: float
    epsilon: float | None
    rho: float
    cost: float


def describe_query(kind: str, q) -> str:
    """The ledger's ``query`` field for a query parsed by :func:`pgmjax.privacy.sensitivity.parse_query`.

    Args:
        kind: ``"identity"``, ``"dense"`` or ``"kron"``.
        q: None, the dense matrix, or the tuple of Kronecker factors.

    Returns:
        ``"identity"``, ``"dense RxC"`` or ``"kron r1xc1 ⊗ r2xc2 ..."``.

    Example:
        >>> describe_query("dense", np.zeros((3, 8)))
        'dense 3x8'
    """
    if kind == "identity":
        return "identity"
    if kind == "dense":
        return f"dense {q.shape[0]}x{q.shape[1]}"
    return "kron " + " ⊗ ".join(f"{f.shape[0]}x{f.shape[1]}" for f in q)


def freeze_target(target):
    """The ledger's ``target`` field: ``target`` with every list turned into a tuple (recursively), so entries stay immutable.

    Args:
        target: a clique, a label, or a (nested) list of them.

    Returns:
        The same value, lists replaced by tuples.

    Example:
        >>> freeze_target(["a", ["b", "c"]])
        ('a', ('b', 'c'))
    """

    if isinstance(target, list):
        return tuple(freeze_target(t) for t in target)
    return target


def checked_entries(records, composition: str, budget: float, existing: int = 0) -> list[LedgerEntry]:
    """A checkpointed run's ledger records as entries, each checked: what :meth:`pgmjax.privacy.Accountant.restore` takes.

    The checkpoint of a long run (:mod:`pgmjax.mechanisms.checkpoint`) keeps the ledger of the rounds it holds; a
    resumed run restores it into a fresh accountant of the same budget, so that what those rounds spent counts
    exactly once. Nothing is taken on trust: a record whose cost is not its draws' ``rho`` (zCDP) or ``epsilon``,
    or whose ``rho`` / ``epsilon`` is not what its noise scale costs at its sensitivity (an under-counting
    ledger), or records spending more than the budget, are refused.

    Args:
        records: dicts of the :class:`LedgerEntry` fields, in order (``Accountant.records()``; lists in
            ``target`` become tuples).
        composition: the accountant's: ``"pure"`` or ``"zcdp"`` (additive costs, their sum checked against the
            budget here), or an advanced one (each draw's epsilon checked here, the composed spend by the accountant).
        budget: the accountant's budget, in its currency.
        existing: the entries the accountant holds already (refused unless 0).

    Returns:
        The :class:`LedgerEntry` list.

    Raises:
        ValueError: entries already there, a composition that does not add costs, a malformed or inconsistent
            record (named by its index, mechanism and target), or records over the budget.

    Example:
        >>> import jax, numpy as np
        >>> from pgmjax.privacy import Accountant
        >>> first = Accountant(rho=1.0)
        >>> _ = first.gaussian(jax.random.key(0), np.zeros(4), 1.0, sigma=5.0, integer=True)
        >>> again = Accountant(rho=1.0)
        >>> again.restore(first.records())
        >>> again.spent, again.ledger == first.ledger
        (0.02, True)
    """
    where = "Accountant.restore"
    if existing:
        raise ValueError(f"{where}: the ledger already has {existing} entries; restore into a fresh accountant")
    if composition not in ("pure", "zcdp", "advanced", "advanced_heterogeneous"):
        raise ValueError(f"{where}: unknown composition {composition!r}")
    zcdp, currency = composition == "zcdp", "rho" if composition == "zcdp" else "epsilon"
    fields = list(LedgerEntry.__dataclass_fields__)
    entries = []
    for i, r in enumerate(records):
        if not isinstance(r, dict) or sorted(r) != sorted(fields):
            raise ValueError(f"{where}: ledger record {i} must have exactly the fields {fields}")
        e = LedgerEntry(**{**r, "target": freeze_target(r["target"])})
        unit = e.rho if zcdp else e.epsilon
        known = ("laplace", "gaussian", "exponential", "randomized_response", "public") if zcdp else ("laplace", "exponential", "randomized_response", "public")
        if e.index != i or e.mechanism not in known or e.count < 1 or unit is None:
            raise ValueError(f"{where}: ledger record {i} is malformed (its index, mechanism, count or {currency})")
        if not math.isclose(e.cost, e.count * unit, rel_tol=1e-9):
            raise ValueError(f"{where}: ledger record {i} ({e.mechanism} on {e.target!r}) records the cost {e.cost!r}, "
                             f"not {e.count} x its {currency} {unit!r}")
        implied = _noise_cost(e, zcdp)
        if not math.isclose(unit, implied, rel_tol=1e-6):
            raise ValueError(f"{where}: ledger record {i} ({e.mechanism} on {e.target!r}): its {currency} {unit!r} is "
                             f"not what its noise costs ({implied!r})")
        entries.append(e)
    spent = math.fsum(e.cost for e in entries)
    if not zcdp and composition != "pure":
        return entries  # an advanced composition's spend is composed: the accountant checks it (BudgetLedger.restore)
    if spent > budget * (1 + 1e-9):
        raise ValueError(f"{where}: the records spend {spent:.6g} {currency}, more than the budget {budget:.6g}")
    return entries


def _noise_cost(e: LedgerEntry, zcdp: bool) -> float:
    """The ``rho`` (zCDP) or ``epsilon`` (pure) of one draw of ``e``, from its noise scale and sensitivity."""
    if e.mechanism == "public":  # read from public data: no noise, no cost (pgmjax.privacy.public_inputs)
        return 0.0
    if e.mechanism == "gaussian":
        return e.sensitivity**2 / (2.0 * e.scale**2)
    if e.mechanism == "randomized_response":  # no scale: its epsilon is its calibration
        return e.epsilon**2 / 2.0 if zcdp else e.epsilon
    exponential = e.mechanism == "exponential"  # the Gumbel scale 2 Delta / eps; Laplace's b = Delta / eps
    eps = (2.0 if exponential else 1.0) * e.sensitivity / e.scale
    return eps**2 / (8.0 if exponential else 2.0) if zcdp else eps


@dataclass(frozen=True, slots=True)
class BudgetStep:
    """One step of a :class:`BudgetPlan` (immutable).

    Attributes:
        name: what the step releases, e.g. ``"one-way marginals"`` or ``"rounds 2..T"``.
        mechanism: ``"laplace"``, ``"gaussian"``, ``"exponential"``, ``"randomized_response"``, or
            ``"adaptive"`` for a share that later steps split as they go (AIM's and MWEM's rounds).
        cost: the step's cost in the plan's currency (all its releases together).
        releases: how many releases (ledger entries or draws) share the cost.
        scale: the noise scale of one release when it is fixed in advance (Laplace ``b``, Gaussian ``sigma``).
        epsilon: the pure-DP epsilon of one release when fixed in advance (exponential mechanism, Laplace).
    """

    name: str
    mechanism: str
    cost: float
    releases: int = 1
    scale: float | None = None
    epsilon: float | None = None


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """How a front-end splits its budget: the steps, in order, and their costs (immutable).

    The costs are in ``currency`` (``"epsilon"`` for pure DP and advanced composition, ``"rho"``
    under zCDP) and sum to ``budget``: :meth:`of` makes the last step the exact rest.

    Attributes:
        mechanism: the front-end's name.
        currency: ``"epsilon"`` or ``"rho"``.
        budget: the whole budget in ``currency``.
        steps: the :class:`BudgetStep` entries.
        composition: ``"pure"``, ``"zcdp"``, ``"advanced"`` or ``"advanced_heterogeneous"``.
        epsilon: the ``epsilon`` of the guarantee.
        delta: the ``delta`` of the guarantee (0 for pure DP).

    Example:
        >>> plan = BudgetPlan.of("demo", "epsilon", 1.0, [BudgetStep("count", "laplace", 0.1), BudgetStep("tables", "laplace", 0.0, 3)],
        ...                      composition="pure", epsilon=1.0, delta=0.0)
        >>> [s.cost for s in plan.steps], plan.total
        ([0.1, 0.9], 1.0)
    """

    mechanism: str
    currency: str
    budget: float
    steps: tuple[BudgetStep, ...]
    composition: str
    epsilon: float
    delta: float

    @classmethod
    def of(cls, mechanism: str, currency: str, budget: float, steps, *, composition: str, epsilon: float,
           delta: float) -> "BudgetPlan":
        """A plan whose last step gets exactly what the others leave of ``budget`` (its given cost is replaced).

        Args:
            mechanism, currency, budget, composition, epsilon, delta: the attributes.
            steps: the :class:`BudgetStep` entries (at least one).

        Returns:
            A :class:`BudgetPlan` with ``total == budget`` (to one rounding).
        """
        steps = list(steps)
        if not steps:
            raise ValueError(f"BudgetPlan.of: {mechanism}: a plan needs at least one step")
        rest = math.fsum([float(budget), *(-s.cost for s in steps[:-1])])
        last = steps[-1]
        steps[-1] = BudgetStep(last.name, last.mechanism, rest, last.releases, last.scale, last.epsilon)
        return cls(mechanism, currency, float(budget), tuple(steps), composition, float(epsilon), float(delta))

    @property
    def total(self) -> float:
        """The sum of the steps' costs (equal to :attr:`budget`)."""
        return math.fsum(s.cost for s in self.steps)

    def to_dict(self) -> dict:
        """The plan as plain, JSON-friendly values (steps as a list of dicts)."""
        out = {k: getattr(self, k) for k in ("mechanism", "currency", "budget", "composition", "epsilon", "delta")}
        out["steps"] = [asdict(s) for s in self.steps]
        return out
