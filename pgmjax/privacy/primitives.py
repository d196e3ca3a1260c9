"""The primitive mechanisms, without accounting: Laplace, Gaussian and the exponential mechanism.

* :func:`laplace_mechanism`: ``eps``-DP (Dwork, McSherry, Nissim & Smith 2006, "Calibrating noise to
  sensitivity in private data analysis", TCC).
* :func:`gaussian_mechanism`: ``rho``-zCDP with ``rho = Delta2^2 / (2 sigma^2)`` (Bun & Steinke 2016,
  "Concentrated differential privacy", TCC, Proposition 1.6).
* :func:`exponential_mechanism` and its exact law :func:`exponential_probabilities`: ``P(r) ∝
  exp(eps q(r) / (2 Delta))``, ``eps``-DP (McSherry & Talwar 2007, "Mechanism design via differential
  privacy", FOCS, Theorem 6) and ``eps^2 / 8``-zCDP (Cesar & Rogers 2021).

Every release is floating-point safe: integer or lattice-rounded answers plus exact discrete Laplace
or discrete Gaussian noise (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for differential
privacy", NeurIPS; :mod:`pgmjax.privacy.lattice`), and the exponential mechanism is sampled exactly by
rejection. Front-ends do not call these directly: the :class:`~pgmjax.privacy.Accountant`'s methods
calibrate, refuse to overspend and record.

Example:
    >>> exponential_probabilities([0.0, 0.0], sensitivity=1.0, epsilon=1.0).tolist()
    [0.5, 0.5]
"""

from __future__ import annotations

import jax
import numpy as np

from . import discrete_noise as dn
from ..checks import (
    check_count,
    check_key,
    check_positive,
    check_qualities,
    check_quality_rows,
    check_values,
    exactly_one,
)
from .lattice import lattice_plan, lattice_release

__all__ = ["laplace_mechanism", "gaussian_mechanism", "exponential_probabilities", "exponential_mechanism",
           "exponential_mechanism_rows"]


def laplace_mechanism(
    key, values, sensitivity: float, *, epsilon: float | None = None, scale: float | None = None, integer: bool = False
) -> np.ndarray:
    """Laplace mechanism, floating-point safe: ``values`` plus discrete Laplace noise of scale ``b`` (``eps``-DP).

    Dwork, McSherry, Nissim, Smith, "Calibrating noise to sensitivity", TCC 2006, with the discrete
    Laplace law of Canonne, Kamath & Steinke (NeurIPS 2020) on a public lattice
    (:func:`pgmjax.privacy.discrete_noise.lattice_noise`). With ``epsilon``, ``b = (Delta1 + a) / eps`` where ``a``
    is the sensitivity rounding to the lattice adds (0 for integer answers). No accounting: front-ends
    call :meth:`Accountant.laplace` or :meth:`Accountant.measure`.

    Args:
        key: a ``jax.random`` key.
        values: the exact answers (any shape); their L1 sensitivity is ``sensitivity``.
        sensitivity: L1 sensitivity ``Delta1 > 0`` of ``values`` as a whole.
        epsilon: the privacy parameter; or
        scale: the Laplace scale ``b`` directly (then ``eps = (Delta1 + a) / b``).
        integer: the answers are integers for every dataset (counts, integer-coefficient queries).

    Returns:
        The noisy values (float64 NumPy array of the same shape).

    Example:
        >>> laplace_mechanism(jax.random.key(0), np.zeros(3), 1.0, epsilon=1.0).shape
        (3,)
    """
    where = "laplace_mechanism"
    check_key(key, where)
    x = check_values(values, where)
    d = check_positive(sensitivity, "sensitivity", where)
    name, v = exactly_one(where, epsilon=epsilon, scale=scale)
    plan = lattice_plan("laplace", d, x.size, integer, **{name: check_positive(v, name, where)})
    return lattice_release(key, x, "laplace", plan)


