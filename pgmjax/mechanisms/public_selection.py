"""AIM's rounds with a public table: measure a marginal privately, or take it from public data, whichever helps.

Joint selection (Fuentes, Mullins, McKenna, Miklau & Sheldon, "Joint selection: adaptively incorporating public
information for private synthetic data", AISTATS 2024, Algorithm 1 "JAM"): each round's exponential mechanism
chooses among twice the candidates. Measuring ``r`` privately scores, as in AIM, the model's error on ``r``
less the expected error of the measurement, ``w_r (||M_r(D) - M_r(model)||_1 - sqrt(2/pi) sigma n_r)``; taking
``r`` from the public table scores the model's error less the public marginal's own,
``w_r (||M_r(D) - M_r(model)||_1 - ||M_r(D) - P_r||_1)``, with ``P_r`` the public counts scaled to the model's
(private, estimated) total. A public marginal far from the private one scores low and is not taken: a biased
public table is used only where it is closer than a measurement would be.

Privacy: the public score is a difference of two L1 distances from the private marginal, each moved by at most
one by adding or removing a record, so its sensitivity is twice AIM's; the round's draw uses that bound for
every option. Taking a public marginal spends only the draw: the round's measurement budget stays for later
rounds, and the ledger records the public marginal at no cost (:mod:`pgmjax.privacy.public_inputs`). The last
round, which spends the rest of the budget, measures privately. A public marginal taken once is not offered
again (a choice on released selections only). It enters the fit as a measurement with the noise scale of the
private measurement it replaces, the same weight, as in JAM.

Example:
    >>> import numpy as np, pgmjax as pj
    >>> from pgmjax.queries.public import PublicData
    >>> dom = pj.Domain({"a": 2, "b": 2})
    >>> joint = JointSelection(PublicData(pj.Dataset(np.array([[0, 0], [1, 1]]), dom)), [("a",), ("a", "b")], "aim")
    >>> joint.offered(np.array([True, True])).tolist()
    [True, True]
"""

from __future__ import annotations

import numpy as np

from ..data.domain import Clique, Domain
from ..privacy import Accountant
from ..queries.measurement import Measurement
from ..queries.public import PublicData
from .steps import l1_errors

#: Sources of a round's marginal, as its log says.
SOURCES = ("private", "public")


def check_public_type(public, where: str) -> PublicData | None:
    """``public`` if it is None or a :class:`~pgmjax.queries.public.PublicData`, else a TypeError naming ``where``
    (its domain is checked by :func:`check_public`, where the data's is known)."""
    if public is not None and not isinstance(public, PublicData):
        raise TypeError(f"{where}: public must be a pgmjax.queries.public.PublicData, got {type(public).__name__}")
    return public


def check_public(public, domain: Domain, where: str) -> PublicData | None:
    """``public`` (None, or a :class:`~pgmjax.queries.public.PublicData` over ``domain``) checked before any budget."""
    if check_public_type(public, where) is None:
        return None
    if public.domain != domain:
        raise ValueError(f"{where}: the public data's domain {public.domain} is not the private table's {domain}")
    return public


class JointSelection:
    """A run's public side: the public counts of every candidate, and which the rounds have taken.

    Args:
        public: the public data.
        cands: the candidates (cliques), in the run's order.
        where: the caller, for messages.

    Raises:
        ValueError: a candidate the public data cannot answer (only some of its marginals are public).
    """

    def __init__(self, public: PublicData, cands: list[Clique], where: str):
        self.public = public
        self.cands = list(cands)
        try:
            self.counts = [public.counts(c) for c in self.cands]  # public: read freely, once
        except ValueError as e:
            raise ValueError(f"{where}: {e}; give marginals holding every candidate, or the public table") from None
        #: the cliques taken from the public table, in order.
        self.taken: list[Clique] = []

    def offered(self, allowed: np.ndarray) -> np.ndarray:
        """Which public options the round offers: the candidates the size limit allows, not yet taken."""
        taken = set(self.taken)
        return np.asarray(allowed, bool) & np.array([c not in taken for c in self.cands])

    def qualities(self, truth, errors: np.ndarray, total: float, weight: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """The public options' scores ``w_r (errors_r - ||M_r(D) - P_r||_1)`` (``-inf`` where not offered); ``truth``
        the private marginals, ``errors`` the model's L1 errors on them, ``total`` the model's total."""
        scale = total / self.public.total
        public_errors = l1_errors(truth, [c * scale for c in self.counts])
        return np.where(self.offered(allowed), weight * (errors - public_errors), -np.inf)

    def take(self, acc: Accountant, j: int, total: float, sigma: float) -> Measurement:
        """Candidate ``j`` taken from the public table: recorded in the ledger at no cost, as a measurement scaled to
        ``total`` with the noise scale ``sigma`` of the private measurement it replaces."""
        clique = self.cands[j]
        self.taken.append(clique)
        acc.record_public(clique, self.counts[j].size)
        return Measurement(clique, self.counts[j].reshape(-1) * (total / self.public.total), sigma)
