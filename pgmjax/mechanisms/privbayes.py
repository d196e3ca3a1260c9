"""PrivBayes and PrivBayes+PGM on the same noisy tables (Zhang et al., TODS 2017; +PGM: McKenna, Sheldon & Miklau, ICML 2019).

PrivBayes (Zhang, Cormode, Procopiuc, Srivastava, Xiao, "PrivBayes: private data release via
Bayesian networks", SIGMOD 2014 / ACM TODS 42(4) 2017) spends ``eps1 = beta eps`` on a Bayesian
network chosen greedily with the exponential mechanism (GreedyBayes, Algorithm 4 of the TODS paper)
and ``eps2 = (1 - beta) eps`` on Laplace-noised tables ``Pr[X_i, Pi_i]``; its own estimator clips
and normalises the noisy tables into conditionals and samples synthetic records from the network
(NoisyConditionals, Algorithm 1). PrivBayes+PGM (McKenna, Sheldon, Miklau, ICML 2019) feeds the very
same noisy tables to the graphical-model estimator (:func:`pgmjax.estimate`).

Neighbouring relation (``bounded``) and what it changes:

* ``bounded=True`` (replace one record, ``N`` public; the paper's and the authors' C++ convention):
  scores are the paper's, on normalised distributions, with the paper's sensitivities
  (``R``: ``3/N``; ``F``: ``1/N``; ``I``: :func:`mutual_information_sensitivity`); a table's L1
  sensitivity is 2; the usefulness rule uses the true ``N``; the original arm samples ``N`` records.
* ``bounded=False`` (add/remove one record, ``N`` private; the default of every pgmjax front-end):
  ``R`` and ``F`` are used on the count scale, ``N R`` and ``N F``, with sensitivities 2 and 1
  (proved in :func:`score_sensitivity`; ``R`` itself has no fixed sensitivity when ``N`` is private);
  the mutual-information score has no data-independent sensitivity under add/remove (one added
  record can raise ``N I`` by about ``log2 N``) and is refused; a table's L1 sensitivity is 1; the
  usefulness rule needs ``N``, so a share ``count_fraction`` of the budget buys a Laplace count
  first (only when ``degree`` is None); the number of records of both arms is estimated from the
  noisy count and the noisy tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import discrete_noise as dn
from ..api import estimate
from ..dataset import Dataset, project_table
from ..domain import Clique, Domain
from ..junction import junction_tree, maximal_cliques
from ..measurement import Measurement, estimate_total
from ..programs import MAX_LIVE_PROGRAMS, release_compiled
from ..privacy import REST, Accountant, exponential_probabilities
from ..privacy import check_key as _check_key
from .options import check_epsilon, engine_options
from .result import MechanismResult

__all__ = [
    "privbayes",
    "ENGINE_BYTES_PER_CELL",
    "greedy_bayes",
    "maximal_parent_sets",
    "usefulness_tau",
    "binary_degree",
    "mutual_information",
    "r_score",
    "f_score",
    "score_quality",
    "score_sensitivity",
    "mutual_information_sensitivity",
    "noisy_conditionals",
    "sample_network",
]

SCORES = ("R", "I", "F")

# Peak memory of a fit per cell of the model's junction tree, float32 (potentials, marginals, gradients,
# line-search trials, messages, sampling): 89 bytes measured for 8M cells with mirror descent and
# synthetic data on XLA:CPU (171 at 2M cells, where the fixed overheads weigh more). privbayes sizes the
# network's model from max_memory_mb with it.
ENGINE_BYTES_PER_CELL = 100

Network = list[tuple[str, tuple[str, ...]]]


class _TooManyCandidates(Exception):
    """Internal: the enumeration of maximal parent sets went past the candidate limit."""


# ---------------------------------------------------------------------------------------------------
# Scores and their sensitivities (TODS paper, Section 4)
# ---------------------------------------------------------------------------------------------------


def _as_joint(joint) -> np.ndarray:
    """Counts as a 2-D ``(child values, parent configurations)`` array."""
    c = np.asarray(joint, np.float64)
    if c.ndim == 0:
        raise ValueError("a score needs a table whose first axis is the child")
    return c.reshape(c.shape[0], -1)


def mutual_information(joint) -> float:
    """Mutual information ``I(X; Pi)`` in bits of the distribution given by counts ``joint``.

    Args:
        joint: counts (or probabilities), first axis the child ``X``, the other axes the parents.

    Returns:
        ``sum p(x, pi) log2(p(x, pi) / (p(x) p(pi)))`` (0 for an empty table).

    Example:
        >>> mutual_information([[5, 0], [0, 5]])
        1.0
    """
    c = _as_joint(joint)
    n = c.sum()
    if n <= 0:
        return 0.0
    cx = c.sum(axis=1, keepdims=True)
    cp = c.sum(axis=0, keepdims=True)
    nz = c > 0
    ratio = (c * n)[nz] / (cx * cp)[nz]
    return float(np.sum(c[nz] / n * np.log2(ratio)))


def r_score(joint) -> float:
    """The ``R`` score ``1/2 ||Pr[X, Pi] - Pr[X] Pr[Pi]||_1`` (TODS paper, Section 4.3).

    Args:
        joint: counts, first axis the child ``X``, the other axes the parents.

    Returns:
        The score in ``[0, 1)`` (0 for an empty table). The authors' C++ omits the 1/2 and doubles
        the sensitivity: the same mechanism.

    Example:
        >>> r_score([[5, 0], [0, 5]])
        0.5
    """
    c = _as_joint(joint)
    n = c.sum()
    if n <= 0:
        return 0.0
    p = c / n
    return float(0.5 * np.abs(p - p.sum(axis=1, keepdims=True) * p.sum(axis=0, keepdims=True)).sum())


def f_score(joint) -> float:
    """The ``F`` score of a binary child (TODS paper, Section 4.2; the authors' C++ ``getF``).

    ``F(X, Pi) = -1/2 min ||Pr[X, Pi] - Pr°||_1`` over the joints ``Pr°`` in which ``X`` is a function
    of ``Pi`` and uniform (the joints of maximal ``I(X; Pi)``). Mapping each parent configuration
    ``pi`` to one value of ``X`` keeps ``c(f(pi), pi)`` in place; at most half the mass may end on each
    value, so ``F = (max_f [min(A_f, C) + min(B_f, C)] - N) / N`` with ``A_f = sum_{f(pi)=0} c(0, pi)``,
    ``B_f = sum_{f(pi)=1} c(1, pi)`` and ``C = floor((N + 1) / 2)``: a knapsack solved by dynamic
    programming over the configurations, keeping for every capped ``A`` the largest capped ``B``.

    Args:
        joint: integer counts, first axis the binary child, the other axes the parents.

    Returns:
        ``F`` in ``[-1/2, 0]`` (0 when ``X`` is a balanced function of ``Pi``).

    Example:
        >>> f_score([[5, 0], [0, 5]]), f_score([[3, 2], [2, 3]])
        (0.0, -0.4)
    """
    c = _as_joint(joint)
    if c.shape[0] != 2:
        raise ValueError(f"f_score: the child must be binary, got {c.shape[0]} values")
    if np.any(c != np.round(c)) or np.any(c < 0):
        raise ValueError("f_score: needs non-negative integer counts")
    c = c.astype(np.int64)
    n = int(c.sum())
    if n == 0:
        return 0.0
    cap = (n + 1) // 2
    best_b = np.full(cap + 1, -1, np.int64)  # best_b[a]: the largest capped B reachable with capped A = a
    best_b[0] = 0
    for c0, c1 in c.T:
        to_one = np.where(best_b >= 0, np.minimum(best_b + c1, cap), -1)
        to_zero = np.full_like(best_b, -1)
        if c0 <= cap:
            to_zero[c0:] = best_b[: cap + 1 - c0]
        to_zero[cap] = best_b[max(cap - c0, 0) :].max()  # every A reaching the cap lands on it
        best_b = np.maximum(to_one, to_zero)
    a = np.arange(cap + 1)
    return float((a + best_b)[best_b >= 0].max() - n) / n


def mutual_information_sensitivity(records: int, binary: bool) -> float:
    """Sensitivity of ``I(X; Pi)`` (bits) under replace-one neighbours (TODS paper, Lemma 4.1).

    ``(1/N) log2 N + ((N-1)/N) log2(N/(N-1))`` when ``X`` or ``Pi`` is binary, else
    ``(2/N) log2((N+1)/2) + ((N-1)/N) log2((N+1)/(N-1))`` (the authors' C++ always uses the
    second). Adult (``N = 48842``): 3.48e-4 and 6.56e-4.

    Args:
        records: ``N >= 2`` (public under replace-one).
        binary: whether the child or the parent configuration has two values.

    Returns:
        The sensitivity.

    Example:
        >>> round(1e4 * mutual_information_sensitivity(48842, True), 2), round(1e4 * mutual_information_sensitivity(48842, False), 2)
        (3.48, 6.56)
    """
    n = float(records)
    if not n >= 2:
        raise ValueError(f"mutual_information_sensitivity: needs at least 2 records, got {records!r}")
    if binary:
        return math.log2(n) / n + (n - 1) / n * math.log2(n / (n - 1))
    return 2 / n * math.log2((n + 1) / 2) + (n - 1) / n * math.log2((n + 1) / (n - 1))


def _sparse_quality(data: Dataset, child: str, parents: tuple[str, ...], score: str, bounded: bool) -> float:
    """:func:`score_quality` of ``(child, parents)`` from the records, in ``O(N log N)`` whatever the table size.

    Only the non-zero cells of the joint enter: for ``R``, the zero cells contribute
    ``sum_zero p(x) p(pi) = 1 - sum_nonzero p(x) p(pi)`` (the product distribution sums to 1), so
    ``R = 1/2 (sum_nz |p(x, pi) - p(x) p(pi)| + 1 - sum_nz p(x) p(pi))``; the mutual information is a sum
    over non-zero cells already. Used for tables with more cells than ``4 N`` (at a large budget the
    candidate tables reach ``max_cells``: dense scoring then costs ``O(cells)`` time and memory each).
    """
    dom = data.domain
    rec = data.records
    n = rec.shape[0]
    x = rec[:, dom.index(child)].astype(np.int64)
    if parents:
        pc = np.ravel_multi_index(tuple(rec[:, dom.index(a)] for a in parents), dom.shape_of(parents))
    else:
        pc = np.zeros(n, np.int64)
    _, p_idx, p_counts = np.unique(pc, return_inverse=True, return_counts=True)
    codes, c = np.unique(x * (p_counts.size) + p_idx.reshape(-1), return_counts=True)
    cx = np.bincount(x, minlength=dom[child]).astype(np.float64)
    xs, ps = codes // p_counts.size, codes % p_counts.size
    c = c.astype(np.float64)
    if score == "R":
        prod = cx[xs] / n * (p_counts[ps] / n)
        r = 0.5 * (np.abs(c / n - prod).sum() + max(1.0 - prod.sum(), 0.0))
        return float(r if bounded else r * n)
    # "I" (bounded only; checked by the caller)
    return float(np.sum(c / n * np.log2(c * n / (cx[xs] * p_counts[ps]))))


def score_quality(joint, score: str, bounded: bool) -> float:
    """The exponential mechanism's quality of one candidate ``(X, Pi)`` from its exact counts.

    * ``bounded=True``: the paper's score on normalised distributions (:func:`r_score`,
      :func:`mutual_information` or :func:`f_score`).
    * ``bounded=False``: ``N * r_score`` or ``N * f_score`` (``N`` = the table's total), whose
      add/remove sensitivities are constants (:func:`score_sensitivity`).

    Example:
        >>> score_quality([[5, 0], [0, 5]], "R", bounded=False)
        5.0
    """
    if score == "R":
        r = r_score(joint)
        return r if bounded else r * float(np.sum(joint))
    if score == "I":
        if not bounded:
            raise ValueError(_MI_UNBOUNDED)
        return mutual_information(joint)
    if score == "F":
        f = f_score(joint)
        return f if bounded else f * float(np.sum(joint))
    raise ValueError(f"unknown score {score!r}; expected one of {SCORES}")


_MI_UNBOUNDED = (
    "score='I' needs bounded=True: the mutual-information sensitivity (TODS Lemma 4.1) assumes "
    "replace-one neighbours with N public; under add/remove one record can change N*I by about "
    "log2(N), which has no data-independent bound. Use score='R' or bounded=True."
)


def score_sensitivity(score: str, records: int | None, *, bounded: bool, binary: bool = False) -> float:
    """Sensitivity of :func:`score_quality` (what the exponential mechanism is calibrated with).

    * ``bounded=True`` (replace one record; ``N`` public): ``R``: ``3/N``; ``F``: ``1/N`` (TODS
      paper); ``I``: :func:`mutual_information_sensitivity`.
    * ``bounded=False`` (add/remove one record): the qualities are ``N R`` and ``N F``.
      ``N R`` has sensitivity 2. Proof: let ``c`` be the counts of the smaller dataset (``N``
      records, ``p = c/N``) and add ``r = (x, pi)``. With ``f(c) = 1/2 ||c - c_X c_Pi^T / N||_1``, the
      argument of the norm changes by exactly ``(N/(N+1)) (e_x - p_X)(e_pi - p_Pi)^T``, of L1 norm
      ``(N/(N+1)) ||e_x - p_X||_1 ||e_pi - p_Pi||_1 <= 4 N / (N+1)``; so ``|Delta f| < 2``.
      ``N F`` has sensitivity 1: ``N F = max_f [min(A_f, C) + min(B_f, C)] - N`` (:func:`f_score`);
      one added record raises one of ``A_f, B_f`` by at most 1 and ``C`` by at most 1, so each capped
      term rises by 0 or 1, the maximum by 0 to 2, and ``N F`` changes by -1 to +1.
    * ``I`` has no data-independent add/remove sensitivity (one record can change ``N I`` by about
      ``log2 N``): refused.

    Args:
        score: ``"R"``, ``"I"`` or ``"F"``.
        records: ``N`` (needed when bounded).
        bounded: the neighbouring relation.
        binary: for ``I``: whether the child or the parent configuration is binary.

    Returns:
        The sensitivity.

    Example:
        >>> score_sensitivity("R", 1000, bounded=True), score_sensitivity("R", None, bounded=False)
        (0.003, 2.0)
    """
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; expected one of {SCORES}")
    if not bounded:
        if score == "I":
            raise ValueError(_MI_UNBOUNDED)
        return 2.0 if score == "R" else 1.0
    if records is None or not float(records) >= 2:
        raise ValueError(f"score_sensitivity: needs the number of records (at least 2), got {records!r}")
    if score == "R":
        return 3.0 / float(records)
    if score == "F":
        return 1.0 / float(records)
    return mutual_information_sensitivity(records, binary)


# ---------------------------------------------------------------------------------------------------
# Network degree: the usefulness rules (Zhang et al., TODS 2017)
# ---------------------------------------------------------------------------------------------------


def usefulness_tau(records: float, epsilon2: float, attributes: int, theta: float) -> float:
    """``tau = N eps2 / (2 d theta)``: the largest allowed table ``n_X prod_{p in Pi} n_p`` (TODS, general domains).

    The average cell count of a table of ``tau`` cells is then ``theta`` times the noise scale
    ``2 d / eps2`` (replace-one Laplace over at most ``d`` tables). The authors' C++ writes
    ``eps N / (4 d theta)`` with ``eps2 = eps / 2``.

    Example:
        >>> usefulness_tau(48842, 0.7, 14, 4.0)
        305.2625
    """
    return float(records) * float(epsilon2) / (2.0 * attributes * float(theta))


def binary_degree(records: float, attributes: int, epsilon2: float, theta: float) -> int:
    """Fixed degree ``k`` of the binary-domain formulation (Zhang et al., TODS 2017; 0 if none is useful).

    The largest ``k < d`` with ``N eps2 / ((d - k) 2^(k+2)) >= theta``: the ratio of the average cell
    mass ``2^-(k+1)`` of a ``(k+1)``-way binary table to the noise scale ``2 (d - k) / (N eps2)``.

    Example:
        >>> binary_degree(48842, 14, 0.7, 4.0)   # k = 8: 34189.4 / (6 * 2^10) = 5.6 >= 4; k = 9: 3.3 < 4
        8
    """
    best = 0
    for k in range(1, attributes):
        if float(records) * float(epsilon2) / ((attributes - k) * 2.0 ** (k + 2)) >= theta:
            best = k
    return best


def maximal_parent_sets(
    sizes: Sequence[int], cap: int, max_size: int | None = None, limit: int | None = None
) -> list[tuple[int, ...]]:
    """Maximal subsets ``P`` of ``range(len(sizes))`` with ``prod(sizes[P]) <= cap`` and ``|P| <= max_size``.

    These are GreedyBayes' candidate parent sets (TODS paper, Section 4.4, general domains): for a
    child ``X`` with ``n_X`` values, ``cap = floor(tau / n_X)``. A set is maximal when adding any
    other attribute breaks a constraint. The recursion on the last attribute ``a``: maximal sets
    containing ``a`` are ``{a} + M(rest, cap // n_a, max_size - 1)``; a maximal set ``Z`` of the rest
    stays maximal without ``a`` only if ``Z + {a}`` is not allowed. Each intermediate family is no
    larger than the answer, so ``limit`` bounds the work.

    Args:
        sizes: the candidate parents' domain sizes (each ``>= 1``), in placement order.
        cap: the largest allowed product (an int; below 1 nothing is allowed, not even the empty set).
        max_size: the largest allowed number of parents (None: no limit).
        limit: raise ``_TooManyCandidates`` past this many sets (None: no limit).

    Returns:
        Index tuples (ascending), in a deterministic order; ``[]`` when ``cap < 1``.

    Example:
        >>> maximal_parent_sets([2, 3, 5], 10)
        [(0, 2), (0, 1)]
        >>> maximal_parent_sets([2, 2, 2], 100, max_size=1)
        [(2,), (1,), (0,)]
    """
    sizes = [int(s) for s in sizes]
    if any(s < 1 for s in sizes):
        raise ValueError(f"maximal_parent_sets: sizes must be positive, got {sizes}")
    k0 = len(sizes) if max_size is None else int(max_size)
    memo: dict[tuple[int, int, int], list[tuple[int, ...]]] = {}

    def rec(j: int, c: int, k: int) -> list[tuple[int, ...]]:
        # maximal allowed subsets of the first j attributes
        if c < 1 or k < 0:
            return []
        if j == 0 or k == 0:
            return [()]
        key = (j, c, k)
        if key in memo:
            return memo[key]
        last = j - 1
        n = sizes[last]
        out = [z + (last,) for z in rec(j - 1, c // n, k - 1)]
        for z in rec(j - 1, c, k):
            # z + {last} allowed means z is not maximal here
            if len(z) + 1 > k or math.prod(sizes[i] for i in z) * n > c:
                out.append(z)
        if limit is not None and len(out) > limit:
            raise _TooManyCandidates
        memo[key] = out
        return out

    return rec(len(sizes), int(cap), k0)


# ---------------------------------------------------------------------------------------------------
# GreedyBayes (TODS paper, Algorithm 4)
# ---------------------------------------------------------------------------------------------------


def _check_binary(domain: Domain, score: str, where: str) -> None:
    if score == "F":
        wide = [a for a in domain.attributes if domain[a] != 2]
        if wide:
            raise ValueError(
                f"{where}: score='F' is defined for binary attributes only (TODS Section 4.2); "
                f"{wide} are not binary: binarise them or use score='R'"
            )


def _model_cells(domain: Domain, network: Network, extra: Clique | None = None) -> int:
    """Cells of the junction tree :func:`pgmjax.estimate` builds for the network's tables (plus ``extra``)."""
    tables = [(x, *p) for x, p in network] + ([tuple(extra)] if extra is not None else [])
    tree = junction_tree(domain, maximal_cliques(domain, tables))
    return int(sum(domain.size(c) for c in tree.cliques))


def _fits(domain: Domain, network: Network, table: Clique, max_model_cells: int) -> bool:
    """Whether the model of the network's tables plus ``table`` has at most ``max_model_cells`` cells.

    First a sound bound that needs no triangulation: the tree's cliques over the placed attributes are
    distinct subsets of them (at most one per attribute), the others are singletons.
    """
    placed = {a for x, p in network for a in (x, *p)} | set(table)
    bound = len(placed) * domain.size(tuple(placed)) + sum(domain[a] for a in domain.attributes if a not in placed)
    return bound <= max_model_cells or _model_cells(domain, network, table) <= max_model_cells


def greedy_bayes(
    data: Dataset,
    accountant: Accountant,
    key,
    epsilon: float,
    *,
    score: str = "R",
    cap: int,
    degree: int | None = None,
    max_candidates: int | None = 10_000,
    keep_scores: bool = False,
    max_model_cells: int | None = None,
) -> tuple[Network, list[dict]]:
    """Choose the Bayesian network with the exponential mechanism (GreedyBayes).

    The first attribute is drawn uniformly (every ``(X, {})`` scores 0, so this is the exponential
    mechanism at no cost). Then, for ``i = 2..d``, the candidates are ``(X, Pi)`` with ``X`` not yet
    placed and ``Pi`` a maximal allowed parent set among the placed attributes
    (:func:`maximal_parent_sets` with ``floor(cap / n_X)`` and at most ``degree`` parents; ``(X, {})``
    when nothing is allowed), and one is drawn with ``P ∝ exp(eps_step q / (2 Delta))``,
    ``eps_step = epsilon / (d - 1)``, through ``accountant.exponential`` (:func:`score_quality`,
    :func:`score_sensitivity` under ``accountant.bounded``). When the candidates of a step exceed
    ``max_candidates``, that step's cap is halved until they fit (data-independent, like the C++'s
    halving of tau).

    Args:
        data: the private dataset.
        accountant: records the ``d - 1`` selections.
        key: a ``jax.random`` key.
        epsilon: the structure budget ``eps1``.
        score: ``"R"``, ``"I"`` or ``"F"`` (binary attributes only).
        cap: the largest allowed table ``n_X prod n_Pi`` (an int: ``floor(tau)``, or a cell cap).
        degree: the largest number of parents (None: only ``cap`` limits).
        max_candidates: the candidate limit of one step (None: no limit).
        keep_scores: also return every candidate, its exact quality and its selection probability
            (NOT private: for analysis and tests only).
        max_model_cells: the largest junction tree (total cells of its cliques, the model
            :func:`pgmjax.estimate` builds for the network's tables) the network may need; None: no
            limit. A candidate whose table would push the tree past it is dropped, and when a step has
            none left its cap is halved as above (data-independent: the tree depends only on the
            released network). Tables of several placed attributes can triangulate into cliques far
            larger than any table (a 14-attribute network of tables under 1e7 cells: 3.3e9 cells).

    Returns:
        ``(network, steps)``: ``network = [(child, parents)]`` in placement order (parents in
        placement order); ``steps`` one dict per selection (candidates, cap, sensitivity, epsilon; with
        ``keep_scores``, ``candidates_list``, ``qualities`` and ``probabilities``).
    """
    if not isinstance(data, Dataset):
        raise TypeError(f"greedy_bayes: data must be a pgmjax.Dataset, got {type(data).__name__}")
    if not isinstance(accountant, Accountant):
        raise TypeError(f"greedy_bayes: accountant must be a pgmjax.privacy.Accountant, got {type(accountant).__name__}")
    if score not in SCORES:
        raise ValueError(f"greedy_bayes: score must be one of {SCORES}, got {score!r}")
    if score == "I" and not accountant.bounded:
        raise ValueError(f"greedy_bayes: {_MI_UNBOUNDED}")
    _check_binary(data.domain, score, "greedy_bayes")
    _check_key(key, "greedy_bayes")
    limit = math.inf if max_candidates is None else max_candidates
    domain = data.domain
    attrs = domain.attributes
    d = len(attrs)
    bounded = accountant.bounded
    n_public = len(data) if bounded else None
    k_first, k_steps = jax.random.split(key)
    first = attrs[int(dn.generator(k_first).integers(d))]  # the same for a key whatever jax_enable_x64 says
    network: Network = [(first, ())]
    placed = [first]
    steps: list[dict] = []
    if d == 1:
        return network, steps
    eps_step = float(epsilon) / (d - 1)
    step_keys = jax.random.split(k_steps, d - 1)
    cache: dict[tuple[str, tuple[str, ...]], float] = {}
    for i in range(1, d):
        remaining = [a for a in attrs if a not in placed]
        sizes = [domain[a] for a in placed]
        step_cap = int(cap)
        while True:
            try:
                cands = []
                for x in remaining:
                    left = None if max_candidates is None else max_candidates - len(cands)
                    sets = maximal_parent_sets(sizes, step_cap // domain[x], degree, left)
                    cands.extend((x, tuple(placed[j] for j in s)) for s in (sets or [()]))
                    if len(cands) > limit:
                        raise _TooManyCandidates
            except _TooManyCandidates:
                if step_cap == 0:  # only (X, {}) left: at most d candidates, accept them
                    cands = [(x, ()) for x in remaining]
                else:
                    step_cap //= 2
                    continue
            if max_model_cells is not None:
                cands = [(x, p) for x, p in cands if _fits(domain, network, (x, *p), max_model_cells)]
                if not cands:
                    if step_cap == 0:
                        raise ValueError(
                            f"greedy_bayes: even without parents the model exceeds max_model_cells={max_model_cells} "
                            f"cells; raise the memory limit (max_model_mb of privbayes)"
                        )
                    step_cap //= 2
                    continue
            break
        q = np.empty(len(cands))
        for j, (x, parents) in enumerate(cands):
            ck = (x, tuple(sorted(parents)))
            if ck not in cache:
                if score != "F" and domain.size((x, *parents)) > 4 * len(data):
                    cache[ck] = _sparse_quality(data, x, parents, score, bounded)
                else:
                    cache[ck] = score_quality(data.marginal((x, *parents)), score, bounded)
            q[j] = cache[ck]
        binary = all(domain[x] == 2 or domain.size(p) == 2 for x, p in cands if p)
        delta = score_sensitivity(score, n_public, bounded=bounded, binary=binary)
        j = accountant.exponential(step_keys[i - 1], q, delta, epsilon=eps_step, target=f"GreedyBayes step {i + 1}")
        x, parents = cands[j]
        network.append((x, parents))
        placed.append(x)
        step = {"step": i + 1, "candidates": len(cands), "cap": step_cap, "sensitivity": delta, "epsilon": eps_step}
        if keep_scores:
            step["candidates_list"] = cands
            step["qualities"] = q.tolist()
            step["probabilities"] = exponential_probabilities(q, delta, eps_step).tolist()
        steps.append(step)
    return network, steps


# ---------------------------------------------------------------------------------------------------
# The original estimator: noisy conditionals and ancestral sampling (Zhang et al., TODS 2017)
# ---------------------------------------------------------------------------------------------------


def noisy_conditionals(domain: Domain, network: Network, measurements: Sequence[Measurement]) -> list[np.ndarray]:
    """Conditionals ``Pr*[X_i | Pi_i]`` from noisy tables (TODS paper, Algorithm 1, NoisyConditionals).

    Each noisy table is clipped at 0 and normalised (uniform if nothing is left); the joint of
    ``(Pi_i, X_i)`` is the marginal of the first measured table that contains it (the tables of the
    first attributes are inside a later one); the conditional divides by the ``Pi_i`` marginal and is
    uniform where that marginal is 0.

    Args:
        domain: the domain.
        network: ``[(child, parents)]``.
        measurements: identity measurements of cliques covering every ``{X_i} ∪ Pi_i``.

    Returns:
        One array per network node, axes ``(*parents, child)``, each row summing to 1.
    """
    tables = []
    for m in measurements:
        if m.query is not None:
            raise ValueError(f"noisy_conditionals: measurement on {m.clique} is not a plain marginal")
        t = np.maximum(m.y.reshape(domain.shape_of(m.clique)), 0.0)
        s = t.sum()
        tables.append((m.clique, t / s if s > 0 else np.full(t.shape, 1.0 / t.size)))
    out = []
    for child, parents in network:
        target = (*parents, child)
        host = next(((c, t) for c, t in tables if set(target) <= set(c)), None)
        if host is None:
            raise ValueError(f"noisy_conditionals: no measured table contains {target}")
        joint = project_table(host[1], host[0], target)
        mass = joint.sum(axis=-1, keepdims=True)
        safe = np.where(mass > 0, mass, 1.0)
        out.append(np.where(mass > 0, joint / safe, 1.0 / domain[child]))
    return out


def sample_network(domain: Domain, network: Network, conditionals: Sequence[np.ndarray], records: int, key) -> Dataset:
    """Ancestral sampling of ``records`` tuples from a Bayesian network, in network order.

    Each attribute is drawn by inversion: its parents' configuration selects a row of the
    conditional's cumulative table, and one uniform per record (``jax.random``) is located in that
    row; all rows are searched at once by offsetting row ``j`` by ``j``.

    Args:
        domain: the domain (every attribute must be in the network).
        network: ``[(child, parents)]``, parents placed before their child.
        conditionals: one array per node, axes ``(*parents, child)``, rows summing to 1.
        records: how many tuples.
        key: a ``jax.random`` key.

    Returns:
        A :class:`~pgmjax.Dataset` over ``domain``.
    """
    _check_key(key, "sample_network")
    if sorted(c for c, _ in network) != sorted(domain.attributes):
        raise ValueError("sample_network: the network must place every attribute of the domain exactly once")
    n = int(records)
    cols = np.zeros((n, len(domain)), np.int64)
    done: set[str] = set()
    # float64 uniforms from the key's own generator: the same records whatever jax_enable_x64 says.
    uniforms = dn.generator(key).random((len(network), n))
    for (child, parents), table, u in zip(network, conditionals, uniforms):
        missing = [p for p in parents if p not in done]
        if missing:
            raise ValueError(f"sample_network: parents {missing} of {child!r} are placed after it")
        nx = domain[child]
        table = np.asarray(table, np.float64)
        if table.shape != (*domain.shape_of(parents), nx):
            raise ValueError(f"sample_network: conditional of {child!r} has shape {table.shape}, expected {(*domain.shape_of(parents), nx)}")
        cdf = np.cumsum(table.reshape(-1, nx), axis=1)
        cdf /= cdf[:, -1:]
        cdf[:, -1] = 1.0  # exactly 1: a uniform below 1 always lands in its own row
        rows = (
            np.ravel_multi_index(tuple(cols[:, domain.index(p)] for p in parents), domain.shape_of(parents))
            if parents
            else np.zeros(n, np.int64)
        )
        flat = np.searchsorted((cdf + np.arange(cdf.shape[0])[:, None]).ravel(), rows + u, side="right")
        cols[:, domain.index(child)] = np.clip(flat - rows * nx, 0, nx - 1)
        done.add(child)
    return Dataset(cols, domain)


# ---------------------------------------------------------------------------------------------------
# The front-end
# ---------------------------------------------------------------------------------------------------


def _fraction(value, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: {name} must be a number, got {value!r}")
    x = float(value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{where}: {name} must be in (0, 1), got {value!r}")
    return x


def _positive(value, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: {name} must be a number, got {value!r}")
    x = float(value)
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"{where}: {name} must be positive and finite, got {value!r}")
    return x


def _integer(value, name: str, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{where}: {name} must be at least {minimum}, got {value}")
    return int(value)


def privbayes(
    data: Dataset,
    epsilon: float,
    *,
    key,
    beta: float = 0.3,
    theta: float = 4.0,
    score: str = "R",
    degree: int | None = None,
    bounded: bool = False,
    count_fraction: float = 0.01,
    max_candidates: int = 10_000,
    max_cells: int = 10**7,
    max_memory_mb: float = 2048.0,
    pgm_iters: int = 1000,
    pgm_options: Mapping[str, Any] | None = None,
    keep_scores: bool = False,
) -> MechanismResult:
    """PrivBayes and PrivBayes+PGM on the same noisy tables (pure ``epsilon``-DP; Zhang et al., ACM TODS 2017).

    1. (``bounded=False``, ``degree=None`` and ``d > 1`` only) a Laplace count of the records with
       ``eps0 = count_fraction * epsilon``: the usefulness rule needs ``N``, which is private under
       add/remove neighbours.
    2. GreedyBayes (:func:`greedy_bayes`, TODS Algorithm 4) with ``eps1 = beta (epsilon - eps0)``:
       ``d - 1`` exponential-mechanism draws of ``eps1 / (d - 1)`` each. Candidate parent sets:
       ``degree=None``: the maximal sets with ``n_X prod n_Pi <= tau = N eps2 / (2 d theta)``
       (:func:`usefulness_tau`, general domains); ``degree=k``: every ``min(k, |V|)``-subset of the
       placed attributes (fixed-k). Either way no table exceeds ``max_cells``.
    3. The ``m`` maximal cliques among ``{X_i} ∪ Pi_i`` are measured with Laplace noise of scale
       ``b = Delta1 m / eps2`` (``Delta1`` = 2 replace-one, 1 add/remove) through
       ``accountant.measure_many(..., epsilon=REST)``: the ledger sums exactly to ``epsilon``.
    4. Original arm (TODS Algorithm 1): clip, normalise, conditionals (:func:`noisy_conditionals`),
       ancestral sampling of ``N`` records (:func:`sample_network`; under add/remove, the total
       estimated from the noisy count and tables by inverse-variance weighting, also given to the
       engine).
       +PGM arm: the same tables as measurements (``stddev = sqrt(2) b``) fitted by
       :func:`pgmjax.estimate` (McKenna, Sheldon, Miklau, ICML 2019).

    Defaults: ``beta = 0.3`` and ``theta = 4`` are the values the PrivBayes paper recommends from its
    experiments (not re-verified against the paper); the authors' C++
    hard-codes ``beta = 0.5`` and the ICML 2019 run passed ``theta = 1``. ``score="R"`` is what the
    ICML 2019 run used (``func = true``).

    Args:
        data: the private :class:`~pgmjax.Dataset` (at least 2 records).
        epsilon: the total budget (pure DP).
        key: a ``jax.random`` key; the run is a function of it.
        beta: share of the budget for the structure, in (0, 1).
        theta: usefulness ``theta > 0`` (ignored when ``degree`` is given).
        score: ``"R"`` (default), ``"I"`` (mutual information; needs ``bounded=True``) or ``"F"``
            (binary attributes only).
        degree: None for the tau rule, or a fixed number ``k >= 0`` of parents.
        bounded: False for add/remove-one neighbours (default), True for replace-one (``N`` public,
            the paper's convention).
        count_fraction: share of the budget for the record count (step 1), in (0, 1).
        max_candidates: the most candidates one structure step may score; beyond it the step's cap
            is halved (data-independent).
        max_cells: the largest table ``n_X prod n_Pi`` any candidate may have.
        max_memory_mb: the memory the model may take (MB). The engine's peak is about
            :data:`ENGINE_BYTES_PER_CELL` bytes per cell of the junction tree (float32; twice that in
            float64), so the network is kept to a tree of at most ``max_memory_mb * 2**20 /
            ENGINE_BYTES_PER_CELL`` cells (:func:`greedy_bayes` ``max_model_cells``; 21M cells at the
            default 2048 MB), and no table exceeds that either. At a large ``epsilon`` the usefulness
            rule allows tables of ``max_cells`` whose network can triangulate into cliques of billions of
            cells; this is the bound that stops it (raise it on a machine with more memory).
        pgm_iters: iterations of the engine.
        pgm_options: further keyword arguments of :func:`pgmjax.estimate` (``method``, ``loss``,
            ``dtype``, ``tol``, ...; not ``iters``/``total``).
        keep_scores: put every candidate's exact quality in ``info["steps"]``. These are NOT
            private: for analysis and tests only, strip them before releasing ``info``.

    Returns:
        A :class:`~pgmjax.mechanisms.result.MechanismResult`: ``model`` the +PGM arm, ``synthetic``
        drawn from it, ``original`` the original arm's synthetic :class:`~pgmjax.Dataset`,
        ``measurements`` the noisy tables, ``accountant`` the ledger, and ``info`` with ``network``
        (``[(child, parents)]`` in placement order), ``steps`` (per selection: candidates, cap,
        sensitivity, epsilon), ``epsilon_count``, ``epsilon_structure``, ``epsilon_step``,
        ``epsilon_tables``, ``tau``, ``cap``, ``cliques`` (measured), ``laplace_scale``,
        ``noisy_count``, ``total``, ``conditionals`` (the original arm's noisy CPTs, axes
        ``(*parents, child)``), ``quality`` (the EM's quality: the score, or ``N*score`` under
        add/remove).

    Example:
        >>> data = Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), {"a": 3, "b": 4, "c": 2})
        >>> res = privbayes(data, 1.0, key=jax.random.key(0), pgm_iters=200)
        >>> res.info["network"], res.accountant.spent
        ([('b', ()), ('a', ('b',)), ('c', ('b',))], 1.0)
    """
    where = "privbayes"
    if not isinstance(data, Dataset):
        raise TypeError(f"{where}: data must be a pgmjax.Dataset, got {type(data).__name__}")
    eps = check_epsilon(_positive(epsilon, "epsilon", where), where)
    _check_key(key, where)
    beta = _fraction(beta, "beta", where)
    theta = _positive(theta, "theta", where)
    count_fraction = _fraction(count_fraction, "count_fraction", where)
    if not isinstance(bounded, (bool, np.bool_)):
        raise TypeError(f"{where}: bounded must be True or False, got {bounded!r}")
    bounded = bool(bounded)
    if score not in SCORES:
        raise ValueError(f"{where}: score must be one of {SCORES}, got {score!r}")
    if score == "I" and not bounded:
        raise ValueError(f"{where}: {_MI_UNBOUNDED}")
    _check_binary(data.domain, score, where)
    if degree is not None:
        degree = _integer(degree, "degree", where, 0)
    max_candidates = _integer(max_candidates, "max_candidates", where, 1)
    max_cells = _integer(max_cells, "max_cells", where, 1)
    max_memory_mb = _positive(max_memory_mb, "max_memory_mb", where)
    pgm_iters = _integer(pgm_iters, "pgm_iters", where, 0)
    if not isinstance(keep_scores, (bool, np.bool_)):
        raise TypeError(f"{where}: keep_scores must be True or False, got {keep_scores!r}")
    pgm_options = engine_options(pgm_options, ("iters", "total", "domain", "measurements"), where, argument="pgm_options",
                                 hint=" (use pgm_iters; the total is fixed by the mechanism)")
    n = len(data)
    if n < 2:
        raise ValueError(f"{where}: needs at least 2 records, got {n}")
    domain = data.domain
    d = len(domain)
    too_big = [a for a in domain.attributes if domain[a] > max_cells]
    if too_big:
        raise ValueError(f"{where}: attributes {too_big} have more than max_cells={max_cells} values")
    wide = jnp.dtype(pgm_options.get("dtype") or jnp.float32).itemsize > 4
    max_model_cells = int(max_memory_mb * 2**20 / (ENGINE_BYTES_PER_CELL * (2 if wide else 1)))
    if sum(domain.shape) > max_model_cells:  # even the network without edges would not fit
        raise ValueError(
            f"{where}: max_memory_mb={max_memory_mb:g} allows a model of {max_model_cells} cells "
            f"({ENGINE_BYTES_PER_CELL} bytes per cell{' x 2 in float64' if wide else ''}), fewer than the "
            f"{sum(domain.shape)} values of the attributes; raise max_memory_mb"
        )

    acc = Accountant(epsilon=eps, bounded=bounded)
    k_count, k_struct, k_tables, k_orig, k_pgm = jax.random.split(key, 5)

    # 1. The record count, when the usefulness rule needs it and N is private.
    eps_count, noisy_count = 0.0, None
    if bounded:
        records = float(n)
    elif degree is None and d > 1:
        eps_count = count_fraction * eps
        noisy_count = float(acc.laplace(k_count, np.array([float(n)]), 1.0, epsilon=eps_count, target="record count")[0])
        records = max(noisy_count, 1.0)
    else:
        records = None
    eps_struct = beta * (eps - eps_count) if d > 1 else 0.0
    eps_tables = eps - eps_count - eps_struct  # what the tables will get (spent as REST)

    # 2. The network.
    if degree is None and records is not None:
        tau = usefulness_tau(records, eps_tables, d, theta)
        cap = int(math.floor(min(tau, max_cells, max_model_cells)))  # min first: tau may be inf at eps ~ 1e308
    else:
        tau = None
        cap = min(max_cells, max_model_cells)
    network, steps = greedy_bayes(
        data, acc, k_struct, eps_struct, score=score, cap=cap, degree=degree, max_candidates=max_candidates,
        keep_scores=bool(keep_scores), max_model_cells=max_model_cells,
    )

    # 3. The noisy tables: only the maximal cliques, each with eps2 / m.
    cliques: list[Clique] = list(maximal_cliques(domain, [(x, *p) for x, p in network]))
    measurements = acc.measure_many(k_tables, data, cliques, mechanism="laplace", epsilon=REST)
    m = len(cliques)
    scale = acc.ledger[-1].scale

    # Records of both arms: public N, or the inverse-variance mix of the noisy count and table sums.
    if bounded:
        total = float(n)
    else:
        total, var = estimate_total(measurements)
        if noisy_count is not None:
            var_count = 2.0 / eps_count**2
            if var_count == 0.0 or var == 0.0:  # a huge epsilon: the variances underflow; take the exact one
                total = noisy_count if var_count <= var else total
            else:
                total = (total / var + noisy_count / var_count) / (1.0 / var + 1.0 / var_count)
        total = max(float(total), 1.0)
    size = max(1, int(round(total)))

    # 4a. Original arm.
    conditionals = noisy_conditionals(domain, network, measurements)
    original = sample_network(domain, network, conditionals, size, k_orig)

    # 4b. +PGM arm on the same measurements.
    release_compiled(above=MAX_LIVE_PROGRAMS)  # a sweep over many structures: free the dead ones, keep a bounded number
    model = estimate(domain, measurements, iters=pgm_iters, total=total, **pgm_options)
    synthetic = model.synthetic_data(size, k_pgm)

    info = {
        "network": network,
        "order": [x for x, _ in network],
        "steps": steps,
        "score": score,
        "quality": (score if bounded else f"N*{score}"),
        "bounded": bounded,
        "beta": beta,
        "theta": theta,
        "degree": degree,
        "epsilon": eps,
        "epsilon_count": eps_count,
        "epsilon_structure": eps_struct,
        "epsilon_step": eps_struct / (d - 1) if d > 1 else 0.0,
        "epsilon_tables": eps_tables,
        "tau": tau,
        "cap": cap,
        "max_model_cells": max_model_cells,
        "model_cells": _model_cells(domain, network),
        "cliques": cliques,
        "tables": m,
        "laplace_scale": scale,
        "noisy_count": noisy_count,
        "total": total,
        "conditionals": conditionals,
        "pgm_iters": pgm_iters,
    }
    return MechanismResult(
        mechanism="privbayes",
        model=model,
        synthetic=synthetic,
        measurements=measurements,
        accountant=acc,
        original=original,
        info=info,
    )