def gaussian_mechanism(
    key, values, sensitivity: float, *, rho: float | None = None, sigma: float | None = None, integer: bool = False
) -> np.ndarray:
    """Gaussian mechanism, floating-point safe: discrete Gaussian noise, ``rho = (Delta2 + a)^2 / (2 sigma^2)``-zCDP.

    Bun & Steinke, "Concentrated differential privacy", TCC 2016, Proposition 1.6, with the discrete
    Gaussian of Canonne, Kamath & Steinke (NeurIPS 2020, Theorem 14) on a public lattice (``a``: the
    sensitivity rounding adds, 0 for integer answers). No accounting.

    Args:
        key: a ``jax.random`` key.
        values: the exact answers (any shape), of L2 sensitivity ``sensitivity``.
        sensitivity: L2 sensitivity ``Delta2 > 0``.
        rho: the zCDP budget; or
        sigma: the noise scale directly.
        integer: the answers are integers for every dataset.

    Returns:
        The noisy values (float64 NumPy array of the same shape).

    Example:
        >>> gaussian_mechanism(jax.random.key(0), np.zeros(2), 1.0, sigma=3.0).shape
        (2,)
    """
    where = "gaussian_mechanism"
    check_key(key, where)
    x = check_values(values, where)
    d = check_positive(sensitivity, "sensitivity", where)
    name, v = exactly_one(where, rho=rho, sigma=sigma)
    plan = lattice_plan("gaussian", d, x.size, integer, **{"scale" if name == "sigma" else name: check_positive(v, name, where)})
    return lattice_release(key, x, "gaussian", plan)


def _em_logits(q: np.ndarray, sensitivity: float, epsilon: float) -> np.ndarray:
    # Shift by the best finite quality first: exp() then never overflows, and the shift cancels
    # in the normalisation (the logits of excluded candidates stay -inf).
    return (epsilon / (2.0 * sensitivity)) * (q - q[np.isfinite(q)].max())


def exponential_probabilities(qualities, sensitivity: float, epsilon: float) -> np.ndarray:
    """Exact selection probabilities ``P(r) ∝ exp(eps q(r) / (2 Delta))`` of the exponential mechanism.

    McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007. Computed with a
    max-shift, so huge qualities do not overflow. A quality of ``-inf`` excludes a candidate
    (probability 0); exclusions must not depend on the private data.

    Args:
        qualities: 1-D array, one score per candidate.
        sensitivity: the qualities' sensitivity ``Delta > 0`` (max change of any one score).
        epsilon: the privacy parameter.

    Returns:
        Float64 probabilities summing to 1.

    Example:
        >>> exponential_probabilities([0.0, 2.0], 1.0, 1.0).round(4).tolist()
        [0.2689, 0.7311]
    """
    where = "exponential_probabilities"
    q = check_qualities(qualities, where)
    w = np.exp(_em_logits(q, check_positive(sensitivity, "sensitivity", where), check_positive(epsilon, "epsilon", where)))
    return w / w.sum()


#: The most draws one round of :func:`exponential_mechanism`'s rejection under ``admit`` takes at once.
_ADMIT_ROUND_MAX = 256


