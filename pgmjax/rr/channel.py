"""The randomized-response channel: the public transition law of a release, applied to tables.

Wang, Ying & Zhang, "A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014),
Section IV, eq. 14-16 and Lemma 1: each record ``r`` of the private table is replaced by ``r~`` with

    P(r~ = r) = e^eps / (e^eps + K - 1),   P(r~ = s) = 1 / (e^eps + K - 1)  (s != r),

over a row domain of ``K`` values (k-ary randomized response; an exponential mechanism with score
``-d_H``). Equivalently ``r~ = r`` with probability ``lam = (e^eps - 1) / (e^eps + K - 1)`` and a uniform
draw from the whole domain otherwise, so the transition matrix is ``M = lam I + (1 - lam) J / K`` (``J``
all ones) and ``M^{-1} = (I - (1 - lam) J / K) / lam``.

A :class:`Channel` describes which attributes are randomised together: one *group* holding every
attribute (the paper's mechanism over the whole row domain) or one group per attribute (the
per-attribute variant with ``eps / d`` each, not in the paper: ``M = kron_a M_a``). Projected onto a
clique ``C`` the channel is again a product over the groups meeting ``C`` of ``lam_g I + (1 - lam_g) J / m``
with ``m`` the number of cells of the group's attributes in ``C`` (a uniform row projects to a uniform
cell), which is what the estimators need: they never touch the full domain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..data.domain import Clique, CliqueLike, Domain
from ..checks import check_positive as _positive

__all__ = ["Channel", "mixing_weight"]


def mixing_weight(epsilon: float, size: float) -> float:
    """``lam = (e^eps - 1) / (e^eps + K - 1)``: the probability that a record is kept *by design*.

    [WYZ] eq. 15-16 (reconstructed): k-ary randomized response keeps a record with probability
    ``e^eps / (e^eps + K - 1) = lam + (1 - lam) / K``; the rest of the time it is a uniform draw over the
    ``K`` values (which may return the record itself).

    Args:
        epsilon: the epsilon of the group, ``> 0``.
        size: ``K``, the number of values of the group (at least 1; one value is left as it is).

    Returns:
        ``lam`` in ``(0, 1)``.

    Example:
        >>> round(mixing_weight(math.log(3), 4), 12)     # e^eps = 3, K = 4: (3 - 1) / (3 + 3)
        0.333333333333
    """
    where = "mixing_weight"
    eps = _positive(epsilon, "epsilon", where)
    k = float(size)
    if not k >= 1:
        raise ValueError(f"{where}: size must be at least 1 value, got {size!r}")
    e = math.expm1(eps)
    return e / (e + k)


@dataclass(frozen=True)
class Channel:
    """The public law of a randomized-response release: attribute groups and their mixing weights.

    Attributes:
        domain: the row domain.
        groups: attribute groups randomised together (domain order inside each group).
        epsilons: the epsilon of each group (they add up to the release's epsilon).
        keep: ``lam_g`` of each group (:func:`mixing_weight` of its epsilon and number of values).
        ratios: ``(1 - lam_g) / lam_g = K_g / (e^eps_g - 1)`` of each group, kept separately because
            ``1 - lam`` rounds to 1 when ``lam`` is below 1e-16 (huge domains).

    Example:
        >>> ch = Channel.whole_row(Domain({"a": 2, "b": 2}), math.log(3))
        >>> ch.groups, round(ch.keep[0], 6)
        ((('a', 'b'),), 0.333333)
        >>> ch.matrix(("a", "b")).round(4)[0].tolist()           # P(r~ | r = (0, 0)): 1/2 kept, 1/6 each other
        [0.5, 0.1667, 0.1667, 0.1667]
    """

    domain: Domain
    groups: tuple[tuple[str, ...], ...]
    epsilons: tuple[float, ...]
    keep: tuple[float, ...]
    ratios: tuple[float, ...]

    @classmethod
    def whole_row(cls, domain: Domain, epsilon: float) -> "Channel":
        """[WYZ]'s mechanism: one group, ``K = domain.size()`` values, the whole ``epsilon``."""
        eps = _positive(epsilon, "epsilon", "Channel.whole_row")
        k = float(domain.size())
        return cls(domain, (tuple(domain.attributes),), (eps,), (mixing_weight(eps, k),), (k / math.expm1(eps),))

    @classmethod
    def per_attribute(cls, domain: Domain, epsilon: float) -> "Channel":
        """One group per attribute, ``epsilon / d`` each (sequential composition over the ``d`` attributes)."""
        eps = _positive(epsilon, "epsilon", "Channel.per_attribute")
        attrs = domain.attributes
        share = eps / len(attrs)
        return cls(domain, tuple((a,) for a in attrs), (share,) * len(attrs), tuple(mixing_weight(share, domain[a]) for a in attrs),
                   tuple(domain[a] / math.expm1(share) for a in attrs))

    @classmethod
    def of(cls, domain: Domain, epsilon: float, per_attribute: bool) -> "Channel":
        """:meth:`per_attribute` or :meth:`whole_row`."""
        return cls.per_attribute(domain, epsilon) if per_attribute else cls.whole_row(domain, epsilon)

    @property
    def epsilon(self) -> float:
        """The release's epsilon (sum over the groups)."""
        return math.fsum(self.epsilons)

    def parts(self, clique: CliqueLike) -> list[tuple[tuple[int, ...], float, float, int]]:
        """The channel on ``clique``: per group meeting it, ``(axes in the clique, lam, ratio, cells)``."""
        clique = self.domain.check_clique(clique)
        out = []
        for group, lam, ratio in zip(self.groups, self.keep, self.ratios):
            axes = tuple(i for i, a in enumerate(clique) if a in group)
            if axes:
                out.append((axes, lam, ratio, math.prod(self.domain[clique[i]] for i in axes)))
        return out

    def _apply(self, table, clique: Clique, inverse: bool) -> np.ndarray:
        t = np.asarray(table, dtype=np.float64)
        k = len(clique)
        lead = t.ndim - k
        if lead < 0 or t.shape[lead:] != self.domain.shape_of(clique):
            raise ValueError(f"Channel: a table over {clique} must end with shape {self.domain.shape_of(clique)}, got {t.shape}")
        for axes, _, ratio, cells in self.parts(clique):
            mean = t.sum(axis=tuple(lead + i for i in axes), keepdims=True) / cells
            if inverse:  # (t - (1 - lam) mean) / lam, written without 1 - lam
                t = t + ratio * (t - mean)
            else:  # lam t + (1 - lam) mean
                t = (t + ratio * mean) / (1.0 + ratio)
        return t

    def forward(self, table, clique: CliqueLike) -> np.ndarray:
        """``M_C t`` on the last axes of ``table`` (a table over ``clique``, leading axes batched):
        the expected released marginal when ``t`` is the true one."""
        return self._apply(table, self.domain.check_clique(clique), inverse=False)

    def inverse(self, table, clique: CliqueLike) -> np.ndarray:
        """``M_C^{-1} t`` on the last axes of ``table`` (leading axes batched). ``M_C`` is symmetric, so this
        debiases a released marginal and also turns a query ``f`` into its companion ``g = M_C^{-1} f``."""
        return self._apply(table, self.domain.check_clique(clique), inverse=True)

    def matrix(self, clique: CliqueLike) -> np.ndarray:
        """The dense transition matrix ``M_C[s, r] = P(r~_C = s | r_C = r)`` (small cliques; tests)."""
        clique = self.domain.check_clique(clique)
        cells = self.domain.size(clique)
        if cells > 4096:
            raise ValueError(f"Channel.matrix: {clique} has {cells} cells; the dense matrix is for small cliques (<= 4096)")
        eye = np.eye(cells).reshape((cells, *self.domain.shape_of(clique)))
        return self.forward(eye, clique).reshape(cells, cells).T
