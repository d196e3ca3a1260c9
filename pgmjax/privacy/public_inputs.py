"""What a run took from public data, in its ledger at no cost.

Public data (an earlier census, a public sample) is not private: a marginal read from it costs nothing and needs
no noise. A run that mixes it with private measurements still records each such marginal, so that the ledger
says what the release rests on: a :class:`~pgmjax.privacy.ledger.LedgerEntry` of mechanism ``"public"`` with
zero cost, sensitivity and scale, beside the noise additions (Fuentes, Mullins, McKenna, Miklau & Sheldon,
"Joint selection: adaptively incorporating public information for private synthetic data", AISTATS 2024: the
public measurements a run selects).

Example:
    >>> from pgmjax.privacy import Accountant
    >>> acc = Accountant(rho=1.0)
    >>> acc.record_public(("age", "sex"), 34)
    >>> acc.ledger[0].mechanism, acc.ledger[0].cost, acc.spent
    ('public', 0.0, 0.0)
"""

from __future__ import annotations

from ..data.domain import as_clique

#: The ledger numbers of a public input: nothing spent, no noise.
_FREE = {"sensitivity": 0.0, "scale": 0.0, "epsilon": 0.0, "rho": 0.0, "cost": 0.0}


class PublicInputs:
    """The :class:`~pgmjax.privacy.Accountant`'s record of public inputs (a mixin of its ledger)."""

    def record_public(self, clique, size: int, what: str = "public table") -> None:
        """Record that the marginal on ``clique`` (``size`` cells) was taken from public data: no cost, no noise.

        Args:
            clique: the attributes of the marginal.
            size: its number of cells.
            what: where it came from, the entry's ``query`` (default ``"public table"``).
        """
        self._record("public", as_clique(clique), what, size, 1, dict(_FREE))