def exponential_mechanism(key, qualities, sensitivity: float, epsilon: float, *, num: int | None = None, admit=None):
    """Exponential mechanism, sampled exactly: ``P(r) ∝ exp(eps q(r) / (2 Delta))`` (``eps``-DP, ``eps^2/8``-zCDP).

    McSherry & Talwar, FOCS 2007. Draws by rejection from uniform proposals accepted with an exact
    ``Bernoulli(exp(-g))`` (:func:`pgmjax.privacy.discrete_noise.exponential_choice`): unlike a Gumbel-max on
    float uniforms, no candidate's probability is rounded to zero. No accounting: front-ends call
    :meth:`Accountant.exponential`.

    Args:
        key: a ``jax.random`` key.
        qualities: 1-D array of scores (``-inf`` excludes a candidate, data-independently).
        sensitivity: sensitivity ``Delta > 0`` of the scores.
        epsilon: the privacy parameter of one draw.
        num: None for one draw; an int for that many independent draws (with replacement).
        admit: None, or a predicate on an index (one draw): a drawn candidate it refuses is removed and the draw
            repeated, which samples the mechanism's law on the admitted set; a ValueError if it admits none.

    Returns:
        The selected index (int), or an int64 array of ``num`` indices.

    Example:
        >>> exponential_mechanism(jax.random.key(0), [0.0, 100.0], 1.0, 10.0)
        1
    """
    where = "exponential_mechanism"
    check_key(key, where)
    q = check_qualities(qualities, where)
    logits = _em_logits(q, check_positive(sensitivity, "sensitivity", where), check_positive(epsilon, "epsilon", where))
    n = 1 if num is None else check_count(num, "num", where)
    if admit is None:
        idx = dn.exponential_choice(dn.generator(key), -logits, n)
        return int(idx[0]) if num is None else idx
    if num is not None:
        raise ValueError(f"{where}: admit= draws one candidate; it cannot be given with num=")
    logits = np.array(logits, dtype=np.float64)
    rng = dn.generator(jax.random.fold_in(key, 0))  # one stream for the repeats: a key per repeat cost more than a draw
    size = 1
    # Rejection: P(r | admitted) is the law on the admitted set. Each round draws `size` candidates i.i.d. from the
    # law on those not refused before it; one refused within the round is skipped, which leaves each draw from the
    # law on those not refused so far (the sequence of distinct draws is the one-at-a-time removal's). A round draws
    # twice as many as the last one refused (a draw costs in proportion to how peaked the law is, and a peaked law's
    # draws repeat the few it refused), so a pick that refuses hundreds of candidates samples a few times, not
    # hundreds; each round's first draw is new, so there are at most as many rounds as candidates.
    while np.isfinite(logits).any():
        # Gaps from the best candidate left: the sampler proposes uniformly and accepts with exp(-gap), so with the
        # best ones refused the gaps must start at 0 again (the law is the same; unshifted, a run never ended).
        gaps = np.max(logits[np.isfinite(logits)]) - logits
        new = 0
        for choice in dn.exponential_choice(rng, gaps, size).tolist():  # drawn from the law at the round's start
            if logits[choice] == -np.inf:  # refused earlier in this round
                continue
            if admit(choice):
                return choice
            logits[choice] = -np.inf
            new += 1
        size = min(2 * new, _ADMIT_ROUND_MAX)
    raise ValueError(f"{where}: admit refused every candidate")


def exponential_mechanism_rows(key, qualities, sensitivity: float, epsilon: float) -> np.ndarray:
    """One exponential-mechanism draw per row of ``qualities``, ``P(row i picks r) ∝ exp(eps q_ir / (2 Delta))``, all
    in one vectorised pass (:func:`pgmjax.privacy.discrete_noise.exponential_choice_rows`; exact, as
    :func:`exponential_mechanism`). No accounting: :meth:`Accountant.exponential_parallel` records it.

    Args:
        key: a ``jax.random`` key.
        qualities: a ``(parts, candidates)`` array of scores (``-inf`` excludes a candidate of that part).
        sensitivity: sensitivity ``Delta > 0`` of the scores.
        epsilon: the privacy parameter of one draw.

    Returns:
        An int64 array of one index per row.

    Example:
        >>> exponential_mechanism_rows(jax.random.key(0), [[0.0, 100.0], [100.0, -np.inf]], 1.0, 10.0).tolist()
        [1, 0]
    """
    where = "exponential_mechanism_rows"
    check_key(key, where)
    q = check_quality_rows(qualities, where)
    scale = check_positive(epsilon, "epsilon", where) / (2.0 * check_positive(sensitivity, "sensitivity", where))
    gaps = np.where(np.isfinite(q), scale * (q.max(axis=1, keepdims=True) - q), np.inf)
    return dn.exponential_choice_rows(dn.generator(key), gaps)
