"""HDMM's measurement step: every block of a strategy released through the :class:`~pgmjax.privacy.Accountant`.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018, the matrix mechanism's measurement ``y = A x + noise`` with
the noise calibrated to the sensitivity of the whole strategy ``A``: Laplace ``b = ||A||_1 / eps`` on every
row (pure DP), or Gaussian ``sigma = ||A||_{1->2} / sqrt(2 rho)`` (zCDP). A stacked strategy
``A = [alpha_1 A_1; ...; alpha_k A_k]`` is released block by block, each block by
:meth:`~pgmjax.privacy.Accountant.measure` with the budget share that gives it the common noise scale
(``eps alpha_j ||A_j||_1 / ||A||_1``, Gaussian ``rho alpha_j^2 ||A_j||^2 / ||A||^2``), so the privacy layer
draws and records every noise addition and the ledger holds one entry per block. This is the only place
of the sub-package that reads private data.

Example:
    >>> acc = pj.Accountant(epsilon=1.0)
    >>> data = pj.Dataset(np.array([[0, 1], [1, 0], [1, 1]]), pj.Domain({"a": 2, "b": 2}))
    >>> S = UnionStrategy([KronStrategy(("a",), identity(2), 0.5), KronStrategy(("b",), identity(2), 0.5)])
    >>> release = measure_strategy(acc, jax.random.key(0), data, S)
    >>> release.scale, acc.spent, len(acc.ledger)       # b = ||A||_1 / eps on every row; one entry per block
    (1.0, 1.0, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np

from ...data.dataset import Dataset
from ...data.domain import Clique
from ...privacy import REST, Accountant, PrivacyBudgetExceeded
from ...queries.measurement import Measurement
from .factors import identity  # noqa: F401  (the docstring examples use it)
from .strategies import KronStrategy, MarginalsStrategy, UnionStrategy

__all__ = ["measure_strategy", "StrategyRelease", "equal_column_norms"]

# Relative spread of a factor's column norms under which they count as equal (round-off of the fits).
_EQUAL_NORM_RTOL = 1e-9

# The accountant's composition decides the noise: Laplace under pure DP, Gaussian under zCDP.
_NOISE_OF = {"pure": "laplace", "zcdp": "gaussian"}


@dataclass(frozen=True)
class StrategyRelease:
    """What :func:`measure_strategy` released.

    Attributes:
        measurements: one :class:`~pgmjax.Measurement` per strategy block (Kronecker query and true noise std).
        noise: ``"laplace"`` or ``"gaussian"``.
        sensitivity: of the whole stack under the accountant's neighbouring relation (L1 for Laplace, L2
            for Gaussian); exact when :func:`equal_column_norms` holds, an upper bound otherwise.
        scale: the noise scale on every row of the stack (Laplace ``b`` or Gaussian ``sigma``).
        noise_std: the standard deviation of that noise (``sqrt(2) b`` for Laplace).
    """

    measurements: list[Measurement]
    noise: str
    sensitivity: float
    scale: float
    noise_std: float


def _blocks(strategy) -> list[tuple[Clique, object, float]]:
    """``(clique, query, weight)`` per released block: Kronecker terms (weight folded into the query), or the
    positive-weight marginals of OPT_M (plain marginals released with noise ``1/theta`` of the stack's)."""
    if isinstance(strategy, MarginalsStrategy):
        return [(clique, None, theta) for clique, theta in strategy.marginals()]
    terms = strategy.terms if isinstance(strategy, UnionStrategy) else (strategy,)
    return [(t.clique, t.queries(), 1.0) for t in terms]


def equal_column_norms(strategy, noise: str) -> bool:
    """Whether every factor of ``strategy`` has columns of one norm (L1 for Laplace, L2 for Gaussian).

    Then one record moves one column of every block, and the stack's sensitivity is exactly the sum (L1) or
    root-sum-of-squares (L2) of the blocks' sensitivities; otherwise that sum is an upper bound. Every
    strategy the optimisers build has unit-norm columns; a marginals strategy always qualifies.

    Example:
        >>> equal_column_norms(KronStrategy(("a",), identity(3)), "laplace")
        True
        >>> equal_column_norms(KronStrategy(("a",), np.array([[1.0, 0.0], [1.0, 1.0]])), "laplace")
        False
    """
    if isinstance(strategy, MarginalsStrategy):
        return True
    terms = strategy.terms if isinstance(strategy, UnionStrategy) else (strategy,)
    for t in terms:
        for f in t.factors:
            norms = np.abs(f).sum(axis=0) if noise == "laplace" else np.sqrt((f * f).sum(axis=0))
            if norms.max() - norms.min() > _EQUAL_NORM_RTOL * norms.max():
                return False
    return True


def measure_strategy(accountant: Accountant, key, data: Dataset, strategy) -> StrategyRelease:
    """Release ``y = A x + noise`` for an HDMM strategy through the accountant, spending all it has left.

    The noise follows the accountant: Laplace under pure DP (``b = ||A||_1 / eps``), Gaussian under zCDP
    (``sigma = ||A||_{1->2} / sqrt(2 rho)``), with the sensitivities of its neighbouring relation (doubled L1
    and ``sqrt 2`` times L2 for replace-one). Block ``j`` is one :meth:`~pgmjax.privacy.Accountant.measure`
    call with key ``jax.random.split(key, k)[j]`` and the share of the remaining budget that gives it the
    common scale; the last block spends exactly what is left, so the ledger sums to the budget.

    Args:
        accountant: the run's :class:`~pgmjax.privacy.Accountant` (composition ``"pure"`` or ``"zcdp"``).
        key: a ``jax.random`` key for the noise.
        data: the private :class:`~pgmjax.Dataset`.
        strategy: a :class:`.KronStrategy`, :class:`.UnionStrategy` or :class:`.MarginalsStrategy` over
            attributes of ``data``.

    Returns:
        A :class:`StrategyRelease`.

    Raises:
        TypeError / ValueError: an accountant under another composition, or a strategy of no known kind.
        PrivacyBudgetExceeded: nothing is left to spend.
    """
    where = "measure_strategy"
    if not isinstance(accountant, Accountant):
        raise TypeError(f"{where}: accountant must be a pgmjax.Accountant, got {type(accountant).__name__}")
    if not isinstance(strategy, (KronStrategy, UnionStrategy, MarginalsStrategy)):
        raise TypeError(f"{where}: strategy must be a KronStrategy, UnionStrategy or MarginalsStrategy, got {type(strategy).__name__}")
    noise = _NOISE_OF.get(accountant.composition)
    if noise is None:
        raise ValueError(f"{where}: the accountant's composition must be 'pure' (Laplace) or 'zcdp' (Gaussian), got {accountant.composition!r}")
    blocks = _blocks(strategy)
    budget = accountant.remaining
    if accountant.exhausted or budget <= 0:
        raise PrivacyBudgetExceeded(f"{where}: the accountant has no budget left ({accountant.spent} of {accountant.budget} spent)")
    if noise == "laplace":
        # each block's sensitivity under the convention, as the accountant computes it (||.||_1, twice if bounded)
        shares = np.array([w * accountant.l1_sensitivity(q) for _, q, w in blocks])
        sens = float(shares.sum())
        spend = [{"epsilon": budget * s / sens} for s in shares[:-1]] + [{"epsilon": REST}]
        scale = sens / budget
        noise_std = math.sqrt(2.0) * scale
    else:
        shares = np.array([w * accountant.l2_sensitivity(q) for _, q, w in blocks])
        sens = float(np.sqrt((shares * shares).sum()))
        spend = [{"rho": budget * s * s / sens**2} for s in shares[:-1]] + [{"rho": REST}]
        scale = sens / math.sqrt(2.0 * budget)
        noise_std = scale
    keys = jax.random.split(key, len(blocks))
    measurements = [
        accountant.measure(k, data, clique, query=query, mechanism=noise, **sp) for (clique, query, _), k, sp in zip(blocks, keys, spend)
    ]
    return StrategyRelease(measurements, noise, sens, scale, noise_std)
