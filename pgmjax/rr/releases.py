"""A randomized-response release: the released table plus the public law that produced it.

Wang, Ying & Zhang, "A Minimax Distortion View of Differentially Private Query Release" (arXiv 2014),
Section IV: the mechanism publishes a synthetic table without knowing any query; afterwards each query
is answered by a *companion estimator* built for that query and for the (public) mechanism, not by
evaluating the query on the released table as if it were real. A :class:`Release` keeps the two
together, so an estimator can never pair a table with the wrong domain size or epsilon (a silent bias).

The randomisation itself is a read of private data and lives in the privacy layer
(:meth:`pgmjax.privacy.Accountant.randomized_response`); :func:`release` only calls it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..data.dataset import Dataset
from ..data.domain import CliqueLike, Domain
from ..privacy import Accountant
from ..checks import check_bool as _bool
from ..checks import check_key as _check_key
from ..checks import check_positive as _positive
from ..queries import factors as Q
from .channel import Channel

__all__ = ["Release", "release"]


@dataclass(frozen=True)
class Release:
    """A released table ``D~`` (same records, same order as the private one) and its channel.

    Besides being the published synthetic table, it answers queries like a model does (``domain``,
    ``total``, ``marginal``, ``marginals``, ``answers``) but through the *unbiased companion
    estimators* (debiased marginals, :func:`pgmjax.rr.debiased_marginal`): answers can be negative or
    exceed the total; see :func:`pgmjax.rr.answer` for variances and proper (clipped/rounded) answers.
    This is the "original" arm of :func:`pgmjax.mechanisms.rr_synthetic`.

    Attributes:
        data: the released :class:`~pgmjax.Dataset`.
        channel: the :class:`~pgmjax.rr.Channel` that produced it (epsilon, grouping, mixing weights).

    Example:
        >>> dom = Domain({"a": 2, "b": 2})
        >>> rel = Release.of(Dataset(np.array([[0, 1], [0, 0], [1, 0]]), dom), np.log(3))
        >>> rel.marginal(("a", "b")).round(6).tolist()          # eps = ln 3, worked by hand: (6 h~ - 3) / 2
        [[1.5, 1.5], [1.5, -1.5]]
    """

    data: Dataset
    channel: Channel

    @classmethod
    def of(cls, data: Dataset, epsilon: float, per_attribute: bool = False) -> "Release":
        """Wrap a released table with the law it was released under (``epsilon``, ``per_attribute``)."""
        if not isinstance(data, Dataset):
            raise TypeError(f"Release.of: data must be a pgmjax.Dataset, got {type(data).__name__}")
        per_attribute = _bool(per_attribute, "per_attribute", "Release.of")
        return cls(data, Channel.of(data.domain, epsilon, per_attribute))

    @property
    def domain(self) -> Domain:
        return self.data.domain

    @property
    def total(self) -> float:
        """The number of records ``n`` (public: the release has exactly ``n`` rows)."""
        return float(len(self.data))

    @property
    def epsilon(self) -> float:
        return self.channel.epsilon

    @property
    def per_attribute(self) -> bool:
        return len(self.channel.groups) != 1 or len(self.domain) == 1

    def marginal(self, clique: CliqueLike) -> np.ndarray:
        """The debiased marginal ``M_C^{-1} h~_C`` (unbiased for the true counts; may be negative)."""
        return self.channel.inverse(self.data.marginal(clique), clique)

    def marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        cliques = [self.domain.check_clique(c) for c in cliques]
        return [self.channel.inverse(t, c) for t, c in zip(self.data.marginals(cliques), cliques)]

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        """Unbiased answers to factored queries (``{attribute: factor}``, :mod:`pgmjax.queries.factors`)."""
        out = []
        for query in queries:
            attrs, mats = Q.resolve(self.domain, query)
            if not attrs:
                out.append(np.array(self.total))
                continue
            out.append(Q.kron_apply(self.marginal(attrs), mats))
        return out

    def __repr__(self) -> str:
        kind = "per-attribute" if self.per_attribute else "whole-row"
        return f"Release({len(self.data)} records, {kind} randomized response, epsilon={self.epsilon:.6g}, {self.domain})"


def release(key, data: Dataset, epsilon: float, *, per_attribute: bool = False, accountant: Accountant | None = None,
            public_count: bool = False, target: str | None = None) -> Release:
    """Randomise every record of ``data`` (k-ary randomized response) and return the :class:`Release`.

    [WYZ] eq. 14-16 (reconstructed), Lemma 1: ``epsilon``-DP under replace-one neighbours; the release
    has exactly ``n`` records, so under add/remove neighbours it is DP only when ``n`` is public. The
    sampling and the accounting are :meth:`pgmjax.privacy.Accountant.randomized_response` (pure
    ``epsilon``; ``rho = epsilon^2 / 2`` under zCDP accountants).

    Args:
        key: a ``jax.random`` key.
        data: the private :class:`~pgmjax.Dataset`.
        epsilon: the release's epsilon (per-attribute: split equally across the attributes).
        per_attribute: False for [WYZ]'s mechanism over the whole row domain (``K = domain.size()``: only
            informative for domains of a few dozen rows, see :func:`pgmjax.rr.max_informative_size`);
            True to randomise each attribute separately.
        accountant: the run's accountant (default: a fresh replace-one ``Accountant(epsilon=epsilon,
            bounded=True)``).
        public_count: declare ``n`` public, required when ``accountant.bounded`` is False.
        target: the ledger label (default the accountant's: "randomized response[ per attribute]").

    Returns:
        A :class:`Release`.

    Example:
        >>> data = Dataset(np.zeros((1000, 2), dtype=int), {"a": 2, "b": 3})
        >>> rel = release(jax.random.key(0), data, 2.0)
        >>> rel
        Release(1000 records, whole-row randomized response, epsilon=2, Domain({'a': 2, 'b': 3}))
        >>> float(rel.marginal(("a",)).sum())           # the debiased counts sum to n
        1000.0
    """
    where = "pgmjax.rr.release"
    _check_key(key, where)
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    per_attribute = _bool(per_attribute, "per_attribute", where)
    eps = _positive(epsilon, "epsilon", where)
    channel = Channel.of(data.domain, eps, per_attribute)  # the same eps / d split as the sampler's
    if accountant is None:
        accountant = Accountant(epsilon=eps, bounded=True)
    elif not isinstance(accountant, Accountant):
        raise TypeError(f"{where}: accountant must be a pgmjax.privacy.Accountant, got {type(accountant).__name__}")
    released = accountant.randomized_response(key, data, epsilon=eps, per_attribute=per_attribute, public_count=public_count,
                                              target=target)
    return Release(released, channel)
